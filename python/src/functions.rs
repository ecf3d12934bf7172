//! The module's general functions, each in three steps: its arguments read and checked
//! (`input`), the work done by `compute` (the one caller of corun's core, which releases
//! the GIL by one rule for all), its results built (`output`).

use std::num::{NonZeroU64, NonZeroUsize};

use ::corun::desc::{self, Layout};
use ::corun::{Direction, Grouper, Index};
use numpy::{Element, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::input::{self, ASCENDING, DirectionArg, EITHER, Indices, Keep, indices, with_slices};
use crate::output::{self, Form};
use crate::{compute, errors};

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
pub fn group_concurrent_contiguous<'py>(
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
        return Err(errors::mismatch("group_concurrent_contiguous", sl, dl));
    }
    let spans = with_slices!(&src, &dst, Keep::Runs, |s, d| {
        let (s, d): (&[_], &[_]) = (&s, &d);
        compute::spans(py, &compute::grouper(Direction::Ascending, None), s, d)
            .map_err(errors::core)?
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
pub fn runs<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    max_len: Option<&Bound<'py, PyAny>>,
    direction: DirectionArg,
) -> PyResult<Bound<'py, PyTuple>> {
    let (grouper, s_idx, d_idx) = grouping_args("runs", src, dst, max_len, direction)?;
    let spans = with_slices!(&s_idx, &d_idx, Keep::Runs, |s, d| {
        let (s, d): (&[_], &[_]) = (&s, &d);
        compute::spans(py, &grouper, s, d).map_err(errors::core)?
    });
    let out = [
        output::starts(py, &s_idx, &spans)?,
        output::starts(py, &d_idx, &spans)?,
        output::lengths(py, &spans)?,
    ];
    PyTuple::new(py, out)
}

/// The arguments ``runs`` and ``count_runs`` share, read once: the grouper their
/// ``max_len`` and ``direction`` make, and ``src``/``dst`` of one length (else the
/// mismatch naming ``func`` and both lengths).
fn grouping_args<'py>(
    func: &str,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    max_len: Option<&Bound<'py, PyAny>>,
    direction: DirectionArg,
) -> PyResult<(Grouper, Indices<'py>, Indices<'py>)> {
    let max_len = input::cap(max_len, "max_len", usize::MAX as i128, "1..2**64", |m| {
        usize::try_from(m).ok().and_then(NonZeroUsize::new)
    })?;
    let grouper = compute::grouper(direction.0, max_len);
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    if s_idx.len() != d_idx.len() {
        return Err(errors::mismatch(func, s_idx.len(), d_idx.len()));
    }
    Ok((grouper, s_idx, d_idx))
}

/// The number of runs ``runs`` would return: ``len(runs(src, dst, ...)[2])``, with no array built.
///
/// The same arguments and errors as ``runs`` (``max_len`` cuts longer runs into pieces,
/// each counted; ``direction="either"`` merges runs that descend on both sides). Unequal
/// lengths (one empty side included) raise ``ValueError``; two empty sides count 0.
#[pyfunction]
#[pyo3(signature = (src, dst, *, max_len=None, direction=ASCENDING),
       text_signature = "(src, dst, *, max_len=None, direction='ascending')")]
pub fn count_runs<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    max_len: Option<&Bound<'py, PyAny>>,
    direction: DirectionArg,
) -> PyResult<usize> {
    let (grouper, s_idx, d_idx) = grouping_args("count_runs", src, dst, max_len, direction)?;
    Ok(with_slices!(&s_idx, &d_idx, Keep::Runs, |s, d| {
        let (s, d): (&[_], &[_]) = (&s, &d);
        compute::count_runs(py, &grouper, s, d).map_err(errors::core)?
    }))
}

/// The pairs of ``src``/``dst`` sorted by destination: ``(src_sorted, dst_sorted)``.
///
/// For a *set* of pairs (each page moves once, whatever the order of the lists), grouping
/// the sorted pairs (``runs``, ``transfer_descriptors``) gives the fewest transfers any
/// order can have. Destinations must be distinct: a repeated one is a ``ValueError``
/// naming both positions. Outputs are in the pair's common dtype.
#[pyfunction]
#[pyo3(signature = (src, dst))]
pub fn sort_by_destination<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    if s_idx.len() != d_idx.len() {
        return Err(errors::mismatch("sort_by_destination", s_idx.len(), d_idx.len()));
    }
    let out = with_slices!(&s_idx, &d_idx, Keep::Pages, |s, d| sorted(py, &s, &d)?);
    PyTuple::new(py, out)
}

/// `src`/`dst` sorted by destination, as two new arrays.
fn sorted<'py, T: Element + Index>(
    py: Python<'py>,
    src: &[T],
    dst: &[T],
) -> PyResult<[Bound<'py, PyAny>; 2]> {
    let (s, d) = (
        output::array1::<T>(py, src.len(), "the sorted src")?,
        output::array1::<T>(py, dst.len(), "the sorted dst")?,
    );
    {
        let (mut sw, mut dw) = (s.readwrite(), d.readwrite());
        compute::sort_by_destination(py, src, dst, sw.as_slice_mut()?, dw.as_slice_mut()?)
            .map_err(errors::sort)?;
    }
    Ok([s.into_any(), d.into_any()])
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
pub fn place<'py>(
    py: Python<'py>,
    first: &Bound<'py, PyAny>,
    free: &Bound<'py, PyAny>,
    direction: DirectionArg,
) -> PyResult<Bound<'py, PyTuple>> {
    let direction = direction.0;
    let (f_idx, r_idx) = (indices(first, "first")?, indices(free, "free")?);
    let out = with_slices!(&f_idx, &r_idx, Keep::Pages, |f, r| placed(py, &f, &r, direction)?);
    PyTuple::new(py, out)
}

/// The second side's pages for `first` out of `free`: the chosen pages and the rest as
/// two new arrays, and what placement did as a dict.
fn placed<'py, T: Element + Index>(
    py: Python<'py>,
    first: &[T],
    free: &[T],
    direction: Direction,
) -> PyResult<[Bound<'py, PyAny>; 3]> {
    let n = first.len();
    let Some(left) = free.len().checked_sub(n) else {
        return Err(errors::core(::corun::Error::NotEnoughFree { pages: n, free: free.len() }));
    };
    let (chosen, rest) = (
        output::array1::<T>(py, n, "the chosen pages")?,
        output::array1::<T>(py, left, "the pages left free")?,
    );
    let p = {
        let (mut cw, mut rw) = (chosen.readwrite(), rest.readwrite());
        compute::place(py, first, free, direction, cw.as_slice_mut()?, rw.as_slice_mut()?)?
    };
    Ok([chosen.into_any(), rest.into_any(), output::stats(py, &p)?])
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
/// transfer: longer runs are cut into pieces of whole items. Unequal lengths (one empty
/// side included: the message names both), a negative index, an address past 2**64, a
/// zero item length, a cap below one item, an unknown form, and device ids with a form
/// other than ``"nixl"`` raise ``ValueError``; outputs too large for memory ``MemoryError``.
/// ``direction="either"`` merges runs that descend on both sides too (vLLM's recycled
/// blocks): such a run's descriptor starts at its lowest page.
#[pyfunction]
#[pyo3(signature = (src, dst, src_bases, dst_bases, item_lens, *, max_bytes=None, form="arrays", src_dev_id=None, dst_dev_id=None, direction=ASCENDING),
       text_signature = "(src, dst, src_bases, dst_bases, item_lens, *, max_bytes=None, form='arrays', src_dev_id=None, dst_dev_id=None, direction='ascending')")]
#[allow(clippy::too_many_arguments)]
pub fn transfer_descriptors<'py>(
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
    let grouper = compute::grouper(direction.0, None);
    let dev_id = |obj: Option<&Bound<'py, PyAny>>, name| match obj.filter(|o| !o.is_none()) {
        None => Ok(0),
        Some(o) => input::u64_param(o, name),
    };
    let (src_dev, dst_dev) = (dev_id(src_dev_id, "src_dev_id")?, dev_id(dst_dev_id, "dst_dev_id")?);
    // Device ids have a column only in NIXL's rows: given with another form they would be
    // dropped unseen, so they are an error that names them.
    let given = [("src_dev_id", src_dev_id), ("dst_dev_id", dst_dev_id)];
    let named = given.iter().find(|(_, o)| o.is_some_and(|o| !o.is_none()));
    if let (Some((name, _)), false) = (named, form == "nixl") {
        return Err(PyValueError::new_err(format!(
            "{name} is only used with form=\"nixl\" (its rows have a device column), \
             got form={form:?}"
        )));
    }
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
    let layers = compute::layers(&sb, &db, &il)?;
    let max_bytes = input::cap(max_bytes, "max_bytes", u64::MAX.into(), "1..2**64", |m| {
        u64::try_from(m).ok().and_then(NonZeroU64::new)
    })?;
    let layout = compute::layout(&layers, max_bytes);
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    if s_idx.len() != d_idx.len() {
        return Err(errors::mismatch("transfer_descriptors", s_idx.len(), d_idx.len()));
    }
    let negative_at = |position| {
        [&s_idx, &d_idx]
            .into_iter()
            .find_map(|i| i.value_at(position).filter(|v| *v < 0).map(|v| (i.name, v)))
    };
    let fail = |e| errors::descriptor(e, negative_at);
    let out = with_slices!(&s_idx, &d_idx, Keep::Values, |s, d| {
        emit(py, &grouper, &s, &d, &layout, form, &fail)?
    });
    PyTuple::new(py, out)
}

/// Every descriptor of `src`/`dst` for `layout`, in `form`: the runs found once into a
/// span buffer of exactly their number, counted, then written straight into the outputs
/// (nothing of the output's size is allocated in between).
fn emit<'py, T: Index>(
    py: Python<'py>,
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    form: Form,
    fail: &dyn Fn(desc::Error) -> PyErr,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut spans = Vec::new();
    let (plan, n) = compute::plan(py, grouper, src, dst, layout, &mut spans, fail)?;
    match form {
        Form::Arrays => {
            let cols = [
                output::array1::<u64>(py, n, "src_addrs")?,
                output::array1::<u64>(py, n, "dst_addrs")?,
                output::array1::<u64>(py, n, "lengths")?,
            ];
            {
                let [mut sa, mut da, mut ln] = [0, 1, 2].map(|k| cols[k].readwrite());
                let slices = [sa.as_slice_mut()?, da.as_slice_mut()?, ln.as_slice_mut()?];
                let written = compute::columns(py, &plan, layout, slices).map_err(fail)?;
                output::check_written(written, n)?;
            }
            Ok(cols.into_iter().map(Bound::into_any).collect())
        }
        Form::Lists => {
            let mut lists = output::DescriptorLists::new(py, n)?;
            let written = compute::descriptors_attached(&plan, layout, fail, |ds| lists.push(ds))?;
            output::check_written(written, n)?;
            lists.finish()
        }
        Form::Nixl(src_dev, dst_dev) => {
            let rows = [
                output::rows3(py, n, "the local NIXL rows")?,
                output::rows3(py, n, "the remote NIXL rows")?,
            ];
            {
                let [mut local, mut remote] = [0, 1].map(|k| rows[k].readwrite());
                let mut w = output::NixlRows::new(
                    local.as_slice_mut()?,
                    remote.as_slice_mut()?,
                    src_dev,
                    dst_dev,
                );
                let written =
                    compute::descriptors(py, &plan, layout, n, |ds| w.write(ds)).map_err(fail)?;
                output::check_written(written, n)?;
            }
            Ok(rows.into_iter().map(Bound::into_any).collect())
        }
    }
}
