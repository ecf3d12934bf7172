//! The C ABI of corun: see `include/corun.h` (generated from this crate by cbindgen) and
//! `capi/README.md`.
//!
//! Every function checks its pointers and lengths and returns a [`corun_status`]; none
//! allocates, and none can panic (the no-panic probe links these functions too). The
//! `unsafe` that turns C pointers into slices lives in `src/ffi.rs` alone.
#![no_std]
#![deny(missing_docs)]
#![allow(non_camel_case_types)]

#[cfg(feature = "std")]
extern crate std;

mod api;
mod ffi;
mod types;

pub use api::*;
pub use types::*;

/// Firmware builds without std: a panic cannot happen (the probe proves no panic path is
/// linked), but a `no_std` library still has to name a handler.
#[cfg(all(feature = "panic-handler", not(feature = "std"), not(test)))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
