//! Descriptors for 64 layers x (K, V) side by side with the loop agents write today, and
//! gather lists. `cargo bench --bench desc`; group names `desc/<N>/<structure>`.

use std::time::Duration;

use corun::desc::{Cursor, Descriptor, Layout, Plan, Sge, WorkRequest};
use corun::{Grouper, Span};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "workloads/mod.rs"]
mod workloads;
use workloads::Structure;

fn benches(c: &mut Criterion) {
    let layers = workloads::kv_layers(16 * 1024);
    let layout = Layout::new(&layers);
    for n in [2048, 16_384] {
        for s in [
            Structure::NoBreaks,
            Structure::Mean(16),
            Structure::Singletons,
            Structure::Trace { page_size: 16 },
            Structure::TraceFresh { page_size: 16 },
        ] {
            let (src, dst) = workloads::make_u32(n, s, 42);
            let total = corun::count_runs(&src, &dst).unwrap() * layers.len();
            let mut spans = vec![Span::default(); n];
            let mut out = vec![Descriptor::default(); total];
            let (mut naive_runs, mut naive_out) = (vec![Span::default(); n], Vec::new());
            let (mut reqs, mut sges) =
                (vec![WorkRequest::default(); total], vec![Sge::default(); n * layers.len()]);

            let mut g = c.benchmark_group(format!("desc/{n}/{}", s.name()));
            g.throughput(Throughput::Elements(total as u64));
            g.warm_up_time(Duration::from_millis(300));
            g.measurement_time(Duration::from_secs(1));
            g.sample_size(20);
            let id = |name: &str| BenchmarkId::from_parameter(name);
            g.bench_function(id("corun descriptors_into"), |b| {
                b.iter(|| {
                    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans).unwrap();
                    plan.descriptors_into(&layout, Cursor::default(), &mut out).unwrap().descriptors
                })
            });
            g.bench_function(id("naive loop"), |b| {
                b.iter(|| {
                    workloads::naive_descriptors(
                        &src,
                        &dst,
                        &layers,
                        &mut naive_runs,
                        &mut naive_out,
                    )
                })
            });
            g.bench_function(id("corun gather_into"), |b| {
                b.iter(|| {
                    let plan = Plan::new(&Grouper::new(), &src, &dst, &mut spans).unwrap();
                    let w = plan.gather_into(&layout, 30, Cursor::default(), &mut reqs, &mut sges);
                    w.unwrap().requests
                })
            });
            g.finish();
        }
    }
}

criterion_group!(desc, benches);
criterion_main!(desc);
