//! Writes one end-to-end workload's page lists for `python/workloads.py`: the one
//! generator both languages use (`benches/workloads`, `make_pool`).
//!
//! ```sh
//! cargo run --release --example workloads -- trace-p1 2048 8192 7 > pages.bin
//! ```
//!
//! Output: `n` little-endian `u32` source pages, then `n` destination pages.

use std::io::Write;

#[path = "../benches/workloads/mod.rs"]
mod workloads;

const USAGE: &str = "usage: workloads NAME N POOL SEED   (NAME: trace-p1 trace-fresh-p1 trace-p16 breaks-5pct singletons)

Writes the page lists of workload NAME, N pages each, every index below POOL (at least
4 N), to stdout: N little-endian u32 source pages, then N destination pages.";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    let parsed = match &args[..] {
        [name, n, pool, seed] => n
            .parse()
            .ok()
            .zip(pool.parse().ok())
            .zip(seed.parse().ok())
            .and_then(|((n, pool), seed)| workloads::make_pool(name, n, pool, seed)),
        _ => None,
    };
    let Some((src, dst)) = parsed else {
        eprintln!(
            "workloads: bad arguments {args:?} (an unknown name, or a pool under 4 N)\n\n{USAGE}"
        );
        std::process::exit(2);
    };
    let bytes: Vec<u8> = src.iter().chain(&dst).flat_map(|v| v.to_le_bytes()).collect();
    if std::io::stdout().write_all(&bytes).is_err() {
        std::process::exit(1);
    }
}
