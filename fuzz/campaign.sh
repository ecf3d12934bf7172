#!/usr/bin/env bash
# A fuzz campaign: each target in turn for SECONDS (default 1800), then its corpus
# minimised (`cargo fuzz cmin`). Prints one summary line per target and keeps the
# libFuzzer log of each in fuzz/results/campaign-<target>.log.
#
#   bash fuzz/campaign.sh [SECONDS] [TARGET ...]     (default: every target)
#
# One fuzzing process at a time; run two invocations with different targets to use two
# cores. A crash stops that target: its input is in fuzz/artifacts/<target>/.
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-1800}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(agree resume max_len mismatch steps descriptors gather raw)
fi
mkdir -p results
cargo +nightly fuzz build >/dev/null
for t in "${targets[@]}"; do
  log=results/campaign-$t.log
  before=$(find "corpus/$t" -type f | wc -l)
  start=$(date +%s)
  cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+')
  grown=$(find "corpus/$t" -type f | wc -l)
  findings=$(find "artifacts/$t" -type f 2>/dev/null | wc -l)
  cargo +nightly fuzz cmin "$t" >>"$log" 2>&1
  kept=$(find "corpus/$t" -type f | wc -l)
  printf 'campaign target=%s seconds=%s execs=%s cov=%s ft=%s corpus=%s->%s->%s(cmin) findings=%s exit=%s\n' \
    "$t" "$took" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$before" "$grown" "$kept" "$findings" "$rc" |
    tee -a results/campaign.txt
done
