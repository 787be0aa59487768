#!/usr/bin/env node
'use strict';

// Packs the package as npm would publish it, installs the tarball into an empty project (which
// builds the addon from source through the package's install script), and makes one real
// request through it there. Run by .ci/run after the tests: it proves `npm install hyperagent`
// works for a user, not only in this checkout.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-pack-'));

function sh(cmd, args, cwd, env = process.env) {
  return execFileSync(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
}

try {
  const [packed] = JSON.parse(sh(npm, ['pack', '--json', '--pack-destination', work], root));
  const tarball = path.join(work, packed.filename);
  const files = packed.files.map((f) => f.path);
  for (const needed of ['index.js', 'index.d.ts', 'binding.js', 'Cargo.toml', 'src/lib.rs', 'scripts/build.js']) {
    if (!files.includes(needed)) throw new Error(`the package lacks ${needed}`);
  }
  for (const f of files) {
    if (/\.node$|^target\/|^node_modules\//.test(f)) throw new Error(`the package must not contain ${f}`);
  }
  console.log(`packed ${packed.filename}: ${files.length} files, ${packed.size} bytes`);

  const app = path.join(work, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  // Reuse this checkout's compiled dependencies: the package's own sources are still built.
  const env = { ...process.env, CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR || path.join(root, 'target') };
  sh(npm, ['install', '--no-audit', '--no-fund', tarball], app, env);

  const smoke = `
    const http = require('node:http');
    const assert = require('node:assert');
    const { Agent } = require('hyperagent');
    const server = http.createServer((req, res) => res.end('installed')).listen(0, '127.0.0.1', () => {
      const agent = new Agent();
      http.get({ host: '127.0.0.1', port: server.address().port, agent }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => {
          assert.strictEqual(body, 'installed');
          agent.destroy();
          server.close();
          console.log('request through the installed package: ok');
        });
      });
    });
  `;
  process.stdout.write(sh(process.execPath, ['-e', smoke], app));
  const esm = `import { Agent } from 'hyperagent'; if (typeof Agent !== 'function') process.exit(1); console.log('ESM import of the installed package: ok');`;
  process.stdout.write(sh(process.execPath, ['--input-type=module', '-e', esm], app));
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
