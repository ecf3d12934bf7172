//! Placement's cost as the request grows (issue 37): `corun::place` from 1K to 1M pages,
//! side by side with a plain sort of the same window (`sort_unstable` of a copy) in the
//! same process, so the growth of one reads against a known `O(f log f)`.
//!
//! ```sh
//! cargo bench --bench place_scaling              # every shape, 1K to 1M pages
//! cargo bench --bench place_scaling -- --quick   # 1K to 16K, seconds (CI)
//! ```
//!
//! The shapes, at every size `n` (those of `lab/place_scaling.py`, so the Rust and
//! Python rows read alike):
//!
//! - run: the first side in runs of 1 or 7 (short), 64 or 256 (long) pages, each followed
//!   by a gap of twice its length (`first[i] = (i / run) * 3 run + i % run`);
//! - window: `n + 64` (1x) or `4n + 64` (4x) free pages, the first of a random
//!   permutation of a pool twice as large, so extents are short and long runs split;
//! - order: the window shuffled (a free queue) or sorted (SGLang's free list).
//!
//! One line per case, `place-scaling n=<n> run=<len> window=<1x|4x> order=<o>
//! ns_per_page=<x> sort_ns_per_page=<y> place/sort=<x / y> place_ms=<ms> split=<runs
//! split>` (per page of the request; medians of interleaved rounds), then per shape the
//! growth of the time per page from the smallest size to the largest (1.0 is linear). A
//! sorted window's sort only checks its order (`sort_unstable` is linear on sorted
//! input): its ratio is large by design; the shuffled rows are the comparison.

use std::hint::black_box;
use std::time::Instant;

use corun::{Direction, place, place_scratch_len};

const USAGE: &str =
    "usage: place_scaling [--quick]  (cargo bench --bench place_scaling -- [--quick])";

/// `(first, free)` for one shape.
fn case(n: usize, run: usize, window: usize, sorted: bool) -> (Vec<u32>, Vec<u32>) {
    let first = (0..n).map(|i| ((i / run) * 3 * run + i % run) as u32).collect();
    let w = window * n + 64;
    let mut pool: Vec<u32> = (0..2 * w as u32).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (n as u64) ^ ((run as u64) << 40);
    for i in (1..pool.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pool.swap(i, (x % (i as u64 + 1)) as usize);
    }
    pool.truncate(w);
    if sorted {
        pool.sort_unstable();
    }
    (first, pool)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "{USAGE}\n\nOne line per shape and size: corun::place against a sort of its window."
        );
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    // `cargo bench` passes `--bench`.
    if let Some(a) = args.iter().find(|a| *a != "--quick" && *a != "--bench") {
        eprintln!("unknown argument {a}\n{USAGE}");
        std::process::exit(2);
    }
    let sizes: &[usize] = if quick {
        &[1 << 10, 1 << 12, 1 << 14]
    } else {
        &[1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20]
    };
    let mut growth = Vec::new();
    for run in [1, 7, 64, 256] {
        for window in [1, 4] {
            for sorted in [false, true] {
                let order = if sorted { "sorted" } else { "shuffled" };
                let mut per_page = Vec::new();
                for &n in sizes {
                    let (first, free) = case(n, run, window, sorted);
                    let (mut chosen, mut rest) = (vec![0u32; n], vec![0u32; free.len() - n]);
                    let mut scratch = vec![0usize; place_scratch_len(n, free.len())];
                    let mut copy = free.clone();
                    // What every placement must give before it is timed.
                    let p = place(
                        &first,
                        &free,
                        Direction::Either,
                        &mut chosen,
                        &mut rest,
                        &mut scratch,
                    )
                    .expect("place");
                    let mut all: Vec<u32> = chosen.iter().chain(&rest).copied().collect();
                    all.sort_unstable();
                    assert_eq!(
                        all,
                        {
                            copy.sort_unstable();
                            copy.clone()
                        },
                        "chosen + rest = free"
                    );
                    // Rounds interleaved: place, then the sort, until both ran 0.3 s (0.05 s
                    // quick), at least 3 and at most 200 rounds.
                    let budget = if quick { 0.05 } else { 0.3 };
                    let (mut tp, mut ts, mut spent) = (Vec::new(), Vec::new(), 0.0);
                    while tp.len() < 3 || (spent < budget && tp.len() < 200) {
                        let t = Instant::now();
                        let r = place(
                            &first,
                            &free,
                            Direction::Either,
                            &mut chosen,
                            &mut rest,
                            &mut scratch,
                        );
                        black_box(r.ok());
                        let a = t.elapsed().as_secs_f64();
                        copy.copy_from_slice(&free);
                        let t = Instant::now();
                        copy.sort_unstable();
                        black_box(&copy);
                        let b = t.elapsed().as_secs_f64();
                        tp.push(a);
                        ts.push(b);
                        spent += a + b;
                    }
                    let (a, b) = (median(&mut tp), median(&mut ts));
                    let (na, nb) = (a * 1e9 / n as f64, b * 1e9 / n as f64);
                    println!(
                        "place-scaling n={n} run={run} window={window}x order={order} ns_per_page={na:.1} sort_ns_per_page={nb:.1} place/sort={:.2} place_ms={:.3} split={}",
                        a / b,
                        a * 1e3,
                        p.split
                    );
                    per_page.push(na);
                }
                growth.push((run, window, order, per_page));
            }
        }
    }
    if sizes.len() > 1 {
        for (run, window, order, v) in growth {
            let (lo, hi) = v.iter().fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
            println!(
                "place-growth run={run} window={window}x order={order} first_to_last={:.2} max_over_min={:.2}",
                v[v.len() - 1] / v[0],
                hi / lo
            );
        }
    }
}
