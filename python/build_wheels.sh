#!/usr/bin/env bash
# Builds the Python package for users: stripped manylinux_2_17 wheels (glibc 2.17 on:
# RHEL/CentOS 7 and 8, Ubuntu 18.04 and 20.04, Amazon Linux 2, ...) for x86_64 and aarch64
# and every CPython that pyo3 supports from 3.9 on (VERSIONS), and the sdist, into OUT
# (default dist/). Then `twine check --strict` and `auditwheel show` on each. The wheels
# need no interpreter on this machine: maturin cross-compiles with zig (its linker pins
# the glibc version) against its bundled sysconfig of each CPython. Needs Rust (cargo,
# with the aarch64-unknown-linux-gnu target) and a Python with venv; maturin, zig, twine
# and auditwheel are installed into target/wheel-venv from PyPI. Tested: by .ci/release
# (x86_64, each CPython this machine has) and python/test_wheel_qemu.sh (aarch64).
#
#   bash python/build_wheels.sh [OUT]
set -euo pipefail
if [ "${1:-}" = --help ]; then sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
# pyo3 0.30 supports CPython 3.9 to 3.15 (pyo3-ffi's build.rs); maturin 1.16's bundled
# sysconfig has each. Not abi3 (python/Cargo.toml says why): one wheel per version.
VERSIONS=(3.9 3.10 3.11 3.12 3.13 3.14 3.15)
TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
command -v cargo >/dev/null || { echo "build_wheels.sh: cargo is required (https://rustup.rs)" >&2; exit 1; }
rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu ||
  { echo "build_wheels.sh: the Rust target aarch64-unknown-linux-gnu is required (rustup target add aarch64-unknown-linux-gnu)" >&2; exit 1; }
venv=$root/target/wheel-venv
if [ ! -x "$venv/bin/maturin" ]; then
  python3 -m venv "$venv" || { echo "build_wheels.sh: python3 -m venv failed (Debian: python3-venv)" >&2; exit 1; }
  echo "build_wheels.sh: installing maturin, zig, twine and auditwheel into $venv" >&2
  "$venv/bin/pip" install -q 'maturin[zig]>=1.16,<2' twine auditwheel
fi
interpreters=()
for v in "${VERSIONS[@]}"; do interpreters+=("python$v"); done
cd "$root/python"
# maturin finds zig as `python3 -m ziglang`: the venv's python first on PATH. No debug
# info is built for wheels that are stripped anyway (the workspace's release profile
# keeps line tables for profiling): a shorter build.
export PATH="$venv/bin:$PATH" CARGO_PROFILE_RELEASE_DEBUG=0
for target in "${TARGETS[@]}"; do
  # An explicit --target, the host's included: the interpreters come from the bundled
  # sysconfig, whichever this machine has.
  echo "build_wheels.sh: $target wheels for CPython ${VERSIONS[*]} (a release build each: minutes)" >&2
  "$venv/bin/maturin" build --release --strip --zig --compatibility manylinux2014 \
    --target "$target" --out "$out" -i "${interpreters[@]}"
done
"$venv/bin/maturin" sdist --out "$out"
"$venv/bin/twine" check --strict "$out"/corun_kv-*.whl "$out"/corun_kv-*.tar.gz
for whl in "$out"/corun_kv-*.whl; do
  arch=$(basename "$whl" .whl | grep -oE '(x86_64|aarch64)$')
  report=$("$venv/bin/auditwheel" show "$whl")
  grep -q "manylinux_2_17_$arch" <<<"$report" || { echo "$report" >&2; echo "build_wheels.sh: $whl is not manylinux_2_17_$arch" >&2; exit 1; }
  echo "auditwheel: $(basename "$whl"): manylinux_2_17_$arch ok"
done
n=$(ls "$out"/corun_kv-*.whl | wc -l)
((n == ${#VERSIONS[@]} * ${#TARGETS[@]})) || { echo "build_wheels.sh: $n wheels in $out, expected $((${#VERSIONS[@]} * ${#TARGETS[@]})) (a stale one?)" >&2; exit 1; }
echo "wheels: $n in $out"
