//! The index types corun accepts: `u32`, `i32`, `u64`, `i64`.

use core::fmt::Debug;
use core::hash::Hash;

use crate::lanes::{self, Lanes};

mod sealed {
    pub trait Sealed {}
}

/// An integer type that page or token indices come in: `u32`, `i32`, `u64` or `i64`.
///
/// Sealed: the SIMD kernel has a lane vector for exactly these four types.
/// Contiguity is exact integer arithmetic: `b` follows `a` when `a + step == b` without
/// wrapping (`step` is 1 unless [`Grouper::steps`](crate::Grouper::steps) says
/// otherwise), so `MAX` followed by `MIN` is a break.
pub trait Index:
    Copy + Ord + Eq + Hash + Debug + Default + Send + Sync + 'static + sealed::Sealed
{
    /// The smallest value of the type.
    const MIN: Self;
    /// The largest value of the type.
    const MAX: Self;

    /// The lane vector the kernel loads this type into.
    #[doc(hidden)]
    type Lanes: Lanes<Elem = Self>;
    /// A signed type (its `MAX -> MIN` wrap flips the top bit from 0 to 1).
    #[doc(hidden)]
    const SIGNED: bool;
    /// Bits in the type.
    #[doc(hidden)]
    const BITS: u32;

    /// `self + other`, wrapping.
    #[doc(hidden)]
    fn wrapping_add(self, other: Self) -> Self;

    /// The exact value, for arithmetic that must not wrap.
    #[doc(hidden)]
    fn widen(self) -> i128;

    /// The low `BITS` bits of `x` (wrapping conversion).
    #[doc(hidden)]
    fn truncate(x: i128) -> Self;

    /// `self + 1`, or `None` when that overflows (`self == MAX`).
    fn checked_succ(self) -> Option<Self>;
}

macro_rules! index {
    ($($t:ty => $lanes:ty),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Index for $t {
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            type Lanes = $lanes;
            const SIGNED: bool = <$t>::MIN != 0;
            const BITS: u32 = <$t>::BITS;

            #[inline(always)]
            fn wrapping_add(self, other: Self) -> Self {
                <$t>::wrapping_add(self, other)
            }

            #[inline(always)]
            fn widen(self) -> i128 {
                i128::from(self)
            }

            #[inline(always)]
            #[allow(clippy::cast_possible_truncation)]
            fn truncate(x: i128) -> Self {
                x as $t
            }

            #[inline(always)]
            fn checked_succ(self) -> Option<Self> {
                self.checked_add(1)
            }
        }
    )*};
}

index!(u32 => lanes::U32, i32 => lanes::I32, u64 => lanes::U64, i64 => lanes::I64);

/// `b` follows `a` on a side that steps by `step`: `a + step == b` in exact arithmetic
/// (every value and step fits in `i128` with room to add). Below both the reference and
/// the kernel, which share nothing else but the types.
#[inline]
pub(crate) fn follows_by<T: Index>(a: T, b: T, step: u64) -> bool {
    a.widen() + i128::from(step) == b.widen()
}
