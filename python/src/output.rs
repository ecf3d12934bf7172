//! Python objects out: lists of groups, numpy arrays of starts and descriptors, the
//! lists Mooncake takes and the rows NIXL takes. Every output is allocated fallibly
//! (numpy's `empty`, CPython's `PyList_New`): too large is a `MemoryError` naming it.

use ::corun::Span;
use ::corun::desc::{self, Cursor, Descriptor, Layout, Plan};
use numpy::{Element, PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::PySystemError;
use pyo3::prelude::*;

use crate::errors;
use crate::input::{Indices, each_type, elems};
use crate::ints::{self, ToInt};

/// A new, uninitialised numpy array of `T` and `shape`, or a `MemoryError` naming `what`
/// and its size.
fn empty<'py, T: Element>(
    py: Python<'py>,
    shape: &[usize],
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let dtype = numpy::dtype::<T>(py);
    np.getattr("empty")?.call1((shape.to_vec(), dtype)).map_err(|e| {
        let items: u128 = shape.iter().map(|&d| d as u128).product();
        let bytes = items * size_of::<T>() as u128;
        errors::wrap_memory(py, e, &format!("{what}: an array of shape {shape:?}, {bytes} bytes"))
    })
}

/// A new 1-D array of `n` elements of `T`.
fn array1<'py, T: Element>(
    py: Python<'py>,
    n: usize,
    what: &str,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    Ok(empty::<T>(py, &[n], what)?.cast_into::<PyArray1<T>>()?)
}

/// A new `n x 3` array of `u64`.
fn rows3<'py>(py: Python<'py>, n: usize, what: &str) -> PyResult<Bound<'py, PyArray2<u64>>> {
    Ok(empty::<u64>(py, &[n, 3], what)?.cast_into::<PyArray2<u64>>()?)
}

/// A new list of `n` items, or a `MemoryError` naming `what` and its size.
fn list<'py>(py: Python<'py>, n: usize, what: &str) -> PyResult<ints::ListBuilder<'py>> {
    ints::ListBuilder::new(py, n).map_err(|e| {
        let bytes = n as u128 * size_of::<usize>() as u128;
        errors::wrap_memory(py, e, &format!("{what}: a list of {n} items, {bytes} bytes"))
    })
}

/// One list per span of the side's own values (as `tolist` gives them), in a list.
pub fn groups<'py>(
    py: Python<'py>,
    idx: &Indices<'py>,
    spans: &[Span],
) -> PyResult<Bound<'py, PyAny>> {
    fn each<'py, T: ToInt>(
        py: Python<'py>,
        a: &[T],
        spans: &[Span],
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut out = list(py, spans.len(), "the groups")?;
        for span in spans {
            let part = a.get(span.start..span.end()).unwrap_or_default();
            out.push(ints::int_list(py, part)?)?;
        }
        out.finish()
    }
    each_type!(&idx.values, |a| each(py, elems(a)?, spans))
}

/// The first index of every span, as an array of the side's own dtype.
pub fn starts<'py>(
    py: Python<'py>,
    idx: &Indices<'py>,
    spans: &[Span],
) -> PyResult<Bound<'py, PyAny>> {
    fn take<'py, T: Element + Copy + Default>(
        py: Python<'py>,
        a: &[T],
        spans: &[Span],
        name: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let out = array1::<T>(py, spans.len(), &format!("the {name} starts"))?;
        {
            let mut w = out.readwrite();
            // `group` returns spans inside the input (`start < len`): the default is
            // never taken.
            for (slot, span) in w.as_slice_mut()?.iter_mut().zip(spans) {
                *slot = a.get(span.start).copied().unwrap_or_default();
            }
        }
        Ok(out.into_any())
    }
    let out = each_type!(&idx.values, |a| take(py, elems(a)?, spans, idx.name))?;
    match &idx.own {
        // Values that came from the caller's array: exact in its dtype too.
        Some(own) => out.call_method1("astype", (own,)),
        None => Ok(out),
    }
}

/// `src`/`dst` sorted by destination, as two new arrays (see `sort_by_destination`).
pub fn sorted<'py, T: Element + ::corun::Index>(
    py: Python<'py>,
    src: &[T],
    dst: &[T],
) -> PyResult<[Bound<'py, PyAny>; 2]> {
    let (s, d) = (
        array1::<T>(py, src.len(), "the sorted src")?,
        array1::<T>(py, dst.len(), "the sorted dst")?,
    );
    {
        let (mut sw, mut dw) = (s.readwrite(), d.readwrite());
        ::corun::sort_by_destination(src, dst, sw.as_slice_mut()?, dw.as_slice_mut()?).map_err(|e| match e {
            ::corun::Error::DuplicateDestination { first, second } => {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "dst[{first}] and dst[{second}] are the same page: order-free grouping needs distinct destinations"
                ))
            }
            e => errors::core(e),
        })?;
    }
    Ok([s.into_any(), d.into_any()])
}

/// The second side's pages for `first` out of `free` (see `place`): the chosen pages and
/// the rest as two new arrays, and what placement did as a dict.
pub fn placed<'py, T: Element + ::corun::Index>(
    py: Python<'py>,
    first: &[T],
    free: &[T],
    direction: ::corun::Direction,
) -> PyResult<[Bound<'py, PyAny>; 3]> {
    let n = first.len();
    let Some(left) = free.len().checked_sub(n) else {
        return Err(errors::core(::corun::Error::NotEnoughFree { pages: n, free: free.len() }));
    };
    let (chosen, rest) =
        (array1::<T>(py, n, "the chosen pages")?, array1::<T>(py, left, "the pages left free")?);
    let mut scratch =
        errors::try_vec::<usize>(::corun::place_scratch_len(n, free.len()), "placement's scratch")?;
    scratch.resize(::corun::place_scratch_len(n, free.len()), 0);
    let p = {
        let (mut cw, mut rw) = (chosen.readwrite(), rest.readwrite());
        ::corun::place(first, free, direction, cw.as_slice_mut()?, rw.as_slice_mut()?, &mut scratch)
            .map_err(errors::core)?
    };
    let stats = pyo3::types::PyDict::new(py);
    stats.set_item("bound", p.bound)?;
    stats.set_item("placed", p.placed)?;
    stats.set_item("own", p.own)?;
    stats.set_item("split", p.split)?;
    stats.set_item("fallback", p.fallback)?;
    Ok([chosen.into_any(), rest.into_any(), stats.into_any()])
}

/// The length of every span, as an int64 array.
pub fn lengths<'py>(py: Python<'py>, spans: &[Span]) -> PyResult<Bound<'py, PyAny>> {
    let out = array1::<i64>(py, spans.len(), "the run lengths")?;
    {
        let mut w = out.readwrite();
        for (slot, span) in w.as_slice_mut()?.iter_mut().zip(spans) {
            // A span is inside an array, so its length is below isize::MAX.
            *slot = i64::try_from(span.len).unwrap_or(i64::MAX);
        }
    }
    Ok(out.into_any())
}

/// The forms `transfer_descriptors` returns.
#[derive(Clone, Copy)]
pub enum Form {
    Arrays,
    Lists,
    /// With the source and destination device ids.
    Nixl(u64, u64),
}

/// Descriptors written per step into a scratch buffer, for the forms that are not
/// columns: small enough for L1, large enough that a step's overhead does not show.
const CHUNK: usize = 256;

/// Every one of the `n` descriptors of `plan` for `layout`, in `form`, written straight
/// into the outputs: nothing of the output's size is allocated in between. `fail` turns a
/// descriptor error into the caller's exception.
pub fn descriptors<'py, T: ::corun::Index>(
    py: Python<'py>,
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
    n: usize,
    form: Form,
    fail: &dyn Fn(desc::Error) -> PyErr,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    // Descriptors in chunks, each handed to `sink`, until all are written.
    let chunks = |sink: &mut dyn FnMut(&[Descriptor]) -> PyResult<()>| -> PyResult<usize> {
        let mut buf = [Descriptor::default(); CHUNK];
        let (mut cursor, mut total) = (Cursor::default(), 0);
        loop {
            let w = plan.descriptors_into(layout, cursor, &mut buf).map_err(fail)?;
            sink(buf.get(..w.descriptors).unwrap_or_default())?;
            total += w.descriptors;
            match w.next {
                Some(next) => cursor = next,
                None => return Ok(total),
            }
        }
    };
    let check = |written: usize| {
        if written == n {
            Ok(())
        } else {
            Err(PySystemError::new_err(format!(
                "corun: {written} descriptors written, {n} counted"
            )))
        }
    };
    match form {
        Form::Arrays => {
            let names = ["src_addrs", "dst_addrs", "lengths"];
            let cols = [
                array1::<u64>(py, n, names[0])?,
                array1::<u64>(py, n, names[1])?,
                array1::<u64>(py, n, names[2])?,
            ];
            {
                let [mut sa, mut da, mut ln] = [0, 1, 2].map(|k| cols[k].readwrite());
                let w = plan
                    .descriptors_into_columns(
                        layout,
                        Cursor::default(),
                        sa.as_slice_mut()?,
                        da.as_slice_mut()?,
                        ln.as_slice_mut()?,
                    )
                    .map_err(fail)?;
                check(w.descriptors)?;
            }
            Ok(cols.into_iter().map(Bound::into_any).collect())
        }
        Form::Lists => {
            let (mut sa, mut da, mut ln) =
                (list(py, n, "src_addrs")?, list(py, n, "dst_addrs")?, list(py, n, "lengths")?);
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
            Ok(vec![sa.finish()?, da.finish()?, ln.finish()?])
        }
        Form::Nixl(src_dev, dst_dev) => {
            let rows =
                [rows3(py, n, "the local NIXL rows")?, rows3(py, n, "the remote NIXL rows")?];
            {
                let [mut local, mut remote] = [0, 1].map(|k| rows[k].readwrite());
                let (local, remote) = (local.as_slice_mut()?, remote.as_slice_mut()?);
                let (mut l, mut r) = (local.chunks_exact_mut(3), remote.chunks_exact_mut(3));
                let written = chunks(&mut |ds| {
                    for (d, (lrow, rrow)) in ds.iter().zip(l.by_ref().zip(r.by_ref())) {
                        lrow.copy_from_slice(&[d.src_addr, d.len, src_dev]);
                        rrow.copy_from_slice(&[d.dst_addr, d.len, dst_dev]);
                    }
                    Ok(())
                })?;
                check(written)?;
            }
            Ok(rows.into_iter().map(Bound::into_any).collect())
        }
    }
}

/// Pauses Python's cyclic garbage collector until dropped (if it was running).
pub struct GcPause<'py>(Option<Bound<'py, PyModule>>);

impl<'py> GcPause<'py> {
    pub fn new(py: Python<'py>) -> PyResult<Self> {
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
