'use strict';

// `npm run bench`: hyperagent side by side with Node's agents, agentkeepalive, undici and fetch.
//
//   npm run bench                     full run (3 runs of every row), about 15 minutes
//   npm run bench -- --quick          about a minute and a half: 1 run, fewer requests and workloads
//   npm run bench -- --runs 5         more runs per row
//   npm run bench -- --only hello,akb workloads (ids or groups of workloads.js) to run
//   npm run bench -- --no-micro       skip the Rust micro-benchmark of the pool
//
// The server (bench/server, Rust) runs in its own process, pinned to CPU 1; every client row
// runs in a fresh Node process (bench/client.js) pinned to CPU 0. For each workload the rows
// run in rounds, each round in a rotated order, so that drift of the machine falls on every
// row alike; ratios are paired within a round. Progress goes to stderr; the tables go to
// stdout and bench/results.md, the chart to bench/results.svg and the raw figures to
// bench/results.json (not committed).

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { byId, BASELINE } = require('./rows');
const { select } = require('./workloads');
const { render } = require('./render');

const ROOT = path.join(__dirname, '..');
const SERVER_DIR = path.join(__dirname, 'server');
const SERVER_BIN = path.join(SERVER_DIR, 'target', 'release', 'hyperagent-bench-server');
// The HTTPS server uses the test suite's fixture chain: localhost.pem (localhost, 127.0.0.1)
// signed by an intermediate, signed by ca.pem, which the HTTPS and HTTP/2 rows trust. It speaks
// HTTP/2 to the clients that choose `h2` in ALPN: the HTTP/2 rows use the same server process.
const TLS_DIR = path.join(ROOT, '__test__', 'fixtures', 'tls');
const TLS_ARGS = ['--tls', path.join(TLS_DIR, 'localhost-chain.pem'), path.join(TLS_DIR, 'localhost-key.pem')];
const CA = path.join(TLS_DIR, 'ca.pem');
const CPUS = os.cpus().length;
const PIN = CPUS >= 2 && spawnSync('taskset', ['-V']).status === 0;
// How long one client may take before it is ended: generous, only a hang should reach it.
const CLIENT_TIMEOUT_MS = { load: 120000, idle: 240000 };
const MICRO_TIMEOUT_MS = 600000;
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
// A client run during which other processes used more than this share of a core is disturbed:
// it is run again, once the machine has been quiet for QUIET_MS (waiting at most QUIET_WAIT_MS),
// up to MAX_ATTEMPTS times in all (the least disturbed attempt is kept). A whole bench run
// repeats at most RETRY_BUDGET runs and waits at most WAIT_BUDGET_MS in all, so that a busy
// machine cannot stretch it much.
const DISTURBED = 0.1;
const MAX_ATTEMPTS = 3;
const QUIET_MS = 1000;
const QUIET_WAIT_MS = 20000;
const RETRY_BUDGET = { full: 30, quick: 8 };
const WAIT_BUDGET_MS = { full: 120000, quick: 15000 };

// Every process this runner starts, by pid, until it has exited.
const children = new Map();

function log(...args) {
  process.stderr.write(args.join(' ') + '\n');
}

function parseArgs(argv) {
  const opts = { quick: false, runs: null, only: null, micro: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--quick') opts.quick = true;
    else if (a === '--no-micro') opts.micro = false;
    else if (a === '--runs') opts.runs = Number(argv[++i]);
    else if (a === '--only') opts.only = String(argv[++i]).split(',');
    else throw new Error(`unknown argument ${a}; see the top of bench/run.js`);
  }
  if (opts.runs === null) opts.runs = opts.quick ? 1 : 3;
  if (!Number.isInteger(opts.runs) || opts.runs < 1 || opts.runs > 50) {
    throw new Error('--runs takes an integer from 1 to 50');
  }
  // The quick run skips the micro-benchmark: it may need a compile of the crate's tests.
  if (opts.quick) opts.micro = false;
  return opts;
}

// ---- Processes ---------------------------------------------------------------------------------

// Spawns `cmd` with the descriptor limit raised to the hard limit (10,000 idle connections need
// more than the usual 1,024) and pinned to `cpu` when there are cores to spare. `exec` keeps one
// pid for the whole chain, the one recorded in `children`.
function spawnTracked(cmd, cpu, stdio) {
  const pinned = PIN && cpu !== null ? ['taskset', '-c', String(cpu), ...cmd] : cmd;
  const child = spawn('bash', ['-c', 'ulimit -n "$(ulimit -Hn)" && exec "$@"', 'bash', ...pinned], {
    stdio,
    cwd: ROOT,
  });
  children.set(child.pid, child);
  child.on('exit', () => children.delete(child.pid));
  return child;
}

// Ends one process this runner started (and has not seen exit).
function kill(pid) {
  if (!children.has(pid)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Exited, its exit event not yet delivered.
  }
}

function killAll() {
  for (const pid of [...children.keys()]) kill(pid);
  children.clear();
}

process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    log(`\n${signal}: stopping`);
    killAll();
    process.exit(130);
  });
}

function newestMtime(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

function ensureServerBuilt() {
  const sources = Math.max(
    newestMtime(path.join(SERVER_DIR, 'src')),
    ...['Cargo.toml', 'Cargo.lock']
      .map((f) => path.join(SERVER_DIR, f))
      .filter((f) => fs.existsSync(f))
      .map((f) => fs.statSync(f).mtimeMs),
  );
  if (fs.existsSync(SERVER_BIN) && fs.statSync(SERVER_BIN).mtimeMs >= sources) return;
  log('building the bench server (bench/server)...');
  const args = ['build', '--release', '--manifest-path', path.join(SERVER_DIR, 'Cargo.toml'),
    '--target-dir', path.join(SERVER_DIR, 'target')];
  const built = spawnSync('cargo', args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: ROOT });
  if (built.status !== 0) throw new Error(`cargo ${args.join(' ')} failed`);
  // cargo leaves the binary alone when nothing changed; mark it as up to date.
  const now = new Date();
  fs.utimesSync(SERVER_BIN, now, now);
}

// Starts a server for `protocol` in `mode` ('keep-alive' or 'close') and resolves with
// { child, port, protocol } once it has printed its port.
function startServer(protocol, mode) {
  const args = mode === 'close' ? ['--close'] : [];
  if (protocol === 'https') args.push(...TLS_ARGS);
  else if (protocol !== 'http') throw new Error(`bench/server does not serve ${protocol}`);
  const child = spawnTracked([SERVER_BIN, ...args], PIN ? 1 : null, ['pipe', 'pipe', 'inherit']);
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (chunk) => {
      out += chunk;
      const newline = out.indexOf('\n');
      if (newline === -1) return;
      child.stdout.off('data', onData);
      const port = Number(out.slice(0, newline));
      if (!Number.isInteger(port) || port <= 0) reject(new Error(`bench server printed ${JSON.stringify(out)}`));
      else resolve({ child, port, protocol });
    };
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', onData);
    child.on('exit', (code, signal) => reject(new Error(`bench server exited (${code ?? signal}) before listening`)));
    child.on('error', reject);
  });
}

function stopServer(server) {
  // Closing its stdin ends it; the kill makes sure.
  server.child.stdin.end();
  kill(server.child.pid);
}

function serverStats({ port, protocol }) {
  const get = protocol === 'https' ? https.get : http.get;
  const tls = protocol === 'https' ? { ca: fs.readFileSync(CA) } : {};
  // A connection of its own, HTTP/1.1 (no ALPN).
  return new Promise((resolve, reject) => {
    const req = get({ host: '127.0.0.1', port, path: '/stats', agent: false, ...tls }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        try {
          resolve(JSON.parse(text));
        } catch (err) {
          reject(err);
        }
      });
    });
    req.setTimeout(10000, () => req.destroy(new Error('no answer from the bench server')));
    req.on('error', reject);
  });
}

// CPU time (µs) the machine's CPUs spent busy (steal included: time the hypervisor gave to
// others), from /proc/stat.
function machineBusyUs() {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return ((user + nice + system + irq + softirq + steal) * 1e6) / CLK_TCK;
  } catch {
    return null;
  }
}

// CPU time (µs) of a running process, from /proc/<pid>/stat.
function processCpuUs(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLK_TCK;
  } catch {
    return null;
  }
}

// Runs a client and measures how much CPU other processes (neither the client nor the server)
// used meanwhile, in cores: `foreignCpu` on the result.
async function runClientWatched(rowId, workload, server) {
  const busy0 = machineBusyUs();
  const server0 = processCpuUs(server.child.pid);
  const t0 = process.hrtime.bigint();
  const result = await runClient(rowId, workload, server);
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  const busy1 = machineBusyUs();
  const server1 = processCpuUs(server.child.pid);
  if (busy0 !== null && busy1 !== null && server0 !== null && server1 !== null && result.lifetimeCpuUs) {
    const foreign = busy1 - busy0 - (server1 - server0) - result.lifetimeCpuUs;
    result.foreignCpu = Math.max(0, foreign) / wallUs;
  }
  return result;
}

// Waits until the CPUs have been left alone (busy less than DISTURBED of a core: no client runs
// now and the server is idle) for QUIET_MS, sampling every 250 ms, for at most `maxMs`.
// Resolves with the time waited.
async function waitForQuiet(maxMs) {
  const start = Date.now();
  let quietSince = null;
  let busy = machineBusyUs();
  let at = process.hrtime.bigint();
  if (busy === null) return 0;
  while (Date.now() - start < maxMs) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const nowBusy = machineBusyUs();
    const now = process.hrtime.bigint();
    const cores = (nowBusy - busy) / (Number(now - at) / 1000);
    busy = nowBusy;
    at = now;
    if (cores >= DISTURBED) quietSince = null;
    else if ((quietSince ??= Date.now()) <= Date.now() - QUIET_MS) break;
  }
  return Date.now() - start;
}

// Runs one client row against one workload; resolves with its JSON line, or { error }.
function runClient(rowId, workload, { port, protocol }) {
  const timeoutMs = CLIENT_TIMEOUT_MS[workload.kind];
  const ca = protocol === 'https' ? CA : undefined;
  const spec = JSON.stringify({ ...workload, port, ca, timeoutMs, clkTck: CLK_TCK, rows: undefined, title: undefined });
  const node = [process.execPath];
  if (workload.kind === 'idle' || workload.streamMemory) node.push('--expose-gc');
  const child = spawnTracked([...node, path.join(__dirname, 'client.js'), rowId, spec], PIN ? 0 : null, [
    'ignore',
    'pipe',
    'pipe',
  ]);
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    // The client has its own watchdog; this one catches a process that cannot even report.
    const watchdog = setTimeout(() => kill(child.pid), timeoutMs + 15000);
    child.on('exit', (code, signal) => {
      clearTimeout(watchdog);
      const line = stdout.trim().split('\n').pop();
      let result;
      try {
        result = JSON.parse(line);
      } catch {
        result = { error: `client exited (${code ?? signal}) without a result` };
      }
      if (result.error && stderr.trim()) result.stderr = stderr.trim().split('\n').slice(-5).join('\n');
      resolve(result);
    });
  });
}

// ---- The run -----------------------------------------------------------------------------------

function machine(opts) {
  const cpus = os.cpus();
  const git = (...args) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() ?? '';
  const changed = git('status', '--porcelain', '--', 'src', 'lib', 'index.js', 'Cargo.toml', 'Cargo.lock');
  const version = (name) => {
    try {
      return require(`${name}/package.json`).version;
    } catch {
      return 'not installed';
    }
  };
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    pinned: PIN,
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    undiciInNode: process.versions.undici ?? null,
    agentkeepalive: version('agentkeepalive'),
    undici: version('undici'),
    commit: (git('rev-parse', '--short', 'HEAD') || 'unknown') + (changed ? ' with uncommitted changes' : ''),
    date: new Date().toISOString(),
    mode: opts.quick ? 'quick' : 'full',
    runs: opts.runs,
  };
}

const retries = { used: 0, budget: 0, waitedMs: 0, waitBudgetMs: 0 };

// Which of two attempts to keep: one with a result over one without, then the less disturbed.
function rank(result) {
  return (result.error ? 1e9 : 0) + (result.foreignCpu ?? 0);
}

function pct(v) {
  return `${Math.round(v * 100)}%`;
}

function fmtRps(v) {
  return Math.round(v).toLocaleString('en-US');
}

// The server a row of `protocol` talks to: HTTP/2 rows talk to the HTTPS server.
function serverProtocol(protocol) {
  return protocol === 'h2' ? 'https' : protocol;
}

// The server each row of a workload talks to, by protocol and mode.
function serverKey(rowId, w) {
  return `${serverProtocol(byId.get(rowId).protocol)} ${w.server}`;
}

// Checks, from the server's count of HTTP/2 connections, that an HTTP/2 row spoke HTTP/2 on
// every connection it opened and that no other row spoke it: an error on the result if not.
function checkProtocol(rowId, result) {
  if (result.error || result.h2Accepted === undefined) return;
  const h2 = byId.get(rowId).protocol === 'h2';
  const other = result.accepted - result.h2Accepted;
  if (h2 && other > 0) {
    result.error = `${other} of its ${result.accepted} connections spoke HTTP/1.1, not HTTP/2`;
  } else if (!h2 && result.h2Accepted > 0) {
    result.error = `${result.h2Accepted} of its ${result.accepted} connections spoke HTTP/2`;
  }
}

async function runWorkloads(workloads, runs, servers) {
  const results = [];
  for (const w of workloads) {
    const rowIds = w.rows.filter((id) => byId.has(id));
    const entry = { workload: w, runs: [] };
    results.push(entry);
    log(`\n${w.title}`);
    for (let round = 0; round < runs; round++) {
      // Rotate the order each round so that no row always runs first or last.
      const order = rowIds.map((_, i) => rowIds[(i + round) % rowIds.length]);
      const byRow = {};
      for (const rowId of order) {
        const server = servers.get(serverKey(rowId, w));
        // A disturbed run, and a client that died without a result, are tried again; the
        // errors of attempts that were not kept are reported with the one that was.
        let kept = null;
        const errors = [];
        for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
          const before = await serverStats(server);
          const result = await runClientWatched(rowId, w, server);
          const after = await serverStats(server);
          // Connections the client opened: the difference, less the second query's own and those
          // of the client's own queries to the server.
          result.accepted = after.accepted - before.accepted - 1 - (result.statsQueries ?? 0);
          // Of those, the HTTP/2 ones (the queries speak HTTP/1.1).
          if (after.h2 !== undefined) result.h2Accepted = after.h2 - before.h2;
          checkProtocol(rowId, result);
          result.attempts = attempt;
          result.disturbed = w.kind === 'load' && !result.error && result.foreignCpu > DISTURBED;
          if (result.error) errors.push(result.error);
          if (kept === null || rank(result) < rank(kept)) kept = result;
          log(`  run ${round + 1}/${runs}  ${rowId.padEnd(15)} ${describe(w, result)}` +
            (result.disturbed ? `  (disturbed: other processes used ${pct(result.foreignCpu)} of a core)` : ''));
          if (!(result.disturbed || result.error) || attempt === MAX_ATTEMPTS || retries.used >= retries.budget) break;
          retries.used++;
          if (result.disturbed && retries.waitedMs < retries.waitBudgetMs) {
            retries.waitedMs += await waitForQuiet(Math.min(QUIET_WAIT_MS, retries.waitBudgetMs - retries.waitedMs));
          }
        }
        const lost = kept.error ? errors.slice(0, -1) : errors;
        if (lost.length) kept.failedAttempts = lost;
        byRow[rowId] = kept;
      }
      entry.runs.push(byRow);
    }
  }
  return results;
}

function describe(w, r) {
  if (r.error) return `ERROR ${r.error}${r.stderr ? `\n${r.stderr}` : ''}`;
  const failed = r.failures ? `  ${r.failures} FAILED (${r.firstError})` : '';
  if (w.kind === 'idle') {
    const mib = (b) => (b / 1048576).toFixed(1);
    return `${r.held ?? r.serverOpen} held, RSS +${mib(r.rssAdded)} MiB, heap +${mib(r.heapAdded)} MiB${failed}`;
  }
  const streams = r.rssPerStream !== undefined
    ? `  ${r.streams} streams: RSS ${(r.rssPerStream / 1024).toFixed(1)} KiB, heap ${Math.round(r.heapPerStream)} B each`
    : r.streamMemoryError ? `  stream memory not measured: ${r.streamMemoryError}` : '';
  return `${fmtRps(r.rps).padStart(7)} req/s  p50 ${r.p50?.toFixed(2)} ms  p99 ${r.p99?.toFixed(2)} ms  ` +
    `${r.accepted} sockets${failed}${streams}`;
}

// The Rust micro-benchmark of the pool (src/pool/scale_bench.rs).
function runMicro() {
  log('\npool micro-benchmark: cargo test --release --lib pool::scale_bench -- --ignored --nocapture');
  const args = ['test', '--release', '--lib', 'pool::scale_bench', '--', '--ignored', '--nocapture'];
  const child = spawnTracked(['cargo', ...args], null, ['ignore', 'pipe', 'inherit']);
  return new Promise((resolve) => {
    let stdout = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => (stdout += chunk));
    const watchdog = setTimeout(() => kill(child.pid), MICRO_TIMEOUT_MS);
    child.on('exit', (code, signal) => {
      clearTimeout(watchdog);
      const rows = [];
      for (const m of stdout.matchAll(/^scale_bench origins=(\d+) idle_per_origin=(\d+) idle_total=(\d+) ns_per_op=([\d.]+)$/gm)) {
        rows.push({ origins: +m[1], idlePerOrigin: +m[2], idleTotal: +m[3], nsPerOp: +m[4] });
      }
      for (const r of rows) log(`  ${r.origins} origin(s) x ${r.idlePerOrigin} idle: ${r.nsPerOp} ns per checkout+release`);
      if (code !== 0 || rows.length === 0) {
        log(`  the micro-benchmark failed (${code ?? signal})`);
        resolve({ error: `cargo test exited (${code ?? signal})`, rows });
      } else {
        resolve({ rows });
      }
    });
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const workloads = select(opts);
  if (workloads.length === 0 && !opts.micro) throw new Error('no workload selected');
  const started = Date.now();
  const info = machine(opts);
  retries.budget = RETRY_BUDGET[info.mode];
  retries.waitBudgetMs = WAIT_BUDGET_MS[info.mode];
  log(`hyperagent bench (${info.mode}): ${info.cpu}, ${info.cores} cores, Node ${info.node}` +
    (PIN ? '; server on CPU 1, clients on CPU 0' : '; not pinned (one core or no taskset)'));
  ensureServerBuilt();

  const servers = new Map();
  try {
    for (const w of workloads) {
      for (const rowId of w.rows.filter((id) => byId.has(id))) {
        const key = serverKey(rowId, w);
        if (!servers.has(key)) servers.set(key, await startServer(serverProtocol(byId.get(rowId).protocol), w.server));
      }
    }
    const results = await runWorkloads(workloads, opts.runs, servers);
    for (const server of servers.values()) stopServer(server);
    const micro = opts.micro ? await runMicro() : null;
    info.durationS = Math.round((Date.now() - started) / 1000);
    info.retries = retries.used;
    info.waitedS = Math.round(retries.waitedMs / 1000);
    info.disturbedThreshold = DISTURBED;
    const data = { info, baseline: BASELINE, results, micro };
    fs.writeFileSync(path.join(__dirname, 'results.json'), JSON.stringify(data, null, 1) + '\n');
    const { markdown, svg } = render(data);
    fs.writeFileSync(path.join(__dirname, 'results.md'), markdown);
    fs.writeFileSync(path.join(__dirname, 'results.svg'), svg);
    process.stdout.write('\n' + markdown);
    log(`\nwritten: bench/results.md, bench/results.svg, bench/results.json (${info.durationS} s)`);
  } finally {
    for (const server of servers.values()) stopServer(server);
  }
}

main().catch((err) => {
  log(err.stack);
  killAll();
  process.exit(1);
});
