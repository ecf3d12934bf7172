//! Order-free grouping (`corun::sort_by_destination`, then any grouping form): the
//! reference, written from its contract with std's sort and nothing of corun's (the
//! pairs sorted by destination, or, for a repeated destination, the first two input
//! positions of the smallest repeated one), the check of the sort and of the runs of its
//! output, and the inputs the tests and the `unordered` fuzz target share: runs of
//! destinations of every length, ascending or descending, handed over in any order.

use std::collections::HashSet;

use corun::{Error, Grouper, sort_by_destination};

use super::{TestIndex, check_with};

/// What `sort_by_destination(src, dst, ..)` must give with outputs of the inputs' length.
pub fn reference<T: TestIndex>(src: &[T], dst: &[T]) -> Result<(Vec<T>, Vec<T>), Error> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch { src: src.len(), dst: dst.len() });
    }
    let mut pairs: Vec<(T, T, usize)> =
        src.iter().zip(dst).enumerate().map(|(i, (&s, &d))| (s, d, i)).collect();
    pairs.sort_by_key(|&(_, d, i)| (d, i));
    if let Some(w) = pairs.windows(2).find(|w| w[0].1 == w[1].1) {
        return Err(Error::DuplicateDestination { first: w[0].2, second: w[1].2 });
    }
    Ok(pairs.iter().map(|p| (p.0, p.1)).unzip())
}

/// `sort_by_destination` against [`reference`], and on an error the outputs hold the
/// pairs in some order (the contract); outputs one too short or too long are a length
/// error (`src` and `dst` of unequal lengths are checked first). Returns whether the
/// destinations were distinct.
pub fn check_sorted<T: TestIndex>(src: &[T], dst: &[T]) -> bool {
    sorted_checked(src, dst).is_some()
}

/// [`check_sorted`], returning the sorted pairs when the destinations were distinct.
pub fn sorted_checked<T: TestIndex>(src: &[T], dst: &[T]) -> Option<(Vec<T>, Vec<T>)> {
    let n = src.len();
    let (mut s, mut d) = (vec![T::wrap(7); n], vec![T::wrap(7); n]);
    let got = sort_by_destination(src, dst, &mut s, &mut d);
    let want = reference(src, dst);
    match (&got, &want) {
        (Ok(()), Ok((ws, wd))) => {
            assert_eq!((&s, &d), (ws, wd), "sorted pairs of src {src:?} dst {dst:?}");
        }
        _ => assert_eq!(got, want.as_ref().map(|_| ()).map_err(|&e| e), "src {src:?} dst {dst:?}"),
    }
    if got.is_err() && src.len() == dst.len() {
        let mut held: Vec<_> = s.iter().zip(&d).collect();
        let mut given: Vec<_> = src.iter().zip(dst).collect();
        held.sort();
        given.sort();
        assert_eq!(held, given, "after the error the outputs hold the pairs: dst {dst:?}");
    }
    if src.len() == dst.len() {
        let shorter = n.checked_sub(1).map(|m| (m, n));
        for (a, b) in [(n + 1, n), (n, n + 1)].into_iter().chain(shorter) {
            let (mut s, mut d) = (vec![T::wrap(0); a], vec![T::wrap(0); b]);
            let bad = if a != n { a } else { b };
            let got = sort_by_destination(src, dst, &mut s, &mut d);
            assert_eq!(got, Err(Error::LengthMismatch { src: n, dst: bad }));
        }
    }
    want.ok().map(|_| (s, d))
}

/// The fewest runs any order of the set of pairs has (the definition, by a hash set):
/// `n` minus the pairs whose successor `(s + 1, d + 1)` is in the set.
pub fn fewest<T: TestIndex>(src: &[T], dst: &[T]) -> usize {
    let set: HashSet<(i128, i128)> =
        src.iter().zip(dst).map(|(s, d)| (s.wide(), d.wide())).collect();
    let linked = set.iter().filter(|&&(s, d)| set.contains(&(s + 1, d + 1))).count();
    src.len() - linked
}

/// Order-free runs: the sort against [`reference`], then every grouping form of
/// `grouper` (both directions) over the sorted pairs against `corun::scalar`, and their
/// ascending count against the definition ([`fewest`]). Returns whether the
/// destinations were distinct.
pub fn check_unordered<T: TestIndex>(grouper: &Grouper, src: &[T], dst: &[T]) -> bool {
    let Some((s, d)) = sorted_checked(src, dst) else { return false };
    check_with(grouper, &s, &d);
    assert_eq!(corun::count_runs(&s, &d), Ok(fewest(src, dst)), "the fewest runs: dst {dst:?}");
    true
}

/// One run of destinations: `len` values from `gap` past the last run's highest value
/// (1: adjacent, 0 or less: sharing destinations with it), presented descending when
/// `down`; its sources start `src_jump` past the last source and step by +1.
#[derive(Clone, Copy, Debug)]
pub struct Piece {
    pub len: usize,
    pub down: bool,
    pub gap: i64,
    pub src_jump: i64,
}

/// How the pieces are handed over: as built (sorted but for descending pieces), all
/// reversed (descending), with the pieces shuffled (a free queue's runs), every page
/// shuffled (mostly singletons), or as built with a few pages swapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Kept,
    Reversed,
    RunsShuffled,
    PagesShuffled,
    FewSwaps,
}

/// xorshift64: the shuffles' and the pieces' deterministic choices.
pub struct Rng(pub u64);

impl Rng {
    fn step(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Below `u64::MAX`, whatever the width of `usize`: wide gaps and source jumps draw
    /// from this, so that 32-bit targets build the same inputs from the same seeds (with
    /// `below(usize::MAX)` they drew below 2^32 there, and no seed reached a wide span).
    pub fn wide(&mut self) -> u64 {
        self.step() % u64::MAX
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.step() % n.max(1) as u64) as usize
    }
}

/// Pairs made of `pieces` from destination `first`, handed over in `order` (`seed`
/// shuffles), wrapped into `T` (a run past `MAX` wraps to `MIN`: a break).
pub fn build<T: TestIndex>(
    pieces: &[Piece],
    first: i128,
    order: Order,
    seed: u64,
) -> (Vec<T>, Vec<T>) {
    let mut rng = Rng(seed | 1);
    let mut runs: Vec<Vec<(T, T)>> = Vec::new();
    let (mut s, mut d) = (0i128, first);
    for (k, p) in pieces.iter().enumerate() {
        if k > 0 {
            d += i128::from(p.gap);
        }
        s += i128::from(p.src_jump);
        let mut run: Vec<(T, T)> =
            (0..p.len as i128).map(|i| (T::wrap(s + i), T::wrap(d + i))).collect();
        if p.down {
            run.iter_mut()
                .zip((0..p.len as i128).rev())
                .for_each(|(pair, i)| pair.1 = T::wrap(d + i));
        }
        runs.push(run);
        (s, d) = (s + p.len as i128, d + p.len as i128 - 1);
    }
    if order == Order::RunsShuffled {
        for i in (1..runs.len()).rev() {
            runs.swap(i, rng.below(i + 1));
        }
    }
    let mut pairs: Vec<(T, T)> = runs.concat();
    match order {
        Order::PagesShuffled => {
            for i in (1..pairs.len()).rev() {
                pairs.swap(i, rng.below(i + 1));
            }
        }
        Order::Reversed => pairs.reverse(),
        Order::FewSwaps if !pairs.is_empty() => {
            for _ in 0..1 + rng.below(4) {
                let (i, j) = (rng.below(pairs.len()), rng.below(pairs.len()));
                pairs.swap(i, j);
            }
        }
        Order::Kept | Order::RunsShuffled | Order::FewSwaps => {}
    }
    pairs.into_iter().unzip()
}

/// At most this many pages from [`pieces`]: past the radix sort's threshold, fast enough
/// for a fuzz iteration.
pub const MOST_PAGES: usize = 4096;

/// Up to `count` pieces (and [`MOST_PAGES`] pages) drawn by `seed`: lengths 1 to `1 +
/// len % 64`, a piece descending when a draw out of 8 falls below `down`, sources
/// contiguous from piece to piece but one in four, and gaps by `gap`'s top two bits:
/// adjacent (one run when kept), small (1 to `1 + gap % 64`), wide (up to `2^(gap % 64)`:
/// a span past `2^32` from about 2^26 on), or -3 to 3 (destinations shared, overlapping).
pub fn pieces(count: usize, len: u8, gap: u8, down: u8, seed: u64) -> Vec<Piece> {
    let mut rng = Rng(seed | 1);
    let (mut out, mut total) = (Vec::new(), 0);
    while out.len() < count && total < MOST_PAGES {
        let len = 1 + rng.below(1 + usize::from(len % 64));
        let bits = u32::from(gap % 64);
        let gap = match gap >> 6 {
            0 => 1,
            1 => 1 + rng.below(1 + usize::from(gap % 64)) as i64,
            2 => 1 + (rng.wide() >> (64 - bits.max(1))) as i64,
            _ => rng.below(7) as i64 - 3,
        };
        let src_jump = if rng.below(4) == 0 { rng.wide() as i64 } else { 0 };
        out.push(Piece { len, down: rng.below(8) < usize::from(down), gap, src_jump });
        total += len;
    }
    out
}

/// `RADIX_MIN` of `src/order/radix.rs` (private there), copied by hand: change both
/// together (the seeds of the "few" ways hold 24 pages, under it).
const RADIX_MIN: usize = 32;

/// The way `sort_by_destination` takes through `dst`, by its documented rule: by runs
/// when `dst` has at most `n / 2` maximal runs stepping by +1 or -1, which share no
/// destination; else by pages: the radix sort of positions when the destinations span
/// at most 2^32 ids (`radix-N` by its passes, from the radix sort's threshold of 32 pages:
/// `src/order/radix.rs`, `RADIX_MIN`), the introsort for
/// a wider span or few pages (by its input: sorted, descending or any). For the seeds'
/// coverage test: every way must be among them.
pub fn path<T: TestIndex>(dst: &[T]) -> &'static str {
    let n = dst.len();
    let wide: Vec<i128> = dst.iter().map(|d| d.wide()).collect();
    let mut seen = HashSet::new();
    if !wide.iter().all(|d| seen.insert(*d)) {
        return "repeated destination";
    }
    let (mut k, mut at) = (0, 0);
    while at < n {
        let down = at + 1 < n && wide[at + 1] == wide[at] - 1;
        let step = if down { -1 } else { 1 };
        let mut end = at + 1;
        while end < n && wide[end] == wide[end - 1] + step {
            end += 1;
        }
        (k, at) = (k + 1, end);
    }
    if n >= 2 && k <= n / 2 {
        return if k == 1 { "by runs: one run" } else { "by runs" };
    }
    let span = wide.iter().max().unwrap_or(&0) - wide.iter().min().unwrap_or(&0);
    let passes = (128 - span.leading_zeros()).div_ceil(8).max(1);
    if n >= RADIX_MIN && passes <= 4 {
        return ["radix-1", "radix-2", "radix-3", "radix-4"][passes as usize - 1];
    }
    let why = if n >= RADIX_MIN { "wide" } else { "few" };
    if wide.windows(2).all(|w| w[0] < w[1]) {
        if why == "wide" { "introsort (wide): sorted" } else { "introsort (few): sorted" }
    } else if wide.windows(2).all(|w| w[0] > w[1]) {
        if why == "wide" { "introsort (wide): descending" } else { "introsort (few): descending" }
    } else if why == "wide" {
        "introsort (wide)"
    } else {
        "introsort (few)"
    }
}
