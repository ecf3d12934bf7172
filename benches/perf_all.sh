#!/usr/bin/env bash
# Regenerates the README's performance figures, one perf_report per SIMD backend: the
# default build (SSE2; u32 and u64), `+avx2`, and `-C target-cpu=native` (AVX-512 where
# the CPU has it; u32 and u64); desc_report (descriptors and gather lists); the targets
# (benches/targets.py); CSVs and text in benches/results/, and the chart benches/perf.svg.
# Run on a quiet machine; takes about 15 minutes. NEON is measured by instruction counts
# under qemu (benches/qemu_count.py), not time: under qemu, time means nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benches/results
mkdir -p "$out"
grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' > "$out/machine.txt"
echo "$(nproc) cores, $(.ci/cpu-level) (widest SIMD level), rustc $(rustc -V | cut -d' ' -f2)" >> "$out/machine.txt"

report() { # name, RUSTFLAGS, perf_report arguments...
  local name=$1 flags=$2
  shift 2
  RUSTFLAGS="$flags" cargo run --release --target-dir "target/perf-$name" --example perf_report \
    -- --csv "$out/$name.csv" "$@" | tee "$out/$name.txt"
}
report default ""
report default-u64 "" --type u64
report avx2 "-C target-feature=+avx2"
report native "-C target-cpu=native"
report native-u64 "-C target-cpu=native" --type u64
cargo run --release --example desc_report | tee "$out/desc.txt"
python3 benches/targets.py "$out/native.csv" "$out/default.csv" | tee "$out/targets.txt"
python3 benches/perf_chart.py "$out/default.csv" "$out/native.csv" > benches/perf.svg
echo "wrote $out/ and benches/perf.svg"
