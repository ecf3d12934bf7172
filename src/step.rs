//! The index step of each side, in the forms the kernel needs, computed once per scan.

use crate::index::Index;
use crate::lanes::{BLOCK, Lanes};

/// One side's step, ready for the kernel.
#[derive(Clone, Copy, Debug)]
pub struct Side<T: Index> {
    /// The step itself.
    pub step: u64,
    /// Every lane `step` (wrapping into `T`).
    pub one: T::Lanes,
    /// Lane `i` is `i * step`: a vector's offsets from the block's first value.
    pub iota: T::Lanes,
    /// Every lane `WIDTH * step`: from one vector's offsets to the next one's.
    pub stride: T::Lanes,
    /// `BLOCK * step`, wrapping: the last value of a clean block minus its first.
    pub block: T,
    /// The largest first value of a block that cannot overflow inside it (`MAX - BLOCK *
    /// step`), or `None` when every block could.
    pub guard: Option<T>,
}

impl<T: Index> Side<T> {
    fn new(step: u64) -> Self {
        let times = |k: usize| T::truncate(k as i128 * i128::from(step));
        let top = T::MAX.widen() - BLOCK as i128 * i128::from(step);
        Side {
            step,
            one: T::Lanes::splat(times(1)),
            iota: T::Lanes::from_fn(times),
            stride: T::Lanes::splat(times(T::Lanes::WIDTH)),
            block: times(BLOCK),
            guard: (top >= T::MIN.widen()).then(|| T::truncate(top)),
        }
    }
}

/// Both sides' steps.
#[derive(Clone, Copy, Debug)]
pub struct Steps<T: Index> {
    /// The `src` side.
    pub src: Side<T>,
    /// The `dst` side.
    pub dst: Side<T>,
    /// Both steps are at most half the type's range, so a wrap shows in the top bit
    /// (see `kernel::exact_bits`); otherwise blocks with breaks are checked pair by pair.
    pub top_bit_rule: bool,
}

impl<T: Index> Steps<T> {
    /// The steps `(src, dst)`.
    pub fn new((src, dst): (u64, u64)) -> Self {
        let half = 1u64 << (T::BITS - 1);
        Steps { src: Side::new(src), dst: Side::new(dst), top_bit_rule: src <= half && dst <= half }
    }
}
