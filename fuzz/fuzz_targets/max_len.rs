//! Differential fuzz target `max_len`: see `corun_testkit::fuzz::MaxLen`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::MaxLen| input.run());
