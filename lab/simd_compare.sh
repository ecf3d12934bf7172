#!/usr/bin/env bash
# What the SIMD level of the Python package costs: corun's calls (bench.py --corun-only)
# in the default build (`pip install ./python`: baseline x86-64, SSE2) against a build for
# this CPU (RUSTFLAGS="-C target-cpu=native"), each in its own venv, run in turn twice;
# the best of the runs per call. Prints default/native per call and input.
#
#   bash lab/simd_compare.sh      (from anywhere; venvs under target/)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
exec > >(tee "$(bash benches/results-dir)/python-simd.txt")
for kind in default native; do
  venv=target/simd-$kind
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q maturin numpy
    flags=""; [ $kind = native ] && flags="-C target-cpu=native"
    CARGO_TARGET_DIR=target/simd-build-$kind RUSTFLAGS="$flags" "$venv/bin/pip" install -q ./python
  fi
done
out=$(mktemp -d)
for round in 1 2; do
  for kind in default native; do
    target/simd-$kind/bin/python lab/bench.py --corun-only >"$out/$kind-$round.txt"
  done
done
python3 - "$out" <<'PY'
import re, sys
def best(kind):
    d = {}
    for r in (1, 2):
        for line in open(f"{sys.argv[1]}/{kind}-{r}.txt"):
            m = re.match(r"corun_only (N=\d+ breaks=\d+%) call=(.*) us=([\d.]+)", line)
            if m:
                d.setdefault((m[1], m[2]), []).append(float(m[3]))
    return {k: min(v) for k, v in d.items()}
a, b = best("default"), best("native")
print("| input | call | default (SSE2) | target-cpu=native | default / native |")
print("|---|---|---|---|---|")
for k in a:
    print(f"| {k[0]} | `{k[1]}` | {a[k]:,.1f} µs | {b[k]:,.1f} µs | {a[k] / b[k]:.2f} |")
PY
