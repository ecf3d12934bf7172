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
//!   allocator's own pages and the bound, extents by id 99.7% (`lab/replay.py`).
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
//! For `n` pages in `r` first-side runs and a window of `f` pages in `x` extents: `O(n +
//! f)` to find the runs (corun's own SIMD grouping) and to write the chosen pages and the
//! rest; a sort of the runs by lowest id (which also finds duplicates: within a run
//! there are none, so two overlapping ones hold every page listed twice) and one by
//! length, each a radix sort of one packed word per run (`O(r)` a pass, at most 8 passes)
//! or, when the words do not pack, an introsort (`O(r log r)`); and `O((r + x) log x)` to
//! choose the extents: each run and each piece of a split run asks two trees over the
//! extents (best fit, most room) and updates one path (`fit.rs`; pieces number at most
//! `r + x`).
//!
//! The window's extents come from a bitmap of its ids when they span at most
//! `usize::BITS` ids a page (`bits.rs`: any window of a pool up to 64 times its size):
//! pages listed twice, the extents and the rest then cost `O(f + span / 64)`, no sort.
//! A sparser window is cut into its stretches (pages stepping by +1 or -1 in list order,
//! `e` of them), sorted by lowest id as the runs are (`O(e)` a pass, or `O(e log e)`).
//! In all `O((n + f) log(n + f))` in the worst case, split runs included; never a sort of
//! pages, never a scan of the window or of the extents per run. At a million pages over
//! a shuffled window of four million, 0.9 to 1.5 times `sort_unstable` of the window's
//! ids (`cargo bench --bench place_scaling`,
//! `results/intel-xeon-avx512f-2cpu/2026-12-06-9c8bcc0/place-scaling.txt`, Intel Xeon,
//! AVX-512). No allocation: `scratch` holds [`place_scratch_len`]`(n, f)`
//! words.
//!
//! ```text
//! runs     = grouping(first, first)                    # r runs
//! reject a page listed twice in first or in free       # overlapping runs / stretches
//! extents  = consecutive ids in free, in id order      # a bitmap, or sorted stretches
//! trees    = best fit and most room over the extents   # fit.rs
//! for run in sort(runs, by length descending, then position):
//!     extent = the least room >= len(run), lowest ids on ties   (O(log x))
//!     if any: give run the extent's top len(run) ids, in its direction
//! for run still unplaced (longest first):
//!     while pages missing: give it the top of the extent with the most room
//! if runs(first, chosen) >= runs(first, free[..n]): chosen = free[..n]
//! rest = free without chosen, in list order            # bits left set, or by stretch
//! ```

use super::bits::Bits;
use super::fit::Fit;
use super::ranges::{Ranges, prefix};
use crate::error::Error;
use crate::grouper::{Direction, Grouper};
use crate::index::Index;

/// Scratch words [`place`] needs for a request of `pages` pages from a window of `free`
/// pages: two per first-side run (start, length), at most one run per page, and four per
/// stretch of the window, at most one stretch per page (its position and length, then
/// its extent; an extent's lowest page and room; the sorts' second buffer, then the
/// extents' trees, half a word per extent). Saturating: a length nothing can hold is reported by
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
    let (starts, lens) = runs.split_at_mut(n);
    let (at, more) = more.split_at_mut(f);
    let (lengths, more) = more.split_at_mut(f);
    let (order, spare) = more.split_at_mut(f);

    // The first side's runs; a page listed twice in it is a bit set twice in a bitmap of
    // its ids where they are dense enough (`bits.rs`), else two runs that overlap when
    // ordered by lowest id (no page repeats inside one).
    let grouper = Grouper::new().direction(direction);
    let mut runs = Ranges::fill(grouper.runs(first, first)?, starts, lens, first);
    let dense = Bits::span(first).filter(|&(_, span)| Bits::words(span) <= order.len());
    match dense.and_then(|span| Bits::new("first", first, span, order)) {
        Some(bits) => _ = bits?,
        None => runs.order_by_low("first", order, spare)?,
    }
    let own = grouper.count_runs(first, front)?;
    let r = runs.count;
    let fallback = |chosen: &mut [T], rest: &mut [T], split| {
        // Lengths checked above; a zip, not `copy_from_slice`, so no panic path links.
        chosen.iter_mut().zip(front).for_each(|(c, p)| *c = *p);
        rest.iter_mut().zip(back).for_each(|(c, p)| *c = *p);
        Ok(Placement { bound: r, placed: own, own, split, fallback: true })
    };

    // The window's extents, in id order: from a bitmap of its ids where they are dense
    // enough for one in `at` (`bits.rs`), else from its stretches sorted by lowest id.
    // `spare[k]` is extent k's room either way.
    let span = Bits::span(free).filter(|&(_, span)| Bits::words(span) <= at.len());
    let (mut window, x, trees) = match span.and_then(|span| Bits::new("free", free, span, at)) {
        Some(bits) => {
            let bits = bits?;
            let x = bits.extents(lengths, spare);
            (Window::Bits { bits, low: prefix(lengths, x) }, x, order)
        }
        None => {
            let either = Grouper::new().direction(Direction::Either);
            let stretches = Ranges::fill(either.runs(free, free)?, at, lengths, free);
            stretches.sort_by_low(order, spare);
            let (x, trees, extent_of) = stretches.into_extents("free", order, spare)?;
            (Window::Stretches { lowest: prefix(order, x), extent_of }, x, trees)
        }
    };
    let Some(mut fit) = Fit::new(prefix(spare, x), trees) else {
        return fallback(chosen, rest, 0); // cannot happen: `trees` holds x / 2 words
    };

    // Each run, longest first, whole into the extent with the least room that holds it;
    // the runs of one page last (a pass over the rooms where that costs less).
    runs.sort_longest_first();
    let (starts, lens) = (&*runs.at, &mut *runs.len);
    let ones = lens.iter().rev().take_while(|&&l| l == 1).count();
    let longer = lens.len() - ones;
    // Gives `first[s..s + m]` the top `m` ids of extent `k`, whose room is `room`.
    let mut hand = |s: usize, m: usize, k: usize, room: usize| {
        let low = window.low(free, k) + wide(room) - wide(m);
        give(first, chosen, s, m, low);
        window.take(low, m);
    };
    for (&s, l) in starts.iter().zip(lens.iter_mut()).take(longer) {
        best_fit(s, l, &mut fit, &mut hand);
    }
    let tail = starts.get(longer..).unwrap_or_default();
    let handed = if ones > 0 { pass_ones(fit.rooms(), tail, &mut hand) } else { 0 };
    for (k, (&s, l)) in starts.iter().zip(lens.iter_mut()).enumerate().skip(longer) {
        if k < longer + handed {
            *l = 0; // placed by the passes
        } else {
            best_fit(s, l, &mut fit, &mut hand);
        }
    }

    // What fits nowhere, piece by piece from the extents with the most room.
    let pending = || starts.iter().zip(lens.iter()).filter(|&(_, &l)| l > 0);
    let Some(mut split) = pass_split(fit.rooms(), pending(), &mut hand) else {
        return fallback(chosen, rest, 0); // cannot happen: f >= n pages
    };
    let mut short = false;
    for (&s, &l) in pending().skip(split) {
        let mut done = 0;
        while done < l {
            let Some(k) = fit.most() else {
                short = true; // cannot happen: f >= n pages
                break;
            };
            let m = fit.room(k).min(l - done);
            hand(s + done, m, k, fit.room(k));
            fit.take(k, m);
            done += m;
        }
        split += 1;
    }
    if short {
        return fallback(chosen, rest, split);
    }

    let placed = grouper.count_runs(first, chosen)?;
    if placed >= own {
        return fallback(chosen, rest, split);
    }
    window.rest(free, &fit, rest)?;
    Ok(Placement { bound: r, placed, own, split, fallback: false })
}

/// The window's extents as placement found them, and so how it writes the rest.
enum Window<'a> {
    /// From a bitmap of the ids: each extent's lowest id as an offset from the window's
    /// lowest.
    Bits { bits: Bits<'a>, low: &'a [usize] },
    /// From the stretches sorted by id: each extent's lowest id as its position in the
    /// list, and each stretch's extent (stretches in list order).
    Stretches { lowest: &'a [usize], extent_of: &'a [usize] },
}

impl Window<'_> {
    /// Extent `k`'s lowest id.
    fn low<T: Index>(&self, free: &[T], k: usize) -> i128 {
        match self {
            Window::Bits { bits, low } => low.get(k).map_or(0, |&o| bits.id(o)),
            Window::Stretches { lowest, .. } => {
                lowest.get(k).and_then(|&p| free.get(p)).map_or(0, |v| v.widen())
            }
        }
    }

    /// The ids `low..low + len` were chosen.
    fn take(&mut self, low: i128, len: usize) {
        if let Window::Bits { bits, .. } = self {
            bits.clear(low, len);
        }
    }

    /// Writes `rest`: the window without the chosen pages, in list order.
    fn rest<T: Index>(&self, free: &[T], fit: &Fit<'_>, rest: &mut [T]) -> Result<(), Error> {
        let extent_of = match self {
            Window::Bits { bits, .. } => {
                bits.rest(free, rest);
                return Ok(());
            }
            Window::Stretches { extent_of, .. } => extent_of,
        };
        // Stretch by stretch: each keeps its ids below its extent's end (an extent's free
        // ids are its `room` lowest), at the front of an ascending stretch, the back of a
        // descending one.
        let mut to = 0;
        let either = Grouper::new().direction(Direction::Either);
        for (span, &k) in either.runs(free, free)?.zip(extent_of.iter()) {
            let ends = free.get(span.start).zip(free.get(span.start + span.len.saturating_sub(1)));
            let Some((a, b)) = ends.map(|(a, b)| (a.widen(), b.widen())) else { break };
            let end = self.low(free, k) + wide(fit.room(k));
            let keep = usize::try_from((end - a.min(b)).clamp(0, wide(span.len))).unwrap_or(0);
            let from = if a <= b { span.start } else { span.start + span.len - keep };
            let (Some(pages), Some(out)) =
                (free.get(from..from + keep), rest.get_mut(to..to + keep))
            else {
                break; // cannot happen: the kept parts hold f - n pages
            };
            out.copy_from_slice(pages);
            to += keep;
        }
        Ok(())
    }
}

/// Run `first[s..s + l]` whole into the extent with the least room that holds it, if
/// any (`l` becomes 0: placed).
fn best_fit(
    s: usize,
    l: &mut usize,
    fit: &mut Fit<'_>,
    hand: &mut impl FnMut(usize, usize, usize, usize),
) {
    if let Some(k) = fit.best_fit(*l) {
        hand(s, *l, k, fit.room(k));
        fit.take(k, *l);
        *l = 0;
    }
}

/// Room reads in id order that cost about one question to the trees (a path down and
/// one up, cache misses at its lower end, against a read the prefetcher has brought in):
/// a pass over the `x` rooms that hands out pages in room order is taken where `passes *
/// x` is at most this many reads a question it saves. Measured at a million pages
/// (`cargo bench --bench place_scaling`): runs of 64 over a window of `n + 64`, passes
/// 51 ns a page, the trees 125; runs of 7 over `4n + 64`, 153 and 166. The bound keeps a
/// window of one large extent among many small ones (few pieces, many passes) on the
/// trees.
const READS_PER_QUESTION: usize = 512;

/// The runs of one page (`ones`: their starts, in order), each into the extent with the
/// least room (lowest ids on ties), as best fit puts them: that is the extents by room,
/// then id, each emptied from its top. Done in passes over `rooms` (one per room, 1 up)
/// when those cost less than a question a run; returns how many runs it placed (0: the
/// trees place them, from the front).
fn pass_ones(
    rooms: &mut [usize],
    ones: &[usize],
    hand: &mut impl FnMut(usize, usize, usize, usize),
) -> usize {
    // The passes needed: rooms up to `p` hold as many pages as there are runs.
    let mut count = [0usize; 65];
    for &r in rooms.iter() {
        if let Some(c) = count.get_mut(r) {
            *c += 1;
        }
    }
    let mut pages = 0;
    let Some(p) = (1..count.len()).find(|&r| {
        pages += r * count.get(r).copied().unwrap_or(0);
        pages >= ones.len()
    }) else {
        return 0;
    };
    if p.saturating_mul(rooms.len()) > READS_PER_QUESTION.saturating_mul(ones.len()) {
        return 0;
    }
    let mut next = ones.iter();
    let mut placed = 0;
    for r in 1..=p {
        for (k, room) in rooms.iter_mut().enumerate().filter(|(_, room)| **room == r) {
            while *room > 0 {
                let Some(&s) = next.next() else { return placed };
                hand(s, 1, k, *room);
                *room -= 1;
                placed += 1;
            }
        }
    }
    placed
}

/// The runs no extent held whole (`pending`: start and length, longest first), piece by
/// piece from the extent with the most room (lowest ids on ties), as the trees would
/// fill them: in passes over `rooms`, one per room from the largest down (in the pass for
/// room `r` every extent with room `r` is met in id order; a piece leaves less). Taken
/// when the passes cost less than a question a piece (two pieces a run at least, and
/// none longer than the most room); returns how many runs it filled (`Some(0)`: the trees fill them; `None`: the
/// rooms ran out first, which a window as long as the request never does).
fn pass_split<'a>(
    rooms: &mut [usize],
    mut pending: impl Iterator<Item = (&'a usize, &'a usize)> + Clone,
    hand: &mut impl FnMut(usize, usize, usize, usize),
) -> Option<usize> {
    let (runs, pages) = pending.clone().fold((0, 0), |(r, p), (_, &l)| (r + 1, p + l));
    let most = rooms.iter().copied().max().unwrap_or(0);
    if runs == 0 || most == 0 {
        return Some(0);
    }
    // Pieces, at least: two a run, and no piece holds more than `most` pages.
    let pieces = (2 * runs).max(pages / most);
    if most.saturating_mul(rooms.len()) > READS_PER_QUESTION.saturating_mul(pieces) {
        return Some(0);
    }
    let (mut filled, mut current) = (0, pending.next().map(|(&s, &l)| (s, l, 0)));
    for r in (1..=most).rev() {
        for (k, room) in rooms.iter_mut().enumerate().filter(|(_, room)| **room == r) {
            let Some((s, l, done)) = current.as_mut() else { return Some(filled) };
            let m = r.min(*l - *done);
            hand(*s + *done, m, k, r);
            *room -= m;
            *done += m;
            if *done == *l {
                filled += 1;
                current = pending.next().map(|(&s, &l)| (s, l, 0));
            }
        }
    }
    // Every room was read: the runs are filled, unless the window was short.
    current.is_none().then_some(filled)
}

/// `Err` naming `buffer` unless `len == needed`.
fn buffer_length(buffer: &'static str, needed: usize, len: usize) -> Result<(), Error> {
    if len == needed { Ok(()) } else { Err(Error::BufferLength { buffer, needed, len }) }
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
