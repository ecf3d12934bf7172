//! Calls through closures must not change the caller's values.
//!
//! rustc 1.95 and earlier can hand a closure's by-value argument on in the caller's own
//! memory (rust-lang/rust#155241). When a writer mutated its `Cursor` argument, the
//! closure below changed `start` itself: the first call wrote two work requests, every
//! repeat resumed at the end and wrote none. The writers now never write to an
//! argument; these tests call every public function that takes a struct by value
//! (passed by pointer on x86_64 and aarch64) through a closure, repeatedly.
use core::num::{NonZeroU64, NonZeroUsize};

use corun::desc::{Cursor, Descriptor, Layer, Layout, Order, Plan, Sge, WorkRequest};
use corun::{Grouper, Span};

const SRC: [u32; 9] = [10, 11, 12, 40, 41, 7, 8, 9, 50];
const DST: [u32; 9] = [0, 1, 2, 3, 4, 5, 6, 7, 8];

/// `$f($x)` gives the same answer every time, and `$x` is what it was. A macro, not a
/// function: the miscompilation needs the closure called where `$x` lives.
macro_rules! same_every_time {
    ($x:expr, |$c:ident| $body:expr) => {{
        let x = $x;
        let f = typed(&x, |$c| $body);
        let (before, first) = (x, f(x));
        for _ in 0..3 {
            assert_eq!(f(x), first);
            assert_eq!(x, before);
        }
        first
    }};
}

/// `f`, its argument's type taken from `x`.
fn typed<X, Y>(_: &X, f: impl Fn(X) -> Y) -> impl Fn(X) -> Y {
    f
}

fn layers() -> Vec<Layer> {
    (0..2u64).map(|b| Layer::new(b << 32, (1 << 48) + (b << 32), 4096)).collect()
}

#[test]
fn writers_leave_the_cursor_alone() {
    let mut buf = [Span::default(); 8];
    let plan = Plan::new(&Grouper::new(), &SRC, &DST, &mut buf).unwrap();
    let layers = layers();
    let capped = Layout::new(&layers).max_bytes(NonZeroU64::new(8192).unwrap());
    for layout in [Layout::new(&layers), capped, capped.order(Order::RunMajor)] {
        for start in [Cursor::default(), Cursor { layer: 0, span: 1, offset: 0 }] {
            let gathered = same_every_time!(start, |c| {
                let (mut r, mut s) = ([WorkRequest::default(); 64], [Sge::default(); 64]);
                let w = plan.gather_into(&layout, 4, c, &mut r, &mut s).unwrap();
                (w, r, s)
            });
            assert!(gathered.0.requests > 0);
            #[cfg(feature = "heapless")]
            same_every_time!(start, |c| {
                let (mut r, mut s) = (heapless::Vec::<_, 64>::new(), heapless::Vec::<_, 64>::new());
                (plan.gather_into_heapless(&layout, 4, c, &mut r, &mut s).unwrap(), r, s)
            });
            let written = same_every_time!(start, |c| {
                let mut out = [Descriptor::default(); 64];
                (plan.descriptors_into(&layout, c, &mut out).unwrap(), out)
            });
            assert!(written.0.descriptors > 0);
            same_every_time!(start, |c| {
                let (mut s, mut d, mut n) = ([0u64; 64], [0u64; 64], [0u64; 64]);
                (
                    plan.descriptors_into_columns(&layout, c, &mut s, &mut d, &mut n).unwrap(),
                    s,
                    d,
                    n,
                )
            });
            #[cfg(feature = "heapless")]
            same_every_time!(start, |c| {
                let mut out = heapless::Vec::<_, 64>::new();
                (plan.descriptors_into_heapless(&layout, c, &mut out).unwrap(), out)
            });
        }
    }
}

#[test]
fn builders_leave_their_receiver_alone() {
    let two = NonZeroUsize::new(2).unwrap();
    same_every_time!(Grouper::new(), |g| g.steps(2, 3));
    same_every_time!(Grouper::new(), |g| g.max_len(two));
    same_every_time!(Layer::new(1, 2, 3), |l| l.strides(6, 9));
    let layers = layers();
    same_every_time!(Layout::new(&layers), |l| l.order(Order::RunMajor));
    same_every_time!(Layout::new(&layers), |l| l.max_bytes(NonZeroU64::MIN));
}
