"""corun's Python functions against the numpy helper and the Python descriptor loop that
serving stacks use today, measured side by side in one process (interleaved rounds,
medians). Prints a Markdown table.

    python python/bench.py            # N = 2,048 and 16,384; 0%, 5%, 100% breaks
    python python/bench.py --quick    # smoke run
"""

import statistics
import sys
import time

import numpy as np

import corun

LAYERS = 64  # x (K, V): 128 layer buffers
PAGE = 16384


def numpy_helper(src, dst):
    """The numpy helper's algorithm (diff, where, split, tolist), as SGLang runs it."""
    if src.size == 0 or dst.size == 0:
        return [], []
    if src.size != dst.size:
        raise ValueError("unequal lengths")
    brk = np.where((np.diff(src) != 1) | (np.diff(dst) != 1))[0] + 1
    return [g.tolist() for g in np.split(src, brk)], [g.tolist() for g in np.split(dst, brk)]


def numpy_runs(src, dst):
    """The array-native form in numpy: starts and lengths without Python lists."""
    brk = np.flatnonzero((np.diff(src) != 1) | (np.diff(dst) != 1)) + 1
    starts = np.concatenate(([0], brk))
    return src[starts], dst[starts], np.diff(np.concatenate((starts, [src.size])))


def python_descriptors(src, dst, src_bases, dst_bases, item_lens):
    """The per-layer loop of the Mooncake/NIXL backends: group, then for each layer
    buffer and run append (src_addr, dst_addr, length)."""
    src_groups, dst_groups = numpy_helper(src, dst)
    src_addrs, dst_addrs, lengths = [], [], []
    for sb, db, il in zip(src_bases, dst_bases, item_lens):
        for sg, dg in zip(src_groups, dst_groups):
            src_addrs.append(sb + sg[0] * il)
            dst_addrs.append(db + dg[0] * il)
            lengths.append(len(sg) * il)
    return src_addrs, dst_addrs, lengths


def make(n, breaks, seed=42):
    """int32 page indices with each position breaking with probability `breaks`."""
    rng = np.random.default_rng(seed)
    step = np.ones(n, dtype=np.int64)
    brk = rng.random(n) < breaks
    step[brk] = rng.integers(2, 1000, size=int(brk.sum()))
    src = (1000 + np.cumsum(step)).astype(np.int32)
    dst = (7 + np.arange(n)).astype(np.int32)
    dst[brk] += 5  # break the destination at the same places half of the time
    dst = np.where(np.arange(n) % 2 == 0, dst, 7 + np.arange(n)).astype(np.int32)
    return src, dst


def median_seconds(funcs, rounds, min_time):
    """Median seconds per call of each function, rounds interleaved."""
    reps = []
    for f in funcs:
        t, k = time.perf_counter(), 0
        while time.perf_counter() - t < min_time:
            f()
            k += 1
        reps.append(max(1, k))
    samples = [[] for _ in funcs]
    for _ in range(rounds):
        for f, r, s in zip(funcs, reps, samples):
            t = time.perf_counter()
            for _ in range(r):
                f()
            s.append((time.perf_counter() - t) / r)
    return [statistics.median(s) for s in samples]


def main():
    quick = "--quick" in sys.argv
    rounds, min_time = (3, 0.01) if quick else (9, 0.05)
    sizes = [2048] if quick else [2048, 16384]
    src_bases = [0x7F00_0000_0000 + (b << 30) for b in range(2 * LAYERS)]
    dst_bases = [0x5500_0000_0000 + (b << 30) for b in range(2 * LAYERS)]
    item_lens = [PAGE] * (2 * LAYERS)
    print(f"medians of {rounds} interleaved rounds; descriptors for {LAYERS} layers x (K, V)\n")
    print("| N | breaks | runs | numpy helper | group_concurrent_contiguous | speed-up | ints alone | runs() | speed-up | Python descriptor loop | transfer_descriptors | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        for breaks in [0.0, 0.05, 1.0]:
            src, dst = make(n, breaks)
            # Same answers before anything is timed.
            assert corun.group_concurrent_contiguous(src, dst) == numpy_helper(src, dst)
            got = corun.runs(src, dst)
            assert all((a == b).all() for a, b in zip(got, numpy_runs(src, dst)))
            want = python_descriptors(src, dst, src_bases, dst_bases, item_lens)
            got = corun.transfer_descriptors(src, dst, src_bases, dst_bases, item_lens)
            assert tuple(x.tolist() for x in got) == want
            t = median_seconds(
                [
                    lambda: numpy_helper(src, dst),
                    lambda: corun.group_concurrent_contiguous(src, dst),
                    lambda: corun.runs(src, dst),
                    lambda: python_descriptors(src, dst, src_bases, dst_bases, item_lens),
                    lambda: corun.transfer_descriptors(src, dst, src_bases, dst_bases, item_lens),
                    lambda: (src.tolist(), dst.tolist()),
                ],
                rounds,
                min_time,
            )
            us = [x * 1e6 for x in t]
            print(
                f"| {n} | {breaks:.0%} | {len(got[0]) // (2 * LAYERS)} | {us[0]:.0f} µs | {us[1]:.0f} µs | "
                f"{t[0] / t[1]:.1f}x | {us[5]:.0f} µs | {us[2]:.1f} µs | {t[0] / t[2]:.0f}x | {us[3]:.0f} µs | "
                f"{us[4]:.0f} µs | {t[3] / t[4]:.0f}x |"
            )
    print("\nspeed-ups: group_concurrent_contiguous and runs() against the numpy helper; "
          "transfer_descriptors against the Python descriptor loop (helper + per-layer loop). "
          "ints alone: src.tolist() + dst.tolist(), the cost of making the Python ints that "
          "any list-of-lists result holds")


if __name__ == "__main__":
    main()
