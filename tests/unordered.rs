//! Order-free grouping (`sort_by_destination`) against a sort written here and the
//! definition of the fewest runs for a set of pairs: `n` minus the pairs whose successor
//! `(s + 1, d + 1)` is in the set.
#![cfg(feature = "alloc")]

use std::collections::HashSet;

use corun::{Error, Grouper, sort_by_destination};
use proptest::prelude::*;

fn fewest(src: &[i64], dst: &[i64]) -> usize {
    let set: HashSet<(i128, i128)> =
        src.iter().zip(dst).map(|(&s, &d)| (s.into(), d.into())).collect();
    let linked = set.iter().filter(|&&(s, d)| set.contains(&(s + 1, d + 1))).count();
    src.len() - linked
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
