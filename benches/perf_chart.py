#!/usr/bin/env python3
"""Draws the perf_report CSV as an SVG bar chart (no dependencies).

    cargo run --release --example perf_report -- --csv default.csv
    RUSTFLAGS="-C target-cpu=native" cargo run --release --example perf_report -- --csv native.csv
    python3 benches/perf_chart.py default.csv native.csv > benches/perf.svg

One panel per CSV (its file name is the panel title), one group of bars per workload:
elements/ns of corun group_into, count_runs, the scalar reference, chunk_by and the
read-bandwidth floor, on a log scale.
"""
import csv
import math
import os
import sys

IMPLS = [("corun", "corun group_into", "#1f77b4"), ("count_runs", "corun count_runs", "#6baed6"),
         ("scalar", "scalar reference", "#d62728"), ("chunk_by", "chunk_by over pairs", "#ff9896"),
         ("floor", "floor (sum of src, then of dst)", "#7f7f7f")]
BAR, GAP, PANEL_H, LEFT, TOP = 5, 8, 260, 60, 40


def panel(rows, title, y0, width):
    """SVG elements for one CSV's rows, top at y0."""
    lo, hi = 0.05, 100.0
    scale = lambda v: PANEL_H - PANEL_H * (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    out = [f'<text x="{LEFT}" y="{y0 - 12}" font-size="14" font-weight="bold">{title}</text>']
    for tick in (0.1, 1, 10, 100):
        y = y0 + scale(tick)
        out.append(f'<line x1="{LEFT}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick:g}</text>')
    group_w = BAR * len(IMPLS) + GAP
    for i, row in enumerate(rows):
        x = LEFT + 6 + i * group_w
        for j, (key, _, color) in enumerate(IMPLS):
            v = float(row[key])
            y = y0 + scale(v)
            out.append(f'<rect x="{x + j * BAR}" y="{y:.1f}" width="{BAR - 1}" height="{y0 + PANEL_H - y:.1f}" fill="{color}"><title>{row["size"]} {row["structure"]} {key}: {v:.2f}</title></rect>')
        label = f'{row["size"]} {row["structure"]}'
        lx, ly = x + group_w / 2, y0 + PANEL_H + 8
        out.append(f'<text x="{lx:.1f}" y="{ly}" font-size="9" transform="rotate(60 {lx:.1f} {ly})">{label}</text>')
    out.append(f'<text x="14" y="{y0 + PANEL_H / 2}" font-size="11" transform="rotate(-90 14 {y0 + PANEL_H / 2})" text-anchor="middle">elements/ns (log)</text>')
    return out


def main(paths):
    panels = [(os.path.splitext(os.path.basename(p))[0], list(csv.DictReader(open(p)))) for p in paths]
    n = max(len(rows) for _, rows in panels)
    width = LEFT + 90 + n * (BAR * len(IMPLS) + GAP)
    panel_total = PANEL_H + 110
    height = TOP + len(panels) * panel_total + 30
    body = []
    for k, (title, rows) in enumerate(panels):
        ty = rows[0]["type"] if rows else ""
        body += panel(rows, f"{title} build, {ty}", TOP + 10 + k * panel_total, width)
    lx = LEFT
    for _, name, color in IMPLS:
        body.append(f'<rect x="{lx}" y="8" width="10" height="10" fill="{color}"/><text x="{lx + 14}" y="17" font-size="11">{name}</text>')
        lx += 14 + 6 * len(name) + 12
    print(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">')
    print(f'<rect width="{width}" height="{height}" fill="white"/>')
    print("\n".join(body))
    print("</svg>")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(print(__doc__))
    main(sys.argv[1:])
