#!/usr/bin/env bash
# Builds the Python package for users: stripped manylinux_2_17 wheels (glibc 2.17 on:
# RHEL/CentOS 7 and 8, Ubuntu 18.04 and 20.04, ...) for every CPython from 3.9 on that
# this machine has (pyenv's, and python3.X on PATH), and the sdist, into OUT (default
# dist/). Then `twine check --strict` and `auditwheel show` on each. Needs Rust (cargo)
# and a Python with venv; maturin, zig (its linker pins the glibc version), twine and
# auditwheel are installed into target/wheel-venv from PyPI.
#
#   bash python/build_wheels.sh [OUT]
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
command -v cargo >/dev/null || { echo "build_wheels.sh: cargo is required (https://rustup.rs)" >&2; exit 1; }
venv=$root/target/wheel-venv
if [ ! -x "$venv/bin/maturin" ]; then
  python3 -m venv "$venv" || { echo "build_wheels.sh: python3 -m venv failed (Debian: python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install -q 'maturin[zig]>=1.16,<2' twine auditwheel
fi
# Every CPython 3.9+ on this machine, one per minor version.
declare -A found=()
for py in "$HOME"/.pyenv/versions/3.*/bin/python3.* $(compgen -c python3. | sort -u); do
  py=$(command -v "$py" 2>/dev/null) || continue
  [[ $py == *-config ]] && continue
  v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 9) and sys.implementation.name == "cpython" else None' 2>/dev/null) || continue
  [[ $v == None || -z $v || -n ${found[$v]:-} ]] && continue
  found[$v]=$py
done
if ((${#found[@]} == 0)); then
  echo "build_wheels.sh: no CPython 3.9 or later found (pyenv install 3.11, or python3.X on PATH)" >&2
  exit 1
fi
interpreters=()
for v in $(printf '%s\n' "${!found[@]}" | sort -V); do
  echo "build_wheels.sh: CPython $v at ${found[$v]}"
  interpreters+=("${found[$v]}")
done
cd "$root/python"
# maturin finds zig as `python3 -m ziglang`: the venv's python first on PATH.
export PATH="$venv/bin:$PATH"
"$venv/bin/maturin" build --release --strip --zig --compatibility manylinux2014 \
  --out "$out" -i "${interpreters[@]}"
"$venv/bin/maturin" sdist --out "$out"
"$venv/bin/twine" check --strict "$out"/corun_kv-*.whl "$out"/corun_kv-*.tar.gz
for whl in "$out"/corun_kv-*.whl; do
  report=$("$venv/bin/auditwheel" show "$whl")
  grep -q 'manylinux_2_17' <<<"$report" || { echo "$report" >&2; echo "build_wheels.sh: $whl is not manylinux_2_17" >&2; exit 1; }
  echo "auditwheel: $(basename "$whl"): manylinux_2_17 ok"
done
echo "wheels: $(ls "$out"/corun_kv-*.whl | wc -l) in $out"
