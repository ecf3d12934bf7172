//! Differential fuzz target `place`: see `corun_testkit::fuzz::Place`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Place| input.run());
