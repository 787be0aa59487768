'use strict';

// One client row against one workload, in a process of its own; prints one JSON line.
//
//   node bench/client.js <row-id> '<workload JSON>'
//
// The workload JSON is an entry of workloads.js, resolved (quick overrides applied) and
// completed with the server's `port` (and, for HTTPS and HTTP/2, `ca`: the path of the
// certificate authority to trust). Idle workloads, and load workloads with `streamMemory`, need
// `node --expose-gc`. The process exits
// once it has printed its line; a run that takes longer than `timeoutMs` prints an error line
// and exits non-zero.

const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { AsyncLocalStorage } = require('node:async_hooks');
const { performance } = require('node:perf_hooks');
const { byId } = require('./rows');

// A bound on the requests of a phase that runs for a time.
const MAX_REQUESTS = 1000000;

async function main() {
  const [rowId, spec] = process.argv.slice(2);
  const row = byId.get(rowId);
  if (!row || !spec) {
    throw new Error(`usage: node bench/client.js <${[...byId.keys()].join('|')}> '<workload JSON>'`);
  }
  const w = JSON.parse(spec);
  const watchdog = setTimeout(() => {
    print({ row: rowId, workload: w.id, error: `no result within ${w.timeoutMs} ms` }, 1);
  }, w.timeoutMs ?? 300000);
  watchdog.unref();

  const host = '127.0.0.1';
  const setup = () =>
    row.setup({
      protocol: row.protocol,
      host,
      port: w.port,
      origin: `${row.protocol === 'http' ? 'http' : 'https'}://${host}:${w.port}`,
      connections: w.connections,
      idleTimeout: w.idleTimeout,
      ca: w.ca ? fs.readFileSync(w.ca, 'utf8') : undefined,
    });
  const result = w.kind === 'idle' ? await idle(setup, w) : await load(await setup(), w);
  // CPU time of the whole process, lifetime: the runner compares it with what the CPUs did.
  const cpu = process.cpuUsage();
  print({ row: rowId, workload: w.id, ...result, lifetimeCpuUs: cpu.user + cpu.system }, 0);
}

function print(result, code) {
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(code));
}

// Makes requests with `concurrency` callers in flight: with `perCaller`, every caller makes
// exactly that many; otherwise callers take requests from a shared count until `total` were
// made or, with a `deadline` (a `performance.now()` time), until it has passed and at least
// `minTotal` were made. Each successful request's latency (ms) is pushed to `latencies` when
// given.
// With `als` (an AsyncLocalStorage), each request runs inside `als.run()` with a store of its
// own, and a request after which the store is not that one again counts as failed.
async function drive(client, req, { total, concurrency, perCaller, responseBytes, deadline, minTotal = 0, als }, latencies) {
  let made = 0;
  let failures = 0;
  let firstError = null;
  const more = deadline === undefined
    ? () => made < total
    : () => made < total && (made < minTotal || performance.now() < deadline);
  async function caller() {
    for (let done = 0; perCaller ? done < perCaller : more(); done++) {
      made++;
      const start = performance.now();
      try {
        const bytes = als ? await sendInContext(als, client, req) : await client.send(req);
        if (responseBytes !== undefined && bytes !== responseBytes) {
          throw new Error(`response of ${bytes} bytes, expected ${responseBytes}`);
        }
        if (latencies) latencies.push(performance.now() - start);
      } catch (err) {
        failures++;
        firstError ??= `${err.code ?? err.name}: ${err.message}`;
      }
    }
  }
  const callers = [];
  for (let c = 0; c < concurrency; c++) callers.push(caller());
  await Promise.all(callers);
  return { made, failures, firstError };
}

async function sendInContext(als, client, req) {
  const store = { req };
  return als.run(store, async () => {
    const bytes = await client.send(req);
    if (als.getStore() !== store) throw new Error('the async context was lost');
    return bytes;
  });
}

// A load workload: a fixed number of requests (`requests`, or `perCaller` per caller), or as
// many as `durationMs` allows, after an unmeasured warm-up.
async function load(client, w) {
  // Before anything else has run in this process: what open streams cost.
  const memory = w.streamMemory ? await streamMemory(client, w) : null;
  const body = w.requestBytes ? Buffer.alloc(w.requestBytes, 'x') : w.requestBody;
  const req = { method: w.method, path: w.path, body, headers: w.headers, json: w.json === true };
  // An active AsyncLocalStorage for the workloads that measure what context propagation costs.
  const als = w.asyncContext ? new AsyncLocalStorage() : undefined;
  // Warm-up: for a time rather than a count (until the JIT has settled, whatever the speed of
  // the machine), and at least one request per caller so that every connection is open.
  let warmupFailures = 0;
  let warmupRequests = 0;
  let warmupError = null;
  if (w.warmupMs > 0) {
    const warm = await drive(client, req, {
      total: MAX_REQUESTS,
      concurrency: w.concurrency,
      responseBytes: w.responseBytes,
      deadline: performance.now() + w.warmupMs,
      minTotal: w.concurrency,
      als,
    });
    warmupFailures = warm.failures;
    warmupRequests = warm.made;
    warmupError = warm.firstError;
  }

  const latencies = [];
  const main0 = mainThreadCpuUs(w.clkTck);
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  const timed = w.durationMs > 0;
  const run = await drive(client, req, {
    total: timed ? MAX_REQUESTS : w.requests,
    concurrency: w.concurrency,
    perCaller: w.perCaller,
    responseBytes: w.responseBytes,
    deadline: timed ? t0 + w.durationMs : undefined,
    minTotal: timed ? w.concurrency : 0,
    als,
  }, latencies);
  const wallMs = performance.now() - t0;
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  const main1 = mainThreadCpuUs(w.clkTck);

  const ok = Float64Array.from(latencies).sort();
  const at = (q) => (ok.length ? ok[Math.min(ok.length - 1, Math.floor(q * ok.length))] : null);
  const out = {
    requests: run.made,
    warmupRequests,
    wallMs,
    rps: (ok.length * 1000) / wallMs,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: ok.length ? ok[ok.length - 1] : null,
    failures: run.failures + warmupFailures,
    firstError: run.firstError ?? warmupError,
    // Time the JS thread was busy, and CPU time of every thread of the process, per request.
    jsCpuUs: (elu.active * 1000) / run.made,
    mainCpuUs: main0 !== null && main1 !== null ? (main1 - main0) / run.made : null,
    cpuUs: (cpu.user + cpu.system) / run.made,
    maxRssMiB: process.resourceUsage().maxRSS / 1024,
    socketsCreated: client.socketsCreated(),
    ...memory,
  };
  if (w.histogram) {
    // Requests finished under each bound (and at or over the last), as agentkeepalive's
    // benchmark counted them.
    const counts = new Array(w.histogram.length + 1).fill(0);
    for (const v of ok) {
      let b = w.histogram.findIndex((bound) => v < bound);
      if (b === -1) b = w.histogram.length;
      counts[b]++;
    }
    out.histogram = counts;
  }
  await client.close();
  return out;
}

// CPU time (µs) the JavaScript thread itself has used, from /proc (the main thread's task has
// the process id); null where there is no /proc. Event-loop utilisation counts wall time, so
// on a core shared with other threads of the process it also counts the time they ran while
// a callback was under way; this counts only the thread's own CPU.
function mainThreadCpuUs(clkTck) {
  try {
    const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / (clkTck || 100);
  } catch {
    return null;
  }
}

// Memory after a full collection, once pending callbacks have run.
async function settledMemory() {
  for (let i = 0; i < 3; i++) {
    await new Promise(setImmediate);
    global.gc();
  }
  return process.memoryUsage();
}

// The server's counters (or another query answered in JSON, such as /unpark), over TLS when the
// workload's server speaks it (`w.ca` given), on a connection of its own (HTTP/1.1).
function serverStats(w, p = '/stats') {
  const tls = w.ca ? { ca: fs.readFileSync(w.ca, 'utf8'), servername: 'localhost' } : null;
  return new Promise((resolve, reject) => {
    (tls ? https : http)
      .get({ host: '127.0.0.1', port: w.port, path: p, agent: false, ...tls }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve(JSON.parse(text)));
      })
      .on('error', reject);
  });
}

// The memory `w.streamMemory` requests in flight add to the client (HTTP/2: open streams on
// its connection), against the same client idle: both after a forced GC, the first with the
// client's connection open and idle (after one request to the server's /stats, so that the
// code of the later queries is loaded too), the second while the server holds all the requests
// (`/park`, counted by its /stats) before it lets them answer (`/unpark`). The runner subtracts
// the connections of these queries (`statsQueries`) from the client's.
async function streamMemory(client, w) {
  if (typeof global.gc !== 'function') throw new Error('streamMemory needs node --expose-gc');
  const n = w.streamMemory;
  let statsQueries = 0;
  const stats = (p = '/stats') => (statsQueries++, serverStats(w, p));
  await client.send({ method: 'GET', path: '/hello' });
  await stats();
  const idleMemory = await settledMemory();
  let answered = 0;
  let failures = 0;
  let firstError = null;
  const requests = [];
  for (let i = 0; i < n; i++) {
    requests.push(client.send({ method: 'GET', path: '/park' }).then(
      () => answered++,
      (err) => {
        failures++;
        firstError ??= `${err.code ?? err.name}: ${err.message}`;
      },
    ));
  }
  // Until the server holds them all (at most 30 s).
  const until = performance.now() + 30000;
  let parked = 0;
  while ((parked = (await stats()).parked) < n && failures === 0 && performance.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // Let the sockets of the queries close.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const openMemory = await settledMemory();
  // Every request still open while memory was measured, or the figure means nothing.
  const open = n - answered - failures;
  await stats('/unpark');
  await Promise.all(requests);
  if (parked < n || open < n || failures) {
    return {
      statsQueries,
      streamMemoryError: `${parked} of ${n} requests reached the server, ${open} open when measured` +
        (failures ? `, ${failures} failed (${firstError})` : ''),
    };
  }
  return {
    statsQueries,
    streams: n,
    idleRss: idleMemory.rss,
    streamsRss: openMemory.rss,
    rssPerStream: (openMemory.rss - idleMemory.rss) / n,
    heapPerStream: (openMemory.heapUsed - idleMemory.heapUsed) / n,
    externalPerStream: (openMemory.external - idleMemory.external) / n,
  };
}

// Opens `n` connections at once and waits until they are idle in the client's pool.
async function openIdle(client, n) {
  // The server answers none of these until all are in flight: each needs its own connection.
  const run = await drive(client, { method: 'GET', path: `/hold/${n}` }, { total: n, concurrency: n });
  // Connections return to their pools in the callbacks after each response's end; wait for
  // them (a bounded number of turns of the event loop).
  for (let turn = 0; turn < 1000 && (client.idleHeld() ?? n) < n; turn++) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return run;
}

async function idle(setup, w) {
  if (typeof global.gc !== 'function') throw new Error('idle workloads need node --expose-gc');
  const n = w.connections;
  // A first client of the same row opens and closes as many connections, so that the base
  // measurement already includes what the burst of opening them leaves behind (a grown young
  // generation, allocator caches), loaded code included. What remains is what holding costs.
  const primer = await setup();
  const primed = await openIdle(primer, n);
  await primer.close();

  const client = await setup();
  await client.send({ method: 'GET', path: '/hello' });
  const base = await settledMemory();
  const heldBefore = client.idleHeld() ?? 1;

  const run = await openIdle(client, n);
  const after = await settledMemory();
  const held = client.idleHeld();
  const stats = await serverStats(w);
  // The server's open connections, less the one this query uses.
  const serverOpen = stats.open - 1;
  const added = (held ?? serverOpen) - heldBefore;
  await client.close();
  return {
    connections: n,
    failures: run.failures + primed.failures,
    firstError: run.firstError ?? primed.firstError,
    held,
    serverOpen,
    rssAdded: after.rss - base.rss,
    heapAdded: after.heapUsed - base.heapUsed,
    externalAdded: after.external - base.external,
    rssPerConn: (after.rss - base.rss) / added,
    heapPerConn: (after.heapUsed - base.heapUsed) / added,
    maxRssMiB: process.resourceUsage().maxRSS / 1024,
  };
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  print({ row: process.argv[2], error: String(err.message) }, 1);
});
