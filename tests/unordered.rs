//! Order-free grouping (`sort_by_destination`) against the reference in
//! `kit::unordered` (std's sort of the pairs) and the definition of the fewest runs for a
//! set of pairs: `n` minus the pairs whose successor `(s + 1, d + 1)` is in the set.
//!
//! The function sorts runs of destinations (stepping by +1 or -1), falling back to
//! sorting pages when runs are short or two share a destination: the inputs here are
//! made of runs of every length in every order (kept, runs shuffled, pages shuffled),
//! ascending and descending, at the types' limits, with repeated destinations at run
//! edges; every short destination sequence over a small alphabet; and values drawn from
//! the kit's alphabet.

mod common;
mod kit;

use std::collections::HashSet;

use common::max_len;
use corun::{Error, Grouper, sort_by_destination};
use kit::TestIndex;
use kit::alphabet::{Pick, arrays};
use kit::arbitrary::{Arbitrary, Unstructured};
use kit::unordered::{Order, Piece, build, check_sorted, check_unordered, fewest};
use proptest::prelude::*;

fn piece() -> impl Strategy<Value = Piece> {
    let len = prop_oneof![3 => 1usize..4, 2 => 4usize..40, 1 => Just(1usize)];
    let gap = prop_oneof![8 => 1i64..9, 1 => -3i64..=0, 1 => any::<i32>().prop_map(i64::from)];
    (len, any::<bool>(), gap, any::<i64>()).prop_map(|(len, down, gap, src_jump)| Piece {
        len,
        down,
        gap,
        src_jump,
    })
}

fn runs_case<T: TestIndex>() -> impl Strategy<Value = (Vec<T>, Vec<T>)> {
    let first = prop_oneof![
        Just(T::LO),
        Just(T::LO + 1),
        Just(-1i128),
        Just(0),
        Just(T::HI - 50),
        Just(T::HI - 3),
        any::<i64>().prop_map(i128::from),
    ];
    let order = prop_oneof![
        Just(Order::Kept),
        Just(Order::Reversed),
        Just(Order::RunsShuffled),
        Just(Order::PagesShuffled),
        Just(Order::FewSwaps),
    ];
    let pieces = prop_oneof![
        prop::collection::vec(piece(), 0..40),
        // Many runs: short pieces, gaps of 2 or more (all singletons when `len` is 1).
        prop::collection::vec((1usize..3, 2i64..5), 0..200).prop_map(|v| {
            v.into_iter().map(|(len, gap)| Piece { len, down: false, gap, src_jump: 3 }).collect()
        }),
        // One long run, either way.
        (1usize..2000, any::<bool>()).prop_map(|(len, down)| vec![Piece {
            len,
            down,
            gap: 1,
            src_jump: 0
        }]),
    ];
    (pieces, first, order, any::<u64>())
        .prop_map(|(pieces, first, order, seed)| build::<T>(&pieces, first, order, seed))
}

/// Every destination sequence up to `longest` positions over six values from `base`
/// (`base + 4` skipped, so that runs break) is sorted as the reference sorts it, or
/// rejected with its positions; `base` near `MAX` puts the wrap in the alphabet.
fn every_short_sequence<T: TestIndex>(longest: u32) {
    let offsets = [0i128, 1, 2, 3, 5, 6];
    for base in [T::LO, T::HI - 5, T::HI - 2, -3] {
        for len in 0..=longest {
            for code in 0..6usize.pow(len) {
                let dst: Vec<T> =
                    (0..len).map(|p| T::wrap(base + offsets[code / 6usize.pow(p) % 6])).collect();
                let src: Vec<T> = (0..len).map(|p| T::wrap(T::HI - 3 * i128::from(p))).collect();
                check_sorted(&src, &dst);
            }
        }
    }
}

macro_rules! typed {
    ($($m:ident: $t:ty),*) => {$(
        mod $m {
            use super::*;

            proptest! {
                /// The sort, then every grouping form over its output (capped too).
                #[test]
                fn runs_match_reference(
                    (src, dst) in runs_case::<$t>(),
                    max in proptest::option::of(max_len()),
                ) {
                    let grouper = max.map_or(Grouper::new(), |m| Grouper::new().max_len(m));
                    check_unordered(&grouper, &src, &dst);
                }

                /// The kit's alphabet at the type's limits, destinations stepping by +1,
                /// -1 or 0 (repeats) when they do not draw a value.
                #[test]
                fn alphabet_matches_reference(
                    picks in prop::collection::vec((any::<u8>(), any::<u8>()), 0..80),
                    dst_step in prop_oneof![Just(1u64), Just(u64::MAX), Just(0)],
                ) {
                    let picks = picks.into_iter().map(|(a, b)| (Pick::from_byte(a), Pick::from_byte(b)));
                    let (src, dst) = arrays::<$t>(picks, (1, dst_step));
                    check_sorted(&src, &dst);
                }
            }

            #[test]
            fn every_short_sequence_matches_reference() {
                every_short_sequence::<$t>(6);
            }

        }
    )*};
}
typed!(u32s: u32, i32s: i32, u64s: u64, i64s: i64);

#[test]
fn large_inputs_take_each_path() {
    // One run of 100,000 pages either way; 20,000 runs of 5 shuffled; 100,000 pages
    // shuffled one by one; a repeat at the edge of two runs far apart.
    let pieces = |len, count, down| vec![Piece { len, down, gap: 7, src_jump: 11 }; count];
    for (p, order) in [
        (pieces(100_000, 1, false), Order::Kept),
        (pieces(100_000, 1, true), Order::Kept),
        (pieces(5, 20_000, true), Order::RunsShuffled),
        (pieces(1, 100_000, false), Order::PagesShuffled),
    ] {
        let (src, dst) = build::<u32>(&p, 12, order, 99);
        assert!(check_sorted(&src, &dst));
        let (src, dst) = build::<i64>(&p, i128::from(i64::MAX) - 50_000, order, 99);
        assert!(check_sorted(&src, &dst)); // past MAX the values wrap to MIN: a break
    }
    let mut p = pieces(5, 20_000, false);
    p[15_000].gap = -9_000; // overlaps a run far before it
    let (src, dst) = build::<u64>(&p, 0, Order::RunsShuffled, 5);
    assert!(!check_sorted(&src, &dst));
}

#[test]
fn shuffled_pages_take_the_radix_sort_or_the_introsort() {
    // Pages shuffled one by one (no runs: the radix sort of positions, or the introsort
    // for ids spread wider than 2^32), their destinations spread evenly, past 2^32 by one
    // far outlier, over the whole type, at the type's limits, or one repeated far from
    // its twin.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let n = 6000u64;
    let spread: Vec<u64> = (0..n).map(|i| i * 3).collect();
    let mut outlier = spread.clone();
    outlier.push(1 << 50);
    let mut crowded: Vec<u64> = (0..n).map(|i| i * 3).collect();
    crowded.push(u64::MAX);
    crowded.push(u64::MAX / 2 + 1);
    let limits: Vec<u64> = (0..n).map(|i| u64::MAX - i * 2).collect();
    let mut repeated = spread.clone();
    repeated[4000] = repeated[17];
    // One radix pass (ids 0..=255), four (ids 2^18 apart: 31 bits), and one bit more
    // than four passes take (the introsort).
    let one_pass: Vec<u64> = (0..256).collect();
    let four_passes: Vec<u64> = (0..n).map(|i| i << 18).collect();
    let five_passes: Vec<u64> = (0..n).map(|i| (i << 18) | (1 << 32)).chain([0]).collect();
    for mut dst in [spread, outlier, crowded, limits, repeated, one_pass, four_passes, five_passes]
    {
        for i in (1..dst.len()).rev() {
            dst.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let src: Vec<u64> = (0..dst.len() as u64).map(|i| i.wrapping_mul(7)).collect();
        check_sorted(&src, &dst);
        let signed: Vec<i64> = dst.iter().map(|&v| v as i64).collect();
        let src_i: Vec<i64> = src.iter().map(|&v| v as i64).collect();
        check_sorted(&src_i, &signed);
    }
}

/// Pairs with distinct destinations, built from shuffled runs near the type's limits.
fn pairs() -> impl Strategy<Value = (Vec<i64>, Vec<i64>)> {
    let start =
        prop_oneof![Just(i64::MIN), Just(-1i64), Just(0), Just(i64::MAX - 40), any::<i64>()];
    (prop::collection::vec((1usize..12, any::<i16>()), 0..12), start.clone(), start, any::<u64>())
        .prop_map(|(segs, s0, d0, seed)| {
            let (mut src, mut dst) = (Vec::new(), Vec::new());
            let (mut s, mut d) = (s0, d0);
            for (len, jump) in segs {
                for _ in 0..len {
                    src.push(s);
                    dst.push(d);
                    s = s.wrapping_add(1);
                    d = d.wrapping_add(1);
                }
                s = s.wrapping_add(i64::from(jump));
                d = d.wrapping_add(1 + (i64::from(jump) & 7)); // dst stays distinct upward
            }
            // A deterministic shuffle of the pairs.
            let mut x = seed | 1;
            for i in (1..src.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let j = (x % (i as u64 + 1)) as usize;
                src.swap(i, j);
                dst.swap(i, j);
            }
            (src, dst)
        })
        .prop_filter("distinct destinations", |(_, d)| {
            d.iter().collect::<HashSet<_>>().len() == d.len()
        })
}

proptest! {
    /// The `unordered` fuzz target's input, decoded from random bytes, through its check.
    #[test]
    fn fuzz_input_matches_reference(bytes in prop::collection::vec(any::<u8>(), 28..64)) {
        if let Ok(input) = kit::fuzz::Unordered::arbitrary(&mut Unstructured::new(&bytes)) {
            input.run();
        }
    }

    #[test]
    fn sorted_by_destination_gives_the_fewest_runs((src, dst) in pairs()) {
        let n = src.len();
        let (mut s, mut d) = (vec![0i64; n], vec![0i64; n]);
        sort_by_destination(&src, &dst, &mut s, &mut d).unwrap();
        let mut want: Vec<(i64, i64)> = src.iter().copied().zip(dst.iter().copied()).collect();
        want.sort_by_key(|p| p.1);
        prop_assert_eq!(s.iter().copied().zip(d.iter().copied()).collect::<Vec<_>>(), want);
        prop_assert_eq!(corun::count_runs(&s, &d).unwrap(), fewest(&src, &dst));
        let u: Vec<u32> = dst.iter().map(|&v| v as u32).collect();
        let (mut s32, mut d32) = (vec![0u32; n], vec![0u32; n]);
        if u.iter().collect::<HashSet<_>>().len() == n {
            sort_by_destination(&u, &u, &mut s32, &mut d32).unwrap();
            prop_assert!(d32.windows(2).all(|w| w[0] < w[1]));
        }
    }
}

#[test]
fn every_order_of_small_sets_sorts_to_the_fewest_runs() {
    // All 720 orders of six pairs with a chain, a descending pair and a stray.
    let base = [(10i64, 0i64), (11, 1), (12, 2), (40, 3), (39, 4), (7, 9)];
    let mut idx = [0usize, 1, 2, 3, 4, 5];
    let mut count = 0;
    permute(&mut idx, 0, &mut |p| {
        let src: Vec<i64> = p.iter().map(|&i| base[i].0).collect();
        let dst: Vec<i64> = p.iter().map(|&i| base[i].1).collect();
        let (mut s, mut d) = ([0i64; 6], [0i64; 6]);
        sort_by_destination(&src, &dst, &mut s, &mut d).unwrap();
        assert_eq!(corun::count_runs(&s, &d).unwrap(), 4, "{src:?} {dst:?}");
        assert!(corun::count_runs(&src, &dst).unwrap() >= 4);
        count += 1;
    });
    assert_eq!(count, 720);
}

fn permute(a: &mut [usize; 6], k: usize, f: &mut impl FnMut(&[usize; 6])) {
    if k == a.len() {
        return f(a);
    }
    for i in k..a.len() {
        a.swap(k, i);
        permute(a, k + 1, f);
        a.swap(k, i);
    }
}

#[test]
fn duplicate_destinations_and_bad_lengths_are_errors() {
    let (mut s, mut d) = ([0u32; 4], [0u32; 4]);
    let got = sort_by_destination(&[1u32, 2, 3, 4], &[7u32, 5, 6, 5], &mut s, &mut d);
    assert_eq!(got, Err(Error::DuplicateDestination { first: 1, second: 3 }));
    assert!(got.unwrap_err().to_string().contains("positions 1 and 3"));
    let got = sort_by_destination(&[1u32, 2], &[7u32], &mut s, &mut d);
    assert_eq!(got, Err(Error::LengthMismatch { src: 2, dst: 1 }));
    let got = sort_by_destination(&[1u32, 2], &[7u32, 8], &mut s, &mut d);
    assert_eq!(got, Err(Error::LengthMismatch { src: 2, dst: 4 }));
    // Empty sets are fine; the result groups with any form, in either direction too.
    sort_by_destination::<i32>(&[], &[], &mut [], &mut []).unwrap();
    let (src, dst) = ([5u32, 4, 3, 9], [2u32, 1, 0, 3]);
    sort_by_destination(&src, &dst, &mut s, &mut d).unwrap();
    assert_eq!((s, d), ([3, 4, 5, 9], [0, 1, 2, 3]));
    assert_eq!(Grouper::new().count_runs(&s, &d), Ok(2));
}
