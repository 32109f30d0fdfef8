//! libFuzzer target: the input is a commit's MessagePack (after one byte that picks the
//! render options); see `ctxrules_core::fuzzing::commit`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ctxrules_core::fuzzing::commit(data);
});
