"""corun's Python functions against SGLang's real code, side by side in one process
(interleaved rounds, medians), then the targets of issue 15 with met / not met.

SGLang's code is the installed package's own (``pip install --no-deps sglang==0.5.23``,
loaded from its files by ``sglang_ref``): the helper ``group_concurrent_contiguous``, the
Mooncake backend's per-layer loop into the three lists ``batch_transfer_sync`` takes, and
the NIXL backend's loop into the Nx3 arrays ``get_xfer_descs`` takes. The order-free row
is against vLLM's MoRIIO connector (``pip install --no-deps vllm==0.33.0``): its
``merge_contiguous_blocks``, compiled from the installed wheel's file (``moriio_merge``),
against corun's drop-in of the same name (``sort_by_destination`` and the runs, on the
blocks as page ids).

    python lab/bench.py            # N = 2,048 and 16,384; 0%, 5%, 100% breaks; the
                                      # report goes to results/<machine>/<run>/python-bench.txt
    python lab/bench.py --quick    # smoke run (N = 2,048, few rounds; writes nothing)
    python lab/bench.py --corun-only   # corun's calls alone, to compare two builds of
                                          # it (say SSE2 and target-cpu=native) run in turn
    python lab/bench.py --scaling      # placement scaling alone (python-place-scaling.txt)
    python lab/bench.py --scaling --max-pages 65536   # ... to 64K pages
    python lab/bench.py --budget       # placement under the plugins' budget per call,
                                          # through the stacks' real allocators, 1 to 1M
                                          # pages (python-place-budget.txt)

Needs SGLang 0.5.23 (every row but the order-free one) and vLLM 0.33.0 (the order-free
row: without it that row is skipped, saying so), both ``--no-deps``, as
``upstream.HINT`` says; ``--corun-only`` and ``--scaling`` need neither.

Each row: one input (int32 page lists), each function timed against the code it
replaces; the rows against "CPython list floor" time ``group_concurrent_contiguous``
against CPython making the same lists of lists at C speed from ints and slices made
beforehand (``list_floor``): what the lists alone cost, whoever groups. Layer buffers:
64 layers x (K, V) = 128, pages of 16 KiB. The order-free row has inputs of its own
(``pools.make_orderfree``: a request's blocks in shuffled runs, as MoRIIO is handed them).

Last, the placement scaling section (``lab.place_scaling``): ``corun.place`` from 1K to
1M pages, short and long runs, windows of n + 64 and 4n + 64 pages, shuffled and sorted,
beside ``np.sort`` of the window, one line per case with the time per page of both.
"""

import argparse
import os
import platform
import sys

import numpy as np

if not __package__:  # run as a file (python lab/bench.py): the checkout first on sys.path
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import corun
from lab import place_budget, place_scaling, results
from lab.peers import pools, sglang_ref, upstream
from lab.timing import median_seconds

LAYERS = 2 * 64  # layer buffers: 64 layers x (K, V)
PAGE = 16384
SRC_BASES = [0x7F00_0000_0000 + (b << 30) for b in range(LAYERS)]
DST_BASES = [0x5500_0000_0000 + (b << 30) for b in range(LAYERS)]
ITEM_LENS = [PAGE] * LAYERS
LAYER_PARAMS = list(zip(SRC_BASES, DST_BASES, ITEM_LENS))


def make(n, breaks, seed=42):
    """int32 page indices, each position breaking with probability `breaks` (on the
    source, and on the destination at half of those places)."""
    rng = np.random.default_rng(seed)
    step = np.ones(n, dtype=np.int64)
    brk = rng.random(n) < breaks
    step[brk] = rng.integers(2, 1000, size=int(brk.sum()))
    src = (1000 + np.cumsum(step)).astype(np.int32)
    dst = (7 + np.arange(n)).astype(np.int32)
    dst[brk] += 5
    dst = np.where(np.arange(n) % 2 == 0, dst, 7 + np.arange(n)).astype(np.int32)
    return src, dst


def moriio_merge(offsets_local, offsets_remote, sizes, assume_sorted=False):
    """vLLM's MoRIIO ``merge_contiguous_blocks`` itself (``upstream.vllm_moriio_merge``)."""
    return upstream.vllm_moriio_merge()(offsets_local, offsets_remote, sizes, assume_sorted)


def numpy_runs(src, dst):
    """What ``runs`` replaces, in numpy: starts and lengths without Python lists."""
    brk = np.flatnonzero((np.diff(src) != 1) | (np.diff(dst) != 1)) + 1
    starts = np.concatenate(([0], brk))
    return src[starts], dst[starts], np.diff(np.concatenate((starts, [src.size])))


def sglang_mooncake(src, dst):
    return sglang_ref.mooncake_blocks(sglang_ref.group_concurrent_contiguous(src, dst), LAYER_PARAMS)


def sglang_nixl(src, dst):
    return sglang_ref.nixl_reqs(sglang_ref.group_concurrent_contiguous(src, dst), LAYER_PARAMS)


def corun_lists(src, dst):
    return corun.transfer_descriptors(src, dst, SRC_BASES, DST_BASES, ITEM_LENS, form="lists")


def corun_nixl(src, dst):
    return corun.transfer_descriptors(src, dst, SRC_BASES, DST_BASES, ITEM_LENS, form="nixl")


# (name, corun function, what it replaces, that code's name)
PAIRS = [
    ("group_concurrent_contiguous", corun.group_concurrent_contiguous,
     sglang_ref.group_concurrent_contiguous, "SGLang helper"),
    ("runs", corun.runs, sglang_ref.group_concurrent_contiguous, "SGLang helper"),
    ("runs", corun.runs, numpy_runs, "numpy diff/flatnonzero"),
    ("transfer_descriptors(form='lists')", corun_lists, sglang_mooncake,
     "SGLang Mooncake loop"),
    ("transfer_descriptors(form='nixl')", corun_nixl, sglang_nixl, "SGLang NIXL loop"),
]


def list_floor(src, dst):
    """What making the helper's lists costs CPython itself, at C speed: the same lists of
    lists, sliced by ``map`` out of int lists and slice objects made beforehand (not
    timed; no grouping, no ints made). A floor for ``group_concurrent_contiguous``."""
    s, d = src.tolist(), dst.tolist()
    ends = np.cumsum(corun.runs(src, dst)[2]).tolist()
    cuts = [slice(a, b) for a, b in zip([0] + ends[:-1], ends)]
    return lambda: (list(map(s.__getitem__, cuts)), list(map(d.__getitem__, cuts)))


# The order-free row: corun's calls, and the code they replace.
ORDERFREE, MORIIO = "merge_contiguous_blocks", "vLLM MoRIIO merge"

# Rows that compare with a floor, not with code corun replaces.
FLOORS = {"CPython list floor"}


def check_equal(src, dst):
    """Same answers before anything is timed."""
    helper = sglang_ref.group_concurrent_contiguous(src, dst)
    assert corun.group_concurrent_contiguous(src, dst) == helper
    got = corun.runs(src, dst)
    assert all(np.array_equal(a, b) for a, b in zip(got, numpy_runs(src, dst)))
    assert tuple(corun_lists(src, dst)) == tuple(sglang_mooncake(src, dst))
    assert all(np.array_equal(a, b) for a, b in zip(corun_nixl(src, dst), sglang_nixl(src, dst)))
    return len(helper[0])


def corun_only(rounds, min_time):
    """corun's calls alone (no SGLang needed): one line per call and input, for comparing
    builds of corun run one after the other."""
    calls = [
        ("group_concurrent_contiguous", corun.group_concurrent_contiguous),
        ("runs", corun.runs),
        ("transfer_descriptors(form='arrays')", lambda s, d: corun.transfer_descriptors(
            s, d, SRC_BASES, DST_BASES, ITEM_LENS)),
        ("transfer_descriptors(form='lists')", corun_lists),
        ("transfer_descriptors(form='nixl')", corun_nixl),
    ]
    for n in [2048, 16384]:
        for breaks in [0.0, 0.05, 1.0]:
            src, dst = make(n, breaks)
            t = median_seconds([lambda f=f: f(src, dst) for _, f in calls], rounds, min_time)
            for (name, _), sec in zip(calls, t):
                print(f"corun_only N={n} breaks={breaks:.0%} call={name} us={sec * 1e6:.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: N = 2,048, few rounds, "
                    "placement scaling to 4,096 pages; writes nothing")
    ap.add_argument("--corun-only", action="store_true", help="corun's calls alone (no SGLang)")
    ap.add_argument("--scaling", action="store_true", help="only the placement scaling section "
                    "(no SGLang or vLLM needed; results/.../python-place-scaling.txt)")
    ap.add_argument("--budget", action="store_true", help="only placement under the plugins' "
                    "default budget, through vLLM's BlockPool and SGLang's allocator "
                    "(results/.../python-place-budget.txt)")
    ap.add_argument("--max-pages", type=int, default=None, metavar="N",
                    help="largest request in the scaling and budget sections (default 1,048,576; --quick 4,096)")
    args = ap.parse_args(argv)
    quick = args.quick
    max_pages = args.max_pages or (4096 if quick else place_scaling.SIZES[-1])
    scaling_rounds = (3, 0.005) if quick else (5, 0.05)
    if args.corun_only:
        return corun_only(11, 0.05)
    if args.budget:
        upstream.require("bench.py --budget", ["vllm", "sglang"])
        if not quick:
            results.tee("python-place-budget.txt")
        print(f"corun {corun.__version__}, Python {platform.python_version()}, {platform.machine()}")
        place_budget.run_section(max_pages)
        return
    if args.scaling:
        if not quick:
            results.tee("python-place-scaling.txt")
        print(f"corun {corun.__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
              f"{platform.machine()}")
        place_scaling.run_section(max_pages, *scaling_rounds)
        return
    if not sglang_ref.available():
        sys.exit(f"bench.py measures against SGLang's real code: {upstream.HINT} "
                 "(--scaling and --corun-only need neither SGLang nor vLLM)")
    if not quick:
        results.tee("python-bench.txt")
    try:
        upstream.vllm_moriio_merge()
        vllm = True
    except upstream.Missing as e:
        # Only the order-free row needs vLLM: the others run without it.
        print(f"bench.py: the order-free row (against vLLM's MoRIIO merge) is skipped: {e}\n")
        vllm = False
    rounds, min_time = (3, 0.005) if quick else (11, 0.05)
    sizes = [2048] if quick else [2048, 16384]
    print(f"corun {corun.__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
          f"{platform.machine()}; medians of {rounds} interleaved rounds; "
          f"{LAYERS} layer buffers of {PAGE} B pages\n")
    print("| N | breaks | runs | corun function | replaces | theirs | corun | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = {}
    for n in sizes:
        for breaks in [0.0, 0.05, 1.0]:
            src, dst = make(n, breaks)
            groups = check_equal(src, dst)
            floor = list_floor(src, dst)
            assert floor() == corun.group_concurrent_contiguous(src, dst)
            pairs = PAIRS + [("group_concurrent_contiguous", corun.group_concurrent_contiguous,
                              lambda s, d: floor(), "CPython list floor")]
            funcs = []
            for _, ours, theirs, _ in pairs:
                funcs += [lambda f=theirs: f(src, dst), lambda f=ours: f(src, dst)]
            rows = [(name, theirs_name, groups) for name, _, _, theirs_name in pairs]
            if vllm:
                # The order-free row, on MoRIIO's own inputs: the same lists out, checked first.
                blocks = pools.make_orderfree(n, breaks)
                merged = moriio_merge(*blocks)
                assert corun.merge_contiguous_blocks(*blocks) == merged
                funcs += [lambda: moriio_merge(*blocks),
                          lambda: corun.merge_contiguous_blocks(*blocks)]
                rows.append((ORDERFREE, MORIIO, len(merged[0])))
            t = median_seconds(funcs, rounds, min_time)
            for k, (name, theirs_name, runs) in enumerate(rows):
                them, us = t[2 * k], t[2 * k + 1]
                ratios[(n, breaks, name, theirs_name)] = them / us
                print(f"| {n} | {breaks:.0%} | {runs} | `{name}` | {theirs_name} | "
                      f"{them * 1e6:,.0f} µs | {us * 1e6:,.1f} µs | {them / us:.1f}x |")
    n = max(sizes)
    r = lambda b, name, theirs="SGLang helper": ratios[(n, b, name, theirs)]  # noqa: E731
    gcc = "group_concurrent_contiguous"
    targets = [
        (f"{gcc} at 0% breaks", r(0.0, gcc), 3),
        (f"{gcc} at 5% breaks", r(0.05, gcc), 10),
        (f"{gcc} at 100% breaks", r(1.0, gcc), 20),
        ("runs at 5% breaks (against the helper)", r(0.05, "runs"), 100),
        ("Mooncake lists, 128 layer buffers, 5% breaks (against SGLang's loop, equal output)",
         r(0.05, "transfer_descriptors(form='lists')", "SGLang Mooncake loop"), 12),
        *((f"order-free grouping at {b:.0%} breaks (against vLLM MoRIIO's merge, equal output)",
           r(b, ORDERFREE, MORIIO), 2) for b in ([0.0, 0.05, 1.0] if vllm else [])),
        ("slowest corun call against the code it replaces (every input above)",
         min(v for k, v in ratios.items() if k[3] not in FLOORS), 1),
    ]
    print(f"\ntargets (N = {n:,}, int32 pages):")
    for name, got, goal in targets:
        print(f"target {name}: {got:.1f}x (goal {goal}x): {'met' if got >= goal else 'not met'}")
    place_scaling.run_section(max_pages, *scaling_rounds)


if __name__ == "__main__":
    main()
