//! References for [`crate::desc`]: one page at a time, with exact (`i128`/`u128`)
//! arithmetic and no cursors, written from the documented contracts.
//!
//! The layout checks (`check`), the packing test (`packed`) and the address arithmetic
//! (`addr`) here are written again, on purpose, rather than taken from `desc`: the oracle
//! must not share the code it judges, or a bug there would pass as the expected answer.
//! It shares only the types (and `follows_by`, the one-line exact step test both build
//! on).

use alloc::vec::Vec;

use super::{follows_by, group_with};
use crate::desc::{Descriptor, Error, Layer, Layout, Order, Sge, WorkRequest};
use crate::grouper::{Direction, Grouper};
use crate::index::Index;

/// The checks every layout gets before anything is written.
fn check(layout: &Layout<'_>) -> Result<(), Error> {
    let cap = layout.get_max_bytes().map_or(u64::MAX, |m| m.get());
    for (layer, l) in layout.layers().iter().enumerate() {
        if l.item_len == 0 {
            return Err(Error::ZeroItemLen { layer });
        }
        if cap < l.item_len {
            return Err(Error::CapBelowItem { layer });
        }
    }
    Ok(())
}

/// Largest byte count a transfer may have in layer `l`: whole pages within the cap.
fn cap_bytes(layout: &Layout<'_>, l: &Layer) -> u128 {
    let cap = layout.get_max_bytes().map_or(u64::MAX, |m| m.get());
    u128::from(cap / l.item_len * l.item_len)
}

/// Pages `i` and `i + step` are adjacent in memory on a side with this stride.
fn packed(l: &Layer, step: u64, stride: u64) -> bool {
    u128::from(step) * u128::from(stride) == u128::from(l.item_len)
}

/// What went wrong with one address.
enum Bad {
    Negative,
    Overflow,
}

/// `base + index * stride`, and that `len` bytes from there end by `2^64`.
fn addr<T: Index>(base: u64, index: T, stride: u64, len: u128) -> Result<u64, Bad> {
    let Ok(index) = u128::try_from(index.widen()) else {
        return Err(Bad::Negative);
    };
    // Below 2^128: index and stride are below 2^64, and so are base and len.
    let start = u128::from(base) + index * u128::from(stride);
    if start + len > 1 << 64 || start > u128::from(u64::MAX) {
        return Err(Bad::Overflow);
    }
    Ok(start as u64)
}

fn error(bad: Bad, layer: usize, position: usize, written: usize) -> Error {
    match bad {
        Bad::Negative => Error::NegativeIndex { layer, position, written },
        Bad::Overflow => Error::Overflow { layer, position, written },
    }
}

/// Reference for [`Plan::descriptors`](crate::desc::Plan::descriptors) over the runs of
/// `grouper`, and for [`crate::desc::descriptors`].
pub fn descriptors<T: Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
) -> Result<Vec<Descriptor>, Error> {
    match descriptors_until_error(grouper, src, dst, layout) {
        (out, None) => Ok(out),
        (_, Some(e)) => Err(e),
    }
}

/// The descriptors up to the first error, and that error: what the writers leave in a
/// buffer large enough when they fail.
pub fn descriptors_until_error<T: Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
) -> (Vec<Descriptor>, Option<Error>) {
    let mut out = Vec::new();
    let result = write(grouper, src, dst, layout, &mut out);
    (out, result.err())
}

fn write<T: Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    out: &mut Vec<Descriptor>,
) -> Result<(), Error> {
    let runs = group_with(grouper, src, dst).map_err(Error::grouping)?;
    check(layout)?;
    let (ss, ds) = grouper.get_steps();
    let either = grouper.get_direction() == crate::grouper::Direction::Either;
    // (layer, run) -> its pieces (position of the lowest page, pages).
    let pieces = |layer: usize, run: &crate::span::Span| {
        let run = *run;
        let l = &layout.layers()[layer];
        let whole = packed(l, ss, l.src_stride) && packed(l, ds, l.dst_stride);
        let per = if whole { (cap_bytes(layout, l) / u128::from(l.item_len)) as usize } else { 1 };
        // A descending run (either direction) is addressed from each piece's lowest page:
        // its last position.
        let down = either
            && run.len > 1
            && !(follows_by(src[run.start], src[run.start + 1], ss)
                && follows_by(dst[run.start], dst[run.start + 1], ds));
        (0..run.len).step_by(per.max(1)).map(move |o| {
            let pages = per.min(run.len - o);
            (layer, run.start + o + if down { pages - 1 } else { 0 }, pages)
        })
    };
    let layers = 0..layout.layers().len();
    let order: Vec<(usize, usize, usize)> = match layout.get_order() {
        Order::LayerMajor => {
            layers.flat_map(|l| runs.iter().flat_map(move |r| pieces(l, r))).collect()
        }
        Order::RunMajor => {
            runs.iter().flat_map(|r| layers.clone().flat_map(move |l| pieces(l, r))).collect()
        }
    };
    for (layer, position, pages) in order {
        let l = &layout.layers()[layer];
        let fail = |bad| error(bad, layer, position, out.len());
        let len = pages as u128 * u128::from(l.item_len);
        if len > u128::from(u64::MAX) {
            return Err(fail(Bad::Overflow));
        }
        let src_addr = addr(l.src_base, src[position], l.src_stride, len).map_err(fail)?;
        let dst_addr = addr(l.dst_base, dst[position], l.dst_stride, len).map_err(fail)?;
        out.push(Descriptor { src_addr, dst_addr, len: len as u64 });
    }
    Ok(())
}

/// Reference for [`Plan::gather`](crate::desc::Plan::gather) over the runs of `grouper`:
/// page by page, each page joins the open request or opens the next one.
#[allow(clippy::type_complexity)]
pub fn gather<T: Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    max_sge: usize,
) -> Result<(Vec<WorkRequest>, Vec<Sge>), Error> {
    group_with(grouper, src, dst).map_err(Error::grouping)?;
    check(layout)?;
    if max_sge == 0 {
        return Err(Error::ZeroMaxSge);
    }
    let (ss, ds) = grouper.get_steps();
    let either = grouper.get_direction() == Direction::Either;
    let (mut requests, mut sges) = (Vec::new(), Vec::<Sge>::new());
    for (layer, l) in layout.layers().iter().enumerate() {
        let item = u128::from(l.item_len);
        let cap = cap_bytes(layout, l);
        let (src_packed, dst_packed) = (packed(l, ss, l.src_stride), packed(l, ds, l.dst_stride));
        // The open request: (first position, request, its last segment's position, and
        // whether its destination pages descend: None while it has one page).
        let mut open: Option<(usize, WorkRequest, usize, Option<bool>)> = None;
        for i in 0..src.len() {
            let mut open_new = false;
            let up = |side: &[T], step| i > 0 && follows_by(side[i - 1], side[i], step);
            let down = |side: &[T], step| either && i > 0 && follows_by(side[i], side[i - 1], step);
            if let Some((_, req, last, way)) = open.as_mut() {
                let fits = u128::from(req.len) + item <= cap;
                let dst_up = *way != Some(true) && up(dst, ds);
                let dst_down = !dst_up && *way != Some(false) && down(dst, ds);
                let joins_dst = dst_packed && fits && (dst_up || dst_down);
                let joins_src = src_packed && if dst_down { down(src, ss) } else { up(src, ss) };
                let fail = |bad| error(bad, layer, i, requests.len());
                if joins_dst && joins_src {
                    req.len += l.item_len;
                    if let Some(seg) = sges.last_mut() {
                        seg.len += l.item_len;
                        if dst_down {
                            // Extended downwards: the segment starts at this page.
                            seg.addr = addr(l.src_base, src[i], l.src_stride, 0).map_err(fail)?;
                        }
                    }
                } else if joins_dst && req.sge_count < max_sge {
                    let seg = sges.last().copied().unwrap_or_default();
                    let p = *last;
                    addr(seg.addr, 0u32, 0, u128::from(seg.len))
                        .map_err(|bad| error(bad, layer, p, requests.len()))?;
                    let a = addr(l.src_base, src[i], l.src_stride, 0).map_err(fail)?;
                    sges.push(Sge { addr: a, len: l.item_len });
                    req.len += l.item_len;
                    req.sge_count += 1;
                    *last = i;
                } else {
                    open_new = true;
                }
                if !open_new {
                    if dst_down {
                        // A descending range starts at its lowest page: this one.
                        req.dst_addr = addr(l.dst_base, dst[i], l.dst_stride, 0).map_err(fail)?;
                    }
                    *way = Some(dst_down);
                    continue;
                }
            }
            if let Some((first, req, last, way)) = open.take() {
                close(&req, &mut sges, layer, first, last, way == Some(true), requests.len())?;
                requests.push(req);
            }
            let fail = |bad| error(bad, layer, i, requests.len());
            let dst_addr = addr(l.dst_base, dst[i], l.dst_stride, 0).map_err(fail)?;
            let src_addr = addr(l.src_base, src[i], l.src_stride, 0).map_err(fail)?;
            let first_sge = sges.len();
            sges.push(Sge { addr: src_addr, len: l.item_len });
            let req = WorkRequest { dst_addr, len: l.item_len, first_sge, sge_count: 1 };
            open = Some((i, req, i, None));
        }
        if let Some((first, req, last, way)) = open.take() {
            close(&req, &mut sges, layer, first, last, way == Some(true), requests.len())?;
            requests.push(req);
        }
    }
    Ok((requests, sges))
}

/// The end checks of a finished request: its last segment, then its destination range;
/// a descending request's segments are then put in the order that fills its range.
#[allow(clippy::too_many_arguments)]
fn close(
    req: &WorkRequest,
    sges: &mut [Sge],
    layer: usize,
    first: usize,
    last: usize,
    down: bool,
    written: usize,
) -> Result<(), Error> {
    let seg = sges.last().copied().unwrap_or_default();
    addr(seg.addr, 0u32, 0, u128::from(seg.len)).map_err(|bad| error(bad, layer, last, written))?;
    addr(req.dst_addr, 0u32, 0, u128::from(req.len))
        .map_err(|bad| error(bad, layer, first, written))?;
    if down {
        sges[req.first_sge..].reverse();
    }
    Ok(())
}
