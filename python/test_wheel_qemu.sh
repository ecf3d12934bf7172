#!/usr/bin/env bash
# Tests aarch64 wheels under qemu-user, as the aarch64 Rust tests run: an arm64 CPython
# from Debian's packages (apt-get download, unpacked with dpkg -x into
# target/qemu-aarch64/root-3.X: nothing arm64 is installed), numpy's aarch64 wheel and the
# tests' packages from PyPI in a site folder of the wheel's own, then, under
# `qemu-aarch64 -L root-3.X`: the import (from that folder), python/examples/typed_api.py
# and the fast tests (test_corun.py, test_limits.py). A wheel whose CPython Debian does
# not package for arm64 here (bookworm has 3.11 only) is reported as not tested. Needs
# qemu-user and dpkg's arm64 architecture (dpkg --add-architecture arm64 && apt-get
# update: .ci/setup), and target/wheel-venv (python/build_wheels.sh).
#
#   bash python/test_wheel_qemu.sh WHEEL...
# Its last line: qemu-aarch64 tested=<n> untested=<tags>
set -euo pipefail
if [ "${1:-}" = --help ] || [ $# = 0 ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/target/qemu-aarch64
pip=$root/target/wheel-venv/bin/pip
command -v qemu-aarch64 >/dev/null || { echo "test_wheel_qemu.sh: qemu-aarch64 is required (Debian: qemu-user)" >&2; exit 1; }
[ -x "$pip" ] || { echo "test_wheel_qemu.sh: $pip is missing (run python/build_wheels.sh)" >&2; exit 1; }
dpkg --print-foreign-architectures | grep -qx arm64 ||
  { echo "test_wheel_qemu.sh: dpkg has no arm64 architecture (dpkg --add-architecture arm64 && apt-get update)" >&2; exit 1; }

# An arm64 CPython 3.X and the libraries it and numpy load, unpacked (not installed):
# the interpreter's packages, their direct dependencies, and the C++ runtime numpy needs.
sysroot() {
  local v=$1 dir=$work/root-$1
  [ -x "$dir/usr/bin/python$v" ] && return 0
  local pkgs=("python$v-minimal" "libpython$v-minimal" "libpython$v-stdlib")
  local deps
  deps=$(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "${pkgs[@]/%/:arm64}" |
    sed -n 's/^ *\(Pre\)\{0,1\}Depends: \([^<].*\):arm64$/\2/p' | sort -u)
  rm -rf "$dir" "$work/debs-$v" && mkdir -p "$dir" "$work/debs-$v"
  (cd "$work/debs-$v" && apt-get download -q=2 -o APT::Sandbox::User=root $(printf '%s:arm64\n' "${pkgs[@]}" $deps libgcc-s1 libstdc++6 | sort -u))
  for deb in "$work/debs-$v"/*.deb; do dpkg -x "$deb" "$dir"; done
  [ -x "$dir/usr/bin/python$v" ] || { echo "test_wheel_qemu.sh: no python$v in $dir" >&2; exit 1; }
}

tested=0 untested=()
for whl in "$@"; do
  name=$(basename "$whl")
  [[ $name == *_aarch64.whl ]] || { echo "test_wheel_qemu.sh: $name is not an aarch64 wheel" >&2; exit 1; }
  tag=$(cut -d- -f3 <<<"$name")            # cp311
  v=${tag:2:1}.${tag:3}                     # 3.11
  if ! apt-cache show "python$v-minimal:arm64" >/dev/null 2>&1; then
    echo "$tag aarch64: not tested (Debian has no python$v for arm64 here)"
    untested+=("$tag")
    continue
  fi
  sysroot "$v"
  dir=$work/root-$v site=$work/site-$tag shim=$work/shim-$v
  rm -rf "$site" && "$pip" install -q --target "$site" --python-version "$v" --implementation cp \
    --abi "$tag" --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \
    --only-binary=:all: "$whl" numpy pytest hypothesis
  # The interpreter as a host command, and as the tests' sys.executable: test_limits.py
  # starts child interpreters, which must go through qemu too (no binfmt_misc here).
  mkdir -p "$shim"
  printf '#!/bin/sh\nexec qemu-aarch64 -L "%s" "%s/usr/bin/python%s" "$@"\n' "$dir" "$dir" "$v" >"$shim/python"
  chmod +x "$shim/python"
  printf 'import os, sys\nsys.executable = os.environ.get("CORUN_QEMU_PYTHON", sys.executable)\n' \
    >"$shim/sitecustomize.py"
  run() { (cd "$root/python" && env -u PYTHONHOME PYTHONNOUSERSITE=1 CORUN_QEMU_PYTHON="$shim/python" \
    PYTHONPATH="$shim:$site" "$shim/python" "$@"); }
  run -c 'import corun, platform, sys
assert platform.machine() == "aarch64", platform.machine()
assert corun.__file__.startswith(sys.argv[1]), corun.__file__
print("import:", corun.__version__, platform.machine(), "CPython", platform.python_version())' "$site"
  run examples/typed_api.py
  # test_memory_limit_is_a_memory_error sets RLIMIT_AS, which qemu-user does not apply
  # to the guest (it would limit qemu itself): that test runs on x86_64 only.
  log=$work/pytest-$tag.log
  run -m pytest -q -p no:cacheprovider tests/test_corun.py tests/test_limits.py \
    -k 'not test_memory_limit_is_a_memory_error' >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  echo "$tag aarch64 (qemu): $(tail -1 "$log")"
  tested=$((tested + 1))
done
echo "qemu-aarch64 tested=$tested untested=$(IFS=,; echo "${untested[*]:-none}")"
