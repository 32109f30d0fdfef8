//! Writes the byte-pair dictionaries the token counter reads, in the flat form of
//! `rust/tokens/flat.rs` (see there for why): bpe-openai's `o200k_base` and
//! `cl100k_base`, exactly as that crate builds them, into `OUT_DIR`.

use std::path::PathBuf;

#[path = "rust/tokens/flat.rs"]
mod flat;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (name, tokenizer) in [
        ("o200k_base", bpe_openai::o200k_base()),
        ("cl100k_base", bpe_openai::cl100k_base()),
    ] {
        let bytes = flat::to_bytes(&tokenizer.bpe).expect("the dictionary has a flat form");
        std::fs::write(out.join(format!("{name}.flat")), bytes).expect("OUT_DIR is writable");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=rust/tokens/flat.rs");
}
