//! Concurrent contiguous runs in paired index arrays, with SIMD lanes, no heap and no
//! unsafe code.
//!
//! Page `src[i]` is copied to page `dst[i]`. Wherever both sides advance by exactly +1
//! the pages can move as one transfer (one RDMA work request, one descriptor per layer),
//! so corun splits the positions `0..len` into maximal *runs*:
//!
//! ```
//! use corun::Span;
//!
//! let src = [10u32, 11, 12, 40, 41, 7];
//! let dst = [ 3u32,  4,  5,  6,  7, 8];
//! let runs: Vec<Span> = corun::runs(&src, &dst)?.collect();
//! assert_eq!(runs, [
//!     Span { start: 0, len: 3 }, // src 10..13 -> dst 3..6
//!     Span { start: 3, len: 2 }, // src 40..42 -> dst 6..8
//!     Span { start: 5, len: 1 }, // src 7      -> dst 8
//! ]);
//! # Ok::<(), corun::Error>(())
//! ```
//!
//! # Contract
//!
//! - Inside a span, `src[i + 1] == src[i] + 1` and `dst[i + 1] == dst[i] + 1` in exact
//!   integer arithmetic: `T::MAX` followed by `T::MIN` is a break (unlike numpy's `diff`).
//! - Every position belongs to exactly one span; spans are in order and never empty.
//! - Both sides empty: no spans. Any length mismatch, one empty side included, is
//!   [`Error::LengthMismatch`] naming both lengths, and nothing is written.
//! - No function panics, on any input. Errors are values.
//!
//! # Output forms
//!
//! | form | function |
//! |---|---|
//! | count only (size a buffer exactly) | [`count_runs`] |
//! | caller's `&mut [Span]`, resumable | [`group_into`] |
//! | lazy iterator | [`runs`] |
//! | `heapless::Vec<Span, N>`, resumable (feature `heapless`) | `group_into_heapless` |
//! | `Vec<Span>` (feature `alloc`, on by default) | `group` |
//! | the fewest runs for the *set* of pairs (sort first) | [`sort_by_destination`], then any form |
//!
//! [`Grouper`] carries the options (a cap on run length, strided steps) and has every
//! form as a method. [`desc`] turns runs into transfer descriptors and RDMA gather lists
//! for many layer buffers at once.
//! [`scalar`] is the one-position-at-a-time reference that every fast path is tested
//! against.
//!
//! # Design
//!
//! The layers, from the bottom; each uses only those below it:
//!
//! 1. **Lanes** (`lanes`): a small vector trait over `wide`'s types (add, xor, compare,
//!    top-bit mask), and the one place that picks a vector per index type and SIMD level.
//! 2. **Index types** (`index`): the sealed [`Index`] trait for `u32`, `i32`, `u64`,
//!    `i64`, which names each type's lane vector (so it sits on `lanes`), with the one
//!    exact step test (`follows_by`) that the kernel and the reference both rest on.
//! 3. **Kernel** (`kernel`, `step`): the break scan, written once over lanes: a 64-bit
//!    mask of breaks per block of 64 position pairs ([below](#the-kernel), in
//!    pseudocode).
//! 4. **Runs** ([`Grouper`], [`Runs`]): spans from the masks into every output form: a
//!    count, a caller's slice, a `heapless::Vec`, a `Vec`, a lazy iterator; each stops at
//!    a run boundary when full and says where to resume.
//!
//! 5. **Descriptors** ([`desc`]): a [`desc::Plan`] holds the runs of one request; a
//!    [`desc::Layout`] lists the layer buffers; writers turn the two into descriptors or
//!    RDMA gather lists through one output-sink abstraction, with every address computed
//!    by checked arithmetic.
//! 6. **Bindings** (other crates in the repository): the C ABI (`capi/`, where C pointers
//!    become slices after every check) and the Python module (`python/`, where numpy
//!    arrays become slices only when aligned and contiguous). The only `unsafe` code is
//!    there.
//!
//! On the runs, beside the descriptors, stands the **order wing** (`order`): order-free
//! grouping ([`sort_by_destination`]) and placement ([`place`] (its rule and cost: [`placement`])), with the sorts
//! they share (one radix sort, one introsort). It uses the runs, the index types and the
//! errors, never the kernel directly nor `desc`.
//!
//! Beside them all, [`scalar`] is the oracle: one position at a time, written from the
//! definition, sharing nothing with the fast paths but the index types, so that a bug in
//! one cannot hide in the other. Every fast path, index type and SIMD backend is tested
//! against it.
//!
//! # The kernel
//!
//! The break scan in `src/kernel.rs` (the names in parentheses are its private functions).
//!
//! A *pair* `p` is positions `(p, p + 1)`. It is a *break* unless both `src` and `dst` step
//! by exactly their step there (+1 unless the caller chose another). For a block of 64
//! pairs starting at `base` the kernel loads `a = x[base..base + 64]` and `b = x[base +
//! 1..base + 65]` for both arrays and sets bit `k` of the block's mask when pair `base +
//! k` is a break. Every output form is built on these masks: the
//! number of runs is the masks' population count plus one, and the runs end at their set
//! bits (a `trailing_zeros` loop whose trip count is the block's break count).
//!
//! ## The algorithm
//!
//! ```text
//! for each block of 64 pairs (the last, partial one copied into a padded block):
//!     # clean test: one load per vector, as reading the arrays costs
//!     if src[base] <= MAX - 64*step and dst[base] <= MAX - 64*step   # no wrap possible
//!        and src[base+64] == src[base] + 64*step and likewise dst:   # the ends agree
//!         any = 0
//!         for each vector v of the block:                            # 8 or 16 lanes
//!             any |= (src[v] ^ (src[base] + iota*step)) | (dst[v] ^ (dst[base] + iota*step))
//!         if any == 0: skip the block                                # one run, no bits
//!     # exact bits
//!     good = 0; tops = 0
//!     for each vector v:
//!         stepped = (b_src[v] - a_src[v] == step) & (b_dst[v] - a_dst[v] == step)  # wrapping
//!         good   |= movemask(stepped) << v*WIDTH
//!         tops   |= signed ? b_src[v] | b_dst[v] : a_src[v] | a_dst[v]
//!     bits = !good
//!     if movemask(tops) != 0:                          # a top bit set: a wrap is possible
//!         bits |= the pairs whose top bit flips the wrapping way      # wrap_bits, cold
//!     yield (base, bits)
//! ```
//!
//! Why the top bit: with a step of at most half the range, an unsigned value's top bit
//! can only fall (1 to 0) by wrapping past `MAX`, a signed value's only rise (0 to 1), so
//! exact arithmetic needs one wrapping subtraction and one bit test per pair, and real page
//! indices, whose top bits are clear, skip the wrap pass altogether. Steps over half the
//! range (defined, never used) take one exact test per pair (`pair_bits`).
//!
//! ## Either direction
//!
//! With [`Direction::Either`] a pair is *up* (both sides step by `+step`), *down* (both
//! by `-step`: the up test on the swapped pair, so the same exact arithmetic and wrap rule
//! serve) or bad. A run keeps the direction of its first pair,
//! so a pair is a break when it is bad, or when it turns (up after down, or down after
//! up) and the pair before it was not itself a break:
//!
//! ```text
//! up_bad = block_bits(block)               # as above, the clean test first
//! up     = !up_bad
//! down   = up_bad == 0 ? 0 : !exact_bits(swapped block) & !up   # step 0: up wins
//! turns  = (up & (down << 1 | last == down)) | (down & (up << 1 | last == up))
//! bits   = !(up | down) | (each turn whose previous pair is not a break)  # in order
//! last   = the direction of the block's last pair, or none if it is a break
//! ```
//!
//! Only turns are resolved one at a time, and an ascending-only scan never runs this.
//!
//! # SIMD
//!
//! The kernel uses the [`wide`] crate, which picks its instructions when the crate is
//! compiled: SSE2 on a default x86_64 build, AVX2 with `-C target-feature=+avx2`,
//! AVX-512 with `-C target-cpu=native` on such a machine, NEON on aarch64.

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// On docs.rs (`--cfg docsrs`, nightly), items behind a feature carry its badge.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod desc;
mod error;
mod grouper;
mod index;
mod kernel;
mod lanes;
mod order;
mod runs;
pub mod scalar;
mod sink;
mod span;
mod step;

pub use error::Error;
pub use grouper::{Direction, Grouper};
#[cfg(feature = "heapless")]
pub use heapless;
pub use index::Index;
pub use order::placement;
pub use order::{Placement, place, place_scratch_len, sort_by_destination};
pub use runs::Runs;
pub use span::{Progress, Span};

/// Counts the runs of `src`/`dst` without writing them.
///
/// Size a buffer exactly before [`group_into`]. Errors: [`Error::LengthMismatch`].
///
/// ```
/// assert_eq!(corun::count_runs(&[1u64, 2, 3, 9], &[5u64, 6, 7, 8]), Ok(2));
/// assert_eq!(corun::count_runs::<u32>(&[], &[]), Ok(0));
/// ```
pub fn count_runs<T: Index>(src: &[T], dst: &[T]) -> Result<usize, Error> {
    Grouper::new().count_runs(src, dst)
}

/// Writes the runs of `src`/`dst` into `out`, stopping at a run boundary when it is full.
///
/// Resume with `&src[progress.consumed..]` and `&dst[progress.consumed..]`; the spans of
/// the next call are relative to that position. Errors: [`Error::LengthMismatch`], and
/// then nothing is written.
///
/// ```
/// use corun::{Progress, Span};
///
/// let src: [i32; 5] = [0, 1, 5, 6, 9];
/// let dst: [i32; 5] = [4, 5, 6, 7, 8];
/// let mut out = [Span::default(); 2];
/// let p = corun::group_into(&src, &dst, &mut out)?;
/// assert_eq!(p, Progress { consumed: 4, spans: 2 });
/// assert_eq!(out, [Span { start: 0, len: 2 }, Span { start: 2, len: 2 }]);
///
/// // The buffer was full: continue from position 4.
/// let p = corun::group_into(&src[4..], &dst[4..], &mut out)?;
/// assert_eq!(p, Progress { consumed: 1, spans: 1 });
/// assert_eq!(out[0], Span { start: 0, len: 1 });
/// # Ok::<(), corun::Error>(())
/// ```
pub fn group_into<T: Index>(src: &[T], dst: &[T], out: &mut [Span]) -> Result<Progress, Error> {
    Grouper::new().group_into(src, dst, out)
}

/// The runs of `src`/`dst` as a lazy iterator: SIMD inside, no allocation.
///
/// Errors: [`Error::LengthMismatch`].
///
/// ```
/// let src = [7u32, 8, 9, 3];
/// let dst = [0u32, 1, 2, 3];
/// let lens: Vec<usize> = corun::runs(&src, &dst)?.map(|s| s.len).collect();
/// assert_eq!(lens, [3, 1]);
/// # Ok::<(), corun::Error>(())
/// ```
pub fn runs<'a, T: Index>(src: &'a [T], dst: &'a [T]) -> Result<Runs<'a, T>, Error> {
    Grouper::new().runs(src, dst)
}

/// Appends the runs of `src`/`dst` to `out` until it is full, stopping at a run boundary.
///
/// `progress.spans` counts the spans appended; resume as with [`group_into`].
/// Errors: [`Error::LengthMismatch`], and then `out` is untouched.
///
/// ```
/// use corun::{Progress, Span};
///
/// let src = [1u32, 2, 3, 7, 8, 20];
/// let mut out = heapless::Vec::<Span, 2>::new();
/// let p = corun::group_into_heapless(&src, &src, &mut out)?;
/// assert_eq!(p, Progress { consumed: 5, spans: 2 });
/// assert_eq!(out, [Span { start: 0, len: 3 }, Span { start: 3, len: 2 }]);
/// # Ok::<(), corun::Error>(())
/// ```
#[cfg(feature = "heapless")]
pub fn group_into_heapless<T: Index, const N: usize>(
    src: &[T],
    dst: &[T],
    out: &mut heapless::Vec<Span, N>,
) -> Result<Progress, Error> {
    Grouper::new().group_into_heapless(src, dst, out)
}

/// All runs of `src`/`dst` in a new vector of exactly the right capacity.
///
/// Errors: [`Error::LengthMismatch`], [`Error::Alloc`].
///
/// ```
/// use corun::Span;
/// let spans = corun::group(&[1u32, 2, 4], &[1u32, 2, 3])?;
/// assert_eq!(spans, [Span { start: 0, len: 2 }, Span { start: 2, len: 1 }]);
/// # Ok::<(), corun::Error>(())
/// ```
#[cfg(feature = "alloc")]
pub fn group<T: Index>(src: &[T], dst: &[T]) -> Result<alloc::vec::Vec<Span>, Error> {
    Grouper::new().group(src, dst)
}

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
