//! The index step of each side: as the options carry it ([`Steps`]), and in the lane
//! forms the kernel needs ([`LaneSteps`]), computed once per scan.

use crate::index::Index;
use crate::lanes::{BLOCK, Lanes};

/// How position `i + 1` continues the run of position `i`: `src` advances by `src` and
/// `dst` by `dst` (exactly, no wrap), or, with `either`, both go back by theirs for the
/// whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Steps {
    /// The source side's step.
    pub src: u64,
    /// The destination side's step.
    pub dst: u64,
    /// Runs may descend as well as ascend ([`crate::Direction::Either`]).
    pub either: bool,
}

impl Steps {
    /// +1 on both sides, ascending: packed pages.
    pub const UNIT: Steps = Steps { src: 1, dst: 1, either: false };
}

/// One side's step, ready for the kernel.
#[derive(Clone, Copy, Debug)]
pub struct LaneStep<T: Index> {
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

impl<T: Index> LaneStep<T> {
    fn new(step: u64) -> Self {
        let times = |k: usize| T::truncate(k as i128 * i128::from(step));
        let top = T::MAX.widen() - BLOCK as i128 * i128::from(step);
        LaneStep {
            step,
            one: T::Lanes::splat(times(1)),
            iota: T::Lanes::from_fn(times),
            stride: T::Lanes::splat(times(T::Lanes::WIDTH)),
            block: times(BLOCK),
            guard: (top >= T::MIN.widen()).then(|| T::truncate(top)),
        }
    }
}

/// Both sides' steps, in lanes.
#[derive(Clone, Copy, Debug)]
pub struct LaneSteps<T: Index> {
    /// The `src` side.
    pub src: LaneStep<T>,
    /// The `dst` side.
    pub dst: LaneStep<T>,
    /// Both steps are at most half the type's range, so a wrap shows in the top bit
    /// (see `kernel::exact_bits`); otherwise blocks with breaks are checked pair by pair.
    pub top_bit_rule: bool,
}

impl<T: Index> LaneSteps<T> {
    /// The lane forms of `steps`.
    pub fn new(Steps { src, dst, .. }: Steps) -> Self {
        let half = 1u64 << (T::BITS - 1);
        LaneSteps {
            src: LaneStep::new(src),
            dst: LaneStep::new(dst),
            top_bit_rule: src <= half && dst <= half,
        }
    }
}
