//! Descriptor throughput for 64 layers x (K, V), corun against the loop agents write
//! today, and how many work requests gather lists save, measured side by side in one
//! process (interleaved rounds, medians).
//!
//! ```sh
//! cargo run --release --example desc_report             # N = 2,048 and 16,384
//! cargo run --release --example desc_report -- --quick  # smoke run (CI)
//! ```
//!
//! Time is per batch: every descriptor of every layer buffer for one transfer of N pages.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corun::desc::{Cursor, Descriptor, Layout, Plan, Sge, WorkRequest};
use corun::{Grouper, Span};

#[path = "../benches/workloads/mod.rs"]
mod workloads;
use workloads::Structure;

/// Median microseconds per call of each closure, interleaved over `rounds`.
fn measure<const K: usize>(rounds: usize, min: Duration, f: [&mut dyn FnMut(); K]) -> [f64; K] {
    let mut f = f;
    let t = Instant::now();
    (f[0])();
    let reps = (min.as_secs_f64() / t.elapsed().as_secs_f64().max(1e-9)).ceil().max(1.0) as usize;
    let mut samples: [Vec<f64>; K] = std::array::from_fn(|_| Vec::new());
    for _ in 0..rounds {
        for (g, s) in f.iter_mut().zip(samples.iter_mut()) {
            let t = Instant::now();
            for _ in 0..reps {
                g();
            }
            s.push(t.elapsed().as_secs_f64() * 1e6 / reps as f64);
        }
    }
    samples.map(|mut s| {
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    })
}

fn main() {
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => {}
            "--help" | "-h" => {
                println!(
                    "usage: desc_report [--quick]\n\nDescriptors and gather lists for 128 layer \
                     buffers, corun against the naive loop, side by side (see benches/README.md)."
                );
                return;
            }
            other => {
                eprintln!("desc_report: unknown argument {other:?} (try --help)");
                std::process::exit(2);
            }
        }
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, min) =
        if quick { (3, Duration::from_micros(300)) } else { (15, Duration::from_millis(20)) };
    let sizes: &[usize] = if quick { &[2048] } else { &[2048, 16_384] };
    let layers = workloads::kv_layers(16 * 1024);
    let layout = Layout::new(&layers);
    let max_sge = 30; // ConnectX send queues: 30 gather entries per work request

    println!(
        "64 layers x (K, V) = {} layer buffers, 16 KiB pages; medians of {rounds} rounds\n",
        layers.len()
    );
    println!(
        "| N | structure | runs | descriptors | corun µs | naive loop µs | naive/corun | ns/descriptor | gather requests | fewer requests | gather µs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        for s in [
            Structure::NoBreaks,
            Structure::Mean(16),
            Structure::Singletons,
            Structure::Trace { page_size: 1 },
            Structure::TraceFresh { page_size: 1 },
            Structure::Trace { page_size: 16 },
            Structure::TraceFresh { page_size: 16 },
        ] {
            let (src, dst) = workloads::make_u32(n, s, 42);
            let (mut spans, mut spans2) = (vec![Span::default(); n], vec![Span::default(); n]);
            let runs = corun::count_runs(&src, &dst).unwrap();
            let total = runs * layers.len();
            let mut out = vec![Descriptor::default(); total];
            let mut naive_out = Vec::with_capacity(total);
            let mut naive_runs = vec![Span::default(); n];

            // The outputs agree before anything is timed.
            let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans).unwrap();
            let w = plan.descriptors_into(&layout, Cursor::default(), &mut out).unwrap();
            workloads::naive_descriptors(&src, &dst, &layers, &mut naive_runs, &mut naive_out);
            assert_eq!(w.descriptors, total);
            assert_eq!(naive_out, out);
            let (reqs, sges) = plan.gather(&layout, max_sge).unwrap();
            let mut req_buf = vec![WorkRequest::default(); reqs.len()];
            let mut sge_buf = vec![Sge::default(); sges.len()];

            let [corun_us, naive_us, gather_us] = measure(
                rounds,
                min,
                [
                    &mut || {
                        let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans).unwrap();
                        black_box(
                            plan.descriptors_into(&layout, Cursor::default(), &mut out).unwrap(),
                        );
                    },
                    &mut || {
                        black_box(workloads::naive_descriptors(
                            &src,
                            &dst,
                            &layers,
                            &mut naive_runs,
                            &mut naive_out,
                        ));
                    },
                    &mut || {
                        let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans2).unwrap();
                        let (r, s) = (&mut req_buf, &mut sge_buf);
                        let w = plan.gather_into(&layout, max_sge, Cursor::default(), r, s);
                        assert_eq!(w.unwrap().requests, reqs.len());
                    },
                ],
            );
            println!(
                "| {n} | {} | {runs} | {total} | {corun_us:.1} | {naive_us:.1} | {:.2}x | {:.2} | {} | {:.1}x | {gather_us:.1} |",
                s.name(),
                naive_us / corun_us,
                corun_us * 1e3 / total as f64,
                reqs.len(),
                total as f64 / reqs.len() as f64,
            );
        }
    }
    println!(
        "\nfewer requests = descriptors / gather requests (max_sge {max_sge}): work requests \
         posted without and with gather lists. corun times include finding the runs."
    );
}
