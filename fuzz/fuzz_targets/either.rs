//! Differential fuzz target `either`: see `corun_testkit::fuzz::Either`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Either| input.run());
