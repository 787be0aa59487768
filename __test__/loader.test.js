'use strict';

// lib/loader.js: which addon loads, and the one error (ERR_HYPERAGENT_NO_BINARY) when none does,
// in a copy of the package's loader laid out as an installed package would be.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { load, detectLibc, libcOfMaps, systemName, SUPPORTED, BINARY } = require('../lib/loader');

const root = path.join(__dirname, '..');
const pkg = require('../package.json');
const system = systemName({ platform: process.platform, arch: process.arch, libc: detectLibc() });
const builtAddon = path.join(root, `${BINARY}.${system}.node`);

// A folder holding package.json and lib/{loader,native}.js, and whatever `extra` writes there.
function fakePackage(t, extra = () => {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-loader-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'lib'));
  fs.copyFileSync(path.join(root, 'package.json'), path.join(dir, 'package.json'));
  for (const f of ['loader.js', 'native.js']) fs.copyFileSync(path.join(root, 'lib', f), path.join(dir, 'lib', f));
  extra(dir);
  return dir;
}

function platformPackage(dir, sys, { version = pkg.version, addon = null } = {}) {
  const pdir = path.join(dir, 'node_modules', `${pkg.name}-${sys}`);
  fs.mkdirSync(pdir, { recursive: true });
  fs.writeFileSync(path.join(pdir, 'package.json'), JSON.stringify({ name: `${pkg.name}-${sys}`, version }));
  if (addon) fs.copyFileSync(addon, path.join(pdir, `${BINARY}.${sys}.node`));
  return pdir;
}

// Requires lib/native.js of `dir` in a fresh Node process.
function requireNative(dir, env = {}) {
  const script = `
    try {
      const b = require(${JSON.stringify(path.join(dir, 'lib', 'native.js'))});
      console.log('loaded ' + typeof b.init);
    } catch (err) {
      console.log(JSON.stringify({ code: err.code, message: err.message, stack: err.stack, attempts: err.attempts }));
      process.exitCode = 3;
    }`;
  const r = spawnSync(process.execPath, ['-e', script], {
    cwd: dir,
    env: { ...process.env, HYPERAGENT_NATIVE_PATH: '', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.strictEqual(r.stderr, '', r.stderr);
  if (r.status === 0) return { loaded: r.stdout.trim() };
  assert.strictEqual(r.status, 3, r.stdout);
  return { error: JSON.parse(r.stdout) };
}

function assertClearError(error) {
  assert.strictEqual(error.code, 'ERR_HYPERAGENT_NO_BINARY');
  const m = error.message;
  assert.match(error.stack, /^Error \[ERR_HYPERAGENT_NO_BINARY\]: /);
  assert.ok(m.includes(`${process.platform} ${process.arch}`), m);
  assert.match(m, /Prebuilt addons exist for: Linux x64 and arm64 \(glibc and musl\), macOS x64 and arm64, Windows x64/);
  assert.match(m, /optional dependencies/);
  assert.match(m, /build it from source/);
  assert.match(m, /allowScripts/);
  assert.doesNotMatch(m, /npm has a bug/);
}

test('with nothing installed: one error naming the system, each place looked at and the fixes', (t) => {
  const dir = fakePackage(t);
  const { error } = requireNative(dir);
  assertClearError(error);
  assert.deepStrictEqual(error.attempts.map((a) => a.reason), ['not found', 'not installed']);
  assert.ok(error.message.includes(path.join(dir, `${BINARY}.${system}.node`)), error.message);
  assert.ok(error.message.includes(`${pkg.name}-${system} (the prebuilt package for ${system}): not installed`), error.message);
});

test('a corrupt addon file: the loader says why it did not load', (t) => {
  const dir = fakePackage(t, (d) => fs.writeFileSync(path.join(d, `${BINARY}.${system}.node`), 'not a shared object'));
  const { error } = requireNative(dir);
  assertClearError(error);
  const [local] = error.attempts;
  assert.ok(local.what.includes(`${BINARY}.${system}.node`));
  assert.notStrictEqual(local.reason, 'not found');
  assert.ok(local.reason.length > 0);
});

test('HYPERAGENT_NATIVE_PATH pointed at nothing, or at a corrupt file, is the only place looked at', (t) => {
  const dir = fakePackage(t, (d) => fs.writeFileSync(path.join(d, 'corrupt.node'), Buffer.alloc(64, 7)));
  const missing = requireNative(dir, { HYPERAGENT_NATIVE_PATH: path.join(dir, 'nothing.node') }).error;
  assertClearError(missing);
  assert.deepStrictEqual(missing.attempts, [{ what: `${path.join(dir, 'nothing.node')} (HYPERAGENT_NATIVE_PATH)`, reason: 'not found' }]);
  const corrupt = requireNative(dir, { HYPERAGENT_NATIVE_PATH: path.join(dir, 'corrupt.node') }).error;
  assertClearError(corrupt);
  assert.strictEqual(corrupt.attempts.length, 1);
  assert.notStrictEqual(corrupt.attempts[0].reason, 'not found');
});

test('an addon for another system (node_modules from another machine or libc) is named as such', (t) => {
  const other = Object.keys(SUPPORTED).find((s) => s !== system);
  const dir = fakePackage(t, (d) => platformPackage(d, other));
  const { error } = requireNative(dir);
  assertClearError(error);
  assert.ok(error.message.includes(`Found addons for other systems only: ${pkg.name}-${other} (${SUPPORTED[other].label})`), error.message);
});

test('a prebuilt package of another version is not loaded', (t) => {
  const dir = fakePackage(t, (d) => platformPackage(d, system, { version: '0.0.0-other' }));
  const { error } = requireNative(dir);
  assertClearError(error);
  assert.strictEqual(error.attempts[1].reason, `version 0.0.0-other is installed, but ${pkg.name} is ${pkg.version}`);
});

test('an unsupported system: no prebuilt package to look for, build from source', (t) => {
  const dir = fakePackage(t);
  assert.throws(() => load({ platform: 'freebsd', arch: 'riscv64', libc: null, root: dir, env: {} }), (err) => {
    assert.strictEqual(err.code, 'ERR_HYPERAGENT_NO_BINARY');
    assert.strictEqual(err.system, 'freebsd-riscv64');
    assert.match(err.message, /freebsd riscv64/);
    assert.strictEqual(err.attempts[1].reason, 'no prebuilt package exists for this system');
    assert.match(err.message, /There is no prebuilt addon for freebsd-riscv64/);
    assert.doesNotMatch(err.message, /Reinstall with optional dependencies/);
    return true;
  });
});

test('musl and glibc name different packages', () => {
  assert.strictEqual(systemName({ platform: 'linux', arch: 'arm64', libc: 'musl' }), 'linux-arm64-musl');
  assert.strictEqual(systemName({ platform: 'linux', arch: 'x64', libc: 'glibc' }), 'linux-x64-gnu');
  assert.strictEqual(systemName({ platform: 'darwin', arch: 'arm64', libc: null }), 'darwin-arm64');
  assert.strictEqual(systemName({ platform: 'win32', arch: 'x64', libc: null }), 'win32-x64-msvc');
});

test("the libc is the process's own, read from its memory map, whatever the system's default", () => {
  // Alpine's Node: musl's loader is its C library.
  const alpine = '7f0c1a200000-7f0c1a214000 r--p 00000000 00:2f 1234  /lib/ld-musl-x86_64.so.1\n';
  assert.strictEqual(libcOfMaps(`55d4e0a00000-55d4e0c00000 r--p 00000000 00:2f 99  /usr/local/bin/node\n${alpine}`), 'musl');
  // A musl Node started through a loader kept outside /lib, on a glibc system.
  assert.strictEqual(libcOfMaps('7f00-7f01 r-xp 0 0:1 2  /opt/musl/usr/lib/ld-musl-aarch64.so.1\n'), 'musl');
  // Debian's musl package, whose ld-musl-*.so.1 is a link to this file.
  assert.strictEqual(libcOfMaps('7f00-7f01 r-xp 0 0:1 2  /usr/lib/x86_64-linux-musl/libc.so\n'), 'musl');
  const debian = '7f8ab9f2d000-7f8ab9f53000 r--p 00000000 fe:00 326279  /usr/lib/x86_64-linux-gnu/libc.so.6\n';
  assert.strictEqual(libcOfMaps(debian), 'glibc');
  assert.strictEqual(libcOfMaps('7f00-7f01 r-xp 0 0:1 2  /lib64/ld-linux-x86-64.so.2\n'), 'glibc');
  // A file that only names one (a library called libc.so.6.bak, say) or no map at all: unknown.
  assert.strictEqual(libcOfMaps('7f00-7f01 r--p 0 0:1 2  /srv/libc.so.6.bak/data\n'), null);
  assert.strictEqual(libcOfMaps(''), null);
  if (process.platform === 'linux') {
    // This process's answer is what its own map says.
    assert.strictEqual(detectLibc(), libcOfMaps(fs.readFileSync('/proc/self/maps', 'latin1')));
  }
});

test('the prebuilt package of this system loads when nothing was built from source', { skip: !fs.existsSync(builtAddon) && 'no addon built here' }, (t) => {
  const dir = fakePackage(t, (d) => platformPackage(d, system, { addon: builtAddon }));
  assert.deepStrictEqual(requireNative(dir), { loaded: 'loaded function' });
});
