//! Layouts built from fuzzer/proptest bytes, and the differential checks of every
//! descriptor and gather form against `corun::scalar::desc`.
//!
//! The reference needs corun's feature `alloc` (it returns `Vec`s). Without it the checks
//! hold every slice form, resumed, to the one-shot slice form ([`descriptors_of`],
//! [`gather_of`]), and gather lists still to the definition (every page of every layer
//! moved to its destination): the no-heap build's writers are tested, not skipped.

use core::num::NonZeroU64;

use arbitrary::{Arbitrary, Unstructured};
use corun::desc::{Cursor, Descriptor, Error, Layer, Layout, Order, Plan, Sge, WorkRequest};
#[cfg(any(feature = "alloc", fuzzing))]
use corun::scalar::desc as reference;
use corun::{Grouper, Span};

use super::check::grouped;

/// A base address: zero, low, near the top of the address space, or anywhere.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Base {
    Zero,
    Low(u32),
    NearTop(u32),
    Raw(u64),
}

/// A page size: a power of two (the common case), or odd, huge, zero.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Item {
    Pow2(u8),
    Small(u8),
    Huge(u16),
    Zero,
    Raw(u64),
}

/// A stride relative to the page size and the side's step.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Stride {
    Packed,
    /// `item_len / step`: packed under a strided grouping when it divides.
    PerStep,
    Double,
    Zero,
    Raw(u64),
}

#[derive(Clone, Copy, Debug, Arbitrary)]
pub struct LayerSpec {
    pub src_base: Base,
    pub dst_base: Base,
    pub item: Item,
    pub src_stride: Stride,
    pub dst_stride: Stride,
}

impl LayerSpec {
    /// A layer as serving stacks have them: low bases, power-of-two pages, packed.
    fn typical(u: &mut Unstructured<'_>) -> arbitrary::Result<Self> {
        Ok(LayerSpec {
            src_base: Base::Low(u.arbitrary()?),
            dst_base: Base::Low(u.arbitrary()?),
            item: Item::Pow2(u.int_in_range(0..=16)?),
            src_stride: Stride::PerStep,
            dst_stride: Stride::PerStep,
        })
    }
}

/// A cap relative to the first layer's page size.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Cap {
    Pages(u8),
    PagesPlus(u8, u8),
    Raw(u64),
}

/// Layers, order, cap and `max_sge`.
#[derive(Clone, Debug)]
pub struct LayoutSpec {
    pub layers: Vec<LayerSpec>,
    pub run_major: bool,
    pub cap: Option<Cap>,
    pub max_sge: u8,
}

impl<'a> Arbitrary<'a> for LayoutSpec {
    /// 1 to 6 layers, most of them typical (so that most inputs make descriptors), one
    /// in five anything at all (limits, odd strides, zero sizes).
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let n = u.int_in_range(1..=6)?;
        let mut layers = Vec::with_capacity(n);
        for _ in 0..n {
            layers.push(if u.ratio(1, 5)? { u.arbitrary()? } else { LayerSpec::typical(u)? });
        }
        let cap = if u.ratio(1, 2)? { Some(u.arbitrary()?) } else { None };
        Ok(LayoutSpec { layers, run_major: u.arbitrary()?, cap, max_sge: u.arbitrary()? })
    }
}

impl LayoutSpec {
    /// The layers (at most 6), for a grouping with these steps.
    pub fn layers(&self, steps: (u64, u64)) -> Vec<Layer> {
        let base = |b: Base| match b {
            Base::Zero => 0,
            Base::Low(x) => u64::from(x),
            Base::NearTop(x) => u64::MAX - u64::from(x),
            Base::Raw(x) => x,
        };
        let stride = |s: Stride, item: u64, step: u64| match s {
            Stride::Packed => item,
            Stride::PerStep if step != 0 && item.is_multiple_of(step) => item / step,
            Stride::PerStep => item,
            Stride::Double => item.saturating_mul(2),
            Stride::Zero => 0,
            Stride::Raw(x) => x,
        };
        let layers = &self.layers[..self.layers.len().min(6)];
        layers
            .iter()
            .map(|l| {
                let item = match l.item {
                    Item::Pow2(k) => 1u64 << (k % 24),
                    Item::Small(x) => u64::from(x) + 1,
                    Item::Huge(x) => u64::MAX / (u64::from(x) + 1),
                    Item::Zero => 0,
                    Item::Raw(x) => x,
                };
                Layer::new(base(l.src_base), base(l.dst_base), item).strides(
                    stride(l.src_stride, item, steps.0),
                    stride(l.dst_stride, item, steps.1),
                )
            })
            .collect()
    }

    /// The layout over `layers`.
    pub fn layout<'a>(&self, layers: &'a [Layer]) -> Layout<'a> {
        let order = if self.run_major { Order::RunMajor } else { Order::LayerMajor };
        let layout = Layout::new(layers).order(order);
        let item = layers.first().map_or(1, |l| l.item_len.max(1));
        let cap = match self.cap {
            None => return layout,
            Some(Cap::Pages(k)) => item.saturating_mul(u64::from(k)),
            Some(Cap::PagesPlus(k, extra)) => {
                item.saturating_mul(u64::from(k)).saturating_add(u64::from(extra))
            }
            Some(Cap::Raw(x)) => x,
        };
        NonZeroU64::new(cap).map_or(layout, |c| layout.max_bytes(c))
    }

    /// `max_sge`, 0 (an error) included.
    pub fn max_sge(&self) -> usize {
        usize::from(self.max_sge % 40)
    }
}

/// Descriptors: every form against the reference, one shot and resumed through buffers
/// of the capacities `caps` (cycled).
pub fn check_descriptors<T: super::TestIndex>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    caps: &[usize],
) {
    super::check::both_ways(grouper)
        .for_each(|g| check_descriptors_one(&g, src, dst, layout, caps));
}

fn check_descriptors_one<T: super::TestIndex>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    caps: &[usize],
) {
    #[cfg(any(feature = "alloc", fuzzing))]
    let (want, want_err) = reference::descriptors_until_error(grouper, src, dst, layout);
    #[cfg(any(feature = "alloc", fuzzing))]
    {
        let want_result = match want_err {
            Some(e) => Err(e),
            None => Ok(want.clone()),
        };
        let r = reference::descriptors(grouper, src, dst, layout);
        assert_eq!(r, want_result, "reference forms");
        let got = corun::desc::descriptors(grouper, src, dst, layout);
        assert_eq!(got, want_result, "desc::descriptors");
        assert_eq!(descriptors_for(grouper, src, dst, layout), want_result, "descriptors_for");
    }
    let Ok(spans) = grouped(grouper, src, dst) else { return };

    let mut buf = vec![Span::default(); spans.len()];
    let plan = Plan::new(grouper, src, dst, &mut buf).unwrap();
    assert_eq!(plan.spans(), &spans[..]);
    assert_eq!(plan.consumed(), src.len());
    // Without the reference, the one-shot slice form is the answer the rest is held to.
    #[cfg(not(any(feature = "alloc", fuzzing)))]
    let (want, want_err) = one_shot(&plan, layout);
    match (plan.count_descriptors(layout), want_err) {
        (Ok(n), None) => assert_eq!(n, want.len(), "count_descriptors"),
        (Ok(_), Some(Error::NegativeIndex { .. } | Error::Overflow { .. })) => {}
        (got, err) => assert_eq!(got.err(), err, "count_descriptors error"),
    }

    // One shot into a slice with a spare slot: nothing past the descriptors is written.
    let sentinel = Descriptor { src_addr: 1, dst_addr: 2, len: 3 };
    let mut out = vec![sentinel; want.len() + 1];
    let got = plan.descriptors_into(layout, Cursor::default(), &mut out);
    match want_err {
        None => assert_eq!(got, Ok(corun::desc::Written { descriptors: want.len(), next: None })),
        Some(e) => assert_eq!(got, Err(e), "descriptors_into error"),
    }
    assert_eq!(&out[..want.len()], &want[..], "descriptors_into");
    assert_eq!(out[want.len()], sentinel, "descriptors_into wrote past its descriptors");

    // Three columns, one shot, with a spare slot each.
    let mut cols =
        [vec![7u64; want.len() + 1], vec![7u64; want.len() + 1], vec![7u64; want.len() + 2]];
    let [sa, da, ln] = &mut cols;
    let got = plan.descriptors_into_columns(layout, Cursor::default(), sa, da, ln);
    match want_err {
        None => assert_eq!(got, Ok(corun::desc::Written { descriptors: want.len(), next: None })),
        Some(e) => assert_eq!(got, Err(e), "descriptors_into_columns error"),
    }
    let as_columns: Vec<Descriptor> = (0..want.len())
        .map(|i| Descriptor { src_addr: sa[i], dst_addr: da[i], len: ln[i] })
        .collect();
    assert_eq!(as_columns, want, "descriptors_into_columns");
    assert_eq!((sa[want.len()], da[want.len()], ln[want.len()]), (7, 7, 7), "columns written past");

    // Resumed through small buffers: slices, heapless and columns in turn.
    let mut got = Vec::new();
    let mut cursor = Some(Cursor::default());
    let mut err = None;
    for (k, &cap) in caps.iter().cycle().enumerate() {
        let Some(c) = cursor else { break };
        let cursor_now = c;
        assert!(k < want.len() + 2, "no progress");
        let r = match k % 3 {
            2 => {
                let mut cols = [vec![0u64; cap], vec![0u64; cap + 1], vec![0u64; cap + 2]];
                let [sa, da, ln] = &mut cols;
                let r = plan.descriptors_into_columns(layout, cursor_now, sa, da, ln);
                let n = valid(&r);
                got.extend((0..n).map(|i| Descriptor {
                    src_addr: sa[i],
                    dst_addr: da[i],
                    len: ln[i],
                }));
                r
            }
            // Without the feature, the heapless turns take slices.
            #[cfg(any(feature = "heapless", fuzzing))]
            1 => {
                let mut hv = heapless::Vec::<Descriptor, 3>::new();
                let r = plan.descriptors_into_heapless(layout, c, &mut hv);
                if let Ok(w) = r {
                    assert_eq!(w.descriptors, hv.len());
                }
                got.extend_from_slice(&hv);
                r
            }
            _ => {
                let mut out = vec![sentinel; cap];
                let r = plan.descriptors_into(layout, c, &mut out);
                let n = valid(&r);
                assert!(out[n..].iter().all(|d| *d == sentinel), "wrote past its descriptors");
                got.extend_from_slice(&out[..n]);
                r
            }
        };
        match r {
            Ok(w) => {
                assert!(w.descriptors > 0 || w.next.is_none(), "no progress with room");
                cursor = w.next;
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert_eq!(got, want, "resumed descriptors differ from one shot");
    // Errors name the same place; `written` counts this call's output only.
    let place = |e: Option<Error>| match e {
        Some(Error::NegativeIndex { layer, position, .. }) => Some((0, layer, position)),
        Some(Error::Overflow { layer, position, .. }) => Some((1, layer, position)),
        Some(_) => Some((2, 0, 0)),
        None => None,
    };
    assert_eq!(place(err), place(want_err), "resumed error");
}

/// Descriptors a writer's result says are valid: all it wrote, or those before its error.
fn valid(r: &Result<corun::desc::Written, Error>) -> usize {
    match r {
        Ok(w) => w.descriptors,
        Err(Error::NegativeIndex { written, .. } | Error::Overflow { written, .. }) => *written,
        Err(_) => 0,
    }
}

/// What a list of work requests moves, page by page: (source address, destination
/// address) of each item, sorted. Each request's segments fill its destination range in
/// order; requests are layer-major, `n` pages per layer.
fn moved(reqs: &[WorkRequest], sges: &[Sge], layout: &Layout<'_>, n: usize) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut layer, mut done) = (0, 0);
    for r in reqs {
        let item = layout.layers()[layer].item_len;
        let mut at = r.dst_addr;
        for s in &sges[r.first_sge..r.first_sge + r.sge_count] {
            assert_eq!(s.len % item, 0, "a segment of whole items");
            for k in 0..s.len / item {
                out.push((s.addr + k * item, at));
                at = at.wrapping_add(item); // past the last item it may reach 2^64
            }
        }
        done += (r.len / item) as usize;
        if done == n {
            (layer, done) = (layer + 1, 0);
        }
    }
    out.sort_unstable();
    out
}

/// The (source, destination) address of every page of every layer, sorted.
fn pages<T: super::TestIndex>(src: &[T], dst: &[T], layout: &Layout<'_>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for l in layout.layers() {
        for (s, d) in src.iter().zip(dst) {
            let at = |base: u64, i: i128, stride: u64| {
                u64::try_from(i128::from(base) + i * i128::from(stride)).unwrap()
            };
            out.push((
                at(l.src_base, s.wide(), l.src_stride),
                at(l.dst_base, d.wide(), l.dst_stride),
            ));
        }
    }
    out.sort_unstable();
    out
}

/// Gather lists: every form against the reference, one shot and resumed.
pub fn check_gather<T: super::TestIndex>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    max_sge: usize,
    caps: &[usize],
) {
    super::check::both_ways(grouper)
        .for_each(|g| check_gather_one(&g, src, dst, layout, max_sge, caps));
}

fn check_gather_one<T: super::TestIndex>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
    max_sge: usize,
    caps: &[usize],
) {
    let Ok(spans) = grouped(grouper, src, dst) else {
        return;
    };
    let mut buf = spans.clone();
    let plan = Plan::new(grouper, src, dst, &mut buf).unwrap();
    // Without the reference, the one-shot slice form (held to the definition below).
    #[cfg(any(feature = "alloc", fuzzing))]
    let want = reference::gather(grouper, src, dst, layout, max_sge);
    #[cfg(not(any(feature = "alloc", fuzzing)))]
    let want = gather_of(&plan, layout, max_sge);
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(gather_of(&plan, layout, max_sge), want, "gather_of");
    let Ok((want_reqs, want_sges)) = want else { return };
    for r in &want_reqs {
        let sges = &want_sges[r.first_sge..r.first_sge + r.sge_count];
        assert!(r.sge_count >= 1 && r.sge_count <= max_sge);
        assert_eq!(r.len, sges.iter().map(|s| s.len).sum::<u64>(), "request length");
    }
    assert_eq!(
        moved(&want_reqs, &want_sges, layout, src.len()),
        pages(src, dst, layout),
        "the requests must move every page of every layer to its destination"
    );

    // Resumed through small buffers, slices and heapless (3 requests, 64 segments) in
    // turn; `first_sge` is relative to each call's buffer.
    let (mut reqs, mut sges) = (Vec::new(), Vec::new());
    let mut cursor = Some(Cursor::default());
    for (k, &cap) in caps.iter().cycle().enumerate() {
        let Some(c) = cursor else { break };
        assert!(k < want_reqs.len() + 2, "no progress");
        let (r, s, w) = match k % 2 {
            // Without the feature, the heapless turns take slices.
            #[cfg(any(feature = "heapless", fuzzing))]
            1 if max_sge <= 64 => {
                let mut r = heapless::Vec::<WorkRequest, 3>::new();
                let mut s = heapless::Vec::<Sge, 64>::new();
                let w = plan.gather_into_heapless(layout, max_sge, c, &mut r, &mut s).unwrap();
                assert_eq!((r.len(), s.len()), (w.requests, w.sges), "heapless lengths");
                (r.to_vec(), s.to_vec(), w)
            }
            _ => {
                let mut r = vec![WorkRequest::default(); cap.max(1)];
                let mut s = vec![Sge::default(); max_sge + cap - 1];
                let w = plan.gather_into(layout, max_sge, c, &mut r, &mut s).unwrap();
                (r, s, w)
            }
        };
        assert!(w.requests > 0 || w.next.is_none(), "no progress with room for a request");
        let base = sges.len();
        reqs.extend(
            r[..w.requests].iter().map(|q| WorkRequest { first_sge: q.first_sge + base, ..*q }),
        );
        sges.extend_from_slice(&s[..w.sges]);
        cursor = w.next;
    }
    assert_eq!((reqs, sges), (want_reqs, want_sges), "resumed gather differs from one shot");
}

/// The descriptors `plan` writes into a slice sized by `count_descriptors`, one call, and
/// the error that stopped it (with the descriptors before it).
fn one_shot<T: corun::Index>(
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
) -> (Vec<Descriptor>, Option<Error>) {
    let n = match plan.count_descriptors(layout) {
        Ok(n) => n,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut out = vec![Descriptor::default(); n];
    let r = plan.descriptors_into(layout, Cursor::default(), &mut out);
    out.truncate(valid(&r));
    match r {
        Ok(w) => {
            assert_eq!((w.descriptors, w.next), (n, None), "a slice of count_descriptors");
            (out, None)
        }
        Err(e) => (out, Some(e)),
    }
}

/// Every descriptor of `plan` in a std `Vec`, through the slice form (the no-heap build's
/// `Plan::descriptors`); where the feature `alloc` is compiled, that form must agree.
pub fn descriptors_of<T: corun::Index>(
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
) -> Result<Vec<Descriptor>, Error> {
    let got = match one_shot(plan, layout) {
        (out, None) => Ok(out),
        (_, Some(e)) => Err(e),
    };
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(plan.descriptors(layout), got, "Plan::descriptors against the slice form");
    got
}

/// The descriptors of the runs of `grouper` over `src`/`dst` through the slice forms
/// (the no-heap build's `corun::desc::descriptors`): a plan over a span buffer of one
/// slot per position, then [`descriptors_of`].
pub fn descriptors_for<T: corun::Index>(
    grouper: &Grouper,
    src: &[T],
    dst: &[T],
    layout: &Layout<'_>,
) -> Result<Vec<Descriptor>, Error> {
    let mut buf = vec![Span::default(); src.len()];
    let plan = Plan::new(grouper, src, dst, &mut buf)?;
    descriptors_of(&plan, layout)
}

/// The gather lists of `plan` in std `Vec`s, through the slice form resumed through
/// buffers of 8 requests (the no-heap build's `Plan::gather`; `first_sge` made relative
/// to the whole list); where the feature `alloc` is compiled, that form must agree.
pub fn gather_of<T: corun::Index>(
    plan: &Plan<'_, T>,
    layout: &Layout<'_>,
    max_sge: usize,
) -> Result<(Vec<WorkRequest>, Vec<Sge>), Error> {
    let (mut reqs, mut sges) = (Vec::new(), Vec::new());
    let mut cursor = Some(Cursor::default());
    let got = loop {
        let Some(c) = cursor else { break Ok((reqs, sges)) };
        let mut r = [WorkRequest::default(); 8];
        let mut s = vec![Sge::default(); max_sge + 7];
        let w = match plan.gather_into(layout, max_sge, c, &mut r, &mut s) {
            Ok(w) => w,
            // `written` counts this call's requests: the whole list's, as one call has it.
            Err(Error::NegativeIndex { layer, position, written }) => {
                let written = written + reqs.len();
                break Err(Error::NegativeIndex { layer, position, written });
            }
            Err(Error::Overflow { layer, position, written }) => {
                break Err(Error::Overflow { layer, position, written: written + reqs.len() });
            }
            Err(e) => break Err(e),
        };
        assert!(w.requests > 0 || w.next.is_none(), "no progress with room for a request");
        let base = sges.len();
        reqs.extend(
            r[..w.requests].iter().map(|q| WorkRequest { first_sge: q.first_sge + base, ..*q }),
        );
        sges.extend_from_slice(&s[..w.sges]);
        cursor = w.next;
    };
    #[cfg(any(feature = "alloc", fuzzing))]
    assert_eq!(plan.gather(layout, max_sge), got, "Plan::gather against the slice form");
    got
}
