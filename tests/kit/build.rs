//! Inputs built from *runs* (uniform random integers almost never make them): each side
//! jumps near a limit, by a small delta or not at all, then steps for a segment.

use arbitrary::{Arbitrary, Unstructured};
use corun::{Index, Span};

/// A span no call writes: shows writes past the end of a buffer.
pub const SENTINEL: Span = Span { start: usize::MAX, len: usize::MAX };

/// Index types built from `i128` values by wrapping, so that a run climbing past `MAX`
/// lands on `MIN` (the wrap pair that must be a break).
pub trait TestIndex: Index {
    const LO: i128;
    const HI: i128;
    fn wrap(x: i128) -> Self;
    fn wide(self) -> i128;
}

macro_rules! test_index {
    ($($t:ty),*) => {$(
        impl TestIndex for $t {
            const LO: i128 = <$t>::MIN as i128;
            const HI: i128 = <$t>::MAX as i128;
            fn wrap(x: i128) -> Self {
                x as $t
            }
            fn wide(self) -> i128 {
                self as i128
            }
        }
    )*};
}
test_index!(u32, i32, u64, i64);

/// How one side moves at the start of a segment.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Jump {
    /// Keep stepping by the side's step: no break from this side.
    Step,
    /// Jump to a value near a limit (see [`anchor`]).
    Anchor(u8),
    /// Move by this much from the last value (0, -1, +2, or anything).
    Delta(i64),
}

/// One segment of the input: a jump on each side, then `len` values stepping by the
/// side's step (+1 unless a test picks another), or by minus the step on both sides when
/// `down` (a descending run, as recycled blocks come out of vLLM's free queue).
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    pub len: usize,
    pub src: Jump,
    pub dst: Jump,
    pub down: bool,
}

impl<'a> Arbitrary<'a> for Seg {
    /// Lengths 1 to 4 half of the time (short runs are where bugs hide), up to 255 else.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let b = u8::arbitrary(u)?;
        let len =
            if b & 0x80 == 0 { 1 + usize::from(b & 3) } else { 1 + 2 * usize::from(b & 0x7f) };
        Ok(Seg { len, src: u.arbitrary()?, dst: u.arbitrary()?, down: u.arbitrary()? })
    }
}

/// Values where things go wrong for a side stepping by `step`: the limits, the kernel's
/// wrap guard (`MAX - 64 * step`), zero.
pub fn anchor<T: TestIndex>(k: u8, step: u64) -> i128 {
    let s = i128::from(step);
    let table = [
        T::HI,
        T::HI - s,
        T::HI - 2 * s,
        T::HI - 63 * s,
        T::HI - 64 * s,
        T::HI - 65 * s,
        T::HI - 100,
        T::HI - 200 * s,
        T::LO,
        T::LO + 1,
        0,
        1,
        -1,
        T::HI / 2,
        T::LO + 63 * s,
        T::HI - 127 * s,
    ];
    table[usize::from(k) % table.len()]
}

/// Steps worth testing for `T`: small ones, those around half the type's range (where
/// the kernel's top-bit wrap rule stops applying), one past the whole range, and 0.
pub fn step_of<T: TestIndex>(k: u8) -> u64 {
    let half = 1u64 << (T::BITS - 1);
    let table = [1, 2, 3, 16, 64, 1000, half - 1, half, half + 1, 0, u64::MAX, 1 << 33];
    table[usize::from(k) % table.len()]
}

/// Builds `(src, dst)` from segments, starting at the given values, each side stepping
/// by its step of `steps` inside a segment.
pub fn build<T: TestIndex>(
    start: (i128, i128),
    segs: &[Seg],
    steps: (u64, u64),
) -> (Vec<T>, Vec<T>) {
    let (ss, ds) = (i128::from(steps.0), i128::from(steps.1));
    let (mut s, mut d) = (start.0 - ss, start.1 - ds);
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    let apply = |x: i128, j: Jump, step: i128| match j {
        Jump::Step => x + step,
        Jump::Anchor(k) => anchor::<T>(k, step.unsigned_abs() as u64),
        Jump::Delta(delta) => x + i128::from(delta),
    };
    for (i, seg) in segs.iter().enumerate() {
        if seg.len == 0 {
            continue;
        }
        let (ss, ds) = if seg.down { (-ss, -ds) } else { (ss, ds) };
        (s, d) =
            if i == 0 { (s + ss, d + ds) } else { (apply(s, seg.src, ss), apply(d, seg.dst, ds)) };
        src.push(T::wrap(s));
        dst.push(T::wrap(d));
        for _ in 1..seg.len {
            (s, d) = (s + ss, d + ds);
            src.push(T::wrap(s));
            dst.push(T::wrap(d));
        }
    }
    (src, dst)
}
