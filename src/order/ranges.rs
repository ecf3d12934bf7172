//! Placement's tables of ranges of one list that step by +1 or -1 (the first side's runs,
//! the window's stretches): finding pages listed twice, the window's extents, and the runs
//! longest first, each by one packed radix sort.

use super::radix::{radix_sort_by, sort_words};
use super::sort::{Table, Words, intro_sort, swap};
use crate::error::Error;
use crate::index::Index;
use crate::span::Span;

/// Ranges of one list: position and length columns over the list's `values`, in list
/// order until sorted.
pub(crate) struct Ranges<'a, T> {
    pub(crate) at: &'a mut [usize],
    pub(crate) len: &'a mut [usize],
    values: &'a [T],
    pub(crate) count: usize,
}

impl<'a, T: Index> Ranges<'a, T> {
    /// The ranges of `spans`, written into `at` and `len`.
    pub(crate) fn fill(
        spans: impl Iterator<Item = Span>,
        at: &'a mut [usize],
        len: &'a mut [usize],
        values: &'a [T],
    ) -> Self {
        let mut count = 0;
        for (span, (a, l)) in spans.zip(at.iter_mut().zip(len.iter_mut())) {
            (*a, *l) = (span.start, span.len);
            count += 1;
        }
        let (at, len) = (prefix(at, count), prefix(len, count));
        Ranges { at, len, values, count }
    }

    /// The ends of range `k`'s ids, lowest and highest.
    pub(crate) fn ends(&self, k: usize) -> Option<(i128, i128)> {
        let (a, l) = (*self.at.get(k)?, *self.len.get(k)?);
        let (x, y) = (self.values.get(a)?.widen(), self.values.get(a + l.checked_sub(1)?)?.widen());
        Some((x.min(y), x.max(y)))
    }

    /// Writes into `order` the ranges' indices by lowest id (`scratch`: as many words
    /// more); two that overlap share a page: the error names `list` and the first two
    /// positions of the smallest such page (no page repeats inside one range).
    pub(crate) fn order_by_low(
        &self,
        list: &'static str,
        order: &mut [usize],
        scratch: &mut [usize],
    ) -> Result<(), Error> {
        self.sort_by_low(order, scratch);
        let mut highest = None;
        for &k in prefix(order, self.count).iter() {
            let (lo, hi) = self.ends(k).unwrap_or((0, -1));
            self.overlap(list, &mut highest, lo, hi)?;
        }
        Ok(())
    }

    /// `Err` naming `list` and the first two positions of page `lo` when the range
    /// `lo..=hi`, in order by lowest id, overlaps one before it (`highest`: their top).
    fn overlap(
        &self,
        list: &'static str,
        highest: &mut Option<i128>,
        lo: i128,
        hi: i128,
    ) -> Result<(), Error> {
        if highest.is_some_and(|h| lo <= h) {
            let mut at = self.values.iter().enumerate().filter(|&(_, v)| v.widen() == lo);
            if let (Some((first, _)), Some((second, _))) = (at.next(), at.next()) {
                return Err(Error::DuplicatePage { list, first, second });
            }
        }
        *highest = (*highest).max(Some(hi));
        Ok(())
    }

    /// Writes into `order` the ranges' indices by lowest id (`scratch`: as many words
    /// more).
    pub(crate) fn sort_by_low(&self, order: &mut [usize], scratch: &mut [usize]) {
        let order = prefix(order, self.count);
        let low = |k: usize| self.ends(k).map_or(0, |(lo, _)| lo);
        let (lowest, highest) = (0..self.count).fold((i128::MAX, i128::MIN), |(a, b), k| {
            let v = low(k);
            (a.min(v), b.max(v))
        });
        // One word per range, `(low - lowest) << bits | k`, when that fits: the lows are
        // computed once, not at every comparison of a sort.
        let bits = usize::BITS - self.count.leading_zeros();
        let span = usize::try_from(highest.saturating_sub(lowest)).ok();
        match span.filter(|s| usize::BITS - s.leading_zeros() + bits <= usize::BITS) {
            Some(_) if bits < usize::BITS => {
                for (o, k) in order.iter_mut().zip(0..) {
                    // `low - lowest <= span`, which fits.
                    *o = (usize::try_from(low(k) - lowest).unwrap_or(0) << bits) | k;
                }
                sort_words(order, scratch);
                let mask = (1usize << bits) - 1;
                order.iter_mut().for_each(|o| *o &= mask);
            }
            _ => {
                for (o, k) in order.iter_mut().zip(0..) {
                    *o = k;
                }
                intro_sort(&mut ByLow { order: &mut *order, ranges: self });
            }
        }
    }

    /// The window's extents (maximal sets of consecutive ids), from its stretches in
    /// `order` (by lowest id, from [`Ranges::sort_by_low`]): extent `k`'s position of its
    /// lowest id into `order[k]` (over the indices already read), its room into
    /// `room[k]`, and each stretch's extent over its length. Returns the extent count, the
    /// position column (free from now on) and the stretches' extents (in list order); or
    /// the error of two stretches that overlap, as [`Ranges::order_by_low`] names it (this
    /// walk reads them anyway: the window is the largest list).
    pub(crate) fn into_extents(
        self,
        list: &'static str,
        order: &mut [usize],
        room: &mut [usize],
    ) -> Result<(usize, &'a mut [usize], &'a mut [usize]), Error> {
        let (mut x, mut previous, mut highest) = (0, None, None);
        for j in 0..self.count.min(order.len()) {
            let Some(&k) = order.get(j) else { break };
            let (Some((lo, hi)), Some(&at), Some(&len)) =
                (self.ends(k), self.at.get(k), self.len.get(k))
            else {
                break; // cannot happen: `order` holds the ranges' indices
            };
            self.overlap(list, &mut highest, lo, hi)?;
            if previous.is_some_and(|h: i128| h + 1 == lo) && x > 0 {
                if let Some(r) = room.get_mut(x - 1) {
                    *r += len;
                }
            } else {
                // `j >= x`: slot `x` of `order` was read.
                let ascending = self.values.get(at).map(|v| v.widen()) == Some(lo);
                let lowest = if ascending { at } else { at + (len - 1) };
                if let (Some(o), Some(r)) = (order.get_mut(x), room.get_mut(x)) {
                    (*o, *r) = (lowest, len);
                }
                x += 1;
            }
            if let Some(l) = self.len.get_mut(k) {
                *l = x - 1;
            }
            previous = Some(hi);
        }
        Ok((x, self.at, self.len))
    }

    /// Sorts the ranges longest first, ties by position (they are in position order):
    /// one word per range, `(longest - len) << bits | at`, radix-sorted stably by its top
    /// part alone (one pass for lengths that differ by less than 256), with `at` as the
    /// second buffer, then unpacked; introsorted as two columns when the two do not fit
    /// one word.
    pub(crate) fn sort_longest_first(&mut self) {
        let longest = self.len.iter().copied().max().unwrap_or(0);
        let shortest = self.len.iter().copied().min().unwrap_or(0);
        let bits = usize::BITS - self.at.iter().copied().max().unwrap_or(0).leading_zeros();
        if usize::BITS - longest.leading_zeros() + bits > usize::BITS {
            return intro_sort(self);
        }
        // `bits == usize::BITS` only when every length is `longest`: nothing shifts in.
        let (up, down) = (
            |v: usize| v.checked_shl(bits).unwrap_or(0),
            |v: usize| v.checked_shr(bits).unwrap_or(0),
        );
        for (l, &a) in self.len.iter_mut().zip(self.at.iter()) {
            *l = up(longest - *l) | a;
        }
        if !radix_sort_by(self.len, self.at, longest - shortest, down) {
            intro_sort(&mut Words(self.len));
        }
        let mask = up(1).wrapping_sub(1);
        for (l, a) in self.len.iter_mut().zip(self.at.iter_mut()) {
            *a = *l & mask;
            *l = longest - down(*l);
        }
    }
}

/// The first `len` items of `v` (all of them if it is shorter).
pub(crate) fn prefix(v: &mut [usize], len: usize) -> &mut [usize] {
    let len = len.min(v.len());
    v.split_at_mut(len).0
}

/// The ranges longest first, then by position.
impl<T: Index> Table for Ranges<'_, T> {
    fn rows(&self) -> usize {
        self.count
    }
    fn less(&self, i: usize, j: usize) -> bool {
        let key = |k| (self.len.get(k).map(|&l| usize::MAX - l), self.at.get(k));
        key(i) < key(j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        swap(self.at, i, j);
        swap(self.len, i, j);
    }
}

/// Range indices, ordered by their ranges' lowest ids.
struct ByLow<'r, 'a, T> {
    order: &'r mut [usize],
    ranges: &'r Ranges<'a, T>,
}

impl<T: Index> Table for ByLow<'_, '_, T> {
    fn rows(&self) -> usize {
        self.order.len()
    }
    fn less(&self, i: usize, j: usize) -> bool {
        let low = |k: usize| self.order.get(k).and_then(|&r| self.ranges.ends(r)).map(|e| e.0);
        low(i) < low(j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        swap(self.order, i, j);
    }
}
