//! The reference implementation: one position at a time, written to be obviously correct.
//!
//! Every fast path in corun is tested and fuzzed against these functions. They have the
//! same contracts as the crate-level functions of the same names; the `_with` forms take
//! the same [`Grouper`] options. They share nothing with the fast paths but the types and
//! the exact step test `follows_by` (in `index`, below both): no kernel, no lanes, no
//! output writer, so that a bug in one cannot hide in the other.
//!
//! ```
//! let src = [10u32, 11, 12, 40, 41];
//! let dst = [7u32, 8, 9, 9, 10];
//! assert_eq!(corun::scalar::count_runs(&src, &dst), Ok(2));
//! assert_eq!(corun::scalar::count_runs(&src, &dst), corun::count_runs(&src, &dst));
//! ```

use core::iter::FusedIterator;

use crate::error::Error;
use crate::error::check_lengths;
use crate::grouper::Grouper;
use crate::index::Index;
use crate::span::{Progress, Span};

/// `b` follows `a`: `a + 1 == b` in exact arithmetic (`MAX` then `MIN` is no step).
#[inline]
pub fn follows<T: Index>(a: T, b: T) -> bool {
    a.checked_succ() == Some(b)
}

/// `b` follows `a` on a side stepping by `step`: `a + step == b` in exact arithmetic.
#[inline]
pub fn follows_by<T: Index>(a: T, b: T, step: u64) -> bool {
    crate::index::follows_by(a, b, step)
}

/// Spans one position at a time. Made by [`runs`] and [`runs_with`].
#[derive(Clone, Debug)]
pub struct Runs<'a, T> {
    src: &'a [T],
    dst: &'a [T],
    /// Where the next span starts.
    pos: usize,
    max_len: usize,
    steps: (u64, u64),
    /// Runs may descend ([`crate::Direction::Either`]).
    either: bool,
}

impl<T: Index> Runs<'_, T> {
    /// Positions covered by the spans yielded so far.
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// Both sides step from position `i - 1` to `i`: up (`down == false`) or down.
    fn steps_at(&self, i: usize, down: bool) -> bool {
        let pair = |side: &[T], step| match (side.get(i.wrapping_sub(1)), side.get(i)) {
            (Some(&a), Some(&b)) if down => follows_by(b, a, step),
            (Some(&a), Some(&b)) => follows_by(a, b, step),
            _ => false,
        };
        pair(self.src, self.steps.0) && pair(self.dst, self.steps.1)
    }

    /// End of the run that starts at `start`: its first pair sets its direction (up when
    /// both hold), and it goes on while every pair steps that way, for at most `max_len`
    /// positions. A run cut there ends: the next one starts afresh.
    fn run_end(&self, start: usize) -> usize {
        let down =
            self.either && !self.steps_at(start + 1, false) && self.steps_at(start + 1, true);
        let mut end = start + 1;
        while end < self.src.len() && end - start < self.max_len && self.steps_at(end, down) {
            end += 1;
        }
        end
    }
}

impl<T: Index> Iterator for Runs<'_, T> {
    type Item = Span;

    fn next(&mut self) -> Option<Span> {
        let start = self.pos;
        if start >= self.src.len() {
            return None;
        }
        let end = self.run_end(start);
        self.pos = end;
        Some(Span { start, len: end - start })
    }
}

impl<T: Index> FusedIterator for Runs<'_, T> {}

/// Reference for [`Grouper::runs`].
pub fn runs_with<'a, T: Index>(
    grouper: &Grouper,
    src: &'a [T],
    dst: &'a [T],
) -> Result<Runs<'a, T>, Error> {
    check_lengths(src, dst)?;
    let max_len = grouper.get_max_len().map_or(usize::MAX, |m| m.get());
    let either = grouper.get_direction() == crate::grouper::Direction::Either;
    Ok(Runs { src, dst, pos: 0, max_len, steps: grouper.get_steps(), either })
}

/// Reference for [`crate::runs`].
pub fn runs<'a, T: Index>(src: &'a [T], dst: &'a [T]) -> Result<Runs<'a, T>, Error> {
    runs_with(&Grouper::new(), src, dst)
}

/// Reference for [`Grouper::count_runs`].
pub fn count_runs_with<T: Index>(grouper: &Grouper, src: &[T], dst: &[T]) -> Result<usize, Error> {
    Ok(runs_with(grouper, src, dst)?.count())
}

/// Reference for [`crate::count_runs`].
pub fn count_runs<T: Index>(src: &[T], dst: &[T]) -> Result<usize, Error> {
    count_runs_with(&Grouper::new(), src, dst)
}

/// Reference for [`Grouper::group_into`].
pub fn group_into_with<T: Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    out: &mut [Span],
) -> Result<Progress, Error> {
    let mut runs = runs_with(grouper, src, dst)?;
    let mut spans = 0;
    for slot in out.iter_mut() {
        match runs.next() {
            Some(span) => *slot = span,
            None => break,
        }
        spans += 1;
    }
    Ok(Progress { consumed: runs.consumed(), spans })
}

/// Reference for [`crate::group_into`].
pub fn group_into<T: Index>(src: &[T], dst: &[T], out: &mut [Span]) -> Result<Progress, Error> {
    group_into_with(&Grouper::new(), src, dst, out)
}

/// Reference for [`Grouper::group`].
#[cfg(feature = "alloc")]
pub fn group_with<T: Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
) -> Result<alloc::vec::Vec<Span>, Error> {
    Ok(runs_with(grouper, src, dst)?.collect())
}

/// Reference for [`crate::group`].
#[cfg(feature = "alloc")]
pub fn group<T: Index>(src: &[T], dst: &[T]) -> Result<alloc::vec::Vec<Span>, Error> {
    group_with(&Grouper::new(), src, dst)
}

#[cfg(feature = "alloc")]
pub mod desc;
