//! Gather lists: one work request per contiguous *destination* range, gathering up to
//! `max_sge` source segments (an RDMA WRITE with a scatter/gather list).

use super::addr::{Fault, end_fits};
use super::layout::Geo;
use super::{Cursor, Error, Layout, Plan};
use crate::index::Index;
use crate::index::follows_by;
#[cfg(feature = "heapless")]
use crate::sink::Tail;
use crate::sink::{Reversible, Sink, Slots};

/// One local segment of a work request (an `ibv_sge` without the key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Sge {
    /// Source address.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// One work request: `len` bytes to the contiguous range at `dst_addr`, gathered from
/// `sges[first_sge..first_sge + sge_count]` of the same call's segment buffer, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct WorkRequest {
    /// Destination (remote) address.
    pub dst_addr: u64,
    /// Bytes in all: the sum of the segments' lengths.
    pub len: u64,
    /// Index of the first segment in the call's segment buffer.
    pub first_sge: usize,
    /// Segments (1 to `max_sge`).
    pub sge_count: usize,
}

/// How far a gather writer got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GatherWritten {
    /// Work requests written by this call.
    pub requests: usize,
    /// Segments written by this call.
    pub sges: usize,
    /// Where to continue when a buffer filled up; `None` when everything is out.
    pub next: Option<Cursor>,
}

/// The end of one planned request.
struct Planned {
    end: Cursor,
    dst_addr: u64,
    len: u64,
    sges: usize,
    /// The destination pages descend: the segments, found in input order, fill the range
    /// from its top, so they are written reversed.
    down: bool,
}

impl<T: Index> Plan<'_, T> {
    /// Writes work requests for every layer of `layout` (layer-major), each covering a
    /// contiguous destination range and gathering at most `max_sge` source segments.
    ///
    /// Page `i + 1` joins the request of page `i` when its destination page follows (by
    /// the grouper's step) and is adjacent in memory, and the request stays within the
    /// byte cap. It extends the last segment when its source page follows and is
    /// adjacent too, and opens a new segment otherwise (a new request once `max_sge`
    /// segments are open). Requests are greedy, in input order; runs are those of the
    /// plan, but a cut by the grouper's `max_len` does not split a segment (use the byte
    /// cap here).
    ///
    /// With [`Direction::Either`](crate::Direction::Either) a request's destination
    /// pages may also *descend* (its second page sets the way, ascending when both
    /// hold): pages 9, 8, 7 are one remote range starting at page 7. Its segments are
    /// then listed in the order that fills that range, from page 7 up, so a source page
    /// extends a segment when it descends too (source pages 99, 98, 97 are one segment
    /// at page 97), and the segments come out in reverse input order. (Concurrent runs
    /// only merge what steps together on both sides; a gather list needs only the
    /// destination contiguous, which is where vLLM's recycled blocks gain most.)
    ///
    /// The call stops before a request that does not fit whole in both buffers;
    /// `next` resumes there. Errors: the layout checks and [`Error::ZeroMaxSge`]
    /// (nothing written); [`Error::NegativeIndex`] and [`Error::Overflow`], with the
    /// requests before them (and their segments) written and valid.
    ///
    /// ```
    /// use corun::Grouper;
    /// use corun::desc::{Cursor, Layer, Layout, Plan, Sge, WorkRequest};
    ///
    /// // A fragmented source pool into a fresh destination allocation.
    /// let src = [7u32, 3, 9, 10, 1];
    /// let dst = [100u32, 101, 102, 103, 104];
    /// let layers = [Layer::new(0, 1 << 40, 4096)];
    /// let mut spans = [corun::Span::default(); 8];
    /// let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans)?;
    /// let (mut reqs, mut sges) = ([WorkRequest::default(); 4], [Sge::default(); 16]);
    /// let w = plan.gather_into(&Layout::new(&layers), 30, Cursor::default(), &mut reqs, &mut sges)?;
    /// // 4 source runs, one destination run: a single work request with 4 segments.
    /// assert_eq!((w.requests, w.sges), (1, 4));
    /// assert_eq!(reqs[0].len, 5 * 4096);
    /// assert_eq!(sges[2], Sge { addr: 9 * 4096, len: 2 * 4096 });
    /// # Ok::<(), corun::desc::Error>(())
    /// ```
    pub fn gather_into(
        &self,
        layout: &Layout<'_>,
        max_sge: usize,
        cursor: Cursor,
        requests: &mut [WorkRequest],
        sges: &mut [Sge],
    ) -> Result<GatherWritten, Error> {
        let (mut r, mut s) = (Slots { out: requests, len: 0 }, Slots { out: sges, len: 0 });
        self.gather_emit(layout, max_sge, &cursor, &mut r, &mut s)
    }

    /// [`gather_into`](Self::gather_into) appending to `heapless` vectors.
    #[cfg(feature = "heapless")]
    pub fn gather_into_heapless<const R: usize, const S: usize>(
        &self,
        layout: &Layout<'_>,
        max_sge: usize,
        cursor: Cursor,
        requests: &mut heapless::Vec<WorkRequest, R>,
        sges: &mut heapless::Vec<Sge, S>,
    ) -> Result<GatherWritten, Error> {
        let (mut r, mut s) = (Tail { out: requests, added: 0 }, Tail { out: sges, added: 0 });
        self.gather_emit(layout, max_sge, &cursor, &mut r, &mut s)
    }

    /// Every work request and segment, in new vectors. `first_sge` indexes the
    /// returned segment vector. Errors: as [`gather_into`](Self::gather_into), and
    /// [`Error::Alloc`].
    #[cfg(feature = "alloc")]
    #[allow(clippy::type_complexity)]
    pub fn gather(
        &self,
        layout: &Layout<'_>,
        max_sge: usize,
    ) -> Result<(alloc::vec::Vec<WorkRequest>, alloc::vec::Vec<Sge>), Error> {
        let (mut r, mut s) = (alloc::vec::Vec::new(), alloc::vec::Vec::new());
        let w = self.gather_emit(layout, max_sge, &Cursor::default(), &mut r, &mut s)?;
        match w.next {
            None => Ok((r, s)),
            Some(_) => Err(Error::Alloc { items: w.requests + 1 }),
        }
    }

    /// The writer loop behind every gather form. `start` is a reference for the reason
    /// given at [`Plan::emit`].
    #[inline(never)]
    fn gather_emit(
        &self,
        layout: &Layout<'_>,
        max_sge: usize,
        start: &Cursor,
        requests: &mut impl Sink<WorkRequest>,
        sges: &mut impl Reversible<Sge>,
    ) -> Result<GatherWritten, Error> {
        let mut c = *start;
        layout.check()?;
        if max_sge == 0 {
            return Err(Error::ZeroMaxSge);
        }
        let mut geo: Option<(usize, Geo, bool)> = None;
        loop {
            let (written, sges_written) = (requests.count(), sges.count());
            let progress = |next| GatherWritten { requests: written, sges: sges_written, next };
            if c.layer >= layout.layers().len() {
                return Ok(progress(None));
            }
            match self.spans.get(c.span) {
                None => {
                    c = Cursor { layer: c.layer + 1, span: 0, offset: 0 };
                    continue;
                }
                Some(span) if c.offset >= span.len => {
                    c = Cursor { span: c.span + 1, offset: 0, ..c };
                    continue;
                }
                Some(_) => {}
            }
            let (g, fits) = match geo {
                Some((layer, g, fits)) if layer == c.layer => (g, fits),
                _ => match layout.geo(c.layer, self.steps) {
                    Some(g) => {
                        let fits = self.bounds.fits(&g);
                        geo = Some((c.layer, g, fits));
                        (g, fits)
                    }
                    None => return Ok(progress(None)),
                },
            };
            let to_err = |(fault, position): (Fault, usize)| fault.at(c.layer, position, written);
            let planned = if fits && requests.room(1) && sges.room(max_sge) {
                // Room for any request, and no address can fail: write as it goes.
                self.walk(&g, max_sge, c, |sge| sges.put(sge)).map_err(to_err)?
            } else {
                // Plan the request first, and write it only if it fits whole and is valid.
                let planned = self.walk(&g, max_sge, c, |_| {}).map_err(to_err)?;
                if !requests.room(1) || !sges.room(planned.sges) {
                    return Ok(progress(Some(c)));
                }
                self.walk(&g, max_sge, c, |sge| sges.put(sge)).map_err(to_err)?
            };
            if planned.down {
                sges.reverse_last(planned.sges);
            }
            requests.put(WorkRequest {
                dst_addr: planned.dst_addr,
                len: planned.len,
                first_sge: sges_written,
                sge_count: planned.sges,
            });
            c = planned.end;
        }
    }

    /// Walks one request from `start` (a page with pages left), handing each finished
    /// segment to `sge`. Errors carry the position of the page at fault.
    fn walk(
        &self,
        g: &Geo,
        max_sge: usize,
        start: Cursor,
        mut sge: impl FnMut(Sge),
    ) -> Result<Planned, (Fault, usize)> {
        let item = g.layer.item_len;
        let cap = g.cap_bytes;
        let at = |c: Cursor| {
            let span = self.spans.get(c.span)?;
            Some((span.start.saturating_add(c.offset), span.len.saturating_sub(c.offset)))
        };
        let page = |p: usize| self.src.get(p).copied().zip(self.dst.get(p).copied());
        let fail = |p: usize| move |f: Fault| (f, p);
        let (first, _) = at(start).ok_or((Fault::Overflow, 0))?;
        let (_, d0) = page(first).ok_or((Fault::Overflow, first))?;
        // A descending request moves it down to its lowest page as pages join.
        let mut dst_addr = g.dst_addr(d0, 0).map_err(fail(first))?;
        let (mut c, mut bytes, mut count) = (start, 0u64, 0usize);
        let mut open: Option<(usize, Sge)> = None; // (position, segment)
        // The way the destination pages go, set by the request's second page.
        let mut down: Option<bool> = None;
        while let Some((pos, left)) = at(c) {
            if left == 0 {
                c = Cursor { span: c.span + 1, offset: 0, ..c };
                continue;
            }
            let (s, d) = page(pos).ok_or((Fault::Overflow, pos))?;
            let prev = pos.checked_sub(1).and_then(page);
            // Inside an ascending run the previous page always follows on both sides; a
            // descending run's pages (either-direction plans) never do, so there every
            // page is tested.
            let follows = |side: fn(&(T, T)) -> T, step: u64| {
                (c.offset > 0 && !self.steps.either)
                    || prev.is_some_and(|p| follows_by(side(&p), side(&(s, d)), step))
            };
            // Page `pos` steps down from the previous one on `side`.
            let precedes = |side: fn(&(T, T)) -> T, step: u64| {
                self.steps.either && prev.is_some_and(|p| follows_by(side(&(s, d)), side(&p), step))
            };
            let mut way = down;
            if bytes > 0 {
                let up = down != Some(true) && follows(|p| p.1, self.steps.dst);
                let goes_down = !up && down != Some(false) && precedes(|p| p.1, self.steps.dst);
                if !(g.dst_packed && (up || goes_down)) || cap - bytes < item {
                    break;
                }
                way = Some(goes_down);
            }
            let joins_src = bytes > 0
                && g.src_packed
                && if way == Some(true) {
                    precedes(|p| p.0, self.steps.src)
                } else {
                    follows(|p| p.0, self.steps.src)
                };
            if !joins_src {
                if count == max_sge {
                    break;
                }
                if let Some((p, seg)) = open.take() {
                    sge(finish(seg).map_err(fail(p))?);
                }
                open = Some((pos, Sge { addr: g.src_addr(s, 0).map_err(fail(pos))?, len: 0 }));
                count += 1;
            }
            down = way;
            if down == Some(true) {
                // The page joins a descending request: the range starts at its lowest
                // page, and so does a segment extended downwards.
                if joins_src {
                    let a = g.src_addr(s, 0).map_err(fail(pos))?;
                    if let Some((_, seg)) = open.as_mut() {
                        seg.addr = a;
                    }
                }
                dst_addr = g.dst_addr(d, 0).map_err(fail(pos))?;
            }
            // Room for at least 1 page: the cap holds one (layout check), and was checked
            // above. The division only for runs of several pages (it is not cheap).
            let take = if left > 1 && g.src_packed && g.dst_packed && !self.steps.either {
                let room = (cap - bytes).checked_div(item).unwrap_or(0);
                usize::try_from(room).map_or(left, |room| room.min(left))
            } else {
                1
            };
            if take == 0 || cap - bytes < item {
                break;
            }
            // take * item <= cap - bytes: no overflow.
            let add = take as u64 * item;
            if let Some((_, seg)) = open.as_mut() {
                seg.len += add;
            }
            bytes += add;
            c.offset += take;
        }
        if let Some((p, seg)) = open.take() {
            sge(finish(seg).map_err(fail(p))?);
        }
        if !end_fits(u128::from(dst_addr), u128::from(bytes)) {
            return Err((Fault::Overflow, first));
        }
        Ok(Planned { end: c, dst_addr, len: bytes, sges: count, down: down == Some(true) })
    }
}

/// `seg`, if its end fits in 64 bits.
fn finish(seg: Sge) -> Result<Sge, Fault> {
    if end_fits(u128::from(seg.addr), u128::from(seg.len)) { Ok(seg) } else { Err(Fault::Overflow) }
}
