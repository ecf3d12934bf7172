#!/usr/bin/env python3
"""Checks perf_report CSVs against the kernel's targets: corun group_into over
the two-pass read floor for the native build, u32, and the default build against the
native one on long runs. Every ratio comes from one CSV, measured side by side.

    python3 benches/targets.py results/<machine>/<run>/perf-native.csv results/<machine>/<run>/perf-default.csv
"""
import csv
import sys

# (size, structure, least corun/floor)
FLOOR = [("4K", "no-breaks", 0.45), ("64K", "no-breaks", 0.6), ("64K", "mean-256", 0.55),
         ("4K", "mean-16", 0.25), ("64K", "mean-16", 0.3), ("4K", "singletons", 0.15),
         ("1M", "no-breaks", 0.8)]
LONG = [(size, s) for size in ("1M", "16M") for s in ("no-breaks", "mean-256")]


def load(path):
    with open(path) as f:
        return {(r["size"], r["structure"]): r for r in csv.DictReader(f) if r["type"] == "u32"}


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(print(__doc__))
    native, default = load(sys.argv[1]), load(sys.argv[2])
    print("| target | measured | |")
    print("|---|---|---|")
    for size, structure, least in FLOOR:
        r = native.get((size, structure))
        if r is None:
            print(f"| {size} {structure} >= {least:.2f}x floor | not measured | |")
            continue
        got = float(r["corun"]) / float(r["floor"])
        print(f"| {size} {structure} >= {least:.2f}x floor | {got:.2f}x | {'met' if got >= least else 'not met'} |")
    for size, structure in LONG:
        n, d = native.get((size, structure)), default.get((size, structure))
        if n is None or d is None:
            continue
        got = float(d["corun"]) / float(n["corun"])
        print(f"| default >= 0.5x native, {size} {structure} | {got:.2f}x | {'met' if got >= 0.5 else 'not met'} |")
    # The bound on singletons: every position is a span, so any group_into reads both
    # arrays and writes 16 bytes per position. perf_report times that alone ("span writes").
    r = native.get(("4K", "singletons"))
    if r is not None and "span_writes" in r:
        floor, writes, got = float(r["floor"]), float(r["span_writes"]), float(r["corun"])
        print(f"\n4K singletons: reading both arrays and writing a span per position, comparing "
              f"nothing, runs at {writes / floor:.2f}x the floor; corun at {got / floor:.2f}x is "
              f"{got / writes:.2f}x of that.")


if __name__ == "__main__":
    main()
