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
//! - The second side's *extents* are the maximal stretches of the free list, in the
//!   allocator's priority order, whose pages step by +1 or by -1. For a sorted array of
//!   free ids these are exactly the free extents; in an unsorted list (vLLM's free queue,
//!   SGLang's list without sorting) pages adjacent by id but apart in the list are not
//!   joined, since joining them would take pages out of priority order.
//! - Each run, longest first (ties: the earlier run), goes whole into the extent with the
//!   *least* room that still holds it (best fit; ties: the extent earlier in the list),
//!   taking the pages at that extent's front. Best fit keeps large extents for large
//!   runs and leaves few fragments behind: over thousands of requests on vLLM's free
//!   queue it placed 30% fewer descriptors than filling extents in list order, which
//!   fragmented the queue's front (`python/replay.py`). A run's pages are written in the
//!   run's own direction, so the pair steps together.
//! - Runs that no extent holds whole are split last, longest first, over the pages still
//!   free, in priority order (each piece again in the run's direction).
//! - Unless the result has fewer concurrent runs than the allocator's own choice (the
//!   front `first.len()` pages of the list, in order), that choice is returned instead:
//!   placement never makes a request worse, and leaves the allocator's order alone when
//!   it gains nothing.
//!
//! The caller chooses how deep into its priority order placement may reach by how much of
//! the free list it passes: a prefix of a few times the request keeps close to the
//! allocator's order (and, where the free list is an eviction order, to its cache).
//!
//! # Cost
//!
//! For `n` pages in `r` first-side runs, a free list of `f` pages in `e` extents: `O(n)`
//! to find the runs and `O(f)` the extents (corun's own SIMD grouping), `O(r log r + e log
//! e)` to sort them, and per run a binary search for its extent plus one move of that
//! extent down the sorted order (at most `e` words, usually a few), never a scan of the
//! free list per run; `O(f)` to write the pages that stay free. The caller bounds `f`
//! (the window it passes). No allocation: `scratch` holds
//! [`place_scratch_len`]`(n, f)` words.
//!
//! ```text
//! runs    = sort(grouping(first, first), by length descending, then position)
//! extents = sort(stretches(free), by room, then position)
//! for run in runs:
//!     extent = the first in extents with room >= len(run)       (binary search)
//!     if any: give run the extent's front pages, in its direction; re-sort that extent
//! for run in runs still unplaced (longest first):
//!     give it the next pages still free, in list order (each stretch in its direction)
//! if runs(first, chosen) >= runs(first, free[..n]): chosen = free[..n]
//! rest = free without chosen, in list order
//! ```

use crate::sort::{Table, heap_sort, swap};
use crate::{Direction, Error, Grouper, Index};

/// Scratch words [`place`] needs for a request of `pages` pages from a free list of
/// `free` pages: two per run (start, length) and per piece of the free list taken
/// (position, length), at most one of each per page, and two per stretch of the free list
/// (room, position), at most one per free page. Saturating: a length nothing can hold is
/// reported by `place` as too short.
pub const fn place_scratch_len(pages: usize, free: usize) -> usize {
    pages.saturating_mul(4).saturating_add(free.saturating_mul(2))
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
/// request order), from the free list `free` (in the allocator's priority order: the page
/// it would hand out first comes first). The rule and its cost are in the
/// [module docs](self).
///
/// Writes `chosen[i]`, the page paired with `first[i]`, and `rest`: `free` without the
/// chosen pages, in its order. `free` must hold distinct pages (a free list does); the
/// chosen pages come from distinct positions of it. Errors, with nothing written:
/// [`Error::NotEnoughFree`] when `free` is shorter than `first`;
/// [`Error::BufferLength`] naming `chosen` (must be `first.len()`), `rest`
/// (`free.len() - first.len()`) or `scratch` (at least
/// [`place_scratch_len`]`(first.len(), free.len())`).
///
/// ```
/// use corun::{Direction, place, place_scratch_len};
///
/// // The first side's pages: a descending run of 3 and an ascending run of 2.
/// let first = [52u32, 51, 50, 7, 8];
/// // The second side's free list, in its priority order.
/// let free = [3u32, 20, 21, 40, 41, 42, 43, 9];
/// let (mut chosen, mut rest) = ([0; 5], [0; 3]);
/// let mut scratch = [0; place_scratch_len(5, 8)];
/// let p = place(&first, &free, Direction::Either, &mut chosen, &mut rest, &mut scratch)?;
/// assert_eq!(chosen, [42, 41, 40, 20, 21]);
/// assert_eq!(rest, [3, 43, 9]);
/// assert_eq!((p.bound, p.placed, p.own), (2, 2, 4));
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
    let (pieces, extents) = more.split_at_mut(2 * n);
    let (starts, lens) = runs.split_at_mut(n);
    let (piece_pos, piece_len) = pieces.split_at_mut(n);
    let (rooms, fronts) = extents.split_at_mut(f);

    let grouper = Grouper::new().direction(direction);
    let own = grouper.count_runs(first, front)?;

    // The first side's runs, longest first (ties: earlier first).
    let mut r = 0;
    for (span, (s, l)) in grouper.runs(first, first)?.zip(starts.iter_mut().zip(lens.iter_mut())) {
        (*s, *l) = (span.start, span.len);
        r += 1;
    }
    let (starts, lens) = (prefix(starts, r), prefix(lens, r));
    heap_sort(&mut Columns { a: lens, b: starts, a_descending: true });

    // The free list's stretches that can hold a run (the shortest run is the last),
    // smallest room first (ties: earlier first).
    let shortest = lens.last().copied().unwrap_or(usize::MAX);
    let mut e = 0;
    let stretches = Grouper::new().direction(Direction::Either).runs(free, free)?;
    let usable = stretches.filter(|span| span.len >= shortest);
    for (span, (room, at)) in usable.zip(rooms.iter_mut().zip(fronts.iter_mut())) {
        (*room, *at) = (span.len, span.start);
        e += 1;
    }
    let mut extents = Columns { a: prefix(rooms, e), b: prefix(fronts, e), a_descending: false };
    heap_sort(&mut extents);

    // Each run, longest first, into the smallest stretch with room for it.
    let mut pieces = Pieces { pos: piece_pos, len: piece_len, count: 0 };
    for k in 0..r {
        let (Some(&s), Some(&l)) = (starts.get(k), lens.get(k)) else { break };
        let Some(at) = take(&mut extents, l) else { continue };
        give(first, free, chosen, s, at, l);
        pieces.push(at, l);
        if let Some(l) = lens.get_mut(k) {
            *l = 0; // placed
        }
    }

    // Split what fits nowhere over the pages still free, in list order.
    let mut split = 0;
    if lens.iter().any(|&l| l > 0) {
        heap_sort(&mut pieces.table());
        let placed_pieces = pieces.count;
        let mut gaps = Gaps { piece: 0, at: 0 };
        for k in 0..r {
            let (Some(&s), Some(&l)) = (starts.get(k), lens.get(k)) else { break };
            if l == 0 {
                continue;
            }
            let mut done = 0;
            while done < l {
                let Some((at, room)) = gaps.next_room(&pieces, placed_pieces, free.len()) else {
                    break; // cannot happen: free has at least n pages
                };
                let piece = free.get(at..at + room.min(l - done)).unwrap_or_default();
                let m = stretch_len(piece);
                if m == 0 {
                    break; // cannot happen: the room is at least one page
                }
                give(first, free, chosen, s + done, at, m);
                pieces.push(at, m);
                gaps.at = at + m;
                done += m;
            }
            split += 1;
        }
    }

    let placed = grouper.count_runs(first, chosen)?;
    if placed >= own {
        chosen.copy_from_slice(front);
        rest.copy_from_slice(back);
        return Ok(Placement { bound: r, placed: own, own, split, fallback: true });
    }
    heap_sort(&mut pieces.table());
    let (mut from, mut to) = (0, 0);
    for i in 0..pieces.count {
        let (Some(&at), Some(&m)) = (pieces.pos.get(i), pieces.len.get(i)) else { break };
        to += copy(free.get(from..at).unwrap_or_default(), rest.get_mut(to..).unwrap_or_default());
        from = at + m;
    }
    copy(free.get(from..).unwrap_or_default(), rest.get_mut(to..).unwrap_or_default());
    Ok(Placement { bound: r, placed, own, split, fallback: false })
}

/// Takes `len` pages from the front of the smallest stretch that has them, in `extents`
/// (`(room, front)`: pages left and the list position of the first of them, sorted by
/// room, then position), found by binary search; keeps the order (the stretch moves down
/// to its new room) and returns the list position of the pages taken.
fn take(extents: &mut Columns<'_>, len: usize) -> Option<usize> {
    let (rooms, fronts) = (&mut *extents.a, &mut *extents.b);
    let k = rooms.partition_point(|&room| room < len);
    let (room, at) = (*rooms.get(k)?, *fronts.get(k)?);
    let key = (room - len, at + len);
    // The new place: after every stretch whose key is smaller (all of them below k).
    let (mut lo, mut hi) = (0, k);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if (rooms.get(mid).copied(), fronts.get(mid).copied()) < (Some(key.0), Some(key.1)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    // Shift the stretches in lo..k up by one (a move, not a scan) and put this one at lo.
    for v in [&mut *rooms, &mut *fronts] {
        if let Some(moved) = v.get_mut(lo..=k) {
            moved.rotate_right(1.min(moved.len()));
        }
    }
    if let (Some(r), Some(f)) = (rooms.get_mut(lo), fronts.get_mut(lo)) {
        (*r, *f) = key;
    }
    Some(at)
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

/// Writes the pages of `free[at..at + len]` as the partners of `first[s..s + len]`,
/// in the first side's direction (a stretch of the free list may run the other way).
fn give<T: Index>(first: &[T], free: &[T], chosen: &mut [T], s: usize, at: usize, len: usize) {
    let (Some(run), Some(pages), Some(out)) =
        (first.get(s..s + len), free.get(at..at + len), chosen.get_mut(s..s + len))
    else {
        return;
    };
    let up = |v: &[T]| matches!(v, [a, b, ..] if b > a);
    if up(run) == up(pages) {
        out.copy_from_slice(pages);
    } else {
        for (o, &p) in out.iter_mut().zip(pages.iter().rev()) {
            *o = p;
        }
    }
}

/// Length of the leading stretch of `pages` that steps by +1 or by -1 throughout (at
/// least 1 for a non-empty slice).
fn stretch_len<T: Index>(pages: &[T]) -> usize {
    let step = |w: &[T]| match *w {
        [a, b] => b.widen() - a.widen(),
        _ => 0,
    };
    let Some(dir) = pages.windows(2).next().map(step).filter(|d| d.abs() == 1) else {
        return pages.len().min(1);
    };
    1 + pages.windows(2).take_while(|w| step(w) == dir).count()
}

/// Copies `from` into the front of `to`; returns how many items it copied.
fn copy<T: Copy>(from: &[T], to: &mut [T]) -> usize {
    let mut n = 0;
    for (t, &f) in to.iter_mut().zip(from) {
        *t = f;
        n += 1;
    }
    n
}

/// The pieces of the free list taken so far: positions and lengths.
struct Pieces<'a> {
    pos: &'a mut [usize],
    len: &'a mut [usize],
    count: usize,
}

impl Pieces<'_> {
    fn push(&mut self, at: usize, len: usize) {
        if let (Some(p), Some(l)) = (self.pos.get_mut(self.count), self.len.get_mut(self.count)) {
            (*p, *l) = (at, len);
            self.count += 1;
        }
    }

    /// The pieces as a table, to sort by position (positions are distinct).
    fn table(&mut self) -> Columns<'_> {
        let n = self.count.min(self.pos.len()).min(self.len.len());
        Columns {
            a: self.pos.split_at_mut(n).0,
            b: self.len.split_at_mut(n).0,
            a_descending: false,
        }
    }
}

/// A cursor over the gaps between the first `placed` pieces (sorted by position).
struct Gaps {
    piece: usize,
    at: usize,
}

impl Gaps {
    /// The next free position at or after the cursor and the room there before the next
    /// placed piece, or `None` past the end of the list.
    fn next_room(
        &mut self,
        pieces: &Pieces<'_>,
        placed: usize,
        end: usize,
    ) -> Option<(usize, usize)> {
        loop {
            let (start, len) = if self.piece < placed {
                (pieces.pos.get(self.piece).copied()?, pieces.len.get(self.piece).copied()?)
            } else {
                (end, 0)
            };
            if self.at < start {
                return Some((self.at, start - self.at));
            }
            if self.piece >= placed {
                return None;
            }
            self.at = self.at.max(start + len);
            self.piece += 1;
        }
    }
}

/// Two columns of one table (runs: length, start; stretches: room, front; pieces:
/// position, length), ordered by `a`, then `b`, with `a` descending when `a_descending`.
struct Columns<'a> {
    a: &'a mut [usize],
    b: &'a mut [usize],
    a_descending: bool,
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
