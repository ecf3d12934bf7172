//! Structured fuzz inputs: the fuzzer's bytes decode into run-built arrays of an index
//! type it picks, plus the knobs each target needs. Each `run` is one fuzz iteration.
//!
//! The descriptor and gather checks hold corun's writers to `corun::scalar::desc`, which
//! needs corun's feature `alloc`: without it (`cargo test --no-default-features`) those
//! two targets are left out of [`TARGETS`] and `raw` checks its grouping only.

use core::num::NonZeroUsize;

use arbitrary::Arbitrary;
use corun::Grouper;

use super::alphabet::{self, Pick};
#[cfg(any(feature = "heapless", fuzzing))]
use super::check_resume_heapless;
use super::desc::LayoutSpec;
#[cfg(any(feature = "alloc", fuzzing))]
use super::desc::{check_descriptors, check_gather};
use super::unordered::{self, Order, check_unordered};
use super::{
    Seg, TestIndex, anchor, build, check, check_either, check_mismatch, check_resume, check_with,
    step_of,
};

/// Every fuzz target, as fuzz/Cargo.toml names them: the ones [`replay`] runs here.
#[cfg(any(feature = "alloc", fuzzing))]
pub const TARGETS: &[&str] = &[
    "agree",
    "resume",
    "max_len",
    "mismatch",
    "steps",
    "descriptors",
    "gather",
    "raw",
    "place",
    "unordered",
    "either",
];

/// Every fuzz target but the two held to `corun::scalar::desc` (feature `alloc`).
#[cfg(not(any(feature = "alloc", fuzzing)))]
pub const TARGETS: &[&str] =
    &["agree", "resume", "max_len", "mismatch", "steps", "raw", "place", "unordered", "either"];

/// Which index type the arrays are.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Ty {
    U32,
    I32,
    U64,
    I64,
}

/// Where a side starts: near a limit, or anywhere.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Start {
    Anchor(u8),
    Raw(i64),
}

/// Paired arrays made of runs, of one index type.
#[derive(Clone, Debug, Arbitrary)]
pub struct Pairs {
    pub ty: Ty,
    pub start: (Start, Start),
    pub segs: Vec<Seg>,
}

/// Runs `$body` with the type alias `$t` set to the chosen index type.
macro_rules! for_type {
    ($ty:expr, |$t:ident| $body:block) => {
        match $ty {
            Ty::U32 => {
                type $t = u32;
                $body
            }
            Ty::I32 => {
                type $t = i32;
                $body
            }
            Ty::U64 => {
                type $t = u64;
                $body
            }
            Ty::I64 => {
                type $t = i64;
                $body
            }
        }
    };
}

/// Runs `$body` with `$src`, `$dst` the arrays built for the chosen type.
macro_rules! with_pairs {
    ($pairs:expr, |$src:ident, $dst:ident| $body:expr) => {
        for_type!($pairs.ty, |T| {
            let ($src, $dst) = $pairs.build::<T>();
            $body
        })
    };
}

impl Pairs {
    /// The arrays; at most 64 segments (up to 16K positions) to keep iterations fast.
    pub fn build<T: TestIndex>(&self) -> (Vec<T>, Vec<T>) {
        self.build_steps((1, 1))
    }

    /// The arrays, each side stepping by its step inside a run.
    pub fn build_steps<T: TestIndex>(&self, steps: (u64, u64)) -> (Vec<T>, Vec<T>) {
        let start = |s: Start, step| match s {
            Start::Anchor(k) => anchor::<T>(k, step),
            Start::Raw(x) => i128::from(x),
        };
        let segs = &self.segs[..self.segs.len().min(64)];
        build::<T>((start(self.start.0, steps.0), start(self.start.1, steps.1)), segs, steps)
    }
}

/// Steps picked by the input (see [`step_of`]); `None` means +1, +1.
fn steps<T: TestIndex>(pick: Option<(u8, u8)>) -> (u64, u64) {
    pick.map_or((1, 1), |(s, d)| (step_of::<T>(s), step_of::<T>(d)))
}

/// Target `steps`: strided grouping, every output form and resumption.
#[derive(Debug, Arbitrary)]
pub struct Steps {
    pub pairs: Pairs,
    pub steps: (u8, u8),
    pub max_len: Option<u16>,
    pub caps: Vec<u8>,
}

impl Steps {
    pub fn run(&self) {
        for_type!(self.pairs.ty, |T| {
            let steps = steps::<T>(Some(self.steps));
            let (src, dst) = self.pairs.build_steps::<T>(steps);
            let grouper = grouper(self.max_len).steps(steps.0, steps.1);
            let caps: Vec<usize> = self.caps.iter().map(|&c| 1 + usize::from(c % 16)).collect();
            check_with(&grouper, &src, &dst);
            check_resume(&grouper, &src, &dst, if caps.is_empty() { &[3] } else { &caps });
        });
    }
}

/// Paired arrays (strided or not), a run cap, a layout and buffer capacities: the input
/// of the `descriptors` and `gather` targets.
#[derive(Debug, Arbitrary)]
pub struct DescCase {
    pub pairs: Pairs,
    pub steps: Option<(u8, u8)>,
    pub max_len: Option<u16>,
    pub layout: LayoutSpec,
    pub caps: Vec<u8>,
}

#[cfg(any(feature = "alloc", fuzzing))]
impl DescCase {
    fn run(&self, gather: bool) {
        for_type!(self.pairs.ty, |T| {
            let steps = steps::<T>(self.steps);
            let (src, dst) = self.pairs.build_steps::<T>(steps);
            let grouper = grouper(self.max_len).steps(steps.0, steps.1);
            let layers = self.layout.layers(steps);
            let layout = self.layout.layout(&layers);
            let caps: Vec<usize> = self.caps.iter().map(|&c| 1 + usize::from(c % 8)).collect();
            let caps = if caps.is_empty() { vec![2] } else { caps };
            if gather {
                check_gather(&grouper, &src, &dst, &layout, self.layout.max_sge(), &caps);
            } else {
                check_descriptors(&grouper, &src, &dst, &layout, &caps);
            }
        });
    }
}

/// Target `descriptors`: every descriptor form against the reference, resumed too.
#[derive(Debug, Arbitrary)]
pub struct Descriptors(pub DescCase);

#[cfg(any(feature = "alloc", fuzzing))]
impl Descriptors {
    pub fn run(&self) {
        self.0.run(false);
    }
}

/// Target `gather`: gather lists against the reference, resumed too.
#[derive(Debug, Arbitrary)]
pub struct Gather(pub DescCase);

#[cfg(any(feature = "alloc", fuzzing))]
impl Gather {
    pub fn run(&self) {
        self.0.run(true);
    }
}

/// Target `agree`: every output form against the reference.
#[derive(Debug, Arbitrary)]
pub struct Agree {
    pub pairs: Pairs,
}

impl Agree {
    pub fn run(&self) {
        with_pairs!(self.pairs, |src, dst| check(&src, &dst));
    }
}

/// Target `resume`: buffers of capacities picked by the input, resumed until done.
#[derive(Debug, Arbitrary)]
pub struct Resume {
    pub pairs: Pairs,
    pub caps: Vec<u8>,
    pub max_len: Option<u16>,
    pub heapless_taken: u8,
}

impl Resume {
    pub fn run(&self) {
        let grouper = grouper(self.max_len);
        let caps: Vec<usize> = self.caps.iter().map(|&c| 1 + usize::from(c % 64)).collect();
        let caps = if caps.is_empty() { vec![1] } else { caps };
        with_pairs!(self.pairs, |src, dst| {
            check_resume(&grouper, &src, &dst, &caps);
            #[cfg(any(feature = "heapless", fuzzing))]
            {
                check_resume_heapless::<_, 1>(&grouper, &src, &dst, 0);
                let taken = usize::from(self.heapless_taken);
                check_resume_heapless::<_, 7>(&grouper, &src, &dst, taken);
            }
        });
    }
}

/// Target `max_len`: the run-length cap on every output form.
#[derive(Debug, Arbitrary)]
pub struct MaxLen {
    pub pairs: Pairs,
    pub max_len: u16,
}

impl MaxLen {
    pub fn run(&self) {
        let grouper = grouper(Some(self.max_len));
        with_pairs!(self.pairs, |src, dst| check_with(&grouper, &src, &dst));
    }
}

/// Target `mismatch`: one side cut short (possibly to nothing), or padded.
#[derive(Debug, Arbitrary)]
pub struct Mismatch {
    pub pairs: Pairs,
    pub cut: u16,
    pub cut_src: bool,
    pub grow: bool,
}

impl Mismatch {
    pub fn run(&self) {
        with_pairs!(self.pairs, |src, dst| {
            let (mut src, mut dst) = (src, dst);
            let side = if self.cut_src { &mut src } else { &mut dst };
            if self.grow {
                let extra = usize::from(self.cut % 300) + 1;
                side.resize(side.len() + extra, Default::default());
            } else {
                if side.is_empty() {
                    return;
                }
                side.truncate(usize::from(self.cut) % side.len());
            }
            check_mismatch(&src, &dst);
        });
    }
}

/// Target `raw`: arrays drawn freely from the alphabet (`super::alphabet`: values at the
/// type's limits, each side drawing a value or continuing by its step), no run structure,
/// under steps from the alphabet's set: every output form (capped and resumed through 1
/// to 5 slots) and, with a layout, descriptors and gather lists against the reference.
#[derive(Debug, Arbitrary)]
pub struct Raw {
    pub ty: Ty,
    pub steps: (u8, u8),
    pub cap: u8,
    pub layout: Option<LayoutSpec>,
    /// One `(src, dst)` pick per position (see [`Pick::from_byte`]); at most 400 used.
    pub picks: Vec<(u8, u8)>,
}

impl Raw {
    pub fn run(&self) {
        for_type!(self.ty, |T| {
            let all = alphabet::steps::<T>();
            let pick = |k: u8| all[usize::from(k) % all.len()];
            let steps = (pick(self.steps.0), pick(self.steps.1));
            let picks = self.picks.iter().take(400);
            let picks = picks.map(|&(s, d)| (Pick::from_byte(s), Pick::from_byte(d)));
            let (src, dst) = alphabet::arrays::<T>(picks, steps);
            let grouper = Grouper::new().steps(steps.0, steps.1);
            alphabet::check_all(&grouper, &src, &dst, &[usize::from(self.cap % 6)]);
            #[cfg(any(feature = "alloc", fuzzing))]
            if let Some(spec) = &self.layout {
                let layers = spec.layers(steps);
                let layout = spec.layout(&layers);
                check_descriptors(&grouper, &src, &dst, &layout, &[2]);
                check_gather(&grouper, &src, &dst, &layout, spec.max_sge(), &[2]);
            }
        });
    }
}

/// No cap for `None` or 0, else a cap of that many positions.
fn grouper(max_len: Option<u16>) -> Grouper {
    match max_len.and_then(|m| NonZeroUsize::new(usize::from(m))) {
        Some(m) => Grouper::new().max_len(m),
        None => Grouper::new(),
    }
}

/// Target `place`: placement of a run-built first side into a free list of distinct
/// pages (stretches of ids near an anchor, some reversed, shuffled), against the
/// reference and the contract ([`check_place`](super::place::check_place)).
#[derive(Debug, Arbitrary)]
pub struct Place {
    pub pairs: Pairs,
    pub base: Start,
    pub span: u16,
    pub keep: u64,
    pub cuts: u64,
    pub flips: u64,
    pub seed: u64,
}

impl Place {
    pub fn run(&self) {
        for_type!(self.pairs.ty, |T| {
            let (first, _) = self.pairs.build::<T>();
            let first = &first[..first.len().min(512)];
            let base = match self.base {
                Start::Anchor(k) => anchor::<T>(k, 1),
                Start::Raw(x) => i128::from(x),
            };
            let span = usize::from(self.span % 2048);
            let free = super::place::free_list::<T>(
                base, span, !self.keep, self.cuts, self.flips, self.seed,
            );
            super::place::check_place(first, &free);
        });
    }
}

/// Target `unordered`: `sort_by_destination`, then the runs of its output, against
/// the reference (std's sort, then `corun::scalar`) and the fewest runs of the set. The
/// input steers every way the sort takes ([`unordered::path`]): one run ascending or
/// descending, runs in any order, pages shuffled under and over 256 of them, their ids
/// spanning 1 to 4 radix passes or more than 2^32 (64-bit types), sorted, descending or
/// nearly sorted input, repeated destinations.
#[derive(Debug, Arbitrary)]
pub struct Unordered {
    /// The index type: `u32`, `i32`, `u64`, `i64` by `ty % 4`.
    pub ty: u8,
    /// The first destination: an anchor near a limit (below 128), else `raw_first`.
    pub first: u8,
    pub raw_first: i64,
    /// Pieces ([`unordered::pieces`]): how many, their length, gaps and directions.
    pub count: u16,
    pub len: u8,
    pub gap: u8,
    pub down: u8,
    /// How they are handed over: kept, reversed, runs or pages shuffled, a few swaps.
    pub order: u8,
    /// Not 0: the page at `repeat % n` takes the destination of another.
    pub repeat: u16,
    /// A cap on the runs of the sorted pairs (0: none).
    pub max_len: u16,
    pub seed: u64,
}

impl Unordered {
    /// The input pairs.
    pub fn build<T: TestIndex>(&self) -> (Vec<T>, Vec<T>) {
        let first =
            if self.first < 128 { anchor::<T>(self.first, 1) } else { i128::from(self.raw_first) };
        let order = [
            Order::Kept,
            Order::Reversed,
            Order::RunsShuffled,
            Order::PagesShuffled,
            Order::FewSwaps,
        ][usize::from(self.order % 5)];
        let count = usize::from(self.count) % (unordered::MOST_PAGES + 1);
        let pieces = unordered::pieces(count, self.len, self.gap, self.down, self.seed);
        let (src, mut dst) = unordered::build::<T>(&pieces, first, order, self.seed);
        let n = dst.len();
        if self.repeat != 0 && n >= 2 {
            let i = usize::from(self.repeat) % n;
            dst[i] = dst[(i + 1 + (self.seed as usize % (n - 1))) % n];
        }
        (src, dst)
    }

    /// The index type `ty` picks.
    pub fn ty(&self) -> Ty {
        [Ty::U32, Ty::I32, Ty::U64, Ty::I64][usize::from(self.ty % 4)]
    }

    /// The way the sort takes on this input ([`unordered::path`]).
    pub fn path(&self) -> &'static str {
        for_type!(self.ty(), |T| { unordered::path(&self.build::<T>().1) })
    }

    pub fn run(&self) {
        for_type!(self.ty(), |T| {
            let (src, dst) = self.build::<T>();
            check_unordered(&grouper(Some(self.max_len)), &src, &dst);
        });
    }
}

/// Target `either`: either-direction grouping with a cap ([`check_either`]): the
/// reference, the cap's contract (each piece a run of its own, its direction set afresh),
/// resumed through slices, `heapless::Vec`s and the iterator.
#[derive(Debug, Arbitrary)]
pub struct Either {
    /// The cap: 1 to 8 half of the time, around a block (60 to 67), or anything (0: none).
    pub max_len: u16,
    pub steps: Option<(u8, u8)>,
    pub caps: [u8; 3],
    pub take: u8,
    pub pairs: Pairs,
}

impl Either {
    pub fn run(&self) {
        let m = self.max_len;
        let cap = match m % 4 {
            0 | 1 => 1 + m % 8,
            2 => 60 + m % 8,
            _ => m >> 2,
        };
        let caps: Vec<usize> = self.caps.iter().map(|&c| 1 + usize::from(c % 16)).collect();
        for_type!(self.pairs.ty, |T| {
            let steps = steps::<T>(self.steps);
            let (src, dst) = self.pairs.build_steps::<T>(steps);
            let grouper = grouper(Some(cap)).steps(steps.0, steps.1);
            check_either(&grouper, &src, &dst, &caps, usize::from(self.take));
        });
    }
}

/// The input `I` decoded from `bytes` as libfuzzer-sys decodes it; `None` when it does not
/// decode (the fuzzer skips those too).
pub fn decode<'a, I: Arbitrary<'a>>(bytes: &'a [u8]) -> Option<I> {
    if bytes.len() < I::size_hint(0).0 {
        return None;
    }
    I::arbitrary_take_rest(arbitrary::Unstructured::new(bytes)).ok()
}

/// Decodes `bytes` as libfuzzer-sys does for target `target` and runs one iteration;
/// `false` when the bytes do not decode (the fuzzer skips those too). Used to replay the
/// seed corpora and found crashes under `cargo test`.
pub fn replay(target: &str, bytes: &[u8]) -> bool {
    fn run<'a, I: Arbitrary<'a>>(bytes: &'a [u8], go: impl FnOnce(&I)) -> bool {
        decode::<I>(bytes).map(|input| go(&input)).is_some()
    }
    match target {
        "agree" => run(bytes, Agree::run),
        "resume" => run(bytes, Resume::run),
        "max_len" => run(bytes, MaxLen::run),
        "mismatch" => run(bytes, Mismatch::run),
        "steps" => run(bytes, Steps::run),
        #[cfg(any(feature = "alloc", fuzzing))]
        "descriptors" => run(bytes, Descriptors::run),
        #[cfg(any(feature = "alloc", fuzzing))]
        "gather" => run(bytes, Gather::run),
        "raw" => run(bytes, Raw::run),
        "place" => run(bytes, Place::run),
        "unordered" => run(bytes, Unordered::run),
        "either" => run(bytes, Either::run),
        _ => panic!("no fuzz target named {target}"),
    }
}
