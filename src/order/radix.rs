//! The one radix sort of the order wing: LSD, 8 bits a pass, stable, with the caller's
//! second buffer. Placement sorts packed words with it (its runs by length, its runs and
//! stretches by lowest id), order-free grouping the positions of shuffled pages by
//! destination: `O(n)` a pass where the introsort's comparisons and swaps cost
//! `O(n log n)`. Below [`RADIX_MIN`] items a pass's 256 counts cost more than they save,
//! and every caller introsorts instead.

use super::sort::{Words, intro_sort};

/// Fewer items than this are introsorted. Measured side by side in one process on
/// random 30-bit words (placement's packed keys; 2,000 columns a size, best of 7 rounds,
/// a loaded 2-core VM): radix over introsort 3.4x the time at 8 items, 1.0x at 16 to 32,
/// 0.73x at 48, 0.40x at 64, 0.18-0.32x from 256 to 1,024. The two thresholds this
/// replaces (64 for placement's words, 256 for order-free grouping's positions) were
/// both past the crossover; order-free grouping's own position sort was not measured
/// apart.
pub(crate) const RADIX_MIN: usize = 32;

/// Sorts `items` ascending by `key`, stably: an LSD radix sort, 8 bits a pass, as many
/// passes as `top` (the largest key) has bytes, with `scratch` (at least `items.len()`
/// items; its contents are lost) as the second buffer. `false`, with nothing done, for
/// fewer than [`RADIX_MIN`] items or a short `scratch`: the caller sorts another way.
pub(crate) fn radix_sort_by<E: Copy>(
    items: &mut [E],
    scratch: &mut [E],
    top: usize,
    key: impl Fn(E) -> usize,
) -> bool {
    let n = items.len();
    let Some(scratch) = scratch.get_mut(..n).filter(|_| n >= RADIX_MIN) else {
        return false;
    };
    let passes = (usize::BITS - top.leading_zeros()).div_ceil(8);
    for pass in 0..passes {
        // `shift < usize::BITS`: a key has at most `usize::BITS / 8` bytes.
        let digit = |e: E| (key(e) >> (8 * pass)) & 0xff;
        if pass % 2 == 0 {
            scatter(items, scratch, digit);
        } else {
            scatter(scratch, items, digit);
        }
    }
    if passes % 2 == 1 {
        items.copy_from_slice(scratch);
    }
    true
}

/// Sorts `keys` ascending: [`radix_sort_by`] on the words themselves, or the introsort
/// when they are too few or `scratch` is short.
pub(crate) fn sort_words(keys: &mut [usize], scratch: &mut [usize]) {
    let top = keys.iter().copied().max().unwrap_or(0);
    if !radix_sort_by(keys, scratch, top, |k| k) {
        intro_sort(&mut Words(keys));
    }
}

/// Copies `from` into `to` ordered by `digit` (below 256), stably: one radix pass.
fn scatter<E: Copy>(from: &[E], to: &mut [E], digit: impl Fn(E) -> usize) {
    // Where the items of each digit start: the counts, summed up to each digit.
    let mut next = [0usize; 256];
    for &e in from {
        if let Some(c) = next.get_mut(digit(e)) {
            *c += 1;
        }
    }
    let mut sum = 0;
    for c in next.iter_mut() {
        (*c, sum) = (sum, sum + *c);
    }
    for &e in from {
        if let Some(at) = next.get_mut(digit(e)) {
            if let Some(slot) = to.get_mut(*at) {
                *slot = e;
            }
            *at += 1;
        }
    }
}
