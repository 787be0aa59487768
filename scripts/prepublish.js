#!/usr/bin/env node
'use strict';

// Gives the main package's package.json the form it is published in: every platform package
// of npm/ in optionalDependencies, at the main package's version (napi-rs's convention; the
// repository's own package.json lists none, since a checkout builds the addon from source and
// an unpublished version has no platform packages to install).
//
//   node scripts/prepublish.js [<package folder>] [--require-binaries]
//
// The folder defaults to the repository. With --require-binaries, every npm/<system> must
// hold its addon (the release workflow's check before publishing).

const fs = require('node:fs');
const path = require('node:path');
const { BINARY } = require('../lib/loader');

const root = path.resolve(__dirname, '..');

function prepublish(dir = root, { requireBinaries = false } = {}) {
  const manifestPath = path.join(dir, 'package.json');
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  const optional = {};
  const problems = [];
  for (const system of fs.readdirSync(path.join(root, 'npm')).sort()) {
    const p = JSON.parse(fs.readFileSync(path.join(root, 'npm', system, 'package.json'), 'utf8'));
    if (p.name !== `${manifest.name}-${system}`) problems.push(`npm/${system} is named ${p.name}`);
    if (p.version !== manifest.version) problems.push(`npm/${system} is at ${p.version}, ${manifest.name} at ${manifest.version}`);
    if (requireBinaries && !fs.existsSync(path.join(root, 'npm', system, `${BINARY}.${system}.node`))) {
      problems.push(`npm/${system} lacks ${BINARY}.${system}.node`);
    }
    optional[p.name] = manifest.version;
  }
  if (problems.length) throw new Error(`not ready to publish:\n  ${problems.join('\n  ')}`);
  manifest.optionalDependencies = optional;
  fs.writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  return optional;
}

if (require.main === module) {
  const args = process.argv.slice(2);
  const dir = args.find((a) => !a.startsWith('--'));
  const optional = prepublish(dir ? path.resolve(dir) : root, { requireBinaries: args.includes('--require-binaries') });
  console.log(`optionalDependencies: ${Object.keys(optional).join(', ')}`);
}

module.exports = { prepublish };
