//! Placement's window as a bitmap over its ids, when its ids are dense enough for one: a
//! bit per id from the lowest to the highest, in at most one word per page of the window.
//!
//! Allocators hand out pages of one pool, so a window's ids usually span a few times its
//! length (a shuffled free queue of half a pool spans about twice the window). Then the
//! bitmap answers placement's three questions about the window without sorting it:
//!
//! - a page listed twice is a bit set twice (`O(f)` bit writes; the first side's pages
//!   are checked so too, when their ids are as dense);
//! - the extents (maximal sets of consecutive ids) are the runs of ones, read word by
//!   word in id order (`O(span / BITS + x)`);
//! - the rest of the window is the list without the chosen pages, in its order: the
//!   chosen ids are cleared, the list filtered by its bits (`O(n / BITS + f)`).
//!
//! Sorting the window's stretches by id did the same in `O(f)` a radix pass and eight
//! passes at most, with random reads of the list per stretch: at a million pages over a
//! shuffled window of four million, 11 times a plain sort of the window's ids. Windows
//! too sparse for the bitmap (ids spread over more than `BITS` times their count) take
//! that path still (`ranges.rs`).

use crate::error::Error;
use crate::index::Index;

/// Bits per word.
const BITS: usize = usize::BITS as usize;

/// The window's ids as bits: id `min + i` is free when bit `i` is set.
pub(crate) struct Bits<'a> {
    words: &'a mut [usize],
    min: i128,
}

impl<'a> Bits<'a> {
    /// The window's lowest id and the bits its ids span, `None` for an empty window or
    /// a span no `usize` counts.
    pub(crate) fn span<T: Index>(free: &[T]) -> Option<(i128, usize)> {
        let (lo, hi) = (free.iter().min()?.widen(), free.iter().max()?.widen());
        Some((lo, usize::try_from(hi - lo).ok()?.checked_add(1)?))
    }

    /// Words a bitmap of `span` bits takes.
    pub(crate) const fn words(span: usize) -> usize {
        span.div_ceil(BITS)
    }

    /// The bitmap of `free` (lowest id `min`, `span` bits: [`Bits::span`]) in `words`,
    /// which must hold [`Bits::words`]`(span)`; `None` when it does not. The error names
    /// `list` and the first two positions of the smallest page `free` lists twice.
    pub(crate) fn new<T: Index>(
        list: &'static str,
        free: &[T],
        (min, span): (i128, usize),
        words: &'a mut [usize],
    ) -> Option<Result<Self, Error>> {
        let words = words.get_mut(..Self::words(span))?;
        words.fill(0);
        let mut bits = Bits { words, min };
        let mut twice: Option<i128> = None;
        for v in free.iter().map(|v| v.widen()) {
            if !bits.set(v) {
                twice = Some(twice.map_or(v, |t| t.min(v)));
            }
        }
        Some(match twice {
            None => Ok(bits),
            Some(v) => {
                let mut at = free.iter().enumerate().filter(|&(_, p)| p.widen() == v);
                let (first, second) = (at.next().map_or(0, |a| a.0), at.next().map_or(0, |a| a.0));
                Err(Error::DuplicatePage { list, first, second })
            }
        })
    }

    /// The extents in id order: extent `k`'s lowest id, less the window's lowest, into
    /// `low[k]`, its length into `room[k]`. Returns the count (at most the shorter
    /// column: the window's pages, when both hold as many).
    pub(crate) fn extents(&self, low: &mut [usize], room: &mut [usize]) -> usize {
        let mut x = 0;
        let mut open: Option<usize> = None; // the first bit of the extent being read
        let mut close = |from: usize, to: usize| {
            if let (Some(l), Some(r)) = (low.get_mut(x), room.get_mut(x)) {
                (*l, *r) = (from, to - from);
                x += 1;
            }
        };
        for (i, &w) in self.words.iter().enumerate() {
            let base = i * BITS;
            let mut at = 0; // bits of `w` read
            while at < BITS {
                let ahead = w >> at; // zeros shift in: the counts stop at BITS - at
                match open {
                    Some(from) => {
                        at += ahead.trailing_ones() as usize;
                        if at < BITS {
                            close(from, base + at);
                            open = None;
                        }
                    }
                    None if ahead == 0 => break,
                    None => {
                        at += ahead.trailing_zeros() as usize;
                        open = Some(base + at);
                    }
                }
            }
        }
        if let Some(from) = open {
            close(from, self.words.len() * BITS);
        }
        x
    }

    /// The window's lowest id plus `offset`: an id from an offset [`Bits::extents`] gave.
    pub(crate) fn id(&self, offset: usize) -> i128 {
        self.min + i128::try_from(offset).unwrap_or(i128::MAX)
    }

    /// Clears the ids `low..low + len` (chosen pages: no longer free).
    pub(crate) fn clear(&mut self, low: i128, len: usize) {
        let Ok(from) = usize::try_from(low - self.min) else { return };
        let to = from.saturating_add(len);
        let mut i = from;
        while i < to {
            let (word, bit) = (i / BITS, i % BITS);
            let count = (BITS - bit).min(to - i);
            let mask = if count == BITS { usize::MAX } else { ((1 << count) - 1) << bit };
            if let Some(w) = self.words.get_mut(word) {
                *w &= !mask;
            }
            i += count;
        }
    }

    /// Writes into `rest` the pages of `free` whose bits are set, in list order.
    pub(crate) fn rest<T: Index>(&self, free: &[T], rest: &mut [T]) {
        let mut out = rest.iter_mut();
        for &p in free.iter().filter(|p| self.get(p.widen())) {
            match out.next() {
                Some(o) => *o = p,
                None => break, // cannot happen: as many bits stay set as `rest` holds
            }
        }
    }

    /// Sets id `v`'s bit; `false` when it was set already.
    fn set(&mut self, v: i128) -> bool {
        let Some((word, mask)) = self.locate(v) else { return true };
        let Some(w) = self.words.get_mut(word) else { return true };
        let was = *w & mask != 0;
        *w |= mask;
        !was
    }

    /// Whether id `v`'s bit is set.
    fn get(&self, v: i128) -> bool {
        self.locate(v).and_then(|(word, mask)| self.words.get(word).map(|w| w & mask != 0))
            == Some(true)
    }

    /// Id `v`'s word and bit mask.
    fn locate(&self, v: i128) -> Option<(usize, usize)> {
        let i = usize::try_from(v - self.min).ok()?;
        Some((i / BITS, 1 << (i % BITS)))
    }
}
