//! Bench workloads and the implementations corun is measured against. Shared by
//! `benches/runs.rs` (criterion) and `examples/perf_report.rs`. Same seed every run.
#![allow(dead_code)]

use corun::{Index, Span};

/// How the runs are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structure {
    /// One run over the whole input.
    NoBreaks,
    /// Run lengths geometric with this mean.
    Mean(u32),
    /// Every position a break: a span per position.
    Singletons,
    /// A simulated paged allocator on each side, mapping requests of 2K-16K tokens with
    /// this page size; pages are freed in random order, so free lists fragment (both
    /// pools are aged before the trace starts).
    Trace { page_size: u32 },
    /// The same prefill pool, into a fresh decode allocation: `dst` is one ascending
    /// range (a decode pool that nothing has freed into yet).
    TraceFresh { page_size: u32 },
}

impl Structure {
    pub const ALL: [Structure; 7] = [
        Structure::NoBreaks,
        Structure::Mean(256),
        Structure::Mean(16),
        Structure::Mean(4),
        Structure::Singletons,
        Structure::Trace { page_size: 1 },
        Structure::Trace { page_size: 16 },
    ];

    pub fn name(&self) -> String {
        match self {
            Structure::NoBreaks => "no-breaks".into(),
            Structure::Mean(m) => format!("mean-{m}"),
            Structure::Singletons => "singletons".into(),
            Structure::Trace { page_size } => format!("trace-p{page_size}"),
            Structure::TraceFresh { page_size } => format!("trace-fresh-p{page_size}"),
        }
    }
}

/// Makes `(src, dst)` of a length and structure from a seed.
pub type Make<T> = fn(usize, Structure, u64) -> (Vec<T>, Vec<T>);

/// xorshift64*: fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A page pool that hands out the lowest free pages first (SGLang's allocator sorts
/// its free list); requests finish in random order, so their pages come back as holes
/// between live requests, and later allocations are stitched from those holes.
struct Pool {
    free: std::collections::VecDeque<u32>,
    live: Vec<Vec<u32>>,
}

impl Pool {
    fn new(pages: u32) -> Self {
        Pool { free: (0..pages).collect(), live: Vec::new() }
    }
    /// Allocates `n` pages, first finishing random live requests until enough are free.
    fn alloc(&mut self, n: usize, rng: &mut Rng) -> Vec<u32> {
        let mut freed = false;
        while self.free.len() < n || self.live.len() > 16 {
            let done = self.live.swap_remove(rng.below(self.live.len() as u64) as usize);
            self.free.extend(done);
            freed = true;
        }
        if freed {
            self.free.make_contiguous().sort_unstable();
        }
        let pages: Vec<u32> = self.free.drain(..n).collect();
        self.live.push(pages.clone());
        pages
    }
}

/// `(src, dst)` of `len` positions with the given structure, as `u64` values.
pub fn make_u64(len: usize, structure: Structure, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut rng = Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15);
    let (mut src, mut dst) = (Vec::with_capacity(len), Vec::with_capacity(len));
    match structure {
        Structure::NoBreaks => {
            src.extend((0..len as u64).map(|i| 1000 + i));
            dst.extend((0..len as u64).map(|i| 7 + i));
        }
        Structure::Singletons => {
            src.extend((0..len as u64).map(|i| 2 * i));
            dst.extend(0..len as u64);
        }
        Structure::Mean(mean) => {
            let (mut s, mut d) = (rng.below(1 << 30), rng.below(1 << 30));
            for _ in 0..len {
                src.push(s);
                dst.push(d);
                if rng.below(u64::from(mean)) == 0 {
                    // A break: one side or both jump somewhere else.
                    match rng.below(3) {
                        0 => s = rng.below(1 << 30),
                        1 => d = rng.below(1 << 30),
                        _ => (s, d) = (rng.below(1 << 30), rng.below(1 << 30)),
                    }
                } else {
                    (s, d) = (s + 1, d + 1);
                }
            }
        }
        Structure::Trace { page_size } => {
            // Pool sizes: 4x the pages 16 live requests of up to 16K tokens hold.
            let pool = 4 * 16 * 16_384 / page_size;
            let (mut prefill, mut decode) = (Pool::new(pool), Pool::new(pool));
            // Age both pools first: serve twice their size in requests, so that the free
            // lists are as scrambled as in a server that has been up for a while.
            let mut served = 0;
            while served < 2 * pool as usize {
                let pages = (2048 + rng.below(16_384 - 2048 + 1) as u32).div_ceil(page_size);
                prefill.alloc(pages as usize, &mut rng);
                decode.alloc(pages as usize, &mut rng);
                served += pages as usize;
            }
            while src.len() < len {
                let tokens = 2048 + rng.below(16_384 - 2048 + 1) as u32;
                let pages = tokens.div_ceil(page_size) as usize;
                src.extend(prefill.alloc(pages, &mut rng).into_iter().map(u64::from));
                dst.extend(decode.alloc(pages, &mut rng).into_iter().map(u64::from));
            }
            src.truncate(len);
            dst.truncate(len);
        }
        Structure::TraceFresh { page_size } => {
            (src, _) = make_u64(len, Structure::Trace { page_size }, seed);
            dst.extend((0..len as u64).map(|i| 5000 + i));
        }
    }
    (src, dst)
}

/// The same as `u32` values (all workloads stay below 2^32).
pub fn make_u32(len: usize, structure: Structure, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let (s, d) = make_u64(len, structure, seed);
    let narrow = |v: Vec<u64>| v.into_iter().map(|x| x as u32).collect();
    (narrow(s), narrow(d))
}

/// `slice::chunk_by` over an array of pairs (the data layout a Rust user has today).
pub fn chunk_by<T: Index>(pairs: &[(T, T)], out: &mut [Span]) -> usize {
    let step =
        |a: &(T, T), b: &(T, T)| a.0.checked_succ() == Some(b.0) && a.1.checked_succ() == Some(b.1);
    let mut start = 0;
    let mut n = 0;
    for (chunk, slot) in pairs.chunk_by(step).zip(out.iter_mut()) {
        *slot = Span { start, len: chunk.len() };
        start += chunk.len();
        n += 1;
    }
    n
}

/// The loop people write: `zip().enumerate()` over adjacent pairs.
pub fn naive<T: Index>(src: &[T], dst: &[T], out: &mut [Span]) -> usize {
    let mut start = 0;
    let mut n = 0;
    let pairs = src.iter().zip(&src[1..]).zip(dst.iter().zip(&dst[1..]));
    for (i, ((s0, s1), (d0, d1))) in pairs.enumerate() {
        if s0.checked_succ() != Some(*s1) || d0.checked_succ() != Some(*d1) {
            out[n] = Span { start, len: i + 1 - start };
            n += 1;
            start = i + 1;
        }
    }
    if start < src.len() {
        out[n] = Span { start, len: src.len() - start };
        n += 1;
    }
    n
}

/// The floor: what merely reading every byte costs. Two passes, a vectorised wrapping
/// sum of `src` and then one of `dst`: one load-and-add per vector. (One pass over both
/// arrays at once varied by 2x between processes of the same binary, likely aliasing
/// between the two streams; the two-pass sum is stable to a few percent.)
pub trait Floor: Copy {
    fn floor(src: &[Self], dst: &[Self]) -> u64;
    /// The span-write floor: read both arrays and write one span per position into
    /// `out` (as long), comparing nothing. That is the least any `group_into` does on
    /// singletons, where every position is a span of its own: 16 bytes written per 8 (or
    /// 16) read, which at 4K positions no longer fits L1 beside the input.
    fn span_floor(src: &[Self], dst: &[Self], out: &mut [Span]);
}

macro_rules! floor {
    ($($t:ty),*) => {$(
        impl Floor for $t {
            fn floor(src: &[Self], dst: &[Self]) -> u64 {
                // A wrapping sum reassociates: LLVM vectorises it with several
                // independent vector accumulators (an array of 32 accumulators made it
                // emit gathers on AVX-512).
                let sum = |x: &[$t]| x.iter().fold(0 as $t, |s, &v| s.wrapping_add(v)) as u64;
                sum(std::hint::black_box(src)).wrapping_add(sum(std::hint::black_box(dst)))
            }
            fn span_floor(src: &[Self], dst: &[Self], out: &mut [Span]) {
                for ((o, &s), &d) in out.iter_mut().zip(src).zip(dst) {
                    *o = Span { start: s as usize, len: d as usize };
                }
            }
        }
    )*};
}
floor!(u32, u64);

/// 64 model layers x (K, V): 128 layer buffers of `page` bytes per page, 1 GiB apart.
pub fn kv_layers(page: u64) -> Vec<corun::desc::Layer> {
    (0..128u64).map(|b| corun::desc::Layer::new(b << 30, (1 << 44) + (b << 30), page)).collect()
}

/// The descriptor loop agents write today: group with a zip loop, then for each layer
/// and run push `(base + index * item_len, ..)` with unchecked arithmetic.
pub fn naive_descriptors(
    src: &[u32],
    dst: &[u32],
    layers: &[corun::desc::Layer],
    runs: &mut [Span],
    out: &mut Vec<corun::desc::Descriptor>,
) -> usize {
    let n = naive(src, dst, runs);
    out.clear();
    for l in layers {
        for r in &runs[..n] {
            out.push(corun::desc::Descriptor {
                src_addr: l.src_base + u64::from(src[r.start]) * l.item_len,
                dst_addr: l.dst_base + u64::from(dst[r.start]) * l.item_len,
                len: r.len as u64 * l.item_len,
            });
        }
    }
    out.len()
}

/// The end-to-end workloads (`python/workloads.py` reads these through the `workloads`
/// example): `(src, dst)` of `n` distinct pages each, every index below `pool` (at least
/// `4 * n`), or `None` for an unknown name or too small a pool.
///
/// - `trace-p1`, `trace-p16`: the paged allocator above on both sides, pools of `pool`
///   pages aged by twice their size in requests of 2K-16K tokens (scaled to the pool);
/// - `trace-fresh-p1`: the same prefill pool into a fresh decode range (the pool's top);
/// - `breaks-5pct`: runs of geometric length (mean 20) at shuffled places on each side;
/// - `singletons`: every position breaks.
pub fn make_pool(name: &str, n: usize, pool: u32, seed: u64) -> Option<(Vec<u32>, Vec<u32>)> {
    if (pool as usize) < 4 * n {
        return None;
    }
    let mut rng = Rng::new(seed ^ 0x05EE_D0FC_05E5);
    let trace = |page_size: u32, rng: &mut Rng| {
        let (mut prefill, mut decode) = (Pool::new(pool), Pool::new(pool));
        let biggest = (16_384 / page_size).min(pool / 16).max(1);
        let smallest = (2048 / page_size).min(biggest / 8).max(1);
        let mut served = 0;
        while served < 2 * pool as usize {
            let pages = (smallest + rng.below(u64::from(biggest - smallest + 1)) as u32) as usize;
            prefill.alloc(pages, rng);
            decode.alloc(pages, rng);
            served += pages;
        }
        (prefill.alloc(n, rng), decode.alloc(n, rng))
    };
    Some(match name {
        "trace-p1" => trace(1, &mut rng),
        "trace-p16" => trace(16, &mut rng),
        "trace-fresh-p1" => (trace(1, &mut rng).0, (pool - n as u32..pool).collect()),
        "breaks-5pct" => {
            // Run lengths of mean 20 (a geometric draw per run) summing to n.
            let mut lens = Vec::new();
            let mut left = n;
            while left > 0 {
                let mut len = 1;
                while rng.below(20) != 0 {
                    len += 1;
                }
                lens.push(len.min(left));
                left -= len.min(left);
            }
            // Each side places the runs in a shuffled order, a one-page gap after each.
            let side = |rng: &mut Rng| {
                let mut order: Vec<usize> = (0..lens.len()).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                let mut starts = vec![0u32; lens.len()];
                let mut at = 0u32;
                for &k in &order {
                    starts[k] = at;
                    at += lens[k] as u32 + 1;
                }
                let mut out = Vec::with_capacity(n);
                for (k, &len) in lens.iter().enumerate() {
                    out.extend(starts[k]..starts[k] + len as u32);
                }
                out
            };
            (side(&mut rng), side(&mut rng))
        }
        "singletons" => (
            (0..n as u32).map(|i| 2 * i).collect(),
            (0..n as u32).rev().map(|i| i + n as u32 / 2).collect(),
        ),
        _ => return None,
    })
}
