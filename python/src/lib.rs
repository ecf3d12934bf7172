//! The `corun` Python module: a drop-in for SGLang's `group_concurrent_contiguous`, the
//! array-native `runs`, and `transfer_descriptors` for many layers at once.
//!
//! Three layers, one file each: [`input`] turns Python objects into checked slices (in
//! place only when numpy's array is aligned, contiguous and native), this file holds the
//! functions, [`output`] builds what they return; [`errors`] holds the exceptions and the
//! fallible allocations, [`ints`] the shared Python ints, [`queue`] vLLM's free queue
//! for the placement adapter. The kernel runs with the GIL
//! released (`Python::detach`) from 1,024 positions on.

use std::num::{NonZeroU64, NonZeroUsize};

use ::corun::desc::{self, Layer, Layout, Plan};
use ::corun::{Direction, Grouper, Index, Span};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

mod blocks;
mod errors;
mod input;
mod ints;
mod output;
mod queue;

use input::{Indices, Keep, indices, with_slices};
use output::Form;

/// Positions from which the kernel runs with the GIL released: below this, releasing and
/// re-acquiring it costs more than the whole call.
const DETACH_FROM: usize = 1024;

/// `f()`, with the GIL released when the input is large enough to be worth it.
///
/// While it runs, another Python thread may write to an input array: corun holds a
/// reference to the array (its memory stays valid) and reads each element with ordinary
/// loads and bounds-checked indexing, so the call cannot crash or read out of bounds; its
/// result then describes some mixture of the old and new contents.
fn kernel<T: Send>(py: Python<'_>, len: usize, f: impl FnOnce() -> T + Send) -> T {
    if len >= DETACH_FROM { py.detach(f) } else { f() }
}

/// The `direction` parameter: `"ascending"` (SGLang's runs) or `"either"` (runs may
/// also descend on both sides, as vLLM's recycled blocks do).
/// A `direction=` argument: the str "ascending" or "either". Anything else is an error
/// that names the parameter (pyo3's own extraction error does not): `ValueError` for
/// another str, `TypeError` for another type (`None`, `1`, `b"either"`).
struct DirectionArg(Direction);

const ASCENDING: DirectionArg = DirectionArg(Direction::Ascending);
const EITHER: DirectionArg = DirectionArg(Direction::Either);

impl<'a, 'py> FromPyObject<'a, 'py> for DirectionArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let Ok(d) = obj.extract::<String>() else {
            let what = obj.repr().map(|r| r.to_string()).unwrap_or_default();
            return Err(PyTypeError::new_err(format!(
                "direction must be the str \"ascending\" or \"either\", got {what} ({})",
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            )));
        };
        match d.as_str() {
            "ascending" => Ok(ASCENDING),
            "either" => Ok(EITHER),
            _ => Err(PyValueError::new_err(format!(
                "direction must be \"ascending\" or \"either\", got {d:?}"
            ))),
        }
    }
}

fn mismatch(func: &str, src: usize, dst: usize) -> PyErr {
    PyValueError::new_err(format!(
        "{func} requires equal-length src/dst index arrays, got {src} and {dst}"
    ))
}

/// Groups positions where both ``src_indices`` and ``dst_indices`` advance by exactly 1.
///
/// A drop-in for SGLang's ``group_concurrent_contiguous``: returns ``(src_groups,
/// dst_groups)``, lists of lists of Python ints, one pair per run. Either side empty
/// returns ``([], [])``; otherwise unequal lengths raise ``ValueError`` with the helper's
/// message. Differences, where the helper is wrong or crashes: contiguity is exact
/// integer arithmetic (``[2147483647, -2147483648]`` is two groups, not one as with
/// ``np.diff`` in int32); lists, any integer dtype and any array layout are accepted;
/// input that is not 1-D raises ``ValueError`` (the helper groups along the last axis);
/// float and object arrays, and objects that are not sequences, raise ``TypeError``.
#[pyfunction]
#[pyo3(signature = (src_indices, dst_indices))]
fn group_concurrent_contiguous<'py>(
    py: Python<'py>,
    src_indices: &Bound<'py, PyAny>,
    dst_indices: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let src = indices(src_indices, "src_indices")?;
    let dst = indices(dst_indices, "dst_indices")?;
    let (sl, dl) = (src.len(), dst.len());
    if sl == 0 || dl == 0 {
        return PyTuple::new(py, [PyList::empty(py), PyList::empty(py)]);
    }
    if sl != dl {
        return Err(mismatch("group_concurrent_contiguous", sl, dl));
    }
    let spans = with_slices!(&src, &dst, Keep::Runs, |s, d| {
        let (s, d): (&[_], &[_]) = (&s, &d);
        kernel(py, s.len(), || ::corun::group(s, d)).map_err(errors::core)?
    });
    // The lists are built directly, their ints shared through `ints` (index values recur
    // from call to call). The cyclic GC is paused meanwhile: these lists of ints cannot
    // form cycles, and otherwise every few hundred new groups a collection would walk
    // the young lists.
    let _paused = output::GcPause::new(py)?;
    PyTuple::new(py, [output::groups(py, &src, &spans)?, output::groups(py, &dst, &spans)?])
}

/// The runs as arrays: ``(src_starts, dst_starts, lengths)``.
///
/// ``src_starts[k]`` and ``dst_starts[k]`` are the first indices of run ``k``, each in
/// the dtype of its input (``np.asarray(src).dtype``: a list of ints gives int64, or
/// uint64 when it holds values from 2**63), ``lengths[k]`` its length (int64). No Python
/// object per run. With ``direction="either"`` a run may also descend on both sides (its
/// starts are its first positions; its lowest pages are ``starts - (lengths - 1)``); runs
/// are then not unique (``1, 2, 3, 2, 1``), and the rule is greedy, left to right: a run's
/// first pair sets its direction (ascending when both hold), the pair that turns starts
/// the next run (``[1, 2, 3] [2, 1]``). With ``max_len``, longer runs come out as pieces
/// of at most that length, each a run of its own: with ``"either"`` the next piece's
/// direction is set afresh by its first pair, so capped runs are not always cuts of the
/// uncapped ones (``1, 2, 3, 2, 1`` capped at 2: ``[1, 2] [3, 2] [1]``).
/// Unequal lengths (one empty side included) raise ``ValueError``.
#[pyfunction]
#[pyo3(signature = (src, dst, *, max_len=None, direction=ASCENDING),
       text_signature = "(src, dst, *, max_len=None, direction='ascending')")]
fn runs<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    max_len: Option<&Bound<'py, PyAny>>,
    direction: DirectionArg,
) -> PyResult<Bound<'py, PyTuple>> {
    let base = Grouper::new().direction(direction.0);
    let grouper = match max_len.filter(|m| !m.is_none()) {
        None => base,
        Some(m) => {
            let m = input::int_param(m, "max_len", 1, usize::MAX as i128, "1..2**64")?;
            match usize::try_from(m).ok().and_then(NonZeroUsize::new) {
                Some(m) => base.max_len(m),
                None => return Err(PyValueError::new_err("max_len must be in 1..2**64")),
            }
        }
    };
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    if s_idx.len() != d_idx.len() {
        return Err(mismatch("runs", s_idx.len(), d_idx.len()));
    }
    let spans = with_slices!(&s_idx, &d_idx, Keep::Runs, |s, d| {
        let (s, d): (&[_], &[_]) = (&s, &d);
        kernel(py, s.len(), || grouper.group(s, d)).map_err(errors::core)?
    });
    let out = [
        output::starts(py, &s_idx, &spans)?,
        output::starts(py, &d_idx, &spans)?,
        output::lengths(py, &spans)?,
    ];
    PyTuple::new(py, out)
}

/// The pairs of ``src``/``dst`` sorted by destination: ``(src_sorted, dst_sorted)``.
///
/// For a *set* of pairs (each page moves once, whatever the order of the lists), grouping
/// the sorted pairs (``runs``, ``transfer_descriptors``) gives the fewest transfers any
/// order can have. Destinations must be distinct: a repeated one is a ``ValueError``
/// naming both positions. Outputs are in the pair's common dtype.
#[pyfunction]
#[pyo3(signature = (src, dst))]
fn sort_by_destination<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    if s_idx.len() != d_idx.len() {
        return Err(mismatch("sort_by_destination", s_idx.len(), d_idx.len()));
    }
    let out = with_slices!(&s_idx, &d_idx, Keep::Pages, |s, d| output::sorted(py, &s, &d)?);
    PyTuple::new(py, out)
}

/// The second side's pages for a request, chosen so that its runs pair up with the first
/// side's: ``first`` holds the first side's pages in request order, ``free`` the second
/// side's free pages in the allocator's priority order (the page it would hand out first
/// comes first: a sorted array of free ids, or the front of a free queue; pass only as
/// deep a prefix as placement may reach). Returns ``(chosen, rest, stats)``: ``chosen[i]``
/// pairs with ``first[i]``, ``rest`` is ``free`` without the chosen pages in its order
/// (both in the pair's common dtype), and ``stats`` a dict of concurrent-run counts:
/// ``bound`` (the first side's own runs, the best possible), ``placed`` (with the chosen
/// pages), ``own`` (with the allocator's own choice ``free[:len(first)]``), ``split``
/// (runs no free extent held whole) and ``fallback`` (the chosen pages are the
/// allocator's own choice, which placing did not beat). The rule (best fit): the
/// first-side runs, longest first, each go whole into the extent (a set of consecutive
/// ids of ``free``, wherever they stand in it) with the least room that holds it (the
/// lowest ids on ties), taking its highest ids, written in the run's direction; runs that
/// fit nowhere are split over the extents with the most room; the allocator's own choice
/// unless placing is strictly better. See the Rust docs of ``corun::place``. A page twice
/// in ``first`` or ``free`` is a ``ValueError`` naming the list and both positions (placed,
/// it would be handed out twice); fewer pages in ``free`` than in ``first`` too.
#[pyfunction]
#[pyo3(signature = (first, free, *, direction=EITHER),
       text_signature = "(first, free, *, direction='either')")]
fn place<'py>(
    py: Python<'py>,
    first: &Bound<'py, PyAny>,
    free: &Bound<'py, PyAny>,
    direction: DirectionArg,
) -> PyResult<Bound<'py, PyTuple>> {
    let direction = direction.0;
    let (f_idx, r_idx) = (indices(first, "first")?, indices(free, "free")?);
    let out =
        with_slices!(&f_idx, &r_idx, Keep::Pages, |f, r| output::placed(py, &f, &r, direction)?);
    PyTuple::new(py, out)
}

/// Transfer descriptors for every layer buffer at once, layer-major, in the form the
/// engine takes (``form``):
///
/// - ``"arrays"`` (default): ``(src_addrs, dst_addrs, lengths)``, uint64 arrays.
/// - ``"lists"``: the same as three lists of Python ints, what Mooncake's
///   ``batch_transfer_sync`` / ``batch_transfer_sync_write`` take; the lists are built
///   directly (lengths, which take few values, share their int objects).
/// - ``"nixl"``: ``(local, remote)``, two Nx3 uint64 arrays of ``[addr, len, dev_id]``
///   rows, what NIXL's ``get_xfer_descs`` takes, with ``src_dev_id`` and ``dst_dev_id``
///   (default 0) in the third column.
///
/// For layer ``l`` and run ``r`` (as ``group_concurrent_contiguous`` finds them):
/// ``src_addrs = src_bases[l] + src[start] * item_lens[l]``, the same on the
/// destination, ``lengths = run_len * item_lens[l]``, exactly what the per-layer loop of
/// the Mooncake and NIXL backends computes, in one call. ``max_bytes`` caps one
/// transfer: longer runs are cut into pieces of whole items. Either side empty returns
/// empty arrays (as the helper's ``([], [])`` leads to); other unequal lengths, a
/// negative index, an address past 2**64, a zero item length, a cap below one item, and
/// an unknown form raise ``ValueError``; outputs too large for memory ``MemoryError``.
/// ``direction="either"`` merges runs that descend on both sides too (vLLM's recycled
/// blocks): such a run's descriptor starts at its lowest page.
#[pyfunction]
#[pyo3(signature = (src, dst, src_bases, dst_bases, item_lens, *, max_bytes=None, form="arrays", src_dev_id=None, dst_dev_id=None, direction=ASCENDING),
       text_signature = "(src, dst, src_bases, dst_bases, item_lens, *, max_bytes=None, form='arrays', src_dev_id=None, dst_dev_id=None, direction='ascending')")]
#[allow(clippy::too_many_arguments)]
fn transfer_descriptors<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    src_bases: &Bound<'py, PyAny>,
    dst_bases: &Bound<'py, PyAny>,
    item_lens: &Bound<'py, PyAny>,
    max_bytes: Option<&Bound<'py, PyAny>>,
    form: &str,
    src_dev_id: Option<&Bound<'py, PyAny>>,
    dst_dev_id: Option<&Bound<'py, PyAny>>,
    direction: DirectionArg,
) -> PyResult<Bound<'py, PyTuple>> {
    let grouper = Grouper::new().direction(direction.0);
    let dev_id = |obj: Option<&Bound<'py, PyAny>>, name| match obj.filter(|o| !o.is_none()) {
        None => Ok(0),
        Some(o) => input::u64_param(o, name),
    };
    let (src_dev, dst_dev) = (dev_id(src_dev_id, "src_dev_id")?, dev_id(dst_dev_id, "dst_dev_id")?);
    let form = match form {
        "arrays" => Form::Arrays,
        "lists" => Form::Lists,
        "nixl" => Form::Nixl(src_dev, dst_dev),
        _ => {
            return Err(PyValueError::new_err(format!(
                "form must be \"arrays\", \"lists\" or \"nixl\", got {form:?}"
            )));
        }
    };
    let (sb, db, il) = (
        input::per_layer(src_bases, "src_bases")?,
        input::per_layer(dst_bases, "dst_bases")?,
        input::per_layer(item_lens, "item_lens")?,
    );
    if sb.len() != db.len() || sb.len() != il.len() {
        return Err(PyValueError::new_err(format!(
            "src_bases, dst_bases and item_lens must have one entry per layer, got {}, {} and {}",
            sb.len(),
            db.len(),
            il.len()
        )));
    }
    let mut layers = errors::try_vec::<Layer>(sb.len(), "the layers")?;
    layers.extend((0..sb.len()).map(|l| Layer::new(sb[l], db[l], il[l])));
    let mut layout = Layout::new(&layers);
    if let Some(m) = max_bytes.filter(|m| !m.is_none()) {
        let m = input::int_param(m, "max_bytes", 1, u64::MAX.into(), "1..2**64")?;
        match u64::try_from(m).ok().and_then(NonZeroU64::new) {
            Some(m) => layout = layout.max_bytes(m),
            None => return Err(PyValueError::new_err("max_bytes must be in 1..2**64")),
        }
    }
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    let empty = s_idx.len() == 0 || d_idx.len() == 0;
    if !empty && s_idx.len() != d_idx.len() {
        return Err(mismatch("transfer_descriptors", s_idx.len(), d_idx.len()));
    }
    let fail = |e| desc_error(e, &s_idx, &d_idx);
    let out = if empty {
        emit::<u32>(py, &grouper, &[], &[], &layout, form, &fail)?
    } else {
        with_slices!(&s_idx, &d_idx, Keep::Values, |s, d| {
            emit(py, &grouper, &s, &d, &layout, form, &fail)?
        })
    };
    PyTuple::new(py, out)
}

/// Every descriptor of `src`/`dst` for `layout`, in `form`: the runs found once (with
/// the GIL released for large inputs) into a span buffer of exactly their number, then
/// counted and written straight into the outputs.
fn emit<'py, T: Index>(
    py: Python<'py>,
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    form: Form,
    fail: &dyn Fn(desc::Error) -> PyErr,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let n_runs = grouper.count_runs(src, dst).map_err(errors::core)?;
    let mut spans = errors::try_vec::<Span>(n_runs, "the runs")?;
    spans.resize(n_runs, Span::default());
    let plan = kernel(py, src.len(), || Plan::new(grouper, src, dst, &mut spans)).map_err(fail)?;
    let n = plan.count_descriptors(layout).map_err(fail)?;
    output::descriptors(py, &plan, layout, n, form, fail)
}

/// A descriptor error as a Python exception naming the parameter it comes from. Python
/// gets nothing back from a failed call, so unlike the Rust and C messages these do not
/// count the outputs written before the failure.
fn desc_error(e: desc::Error, src: &Indices<'_>, dst: &Indices<'_>) -> PyErr {
    match e {
        desc::Error::NegativeIndex { layer, position, .. } => {
            let (side, v) = [src, dst]
                .into_iter()
                .find_map(|i| i.value_at(position).filter(|v| *v < 0).map(|v| (i.name, v)))
                .unwrap_or((src.name, -1));
            PyValueError::new_err(format!(
                "negative index at position {position}: {side}[{position}] = {v} has no \
                 address (layer {layer})"
            ))
        }
        desc::Error::Overflow { layer, position, .. } => PyValueError::new_err(format!(
            "address overflows u64 at position {position}: the transfer from there in layer \
             {layer} would end past 2**64 (src_bases[{layer}], dst_bases[{layer}] and \
             item_lens[{layer}] with these indices)"
        )),
        desc::Error::ZeroItemLen { layer } => PyValueError::new_err(format!(
            "item_lens[{layer}] is 0: layer {layer} has an item length of 0"
        )),
        desc::Error::CapBelowItem { layer } => PyValueError::new_err(format!(
            "max_bytes is smaller than one item of layer {layer} (item_lens[{layer}])"
        )),
        desc::Error::Alloc { items } => {
            errors::memory("the descriptors", items, size_of::<desc::Descriptor>())
        }
        e => PyValueError::new_err(e.to_string()),
    }
}

/// Concurrent contiguous runs in paired index arrays (SIMD, Rust), and RDMA transfer
/// descriptors for many layers at once.
#[pymodule]
fn _corun(m: &Bound<'_, PyModule>) -> PyResult<()> {
    ints::configure()?;
    m.add_function(wrap_pyfunction!(group_concurrent_contiguous, m)?)?;
    m.add_function(wrap_pyfunction!(runs, m)?)?;
    m.add_function(wrap_pyfunction!(transfer_descriptors, m)?)?;
    m.add_function(wrap_pyfunction!(sort_by_destination, m)?)?;
    m.add_function(wrap_pyfunction!(place, m)?)?;
    m.add_function(wrap_pyfunction!(blocks::merge_contiguous_blocks, m)?)?;
    m.add_class::<queue::Mirror>()?;
    m.add_class::<queue::Told>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
