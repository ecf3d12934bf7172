//! One heap sort for the crate's in-place sorts (placement's tables, order-free
//! grouping's pairs): no allocation, no recursion, and no index that can panic, so the
//! no-panic probe links.

/// What [`heap_sort`] sorts: rows compared and swapped by index.
pub(crate) trait Table {
    /// Number of rows.
    fn rows(&self) -> usize;
    /// Whether row `i` sorts before row `j`.
    fn less(&self, i: usize, j: usize) -> bool;
    /// Swaps rows `i` and `j`.
    fn swap(&mut self, i: usize, j: usize);
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

/// Sorts a table ascending by [`Table::less`] (a heap sort: in place, no recursion).
pub(crate) fn heap_sort(t: &mut impl Table) {
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
