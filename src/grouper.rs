//! [`Grouper`]: the grouping options, and every output form as a method.

use core::num::NonZeroUsize;

use crate::error::Error;
use crate::error::check_lengths;
use crate::index::Index;
use crate::kernel::{Scan, count_breaks};
use crate::lanes::BLOCK;
use crate::runs::Runs;
#[cfg(feature = "heapless")]
use crate::sink::Tail;
use crate::sink::{Sink, Slots};
use crate::span::{Progress, Span};
use crate::step::Steps;

/// Grouping options, applied by its methods. The crate-level functions use the defaults.
///
/// ```
/// use core::num::NonZeroUsize;
/// use corun::{Grouper, Span};
///
/// // One RDMA message may carry at most 4 pages.
/// let grouper = Grouper::new().max_len(NonZeroUsize::new(4).unwrap());
/// let src: Vec<u32> = (100..110).collect();
/// let dst: Vec<u32> = (0..10).collect();
/// let mut out = [Span::default(); 8];
/// let progress = grouper.group_into(&src, &dst, &mut out)?;
/// assert_eq!(&out[..progress.spans], &[
///     Span { start: 0, len: 4 },
///     Span { start: 4, len: 4 },
///     Span { start: 8, len: 2 },
/// ]);
/// # Ok::<(), corun::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grouper {
    max_len: Option<NonZeroUsize>,
    steps: Steps,
}

/// Which way a run may go: see [`Grouper::direction`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Direction {
    /// Both sides step by `+step` (what every serving stack's helper finds).
    #[default]
    Ascending,
    /// Both by `+step`, or both by `-step`, for the whole run.
    Either,
}

impl Default for Grouper {
    /// [`Grouper::new`]: maximal runs of +1 steps, no cap.
    fn default() -> Self {
        Grouper::new()
    }
}

impl Grouper {
    /// Maximal runs of +1 steps, no cap.
    pub const fn new() -> Self {
        Grouper { max_len: None, steps: Steps::UNIT }
    }

    /// Sets the index step of each side (default `(1, 1)`): position `i + 1` continues
    /// the run of position `i` when `src[i + 1] == src[i] + src_step` and `dst[i + 1] ==
    /// dst[i] + dst_step`, in exact arithmetic (no wrap), for strided layouts where an
    /// index counts tokens or sub-pages. The SIMD kernel handles every step; steps over
    /// half the index type's range (never seen in practice) take a slower exact path for
    /// blocks with breaks. A step of 0 groups repeats of one index.
    ///
    /// ```
    /// use corun::{Grouper, Span};
    ///
    /// // Token indices in pages of 16 tokens: one index per page, stepping by 16.
    /// let src = [0u32, 16, 32, 96, 112];
    /// let dst = [160u32, 176, 192, 208, 224];
    /// let spans: Vec<Span> = Grouper::new().steps(16, 16).runs(&src, &dst)?.collect();
    /// assert_eq!(spans, [Span { start: 0, len: 3 }, Span { start: 3, len: 2 }]);
    /// # Ok::<(), corun::Error>(())
    /// ```
    #[must_use]
    pub const fn steps(self, src_step: u64, dst_step: u64) -> Self {
        Grouper { steps: Steps { src: src_step, dst: dst_step, ..self.steps }, ..self }
    }

    /// The steps `(src_step, dst_step)` set by [`steps`](Self::steps), `(1, 1)` by default.
    pub const fn get_steps(&self) -> (u64, u64) {
        (self.steps.src, self.steps.dst)
    }

    /// The steps, as the kernel and the writers take them.
    pub(crate) const fn step_pair(&self) -> Steps {
        self.steps
    }

    /// Caps run length (say, a DMA or RDMA message limit): a longer run comes out as
    /// consecutive pieces of `max_len` positions, the last one shorter. Every output form
    /// and the resume rule of [`Progress`] work on pieces as they do on whole runs.
    #[must_use]
    pub const fn max_len(self, max_len: NonZeroUsize) -> Self {
        Grouper { max_len: Some(max_len), ..self }
    }

    /// Which way runs may go (default [`Direction::Ascending`]). With
    /// [`Direction::Either`] a run is a maximal stretch where both sides step by `+step`,
    /// or both by `-step`, in exact arithmetic, found greedily left to right: the first
    /// pair of a run sets its direction (ascending when both hold, as with a step of 0),
    /// and a pair that turns is a break. Freed blocks that an allocator hands out in
    /// reverse (vLLM's free queue) come out as one run each instead of a run per page.
    /// Every output form and [`desc`](crate::desc) honour it; a descending run's
    /// descriptors start at its lowest page. With a cap ([`max_len`](Self::max_len)) a
    /// piece is a run of its own: the next one's direction is set afresh by its first
    /// pair, so resuming at any span boundary is exact (that capped form steps a pair at a
    /// time; uncapped, the SIMD kernel finds both directions).
    ///
    /// ```
    /// use corun::{Direction, Grouper, Span};
    ///
    /// let src = [99u32, 98, 97, 10, 11];
    /// let dst = [9u32, 8, 7, 20, 21];
    /// let spans: Vec<Span> = Grouper::new().direction(Direction::Either).runs(&src, &dst)?.collect();
    /// assert_eq!(spans, [Span { start: 0, len: 3 }, Span { start: 3, len: 2 }]);
    /// assert_eq!(corun::count_runs(&src, &dst)?, 4); // ascending only
    /// # Ok::<(), corun::Error>(())
    /// ```
    #[must_use]
    pub const fn direction(self, direction: Direction) -> Self {
        let either = matches!(direction, Direction::Either);
        Grouper { steps: Steps { either, ..self.steps }, ..self }
    }

    /// The direction set by [`direction`](Self::direction).
    pub const fn get_direction(&self) -> Direction {
        if self.steps.either { Direction::Either } else { Direction::Ascending }
    }

    /// The cap set by [`max_len`](Self::max_len), if any.
    pub const fn get_max_len(&self) -> Option<NonZeroUsize> {
        self.max_len
    }

    /// Number of spans the other methods would produce: size a buffer exactly with it.
    ///
    /// Without a cap this only counts breaks (a population count per block), writing
    /// nothing. Errors: [`Error::LengthMismatch`].
    pub fn count_runs<T: Index>(&self, src: &[T], dst: &[T]) -> Result<usize, Error> {
        let len = check_lengths(src, dst)?;
        match self.max_len {
            _ if len == 0 => Ok(0),
            None => Ok(count_breaks(src, dst, self.steps) + 1),
            // Capped in either direction, a cut starts a new run: count the pieces.
            Some(_) if self.steps.either => {
                Ok(Runs::new(src, dst, self.steps, self.max_len).count())
            }
            // Runs are never empty; dividing by `NonZeroUsize` has no panic path.
            Some(max) => {
                Ok(Runs::new(src, dst, self.steps, None).map(|run| (run.len - 1) / max + 1).sum())
            }
        }
    }

    /// A lazy iterator over the spans. Errors: [`Error::LengthMismatch`].
    pub fn runs<'a, T: Index>(&self, src: &'a [T], dst: &'a [T]) -> Result<Runs<'a, T>, Error> {
        check_lengths(src, dst)?;
        Ok(Runs::new(src, dst, self.steps, self.max_len))
    }

    /// Writes as many spans as fit into `out`, in order, from `out[0]`.
    ///
    /// When `out` fills up, the call stops at a span boundary and says how far it got:
    /// continue with `&src[progress.consumed..]`, `&dst[progress.consumed..]` (see
    /// [`Progress`]). Nothing past `out[progress.spans - 1]` is written. An empty `out`
    /// with non-empty input makes no progress. Errors: [`Error::LengthMismatch`], and
    /// then `out` is untouched.
    pub fn group_into<T: Index>(
        &self,
        src: &[T],
        dst: &[T],
        out: &mut [Span],
    ) -> Result<Progress, Error> {
        check_lengths(src, dst)?;
        if self.max_len.is_none() {
            return Ok(fill(src, dst, self.steps, out));
        }
        let mut runs = Runs::new(src, dst, self.steps, self.max_len);
        Ok(drain(&mut runs, &mut Slots { out, len: 0 }))
    }

    /// Appends as many spans as fit into `out`, with the resume rule of
    /// [`group_into`](Self::group_into). `progress.spans` counts the spans appended.
    #[cfg(feature = "heapless")]
    pub fn group_into_heapless<T: Index, const N: usize>(
        &self,
        src: &[T],
        dst: &[T],
        out: &mut heapless::Vec<Span, N>,
    ) -> Result<Progress, Error> {
        let mut runs = self.runs(src, dst)?;
        Ok(drain(&mut runs, &mut Tail { out, added: 0 }))
    }

    /// All spans in a new vector of exactly the right capacity.
    ///
    /// Errors: [`Error::LengthMismatch`]; [`Error::Alloc`] when the memory cannot be
    /// reserved (no abort, no panic).
    #[cfg(feature = "alloc")]
    pub fn group<T: Index>(&self, src: &[T], dst: &[T]) -> Result<alloc::vec::Vec<Span>, Error> {
        let spans = self.count_runs(src, dst)?;
        let mut out = alloc::vec::Vec::new();
        out.try_reserve_exact(spans).map_err(|_| Error::Alloc { spans })?;
        if self.max_len.is_some() {
            // Reserved exactly above: the vector always has room.
            drain(&mut Runs::new(src, dst, self.steps, self.max_len), &mut out);
            return Ok(out);
        }
        // Without a cap, the block writer of `group_into` (a whole block's spans at once)
        // fills the exact-size vector: several times faster than the iterator on dense
        // breaks.
        out.resize(spans, Span::default());
        let written = fill(src, dst, self.steps, &mut out).spans;
        out.truncate(written);
        Ok(out)
    }
}

/// Spans from `runs` into `out` while it has room, asking before each one, so a full
/// buffer stops at a run boundary and `runs.consumed()` is exactly where to resume: the
/// resume rule of every output form but the uncapped slice (which [`fill`] writes a block
/// at a time).
fn drain<T: Index>(runs: &mut Runs<'_, T>, out: &mut impl Sink<Span>) -> Progress {
    let before = out.count();
    while out.room(1) {
        let Some(span) = runs.next() else { break };
        out.put(span);
    }
    Progress { consumed: runs.consumed(), spans: out.count() - before }
}

/// [`Grouper::group_into`] without a cap.
///
/// While `out` has room for a whole block's spans (at most [`BLOCK`]), a block's spans
/// go into a fixed-size window of it: a loop of a known trip count (the block's break
/// count) with no room or bounds check, and a block of singletons is a fixed-count loop
/// that vectorises. Near the end of `out` the block is cut to the room left.
#[inline]
fn fill<T: Index>(src: &[T], dst: &[T], steps: Steps, out: &mut [Span]) -> Progress {
    let (mut start, mut written) = (0, 0);
    for (base, bits) in Scan::new(src, dst, steps) {
        if let Some(slots) = out.get_mut(written..).and_then(|o| o.first_chunk_mut::<BLOCK>()) {
            if bits == u64::MAX {
                // Every pair breaks: one span to `base + 1`, then 63 singletons, written
                // by a loop of a fixed count (it vectorises).
                let [first, rest @ ..] = slots;
                *first = Span { start, len: base + 1 - start };
                for (k, slot) in rest.iter_mut().enumerate() {
                    *slot = Span { start: base + 1 + k, len: 1 };
                }
                (start, written) = (base + BLOCK, written + BLOCK);
                continue;
            }
            let breaks = bits.count_ones() as usize;
            start = spans_to(slots.get_mut(..breaks).unwrap_or_default(), base, start, bits);
            written += breaks;
            continue;
        }
        let breaks = bits.count_ones() as usize;
        let room = out.len() - written;
        let slots = out.get_mut(written..written + breaks.min(room)).unwrap_or_default();
        start = spans_to(slots, base, start, bits);
        written += slots.len();
        if breaks > room {
            return Progress { consumed: start, spans: written };
        }
    }
    if let Some(slot) = out.get_mut(written).filter(|_| start < src.len()) {
        *slot = Span { start, len: src.len() - start };
        (start, written) = (src.len(), written + 1);
    }
    Progress { consumed: start, spans: written }
}

/// Fills `slots` with the spans that end at the first set bits of `bits` (bit `k`: a
/// break after position `base + k`), the first one starting at `start`; returns where
/// the next span starts.
#[inline(always)]
fn spans_to(slots: &mut [Span], base: usize, mut start: usize, mut bits: u64) -> usize {
    for slot in slots {
        let end = base + bits.trailing_zeros() as usize + 1;
        *slot = Span { start, len: end - start };
        (start, bits) = (end, bits & (bits - 1));
    }
    start
}
