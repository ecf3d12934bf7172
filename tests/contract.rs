//! The contract, point by point, and the numpy helper's documented cases adapted to it.
//! No feature needed: lists of spans come through the slice forms (`kit::grouped`), and
//! `corun::group` (feature `alloc`) is checked against them where it is compiled.

mod common;
mod kit;

use common::*;
use core::num::NonZeroUsize;
use corun::{Error, Grouper, Index, Progress, Span};

/// `corun::group` through the slice forms (see `kit::grouped`).
fn group<T: Index>(src: &[T], dst: &[T]) -> Result<Vec<Span>, Error> {
    grouped(&Grouper::new(), src, dst)
}

fn spans(list: &[(usize, usize)]) -> Vec<Span> {
    list.iter().map(|&(start, len)| Span { start, len }).collect()
}

#[test]
fn max_then_min_is_a_break_for_every_type() {
    // numpy's diff wraps and calls [i32::MAX, i32::MIN] contiguous; corun does not.
    let two = spans(&[(0, 1), (1, 1)]);
    assert_eq!(group(&[i32::MAX, i32::MIN], &[0, 1]).unwrap(), two);
    assert_eq!(group(&[0, 1], &[i32::MAX, i32::MIN]).unwrap(), two);
    assert_eq!(group(&[u32::MAX, 0], &[0, 1]).unwrap(), two);
    assert_eq!(group(&[u64::MAX, 0], &[0, 1]).unwrap(), two);
    assert_eq!(group(&[i64::MAX, i64::MIN], &[0, 1]).unwrap(), two);
    assert_eq!(group(&[0, 1], &[u64::MAX, 0]).unwrap(), two);
    // Up to MAX is fine.
    assert_eq!(group(&[u32::MAX - 1, u32::MAX], &[0, 1]).unwrap(), spans(&[(0, 2)]));
    assert_eq!(
        group(&[-1i32, 0, 1], &[i32::MIN, i32::MIN + 1, i32::MIN + 2]).unwrap(),
        spans(&[(0, 3)])
    );
}

#[test]
fn wrap_inside_long_runs_is_a_break_in_the_simd_path() {
    // A run that climbs through MAX, long enough for several full blocks.
    let src: Vec<u32> = (0..1000u32).map(|i| (u32::MAX - 500).wrapping_add(i)).collect();
    let dst: Vec<u32> = (0..1000).collect();
    assert_eq!(group(&src, &dst).unwrap(), spans(&[(0, 501), (501, 499)]));
    let src: Vec<i64> = (0..1000i64).map(|i| (i64::MAX - 100).wrapping_add(i)).collect();
    let dst: Vec<i64> = (0..1000).collect();
    assert_eq!(group(&dst, &src).unwrap(), spans(&[(0, 101), (101, 899)]));
}

#[test]
fn both_empty_is_zero_runs() {
    let e: [u32; 0] = [];
    assert_eq!(corun::count_runs(&e, &e), Ok(0));
    assert_eq!(group(&e, &e), Ok(vec![]));
    #[cfg(feature = "alloc")]
    assert_eq!(corun::group(&e, &e), Ok(vec![]));
    assert_eq!(corun::runs(&e, &e).unwrap().next(), None);
    let mut out = [SENTINEL; 2];
    assert_eq!(corun::group_into(&e, &e, &mut out), Ok(Progress { consumed: 0, spans: 0 }));
    assert_eq!(out, [SENTINEL; 2]);
}

#[test]
fn one_side_empty_is_a_mismatch() {
    // The numpy helper returns ([], []) here; corun calls it what it is.
    check_mismatch::<u32>(&[1, 2, 3], &[]);
    check_mismatch::<i64>(&[], &[1]);
}

#[test]
fn mismatch_error_names_both_lengths() {
    let err = corun::count_runs(&[1u32, 2, 3], &[1u32, 2]).unwrap_err();
    assert_eq!(err, Error::LengthMismatch { src: 3, dst: 2 });
    assert_eq!(err.to_string(), "src and dst must have equal lengths, got 3 and 2");
    let _: &dyn core::error::Error = &err;
}

#[test]
fn numpy_helper_single_group() {
    let src = [0i32, 1, 2, 3];
    let dst = [10i32, 11, 12, 13];
    assert_eq!(group(&src, &dst).unwrap(), spans(&[(0, 4)]));
}

#[test]
fn numpy_helper_split() {
    // src breaks at 3, dst at 2: both break the run.
    let src = [0i32, 1, 2, 5, 6, 7];
    let dst = [10i32, 11, 20, 21, 22, 23];
    let got = group(&src, &dst).unwrap();
    assert_eq!(got, spans(&[(0, 2), (2, 1), (3, 3)]));
    // The helper's output shape: lists of src and dst groups.
    let src_groups: Vec<&[i32]> = got.iter().map(|s| &src[s.range()]).collect();
    let dst_groups: Vec<&[i32]> = got.iter().map(|s| &dst[s.range()]).collect();
    assert_eq!(src_groups, [&[0, 1][..], &[2], &[5, 6, 7]]);
    assert_eq!(dst_groups, [&[10, 11][..], &[20], &[21, 22, 23]]);
}

#[test]
fn numpy_helper_singletons_and_repeats() {
    // Repeated, descending and +2 steps are all breaks.
    let src = [5i64, 5, 4, 6, 7];
    let dst = [0i64, 1, 2, 3, 4];
    assert_eq!(group(&src, &dst).unwrap(), spans(&[(0, 1), (1, 1), (2, 1), (3, 2)]));
}

#[test]
fn single_position_is_one_run() {
    assert_eq!(group(&[u64::MAX], &[0u64]).unwrap(), spans(&[(0, 1)]));
}

#[test]
fn group_into_stops_at_run_boundaries() {
    let src: Vec<u32> = (0..300).map(|i| i + 3 * (i / 100)).collect(); // runs of 100
    let dst: Vec<u32> = (0..300).collect();
    let mut out = [SENTINEL; 2];
    let p = corun::group_into(&src, &dst, &mut out).unwrap();
    assert_eq!(p, Progress { consumed: 200, spans: 2 });
    assert_eq!(out, spans(&[(0, 100), (100, 100)])[..]);
    let p = corun::group_into(&src[200..], &dst[200..], &mut out).unwrap();
    assert_eq!(p, Progress { consumed: 100, spans: 1 });
    assert_eq!(out[0], Span { start: 0, len: 100 });
    assert_eq!(out[1], Span { start: 100, len: 100 }, "slot past the spans untouched");
}

#[test]
fn empty_buffer_makes_no_progress() {
    let mut out: [Span; 0] = [];
    assert_eq!(
        corun::group_into(&[1u32], &[1u32], &mut out),
        Ok(Progress { consumed: 0, spans: 0 })
    );
}

#[test]
fn max_len_cuts_runs_into_pieces() {
    let src: Vec<u64> = (0..10).collect();
    let dst: Vec<u64> = (0..10).map(|i| i + 100 * u64::from(i >= 7)).collect(); // runs 7 + 3
    let g = Grouper::new().max_len(NonZeroUsize::new(3).unwrap());
    assert_eq!(grouped(&g, &src, &dst).unwrap(), spans(&[(0, 3), (3, 3), (6, 1), (7, 3)]));
    assert_eq!(g.count_runs(&src, &dst), Ok(4));
    let one = Grouper::new().max_len(NonZeroUsize::MIN);
    assert_eq!(one.count_runs(&src, &dst), Ok(10));
    let mut out = [SENTINEL; 3];
    assert_eq!(g.group_into(&src, &dst, &mut out), Ok(Progress { consumed: 7, spans: 3 }));
    assert_eq!(g.get_max_len(), NonZeroUsize::new(3));
    assert_eq!(Grouper::new().get_max_len(), None);
}

#[test]
fn runs_reports_consumed_for_resuming() {
    let src = [1u32, 2, 3, 9, 10, 20];
    let mut runs = corun::runs(&src, &src).unwrap();
    assert_eq!(runs.consumed(), 0);
    assert_eq!(runs.next(), Some(Span { start: 0, len: 3 }));
    assert_eq!(runs.consumed(), 3);
    assert_eq!(runs.by_ref().count(), 2);
    assert_eq!(runs.consumed(), 6);
    assert_eq!(runs.next(), None);
}

/// Issue 13: with steps (0, 0) the padded last block passed the clean-block test, which
/// reads only the last `b` element and relies on `b[k] == a[k + 1]`.
#[test]
fn zero_steps_in_the_last_block_keep_their_breaks() {
    let g = Grouper::new().steps(0, 0);
    let two = spans(&[(0, 1), (1, 1)]);
    assert_eq!(grouped(&g, &[0u32, 7], &[0u32, 0]).unwrap(), two);
    assert_eq!(
        corun::scalar::runs_with(&g, &[0u32, 7], &[0u32, 0]).unwrap().collect::<Vec<_>>(),
        two
    );
    assert_eq!(grouped(&g, &[i64::MIN, 7], &[i64::MIN, i64::MIN]).unwrap(), two);
    assert_eq!(grouped(&g, &[i32::MIN, 7], &[i32::MIN, i32::MIN]).unwrap(), two);
    assert_eq!(grouped(&g, &[0u64, 7], &[0u64, 0]).unwrap(), two);
    assert_eq!(grouped(&g, &[0u32, 0], &[0u32, 7]).unwrap(), two);
    // A whole block of repeats, then a tail whose last pair breaks.
    let mut src = vec![0u32; 64 + 3];
    let dst = vec![0u32; 64 + 3];
    src[66] = 1;
    assert_eq!(grouped(&g, &src, &dst).unwrap(), spans(&[(0, 66), (66, 1)]));
    assert_eq!(g.count_runs(&src, &dst), Ok(2));
    // Every length across the first block and its tail (fewer under Miri).
    for len in 2..=if cfg!(miri) { 9 } else { 70 } {
        for brk in 1..len {
            let mut src = vec![u32::MIN; len];
            src[brk..].fill(9);
            check_with(&g, &src, &vec![0u32; len]);
            check_with(
                &g,
                &vec![i64::MIN; len],
                &src.iter().map(|&x| i64::from(x)).collect::<Vec<_>>(),
            );
        }
    }
}

/// `Runs::size_hint` is exact about what is left: at least one span while positions
/// remain, at most one per remaining position, nothing once done.
#[test]
fn runs_size_hint_bounds_what_is_left() {
    let n = if cfg!(miri) { 80 } else { 300 };
    let src: Vec<u32> = (0..n).map(|i| if i % 7 == 0 { 3 * i } else { i }).collect();
    let dst: Vec<u32> = (0..n).collect();
    for grouper in [Grouper::new(), Grouper::new().max_len(NonZeroUsize::new(5).unwrap())] {
        let mut runs = grouper.runs(&src, &dst).unwrap();
        loop {
            let left = src.len() - runs.consumed();
            let spans_left = runs.clone().count();
            assert_eq!(runs.size_hint(), (usize::from(left > 0), Some(left)));
            assert!(runs.size_hint().0 <= spans_left && spans_left <= left);
            if runs.next().is_none() {
                break;
            }
        }
        assert_eq!(runs.size_hint(), (0, Some(0)));
    }
}

/// Long descending runs, so that whole 64-pair blocks descend (the kernel's descending
/// block test): at every offset into a block, crossing `MIN` (a wrap is a break, not a
/// step down) and clear of it, with unit and unequal steps, on every index type.
#[test]
#[cfg_attr(miri, ignore = "minutes under miri")]
fn descending_blocks_near_the_limits() {
    fn go<T: kit::TestIndex>() {
        for steps in [(1u64, 1u64), (3, 7), (1, 5)] {
            let grouper = Grouper::new().steps(steps.0, steps.1);
            for offset in [0usize, 1, 31, 63, 64, 65, 127] {
                for (s_top, d_top) in [
                    // Clear of MIN; reaching MIN exactly; wrapping past it on one side.
                    (T::LO + 10_000, T::LO + 20_000),
                    (T::LO + 199 * i128::from(steps.0), T::LO + 199 * i128::from(steps.1)),
                    (T::LO + 100 * i128::from(steps.0), T::LO + 10_000),
                    (T::LO + 10_000, T::LO + 120 * i128::from(steps.1)),
                ] {
                    let (mut src, mut dst) = (vec![T::wrap(7); offset], vec![T::wrap(9); offset]);
                    for k in 0..200i128 {
                        src.push(T::wrap(s_top - k * i128::from(steps.0)));
                        dst.push(T::wrap(d_top - k * i128::from(steps.1)));
                    }
                    kit::check_with(&grouper, &src, &dst);
                }
            }
        }
    }
    go::<u32>();
    go::<i32>();
    go::<u64>();
    go::<i64>();
}

/// The README's rule for `Direction::Either`: greedy left to right, and with a cap each
/// piece sets its own direction (so capped runs are not cuts of the uncapped ones).
#[test]
fn either_is_greedy_and_capped_pieces_set_their_own_direction() {
    use corun::{Direction, Grouper, Span};
    let a = [1u32, 2, 3, 2, 1];
    let either = Grouper::new().direction(Direction::Either);
    let spans: Vec<Span> = either.runs(&a, &a).unwrap().collect();
    assert_eq!(spans, [Span { start: 0, len: 3 }, Span { start: 3, len: 2 }]);
    let capped = either.max_len(core::num::NonZeroUsize::new(2).unwrap());
    let spans: Vec<Span> = capped.runs(&a, &a).unwrap().collect();
    let want = [Span { start: 0, len: 2 }, Span { start: 2, len: 2 }, Span { start: 4, len: 1 }];
    assert_eq!(spans, want);
}
