//! The one layer that calls into corun's core: every grouping, count, sort, placement and
//! descriptor write the module makes goes through a function here, and every one of
//! them follows the same rule for the GIL.
//!
//! The rule: work on at least [`DETACH_FROM`] items (positions read, or descriptors
//! written) runs with the GIL released (`Python::detach`), so that other Python threads
//! run meanwhile; smaller work keeps it, because releasing and taking it back costs more
//! than the work. The only work that keeps the GIL whatever its size is
//! [`descriptors_attached`], whose sink makes a Python int per value between chunks.
//!
//! While the GIL is released another Python thread may write to an input array: corun
//! holds a reference to it (its memory stays valid) and reads each element with ordinary
//! loads and bounds-checked indexing, so a call cannot crash or read out of bounds; its
//! result then describes some mixture of the old and new contents. The outputs are new
//! arrays no other thread can see yet.
//!
//! Nothing here makes a Python object; errors come back as corun's own, and the callers
//! turn them into exceptions (`errors`) once the GIL is theirs again.

use std::num::NonZeroUsize;

use ::corun::desc::{self, Cursor, Descriptor, Layer, Layout, Plan};
use ::corun::{Direction, Error, Grouper, Index, Placement, Span};
use pyo3::prelude::*;

use crate::errors;

/// Items from which the work runs with the GIL released: below this, releasing and
/// re-acquiring it costs more than the whole call.
pub const DETACH_FROM: usize = 1024;

/// `f()`, with the GIL released when `size` (the items it reads or writes) is at least
/// [`DETACH_FROM`]: the one place that decides.
fn detached<T: Send>(py: Python<'_>, size: usize, f: impl FnOnce() -> T + Send) -> T {
    if size >= DETACH_FROM { py.detach(f) } else { f() }
}

/// The grouping rule: runs in `direction`, cut at `max_len` when given.
pub fn grouper(direction: Direction, max_len: Option<NonZeroUsize>) -> Grouper {
    let g = Grouper::new().direction(direction);
    match max_len {
        Some(m) => g.max_len(m),
        None => g,
    }
}

/// One layer per entry of the three (of one length, checked by the caller: a longer one's
/// extra entries are not read).
pub fn layers(src_bases: &[u64], dst_bases: &[u64], item_lens: &[u64]) -> PyResult<Vec<Layer>> {
    let mut layers = errors::try_vec::<Layer>(src_bases.len(), "the layers")?;
    let per_layer = src_bases.iter().zip(dst_bases).zip(item_lens);
    layers.extend(per_layer.map(|((&s, &d), &i)| Layer::new(s, d, i)));
    Ok(layers)
}

/// The layout of `layers`, transfers capped at `max_bytes` when given.
pub fn layout(layers: &[Layer], max_bytes: Option<core::num::NonZeroU64>) -> Layout<'_> {
    let l = Layout::new(layers);
    match max_bytes {
        Some(m) => l.max_bytes(m),
        None => l,
    }
}

/// The runs of `src`/`dst` by `grouper`, as spans.
pub fn spans<T: Index>(
    py: Python<'_>,
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
) -> Result<Vec<Span>, Error> {
    detached(py, src.len(), || grouper.group(src, dst))
}

/// The number of runs of `src`/`dst` by `grouper`, nothing built.
pub fn count_runs<T: Index>(
    py: Python<'_>,
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
) -> Result<usize, Error> {
    detached(py, src.len(), || grouper.count_runs(src, dst))
}

/// `src`/`dst` sorted by destination into `src_out`/`dst_out` (`sort_by_destination`).
pub fn sort_by_destination<T: Index>(
    py: Python<'_>,
    src: &[T],
    dst: &[T],
    src_out: &mut [T],
    dst_out: &mut [T],
) -> Result<(), Error> {
    detached(py, src.len(), || ::corun::sort_by_destination(src, dst, src_out, dst_out))
}

/// The pages of `free` for `first` into `chosen`, the others into `rest` (`place`), with
/// scratch of the size placement asks for (a `MemoryError` when it cannot be had), kept
/// for the thread's next call (see [`SCRATCH`]).
pub fn place<T: Index>(
    py: Python<'_>,
    first: &[T],
    free: &[T],
    direction: Direction,
    chosen: &mut [T],
    rest: &mut [T],
) -> PyResult<Placement> {
    let len = ::corun::place_scratch_len(first.len(), free.len());
    let mut scratch = SCRATCH.with(|kept| kept.take());
    if scratch.len() < len {
        let more = len - scratch.len();
        scratch
            .try_reserve_exact(more)
            .map_err(|_| errors::memory("placement's scratch", len, 8))?;
        scratch.resize(len, 0); // within the capacity just reserved
    }
    let size = first.len().max(free.len());
    let words = scratch.get_mut(..len).unwrap_or_default();
    let placed = detached(py, size, || ::corun::place(first, free, direction, chosen, rest, words));
    if scratch.len() <= KEEP_SCRATCH {
        SCRATCH.with(|kept| kept.replace(scratch));
    }
    placed.map_err(errors::core)
}

thread_local! {
    /// Placement's scratch, kept by each thread between calls (up to [`KEEP_SCRATCH`]
    /// words): fresh scratch costs a page fault and the zeroing of every 4 KiB it spans,
    /// at each call (144 MB at a million pages over a window of four million: a quarter
    /// of that call's time), where placement itself touches only what the window needs.
    static SCRATCH: std::cell::Cell<Vec<usize>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The most scratch a thread keeps between placements: 2^25 words (256 MiB), enough for
/// a million pages over a window of six million.
const KEEP_SCRATCH: usize = 1 << 25;

/// The runs of `src`/`dst` found once for descriptors, into `spans` (made exactly their
/// number), and the number of descriptors they make for `layout`. `fail` turns a
/// descriptor error into the caller's exception (after the GIL is back).
pub fn plan<'a, T: Index>(
    py: Python<'_>,
    grouper: &'a Grouper,
    src: &'a [T],
    dst: &'a [T],
    layout: &Layout<'_>,
    spans: &'a mut Vec<Span>,
    fail: &dyn Fn(desc::Error) -> PyErr,
) -> PyResult<(Plan<'a, T>, usize)> {
    let n_runs = detached(py, src.len(), || grouper.count_runs(src, dst)).map_err(errors::core)?;
    *spans = errors::try_vec::<Span>(n_runs, "the runs")?;
    spans.resize(n_runs, Span::default()); // within the capacity just reserved
    let spans: &'a mut [Span] = spans;
    let planned = detached(py, src.len(), move || {
        let plan = Plan::new(grouper, src, dst, spans)?;
        let n = plan.count_descriptors(layout)?;
        Ok((plan, n))
    });
    planned.map_err(fail)
}

/// Every descriptor of `plan` for `layout` written into the three columns (each exactly
/// `n` long, the count [`plan`] gave): returns how many were written.
pub fn columns<T: Index>(
    py: Python<'_>,
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
    [src_addrs, dst_addrs, lengths]: [&mut [u64]; 3],
) -> Result<usize, desc::Error> {
    detached(py, src_addrs.len(), || {
        let w = plan.descriptors_into_columns(
            layout,
            Cursor::default(),
            src_addrs,
            dst_addrs,
            lengths,
        )?;
        Ok(w.descriptors)
    })
}

/// Descriptors written per step into a scratch buffer, for the sinks that take them a
/// chunk at a time: small enough for L1, large enough that a step's overhead does not
/// show.
const CHUNK: usize = 256;

/// Every descriptor of `plan` for `layout`, handed to `sink` a chunk at a time, in order;
/// returns how many. The chunk loop of both [`descriptors`] and [`descriptors_attached`].
fn chunks<T: Index, E>(
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
    fail: impl Fn(desc::Error) -> E,
    mut sink: impl FnMut(&[Descriptor]) -> Result<(), E>,
) -> Result<usize, E> {
    let mut buf = [Descriptor::default(); CHUNK];
    let (mut cursor, mut total) = (Cursor::default(), 0usize);
    loop {
        let w = plan.descriptors_into(layout, cursor, &mut buf).map_err(&fail)?;
        sink(buf.get(..w.descriptors).unwrap_or_default())?;
        total = total.saturating_add(w.descriptors);
        match w.next {
            Some(next) => cursor = next,
            None => return Ok(total),
        }
    }
}

/// [`chunks`] into a sink that touches no Python object (it writes into arrays made
/// before): by the rule, `n` descriptors (the count [`plan`] gave) or more detach.
pub fn descriptors<T: Index>(
    py: Python<'_>,
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
    n: usize,
    sink: impl FnMut(&[Descriptor]) + Send,
) -> Result<usize, desc::Error> {
    let mut sink = sink;
    detached(py, n, || {
        chunks(
            plan,
            layout,
            |e| e,
            |ds| {
                sink(ds);
                Ok(())
            },
        )
    })
}

/// [`chunks`] into a sink that makes Python objects (the lists form): with the GIL held,
/// whatever the size, since the sink needs it for every chunk.
pub fn descriptors_attached<T: Index>(
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
    fail: &dyn Fn(desc::Error) -> PyErr,
    sink: impl FnMut(&[Descriptor]) -> PyResult<()>,
) -> PyResult<usize> {
    chunks(plan, layout, fail, sink)
}
