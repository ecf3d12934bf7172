//! The small vector abstraction the kernel is written against, and its `wide` backends.
//!
//! `wide` picks SSE2, AVX2, AVX-512, NEON or portable code at compile time
//! (`cfg(target_feature)`), so this file only says which `wide` calls to make.

use core::ops::{BitOr, BitXor, Sub};

use crate::kernel::BLOCK;

/// A vector of `WIDTH` lanes of `Elem`. Arithmetic wraps; the kernel relies on that.
pub trait Lanes: Copy + BitOr<Output = Self> + BitXor<Output = Self> + Sub<Output = Self> {
    /// The lane type.
    type Elem: Copy;
    /// Lanes per vector.
    const WIDTH: usize;
    /// Every lane set to `x`.
    fn splat(x: Self::Elem) -> Self;
    /// A block of `BLOCK` elements as `BLOCK / WIDTH` vectors, in order.
    fn split(block: &[Self::Elem; BLOCK]) -> impl Iterator<Item = Self>;
    /// Bit `k` set exactly when lane `k` is zero (bits `WIDTH..` clear).
    fn zero_bits(self) -> u64;
    /// Every lane is zero.
    fn all_zero(self) -> bool;
}

macro_rules! lanes_32 {
    ($($v:ident: $t:ty),*) => {$(
        impl Lanes for wide::$v {
            type Elem = $t;
            const WIDTH: usize = 8;
            #[inline(always)]
            fn splat(x: $t) -> Self {
                Self::splat(x)
            }
            #[inline(always)]
            fn split(block: &[$t; BLOCK]) -> impl Iterator<Item = Self> {
                block.as_chunks::<8>().0.iter().map(|c| Self::new(*c))
            }
            #[inline(always)]
            fn zero_bits(self) -> u64 {
                u64::from(self.simd_eq(Self::ZERO).to_bitmask())
            }
            #[inline(always)]
            fn all_zero(self) -> bool {
                self.simd_eq(Self::ZERO).all()
            }
        }
    )*};
}

macro_rules! lanes_64 {
    ($($v:ident: $t:ty),*) => {$(
        impl Lanes for wide::$v {
            type Elem = $t;
            const WIDTH: usize = 4;
            #[inline(always)]
            fn splat(x: $t) -> Self {
                Self::splat(x)
            }
            #[inline(always)]
            fn split(block: &[$t; BLOCK]) -> impl Iterator<Item = Self> {
                block.as_chunks::<4>().0.iter().map(|c| Self::new(*c))
            }
            #[inline(always)]
            fn zero_bits(self) -> u64 {
                zero_bits_64(bytemuck::cast(self))
            }
            #[inline(always)]
            fn all_zero(self) -> bool {
                all_zero_64(bytemuck::cast(self))
            }
        }
    )*};
}

lanes_32!(u32x8: u32, i32x8: i32);
lanes_64!(u64x4: u64, i64x4: i64);

// x86 without SSE4.1 has no 64-bit lane compare (`pcmpeqq`), and `wide` falls back to
// scalar code there. A 64-bit lane is zero exactly when both of its 32-bit halves are,
// and SSE2 compares 32-bit lanes natively, so look at the vector as `u32x8`.
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    not(target_feature = "sse4.1")
))]
#[inline(always)]
fn zero_bits_64(v: wide::u64x4) -> u64 {
    let halves: wide::u32x8 = bytemuck::cast(v);
    let m = u64::from(halves.simd_eq(wide::u32x8::ZERO).to_bitmask());
    // Lane k is zero when bits 2k and 2k+1 are both set; gather bits 0, 2, 4, 6.
    let pairs = m & (m >> 1) & 0b0101_0101;
    let pairs = (pairs | (pairs >> 1)) & 0b0011_0011;
    (pairs | (pairs >> 2)) & 0b1111
}

#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    not(target_feature = "sse4.1")
))]
#[inline(always)]
fn all_zero_64(v: wide::u64x4) -> bool {
    let halves: wide::u32x8 = bytemuck::cast(v);
    halves.simd_eq(wide::u32x8::ZERO).all()
}

#[cfg(not(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    not(target_feature = "sse4.1")
)))]
#[inline(always)]
fn zero_bits_64(v: wide::u64x4) -> u64 {
    u64::from(v.simd_eq(wide::u64x4::ZERO).to_bitmask())
}

#[cfg(not(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    not(target_feature = "sse4.1")
)))]
#[inline(always)]
fn all_zero_64(v: wide::u64x4) -> bool {
    v.simd_eq(wide::u64x4::ZERO).all()
}
