"""The ways of turning a request's page lists into transfers that the replays count
(``lab.replay``'s module docs name them), the table that prices them, and the
placement window's syntax (``--window``)."""

import argparse
import time

import numpy as np

import corun

# Gather lists: at most this many segments a work request.
MAX_SGE = 30
# Posting costs per descriptor: Mooncake over TCP (measured here), NIXL (vLLM PR 55841's
# figures) and an RDMA work request (cuMemcpyBatchAsync, vLLM PR 48434).
COSTS_US = {"mooncake_tcp": 50.0, "nixl": 3.4, "rdma": 0.5}
LAYER_BUFFERS = 128  # 64 layers x (K, V)


def gather_wrs(src, dst, direction):
    """Work requests of gather lists: one per destination run (`direction`), each
    gathering the concurrent runs inside it as segments, at most MAX_SGE per request."""
    d_starts = np.cumsum(np.concatenate([[0], corun.runs(dst, dst, direction=direction)[2]]))
    c_lens = corun.runs(src, dst, direction=direction)[2]
    c_starts = np.concatenate([[0], np.cumsum(c_lens)[:-1]])
    segs = np.diff(np.searchsorted(c_starts, d_starts))
    return int(np.sum(-(-segs // MAX_SGE)))


WAYS = {
    "asc": lambda s, d: corun.count_runs(s, d),
    "either": lambda s, d: corun.count_runs(s, d, direction="either"),
    "orderfree": lambda s, d: corun.count_runs(*corun.sort_by_destination(s, d)),
    "gather_wrs": lambda s, d: gather_wrs(s, d, "ascending"),
    "gather_wrs_either": lambda s, d: gather_wrs(s, d, "either"),
}


class Window:
    """A placement window of ``k * n + c`` pages for a request of ``n`` pages."""

    def __init__(self, k, c):
        self.k, self.c = k, c

    def __call__(self, n):
        return self.k * n + self.c

    def __str__(self):
        return f"{self.k}n+{self.c}" if self.k else str(self.c)

    @staticmethod
    def parse(text):
        t = text.replace(" ", "")
        if t.isdigit():
            return Window(0, int(t))
        k, _, c = t.partition("n")
        if not (k == "" or k.isdigit()) or not (c == "" or (c[0] == "+" and c[1:].isdigit())):
            raise argparse.ArgumentTypeError(f"window must be pages or KnC (say 4n+64), got {text!r}")
        return Window(int(k or 1), int(c[1:] or 0))


def table(lists, ways, out):
    """One row per way: descriptors, their spread, CPU time and posting time."""
    pages = np.array([len(s) for s, _ in lists])
    out("\n| way | descriptors (per buffer) | p50 / p99 per request | pages per descriptor p50 / worst 1% "
        "| CPU µs per request | posting ms per request at Mooncake TCP / NIXL / RDMA (128 buffers) |")
    out("|---|---|---|---|---|---|")
    totals = {}
    for way, f in ways.items():
        t = time.perf_counter()
        c = np.array([f(s, d) for s, d in lists])
        cpu = (time.perf_counter() - t) / max(len(lists), 1)
        per = pages / np.maximum(c, 1)
        post = " / ".join(f"{np.mean(c) * LAYER_BUFFERS * us / 1000:.2f}" for us in COSTS_US.values())
        out(f"| {way} | {int(c.sum())} | {np.percentile(c, 50):.0f} / {np.percentile(c, 99):.0f} "
            f"| {np.percentile(per, 50):.1f} / {np.percentile(per, 1):.1f} | {cpu * 1e6:.1f} | {post} |")
        totals[way] = int(c.sum())
    return totals
