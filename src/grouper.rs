//! [`Grouper`]: the grouping options, and every output form as a method.

use core::num::NonZeroUsize;

use crate::error::check_lengths;
use crate::kernel::{Scan, count_breaks};
use crate::{Error, Index, Progress, Runs, Span};

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Grouper {
    max_len: Option<NonZeroUsize>,
}

impl Grouper {
    /// Maximal runs, no cap.
    pub const fn new() -> Self {
        Grouper { max_len: None }
    }

    /// Caps run length (say, a DMA or RDMA message limit): a longer run comes out as
    /// consecutive pieces of `max_len` positions, the last one shorter. Every output form
    /// and the resume rule of [`Progress`] work on pieces as they do on whole runs.
    #[must_use]
    pub const fn max_len(self, max_len: NonZeroUsize) -> Self {
        Grouper { max_len: Some(max_len) }
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
            None => Ok(count_breaks(src, dst) + 1),
            // Runs are never empty; dividing by `NonZeroUsize` has no panic path.
            Some(max) => Ok(Runs::new(src, dst, None).map(|run| (run.len - 1) / max + 1).sum()),
        }
    }

    /// A lazy iterator over the spans. Errors: [`Error::LengthMismatch`].
    pub fn runs<'a, T: Index>(&self, src: &'a [T], dst: &'a [T]) -> Result<Runs<'a, T>, Error> {
        check_lengths(src, dst)?;
        Ok(Runs::new(src, dst, self.max_len))
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
            return Ok(fill(src, dst, out));
        }
        let mut runs = Runs::new(src, dst, self.max_len);
        let mut spans = 0;
        for (slot, span) in out.iter_mut().zip(&mut runs) {
            *slot = span;
            spans += 1;
        }
        Ok(Progress { consumed: runs.consumed(), spans })
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
        let mut spans = 0;
        for span in runs.by_ref() {
            // A full vector hands the span back: it starts where the next call resumes.
            if let Err(span) = out.push(span) {
                return Ok(Progress { consumed: span.start, spans });
            }
            spans += 1;
        }
        Ok(Progress { consumed: runs.consumed(), spans })
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
        out.extend(Runs::new(src, dst, self.max_len));
        Ok(out)
    }
}

/// [`Grouper::group_into`] without a cap: the spans ending in a block are written in one
/// loop of a known trip count (the block's break count), with no per-span room check.
#[inline]
fn fill<T: Index>(src: &[T], dst: &[T], out: &mut [Span]) -> Progress {
    let (mut start, mut written) = (0, 0);
    for (base, mut bits) in Scan::new(src, dst) {
        let breaks = bits.count_ones() as usize;
        let room = out.len() - written;
        let slots = out.get_mut(written..written + breaks.min(room)).unwrap_or_default();
        for slot in slots.iter_mut() {
            let end = base + bits.trailing_zeros() as usize + 1;
            *slot = Span { start, len: end - start };
            start = end;
            bits &= bits - 1;
        }
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
