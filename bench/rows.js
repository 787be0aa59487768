'use strict';

// The clients that `npm run bench` compares: one entry per row of its tables.
//
// A row is { id, label, protocol, setup }. `setup(ctx)` builds the client in a fresh process
// and returns (or resolves with: an HTTP/2 row checks its protocol with a first request)
//   { send(req) -> Promise<number>, socketsCreated() -> number | null, idleHeld() -> number | null,
//     close() -> Promise<void> }
// where `send({ method, path, body, headers, json })` makes one request (`body` a Buffer or a
// string, `headers` an object, each optional), consumes the whole response body and resolves
// with its length in bytes (rejecting on an error or a status other than 200); with `json`, it
// reads the body as JSON with the client's own reader, as applications do, and resolves with
// the length of the value written back as JSON.
// `socketsCreated` is the client's own count of connections created, where it keeps one;
// `idleHeld` its count of idle keep-alive connections, where it exposes one.
//
// `ctx` is { protocol, host, port, origin, connections, idleTimeout, ca }: `connections` is the
// limit per origin (maxSockets, undici's `connections`); `idleTimeout` (ms), when set, is how
// long an idle connection may be kept, for workloads that hold connections idle; `ca`, for an
// HTTPS or HTTP/2 row, the PEM of the certificate authority the bench server's certificate
// chains to (every such row verifies the server for real).
//
// Adding a row is one more entry here: it joins every workload that compares all rows of its
// protocol (workloads.js). Modules are required inside `setup`, so a client process loads only
// its own row's code and its memory figures are its own. The bench server serves HTTP or, with
// the fixture certificate of the tests, HTTPS (run.js, `startServer`); over TLS it speaks
// HTTP/2 to a client that chooses `h2` in ALPN. The rows of protocol 'h2' are HTTP/2 clients
// (over TLS, https: origins); each makes sure at setup that it speaks HTTP/2, and the runner
// checks after every run that the server accepted only HTTP/2 connections from it (and none
// from an 'https' row).

const http = require('node:http');
const https = require('node:https');
const path = require('node:path');

// One request through Node's `http.request` (or `https.request`) with the given agent: the
// drop-in path. TLS options live in the agent.
function viaHttpRequest(agent, ctx) {
  const { host, port } = ctx;
  const { request } = ctx.protocol === 'https' ? https : http;
  return ({ method, path: reqPath, body, headers: given, json }) =>
    new Promise((resolve, reject) => {
      const headers = body ? { ...given, 'content-length': Buffer.byteLength(body) } : given;
      const req = request({ host, port, method, path: reqPath, agent, headers }, (res) => {
        let bytes = 0;
        const chunks = [];
        res.on('data', (chunk) => {
          bytes += chunk.length;
          if (json) chunks.push(chunk);
        });
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          else if (json) resolve(jsonLength(JSON.parse(Buffer.concat(chunks).toString())));
          else resolve(bytes);
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
}

// A Node-style agent's own count of created sockets (agentkeepalive's statistics).
function createdOf(agent) {
  return () => agent.getCurrentStatus().createSocketCount;
}

// Idle sockets in a Node-style agent's `freeSockets` view.
function freeOf(agent) {
  return () => {
    let n = 0;
    const free = agent.freeSockets;
    for (const name in free) n += free[name].length;
    return n;
  };
}

function nodeAgentRow(agent, ctx, extra = {}) {
  return {
    send: viaHttpRequest(agent, ctx),
    socketsCreated: () => null,
    idleHeld: freeOf(agent),
    close: async () => agent.destroy(),
    ...extra,
  };
}

// What a JSON workload's send resolves with: the length of the value written back as JSON.
const jsonLength = (value) => JSON.stringify(value).length;

// One request through a promise API that answers as undici's `request` does (`statusCode` and
// a `body` stream with `json()`): undici's on a dispatcher (a Pool or an Agent), and
// hyperagent's `agent.request()`. The body is consumed as a stream, bytes counted (or read by
// its json()).
function viaPromiseApi(request) {
  return async ({ method, path: reqPath, body, headers, json }) => {
    const res = await request(reqPath, { method, body, headers });
    if (json) {
      const value = await res.body.json();
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
      return jsonLength(value);
    }
    let bytes = 0;
    for await (const chunk of res.body) bytes += chunk.length;
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
    return bytes;
  };
}

function undiciOptions(ctx) {
  const opts = { connections: ctx.connections };
  if (ctx.ca) opts.connect = { ca: ctx.ca };
  if (ctx.idleTimeout) {
    opts.keepAliveTimeout = ctx.idleTimeout;
    opts.keepAliveMaxTimeout = ctx.idleTimeout;
  }
  return opts;
}

// agentkeepalive and hyperagent name their idle limits alike.
function keepAliveOptions(ctx) {
  const opts = { keepAlive: true, maxSockets: ctx.connections, maxFreeSockets: ctx.connections };
  if (ctx.ca) opts.ca = ctx.ca;
  if (ctx.idleTimeout) {
    opts.freeSocketTimeout = ctx.idleTimeout;
    opts.timeout = ctx.idleTimeout;
  }
  return opts;
}

// The clients that exist for both protocols, built the same way for each.

function nodeKeepAlive(ctx) {
  const { Agent } = ctx.protocol === 'https' ? https : http;
  const agent = new Agent({
    keepAlive: true,
    maxSockets: ctx.connections,
    maxFreeSockets: ctx.connections,
    ca: ctx.ca,
  });
  return nodeAgentRow(agent, ctx);
}

function agentkeepalive(ctx) {
  const { HttpAgent, HttpsAgent } = require('agentkeepalive');
  const agent = new (ctx.protocol === 'https' ? HttpsAgent : HttpAgent)(keepAliveOptions(ctx));
  return nodeAgentRow(agent, ctx, { socketsCreated: createdOf(agent) });
}

function undiciPool(ctx) {
  const { Pool } = require('undici');
  const pool = new Pool(ctx.origin, undiciOptions(ctx));
  return {
    send: viaPromiseApi((p, opts) => pool.request({ path: p, ...opts })),
    socketsCreated: () => null,
    idleHeld: () => pool.stats.free,
    close: () => pool.close(),
  };
}

function hyperagent(ctx) {
  const { Agent, HttpsAgent } = require(path.join(__dirname, '..'));
  return new (ctx.protocol === 'https' ? HttpsAgent : Agent)(keepAliveOptions(ctx));
}

// hyperagent's drop-in path: Node's http.request (or https.request) over its agent.
function hyperagentDropIn(ctx) {
  const agent = hyperagent(ctx);
  return nodeAgentRow(agent, ctx, { socketsCreated: createdOf(agent) });
}

// hyperagent's promise path: agent.request().
function hyperagentRequest(ctx) {
  const agent = hyperagent(ctx);
  return {
    send: viaPromiseApi((p, opts) => agent.request(ctx.origin + p, opts)),
    socketsCreated: createdOf(agent),
    idleHeld: freeOf(agent),
    close: async () => agent.destroy(),
  };
}

// undici's request() with `dispatcher`.
function undiciRequestRow(dispatcher, ctx) {
  const undici = require('undici');
  return {
    send: viaPromiseApi((p, opts) => undici.request(ctx.origin + p, { dispatcher, ...opts })),
    socketsCreated: () => null,
    idleHeld: () => null,
    close: () => dispatcher.close(),
  };
}

function undiciRequest(ctx) {
  const undici = require('undici');
  return undiciRequestRow(new undici.Agent(undiciOptions(ctx)), ctx);
}

// hyperagent's Dispatcher, over agents with the options of the other hyperagent rows.
function hyperagentDispatcher(ctx) {
  const { Dispatcher } = require(path.join(__dirname, '..'));
  return new Dispatcher(keepAliveOptions(ctx));
}

function undiciRequestHyperagent(ctx) {
  return undiciRequestRow(hyperagentDispatcher(ctx), ctx);
}

// Node's built-in fetch, with `dispatcher` (its default global one when undefined).
function fetchRow(ctx, dispatcher, close) {
  return {
    send: async ({ method, path: reqPath, body, headers, json }) => {
      const res = await fetch(ctx.origin + reqPath, { method, body, headers, dispatcher });
      if (json) {
        const value = await res.json();
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        return jsonLength(value);
      }
      const buf = await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`status ${res.status}`);
      return buf.byteLength;
    },
    socketsCreated: () => null,
    idleHeld: () => null,
    close,
  };
}

function fetchHyperagent(ctx) {
  const dispatcher = hyperagentDispatcher(ctx);
  const agent = ctx.protocol === 'https' ? dispatcher.https : dispatcher.http;
  return { ...fetchRow(ctx, dispatcher, () => dispatcher.close()), socketsCreated: createdOf(agent) };
}

// A dispatcher that does no I/O at all and answers every request at the next turn of the event
// loop, from JavaScript, with the bench server's response to it (`GET /hello` only), in whichever
// of undici's handler APIs the handler has. What a client costs over it is the client's own cost
// per request: no dispatcher, ours included, can make that client faster. The ceiling rows below
// are the references for the Dispatcher targets, not clients: they are in the hello workloads
// alone, and in no summary or chart.
function noIoDispatcher() {
  const body = Buffer.from('Hello World!');
  const length = String(body.length);
  // The head's lines (for a handler of the older API, and the newer API's controller), made
  // once, where a real dispatcher makes them for each response: a ceiling is the most optimistic.
  const rawHeaders = [Buffer.from('content-type'), Buffer.from('text/plain'),
    Buffer.from('content-length'), Buffer.from(length)];
  return {
    dispatch(opts, handler) {
      if (opts.path !== '/hello') throw new Error(`the ceiling row answers GET /hello only, not ${opts.path}`);
      setImmediate(() => {
        if (typeof handler.onRequestStart === 'function') {
          // undici 8's fetch (Node 26's) reads the head's lines from the controller's
          // rawHeaders: without them its response would have no headers at all.
          const controller = { paused: false, aborted: false, reason: null, rawHeaders, rawTrailers: [], pause() {}, resume() {}, abort() {} };
          handler.onRequestStart(controller, {});
          handler.onResponseStart(controller, 200, { 'content-type': 'text/plain', 'content-length': length }, 'OK');
          handler.onResponseData(controller, body);
          handler.onResponseEnd(controller, {});
          return;
        }
        handler.onConnect(() => {});
        handler.onHeaders(200, rawHeaders, () => {}, 'OK');
        handler.onData(body);
        handler.onComplete([]);
      });
      return true;
    },
    close: async () => {},
    destroy: async () => {},
  };
}

// The ceiling of any dispatcher under Node's built-in fetch.
function fetchCeiling(ctx) {
  return fetchRow(ctx, noIoDispatcher(), async () => {});
}

// The ceiling of any dispatcher under undici's request().
function undiciRequestCeiling(ctx) {
  return undiciRequestRow(noIoDispatcher(), ctx);
}

// ---- HTTP/2 ------------------------------------------------------------------------------------

// Throws unless `text`, the body of GET /version through the row's client, says HTTP/2.
function assertH2(rowLabel, text) {
  if (text !== 'HTTP/2.0') throw new Error(`${rowLabel} spoke ${text} to the bench server, not HTTP/2`);
}

// hyperagent's promise path offering h2 in ALPN. The first response must say HTTP/2.
async function hyperagentH2(ctx) {
  const { HttpsAgent } = require(path.join(__dirname, '..'));
  const agent = new HttpsAgent({ keepAlive: true, allowH2: true, ca: ctx.ca });
  const res = await agent.request(ctx.origin + '/version');
  const text = await res.body.text();
  if (res.httpVersion !== '2.0') {
    throw new Error(`agent.request() answered with httpVersion ${res.httpVersion}, not 2.0`);
  }
  assertH2('agent.request()', text);
  return {
    send: viaPromiseApi((p, opts) => agent.request(ctx.origin + p, opts)),
    socketsCreated: createdOf(agent),
    idleHeld: () => null,
    close: async () => agent.destroy(),
  };
}

// undici's request() over an Agent that offers h2 (its responses do not say their version:
// the server does), with `options` added.
async function undiciH2(ctx, options) {
  const undici = require('undici');
  const dispatcher = new undici.Agent({ allowH2: true, connect: { ca: ctx.ca }, ...options });
  const res = await undici.request(ctx.origin + '/version', { dispatcher });
  assertH2('undici request()', await res.body.text());
  return undiciRequestRow(dispatcher, ctx);
}

// Node's own HTTP/2 client: one session, a stream per request.
async function nodeHttp2(ctx) {
  const http2 = require('node:http2');
  const session = http2.connect(ctx.origin, { ca: ctx.ca });
  // A session error fails the streams under way; the session itself must not throw.
  let sessionError = null;
  session.on('error', (err) => (sessionError = err));
  const send = ({ method = 'GET', path: reqPath, body, headers, json }) =>
    new Promise((resolve, reject) => {
      if (sessionError) return reject(sessionError);
      const head = { ...headers, ':method': method, ':path': reqPath };
      if (body) head['content-length'] = Buffer.byteLength(body);
      const stream = session.request(head, { endStream: !body });
      let status = 0;
      let bytes = 0;
      const chunks = [];
      stream.on('response', (h) => (status = h[':status']));
      stream.on('data', (chunk) => {
        bytes += chunk.length;
        if (json) chunks.push(chunk);
      });
      stream.on('end', () => {
        if (status !== 200) reject(new Error(`status ${status}`));
        else if (json) resolve(jsonLength(JSON.parse(Buffer.concat(chunks).toString())));
        else resolve(bytes);
      });
      stream.on('error', reject);
      if (body) stream.end(body);
    });
  const text = await new Promise((resolve, reject) => {
    const stream = session.request({ ':path': '/version' });
    let t = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk) => (t += chunk));
    stream.on('end', () => resolve(t));
    stream.on('error', reject);
  });
  assertH2('http2.connect()', text);
  return {
    send,
    socketsCreated: () => null,
    idleHeld: () => null,
    close: () => new Promise((resolve) => session.close(resolve)),
  };
}

// Node's built-in fetch with hyperagent's Dispatcher offering h2.
async function fetchH2Hyperagent(ctx) {
  const { Dispatcher } = require(path.join(__dirname, '..'));
  const dispatcher = new Dispatcher({ allowH2: true, ca: ctx.ca });
  const res = await fetch(ctx.origin + '/version', { dispatcher });
  assertH2('fetch with the Dispatcher', await res.text());
  return { ...fetchRow(ctx, dispatcher, () => dispatcher.close()), socketsCreated: createdOf(dispatcher.https) };
}

const rows = [
  {
    id: 'node-close',
    label: 'Node http.Agent (keepAlive: false)',
    protocol: 'http',
    setup: (ctx) => nodeAgentRow(new http.Agent({ keepAlive: false, maxSockets: ctx.connections }), ctx),
  },
  { id: 'node-ka', label: 'Node http.Agent (keepAlive: true)', protocol: 'http', setup: nodeKeepAlive },
  { id: 'agentkeepalive', label: 'agentkeepalive', protocol: 'http', setup: agentkeepalive },
  { id: 'undici-pool', label: 'undici Pool.request', protocol: 'http', setup: undiciPool },
  { id: 'undici-request', label: 'undici request() + Agent', protocol: 'http', setup: undiciRequest },
  {
    // Node's built-in fetch with its default global dispatcher, as users call it: that
    // dispatcher has no connection limit, so it opens as many connections as requests are in
    // flight (the workload's concurrency, equal to `connections` in every fetch workload).
    id: 'fetch',
    label: 'fetch (Node built-in)',
    protocol: 'http',
    setup: (ctx) => fetchRow(ctx, undefined, async () => {}),
  },
  { id: 'fetch-hyperagent', label: 'fetch + hyperagent Dispatcher', protocol: 'http', setup: fetchHyperagent },
  { id: 'fetch-ceiling', label: 'fetch, answered with no I/O (ceiling)', protocol: 'http', ceiling: true, setup: fetchCeiling },
  {
    id: 'undici-request-hyperagent',
    label: 'undici request() + hyperagent Dispatcher',
    protocol: 'http',
    setup: undiciRequestHyperagent,
  },
  {
    id: 'undici-request-ceiling',
    label: 'undici request(), answered with no I/O (ceiling)',
    protocol: 'http',
    ceiling: true,
    setup: undiciRequestCeiling,
  },
  { id: 'hyperagent', label: 'hyperagent Agent (http.request)', protocol: 'http', setup: hyperagentDropIn },
  { id: 'hyperagent-request', label: 'hyperagent agent.request()', protocol: 'http', setup: hyperagentRequest },

  // HTTPS: the same clients against the same server speaking TLS.
  { id: 'node-https-ka', label: 'Node https.Agent (keepAlive: true)', protocol: 'https', setup: nodeKeepAlive },
  { id: 'agentkeepalive-https', label: 'agentkeepalive HttpsAgent', protocol: 'https', setup: agentkeepalive },
  { id: 'undici-pool-https', label: 'undici Pool.request (TLS)', protocol: 'https', setup: undiciPool },
  {
    id: 'hyperagent-https',
    label: 'hyperagent HttpsAgent (https.request)',
    protocol: 'https',
    setup: hyperagentDropIn,
  },
  {
    id: 'hyperagent-https-request',
    label: 'hyperagent HttpsAgent agent.request()',
    protocol: 'https',
    setup: hyperagentRequest,
  },
  { id: 'undici-request-https', label: 'undici request() + Agent (TLS)', protocol: 'https', setup: undiciRequest },
  {
    id: 'undici-request-https-hyperagent',
    label: 'undici request() + hyperagent Dispatcher (TLS)',
    protocol: 'https',
    setup: undiciRequestHyperagent,
  },
  {
    // fetch's default dispatcher takes no CA: undici's Agent given the bench's CA, as a program
    // that trusts a private CA passes it.
    id: 'fetch-https',
    label: 'fetch + undici Agent (TLS)',
    protocol: 'https',
    setup: (ctx) => {
      const undici = require('undici');
      const agent = new undici.Agent(undiciOptions(ctx));
      return fetchRow(ctx, agent, () => agent.close());
    },
  },
  { id: 'fetch-https-hyperagent', label: 'fetch + hyperagent Dispatcher (TLS)', protocol: 'https', setup: fetchHyperagent },
  {
    id: 'fetch-https-ceiling',
    label: 'fetch, answered with no I/O (ceiling, https: URL)',
    protocol: 'https',
    ceiling: true,
    setup: fetchCeiling,
  },

  // HTTP/2 over TLS (ALPN), every client on its defaults but for the CA: one connection per
  // origin, as many streams on it as the server allows (1,000).
  {
    // undici 7 sends as many requests at once on a connection as `pipelining` says (default 1),
    // HTTP/2 or not (nodejs/undici#4143): on its defaults, below, it opens a connection per
    // request in flight. Given one connection and as many streams on it as the server takes,
    // it multiplexes as the other rows do: the baseline of the HTTP/2 workloads.
    id: 'undici-h2',
    label: 'undici request() + Agent (h2, 1 conn.)',
    protocol: 'h2',
    setup: (ctx) => undiciH2(ctx, { connections: 1, pipelining: 1000 }),
  },
  {
    id: 'undici-h2-default',
    label: 'undici request() + Agent (h2, defaults)',
    protocol: 'h2',
    setup: (ctx) => undiciH2(ctx, {}),
  },
  { id: 'node-http2', label: 'Node http2 session', protocol: 'h2', setup: nodeHttp2 },
  {
    id: 'hyperagent-h2',
    label: 'hyperagent agent.request() (h2)',
    protocol: 'h2',
    setup: hyperagentH2,
  },
  { id: 'fetch-h2-hyperagent', label: 'fetch + hyperagent Dispatcher (h2)', protocol: 'h2', setup: fetchH2Hyperagent },
];

const byId = new Map(rows.map((row) => [row.id, row]));

// The row every ratio of a workload is taken against, by protocol (for HTTP/2, undici's).
const BASELINES = { http: 'node-ka', https: 'node-https-ka', h2: 'undici-h2' };

module.exports = { rows, byId, BASELINE: BASELINES.http, BASELINES };
