//! The order wing: what corun does with the *order* of pages rather than their runs.
//! Order-free grouping ([`sort_by_destination`]: a set of pairs sorted so that its runs
//! are the fewest) and placement ([`place`](place::place): the second side's pages chosen
//! to pair with the first side's runs), and the sorts they share.
//!
//! | file | what |
//! |---|---|
//! | `place.rs` | [`place`](place::place), its rule, cost and scratch |
//! | `ranges.rs` | placement's runs and stretches: duplicates, extents, runs longest first |
//! | `fit.rs` | placement's two trees over the extents: best fit and most room in `O(log x)` |
//! | `unordered.rs` | [`sort_by_destination`] |
//! | `radix.rs` | the one radix sort and its one threshold |
//! | `sort.rs` | the introsort (with its heap-sort guard) every short or unpackable sort uses |
//!
//! The wing stands on the grouping ([`Grouper`](crate::grouper::Grouper), its runs and
//! counts), the index types and the errors; it never uses the kernel directly, nor
//! `desc`, and nothing below it uses it.

mod fit;
pub mod place;
mod radix;
mod ranges;
mod sort;
mod unordered;

pub use unordered::sort_by_destination;
