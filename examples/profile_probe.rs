//! A fixed amount of work for a profiler: one workload, one function, 20 calls over
//! 65,536 positions (u32). `benches/callgrind.sh` runs it under callgrind and reports
//! instructions and branch mispredictions per 64-position block.
//!
//! ```sh
//! cargo run --release --example profile_probe -- mean-16 group_into
//! ```
//!
//! Workloads: no-breaks, mean-256, mean-16, mean-4, singletons, trace-p16. Functions: group_into,
//! count_runs, scalar (the reference's `group_into`), idle (builds the workload only, to
//! subtract).

use std::hint::black_box;

#[path = "../benches/workloads/mod.rs"]
mod workloads;
use workloads::Structure;

/// Positions per call.
pub const LEN: usize = 65_536;
/// Calls per run (`PROBE_CALLS` overrides: the qemu count logs every block executed).
pub const CALLS: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [workload, function] = &args[..] else {
        panic!("usage: profile_probe WORKLOAD FUNCTION (see the example's docs)")
    };
    let structure = match workload.as_str() {
        "no-breaks" => Structure::NoBreaks,
        "mean-256" => Structure::Mean(256),
        "mean-16" => Structure::Mean(16),
        "mean-4" => Structure::Mean(4),
        "singletons" => Structure::Singletons,
        "trace-p16" => Structure::Trace { page_size: 16 },
        other => panic!("unknown workload {other}"),
    };
    let (src, dst) = workloads::make_u32(LEN, structure, 42);
    let mut out = vec![corun::Span::default(); corun::scalar::count_runs(&src, &dst).unwrap()];
    let calls = std::env::var("PROBE_CALLS").ok().and_then(|c| c.parse().ok()).unwrap_or(CALLS);
    for _ in 0..calls {
        let (src, dst) = (black_box(&src[..]), black_box(&dst[..]));
        match function.as_str() {
            "group_into" => _ = black_box(corun::group_into(src, dst, &mut out)),
            "count_runs" => _ = black_box(corun::count_runs(src, dst)),
            "scalar" => _ = black_box(corun::scalar::group_into(src, dst, &mut out)),
            "idle" => {}
            other => panic!("unknown function {other}"),
        }
    }
}
