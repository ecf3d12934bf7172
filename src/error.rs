//! The one error type: every failure is a value, nothing panics.

use core::fmt;

/// Why a call could not do its job. Nothing is written when a call returns an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// `src` and `dst` have different lengths (exactly one empty side included).
    LengthMismatch {
        /// Length of `src`.
        src: usize,
        /// Length of `dst`.
        dst: usize,
    },
    /// The `alloc` output could not reserve memory for this many spans.
    Alloc {
        /// Spans that needed room.
        spans: usize,
    },
    /// Two pairs have one destination ([`sort_by_destination`](crate::sort_by_destination)
    /// needs a set of pairs): the input positions of two of them.
    DuplicateDestination {
        /// The first position with that destination.
        first: usize,
        /// The second.
        second: usize,
    },
    /// A page stands twice in one of [`place`](crate::place())'s lists: placed, it would
    /// be handed out twice.
    DuplicatePage {
        /// The list: `"first"` or `"free"`.
        list: &'static str,
        /// The first position of the smallest page listed twice.
        first: usize,
        /// Its second position.
        second: usize,
    },
    /// [`place`](crate::place()) was asked for more pages than the free list holds.
    NotEnoughFree {
        /// Pages the request needs (the first side's length).
        pages: usize,
        /// Pages in the free list.
        free: usize,
    },
    /// A caller buffer has the wrong length.
    BufferLength {
        /// The parameter's name.
        buffer: &'static str,
        /// The length it needs (a minimum for scratch buffers).
        needed: usize,
        /// Its length.
        len: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::LengthMismatch { src, dst } => {
                write!(f, "src and dst must have equal lengths, got {src} and {dst}")
            }
            Error::Alloc { spans } => write!(f, "could not allocate room for {spans} spans"),
            Error::DuplicateDestination { first, second } => write!(
                f,
                "positions {first} and {second} have the same destination: order-free grouping \
                 needs distinct destinations"
            ),
            Error::DuplicatePage { list, first, second } => write!(
                f,
                "{list} holds one page at positions {first} and {second}: a page can be \
                 handed out only once"
            ),
            Error::NotEnoughFree { pages, free } => {
                write!(f, "free holds {free} pages, fewer than the {pages} the request needs")
            }
            Error::BufferLength { buffer, needed, len } => {
                write!(f, "{buffer} must hold {needed} items, got {len}")
            }
        }
    }
}

impl core::error::Error for Error {}

/// `Ok(len)` when both sides have the same length.
#[inline]
pub(crate) fn check_lengths<T>(src: &[T], dst: &[T]) -> Result<usize, Error> {
    if src.len() == dst.len() {
        Ok(src.len())
    } else {
        Err(Error::LengthMismatch { src: src.len(), dst: dst.len() })
    }
}
