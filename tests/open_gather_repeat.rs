//! Open, found at the end of session 4 while chasing the `src/desc/gather.rs:160` mutants:
//! the same `Plan::gather_into` call, repeated through a closure, returned two requests
//! the first time and none afterwards on x86_64 (debug and release builds), while the same
//! calls written out in a loop agree every time. It passes under Miri (no undefined
//! behaviour seen), with the workspace at opt-level 0, and with nightly at opt-level 1;
//! it fails with stable rustc 1.95 at opt-level 1 and 3: most likely a miscompilation.
//! Not yet reduced; ignored so that CI stays green, run with
//! `cargo test --all-features --test open_gather_repeat -- --ignored`.
#![cfg(feature = "alloc")]

use corun::desc::{Cursor, Layer, Layout, Plan, Sge, WorkRequest};
use corun::{Grouper, Span};

#[test]
#[ignore = "open: a repeated gather_into call returned nothing (see the module docs)"]
fn the_same_gather_call_gives_the_same_answer() {
    let src = [10u32, 11, 12, 40, 41, 7, 8, 9, 50];
    let dst = [0u32, 1, 2, 3, 4, 5, 6, 7, 8];
    let mut buf = [Span::default(); 8];
    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut buf).unwrap();
    let layers: Vec<Layer> =
        (0..2u64).map(|b| Layer::new(b << 32, (1 << 48) + (b << 32), 4096)).collect();
    let layout = Layout::new(&layers);
    let next = Cursor { layer: 0, span: 1, offset: 0 };
    let gather = |c| {
        let (mut r, mut s) = ([WorkRequest::default(); 64], [Sge::default(); 64]);
        let w = plan.gather_into(&layout, 4, c, &mut r, &mut s).unwrap();
        (w, r, s)
    };
    let first = gather(next);
    for _ in 0..3 {
        assert_eq!(gather(next), first);
    }
    assert_eq!(first.0.requests, 2);
}
