//! Differential fuzz target `unordered`: see `corun_testkit::fuzz::Unordered`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Unordered| input.run());
