//! Checked address arithmetic, written once: every address, length and transfer end the
//! descriptor and gather writers compute goes through here, so none can wrap.

use super::Error;
use crate::index::Index;

/// Why one address could not be computed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    Negative,
    Overflow,
}

impl Fault {
    /// The error for this fault at input `position` in `layer`, with `written` valid
    /// outputs before it.
    pub fn at(self, layer: usize, position: usize, written: usize) -> Error {
        match self {
            Fault::Negative => Error::NegativeIndex { layer, position, written },
            Fault::Overflow => Error::Overflow { layer, position, written },
        }
    }
}

/// `len` bytes from `start` end by `2^64`: the last byte of the address space may be
/// used, none past it.
#[inline(always)]
pub(crate) fn end_fits(start: u128, len: u128) -> bool {
    start + len <= 1 << 64
}

/// `base + index * stride`, when it and the end of `len` bytes from it fit in 64 bits.
#[inline]
pub(crate) fn addr<T: Index>(base: u64, index: T, stride: u64, len: u64) -> Result<u64, Fault> {
    let index = u128::try_from(index.widen()).map_err(|_| Fault::Negative)?;
    // index < 2^64 and stride < 2^64: the product and the sums fit in u128.
    let start = u128::from(base) + index * u128::from(stride);
    if !end_fits(start, u128::from(len)) {
        return Err(Fault::Overflow);
    }
    u64::try_from(start).map_err(|_| Fault::Overflow)
}

/// Bytes of `items` items of `item_len` bytes, when that fits in 64 bits.
#[inline]
pub(crate) fn bytes(items: usize, item_len: u64) -> Result<u64, Fault> {
    u64::try_from(items).ok().and_then(|n| n.checked_mul(item_len)).ok_or(Fault::Overflow)
}
