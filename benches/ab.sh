#!/usr/bin/env bash
# Compares builds of perf_report side by side: runs each binary in turn, ROUNDS times, and
# prints per workload the median corun/floor of each (with the range). Alternating whole
# runs spreads this machine's noise over all builds alike; one run of each is not enough.
# The table goes to results/<machine>/<run>/ab-<size>.txt too.
#
#   RUSTFLAGS="-C target-cpu=native" cargo build --release --example perf_report
#   cp target/release/examples/perf_report /tmp/pr_new   # and a build of the parent commit
#   bash benches/ab.sh 4K 15 /tmp/pr_old /tmp/pr_new     # optional 4th+ args: more builds
#   TYPE=u64 bash benches/ab.sh 4K 7 /tmp/pr_old /tmp/pr_new
set -euo pipefail
if [ $# -lt 3 ] || [ "$1" = --help ]; then sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
exec > >(tee "$(bash "$(dirname "$0")/results-dir")/ab-$1.txt")
size=$1 rounds=$2
shift 2
for _ in $(seq "$rounds"); do
  for b in "$@"; do
    "$b" --size "$size" --type "${TYPE:-u32}" | grep "^| $size |" |
      awk -F'|' -v b="$(basename "$b")" 'NF >= 11 {gsub(/ /, "", $3); gsub(/[ x]/, "", $10); print b, $3, $10}'
  done
done | python3 -c '
import collections, statistics, sys
d = collections.defaultdict(list)
for line in sys.stdin:
    b, w, v = line.split()
    d[w, b].append(float(v))
for w in sorted({w for w, _ in d}):
    cells = (f"{b}: {statistics.median(v):.3f} ({min(v):.2f}-{max(v):.2f})"
             for (w2, b), v in sorted(d.items()) if w2 == w)
    print(f"{w:12}", "  ".join(cells))
'
