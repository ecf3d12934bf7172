"""Page lists of one request, as a prefill/decode pair of paged allocators hands them out,
sized to a pool of ``pool`` pages so that a KV pool of that size can hold them.

The lists are made by the one workload generator, in Rust (``benches/workloads/mod.rs``,
``make_pool``), and read here from what its ``workloads`` example writes
(``cargo run --release --example workloads -- NAME N POOL SEED``), cached under
``target/workloads/``: the Python measurements and the Rust ones run on the same lists.

- ``trace-p1``: page size 1; prefill and decode pools both fragmented (an allocator that
  hands out its lowest free pages first, requests finishing in random order, both pools
  aged by twice their size in requests first).
- ``trace-fresh-p1``: the same prefill pool into a fresh decode allocation (one range).
- ``trace-p16``: page size 16 (requests in 16-token pages: fewer, larger allocations).
- ``breaks-5pct``: runs whose lengths are geometric with mean 20 (5% of positions break),
  on both sides, at shuffled places.
- ``singletons``: every position breaks.

Every list holds distinct indices below ``pool``.
"""

import os
import shutil
import subprocess

import numpy as np

WORKLOADS = ["trace-p1", "trace-fresh-p1", "trace-p16", "breaks-5pct", "singletons"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make(name, n, pool, seed=7):
    """``(src, dst)`` int32 page lists of ``n`` pages for workload ``name``, every index
    below ``pool`` (which must be at least ``4 * n``)."""
    if name not in WORKLOADS:
        raise ValueError(f"no workload named {name!r}: {', '.join(WORKLOADS)}")
    if pool < 4 * n:
        raise ValueError(f"pool of {pool} pages is too small for {n} pages (needs {4 * n})")
    cache = os.path.join(ROOT, "target", "workloads", f"{name}-{n}-{pool}-{seed}.bin")
    if not os.path.exists(cache):
        if shutil.which("cargo") is None:
            raise RuntimeError("workloads.py reads the page lists benches/workloads writes: "
                               "it needs cargo (https://rustup.rs) to make them once")
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        out = subprocess.run(
            ["cargo", "run", "-q", "--release", "--example", "workloads", "--",
             name, str(n), str(pool), str(seed)],
            cwd=ROOT, check=True, capture_output=True).stdout
        with open(cache + ".tmp", "wb") as f:
            f.write(out)
        os.replace(cache + ".tmp", cache)
    pages = np.fromfile(cache, dtype="<u4")
    if len(pages) != 2 * n:
        raise RuntimeError(f"{cache}: {len(pages)} pages, expected {2 * n}")
    src, dst = pages[:n].astype(np.int32), pages[n:].astype(np.int32)
    assert src.max() < pool and dst.max() < pool
    assert len(np.unique(src)) == n and len(np.unique(dst)) == n
    return src, dst
