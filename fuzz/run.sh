#!/usr/bin/env bash
# Runs one fuzz target from its corpus (fuzz/corpus/<target>/, not in git: the fuzzer's
# own finds) and the committed seeds (tests/fuzz_seeds/<target>/). What CI and
# campaign.sh both call; libFuzzer's own flags follow the target. The targets are the
# [[bin]]s of fuzz/Cargo.toml (`cargo +nightly fuzz list` in fuzz/).
#
#   bash fuzz/run.sh agree -max_total_time=30
set -euo pipefail
# `--help` (or no target) prints this header and touches nothing, from any directory.
if [ $# -lt 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"
  exit 0
fi
cd "$(dirname "${BASH_SOURCE[0]}")"
target=$1
shift
mkdir -p "corpus/$target"
exec cargo +nightly fuzz run "$target" "corpus/$target" "../tests/fuzz_seeds/$target" -- "$@"
