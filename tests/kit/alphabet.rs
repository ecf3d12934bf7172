//! Inputs drawn freely from a small alphabet of values at the type's limits, each side
//! either drawing a value or continuing by its step, position by position.
//!
//! Inputs built from runs ([`super::build`]) find deep cases, but a value sequence such
//! as `[0, 7]` with steps `(0, 0)` is unlikely there: here every short sequence over the
//! alphabet is a few choices away. The sweep in `tests/alphabet.rs`, the `alphabet_*`
//! properties and the `raw` fuzz target all decode their choices with [`arrays`] and hold
//! the result to the reference with [`check_all`].

use core::num::NonZeroUsize;

use corun::Grouper;

#[cfg(any(feature = "heapless", fuzzing))]
use super::check_resume_heapless;
use super::{TestIndex, check_resume, check_with};

/// The values: the limits, one off them, the kernel's wrap guard (`MAX - 64`) and its
/// neighbours, zero and its neighbours, the middle. `-1` is `MAX` for unsigned types.
pub fn values<T: TestIndex>() -> [i128; 16] {
    let (lo, hi) = (T::LO, T::HI);
    [
        lo,
        lo + 1,
        -1,
        0,
        1,
        2,
        7,
        hi - 64,
        hi - 63,
        hi - 65,
        hi - 1,
        hi,
        hi / 2,
        hi / 2 + 1,
        lo + 64,
        16,
    ]
}

/// The steps, each side picking its own: 0, small ones, 16, half the type's range (the
/// largest for the kernel's top-bit wrap rule) and one more.
pub fn steps<T: TestIndex>() -> [u64; 7] {
    let half = 1u64 << (T::BITS - 1);
    [0, 1, 2, 3, 16, half, half + 1]
}

/// One side's value at a position: a value of the alphabet, or the previous value plus
/// the side's step (wrapping into `T`: past `MAX` that makes a wrap, which is a break).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// `values()[k % 16]`.
    Value(u8),
    /// The previous value plus the step (at position 0: `values()[0]`).
    Step,
}

impl Pick {
    /// A byte as a pick: the top bit says step, the low four bits pick the value.
    pub fn from_byte(b: u8) -> Self {
        if b & 0x80 != 0 { Pick::Step } else { Pick::Value(b & 0x0f) }
    }
}

/// The arrays that `picks` (one `(src, dst)` pick per position) describe under `steps`.
pub fn arrays<T: TestIndex>(
    picks: impl IntoIterator<Item = (Pick, Pick)>,
    steps: (u64, u64),
) -> (Vec<T>, Vec<T>) {
    let table = values::<T>();
    let next = |prev: Option<T>, pick: Pick, step: u64| match (pick, prev) {
        (Pick::Value(k), _) => T::wrap(table[usize::from(k) % table.len()]),
        (Pick::Step, Some(p)) => T::wrap(p.wide() + i128::from(step)),
        (Pick::Step, None) => T::wrap(table[0]),
    };
    let (mut src, mut dst) = (Vec::<T>::new(), Vec::<T>::new());
    for (s, d) in picks {
        let (s, d) = (next(src.last().copied(), s, steps.0), next(dst.last().copied(), d, steps.1));
        src.push(s);
        dst.push(d);
    }
    (src, dst)
}

/// Every output form of `grouper`, and of it with each cap in `caps` (0: none), one shot
/// and resumed through buffers of 1 to 5 slots (and `heapless::Vec`s of 1 and 5), against
/// the reference.
pub fn check_all<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T], caps: &[usize]) {
    let with_cap = |m: usize| NonZeroUsize::new(m).map_or(*grouper, |m| grouper.max_len(m));
    for g in core::iter::once(*grouper).chain(caps.iter().map(|&m| with_cap(m))) {
        check_with(&g, src, dst);
        for slots in 1..=5 {
            check_resume(&g, src, dst, &[slots]);
        }
        check_resume(&g, src, dst, &[1, 2, 3, 4, 5]);
        #[cfg(any(feature = "heapless", fuzzing))]
        {
            check_resume_heapless::<_, 1>(&g, src, dst, 0);
            check_resume_heapless::<_, 5>(&g, src, dst, 2);
        }
    }
}
