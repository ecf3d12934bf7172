//! Shared by corun's tests and fuzz targets: input builders (`build`: arrays made of runs;
//! `alphabet`: values drawn freely at the type's limits; `desc`: layouts), the differential
//! checks against `corun::scalar` (`check`, `desc`) and against order-free grouping's
//! reference (`unordered`), and the fuzz inputs that tie the two together (`fuzz`).
//!
//! Every test crate includes it as a module (`mod kit;`) and the fuzz workspace through
//! the `corun-testkit` crate, so the tests need nothing outside this repository's `tests/`
//! and build from the published `.crate` alone.
//!
//! The checks of the `heapless` forms are compiled where those forms are: in the tests
//! when corun's feature `heapless` is on (`cargo test` without it runs the rest), and in
//! the fuzz targets (`--cfg fuzzing`, set by cargo-fuzz: the fuzz kit crate always enables
//! the feature on corun but has no feature of its own to test).
// unexpected_cfgs: the fuzz kit crate (fuzz/kit) declares neither `fuzzing` nor a
// feature `heapless` (corun's own Cargo.toml declares both).
#![allow(dead_code, unused_imports, unexpected_cfgs)]

pub use arbitrary;

pub mod alphabet;
pub mod build;
pub mod check;
pub mod desc;
pub mod fuzz;
pub mod place;
pub mod unordered;

pub use build::*;
pub use check::*;
