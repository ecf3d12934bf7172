//! Prints a throughput table for the main workloads: corun against the scalar reference,
//! `slice::chunk_by` over pairs, and the read floor (two passes: a vectorised sum of `src`,
//! then of `dst`; see `benches/workloads`), measured side by side in one
//! process (implementations interleaved, medians of many rounds).
//!
//! ```sh
//! cargo run --release --example perf_report                 # u32, 4K to 16M
//! cargo run --release --example perf_report -- --type u64
//! cargo run --release --example perf_report -- --quick      # tiny smoke run (CI)
//! cargo run --release --example perf_report -- --csv perf.csv   # also write a CSV
//! cargo run --release --example perf_report -- --size 64K    # one size: 4K, 64K, 1M or 16M
//! ```
//!
//! Elements/ns counts positions (one src and one dst index each) per nanosecond. "span
//! writes" reads both arrays and writes a span per position, comparing nothing: the least
//! any `group_into` does on singletons (see `benches/workloads`). The last line is a
//! one-line summary: corun against the reference and the floor (medians). Below the main
//! table: strided grouping against unit steps, and the either-direction scan against the
//! ascending one and the floor, on the workloads and on them reversed.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corun::{Index, Span};

#[path = "../benches/workloads/mod.rs"]
mod workloads;
use workloads::{Floor, Structure};

struct Options {
    u64: bool,
    quick: bool,
    csv: Option<String>,
    size: Option<String>,
}

const USAGE: &str = "\
usage: perf_report [--type u32|u64] [--size 4K|64K|1M|16M] [--csv FILE] [--quick]

Throughput of corun's grouping against the scalar reference, slice::chunk_by and a
two-pass read floor, side by side in one process (medians of interleaved rounds), per
size and run structure. benches/perf_all.sh runs it for every SIMD backend and keeps
the output in results/<machine>/<date>-<commit>/ (see benches/README.md).";

fn options() -> Options {
    let mut o = Options { u64: false, quick: false, csv: None, size: None };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--type" => o.u64 = args.next().as_deref() == Some("u64"),
            "--csv" => o.csv = args.next(),
            "--size" => o.size = args.next(),
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => {
                eprintln!("perf_report: unknown argument {other:?}\n\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    o
}

/// Median elements/ns of each implementation over interleaved rounds: corun, count_runs,
/// scalar, chunk_by, the read floor and the span-write floor.
fn measure<T: Index + Floor>(src: &[T], dst: &[T], rounds: usize, min: Duration) -> [f64; 6] {
    let pairs: Vec<(T, T)> = src.iter().copied().zip(dst.iter().copied()).collect();
    let mut out = vec![Span::default(); corun::count_runs(src, dst).unwrap()];
    let mut every = vec![Span::default(); src.len()];
    let mut samples: [Vec<f64>; 6] = Default::default();
    // Calls per sample, so that one sample takes at least `min`.
    let t = Instant::now();
    black_box(corun::scalar::count_runs(src, dst).unwrap());
    let reps = (min.as_secs_f64() / t.elapsed().as_secs_f64().max(1e-9)).ceil().max(1.0) as usize;
    for _ in 0..rounds {
        for (i, samples) in samples.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..reps {
                match i {
                    0 => drop(black_box(corun::group_into(src, dst, &mut out).unwrap())),
                    1 => drop(black_box(corun::count_runs(src, dst).unwrap())),
                    2 => drop(black_box(corun::scalar::group_into(src, dst, &mut out).unwrap())),
                    3 => drop(black_box(workloads::chunk_by(&pairs, &mut out))),
                    4 => drop(black_box(T::floor(src, dst))),
                    _ => T::span_floor(src, dst, black_box(&mut every)),
                }
            }
            let ns = t.elapsed().as_nanos() as f64 / reps as f64;
            samples.push(src.len() as f64 / ns);
        }
    }
    samples.map(|mut s| {
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    })
}

/// Prints the table and returns the summary line.
fn report<T: Index + Floor>(o: &Options, make: workloads::Make<T>) -> String {
    let sizes: &[(usize, &str)] = if o.quick {
        &[(4096, "4K")]
    } else {
        &[(4096, "4K"), (65_536, "64K"), (1 << 20, "1M"), (1 << 24, "16M")]
    };
    let (rounds, min) =
        if o.quick { (3, Duration::from_micros(200)) } else { (15, Duration::from_millis(5)) };
    let structures = [
        Structure::NoBreaks,
        Structure::Mean(256),
        Structure::Mean(16),
        Structure::Singletons,
        Structure::Trace { page_size: 16 },
    ];
    let ty = std::any::type_name::<T>();
    println!("elements/ns, {ty}, medians of {rounds} interleaved rounds\n");
    println!(
        "| size | structure | corun | count_runs | scalar | chunk_by | floor | corun/scalar | corun/floor |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut csv =
        String::from("type,size,structure,corun,count_runs,scalar,chunk_by,floor,span_writes\n");
    let (mut vs_scalar, mut vs_floor, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let chosen = sizes.iter().filter(|(_, name)| o.size.as_deref().is_none_or(|s| s == *name));
    for &(len, size) in chosen {
        for s in structures {
            let (src, dst) = make(len, s, 42);
            let r = measure(&src, &dst, rounds, min);
            println!(
                "| {size} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1}x | {:.2}x |",
                s.name(),
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[0] / r[2],
                r[0] / r[4]
            );
            if s == Structure::Singletons {
                writes.push(format!(
                    "| {size} | {:.2} | {:.2}x | {:.2}x | {:.2}x |",
                    r[5],
                    r[5] / r[4],
                    r[0] / r[4],
                    r[0] / r[5]
                ));
            }
            let [a, b, c, d, e, f] = r;
            csv += &format!("{ty},{size},{},{a},{b},{c},{d},{e},{f}\n", s.name());
            vs_scalar.push(r[0] / r[2]);
            vs_floor.push(r[0] / r[4]);
        }
    }
    // Singletons against the span writes alone (see the module docs), below the table so
    // that its columns stay as they were.
    println!("\nsingletons against span writes (read both arrays, write a span per position):\n");
    println!("| size | span writes | span writes/floor | corun/floor | corun/span writes |");
    println!("|---|---|---|---|---|");
    for line in writes {
        println!("{line}");
    }
    if let Some(path) = &o.csv {
        std::fs::write(path, csv).expect("write the CSV");
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (lo, hi) = vs_scalar.iter().fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
    format!(
        "summary ({ty}, {} workloads): corun group_into is {:.1}x the scalar reference \
         (median; {lo:.1}x to {hi:.1}x) and {:.2}x the read-bandwidth floor (median)",
        vs_scalar.len(),
        median(vs_scalar.clone()),
        median(vs_floor)
    )
}

/// Strided grouping (`Grouper::steps(16, 16)`, indices x16) against the same workloads
/// with +1 steps: the strided kernel keeps the step in a register, so the two should run
/// at the same speed.
fn strided(o: &Options) {
    let (len, rounds, min) = if o.quick {
        (4096, 3, Duration::from_micros(200))
    } else {
        (65_536, 15, Duration::from_millis(5))
    };
    let grouper = corun::Grouper::new().steps(16, 16);
    println!("\nstrided grouping, u32, {len} positions: elements/ns, medians of {rounds} rounds\n");
    println!("| structure | steps (1, 1) | steps (16, 16) | strided/unit |");
    println!("|---|---|---|---|");
    for s in [Structure::NoBreaks, Structure::Mean(256), Structure::Mean(16), Structure::Singletons]
    {
        let (src, dst) = workloads::make_u32(len, s, 42);
        let (s16, d16): (Vec<u32>, Vec<u32>) =
            (src.iter().map(|x| x * 16).collect(), dst.iter().map(|x| x * 16).collect());
        let n = corun::count_runs(&src, &dst).unwrap();
        assert_eq!(grouper.count_runs(&s16, &d16), Ok(n), "same runs either way");
        let mut out = vec![Span::default(); n];
        let mut samples = [Vec::new(), Vec::new()];
        let reps = (min.as_nanos() as usize / len.max(1)).max(1) * 4;
        for _ in 0..rounds {
            for (k, samples) in samples.iter_mut().enumerate() {
                let t = Instant::now();
                for _ in 0..reps {
                    let p = if k == 0 {
                        corun::group_into(&src, &dst, &mut out)
                    } else {
                        grouper.group_into(&s16, &d16, &mut out)
                    };
                    black_box(p.unwrap());
                }
                samples.push(len as f64 * reps as f64 / t.elapsed().as_nanos() as f64);
            }
        }
        let [unit, step] = samples.map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        });
        println!("| {} | {unit:.2} | {step:.2} | {:.2}x |", s.name(), step / unit);
    }
}

/// The either-direction scan (`Direction::Either`) against the ascending one and the read
/// floor, on the same workloads and on them reversed (every run descends): what merging
/// vLLM's recycled blocks costs.
fn either(o: &Options) {
    let (len, rounds, min) = if o.quick {
        (4096, 3, Duration::from_micros(200))
    } else {
        (65_536, 15, Duration::from_millis(5))
    };
    let grouper = corun::Grouper::new().direction(corun::Direction::Either);
    println!(
        "\neither-direction grouping, u32, {len} positions: elements/ns, medians of {rounds} rounds\n"
    );
    println!(
        "| structure | ascending | either | either, runs descending | floor | either/floor | descending/floor | either/ascending |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let structures =
        [Structure::NoBreaks, Structure::Mean(256), Structure::Mean(16), Structure::Singletons];
    for s in structures {
        let (src, dst) = workloads::make_u32(len, s, 42);
        let (rs, rd): (Vec<u32>, Vec<u32>) =
            (src.iter().rev().copied().collect(), dst.iter().rev().copied().collect());
        let n = corun::count_runs(&src, &dst).unwrap();
        assert_eq!(grouper.count_runs(&rs, &rd), Ok(n), "reversed: the same runs, descending");
        let mut out = vec![Span::default(); n];
        let mut samples: [Vec<f64>; 4] = Default::default();
        let reps = (min.as_nanos() as usize / len.max(1)).max(1) * 4;
        for _ in 0..rounds {
            for (k, samples) in samples.iter_mut().enumerate() {
                let t = Instant::now();
                for _ in 0..reps {
                    match k {
                        0 => drop(black_box(corun::group_into(&src, &dst, &mut out).unwrap())),
                        1 => drop(black_box(grouper.group_into(&src, &dst, &mut out).unwrap())),
                        2 => drop(black_box(grouper.group_into(&rs, &rd, &mut out).unwrap())),
                        _ => drop(black_box(u32::floor(&src, &dst))),
                    }
                }
                samples.push(len as f64 * reps as f64 / t.elapsed().as_nanos() as f64);
            }
        }
        let [asc, eit, desc, floor] = samples.map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        });
        println!(
            "| {} | {asc:.2} | {eit:.2} | {desc:.2} | {floor:.2} | {:.2}x | {:.2}x | {:.2}x |",
            s.name(),
            eit / floor,
            desc / floor,
            eit / asc
        );
    }
}

fn main() {
    let o = options();
    let summary = if o.u64 {
        report::<u64>(&o, workloads::make_u64)
    } else {
        let summary = report::<u32>(&o, workloads::make_u32);
        strided(&o);
        either(&o);
        summary
    };
    // The last line, whatever else is printed: one summary.
    println!("\n{summary}");
}
