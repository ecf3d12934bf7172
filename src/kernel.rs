//! The SIMD kernel, written once over [`Lanes`]: break bitmasks, a block at a time.
//!
//! What it computes and how, in pseudocode, is on the crate's front page (section *The
//! kernel* of `src/lib.rs`), where docs.rs shows it; this module is private.
//!
//! The vector type of each index type and SIMD level is chosen once, in `lanes::pick`;
//! nothing here names a `wide` type.

use crate::index::{Index, follows_by};
use crate::lanes::{BLOCK, Lanes};
use crate::step::{LaneSteps, Steps};

/// Break bits of one block (see *The kernel* in the crate docs).
///
/// A block without breaks is one run: `x[base + k] == x[base] + k * step` for `k` in
/// `0..=BLOCK`, on both sides, with no wrap. That needs one load per vector (the floor's
/// cost) against a running sum, where the exact bits need the shifted loads too. No wrap
/// is possible when `x[base] <= MAX - BLOCK * step`; checking that and the last element
/// first sends most blocks with breaks straight to the exact path.
#[inline(always)]
fn block_bits<T: Index>(block: [&[T; BLOCK]; 4], steps: &LaneSteps<T>) -> u64 {
    let [a_s, b_s, a_d, b_d] = block;
    let (s0, d0) = (a_s[0], a_d[0]);
    let (src, dst) = (&steps.src, &steps.dst);
    if let (Some(gs), Some(gd)) = (src.guard, dst.guard)
        && s0 <= gs
        && d0 <= gd
        && b_s[BLOCK - 1] == s0.wrapping_add(src.block)
        && b_d[BLOCK - 1] == d0.wrapping_add(dst.block)
    {
        let mut s = T::Lanes::splat(s0) + src.iota;
        let mut d = T::Lanes::splat(d0) + dst.iota;
        let mut any = T::Lanes::splat(T::default()); // zero
        for (x, y) in T::Lanes::split(a_s).zip(T::Lanes::split(a_d)) {
            any = any | (x ^ s) | (y ^ d);
            (s, d) = (s + src.stride, d + dst.stride);
        }
        if any.all_zero() {
            return 0;
        }
    }
    if steps.top_bit_rule { exact_bits(a_s, b_s, a_d, b_d, steps) } else { pair_bits(block, steps) }
}

/// Break bits of a block that has (or may have) breaks.
///
/// A pair is good when `b - a == step` (wrapping) on both sides and neither side wrapped.
/// With a step of at most half the range, an unsigned value's top bit can only go from 1
/// to 0 by wrapping past `MAX`, and a signed value's only from 0 to 1 by wrapping past
/// `MAX` (without a wrap, `b >= a`, and a step that wraps lands below the step), so a wrap
/// needs a top bit set in `a` (unsigned) or in `b` (signed). Real indices almost never
/// have one, so this pass only ORs those candidates together, and only a block that has
/// any adds [`wrap_bits`], the wrap test of each pair.
///
/// Out of line: inlined, the compiler keeps every loaded vector of the fast path alive
/// for this one and spills them; reloading from L1 here is cheaper. The blocks are
/// separate arguments so that they travel in registers, not through a stack array
/// built for every block.
#[inline(never)]
fn exact_bits<T: Index>(
    a_s: &[T; BLOCK],
    b_s: &[T; BLOCK],
    a_d: &[T; BLOCK],
    b_d: &[T; BLOCK],
    steps: &LaneSteps<T>,
) -> u64 {
    let (one_s, one_d) = (steps.src.one, steps.dst.one);
    let s = T::Lanes::split(a_s).zip(T::Lanes::split(b_s));
    let d = T::Lanes::split(a_d).zip(T::Lanes::split(b_d));
    // The vectors cover the block's 64 bits exactly, so the pairs that step are gathered
    // and negated once (negating each vector's bits made LLVM assemble the mask in
    // vector registers, a longer chain than these shifts).
    let mut good = 0u64;
    let mut tops = T::Lanes::splat(T::default()); // zero
    for (k, ((a, b), (c, d))) in s.zip(d).enumerate() {
        let stepped = (b - a).eq_top(one_s) & (d - c).eq_top(one_d);
        tops = tops | if T::SIGNED { b | d } else { a | c };
        good |= stepped.top_bits() << (k * T::Lanes::WIDTH);
    }
    let mut bits = !good;
    if tops.top_bits() != 0 {
        bits |= wrap_bits([a_s, b_s, a_d, b_d]);
    }
    bits
}

/// The pairs that wrap on either side (bit `k` for pair `k`), for a block with wrap
/// candidates: with [`exact_bits`]' step test they make the block's breaks.
#[cold]
#[inline(never)]
fn wrap_bits<T: Index>(block: [&[T; BLOCK]; 4]) -> u64 {
    let [a_s, b_s, a_d, b_d] = block;
    let wrapped = |a: T::Lanes, b: T::Lanes| if T::SIGNED { !a & b } else { a & !b };
    let s = T::Lanes::split(a_s).zip(T::Lanes::split(b_s));
    let d = T::Lanes::split(a_d).zip(T::Lanes::split(b_d));
    s.zip(d).enumerate().fold(0, |bits, (k, ((a, b), (c, d)))| {
        bits | (wrapped(a, b) | wrapped(c, d)).top_bits() << (k * T::Lanes::WIDTH)
    })
}

/// Break bits pair by pair, for steps too large for the top-bit rule (over half the
/// type's range: no serving stack uses them, but they are defined and must be right).
#[cold]
fn pair_bits<T: Index>(block: [&[T; BLOCK]; 4], steps: &LaneSteps<T>) -> u64 {
    let [a_s, b_s, a_d, b_d] = block;
    let pairs = a_s.iter().zip(b_s).zip(a_d.iter().zip(b_d));
    pairs.enumerate().fold(0, |bits, (k, ((&a, &b), (&c, &d)))| {
        let good = follows_by(a, b, steps.src.step) && follows_by(c, d, steps.dst.step);
        bits | (u64::from(!good) << k)
    })
}

/// `a`, then `b` (shifted by one position) blocks of one side.
type Blocks<'a, T> =
    core::iter::Zip<core::slice::Iter<'a, [T; BLOCK]>, core::slice::Iter<'a, [T; BLOCK]>>;

/// The blocks of a pair of equal-length arrays that contain breaks, in order.
///
/// Yields `(base, bits)`: bit `k` of `bits` is set when pair `base + k` is a break.
/// Bits past the last pair are clear, and blocks without breaks are skipped.
#[derive(Clone, Debug)]
pub struct Scan<'a, T: Index> {
    src: &'a [T],
    dst: &'a [T],
    /// The full blocks not yet scanned, as `(src, dst)` sides.
    blocks: core::iter::Zip<Blocks<'a, T>, Blocks<'a, T>>,
    /// First pair of the next block to scan.
    base: usize,
    /// The partial block at the end has been scanned.
    tail_done: bool,
    steps: LaneSteps<T>,
    /// Runs may descend (the either-direction scan, [`Scan::next_either`]).
    either: bool,
    /// Either direction: how the last pair scanned continued its run.
    last: Turn,
}

/// How a pair continued its run, for the either-direction scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// It did not: it was a break (or there was none yet).
    None,
    /// Both sides stepped up.
    Up,
    /// Both sides stepped down.
    Down,
}

impl<'a, T: Index> Scan<'a, T> {
    /// Scans `src` and `dst`, which the caller has checked are of equal length, for
    /// breaks of the steps `(src, dst)`.
    pub fn new(src: &'a [T], dst: &'a [T], steps: Steps) -> Self {
        // Pair p is (x[p], x[p + 1]): the `a` blocks are x[..len - 1], the `b` blocks
        // x[1..], both `len - 1` long, so they split into the same number of blocks.
        let side = |x: &'a [T]| {
            let pairs = x.len().saturating_sub(1);
            let a = x.get(..pairs).unwrap_or_default().as_chunks::<BLOCK>().0;
            let b = x.get(1..).unwrap_or_default().as_chunks::<BLOCK>().0;
            a.iter().zip(b)
        };
        let blocks = side(src).zip(side(dst));
        let either = steps.either;
        let steps = LaneSteps::new(steps);
        Scan { src, dst, blocks, base: 0, tail_done: false, steps, either, last: Turn::None }
    }

    /// Break bits of the last, partial block: the same kernel runs on padded copies, then
    /// the bits are cut to the pairs that exist.
    ///
    /// Each side's `a` and `b` blocks are views of one padded sequence, so `b[k] == a[k +
    /// 1]` holds here as it does for full blocks: the clean-block test reads only the
    /// last `b` and relies on it. (Padding `a` and `b` separately broke it: with a step
    /// of 0, a tail of pad values passed the test, and a break in the last block was
    /// lost.)
    #[cold]
    fn tail_block(&mut self, base: usize, pairs: usize) -> u64 {
        let padded = |x: &[T]| -> ([T; BLOCK], [T; BLOCK]) {
            let at = |i: usize| x.get(base + i).copied().unwrap_or(T::MIN);
            (core::array::from_fn(at), core::array::from_fn(|k| at(k + 1)))
        };
        let ((a_s, b_s), (a_d, b_d)) = (padded(self.src), padded(self.dst));
        let valid = (1u64 << (pairs % BLOCK)) - 1;
        if self.either {
            return self.turn_bits([&a_s, &b_s, &a_d, &b_d], valid);
        }
        block_bits([&a_s, &b_s, &a_d, &b_d], &self.steps) & valid
    }

    /// The either-direction scan's [`Iterator::next`]: out of line, so that the ascending
    /// scan's loop is the same code it always was.
    #[inline(never)]
    fn next_either(&mut self) -> Option<(usize, u64)> {
        while let Some(((a_s, b_s), (a_d, b_d))) = self.blocks.next() {
            let base = self.base;
            self.base = base + BLOCK;
            let bits = self.turn_bits([a_s, b_s, a_d, b_d], u64::MAX);
            if bits != 0 {
                return Some((base, bits));
            }
        }
        self.tail()
    }

    /// The last, partial block, once.
    fn tail(&mut self) -> Option<(usize, u64)> {
        if self.tail_done {
            return None;
        }
        self.tail_done = true;
        let pairs = self.src.len().saturating_sub(1).saturating_sub(self.base);
        let bits = if pairs == 0 { 0 } else { self.tail_block(self.base, pairs) };
        (bits != 0).then_some((self.base, bits))
    }

    /// Break bits of one block for the either-direction scan (see the module docs), the
    /// pairs past `valid` cut off; carries the last pair's turn to the next block.
    fn turn_bits(&mut self, block: [&[T; BLOCK]; 4], valid: u64) -> u64 {
        let (up, down) = if valid == u64::MAX && down_block(block, &self.steps) {
            (0, valid)
        } else {
            let up_bad = block_bits(block, &self.steps) & valid;
            let up = !up_bad & valid;
            (up, if up_bad == 0 { 0 } else { !down_bits(block, &self.steps) & valid & !up })
        };
        let prev_up = (up << 1) | u64::from(self.last == Turn::Up);
        let prev_down = (down << 1) | u64::from(self.last == Turn::Down);
        let mut turns = (up & prev_down) | (down & prev_up);
        // A turn breaks unless the pair before it broke (then it starts a new run).
        let mut breaks = valid & !(up | down);
        while turns != 0 {
            let p = turns.trailing_zeros();
            turns &= turns - 1;
            if p == 0 || breaks & (1 << (p - 1)) == 0 {
                breaks |= 1 << p;
            }
        }
        let last = 63 - valid.leading_zeros();
        self.last = match (breaks >> last & 1, up >> last & 1) {
            (1, _) => Turn::None,
            (_, 1) => Turn::Up,
            _ => Turn::Down,
        };
        breaks
    }
}

/// Whether every pair of a full block steps *down* by the step on both sides, with no wrap:
/// one descending run through the block (vLLM's recycled blocks), found as
/// [`block_bits`] finds an ascending one (one load per vector against a running value)
/// instead of two exact passes. Only tried when the block's last value is below its
/// first, so ascending blocks (and a step of 0, where up wins) never pay for it.
#[inline(always)]
fn down_block<T: Index>(block: [&[T; BLOCK]; 4], steps: &LaneSteps<T>) -> bool {
    let [a_s, b_s, a_d, b_d] = block;
    let (s0, d0) = (a_s[0], a_d[0]);
    let (src, dst) = (&steps.src, &steps.dst);
    // A side whose block spans less than the type's range (it has a `guard`) and ends
    // below its start did not wrap past `MIN`: the lanes' wrapping test alone would not
    // see it.
    if src.guard.is_none() || dst.guard.is_none() {
        return false;
    }
    if !(b_s[BLOCK - 1] < s0
        && b_d[BLOCK - 1] < d0
        && b_s[BLOCK - 1].wrapping_add(src.block) == s0
        && b_d[BLOCK - 1].wrapping_add(dst.block) == d0)
    {
        return false;
    }
    let mut s = T::Lanes::splat(s0) - src.iota;
    let mut d = T::Lanes::splat(d0) - dst.iota;
    let mut any = T::Lanes::splat(T::default()); // zero
    for (x, y) in T::Lanes::split(a_s).zip(T::Lanes::split(a_d)) {
        any = any | (x ^ s) | (y ^ d);
        (s, d) = (s - src.stride, d - dst.stride);
    }
    any.all_zero()
}

/// Bit `k` set when pair `k` does *not* step down by the step on both sides: the up test
/// on the swapped pair (`b` to `a`), with its exact arithmetic and wrap rule.
#[inline(never)]
fn down_bits<T: Index>(block: [&[T; BLOCK]; 4], steps: &LaneSteps<T>) -> u64 {
    let [a_s, b_s, a_d, b_d] = block;
    if steps.top_bit_rule {
        exact_bits(b_s, a_s, b_d, a_d, steps)
    } else {
        pair_bits([b_s, a_s, b_d, a_d], steps)
    }
}

impl<T: Index> Iterator for Scan<'_, T> {
    type Item = (usize, u64);

    // Inlined into each consumer: a call per block costs more than emitting its spans.
    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u64)> {
        if self.either {
            return self.next_either();
        }
        for ((a_s, b_s), (a_d, b_d)) in self.blocks.by_ref() {
            let base = self.base;
            self.base = base + BLOCK;
            let bits = block_bits([a_s, b_s, a_d, b_d], &self.steps);
            if bits != 0 {
                return Some((base, bits));
            }
        }
        self.tail()
    }
}

/// Number of breaks between positions of `src` and `dst` (equal lengths).
#[inline]
pub fn count_breaks<T: Index>(src: &[T], dst: &[T], steps: Steps) -> usize {
    Scan::new(src, dst, steps).map(|(_, bits)| bits.count_ones() as usize).sum()
}
