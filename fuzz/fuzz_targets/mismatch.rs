//! Differential fuzz target `mismatch`: see `corun_testkit::fuzz::Mismatch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Mismatch| input.run());
