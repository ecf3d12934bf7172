//! Differential fuzz target `descriptors`: see `corun_testkit::fuzz::Descriptors`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Descriptors| input.run());
