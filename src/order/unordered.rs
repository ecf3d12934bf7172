//! Order-free grouping: when the pairs `(src[i], dst[i])` form a *set* (each page moves
//! once, whatever the order the lists came in), sorting them by destination first gives
//! the fewest runs any order can have. Sorting needs the caller's buffers, not a heap.

use super::radix::{RADIX_MIN, radix_sort_by};
use super::sort::{Table, intro_sort, swap};
use crate::error::{Error, check_lengths};
use crate::index::Index;

/// Copies the pairs of `src`/`dst` into `src_out`/`dst_out` sorted by destination, so that
/// grouping the outputs (any [`Grouper`](crate::Grouper) form) gives the fewest transfers
/// for the set of pairs. In place, no allocation, never a panic.
///
/// Pages come in runs, so this sorts runs, not pages. `dst` splits into `k` maximal runs
/// that step by `+1` or by `-1` (read left to right, a run continues in the direction of
/// its first step; `src` may step any way inside); a run read backwards is an ascending
/// one. The `k` run records (their lowest destination and first position) are sorted in
/// the front of the output buffers, then the runs are copied in behind them from the back,
/// each run's record read before anything lands on it. Cost: `O(n + k log k)` when `k <=
/// n / 2` (two passes over the pairs and an introsort of the records: already sorted
/// input is one run, `O(n)`). With more runs than that (pages mostly shuffled one by one),
/// or positions that do not fit `T` (`n > 2^31` for `i32`, `2^32` for `u32`), the pages
/// themselves are introsorted: `O(n log n)`.
///
/// Destinations must be distinct: two pairs with one destination would make the result
/// depend on their order, which is what this function drops. Errors:
/// [`Error::LengthMismatch`] (`src` and `dst`, or an output shorter or longer than
/// them), [`Error::DuplicateDestination`] naming the first two input positions of the
/// smallest repeated destination (then the outputs hold the pairs in some order).
///
/// ```
/// let src = [12u32, 40, 10, 11];
/// let dst = [2u32, 3, 0, 1];
/// let (mut s, mut d) = ([0u32; 4], [0u32; 4]);
/// corun::sort_by_destination(&src, &dst, &mut s, &mut d)?;
/// assert_eq!((s, d), ([10, 11, 12, 40], [0, 1, 2, 3]));
/// assert_eq!(corun::count_runs(&s, &d)?, 2); // in the given order: 3
/// # Ok::<(), corun::Error>(())
/// ```
pub fn sort_by_destination<T: Index>(
    src: &[T],
    dst: &[T],
    src_out: &mut [T],
    dst_out: &mut [T],
) -> Result<(), Error> {
    let n = check_lengths(src, dst)?;
    for out in [src_out.len(), dst_out.len()] {
        if out != n {
            return Err(Error::LengthMismatch { src: n, dst: out });
        }
    }
    if by_runs(src, dst, src_out, dst_out).is_some() {
        return Ok(());
    }
    // Many short runs, or a repeated destination: sort the pages themselves. Sorted,
    // equal destinations are neighbours, which names the error.
    by_pages(src, dst, src_out, dst_out);
    let dup = dst_out.windows(2).position(|w| w.first() == w.last());
    if let Some(value) = dup.and_then(|k| dst_out.get(k).copied()) {
        let mut at = dst.iter().enumerate().filter(|&(_, &d)| d == value).map(|(i, _)| i);
        let (first, second) = (at.next().unwrap_or(0), at.next().unwrap_or(0));
        return Err(Error::DuplicateDestination { first, second });
    }
    Ok(())
}

/// Sorts the pairs by runs of `dst` (see [`sort_by_destination`]); `None` when it did
/// not (more than `n / 2` runs, a position that does not fit `T`, or two runs sharing a
/// destination), and then the outputs hold anything: the caller sorts the pages.
fn by_runs<T: Index>(src: &[T], dst: &[T], src_out: &mut [T], dst_out: &mut [T]) -> Option<()> {
    let n = dst.len();
    // The records: run `j`'s lowest destination in `dst_out[j]`, its first position
    // (as a `T`) in `src_out[j]`. Its length and direction are read again from `dst`.
    let (mut k, mut at) = (0, 0);
    while at < n {
        if k >= n / 2 {
            return None; // more than n / 2 runs: sorting the pages is cheaper
        }
        let run = Run::at(dst, at);
        *dst_out.get_mut(k)? = run.lowest;
        *src_out.get_mut(k)? = position(at)?;
        (k, at) = (k + 1, at + run.len);
    }
    let (keys, values) = (dst_out.get_mut(..k)?, src_out.get_mut(..k)?);
    intro_sort(&mut Pairs { keys, values });
    // From the last run to the first: run `j` lands at `end - len`, which is `j` or
    // later (each run before it holds a page), so it never covers a record still unread.
    let (mut end, mut next_lowest) = (n, None);
    for j in (0..k).rev() {
        let start = usize::try_from(src_out.get(j)?.widen()).ok()?;
        let run = Run::at(dst, start);
        // Sorted by lowest destination, two runs share one exactly when some run reaches
        // the next one's lowest (ranges of +1 steps).
        if next_lowest.is_some_and(|next| run.highest >= next) {
            return None;
        }
        next_lowest = Some(run.lowest);
        let from = start..start + run.len;
        let (src_in, dst_in) = (src.get(from.clone())?, dst.get(from)?);
        let to = end.checked_sub(run.len)?..end;
        let (s, d) = (src_out.get_mut(to.clone())?, dst_out.get_mut(to.clone())?);
        if run.descending {
            copy(s.iter_mut().zip(src_in.iter().rev()));
            copy(d.iter_mut().zip(dst_in.iter().rev()));
        } else {
            copy(s.iter_mut().zip(src_in));
            copy(d.iter_mut().zip(dst_in));
        }
        end = to.start;
    }
    Some(())
}

/// Sorts the pairs by destination, pages one by one. When the destinations span at
/// most 2^32 ids and the positions fit `T`, the order's one radix sort
/// ([`radix_sort_by`]) of the *positions* by their destination's offset (at most 4
/// passes, the two outputs as its two buffers), then one gather of the pairs: `O(n)`, no
/// memory beyond the outputs and 2 KiB of counts on the stack. Otherwise (few pages, or
/// ids spread over more than 2^32) the pairs are introsorted.
fn by_pages<T: Index>(src: &[T], dst: &[T], src_out: &mut [T], dst_out: &mut [T]) {
    let n = dst.len();
    let low = dst.iter().map(|v| v.widen()).min().unwrap_or(0);
    let high = dst.iter().map(|v| v.widen()).max().unwrap_or(0);
    let top =
        usize::try_from(high - low).ok().filter(|&t| u64::try_from(t).is_ok_and(|t| t >> 32 == 0));
    let at = |p: &T| usize::try_from(p.widen()).unwrap_or(0);
    let radixed = match top {
        Some(top) if n >= RADIX_MIN && position::<T>(n - 1).is_some() => {
            for (o, p) in src_out.iter_mut().zip((0..n).filter_map(position::<T>)) {
                *o = p;
            }
            // A destination's offset from `low`, under 2^32: it fits.
            let offset =
                |p: T| dst.get(at(&p)).map_or(0, |v| usize::try_from(v.widen() - low).unwrap_or(0));
            radix_sort_by(src_out, dst_out, top, offset)
        }
        _ => false,
    };
    if !radixed {
        src_out.copy_from_slice(src);
        dst_out.copy_from_slice(dst);
        return intro_sort(&mut Pairs { keys: dst_out, values: src_out });
    }
    // `src_out` holds the positions in destination order: gather the pairs.
    for (d, p) in dst_out.iter_mut().zip(src_out.iter()) {
        *d = dst.get(at(p)).copied().unwrap_or(*d);
    }
    for s_ in src_out.iter_mut() {
        *s_ = src.get(at(s_)).copied().unwrap_or(*s_);
    }
}

/// One maximal run of `dst`, stepping by +1 or by -1, from a given position on.
struct Run<T> {
    len: usize,
    descending: bool,
    lowest: T,
    highest: T,
}

impl<T: Index> Run<T> {
    /// The run starting at `at` (`at < dst.len()`): it continues in its first step's
    /// direction, so the same start always gives the same run.
    fn at(dst: &[T], at: usize) -> Run<T> {
        let rest = dst.get(at..).unwrap_or_default();
        let up = |w: &[T]| matches!(*w, [a, b] if a.checked_succ() == Some(b));
        let down = |w: &[T]| matches!(*w, [a, b] if b.checked_succ() == Some(a));
        let descending = rest.windows(2).next().is_some_and(down);
        let steps = if descending {
            rest.windows(2).take_while(|w| down(w)).count()
        } else {
            rest.windows(2).take_while(|w| up(w)).count()
        };
        let (first, last) = (rest.first().copied(), rest.get(steps).copied());
        let (first, last) = (first.unwrap_or(T::MIN), last.unwrap_or(T::MIN));
        let (lowest, highest) = if descending { (last, first) } else { (first, last) };
        Run { len: (steps + 1).min(rest.len()), descending, lowest, highest }
    }
}

/// `p` as a `T`, if it fits.
fn position<T: Index>(p: usize) -> Option<T> {
    let wide = i128::try_from(p).ok()?;
    let t = T::truncate(wide);
    (t.widen() == wide).then_some(t)
}

/// Writes each pair's second item into its first.
fn copy<'a, T: Copy + 'a>(pairs: impl Iterator<Item = (&'a mut T, &'a T)>) {
    for (o, i) in pairs {
        *o = *i;
    }
}

/// Keys and the values that move with them.
struct Pairs<'a, T> {
    keys: &'a mut [T],
    values: &'a mut [T],
}

impl<T: Index> Table for Pairs<'_, T> {
    fn rows(&self) -> usize {
        self.keys.len().min(self.values.len())
    }
    fn less(&self, i: usize, j: usize) -> bool {
        self.keys.get(i) < self.keys.get(j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        swap(self.keys, i, j);
        swap(self.values, i, j);
    }
}
