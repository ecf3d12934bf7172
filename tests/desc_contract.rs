//! The contract of `corun::desc`, case by case: orders, caps, strides, the exact limits
//! of checked arithmetic, errors that name the layer and position, exact resumption.
//! No feature needed: lists come through the slice forms (`kit::desc::descriptors_of`,
//! `descriptors_for`, `gather_of`), which check the `Vec` forms (feature `alloc`) where
//! those are compiled.

mod kit;

use core::num::NonZeroU64;

use corun::desc::{
    Cursor, Descriptor, Error, Layer, Layout, Order, Plan, Sge, WorkRequest, Written,
};
use corun::{Grouper, Span};
use kit::desc::{descriptors_for, descriptors_of, gather_of};

const PAGE: u64 = 4096;
const SENTINEL: Descriptor = Descriptor { src_addr: 7, dst_addr: 7, len: 7 };

fn spans(n: usize) -> Vec<Span> {
    vec![Span::default(); n]
}

fn cap(bytes: u64) -> NonZeroU64 {
    NonZeroU64::new(bytes).unwrap()
}

/// 64 model layers x (K, V), the shape the benches and the README use.
fn kv_layers() -> Vec<Layer> {
    (0..128u64).map(|b| Layer::new(b << 32, (1 << 48) + (b << 32), PAGE)).collect()
}

#[test]
fn layer_major_and_run_major_orders() {
    let src = [10u32, 11, 12, 40];
    let dst = [0u32, 1, 2, 3];
    let layers = [Layer::new(0, 1 << 40, PAGE), Layer::new(1 << 30, 1 << 41, 2 * PAGE)];
    let mut buf = spans(4);
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    let d = |l: usize, s: u64, d: u64, pages: u64| {
        let l = layers[l];
        Descriptor {
            src_addr: l.src_base + s * l.item_len,
            dst_addr: l.dst_base + d * l.item_len,
            len: pages * l.item_len,
        }
    };
    let layer_major = [d(0, 10, 0, 3), d(0, 40, 3, 1), d(1, 10, 0, 3), d(1, 40, 3, 1)];
    let run_major = [d(0, 10, 0, 3), d(1, 10, 0, 3), d(0, 40, 3, 1), d(1, 40, 3, 1)];
    assert_eq!(descriptors_of(&plan, &Layout::new(&layers)).unwrap(), layer_major);
    let layout = Layout::new(&layers).order(Order::RunMajor);
    assert_eq!(descriptors_of(&plan, &layout).unwrap(), run_major);
}

#[test]
fn runs_are_found_once_for_all_kv_layers() {
    // Three runs; 128 layer buffers: 384 descriptors instead of 128 x 9 page copies.
    let src: Vec<u64> = [100, 101, 102, 103, 7, 8, 50, 51, 52].into();
    let dst: Vec<u64> = (0..9).collect();
    let layers = kv_layers();
    let layout = Layout::new(&layers);
    let mut buf = spans(16);
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    assert_eq!(plan.spans().len(), 3);
    assert_eq!(plan.count_descriptors(&layout), Ok(384));
    let all = descriptors_of(&plan, &layout).unwrap();
    assert_eq!(all.len(), 384);
    assert_eq!(
        all[3],
        Descriptor {
            src_addr: (1 << 32) + 100 * PAGE,
            dst_addr: (1 << 48) + (1 << 32),
            len: 4 * PAGE
        }
    );
    assert_eq!(descriptors_for(&Grouper::new(), &src, &dst, &layout).unwrap(), all);
}

#[test]
fn byte_cap_cuts_runs_into_whole_pages() {
    let src: Vec<u32> = (0..10).collect();
    let layers = [Layer::new(0, 0, PAGE)];
    // 3 pages and 100 bytes: pieces of 3 pages, the last one shorter.
    let layout = Layout::new(&layers).max_bytes(cap(3 * PAGE + 100));
    let got = descriptors_for(&Grouper::new(), &src, &src, &layout).unwrap();
    let lens: Vec<u64> = got.iter().map(|d| d.len / PAGE).collect();
    assert_eq!(lens, [3, 3, 3, 1]);
    assert_eq!(got[1].src_addr, 3 * PAGE);
    let below = Layout::new(&layers).max_bytes(cap(PAGE - 1));
    let got = descriptors_for(&Grouper::new(), &src, &src, &below);
    assert_eq!(got, Err(Error::CapBelowItem { layer: 0 }));
}

#[test]
fn unpacked_pages_get_a_descriptor_each() {
    // K and V interleaved in one buffer per side: page i of K at 2 * i * PAGE.
    let src: Vec<u32> = (0..4).collect();
    let layers = [Layer::new(0, 0, PAGE).strides(2 * PAGE, PAGE)];
    let got = descriptors_for(&Grouper::new(), &src, &src, &Layout::new(&layers)).unwrap();
    let want: Vec<Descriptor> = (0..4)
        .map(|i| Descriptor { src_addr: 2 * i * PAGE, dst_addr: i * PAGE, len: PAGE })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn strided_grouping_with_matching_strides_is_packed() {
    // Token indices, 16 tokens per 4 KiB page: indices step by 16, a token is 256 bytes.
    let src = [0u32, 16, 32, 160];
    let dst = [320u32, 336, 352, 368];
    let grouper = Grouper::new().steps(16, 16);
    let layers = [Layer::new(0, 1 << 40, PAGE).strides(PAGE / 16, PAGE / 16)];
    let got = descriptors_for(&grouper, &src, &dst, &Layout::new(&layers)).unwrap();
    assert_eq!(
        got,
        [
            Descriptor { src_addr: 0, dst_addr: (1 << 40) + 20 * PAGE, len: 3 * PAGE },
            Descriptor { src_addr: 10 * PAGE, dst_addr: (1 << 40) + 23 * PAGE, len: PAGE },
        ]
    );
}

#[test]
fn the_last_byte_of_the_address_space_is_usable_and_one_more_is_an_error() {
    // Pages 0..4 of a layer whose page 3 ends exactly at 2^64.
    let src: Vec<u64> = (0..4).collect();
    let top = u64::MAX - 4 * PAGE + 1;
    let fits = [Layer::new(top, 0, PAGE)];
    let got = descriptors_for(&Grouper::new(), &src, &src, &Layout::new(&fits)).unwrap();
    assert_eq!(got, [Descriptor { src_addr: top, dst_addr: 0, len: 4 * PAGE }]);

    let layers = [Layer::new(0, 0, PAGE), Layer::new(top + 1, 0, PAGE)];
    let mut buf = spans(4);
    let plan = Plan::new(&Grouper::new(), &src, &src, &mut buf).unwrap();
    let mut out = [SENTINEL; 4];
    let got = plan.descriptors_into(&Layout::new(&layers), Cursor::default(), &mut out);
    assert_eq!(got, Err(Error::Overflow { layer: 1, position: 0, written: 1 }));
    assert_eq!(out[0], Descriptor { src_addr: 0, dst_addr: 0, len: 4 * PAGE });
    assert_eq!(out[1..], [SENTINEL; 3], "nothing after the valid prefix is written");
}

#[test]
fn a_negative_index_is_an_error_naming_its_position() {
    let src = [5i32, 6, -3, 9];
    let dst = [0i32, 1, 2, 3];
    let layers = [Layer::new(0, 0, PAGE)];
    let mut buf = spans(4);
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    let mut out = [SENTINEL; 4];
    let got = plan.descriptors_into(&Layout::new(&layers), Cursor::default(), &mut out);
    assert_eq!(got, Err(Error::NegativeIndex { layer: 0, position: 2, written: 1 }));
    assert_eq!(out[1..], [SENTINEL; 3]);
}

#[test]
fn layout_errors_come_before_any_output() {
    let src = [1u32, 2];
    let layers = [Layer::new(0, 0, PAGE), Layer::new(0, 0, 0)];
    let mut buf = spans(2);
    let plan = Plan::new(&Grouper::new(), &src, &src, &mut buf).unwrap();
    let mut out = [SENTINEL; 4];
    let got = plan.descriptors_into(&Layout::new(&layers), Cursor::default(), &mut out);
    assert_eq!(got, Err(Error::ZeroItemLen { layer: 1 }));
    assert_eq!(out, [SENTINEL; 4]);
    assert_eq!(plan.count_descriptors(&Layout::new(&layers)), Err(Error::ZeroItemLen { layer: 1 }));
}

#[test]
fn a_full_buffer_resumes_exactly() {
    let src: Vec<u32> = [1, 2, 3, 9, 10, 20, 30, 31].into();
    let dst: Vec<u32> = (0..8).collect();
    let layers = kv_layers();
    for order in [Order::LayerMajor, Order::RunMajor] {
        let layout = Layout::new(&layers[..5]).order(order).max_bytes(cap(2 * PAGE));
        let mut buf = spans(8);
        let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
        let want = descriptors_of(&plan, &layout).unwrap();
        for size in 1..5 {
            let (mut got, mut next) = (Vec::new(), Some(Cursor::default()));
            while let Some(c) = next {
                let mut out = vec![SENTINEL; size];
                let w = plan.descriptors_into(&layout, c, &mut out).unwrap();
                got.extend_from_slice(&out[..w.descriptors]);
                next = w.next;
            }
            assert_eq!(got, want, "{order:?}, buffers of {size}");
        }
    }
}

#[test]
fn a_small_span_buffer_plans_a_prefix() {
    let src = [1u32, 2, 5, 6, 9];
    let mut buf = spans(2);
    let plan = Plan::new(&Grouper::new(), &src, &src, &mut buf).unwrap();
    assert_eq!(plan.consumed(), 4);
    assert_eq!(plan.spans(), [Span { start: 0, len: 2 }, Span { start: 2, len: 2 }]);
}

#[test]
fn length_mismatch_names_both_lengths() {
    let mut buf = spans(2);
    let got = Plan::new(&Grouper::new(), &[1u32, 2], &[1u32], &mut buf).err();
    assert_eq!(got, Some(Error::LengthMismatch { src: 2, dst: 1 }));
    let layers = [Layer::new(0, 0, 1)];
    let got = descriptors_for(&Grouper::new(), &[1u32], &[], &Layout::new(&layers));
    assert_eq!(got, Err(Error::LengthMismatch { src: 1, dst: 0 }));
}

#[test]
fn any_cursor_is_safe() {
    let src = [1u32, 2, 5];
    let layers = [Layer::new(0, 0, 1); 2];
    let mut buf = spans(3);
    let plan = Plan::new(&Grouper::new(), &src, &src, &mut buf).unwrap();
    let mut out = [SENTINEL; 8];
    for c in [
        Cursor { layer: usize::MAX, span: usize::MAX, offset: usize::MAX },
        Cursor { layer: 0, span: 0, offset: usize::MAX },
        Cursor { layer: 1, span: 7, offset: 0 },
    ] {
        for order in [Order::LayerMajor, Order::RunMajor] {
            let layout = Layout::new(&layers).order(order);
            assert!(plan.descriptors_into(&layout, c, &mut out).is_ok());
            let (mut r, mut s) = ([WorkRequest::default(); 2], [Sge::default(); 2]);
            assert!(plan.gather_into(&layout, 2, c, &mut r, &mut s).is_ok());
        }
    }
}

#[test]
fn gather_lists_one_request_per_destination_run() {
    // A fragmented source pool (runs of 1-2 pages) into one fresh destination range.
    let src = [40u32, 41, 7, 90, 91, 3, 12, 13];
    let dst: Vec<u32> = (200..208).collect();
    let layers = [Layer::new(0, 1 << 40, PAGE)];
    let layout = Layout::new(&layers);
    let mut buf = spans(8);
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    assert_eq!(plan.spans().len(), 5);
    let (reqs, sges) = gather_of(&plan, &layout, 30).unwrap();
    assert_eq!(
        reqs,
        [WorkRequest {
            dst_addr: (1 << 40) + 200 * PAGE,
            len: 8 * PAGE,
            first_sge: 0,
            sge_count: 5
        }]
    );
    assert_eq!(sges[0], Sge { addr: 40 * PAGE, len: 2 * PAGE });
    assert_eq!(sges[4], Sge { addr: 12 * PAGE, len: 2 * PAGE });

    // max_sge 2: requests of at most 2 segments.
    let (reqs, _) = gather_of(&plan, &layout, 2).unwrap();
    let counts: Vec<usize> = reqs.iter().map(|r| r.sge_count).collect();
    assert_eq!(counts, [2, 2, 1]);
    // A byte cap of 3 pages cuts a request (and its segment) at whole pages.
    let capped = layout.max_bytes(cap(3 * PAGE));
    let (reqs, _) = gather_of(&plan, &capped, 30).unwrap();
    let lens: Vec<u64> = reqs.iter().map(|r| r.len / PAGE).collect();
    assert_eq!(lens, [3, 3, 2]);
    assert_eq!(gather_of(&plan, &layout, 0), Err(Error::ZeroMaxSge));
}

#[test]
fn gather_stops_before_a_request_that_does_not_fit_whole() {
    let src = [40u32, 7, 90, 3];
    let dst = [0u32, 1, 2, 3];
    let layers = [Layer::new(0, 0, PAGE)];
    let mut buf = spans(4);
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    let (mut reqs, mut sges) = ([WorkRequest::default(); 4], [Sge::default(); 3]);
    let w = plan.gather_into(&Layout::new(&layers), 4, Cursor::default(), &mut reqs, &mut sges);
    // The one request needs 4 segments; 3 slots: nothing written, resume at the start.
    let none = Written { descriptors: 0, next: Some(Cursor::default()) };
    assert_eq!(w.map(|w| (w.requests, w.sges, w.next)), Ok((0, 0, none.next)));
}

#[test]
fn no_descriptor_is_longer_than_a_u64_can_say() {
    // Two pages of 2^63 bytes from address 0, ending exactly at 2^64: one run, but its
    // 2^64 bytes do not fit a u64 length, so it comes out as two descriptors.
    let src = [0u64, 1];
    let layers = [Layer::new(0, 0, 1 << 63)];
    let got = descriptors_for(&Grouper::new(), &src, &src, &Layout::new(&layers)).unwrap();
    let half = 1 << 63;
    assert_eq!(
        got,
        [
            Descriptor { src_addr: 0, dst_addr: 0, len: half },
            Descriptor { src_addr: half, dst_addr: half, len: half }
        ]
    );
}

#[test]
fn every_error_says_what_and_where() {
    use corun::desc::Error;
    let cases = [
        (
            Error::LengthMismatch { src: 3, dst: 2 },
            "src and dst must have equal lengths, got 3 and 2",
        ),
        (Error::ZeroItemLen { layer: 4 }, "layer 4 has an item length of 0"),
        (Error::CapBelowItem { layer: 1 }, "the byte cap is smaller than one item of layer 1"),
        (Error::ZeroMaxSge, "max_sge must be at least 1"),
        (
            Error::NegativeIndex { layer: 2, position: 9, written: 5 },
            "negative index at position 9 (layer 2; 5 written before it)",
        ),
        (
            Error::Overflow { layer: 0, position: 1, written: 0 },
            "address overflows u64 at position 1 (layer 0; 0 written before it)",
        ),
        (Error::Alloc { items: 7 }, "could not allocate room for 7 outputs"),
    ];
    for (err, text) in cases {
        assert_eq!(err.to_string(), text);
        let _: &dyn core::error::Error = &err;
    }
}

/// A cursor at or past the end of its run resumes at the start of the next run, and one
/// past the last run at the next layer (the descriptor and gather writers).
#[test]
fn a_cursor_past_its_run_resumes_at_the_next() {
    let src = [10u32, 11, 12, 40, 41, 7, 8, 9, 50];
    let dst = [0u32, 1, 2, 3, 4, 5, 6, 7, 8];
    let mut buf = [Span::default(); 8];
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    let n = plan.spans().len();
    let at = |layer, span, offset| Cursor { layer, span, offset };
    let same = [
        (at(0, 0, 3), at(0, 1, 0)),  // run 0 has 3 pages
        (at(0, 0, 99), at(0, 1, 0)), // far past it
        (at(1, 2, 3), at(1, 3, 0)),
        (at(0, n, 0), at(1, 0, 0)), // past the last run of layer 0
    ];
    // Two layers (room for everything) and all 128 (buffers fill up).
    let all = kv_layers();
    for layers in [&all[..2], &all[..]] {
        let layout = Layout::new(layers);
        for (past, next) in same {
            let descs = |c| {
                let mut out = [SENTINEL; 64];
                let w = plan.descriptors_into(&layout, c, &mut out).unwrap();
                (w, out)
            };
            assert_eq!(descs(past), descs(next), "descriptors from {past:?}");
            let gather = |c| {
                let (mut r, mut s) = ([WorkRequest::default(); 64], [Sge::default(); 64]);
                let w = plan.gather_into(&layout, 4, c, &mut r, &mut s).unwrap();
                (w, r, s)
            };
            assert_eq!(gather(past), gather(next), "gather from {past:?}");
        }
    }
}

/// Gather lists may end exactly at 2^64 on either side (a segment's source, a request's
/// destination); one byte more is an error.
#[test]
fn gather_may_use_the_last_byte_of_the_address_space() {
    let src: Vec<u64> = (0..4).collect();
    let top = u64::MAX - 4 * PAGE + 1;
    let mut buf = spans(4);
    let plan = Plan::new(&Grouper::new(), &src, &src, &mut buf).unwrap();
    for layer in [Layer::new(top, 0, PAGE), Layer::new(0, top, PAGE)] {
        let (reqs, sges) = gather_of(&plan, &Layout::new(&[layer]), 4).unwrap();
        assert_eq!(
            reqs,
            [WorkRequest { dst_addr: layer.dst_base, len: 4 * PAGE, first_sge: 0, sge_count: 1 }]
        );
        assert_eq!(sges, [Sge { addr: layer.src_base, len: 4 * PAGE }]);
    }
    for layer in [Layer::new(top + 1, 0, PAGE), Layer::new(0, top + 1, PAGE)] {
        assert!(matches!(gather_of(&plan, &Layout::new(&[layer]), 4), Err(Error::Overflow { .. })));
    }
}

#[test]
fn gather_over_a_descending_destination_range() {
    // vLLM's recycled blocks: the destination descends by one throughout, the source only
    // in part. One remote range (pages 4..=9), filled from page 4 up.
    let src = [99u32, 98, 97, 50, 20, 21];
    let dst = [9u32, 8, 7, 6, 5, 4];
    let layers = [Layer::new(0, 1 << 40, 4096)];
    let grouper = Grouper::new().direction(corun::Direction::Either);
    let mut buf = spans(6);
    let plan = Plan::new(&grouper, &src, &dst, &mut buf).unwrap();
    let (reqs, sges) = gather_of(&plan, &Layout::new(&layers), 30).unwrap();
    let page = |p: u64| p * 4096;
    assert_eq!(
        reqs,
        [WorkRequest { dst_addr: (1 << 40) + page(4), len: page(6), first_sge: 0, sge_count: 4 }]
    );
    assert_eq!(
        sges,
        [
            Sge { addr: page(21), len: page(1) },
            Sge { addr: page(20), len: page(1) },
            Sge { addr: page(50), len: page(1) },
            Sge { addr: page(97), len: page(3) },
        ]
    );
    // Ascending only: one request per page but the first three (one segment each).
    let mut buf = spans(6);
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    assert_eq!(gather_of(&plan, &Layout::new(&layers), 30).unwrap().0.len(), 6);
    // At most 2 segments per request: pages 9, 8, 7, 6 (two segments), then 5, 4.
    let mut buf = spans(6);
    let plan = Plan::new(&grouper, &src, &dst, &mut buf).unwrap();
    let (reqs, sges) = gather_of(&plan, &Layout::new(&layers), 2).unwrap();
    assert_eq!(
        reqs.iter().map(|r| (r.dst_addr - (1 << 40), r.len)).collect::<Vec<_>>(),
        [(page(6), page(4)), (page(4), page(2))]
    );
    assert_eq!(sges[0], Sge { addr: page(50), len: page(1) });
}
