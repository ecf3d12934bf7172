//! The exported functions: per index type, thin wrappers over one generic body each.

use core::ffi::c_char;
use core::num::{NonZeroU64, NonZeroUsize};

use corun::desc::{self, Layout, Order, Plan};
use corun::{Direction, Grouper, Index};

use super::ffi::{self, Buf, disjoint};
use super::types::corun_status::*;
use super::types::*;

type Status = Result<(), corun_status>;

fn status(r: Status) -> corun_status {
    r.err().unwrap_or(CORUN_OK)
}

/// Zeroes an out-parameter as soon as its pointer is usable (not NULL, aligned), before
/// any other check: whatever the call then finds wrong, the caller reads a defined value,
/// never the previous call's. (The pointer must not overlap another argument, as the
/// header says; an overlap is still reported after this write.)
fn clear<T: Default>(ptr: *mut T) {
    if let Ok(p) = ffi::out(ptr) {
        *p = T::default();
    }
}

/// The byte range of one struct behind an out-pointer.
fn point<T>(ptr: *const T) -> (usize, usize) {
    (ptr as usize, ptr as usize + core::mem::size_of::<T>())
}

fn grouper(options: *const corun_options) -> Result<Grouper, corun_status> {
    let Some(o) = ffi::opt(options)? else { return Ok(Grouper::new()) };
    let direction = match o.direction {
        0 => Direction::Ascending,
        1 => Direction::Either,
        _ => return Err(CORUN_ERR_INVALID_ARGUMENT),
    };
    let g = Grouper::new().steps(o.src_step, o.dst_step).direction(direction);
    Ok(NonZeroUsize::new(o.max_len).map_or(g, |m| g.max_len(m)))
}

fn inputs<T>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
) -> Result<(Buf<T>, Buf<T>), corun_status> {
    let (s, d) = (Buf::new(src, src_len)?, Buf::new(dst, dst_len)?);
    if src_len != dst_len {
        return Err(CORUN_ERR_LENGTH_MISMATCH);
    }
    Ok((s, d))
}

fn count_runs<T: Index>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
    options: *const corun_options,
    count: *mut usize,
) -> Status {
    clear(count);
    let (s, d) = inputs(src, src_len, dst, dst_len)?;
    let grouper = grouper(options)?;
    disjoint(&[s.range(), point(count)])?;
    disjoint(&[d.range(), point(count)])?;
    let count = ffi::out(count)?;
    *count =
        grouper.count_runs(ffi::read(s), ffi::read(d)).map_err(|_| CORUN_ERR_LENGTH_MISMATCH)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn group<T: Index>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
    options: *const corun_options,
    out: *mut corun_span,
    out_cap: usize,
    progress: *mut corun_progress,
) -> Status {
    clear(progress);
    let (s, d) = inputs(src, src_len, dst, dst_len)?;
    let grouper = grouper(options)?;
    let o = Buf::new(out as *const corun_span, out_cap)?;
    disjoint(&[s.range(), o.range(), point(progress)])?;
    disjoint(&[d.range(), o.range(), point(progress)])?;
    let progress = ffi::out(progress)?;
    let p = grouper
        .group_into(ffi::read(s), ffi::read(d), ffi::write_as(o))
        .map_err(|_| CORUN_ERR_LENGTH_MISMATCH)?;
    *progress = corun_progress { consumed: p.consumed, spans: p.spans };
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn sort<T: Index>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
    src_out: *mut T,
    dst_out: *mut T,
    out_len: usize,
    duplicate: *mut usize,
) -> Status {
    // Two positions, zeroed first when the pointer is usable (NULL: not wanted).
    let dup =
        if duplicate.is_null() { None } else { Some(Buf::new(duplicate as *const usize, 2)?) };
    let dup_range = dup.map_or((0, 0), |b| b.range());
    let (s, d) = inputs(src, src_len, dst, dst_len)?;
    let (so, dout) =
        (Buf::new(src_out as *const T, out_len)?, Buf::new(dst_out as *const T, out_len)?);
    for input in [s.range(), d.range()] {
        disjoint(&[input, so.range(), dout.range(), dup_range])?;
    }
    disjoint(&[so.range(), dout.range(), dup_range])?;
    let mut dup: Option<&mut [usize]> = dup.map(ffi::write_as::<usize, usize>);
    dup.iter_mut().for_each(|d| d.fill(0));
    let result = corun::sort_by_destination(
        ffi::read(s),
        ffi::read(d),
        ffi::write_as::<T, T>(so),
        ffi::write_as::<T, T>(dout),
    );
    match result {
        Ok(()) => Ok(()),
        Err(corun::Error::DuplicateDestination { first, second }) => {
            if let Some([a, b]) = dup.and_then(|d| d.first_chunk_mut::<2>()) {
                (*a, *b) = (first, second);
            }
            Err(CORUN_ERR_DUPLICATE_DESTINATION)
        }
        Err(_) => Err(CORUN_ERR_LENGTH_MISMATCH),
    }
}

#[allow(clippy::too_many_arguments)]
fn place<T: Index>(
    first: *const T,
    n: usize,
    free: *const T,
    free_len: usize,
    direction: u32,
    chosen: *mut T,
    rest: *mut T,
    scratch: *mut usize,
    scratch_len: usize,
    placement: *mut corun_placement,
) -> Status {
    clear(placement);
    let (f, fr) = (Buf::new(first, n)?, Buf::new(free, free_len)?);
    let direction = match direction {
        0 => Direction::Ascending,
        1 => Direction::Either,
        _ => return Err(CORUN_ERR_INVALID_ARGUMENT),
    };
    let left = free_len.checked_sub(n).ok_or(CORUN_ERR_NOT_ENOUGH_FREE)?;
    let (c, r) = (Buf::new(chosen as *const T, n)?, Buf::new(rest as *const T, left)?);
    let sc = Buf::new(scratch as *const usize, scratch_len)?;
    let outs = [c.range(), r.range(), sc.range(), point(placement)];
    disjoint(&outs)?;
    for input in [f.range(), fr.range()] {
        disjoint(&[input, outs[0], outs[1], outs[2], outs[3]])?;
    }
    let placement = ffi::out(placement)?;
    let placed = corun::place(
        ffi::read(f),
        ffi::read(fr),
        direction,
        ffi::write_as::<T, T>(c),
        ffi::write_as::<T, T>(r),
        ffi::write_as::<usize, usize>(sc),
    );
    let p = match placed {
        Ok(p) => p,
        Err(corun::Error::DuplicatePage { list, first, second }) => {
            placement.duplicate_in_free = u8::from(list == "free");
            (placement.duplicate_first, placement.duplicate_second) = (first, second);
            return Err(CORUN_ERR_DUPLICATE_PAGE);
        }
        Err(corun::Error::NotEnoughFree { .. }) => return Err(CORUN_ERR_NOT_ENOUGH_FREE),
        Err(_) => return Err(CORUN_ERR_SCRATCH_TOO_SMALL),
    };
    *placement = corun_placement {
        bound: p.bound,
        placed: p.placed,
        own: p.own,
        split: p.split,
        fallback: u8::from(p.fallback),
        ..corun_placement::default()
    };
    Ok(())
}

/// The checked layout; its layers borrow the caller's array.
fn layout<'a>(layout: *const corun_layout) -> Result<(Layout<'a>, Buf<corun_layer>), corun_status> {
    let l = ffi::opt(layout)?.ok_or(CORUN_ERR_NULL)?;
    let layers = Buf::new(l.layers, l.n_layers)?;
    let order = match l.order {
        0 => Order::LayerMajor,
        1 => Order::RunMajor,
        _ => return Err(CORUN_ERR_INVALID_ARGUMENT),
    };
    let mut out = Layout::new(ffi::read_as::<corun_layer, desc::Layer>(layers)).order(order);
    if let Some(cap) = NonZeroU64::new(l.max_bytes) {
        out = out.max_bytes(cap);
    }
    Ok((out, layers))
}

/// Records a descriptor error in `written` and turns it into a status.
fn desc_error(e: desc::Error, written: &mut corun_written) -> corun_status {
    match e {
        desc::Error::LengthMismatch { .. } => CORUN_ERR_LENGTH_MISMATCH,
        desc::Error::ZeroItemLen { layer } => {
            written.error_layer = layer;
            CORUN_ERR_ZERO_ITEM_LEN
        }
        desc::Error::CapBelowItem { layer } => {
            written.error_layer = layer;
            CORUN_ERR_CAP_BELOW_ITEM
        }
        desc::Error::ZeroMaxSge => CORUN_ERR_ZERO_MAX_SGE,
        desc::Error::NegativeIndex { layer, position, written: n } => {
            (written.error_layer, written.error_position, written.items) = (layer, position, n);
            CORUN_ERR_NEGATIVE_INDEX
        }
        desc::Error::Overflow { layer, position, written: n } => {
            (written.error_layer, written.error_position, written.items) = (layer, position, n);
            CORUN_ERR_OVERFLOW
        }
        // Not produced by the writers used here (no allocation); future errors too.
        _ => CORUN_ERR_INVALID_ARGUMENT,
    }
}

/// Groups into the scratch buffer; every run must fit.
fn plan<'a, T: Index>(
    grouper: &Grouper,
    src: &'a [T],
    dst: &'a [T],
    scratch: &'a mut [corun::Span],
) -> Result<Plan<'a, T>, corun_status> {
    let plan = Plan::new(grouper, src, dst, scratch).map_err(|_| CORUN_ERR_LENGTH_MISMATCH)?;
    if plan.consumed() < src.len() {
        return Err(CORUN_ERR_SCRATCH_TOO_SMALL);
    }
    Ok(plan)
}

/// What the descriptor and gather calls share, checked: the runs found into `scratch`,
/// the layout, and the cursor and result out-pointers.
struct Prepared<'a, T: Index> {
    plan: Plan<'a, T>,
    layout: Layout<'a>,
    cursor: &'a mut corun_cursor,
    written: &'a mut corun_written,
}

/// Checks every pointer of a descriptor or gather call (`outs`: the call's own output
/// buffers, an empty range for none) and finds the runs.
#[allow(clippy::too_many_arguments)]
fn prepare<'a, T: Index>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
    options: *const corun_options,
    layout_ptr: *const corun_layout,
    scratch: *mut corun_span,
    scratch_cap: usize,
    cursor: *mut corun_cursor,
    written: *mut corun_written,
    outs: [(usize, usize); 2],
) -> Result<Prepared<'a, T>, corun_status> {
    let (s, d) = inputs(src, src_len, dst, dst_len)?;
    let grouper = grouper(options)?;
    let (layout, layers) = layout(layout_ptr)?;
    let sc = Buf::new(scratch as *const corun_span, scratch_cap)?;
    let [o1, o2] = outs;
    for input in [s.range(), d.range(), layers.range()] {
        disjoint(&[input, sc.range(), point(cursor), point(written), o1, o2])?;
    }
    let (cursor, written) = (ffi::out(cursor)?, ffi::out(written)?);
    let plan = plan(&grouper, ffi::read(s), ffi::read(d), ffi::write_as(sc))?;
    Ok(Prepared { plan, layout, cursor, written })
}

impl<T: Index> Prepared<'_, T> {
    /// Records where the call stopped: the cursor to resume from, or done.
    fn finish(self, next: Option<desc::Cursor>) -> Status {
        match next {
            Some(next) => *self.cursor = next.into(),
            None => self.written.done = 1,
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn descriptors<T: Index>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
    options: *const corun_options,
    layout_ptr: *const corun_layout,
    scratch: *mut corun_span,
    scratch_cap: usize,
    cursor: *mut corun_cursor,
    out: *mut corun_descriptor,
    out_cap: usize,
    written: *mut corun_written,
) -> Status {
    clear(written);
    let o = Buf::new(out as *const corun_descriptor, out_cap)?;
    let p = prepare(
        src,
        src_len,
        dst,
        dst_len,
        options,
        layout_ptr,
        scratch,
        scratch_cap,
        cursor,
        written,
        [o.range(), (0, 0)],
    )?;
    let w = p
        .plan
        .descriptors_into(&p.layout, (*p.cursor).into(), ffi::write_as(o))
        .map_err(|e| desc_error(e, p.written))?;
    p.written.items = w.descriptors;
    p.finish(w.next)
}

#[allow(clippy::too_many_arguments)]
fn gather<T: Index>(
    src: *const T,
    src_len: usize,
    dst: *const T,
    dst_len: usize,
    options: *const corun_options,
    layout_ptr: *const corun_layout,
    max_sge: usize,
    scratch: *mut corun_span,
    scratch_cap: usize,
    cursor: *mut corun_cursor,
    requests: *mut corun_work_request,
    requests_cap: usize,
    sges: *mut corun_sge,
    sges_cap: usize,
    written: *mut corun_written,
) -> Status {
    clear(written);
    let r = Buf::new(requests as *const corun_work_request, requests_cap)?;
    let g = Buf::new(sges as *const corun_sge, sges_cap)?;
    let p = prepare(
        src,
        src_len,
        dst,
        dst_len,
        options,
        layout_ptr,
        scratch,
        scratch_cap,
        cursor,
        written,
        [r.range(), g.range()],
    )?;
    let w = p
        .plan
        .gather_into(&p.layout, max_sge, (*p.cursor).into(), ffi::write_as(r), ffi::write_as(g))
        .map_err(|e| desc_error(e, p.written))?;
    (p.written.items, p.written.sges) = (w.requests, w.sges);
    p.finish(w.next)
}

/// The library's version, `"MAJOR.MINOR.PATCH"` (static, NUL-terminated): compare it with
/// `CORUN_VERSION_STRING` to check that the library loaded is the one the header is from.
#[unsafe(no_mangle)]
pub extern "C" fn corun_version() -> *const c_char {
    const VERSION: &core::ffi::CStr = match core::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };
    VERSION.as_ptr()
}

/// The number of `size_t` words of scratch that `corun_place_*` needs for a request of
/// `n` pages from a free list of `free_len` pages (`2 * n + 4 * free_len`, saturating at
/// `SIZE_MAX`).
#[unsafe(no_mangle)]
pub extern "C" fn corun_place_scratch_len(n: usize, free_len: usize) -> usize {
    corun::place_scratch_len(n, free_len)
}

/// A static, NUL-terminated description of a status code (never NULL; any int is
/// accepted, unknown codes are described as such).
#[unsafe(no_mangle)]
pub extern "C" fn corun_strerror(status: i32) -> *const c_char {
    let known = corun_status::ALL.iter().find(|s| **s as i32 == status);
    known.map_or(c"unknown corun status code", |s| s.text()).as_ptr()
}

/// The exported functions of one index type.
macro_rules! typed {
    ($t:ty, $c:literal, $count:ident, $group:ident, $desc:ident, $gather:ident, $sort:ident, $place:ident) => {
        #[doc = concat!(" Chooses the second side's pages (`", $c, "`) for a request whose first side has pages `first[0 .. n]`, from the free list `free[0 .. free_len]`.")]
        ///
        /// `free` is in the allocator's priority order (the page it would hand out first
        /// comes first: a sorted array of free ids, or the front of a free queue: the
        /// window placement may choose from). Writes `chosen[i]`, the page paired with
        /// `first[i]` (`n` elements), and `rest`, the free list without the chosen pages in
        /// its order (`free_len - n` elements). The rule: the first side's runs
        /// (`direction`: `CORUN_ASCENDING` or `CORUN_EITHER`), longest first, each go whole
        /// into the extent (a set of consecutive free ids, wherever they stand in `free`)
        /// with the least room that holds it (the lowest ids on ties), taking its highest
        /// ids, written in the run's direction; runs that fit nowhere are split, piece by
        /// piece from the extents with the most room; the allocator's own choice
        /// (`free[0 .. n]`) is kept unless placing is strictly better. `*placement` (zeroed
        /// first) says what it did. Errors: `CORUN_ERR_NOT_ENOUGH_FREE` (`free_len < n`),
        /// `CORUN_ERR_DUPLICATE_PAGE` (a page twice in `first` or `free`: the list and both
        /// positions in `*placement`), `CORUN_ERR_SCRATCH_TOO_SMALL`
        /// (`scratch_len < corun_place_scratch_len(n, free_len)`), `CORUN_ERR_INVALID_ARGUMENT`
        /// (`direction`), and the pointer errors; nothing is written but `*placement`.
        ///
        /// # Safety
        ///
        /// `first` and `free` are readable for `n` and `free_len` elements; `chosen`,
        /// `rest` and `scratch` writable for `n`, `free_len - n` and `scratch_len`
        /// elements; `placement` points to a writable `corun_placement`; no output overlaps
        /// another buffer (checked: `CORUN_ERR_OVERLAP`).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $place(
            first: *const $t,
            n: usize,
            free: *const $t,
            free_len: usize,
            direction: u32,
            chosen: *mut $t,
            rest: *mut $t,
            scratch: *mut usize,
            scratch_len: usize,
            placement: *mut corun_placement,
        ) -> corun_status {
            status(place(first, n, free, free_len, direction, chosen, rest, scratch, scratch_len, placement))
        }

        #[doc = concat!(" Copies the pairs of `src`/`dst` (`", $c, "` indices) into `src_out`/`dst_out` sorted by destination.")]
        ///
        /// Grouping the outputs gives the fewest runs for the *set* of pairs (order-free
        /// grouping). `out_len` must equal the input length. Destinations must be
        /// distinct: a repeated one is `CORUN_ERR_DUPLICATE_DESTINATION`, with both input
        /// positions in `duplicate[0]` and `duplicate[1]` (which may be NULL; when it is
        /// not, it is checked and zeroed before anything else, so after an overlap or
        /// length error it reads 0, 0).
        ///
        /// # Safety
        ///
        /// As for the count function; `src_out` and `dst_out` are writable for `out_len`
        /// elements; `duplicate` is NULL or writable for two `size_t`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $sort(
            src: *const $t,
            src_len: usize,
            dst: *const $t,
            dst_len: usize,
            src_out: *mut $t,
            dst_out: *mut $t,
            out_len: usize,
            duplicate: *mut usize,
        ) -> corun_status {
            status(sort(src, src_len, dst, dst_len, src_out, dst_out, out_len, duplicate))
        }

        #[doc = concat!(" Counts the runs of `src`/`dst` (`", $c, "` indices) into `*count`.")]
        ///
        /// `options` may be NULL (maximal runs of +1 steps). `*count` is 0 after an
        /// error (when `count` is a usable pointer).
        ///
        /// # Safety
        ///
        /// Each non-NULL pointer points to as many readable elements as its length says
        /// (`count`: one writable `size_t`), and nothing writes them during the call.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $count(
            src: *const $t,
            src_len: usize,
            dst: *const $t,
            dst_len: usize,
            options: *const corun_options,
            count: *mut usize,
        ) -> corun_status {
            status(count_runs(src, src_len, dst, dst_len, options, count))
        }

        #[doc = concat!(" Writes the runs of `src`/`dst` (`", $c, "` indices) into `out`.")]
        ///
        /// Stops at a run boundary when `out` is full; `*progress` says how far it got:
        /// call again with `src + consumed`, `dst + consumed`, `len - consumed`. After an
        /// error `*progress` is all zero (when `progress` is a usable pointer).
        ///
        /// # Safety
        ///
        /// As for the count function; `out` is writable for `out_cap` spans.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $group(
            src: *const $t,
            src_len: usize,
            dst: *const $t,
            dst_len: usize,
            options: *const corun_options,
            out: *mut corun_span,
            out_cap: usize,
            progress: *mut corun_progress,
        ) -> corun_status {
            status(group(src, src_len, dst, dst_len, options, out, out_cap, progress))
        }

        #[doc = concat!(" Writes transfer descriptors of `src`/`dst` (`", $c, "` indices) for every layer of `layout`.")]
        ///
        /// The runs are found once per call into `scratch` (size it with the count
        /// function). Continues from `*cursor` (zero-initialise it to start) and advances
        /// it when `out` fills up; `written->done` is 1 when everything is out.
        /// `*written` is defined after every call: it is zeroed first (when `written` is
        /// a usable pointer), so after an early error (a bad pointer, length, overlap or
        /// option) it is all zero, and after an error while writing, `written->items`
        /// descriptors are valid and nothing after them is written.
        ///
        /// # Safety
        ///
        /// As for the count function; `layout->layers` holds `n_layers` layers; `scratch`,
        /// `out`, `cursor` and `written` are writable for their lengths.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $desc(
            src: *const $t,
            src_len: usize,
            dst: *const $t,
            dst_len: usize,
            options: *const corun_options,
            layout: *const corun_layout,
            scratch: *mut corun_span,
            scratch_cap: usize,
            cursor: *mut corun_cursor,
            out: *mut corun_descriptor,
            out_cap: usize,
            written: *mut corun_written,
        ) -> corun_status {
            status(descriptors(
                src, src_len, dst, dst_len, options, layout, scratch, scratch_cap, cursor, out,
                out_cap, written,
            ))
        }

        #[doc = concat!(" Writes RDMA WRITE gather lists of `src`/`dst` (`", $c, "` indices) for every layer of `layout`.")]
        ///
        /// One work request per contiguous destination range, gathering at most `max_sge`
        /// source segments; `first_sge` indexes this call's `sges`. Resumes like the
        /// descriptor function; stops before a request that does not fit whole.
        /// `*written` is defined after every call, as for the descriptor function.
        ///
        /// # Safety
        ///
        /// As for the descriptor function; `requests` and `sges` are writable for their
        /// lengths.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $gather(
            src: *const $t,
            src_len: usize,
            dst: *const $t,
            dst_len: usize,
            options: *const corun_options,
            layout: *const corun_layout,
            max_sge: usize,
            scratch: *mut corun_span,
            scratch_cap: usize,
            cursor: *mut corun_cursor,
            requests: *mut corun_work_request,
            requests_cap: usize,
            sges: *mut corun_sge,
            sges_cap: usize,
            written: *mut corun_written,
        ) -> corun_status {
            status(gather(
                src, src_len, dst, dst_len, options, layout, max_sge, scratch, scratch_cap,
                cursor, requests, requests_cap, sges, sges_cap, written,
            ))
        }
    };
}

typed!(
    u32,
    "uint32_t",
    corun_count_runs_u32,
    corun_group_u32,
    corun_descriptors_u32,
    corun_gather_u32,
    corun_sort_by_destination_u32,
    corun_place_u32
);
typed!(
    u64,
    "uint64_t",
    corun_count_runs_u64,
    corun_group_u64,
    corun_descriptors_u64,
    corun_gather_u64,
    corun_sort_by_destination_u64,
    corun_place_u64
);
typed!(
    i32,
    "int32_t",
    corun_count_runs_i32,
    corun_group_i32,
    corun_descriptors_i32,
    corun_gather_i32,
    corun_sort_by_destination_i32,
    corun_place_i32
);
typed!(
    i64,
    "int64_t",
    corun_count_runs_i64,
    corun_group_i64,
    corun_descriptors_i64,
    corun_gather_i64,
    corun_sort_by_destination_i64,
    corun_place_i64
);
