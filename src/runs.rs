//! The lazy iterator over runs, fed by the SIMD break scan.

use core::iter::FusedIterator;
use core::num::NonZeroUsize;

use crate::index::{Index, follows_by};
use crate::kernel::Scan;
use crate::span::Span;
use crate::step::Steps;

/// Spans of `src`/`dst` in order, computed lazily with the SIMD kernel (no allocation).
///
/// Made by [`runs`](crate::runs) or [`Grouper::runs`](crate::Grouper::runs). With a
/// [`max_len`](crate::Grouper::max_len) cap, longer runs come out as consecutive pieces.
#[derive(Clone, Debug)]
pub struct Runs<'a, T: Index> {
    scan: Scan<'a, T>,
    /// Block of the pending break bits.
    base: usize,
    /// Break bits of the current block not yet turned into spans.
    bits: u64,
    /// Start of the next span: every position before it has been yielded.
    start: usize,
    /// End of the run that `start` is in, once it is known (`start == end`: not yet).
    end: usize,
    len: usize,
    max_len: usize,
    /// Either direction with a cap: each piece is a run of its own, found a pair at a
    /// time (the kernel's masks assume runs continue past a cut).
    capped_either: Option<(&'a [T], &'a [T], Steps)>,
}

impl<'a, T: Index> Runs<'a, T> {
    /// `src` and `dst` must be of equal length (checked by the callers); the options are
    /// those of [`Grouper`](crate::Grouper).
    pub(crate) fn new(
        src: &'a [T],
        dst: &'a [T],
        steps: Steps,
        max_len: Option<NonZeroUsize>,
    ) -> Self {
        let capped = steps.either && max_len.is_some();
        Runs {
            capped_either: capped.then_some((src, dst, steps)),
            scan: Scan::new(src, dst, steps),
            base: 0,
            bits: 0,
            start: 0,
            end: 0,
            len: src.len(),
            max_len: max_len.map_or(usize::MAX, NonZeroUsize::get),
        }
    }

    /// Input positions covered by the spans yielded so far.
    ///
    /// Stop after any span, and `&src[consumed..]`, `&dst[consumed..]` hold exactly the
    /// spans not yet yielded (see [`Progress`](crate::Progress)).
    #[inline]
    pub fn consumed(&self) -> usize {
        self.start
    }

    /// The next piece of an either-direction grouping with a cap: from `start`, while each
    /// pair steps the way the first one did, for at most `max_len` positions.
    #[cold]
    fn next_capped_either(&mut self, src: &[T], dst: &[T], steps: Steps) -> Option<Span> {
        let start = self.start;
        if start >= self.len {
            return None;
        }
        let way = |i: usize, down: bool| {
            let pair = |x: &[T], step| match (x.get(i), x.get(i + 1)) {
                (Some(&a), Some(&b)) if down => follows_by(b, a, step),
                (Some(&a), Some(&b)) => follows_by(a, b, step),
                _ => false,
            };
            pair(src, steps.src) && pair(dst, steps.dst)
        };
        let down = !way(start, false) && way(start, true);
        let mut end = start + 1;
        while end < self.len && end - start < self.max_len && way(end - 1, down) {
            end += 1;
        }
        self.start = end;
        Some(Span { start, len: end - start })
    }

    /// The next break after the current run, or `len` when there is none.
    #[inline]
    fn next_break(&mut self) -> usize {
        if self.bits == 0 {
            match self.scan.next() {
                Some((base, bits)) => (self.base, self.bits) = (base, bits),
                None => return self.len,
            }
        }
        let pair = self.base + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        pair + 1
    }
}

impl<T: Index> Iterator for Runs<'_, T> {
    type Item = Span;

    #[inline]
    fn next(&mut self) -> Option<Span> {
        if let Some((src, dst, steps)) = self.capped_either {
            return self.next_capped_either(src, dst, steps);
        }
        if self.start == self.end {
            if self.start >= self.len {
                return None;
            }
            self.end = self.next_break();
        }
        let len = (self.end - self.start).min(self.max_len);
        let span = Span { start: self.start, len };
        self.start += len;
        Some(span)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len - self.start;
        (usize::from(left > 0), Some(left))
    }
}

impl<T: Index> FusedIterator for Runs<'_, T> {}
