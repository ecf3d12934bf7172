//! The comparison sorts of the order wing: an introsort (quicksort, insertion sort for
//! short ranges, a heap sort for ranges whose pivots went bad) over any [`Table`] of rows
//! compared and swapped by index. Order-free grouping sorts its run records with it, and
//! every radix sort ([`radix`](super::radix)) falls back to it for short columns or keys
//! too wide to pack. No allocation, no recursion, and no index that can panic, so the
//! no-panic probe links.

/// What [`intro_sort`] sorts: rows compared and swapped by index.
pub(crate) trait Table {
    /// Number of rows.
    fn rows(&self) -> usize;
    /// Whether row `i` sorts before row `j`.
    fn less(&self, i: usize, j: usize) -> bool;
    /// Swaps rows `i` and `j`.
    fn swap(&mut self, i: usize, j: usize);
}

/// A column of words, sorted ascending.
pub(crate) struct Words<'a>(pub(crate) &'a mut [usize]);

impl Table for Words<'_> {
    fn rows(&self) -> usize {
        self.0.len()
    }
    fn less(&self, i: usize, j: usize) -> bool {
        self.0.get(i) < self.0.get(j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        swap(self.0, i, j);
    }
}

/// Swaps two items, doing nothing for an index out of range.
pub(crate) fn swap<T: Copy>(v: &mut [T], i: usize, j: usize) {
    if let (Some(&a), Some(&b)) = (v.get(i), v.get(j)) {
        if let Some(x) = v.get_mut(i) {
            *x = b;
        }
        if let Some(y) = v.get_mut(j) {
            *y = a;
        }
    }
}

/// Sorts a table ascending by [`Table::less`] (a heap sort: in place, no recursion):
/// [`intro_sort`]'s worst-case guard.
fn heap_sort(t: &mut impl Table) {
    let n = t.rows();
    for start in (0..n / 2).rev() {
        sift_down(t, start, n);
    }
    for end in (1..n).rev() {
        t.swap(0, end);
        sift_down(t, 0, end);
    }
}

/// Restores the max-heap below `root` within the first `end` rows.
fn sift_down(t: &mut impl Table, mut root: usize, end: usize) {
    loop {
        let left = 2 * root + 1;
        if left >= end {
            return;
        }
        let right = left + 1;
        let bigger = if right < end && t.less(left, right) { right } else { left };
        if !t.less(root, bigger) {
            return;
        }
        t.swap(root, bigger);
        root = bigger;
    }
}

/// Sorts a table ascending by [`Table::less`], unstably: an introsort (quicksort with a
/// median-of-three pivot, insertion sort below [`SMALL`] rows, and [`heap_sort`] for a
/// range whose pivots went bad), so `O(n log n)` in the worst case; rows already sorted,
/// or strictly descending, take one pass (`O(n)`). In place, no recursion: pending
/// ranges wait on a fixed stack.
pub(crate) fn intro_sort(t: &mut impl Table) {
    let n = t.rows();
    // Already sorted, or strictly descending (a run read backwards): one pass.
    if (1..n).all(|i| !t.less(i, i - 1)) {
        return;
    }
    if (1..n).all(|i| t.less(i, i - 1)) {
        for i in 0..n / 2 {
            t.swap(i, n - 1 - i);
        }
        return;
    }
    // Before the stack below is set up: radix parts call this for a few rows each.
    if n <= SMALL {
        return insertion_sort(t, 0, n);
    }
    // The larger side of each split waits while the smaller is sorted, so a pending
    // range at depth `d` holds at most `n / 2^d` rows: 64 entries are enough for any `n`.
    let mut pending = [(0usize, 0usize, 0u32); 64];
    let mut waiting = 0;
    // Splits a range may take before it is heap-sorted instead (bad pivots: the
    // quicksort's quadratic case).
    let budget = 2 * (usize::BITS - n.leading_zeros());
    let (mut lo, mut hi, mut depth) = (0, n, 0);
    loop {
        if hi - lo <= SMALL {
            insertion_sort(t, lo, hi);
        } else if depth >= budget {
            heap_sort(&mut Range { t: &mut *t, lo, len: hi - lo });
        } else {
            let p = partition(t, lo, hi);
            let (small, large) =
                if p - lo < hi - p { ((lo, p), (p + 1, hi)) } else { ((p + 1, hi), (lo, p)) };
            match pending.get_mut(waiting) {
                Some(slot) => {
                    *slot = (large.0, large.1, depth + 1);
                    waiting += 1;
                }
                // Cannot happen (see `pending`); sorting it now is still correct.
                None => heap_sort(&mut Range { t: &mut *t, lo: large.0, len: large.1 - large.0 }),
            }
            (lo, hi, depth) = (small.0, small.1, depth + 1);
            continue;
        }
        let Some(&next) = waiting.checked_sub(1).and_then(|w| pending.get(w)) else { return };
        waiting -= 1;
        (lo, hi, depth) = next;
    }
}

/// Ranges of at most this many rows are insertion-sorted.
const SMALL: usize = 16;

/// Sorts rows `lo..hi` by insertion.
fn insertion_sort(t: &mut impl Table, lo: usize, hi: usize) {
    for i in lo + 1..hi {
        let mut j = i;
        while j > lo && t.less(j, j - 1) {
            t.swap(j, j - 1);
            j -= 1;
        }
    }
}

/// Partitions rows `lo..hi` (more than [`SMALL`]) around the median of the first, middle
/// and last rows and returns the pivot's final row: rows before it are less, rows after
/// it not less. (Many equal rows make the split lopsided: the depth budget then hands the
/// range to the heap sort.)
fn partition(t: &mut impl Table, lo: usize, hi: usize) -> usize {
    let (mid, last) = (lo + (hi - lo) / 2, hi - 1);
    // Order the three samples, then move the median to `lo`.
    for (a, b) in [(lo, mid), (mid, last), (lo, mid)] {
        if t.less(b, a) {
            t.swap(a, b);
        }
    }
    t.swap(lo, mid);
    // Lomuto's scheme without a branch on the comparison (shuffled rows make that branch
    // a coin toss): rows lo+1..store are less than the pivot, rows store..i are not;
    // each row is swapped to `store` and kept there when it is less.
    let mut store = lo + 1;
    for i in lo + 1..hi {
        let less = t.less(i, lo);
        t.swap(i, store);
        store += usize::from(less);
    }
    t.swap(lo, store - 1);
    store - 1
}

/// Rows `lo..lo + len` of a table, as a table of their own.
struct Range<'a, T> {
    t: &'a mut T,
    lo: usize,
    len: usize,
}

impl<T: Table> Table for Range<'_, T> {
    fn rows(&self) -> usize {
        self.len
    }
    fn less(&self, i: usize, j: usize) -> bool {
        self.t.less(self.lo + i, self.lo + j)
    }
    fn swap(&mut self, i: usize, j: usize) {
        self.t.swap(self.lo + i, self.lo + j);
    }
}
