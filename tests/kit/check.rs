//! One differential check of every output form against `corun::scalar`, which is itself
//! checked against the definition on every case (`reference`). Every check panics on a
//! disagreement: a test failure, or a fuzzer crash.
//!
//! The reference and the checks need no feature of corun's: the reference collects
//! `scalar::runs_with` (an iterator) into a std `Vec`, and the `Vec` forms (`group`,
//! feature `alloc`) and `heapless` forms are checked where they are compiled (in the
//! fuzz targets, `--cfg fuzzing`, always), so `cargo test --no-default-features` runs the
//! same checks on the no-heap build's slice forms and iterator.

use core::num::NonZeroUsize;

use corun::{Direction, Error, Grouper, Index, Progress, Span, scalar};

use super::build::{SENTINEL, TestIndex};

/// The reference spans, checked against the definition: they partition `0..len` in
/// order; inside each, every pair steps the same way (up by each side's step, or, with
/// [`Direction::Either`], down by it on both sides, the run's first pair setting the way,
/// up when both hold); and every boundary is a real break or a cut at `max_len`.
pub fn reference<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T]) -> Vec<Span> {
    let spans: Vec<Span> = scalar::runs_with(grouper, src, dst).unwrap().collect();
    let max = grouper.get_max_len().map_or(usize::MAX, NonZeroUsize::get);
    let (ss, ds) = grouper.get_steps();
    let either = grouper.get_direction() == Direction::Either;
    let (ss, ds) = (i128::from(ss), i128::from(ds));
    let moves = |i: usize, down: bool| {
        let (s, d) = if down { (-ss, -ds) } else { (ss, ds) };
        src[i].wide() + s == src[i + 1].wide() && dst[i].wide() + d == dst[i + 1].wide()
    };
    // The way pair `i` goes, if it goes either way this grouping allows (up first).
    let way = |i: usize| {
        if moves(i, false) {
            Some(false)
        } else if either && moves(i, true) {
            Some(true)
        } else {
            None
        }
    };
    let mut pos = 0;
    for span in &spans {
        assert_eq!(span.start, pos, "spans must tile the input");
        assert!(span.len >= 1 && span.len <= max, "span length out of range: {span:?}");
        // Each span is a run of its own (a cut at `max_len` ends a run): its first pair
        // sets its way.
        let dir = if span.len > 1 { way(span.start) } else { None };
        let inside = span.start..span.end() - 1;
        assert!(
            dir.is_some_and(|down| inside.clone().all(|i| moves(i, down))) || inside.is_empty(),
            "a span holds a break or turns: {span:?}"
        );
        if span.end() < src.len() {
            let last = span.end() - 1;
            let continues = match dir {
                Some(down) => moves(last, down),
                None => way(last).is_some(),
            };
            assert!(span.len == max || !continues, "span not maximal: {span:?}");
        }
        pos = span.end();
    }
    assert_eq!(pos, src.len(), "spans must cover the input");
    spans
}

/// `grouper`, and the same grouping in either direction when it is ascending: every check
/// below runs on both, so every generator, test and fuzz target covers descending runs.
pub fn both_ways(grouper: &Grouper) -> impl Iterator<Item = Grouper> {
    let either = grouper.direction(Direction::Either);
    core::iter::once(*grouper).chain((either != *grouper).then_some(either))
}

/// Every output form of `grouper` against the reference, one shot, both ways.
pub fn check_with<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T]) {
    both_ways(grouper).for_each(|g| check_with_one(&g, src, dst));
}

fn check_with_one<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T]) {
    let want = reference(grouper, src, dst);
    let n = want.len();

    assert_eq!(grouper.count_runs(src, dst), Ok(n), "count_runs");
    assert_eq!(scalar::count_runs_with(grouper, src, dst), Ok(n), "scalar::count_runs");
    assert_eq!(grouper.runs(src, dst).unwrap().collect::<Vec<_>>(), want, "runs");
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(grouper.group(src, dst).unwrap(), want, "group");

    let mut out = vec![SENTINEL; n + 2];
    let progress = grouper.group_into(src, dst, &mut out[..n + 1]).unwrap();
    assert_eq!(progress, Progress { consumed: src.len(), spans: n }, "group_into progress");
    assert_eq!(&out[..n], &want[..], "group_into spans");
    assert_eq!(out[n..], [SENTINEL; 2], "group_into wrote past its spans");

    #[cfg(any(feature = "heapless", fuzzing))]
    if n <= 256 {
        let mut hv = heapless::Vec::<Span, 256>::new();
        let progress = grouper.group_into_heapless(src, dst, &mut hv).unwrap();
        assert_eq!(progress, Progress { consumed: src.len(), spans: n }, "heapless progress");
        assert_eq!(&hv[..], &want[..], "heapless spans");
    }
}

/// Every output form with default options against the reference, plus the free functions.
pub fn check<T: TestIndex>(src: &[T], dst: &[T]) {
    check_with(&Grouper::new(), src, dst);
    let want: Vec<Span> = scalar::runs(src, dst).unwrap().collect();
    assert_eq!(corun::count_runs(src, dst), Ok(want.len()));
    assert_eq!(corun::runs(src, dst).unwrap().collect::<Vec<_>>(), want);
    #[cfg(any(feature = "heapless", fuzzing))]
    if want.len() <= 256 {
        let mut hv = heapless::Vec::<Span, 256>::new();
        let done = Progress { consumed: src.len(), spans: want.len() };
        assert_eq!(corun::group_into_heapless(src, dst, &mut hv), Ok(done));
        assert_eq!(&hv[..], &want[..]);
    }
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(corun::group(src, dst).unwrap(), want);
    let mut out = vec![SENTINEL; want.len()];
    assert_eq!(
        corun::group_into(src, dst, &mut out),
        Ok(Progress { consumed: src.len(), spans: want.len() })
    );
    assert_eq!(out, want);
}

/// Fills buffers of the given capacities in turn (cycling), resuming from `consumed`
/// each time, and checks that the pieces add up to the one-shot reference.
pub fn check_resume<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T], caps: &[usize]) {
    both_ways(grouper).for_each(|g| check_resume_one(&g, src, dst, caps));
}

fn check_resume_one<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T], caps: &[usize]) {
    let want = reference(grouper, src, dst);
    let mut got = Vec::new();
    let mut pos = 0;
    for &cap in caps.iter().cycle() {
        if pos == src.len() {
            break;
        }
        let mut out = vec![SENTINEL; cap + 1];
        let p = grouper.group_into(&src[pos..], &dst[pos..], &mut out[..cap]).unwrap();
        assert_eq!(out[cap], SENTINEL, "wrote past the buffer");
        assert!(p.spans <= cap);
        assert!(out[p.spans..].iter().all(|s| *s == SENTINEL), "wrote past its spans");
        if cap > 0 {
            assert!(p.spans > 0 && p.consumed > 0, "no progress with room for a span");
        }
        let spans = &out[..p.spans];
        assert_eq!(spans.last().map_or(0, Span::end), p.consumed, "consumed != end of last span");
        got.extend(spans.iter().map(|s| Span { start: s.start + pos, len: s.len }));
        pos += p.consumed;
    }
    assert_eq!(
        got, want,
        "resumed output differs from one shot ({grouper:?}, src {src:?}, dst {dst:?})"
    );
}

/// The same with a `heapless::Vec` of capacity `N`, `pre` slots already taken each time.
#[cfg(any(feature = "heapless", fuzzing))]
pub fn check_resume_heapless<T: TestIndex, const N: usize>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    pre: usize,
) {
    both_ways(grouper).for_each(|g| check_resume_heapless_one::<T, N>(&g, src, dst, pre));
}

#[cfg(any(feature = "heapless", fuzzing))]
fn check_resume_heapless_one<T: TestIndex, const N: usize>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    pre: usize,
) {
    let pre = pre % N;
    let want = reference(grouper, src, dst);
    let mut got = Vec::new();
    let mut pos = 0;
    while pos < src.len() {
        let mut hv = heapless::Vec::<Span, N>::new();
        for _ in 0..pre {
            hv.push(SENTINEL).unwrap();
        }
        let p = grouper.group_into_heapless(&src[pos..], &dst[pos..], &mut hv).unwrap();
        assert_eq!(hv.len(), pre + p.spans);
        assert!(p.spans > 0, "no progress with room for a span");
        let spans = &hv[pre..];
        assert_eq!(spans.last().map_or(0, Span::end), p.consumed);
        got.extend(spans.iter().map(|s| Span { start: s.start + pos, len: s.len }));
        pos += p.consumed;
    }
    assert_eq!(got, want, "resumed heapless output differs from one shot");
}

/// Unequal lengths: every form returns the error naming both lengths and writes nothing.
pub fn check_mismatch<T: Index>(src: &[T], dst: &[T]) {
    assert_ne!(src.len(), dst.len());
    let err = corun::Error::LengthMismatch { src: src.len(), dst: dst.len() };
    let with_cap = Grouper::new().max_len(NonZeroUsize::MIN);
    for grouper in [Grouper::new(), with_cap] {
        assert_eq!(grouper.count_runs(src, dst), Err(err));
        assert_eq!(grouper.runs(src, dst).err(), Some(err));
        #[cfg(any(feature = "alloc", fuzzing))]
        assert_eq!(grouper.group(src, dst), Err(err));
        let mut out = [SENTINEL; 4];
        assert_eq!(grouper.group_into(src, dst, &mut out), Err(err));
        assert_eq!(out, [SENTINEL; 4]);
        #[cfg(any(feature = "heapless", fuzzing))]
        {
            let mut hv = heapless::Vec::<corun::Span, 4>::new();
            assert_eq!(grouper.group_into_heapless(src, dst, &mut hv), Err(err));
            assert!(hv.is_empty());
        }
        assert_eq!(scalar::count_runs_with(&grouper, src, dst), Err(err));
        assert_eq!(scalar::runs_with(&grouper, src, dst).err(), Some(err));
        assert_eq!(scalar::group_into_with(&grouper, src, dst, &mut out), Err(err));
        #[cfg(any(feature = "alloc", fuzzing))]
        assert_eq!(scalar::group_with(&grouper, src, dst), Err(err));
        assert_eq!(grouped(&grouper, src, dst), Err(err));
    }
    assert_eq!(corun::count_runs(src, dst), Err(err));
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(corun::group(src, dst), Err(err));
    assert_eq!(corun::runs(src, dst).err(), Some(err));
}

/// All spans of `grouper` over `src`/`dst` in a std `Vec`, through the no-heap forms: the
/// count sizes a slice exactly, `group_into` fills it in one call. For tests that want a
/// list of spans without corun's feature `alloc`; where that feature is compiled, the
/// `Vec` form must agree.
pub fn grouped<T: Index>(grouper: &Grouper, src: &[T], dst: &[T]) -> Result<Vec<Span>, Error> {
    let n = grouper.count_runs(src, dst)?;
    let mut out = vec![SENTINEL; n];
    let progress = grouper.group_into(src, dst, &mut out)?;
    assert_eq!(progress, Progress { consumed: src.len(), spans: n }, "group_into of a sized slice");
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(grouper.group(src, dst).as_ref(), Ok(&out), "group against group_into");
    Ok(out)
}

/// Either-direction grouping (with `grouper`'s cap and steps), against the reference and
/// the README's contract for a cap: every piece is a run of its own whose first pair sets
/// its direction, so the piece at `p` is the uncapped grouping's first run of
/// `src[p..]`/`dst[p..]`, cut at the cap. One shot, resumed through slices of `caps`
/// (and `heapless::Vec`s where compiled), and the iterator resumed after `take` spans.
pub fn check_either<T: TestIndex>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    caps: &[usize],
    take: usize,
) {
    let g = grouper.direction(Direction::Either);
    check_with(&g, src, dst);
    check_resume(&g, src, dst, caps);
    #[cfg(any(feature = "heapless", fuzzing))]
    {
        check_resume_heapless::<_, 1>(&g, src, dst, 0);
        check_resume_heapless::<_, 7>(&g, src, dst, take);
    }
    let want = reference(&g, src, dst);
    let (ss, ds) = g.get_steps();
    let uncapped = Grouper::new().steps(ss, ds).direction(Direction::Either);
    let max = g.get_max_len().map_or(usize::MAX, NonZeroUsize::get);
    for span in &want {
        let p = span.start;
        let run = uncapped.runs(&src[p..], &dst[p..]).unwrap().next().unwrap();
        assert_eq!(span.len, run.len.min(max), "the piece at {p}: the uncapped run, cut ({g:?})");
    }
    // The iterator stopped after `take` spans resumes from `consumed`, afresh.
    let mut runs = g.runs(src, dst).unwrap();
    let head: Vec<Span> = runs.by_ref().take(take).collect();
    let at = runs.consumed();
    assert_eq!(at, head.last().map_or(0, Span::end), "consumed after {take} spans");
    let tail = g.runs(&src[at..], &dst[at..]).unwrap().map(|s| Span { start: s.start + at, ..s });
    let whole: Vec<Span> = head.into_iter().chain(tail).collect();
    assert_eq!(whole, want, "the iterator resumed after {take} spans ({g:?})");
}
