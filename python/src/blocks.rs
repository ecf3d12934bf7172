//! vLLM's MoRIIO block merge (`MoRIIOConnectorWorker.merge_contiguous_blocks`), as a
//! drop-in: Python lists of byte offsets and sizes in, the merged lists out, equal to
//! vLLM's on every input its numpy code accepts.
//!
//! Its rule: sort the blocks by local offset (stably; not when already sorted or
//! `assume_sorted`), then merge each block into the one before it when both its offsets
//! are the previous block's offsets plus the previous block's size; a merged block's size
//! is `local[last] + size[last] - local[first]`.
//!
//! MoRIIO's blocks are the KV cache's pages: one size, offsets multiples of it. Then the
//! offsets are page ids and the rule is corun's: `sort_by_destination` (which sorts runs,
//! not pages) by the local side and the concurrent runs. Any other input (several sizes,
//! an offset off the grid, a local offset twice) takes a stable sort and the rule as
//! written, in exact arithmetic: where numpy's int64 would wrap, this is an
//! `OverflowError`.
//!
//! The time vLLM's version spends is mostly in reading and building Python lists
//! (`np.fromiter`, `tolist`); here both are one pass of CPython's own calls, and nothing
//! goes through numpy.

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyTuple};

use crate::errors;

/// vLLM MoRIIO's ``merge_contiguous_blocks`` (without ``self``): the blocks sorted by
/// local offset (unless ``assume_sorted``, or already sorted), neighbours merged where
/// both offsets continue the previous block; returns ``(offsets_local, offsets_remote,
/// sizes)`` as lists of ints. Equal to vLLM 0.33's on every input it accepts; lengths
/// that differ are a ``ValueError`` naming all three, a value outside int64 (or a merged
/// size that would wrap there) an ``OverflowError``.
#[pyfunction]
#[pyo3(signature = (offsets_local, offsets_remote, sizes, assume_sorted=false))]
pub fn merge_contiguous_blocks<'py>(
    py: Python<'py>,
    offsets_local: &Bound<'py, PyAny>,
    offsets_remote: &Bound<'py, PyAny>,
    sizes: &Bound<'py, PyAny>,
    assume_sorted: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let local = read(&as_list(offsets_local)?, "offsets_local")?;
    let remote = read(&as_list(offsets_remote)?, "offsets_remote")?;
    let sizes = as_list(sizes)?;
    let size = read(&sizes, "sizes")?;
    let n = local.len();
    if remote.len() != n || size.len() != n {
        return Err(PyValueError::new_err(format!(
            "merge_contiguous_blocks: offsets_local has {n} items, offsets_remote {}, sizes {}",
            remote.len(),
            size.len()
        )));
    }
    let sorted = assume_sorted || local.windows(2).all(|w| w.first() <= w.last());
    let [l, r, s] = match pages(&local, &remote, &size, sorted) {
        Some(m) => m?,
        None => by_rule(&local, &remote, &size, sorted)?,
    };
    // New ints, made in order (cheaper than taking the caller's objects in sorted order);
    // a size equal to the first block's is that block's own int object.
    let first = sizes.get_item(0).ok().filter(|o| o.is_exact_instance_of::<PyInt>());
    let common = first.as_ref().zip(size.first());
    let s = s.into_iter().map(|v| match common {
        Some((obj, &c)) if v == c => obj.clone(),
        _ => v.into_pyobject(py).map_or_else(|never| match never {}, Bound::into_any),
    });
    PyTuple::new(py, [PyList::new(py, l)?, PyList::new(py, r)?, PyList::new(py, s)?])
}

/// The merged lists: local offsets, remote offsets, sizes.
type Merged = [Vec<i64>; 3];

/// `obj` as a list (a list as it is; any other iterable read into one, as `np.fromiter`
/// reads it).
fn as_list<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    match obj.cast::<PyList>() {
        Ok(list) => Ok(list.clone()),
        Err(_) => Ok(PyList::new(obj.py(), obj.try_iter()?.collect::<PyResult<Vec<_>>>()?)?),
    }
}

/// The items of `list` as int64 (`name` in errors). An item that is the same object as
/// the one before (one size for every block, as MoRIIO's lists have it) is not read again.
fn read(list: &Bound<'_, PyList>, name: &str) -> PyResult<Vec<i64>> {
    let mut v: Vec<i64> = errors::try_vec(list.len(), name)?;
    // The item before, by address, and its value, when it was an exact int: reading one
    // runs no Python code, so nothing can have changed the list (and freed it) since.
    let mut last = (core::ptr::null_mut(), 0);
    for item in list.iter() {
        let exact = item.is_exact_instance_of::<PyInt>();
        let value = if exact && item.as_ptr() == last.0 {
            last.1
        } else {
            item.extract::<i64>().map_err(|e| {
                if e.is_instance_of::<PyOverflowError>(list.py()) {
                    PyOverflowError::new_err(format!("{name}: {item} does not fit int64"))
                } else {
                    e
                }
            })?
        };
        v.push(value);
        last = (if exact { item.as_ptr() } else { core::ptr::null_mut() }, value);
    }
    Ok(v)
}

/// The merge through corun's order-free grouping, when the blocks are pages: one positive
/// size, every offset a multiple of it, local offsets distinct (or sorted). `None`
/// otherwise.
fn pages(local: &[i64], remote: &[i64], size: &[i64], sorted: bool) -> Option<PyResult<Merged>> {
    let page = *size.first()?;
    if page <= 0 || size.iter().any(|&s| s != page) {
        return None;
    }
    // Page ids (a shift for the usual power-of-two page: a division costs more than
    // the rest of the merge).
    let ids = |v: &[i64]| -> Option<Vec<i64>> {
        let mut out = errors::try_vec(v.len(), "the page ids").ok()?;
        if page.count_ones() == 1 {
            let (shift, mask) = (page.trailing_zeros(), page - 1);
            for &x in v {
                (x & mask == 0).then(|| out.push(x >> shift))?;
            }
        } else {
            for &x in v {
                (x.rem_euclid(page) == 0).then(|| out.push(x.div_euclid(page)))?;
            }
        }
        Some(out)
    };
    let (mut l, mut r) = (ids(local)?, ids(remote)?);
    if !sorted {
        let zeros = || -> Option<Vec<i64>> {
            let mut v = errors::try_vec(l.len(), "the sorted page ids").ok()?;
            v.resize(l.len(), 0);
            Some(v)
        };
        let (mut ls, mut rs) = (zeros()?, zeros()?);
        // A repeated local offset is an error here: the stable sort of `by_rule` then.
        ::corun::sort_by_destination(&r, &l, &mut rs, &mut ls).ok()?;
        (l, r) = (ls, rs);
    }
    // The runs counted (one SIMD pass), then read as they are found: no list of them.
    let (runs, k) =
        match ::corun::runs(&l, &r).and_then(|runs| Ok((runs, ::corun::count_runs(&l, &r)?))) {
            Ok(found) => found,
            Err(e) => return Some(Err(errors::core(e))),
        };
    let mut out: Merged = [Vec::new(), Vec::new(), Vec::new()];
    for column in &mut out {
        if let Err(e) = errors::try_vec(k, "the merged blocks").map(|v| *column = v) {
            return Some(Err(e));
        }
    }
    let [ol, or, os] = &mut out;
    for span in runs {
        let (Some(&lid), Some(&rid)) = (l.get(span.start), r.get(span.start)) else { continue };
        // In bytes again: ids times the page are the given offsets; a merged size may not
        // fit (numpy's int64 would wrap there).
        let len = i64::try_from(span.len).ok().and_then(|len| len.checked_mul(page));
        let Some(len) = len else { return Some(Err(overflow())) };
        let (Some(lo), Some(ro)) = (lid.checked_mul(page), rid.checked_mul(page)) else {
            return Some(Err(overflow())); // cannot happen: these are the given offsets
        };
        ol.push(lo);
        or.push(ro);
        os.push(len);
    }
    Some(Ok(out))
}

/// MoRIIO's rule as written, for any sizes: a stable sort by local offset (unless
/// `sorted`), then the linear merge, in exact arithmetic.
fn by_rule(local: &[i64], remote: &[i64], size: &[i64], sorted: bool) -> PyResult<Merged> {
    let n = local.len();
    let mut order: Vec<usize> = errors::try_vec(n, "the sort order")?;
    order.extend(0..n);
    if !sorted {
        order.sort_by_key(|&i| local.get(i).copied());
    }
    let at = |v: &[i64], i: usize| i128::from(v.get(i).copied().unwrap_or(0));
    let joins = |prev: usize, i: usize| {
        let step = at(size, prev);
        at(local, i) - at(local, prev) == step && at(remote, i) - at(remote, prev) == step
    };
    let mut out: Merged = [Vec::new(), Vec::new(), Vec::new()];
    let mut k = 0;
    while let Some(&first) = order.get(k) {
        // The block `first` and every following one that joins its predecessor.
        let mut last = first;
        k += 1;
        while let Some(&i) = order.get(k).filter(|&&i| joins(last, i)) {
            last = i;
            k += 1;
        }
        let merged = at(local, last) + at(size, last) - at(local, first);
        let [ol, or, os] = &mut out;
        ol.push(local.get(first).copied().unwrap_or(0));
        or.push(remote.get(first).copied().unwrap_or(0));
        os.push(i64::try_from(merged).map_err(|_| overflow())?);
    }
    Ok(out)
}

fn overflow() -> PyErr {
    PyOverflowError::new_err("merge_contiguous_blocks: a merged offset or size does not fit int64")
}
