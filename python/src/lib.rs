//! The `corun` Python module: a drop-in for SGLang's `group_concurrent_contiguous`, the
//! array-native `runs`, and `transfer_descriptors` for many layers at once.
//!
//! Inputs are read in place when they are contiguous arrays of a supported dtype; the
//! kernel runs with the GIL released (`Python::detach`) from 1,024 positions on.

use std::borrow::Cow;
use std::num::{NonZeroU64, NonZeroUsize};

use ::corun::desc::{self, Layer, Layout};
use ::corun::{Grouper, Index, Span};
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

mod ints;
use ints::ToInt;

/// A 1-D integer array, read in place when it can be.
enum Indices<'py> {
    U32(PyReadonlyArray1<'py, u32>),
    I32(PyReadonlyArray1<'py, i32>),
    U64(PyReadonlyArray1<'py, u64>),
    I64(PyReadonlyArray1<'py, i64>),
}

/// The elements, borrowed from the array when it is contiguous, copied otherwise.
fn elems<'a, T: numpy::Element + Copy>(a: &'a PyReadonlyArray1<'_, T>) -> Cow<'a, [T]> {
    match a.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

impl<'py> Indices<'py> {
    fn len(&self) -> usize {
        match self {
            Indices::U32(a) => a.len(),
            Indices::I32(a) => a.len(),
            Indices::U64(a) => a.len(),
            Indices::I64(a) => a.len(),
        }
    }
}

/// `obj` as a 1-D integer array: numpy arrays of int32/int64/uint32/uint64 are used in
/// place; lists and other integer dtypes are converted (to int64, or uint32/uint64 for
/// unsigned ones). Floats, objects and booleans are a `TypeError`, other than 1-D a
/// `ValueError`.
fn indices<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Indices<'py>> {
    // The common case first: a 1-D array of a supported, native dtype (a type check).
    if let Ok(a) = obj.cast::<PyArray1<i32>>() {
        return Ok(Indices::I32(a.readonly()));
    }
    if let Ok(a) = obj.cast::<PyArray1<i64>>() {
        return Ok(Indices::I64(a.readonly()));
    }
    if let Ok(a) = obj.cast::<PyArray1<u32>>() {
        return Ok(Indices::U32(a.readonly()));
    }
    if let Ok(a) = obj.cast::<PyArray1<u64>>() {
        return Ok(Indices::U64(a.readonly()));
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let arr = np.getattr("asarray")?.call1((obj,))?;
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "{name} must be a 1-D array of indices, got a {ndim}-D array"
        )));
    }
    let dtype = arr.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let size: usize = dtype.getattr("itemsize")?.extract()?;
    let native: bool = dtype.getattr("isnative")?.extract()?;
    let len: usize = arr.len()?;
    let cast = |to: &str| arr.call_method1("astype", (to,));
    let arr = match (kind.as_str(), size, native) {
        ("i", 4 | 8, true) | ("u", 4 | 8, true) => arr,
        ("i", _, _) => cast("int64")?,
        ("u", 8, _) => cast("uint64")?,
        ("u", _, _) => cast("uint32")?,
        // An empty list becomes a float64 array: it is still no indices.
        (_, _, _) if len == 0 => cast("int64")?,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{name} must hold integer indices, got dtype {}",
                dtype.str()?
            )));
        }
    };
    let dtype = arr.getattr("dtype")?;
    let (kind, size): (String, usize) =
        (dtype.getattr("kind")?.extract()?, dtype.getattr("itemsize")?.extract()?);
    Ok(match (kind.as_str(), size) {
        ("i", 4) => Indices::I32(arr.extract()?),
        ("i", _) => Indices::I64(arr.extract()?),
        ("u", 4) => Indices::U32(arr.extract()?),
        _ => Indices::U64(arr.extract()?),
    })
}

/// Positions from which the kernel runs with the GIL released: below this, releasing and
/// re-acquiring it costs more than the whole call.
const DETACH_FROM: usize = 1024;

/// `f()`, with the GIL released when the input is large enough to be worth it.
fn kernel<T: Send>(py: Python<'_>, len: usize, f: impl FnOnce() -> T + Send) -> T {
    if len >= DETACH_FROM { py.detach(f) } else { f() }
}

/// Two index arrays as slices of one type, borrowed when their types agree.
enum Pair<'a> {
    U32(Cow<'a, [u32]>, Cow<'a, [u32]>),
    I32(Cow<'a, [i32]>, Cow<'a, [i32]>),
    U64(Cow<'a, [u64]>, Cow<'a, [u64]>),
    I64(Cow<'a, [i64]>, Cow<'a, [i64]>),
}

/// What a converted pair must keep: the values themselves (for addresses), or only
/// which neighbours step by one (for runs, which a translation does not change).
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    Values,
    Runs,
}

/// `src` and `dst` in one index type. Arrays of different types are converted exactly:
/// to int64 (uint32 and the signed types), or to uint64 (uint32 with uint64, or a signed
/// array without negatives with uint64 values past int64). The one pair with no common
/// type, uint64 values from 2**63 with negative ones, becomes int64 with the uint64 side
/// moved down by 2**63 (its top bit flipped: same runs) when only runs are wanted, and a
/// `ValueError` when values are.
fn pair<'a>(src: &'a Indices<'_>, dst: &'a Indices<'_>, keep: Keep) -> PyResult<Pair<'a>> {
    use Indices::*;
    fn each<T: numpy::Element + Copy, U>(
        a: &PyReadonlyArray1<'_, T>,
        f: impl Fn(T) -> U,
    ) -> Cow<'static, [U]>
    where
        U: Clone,
    {
        Cow::Owned(elems(a).iter().map(|&x| f(x)).collect())
    }
    // `flip` is XORed into uint64 values: 0 where they fit (exact), 2**63 to translate.
    let to_i64 = |i: &'a Indices<'_>, flip: u64| -> Cow<'a, [i64]> {
        match i {
            U32(a) => each(a, i64::from),
            I32(a) => each(a, i64::from),
            I64(a) => elems(a),
            U64(a) => each(a, |x| (x ^ flip) as i64),
        }
    };
    let to_u64 = |i: &'a Indices<'_>| -> Cow<'a, [u64]> {
        match i {
            U32(a) => each(a, u64::from),
            // Only called without negatives.
            I32(a) => each(a, |x| x as u64),
            I64(a) => each(a, |x| x as u64),
            U64(a) => elems(a),
        }
    };
    let fits_i64 = |i: &Indices<'_>| match i {
        U64(a) => elems(a).iter().all(|&x| x <= i64::MAX as u64),
        _ => true,
    };
    let non_negative = |i: &Indices<'_>| match i {
        I32(a) => elems(a).iter().all(|&x| x >= 0),
        I64(a) => elems(a).iter().all(|&x| x >= 0),
        _ => true,
    };
    Ok(match (src, dst) {
        (U32(a), U32(b)) => Pair::U32(elems(a), elems(b)),
        (I32(a), I32(b)) => Pair::I32(elems(a), elems(b)),
        (U64(a), U64(b)) => Pair::U64(elems(a), elems(b)),
        (I64(a), I64(b)) => Pair::I64(elems(a), elems(b)),
        (U64(_), U32(_)) | (U32(_), U64(_)) => Pair::U64(to_u64(src), to_u64(dst)),
        _ if fits_i64(src) && fits_i64(dst) => Pair::I64(to_i64(src, 0), to_i64(dst, 0)),
        _ if non_negative(src) && non_negative(dst) => Pair::U64(to_u64(src), to_u64(dst)),
        _ if keep == Keep::Runs => Pair::I64(to_i64(src, 1 << 63), to_i64(dst, 1 << 63)),
        _ => {
            return Err(PyValueError::new_err(
                "src and dst have no common index type: uint64 indices of 2**63 or more \
                 with negative ones",
            ));
        }
    })
}

/// Runs `$body` with `$s`, `$d` the slices of [`pair`]`($src, $dst, $keep)`.
macro_rules! with_slices {
    ($src:expr, $dst:expr, $keep:expr, |$s:ident, $d:ident| $body:expr) => {{
        match pair($src, $dst, $keep)? {
            Pair::U32($s, $d) => $body,
            Pair::I32($s, $d) => $body,
            Pair::U64($s, $d) => $body,
            Pair::I64($s, $d) => $body,
        }
    }};
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
/// ``np.diff`` in int32); lists and any integer dtype are accepted; input that is not
/// 1-D raises ``ValueError`` (the helper groups along the last axis); float and object
/// arrays raise ``TypeError``.
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
        kernel(py, s.len(), || ::corun::group(s, d)).map_err(value_error)?
    });
    // The lists are built directly, their ints shared through `ints` (index values recur
    // from call to call). The cyclic GC is paused meanwhile: these lists of ints cannot
    // form cycles, and otherwise every few hundred new groups a collection would walk
    // the young lists.
    let _paused = GcPause::new(py)?;
    PyTuple::new(py, [groups(py, &src, &spans)?, groups(py, &dst, &spans)?])
}

/// One list per span of the side's own values (as `tolist` gives them), in a list.
fn groups<'py>(py: Python<'py>, idx: &Indices<'py>, spans: &[Span]) -> PyResult<Bound<'py, PyAny>> {
    fn each<'py, T: numpy::Element + ToInt>(
        py: Python<'py>,
        a: &PyReadonlyArray1<'py, T>,
        spans: &[Span],
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = elems(a);
        let mut out = ints::ListBuilder::new(py, spans.len())?;
        for span in spans {
            let part = a.get(span.start..span.end()).unwrap_or_default();
            out.push(ints::int_list(py, part)?)?;
        }
        out.finish()
    }
    match idx {
        Indices::U32(a) => each(py, a, spans),
        Indices::I32(a) => each(py, a, spans),
        Indices::U64(a) => each(py, a, spans),
        Indices::I64(a) => each(py, a, spans),
    }
}

/// Pauses Python's cyclic garbage collector until dropped (if it was running).
struct GcPause<'py>(Option<Bound<'py, PyModule>>);

impl<'py> GcPause<'py> {
    fn new(py: Python<'py>) -> PyResult<Self> {
        let gc = py.import("gc")?;
        if gc.call_method0("isenabled")?.is_truthy()? {
            gc.call_method0("disable")?;
            return Ok(GcPause(Some(gc)));
        }
        Ok(GcPause(None))
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        if let Some(gc) = &self.0 {
            // Cannot fail in practice; an error here must not mask the call's own result.
            let _ = gc.call_method0("enable");
        }
    }
}

/// The runs as arrays: ``(src_starts, dst_starts, lengths)``.
///
/// ``src_starts[k]`` and ``dst_starts[k]`` are the first indices of run ``k`` (in the
/// input's own dtype), ``lengths[k]`` its length (int64). No Python object per run. With
/// ``max_len``, longer runs come out as consecutive pieces of at most that length.
/// Unequal lengths (one empty side included) raise ``ValueError``.
#[pyfunction]
#[pyo3(signature = (src, dst, *, max_len=None))]
fn runs<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    max_len: Option<i64>,
) -> PyResult<Bound<'py, PyTuple>> {
    let grouper = match max_len {
        None => Grouper::new(),
        Some(m) => match usize::try_from(m).ok().and_then(NonZeroUsize::new) {
            Some(m) => Grouper::new().max_len(m),
            None => {
                return Err(PyValueError::new_err(format!("max_len must be positive, got {m}")));
            }
        },
    };
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    if s_idx.len() != d_idx.len() {
        return Err(mismatch("runs", s_idx.len(), d_idx.len()));
    }
    let spans = with_slices!(&s_idx, &d_idx, Keep::Runs, |s, d| {
        let (s, d): (&[_], &[_]) = (&s, &d);
        kernel(py, s.len(), || grouper.group(s, d)).map_err(value_error)?
    });
    let lens: Vec<i64> = spans.iter().map(|span| span.len as i64).collect();
    let out =
        [starts(py, &s_idx, &spans), starts(py, &d_idx, &spans), lens.into_pyarray(py).into_any()];
    PyTuple::new(py, out)
}

/// The first index of every span, as an array of `idx`'s own dtype.
fn starts<'py>(py: Python<'py>, idx: &Indices<'py>, spans: &[Span]) -> Bound<'py, PyAny> {
    fn take<'py, T: numpy::Element + Copy + Default>(
        py: Python<'py>,
        a: &PyReadonlyArray1<'py, T>,
        spans: &[Span],
    ) -> Bound<'py, PyAny> {
        let a = elems(a);
        // `group` returns spans inside the input (`start < len`), so the default is never
        // taken; `map`, unlike `filter_map`, lets `collect` allocate once and the loop
        // run without a capacity check (with `filter_map` this was half of `runs`).
        let v: Vec<T> =
            spans.iter().map(|span| a.get(span.start).copied().unwrap_or_default()).collect();
        v.into_pyarray(py).into_any()
    }
    match idx {
        Indices::U32(a) => take(py, a, spans),
        Indices::I32(a) => take(py, a, spans),
        Indices::U64(a) => take(py, a, spans),
        Indices::I64(a) => take(py, a, spans),
    }
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One `u64` per layer from a sequence or array of Python ints.
fn per_layer(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u64>> {
    if let Ok(v) = obj.extract::<Vec<u64>>() {
        return Ok(v);
    }
    // Say which entry is wrong, and how.
    let mut out = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let v: i128 = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{name}[{i}] must be an int, got {}",
                item.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        out.push(
            u64::try_from(v).map_err(|_| {
                PyValueError::new_err(format!("{name}[{i}] = {v} is not in 0..2**64"))
            })?,
        );
    }
    Ok(out)
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
/// uint64 indices from 2**63 on paired with negative ones (no common index type) raise
/// ``ValueError``.
#[pyfunction]
#[pyo3(signature = (src, dst, src_bases, dst_bases, item_lens, *, max_bytes=None, form="arrays", src_dev_id=0, dst_dev_id=0))]
#[allow(clippy::too_many_arguments)]
fn transfer_descriptors<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    src_bases: &Bound<'py, PyAny>,
    dst_bases: &Bound<'py, PyAny>,
    item_lens: &Bound<'py, PyAny>,
    max_bytes: Option<i128>,
    form: &str,
    src_dev_id: u64,
    dst_dev_id: u64,
) -> PyResult<Bound<'py, PyTuple>> {
    let form = match form {
        "arrays" => Form::Arrays,
        "lists" => Form::Lists,
        "nixl" => Form::Nixl(src_dev_id, dst_dev_id),
        _ => {
            return Err(PyValueError::new_err(format!(
                "form must be \"arrays\", \"lists\" or \"nixl\", got {form:?}"
            )));
        }
    };
    let (sb, db, il) = (
        per_layer(src_bases, "src_bases")?,
        per_layer(dst_bases, "dst_bases")?,
        per_layer(item_lens, "item_lens")?,
    );
    if sb.len() != db.len() || sb.len() != il.len() {
        return Err(PyValueError::new_err(format!(
            "src_bases, dst_bases and item_lens must have one entry per layer, got {}, {} and {}",
            sb.len(),
            db.len(),
            il.len()
        )));
    }
    let layers: Vec<Layer> = (0..sb.len()).map(|l| Layer::new(sb[l], db[l], il[l])).collect();
    let mut layout = Layout::new(&layers);
    if let Some(m) = max_bytes {
        match u64::try_from(m).ok().and_then(NonZeroU64::new) {
            Some(m) => layout = layout.max_bytes(m),
            None => {
                return Err(PyValueError::new_err(format!(
                    "max_bytes must be in 1..2**64, got {m}"
                )));
            }
        }
    }
    let (s_idx, d_idx) = (indices(src, "src")?, indices(dst, "dst")?);
    let empty = s_idx.len() == 0 || d_idx.len() == 0;
    if !empty && s_idx.len() != d_idx.len() {
        return Err(mismatch("transfer_descriptors", s_idx.len(), d_idx.len()));
    }
    if empty {
        return emit::<u32>(py, &[], &[], &layout, form);
    }
    with_slices!(&s_idx, &d_idx, Keep::Values, |s, d| emit(py, &s, &d, &layout, form))
}

/// The forms `transfer_descriptors` returns.
#[derive(Clone, Copy)]
enum Form {
    Arrays,
    Lists,
    /// With the source and destination device ids.
    Nixl(u64, u64),
}

/// Descriptors written per step into a scratch buffer, for the forms that are not
/// columns: small enough for L1, large enough that a step's overhead does not show.
const CHUNK: usize = 256;

/// Every descriptor of `src`/`dst` for `layout`, in `form`: the runs found once (with
/// the GIL released for large inputs), counted, then written straight into the outputs.
/// The outputs are numpy's own arrays (its allocator advises huge pages for large ones:
/// with 4 KiB pages a fresh 16 MiB array costs thousands of page faults) or lists built
/// in place; nothing of the output's size is allocated in between.
fn emit<'py, T: Index>(
    py: Python<'py>,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    form: Form,
) -> PyResult<Bound<'py, PyTuple>> {
    let grouper = Grouper::new();
    let mut spans = vec![Span::default(); grouper.count_runs(src, dst).map_err(value_error)?];
    let plan = kernel(py, src.len(), || desc::Plan::new(&grouper, src, dst, &mut spans))
        .map_err(value_error)?;
    let n = plan.count_descriptors(layout).map_err(value_error)?;
    // Descriptors in chunks, each handed to `sink`, until all are written.
    let chunks = |sink: &mut dyn FnMut(&[desc::Descriptor]) -> PyResult<()>| -> PyResult<()> {
        let mut buf = [desc::Descriptor::default(); CHUNK];
        let mut cursor = desc::Cursor::default();
        loop {
            let w = plan.descriptors_into(layout, cursor, &mut buf).map_err(value_error)?;
            sink(buf.get(..w.descriptors).unwrap_or_default())?;
            match w.next {
                Some(next) => cursor = next,
                None => return Ok(()),
            }
        }
    };
    match form {
        Form::Arrays => {
            let cols = [0; 3].map(|_| PyArray1::<u64>::zeros(py, n, false));
            {
                let [mut sa, mut da, mut ln] = [0, 1, 2].map(|k| cols[k].readwrite());
                plan.descriptors_into_columns(
                    layout,
                    desc::Cursor::default(),
                    sa.as_slice_mut()?,
                    da.as_slice_mut()?,
                    ln.as_slice_mut()?,
                )
                .map_err(value_error)?;
            }
            PyTuple::new(py, cols)
        }
        Form::Lists => {
            let new = || ints::ListBuilder::new(py, n);
            let (mut sa, mut da, mut ln) = (new()?, new()?, new()?);
            // Lengths take few values: shared through a memo. Addresses are all distinct.
            let mut memo = ints::Memo::new();
            chunks(&mut |ds| {
                for d in ds {
                    sa.push_int(d.src_addr)?;
                    da.push_int(d.dst_addr)?;
                    ln.push_memo(&mut memo, d.len)?;
                }
                Ok(())
            })?;
            PyTuple::new(py, [sa.finish()?, da.finish()?, ln.finish()?])
        }
        Form::Nixl(src_dev, dst_dev) => {
            let rows = [0; 2].map(|_| numpy::PyArray2::<u64>::zeros(py, [n, 3], false));
            {
                let [mut local, mut remote] = [0, 1].map(|k| rows[k].readwrite());
                let (local, remote) = (local.as_slice_mut()?, remote.as_slice_mut()?);
                let mut at = 0;
                chunks(&mut |ds| {
                    for d in ds {
                        let (l, r) = (local.get_mut(at..at + 3), remote.get_mut(at..at + 3));
                        if let (Some(l), Some(r)) = (l, r) {
                            l.copy_from_slice(&[d.src_addr, d.len, src_dev]);
                            r.copy_from_slice(&[d.dst_addr, d.len, dst_dev]);
                        }
                        at += 3;
                    }
                    Ok(())
                })?;
            }
            PyTuple::new(py, rows)
        }
    }
}

/// Concurrent contiguous runs in paired index arrays (SIMD, Rust), and RDMA transfer
/// descriptors for many layers at once.
#[pymodule]
fn corun(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(group_concurrent_contiguous, m)?)?;
    m.add_function(wrap_pyfunction!(runs, m)?)?;
    m.add_function(wrap_pyfunction!(transfer_descriptors, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
