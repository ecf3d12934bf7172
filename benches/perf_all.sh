#!/usr/bin/env bash
# Regenerates the README's performance figures: perf_report for a default build (u32 and
# u64) and for `-C target-cpu=native` (u32), desc_report (descriptors and gather lists),
# CSVs and text in benches/results/, and the chart benches/perf.svg. Run on a quiet machine; takes a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benches/results
mkdir -p "$out"
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' > "$out/machine.txt"
echo "$(nproc) cores, $(.ci/cpu-level) (widest SIMD level), rustc $(rustc -V | cut -d' ' -f2)" >> "$out/machine.txt"

cargo run --release --example perf_report -- --csv "$out/default.csv" | tee "$out/default.txt"
cargo run --release --example perf_report -- --type u64 --csv "$out/default-u64.csv" \
  | tee "$out/default-u64.txt"
RUSTFLAGS="-C target-cpu=native" cargo run --release --target-dir target/native \
  --example perf_report -- --csv "$out/native.csv" | tee "$out/native.txt"
cargo run --release --example desc_report | tee "$out/desc.txt"
python3 benches/perf_chart.py "$out/default.csv" "$out/native.csv" > benches/perf.svg
echo "wrote $out/ and benches/perf.svg"
