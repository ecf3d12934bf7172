//! Differential fuzz target `raw`: see `corun_testkit::fuzz::Raw`.
#![no_main]

libfuzzer_sys::fuzz_target!(|input: corun_testkit::fuzz::Raw| input.run());
