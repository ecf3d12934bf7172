#!/usr/bin/env bash
# A fuzz campaign: each target in turn for SECONDS (default 1800), from the committed
# seeds (tests/fuzz_seeds/) and the local corpus (fuzz/corpus/, not in git), then the
# corpus minimised (`cargo fuzz cmin`). Prints one summary line per target, also written
# to results/<machine>/<run>/fuzz-campaign.txt; libFuzzer's log of each target goes to
# fuzz/logs/campaign-<target>.log (not in git).
#
#   bash fuzz/campaign.sh [SECONDS] [TARGET ...]     (default: every target,
#                                                    `cargo +nightly fuzz list`)
#
# One fuzzing process at a time; run two invocations with different targets to use two
# cores. A crash stops that target: its input is in fuzz/artifacts/<target>/.
set -uo pipefail
# `--help` prints this header before anything else runs: from any directory (the path
# of this file, not of the working directory), writing nothing.
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  exit 0
fi
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 1
summary="../$(bash ../benches/results-dir)/fuzz-campaign.txt"
secs=${1:-1800}
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then
  # The one list of targets: fuzz/Cargo.toml's [[bin]]s.
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p logs
cargo +nightly fuzz build >/dev/null
for t in "${targets[@]}"; do
  log=logs/campaign-$t.log
  mkdir -p "corpus/$t"
  before=$(find "corpus/$t" "../tests/fuzz_seeds/$t" -type f | wc -l)
  start=$(date +%s)
  bash run.sh "$t" -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1
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
    tee -a "$summary"
done
