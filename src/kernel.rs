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

/// `((a_s, b_s), (a_d, b_d))`: the four vectors of one lane group of a block.
type Quad<L> = ((L, L), (L, L));

/// The vectors of a block, a lane group at a time.
#[inline(always)]
fn vectors<'b, T: Index>(
    [a_s, b_s, a_d, b_d]: [&'b [T; BLOCK]; 4],
) -> impl Iterator<Item = Quad<T::Lanes>> + 'b {
    let s = T::Lanes::split(a_s).zip(T::Lanes::split(b_s));
    let d = T::Lanes::split(a_d).zip(T::Lanes::split(b_d));
    s.zip(d)
}

/// `(b - a) ^ 1`: zero exactly where `b` is `a + 1`, wrapping.
#[inline(always)]
fn off_step<L: crate::lanes::Lanes>(a: L, b: L, one: L) -> L {
    (b - a) ^ one
}

/// Break bits of one block (see the module docs).
///
/// Lane arithmetic wraps, so `(b - a) ^ 1 == 0` also holds for `MAX` followed by `MIN`.
/// Such a wrap needs `b == MIN`; it is tested for only in blocks that are not trivially
/// clean. A block whose steps are all +1 (wrapping) and whose first value is at most
/// `MAX - BLOCK` cannot contain a wrap, so the common case costs one vector test.
#[inline(always)]
fn block_bits<T: Index>(block: [&[T; BLOCK]; 4]) -> u64 {
    let one = T::Lanes::splat(T::ONE);
    let mut any = T::Lanes::splat(T::default()); // zero
    for ((a, b), (c, d)) in vectors(block) {
        any = any | off_step(a, b, one) | off_step(c, d, one);
    }
    let [a_s, _, a_d, _] = block;
    if any.all_zero() && a_s[0] <= T::WRAP_GUARD && a_d[0] <= T::WRAP_GUARD {
        return 0;
    }
    exact_bits(block)
}

/// Break bits of a block that has (or may have) breaks, wraps included.
///
/// Out of line: inlined, the compiler keeps every loaded vector alive for this path and
/// spills them in the fast one; reloading from L1 here is cheaper.
#[inline(never)]
fn exact_bits<T: Index>(block: [&[T; BLOCK]; 4]) -> u64 {
    let one = T::Lanes::splat(T::ONE);
    let min = T::Lanes::splat(T::MIN);
    let lane_mask = (1u64 << T::Lanes::WIDTH) - 1;
    let mut bits = 0u64;
    for (k, ((a, b), (c, d))) in vectors(block).enumerate() {
        let off = !(off_step(a, b, one) | off_step(c, d, one)).zero_bits() & lane_mask;
        let wrapped = (b ^ min).zero_bits() | (d ^ min).zero_bits();
        bits |= (off | wrapped) << (k * T::Lanes::WIDTH);
    }
    bits
}

/// The blocks of a pair of equal-length arrays that contain breaks, in order.
///
/// Yields `(base, bits)`: bit `k` of `bits` is set when pair `base + k` is a break.
/// Bits past the last pair are clear, and blocks without breaks are skipped.
#[derive(Clone, Debug)]
pub struct Scan<'a, T> {
    src: &'a [T],
    dst: &'a [T],
    /// First pair of the next block to scan.
    base: usize,
}

impl<'a, T: Index> Scan<'a, T> {
    /// Scans `src` and `dst`, which the caller has checked are of equal length.
    pub fn new(src: &'a [T], dst: &'a [T]) -> Self {
        Scan { src, dst, base: 0 }
    }

    /// The pairs left to scan.
    fn pairs_left(&self) -> usize {
        self.src.len().saturating_sub(1).saturating_sub(self.base)
    }

    /// Break bits of the full block at `base`, or `None` when fewer than `BLOCK` pairs remain.
    #[inline(always)]
    fn full_block(&self, base: usize) -> Option<u64> {
        let (src, dst) = (self.src.get(base..)?, self.dst.get(base..)?);
        let a_s = src.first_chunk::<BLOCK>()?;
        let b_s = src.get(1..)?.first_chunk::<BLOCK>()?;
        let a_d = dst.first_chunk::<BLOCK>()?;
        let b_d = dst.get(1..)?.first_chunk::<BLOCK>()?;
        Some(block_bits([a_s, b_s, a_d, b_d]))
    }

    /// Break bits of the last, partial block: copied into zero-padded blocks so that the
    /// same kernel runs on it, then cut to the pairs that exist.
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

    #[inline]
    fn next(&mut self) -> Option<(usize, u64)> {
        loop {
            let base = self.base;
            let bits = match self.full_block(base) {
                Some(bits) => {
                    self.base = base + BLOCK;
                    bits
                }
                None => {
                    let pairs = self.pairs_left();
                    if pairs == 0 {
                        return None;
                    }
                    self.base = base + pairs;
                    self.tail_block(base, pairs)
                }
            };
            if bits != 0 {
                return Some((base, bits));
            }
        }
    }
}

/// Number of breaks between positions of `src` and `dst` (equal lengths).
#[inline]
pub fn count_breaks<T: Index>(src: &[T], dst: &[T]) -> usize {
    Scan::new(src, dst)
        .map(|(_, bits)| bits.count_ones() as usize)
        .sum()
}
