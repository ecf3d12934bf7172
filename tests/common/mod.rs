//! proptest strategies over the shared input builders of the test kit (`tests/kit/`).
#![allow(dead_code)]

use core::num::NonZeroUsize;

pub use super::kit::*;
use proptest::prelude::*;

pub fn jump() -> impl Strategy<Value = Jump> {
    prop_oneof![
        5 => Just(Jump::Step),
        2 => any::<u8>().prop_map(Jump::Anchor),
        3 => prop_oneof![
            Just(0i64),
            Just(-1),
            Just(2),
            Just(-64),
            any::<i32>().prop_map(i64::from),
            any::<i64>(),
        ]
        .prop_map(Jump::Delta),
    ]
}

/// Run lengths of every scale: singletons, short, around the block size, long.
pub fn seg_len() -> impl Strategy<Value = usize> {
    // Miri interprets every lane operation: shorter runs there, still crossing blocks.
    let (long, longest) = if cfg!(miri) { (40, 80) } else { (100, 300) };
    prop_oneof![4 => 1usize..4, 3 => 1usize..20, 2 => 1usize..long, 1 => 60usize..longest]
}

pub fn seg() -> impl Strategy<Value = Seg> {
    (seg_len(), jump(), jump(), prop::bool::weighted(0.25)).prop_map(|(len, src, dst, down)| Seg {
        len,
        src,
        dst,
        down,
    })
}

pub fn start<T: TestIndex>(steps: (u64, u64)) -> impl Strategy<Value = (i128, i128)> {
    let one =
        |step| prop_oneof![any::<u8>().prop_map(move |k| anchor::<T>(k, step)), T::LO..=T::HI];
    (one(steps.0), one(steps.1))
}

/// Paired arrays made of runs of +1 steps.
pub fn pairs<T: TestIndex>(max_segs: usize) -> impl Strategy<Value = (Vec<T>, Vec<T>)> {
    (start::<T>((1, 1)), prop::collection::vec(seg(), 0..max_segs))
        .prop_map(|(start, segs)| build::<T>(start, &segs, (1, 1)))
}

/// Paired arrays made of runs, at least one position long (generated so, not filtered:
/// rejecting empty inputs aborts runs of many cases with "Too many global rejects").
pub fn nonempty_pairs<T: TestIndex>(max_segs: usize) -> impl Strategy<Value = (Vec<T>, Vec<T>)> {
    (start::<T>((1, 1)), prop::collection::vec(seg(), 1..max_segs))
        .prop_map(|(start, segs)| build::<T>(start, &segs, (1, 1)))
}

/// Steps for both sides (see `step_of`), and paired arrays made of runs of those steps.
pub fn strided<T: TestIndex>(
    max_segs: usize,
) -> impl Strategy<Value = ((u64, u64), Vec<T>, Vec<T>)> {
    let step = prop_oneof![3 => any::<u8>().prop_map(step_of::<T>), 1 => 1u64..40];
    (step.clone(), step).prop_flat_map(move |steps| {
        (start::<T>(steps), prop::collection::vec(seg(), 0..max_segs)).prop_map(
            move |(start, segs)| {
                let (src, dst) = build::<T>(start, &segs, steps);
                (steps, src, dst)
            },
        )
    })
}

/// A cap on run length worth testing: tiny, around the block size, large.
pub fn max_len() -> impl Strategy<Value = NonZeroUsize> {
    prop_oneof![1usize..5, 60usize..70, 1usize..1000].prop_map(|m| NonZeroUsize::new(m).unwrap())
}
