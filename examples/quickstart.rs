//! Maps a simulated prefill page list onto a decode page list and prints the transfers.
//!
//! Both servers run a paged KV-cache allocator; earlier requests came and went in random
//! order, so the free lists are fragmented. The request's pages are contiguous only in
//! stretches, and corun finds the stretches where *both* sides are contiguous: one RDMA
//! transfer each per layer, instead of one per page.

use corun::Span;

/// A page pool with a FIFO free list, aged by requests that finish in random order.
struct Pool {
    free: std::collections::VecDeque<u32>,
    rng: u64,
}

impl Pool {
    fn new(pages: u32, seed: u64) -> Self {
        let mut pool = Pool { free: (0..pages).collect(), rng: seed };
        // Age the pool: keep 12 requests live, finish one at random, start another.
        let mut live: Vec<Vec<u32>> = Vec::new();
        for _ in 0..200 {
            let pages = 4 + pool.next() % 60;
            live.push(pool.alloc(pages as usize));
            if live.len() > 12 {
                let done = live.swap_remove((pool.next() % live.len() as u64) as usize);
                pool.free.extend(done);
            }
        }
        pool
    }

    fn next(&mut self) -> u64 {
        // xorshift64: a fixed seed gives the same pools every run.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn alloc(&mut self, pages: usize) -> Vec<u32> {
        self.free.drain(..pages.min(self.free.len())).collect()
    }
}

fn main() -> Result<(), corun::Error> {
    // A 2,048-token prefill chunk at page size 16: 128 pages on each side.
    let pages = 128;
    let src = Pool::new(4096, 0x9E37_79B9_7F4A_7C15).alloc(pages); // prefill pages
    let dst = Pool::new(4096, 0xD1B5_4A32_D192_ED03).alloc(pages); // decode pages

    let mut spans = [Span::default(); 128];
    let progress = corun::group_into(&src, &dst, &mut spans)?;
    let spans = &spans[..progress.spans];

    for span in spans {
        let (s, d) = (src[span.start], dst[span.start]);
        println!(
            "src pages {s:>5}..{:<5} -> dst pages {d:>5}..{:<5} ({:>3} pages)",
            s + span.len as u32,
            d + span.len as u32,
            span.len
        );
    }
    println!(
        "{pages} pages in {} runs: {} transfers per layer instead of {pages} ({:.1}x fewer)",
        spans.len(),
        spans.len(),
        pages as f64 / spans.len() as f64
    );
    Ok(())
}
