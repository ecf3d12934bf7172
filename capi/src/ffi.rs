//! The one place with `unsafe`: C pointers and lengths into Rust slices, after every
//! check that can be made on them (NULL, alignment, size, overlap).

use core::mem::{align_of, offset_of, size_of};

use corun::Span;
use corun::desc::{Descriptor, Layer, Sge, WorkRequest};

use super::types::{
    corun_descriptor, corun_layer, corun_sge, corun_span, corun_status, corun_work_request,
};

/// A C struct and the corun type it is read or written as, field for field.
macro_rules! same_layout {
    ($c:ty, $r:ty, $($f:ident),*) => {
        const _: () = {
            assert!(size_of::<$c>() == size_of::<$r>());
            assert!(align_of::<$c>() == align_of::<$r>());
            $(assert!(offset_of!($c, $f) == offset_of!($r, $f));)*
        };
    };
}
same_layout!(corun_span, Span, start, len);
same_layout!(corun_layer, Layer, src_base, dst_base, item_len, src_stride, dst_stride);
same_layout!(corun_descriptor, Descriptor, src_addr, dst_addr, len);
same_layout!(corun_sge, Sge, addr, len);
same_layout!(corun_work_request, WorkRequest, dst_addr, len, first_sge, sge_count);

/// A C buffer: `len` elements of `T` at `ptr`.
#[derive(Clone, Copy)]
pub struct Buf<T> {
    ptr: *const T,
    len: usize,
}

impl<T> Buf<T> {
    /// Checks what can be checked: NULL only with length 0, alignment, total size.
    pub fn new(ptr: *const T, len: usize) -> Result<Self, corun_status> {
        if len == 0 {
            return Ok(Buf { ptr: core::ptr::NonNull::dangling().as_ptr(), len: 0 });
        }
        if ptr.is_null() {
            return Err(corun_status::CORUN_ERR_NULL);
        }
        if !ptr.is_aligned() {
            return Err(corun_status::CORUN_ERR_MISALIGNED);
        }
        match len.checked_mul(size_of::<T>()) {
            Some(bytes) if bytes <= isize::MAX as usize => Ok(Buf { ptr, len }),
            _ => Err(corun_status::CORUN_ERR_TOO_LONG),
        }
    }

    /// The byte range the buffer covers (for [`disjoint`]).
    pub fn range(&self) -> (usize, usize) {
        let start = self.ptr as usize;
        (start, start + self.len * size_of::<T>())
    }
}

/// `CORUN_ERR_OVERLAP` when any two of the non-empty byte ranges overlap.
pub fn disjoint(ranges: &[(usize, usize)]) -> Result<(), corun_status> {
    for (i, a) in ranges.iter().enumerate() {
        for b in ranges.iter().skip(i + 1) {
            let empty = a.0 == a.1 || b.0 == b.1;
            if !empty && a.0 < b.1 && b.0 < a.1 {
                return Err(corun_status::CORUN_ERR_OVERLAP);
            }
        }
    }
    Ok(())
}

/// An input slice.
pub fn read<'a, T>(b: Buf<T>) -> &'a [T] {
    // SAFETY: `Buf::new` checked NULL, alignment and size (an empty buffer uses a dangling,
    // aligned pointer). The header's contract, which C callers accept, is that a non-NULL
    // pointer points to `len` initialised elements that nothing writes during the call.
    unsafe { core::slice::from_raw_parts(b.ptr, b.len) }
}

/// A C struct buffer read as its corun type.
pub fn read_as<'a, C, R>(b: Buf<C>) -> &'a [R] {
    // SAFETY: `same_layout!` above asserts at compile time that every `C`/`R` pair used
    // here has the same size, alignment and field offsets (all fields are integers, valid
    // for any bits), and `read`'s contract holds.
    unsafe { core::slice::from_raw_parts(b.ptr as *const R, b.len) }
}

/// A C struct output buffer written as its corun type. Call only after [`disjoint`] has
/// cleared every buffer of the call.
pub fn write_as<'a, C, R>(b: Buf<C>) -> &'a mut [R] {
    // SAFETY: as `read_as`; the header's contract is that an output buffer is writable
    // for `len` elements, and `disjoint` has checked that it overlaps no other buffer of
    // this call, so this is the only reference to that memory while it lives.
    unsafe { core::slice::from_raw_parts_mut(b.ptr as *mut R, b.len) }
}

/// A required out-pointer as a reference (after [`disjoint`] when it could overlap).
pub fn out<'a, T>(ptr: *mut T) -> Result<&'a mut T, corun_status> {
    if ptr.is_null() {
        return Err(corun_status::CORUN_ERR_NULL);
    }
    if !ptr.is_aligned() {
        return Err(corun_status::CORUN_ERR_MISALIGNED);
    }
    // SAFETY: not NULL, aligned; the header's contract is that it points to a writable `T`
    // that no other argument of the call covers (checked by the callers with `disjoint`).
    Ok(unsafe { &mut *ptr })
}

/// An optional input struct (NULL: `None`).
pub fn opt<'a, T>(ptr: *const T) -> Result<Option<&'a T>, corun_status> {
    if ptr.is_null() {
        return Ok(None);
    }
    if !ptr.is_aligned() {
        return Err(corun_status::CORUN_ERR_MISALIGNED);
    }
    // SAFETY: not NULL, aligned; the header's contract is that it points to a valid `T`.
    Ok(Some(unsafe { &*ptr }))
}
