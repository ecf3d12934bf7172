//! Values drawn freely from a small alphabet at the type's limits (see
//! `kit::alphabet`), under every pair of steps from 0 to half the range and one
//! more, for every length up to 70 and around two and three blocks: each side draws a value
//! or continues by its step, position by position, and every output form, with and
//! without a cap, one shot and resumed through 1 to 5 slots, must match the reference.
//!
//! Deterministic: a fixed-seed generator picks the values, so a failure names its input.

mod kit;

use corun::Grouper;
use kit::TestIndex;
use kit::alphabet::{Pick, arrays, check_all, steps};

/// Every length to 70 (the first block, its tail and the next block's start), and
/// around 128 and 192 (two and three blocks). `ALPHABET_LEN` lowers the first range
/// under emulation.
fn lengths() -> impl Iterator<Item = usize> {
    let short = std::env::var("ALPHABET_LEN").ok().and_then(|v| v.parse().ok()).unwrap_or(70);
    (0..=short.min(70)).chain(126..=130).chain(190..=194)
}

/// SplitMix64: a fixed sequence of well-mixed words.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A pick that steps with probability `step_in_8 / 8`, else draws a value.
    fn pick(&mut self, step_in_8: u64) -> Pick {
        let r = self.next();
        if r % 8 < step_in_8 { Pick::Step } else { Pick::Value((r >> 8) as u8) }
    }
}

fn sweep<T: TestIndex>() {
    let mut rng = Rng(0xC0_5EED ^ u64::from(T::BITS) ^ u64::from(T::SIGNED) << 8);
    for ss in steps::<T>() {
        for ds in steps::<T>() {
            let grouper = Grouper::new().steps(ss, ds);
            for len in lengths() {
                // Free values; mostly steps on both sides; one side stepping; half and half.
                for (s_in_8, d_in_8) in [(0, 0), (7, 7), (8, 0), (4, 4)] {
                    let picks: Vec<_> =
                        (0..len).map(|_| (rng.pick(s_in_8), rng.pick(d_in_8))).collect();
                    let (src, dst) = arrays::<T>(picks.iter().copied(), (ss, ds));
                    let cap = 1 + (rng.next() % 5) as usize;
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check_all(&grouper, &src, &dst, &[cap])
                    }));
                    if r.is_err() {
                        panic!("steps ({ss}, {ds}), cap {cap}\nsrc {src:?}\ndst {dst:?}");
                    }
                }
            }
        }
    }
}

macro_rules! sweeps {
    ($($name:ident: $t:ty),*) => {$(
        #[test]
        #[cfg_attr(miri, ignore = "minutes under Miri; the alphabet properties run there")]
        fn $name() {
            sweep::<$t>();
        }
    )*};
}

sweeps!(u32s: u32, i32s: i32, u64s: u64, i64s: i64);
