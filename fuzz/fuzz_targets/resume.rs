//! Differential fuzz target `resume`: see `corun_testkit::fuzz::Resume`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Resume| input.run());
