#!/usr/bin/env bash
# Runs one fuzz target from its corpus (fuzz/corpus/<target>/, not in git: the fuzzer's
# own finds) and the committed seeds (tests/fuzz_seeds/<target>/). What CI and
# campaign.sh both call; libFuzzer's own flags follow the target.
#
#   bash fuzz/run.sh agree -max_total_time=30
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = --help ]; then sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")"
target=$1
shift
mkdir -p "corpus/$target"
exec cargo +nightly fuzz run "$target" "corpus/$target" "../tests/fuzz_seeds/$target" -- "$@"
