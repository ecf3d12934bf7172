"""The lab's workloads, of two kinds.

**Request streams** (``Workload``, replayed through the stacks' real allocators by
``lab.replay`` and the ``stack_*`` labs): page size in tokens, pool occupancy, decode
growth and prefix sharing, named ``p<tokens>-occ<percent>-g<percent>`` (say
``p16-occ80-g0``); ``workloads(quick)`` is the grid, ``request_blocks`` one request's
length, ``by_name`` and ``names`` look them up.

**Page lists** (``WORKLOADS``, ``make``): one request's lists, as a prefill/decode pair of
paged allocators hands them out, sized to a pool of ``pool`` pages so that a KV pool of
that size can hold them.

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
import re
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np

from lab.results import ROOT

WORKLOADS = ["trace-p1", "trace-fresh-p1", "trace-p16", "breaks-5pct", "singletons"]


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


# --- request streams ------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A stream of requests: ``page_tokens`` tokens a page, pools kept at ``occupancy``,
    each live decode sequence growing a page with probability ``growth`` a step, and
    ``prefix_share`` of the requests repeating an earlier request's prefix (vLLM)."""

    name: str
    page_tokens: int
    occupancy: float
    growth: float
    prefix_share: float


PREFIX_SHARE = 0.3


def workloads(quick):
    """Page sizes 1, 16, 128 tokens at occupancies 50%, 80%, 95% with no decode growth, and
    growth of 5% and 30% a step at 16-token pages and 80% (``quick``: two of them)."""
    if quick:
        return [by_name("p16-occ80-g0"), by_name("p16-occ80-g30")]
    out = [by_name(f"p{pt}-occ{occ}-g0") for pt in (1, 16, 128) for occ in (50, 80, 95)]
    return out + [by_name(f"p16-occ80-g{g}") for g in (5, 30)]


NAME = re.compile(r"p([1-9][0-9]*)-occ([1-9][0-9]?)-g([0-9][0-9]?)")


def by_name(name):
    """The request stream named ``name`` (``p<tokens>-occ<percent>-g<percent>``: any
    values, not only the grid's), or ``ValueError`` naming the form and the grid."""
    m = NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"workload {name!r} is not p<tokens>-occ<percent>-g<percent>: "
                         f"the grid is {', '.join(names())}")
    tokens, occ, growth = (int(g) for g in m.groups())
    return Workload(name, tokens, occ / 100, growth / 100, PREFIX_SHARE)


def names():
    """The request-stream grid's names (the page lists' are ``WORKLOADS``)."""
    return [w.name for w in workloads(False)]


def request_blocks(rng, page_tokens, pool):
    """Blocks of one request: lognormal tokens (median 1,024), one in 200 a long context."""
    tokens = rng.lognormal(np.log(1024), 1.0)
    if rng.random() < 0.005:
        tokens *= 64
    return int(min(max(1, -(-int(tokens) // page_tokens)), pool // 4))
