//! corun's errors as Python exceptions (each naming the parameter it comes from), and
//! the fallible allocations of the binding.
//!
//! Every allocation whose size an input sets is made here or by numpy, and fails as a
//! `MemoryError` that names what was being built and how big: never an abort (Rust's
//! infallible `Vec` growth) and never a panic (a null array pointer).

use ::corun::desc;
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;

/// The `MemoryError` for `count` items of `size` bytes of `what`.
pub fn memory(what: &str, count: usize, size: usize) -> PyErr {
    let bytes = (count as u128) * (size as u128);
    PyMemoryError::new_err(format!(
        "corun: cannot allocate {what}: {count} items of {size} bytes ({bytes} bytes)"
    ))
}

/// An empty vector with room for exactly `n` items, or a `MemoryError` naming `what`.
pub fn try_vec<T>(n: usize, what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| memory(what, n, size_of::<T>()))?;
    Ok(v)
}

/// `e`, or when numpy or CPython ran out of memory, a `MemoryError` that says what corun
/// was building (numpy's own message follows as the cause).
pub fn wrap_memory(py: Python<'_>, e: PyErr, what: &str) -> PyErr {
    if !e.is_instance_of::<PyMemoryError>(py) {
        return e;
    }
    let ours = PyMemoryError::new_err(format!("corun: cannot allocate {what}"));
    ours.set_cause(py, Some(e));
    ours
}

/// A grouping error (`corun::Error`) as a Python exception.
pub fn core(e: ::corun::Error) -> PyErr {
    match e {
        ::corun::Error::Alloc { spans } => memory("the runs", spans, size_of::<::corun::Span>()),
        e => PyValueError::new_err(e.to_string()),
    }
}

/// The `ValueError` for `src`/`dst` of different lengths, in SGLang's helper's words.
pub fn mismatch(func: &str, src: usize, dst: usize) -> PyErr {
    PyValueError::new_err(format!(
        "{func} requires equal-length src/dst index arrays, got {src} and {dst}"
    ))
}

/// A `sort_by_destination` error: a repeated destination names both positions.
pub fn sort(e: ::corun::Error) -> PyErr {
    match e {
        ::corun::Error::DuplicateDestination { first, second } => PyValueError::new_err(format!(
            "dst[{first}] and dst[{second}] are the same page: order-free grouping needs \
             distinct destinations"
        )),
        e => core(e),
    }
}

/// A descriptor error as a Python exception naming the parameter it comes from.
/// `negative_at(position)` names the index array holding a negative value at a failing
/// position, and the value (a closure, so that this module knows nothing of how the
/// binding holds its inputs: `input` builds on this module, not the other way round).
/// Python gets nothing
/// back from a failed call, so unlike the Rust and C messages these do not count the
/// outputs written before the failure.
pub fn descriptor(
    e: desc::Error,
    negative_at: impl Fn(usize) -> Option<(&'static str, i128)>,
) -> PyErr {
    match e {
        desc::Error::NegativeIndex { layer, position, .. } => {
            let (side, v) = negative_at(position).unwrap_or(("src", -1));
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
            memory("the descriptors", items, size_of::<desc::Descriptor>())
        }
        e => PyValueError::new_err(e.to_string()),
    }
}
