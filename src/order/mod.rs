//! The order wing: what corun does with the *order* of pages rather than their runs.
//! Order-free grouping ([`sort_by_destination`]: a set of pairs sorted so that its runs
//! are the fewest) and placement ([`place`](placement::place): the second side's pages chosen
//! to pair with the first side's runs), and the sorts they share.
//!
//! | file | what |
//! |---|---|
//! | `placement.rs` | [`place`](placement::place), its rule, cost and scratch |
//! | `ranges.rs` | placement's runs and stretches: duplicates, extents, runs longest first |
//! | `bits.rs` | placement's window as a bitmap of its ids (dense windows): duplicates, extents, the rest |
//! | `fit.rs` | placement's two trees over the extents: best fit and most room in `O(log x)` |
//! | `unordered.rs` | [`sort_by_destination`] |
//! | `radix.rs` | the one radix sort and its one threshold |
//! | `sort.rs` | the introsort (with its heap-sort guard) every short or unpackable sort uses |
//!
//! The wing stands on the grouping ([`Grouper`](crate::Grouper), its runs and
//! counts), the index types and the errors; it never uses the kernel directly, nor
//! `desc`, and nothing below it uses it.

mod bits;
mod fit;
pub mod placement;
mod radix;
mod ranges;
mod sort;
mod unordered;

pub use placement::{Placement, place, place_scratch_len};
pub use unordered::sort_by_destination;
