//! [`Plan`]: the runs of one input, found once, and the descriptor writers over them.

use super::addr::{Fault, end_fits};
use super::layout::Geo;
use super::{Error, Layout, Order};
use crate::grouper::Grouper;
use crate::index::Index;
use crate::index::follows_by;
#[cfg(feature = "heapless")]
use crate::sink::Tail;
use crate::sink::{Sink, Slots};
use crate::span::Span;
use crate::step::Steps;

/// One transfer: `len` bytes from `src_addr` to `dst_addr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Descriptor {
    /// Source address.
    pub src_addr: u64,
    /// Destination address.
    pub dst_addr: u64,
    /// Bytes to move (at least one page).
    pub len: u64,
}

/// Where a writer stopped, so that the next call continues exactly there.
///
/// `Cursor::default()` is the beginning. A cursor is only meaningful for the plan and
/// layout (same order, cap, `max_sge`) it came from; any other cursor still never
/// panics, it just resumes somewhere (or nowhere) in that plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(C)]
pub struct Cursor {
    /// Layer of the next output.
    pub layer: usize,
    /// Index into [`Plan::spans`] of the next output's run.
    pub span: usize,
    /// Pages of that run already written for that layer.
    pub offset: usize,
}

/// How far a descriptor writer got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Written {
    /// Descriptors written by this call, from the start of the buffer.
    pub descriptors: usize,
    /// Where to continue when the buffer filled up; `None` when every descriptor is out.
    pub next: Option<Cursor>,
}

/// The runs of one `src`/`dst` pair, found once, ready to become descriptors for any
/// number of layers.
///
/// Built by [`Plan::new`], which runs the SIMD grouping into a span buffer the caller
/// owns (no allocation). If that buffer fills up, the plan covers the first
/// [`consumed`](Self::consumed) positions only; a second plan over the rest continues.
///
/// ```
/// use corun::Grouper;
/// use corun::desc::{Cursor, Descriptor, Layer, Layout, Plan};
///
/// let src = [10u32, 11, 12, 40];
/// let dst = [0u32, 1, 2, 3];
/// // K and V of two layers: 4 KiB pages.
/// let layers = [0x10_0000, 0x20_0000, 0x30_0000, 0x40_0000]
///     .map(|base| Layer::new(base, base + 0x800_0000, 4096));
///
/// let mut spans = [corun::Span::default(); 16];
/// let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans)?;
/// let mut out = [Descriptor::default(); 16];
/// let w = plan.descriptors_into(&Layout::new(&layers), Cursor::default(), &mut out)?;
/// assert_eq!((w.descriptors, w.next), (8, None)); // 2 runs x 4 layer buffers
/// assert_eq!(out[0], Descriptor { src_addr: 0x10_0000 + 10 * 4096, dst_addr: 0x810_0000, len: 3 * 4096 });
/// # Ok::<(), corun::desc::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Plan<'a, T: Index> {
    pub(crate) src: &'a [T],
    pub(crate) dst: &'a [T],
    pub(crate) spans: &'a [Span],
    pub(crate) steps: Steps,
    pub(crate) consumed: usize,
    pub(crate) bounds: Bounds,
}

/// The extremes of the page indices the runs touch, found once per plan: a layer whose
/// every address fits (checked once, with these) gets descriptors without per-descriptor
/// checks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Smallest index on either side.
    lo: i128,
    /// Largest index on the source side.
    src_hi: i128,
    /// Largest index on the destination side.
    dst_hi: i128,
    /// Pages in the longest run.
    longest: usize,
}

impl Bounds {
    fn of<T: Index>(src: &[T], dst: &[T], spans: &[Span]) -> Self {
        let mut b = Bounds { lo: 0, src_hi: 0, dst_hi: 0, longest: 0 };
        for span in spans {
            let ends = |x: &[T]| {
                let first = x.get(span.start).map_or(0, |v| v.widen());
                let last = x.get(span.end().saturating_sub(1)).map_or(0, |v| v.widen());
                (first.min(last), first.max(last))
            };
            let ((s_lo, s_hi), (d_lo, d_hi)) = (ends(src), ends(dst));
            b.lo = b.lo.min(s_lo).min(d_lo);
            (b.src_hi, b.dst_hi) = (b.src_hi.max(s_hi), b.dst_hi.max(d_hi));
            b.longest = b.longest.max(span.len);
        }
        b
    }

    /// Every address of layer `g` fits: no index is negative, and the last page of the
    /// highest index on each side ends by `2^64`.
    pub(crate) fn fits(&self, g: &Geo) -> bool {
        let l = &g.layer;
        let fits = |base: u64, hi: i128, stride: u64| {
            // hi < 2^64, stride < 2^64: below 2^128 with the base and one page.
            end_fits(u128::from(base) + hi as u128 * u128::from(stride), u128::from(l.item_len))
        };
        self.lo >= 0
            && fits(l.src_base, self.src_hi, l.src_stride)
            && fits(l.dst_base, self.dst_hi, l.dst_stride)
    }

    /// Every descriptor of layer `g` is one whole run, and its addresses fit: no run is
    /// cut, so its length fits too (the cap is at most `u64::MAX`).
    fn whole_and_safe(&self, g: &Geo) -> bool {
        self.longest <= g.per_descriptor() && self.fits(g)
    }
}

impl<'a, T: Index> Plan<'a, T> {
    /// Groups `src`/`dst` with `grouper` (its steps and run cap apply) into `spans`.
    ///
    /// Errors: [`Error::LengthMismatch`].
    pub fn new(
        grouper: &Grouper,
        src: &'a [T],
        dst: &'a [T],
        spans: &'a mut [Span],
    ) -> Result<Self, Error> {
        let progress = grouper.group_into(src, dst, spans).map_err(Error::grouping)?;
        let spans = &spans[..progress.spans.min(spans.len())];
        Ok(Self::over(grouper, src, dst, spans, progress.consumed))
    }

    /// A plan over the spans that grouping `src`/`dst` with `grouper` produced, covering
    /// the first `consumed` positions.
    pub(crate) fn over(
        grouper: &Grouper,
        src: &'a [T],
        dst: &'a [T],
        spans: &'a [Span],
        consumed: usize,
    ) -> Self {
        let bounds = Bounds::of(src, dst, spans);
        Plan { src, dst, spans, steps: grouper.step_pair(), consumed, bounds }
    }

    /// The runs, in order.
    pub fn spans(&self) -> &'a [Span] {
        self.spans
    }

    /// Input positions the runs cover: all of them unless the span buffer was too small.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Number of descriptors [`descriptors_into`](Self::descriptors_into) writes in all,
    /// to size a buffer exactly (saturating at `usize::MAX`). Errors: the layout checks.
    pub fn count_descriptors(&self, layout: &Layout<'_>) -> Result<usize, Error> {
        layout.check()?;
        let mut total = 0usize;
        for layer in 0..layout.layers().len() {
            let Some(geo) = layout.geo(layer, self.steps) else { break };
            let per = geo.per_descriptor();
            let count = if self.bounds.longest <= per {
                self.spans.len() // one descriptor per run: no division per run
            } else {
                self.spans.iter().fold(0usize, |n, s| n.saturating_add(s.len.div_ceil(per)))
            };
            total = total.saturating_add(count);
        }
        Ok(total)
    }

    /// Writes descriptors for every layer of `layout` into `out`, from `cursor` on.
    ///
    /// A descriptor moves one run (or one piece of it under the byte cap or the grouper's
    /// run cap) of one layer: `src_addr = src_base + src[start] * src_stride`, the same on
    /// the destination, `len = pages * item_len`. On sides whose pages are not packed
    /// (see [`Layer`](super::Layer)) each page is its own descriptor.
    ///
    /// When `out` fills up, `written.next` is where to continue (with a new or emptied
    /// buffer); nothing past `out[written.descriptors - 1]` is written. Errors: the
    /// layout checks (nothing written); [`Error::NegativeIndex`] and [`Error::Overflow`],
    /// with the descriptors before them written and valid.
    pub fn descriptors_into(
        &self,
        layout: &Layout<'_>,
        cursor: Cursor,
        out: &mut [Descriptor],
    ) -> Result<Written, Error> {
        self.emit(layout, &cursor, &mut Slots { out, len: 0 })
    }

    /// [`descriptors_into`](Self::descriptors_into) into three columns, one per field
    /// (the shape of batch APIs such as Mooncake's `batch_transfer_sync(src_addrs,
    /// dst_addrs, lengths)`). The capacity is the shortest column; `written.descriptors`
    /// entries of each are written, nothing past them.
    ///
    /// ```
    /// use corun::Grouper;
    /// use corun::desc::{Cursor, Layer, Layout, Plan};
    ///
    /// let src = [5u32, 6, 9];
    /// let layers = [Layer::new(0, 1 << 20, 64)];
    /// let mut spans = [corun::Span::default(); 4];
    /// let plan = Plan::new(&Grouper::new(), &src, &src, &mut spans)?;
    /// let (mut s, mut d, mut n) = ([0u64; 4], [0u64; 4], [0u64; 4]);
    /// let w = plan.descriptors_into_columns(&Layout::new(&layers), Cursor::default(), &mut s, &mut d, &mut n)?;
    /// assert_eq!(w.descriptors, 2);
    /// assert_eq!((&s[..2], &d[..2], &n[..2]), (&[320, 576][..], &[(1 << 20) + 320, (1 << 20) + 576][..], &[128, 64][..]));
    /// # Ok::<(), corun::desc::Error>(())
    /// ```
    pub fn descriptors_into_columns(
        &self,
        layout: &Layout<'_>,
        cursor: Cursor,
        src_addrs: &mut [u64],
        dst_addrs: &mut [u64],
        lens: &mut [u64],
    ) -> Result<Written, Error> {
        self.emit(layout, &cursor, &mut Columns { src_addrs, dst_addrs, lens, len: 0 })
    }

    /// Appends descriptors to `out` until it is full; the contract of
    /// [`descriptors_into`](Self::descriptors_into), counting what this call appended.
    #[cfg(feature = "heapless")]
    pub fn descriptors_into_heapless<const N: usize>(
        &self,
        layout: &Layout<'_>,
        cursor: Cursor,
        out: &mut heapless::Vec<Descriptor, N>,
    ) -> Result<Written, Error> {
        self.emit(layout, &cursor, &mut Tail { out, added: 0 })
    }

    /// Every descriptor in a new vector of exactly the right size.
    ///
    /// Errors: as [`descriptors_into`](Self::descriptors_into) (then nothing is
    /// returned), and [`Error::Alloc`].
    #[cfg(feature = "alloc")]
    pub fn descriptors(&self, layout: &Layout<'_>) -> Result<alloc::vec::Vec<Descriptor>, Error> {
        let items = self.count_descriptors(layout)?;
        let mut out = alloc::vec::Vec::new();
        out.try_reserve_exact(items).map_err(|_| Error::Alloc { items })?;
        match self.emit(layout, &Cursor::default(), &mut out)? {
            Written { next: None, .. } => Ok(out),
            Written { .. } => Err(Error::Alloc { items }),
        }
    }

    /// The one writer loop behind every output form: the cursor walks layers and runs in
    /// the layout's order; [`pieces`](Self::pieces) writes one run of one layer.
    //
    // Why `start` is a reference, and this is not inlined: rustc 1.95 and earlier can hand
    // a closure's by-value argument on in the caller's own memory (rust-lang/rust#155241,
    // fixed on nightly). A writer that mutated its `Cursor` argument then changed the
    // caller's cursor, and a repeated call resumed where the last one ended. Writers copy
    // the start and never write to an argument; `tests/argument_writes.rs` checks it.
    #[inline(never)]
    fn emit(
        &self,
        layout: &Layout<'_>,
        start: &Cursor,
        out: &mut impl Sink<Descriptor>,
    ) -> Result<Written, Error> {
        let mut c = *start;
        layout.check()?;
        let full = |c, count| Written { descriptors: count, next: Some(c) };
        match layout.get_order() {
            Order::LayerMajor => {
                while let Some(g) = layout.geo(c.layer, self.steps) {
                    if self.bounds.whole_and_safe(&g) && c.offset == 0 {
                        // One descriptor per run, every address known to fit.
                        let rest = self.spans.get(c.span..).unwrap_or_default();
                        let n = out.extend(rest.iter().map(|&span| self.whole(&g, span)));
                        if n < rest.len() {
                            return Ok(full(Cursor { span: c.span + n, ..c }, out.count()));
                        }
                        c.span += n;
                    }
                    while let Some(&span) = self.spans.get(c.span) {
                        if !self.pieces(&g, span, &mut c, out)? {
                            return Ok(full(c, out.count()));
                        }
                        c = Cursor { span: c.span + 1, offset: 0, ..c };
                    }
                    c = Cursor { layer: c.layer + 1, span: 0, offset: 0 };
                }
            }
            Order::RunMajor => {
                while let Some(&span) = self.spans.get(c.span) {
                    while let Some(g) = layout.geo(c.layer, self.steps) {
                        if !self.pieces(&g, span, &mut c, out)? {
                            return Ok(full(c, out.count()));
                        }
                        c = Cursor { layer: c.layer + 1, offset: 0, ..c };
                    }
                    c = Cursor { span: c.span + 1, layer: 0, offset: 0 };
                }
            }
        }
        Ok(Written { descriptors: out.count(), next: None })
    }

    /// Writes the pieces of `span` in layer `g` from `c.offset` on, advancing it;
    /// `false` when `out` filled up first.
    #[inline]
    fn pieces(
        &self,
        g: &Geo,
        span: Span,
        c: &mut Cursor,
        out: &mut impl Sink<Descriptor>,
    ) -> Result<bool, Error> {
        let per = g.per_descriptor();
        let descends = self.descends(span);
        while c.offset < span.len {
            if !out.room(1) {
                return Ok(false);
            }
            let pages = per.min(span.len - c.offset);
            // The piece's lowest page: its first position, or its last when it descends.
            let position = span.start + c.offset + if descends { pages - 1 } else { 0 };
            let d = self
                .descriptor(g, position, pages)
                .map_err(|fault| fault.at(c.layer, position, out.count()))?;
            out.put(d);
            c.offset += pages;
        }
        Ok(true)
    }

    /// `span` descends (an either-direction plan): its pages run from high to low, so each
    /// descriptor of it starts at the last position of its piece.
    #[inline(always)]
    fn descends(&self, span: Span) -> bool {
        self.steps.either && span.len > 1 && {
            let up = |x: &[T], step| match (x.get(span.start), x.get(span.start + 1)) {
                (Some(&a), Some(&b)) => follows_by(a, b, step),
                _ => true,
            };
            !(up(self.src, self.steps.src) && up(self.dst, self.steps.dst))
        }
    }

    /// The descriptor of the whole of `span` in layer `g`, for layers that passed
    /// [`Bounds::whole_and_safe`]: the arithmetic cannot overflow (it wraps, never panics).
    #[inline(always)]
    fn whole(&self, g: &Geo, span: Span) -> Descriptor {
        let low = if self.descends(span) { span.end() - 1 } else { span.start };
        let at = |x: &[T]| x.get(low).map_or(0, |v| v.widen() as u64);
        let l = &g.layer;
        Descriptor {
            src_addr: l.src_base.wrapping_add(at(self.src).wrapping_mul(l.src_stride)),
            dst_addr: l.dst_base.wrapping_add(at(self.dst).wrapping_mul(l.dst_stride)),
            len: (span.len as u64).wrapping_mul(l.item_len),
        }
    }

    /// The descriptor of `pages` pages from `position` in layer `g`.
    fn descriptor(&self, g: &Geo, position: usize, pages: usize) -> Result<Descriptor, Fault> {
        let (Some(&s), Some(&d)) = (self.src.get(position), self.dst.get(position)) else {
            return Err(Fault::Overflow); // unreachable: spans lie inside the input
        };
        let len = g.bytes(pages)?;
        Ok(Descriptor { src_addr: g.src_addr(s, len)?, dst_addr: g.dst_addr(d, len)?, len })
    }
}

/// Three caller slices, one per descriptor field, filled from their starts.
pub(crate) struct Columns<'o> {
    pub src_addrs: &'o mut [u64],
    pub dst_addrs: &'o mut [u64],
    pub lens: &'o mut [u64],
    pub len: usize,
}

impl Sink<Descriptor> for Columns<'_> {
    fn room(&mut self, n: usize) -> bool {
        let cap = self.src_addrs.len().min(self.dst_addrs.len()).min(self.lens.len());
        cap - self.len >= n
    }
    fn put(&mut self, d: Descriptor) {
        let i = self.len;
        if let (Some(s), Some(t), Some(l)) =
            (self.src_addrs.get_mut(i), self.dst_addrs.get_mut(i), self.lens.get_mut(i))
        {
            (*s, *t, *l) = (d.src_addr, d.dst_addr, d.len);
            self.len += 1;
        }
    }
    fn count(&self) -> usize {
        self.len
    }
    fn extend(&mut self, xs: impl Iterator<Item = Descriptor>) -> usize {
        let at = self.len;
        let free = self.src_addrs.get_mut(at..).unwrap_or_default().iter_mut().zip(
            self.dst_addrs
                .get_mut(at..)
                .unwrap_or_default()
                .iter_mut()
                .zip(self.lens.get_mut(at..).unwrap_or_default().iter_mut()),
        );
        let mut n = 0;
        for ((s, (t, l)), d) in free.zip(xs) {
            (*s, *t, *l) = (d.src_addr, d.dst_addr, d.len);
            n += 1;
        }
        self.len += n;
        n
    }
}
