#!/usr/bin/env node
'use strict';

// `npm install hyperagent-rs` as a user runs it, against a registry on loopback.
//
// The package is packed and published as a release publishes it (scripts/prepublish.js adds
// the platform packages to optionalDependencies), together with this machine's platform
// package, made from the addon that `npm install` built here (scripts/platform-package.js
// copies and strips it). Then, in empty projects, with no cargo on PATH:
//   - npm 12 (pinned; its defaults block dependencies' install scripts) on Node 22, and the
//     machine's npm on this Node: the install takes the prebuilt addon, and a request through
//     http.request with the Agent and one through agent.request() succeed from CommonJS and
//     from an ES module; the TypeScript typings resolve (tsc --noEmit, the repository's tsc);
//   - --omit=optional: npm 12 installs, and require() throws ERR_HYPERAGENT_NO_BINARY; the
//     machine's npm runs the install script, which fails saying that cargo is missing;
// and with cargo, --omit=optional and the machine's npm build the addon from source (reusing
// this checkout's compiled dependencies), and a request goes through it.
// It prints the install times and the sizes of the two tarballs.
//
//   npm run test:install [-- --no-source]   (--no-source: skip the build from source)

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRegistry } = require('./lib/registry');
const { nodeBinary, npmCli, npm } = require('./lib/tools');
const { platformPackage } = require('./platform-package');
const { prepublish } = require('./prepublish');
const { detectLibc, systemName, BINARY } = require('../lib/loader');

const NPM12 = '12.2.2';
const root = path.resolve(__dirname, '..');
const pkg = require('../package.json');
const system = systemName({ platform: process.platform, arch: process.arch, libc: detectLibc() });
const withSource = !process.argv.includes('--no-source');
const results = [];
const timings = [];

// Runs a command to its end (at most `timeout` ms, then it is killed): { code, out }.
function run(cmd, args, { cwd, env, timeout = 300_000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: signal ? `killed (${signal})` : code, out });
    });
  });
}

async function must(what, cmd, args, opts) {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}):\n${r.out}`);
  return r.out;
}

// Records a check; a failed one ends the run, with `detail`.
function check(name, ok, detail = '') {
  results.push({ name, ok });
  console.log(`${ok ? 'ok' : 'not ok'} - ${name}${!ok && detail ? `: ${detail}` : ''}`);
  if (!ok) throw new Error(`${name}${detail ? `: ${detail}` : ''}`);
}

// This environment without cargo or rustc: a PATH folder that holds them is replaced by one of
// links to everything else in it. `node` is the given binary (first on PATH, as a link of its
// own, since its folder may hold cargo too).
function withoutRust(env, work, node) {
  const hidden = /^(cargo|cargo-.*|rustc|rustup|rustdoc|rustfmt|rust-gdb|rust-lldb)(\.exe)?$/;
  const dirs = [];
  const shadows = fs.mkdtempSync(path.join(work, 'path-'));
  for (const [i, dir] of (env.PATH || '').split(path.delimiter).entries()) {
    let names;
    try {
      names = fs.readdirSync(dir);
    } catch {
      continue;
    }
    if (!names.some((n) => hidden.test(n))) {
      dirs.push(dir);
      continue;
    }
    const shadow = path.join(shadows, String(i));
    fs.mkdirSync(shadow, { recursive: true });
    for (const n of names) if (!hidden.test(n)) fs.symlinkSync(path.join(dir, n), path.join(shadow, n));
    dirs.push(shadow);
  }
  const nodeDir = path.join(shadows, 'node');
  fs.mkdirSync(nodeDir);
  fs.symlinkSync(node, path.join(nodeDir, path.basename(node)));
  return { ...env, PATH: [nodeDir, ...dirs].join(path.delimiter) };
}

// This process's environment less npm's own variables from the parent `npm run`.
function cleanEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

const SMOKE = `
const http = require('node:http');
const assert = require('node:assert');
const { Agent } = require('hyperagent-rs');

const server = http.createServer((req, res) => res.end('hello ' + req.url));
server.listen(0, '127.0.0.1', async () => {
  const { port } = server.address();
  const agent = new Agent({ maxSockets: 2 });
  const body = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/drop-in', agent }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (b += d));
      res.on('end', () => resolve(b));
    }).on('error', reject);
  });
  assert.strictEqual(body, 'hello /drop-in');
  const res = await agent.request('http://127.0.0.1:' + port + '/promise');
  assert.strictEqual(res.statusCode, 200);
  assert.strictEqual(await res.body.text(), 'hello /promise');
  agent.destroy();
  server.close();
  console.log('requests through http.request and agent.request(): ok');
});
`;

const SMOKE_ESM = `
import http from 'node:http';
import assert from 'node:assert';
import hyperagent, { Agent, HttpsAgent, request } from 'hyperagent-rs';

assert.strictEqual(hyperagent, Agent);
assert.strictEqual(typeof HttpsAgent, 'function');
const server = http.createServer((req, res) => res.end('hello ' + req.url));
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const agent = new Agent();
const body = await new Promise((resolve, reject) => {
  http.get({ host: '127.0.0.1', port, path: '/esm', agent }, (res) => {
    let b = '';
    res.setEncoding('utf8');
    res.on('data', (d) => (b += d));
    res.on('end', () => resolve(b));
  }).on('error', reject);
});
assert.strictEqual(body, 'hello /esm');
const res = await agent.request(\`http://127.0.0.1:\${port}/esm-promise\`);
assert.strictEqual(await res.body.text(), 'hello /esm-promise');
const viaDefault = await request(\`http://127.0.0.1:\${port}/default\`);
assert.strictEqual(await viaDefault.body.text(), 'hello /default');
agent.destroy();
server.close();
console.log('ES module: requests through http.request and agent.request(): ok');
`;

const SMOKE_TS = `
import http = require('node:http');
import hyperagent = require('hyperagent-rs');

const agent: http.Agent = new hyperagent.Agent({ maxSockets: 4, freeSocketTimeout: 1000 });
async function get(url: string): Promise<string> {
  const res = await new hyperagent.Agent().request(url, { method: 'GET', headersTimeout: 1000 });
  const status: number = res.statusCode;
  return \`\${status} \${await res.body.text()}\`;
}
void get;
void agent;
`;

const SMOKE_MTS = `
import { Agent, HttpsAgent, request } from 'hyperagent-rs';
import type { IncomingHttpHeaders } from 'node:http';

const a = new Agent({ keepAlive: true });
const b = new HttpsAgent({ rejectUnauthorized: true });
const p = request('http://127.0.0.1/').then((res) => {
  const h: IncomingHttpHeaders = res.headers;
  return h;
});
void a; void b; void p;
`;

function makeApp(work, name) {
  const app = path.join(work, name);
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }, null, 2));
  return app;
}

function writeSmokes(app) {
  fs.writeFileSync(path.join(app, 'smoke.cjs'), SMOKE);
  fs.writeFileSync(path.join(app, 'smoke.mjs'), SMOKE_ESM);
  fs.writeFileSync(path.join(app, 'smoke.ts'), SMOKE_TS);
  fs.writeFileSync(path.join(app, 'smoke.mts'), SMOKE_MTS);
  fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true,
      noEmit: true,
      module: 'nodenext',
      moduleResolution: 'nodenext',
      target: 'es2022',
      typeRoots: [path.join(root, 'node_modules', '@types')],
      types: ['node'],
      skipLibCheck: false,
    },
    files: ['smoke.ts', 'smoke.mts'],
  }, null, 2));
}

function seconds(ms) {
  return `${(ms / 1000).toFixed(1)} s`;
}

async function timed(label, fn) {
  const start = process.hrtime.bigint();
  const r = await fn();
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  timings.push({ label, ms });
  return { r, ms };
}

// Installs hyperagent-rs with a given npm into a new project and uses it there.
async function prebuiltInstall(work, { label, node, npmArgs, env }) {
  const app = makeApp(work, `app-${label.replace(/\W+/g, '-')}`);
  const { r } = await timed(`${label}: npm install hyperagent-rs (prebuilt)`, () =>
    run(node, [...npmArgs, 'install', 'hyperagent-rs'], { cwd: app, env }));
  check(`${label}: npm install hyperagent-rs exits 0`, r.code === 0, r.code === 0 ? '' : r.out);
  const blocked = r.out.split('\n').find((l) => /blocked/.test(l));
  console.log(`  ${blocked ? `npm said: ${blocked.trim()}` : 'npm ran the install script, which found the prebuilt addon'}`);
  const installed = path.join(app, 'node_modules');
  const prebuilt = path.join(installed, `${pkg.name}-${system}`, `${BINARY}.${system}.node`);
  check(`${label}: the platform package ${pkg.name}-${system} is installed`, fs.existsSync(prebuilt));
  check(`${label}: nothing was built from source`, !fs.existsSync(path.join(installed, pkg.name, `${BINARY}.${system}.node`)));
  writeSmokes(app);
  const cjs = await run(node, ['smoke.cjs'], { cwd: app, env, timeout: 30_000 });
  check(`${label}: CommonJS require + requests`, cjs.code === 0, cjs.code === 0 ? '' : cjs.out);
  const esm = await run(node, ['smoke.mjs'], { cwd: app, env, timeout: 30_000 });
  check(`${label}: ES module import + requests`, esm.code === 0, esm.code === 0 ? '' : esm.out);
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const types = await run(node, [tsc, '--noEmit', '-p', app], { cwd: app, env, timeout: 120_000 });
  check(`${label}: TypeScript typings resolve (tsc --noEmit)`, types.code === 0, types.code === 0 ? '' : types.out);
}

async function main() {
  const addon = path.join(root, `${BINARY}.${system}.node`);
  if (!fs.existsSync(addon)) throw new Error(`${addon} is missing: run npm install (or npm run build) first`);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-install-'));
  const token = `test-${process.pid}`;
  let registry = null;
  try {
    // What a release publishes: the platform package, and the main package with its
    // optionalDependencies.
    const platform = platformPackage({ system, addon, out: path.join(work, 'platform') });
    const packed = JSON.parse(await must('npm pack', npm, ['pack', '--json', '--pack-destination', work], { cwd: root, env: cleanEnv() }))[0];
    const stage = path.join(work, 'stage');
    fs.mkdirSync(stage);
    execFileSync('tar', ['-xzf', path.join(work, packed.filename), '-C', stage]);
    prepublish(path.join(stage, 'package'));
    const [main] = JSON.parse(await must('npm pack (published form)', npm, ['pack', '--json', '--pack-destination', work, path.join(stage, 'package')], { cwd: work, env: cleanEnv() }));
    const files = main.files.map((f) => f.path);
    for (const needed of ['index.js', 'index.mjs', 'index.d.ts', 'lib/loader.js', 'lib/native.js', 'Cargo.toml', 'Cargo.lock', '.cargo/config.toml', 'build.rs', 'src/lib.rs', 'scripts/build.js']) {
      check(`the main tarball holds ${needed}`, files.includes(needed));
    }
    const extra = files.filter((f) => /\.node$|^target\/|^node_modules\/|^__test__\/|^bench\/|^binding\.|^npm\//.test(f));
    check('the main tarball holds no addon, build output, tests or bench', extra.length === 0, extra.join(', '));

    registry = await startRegistry({ token });
    const npmrc = path.join(work, 'npmrc');
    fs.writeFileSync(npmrc, [
      `registry=${registry.url}`,
      `${registry.url.replace(/^https?:/, '')}:_authToken=${token}`,
      'audit=false',
      'fund=false',
      'update-notifier=false',
      `cache=${path.join(work, 'npm-cache')}`,
      '',
    ].join('\n'));
    const empty = path.join(work, 'empty-npmrc');
    fs.writeFileSync(empty, '');
    const config = { npm_config_userconfig: npmrc, npm_config_globalconfig: empty };
    const publishEnv = cleanEnv(config);
    const platformTgz = JSON.parse(await must('npm pack (platform package)', npm, ['pack', '--json', '--pack-destination', work, platform.dir], { cwd: work, env: publishEnv }))[0];
    await must('npm publish (platform package)', npm, ['publish', path.join(work, platformTgz.filename)], { cwd: work, env: publishEnv });
    await must('npm publish (main package)', npm, ['publish', path.join(work, main.filename)], { cwd: work, env: publishEnv });
    const doc = registry.docs.get(pkg.name);
    check('the published main package lists the platform packages as optional dependencies',
      Boolean(doc && doc.versions[pkg.version].optionalDependencies[`${pkg.name}-${system}`] === pkg.version));

    // npm 12 needs Node 22 or later.
    const node20 = process.execPath;
    const node22 = Number(process.versions.node.split('.')[0]) >= 22 ? process.execPath : nodeBinary('22');
    const npm12 = npmCli(NPM12);
    const npm11 = execFileSync(npm, ['prefix', '-g'], { encoding: 'utf8', env: cleanEnv() }).trim();
    const npm11Cli = path.join(npm11, 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
    const npm11Version = (await must('npm --version', node20, [npm11Cli, '--version'], { env: cleanEnv() })).trim();
    const noRust22 = withoutRust(cleanEnv(config), work, node22);
    const noRust20 = withoutRust(cleanEnv(config), work, node20);
    const probe = await run('sh', ['-c', 'command -v cargo || command -v rustc || true'], { env: noRust20 });
    check('no cargo or rustc on the PATH of the installs', probe.out.trim() === '', probe.out.trim());

    await prebuiltInstall(work, { label: `npm ${NPM12} on Node ${execFileSync(node22, ['--version'], { encoding: 'utf8' }).trim()}`, node: node22, npmArgs: [npm12], env: noRust22 });
    await prebuiltInstall(work, { label: `npm ${npm11Version} on Node ${process.version}`, node: node20, npmArgs: [npm11Cli], env: noRust20 });

    // Optional dependencies left out.
    {
      const app = makeApp(work, 'app-omit-12');
      const r = await run(node22, [npm12, 'install', '--omit=optional', 'hyperagent-rs'], { cwd: app, env: noRust22 });
      check(`npm ${NPM12} --omit=optional: installs`, r.code === 0, r.code === 0 ? '' : r.out);
      const e = await run(node22, ['-e', `
        try { require('hyperagent-rs'); process.exit(2); }
        catch (err) { console.log(err.code); console.log(err.message); }`], { cwd: app, env: noRust22, timeout: 30_000 });
      const lines = e.out.split('\n');
      const threw = e.code === 0 && lines[0] === 'ERR_HYPERAGENT_NO_BINARY';
      check(`npm ${NPM12} --omit=optional: require() throws ERR_HYPERAGENT_NO_BINARY`, threw, threw ? '' : e.out);
      const msg = lines.slice(1).join('\n');
      check('  and the message names the system, what was looked for and the fixes',
        msg.includes(`${process.platform} ${process.arch}`) && msg.includes(`${pkg.name}-${system}`) &&
        /not installed/.test(msg) && /optional dependencies/.test(msg) && /allowScripts/.test(msg) &&
        !/npm has a bug/.test(msg));
      console.log(msg.replace(/^/gm, '    | '));
    }
    {
      const app = makeApp(work, 'app-omit-11');
      const r = await run(node20, [npm11Cli, 'install', '--omit=optional', 'hyperagent-rs'], { cwd: app, env: noRust20 });
      check(`npm ${npm11Version} --omit=optional without Rust: the install script fails, naming what is missing`,
        r.code !== 0 && /'cargo' was not found/.test(r.out), r.code === 0 ? 'it exited 0' : '');
    }

    // Building from source, as a user without a prebuilt addon would (this checkout's compiled
    // dependencies are reused; the package's own crate is compiled and linked).
    if (withSource) {
      const app = makeApp(work, 'app-source');
      const env = cleanEnv({ ...config, CARGO_TARGET_DIR: process.env.CARGO_TARGET_DIR || path.join(root, 'target') });
      const { r } = await timed(`npm ${npm11Version}: npm install --omit=optional hyperagent-rs (build from source, warm cargo cache)`, () =>
        run(node20, [npm11Cli, 'install', '--omit=optional', 'hyperagent-rs'], { cwd: app, env, timeout: 1_200_000 }));
      check('build from source: npm install exits 0', r.code === 0, r.code === 0 ? '' : r.out);
      check('build from source: the addon is beside the package', fs.existsSync(path.join(app, 'node_modules', pkg.name, `${BINARY}.${system}.node`)));
      writeSmokes(app);
      const cjs = await run(node20, ['smoke.cjs'], { cwd: app, env, timeout: 30_000 });
      check('build from source: CommonJS require + requests', cjs.code === 0, cjs.code === 0 ? '' : cjs.out);
    }

    console.log('\nSizes:');
    console.log(`  ${main.filename}: ${main.size} bytes packed, ${main.unpackedSize} unpacked, ${main.entryCount} files`);
    console.log(`  ${platformTgz.filename}: ${platformTgz.size} bytes packed, ${platformTgz.unpackedSize} unpacked (addon ${platform.size} bytes${platform.stripped ? ', stripped' : ''})`);
    console.log('Install times:');
    for (const t of timings) console.log(`  ${seconds(t.ms)}  ${t.label}`);
  } finally {
    if (registry) await registry.close();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  () => console.log(`\n${results.length} passed, 0 failed`),
  (err) => {
    console.error(`\n${err && err.stack ? err.stack : err}`);
    console.log(`\n${results.filter((r) => r.ok).length} passed, 1 failed`);
    process.exitCode = 1;
  },
);
