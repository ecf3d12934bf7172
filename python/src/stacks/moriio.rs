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
//! not pages) by the local side and the concurrent runs, both through `compute` (with
//! the GIL released, by its rule, for large transfers). Any other input (several sizes,
//! an offset off the grid, a local offset twice) takes a stable sort and the rule as
//! written, in exact arithmetic: where numpy's int64 would wrap, this is an
//! `OverflowError`.
//!
//! The time vLLM's version spends is mostly in reading and building Python lists
//! (`np.fromiter`, `tolist`); here both are one pass of CPython's own calls, and nothing
//! goes through numpy.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyList, PyTuple};

use ::corun::Direction;

use crate::{compute, errors};

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
    let local = read(&as_list(offsets_local, "offsets_local")?, "offsets_local")?;
    let remote = read(&as_list(offsets_remote, "offsets_remote")?, "offsets_remote")?;
    let sizes = as_list(sizes, "sizes")?;
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
    let [l, r, s] = match pages(py, &local, &remote, &size, sorted)? {
        Some(merged) => merged,
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
/// reads it). Not iterable is a `TypeError` naming the parameter (`name`); an error
/// raised by the iterable itself passes through as it is.
fn as_list<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyList>> {
    if let Ok(list) = obj.cast::<PyList>() {
        return Ok(list.clone());
    }
    let items = obj.try_iter().map_err(|e| {
        let what = obj.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string());
        let ours = PyTypeError::new_err(format!(
            "merge_contiguous_blocks: {name} must be a list or an iterable of ints, got {what}"
        ));
        ours.set_cause(obj.py(), Some(e));
        ours
    })?;
    PyList::new(obj.py(), items.collect::<PyResult<Vec<_>>>()?)
}

/// The items of `list` as int64 (`name` in errors). An item that is the same object as
/// the one before (one size for every block, as MoRIIO's lists have it) is not read again.
fn read(list: &Bound<'_, PyList>, name: &str) -> PyResult<Vec<i64>> {
    let mut v: Vec<i64> = errors::try_vec(list.len(), name)?;
    // The item before, by address, and its value, when it was an exact int: reading one
    // runs no Python code, so nothing can have changed the list (and freed it) since.
    let mut last = (core::ptr::null_mut(), 0);
    for (i, item) in list.iter().enumerate() {
        let exact = item.is_exact_instance_of::<PyInt>();
        let value = if exact && item.as_ptr() == last.0 {
            last.1
        } else {
            item.extract::<i64>().map_err(|e| {
                let py = list.py();
                let ours = if e.is_instance_of::<PyOverflowError>(py) {
                    PyOverflowError::new_err(format!(
                        "merge_contiguous_blocks: {name}[{i}] = {item} does not fit int64"
                    ))
                } else if e.is_instance_of::<PyTypeError>(py) {
                    PyTypeError::new_err(format!(
                        "merge_contiguous_blocks: {name}[{i}] = {} is not an int",
                        item.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                    ))
                } else {
                    return e;
                };
                ours.set_cause(py, Some(e));
                ours
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
fn pages(
    py: Python<'_>,
    local: &[i64],
    remote: &[i64],
    size: &[i64],
    sorted: bool,
) -> PyResult<Option<Merged>> {
    let Some(&page) = size.first().filter(|&&p| p > 0 && size.iter().all(|&s| s == p)) else {
        return Ok(None);
    };
    // Page ids (a shift for the usual power-of-two page: a division costs more than
    // the rest of the merge); `None` for an offset off the page grid.
    let ids = |v: &[i64]| -> PyResult<Option<Vec<i64>>> {
        let mut out = errors::try_vec(v.len(), "the page ids")?;
        let (pow2, shift, mask) = (page.count_ones() == 1, page.trailing_zeros(), page - 1);
        for &x in v {
            let id = if pow2 {
                (x & mask == 0).then_some(x >> shift)
            } else {
                (x.rem_euclid(page) == 0).then(|| x.div_euclid(page))
            };
            let Some(id) = id else { return Ok(None) };
            out.push(id);
        }
        Ok(Some(out))
    };
    let (Some(mut l), Some(mut r)) = (ids(local)?, ids(remote)?) else { return Ok(None) };
    if !sorted {
        let zeros = || -> PyResult<Vec<i64>> {
            let mut v = errors::try_vec(l.len(), "the sorted page ids")?;
            v.resize(l.len(), 0); // within the capacity just reserved
            Ok(v)
        };
        let (mut ls, mut rs) = (zeros()?, zeros()?);
        // A repeated local offset is an error here: the stable sort of `by_rule` then.
        if compute::sort_by_destination(py, &r, &l, &mut rs, &mut ls).is_err() {
            return Ok(None);
        }
        (l, r) = (ls, rs);
    }
    let spans = compute::spans(py, &compute::grouper(Direction::Ascending, None), &l, &r)
        .map_err(errors::core)?;
    let mut out: Merged = [
        errors::try_vec(spans.len(), "the merged blocks")?,
        errors::try_vec(spans.len(), "the merged blocks")?,
        errors::try_vec(spans.len(), "the merged blocks")?,
    ];
    let [ol, or, os] = &mut out;
    // In bytes again: ids times the page are the given offsets; a merged size may not
    // fit (numpy's int64 would wrap there).
    let bytes = |v: i64| v.checked_mul(page).ok_or_else(overflow);
    for span in spans {
        let (Some(&lid), Some(&rid)) = (l.get(span.start), r.get(span.start)) else { continue };
        ol.push(bytes(lid)?);
        or.push(bytes(rid)?);
        os.push(bytes(i64::try_from(span.len).map_err(|_| overflow())?)?);
    }
    Ok(Some(out))
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
