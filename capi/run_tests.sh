#!/usr/bin/env bash
# Builds the C library, checks the committed header against cbindgen's output, and runs
# the C tests (gcc -std=c99 -Wall -Wextra -Werror -pedantic, AddressSanitizer and
# UndefinedBehaviorSanitizer) against the static library; builds the RDMA example
# against libibverbs; runs the UCX agent (examples/ucx_agent.c) at a small size over TCP
# and shared memory, and with a decode side that dies. Run from anywhere; `.ci/run`
# calls it.
#
#   bash capi/run_tests.sh          (from anywhere)
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")"
root=..
target=${CARGO_TARGET_DIR:-$root/target}

need() { # command, what provides it
  command -v "$1" >/dev/null || { echo "capi/run_tests.sh: $1 is required ($2)" >&2; exit 1; }
}
need cbindgen "cargo install cbindgen --locked --version 0.29.4, or bash .ci/setup"
need gcc "Debian: gcc"
need g++ "Debian: g++"
need ucx_info "Debian: libucx-dev ucx-utils"
rustup toolchain list 2>/dev/null | grep -q '^nightly' ||
  { echo "capi/run_tests.sh: cbindgen expands macros with nightly Rust (rustup toolchain install nightly)" >&2; exit 1; }

echo "== header: regenerate with cbindgen and compare"
# cbindgen warns about every private item it skips: keep its errors, not those.
RUSTUP_TOOLCHAIN=nightly CARGO_TARGET_DIR="$target/cbindgen" \
  cbindgen --config cbindgen.toml --output "$target/corun.h.generated" 2> >(grep -v '^WARN: Skip' >&2)
diff -u include/corun.h "$target/corun.h.generated" || {
  echo "include/corun.h is stale: run cbindgen (see cbindgen.toml) and commit it" >&2
  exit 1
}

echo "== library: static and shared, release"
cargo build -p corun-capi --release
lib="$target/release/libcorun.a"
libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

cflags=(-std=c99 -Wall -Wextra -Werror -pedantic -g -O1 -Iinclude
  -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
out="$target/capi-tests"
mkdir -p "$out"

echo "== header alone: C99 and C++ compile clean"
printf '#include "corun.h"\nint main(void) { corun_options o = CORUN_OPTIONS_DEFAULT; return (int)o.max_len; }\n' \
  > "$out/header_only.c"
gcc -std=c99 -Wall -Wextra -Werror -pedantic -Iinclude -c "$out/header_only.c" -o "$out/header_only.o"
printf '#include "corun.h"\nint main() { corun_options o = CORUN_OPTIONS_DEFAULT; return (int)o.max_len; }\n' \
  > "$out/header_only.cpp"
g++ -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -c "$out/header_only.cpp" -o "$out/header_cpp.o"

echo "== C tests (ASan + UBSan)"
gcc "${cflags[@]}" tests/test_corun.c "$lib" $libs -o "$out/test_corun"
"$out/test_corun"
gcc "${cflags[@]}" tests/test_post_writes.c "$lib" $libs -o "$out/test_post_writes"
"$out/test_post_writes"

echo "== example: quickstart, libc only (ASan + UBSan)"
gcc "${cflags[@]}" examples/quickstart.c "$lib" $libs -o "$out/quickstart"
"$out/quickstart"

echo "== example: RDMA WRITE chains against libibverbs (built and linked; no device here)"
gcc -std=c99 -Wall -Wextra -Werror -pedantic -O2 -Iinclude examples/post_writes.c "$lib" \
  -libverbs $libs -o "$out/post_writes"
echo "built $out/post_writes"

echo "== UCX agent: KV pages over TCP and shared memory, every byte verified (ASan + UBSan)"
gcc "${cflags[@]}" examples/ucx_agent.c "$lib" -lucp -lucs $libs -o "$out/ucx_agent"
"$out/ucx_agent" --pages 512 --buffers 4 --page-bytes 64 --rounds 1

echo "== UCX agent: a decode side that dies is an error, not a hang"
# Before any transfer (0) and between transfers (3), over both transports. UCX itself
# leaks a few bytes on these error paths, so LeakSanitizer is off here.
for tls in tcp sm; do
  for after in 0 3; do
    rc=0
    ASAN_OPTIONS=detect_leaks=0 timeout 60 "$out/ucx_agent" --pages 256 --buffers 4 \
      --page-bytes 64 --rounds 1 --tls $tls --decode-exits-after $after >"$out/dead.log" 2>&1 || rc=$?
    if [ "$rc" != 1 ] || ! grep -q "ucx_agent: FAILED" "$out/dead.log"; then
      cat "$out/dead.log"
      echo "ucx_agent with a dead peer ($tls, after $after checks): exit $rc, expected 1" >&2
      exit 1
    fi
    echo "dead peer over $tls after $after checks: $(grep -m1 -E '^(ucx|prefill):' "$out/dead.log" || echo error)"
  done
done
