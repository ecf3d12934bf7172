//! Placement: choosing the second side's pages so that the runs pair up.
//!
//! However fast runs are found, their number is fixed when the pages are allocated. In
//! disaggregated serving one side allocates knowing the other side's pages (SGLang's
//! decode side sends its pages before the prefill side allocates; vLLM's pull mode
//! allocates on the decode side after prefill returned its block ids), so the second
//! allocator can choose pages that mirror the first side's runs. [`place`] does that.
//!
//! # The rule
//!
//! - The first side's *runs* are corun's own grouping of `first` with itself (ascending,
//!   or either direction with [`Direction::Either`]). Their number is the *bound*: no
//!   choice of pages gives fewer concurrent runs.
//! - The second side's *extents* are the maximal sets of consecutive ids among the pages
//!   of `free`, wherever they stand in it. `free` is the *window*: the part of the
//!   allocator's priority order (a prefix of its free list) the caller lets placement
//!   choose from, so inside it list order is not a cost, and id order is what makes a
//!   transfer one descriptor. Reading extents by id, not as stretches of the list, is
//!   what keeps placement near the bound after thousands of requests: with 1-token pages
//!   on vLLM's free queue, stretches of the list took 42% of the room between the
//!   allocator's own pages and the bound, extents by id 99.7% (`python/replay.py`).
//! - Each run, longest first (ties: the earlier run), goes whole into the extent with the
//!   *least* room that still holds it (best fit; ties: the lower ids), taking that
//!   extent's highest ids, so that what stays free of an extent is always its low part.
//!   Best fit keeps large extents for large runs and leaves few fragments behind.
//! - Runs that no extent holds whole are split last, longest first, each filled from the
//!   extent with the most room left (ties: the lower ids), again from its top, piece by
//!   piece. Every piece is written in its run's direction, so the pair steps together.
//! - Unless the result has fewer concurrent runs than the allocator's own choice (the
//!   front `first.len()` pages of the list, in order), that choice is returned instead:
//!   placement never makes a request worse, and leaves the allocator's order alone when
//!   it gains nothing.
//! - A page listed twice in `first` or in `free` is an error naming both positions
//!   ([`Error::DuplicatePage`]): placed, it would be handed out twice.
//!
//! The caller chooses how deep into its priority order placement may reach by how much of
//! the free list it passes. Passing exactly `first.len()` pages makes placement a pairing
//! of the allocator's own pages: the same pages leave the free list as without it, only
//! their order changes (what `corun.adapters` does for SGLang, whose sorted free list is
//! already the best sweep there is: deeper windows fragmented it).
//!
//! # Cost
//!
//! For `n` pages in `r` first-side runs, a window of `f` pages in `e` stretches (pages
//! stepping by +1 or -1 in list order) and `x <= e` extents: `O(n + f)` to find the runs
//! and stretches (corun's own SIMD grouping), `O(r log r + e log e)` to sort them (by
//! lowest id, which also finds duplicates: within a run or stretch there are none, so two
//! overlapping ones hold every page listed twice), and per run a binary search for its
//! extent plus one move of that extent down the sorted order; `O(f)` to write the chosen
//! pages and the rest. Never a sort of pages, never a scan of the window per run. No
//! allocation: `scratch` holds [`place_scratch_len`]`(n, f)` words.
//!
//! ```text
//! runs     = grouping(first, first)                    # r runs
//! reject a page listed twice in first or in free       # overlapping runs / stretches
//! extents  = consecutive ids in free, by (room, lowest id)
//! for run in sort(runs, by length descending, then position):
//!     extent = the first in extents with room >= len(run)       (binary search)
//!     if any: give run the extent's top len(run) ids, in its direction; move the extent down
//! for run still unplaced (longest first):
//!     while pages missing: give it the top of the extent with the most room
//! if runs(first, chosen) >= runs(first, free[..n]): chosen = free[..n]
//! rest = free without chosen, in list order            # stretch by stretch
//! ```

use crate::sort::{Table, intro_sort as sort, radix_sort, swap};
use crate::{Direction, Error, Grouper, Index};

/// Scratch words [`place`] needs for a request of `pages` pages from a window of `free`
/// pages: two per first-side run (start, length), at most one run per page, and four per
/// stretch of the window (position and length; an extent's room and first stretch), at
/// most one stretch per page. Saturating: a length nothing can hold is reported by
/// `place` as too short.
pub const fn place_scratch_len(pages: usize, free: usize) -> usize {
    pages.saturating_mul(2).saturating_add(free.saturating_mul(4))
}

/// What [`place`] did, in concurrent runs (descriptors per layer buffer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Placement {
    /// Runs of the first side alone: the fewest any placement can reach.
    pub bound: usize,
    /// Concurrent runs of `first` with the chosen pages.
    pub placed: usize,
    /// Concurrent runs of `first` with the allocator's own choice (`free[..n]`).
    pub own: usize,
    /// First-side runs that no extent held whole and were split.
    pub split: usize,
    /// `true` when the chosen pages are the allocator's own choice (`free[..n]`), because
    /// placing was no better; then `placed == own`.
    pub fallback: bool,
}

/// Chooses the second side's pages for a request whose first side has pages `first` (in
/// request order), from the window `free` (the allocator's free list, or its front, in
/// its priority order: the page it would hand out first comes first). The rule and its
/// cost are in the [module docs](self).
///
/// Writes `chosen[i]`, the page paired with `first[i]`, and `rest`: `free` without the
/// chosen pages, in its order. The chosen pages are distinct pages of `free`. Errors,
/// with nothing written: [`Error::NotEnoughFree`] when `free` is shorter than `first`;
/// [`Error::DuplicatePage`] naming `first` or `free` and two positions that hold one
/// page; [`Error::BufferLength`] naming `chosen` (must be `first.len()`), `rest`
/// (`free.len() - first.len()`) or `scratch` (at least
/// [`place_scratch_len`]`(first.len(), free.len())`).
///
/// ```
/// use corun::{Direction, place, place_scratch_len};
///
/// // The first side's pages: a descending run of 3 and an ascending run of 2.
/// let first = [52u32, 51, 50, 7, 8];
/// // The second side's free list, in its priority order: 40..=43 and 20, 21 are
/// // extents (consecutive ids), wherever they stand in the list.
/// let free = [3u32, 21, 41, 40, 9, 42, 43, 20];
/// let (mut chosen, mut rest) = ([0; 5], [0; 3]);
/// let mut scratch = [0; place_scratch_len(5, 8)];
/// let p = place(&first, &free, Direction::Either, &mut chosen, &mut rest, &mut scratch)?;
/// // The run of 3 takes the top of 40..=43; the run of 2 fits 20, 21 exactly.
/// assert_eq!(chosen, [43, 42, 41, 20, 21]);
/// assert_eq!(rest, [3, 40, 9]);
/// assert_eq!((p.bound, p.placed, p.own), (2, 2, 5));
/// # Ok::<(), corun::Error>(())
/// ```
pub fn place<T: Index>(
    first: &[T],
    free: &[T],
    direction: Direction,
    chosen: &mut [T],
    rest: &mut [T],
    scratch: &mut [usize],
) -> Result<Placement, Error> {
    let n = first.len();
    let Some((front, back)) = free.split_at_checked(n) else {
        return Err(Error::NotEnoughFree { pages: n, free: free.len() });
    };
    buffer_length("chosen", n, chosen.len())?;
    buffer_length("rest", back.len(), rest.len())?;
    let f = free.len();
    let (needed, len) = (place_scratch_len(n, f), scratch.len());
    let words = scratch
        .get_mut(..needed)
        .filter(|_| needed != usize::MAX)
        .ok_or(Error::BufferLength { buffer: "scratch", needed, len })?;
    let (runs, more) = words.split_at_mut(2 * n);
    let (stretches, extents) = more.split_at_mut(2 * f);
    let (starts, lens) = runs.split_at_mut(n);
    let (at, lengths) = stretches.split_at_mut(f);
    let (rooms, heads) = extents.split_at_mut(f);

    // The first side's runs and the window's stretches, each sorted by lowest id: no
    // page repeats inside one, so pages listed twice show as two that overlap.
    let grouper = Grouper::new().direction(direction);
    let mut runs = Ranges::fill(grouper.runs(first, first)?, starts, lens, first);
    runs.sort_by_low("first", rooms, heads)?;
    let either = Grouper::new().direction(Direction::Either);
    let mut stretches = Ranges::fill(either.runs(free, free)?, at, lengths, free);
    stretches.sort_by_low("free", rooms, heads)?;
    let own = grouper.count_runs(first, front)?;

    // Extents: stretches whose ids follow on, by room, then lowest id (= first stretch).
    let mut x: usize = 0;
    for k in 0..stretches.count {
        let joins = k > 0 && stretches.high(k - 1).map(|h| h + 1) == stretches.low(k);
        let room = stretches.len.get(k).copied().unwrap_or(0);
        if let Some(r) = x.checked_sub(1).filter(|_| joins).and_then(|last| rooms.get_mut(last)) {
            *r += room;
        } else if let (Some(r), Some(h)) = (rooms.get_mut(x), heads.get_mut(x)) {
            (*r, *h) = (room, k);
            x += 1;
        }
    }
    let mut extents = Columns { a: prefix(rooms, x), b: prefix(heads, x), a_descending: false };
    extents.sort();

    // Each run, longest first, whole into the extent with the least room that holds it.
    let r = runs.count;
    Columns { a: &mut *runs.len, b: &mut *runs.at, a_descending: true }.sort();
    let (starts, lens) = (&*runs.at, &mut *runs.len);
    for (&s, l) in starts.iter().zip(lens.iter_mut()) {
        let k = extents.a.partition_point(|&room| room < *l);
        if k < x {
            give(first, chosen, s, *l, top(&extents, &stretches, k, *l));
            shrink(&mut extents, k, *l);
            *l = 0; // placed
        }
    }

    // What fits nowhere, piece by piece from the extents with the most room.
    let mut split = 0;
    for (&s, &l) in starts.iter().zip(lens.iter()).filter(|&(_, &l)| l > 0) {
        let mut done = 0;
        while done < l {
            let most = extents.a.last().copied().unwrap_or(0);
            let k = extents.a.partition_point(|&room| room < most);
            let m = most.min(l - done);
            if m == 0 {
                break; // cannot happen: the window holds at least n pages
            }
            give(first, chosen, s + done, m, top(&extents, &stretches, k, m));
            shrink(&mut extents, k, m);
            done += m;
        }
        split += 1;
    }

    let placed = grouper.count_runs(first, chosen)?;
    if placed >= own {
        chosen.copy_from_slice(front);
        rest.copy_from_slice(back);
        return Ok(Placement { bound: r, placed: own, own, split, fallback: true });
    }
    stretches.keep_low_parts(&extents);
    // `rest` in list order: each stretch's kept part marked at its position in `rooms`
    // (the extents are done with), then one pass over the window, not a sort of the
    // stretches back into list order. Kept parts are disjoint, so no mark overwrites one.
    rooms.fill(0);
    for (&p, &m) in stretches.at.iter().zip(stretches.len.iter()).filter(|&(_, &m)| m > 0) {
        if let Some(mark) = rooms.get_mut(p) {
            *mark = m;
        }
    }
    let (mut p, mut to) = (0, 0);
    while let Some(&m) = rooms.get(p) {
        if m == 0 {
            p += 1;
            continue;
        }
        let (Some(from), Some(out)) = (free.get(p..p + m), rest.get_mut(to..to + m)) else {
            break; // cannot happen: the kept parts hold f - n pages
        };
        out.copy_from_slice(from);
        (p, to) = (p + m, to + m);
    }
    Ok(Placement { bound: r, placed, own, split, fallback: false })
}

/// The lowest of the top `len` ids of extent `k` (of `extents`, `(room, first stretch)`):
/// an extent's free ids are always its `room` lowest.
fn top<T: Index>(extents: &Columns<'_>, stretches: &Ranges<'_, T>, k: usize, len: usize) -> i128 {
    let (room, head) = (extents.a.get(k).copied(), extents.b.get(k).copied());
    let low = head.and_then(|h| stretches.low(h)).unwrap_or(0);
    low + wide(room.unwrap_or(0)) - wide(len)
}

/// Takes `len` pages off extent `k`'s room and moves it down to keep `extents` sorted by
/// (room, first stretch): a binary search and a rotation, not a re-sort.
fn shrink(extents: &mut Columns<'_>, k: usize, len: usize) {
    let (rooms, heads) = (&mut *extents.a, &mut *extents.b);
    let (Some(&room), Some(&head)) = (rooms.get(k), heads.get(k)) else { return };
    let key = (room - len.min(room), head);
    let (mut lo, mut hi) = (0, k);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if (rooms.get(mid).copied(), heads.get(mid).copied()) < (Some(key.0), Some(key.1)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for v in [&mut *rooms, &mut *heads] {
        if let Some(moved) = v.get_mut(lo..=k) {
            moved.rotate_right(1.min(moved.len()));
        }
    }
    if let (Some(r), Some(h)) = (rooms.get_mut(lo), heads.get_mut(lo)) {
        (*r, *h) = key;
    }
}

/// `Err` naming `buffer` unless `len == needed`.
fn buffer_length(buffer: &'static str, needed: usize, len: usize) -> Result<(), Error> {
    if len == needed { Ok(()) } else { Err(Error::BufferLength { buffer, needed, len }) }
}

/// The first `len` items of `v` (all of them if it is shorter).
fn prefix(v: &mut [usize], len: usize) -> &mut [usize] {
    let len = len.min(v.len());
    v.split_at_mut(len).0
}

/// A count as an exact wide integer (every `usize` fits).
fn wide(n: usize) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// Writes the ids `low..low + len` as the partners of `first[s..s + len]`, in the first
/// side's direction there (descending where it descends).
fn give<T: Index>(first: &[T], chosen: &mut [T], s: usize, len: usize, low: i128) {
    let (Some(run), Some(out)) = (first.get(s..s + len), chosen.get_mut(s..s + len)) else {
        return;
    };
    let down = matches!(run, [a, b, ..] if b < a);
    let last = low + wide(len) - 1;
    for (k, o) in out.iter_mut().enumerate() {
        // Exact: the ids are pages of the window, so of the type.
        *o = T::truncate(if down { last - wide(k) } else { low + wide(k) });
    }
}

/// Ranges of one list that step by +1 or -1 (a run of `first`, a stretch of the window):
/// position and length columns over the list's `values`.
struct Ranges<'a, T> {
    at: &'a mut [usize],
    len: &'a mut [usize],
    values: &'a [T],
    count: usize,
}

impl<'a, T: Index> Ranges<'a, T> {
    /// The ranges of `spans`, written into `at` and `len`.
    fn fill(
        spans: impl Iterator<Item = crate::Span>,
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
    fn ends(&self, k: usize) -> Option<(i128, i128)> {
        let (a, l) = (*self.at.get(k)?, *self.len.get(k)?);
        let (x, y) = (self.values.get(a)?.widen(), self.values.get(a + l.checked_sub(1)?)?.widen());
        Some((x.min(y), x.max(y)))
    }

    fn low(&self, k: usize) -> Option<i128> {
        self.ends(k).map(|(lo, _)| lo)
    }

    fn high(&self, k: usize) -> Option<i128> {
        self.ends(k).map(|(_, hi)| hi)
    }

    /// Sorts the ranges by lowest id; two that overlap share a page: the error names
    /// `list` and the first two positions of the smallest such page.
    /// `keys` and `moved` (at least `count` words each) are scratch.
    fn sort_by_low(
        &mut self,
        list: &'static str,
        keys: &mut [usize],
        moved: &mut [usize],
    ) -> Result<(), Error> {
        if !self.sort_packed(keys, moved) {
            sort(self);
        }
        let mut highest = None;
        for k in 0..self.count {
            let (lo, hi) = self.ends(k).unwrap_or((0, -1));
            if highest.is_some_and(|h| lo <= h) {
                let mut at = self.values.iter().enumerate().filter(|&(_, v)| v.widen() == lo);
                let (Some((first, _)), Some((second, _))) = (at.next(), at.next()) else {
                    continue; // cannot happen: the ranges overlap at `lo`
                };
                return Err(Error::DuplicatePage { list, first, second });
            }
            highest = highest.max(Some(hi));
        }
        Ok(())
    }

    /// Sorts the ranges by lowest id through one column of words, `(low - lowest) << b |
    /// k` for range `k` (`b` bits hold every `k`), then moves the ranges into that order
    /// through `moved`: the lows are computed once, not at every comparison. `false`
    /// (nothing done) when the ids span too much to pack or the scratch is short.
    fn sort_packed(&mut self, keys: &mut [usize], moved: &mut [usize]) -> bool {
        let count = self.count;
        let (Some(keys), Some(moved)) = (keys.get_mut(..count), moved.get_mut(..count)) else {
            return false;
        };
        let lows = (0..count).map(|k| self.low(k).unwrap_or(0));
        let (lowest, highest) =
            lows.clone().fold((i128::MAX, i128::MIN), |(a, b), v| (a.min(v), b.max(v)));
        let k_bits = usize::BITS - count.leading_zeros();
        let Ok(span) = usize::try_from(highest.saturating_sub(lowest)) else { return count == 0 };
        if usize::BITS - span.leading_zeros() + k_bits > usize::BITS || k_bits >= usize::BITS {
            return false;
        }
        for ((key, low), k) in keys.iter_mut().zip(lows).zip(0..) {
            // `low - lowest <= span`, which fits.
            *key = (usize::try_from(low - lowest).unwrap_or(0) << k_bits) | k;
        }
        radix_sort(keys, moved);
        let mask = (1usize << k_bits) - 1;
        for column in [&mut *self.at, &mut *self.len] {
            for (m, key) in moved.iter_mut().zip(keys.iter()) {
                *m = column.get(key & mask).copied().unwrap_or(0);
            }
            if let Some(c) = column.get_mut(..count) {
                c.copy_from_slice(moved);
            }
        }
        true
    }

    /// Cuts every stretch down to its ids still free: of each extent (`extents`:
    /// `(room, first stretch)`, stretches sorted by lowest id), its `room` lowest ids.
    fn keep_low_parts(&mut self, extents: &Columns<'_>) {
        for (&room, &head) in extents.a.iter().zip(extents.b.iter()) {
            let Some(low) = self.low(head) else { continue };
            let end = low + wide(room); // the extent's free ids are low..end
            let (mut k, mut previous) = (head, None);
            // Stretch k is read before it is cut; the next extent's first stretch does
            // not follow on (or, cut to nothing, has no ends), which stops the walk.
            while let Some((lo, hi)) = self.ends(k) {
                if previous.is_some_and(|h: i128| h + 1 != lo) {
                    break;
                }
                previous = Some(hi);
                let keep = usize::try_from((end - lo).min(hi - lo + 1).max(0)).unwrap_or(0);
                let ascending =
                    self.values.get(*self.at.get(k).unwrap_or(&0)).map(|v| v.widen()) == Some(lo);
                let (Some(a), Some(l)) = (self.at.get_mut(k), self.len.get_mut(k)) else { break };
                // The low ids are at the front of an ascending stretch, the back of a
                // descending one.
                if !ascending {
                    *a += *l - keep;
                }
                *l = keep;
                k += 1;
            }
        }
    }
}

impl<T: Index> Table for Ranges<'_, T> {
    fn rows(&self) -> usize {
        self.count
    }
    fn less(&self, i: usize, j: usize) -> bool {
        self.low(i) < self.low(j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        swap(self.at, i, j);
        swap(self.len, i, j);
    }
}

/// Two columns of one table (runs: length, start; extents: room, first stretch;
/// stretches: position, length), ordered by `a`, then `b`, with `a` descending when
/// `a_descending`.
struct Columns<'a> {
    a: &'a mut [usize],
    b: &'a mut [usize],
    a_descending: bool,
}

impl Columns<'_> {
    /// Sorts the rows by (`a`, `b`). Both columns packed into one word per row when
    /// they fit (always, for windows below 2^32 pages on 64-bit targets): one column,
    /// radix-sorted, where the two-column table's comparisons and swaps were most of
    /// `place`'s time on scattered windows.
    fn sort(&mut self) {
        let rows = self.rows();
        let (a, b) = (prefix(self.a, rows), prefix(self.b, rows));
        let top = |v: &[usize]| v.iter().copied().max().unwrap_or(0);
        let (a_max, b_bits) = (top(a), usize::BITS - top(b).leading_zeros());
        if usize::BITS - a_max.leading_zeros() + b_bits > usize::BITS {
            return sort(&mut Columns { a, b, a_descending: self.a_descending });
        }
        let descending = self.a_descending;
        let key = |x: usize| if descending { a_max - x } else { x };
        // `b_bits == usize::BITS` only when every `a` key is 0: then nothing shifts in.
        let (up, down) = (
            |x: usize| x.checked_shl(b_bits).unwrap_or(0),
            |x: usize| x.checked_shr(b_bits).unwrap_or(0),
        );
        for (x, &y) in a.iter_mut().zip(b.iter()) {
            *x = up(key(*x)) | y;
        }
        radix_sort(a, b); // `b` is packed into `a`: free to be the scratch
        let mask = up(1).wrapping_sub(1);
        for (x, y) in a.iter_mut().zip(b.iter_mut()) {
            *y = *x & mask;
            *x = key(down(*x));
        }
    }
}

impl Table for Columns<'_> {
    fn rows(&self) -> usize {
        self.a.len().min(self.b.len())
    }
    fn less(&self, i: usize, j: usize) -> bool {
        let key = |k| {
            let a = self.a.get(k).map(|&a| if self.a_descending { usize::MAX - a } else { a });
            (a, self.b.get(k))
        };
        key(i) < key(j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        swap(self.a, i, j);
        swap(self.b, i, j);
    }
}
