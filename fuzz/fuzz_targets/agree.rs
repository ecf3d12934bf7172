//! Differential fuzz target `agree`: see `corun_testkit::fuzz::Agree`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Agree| input.run());
