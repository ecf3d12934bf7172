//! Python objects out: lists of groups, numpy arrays of starts and pages, placement's
//! stats, and the three forms of descriptors (arrays, the lists Mooncake takes, the rows
//! NIXL takes). Only conversion: the results are computed by `compute`, and written here
//! into what Python gets. Every output is allocated fallibly (numpy's `empty`, CPython's
//! `PyList_New`): too large is a `MemoryError` naming it.

use ::corun::desc::Descriptor;
use ::corun::{Placement, Span};
use numpy::{Element, PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::PySystemError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

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

/// A new 1-D array of `n` elements of `T` (uninitialised: the caller fills it whole).
pub fn array1<'py, T: Element>(
    py: Python<'py>,
    n: usize,
    what: &str,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    Ok(empty::<T>(py, &[n], what)?.cast_into::<PyArray1<T>>()?)
}

/// A new `n x 3` array of `u64`.
pub fn rows3<'py>(py: Python<'py>, n: usize, what: &str) -> PyResult<Bound<'py, PyArray2<u64>>> {
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

/// What placement did, as the dict `place` returns.
pub fn stats<'py>(py: Python<'py>, p: &Placement) -> PyResult<Bound<'py, PyAny>> {
    let stats = PyDict::new(py);
    stats.set_item("bound", p.bound)?;
    stats.set_item("placed", p.placed)?;
    stats.set_item("own", p.own)?;
    stats.set_item("split", p.split)?;
    stats.set_item("fallback", p.fallback)?;
    Ok(stats.into_any())
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

/// The error for a descriptor count that the writing did not reach: never raised unless
/// corun's count and writers disagree.
pub fn check_written(written: usize, n: usize) -> PyResult<()> {
    if written == n {
        return Ok(());
    }
    Err(PySystemError::new_err(format!("corun: {written} descriptors written, {n} counted")))
}

/// The three lists of the lists form (`src_addrs`, `dst_addrs`, `lengths`), filled a
/// chunk of descriptors at a time.
pub struct DescriptorLists<'py> {
    lists: [ints::ListBuilder<'py>; 3],
    /// Lengths take few values: shared through a memo. Addresses are all distinct.
    memo: ints::Memo,
}

impl<'py> DescriptorLists<'py> {
    /// Three lists of room for `n` items each.
    pub fn new(py: Python<'py>, n: usize) -> PyResult<Self> {
        let lists = [list(py, n, "src_addrs")?, list(py, n, "dst_addrs")?, list(py, n, "lengths")?];
        Ok(Self { lists, memo: ints::Memo::new() })
    }

    /// The next descriptors, in order.
    pub fn push(&mut self, ds: &[Descriptor]) -> PyResult<()> {
        let [sa, da, ln] = &mut self.lists;
        for d in ds {
            sa.push_int(d.src_addr)?;
            da.push_int(d.dst_addr)?;
            ln.push_memo(&mut self.memo, d.len)?;
        }
        Ok(())
    }

    /// The lists, once every item is in.
    pub fn finish(self) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let [sa, da, ln] = self.lists;
        Ok(vec![sa.finish()?, da.finish()?, ln.finish()?])
    }
}

/// Writes descriptors as NIXL's `[addr, len, dev_id]` rows into the slices of the two
/// `n x 3` arrays (local: the source side, remote: the destination side), in order.
pub struct NixlRows<'a> {
    local: core::slice::ChunksExactMut<'a, u64>,
    remote: core::slice::ChunksExactMut<'a, u64>,
    devs: (u64, u64),
}

impl<'a> NixlRows<'a> {
    /// Rows into `local` and `remote`, with `src_dev` and `dst_dev` in the third column.
    pub fn new(local: &'a mut [u64], remote: &'a mut [u64], src_dev: u64, dst_dev: u64) -> Self {
        Self {
            local: local.chunks_exact_mut(3),
            remote: remote.chunks_exact_mut(3),
            devs: (src_dev, dst_dev),
        }
    }

    /// The next descriptors' rows (those past the arrays' end are dropped: the count
    /// check that follows reports them).
    pub fn write(&mut self, ds: &[Descriptor]) {
        for (d, (l, r)) in ds.iter().zip(self.local.by_ref().zip(self.remote.by_ref())) {
            l.copy_from_slice(&[d.src_addr, d.len, self.devs.0]);
            r.copy_from_slice(&[d.dst_addr, d.len, self.devs.1]);
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
