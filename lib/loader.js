'use strict';

// Finds and loads the native addon (lib/native.js calls `load()`; scripts/build.js asks
// `prebuiltFor()` whether there is anything to build).
//
// Where it looks, in order:
//   1. HYPERAGENT_NATIVE_PATH, when set: that file and nothing else.
//   2. `hyperagent.<system>.node` in the package's own folder: an addon built from source
//      (`npm install` in a checkout, the install script, `npm rebuild`, scripts/build.js).
//   3. The prebuilt addon in the package `hyperagent-rs-<system>`, an optional dependency that
//      npm installs only on the system it was built for (its `os`, `cpu` and `libc` fields).
// `<system>` is napi-rs's name for the platform: `linux-x64-gnu`, `darwin-arm64`, ...
//
// When none of them loads, the error names the system, every place looked at and why it did
// not do, the systems with a prebuilt addon, and what to do about it (ERR_HYPERAGENT_NO_BINARY).

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const BINARY = 'hyperagent';

// The systems a release has a prebuilt addon for, with napi-rs's names and Rust's targets.
const SUPPORTED = {
  'linux-x64-gnu': { label: 'Linux x64 (glibc)', target: 'x86_64-unknown-linux-gnu' },
  'linux-x64-musl': { label: 'Linux x64 (musl)', target: 'x86_64-unknown-linux-musl' },
  'linux-arm64-gnu': { label: 'Linux arm64 (glibc)', target: 'aarch64-unknown-linux-gnu' },
  'linux-arm64-musl': { label: 'Linux arm64 (musl)', target: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { label: 'macOS x64', target: 'x86_64-apple-darwin' },
  'darwin-arm64': { label: 'macOS arm64', target: 'aarch64-apple-darwin' },
  'win32-x64-msvc': { label: 'Windows x64', target: 'x86_64-pc-windows-msvc' },
};
const SUPPORTED_TEXT = 'Linux x64 and arm64 (glibc and musl), macOS x64 and arm64, Windows x64';

// The C library of a Linux system: 'glibc' or 'musl' (null elsewhere). /usr/bin/ldd names its
// libc (a shell script on glibc, musl's loader on Alpine); Node's report is the fallback.
function detectLibc(platform = process.platform) {
  if (platform !== 'linux') return null;
  // The C library this process runs on, from its own memory map: the system's default one
  // (ldd below) may be another, as with a musl Node on a glibc system.
  const own = libcOfMaps(readOr('/proc/self/maps'));
  if (own) return own;
  try {
    const ldd = fs.readFileSync('/usr/bin/ldd', 'latin1');
    if (ldd.includes('musl')) return 'musl';
    if (ldd.includes('GNU C Library') || ldd.includes('glibc')) return 'glibc';
  } catch {
    // no ldd: ask Node
  }
  const report = nodeReport();
  if (report && report.header && report.header.glibcVersionRuntime) return 'glibc';
  const objects = (report && report.sharedObjects) || [];
  if (objects.some((f) => /(^|\/)(ld-musl-|libc\.musl-)/.test(f))) return 'musl';
  return 'glibc';
}

function readOr(file) {
  try {
    return fs.readFileSync(file, 'latin1');
  } catch {
    return '';
  }
}

// 'musl' or 'glibc' by the C library a memory map (/proc/<pid>/maps) shows loaded, or null.
function libcOfMaps(maps) {
  // Each line ends with the file mapped: the name must end the line. musl's library is
  // /lib/ld-musl-<arch>.so.1 on Alpine, /usr/lib/<arch>-linux-musl/libc.so in Debian's package.
  if (/\/((ld-musl|libc\.musl)-[^/\s]*\.so\.\d+|[^/\s]+-linux-musl\/libc\.so)$/m.test(maps)) return 'musl';
  if (/\/(libc\.so\.6|ld-linux[^/\s]*\.so\.\d+)$/m.test(maps)) return 'glibc';
  return null;
}

function nodeReport() {
  try {
    if (!process.report || typeof process.report.getReport !== 'function') return null;
    // Without this, a report may look up the names of open sockets' peers.
    if ('excludeNetwork' in process.report) process.report.excludeNetwork = true;
    return process.report.getReport();
  } catch {
    return null;
  }
}

// napi-rs's name of a system: `<platform>-<arch>[-<abi>]`.
function systemName({ platform, arch, libc }) {
  if (platform === 'linux') return `${platform}-${arch}-${libc === 'musl' ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `${platform}-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function describeSystem({ platform, arch, libc }) {
  let text = `${platform} ${arch}`;
  if (libc) {
    const report = libc === 'glibc' && platform === process.platform ? nodeReport() : null;
    const version = report && report.header && report.header.glibcVersionRuntime;
    text += version ? ` (glibc ${version})` : ` (${libc})`;
  }
  return text;
}

function packageJson(root) {
  return JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
}

// The folder of an installed package, as `require` from `root` would find it, or null.
function packageDir(name, root) {
  try {
    return path.dirname(require.resolve(`${name}/package.json`, { paths: [root] }));
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND') return null;
    throw err;
  }
}

// The prebuilt addon of `system` in its installed package, if it is there and of this version:
// `{ file }`, or `{ reason }` saying why not.
function prebuiltFor(system, { root = ROOT, pkg = packageJson(root) } = {}) {
  const name = `${pkg.name}-${system}`;
  if (!SUPPORTED[system]) return { name, reason: 'no prebuilt package exists for this system' };
  const dir = packageDir(name, root);
  if (!dir) return { name, reason: 'not installed' };
  let version;
  try {
    version = packageJson(dir).version;
  } catch (err) {
    return { name, reason: `its package.json is unreadable (${oneLine(err)})` };
  }
  if (version !== pkg.version) {
    return { name, reason: `version ${version} is installed, but ${pkg.name} is ${pkg.version}` };
  }
  const file = path.join(dir, `${BINARY}.${system}.node`);
  if (!fs.existsSync(file)) return { name, reason: `${file} is missing from it` };
  return { name, file };
}

function oneLine(err) {
  const text = (err && err.message) || String(err);
  return text.split('\n')[0].trim();
}

function tryLoad(file) {
  try {
    return { binding: require(file) };
  } catch (err) {
    return { reason: oneLine(err) };
  }
}

// Loads the addon for this system (or the one described by `options`, for tests) and returns
// its exports; throws ERR_HYPERAGENT_NO_BINARY when none loads.
function load(options = {}) {
  const platform = options.platform || process.platform;
  const arch = options.arch || process.arch;
  const libc = options.libc !== undefined ? options.libc : detectLibc(platform);
  const env = options.env || process.env;
  const root = options.root || ROOT;
  const pkg = packageJson(root);
  const system = systemName({ platform, arch, libc });
  const attempts = [];

  const explicit = env.HYPERAGENT_NATIVE_PATH;
  if (explicit) {
    const file = path.resolve(explicit);
    const what = `${file} (HYPERAGENT_NATIVE_PATH)`;
    if (!fs.existsSync(file)) attempts.push({ what, reason: 'not found' });
    else {
      const r = tryLoad(file);
      if (r.binding) return r.binding;
      attempts.push({ what, reason: r.reason });
    }
  } else {
    const local = path.join(root, `${BINARY}.${system}.node`);
    const what = `${local} (built from source)`;
    if (!fs.existsSync(local)) attempts.push({ what, reason: 'not found' });
    else {
      const r = tryLoad(local);
      if (r.binding) return r.binding;
      attempts.push({ what, reason: r.reason });
    }
    const pre = prebuiltFor(system, { root, pkg });
    const label = `${pre.name} (the prebuilt package for ${system})`;
    if (!pre.file) attempts.push({ what: label, reason: pre.reason });
    else {
      const r = tryLoad(pre.file);
      if (r.binding) return r.binding;
      attempts.push({ what: `${pre.file} (from ${pre.name})`, reason: r.reason });
    }
  }
  throw noBinary({ platform, arch, libc, system, attempts, pkg, root });
}

// Addons present for other systems: a node_modules installed on another machine, or with
// another libc, holds the wrong one.
function othersPresent(system, root, pkg) {
  const found = [];
  for (const other of Object.keys(SUPPORTED)) {
    if (other === system) continue;
    if (packageDir(`${pkg.name}-${other}`, root)) found.push(`${pkg.name}-${other} (${SUPPORTED[other].label})`);
    else if (fs.existsSync(path.join(root, `${BINARY}.${other}.node`))) {
      found.push(`${BINARY}.${other}.node (${SUPPORTED[other].label})`);
    }
  }
  return found;
}

function noBinary({ platform, arch, libc, system, attempts, pkg, root }) {
  const name = pkg.name;
  const supported = Boolean(SUPPORTED[system]);
  const others = othersPresent(system, root, pkg);
  const lines = [
    `${name} could not load its native addon on this system: ${describeSystem({ platform, arch, libc })}, ` +
      `Node.js ${process.version}.`,
    'Looked for:',
    ...attempts.map((a) => `  - ${a.what}: ${a.reason}`),
  ];
  if (others.length) {
    lines.push(`Found addons for other systems only: ${others.join(', ')}. ` +
      'node_modules was installed on another system (or for another libc): install on the one that runs the code.');
  }
  lines.push(`Prebuilt addons exist for: ${SUPPORTED_TEXT}.`);
  lines.push('To fix it:');
  if (supported) {
    lines.push(`  - Reinstall with optional dependencies on this system: \`npm install ${name}\` without ` +
      '--omit=optional or --no-optional (and without omit=optional in .npmrc); npm installs the prebuilt ' +
      `package ${name}-${system} from the optional dependencies.`);
  } else {
    lines.push(`  - There is no prebuilt addon for ${system}: build it from source (below).`);
  }
  lines.push(`  - Or build it from source, which needs Rust (https://rustup.rs) and a C compiler: allow ${name}'s ` +
    `install script (npm 12 and later: "allowScripts": { "${name}": true } in your package.json), then run ` +
    `\`npm rebuild ${name}\` (or \`node node_modules/${name}/scripts/build.js\`). ` +
    'HYPERAGENT_BUILD_FROM_SOURCE=1 builds it even where a prebuilt package exists.');
  const err = new Error(lines.join('\n'));
  // Printed as `Error [ERR_HYPERAGENT_NO_BINARY]: ...`, as Node prints its own coded errors.
  err.name = 'Error [ERR_HYPERAGENT_NO_BINARY]';
  // eslint-disable-next-line no-unused-expressions
  err.stack;
  delete err.name;
  err.code = 'ERR_HYPERAGENT_NO_BINARY';
  err.platform = platform;
  err.arch = arch;
  err.libc = libc;
  err.system = system;
  err.attempts = attempts;
  return err;
}

module.exports = { load, prebuiltFor, detectLibc, libcOfMaps, systemName, SUPPORTED, SUPPORTED_TEXT, BINARY };
