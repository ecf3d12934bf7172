//! The output buffers the writers fill: caller slices, `heapless::Vec`, `Vec`.

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

/// Three caller slices, one per descriptor field, filled from their starts.
pub(crate) struct Columns<'o> {
    pub src_addrs: &'o mut [u64],
    pub dst_addrs: &'o mut [u64],
    pub lens: &'o mut [u64],
    pub len: usize,
}

impl Sink<crate::desc::Descriptor> for Columns<'_> {
    fn room(&mut self, n: usize) -> bool {
        let cap = self.src_addrs.len().min(self.dst_addrs.len()).min(self.lens.len());
        cap - self.len >= n
    }
    fn put(&mut self, d: crate::desc::Descriptor) {
        let i = self.len;
        if let (Some(s), Some(t), Some(l)) =
            (self.src_addrs.get_mut(i), self.dst_addrs.get_mut(i), self.lens.get_mut(i))
        {
            (*s, *t, *l) = (d.src_addr, d.dst_addr, d.len);
            self.len += 1;
        }
    }
    fn count(&self) -> usize {
        self.len
    }
    fn extend(&mut self, xs: impl Iterator<Item = crate::desc::Descriptor>) -> usize {
        let at = self.len;
        let free = self.src_addrs.get_mut(at..).unwrap_or_default().iter_mut().zip(
            self.dst_addrs
                .get_mut(at..)
                .unwrap_or_default()
                .iter_mut()
                .zip(self.lens.get_mut(at..).unwrap_or_default().iter_mut()),
        );
        let mut n = 0;
        for ((s, (t, l)), d) in free.zip(xs) {
            (*s, *t, *l) = (d.src_addr, d.dst_addr, d.len);
            n += 1;
        }
        self.len += n;
        n
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
