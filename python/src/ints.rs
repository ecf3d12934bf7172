//! Python ints and lists made without a Python call per element.
//!
//! Making Python ints is what lists of indices cost: numpy's `tolist` spends about 20 ns
//! on each. Page indices are bounded by the pool size and recur from call to call, so
//! [`Ints`] keeps one int object per index value in a process-wide table and hands out
//! new references to it (ints are immutable: one object can stand in every list that
//! holds its value). Lengths (`item_len x pages`) take few values in one call, so
//! [`Memo`] keeps the last few made.
//!
//! Memory: the table covers the values `0..TABLE` (2**20): 8 MiB of pointers, which the
//! OS maps only where written, plus about 32 bytes per int object made, 32 MiB at the
//! very most; made objects live as long as the process. `CORUN_INT_CACHE=N`, read once
//! when the module is imported, lowers the bound to `N` values (`0` turns the table off);
//! a value that is not a whole number from 0 to 2**20 is a `ValueError` at import.
//!
//! Threads: a slot is an `AtomicPtr`, filled once by compare-and-swap (a thread that
//! loses the race drops its own object and uses the winner's), and handing out a
//! reference is `Py_INCREF` with the thread attached to the interpreter. That is safe on
//! the GIL build and on free-threaded CPython, where reference counts are atomic for
//! objects shared between threads. (Not run on a free-threaded interpreter here: none
//! is installed on these machines.)
//!
//! This is where Python pointers enter, so this is one of the two places in corun with
//! `unsafe` code (the other is the C ABI).

use std::ptr::null_mut;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;

/// Values `0..TABLE` can be kept in the process-wide table.
const TABLE: usize = 1 << 20;

static SLOTS: [AtomicPtr<ffi::PyObject>; TABLE] = [const { AtomicPtr::new(null_mut()) }; TABLE];

static LIMIT: OnceLock<usize> = OnceLock::new();

/// The bound in force: `TABLE`, or lower by `CORUN_INT_CACHE` (set by [`configure`]).
#[inline(always)]
fn limit() -> usize {
    LIMIT.get().copied().unwrap_or(TABLE)
}

/// Reads `CORUN_INT_CACHE`, once, when the module is imported: a whole number of values
/// from 0 to 2**20 (0 turns the table off); set but empty (`CORUN_INT_CACHE=`, the shell's
/// way of clearing a variable) is the default, as unset. Anything else is a `ValueError`
/// at import naming the value, rather than a table of a size nobody asked for.
pub fn configure() -> PyResult<()> {
    let value = match std::env::var("CORUN_INT_CACHE") {
        Err(std::env::VarError::NotPresent) => TABLE,
        Ok(v) if v.trim().is_empty() => TABLE,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n <= TABLE && !v.trim().starts_with('+') => n,
            _ => return Err(cache_error(&format!("{v:?}"))),
        },
        Err(std::env::VarError::NotUnicode(v)) => return Err(cache_error(&format!("{v:?}"))),
    };
    // A second import in the same process (a reload) keeps the first value.
    let _ = LIMIT.set(value);
    Ok(())
}

fn cache_error(got: &str) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(format!(
        "CORUN_INT_CACHE must be a whole number of values from 0 to {TABLE} (0 turns the \
         shared int table off), got {got}"
    ))
}

/// An integer value that becomes a Python int.
pub trait ToInt: Copy {
    /// A new reference to an int of this value, or null with a Python error set.
    ///
    /// # Safety
    /// The thread must be attached to the interpreter.
    unsafe fn to_int(self) -> *mut ffi::PyObject;
}

/// A new reference to the int `v`, shared through the table when `v` is in its range.
///
/// # Safety
/// The thread must be attached to the interpreter.
#[inline(always)]
unsafe fn shared(v: u64) -> *mut ffi::PyObject {
    let Some(slot) = usize::try_from(v).ok().filter(|&i| i < limit()).and_then(|i| SLOTS.get(i))
    else {
        return unsafe { new_int(v) };
    };
    let obj = slot.load(Ordering::Acquire);
    if obj.is_null() {
        return unsafe { first(slot, v) };
    }
    unsafe { ffi::Py_INCREF(obj) };
    obj
}

/// [`shared`] for a value whose slot is empty: makes the int and keeps it in the slot.
///
/// # Safety
/// As [`shared`].
#[cold]
#[inline(never)]
unsafe fn first(slot: &AtomicPtr<ffi::PyObject>, v: u64) -> *mut ffi::PyObject {
    let made = unsafe { new_int(v) };
    if made.is_null() {
        return made;
    }
    // The table keeps the reference `made` came with; the caller gets another below.
    let obj = match slot.compare_exchange(null_mut(), made, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => made,
        Err(winner) => {
            unsafe { ffi::Py_DECREF(made) };
            winner
        }
    };
    unsafe { ffi::Py_INCREF(obj) };
    obj
}

/// A new int of value `v`. CPython 3.11's signed constructor has a fast path for values
/// of one digit (below 2**30) that its unsigned one lacks: with it,
/// `group_concurrent_contiguous` at 100% breaks (most source ints made fresh) was about 2%
/// faster, side by side.
///
/// # Safety
/// The thread must be attached to the interpreter.
#[inline(always)]
unsafe fn new_int(v: u64) -> *mut ffi::PyObject {
    match i64::try_from(v) {
        Ok(v) => unsafe { ffi::PyLong_FromLongLong(v) },
        Err(_) => unsafe { ffi::PyLong_FromUnsignedLongLong(v) },
    }
}

macro_rules! to_int {
    ($($t:ty),*) => {$(
        impl ToInt for $t {
            #[inline]
            unsafe fn to_int(self) -> *mut ffi::PyObject {
                match u64::try_from(self) {
                    Ok(v) => unsafe { shared(v) },
                    Err(_) => unsafe { ffi::PyLong_FromLongLong(self as i64) },
                }
            }
        }
    )*};
}
to_int!(u32, i32, u64, i64);

/// The last few distinct values made into ints in one call (lengths take few values),
/// direct-mapped by a hash of the value. Holds a reference to each until dropped.
pub struct Memo {
    slots: [(u64, *mut ffi::PyObject); 64],
}

impl Memo {
    pub fn new() -> Self {
        Memo { slots: [(0, null_mut()); 64] }
    }

    /// A new reference to an int of value `v`, or null with a Python error set.
    ///
    /// # Safety
    /// The thread must be attached to the interpreter.
    #[inline]
    pub unsafe fn get(&mut self, v: u64) -> *mut ffi::PyObject {
        let i = (v.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize;
        let slot = &mut self.slots[i];
        if slot.0 != v || slot.1.is_null() {
            let made = unsafe { new_int(v) };
            if made.is_null() {
                return made;
            }
            if !slot.1.is_null() {
                unsafe { ffi::Py_DECREF(slot.1) };
            }
            *slot = (v, made);
        }
        unsafe { ffi::Py_INCREF(slot.1) };
        slot.1
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        // Made only while attached, and a `Memo` never leaves the call that made it.
        for &(_, obj) in &self.slots {
            if !obj.is_null() {
                unsafe { ffi::Py_DECREF(obj) };
            }
        }
    }
}

/// A new list of a known length, filled in order without a Python call per item.
///
/// The list is handed out only by [`finish`](Self::finish), once every item is set; an
/// error before that drops it (a list whose items are not all set yet frees correctly,
/// and no Python code has seen it).
pub struct ListBuilder<'py> {
    list: Bound<'py, PyAny>,
    len: usize,
    filled: usize,
}

impl<'py> ListBuilder<'py> {
    #[inline]
    pub fn new(py: Python<'py>, len: usize) -> PyResult<Self> {
        let n = ffi::Py_ssize_t::try_from(len)
            .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("list too long"))?;
        // SAFETY: attached (we hold `py`); `PyList_New` returns a new reference or null
        // with an error set.
        let list = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyList_New(n))? };
        Ok(ListBuilder { list, len, filled: 0 })
    }

    /// Sets the next item to `obj`, a new reference or null with a Python error set.
    ///
    /// Inlined into the loops that fill lists: out of line, a call per item and its
    /// `PyResult` through memory cost as much as the item (the errors stay out of line).
    ///
    /// # Safety
    /// `obj` is null or a valid object pointer whose reference the list takes over.
    #[inline(always)]
    unsafe fn push_raw(&mut self, obj: *mut ffi::PyObject) -> PyResult<()> {
        if obj.is_null() || self.filled == self.len {
            return Err(unsafe { self.refuse(obj) });
        }
        // SAFETY: in range, set once, on a new list no other code has seen: what
        // `PyList_SET_ITEM` requires.
        unsafe { ffi::PyList_SET_ITEM(self.list.as_ptr(), self.filled as ffi::Py_ssize_t, obj) };
        self.filled += 1;
        Ok(())
    }

    /// The error for an item `push_raw` cannot take: the Python error set with a null
    /// `obj`, or a full list (then `obj`'s reference is dropped).
    ///
    /// # Safety
    /// As `push_raw`.
    #[cold]
    #[inline(never)]
    unsafe fn refuse(&self, obj: *mut ffi::PyObject) -> PyErr {
        if obj.is_null() {
            return PyErr::fetch(self.list.py());
        }
        unsafe { ffi::Py_DECREF(obj) };
        pyo3::exceptions::PySystemError::new_err("corun: list overfilled")
    }

    /// Sets the next item to the int `v` (shared through the table when it can be).
    #[inline]
    pub fn push_int(&mut self, v: impl ToInt) -> PyResult<()> {
        // SAFETY: attached (the builder holds a `Bound`); `to_int` gives a new reference.
        unsafe { self.push_raw(v.to_int()) }
    }

    /// Sets the next item to the int `v`, through `memo`.
    #[inline]
    pub fn push_memo(&mut self, memo: &mut Memo, v: u64) -> PyResult<()> {
        // SAFETY: as `push_int`.
        unsafe { self.push_raw(memo.get(v)) }
    }

    /// Sets the next item to `obj`.
    #[inline]
    pub fn push(&mut self, obj: Bound<'py, PyAny>) -> PyResult<()> {
        // SAFETY: `into_ptr` hands over a valid, owned reference.
        unsafe { self.push_raw(obj.into_ptr()) }
    }

    /// The list, once every item is set.
    #[inline]
    pub fn finish(self) -> PyResult<Bound<'py, PyAny>> {
        if self.filled != self.len {
            return Err(pyo3::exceptions::PySystemError::new_err("corun: list not filled"));
        }
        Ok(self.list)
    }
}

/// The ints of `values`, as a new list.
pub fn int_list<'py, T: ToInt>(py: Python<'py>, values: &[T]) -> PyResult<Bound<'py, PyAny>> {
    let mut list = ListBuilder::new(py, values.len())?;
    for &v in values {
        list.push_int(v)?;
    }
    list.finish()
}
