//! Differential fuzz target `steps`: see `corun_testkit::fuzz::Steps`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Steps| input.run());
