"""Page lists of one request, as a prefill/decode pair of paged allocators hands them out
(the allocator-trace workloads of ``benches/workloads``, sized to a pool of ``pool``
pages so that a KV pool of that size can hold them).

Each allocator hands out its lowest free pages first (SGLang's allocator sorts its free
list); requests finish in random order, so their pages come back as holes between live
requests, and later allocations are stitched from those holes. Both pools are aged (twice
their size served) before the request is taken.

- ``trace-p1``: page size 1; prefill and decode pools both fragmented.
- ``trace-fresh-p1``: the same prefill pool into a fresh decode allocation (one range).
- ``trace-p16``: page size 16 (requests in 16-token pages: fewer, larger allocations).
- ``breaks-5pct``: runs whose lengths are geometric with mean 20 (5% of positions break),
  on both sides, as a pool with that fragmentation gives them.
- ``singletons``: every position breaks.

Every list holds distinct indices below ``pool``.
"""

import numpy as np

WORKLOADS = ["trace-p1", "trace-fresh-p1", "trace-p16", "breaks-5pct", "singletons"]


class Pool:
    def __init__(self, pages, rng):
        self.free = list(range(pages))
        self.live = []
        self.rng = rng

    def alloc(self, n):
        """`n` pages, finishing random live requests first until enough are free."""
        freed = False
        while len(self.free) < n or len(self.live) > 16:
            done = self.live.pop(int(self.rng.integers(len(self.live))))
            self.free.extend(done)
            freed = True
        if freed:
            self.free.sort()
        pages, self.free = self.free[:n], self.free[n:]
        self.live.append(pages)
        return pages


def _trace(n, pool, page_size, rng):
    prefill, decode = Pool(pool, rng), Pool(pool, rng)
    # Requests of 2K-16K tokens in pages, scaled to the pool: up to a sixteenth of it.
    biggest = max(1, min(16384 // page_size, pool // 16))
    smallest = max(1, min(2048 // page_size, biggest // 8))
    served = 0
    while served < 2 * pool:
        pages = int(rng.integers(smallest, biggest + 1))
        prefill.alloc(pages)
        decode.alloc(pages)
        served += pages
    return np.array(prefill.alloc(n)), np.array(decode.alloc(n))


def make(name, n, pool, seed=7):
    """``(src, dst)`` int32 page lists of ``n`` pages for workload ``name``, every index
    below ``pool`` (which must be at least ``4 * n``)."""
    if pool < 4 * n:
        raise ValueError(f"pool of {pool} pages is too small for {n} pages (needs {4 * n})")
    rng = np.random.default_rng(seed)
    if name == "trace-p1":
        src, dst = _trace(n, pool, 1, rng)
    elif name == "trace-fresh-p1":
        src, _ = _trace(n, pool, 1, rng)
        dst = np.arange(pool - n, pool)
    elif name == "trace-p16":
        src, dst = _trace(n, pool, 16, rng)
    elif name == "breaks-5pct":
        # Runs of mean 20 at random places, no page used twice: cut a permutation of the
        # pool's run slots.
        lens = rng.geometric(1 / 20, size=n)
        lens = lens[: int(np.searchsorted(np.cumsum(lens), n)) + 1]
        lens[-1] -= lens.sum() - n
        def side():
            order = rng.permutation(len(lens))
            starts = np.zeros(len(lens), dtype=np.int64)
            starts[order] = np.cumsum(lens[order] + 1) - (lens[order] + 1)  # a gap after each
            return np.concatenate([np.arange(s, s + k) for s, k in zip(starts, lens)])
        src, dst = side(), side()
    elif name == "singletons":
        src = np.arange(n) * 2
        dst = np.arange(n)[::-1] + n // 2
    else:
        raise ValueError(f"no workload named {name!r}: {', '.join(WORKLOADS)}")
    src, dst = np.asarray(src, dtype=np.int32), np.asarray(dst, dtype=np.int32)
    assert len(src) == len(dst) == n and src.max() < pool and dst.max() < pool
    assert len(np.unique(src)) == n and len(np.unique(dst)) == n
    return src, dst
