//! The small vector abstraction the kernel is written against, and its `wide` backends.
//!
//! `wide` picks SSE2, AVX2, AVX-512, NEON or portable code at compile time
//! (`cfg(target_feature)`), so this file only says which `wide` calls to make.

use core::ops::{Add, BitAnd, BitOr, BitXor, Not, Sub};

/// Pairs per block of the kernel: one `u64` of break bits. Here, below the kernel and
/// its users, because a block is what [`Lanes::split`] cuts into vectors.
pub const BLOCK: usize = 64;

/// A vector of `WIDTH` lanes of `Elem`. Arithmetic wraps; the kernel relies on that.
pub trait Lanes:
    Copy
    + core::fmt::Debug
    + Add<Output = Self>
    + Sub<Output = Self>
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Not<Output = Self>
{
    /// The lane type.
    type Elem: Copy;
    /// Lanes per vector.
    const WIDTH: usize;
    /// Every lane set to `x`.
    fn splat(x: Self::Elem) -> Self;
    /// Lane `i` set to `f(i)`.
    fn from_fn(f: impl FnMut(usize) -> Self::Elem) -> Self;
    /// A block of `BLOCK` elements as `BLOCK / WIDTH` vectors, in order.
    fn split(block: &[Self::Elem; BLOCK]) -> impl Iterator<Item = Self>;
    /// The top bit of a lane is set exactly when the lanes are equal (other bits are
    /// unspecified: only [`top_bits`](Lanes::top_bits) may read the result).
    fn eq_top(self, other: Self) -> Self;
    /// Bit `k` is the top bit of lane `k` (bits `WIDTH..` clear).
    fn top_bits(self) -> u64;
    /// Every lane is zero.
    fn all_zero(self) -> bool;
}

/// The vectors each index type uses, chosen here and nowhere else: 256-bit ones (two
/// 128-bit halves on SSE2 and NEON), 512-bit ones where AVX-512 is enabled at compile
/// time, so that a 64-pair block is 4 vectors of `u32` instead of 8.
#[cfg(not(target_feature = "avx512f"))]
mod pick {
    pub type U32 = wide::u32x8;
    pub type I32 = wide::i32x8;
    pub type U64 = wide::u64x4;
    pub type I64 = wide::i64x4;
}

#[cfg(target_feature = "avx512f")]
mod pick {
    pub type U32 = wide::u32x16;
    pub type I32 = wide::i32x16;
    pub type U64 = wide::u64x8;
    pub type I64 = wide::i64x8;
}

pub use pick::{I32, I64, U32, U64};

macro_rules! lanes {
    ($($v:ident: $t:ty, $eq_top:ident, $all_zero:ident;)*) => {$(
        impl Lanes for $v {
            type Elem = $t;
            // `wide`'s vectors are their lanes and nothing else.
            const WIDTH: usize = core::mem::size_of::<$v>() / core::mem::size_of::<$t>();
            #[inline(always)]
            fn splat(x: $t) -> Self {
                Self::splat(x)
            }
            #[inline(always)]
            fn from_fn(f: impl FnMut(usize) -> $t) -> Self {
                Self::new(core::array::from_fn(f))
            }
            #[inline(always)]
            fn split(block: &[$t; BLOCK]) -> impl Iterator<Item = Self> {
                // The chunk length is `new`'s array length: `WIDTH`.
                block.as_chunks().0.iter().map(|c| Self::new(*c))
            }
            #[inline(always)]
            fn eq_top(self, other: Self) -> Self {
                $eq_top(self, other)
            }
            #[inline(always)]
            fn top_bits(self) -> u64 {
                u64::from(self.to_bitmask())
            }
            #[inline(always)]
            fn all_zero(self) -> bool {
                $all_zero(self)
            }
        }
    )*};
}

lanes! {
    U32: u32, eq_native, all_zero_native;
    I32: i32, eq_native, all_zero_native;
    U64: u64, eq_64, all_zero_64;
    I64: i64, eq_64, all_zero_64;
}

/// The lane types `wide` compares natively.
trait NativeEq: Copy + Default {
    fn eq(self, other: Self) -> Self;
    fn all(self) -> bool;
}

macro_rules! native_eq {
    ($($v:ident),*) => {$(
        impl NativeEq for $v {
            #[inline(always)]
            fn eq(self, other: Self) -> Self {
                self.simd_eq(other)
            }
            #[inline(always)]
            fn all(self) -> bool {
                $v::all(self)
            }
        }
    )*};
}
native_eq!(U32, I32, U64, I64);

#[inline(always)]
fn eq_native<V: NativeEq>(a: V, b: V) -> V {
    a.eq(b)
}

#[inline(always)]
fn all_zero_native<V: NativeEq>(v: V) -> bool {
    v.eq(V::default()).all()
}

// x86 without SSE4.1 has no 64-bit lane compare (`pcmpeqq`), and `wide` falls back to
// scalar code there. A 64-bit lane is equal exactly when both of its 32-bit halves are,
// and SSE2 compares 32-bit lanes natively: compare as `u32x8`, then AND each lane's low
// half's result into its high half (`<< 32`), whose top bit `top_bits` reads.
#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(target_feature = "sse4.1")))]
#[inline(always)]
fn eq_64<V: bytemuck::Pod>(a: V, b: V) -> V {
    let (a, b): (wide::u32x8, wide::u32x8) = (bytemuck::cast(a), bytemuck::cast(b));
    let e: wide::u64x4 = bytemuck::cast(a.simd_eq(b));
    bytemuck::cast(e & (e << 32u32))
}

#[cfg(all(any(target_arch = "x86", target_arch = "x86_64"), not(target_feature = "sse4.1")))]
#[inline(always)]
fn all_zero_64<V: bytemuck::Pod>(v: V) -> bool {
    let halves: wide::u32x8 = bytemuck::cast(v);
    halves.simd_eq(wide::u32x8::ZERO).all()
}

#[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), not(target_feature = "sse4.1"))))]
#[inline(always)]
fn eq_64<V: NativeEq>(a: V, b: V) -> V {
    eq_native(a, b)
}

#[cfg(not(all(any(target_arch = "x86", target_arch = "x86_64"), not(target_feature = "sse4.1"))))]
#[inline(always)]
fn all_zero_64<V: NativeEq>(v: V) -> bool {
    all_zero_native(v)
}
