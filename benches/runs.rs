//! corun side by side with the scalar reference, the loops people write today, and the
//! memory floor, per workload. Throughput is in elements (positions) per second.
//!
//! `cargo bench` runs every group; `cargo bench -- 'u32/64K'` one size. Group names:
//! `<type>/<size>/<structure>`.

use std::time::Duration;

use corun::{Index, Span};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::{Floor, Structure};

const SIZES: [(usize, &str); 5] =
    [(256, "256"), (4096, "4K"), (65_536, "64K"), (1 << 20, "1M"), (1 << 24, "16M")];

fn bench_type<T: Index + Floor>(c: &mut Criterion, ty: &str, make: workloads::Make<T>) {
    for (len, size) in SIZES {
        for structure in Structure::ALL {
            let (src, dst) = make(len, structure, 42);
            let pairs: Vec<(T, T)> = src.iter().copied().zip(dst.iter().copied()).collect();
            let n = corun::count_runs(&src, &dst).unwrap();
            let mut out = vec![Span::default(); n];

            let mut g = c.benchmark_group(format!("{ty}/{size}/{}", structure.name()));
            g.throughput(Throughput::Elements(len as u64));
            g.warm_up_time(Duration::from_millis(300));
            g.measurement_time(Duration::from_secs(if len >= 1 << 20 { 3 } else { 1 }));
            g.sample_size(20);
            let id = |name: &str| BenchmarkId::from_parameter(name);

            g.bench_function(id("corun::group_into"), |b| {
                b.iter(|| corun::group_into(&src, &dst, &mut out).unwrap().spans)
            });
            g.bench_function(id("corun::runs"), |b| {
                b.iter(|| corun::runs(&src, &dst).unwrap().map(|s| s.len ^ s.start).sum::<usize>())
            });
            g.bench_function(id("corun::count_runs"), |b| {
                b.iter(|| corun::count_runs(&src, &dst).unwrap())
            });
            g.bench_function(id("scalar::group_into"), |b| {
                b.iter(|| corun::scalar::group_into(&src, &dst, &mut out).unwrap().spans)
            });
            g.bench_function(id("chunk_by"), |b| b.iter(|| workloads::chunk_by(&pairs, &mut out)));
            g.bench_function(id("naive zip loop"), |b| {
                b.iter(|| workloads::naive(&src, &dst, &mut out))
            });
            g.bench_function(id("floor (two-pass sum)"), |b| b.iter(|| T::floor(&src, &dst)));
            g.finish();
        }
    }
}

fn benches(c: &mut Criterion) {
    bench_type::<u32>(c, "u32", workloads::make_u32);
    bench_type::<u64>(c, "u64", workloads::make_u64);
}

criterion_group!(runs, benches);
criterion_main!(runs);
