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
    /// Two pairs have one destination (from [`crate::Error::DuplicateDestination`]).
    DuplicateDestination {
        /// The first position with that destination.
        first: usize,
        /// The second.
        second: usize,
    },
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::LengthMismatch { src, dst } => Error::LengthMismatch { src, dst },
            crate::Error::Alloc { spans } => Error::Alloc { items: spans },
            crate::Error::DuplicateDestination { first, second } => {
                Error::DuplicateDestination { first, second }
            }
            // Placement's errors: no descriptor function places pages, so these never
            // reach here; a buffer length is still a length mismatch.
            crate::Error::NotEnoughFree { pages, free } => {
                Error::LengthMismatch { src: pages, dst: free }
            }
            crate::Error::DuplicatePage { first, second, .. } => {
                Error::DuplicateDestination { first, second }
            }
            crate::Error::BufferLength { needed, len, .. } => {
                Error::LengthMismatch { src: needed, dst: len }
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            // The grouping error's message, written once (`crate::Error`).
            Error::LengthMismatch { src, dst } => crate::Error::LengthMismatch { src, dst }.fmt(f),
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
            Error::DuplicateDestination { first, second } => {
                crate::Error::DuplicateDestination { first, second }.fmt(f)
            }
        }
    }
}

impl core::error::Error for Error {}
