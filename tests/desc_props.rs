//! Property tests of `corun::desc` against `corun::scalar::desc`, for every index type,
//! on run-built inputs (strided too) and layouts near the limits of `u64` addresses.

mod common;
mod kit;

use common::*;
use corun::Grouper;
use kit::arbitrary::{Arbitrary, Unstructured};
use kit::desc::{LayoutSpec, check_descriptors, check_gather};
use proptest::prelude::*;

/// A layout spec decoded from bytes, as the fuzz targets do.
fn layout_spec() -> impl Strategy<Value = LayoutSpec> {
    prop::collection::vec(any::<u8>(), 8..200).prop_filter_map("undecodable", |bytes| {
        LayoutSpec::arbitrary(&mut Unstructured::new(&bytes)).ok()
    })
}

macro_rules! props {
    ($($name:ident: $t:ty),*) => {$(
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(cases()))]

                #[test]
                fn descriptors_match_reference(
                    (steps, src, dst) in strided::<$t>(SEGS),
                    spec in layout_spec(),
                    max in proptest::option::of(max_len()),
                    caps in prop::collection::vec(1usize..6, 1..4),
                ) {
                    let grouper = Grouper::new().steps(steps.0, steps.1);
                    let grouper = max.map_or(grouper, |m| grouper.max_len(m));
                    let layers = spec.layers(steps);
                    check_descriptors(&grouper, &src, &dst, &spec.layout(&layers), &caps);
                }

                #[test]
                fn descriptors_of_unit_steps_match_reference(
                    (src, dst) in pairs::<$t>(SEGS),
                    spec in layout_spec(),
                    caps in prop::collection::vec(1usize..6, 1..4),
                ) {
                    let layers = spec.layers((1, 1));
                    check_descriptors(&Grouper::new(), &src, &dst, &spec.layout(&layers), &caps);
                }

                #[test]
                fn gather_matches_reference(
                    (steps, src, dst) in strided::<$t>(SEGS),
                    spec in layout_spec(),
                    max in proptest::option::of(max_len()),
                    caps in prop::collection::vec(1usize..6, 1..4),
                ) {
                    let grouper = Grouper::new().steps(steps.0, steps.1);
                    let grouper = max.map_or(grouper, |m| grouper.max_len(m));
                    let layers = spec.layers(steps);
                    let layout = spec.layout(&layers);
                    check_gather(&grouper, &src, &dst, &layout, spec.max_sge(), &caps);
                }
            }
        }
    )*};
}

props!(u32s: u32, i32s: i32, u64s: u64, i64s: i64);

/// Segments per input: fewer under Miri, which interprets every lane operation.
const SEGS: usize = if cfg!(miri) { 3 } else { 30 };

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)
}
