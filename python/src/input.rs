//! Python objects in: index arrays of every layout numpy hands out, per-layer values,
//! integer parameters and `direction=`, each checked, each error naming its parameter.
//!
//! An index array is read in place only when numpy's own array already is what a Rust
//! slice needs: one of the kernel's four dtypes, native byte order, aligned, contiguous.
//! Everything else (misaligned buffers, record fields, any stride, negative strides,
//! byte-swapped or narrower dtypes, lists) is copied by numpy's `ascontiguousarray`,
//! whose casting code reads every layout correctly, into a fresh aligned array. No view
//! of a pointer is ever built here: the slices come from rust-numpy, which hands one out
//! only for an aligned, contiguous array.

use std::borrow::Cow;

use ::corun::Direction;

use numpy::{
    Element, PyArray1, PyArrayDescr, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyOverflowError, PySystemError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBool, PyBytes, PyString};

use crate::errors;

/// The values of an index array, in the kernel type they are read as.
pub enum Values<'py> {
    U32(PyReadonlyArray1<'py, u32>),
    I32(PyReadonlyArray1<'py, i32>),
    U64(PyReadonlyArray1<'py, u64>),
    I64(PyReadonlyArray1<'py, i64>),
}

/// Runs `$body` with `$a` bound to the readonly array of whichever type `$values` holds:
/// the one dispatch over index types.
macro_rules! each_type {
    ($values:expr, |$a:ident| $body:expr) => {
        match $values {
            $crate::input::Values::U32($a) => $body,
            $crate::input::Values::I32($a) => $body,
            $crate::input::Values::U64($a) => $body,
            $crate::input::Values::I64($a) => $body,
        }
    };
}
pub(crate) use each_type;

/// A 1-D index array, aligned, contiguous and native (see the module doc).
pub struct Indices<'py> {
    pub values: Values<'py>,
    /// The parameter's name, for errors.
    pub name: &'static str,
    /// The caller's dtype when the values had to be converted to another (narrower
    /// integers, the other byte order): `runs` gives its starts back in it.
    pub own: Option<Bound<'py, PyArrayDescr>>,
}

impl Indices<'_> {
    pub fn len(&self) -> usize {
        each_type!(&self.values, |a| a.len())
    }

    /// The index at `position`, widened (for messages).
    pub fn value_at(&self, position: usize) -> Option<i128> {
        each_type!(&self.values, |a| elems(a).ok()?.get(position).map(|&v| i128::from(v)))
    }
}

/// The elements of an array [`indices`] made: always a slice (checked again, not assumed).
pub fn elems<'a, T: Element>(a: &'a PyReadonlyArray1<'_, T>) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| PySystemError::new_err("corun: an index array is not contiguous"))
}

/// `arr` as a readonly array of `T`, when it is one and a slice of it can be had.
fn in_place<'py, T: Element>(arr: &Bound<'py, PyAny>) -> Option<PyReadonlyArray1<'py, T>> {
    let a = arr.cast::<PyArray1<T>>().ok()?;
    let ro = a.try_readonly().ok()?;
    ro.as_slice().is_ok().then_some(ro)
}

/// The kernel type an integer dtype is read as: signed up to 4 bytes as int32, 8 as
/// int64; unsigned likewise as uint32 / uint64 (all exact).
fn target(kind: char, size: usize) -> Option<&'static str> {
    Some(match (kind, size) {
        ('i', 1..=4) => "int32",
        ('i', 8) => "int64",
        ('u', 1..=4) => "uint32",
        ('u', 8) => "uint64",
        _ => return None,
    })
}

/// `obj` as a 1-D index array: numpy arrays of any integer dtype and layout, numpy's
/// array-likes, and sequences of Python ints. Non-integer dtypes and objects that are not
/// sequences are a `TypeError`; arrays other than 1-D a `ValueError`.
pub fn indices<'py>(obj: &Bound<'py, PyAny>, name: &'static str) -> PyResult<Indices<'py>> {
    // The common case first: aligned, contiguous and native already (a type check).
    if let Some(a) = in_place::<i32>(obj) {
        return Ok(Indices { values: Values::I32(a), name, own: None });
    }
    if let Some(a) = in_place::<i64>(obj) {
        return Ok(Indices { values: Values::I64(a), name, own: None });
    }
    if let Some(a) = in_place::<u32>(obj) {
        return Ok(Indices { values: Values::U32(a), name, own: None });
    }
    if let Some(a) = in_place::<u64>(obj) {
        return Ok(Indices { values: Values::U64(a), name, own: None });
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let is_array = obj.cast::<PyUntypedArray>().is_ok();
    let arr = if is_array {
        obj.clone()
    } else {
        let generic = np.getattr("generic")?;
        if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
            return Err(not_a_sequence(obj, name));
        }
        let arr = np.getattr("asarray")?.call1((obj,))?;
        let ndim: usize = arr.getattr("ndim")?.extract()?;
        if ndim == 0 && !obj.is_instance(&generic)? {
            return Err(not_a_sequence(obj, name));
        }
        let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
        if ndim == 1 && matches!(kind.as_str(), "f" | "O") && arr.len()? > 0 {
            // numpy makes float64 of `[-1, 2**63]` and objects of `[2**64]`: say which
            // entry cannot be an index, or make the exact array.
            from_ints(&np, obj, name)?
        } else {
            arr
        }
    };
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "{name} must be a 1-D array of indices, got a {ndim}-D array"
        )));
    }
    let dtype = arr.getattr("dtype")?.cast_into::<PyArrayDescr>()?;
    let len = arr.len()?;
    let to = match target(dtype.kind() as char, dtype.itemsize()) {
        Some(to) => to,
        // An empty list becomes a float64 array: it is still no indices.
        None if len == 0 && !is_array => "int64",
        None => {
            return Err(PyTypeError::new_err(format!(
                "{name} must hold integer indices, got dtype {}",
                dtype.str()?
            )));
        }
    };
    // A fresh array (a list's, say) may be usable as it is; anything else is copied, and
    // numpy's copies are aligned and contiguous (`ascontiguousarray` is not enough: it
    // returns a contiguous but misaligned array as it is).
    let usable = match to {
        "int32" => in_place::<i32>(&arr).map(Values::I32),
        "int64" => in_place::<i64>(&arr).map(Values::I64),
        "uint32" => in_place::<u32>(&arr).map(Values::U32),
        _ => in_place::<u64>(&arr).map(Values::U64),
    };
    if let Some(values) = usable {
        return Ok(Indices { values, name, own: None });
    }
    let kwargs = [("dtype", to), ("order", "C")].into_py_dict(py)?;
    kwargs.set_item("copy", true)?;
    let copy = np.getattr("array")?.call((&arr,), Some(&kwargs)).map_err(|e| {
        let bytes = len as u128 * if to.ends_with("32") { 4 } else { 8 };
        errors::wrap_memory(
            py,
            e,
            &format!("a contiguous copy of {name}: {len} {to} indices, {bytes} bytes"),
        )
    })?;
    let own = (!is_same(&dtype, &copy)? && is_array).then_some(dtype);
    let values = match to {
        "int32" => Values::I32(readonly(&copy, name)?),
        "int64" => Values::I64(readonly(&copy, name)?),
        "uint32" => Values::U32(readonly(&copy, name)?),
        _ => Values::U64(readonly(&copy, name)?),
    };
    Ok(Indices { values, name, own })
}

fn is_same(dtype: &Bound<'_, PyArrayDescr>, copy: &Bound<'_, PyAny>) -> PyResult<bool> {
    let theirs = copy.getattr("dtype")?.cast_into::<PyArrayDescr>()?;
    Ok(dtype.is_equiv_to(&theirs))
}

fn readonly<'py, T: Element>(
    copy: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    in_place(copy).ok_or_else(|| {
        PySystemError::new_err(format!("corun: the contiguous copy of {name} is not readable"))
    })
}

fn not_a_sequence(obj: &Bound<'_, PyAny>, name: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{name} must be a 1-D array or a sequence of integer indices, got {}",
        type_name(obj)
    ))
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an object".into())
}

/// A short `repr` of `obj` for a message.
pub fn short_repr(obj: &Bound<'_, PyAny>) -> String {
    let r = obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    if r.chars().count() <= 60 {
        return r;
    }
    let head: String = r.chars().take(57).collect();
    format!("{head}...")
}

/// A sequence of Python ints as an exact int64 or uint64 array, or the error naming the
/// entry that is not an int or does not fit the others.
fn from_ints<'py>(
    np: &Bound<'py, PyModule>,
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (mut negative, mut high) = (None, None);
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let v = int_value(&item).map_err(|e| match e {
            IntError::NotInt => PyTypeError::new_err(format!(
                "{name}[{i}] must be an integer index, got {}",
                short_repr(&item)
            )),
            IntError::Huge => PyValueError::new_err(format!(
                "{name}[{i}] = {} does not fit in 64 bits",
                short_repr(&item)
            )),
        })?;
        if !(-(1i128 << 63)..1i128 << 64).contains(&v) {
            return Err(PyValueError::new_err(format!(
                "{name}[{i}] = {v} does not fit in 64 bits (int64 or uint64)"
            )));
        }
        if v < 0 {
            negative.get_or_insert((i, v));
        } else if v >= 1 << 63 {
            high.get_or_insert((i, v));
        }
    }
    if let (Some((i, v)), Some((j, w))) = (negative, high) {
        return Err(PyValueError::new_err(format!(
            "{name} mixes a negative index ({name}[{i}] = {v}) with one from 2**63 \
             ({name}[{j}] = {w}): no 64-bit integer type holds both"
        )));
    }
    let to = if high.is_some() { "uint64" } else { "int64" };
    np.getattr("array")?.call1((obj, to))
}

enum IntError {
    NotInt,
    Huge,
}

/// An int (or anything with `__index__`, but not a bool) as an `i128`.
fn int_value(obj: &Bound<'_, PyAny>) -> Result<i128, IntError> {
    if obj.is_instance_of::<PyBool>() {
        return Err(IntError::NotInt);
    }
    match obj.extract::<i128>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Err(IntError::Huge),
        Err(_) => Err(IntError::NotInt),
    }
}

/// An integer parameter in `lo..=hi` (`range`: how the message writes that range).
pub fn int_param(
    obj: &Bound<'_, PyAny>,
    name: &str,
    lo: i128,
    hi: i128,
    range: &str,
) -> PyResult<i128> {
    match int_value(obj) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        Ok(_) | Err(IntError::Huge) => Err(PyValueError::new_err(format!(
            "{name} must be in {range}, got {}",
            short_repr(obj)
        ))),
        Err(IntError::NotInt) => Err(PyTypeError::new_err(format!(
            "{name} must be an int, got {} {}",
            type_name(obj),
            short_repr(obj)
        ))),
    }
}

/// A `u64` parameter: `0..2**64`.
pub fn u64_param(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
    let v = int_param(obj, name, 0, u64::MAX.into(), "0..2**64")?;
    u64::try_from(v).map_err(|_| PyValueError::new_err(format!("{name} must be in 0..2**64")))
}

/// One `u64` per layer, from a sequence of ints or an integer array of any layout.
pub fn per_layer(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Vec<u64>> {
    if obj.cast::<PyUntypedArray>().is_ok() {
        let idx = indices(obj, name)?;
        let n = idx.len();
        let mut out = errors::try_vec::<u64>(n, name)?;
        each_type!(&idx.values, |a| {
            for (i, &v) in elems(a)?.iter().enumerate() {
                let v = i128::from(v);
                let v = u64::try_from(v).map_err(|_| {
                    PyValueError::new_err(format!("{name}[{i}] = {v} is not in 0..2**64"))
                })?;
                out.push(v);
            }
        });
        return Ok(out);
    }
    let not_a_sequence = || {
        PyTypeError::new_err(format!(
            "{name} must be a sequence of ints, one per layer buffer, got {}",
            type_name(obj)
        ))
    };
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(not_a_sequence());
    }
    let items = obj.try_iter().map_err(|_| not_a_sequence())?;
    let mut out = errors::try_vec::<u64>(obj.len().unwrap_or(0), name)?;
    for (i, item) in items.enumerate() {
        let item = item?;
        let v = match int_value(&item) {
            Ok(v) => v,
            Err(IntError::Huge) => i128::MAX,
            Err(IntError::NotInt) => {
                return Err(PyTypeError::new_err(format!(
                    "{name}[{i}] must be an int, got {}",
                    short_repr(&item)
                )));
            }
        };
        let v = u64::try_from(v).map_err(|_| {
            PyValueError::new_err(format!("{name}[{i}] = {} is not in 0..2**64", short_repr(&item)))
        })?;
        out.try_reserve(1).map_err(|_| errors::memory(name, out.len() + 1, 8))?;
        out.push(v);
    }
    Ok(out)
}

/// What a converted pair must keep: the values themselves (for addresses), or only
/// which neighbours step by one (for runs, which a translation does not change).
#[derive(Clone, Copy, PartialEq)]
pub enum Keep {
    Values,
    Runs,
    /// Values that are pages, not addresses (placement): only the error differs.
    Pages,
}

/// Two index arrays as slices of one type, borrowed when their types agree.
pub enum Pair<'a> {
    U32(Cow<'a, [u32]>, Cow<'a, [u32]>),
    I32(Cow<'a, [i32]>, Cow<'a, [i32]>),
    U64(Cow<'a, [u64]>, Cow<'a, [u64]>),
    I64(Cow<'a, [i64]>, Cow<'a, [i64]>),
}

/// `f` over `a`, into a vector allocated fallibly.
fn map<T: Copy, U>(a: &[T], f: impl Fn(T) -> U, name: &str) -> PyResult<Cow<'static, [U]>>
where
    U: Clone,
{
    let mut v = errors::try_vec::<U>(a.len(), &format!("a converted copy of {name}"))?;
    v.extend(a.iter().map(|&x| f(x)));
    Ok(Cow::Owned(v))
}

/// `src` and `dst` in one index type. Arrays of different types are converted exactly:
/// to int64 (uint32 and the signed types), or to uint64 (uint32 with uint64, or a signed
/// array without negatives with uint64 values past int64). The one pair with no common
/// type, uint64 values from 2**63 with negative ones, becomes int64 with the uint64 side
/// moved down by 2**63 (its top bit flipped: same runs) when only runs are wanted, and a
/// `ValueError` naming the first negative index when values are.
pub fn pair<'a>(src: &'a Indices<'_>, dst: &'a Indices<'_>, keep: Keep) -> PyResult<Pair<'a>> {
    use Values::*;
    // `flip` is XORed into uint64 values: 0 where they fit (exact), 2**63 to translate.
    let to_i64 = |i: &'a Indices<'_>, flip: u64| -> PyResult<Cow<'a, [i64]>> {
        match &i.values {
            U32(a) => map(elems(a)?, i64::from, i.name),
            I32(a) => map(elems(a)?, i64::from, i.name),
            I64(a) => Ok(Cow::Borrowed(elems(a)?)),
            U64(a) => map(elems(a)?, |x| (x ^ flip) as i64, i.name),
        }
    };
    let to_u64 = |i: &'a Indices<'_>| -> PyResult<Cow<'a, [u64]>> {
        match &i.values {
            U32(a) => map(elems(a)?, u64::from, i.name),
            // Only called without negatives.
            I32(a) => map(elems(a)?, |x| x as u64, i.name),
            I64(a) => map(elems(a)?, |x| x as u64, i.name),
            U64(a) => Ok(Cow::Borrowed(elems(a)?)),
        }
    };
    let fits_i64 = |i: &Indices<'_>| -> PyResult<bool> {
        Ok(match &i.values {
            U64(a) => elems(a)?.iter().all(|&x| x <= i64::MAX as u64),
            _ => true,
        })
    };
    Ok(match (&src.values, &dst.values) {
        (U32(a), U32(b)) => Pair::U32(Cow::Borrowed(elems(a)?), Cow::Borrowed(elems(b)?)),
        (I32(a), I32(b)) => Pair::I32(Cow::Borrowed(elems(a)?), Cow::Borrowed(elems(b)?)),
        (U64(a), U64(b)) => Pair::U64(Cow::Borrowed(elems(a)?), Cow::Borrowed(elems(b)?)),
        (I64(a), I64(b)) => Pair::I64(Cow::Borrowed(elems(a)?), Cow::Borrowed(elems(b)?)),
        (U64(_), U32(_)) | (U32(_), U64(_)) => Pair::U64(to_u64(src)?, to_u64(dst)?),
        _ if fits_i64(src)? && fits_i64(dst)? => Pair::I64(to_i64(src, 0)?, to_i64(dst, 0)?),
        _ => match first_negative(src)?.or(first_negative(dst)?) {
            None => Pair::U64(to_u64(src)?, to_u64(dst)?),
            Some(_) if keep == Keep::Runs => {
                Pair::I64(to_i64(src, 1 << 63)?, to_i64(dst, 1 << 63)?)
            }
            Some((side, at, v)) => {
                let other = if side == src.name { dst.name } else { src.name };
                return Err(PyValueError::new_err(if keep == Keep::Pages {
                    format!(
                        "{side}[{at}] = {v} is negative and {other} holds uint64 pages from \
                         2**63: {} and {} have no common index type",
                        src.name, dst.name
                    )
                } else {
                    format!(
                        "negative index at position {at}: {side}[{at}] = {v} has no address \
                         ({other} holds uint64 indices from 2**63, so src and dst have no \
                         common index type either)"
                    )
                }));
            }
        },
    })
}

/// The first negative index of a signed array: its name, position and value.
fn first_negative(i: &Indices<'_>) -> PyResult<Option<(&'static str, usize, i64)>> {
    fn find<T: Copy + Into<i64>>(s: &[T]) -> Option<(usize, i64)> {
        s.iter().enumerate().map(|(p, &x)| (p, x.into())).find(|&(_, v)| v < 0)
    }
    let found = match &i.values {
        Values::I32(a) => find(elems(a)?),
        Values::I64(a) => find(elems(a)?),
        _ => None,
    };
    Ok(found.map(|(p, v)| (i.name, p, v)))
}

/// Runs `$body` with `$s`, `$d` the slices of [`pair`]`($src, $dst, $keep)`.
macro_rules! with_slices {
    ($src:expr, $dst:expr, $keep:expr, |$s:ident, $d:ident| $body:expr) => {{
        match $crate::input::pair($src, $dst, $keep)? {
            $crate::input::Pair::U32($s, $d) => $body,
            $crate::input::Pair::I32($s, $d) => $body,
            $crate::input::Pair::U64($s, $d) => $body,
            $crate::input::Pair::I64($s, $d) => $body,
        }
    }};
}
pub(crate) use with_slices;

/// A `direction=` argument: the str `"ascending"` (SGLang's runs) or `"either"` (runs
/// may also descend on both sides, as vLLM's recycled blocks do). Anything else is an
/// error that names the parameter (pyo3's own extraction error does not): `ValueError`
/// for another str, `TypeError` for another type (`None`, `1`, `b"either"`).
pub struct DirectionArg(pub Direction);

/// The default of `runs` and `transfer_descriptors`.
pub const ASCENDING: DirectionArg = DirectionArg(Direction::Ascending);
/// The default of `place`.
pub const EITHER: DirectionArg = DirectionArg(Direction::Either);

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

/// An optional positive cap (`max_len`, `max_bytes`): absent or `None`, else an int in
/// `1..=hi` (`range`: how the message writes that range) made a `T` by `make`.
pub fn cap<T>(
    obj: Option<&Bound<'_, PyAny>>,
    name: &str,
    hi: i128,
    range: &str,
    make: impl Fn(i128) -> Option<T>,
) -> PyResult<Option<T>> {
    let Some(m) = obj.filter(|m| !m.is_none()) else { return Ok(None) };
    let m = int_param(m, name, 1, hi, range)?;
    match make(m) {
        Some(v) => Ok(Some(v)),
        None => Err(PyValueError::new_err(format!("{name} must be in {range}"))),
    }
}
