//! Order-free grouping: when the pairs `(src[i], dst[i])` form a *set* (each page moves
//! once, whatever the order the lists came in), sorting them by destination first gives
//! the fewest runs any order can have. Sorting needs the caller's buffers, not a heap.

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

/// Sorts `keys` ascending, moving `values` with them (a heap sort: in place, no recursion,
/// every index checked).
fn heap_sort<T: Index>(keys: &mut [T], values: &mut [T]) {
    let n = keys.len().min(values.len());
    for start in (0..n / 2).rev() {
        sift_down(keys, values, start, n);
    }
    for end in (1..n).rev() {
        keys.swap(0, end);
        values.swap(0, end);
        sift_down(keys, values, 0, end);
    }
}

/// Restores the max-heap below `root` within the first `end` items.
fn sift_down<T: Index>(keys: &mut [T], values: &mut [T], mut root: usize, end: usize) {
    loop {
        let left = 2 * root + 1;
        if left >= end {
            return;
        }
        let right = left + 1;
        let bigger = match (keys.get(left), keys.get(right)) {
            (Some(l), Some(r)) if right < end && r > l => right,
            _ => left,
        };
        if keys.get(bigger) <= keys.get(root) {
            return;
        }
        keys.swap(root, bigger);
        values.swap(root, bigger);
        root = bigger;
    }
}
