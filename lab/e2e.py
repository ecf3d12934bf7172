"""KV pages through real transfer engines, end to end, every byte verified.

A prefill process (this one) and a decode process (spawned) each hold a KV pool shaped
like a served model's: 64 layers x (K, V) = 128 layer buffers of ``pool`` pages of
``--page-bytes`` bytes (default 256: one token of one 128-dim bf16 KV head, what a rank
of Qwen2.5-32B, 64 layers and 8 KV heads, holds at tensor parallelism 8 with page size
1). Every 8-byte word of the prefill pool names its layer, K or V, page and offset. A
request's page lists (``workloads``: allocator traces, 5% breaks, singletons) move
through each engine in each way:

- ``sglang``: SGLang 0.5.23's real helper, then that backend's real per-layer loop
  (``sglang_ref``), into the engine.
- ``per_page``: one descriptor per page per layer buffer: NIXL's prepped lists (how
  SGLang's and vLLM's NIXL connectors send KV pages: prepared once for the whole pool,
  indices per transfer) and per-page Mooncake batches.
- ``corun``: ``corun.transfer_descriptors`` in the form the engine takes (NIXL: Nx3
  arrays; Mooncake: lists, and arrays measured beside them). On NIXL, when the runs are
  nearly as many as the pages (``NIXL_PREPPED_ABOVE``), there is nothing to merge, and
  corun hands over the pool's prepped per-page lists with indices instead: NIXL takes
  those at about 0.2 µs per descriptor against 0.35 µs for Nx3 arrays (descriptors and
  handoff of the all-singletons rows, N = 16,384, in
  ``results/intel-xeon-avx512f-2cpu/2026-11-30-09dddf3/e2e-nixl.txt``).
  ``corun.count_runs`` counts the runs first (no arrays built).

Mooncake's TCP transport rejects a batch of 4,096 transfers ("TCP lane queue-full"), so
every Mooncake way posts batches of ``MOONCAKE_BATCH``. After each way the decode side
checks every byte of every page it was sent, and that every other byte of its pool is
still zero, then clears the pages for the next way.

    python lab/e2e.py            # N = 2,048 and 16,384 pages, every workload, both engines
    python lab/e2e.py --quick    # N = 256, a pool of 1,024 pages: seconds
    python lab/e2e.py --replay 40   # 40 requests per allocator from replay.py, every way

With ``--replay`` the requests come from the real allocators (``replay.py``: vLLM 0.33's
free queue, SGLang's paged allocator) and move in the ways of issue 22 and 23 side by side
(ascending, either-direction, order-free, placed), each request verified; the last lines,
one per engine and allocator:
``e2e-replay engine=<name> allocator=<vllm|sglang> requests=<n> verified=yes asc=<d>/<ms>ms
either=<d>/<ms>ms orderfree=<d>/<ms>ms placed=<d>/<ms>ms``. On NIXL, vLLM's requests also
go the way vLLM 0.33's NIXL connector posts them (prepped descriptor lists, one
descriptor per region and block, ids as its ``_compute_desc_ids`` computes them,
``make_prepped_xfer`` in vLLM's order: ``vllm_ids``) and with the same ids in corun's order
(each run descending on both sides listed ascending, so that NIXL's own merge of
neighbours adjacent in the same order takes it: ``ordered_ids``); the line gains
``vllm_ids=<ids>/<ms>ms vllm_ids_nixl=<d> ordered_ids=<ids>/<ms>ms ordered_ids_nixl=<d>``,
ids per buffer and the descriptors per buffer NIXL posted after its merge (its
telemetry's ``descCount``). NIXL 1.5 merges prepped descriptors itself (``make_prepped_xfer``,
unless ``skip_desc_merge``): vLLM's order posts as many as its ascending runs (``asc``),
corun's order as many as its either-direction runs (``either``).

The last lines, one per engine and workload:
``e2e engine=<name> workload=<name> pages=<N> verified=yes corun_ms=<x> sglang_ms=<y> per_page_ms=<z>``
(for the largest N run).
"""

import argparse
import os
import sys
import time

import numpy as np

if not __package__:  # run as a file (python lab/e2e.py): the checkout first on sys.path
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import corun
from lab import nixl_exit, results, workloads
from lab.peers import sglang_ref, upstream
from lab.e2e_engines import (BUFFERS, ENGINES, LAYERS, MOONCAKE_BATCH, Session, TransferError,
                             post_sampled, timed, total)
from lab.e2e_replay import REPLAY_WAYS, main_replay, merge_order, replayed, vllm_desc_ids

__all__ = ["Session", "TransferError", "REPLAY_WAYS", "merge_order", "replayed", "vllm_desc_ids"]

# Runs per page above which corun hands NIXL the prepped per-page lists (see the module
# docs): the break-even of 0.2 µs per page descriptor against 0.35 µs per run descriptor.
NIXL_PREPPED_ABOVE = 0.6


def mooncake_ways(s, src, dst, limit):
    """The ways, each a function that moves the pages once and returns (descriptor
    count, time parts, buffers sent)."""

    def sglang():
        p = {}
        groups = timed(p, "grouping", lambda: sglang_ref.group_concurrent_contiguous(src, dst))
        blocks = timed(p, "descriptors", lambda: sglang_ref.mooncake_blocks(groups, s.layers()))
        return len(blocks[0]), p, post_sampled(s, blocks, p, limit)

    def per_page():
        def build():
            pb = np.uint64(s.pool.page_bytes)
            sa = (np.array(s.src_bases, np.uint64)[:, None] + src.astype(np.uint64) * pb).ravel()
            da = (np.array(s.dst_bases, np.uint64)[:, None] + dst.astype(np.uint64) * pb).ravel()
            return sa.tolist(), da.tolist(), [s.pool.page_bytes] * len(sa)

        p = {}
        descs = timed(p, "descriptors", build)
        return len(descs[0]), p, post_sampled(s, descs, p, limit)

    def corun_way(form):
        def way():
            p = {}
            s.check_pages(src, dst)
            d = timed(p, "descriptors", lambda: corun.transfer_descriptors(
                src, dst, s.src_bases, s.dst_bases, s.item_lens, form=form))
            return len(d[0]), p, post_sampled(s, d, p, limit)
        return way

    return {"sglang": sglang, "per_page": per_page,
            "corun_lists": corun_way("lists"), "corun_arrays": corun_way("arrays")}


def nixl_ways(s, src, dst, limit):
    e = s.engine
    if e.prepped is None:
        e.prep(s.remote_base, s.pool)

    def xfer(p, local, remote, what):
        t = time.perf_counter()
        p["handoff"] = e.xfer(local, remote, what)
        p["transfer"] = time.perf_counter() - t - p["handoff"]

    def sglang():
        p = {}
        groups = timed(p, "grouping", lambda: sglang_ref.group_concurrent_contiguous(src, dst))
        local, remote = timed(p, "descriptors", lambda: sglang_ref.nixl_reqs(groups, s.layers()))
        xfer(p, local, remote, "sglang way")
        return len(local), p, BUFFERS

    def prepped(p):
        def indices():
            # As SGLang's repeat_indices_over_layers: buffer b's slots start at b * pages.
            off = np.arange(BUFFERS, dtype=np.int64)[:, None] * s.pool.pages
            return (off + src[None, :]).ravel(), (off + dst[None, :]).ravel()

        si, di = timed(p, "descriptors", indices)
        e.prepped_xfer(si, di, "per-page prepped", p)
        return len(si), p, BUFFERS

    def per_page():
        return prepped({})

    def corun_way():
        p = {}
        s.check_pages(src, dst)
        runs = timed(p, "grouping", lambda: corun.count_runs(src, dst))
        if runs > NIXL_PREPPED_ABOVE * len(src):
            # Nothing to merge: the per-page lists the pool prepared, by index.
            return prepped(p)
        local, remote = timed(p, "descriptors", lambda: corun.transfer_descriptors(
            src, dst, s.src_bases, s.dst_bases, s.item_lens, form="nixl"))
        xfer(p, local, remote, "corun way")
        return len(local), p, BUFFERS

    return {"sglang": sglang, "per_page": per_page, "corun_nixl": corun_way}


WAYS = {"mooncake": mooncake_ways, "nixl": nixl_ways}
PARTS = ["grouping", "descriptors", "handoff", "transfer"]



def measure(s, way, src, dst, rounds):
    """Runs ``way`` ``rounds`` times, each checked by the decode side; the median round
    (by total) with its parts."""
    results = []
    for _ in range(rounds):
        count, parts, sent = way()
        s.check(src, dst, sent)
        results.append((total(parts), count, parts, sent))
    results.sort(key=lambda r: r[0])
    return results[len(results) // 2][1:]


def run(engine_name, sizes, names, page_bytes, rounds, limit, report):
    """Every workload at every size through one engine; returns the summary rows."""
    rows = []
    for n in sizes:
        pool_pages = 4 * n
        s = Session(engine_name, pool_pages, page_bytes)
        try:
            # Warm up: the engine's connection and SGLang's compiled code.
            warm = workloads.make("trace-p1", min(n, 64), pool_pages)
            for way in WAYS[engine_name](s, *warm, limit).values():
                measure(s, way, *warm, 1)
            for name in names:
                src, dst = workloads.make(name, n, pool_pages)
                ways = {}
                for way_name, way in WAYS[engine_name](s, src, dst, limit).items():
                    count, parts, sent = ways[way_name] = measure(s, way, src, dst, rounds)
                    cells = " | ".join(f"{parts.get(k, 0) * 1e3:.1f}" for k in PARTS)
                    note = "" if sent == BUFFERS else f" (transfer of {sent} of {BUFFERS} buffers, scaled)"
                    report(f"| {engine_name} | {name} | {n} | {way_name}{note} | {count:,} | {cells} | "
                           f"{total(parts) * 1e3:.1f} |")
                corun_ms = min(total(p) for w, (_, p, _) in ways.items() if w.startswith("corun"))
                rows.append((engine_name, name, n, corun_ms * 1e3,
                             total(ways["sglang"][1]) * 1e3, total(ways["per_page"][1]) * 1e3))
        finally:
            s.close()
    return rows



def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 256: seconds")
    ap.add_argument("--pages", type=int, nargs="*", help="request sizes N (default 2048 16384)")
    ap.add_argument("--engines", nargs="*", default=list(ENGINES), choices=list(ENGINES))
    ap.add_argument("--workloads", nargs="*", default=workloads.WORKLOADS, choices=workloads.WORKLOADS)
    ap.add_argument("--page-bytes", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per way (the median is kept)")
    ap.add_argument("--sample-over", type=int, default=150_000,
                    help="Mooncake ways with more descriptors send only the first buffers' "
                         "and scale the transfer time")
    ap.add_argument("--replay", type=int, metavar="REQUESTS", default=None,
                    help="move this many replayed requests per allocator (replay.py) every way "
                         "instead of the synthetic workloads")
    args = ap.parse_args(argv)
    # Each engine asked for, and SGLang's own loops (the ways it posts, read from its files).
    upstream.require("e2e.py", [*args.engines, "sglang"])
    if argv is None:
        return command_line(args)
    return measure_args(args)


def command_line(args):
    """``main`` from the command line: the report also goes to results/ (not with
    --quick), and the process leaves without NIXL's native teardown."""
    if not args.quick:
        results.tee("e2e-replay.txt" if args.replay is not None else "e2e.txt")
    measure_args(args)
    nixl_exit.leave(0)


def measure_args(args):
    """The measurements ``args`` ask for: the synthetic workloads' rows, or with
    ``--replay`` the replayed requests' lines."""
    if args.replay is not None:
        return main_replay(args)
    sizes = args.pages or ([256] if args.quick else [2048, 16384])
    print(f"KV pool: {LAYERS} layers x (K, V) = {BUFFERS} buffers, pool of 4N pages of "
          f"{args.page_bytes} B each side; Mooncake batches of {MOONCAKE_BATCH}; times in ms\n")
    print("| engine | workload | N | way | descriptors | grouping | descriptors | handoff | transfer | total |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for engine in args.engines:
        rows += run(engine, sizes, args.workloads, args.page_bytes, args.rounds, args.sample_over,
                    lambda line: print(line, flush=True))
    print()
    for engine, name, n, c, sg, pp in rows:
        if n == max(sizes):
            print(f"e2e engine={engine} workload={name} pages={n} verified=yes "
                  f"corun_ms={c:.1f} sglang_ms={sg:.1f} per_page_ms={pp:.1f}")
    return rows


if __name__ == "__main__":
    main()
