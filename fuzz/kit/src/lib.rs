//! The test kit (`tests/kit/`) as a crate, for the fuzz workspace. The integration tests
//! include the same files as a module (`mod kit;`), so that they build from the published
//! `.crate`, which carries `tests/` but no path dependency.
#[path = "../../../tests/kit/mod.rs"]
mod kit;
pub use kit::*;
