#!/usr/bin/env node
'use strict';

// Builds the native addon from source: `npm install` runs this, in the repository and in a
// project that installed the package from a tarball.
//
// With @napi-rs/cli at hand (a development checkout), `napi build` compiles the crate and
// writes the loader (binding.js) and its typings (binding.d.ts). Without it (an installed
// package, which ships binding.js), cargo builds the library and it is copied to the file name
// the loader looks for.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const debug = process.argv.includes('--debug');

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.error) {
    if (r.error.code === 'ENOENT') {
      console.error(`hyperagent: '${cmd}' was not found. Building from source needs Rust (https://rustup.rs).`);
    } else {
      console.error(r.error);
    }
    process.exit(1);
  }
  if (r.status !== 0) process.exit(r.status ?? 1);
}

function napiCli() {
  try {
    const manifest = require.resolve('@napi-rs/cli/package.json', { paths: [root] });
    return path.join(path.dirname(manifest), require(manifest).bin.napi);
  } catch {
    return null;
  }
}

// The file name binding.js loads on this machine (napi-rs's `<name>.<platform>-<arch>[-abi].node`).
function addonName() {
  const { platform, arch } = process;
  let abi = '';
  if (platform === 'linux') {
    const report = process.report && process.report.getReport();
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    abi = glibc ? '-gnu' : '-musl';
  } else if (platform === 'win32') {
    abi = '-msvc';
  }
  return `hyperagent.${platform}-${arch}${abi}.node`;
}

// A published release ships the addon prebuilt in a per-platform package (npm/<platform>/,
// napi-rs's layout); binding.js loads it. Then there is nothing to build, unless asked.
function prebuilt() {
  if (process.env.HYPERAGENT_BUILD_FROM_SOURCE || !process.env.npm_lifecycle_event) return false;
  const name = addonName().replace(/^hyperagent\./, 'hyperagent-').replace(/\.node$/, '');
  try {
    require.resolve(name, { paths: [root] });
    return true;
  } catch {
    return false;
  }
}

const cli = napiCli();
if (prebuilt()) {
  console.log('hyperagent: using the prebuilt addon for this platform');
} else if (cli) {
  const args = [cli, 'build', '--platform', '--js', 'binding.js', '--dts', 'binding.d.ts'];
  if (!debug) args.push('--release');
  run(process.execPath, args);
} else {
  if (!fs.existsSync(path.join(root, 'binding.js'))) {
    console.error('hyperagent: binding.js is missing and @napi-rs/cli is not installed; run `npm install` in a development checkout.');
    process.exit(1);
  }
  const args = ['build', '--lib'];
  if (!debug) args.push('--release');
  run('cargo', args);
  const libName = process.platform === 'darwin' ? 'libhyperagent.dylib'
    : process.platform === 'win32' ? 'hyperagent.dll' : 'libhyperagent.so';
  const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
  // Copy beside, then rename over: a process that has the old addon loaded keeps its mapping
  // of the old file instead of seeing it rewritten under it.
  const dest = path.join(root, addonName());
  const temp = `${dest}.${process.pid}.tmp`;
  fs.copyFileSync(path.join(targetDir, debug ? 'debug' : 'release', libName), temp);
  fs.renameSync(temp, dest);
}
