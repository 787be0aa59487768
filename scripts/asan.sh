#!/usr/bin/env bash
# Runs the Rust tests and the JavaScript suite against builds instrumented with
# AddressSanitizer: an out-of-bounds access, a use after free or a double free in the addon
# (or in Node-API calls it makes) stops the test with a report, where an ordinary build might
# go on or crash later without saying why.
#
#   bash scripts/asan.sh            # Rust tests, then the JavaScript suite
#   bash scripts/asan.sh js         # the JavaScript suite only
#
# Needs the nightly Rust toolchain (-Zsanitizer) and, for Node (which is not instrumented),
# the shared ASan runtime, preloaded: Debian's libclang-rt-19-dev (installed here if missing
# and this runs as root). Linux x64 only. Reports go to target/asan/logs/; the run fails if any
# test fails or any report was written.
set -euo pipefail
cd "$(dirname "$0")/.."

triple=x86_64-unknown-linux-gnu
runtime=/usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.asan-x86_64.so
if [ ! -e "$runtime" ] && [ "$(id -u)" = 0 ]; then
  apt-get install -y -qq libclang-rt-19-dev > /dev/null
fi
[ -e "$runtime" ] || { echo "asan: $runtime missing (apt-get install libclang-rt-19-dev)" >&2; exit 2; }
cargo +nightly --version > /dev/null || { echo "asan: the nightly toolchain is needed" >&2; exit 2; }

export CARGO_TARGET_DIR="$PWD/target/asan"
# --target: the sanitizer instruments the crate and its dependencies, not build scripts or
# proc-macros. Optimised a little (the suite's timing-sensitive tests need it), frames kept
# for the reports' stacks.
export RUSTFLAGS="-Zsanitizer=address -Cforce-frame-pointers=yes"
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_TEST_OPT_LEVEL=1
logs="$CARGO_TARGET_DIR/logs"
rm -rf "$logs" && mkdir -p "$logs"
# Node installs its own SIGSEGV handler; allow_user_segv_handler=0 keeps ASan's, so a wild
# access is reported with its stack instead of ending as a bare segfault.
asan_options="detect_leaks=0:halt_on_error=1:allow_user_segv_handler=0:log_path=$logs/asan"

if [ "${1:-all}" != js ]; then
  echo "== cargo test (ASan)"
  ASAN_OPTIONS="$asan_options" cargo +nightly test --quiet --target "$triple"
fi

echo "== JavaScript suite (ASan addon)"
cargo +nightly build --quiet --lib --target "$triple"
addon="$CARGO_TARGET_DIR/hyperagent.asan.node"
cp "$CARGO_TARGET_DIR/$triple/debug/libhyperagent.so" "$addon"
status=0
LD_PRELOAD="$runtime" ASAN_OPTIONS="$asan_options" HYPERAGENT_NATIVE_PATH="$addon" \
  node --force-node-api-uncaught-exceptions-policy=true --test __test__/ || status=$?

if compgen -G "$logs/asan*" > /dev/null; then
  echo "asan: reports written:" >&2
  cat "$logs"/asan* >&2
  exit 1
fi
exit "$status"
