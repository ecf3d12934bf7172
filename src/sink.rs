//! The one output mechanism: the buffers every writer fills (spans and descriptors
//! alike): caller slices, `heapless::Vec`, `Vec`. A writer asks for room before it
//! writes, so a full buffer stops it at an output boundary with nothing lost.

/// A buffer that takes outputs until it has no room.
pub(crate) trait Sink<X> {
    /// Room for `n` more outputs.
    fn room(&mut self, n: usize) -> bool;
    /// Adds `x` (call only after `room` said yes).
    fn put(&mut self, x: X);
    /// Outputs added through this sink.
    fn count(&self) -> usize;
    /// Adds outputs from `xs` while there is room; returns how many it added.
    fn extend(&mut self, xs: impl Iterator<Item = X>) -> usize {
        let before = self.count();
        for x in xs {
            if !self.room(1) {
                break;
            }
            self.put(x);
        }
        self.count() - before
    }
}

/// A sink whose outputs are a slice: what it added can be reordered (a descending gather
/// request's segments).
pub(crate) trait Reversible<X>: Sink<X> {
    /// The outputs added through this sink, in order.
    fn written(&mut self) -> &mut [X];
    /// Reverses the order of the last `n` outputs added (all of them if fewer).
    fn reverse_last(&mut self, n: usize) {
        let all = self.written();
        let from = all.len().saturating_sub(n);
        if let Some(tail) = all.get_mut(from..) {
            tail.reverse();
        }
    }
}

/// A caller's slice, filled from its start.
pub(crate) struct Slots<'o, X> {
    pub out: &'o mut [X],
    pub len: usize,
}

impl<X> Sink<X> for Slots<'_, X> {
    fn room(&mut self, n: usize) -> bool {
        self.out.len() - self.len >= n
    }
    fn put(&mut self, x: X) {
        if let Some(slot) = self.out.get_mut(self.len) {
            *slot = x;
            self.len += 1;
        }
    }
    fn count(&self) -> usize {
        self.len
    }
    fn extend(&mut self, xs: impl Iterator<Item = X>) -> usize {
        let free = self.out.get_mut(self.len..).unwrap_or_default();
        let mut n = 0;
        for (slot, x) in free.iter_mut().zip(xs) {
            *slot = x;
            n += 1;
        }
        self.len += n;
        n
    }
}

impl<X> Reversible<X> for Slots<'_, X> {
    fn written(&mut self) -> &mut [X] {
        let len = self.len.min(self.out.len());
        self.out.split_at_mut(len).0
    }
}

/// A `heapless::Vec`, appended to; counts what this call added.
#[cfg(feature = "heapless")]
pub(crate) struct Tail<'o, X, const N: usize> {
    pub out: &'o mut heapless::Vec<X, N>,
    pub added: usize,
}

#[cfg(feature = "heapless")]
impl<X, const N: usize> Sink<X> for Tail<'_, X, N> {
    fn room(&mut self, n: usize) -> bool {
        N - self.out.len() >= n
    }
    fn put(&mut self, x: X) {
        if self.out.push(x).is_ok() {
            self.added += 1;
        }
    }
    fn count(&self) -> usize {
        self.added
    }
}

#[cfg(feature = "heapless")]
impl<X, const N: usize> Reversible<X> for Tail<'_, X, N> {
    fn written(&mut self) -> &mut [X] {
        let from = self.out.len().saturating_sub(self.added);
        self.out.get_mut(from..).unwrap_or_default()
    }
}

/// A `Vec`, grown as needed; no room means the memory could not be reserved.
#[cfg(feature = "alloc")]
impl<X> Sink<X> for alloc::vec::Vec<X> {
    fn room(&mut self, n: usize) -> bool {
        self.try_reserve(n).is_ok()
    }
    fn put(&mut self, x: X) {
        self.push(x);
    }
    fn count(&self) -> usize {
        self.len()
    }
}

#[cfg(feature = "alloc")]
impl<X> Reversible<X> for alloc::vec::Vec<X> {
    fn written(&mut self) -> &mut [X] {
        self
    }
}
