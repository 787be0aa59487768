#!/usr/bin/env node
'use strict';

// Puts a built addon into its platform package, stripped: npm/<system>/hyperagent.<system>.node,
// napi-rs's layout (the release workflow publishes each npm/<system> folder as
// hyperagent-rs-<system>).
//
//   node scripts/platform-package.js [--system linux-x64-gnu] [--addon <file>] [--out <dir>]
//
// By default the system is this machine's, the addon the one `npm install` / `npm run build`
// built here (hyperagent.<system>.node), and the folder npm/<system>. With --out, the folder's
// package.json and README are copied from npm/<system> into <dir> first. STRIP names the strip
// tool (for a cross build's binutils); without one, the addon goes unstripped, with a warning.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { detectLibc, systemName, BINARY } = require('../lib/loader');

const root = path.resolve(__dirname, '..');

function platformPackage({ system, addon, out } = {}) {
  system ??= systemName({ platform: process.platform, arch: process.arch, libc: detectLibc() });
  addon ??= path.join(root, `${BINARY}.${system}.node`);
  const template = path.join(root, 'npm', system);
  if (!fs.existsSync(path.join(template, 'package.json'))) throw new Error(`npm/${system} does not exist`);
  if (!fs.existsSync(addon)) throw new Error(`${addon} does not exist: build the addon first (npm run build)`);
  out ??= template;
  if (path.resolve(out) !== path.resolve(template)) {
    fs.mkdirSync(out, { recursive: true });
    for (const f of fs.readdirSync(template)) {
      if (!f.endsWith('.node')) fs.copyFileSync(path.join(template, f), path.join(out, f));
    }
  }
  const file = path.join(out, `${BINARY}.${system}.node`);
  fs.copyFileSync(addon, file);
  let stripped = false;
  if (!system.startsWith('win32')) {
    const strip = process.env.STRIP || 'strip';
    // macOS's strip keeps the exported symbols with -x; GNU strip keeps .dynsym with -s.
    const args = system.startsWith('darwin') ? ['-x', file] : ['--strip-all', file];
    const r = spawnSync(strip, args, { stdio: 'inherit' });
    stripped = !r.error && r.status === 0;
    if (!stripped) console.warn(`platform-package: ${strip} failed; ${file} is not stripped`);
  }
  return { system, dir: out, file, size: fs.statSync(file).size, stripped };
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const opt = (name) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const r = platformPackage({ system: opt('system'), addon: opt('addon'), out: opt('out') });
  console.log(`${r.file}: ${r.size} bytes${r.stripped ? ', stripped' : ''}`);
}

module.exports = { platformPackage };
