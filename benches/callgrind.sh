#!/usr/bin/env bash
# Instruction profile of the kernel: callgrind (with its branch simulator) on the
# profile_probe example, per 64-position block, for a build with the given RUSTFLAGS
# (default: -C target-feature=+avx2). Deterministic, so it shows what a change costs on
# a machine too noisy to time it. Needs valgrind (apt install valgrind). The table goes to
# results/<machine>/<run>/callgrind-<flags>.txt too.
#
#   bash benches/callgrind.sh                        # +avx2
#   RUSTFLAGS="" bash benches/callgrind.sh           # the default (SSE2) build
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
flags=${RUSTFLAGS--C target-feature=+avx2}
slug=$(echo "$flags" | tr -cs 'a-z0-9' - | sed 's/^-//; s/-$//')
dir=target/callgrind${flags:+-$slug}
report="$(bash benches/results-dir)/callgrind-${slug:-default}.txt"
exec > >(tee "$report")
RUSTFLAGS="$flags" cargo build -q --release --example profile_probe --target-dir "$dir"
probe=$dir/release/examples/profile_probe
out=$(mktemp)
trap 'rm -f "$out"' EXIT
blocks=$((65536 * 20 / 64))
# Prints "instructions mispredictions" for one run.
totals() {
  valgrind -q --tool=callgrind --branch-sim=yes --callgrind-out-file="$out" "$probe" "$@" >/dev/null
  callgrind_annotate "$out" 2>/dev/null | grep "PROGRAM TOTALS" | tr -d , | awk '{print $1, $5 + $9}'
}
echo "callgrind, u32, RUSTFLAGS=\"$flags\": per 64-position block (20 calls x 65,536 positions)"
echo
echo "| workload | group_into instr | count_runs instr | scalar instr | group_into mispredicts | scalar mispredicts |"
echo "|---|---|---|---|---|---|"
for w in no-breaks mean-256 mean-16 mean-4 singletons trace-p16; do
  read -r i0 m0 < <(totals "$w" idle)
  row="| $w"
  for f in group_into count_runs scalar; do
    read -r i m < <(totals "$w" "$f")
    row="$row | $(( (i - i0) / blocks ))"
    eval "m_$f=\$(( (m - m0) * 100 / blocks ))"
  done
  printf '%s | %d.%02d | %d.%02d |\n' "$row" $((m_group_into / 100)) $((m_group_into % 100)) \
    $((m_scalar / 100)) $((m_scalar % 100))
done
