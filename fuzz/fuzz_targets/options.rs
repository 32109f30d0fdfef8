//! libFuzzer target: the input is render options JSON; see
//! `ctxrules_core::fuzzing::options`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ctxrules_core::fuzzing::options(data);
});
