//! What the grouping functions write: spans and progress.

/// One run: positions `start..start + len` of the slices passed in.
///
/// Inside a span, `src[i + 1] == src[i] + 1` and `dst[i + 1] == dst[i] + 1` for every
/// position `i` but the last. Spans are never empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(C)] // the C ABI writes spans in place
pub struct Span {
    /// First position of the run.
    pub start: usize,
    /// Number of positions in the run (at least 1).
    pub len: usize,
}

impl Span {
    /// One past the last position: `start + len` (saturating, for spans built by hand).
    #[inline]
    pub const fn end(&self) -> usize {
        self.start.saturating_add(self.len)
    }

    /// The positions of the span, as a range to index `src` or `dst` with.
    #[inline]
    pub const fn range(&self) -> core::ops::Range<usize> {
        self.start..self.end()
    }
}

/// How far a call that writes into a bounded buffer got.
///
/// The call stops at a span boundary when the buffer is full. Position `consumed` is
/// where the next span starts, so calling again with `&src[consumed..]` and
/// `&dst[consumed..]` continues exactly where this call stopped (the spans of the new
/// call are relative to `consumed`). The input is done when `consumed` equals its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Progress {
    /// Input positions covered by the spans written: where the next call starts.
    pub consumed: usize,
    /// Spans written by this call.
    pub spans: usize,
}
