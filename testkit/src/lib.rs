//! Shared by corun's tests and fuzz targets: inputs built from *runs* (uniform random
//! integers almost never make them), and one differential check of every output form
//! against `corun::scalar`, which is itself checked against the definition.
//!
//! Every check panics on a disagreement: a test failure, or a fuzzer crash.

use core::num::NonZeroUsize;

pub use arbitrary;

pub mod alphabet;
pub mod desc;
pub mod fuzz;

use arbitrary::{Arbitrary, Unstructured};
use corun::{Grouper, Index, Progress, Span, scalar};

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
/// side's step (+1 unless a test picks another).
#[derive(Clone, Copy, Debug)]
pub struct Seg {
    pub len: usize,
    pub src: Jump,
    pub dst: Jump,
}

impl<'a> Arbitrary<'a> for Seg {
    /// Lengths 1 to 4 half of the time (short runs are where bugs hide), up to 255 else.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let b = u8::arbitrary(u)?;
        let len =
            if b & 0x80 == 0 { 1 + usize::from(b & 3) } else { 1 + 2 * usize::from(b & 0x7f) };
        Ok(Seg { len, src: u.arbitrary()?, dst: u.arbitrary()? })
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
        Jump::Anchor(k) => anchor::<T>(k, step as u64),
        Jump::Delta(delta) => x + i128::from(delta),
    };
    for (i, seg) in segs.iter().enumerate() {
        if seg.len == 0 {
            continue;
        }
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

/// The reference spans, checked against the definition: they partition `0..len` in
/// order, both sides step by exactly their step inside each, and every boundary is a real
/// break (or a cut at `max_len`).
pub fn reference<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T]) -> Vec<Span> {
    let spans = scalar::group_with(grouper, src, dst).unwrap();
    let max = grouper.get_max_len().map_or(usize::MAX, NonZeroUsize::get);
    let (ss, ds) = grouper.get_steps();
    let follows = |i: usize| {
        src[i].wide() + i128::from(ss) == src[i + 1].wide()
            && dst[i].wide() + i128::from(ds) == dst[i + 1].wide()
    };
    let mut pos = 0;
    for span in &spans {
        assert_eq!(span.start, pos, "spans must tile the input");
        assert!(span.len >= 1 && span.len <= max, "span length out of range: {span:?}");
        assert!((span.start..span.end() - 1).all(follows), "a span holds a break: {span:?}");
        if span.end() < src.len() {
            assert!(span.len == max || !follows(span.end() - 1), "span not maximal: {span:?}");
        }
        pos = span.end();
    }
    assert_eq!(pos, src.len(), "spans must cover the input");
    spans
}

/// Every output form of `grouper` against the reference, one shot.
pub fn check_with<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T]) {
    let want = reference(grouper, src, dst);
    let n = want.len();

    assert_eq!(grouper.count_runs(src, dst), Ok(n), "count_runs");
    assert_eq!(scalar::count_runs_with(grouper, src, dst), Ok(n), "scalar::count_runs");
    assert_eq!(grouper.runs(src, dst).unwrap().collect::<Vec<_>>(), want, "runs");
    assert_eq!(grouper.group(src, dst).unwrap(), want, "group");

    let mut out = vec![SENTINEL; n + 2];
    let progress = grouper.group_into(src, dst, &mut out[..n + 1]).unwrap();
    assert_eq!(progress, Progress { consumed: src.len(), spans: n }, "group_into progress");
    assert_eq!(&out[..n], &want[..], "group_into spans");
    assert_eq!(out[n..], [SENTINEL; 2], "group_into wrote past its spans");

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
    let want = scalar::group(src, dst).unwrap();
    assert_eq!(corun::count_runs(src, dst), Ok(want.len()));
    assert_eq!(corun::runs(src, dst).unwrap().collect::<Vec<_>>(), want);
    if want.len() <= 256 {
        let mut hv = heapless::Vec::<Span, 256>::new();
        let done = Progress { consumed: src.len(), spans: want.len() };
        assert_eq!(corun::group_into_heapless(src, dst, &mut hv), Ok(done));
        assert_eq!(&hv[..], &want[..]);
    }
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
    assert_eq!(got, want, "resumed output differs from one shot");
}

/// The same with a `heapless::Vec` of capacity `N`, `pre` slots already taken each time.
pub fn check_resume_heapless<T: TestIndex, const N: usize>(
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
        assert_eq!(grouper.group(src, dst), Err(err));
        let mut out = [SENTINEL; 4];
        assert_eq!(grouper.group_into(src, dst, &mut out), Err(err));
        assert_eq!(out, [SENTINEL; 4]);
        let mut hv = heapless::Vec::<corun::Span, 4>::new();
        assert_eq!(grouper.group_into_heapless(src, dst, &mut hv), Err(err));
        assert!(hv.is_empty());
        assert_eq!(scalar::count_runs_with(&grouper, src, dst), Err(err));
        assert_eq!(scalar::group_with(&grouper, src, dst), Err(err));
    }
    assert_eq!(corun::count_runs(src, dst), Err(err));
    assert_eq!(corun::group(src, dst), Err(err));
    assert_eq!(corun::runs(src, dst).err(), Some(err));
}
