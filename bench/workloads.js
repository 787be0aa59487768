'use strict';

// What `npm run bench` asks of every client: one entry per workload.
//
// kind 'load': requests (method, path, optional `headers`, an optional request body: `requestBytes`
//   bytes, or the string `requestBody`) with
//   `concurrency` of them in flight, through a client limited to `connections` connections per
//   origin. Throughput workloads measure for `durationMs` (so that every row is measured for as
//   long, whatever its speed), after `warmupMs` of unmeasured warm-up. The scenarios make a
//   fixed count from a cold start: `requests` shared by the callers, or with `perCaller`, each
//   of the `concurrency` callers makes exactly that many in sequence (the agentkeepalive
//   benchmark's shape). `responseBytes`, when set, is checked on every response. With `json`,
//   each client reads the response as JSON with its own reader, as applications do (undici's
//   and hyperagent's `body.json()`, fetch's `res.json()`, `JSON.parse` over the chunks of
//   Node's `http.request`), and the length of the value written back as JSON is checked.
// kind 'idle': the client opens `connections` keep-alive connections (the server holds every
//   request until all of them are in flight) and the memory they add once idle is measured.
//
// `server` picks the server process: 'keep-alive' or 'close' (every response `Connection:
// close`). `quick` overrides fields for `npm run bench -- --quick`; `quick: null` leaves the
// workload out of the quick run. `rows` lists the row ids (see rows.js) that run it, all of one
// protocol; `baseline` is the row its ratios are taken against (Node's keep-alive agent of that
// protocol, undici's HTTP/2 client for HTTP/2, unless the workload names another).
// `streamMemory` (n) also measures, in the client's fresh process before the warm-up, the
// memory that n open streams (requests in flight) add to the idle connection they are on.

const { rows, BASELINES } = require('./rows');

// Every row of rows.js of a protocol, in its order: a new row joins every workload that
// compares all clients of its protocol.
// (A ceiling row is a reference for the hello workloads only: see rows.js, `noIoDispatcher`.)
const clients = rows.filter((row) => !row.ceiling);
const ALL_ROWS = clients.filter((row) => row.protocol === 'http').map((row) => row.id);
const HTTPS_ROWS = clients.filter((row) => row.protocol === 'https').map((row) => row.id);
const H2_ROWS = rows.filter((row) => row.protocol === 'h2').map((row) => row.id);
// The keep-alive pools the idle footprints compare (over HTTP, over TLS), and the rows of the
// scale series.
const KEEP_ALIVE_ROWS = ['node-ka', 'agentkeepalive', 'undici-pool', 'hyperagent'];
const KEEP_ALIVE_HTTPS_ROWS = ['node-https-ka', 'agentkeepalive-https', 'undici-pool-https', 'hyperagent-https'];
const SCALE_ROWS = ['node-ka', 'undici-pool', 'hyperagent', 'hyperagent-request'];
// The rows whose cost of async context propagation is measured.
const CONTEXT_ROWS = ['node-ka', 'agentkeepalive', 'undici-pool', 'hyperagent', 'hyperagent-request'];

// Throughput workloads in a quick run.
const QUICK = { durationMs: 500, warmupMs: 500 };

// agentkeepalive's benchmark printed how many requests finished under each of these bounds.
const HISTOGRAM_MS = [10, 15, 20, 30, 40, 50, 100, 150, 200];

// A throughput workload: 50 requests in flight on 50 connections, measured for 2 s after 0.75 s
// of warm-up; `fields` adds or overrides.
function throughput(id, group, title, fields) {
  return {
    id,
    group,
    title,
    kind: 'load',
    server: 'keep-alive',
    method: 'GET',
    durationMs: 2000,
    warmupMs: 750,
    concurrency: 50,
    connections: 50,
    rows: { https: HTTPS_ROWS, h2: H2_ROWS }[group] ?? ALL_ROWS,
    quick: QUICK,
    ...fields,
  };
}

const workloads = [
  throughput('hello', 'throughput', 'hello world (GET, 12 B response)', {
    path: '/hello',
    responseBytes: 12,
    rows: [...ALL_ROWS, 'fetch-ceiling', 'undici-request-ceiling'],
  }),
  throughput('64k', 'throughput', '64 KiB response (GET)', { path: '/64k', responseBytes: 65536 }),
  throughput('1m', 'throughput', '1 MiB response (GET)', { path: '/1m', responseBytes: 1048576, quick: null }),
  throughput('post-64k', 'throughput', '64 KiB request body (POST)', {
    method: 'POST',
    path: '/echo-length',
    requestBytes: 65536,
    responseBytes: String(65536).length,
  }),
  // A call to a JSON API as applications make one: a small JSON body as a string, its content
  // type and an accept header; the answer (the body's length, a JSON number) is read as JSON.
  throughput('api', 'throughput', 'JSON API call (POST, 24 B JSON body, 2 headers, JSON answer)', {
    method: 'POST',
    path: '/echo-length',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    requestBody: '{"id":42,"name":"hello"}',
    responseBytes: 2,
    json: true,
  }),
  throughput('https-hello', 'https', 'HTTPS hello world (GET, 12 B response)', {
    path: '/hello',
    responseBytes: 12,
    rows: [...HTTPS_ROWS, 'fetch-https-ceiling'],
  }),
  throughput('https-64k', 'https', 'HTTPS 64 KiB response (GET)', { path: '/64k', responseBytes: 65536, quick: null }),
  // HTTP/2 over TLS, 50 and 500 requests in flight. The HTTP/2 rows are not given
  // `connections`: each opens one connection, which carries them all (the server takes 1,000
  // streams on one), but undici on its defaults (see rows.js). The 500-in-flight workloads also
  // measure the memory of 500 open streams.
  ...[
    ['hello', '/hello', 12, 'hello world (GET, 12 B response)'],
    ['64k', '/64k', 65536, '64 KiB response (GET)'],
  ].flatMap(([id, p, bytes, what]) => [50, 500].map((inFlight) =>
    throughput(`h2-${id}${inFlight === 50 ? '' : `-${inFlight}`}`, 'h2', `HTTP/2 ${what}, ${inFlight} in flight`, {
      path: p,
      responseBytes: bytes,
      concurrency: inFlight,
      connections: 1,
      ...(inFlight === 500 ? { streamMemory: 500 } : {}),
      // The quick run keeps the hello workloads.
      quick: id === 'hello' ? QUICK : null,
    }))),
  // The hello workload again, each request inside AsyncLocalStorage.run(): what an active
  // async context costs each client (its JavaScript side runs with promise hooks on).
  throughput('hello-als', 'context', 'hello world, each request inside AsyncLocalStorage.run()', {
    path: '/hello',
    responseBytes: 12,
    asyncContext: true,
    rows: CONTEXT_ROWS,
  }),
  // Every response closes its connection: each request is a TCP connect and a full TLS
  // handshake, so requests/s here are handshakes/s.
  throughput('https-handshake', 'https', 'HTTPS handshakes: `Connection: close` server, a new TLS connection per request', {
    server: 'close',
    path: '/hello',
    responseBytes: 12,
    warmupMs: 500,
  }),
  {
    id: 'akb',
    group: 'akb',
    title: "agentkeepalive's benchmark: maxSockets 50, 60 callers × 1,000 requests, 5 ms server delay",
    kind: 'load',
    server: 'keep-alive',
    method: 'GET',
    path: '/delay/5',
    responseBytes: 12,
    concurrency: 60,
    perCaller: 1000,
    connections: 50,
    histogram: HISTOGRAM_MS,
    rows: ALL_ROWS,
    quick: {
      perCaller: 100,
      title: "agentkeepalive's benchmark, shortened: maxSockets 50, 60 callers × 100 requests, 5 ms server delay",
    },
  },
  ...[
    ['ka-server', 'keep-alive', 'keep-alive server'],
    ['close-server', 'close', '`Connection: close` server'],
  ].map(([id, server, what]) => ({
    id,
    group: 'keepalive',
    title: `${what}: 100 connections, 2,000 requests`,
    kind: 'load',
    server,
    method: 'GET',
    path: '/hello',
    responseBytes: 12,
    requests: 2000,
    concurrency: 100,
    connections: 100,
    rows: ALL_ROWS,
  })),
  {
    id: 'idle',
    group: 'idle',
    title: '10,000 idle keep-alive connections',
    kind: 'idle',
    server: 'keep-alive',
    connections: 10000,
    idleTimeout: 300000,
    rows: KEEP_ALIVE_ROWS,
    quick: { connections: 1000, title: '1,000 idle keep-alive connections' },
  },
  // The same over TLS (what a connection keeps of its TLS session and buffers), with fewer
  // connections: Node's agent spends milliseconds of CPU on each handshake.
  {
    id: 'https-idle',
    group: 'idle',
    title: '1,000 idle keep-alive TLS connections',
    kind: 'idle',
    server: 'keep-alive',
    connections: 1000,
    idleTimeout: 300000,
    rows: KEEP_ALIVE_HTTPS_ROWS,
    quick: { connections: 200, title: '200 idle keep-alive TLS connections' },
  },
  ...[1, 10, 100, 1000].map((c) =>
    throughput(`scale-${c}`, 'scale', `concurrency ${c} (hello world, ${c} connections)`, {
      concurrencyLevel: c,
      path: '/hello',
      responseBytes: 12,
      concurrency: c,
      connections: c,
      // Shorter than the other throughput workloads: the series is about its shape.
      durationMs: 1500,
      warmupMs: 500,
      rows: SCALE_ROWS,
      quick: { ...QUICK, rows: ['node-ka', 'hyperagent', 'hyperagent-request'] },
    }),
  ),
];

// The workloads of a run, quick overrides applied; `only` (ids or groups) narrows them.
function select({ quick, only }) {
  const out = [];
  for (const w of workloads) {
    if (only && !only.includes(w.id) && !only.includes(w.group)) continue;
    if (quick && w.quick === null) continue;
    const resolved = { ...w, ...(quick ? w.quick : undefined) };
    delete resolved.quick;
    resolved.baseline ??= BASELINES[rows.find((row) => row.id === resolved.rows[0]).protocol];
    if (resolved.perCaller) resolved.requests = resolved.perCaller * resolved.concurrency;
    out.push(resolved);
  }
  return out;
}

module.exports = { workloads, select, HISTOGRAM_MS };
