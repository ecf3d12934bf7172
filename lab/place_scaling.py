"""Placement's cost as the request grows (issue 37): ``corun.place`` for requests of 1K to
1M pages, side by side with numpy sorting the same window (``np.sort(free)``) in the same
process, so that the growth of one is read against a known ``O(w log w)``.

The shapes, each at every size ``n``:

- runs: the first side's pages in runs of ``1`` or ``7`` (short), ``64`` or ``256``
  (long) pages, each followed by a gap of twice its length (``first =
  concatenate(arange(s, s + r) for s in range(0, 3n, 3r))[:n]``);
- window: ``n + 64`` or ``4n + 64`` free pages (the adapters' default is ``4n + 64``),
  drawn from a pool of twice as many ids, so that free stretches are broken and runs must
  split;
- order: the window shuffled (a free queue's order) or sorted (SGLang's free list).

One line per case: ``place-scaling n=<n> run=<r> window=<k>n+64 order=<o> place_ms=<ms>
sort_ms=<ms> place_ns_per_page=<ns> sort_ns_per_page=<ns> place/sort=<x>`` (per page of
the request, ``n``; medians of interleaved rounds); then per shape the growth of the
time per page from the smallest size to the largest (flat is linear).
"""

import numpy as np

import corun
from lab.timing import median_seconds

SIZES = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20]
RUNS = [1, 7, 64, 256]
WINDOWS = [1, 4]
WLABEL = {1: "n+64", 4: "4n+64"}
ORDERS = ["shuffled", "sorted"]


def case(n, run, k, order, seed=37):
    """``(first, free)`` int32 pages for one shape (the module's docstring)."""
    rng = np.random.default_rng(seed)
    i = np.arange(n, dtype=np.int64)
    first = ((i // run) * 3 * run + i % run).astype(np.int32)
    w = k * n + 64
    free = rng.permutation(2 * w)[:w].astype(np.int32)
    return first, (np.sort(free) if order == "sorted" else free)


def check(first, free):
    """What every placement must give before it is timed: one distinct free page per
    request page, and the rest of the window."""
    chosen, rest, _ = corun.place(first, free)
    assert len(chosen) == len(first) and len(rest) == len(free) - len(first)
    assert np.array_equal(np.sort(np.concatenate([chosen, rest])), np.sort(free))


def run_section(max_pages, rounds, min_time):
    """Every shape at every size up to ``max_pages``: prints the case lines and the growth
    lines; returns ``{(run, k, order): [(n, place_s, sort_s), ...]}``."""
    sizes = [n for n in SIZES if n <= max_pages]
    print(f"\nplacement scaling (corun.place against np.sort of its window, same process; "
        f"medians of {rounds} interleaved rounds; n up to {max(sizes):,}):")
    got = {}
    for n in sizes:
        for run in RUNS:
            for k in WINDOWS:
                for order in ORDERS:
                    first, free = case(n, run, k, order)
                    check(first, free)
                    place_s, sort_s = median_seconds(
                        [lambda: corun.place(first, free), lambda: np.sort(free)], rounds, min_time)
                    got.setdefault((run, k, order), []).append((n, place_s, sort_s))
                    print(f"place-scaling n={n} run={run} window={WLABEL[k]} order={order} "
                        f"place_ms={place_s * 1e3:.3f} sort_ms={sort_s * 1e3:.3f} "
                        f"place_ns_per_page={place_s / n * 1e9:.1f} "
                        f"sort_ns_per_page={sort_s / n * 1e9:.1f} "
                        f"place/sort={place_s / sort_s:.2f}", flush=True)
    for (run, k, order), rows in got.items() if len(sizes) > 1 else ():
        (n0, p0, s0), (n1, p1, s1) = rows[0], rows[-1]
        print(f"place-scaling-growth run={run} window={WLABEL[k]} order={order} n={n0}..{n1} "
            f"place_per_page_x={(p1 / n1) / (p0 / n0):.2f} sort_per_page_x={(s1 / n1) / (s0 / n0):.2f}")
    return got
