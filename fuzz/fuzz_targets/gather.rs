//! Differential fuzz target `gather`: see `corun_testkit::fuzz::Gather`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Gather| input.run());
