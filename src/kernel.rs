//! The SIMD kernel, written once over [`Lanes`]: break bitmasks, a block at a time.
//!
//! A *pair* `p` is positions `(p, p + 1)`. It is a *break* unless both `src` and `dst` step
//! by exactly +1 there. For a block of `BLOCK` pairs starting at `base` the kernel loads
//! `a = x[base..base + BLOCK]` and `b = x[base + 1..base + 1 + BLOCK]` for both arrays and
//! sets bit `k` of the block's mask when pair `base + k` is a break.

use crate::index::Index;
use crate::lanes::Lanes;

/// Pairs per block: one `u64` of break bits.
pub const BLOCK: usize = 64;

/// Break bits of one block (see the module docs).
///
/// A block without breaks is one run: `x[base + k] == x[base] + k` for `k` in
/// `0..=BLOCK`, on both sides, with no wrap. That needs one load per vector (the floor's
/// cost) against constants, where the exact bits need the shifted loads too. No wrap is
/// possible when `x[base] <= MAX - BLOCK`; checking that and the last element first
/// sends most blocks with breaks straight to the exact path.
#[inline(always)]
fn block_bits<T: Index>(block: [&[T; BLOCK]; 4]) -> u64 {
    let [a_s, b_s, a_d, b_d] = block;
    let (s0, d0) = (a_s[0], a_d[0]);
    if s0 <= T::WRAP_GUARD
        && d0 <= T::WRAP_GUARD
        && b_s[BLOCK - 1] == s0.plus_block()
        && b_d[BLOCK - 1] == d0.plus_block()
    {
        let (s, d) = (T::Lanes::splat(s0), T::Lanes::splat(d0));
        let mut any = T::Lanes::splat(T::default()); // zero
        let lanes = T::Lanes::split(a_s).zip(T::Lanes::split(a_d));
        for (k, (x, y)) in lanes.enumerate() {
            let iota = T::Lanes::iota(k * T::Lanes::WIDTH);
            any = any | (x ^ (s + iota)) | (y ^ (d + iota));
        }
        if any.all_zero() {
            return 0;
        }
    }
    exact_bits(block)
}

/// Break bits of a block that has (or may have) breaks, wraps included.
///
/// A pair is good when `b - a == 1` (wrapping) on both sides and neither side wrapped.
/// With a +1 step, an unsigned value's top bit can only go from 1 to 0 at `MAX -> 0`,
/// and a signed value's only from 0 to 1 at `MAX -> MIN`, so a wrap is the top bit of
/// `a & !b` (unsigned) or `!a & b` (signed). One top-bit mask per vector then says it all.
///
/// Out of line: inlined, the compiler keeps every loaded vector of the fast path alive
/// for this one and spills them; reloading from L1 here is cheaper.
#[inline(never)]
fn exact_bits<T: Index>(block: [&[T; BLOCK]; 4]) -> u64 {
    let [a_s, b_s, a_d, b_d] = block;
    let one = T::Lanes::splat(T::ONE);
    let lane_mask = (1u64 << T::Lanes::WIDTH) - 1;
    let wrapped = |a: T::Lanes, b: T::Lanes| if T::SIGNED { !a & b } else { a & !b };
    let s = T::Lanes::split(a_s).zip(T::Lanes::split(b_s));
    let d = T::Lanes::split(a_d).zip(T::Lanes::split(b_d));
    let mut bits = 0u64;
    for (k, ((a, b), (c, d))) in s.zip(d).enumerate() {
        let steps = (b - a).eq_top(one) & (d - c).eq_top(one);
        let good = steps & !(wrapped(a, b) | wrapped(c, d));
        bits |= (!good.top_bits() & lane_mask) << (k * T::Lanes::WIDTH);
    }
    bits
}

/// `a`, then `b` (shifted by one position) blocks of one side.
type Side<'a, T> =
    core::iter::Zip<core::slice::Iter<'a, [T; BLOCK]>, core::slice::Iter<'a, [T; BLOCK]>>;

/// The blocks of a pair of equal-length arrays that contain breaks, in order.
///
/// Yields `(base, bits)`: bit `k` of `bits` is set when pair `base + k` is a break.
/// Bits past the last pair are clear, and blocks without breaks are skipped.
#[derive(Clone, Debug)]
pub struct Scan<'a, T> {
    src: &'a [T],
    dst: &'a [T],
    /// The full blocks not yet scanned, as `(src, dst)` sides.
    blocks: core::iter::Zip<Side<'a, T>, Side<'a, T>>,
    /// First pair of the next block to scan.
    base: usize,
    /// The partial block at the end has been scanned.
    tail_done: bool,
}

impl<'a, T: Index> Scan<'a, T> {
    /// Scans `src` and `dst`, which the caller has checked are of equal length.
    pub fn new(src: &'a [T], dst: &'a [T]) -> Self {
        // Pair p is (x[p], x[p + 1]): the `a` blocks are x[..len - 1], the `b` blocks
        // x[1..], both `len - 1` long, so they split into the same number of blocks.
        let side = |x: &'a [T]| {
            let pairs = x.len().saturating_sub(1);
            let a = x.get(..pairs).unwrap_or_default().as_chunks::<BLOCK>().0;
            let b = x.get(1..).unwrap_or_default().as_chunks::<BLOCK>().0;
            a.iter().zip(b)
        };
        Scan { src, dst, blocks: side(src).zip(side(dst)), base: 0, tail_done: false }
    }

    /// Break bits of the last, partial block: copied into padded blocks so that the same
    /// kernel runs on it, then cut to the pairs that exist.
    #[cold]
    fn tail_block(&self, base: usize, pairs: usize) -> u64 {
        let mut blocks = [[T::MIN; BLOCK]; 4];
        let [a_s, b_s, a_d, b_d] = &mut blocks;
        for (side, a, b) in [(self.src, &mut *a_s, &mut *b_s), (self.dst, a_d, b_d)] {
            let tail = side.get(base..).unwrap_or_default();
            let next = tail.get(1..).unwrap_or_default();
            for ((x, y), (a, b)) in tail.iter().zip(next).zip(a.iter_mut().zip(b.iter_mut())) {
                (*a, *b) = (*x, *y);
            }
        }
        let [a_s, b_s, a_d, b_d] = &blocks;
        block_bits([a_s, b_s, a_d, b_d]) & ((1u64 << (pairs % BLOCK)) - 1)
    }
}

impl<T: Index> Iterator for Scan<'_, T> {
    type Item = (usize, u64);

    // Inlined into each consumer: a call per block costs more than emitting its spans.
    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u64)> {
        for ((a_s, b_s), (a_d, b_d)) in self.blocks.by_ref() {
            let base = self.base;
            self.base = base + BLOCK;
            let bits = block_bits([a_s, b_s, a_d, b_d]);
            if bits != 0 {
                return Some((base, bits));
            }
        }
        if self.tail_done {
            return None;
        }
        self.tail_done = true;
        let pairs = self.src.len().saturating_sub(1).saturating_sub(self.base);
        let bits = if pairs == 0 { 0 } else { self.tail_block(self.base, pairs) };
        (bits != 0).then_some((self.base, bits))
    }
}

/// Number of breaks between positions of `src` and `dst` (equal lengths).
#[inline]
pub fn count_breaks<T: Index>(src: &[T], dst: &[T]) -> usize {
    Scan::new(src, dst).map(|(_, bits)| bits.count_ones() as usize).sum()
}
