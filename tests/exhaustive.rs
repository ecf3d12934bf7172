//! Exhaustive tests: every break pattern for every length up to 16, at the start of the
//! input and straddling a block boundary, and every length across three blocks.

mod common;
mod kit;

use common::*;

/// `len` positions whose pair `p` is a break exactly when bit `p` of `pattern` is set.
/// The kind of break cycles (src only, dst only, both, backwards) so that each side is
/// exercised; `start` places the values (near `MAX`, a run may also wrap).
fn pattern<T: TestIndex>(len: usize, pattern: u32, start: (i128, i128)) -> (Vec<T>, Vec<T>) {
    let (mut s, mut d) = start;
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for p in 0..len {
        if p > 0 {
            let brk = p <= 32 && pattern >> (p - 1) & 1 == 1;
            let (ds, dd) = match (brk, p % 4) {
                (false, _) => (1, 1),
                (true, 0) => (2, 1),
                (true, 1) => (1, 0),
                (true, 2) => (7, -5),
                (true, _) => (-1, 1),
            };
            (s, d) = (s + ds, d + dd);
        }
        src.push(T::wrap(s));
        dst.push(T::wrap(d));
    }
    (src, dst)
}

/// The longest pattern: 16, or `EXHAUSTIVE_LEN` (CI lowers it under qemu, where the
/// full set takes minutes; every native build runs all of it).
fn longest() -> usize {
    std::env::var("EXHAUSTIVE_LEN").ok().and_then(|v| v.parse().ok()).unwrap_or(16).min(16)
}

fn every_pattern<T: TestIndex>() {
    let starts = [(0, 1000), (T::HI - 8, 5), (5, T::HI - 3), (T::LO, T::LO)];
    for len in 0..=longest() {
        for bits in 0..1u32 << len.saturating_sub(1) {
            for start in starts {
                let (src, dst) = pattern::<T>(len, bits, start);
                check(&src, &dst);
            }
        }
    }
}

/// The 16-position patterns again, inside a longer input so that they straddle the
/// kernel's 64-pair block boundary and run through the full-block path.
fn every_pattern_across_a_block<T: TestIndex>() {
    for bits in 0..1u32 << longest().saturating_sub(1) {
        for start in [(1 << 20, 7), (T::HI - 62, 0)] {
            let (mut src, mut dst) = pattern::<T>(56 + 16 + 64, 0, start);
            let (s, d) = (src[56], dst[56]);
            let (ps, pd) = pattern::<T>(16, bits, (0, 0));
            for i in 0..16 {
                // Shift the pattern onto the values at position 56 (by wrapping).
                src[56 + i] = T::wrap(to_i128(s) + to_i128(ps[i]));
                dst[56 + i] = T::wrap(to_i128(d) + to_i128(pd[i]));
            }
            check(&src, &dst);
        }
    }
}

fn to_i128<T: TestIndex>(x: T) -> i128 {
    x.wide()
}

/// Every length from 0 to three blocks and a bit, with structures that put breaks at the
/// first, last and every pair, and wraps at the very end.
fn every_length<T: TestIndex>() {
    for len in 0..=3 * 64 + 3 {
        let ramp = |base: i128| (0..len as i128).map(|i| T::wrap(base + i)).collect::<Vec<T>>();
        let cases: Vec<(Vec<T>, Vec<T>)> = vec![
            (ramp(0), ramp(7)),
            (ramp(T::HI - len as i128 + 1), ramp(0)), // ends exactly at MAX: no wrap
            (ramp(T::HI - len as i128 + 2), ramp(0)), // wraps at the last pair
            (ramp(0), ramp(T::HI - 64)),              // the kernel's wrap guard
            (ramp(0), ramp(T::HI - 63)),
            ((0..len).map(|_| T::wrap(3)).collect(), ramp(0)), // every pair breaks
            (ramp(0), (0..len as i128).map(|i| T::wrap(i * 2)).collect()),
            ((0..len as i128).map(|i| T::wrap(if i == 1 { 99 } else { i })).collect(), ramp(0)),
            (
                ramp(0),
                (0..len as i128).map(|i| T::wrap(i + i128::from(i + 1 == len as i128))).collect(),
            ),
        ];
        for (src, dst) in cases {
            check(&src, &dst);
            check(&dst, &src);
        }
    }
}

macro_rules! exhaustive {
    ($($name:ident: $t:ty),*) => {$(
        mod $name {
            use super::*;
            #[test]
            #[cfg_attr(miri, ignore = "minutes under Miri; props and contract cover it there")]
            fn every_break_pattern_up_to_16() {
                every_pattern::<$t>();
            }
            #[test]
            #[cfg_attr(miri, ignore = "minutes under Miri; props and contract cover it there")]
            fn every_break_pattern_across_a_block() {
                every_pattern_across_a_block::<$t>();
            }
            #[test]
            #[cfg_attr(miri, ignore = "minutes under Miri; props and contract cover it there")]
            fn every_length_across_three_blocks() {
                every_length::<$t>();
            }
        }
    )*};
}

exhaustive!(u32s: u32, i32s: i32, u64s: u64, i64s: i64);
