//! corun's errors as Python exceptions, and the fallible allocations of the binding.
//!
//! Every allocation whose size an input sets is made here or by numpy, and fails as a
//! `MemoryError` that names what was being built and how big: never an abort (Rust's
//! infallible `Vec` growth) and never a panic (a null array pointer).

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
