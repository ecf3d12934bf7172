#!/usr/bin/env bash
# Regenerates the README's performance figures, one perf_report per SIMD backend: the
# default build (SSE2; u32 and u64), `+avx2`, and `-C target-cpu=native` (AVX-512 where
# the CPU has it; u32 and u64); desc_report (descriptors and gather lists); the targets
# (benches/targets.py); CSVs, text and the chart perf.svg in results/<machine>/<date>-<commit>/
# (benches/results-dir).
# Run on a quiet machine; takes about 15 minutes. NEON is measured by instruction counts
# under qemu (benches/qemu_count.py), not time: under qemu, time means nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
out=$(bash benches/results-dir)

report() { # name, RUSTFLAGS, perf_report arguments...
  local name=$1 flags=$2
  shift 2
  RUSTFLAGS="$flags" cargo run --release --target-dir "target/perf-$name" --example perf_report \
    -- --csv "$out/perf-$name.csv" "$@" | tee "$out/perf-$name.txt"
}
report default ""
report default-u64 "" --type u64
report avx2 "-C target-feature=+avx2"
report native "-C target-cpu=native"
report native-u64 "-C target-cpu=native" --type u64
cargo run --release --example desc_report | tee "$out/desc.txt"
python3 benches/targets.py "$out/perf-native.csv" "$out/perf-default.csv" | tee "$out/targets.txt"
python3 benches/perf_chart.py "$out/perf-default.csv" "$out/perf-native.csv" > "$out/perf.svg"
echo "wrote $out/"
