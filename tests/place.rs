//! Placement (`corun::place`): the contract and the reference (`kit::place`) on run-built
//! first sides and free lists of stretches, on values drawn from the type's limits, on
//! every small case, and its errors.

mod common;
mod kit;

use common::pairs;
use corun::{Direction, Error, place, place_scratch_len};
use kit::place::{check_place, free_list};
use kit::{TestIndex, anchor};
use proptest::prelude::*;

/// A free list of stretches of distinct ids around an anchor (see `free_list`).
fn free<T: TestIndex>(a: u8, span: u16, bits: (u64, u64, u64, u64)) -> Vec<T> {
    let base = anchor::<T>(a, 1) - i128::from(span) / 2;
    free_list::<T>(base, usize::from(span), !(bits.0 & bits.3), bits.1, bits.2, bits.3)
}

macro_rules! props {
    ($($name:ident: $t:ty),*) => {$(
        mod $name {
            use super::*;
            proptest! {
                #[test]
                fn matches_reference(
                    (first, _) in pairs::<$t>(12),
                    a in any::<u8>(),
                    span in 0u16..1200,
                    bits in any::<(u64, u64, u64, u64)>(),
                ) {
                    let free = free::<$t>(a, span, bits);
                    check_place(&first, &free);
                    // The same request with the free list cut short, and with room to spare.
                    check_place(&first, &free[..free.len().min(first.len())]);
                    check_place(&first[..first.len() / 2], &free);
                    // One page far from the rest: the window's ids too sparse for a bitmap
                    // of them, so its extents come from its stretches sorted by id.
                    let far = [<$t>::wrap(<$t>::HI), <$t>::wrap(<$t>::LO)];
                    if let Some(&far) = far.iter().find(|f| !free.contains(f)) {
                        let mut sparse = free.clone();
                        sparse.insert(bits.0 as usize % (free.len() + 1), far);
                        check_place(&first, &sparse);
                    }
                }

                /// Values drawn freely at the type's limits, on both sides.
                #[test]
                fn alphabet(picks in prop::collection::vec(0usize..16, 0..12), free in prop::collection::vec(0usize..16, 0..16)) {
                    let values = kit::alphabet::values::<$t>();
                    let first: Vec<$t> = picks.iter().map(|&k| <$t>::wrap(values[k])).collect();
                    let mut seen = std::collections::HashSet::new();
                    let free: Vec<$t> = free.iter().map(|&k| <$t>::wrap(values[k])).filter(|v| seen.insert(*v)).collect();
                    check_place(&first, &free);
                }
            }
        }
    )*};
}
props!(u32s: u32, i32s: i32, u64s: u64, i64s: i64);

/// Every first side of up to 4 pages over 4 values, against every ordered free list of
/// up to 5 distinct pages out of 6, at both ends of the type's range (under emulation,
/// `EXHAUSTIVE_LEN` below 16: up to 3 pages against lists of up to 4).
fn exhaustive<T: TestIndex>(base: i128) {
    let short =
        std::env::var("EXHAUSTIVE_LEN").is_ok_and(|v| v.parse().is_ok_and(|n: usize| n < 16));
    let (max_first, max_free) = if short { (3, 4) } else { (4, 5) };
    let vals = [0i128, 1, 2, 4];
    let pool: Vec<i128> = (0..6).collect();
    let mut frees: Vec<Vec<i128>> = vec![Vec::new()];
    for _ in 0..max_free {
        let longer: Vec<Vec<i128>> = frees
            .iter()
            .filter(|f| f.len() == frees.last().unwrap().len())
            .flat_map(|f| {
                pool.iter().filter(|p| !f.contains(p)).map(move |&p| [f.clone(), vec![p]].concat())
            })
            .collect();
        frees.extend(longer);
    }
    let mut cases = 0;
    for len in 0..=max_first {
        for code in 0..4usize.pow(len as u32) {
            let first: Vec<T> =
                (0..len).map(|i| T::wrap(base + vals[(code >> (2 * i)) & 3])).collect();
            for free in frees.iter().filter(|f| f.len() >= len) {
                let free: Vec<T> = free.iter().map(|&p| T::wrap(base + p)).collect();
                check_place(&first, &free);
                cases += 1;
            }
        }
    }
    assert!(cases > if short { 5_000 } else { 100_000 }, "{cases}");
}

#[test]
#[cfg_attr(miri, ignore = "minutes under miri")]
fn exhaustive_small_u32_low() {
    exhaustive::<u32>(0);
}

#[test]
#[cfg_attr(miri, ignore = "minutes under miri")]
fn exhaustive_small_i64_high() {
    exhaustive::<i64>(i128::from(i64::MAX) - 5);
}

#[test]
fn the_rule_by_example() {
    // Runs: [9, 8, 7] down, [20, 21] up, [5]. Extents (consecutive ids): 30..=33,
    // 40, 59..=61, 99.
    let first = [9u32, 8, 7, 20, 21, 5];
    let free = [40u32, 61, 60, 59, 30, 31, 32, 33, 99];
    let (mut chosen, mut rest) = ([0; 6], [0; 3]);
    let mut scratch = vec![0; place_scratch_len(6, 9)];
    let p = place(&first, &free, Direction::Either, &mut chosen, &mut rest, &mut scratch).unwrap();
    // 59..=61 holds the run of 3 exactly (going down, as [9, 8, 7]); the run of 2 takes
    // the top of 30..=33; the single page the lower of the two 1-page extents.
    assert_eq!(chosen, [61, 60, 59, 32, 33, 40]);
    assert_eq!(rest, [30, 31, 99]);
    assert_eq!((p.bound, p.placed, p.own, p.split, p.fallback), (3, 3, 5, 0, false));
}

#[test]
fn split_when_no_extent_holds_a_run() {
    let first = [1u64, 2, 3, 4];
    let free = [10u64, 11, 50, 51, 52, 7];
    let (mut chosen, mut rest) = ([0; 4], [0; 2]);
    let mut scratch = vec![0; place_scratch_len(4, 6)];
    let p = place(&first, &free, Direction::Either, &mut chosen, &mut rest, &mut scratch).unwrap();
    // No extent holds 4 pages; the run is split from the extents with the most room:
    // 50..=52, then the top of 10..=11: [50, 51, 52, 11], two runs, as the allocator's own.
    assert_eq!((chosen, rest), ([10, 11, 50, 51], [52, 7]));
    assert_eq!((p.split, p.fallback), (1, true)); // and that is the allocator's own choice
}

/// Windows of thousands of extents, where placement chooses between asking its trees a
/// question per run or piece and passing over the rooms in id order (`placement.rs`,
/// `READS_PER_QUESTION`): many split runs and many one-page runs take the passes, a few
/// long runs or a few one-page runs over many extents the trees. Each against the
/// reference, over a shuffled half of a pool and the same window sorted.
#[test]
fn both_fill_paths_at_scale() {
    let shuffled = |w: u32, seed: u64| {
        let mut pool: Vec<u32> = (0..2 * w).collect();
        let mut x = seed | 1;
        for i in (1..pool.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pool.swap(i, (x % (i as u64 + 1)) as usize);
        }
        pool.truncate(w as usize);
        pool
    };
    let runs =
        |n: u32, run: u32| (0..n).map(|i| (i / run) * 3 * run + i % run).collect::<Vec<u32>>();
    let mut few_ones = runs(600, 200);
    few_ones.extend([900_001, 900_005, 900_009]);
    for (first, w) in [
        (runs(700, 7), 2_000),   // split runs of 7 over rooms of 1-6: passes
        (runs(600, 200), 8_000), // three long runs over 4,000 extents: trees
        (runs(900, 1), 2_000),   // one-page runs, as many as the singletons: passes
        (few_ones, 8_000),       // three one-page runs over 4,000 extents: trees
    ] {
        let mut free = shuffled(w, u64::from(w) ^ first.len() as u64);
        check_place(&first, &free);
        free.sort_unstable();
        check_place(&first, &free);
    }
}

#[test]
fn errors_name_the_buffer() {
    let first = [1u32, 2, 3];
    let free = [5u32, 6, 7, 8];
    let mut s = vec![0; place_scratch_len(3, 4)];
    let d = Direction::Either;
    assert_eq!(
        place(&first, &free[..2], d, &mut [0; 3], &mut [], &mut s),
        Err(Error::NotEnoughFree { pages: 3, free: 2 })
    );
    assert_eq!(
        place(&first, &free, d, &mut [0; 2], &mut [0; 1], &mut s),
        Err(Error::BufferLength { buffer: "chosen", needed: 3, len: 2 })
    );
    assert_eq!(
        place(&first, &free, d, &mut [0; 3], &mut [0; 2], &mut s),
        Err(Error::BufferLength { buffer: "rest", needed: 1, len: 2 })
    );
    assert_eq!(
        place(&first, &free, d, &mut [0; 3], &mut [0; 1], &mut s[..21]),
        Err(Error::BufferLength { buffer: "scratch", needed: 22, len: 21 })
    );
    assert_eq!(
        Error::BufferLength { buffer: "rest", needed: 1, len: 2 }.to_string(),
        "rest must hold 1 items, got 2"
    );
    // Nothing written on error.
    let mut chosen = [7u32; 3];
    let _ = place(&first, &free, d, &mut chosen, &mut [0; 1], &mut s[..1]);
    assert_eq!(chosen, [7; 3]);
}

#[test]
fn scratch_len_saturates() {
    assert_eq!(place_scratch_len(usize::MAX, 0), usize::MAX);
    assert_eq!(place_scratch_len(1, usize::MAX), usize::MAX);
    assert_eq!(place_scratch_len(4, 10), 48);
}

#[test]
fn a_page_listed_twice_is_an_error_naming_both_positions() {
    let d = Direction::Either;
    let mut s = vec![0; place_scratch_len(5, 6)];
    // The case: 7 and 8 stand twice in the free list; placed, they went out twice.
    let (first, free) = ([1u32, 2, 10, 11, 20], [7u32, 8, 50, 7, 8, 30]);
    let mut chosen = [0u32; 5];
    assert_eq!(
        place(&first, &free, d, &mut chosen, &mut [0; 1], &mut s),
        Err(Error::DuplicatePage { list: "free", first: 0, second: 3 })
    );
    assert_eq!(chosen, [0; 5], "nothing written");
    // In the first side: the smallest page listed twice, by its first two positions.
    let first = [9u64, 5, 6, 5, 9];
    assert_eq!(
        place(&first, &[1u64, 2, 3, 4, 5, 6], d, &mut [0; 5], &mut [0; 1], &mut s),
        Err(Error::DuplicatePage { list: "first", first: 1, second: 3 })
    );
    assert_eq!(
        Error::DuplicatePage { list: "free", first: 0, second: 3 }.to_string(),
        "free holds one page at positions 0 and 3: a page can be handed out only once"
    );
}
