#!/usr/bin/env node
'use strict';

// Builds the native addon from source, into `hyperagent.<system>.node` beside package.json,
// where lib/loader.js looks first.
//
// The package's install script: in a development checkout (`npm install`) it builds; in a
// project that installed the package, it does nothing when the prebuilt package for this
// system is installed (npm installs it from the optional dependencies), and builds otherwise.
// HYPERAGENT_BUILD_FROM_SOURCE=1 builds in any case, and so does running this file directly
// (`node node_modules/hyperagent-rs/scripts/build.js`) or `npm run build`. `--debug` for a
// debug build.
//
// With @napi-rs/cli at hand (a development checkout), `napi build` compiles the crate and
// writes binding.d.ts, the addon's own typings, for reference. Without it (an installed
// package), cargo builds the library and it is copied to the file name the loader looks for.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { prebuiltFor, detectLibc, systemName, BINARY, SUPPORTED_TEXT } = require('../lib/loader');

const root = path.resolve(__dirname, '..');
const debug = process.argv.includes('--debug');
const pkg = require('../package.json');
const system = systemName({ platform: process.platform, arch: process.arch, libc: detectLibc() });

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.error) {
    if (r.error.code === 'ENOENT') {
      console.error(`${pkg.name}: '${cmd}' was not found. Building the addon from source needs Rust ` +
        `(https://rustup.rs) and a C compiler. On the systems with a prebuilt addon (${SUPPORTED_TEXT}), install with optional ` +
        'dependencies instead, and the prebuilt addon needs neither.');
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

function forced() {
  const v = process.env.HYPERAGENT_BUILD_FROM_SOURCE;
  return Boolean(v) && v !== '0' && v !== 'false';
}

// As npm's install script (also what `npm rebuild` runs), with a prebuilt addon for this system
// installed: nothing to build.
if (process.env.npm_lifecycle_event === 'install' && !forced()) {
  const pre = prebuiltFor(system, { root });
  if (pre.file) {
    console.log(`${pkg.name}: using the prebuilt addon ${pre.name}; HYPERAGENT_BUILD_FROM_SOURCE=1 builds from source`);
    process.exit(0);
  }
}

const cli = napiCli();
if (cli) {
  const args = [cli, 'build', '--platform', '--no-js', '--dts', 'binding.d.ts'];
  if (!debug) args.push('--release');
  run(process.execPath, args);
} else {
  const args = ['build', '--lib'];
  if (!debug) args.push('--release');
  run('cargo', args);
  const libName = process.platform === 'darwin' ? 'libhyperagent.dylib'
    : process.platform === 'win32' ? 'hyperagent.dll' : 'libhyperagent.so';
  const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
  // Copy beside, then rename over: a process that has the old addon loaded keeps its mapping
  // of the old file instead of seeing it rewritten under it.
  const dest = path.join(root, `${BINARY}.${system}.node`);
  const temp = `${dest}.${process.pid}.tmp`;
  fs.copyFileSync(path.join(targetDir, debug ? 'debug' : 'release', libName), temp);
  fs.renameSync(temp, dest);
}
