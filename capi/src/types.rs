//! The C-visible types: plain `#[repr(C)]` structs and the status codes.

use corun::desc;

/** The major version of corun this header belongs to. */
pub const CORUN_VERSION_MAJOR: u32 = 0;
/** The minor version. */
pub const CORUN_VERSION_MINOR: u32 = 2;
/** The patch version. */
pub const CORUN_VERSION_PATCH: u32 = 0;

// The header's version is the crate's: cbindgen exports literals, so they are written out
// above and checked here against Cargo's at compile time (when this is corun-capi being
// built: the no-panic probe compiles these sources into a package of its own).
const _: () = {
    const fn digits(s: &str) -> u32 {
        let (b, mut i, mut n) = (s.as_bytes(), 0, 0);
        while i < b.len() {
            n = n * 10 + (b[i] - b'0') as u32;
            i += 1;
        }
        n
    }
    const fn same(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    if same(env!("CARGO_PKG_NAME"), "corun-capi") {
        assert!(digits(env!("CARGO_PKG_VERSION_MAJOR")) == CORUN_VERSION_MAJOR);
        assert!(digits(env!("CARGO_PKG_VERSION_MINOR")) == CORUN_VERSION_MINOR);
        assert!(digits(env!("CARGO_PKG_VERSION_PATCH")) == CORUN_VERSION_PATCH);
    }
};

/// The status codes and their descriptions, in one list: the enum and `corun_strerror`'s
/// text are both generated from it, so they cannot drift apart.
macro_rules! statuses {
    ($($(#[$doc:meta])* $name:ident = $value:literal => $text:literal,)*) => {
        /// What a call returns. `CORUN_OK` is 0; every other value is an error that
        /// `corun_strerror` describes. A full output buffer is not an error: see `corun_progress`
        /// and `corun_written`.
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum corun_status {
            $($(#[$doc])* $name = $value,)*
        }

        impl corun_status {
            /// Every status code, in order.
            pub const ALL: &'static [corun_status] = &[$(corun_status::$name),*];

            /// A static, NUL-terminated description.
            pub const fn text(self) -> &'static core::ffi::CStr {
                match self {
                    $(corun_status::$name => $text,)*
                }
            }
        }
    };
}

statuses! {
    /// Success.
    CORUN_OK = 0 => c"success",
    /// A pointer is NULL although its length is not 0, or a required out-pointer is NULL.
    CORUN_ERR_NULL = 1 => c"a pointer is NULL although its length is not 0",
    /// A pointer is not aligned for its type.
    CORUN_ERR_MISALIGNED = 2 => c"a pointer is not aligned for its type",
    /// Two buffers overlap (an output with an input, or two outputs).
    CORUN_ERR_OVERLAP = 3 => c"two buffers overlap",
    /// `src_len != dst_len`.
    CORUN_ERR_LENGTH_MISMATCH = 4 => c"src and dst have different lengths",
    /// A length is too large for the address space (`len * sizeof(T) > PTRDIFF_MAX`).
    CORUN_ERR_TOO_LONG = 5 => c"a buffer length is too large for the address space",
    /// A scratch buffer is too small: the span scratch cannot hold every run (size it
    /// with `corun_count_runs_*`), or placement's is under `corun_place_scratch_len(n, free_len)`.
    CORUN_ERR_SCRATCH_TOO_SMALL = 6 => c"a scratch buffer is too small",
    /// A layer has `item_len == 0` (`corun_written.error_layer` names it).
    CORUN_ERR_ZERO_ITEM_LEN = 7 => c"a layer has an item length of 0",
    /// `max_bytes` is smaller than one item of a layer (`error_layer` names it).
    CORUN_ERR_CAP_BELOW_ITEM = 8 => c"max_bytes is smaller than one item of a layer",
    /// `max_sge == 0`.
    CORUN_ERR_ZERO_MAX_SGE = 9 => c"max_sge must be at least 1",
    /// A signed index is negative where an address is computed (`error_layer` and
    /// `error_position` say where; the outputs before it are valid).
    CORUN_ERR_NEGATIVE_INDEX = 10 => c"a negative index where an address is computed",
    /// An address, length or transfer end would pass 2^64 (`error_layer` and
    /// `error_position` say where; the outputs before it are valid).
    CORUN_ERR_OVERFLOW = 11 => c"an address or length would pass 2^64",
    /// An option is out of range (`order` not a `corun_order` value, `direction` not a
    /// `corun_direction` value).
    CORUN_ERR_INVALID_ARGUMENT = 12 => c"an option is out of range",
    /// Two pairs have one destination (order-free grouping needs a set of pairs; the
    /// positions are in `duplicate`).
    CORUN_ERR_DUPLICATE_DESTINATION = 13 => c"two pairs have the same destination",
    /// Placement was asked for more pages than the free list holds (`free_len < n`).
    CORUN_ERR_NOT_ENOUGH_FREE = 14 => c"the free list holds fewer pages than the request",
    /// A page stands twice in placement's `first` or `free` (placed, it would be handed
    /// out twice); the list and both positions are in the `corun_placement`
    /// (`duplicate_in_free`, `duplicate_first`, `duplicate_second`).
    CORUN_ERR_DUPLICATE_PAGE = 15 => c"a page stands twice in first or free",
}

/// One run: positions `start .. start + len` of the input arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_span {
    /// First position.
    pub start: usize,
    /// Number of positions (at least 1).
    pub len: usize,
}

/// How far a grouping call got: continue with `src + consumed`, `dst + consumed`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_progress {
    /// Input positions covered by the spans written; equal to the length when done.
    pub consumed: usize,
    /// Spans written.
    pub spans: usize,
}

/// Grouping options. `CORUN_OPTIONS_DEFAULT` (or a NULL pointer) means maximal runs of
/// +1 steps.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct corun_options {
    /// Longest run to report (longer runs come out in pieces); 0 = no cap. Each piece is
    /// a run of its own: with `CORUN_EITHER` the next piece's direction is set afresh by
    /// its first pair, so capped runs are not always cuts of the uncapped ones
    /// (`1, 2, 3, 2, 1` capped at 2: `[1 2] [3 2] [1]`; uncapped: `[1 2 3] [2 1]`).
    pub max_len: usize,
    /// Index step on the source side (1 for packed pages).
    pub src_step: u64,
    /// Index step on the destination side.
    pub dst_step: u64,
    /// A `corun_direction` value: `CORUN_ASCENDING` (0, also what a three-field
    /// initializer leaves) or `CORUN_EITHER` (runs may descend on both sides too). Either
    /// way runs are not unique (`1, 2, 3, 2, 1`); the rule is greedy, left to right: a
    /// run's first pair sets its direction (ascending when both hold), the pair that
    /// turns starts the next run (`[1 2 3] [2 1]`).
    pub direction: u32,
}

/// Which way a run may go (`corun_options.direction`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum corun_direction {
    /// Both sides step by +step.
    CORUN_ASCENDING = 0,
    /// Both by +step, or both by -step, for the whole run (a descending run's descriptors
    /// start at its lowest page).
    CORUN_EITHER = 1,
}

/// What a placement call did, in concurrent runs (descriptors per layer buffer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_placement {
    /// Runs of the first side alone: the fewest any placement can reach.
    pub bound: usize,
    /// Concurrent runs of `first` with the chosen pages.
    pub placed: usize,
    /// Concurrent runs of `first` with the allocator's own choice (`free[0 .. n]`).
    pub own: usize,
    /// First-side runs that no free extent held whole and were split.
    pub split: usize,
    /// 1 when the chosen pages are the allocator's own choice (placing was no better).
    pub fallback: u8,
    /// On `CORUN_ERR_DUPLICATE_PAGE`: 1 when the page stands twice in `free`, 0 when in
    /// `first`.
    pub duplicate_in_free: u8,
    /// On `CORUN_ERR_DUPLICATE_PAGE`: the first position of the smallest page listed
    /// twice.
    pub duplicate_first: usize,
    /// On `CORUN_ERR_DUPLICATE_PAGE`: its second position.
    pub duplicate_second: usize,
}

/// One layer buffer on both sides: page `i` is `item_len` bytes at `src_base + i *
/// src_stride` and `dst_base + i * dst_stride`. For packed pages both strides equal
/// `item_len`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_layer {
    /// Source address of page 0.
    pub src_base: u64,
    /// Destination address of page 0.
    pub dst_base: u64,
    /// Bytes per page; not 0.
    pub item_len: u64,
    /// Bytes from one source page to the next.
    pub src_stride: u64,
    /// Bytes from one destination page to the next.
    pub dst_stride: u64,
}

/// Output order of descriptors over many layers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum corun_order {
    /// All of layer 0, then layer 1, ...
    CORUN_LAYER_MAJOR = 0,
    /// Each run in every layer, then the next run.
    CORUN_RUN_MAJOR = 1,
}

/// The layer buffers of a batch, the order, and the byte cap of one transfer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct corun_layout {
    /// `n_layers` layers.
    pub layers: *const corun_layer,
    /// Number of layers.
    pub n_layers: usize,
    /// Most bytes per descriptor or work request (whole pages); 0 = no cap.
    pub max_bytes: u64,
    /// A `corun_order` value.
    pub order: u32,
}

/// One transfer: `len` bytes from `src_addr` to `dst_addr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_descriptor {
    /// Source address.
    pub src_addr: u64,
    /// Destination address.
    pub dst_addr: u64,
    /// Bytes.
    pub len: u64,
}

/// One gather segment (an `ibv_sge` without the key).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_sge {
    /// Source address.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// One RDMA WRITE: `len` bytes to `dst_addr`, gathered from `sge_count` segments starting
/// at index `first_sge` of the same call's segment buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_work_request {
    /// Destination (remote) address.
    pub dst_addr: u64,
    /// Bytes in all.
    pub len: u64,
    /// Index of the first segment in this call's segment buffer.
    pub first_sge: usize,
    /// Number of segments.
    pub sge_count: usize,
}

/// Where a descriptor or gather writer continues. Zero-initialise it to start; each call
/// advances it. Only meaningful with the same inputs and options.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_cursor {
    /// Layer of the next output.
    pub layer: usize,
    /// Run (span index) of the next output.
    pub span: usize,
    /// Pages of that run already written for that layer.
    pub offset: usize,
}

/// What a descriptor or gather call wrote. Defined after every call, errors included: the
/// call zeroes it before any other check.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct corun_written {
    /// Descriptors or work requests written, all valid (also on error).
    pub items: usize,
    /// Gather segments written (gather calls only).
    pub sges: usize,
    /// 1 when everything is out; 0 when a buffer filled up (call again with the cursor).
    pub done: u32,
    /// On `CORUN_ERR_ZERO_ITEM_LEN`, `CAP_BELOW_ITEM`, `NEGATIVE_INDEX`, `OVERFLOW`: the
    /// layer.
    pub error_layer: usize,
    /// On `CORUN_ERR_NEGATIVE_INDEX` and `CORUN_ERR_OVERFLOW`: the input position.
    pub error_position: usize,
}

impl From<desc::Cursor> for corun_cursor {
    fn from(c: desc::Cursor) -> Self {
        corun_cursor { layer: c.layer, span: c.span, offset: c.offset }
    }
}

impl From<corun_cursor> for desc::Cursor {
    fn from(c: corun_cursor) -> Self {
        desc::Cursor { layer: c.layer, span: c.span, offset: c.offset }
    }
}

impl From<corun_layer> for desc::Layer {
    fn from(l: corun_layer) -> Self {
        desc::Layer::new(l.src_base, l.dst_base, l.item_len).strides(l.src_stride, l.dst_stride)
    }
}
