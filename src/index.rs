//! The index types corun accepts: `u32`, `i32`, `u64`, `i64`.

use core::fmt::Debug;
use core::hash::Hash;

use crate::kernel::BLOCK;
use crate::lanes::Lanes;

mod sealed {
    pub trait Sealed {}
}

/// An integer type that page or token indices come in: `u32`, `i32`, `u64` or `i64`.
///
/// Sealed: the SIMD kernel has a lane vector for exactly these four types.
/// Contiguity is exact integer arithmetic: `b` follows `a` when `a + 1 == b` without
/// wrapping, so `MAX` followed by `MIN` is a break.
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
    /// `1` in this type.
    #[doc(hidden)]
    const ONE: Self;
    /// A signed type (its `MAX -> MIN` wrap flips the top bit from 0 to 1).
    #[doc(hidden)]
    const SIGNED: bool;
    /// `MAX - BLOCK`: a block whose first value is at most this cannot wrap inside.
    #[doc(hidden)]
    const WRAP_GUARD: Self;

    /// `self + BLOCK`, wrapping.
    #[doc(hidden)]
    fn plus_block(self) -> Self;

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
            const ONE: Self = 1;
            const SIGNED: bool = <$t>::MIN != 0;
            const WRAP_GUARD: Self = <$t>::MAX - BLOCK as $t;

            #[inline(always)]
            fn plus_block(self) -> Self {
                self.wrapping_add(BLOCK as $t)
            }

            #[inline(always)]
            fn checked_succ(self) -> Option<Self> {
                self.checked_add(1)
            }
        }
    )*};
}

index!(u32 => wide::u32x8, i32 => wide::i32x8, u64 => wide::u64x4, i64 => wide::i64x4);
