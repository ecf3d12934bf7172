"""Page lists as the serving stacks' real allocators make them, and what each way of
turning them into transfers costs.

Two pools per stack, a prefill pool (the source pages) and a decode pool (the
destination pages), are driven by a stream of requests; each request's `(src, dst)`
page lists are recorded as its allocator hands them out, then grouped every way:

- ``asc``: concurrent ascending runs (what corun and SGLang's helper find today);
- ``either``: ascending or descending runs (``direction="either"``);
- ``orderfree``: the fewest descriptors for the *set* of pairs
  (``corun.sort_by_destination``, then grouped: the pages are distinct, so the set fixes
  the transfer); its CPU time includes the sort;
- ``gather_wrs`` / ``gather_wrs_either``: RDMA WRITE work requests with gather lists, one
  per contiguous destination run (ascending, or either), gathering the source segments
  (concurrent runs) inside it, at most ``MAX_SGE`` per request.

Descriptors are counted per layer buffer (a transfer posts that many per buffer). The allocators:

- **vLLM 0.33**: the real ``KVCacheBlock`` and ``FreeKVCacheBlockQueue`` classes
  (``upstream``, through ``lab.peers``), driven as ``vllm/v1/core/block_pool.py`` drives
  them: ``get_new_blocks`` pops ``free_block_queue.popleft_n(n)`` (evicting the cached
  blocks it takes); ``free_blocks`` takes a request's blocks *reversed*
  (``single_type_kv_cache_manager.py``, ``free``) and puts the hashed ones back at the
  tail (``append_n``, LRU) and the others at the head (``prepend_n``, LIFO); a prefix hit
  ``touch``\\es its blocks (``free_block_queue.remove`` from the middle of the queue).
  Prefix caching is on: full blocks carry a hash chain, and a request that shares a
  prefix with an earlier one reuses the blocks still cached. In vLLM's NIXL pull mode the
  prefill side allocates first and the decode side after it (``allocate_slots``),
  ignoring the remote blocks.
- **SGLang 0.5.23** (``sglang/srt/mem_cache/allocator/paged.py``, torch code): a numpy
  port of ``PagedTokenToKVPoolAllocator``'s ``clear`` (free pages ``1..num_pages``),
  ``alloc`` (``free_pages[:n]``, merging and sorting the staged frees first when short:
  ``merge_and_sort_free``) and ``free_page_ids`` / ``_release_page_ids`` (P/D mode,
  ``need_sort``: freed pages are staged; otherwise prepended). SGLang's decode side
  allocates first (``DecodePreallocQueue``) and sends its pages before the prefill side
  allocates (``alloc_extend``).

Workloads: request lengths are lognormal in tokens (median 1,024, sigma 1.0, a long
context of 64x the median one request in 200), pages of 1, 16 or 128 tokens, pools kept
at an occupancy (50-95%) by finishing the oldest requests, decode sequences growing by a
block with a probability per step, and (vLLM) a share of requests repeating an earlier
request's prefix.

    python lab/replay.py [--quick]  # the full grid [a small one (CI)]
    python lab/replay.py --workloads p16-occ80-g0   # one workload of the grid
    python lab/replay.py --window n+64 --workloads p16-occ80-g0   # a shallower window
    python lab/replay.py --allocators vllm --place-cached   # CORUN_VLLM_PLACE_CACHED=1's hits

The report goes to results/<machine>/<date>-<commit>/replay.txt; its last lines are one
per allocator and workload:
``replay allocator=<vllm|sglang> workload=<name> requests=<n> pages=<n> asc=<d>
either=<d> orderfree=<d> gather_wrs=<n> gather_wrs_either=<n> placed=<d> bound=<d>
hit_rate=<own>/<placed> prefix_hits=<own>/<placed> adapter_us=<µs> saved_us=<µs> partial=<n> budget_kept=<f>
place_us_p50=<µs> place_us_p99=<µs> place_us_max=<µs> over_budget=<n>``: ``adapter_us`` is the CPU time
of the placement adapter per request placed (reading the free list included),
``saved_us`` the posting time placement saves per request at 128 buffers and 0.5 µs a
descriptor (RDMA), against the allocator's own pages in either direction. The last six
are a third replay, placement as the plugin makes it under its default budget per call
(``corun._budget``; the setting's environment variable applies): the requests it placed
by their head (``partial``), the share of the descriptors placement saves without a
budget that it still saves (``budget_kept``: each replay's saving counted request by
request against its own allocator's pages; ``-`` when there is none to save), its CPU
time per call (the scheduler's view: ``time.thread_time``) and the calls that took longer
than their limit (``over_budget``).
"""

import argparse
import functools
import multiprocessing
import os
import sys
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

if not __package__:  # run as a file (python lab/replay.py): the checkout first on sys.path
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import corun
from corun import adapters
from lab import results
from lab.peers import pools, upstream
from lab.hooked import Plugin
from lab.ways import COSTS_US, LAYER_BUFFERS, MAX_SGE, WAYS, Window, table
from lab.workloads import request_blocks, workloads
# --- the request stream ---------------------------------------------------------------


@dataclass
class Replayed:
    """One replay: each request's `(src, dst)` page lists as transferred, and what the
    allocators and placement did."""

    lists: list
    hit_rate: dict  # pool name -> prefix-cache hit rate (vLLM)
    placements: list  # corun.place's stats per request placed (placement on)
    adapter_s: float = 0.0  # total CPU time in the adapter, corun.place included
    plugin: dict = None  # with a budget: the plugin's counters and place_times()
    hits: dict = None  # pool name -> prefix-cache hits, blocks (vLLM)
    own_runs: int = 0  # with a budget: the requests' runs with the allocator's own pages
    got_runs: int = 0  # ... and with the pages the plugin's placement gave them
    core_s: float = 0.0  # of which in corun.place
    # (CPU time of the thread, time.thread_time: on a shared machine wall time counts
    # the time other processes ran too.)


def replay(allocator, w, requests, prefill_blocks, decode_blocks, seed=7, window=False, budget=False):
    """Replays `requests` requests through two pools. With `window` (not False: None for
    the adapters' default, or a number of pages) the second side to allocate places its
    pages against the first side's (``corun.adapters``): vLLM's decode side (pull mode:
    prefill allocates first) and SGLang's prefill side (the decode side allocates first).
    With `budget`, placement is the plugin's own, under its CPU budget per call
    (``corun._budget``: ``CORUN_VLLM_BUDGET_US`` / ``CORUN_SGLANG_BUDGET_US``, default
    2000 µs, and the stack's own allocation, timed here): see :class:`Plugin`."""
    rng = np.random.default_rng(seed)
    placing = window is not False or budget
    plugin = Plugin(allocator) if budget else None
    if allocator == "vllm":
        classes = upstream.vllm_queue_classes()
        # Both sides cache prefixes (vLLM's default); the decode side's own hits are not
        # pulled (the connector asks prefill for the tokens past the local hit).
        pre, dec = pools.VllmPool(classes, prefill_blocks, True), pools.VllmPool(classes, decode_blocks, True)
    else:
        pre, dec = pools.SglangPool(prefill_blocks), pools.SglangPool(decode_blocks)
    if plugin is not None:
        plugin.prepare(dec if allocator == "vllm" else pre)
    out = Replayed([], {}, [])
    core = [0.0]

    def timed_place(*args, **kwargs):
        t = time.thread_time()
        r = corun.place(*args, **kwargs)
        core[0] += time.thread_time() - t
        return r

    adapters.place = timed_place  # to split the adapter's time from the core's

    def runs_of(first, own, got, direction):
        # A request's runs with the allocator's own pages and with the plugin's, in the
        # direction the plugin judges by.
        first = np.asarray(first, np.int64)
        out.own_runs += corun.count_runs(first, np.asarray(own, np.int64), direction=direction)
        out.got_runs += corun.count_runs(first, np.asarray(got, np.int64), direction=direction)

    # CORUN_VLLM_PLACE_CACHED=1 (--place-cached): cached blocks takeable, as the plugin's
    # setting lets them be (the budgeted pass reads it through the plugin's configure()).
    cached = {"cached": True} if allocator == "vllm" and os.environ.get("CORUN_VLLM_PLACE_CACHED") == "1" else {}

    def place(f, *args):
        t = time.thread_time()
        stats = f(*args, window=window, **cached)
        out.adapter_s += time.thread_time() - t
        if stats is not None:  # None: SGLang's adapter on a shortage (nothing placed)
            out.placements.append(stats)

    live = deque()  # (prefill pages, decode pages list)
    recent = deque(maxlen=64)  # hash roots of recent requests, for shared prefixes

    def finish_oldest():
        p, d = live.popleft()
        if allocator == "vllm":
            pre.free(p)
            dec.free(d)
        else:
            pre.free_page_ids(p)
            dec.free_page_ids(d)

    for r in range(requests):
        n = request_blocks(rng, w.page_tokens, min(prefill_blocks, decode_blocks))
        # Keep each pool at its occupancy: finish the oldest requests first.
        while live and (pre.free_count() - n < (1 - w.occupancy) * prefill_blocks
                        or dec.free_count() - n < (1 - w.occupancy) * decode_blocks):
            finish_oldest()
        # Full blocks carry a hash chain (root, index); a shared prefix reuses a root.
        root = r
        if recent and rng.random() < w.prefix_share:
            root = recent[int(rng.integers(len(recent)))]
        recent.append(r)
        shared = int(n * rng.uniform(0.2, 0.8)) if root != r else 0
        hashes = [(root, i) if i < shared else (r, i) for i in range(n - 1)] + [None]
        if allocator == "vllm":
            # Pull mode: the prefill side allocates first (returning its block ids), the
            # decode side after it, pulling what its own cache does not hold.
            p = pre.allocate(hashes)
            hit = dec.touch_prefix(hashes)
            remote = np.array([b.block_id for b in p[len(hit):]], dtype=np.int32)
            if plugin is not None:
                own = adapters._mirror(dec).front(len(remote))  # what get_new_blocks would take
                new = plugin.vllm(dec, remote.tolist())  # Python ints, as vLLM's JSON gives them
                runs_of(remote, own, [b.block_id for b in new], "either")
            else:
                if placing and len(remote):
                    place(adapters.vllm_place_front, dec, remote)
                new = dec.get_new_blocks(len(remote))
            dec.cache(new, hashes[len(hit):])
            d = hit + new
            src, dst = remote, np.array([b.block_id for b in new], dtype=np.int32)
        else:
            # The decode side allocates first and sends its pages; then the prefill side.
            d = dec.alloc(n)
            if d is None:
                continue
            if plugin is not None:
                own = pre.front(n)
                p = plugin.sglang(pre, d)
                if p is not None:
                    runs_of(d, own, p, "ascending")
            else:
                if placing and pre.free_count() >= n:
                    place(adapters.sglang_place_front, pre, d)
                p = pre.alloc(n)
            if p is None:
                dec.free_page_ids(d)
                continue
            src, dst = p.astype(np.int32), d.astype(np.int32)
        out.lists.append((src, dst))
        live.append((p, list(d)))
        # Decode sequences grow: a block now and then, from the decode pool.
        for i in range(len(live)):
            if w.growth and rng.random() < w.growth:
                more = dec.get_new_blocks(1) if allocator == "vllm" else dec.alloc(1)
                if more is not None and len(more):
                    live[i][1].extend(list(more))
    adapters.place = corun.place
    out.core_s = core[0]
    if plugin is not None:
        out.plugin = plugin.report()
    if allocator == "vllm":
        # The adapter's mirror is told of the changes vLLM's own queue calls make but
        # pops: that upkeep (the wrapper, the catch-up with the pops, the update; per
        # told call) is the adapter's cost too.
        mirror = adapters._mirror_of(dec.free_block_queue)
        out.adapter_s += mirror.told * upkeep_s(classes) if mirror is not None else 0.0
        out.hit_rate = {name: pool.hits / max(pool.lookups, 1) for name, pool in (("prefill", pre), ("decode", dec))}
        out.hits = {"prefill": pre.hits, "decode": dec.hits}
    return out


@functools.lru_cache(maxsize=None)
def upkeep_s(classes, pairs=20_000):
    """CPU seconds a told change (a wrapped vLLM queue call, with the mirror catching up
    with the pops before it) costs more than the plain call, measured here:
    ``popleft_n(1)`` (not wrapped) then ``append_n`` of that block (told), on a plain
    queue and on one the adapter mirrors, in alternating rounds (the least of 5 rounds
    each: the machine's noise only adds)."""
    queues = []
    for mirrored in (False, True):
        pool = pools.VllmPool(classes, 4096, True)
        if mirrored:
            adapters._mirror(pool)
        queues.append(pool.free_block_queue)
    best = [float("inf"), float("inf")]
    for _ in range(5):
        for k, q in enumerate(queues):
            t = time.thread_time()
            for _ in range(pairs):
                q.append_n(q.popleft_n(1))
            best[k] = min(best[k], (time.thread_time() - t) / pairs)
    return max(best[1] - best[0], 0.0)


def report(allocator, w, own, placed, budgeted, window, out):
    """The ways on the allocator's own lists, then placement's lists beside the bound.
    Returns the `replay` line."""
    lists = own.lists
    pages = int(sum(len(s) for s, _ in lists))
    rates = ", ".join(f"{k} {v:.3f}" for k, v in own.hit_rate.items())
    out(f"\n### {allocator} {w.name}: {len(lists)} requests, {pages} pages"
        + (f"; prefix-cache hit rate {rates}" if rates else ""))
    totals = table(lists, WAYS, out)

    # Placement: the second side's pages chosen against the first side's.
    first = (lambda s, d: s) if allocator == "vllm" else (lambda s, d: d)
    ways = {"placed (either)": WAYS["either"], "placed gather_wrs_either": WAYS["gather_wrs_either"],
            "bound (first side's runs)": lambda s, d: corun.count_runs(first(s, d), first(s, d), direction="either")}
    n_placed = max(len(placed.placements), 1)
    side = "decode (pull mode)" if allocator == "vllm" else "prefill"
    prates = ", ".join(f"{k} {v:.3f}" for k, v in placed.hit_rate.items())
    out(f"\nWith placement on the {side} side (``corun.adapters``, window "
        f"{window or ('4n+64' if allocator == 'vllm' else 'n')} pages): {len(placed.lists)} requests"
        + (f"; prefix-cache hit rate {prates}" if prates else ""))
    ptotals = table(placed.lists, ways, out)
    p, bound = ptotals["placed (either)"], ptotals["bound (first side's runs)"]
    fallback = sum(st["fallback"] for st in placed.placements)
    split = sum(st["split"] for st in placed.placements)
    saved_us = (totals["either"] - p) / max(len(placed.lists), 1) * COSTS_US["rdma"]
    adapter_us, core_us = placed.adapter_s / n_placed * 1e6, placed.core_s / n_placed * 1e6
    def times(a, b, what, than=""):
        # "1.50x fewer ... than", "1.10x more ... than", "as many ... as": never a ratio
        # below 1 called "fewer".
        if a == b:
            return f"as many {what}{' as' if than else ''}{than}"
        return f"{max(a, b) / max(min(a, b), 1):.2f}x {'fewer' if a > b else 'more'} {what}{' than' if than else ''}{than}"

    if saved_us > 0:
        cost = (f"placement costs {100 * adapter_us / saved_us:.1f}% of one buffer's saving, "
                f"{100 * adapter_us / (saved_us * LAYER_BUFFERS):.2f}% of {LAYER_BUFFERS} buffers'")
    else:
        cost = "no saving: placement costs its CPU time and saves nothing"
    out(f"\nPlacement: {times(totals['asc'], p, 'descriptors', ' ascending runs')} "
        f"of the allocator's own pages, {times(totals['either'], p, 'descriptors', ' either-direction runs')}; "
        f"{p / max(bound, 1):.3f}x the bound. "
        f"{times(totals['gather_wrs_either'], ptotals['placed gather_wrs_either'], 'gather work requests')}. "
        f"Requests left to the allocator's own choice: {fallback}; runs split: {split}. "
        f"CPU per request: {adapter_us:.1f} µs in the adapter, of which {core_us:.1f} µs in "
        f"corun.place; posting time saved per request at 0.5 µs per descriptor: "
        f"{saved_us:.1f} µs per buffer, {saved_us * LAYER_BUFFERS / 1000:.2f} ms for "
        f"{LAYER_BUFFERS} buffers ({cost}).")
    # Under the plugin's budget per call: how much of placement's saving it keeps, each
    # pass's saving counted against its own allocator's pages request by request (the
    # passes' lists part once placement changes which pages are free).
    b = budgeted.plugin
    kept_runs = budgeted.own_runs - budgeted.got_runs
    saved_runs = sum(st["own"] - st["placed"] for st in placed.placements)
    kept = f"{kept_runs / saved_runs:.3f}" if saved_runs > 0 else "-"
    out(f"\nUnder the plugin's budget per call (``corun._budget``, {b['budget_us']} µs or a quarter of "
        f"the allocator's own allocation, timed here): {b['placed']} requests placed, {b['partial']} by "
        f"their head, {b['fallback']} left to the allocator; {kept_runs} of the {saved_runs} descriptors "
        f"placement saves without a budget kept ({kept}); CPU per call p50 {b['p50_us']:.0f} µs, "
        f"p99 {b['p99_us']:.0f} µs, max {b['max_us']:.0f} µs over {b['calls']} calls, {b['over']} past their limit.")
    if allocator == "vllm":
        hit = f"{own.hit_rate['decode']:.3f}/{placed.hit_rate['decode']:.3f}"
        hits = f"{own.hits['decode']}/{placed.hits['decode']}"
    else:
        hit = hits = "-/-"  # SGLang's allocator caches nothing (its radix tree does, above it)
    return (f"replay allocator={allocator} workload={w.name} requests={len(lists)} pages={pages} "
            + " ".join(f"{k}={v}" for k, v in totals.items())
            + f" placed={p} bound={bound} hit_rate={hit} prefix_hits={hits}"
            + f" adapter_us={adapter_us:.1f} saved_us={saved_us * LAYER_BUFFERS:.1f}"
            + f" partial={b['partial']} budget_kept={kept} place_us_p50={b['p50_us']:.0f}"
            + f" place_us_p99={b['p99_us']:.0f} place_us_max={b['max_us']:.0f} over_budget={b['over']}")


FORK = multiprocessing.get_context("fork")


def workload_report(allocator, w, requests, prefill_blocks, decode_blocks, window):
    """One workload replayed without placement, with it, and with the plugin's placement
    under its budget per call (the default window): its report's text and its ``replay``
    line."""
    text = []
    own = replay(allocator, w, requests, prefill_blocks, decode_blocks)
    placed = replay(allocator, w, requests, prefill_blocks, decode_blocks, window=window)
    budgeted = replay(allocator, w, requests, prefill_blocks, decode_blocks, budget=True)
    line = report(allocator, w, own, placed, budgeted, window, lambda *a: text.append(" ".join(map(str, a))))
    return "\n".join(text), line


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two workloads, 300 requests (CI)")
    ap.add_argument("--requests", type=int, help="requests per workload (default 5000)")
    ap.add_argument("--allocators", nargs="*", default=["vllm", "sglang"], choices=["vllm", "sglang"])
    ap.add_argument("--window", type=Window.parse, default=None,
                    help="placement's window: pages, or KnC for K * n + C (say 4n+64); "
                         "default: the adapters' (4n+64)")
    ap.add_argument("--workloads", nargs="*", help="only these workloads (names as in the report)")
    ap.add_argument("--place-cached", action="store_true",
                    help="vLLM placement may take blocks holding a cached prefix "
                         "(CORUN_VLLM_PLACE_CACHED=1): what that costs in prefix_hits=")
    args = ap.parse_args(argv)
    if args.place_cached:
        os.environ["CORUN_VLLM_PLACE_CACHED"] = "1"  # read in each workload's process
    if argv is None and not args.quick:
        # From the command line (not --quick) the report also goes to results/.
        name = f"replay-window-{args.window}.txt" if args.window else "replay.txt"
        results.tee(name.replace("replay", "replay-place-cached", 1) if args.place_cached else name)
    requests = args.requests or (300 if args.quick else 5000)
    prefill_blocks, decode_blocks = (8000, 12000) if args.quick else (40000, 60000)
    out = print
    out(f"corun {corun.__version__}; pools of {prefill_blocks} prefill and {decode_blocks} decode "
        f"pages; {requests} requests per workload; max_sge {MAX_SGE}")
    lines = []
    for allocator in args.allocators:
        if allocator == "vllm":
            try:
                upstream.vllm_queue_classes()
            except upstream.Missing as e:
                sys.exit(f"replay.py: {e}")
        for w in workloads(args.quick):
            if args.workloads and w.name not in args.workloads:
                continue
            # Each workload in a process of its own, forked from this one before it runs:
            # like a serving process, it makes its pools on a fresh heap. (After another
            # workload's garbage, millions of objects, the same p16 workload's adapter
            # took 2x longer: its blocks lay scattered in memory.)
            with FORK.Pool(1) as pool:
                text, line = pool.apply(workload_report, (allocator, w, requests, prefill_blocks,
                                                          decode_blocks, args.window))
            out(text)
            lines.append(line)
    out("")
    for line in lines:
        out(line)


if __name__ == "__main__":
    main()
