//! Property tests: every public function against `corun::scalar`, for every index type,
//! on inputs made of runs with values near the type's limits, and on values drawn freely
//! from a small alphabet at those limits.

mod common;
mod kit;

use common::*;
use corun::Grouper;
use kit::alphabet::{self, Pick};
use proptest::prelude::*;

macro_rules! props {
    ($($name:ident: $t:ty),*) => {$(
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(cases()))]

                #[test]
                fn matches_reference((src, dst) in pairs::<$t>(SEGS)) {
                    check(&src, &dst);
                }

                #[test]
                fn max_len_matches_reference((src, dst) in pairs::<$t>(SEGS), max in max_len()) {
                    check_with(&Grouper::new().max_len(max), &src, &dst);
                }

                #[test]
                fn steps_match_reference(
                    (steps, src, dst) in strided::<$t>(SEGS),
                    max in proptest::option::of(max_len()),
                    caps in prop::collection::vec(1usize..40, 1..4),
                ) {
                    let grouper = Grouper::new().steps(steps.0, steps.1);
                    let grouper = max.map_or(grouper, |m| grouper.max_len(m));
                    check_with(&grouper, &src, &dst);
                    check_resume(&grouper, &src, &dst, &caps);
                }

                #[test]
                fn resume_matches_one_shot(
                    (src, dst) in pairs::<$t>(SEGS),
                    caps in prop::collection::vec(prop_oneof![1usize..4, 1usize..40], 1..8),
                    max in proptest::option::of(max_len()),
                ) {
                    let grouper = max.map_or(Grouper::new(), |m| Grouper::new().max_len(m));
                    check_resume(&grouper, &src, &dst, &caps);
                }

                #[test]
                #[cfg(feature = "heapless")]
                fn heapless_resume_matches_one_shot(
                    (src, dst) in pairs::<$t>(SEGS),
                    pre in 0usize..8,
                    max in proptest::option::of(max_len()),
                ) {
                    let grouper = max.map_or(Grouper::new(), |m| Grouper::new().max_len(m));
                    check_resume_heapless::<_, 1>(&grouper, &src, &dst, 0);
                    check_resume_heapless::<_, 8>(&grouper, &src, &dst, pre);
                }

                #[test]
                fn alphabet_matches_reference(
                    (ks, kd) in (0..7usize, 0..7usize),
                    picks in prop::collection::vec(any::<(u8, u8)>(), 0..200),
                    cap in 0usize..6,
                ) {
                    let all = alphabet::steps::<$t>();
                    let (ss, ds) = (all[ks], all[kd]);
                    let picks = picks.iter().map(|&(s, d)| (Pick::from_byte(s), Pick::from_byte(d)));
                    let (src, dst) = alphabet::arrays::<$t>(picks, (ss, ds));
                    alphabet::check_all(&Grouper::new().steps(ss, ds), &src, &dst, &[cap]);
                }

                #[test]
                fn mismatch_is_an_error_and_writes_nothing(
                    (src, dst) in nonempty_pairs::<$t>(10),
                    cut in any::<prop::sample::Index>(),
                    src_side in any::<bool>(),
                ) {
                    let short = &(if src_side { &src } else { &dst })[..cut.index(src.len())];
                    let (s, d) = if src_side { (short, &dst[..]) } else { (&src[..], short) };
                    check_mismatch(s, d);
                }
            }
        }
    )*};
}

props!(u32s: u32, i32s: i32, u64s: u64, i64s: i64);

/// Segments per input: fewer under Miri, which interprets every lane operation.
const SEGS: usize = if cfg!(miri) { 3 } else { 40 };

/// Case count per property: `PROPTEST_CASES` when set (CI lowers it under emulation).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)
}
