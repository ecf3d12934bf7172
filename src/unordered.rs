//! Order-free grouping: when the pairs `(src[i], dst[i])` form a *set* (each page moves
//! once, whatever the order the lists came in), sorting them by destination first gives
//! the fewest runs any order can have. Sorting needs the caller's buffers, not a heap.

use crate::sort::{self, Table};
use crate::{Error, Index};

/// Copies the pairs of `src`/`dst` into `src_out`/`dst_out` sorted by destination, so that
/// grouping the outputs (any [`Grouper`](crate::Grouper) form) gives the fewest transfers
/// for the set of pairs. In place, no allocation, `O(n log n)` (a heap sort on the two
/// buffers together), never a panic.
///
/// Destinations must be distinct: two pairs with one destination would make the result
/// depend on their order, which is what this function drops. Errors:
/// [`Error::LengthMismatch`] (`src` and `dst`, or an output shorter or longer than
/// them), [`Error::DuplicateDestination`] naming both input positions (then the outputs
/// hold the pairs in some order).
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
    let n = crate::error::check_lengths(src, dst)?;
    for out in [src_out.len(), dst_out.len()] {
        if out != n {
            return Err(Error::LengthMismatch { src: n, dst: out });
        }
    }
    src_out.copy_from_slice(src);
    dst_out.copy_from_slice(dst);
    heap_sort(dst_out, src_out);
    // Sorted: equal destinations are neighbours.
    let dup = dst_out.windows(2).position(|w| w.first() == w.last());
    if let Some(value) = dup.and_then(|k| dst_out.get(k).copied()) {
        let mut at = dst.iter().enumerate().filter(|&(_, &d)| d == value).map(|(i, _)| i);
        let (first, second) = (at.next().unwrap_or(0), at.next().unwrap_or(0));
        return Err(Error::DuplicateDestination { first, second });
    }
    Ok(())
}

/// Sorts `keys` ascending, moving `values` with them.
fn heap_sort<T: Index>(keys: &mut [T], values: &mut [T]) {
    sort::heap_sort(&mut Pairs { keys, values });
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
        sort::swap(self.keys, i, j);
        sort::swap(self.values, i, j);
    }
}
