//! What can go wrong turning runs into descriptors: every failure is a value.

use core::fmt;

/// Why a descriptor call stopped. Each error names the layer (index into the layout's
/// layers) and, where there is one, the input position; the calls that write say how
/// many whole outputs before the failure are valid (`written`): nothing after them is
/// written, and no output is ever half-written or computed with wrapped arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// `src` and `dst` have different lengths.
    LengthMismatch {
        /// Length of `src`.
        src: usize,
        /// Length of `dst`.
        dst: usize,
    },
    /// A layer has `item_len == 0`. Found before anything is written.
    ZeroItemLen {
        /// The layer.
        layer: usize,
    },
    /// The byte cap is smaller than one item of this layer, so no descriptor can hold
    /// even one page. Found before anything is written.
    CapBelowItem {
        /// The layer.
        layer: usize,
    },
    /// A gather call with `max_sge == 0`. Found before anything is written.
    ZeroMaxSge,
    /// A signed index is negative, so it has no address.
    NegativeIndex {
        /// The layer being written.
        layer: usize,
        /// The input position of the negative index.
        position: usize,
        /// Outputs of this call before the failure, all valid.
        written: usize,
    },
    /// An address, a length, or the end of a transfer (`addr + len`) would pass `2^64`.
    Overflow {
        /// The layer being written.
        layer: usize,
        /// The input position of the first page of the transfer.
        position: usize,
        /// Outputs of this call before the failure, all valid.
        written: usize,
    },
    /// The `alloc` form could not reserve memory.
    Alloc {
        /// Outputs that needed room.
        items: usize,
    },
}

impl Error {
    /// A grouping error as the descriptor calls meet it. They call the grouper only to
    /// split their input (`group_into`, or `group` with `alloc`), which fails only on
    /// lengths and memory; placement's and the unordered sort's errors come from calls
    /// no descriptor function makes, so they have no variant here (and a length-shaped
    /// one of them reads as the length mismatch it is).
    pub(crate) fn grouping(e: crate::error::Error) -> Self {
        use crate::error::Error as G;
        match e {
            G::Alloc { spans } => Error::Alloc { items: spans },
            G::LengthMismatch { src, dst }
            | G::NotEnoughFree { pages: src, free: dst }
            | G::BufferLength { needed: src, len: dst, .. }
            | G::DuplicateDestination { first: src, second: dst }
            | G::DuplicatePage { first: src, second: dst, .. } => {
                Error::LengthMismatch { src, dst }
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            // The grouping error's message, written once (`crate::Error`).
            Error::LengthMismatch { src, dst } => {
                crate::error::Error::LengthMismatch { src, dst }.fmt(f)
            }
            Error::ZeroItemLen { layer } => write!(f, "layer {layer} has an item length of 0"),
            Error::CapBelowItem { layer } => {
                write!(f, "the byte cap is smaller than one item of layer {layer}")
            }
            Error::ZeroMaxSge => write!(f, "max_sge must be at least 1"),
            Error::NegativeIndex { layer, position, written } => write!(
                f,
                "negative index at position {position} (layer {layer}; {written} written before it)"
            ),
            Error::Overflow { layer, position, written } => write!(
                f,
                "address overflows u64 at position {position} (layer {layer}; {written} written before it)"
            ),
            Error::Alloc { items } => write!(f, "could not allocate room for {items} outputs"),
        }
    }
}

impl core::error::Error for Error {}
