//! Proof that corun is `no_std` and that no panic path survives optimisation.
//!
//! Built in release (`cargo build --release`, x86_64 Linux, `-nostartfiles`), this program
//! calls every public entry point on inputs the optimiser cannot see (`black_box`) and
//! checks the results; its exit code is 0 or the number of the first failed check.
//! The panic handler calls a symbol that exists nowhere, so if any panic path in the
//! code called here is still reachable after optimisation, **the link fails**.
#![no_std]
#![no_main]

use core::hint::black_box;
use core::num::NonZeroUsize;

use corun::{Grouper, Index, Progress, Span, scalar};

/// The C ABI's source, compiled into this program (as a dependency, its staticlib would
/// need a panic handler of its own): its checks and wrappers must leave no panic path
/// either.
#[path = "../../capi/src/lib.rs"]
#[allow(unused_attributes, dead_code)]
mod corun_c;

unsafe extern "C" {
    /// Defined nowhere: referencing it fails the link.
    fn corun_panic_path_is_reachable() -> !;
    /// libc's `_exit`: a bare system call, fine without libc's start-up code.
    fn _exit(code: i32) -> !;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: never called at run time; the reference exists to break the link.
    unsafe { corun_panic_path_is_reachable() }
}

/// The process entry point: align the stack as a `call` would, then run the checks.
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    core::arch::naked_asm!("xor ebp, ebp", "and rsp, -16", "call {main}", "ud2", main = sym main);
}

extern "C" fn main() -> ! {
    let code = run();
    // SAFETY: `_exit` takes any status and does not return.
    unsafe { _exit(code) }
}

/// Each check's number, returned on the first failure.
fn run() -> i32 {
    let mut check = 0;
    let mut ok = |good: bool| {
        check += 1;
        good.then_some(()).ok_or(check)
    };
    match all::<u32>(&mut ok)
        .and_then(|()| all::<i32>(&mut ok))
        .and_then(|()| all::<u64>(&mut ok))
        .and_then(|()| all::<i64>(&mut ok))
        .and_then(|()| c_abi(&mut ok))
    {
        Ok(()) => 0,
        Err(n) => n,
    }
}

/// Arrays long enough for the SIMD blocks (3 x 64 + tail), with runs of 1, 70, 1 and 128.
fn input<T: Index + From<u8>>() -> ([T; 200], [T; 200]) {
    let mut src = [T::MIN; 200];
    let mut dst = [T::MIN; 200];
    let mut s = T::from(7u8);
    let mut d = T::MAX; // dst climbs from MAX: a wrap-around break at position 1
    for i in 0..200 {
        let jump = i == 71 || i == 72;
        if i > 0 {
            s = if jump { T::from(3u8) } else { s.checked_succ().unwrap_or(T::MIN) };
            d = d.checked_succ().unwrap_or(T::MIN);
        }
        src[i] = s;
        dst[i] = d;
    }
    (src, dst)
}

fn all<T: Index + From<u8>>(ok: &mut impl FnMut(bool) -> Result<(), i32>) -> Result<(), i32> {
    let (src, dst) = input::<T>();
    let (src, dst): (&[T], &[T]) = (black_box(&src), black_box(&dst));
    // position 0 alone (MAX -> MIN on dst), then 1..71, 71 (src jumps to 3), and
    // 72..200 (src jumps to 3 again, then climbs)
    let want = [
        Span { start: 0, len: 1 },
        Span { start: 1, len: 70 },
        Span { start: 71, len: 1 },
        Span { start: 72, len: 128 },
    ];

    ok(corun::count_runs(src, dst) == Ok(4))?;
    ok(scalar::count_runs(src, dst) == Ok(4))?;

    let mut out = [Span::default(); 8];
    let done = |spans| Ok(Progress { consumed: 200, spans });
    ok(corun::group_into(src, dst, buf(&mut out, 8)) == done(4))?;
    ok(out[..4] == want)?;
    ok(scalar::group_into(src, dst, buf(&mut out, 8)) == done(4))?;

    // Resume with room for two spans at a time.
    let (mut pos, mut got) = (0, 0);
    while let (Some(s), Some(d)) = (src.get(pos..), dst.get(pos..)) {
        if s.is_empty() {
            break;
        }
        let Ok(p) = corun::group_into(s, d, buf(&mut out, 2)) else { return ok(false) };
        for span in out.get(..p.spans).unwrap_or_default() {
            ok(Some(&Span { start: span.start + pos, len: span.len }) == want.get(got))?;
            got += 1;
        }
        pos += p.consumed;
    }
    ok(got == 4)?;

    let Ok(runs) = corun::runs(src, dst) else { return ok(false) };
    ok(runs.zip(want).all(|(a, b)| a == b))?;
    let Ok(runs) = scalar::runs(src, dst) else { return ok(false) };
    ok(runs.eq(want))?;

    let cap = Grouper::new().max_len(black_box(NonZeroUsize::new(50).unwrap_or(NonZeroUsize::MIN)));
    ok(cap.count_runs(src, dst) == Ok(7))?; // 1 + (50 + 20) + 1 + (50 + 50 + 28)
    let mut hv = heapless::Vec::<Span, 3>::new();
    ok(cap.group_into_heapless(src, dst, &mut hv) == Ok(Progress { consumed: 71, spans: 3 }))?;
    let mut hv = heapless::Vec::<Span, 8>::new();
    ok(corun::group_into_heapless(src, dst, &mut hv) == done(4))?;
    ok(cap.group_into(src, dst, buf(&mut out, 8)) == done(7))?;
    ok(scalar::count_runs_with(&cap, src, dst) == Ok(7))?;

    // Errors are values too.
    let short = dst.get(..black_box(199)).unwrap_or_default();
    let err = Err(corun::Error::LengthMismatch { src: 200, dst: 199 });
    ok(corun::count_runs(src, short) == err)?;
    ok(corun::group_into(src, short, &mut out) == err.map(|_| Progress::default()))?;
    ok(corun::runs(src, short).is_err())?;

    // Strided grouping: every other index, so every pair breaks.
    let strided = Grouper::new().steps(black_box(2), black_box(2));
    ok(strided.count_runs(src, dst) == Ok(200))?;

    // Placement: the first side's 4 runs (as dst, which has 3 when read alone: its wrap
    // ends a run) into a free list that is src reversed (one descending stretch of 128
    // first), and order-free sorting.
    // Placement: src repeats pages 3.. (its jump back at 71), which placement rejects,
    // naming the smallest one's first two positions; dst (distinct, wrapping at MAX) is
    // placed into a free list of dst reversed (one descending stretch).
    let (mut chosen, mut rest, mut scratch) = ([T::MIN; 100], [T::MIN; 100], [0; 1000]);
    let mut free = [T::MIN; 200];
    for (f, &s) in free.iter_mut().zip(src.iter().rev()) {
        *f = s;
    }
    let first = src.get(..black_box(100)).unwrap_or_default();
    let placed =
        corun::place(first, &free, corun::Direction::Either, &mut chosen, &mut rest, &mut scratch);
    let twice = corun::Error::DuplicatePage { list: "first", first: 71, second: 72 };
    ok(placed == Err(twice))?;
    for (f, &d) in free.iter_mut().zip(dst.iter().rev()) {
        *f = d;
    }
    let first = dst.get(..black_box(100)).unwrap_or_default();
    let placed =
        corun::place(first, &free, corun::Direction::Either, &mut chosen, &mut rest, &mut scratch);
    ok(placed.is_ok_and(|p| p.bound == 2 && p.placed <= p.own))?;
    let (mut s2, mut d2) = ([T::MIN; 200], [T::MIN; 200]);
    ok(corun::sort_by_destination(src, dst, &mut s2, &mut d2).is_ok())?;

    descriptors(src, dst, ok)
}

/// Every descriptor and gather form, with layouts and cursors hidden from the optimiser.
fn descriptors<T: Index>(
    src: &[T],
    dst: &[T],
    ok: &mut impl FnMut(bool) -> Result<(), i32>,
) -> Result<(), i32> {
    use corun::desc::{Cursor, Descriptor, Error, Layer, Layout, Order, Plan, Sge, WorkRequest};
    let mut spans = [Span::default(); 8];
    let Ok(plan) = Plan::new(&Grouper::new(), src, dst, &mut spans) else { return ok(false) };
    let layers = black_box([Layer::new(0, 1 << 40, 4096), Layer::new(1 << 30, 1 << 41, 4096)]);
    let cap =
        core::num::NonZeroU64::new(black_box(64 * 4096)).unwrap_or(core::num::NonZeroU64::MIN);
    let layout = Layout::new(&layers).max_bytes(cap);
    // Runs of 1, 70, 1, 128 pages, cut at 64: 1 + 2 + 1 + 2 pieces per layer.
    ok(plan.count_descriptors(&layout) == Ok(12))?;
    let mut out = [Descriptor::default(); 16];
    let start = black_box(Cursor::default());
    // dst starts at MAX: fine for 32-bit indices, past 2^64 bytes for 64-bit ones; then
    // dst wraps to MIN, a negative index for signed types.
    let (signed, wide) = (T::MIN < T::default(), core::mem::size_of::<T>() == 8);
    let fails = signed || wide;
    let want = if wide {
        Err(Error::Overflow { layer: 0, position: 0, written: 0 })
    } else if signed {
        Err(Error::NegativeIndex { layer: 0, position: 1, written: 1 })
    } else {
        Ok(12)
    };
    let got = plan.descriptors_into(&layout, start, &mut out).map(|w| w.descriptors);
    ok(got == want)?;
    let run_major = layout.order(Order::RunMajor);
    let mut hv = heapless::Vec::<Descriptor, 5>::new();
    let r = plan.descriptors_into_heapless(&run_major, start, &mut hv);
    ok(r.is_err() || hv.len() == 5)?;
    let (mut reqs, mut sges) = ([WorkRequest::default(); 4], [Sge::default(); 8]);
    let r = plan.gather_into(&layout, black_box(4), start, &mut reqs, &mut sges);
    ok(r.is_ok() != fails)?;
    let (mut reqs, mut sges) =
        (heapless::Vec::<WorkRequest, 2>::new(), heapless::Vec::<Sge, 4>::new());
    let r = plan.gather_into_heapless(&layout, black_box(4), start, &mut reqs, &mut sges);
    ok(r.is_ok() != fails)
}

/// The first `n` slots of `out`, `n` hidden from the optimiser.
fn buf(out: &mut [Span], n: usize) -> &mut [Span] {
    let n = black_box(n).min(out.len());
    out.get_mut(..n).unwrap_or_default()
}

/// The C ABI, called as C would, with lengths and pointers hidden from the optimiser:
/// its checks and wrappers must leave no panic path either.
fn c_abi(ok: &mut impl FnMut(bool) -> Result<(), i32>) -> Result<(), i32> {
    use corun_c::*;
    let (src, dst) = input::<u32>();
    let (src, dst) = (black_box(&src), black_box(&dst));
    let len = black_box(200usize);
    let mut count = 0usize;
    let mut spans = [corun_span::default(); 8];
    let mut progress = corun_progress::default();
    let layers = black_box([corun_layer {
        src_base: 0,
        dst_base: 1 << 40,
        item_len: 4096,
        src_stride: 4096,
        dst_stride: 4096,
    }]);
    let layout =
        corun_layout { layers: layers.as_ptr(), n_layers: 1, max_bytes: 0, order: black_box(0) };
    let mut cursor = corun_cursor::default();
    let mut written = corun_written::default();
    let mut out = [corun_descriptor::default(); 8];
    let (mut reqs, mut sges) = ([corun_work_request::default(); 4], [corun_sge::default(); 8]);
    // SAFETY: every pointer covers the length passed with it, and nothing else uses them.
    unsafe {
        ok(corun_count_runs_u32(
            src.as_ptr(),
            len,
            dst.as_ptr(),
            len,
            core::ptr::null(),
            &mut count,
        ) == corun_status::CORUN_OK
            && count == 4)?;
        let st = corun_group_u32(
            src.as_ptr(),
            len,
            dst.as_ptr(),
            len,
            core::ptr::null(),
            spans.as_mut_ptr(),
            8,
            &mut progress,
        );
        ok(st == corun_status::CORUN_OK && progress.spans == 4)?;
        let st = corun_descriptors_u32(
            src.as_ptr(),
            len,
            dst.as_ptr(),
            len,
            core::ptr::null(),
            &layout,
            spans.as_mut_ptr(),
            8,
            &mut cursor,
            out.as_mut_ptr(),
            8,
            &mut written,
        );
        ok(st == corun_status::CORUN_OK && written.items == 4)?;
        cursor = corun_cursor::default();
        let st = corun_gather_u32(
            src.as_ptr(),
            len,
            dst.as_ptr(),
            len,
            core::ptr::null(),
            &layout,
            4,
            spans.as_mut_ptr(),
            8,
            &mut cursor,
            reqs.as_mut_ptr(),
            4,
            sges.as_mut_ptr(),
            8,
            &mut written,
        );
        ok(st == corun_status::CORUN_OK)?;
        let st = corun_group_u32(
            src.as_ptr(),
            len,
            dst.as_ptr(),
            black_box(199),
            core::ptr::null(),
            spans.as_mut_ptr(),
            8,
            &mut progress,
        );
        ok(st == corun_status::CORUN_ERR_LENGTH_MISMATCH)?;
        ok(!corun_strerror(black_box(3)).is_null())
    }
}
