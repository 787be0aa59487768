'use strict';

// Dispatcher: Node's built-in fetch and undici's request/fetch/stream/pipeline over the agents' pools, against
// real HTTP and HTTPS servers on loopback (fixture certificates verified for real) and scripted
// raw servers for faults; both of undici's handler APIs driven directly.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const http2 = require('node:http2');
const os = require('node:os');
const zlib = require('node:zlib');
const path = require('node:path');
const { once } = require('node:events');
const { Readable, Writable } = require('node:stream');
const { pipeline } = require('node:stream/promises');
const undici = require('./undici');
const { Dispatcher, Agent, HttpsAgent, setGlobalDispatcher, getGlobalDispatcher } = require('..');
const { httpServer, sha256, received, dispatcher, trailingServer, streamingServer, rawServer, readRequest, listen, until, stalled, runChild, collected } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
const CA = fixture('ca.pem');

// An HTTP/2 server over TLS (the fixture's localhost certificate) on loopback, closed with its
// sessions when the test ends.
async function h2Server(t, handler) {
  const server = http2.createSecureServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, handler);
  const sessions = [];
  server.on('session', (session) => sessions.push(session));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const session of sessions) session.destroy();
    server.close();
  });
  return server;
}

// A server that answers with what it received: method, path, byte count and checksum.
async function echo(req, res) {
  const { bytes, sha } = await received(req);
  res.setHeader('set-cookie', ['a=1', 'b=2']);
  res.end(JSON.stringify({ method: req.method, url: req.url, bytes, sha }));
}

test('fetch goes through the dispatcher: status, body, set-cookie, statistics', async (t) => {
  const server = await httpServer(t, echo);
  const d = dispatcher(t);
  const res = await fetch(`${server.url}/items?x=1`, { dispatcher: d, headers: { 'x-test': 'yes' } });
  assert.strictEqual(res.status, 200);
  assert.deepStrictEqual(res.headers.getSetCookie(), ['a=1', 'b=2']);
  assert.deepStrictEqual(await res.json(), { method: 'GET', url: '/items?x=1', bytes: 0, sha: sha256(Buffer.alloc(0)) });
  assert.strictEqual(d.http.requestCount, 1);
  assert.ok(d.http instanceof Agent);
});

test('fetch bodies of 1 MiB go both ways whole: a string, a Blob, a stream', async (t) => {
  const big = crypto.randomBytes(1 << 20);
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/download') return res.end(big);
    return echo(req, res);
  });
  const d = dispatcher(t);
  const down = Buffer.from(await (await fetch(`${server.url}/download`, { dispatcher: d })).arrayBuffer());
  assert.strictEqual(sha256(down), sha256(big));
  const viaBlob = await (await fetch(`${server.url}/blob`, { method: 'PUT', body: new Blob([big]), dispatcher: d })).json();
  assert.deepStrictEqual([viaBlob.bytes, viaBlob.sha], [big.length, sha256(big)]);
  const stream = new ReadableStream({
    start(controller) {
      for (let i = 0; i < big.length; i += 65536) controller.enqueue(big.subarray(i, i + 65536));
      controller.close();
    },
  });
  const viaStream = await (await fetch(`${server.url}/stream`, { method: 'POST', body: stream, duplex: 'half', dispatcher: d })).json();
  assert.deepStrictEqual([viaStream.method, viaStream.bytes, viaStream.sha], ['POST', big.length, sha256(big)]);
  const viaString = await (await fetch(`${server.url}/text`, { method: 'POST', body: 'héllo', dispatcher: d })).json();
  assert.strictEqual(viaString.sha, sha256(Buffer.from('héllo')));
});

test('fetch follows redirects itself, each hop a request of the pool', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/old') {
      res.writeHead(302, { location: '/new' });
      return res.end();
    }
    return res.end(`at ${req.url}`);
  });
  const d = dispatcher(t);
  const res = await fetch(`${server.url}/old`, { dispatcher: d });
  assert.strictEqual(await res.text(), 'at /new');
  assert.strictEqual(res.redirected, true);
  assert.strictEqual(d.http.requestCount, 2);
});

test('HTTPS through the dispatcher checks the server against the CA it was given', async (t) => {
  const server = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, (req, res) => res.end('secure'));
  await listen(t, server);
  const url = `https://localhost:${server.address().port}/`;
  const trusting = dispatcher(t, { ca: CA });
  assert.strictEqual(await (await fetch(url, { dispatcher: trusting })).text(), 'secure');
  assert.strictEqual(trusting.https.requestCount, 1);
  const strict = dispatcher(t);
  const err = await fetch(url, { dispatcher: strict }).then(() => null, (e) => e);
  assert.ok(err instanceof TypeError);
  assert.strictEqual(err.cause.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
});

test("undici's maxRequestsPerClient: a connection carries at most that many requests, as the agents' maxRequestsPerSocket", async (t) => {
  const on = [];
  const server = await httpServer(t, (req, res) => {
    on.push(server.connections.indexOf(req.socket));
    res.end('ok');
  });
  const d = dispatcher(t, { maxRequestsPerClient: 2 });
  assert.strictEqual(d.http.options.maxRequestsPerSocket, 2);
  for (let i = 0; i < 3; i++) assert.strictEqual(await (await fetch(`${server.url}/`, { dispatcher: d })).text(), 'ok');
  for (let i = 0; i < 2; i++) await (await undici.request(`${server.url}/`, { dispatcher: d })).body.text();
  assert.deepStrictEqual(on, [0, 0, 1, 1, 2]);
  await until(() => server.connections[1].destroyed, 5000, 'the second connection to close');
  assert.strictEqual(d.http.getCurrentStatus().createSocketCount, 3);
  // null (undici's default) and 0: no limit.
  for (const none of [null, 0]) {
    const unlimited = dispatcher(t, { maxRequestsPerClient: none });
    const first = on.length;
    for (let i = 0; i < 3; i++) await (await fetch(`${server.url}/`, { dispatcher: unlimited })).text();
    assert.strictEqual(new Set(on.slice(first)).size, 1, `${none}: one connection`);
  }
  assert.throws(() => new Dispatcher({ maxRequestsPerClient: 2, maxRequestsPerSocket: 3 }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => new Dispatcher({ maxRequestsPerClient: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => new Dispatcher({ maxRequestsPerClient: '2' }), { code: 'ERR_INVALID_ARG_TYPE' });
});

test("undici Agent's options mean what they mean there: connections, connect's TLS and socketPath, keepAliveTimeout, maxHeaderSize", async (t) => {
  // connect's TLS options: the CA verifies the server for real; with rejectUnauthorized: false,
  // a server no CA vouches for is taken, as undici takes it.
  const secure = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, (req, res) => res.end('secure'));
  await listen(t, secure);
  const secureUrl = `https://localhost:${secure.address().port}/`;
  assert.strictEqual(await (await fetch(secureUrl, { dispatcher: dispatcher(t, { connect: { ca: CA } }) })).text(), 'secure');
  const lax = dispatcher(t, { connect: { rejectUnauthorized: false } });
  assert.strictEqual(await (await fetch(secureUrl, { dispatcher: lax })).text(), 'secure');
  // connections: at most that many connections to an origin, as maxSockets.
  const sockets = new Set();
  const server = await httpServer(t, (req, res) => {
    sockets.add(req.socket);
    res.end('ok');
  });
  const warnings = [];
  const onWarning = (w) => warnings.push(w.name);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  const limited = dispatcher(t, { connections: 2, keepAliveTimeout: 1234 });
  const bodies = await Promise.all(Array.from({ length: 8 }, () => fetch(`${server.url}/`, { dispatcher: limited }).then((r) => r.text())));
  assert.deepStrictEqual(bodies, Array(8).fill('ok'));
  assert.ok(sockets.size <= 2, `${sockets.size} connections`);
  assert.strictEqual(limited.http.maxSockets, 2);
  // keepAliveTimeout is undici's idle time, the agents' freeSocketTimeout: no deprecation.
  assert.strictEqual(limited.http.options.freeSocketTimeout, 1234);
  await new Promise(setImmediate);
  assert.deepStrictEqual(warnings, []);
  assert.strictEqual(dispatcher(t, { connections: null }).http.maxSockets, Infinity);
  // pipelining: 0 turns keep-alive off, as in undici: each request on a connection of its
  // own, saying so; given with keepAlive: true, it is refused.
  const seen = [];
  const unkeptServer = await httpServer(t, (req, res) => {
    seen.push([req.socket.remotePort, req.headers.connection]);
    res.end('ok');
  });
  const unkept = dispatcher(t, { pipelining: 0 });
  for (let i = 0; i < 3; i++) assert.strictEqual(await (await fetch(`${unkeptServer.url}/`, { dispatcher: unkept })).text(), 'ok');
  assert.deepStrictEqual(seen.map(([, connection]) => connection), ['close', 'close', 'close']);
  assert.strictEqual(new Set(seen.map(([port]) => port)).size, 3);
  assert.strictEqual(unkept.http.keepAlive, false);
  assert.throws(() => new Dispatcher({ pipelining: 0, keepAlive: true }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.strictEqual(dispatcher(t, { pipelining: 10 }).http.keepAlive, true);
  // maxHeaderSize: a longer response head fails, as undici fails it.
  const big = await httpServer(t, (req, res) => {
    res.setHeader('x-big', 'a'.repeat(2000));
    res.end();
  });
  const small = dispatcher(t, { maxHeaderSize: 1024 });
  const overflow = await fetch(`${big.url}/`, { dispatcher: small }).then(() => null, (e) => e);
  assert.strictEqual(overflow.cause.code, 'HPE_HEADER_OVERFLOW');
  assert.strictEqual((await fetch(`${big.url}/`, { dispatcher: dispatcher(t) })).status, 200);
  // connect.socketPath: the requests go over that Unix socket (a named pipe on Windows).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const socketPath = process.platform === 'win32' ? `\\\\.\\pipe\\${path.basename(dir)}` : path.join(dir, 'server.sock');
  const local = http.createServer((req, res) => res.end(`unix ${req.url}`));
  local.listen(socketPath);
  await once(local, 'listening');
  t.after(() => {
    local.closeAllConnections();
    local.close();
  });
  const viaSocket = dispatcher(t, { connect: { socketPath } });
  assert.strictEqual(await (await fetch('http://localhost/path', { dispatcher: viaSocket })).text(), 'unix /path');
  // Two names for one option must agree; what the agents cannot do is refused at once.
  assert.throws(() => new Dispatcher({ maxSockets: 5, connections: 10 }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => new Dispatcher({ connections: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => new Dispatcher({ connect: () => {} }), { code: 'ERR_HYPERAGENT_UNSUPPORTED' });
  assert.throws(() => new Dispatcher({ factory: () => {} }), { code: 'ERR_HYPERAGENT_UNSUPPORTED' });
  assert.throws(() => new Dispatcher({ maxResponseSize: -2 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => new Dispatcher({ pipelining: 'x' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Dispatcher({ maxRedirections: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  // Tuning of undici's own is taken; so is maxRedirections, which undici 7's and 8's Agent
  // take and follow no redirect for.
  dispatcher(t, { pipelining: 10, keepAliveMaxTimeout: 600e3, maxResponseSize: -1, connect: { timeout: 10e3, keepAlive: true } });
  const redirecting = await httpServer(t, (req, res) => {
    res.writeHead(302, { location: '/elsewhere' });
    res.end();
  });
  const leftOver = dispatcher(t, { maxRedirections: 3 });
  const moved = await undici.request(`${redirecting.url}/`, { dispatcher: leftOver });
  await moved.body.dump();
  assert.strictEqual(moved.statusCode, 302, 'not followed');
  // A request's own maxRedirections (other than 0) is refused as undici 7's dispatch refuses
  // it, on either way in; expectContinue is checked, and taken. throwOnError is left to the
  // request() above a dispatch (undici 6's acts on it); our own request() refuses it.
  await assert.rejects(undici.request(`${redirecting.url}/`, { dispatcher: leftOver, maxRedirections: 2 }), { code: 'ERR_INVALID_ARG_VALUE', message: /maxRedirections/ });
  await assert.rejects(leftOver.request({ origin: redirecting.url, path: '/', method: 'GET', maxRedirections: 2 }), { code: 'ERR_INVALID_ARG_VALUE', message: /maxRedirections/ });
  const dispatched = (opts) => new Promise((resolve) => {
    leftOver.dispatch({ origin: redirecting.url, path: '/', method: 'GET', ...opts }, {
      onConnect() {}, onHeaders() {}, onData() {}, onComplete() { resolve(null); }, onError: resolve,
    });
  });
  assert.strictEqual((await dispatched({ maxRedirections: 2 })).code, 'ERR_INVALID_ARG_VALUE');
  assert.strictEqual((await dispatched({ expectContinue: 0 })).code, 'ERR_INVALID_ARG_TYPE');
  await assert.rejects(leftOver.request({ origin: redirecting.url, path: '/', method: 'GET', throwOnError: true }), { code: 'ERR_INVALID_ARG_VALUE', message: /throwOnError/ });
  for (const opts of [{ maxRedirections: 0 }, { expectContinue: true }, { expectContinue: false }, { throwOnError: true }]) {
    assert.strictEqual(await dispatched(opts), null, JSON.stringify(opts));
  }
});

test("undici's maxResponseSize fails a longer response, by its length or as it comes, and frees its connection", async (t) => {
  const server = await httpServer(t, (req, res) => {
    const size = Number(req.url.split('/')[2]);
    if (req.url.startsWith('/length/')) {
      res.setHeader('content-length', size);
      return res.end(req.method === 'HEAD' ? undefined : Buffer.alloc(size, 1));
    }
    // No length: chunked, over two writes.
    res.write(Buffer.alloc(size / 2, 1));
    return setImmediate(() => res.end(Buffer.alloc(size / 2, 1)));
  });
  const d = dispatcher(t, { maxResponseSize: 1000 });
  const tooLong = { code: 'UND_ERR_RES_EXCEEDED_MAX_SIZE', name: 'ResponseExceededMaxSizeError' };
  // By its length: before the head is handed on.
  const byLength = await fetch(`${server.url}/length/2000`, { dispatcher: d }).then(() => null, (e) => e);
  assert.strictEqual(byLength.message, 'fetch failed');
  assert.deepStrictEqual([byLength.cause.code, byLength.cause.name], [tooLong.code, tooLong.name]);
  await assert.rejects(d.request({ origin: server.url, path: '/length/1001', method: 'GET' }), tooLong);
  // As it comes: the body fails, through fetch, undici's request() and the dispatcher's own.
  const res = await fetch(`${server.url}/chunked/2000`, { dispatcher: d });
  await assert.rejects(res.arrayBuffer(), (err) => err.cause?.code === tooLong.code || err.code === tooLong.code);
  const viaUndici = await undici.request(`${server.url}/chunked/2000`, { dispatcher: d });
  await assert.rejects(viaUndici.body.text(), tooLong);
  const own = await d.request({ origin: server.url, path: '/chunked/2000', method: 'GET' });
  await assert.rejects(own.body.text(), tooLong);
  // Up to the limit, and a HEAD's length, are taken; the pool carries on.
  assert.strictEqual((await (await fetch(`${server.url}/length/1000`, { dispatcher: d })).arrayBuffer()).byteLength, 1000);
  assert.strictEqual((await (await fetch(`${server.url}/chunked/1000`, { dispatcher: d })).arrayBuffer()).byteLength, 1000);
  assert.strictEqual((await fetch(`${server.url}/length/5000`, { dispatcher: d, method: 'HEAD' })).status, 200);
});

test("stats: by origin, its connections and requests, counted as undici's Agent counts them", async (t) => {
  const held = [];
  const server = await httpServer(t, (req, res) => {
    held.push(res);
    server.emit('held');
  });
  const heldCount = async (n) => {
    while (held.length < n) await once(server, 'held');
  };
  const d = dispatcher(t, { connections: 2 });
  assert.deepStrictEqual(d.stats, {});
  const bodies = Array.from({ length: 4 }, () => undici.request(`${server.url}/`, { dispatcher: d }).then((r) => r.body.text()));
  // Two on the two connections, two waiting for one (undici's Agent counts the same here).
  await heldCount(2);
  assert.deepStrictEqual(d.stats, { [server.url]: { connected: 2, free: 0, pending: 2, queued: 2, running: 2, size: 4 } });
  for (const res of held.splice(0)) res.end('a');
  await heldCount(2);
  for (const res of held.splice(0)) res.end('b');
  assert.deepStrictEqual(await Promise.all(bodies), ['a', 'a', 'b', 'b']);
  // Done: the connections idle.
  assert.deepStrictEqual(d.stats, { [server.url]: { connected: 2, free: 2, pending: 0, queued: 0, running: 0, size: 0 } });
  // HTTP/2: one session, free for more streams, running three.
  const streams = [];
  const h2 = await h2Server(t, (req, res) => {
    streams.push(res);
    h2.emit('held');
  });
  const h2Origin = `https://localhost:${h2.address().port}`;
  const multiplexed = dispatcher(t, { allowH2: true, ca: CA });
  const texts = Array.from({ length: 3 }, () => fetch(h2Origin, { dispatcher: multiplexed }).then((r) => r.text()));
  while (streams.length < 3) await once(h2, 'held');
  assert.deepStrictEqual(multiplexed.stats, { [h2Origin]: { connected: 1, free: 1, pending: 0, queued: 0, running: 3, size: 3 } });
  for (const res of streams) res.end('h2');
  assert.deepStrictEqual(await Promise.all(texts), ['h2', 'h2', 'h2']);
  assert.deepStrictEqual(multiplexed.stats, { [h2Origin]: { connected: 1, free: 1, pending: 0, queued: 0, running: 0, size: 0 } });
});

test('faults reach fetch as "fetch failed" with our Node-style error as cause', async (t) => {
  const d = dispatcher(t);
  // Refused: a port nothing listens on any more.
  const gone = await rawServer(t, () => {});
  const port = gone.port;
  gone.close();
  await once(gone, 'close');
  const refused = await fetch(`http://127.0.0.1:${port}/`, { dispatcher: d }).then(() => null, (e) => e);
  assert.strictEqual(refused.message, 'fetch failed');
  assert.strictEqual(refused.cause.code, 'ECONNREFUSED');
  // Reset before any answer, on a fresh connection (not replayed).
  const resetting = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.resetAndDestroy();
  });
  const reset = await fetch(`http://127.0.0.1:${resetting.port}/`, { dispatcher: d }).then(() => null, (e) => e);
  assert.strictEqual(reset.message, 'fetch failed');
  assert.strictEqual(reset.cause.code, 'ECONNRESET');
  // Reset in the middle of the body: the body's read fails, with the same cause.
  const midway = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial', () => socket.resetAndDestroy());
  });
  const res = await fetch(`http://127.0.0.1:${midway.port}/`, { dispatcher: d });
  const bodyErr = await res.text().then(() => null, (e) => e);
  assert.ok(bodyErr instanceof TypeError, String(bodyErr));
  assert.strictEqual(bodyErr.cause.code, 'ECONNRESET');
  assert.strictEqual(d.http.totalSocketCount, 0);
});

test('a fetch aborted before its answer or during its body ends, and frees its connection', async (t) => {
  let held = null;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/never') {
      held = res;
      server.emit('held');
      return;
    }
    res.writeHead(200, { 'content-length': 10 });
    res.write('12345');
    server.emit('half');
  });
  const d = dispatcher(t);
  const before = new AbortController();
  const waiting = fetch(`${server.url}/never`, { dispatcher: d, signal: before.signal });
  await once(server, 'held');
  before.abort();
  const err = await waiting.then(() => null, (e) => e);
  assert.strictEqual(err.name, 'AbortError');
  await once(held.socket, 'close');

  const during = new AbortController();
  const half = once(server, 'half');
  const res = await fetch(`${server.url}/half`, { dispatcher: d, signal: during.signal });
  await half;
  const reading = res.text();
  during.abort();
  const bodyErr = await reading.then(() => null, (e) => e);
  assert.strictEqual(bodyErr.name, 'AbortError');
  await until(() => d.http.totalSocketCount === 0, 5000, 'the aborted connection to close');
});

test('a fetch aborted while its streamed upload waits for the server reads no more of its source', async (t) => {
  // The server answers at once and reads none of the upload: the sending waits for the socket.
  const server = await httpServer(t, (req, res) => {
    req.pause();
    res.writeHead(200);
    res.write('head');
  });
  const d = dispatcher(t);
  const ac = new AbortController();
  let pulls = 0;
  let afterAbort = null;
  const body = new ReadableStream({
    pull(controller) {
      pulls++;
      if (afterAbort !== null && ++afterAbort > 1000) {
        // Bounded: a source read on after the abort ends here rather than for ever.
        controller.close();
        return;
      }
      controller.enqueue(new Uint8Array(16 * 1024));
    },
  });
  const res = await fetch(server.url, { dispatcher: d, method: 'POST', body, duplex: 'half', signal: ac.signal });
  // The upload runs until the socket takes no more.
  await stalled(() => pulls);
  // The response is being read as the abort comes.
  const reading = res.body.pipeTo(new WritableStream());
  afterAbort = 0;
  ac.abort();
  await assert.rejects(reading, { name: 'AbortError' });
  await until(() => d.http.totalSocketCount === 0, 5000, 'the aborted connection to close');
  // fetch's own source, once its request is aborted, reads all its stream at the next call
  // for more: no such call was made.
  assert.ok(afterAbort <= 1, `${afterAbort} chunks were read from the source after the abort`);
});

test('a fetch body left unread stops the server: back-pressure reaches the socket', async (t) => {
  const chunk = Buffer.alloc(64 * 1024, 1);
  const server = await streamingServer(t, chunk, 1024);
  const d = dispatcher(t);
  const res = await fetch(`${server.url}/`, { dispatcher: d });
  const outcome = await server.outcome();
  assert.ok(outcome.stalled < chunk.length * 1024, `the server wrote everything: ${JSON.stringify(outcome)}`);
  await res.body.cancel();
});

test('a server closing idle connections loses no fetch: stale ones are caught before reuse', async (t) => {
  // Each connection answers once, keeps alive in its headers, then closes after a moment.
  const server = await httpServer(t, (req, res) => {
    res.end('ok');
    res.on('finish', () => setImmediate(() => req.socket.destroy()));
  });
  const d = dispatcher(t);
  const results = [];
  for (let i = 0; i < 20; i++) {
    results.push(await (await fetch(`${server.url}/${i}`, { dispatcher: d })).text());
  }
  assert.deepStrictEqual(results, Array(20).fill('ok'));
});

test('setGlobalDispatcher makes built-in fetch use ours; getGlobalDispatcher returns it', async (t) => {
  const server = await httpServer(t, echo);
  const before = getGlobalDispatcher();
  assert.ok(before && typeof before.dispatch === 'function', 'fetch has a default dispatcher');
  const d = dispatcher(t);
  setGlobalDispatcher(d);
  t.after(() => setGlobalDispatcher(before));
  assert.strictEqual(getGlobalDispatcher(), d);
  const res = await fetch(`${server.url}/global`);
  assert.strictEqual((await res.json()).url, '/global');
  assert.strictEqual(d.http.requestCount, 1);
  // undici's own getGlobalDispatcher() reads the same global.
  assert.strictEqual(undici.getGlobalDispatcher(), d);
  assert.throws(() => setGlobalDispatcher({}), { code: 'ERR_INVALID_ARG_TYPE' });

  // What getGlobalDispatcher() gives is what Node's fetch uses, so setting it back restores
  // fetch's own: in a process with no undici package loaded (which sets both globals), as
  // Node 26's is, whose undici 8 reads its newer global and keeps a wrapper of its Agent in
  // the first for older undici copies.
  const script = `
    const { Dispatcher, getGlobalDispatcher, setGlobalDispatcher } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const fetchReads = Number(process.versions.undici.split('.')[0]) >= 8 ? 'undici.globalDispatcher.2' : 'undici.globalDispatcher.1';
    const before = getGlobalDispatcher();
    const d = new Dispatcher();
    setGlobalDispatcher(d);
    const ours = globalThis[Symbol.for(fetchReads)] === d;
    setGlobalDispatcher(before);
    console.log(JSON.stringify({ before: before.constructor.name, ours, after: globalThis[Symbol.for(fetchReads)].constructor.name }));
    d.destroy();`;
  const { code, out, err } = await runChild(script);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), { before: 'Agent', ours: true, after: 'Agent' });
});

test("undici's request, fetch, stream and pipeline run on our dispatcher, and its interceptors compose", async (t) => {
  let calls = 0;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/flaky' && calls++ === 0) {
      res.statusCode = 503;
      return res.end('later');
    }
    return echo(req, res);
  });
  const d = dispatcher(t);
  const r = await undici.request(`${server.url}/req`, { dispatcher: d, method: 'POST', body: 'xyz' });
  assert.strictEqual(r.statusCode, 200);
  assert.strictEqual((await r.body.json()).bytes, 3);
  const f = await undici.fetch(`${server.url}/ufetch`, { dispatcher: d });
  assert.strictEqual((await f.json()).url, '/ufetch');
  // stream() writes the body into a Writable of the caller's; pipeline() sends a stream and
  // reads the answer as one.
  const streamed = [];
  await undici.stream(`${server.url}/stream`, { dispatcher: d, opaque: streamed },
    ({ opaque }) => new Writable({ write(chunk, _, cb) { opaque.push(chunk); cb(); } }));
  assert.strictEqual(JSON.parse(Buffer.concat(streamed)).url, '/stream');
  const piped = [];
  await pipeline(
    Readable.from(['abc', 'def']),
    undici.pipeline(`${server.url}/pipe`, { dispatcher: d, method: 'PUT' }, ({ body }) => body),
    new Writable({ write(chunk, _, cb) { piped.push(chunk); cb(); } }),
  );
  assert.deepStrictEqual((({ method, bytes }) => ({ method, bytes }))(JSON.parse(Buffer.concat(piped))), { method: 'PUT', bytes: 6 });
  const retrying = d.compose(undici.interceptors.retry({ maxRetries: 2, minTimeout: 1, statusCodes: [503] }));
  const again = await undici.request(`${server.url}/flaky`, { dispatcher: retrying });
  assert.strictEqual(again.statusCode, 200);
  assert.strictEqual((await again.body.json()).url, '/flaky');
  assert.strictEqual(calls, 2);
});

// Records, on `calls`, each dispatch it sees as `name` and whether its handler has the newer
// API, and passes it on.
function recording(name, calls) {
  // Its dispatch declares both parameters: undici 8's compose() refuses one that does not.
  return (dispatch) => (opts, handler) => {
    calls.push(`${name} ${typeof handler.onResponseStart === 'function' ? 'newer' : 'older'}`);
    return dispatch(opts, handler);
  };
}

test("undici's interceptors compose in undici's order, each given the newer handler API", async (t) => {
  const hits = new Map();
  const server = await httpServer(t, (req, res) => {
    hits.set(req.url, (hits.get(req.url) ?? 0) + 1);
    if (req.url === '/moved') {
      res.writeHead(302, { location: '/there' });
      return res.end('moved');
    }
    if (req.url === '/cached') res.setHeader('cache-control', 'public, max-age=60');
    if (req.url === '/error') res.statusCode = 500;
    return res.end(`${req.url} ${hits.get(req.url)}`);
  });
  const theirs = new undici.Agent();
  t.after(() => theirs.destroy());
  // The order, and the API each interceptor's handler has, as undici's own compose() gives them,
  // for undici's request() (a handler of the older API) and fetch (of the newer).
  for (const [label, send] of [
    ['request', (d) => undici.request(`${server.url}/order`, { dispatcher: d }).then((r) => r.body.text())],
    ['fetch', (d) => undici.fetch(`${server.url}/order`, { dispatcher: d }).then((r) => r.text())],
    ['built-in fetch', (d) => fetch(`${server.url}/order`, { dispatcher: d }).then((r) => r.text())],
  ]) {
    const ours = [];
    const expected = [];
    await send(dispatcher(t).compose(recording('a', ours), null, recording('b', ours)));
    await send(theirs.compose(recording('a', expected), null, recording('b', expected)));
    assert.deepStrictEqual(ours, expected, label);
    assert.deepStrictEqual(ours, ['b newer', 'a newer'], label);
  }
  const d = dispatcher(t);
  // undici 7's interceptors call the newer API only: redirect follows with undici's request(),
  // whose handler has the older API (fetch follows redirects itself, and asks for none).
  const redirecting = d.compose(undici.interceptors.redirect({ maxRedirections: 2 }));
  const followed = await undici.request(`${server.url}/moved`, { dispatcher: redirecting });
  assert.deepStrictEqual([followed.statusCode, await followed.body.text()], [200, '/there 1']);
  // cache: the second request is answered from the cache, the server sees one.
  const caching = d.compose(undici.interceptors.cache());
  for (let i = 0; i < 2; i++) {
    const r = await undici.request(`${server.url}/cached`, { dispatcher: caching });
    assert.deepStrictEqual([r.statusCode, await r.body.text()], [200, '/cached 1']);
  }
  assert.strictEqual(hits.get('/cached'), 1);
  // responseError turns a 500 into undici's error; dump reads a body it then drops.
  await assert.rejects(undici.request(`${server.url}/error`, { dispatcher: d.compose(undici.interceptors.responseError()) }),
    { code: 'UND_ERR_RESPONSE', statusCode: 500 });
  const dumped = await undici.request(`${server.url}/dumped`, { dispatcher: d.compose(undici.interceptors.dump()) });
  assert.deepStrictEqual([dumped.statusCode, await dumped.body.text()], [200, '']);
  // An interceptor's dispatch need not declare its two parameters; a non-function is refused.
  assert.throws(() => d.compose(() => 1), { code: 'ERR_INVALID_ARG_VALUE' });
});

test("undici's dns, decompress and deduplicate interceptors compose on the dispatcher", async (t) => {
  let hits = 0;
  const server = await httpServer(t, (req, res) => {
    hits++;
    if (req.url === '/gz') {
      res.setHeader('content-encoding', 'gzip');
      return res.end(zlib.gzipSync('plain text '.repeat(100)));
    }
    return res.end(`${req.headers.host} ${req.url}`);
  });
  const { port } = server.address();
  const d = dispatcher(t);
  // dns: the request goes to the address the interceptor resolved (the dispatcher's origin is
  // the IP address), with the name in its host header.
  const viaDns = d.compose(undici.interceptors.dns({ dualStack: false, affinity: 4 }));
  const named = await undici.request(`http://localhost:${port}/dns`, { dispatcher: viaDns });
  assert.deepStrictEqual([named.statusCode, await named.body.text()], [200, `localhost:${port} /dns`]);
  assert.deepStrictEqual(Object.keys(d.stats), [`http://127.0.0.1:${port}`]);
  // decompress: the gzip body comes decoded, its content-encoding gone.
  const gz = await undici.request(`${server.url}/gz`, { dispatcher: d.compose(undici.interceptors.decompress()) });
  assert.strictEqual(gz.headers['content-encoding'], undefined);
  assert.strictEqual(await gz.body.text(), 'plain text '.repeat(100));
  // ... also from the controller's rawHeaders, which the interceptor edits in place and the
  // handler after it reads (undici 8's fetch, Node 26's, reads a response's headers there).
  const raw = await new Promise((resolve, reject) => {
    d.compose(undici.interceptors.decompress()).dispatch({ origin: server.url, path: '/gz', method: 'GET' }, {
      onRequestStart() {},
      onResponseStart(controller) {
        const names = controller.rawHeaders.filter((v, i) => i % 2 === 0).map(String);
        resolve({ names, again: controller.rawHeaders === controller.rawHeaders });
      },
      onResponseData() {},
      onResponseEnd() {},
      onResponseError: (controller, err) => reject(err),
    });
  });
  assert.ok(raw.names.length > 0 && !raw.names.includes('content-encoding'), raw.names.join());
  assert.ok(raw.again, 'one array for the head');
  // deduplicate: identical GETs in flight together share one request.
  hits = 0;
  const deduplicating = d.compose(undici.interceptors.deduplicate());
  const same = await Promise.all([1, 2, 3].map(() => undici.request(`${server.url}/same`, { dispatcher: deduplicating }).then((r) => r.body.text())));
  assert.deepStrictEqual(same, Array(3).fill(`127.0.0.1:${port} /same`));
  assert.strictEqual(hits, 1);
});

test("a composed dispatcher's request(), stream() and pipeline() go through its interceptors", async (t) => {
  const big = crypto.randomBytes(1 << 20);
  let flaky = 0;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/flaky' && flaky++ === 0) {
      res.statusCode = 503;
      return res.end();
    }
    if (req.url === '/big') return res.end(big);
    return echo(req, res);
  });
  const calls = [];
  const d = dispatcher(t).compose(recording('inner', calls), undici.interceptors.retry({ maxRetries: 2, minTimeout: 1, statusCodes: [503] }));
  const origin = server.url;
  // request(): retried by the interceptor, each attempt through the inner one.
  const res = await d.request({ origin, path: '/flaky', method: 'GET', opaque: 'mine' });
  assert.deepStrictEqual([res.statusCode, res.opaque], [200, 'mine']);
  assert.strictEqual((await res.body.json()).url, '/flaky');
  assert.deepStrictEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
  assert.deepStrictEqual(calls, ['inner newer', 'inner newer']);
  // A body read slowly, a turn per chunk, comes whole; its callback form answers too.
  const slow = await d.request({ origin, path: '/big', method: 'GET' });
  const chunks = [];
  for await (const chunk of slow.body) {
    chunks.push(chunk);
    await new Promise(setImmediate);
  }
  assert.strictEqual(sha256(Buffer.concat(chunks)), sha256(big));
  const viaCallback = await new Promise((resolve, reject) => d.request({ origin, path: '/cb', method: 'POST', body: 'xyz' },
    (err, data) => (err ? reject(err) : resolve(data.body.json()))));
  assert.deepStrictEqual([viaCallback.method, viaCallback.bytes], ['POST', 3]);
  // stream() and pipeline() are request()'s.
  const streamed = [];
  await d.stream({ origin, path: '/big', method: 'GET' }, () => new Writable({ write(chunk, _, cb) { streamed.push(chunk); cb(); } }));
  assert.strictEqual(sha256(Buffer.concat(streamed)), sha256(big));
  const piped = [];
  await pipeline(
    Readable.from(['abc', 'def']),
    d.pipeline({ origin, path: '/pipe', method: 'PUT' }, ({ body }) => body),
    new Writable({ write(chunk, _, cb) { piped.push(chunk); cb(); } }),
  );
  assert.strictEqual(JSON.parse(Buffer.concat(piped)).bytes, 6);
  assert.strictEqual(calls.length, 6);
  // Aborted by its signal mid-body, and destroyed by its reader: each ends, and the pool
  // carries the next request.
  const controller = new AbortController();
  const aborted = await d.request({ origin, path: '/big', method: 'GET', signal: controller.signal });
  controller.abort();
  await assert.rejects(aborted.body.text(), { name: 'AbortError' });
  const destroyed = await d.request({ origin, path: '/big', method: 'GET' });
  destroyed.body.destroy();
  await once(destroyed.body, 'close');
  assert.strictEqual((await (await d.request({ origin, path: '/after', method: 'GET' })).body.json()).url, '/after');
  await assert.rejects(d.request({ origin, path: '/', method: 'GET', highWaterMark: -1 }), { code: 'ERR_OUT_OF_RANGE' });
});

test("a composed dispatcher's request() body left unread stops the server", async (t) => {
  const chunk = Buffer.alloc(64 * 1024, 1);
  const server = await streamingServer(t, chunk, 1024);
  const d = dispatcher(t).compose((dispatch) => (opts, handler) => dispatch(opts, handler));
  const res = await d.request({ origin: server.url, path: '/', method: 'GET' });
  const outcome = await server.outcome();
  assert.ok(outcome.stalled < chunk.length * 1024, `the server wrote everything: ${JSON.stringify(outcome)}`);
  res.body.destroy();
});

// One request of a handler of the older API through `dispatch`, whose onData asks for a pause
// every other chunk and resumes a turn later: what it saw.
function olderHandlerRound(dispatch, url) {
  const seen = { chunks: [], pauses: 0 };
  let resume;
  return new Promise((resolve, reject) => {
    dispatch({ origin: url, path: '/old', method: 'GET', headers: { 'x-a': '1' } }, {
      onConnect(abort) { seen.abort = typeof abort; },
      onHeaders(status, raw, res) {
        seen.status = status;
        seen.raw = raw;
        resume = res;
        return true;
      },
      onData(chunk) {
        seen.chunks.push(chunk);
        if (seen.chunks.length % 2 === 1) {
          seen.pauses++;
          setImmediate(resume);
          return false;
        }
        return true;
      },
      onComplete(trailers) {
        seen.trailers = trailers;
        resolve(seen);
      },
      onError: reject,
    });
  });
}

// What olderHandlerRound saw of a whole `body` with its trailer (see trailingServer).
function checkOlderHandlerRound(seen, body) {
  assert.strictEqual(seen.abort, 'function');
  assert.strictEqual(seen.status, 200);
  assert.ok(seen.raw.every((b) => Buffer.isBuffer(b)));
  assert.strictEqual(sha256(Buffer.concat(seen.chunks)), sha256(body));
  assert.ok(seen.pauses > 0);
  assert.deepStrictEqual(seen.trailers.map(String), ['x-sum', sha256(body)]);
}

test('a handler of the older API keeps its pause, resume and trailers through a composed interceptor', async (t) => {
  const big = crypto.randomBytes(512 * 1024);
  const server = await trailingServer(t, big);
  const d = dispatcher(t).compose((dispatch) => (opts, handler) => dispatch(opts, handler));
  checkOlderHandlerRound(await olderHandlerRound((opts, handler) => d.dispatch(opts, handler), server.url), big);
  // Its error callback hears an abort given through its onConnect's abort.
  const err = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onConnect(abort) { abort(new Error('stop')); },
      onHeaders() { throw new Error('no head after an abort'); },
      onError: resolve,
    });
  });
  assert.strictEqual(err.message, 'stop');
});

test('the old handler API, driven directly: onConnect, onHeaders, pause by false, resume, onComplete', async (t) => {
  const big = crypto.randomBytes(512 * 1024);
  const server = await trailingServer(t, big);
  const d = dispatcher(t);
  checkOlderHandlerRound(await olderHandlerRound((opts, handler) => d.dispatch(opts, handler), server.url), big);
});

test('a handler of the older API missing a callback undici requires is refused before its request is sent', async (t) => {
  // A refused handler's request reaches no server: one that does fails the wait at once.
  let requests = 0;
  let sent = () => {};
  const server = await httpServer(t, (req, res) => {
    requests++;
    sent();
    res.end('ok');
  });
  const refusal = (dispatch) => new Promise((resolve, reject) => {
    sent = () => reject(new Error(`the request of a handler to refuse reached the server`));
    dispatch(resolve);
  });
  const d = dispatcher(t);
  const full = { onConnect() {}, onHeaders() {}, onData() {}, onComplete() {} };
  // Each missing (or not a function) goes to onError, with its name, and nothing is sent.
  for (const name of ['onConnect', 'onHeaders', 'onData', 'onComplete']) {
    for (const value of [undefined, 'no']) {
      const err = await refusal((onError) => {
        const handler = { ...full, onError };
        if (value === undefined) delete handler[name];
        else handler[name] = value;
        assert.strictEqual(d.dispatch({ origin: server.url, path: '/', method: 'GET' }, handler), true);
      });
      assert.strictEqual(err.code, 'ERR_INVALID_ARG_TYPE', name);
      assert.match(err.message, new RegExp(`"handler\\.${name}" property must be of type function`));
    }
  }
  for (const name of ['onBodySent', 'onRequestSent']) {
    const err = await refusal((onError) => {
      d.dispatch({ origin: server.url, path: '/', method: 'POST', body: 'x' }, { ...full, [name]: 1, onError });
    });
    assert.strictEqual(err.code, 'ERR_INVALID_ARG_TYPE', name);
  }
  sent = () => {};
  // With no onError, dispatch() throws it, as undici's does.
  assert.throws(() => d.dispatch({ origin: server.url, path: '/', method: 'GET' }, full), {
    code: 'ERR_INVALID_ARG_TYPE',
    message: /"handler\.onError" property must be of type function/,
  });
  assert.strictEqual(requests, 0);
  assert.strictEqual(d.stats[server.url]?.running ?? 0, 0);
  // The same handler, whole, is served; the newer API's callbacks (but the one that tells it
  // apart) are optional.
  const done = await new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, { ...full, onComplete: () => resolve('complete'), onError: reject });
  });
  assert.strictEqual(done, 'complete');
  const ended = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, { onResponseStart() {}, onResponseEnd: () => resolve('ended') });
  });
  assert.strictEqual(ended, 'ended');
  assert.strictEqual(requests, 2);
});

test("the old handler API's upload progress: onBodySent with each piece of the body as it goes, then onRequestSent", async (t) => {
  // The server answers with how many body bytes it read.
  const server = await httpServer(t, async (req, res) => {
    let n = 0;
    for await (const chunk of req) n += chunk.length;
    res.end(String(n));
  });
  const d = dispatcher(t);
  const parts = [crypto.randomBytes(70_000), crypto.randomBytes(10), crypto.randomBytes(300_000)];
  const send = (body, extra = {}) => new Promise((resolve) => {
    const seen = [];
    let answer = '';
    d.dispatch({ origin: server.url, path: '/', method: 'POST', body }, {
      onConnect() {},
      onHeaders() { seen.push('head'); return true; },
      onData(chunk) { answer += chunk; return true; },
      onBodySent(chunk) { seen.push(Buffer.isBuffer(chunk) ? chunk.length : 'not a Buffer'); },
      onRequestSent() { seen.push('sent'); },
      onComplete() { resolve({ seen, answer }); },
      onError(err) { resolve({ seen, err }); },
      ...extra,
    });
  });
  // A streamed body: each chunk as it is handed over, then the end, all before the answer
  // (the server answers once it has read the body).
  let got = await send(Readable.from(parts));
  assert.deepStrictEqual(got, { seen: [70_000, 10, 300_000, 'sent', 'head'], answer: '370010' });
  // A body given whole: at once, as a Buffer (a string too); no body: only onRequestSent.
  got = await send(Buffer.concat(parts));
  assert.deepStrictEqual(got, { seen: [370_010, 'sent', 'head'], answer: '370010' });
  got = await send('héllo');
  assert.deepStrictEqual(got, { seen: [6, 'sent', 'head'], answer: '6' });
  got = await send(undefined);
  assert.deepStrictEqual(got, { seen: ['sent', 'head'], answer: '0' });
  // A request that reaches no server sent nothing.
  const refused = await new Promise((resolve) => {
    const seen = [];
    d.dispatch({ origin: 'http://127.0.0.1:1', path: '/', method: 'POST', body: 'x' }, {
      onConnect() {}, onHeaders() { return true; }, onData() { return true; }, onComplete() {},
      onBodySent() { seen.push('onBodySent'); },
      onRequestSent() { seen.push('onRequestSent'); },
      onError(err) { resolve([...seen, err.code]); },
    });
  });
  assert.deepStrictEqual(refused, ['ECONNREFUSED']);
  // A throw from it fails the request, as from any callback.
  got = await send(Readable.from(parts), { onBodySent() { throw new Error('no progress'); } });
  assert.strictEqual(got.err.message, 'no progress');
  // The newer API has no such callbacks: a handler of it that has them does not hear them.
  const newer = await new Promise((resolve) => {
    const seen = [];
    d.dispatch({ origin: server.url, path: '/', method: 'POST', body: 'x' }, {
      onRequestStart() {},
      onResponseStart() { seen.push('head'); },
      onResponseData() {},
      onBodySent() { seen.push('onBodySent'); },
      onResponseEnd() { resolve(seen); },
      onResponseError(controller, err) { resolve(err); },
    });
  });
  assert.deepStrictEqual(newer, ['head']);
});

test("undici's diagnostics channels tell of the dispatcher's requests, and a create subscriber's addHeader() sends its header", async (t) => {
  const dc = require('node:diagnostics_channel');
  const server = await httpServer(t, async (req, res) => {
    let n = 0;
    for await (const chunk of req) n += chunk.length;
    res.setHeader('x-trace', String(req.headers.traceparent));
    res.setHeader('trailer', 'x-sum');
    res.write(String(n));
    res.addTrailers({ 'x-sum': String(n) });
    res.end();
  });
  const refused = require('node:net').createServer().listen(0, '127.0.0.1');
  await once(refused, 'listening');
  const closedPort = refused.address().port;
  await new Promise((resolve) => refused.close(resolve));
  const d = dispatcher(t);
  // What each event told, by request path; the request object is the same in all of a request's.
  const told = new Map();
  const listeners = {};
  for (const name of ['create', 'bodyChunkSent', 'bodySent', 'headers', 'bodyChunkReceived', 'trailers', 'error']) {
    listeners[name] = ({ request, response, trailers, error, chunk }) => {
      if (!told.has(request.path)) told.set(request.path, { request, events: [] });
      const entry = told.get(request.path);
      assert.strictEqual(request, entry.request, `${name}: the create event's request`);
      if (name === 'create') request.addHeader('traceparent', `00-${request.path.length}-01`);
      if (name === 'headers') entry.events.push(`headers ${response.statusCode} ${response.statusText} ${response.headers.every(Buffer.isBuffer)}`);
      else if (name === 'trailers') entry.events.push(`trailers ${trailers.map(String).join(':')} ${request.completed}`);
      else if (name === 'error') entry.events.push(`error ${error.code} ${request.aborted}`);
      else if (name === 'bodyChunkSent') entry.events.push(`chunk ${chunk.length}`);
      else if (name === 'bodyChunkReceived') entry.events.push(`received ${chunk}`);
      else entry.events.push(name);
    };
    dc.subscribe(`undici:request:${name}`, listeners[name]);
  }
  t.after(() => {
    for (const name of Object.keys(listeners)) dc.unsubscribe(`undici:request:${name}`, listeners[name]);
  });

  // fetch with a streamed body; undici's request(); the Dispatcher's own request(); a refusal.
  const res = await fetch(`${server.url}/fetch`, { dispatcher: d, method: 'POST', body: Readable.from(['ab', 'cde']), duplex: 'half' });
  assert.deepStrictEqual([await res.text(), res.headers.get('x-trace')], ['5', '00-6-01']);
  const viaUndici = await undici.request(`${server.url}/undici`, { dispatcher: d, method: 'PUT', body: 'xyz' });
  assert.deepStrictEqual([await viaUndici.body.text(), viaUndici.headers['x-trace']], ['3', '00-7-01']);
  const own = await d.request({ origin: server.url, path: '/own', method: 'GET', headers: { 'x-a': '1' } });
  assert.deepStrictEqual([await own.body.text(), own.headers['x-trace']], ['0', '00-4-01']);
  await assert.rejects(d.request({ origin: `http://127.0.0.1:${closedPort}`, path: '/refused', method: 'GET' }), { code: 'ECONNREFUSED' });

  const events = (p) => told.get(p).events;
  assert.deepStrictEqual(events('/fetch'), ['create', 'chunk 2', 'chunk 3', 'bodySent', 'headers 200 OK true', 'received 5', 'trailers x-sum:5 true']);
  assert.deepStrictEqual(events('/undici'), ['create', 'chunk 3', 'bodySent', 'headers 200 OK true', 'received 3', 'trailers x-sum:3 true']);
  assert.deepStrictEqual(events('/own'), ['create', 'bodySent', 'headers 200 OK true', 'received 0', 'trailers x-sum:0 true']);
  assert.deepStrictEqual(events('/refused'), ['create', 'error ECONNREFUSED true']);
  const { request } = told.get('/undici');
  assert.deepStrictEqual([request.origin, request.method], [server.url, 'PUT']);
  assert.deepStrictEqual(request.headers.slice(-2), ['traceparent', '00-7-01']);
  assert.deepStrictEqual(request.body, Buffer.from('xyz'));
});

test("undici:client:sendHeaders tells the connection each request goes out on, as undici's Agent does", async (t) => {
  const dc = require('node:diagnostics_channel');
  const server = await httpServer(t, (req, res) => res.end(String(req.headers['x-trace'])));
  const secure = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, (req, res) => res.end('tls'));
  secure.listen(0, '127.0.0.1');
  await once(secure, 'listening');
  t.after(() => {
    secure.closeAllConnections();
    secure.close();
  });
  const h2 = await h2Server(t, (req, res) => res.end('h2'));
  const refused = require('node:net').createServer().listen(0, '127.0.0.1');
  await once(refused, 'listening');
  const closedPort = refused.address().port;
  await new Promise((resolve) => refused.close(resolve));

  // The events of a run's requests in order (each with its request's path), with what
  // sendHeaders gave of the connection and the head's lines.
  let seen = [];
  const on = (name) => ({ request, socket, headers }) => {
    if (name === 'create') request.addHeader('x-trace', `t${request.path}`);
    const entry = { name, path: request.path };
    if (name === 'sendHeaders') {
      assert.strictEqual(typeof headers, 'string');
      entry.head = headers.split('\r\n').filter((line) => !/^(connection|content-length):/i.test(line));
      entry.socket = {
        remoteAddress: socket.remoteAddress,
        remotePort: socket.remotePort,
        local: typeof socket.localPort === 'number' && socket.localAddress === '127.0.0.1',
        localPort: socket.localPort,
        encrypted: socket.encrypted,
      };
      entry.alpn = socket.alpnProtocol;
    }
    seen.push(entry);
  };
  const listeners = {};
  for (const name of ['undici:request:create', 'undici:client:sendHeaders', 'undici:request:headers', 'undici:request:error']) {
    listeners[name] = on(name.split(':').pop());
    dc.subscribe(name, listeners[name]);
  }
  t.after(() => {
    for (const name of Object.keys(listeners)) dc.unsubscribe(name, listeners[name]);
  });

  const run = async (d) => {
    seen = [];
    const a = await undici.request(`${server.url}/a?q=1`, { dispatcher: d, headers: { 'x-req': 'qv' } });
    assert.strictEqual(await a.body.text(), 't/a?q=1');
    // A query given apart is in the request's path, as undici's request has it.
    const b = await undici.request(`${server.url}/b`, { dispatcher: d, query: { n: 'a b' } });
    assert.strictEqual(await b.body.text(), 't/b?n=a%20b');
    const c = await undici.request(`https://localhost:${secure.address().port}/c`, { dispatcher: d });
    assert.strictEqual(await c.body.text(), 'tls');
    await assert.rejects(undici.request(`http://127.0.0.1:${closedPort}/refused`, { dispatcher: d }), { code: 'ECONNREFUSED' });
    const out = seen;
    const alpn = out.filter((e) => e.name === 'sendHeaders').map((e) => e.alpn);
    for (const e of out) delete e.alpn;
    return { out, alpn };
  };
  const theirs = new undici.Agent({ connect: { ca: CA } });
  t.after(() => theirs.destroy());
  const expected = await run(theirs);
  const ours = await run(dispatcher(t, { ca: CA }));
  // The same events in the same order, the same connection facts; the two GETs share a
  // connection (the same local port).
  const ports = (r) => r.out.filter((e) => e.name === 'sendHeaders' && !e.socket.encrypted).map((e) => e.socket.localPort);
  assert.strictEqual(new Set(ports(ours)).size, 1);
  const portless = (r) => r.out.map((e) => (e.socket ? { ...e, socket: { ...e.socket, localPort: undefined } } : e));
  assert.deepStrictEqual(portless(ours), portless(expected));
  assert.deepStrictEqual(ours.out.find((e) => e.name === 'sendHeaders' && e.path === '/a?q=1').head.slice(0, 4), ['GET /a?q=1 HTTP/1.1', `host: 127.0.0.1:${server.port}`, 'x-req: qv', 'x-trace: t/a?q=1']);
  assert.strictEqual(ours.out.find((e) => e.name === 'sendHeaders' && e.path === '/c').socket.remotePort, secure.address().port);
  // undici offers ALPN's http/1.1 to a TLS server; ours offers no ALPN without allowH2, and a
  // TLSSocket with none has false.
  assert.deepStrictEqual([expected.alpn, ours.alpn], [[undefined, undefined, 'http/1.1'], [undefined, undefined, false]]);

  // Over HTTP/2: each stream is told, with the session's connection and its protocol.
  seen = [];
  const multiplexed = dispatcher(t, { allowH2: true, ca: CA });
  const h2Origin = `https://localhost:${h2.address().port}`;
  assert.deepStrictEqual(await Promise.all([1, 2].map(() => fetch(`${h2Origin}/s`, { dispatcher: multiplexed }).then((r) => r.text()))), ['h2', 'h2']);
  const streams = seen.filter((e) => e.name === 'sendHeaders');
  assert.deepStrictEqual(streams.map((e) => [e.alpn, e.socket.remotePort, e.socket.encrypted]), [['h2', h2.address().port, true], ['h2', h2.address().port, true]]);
  assert.strictEqual(streams[0].socket.localPort, streams[1].socket.localPort);
});

test('a response that ends while its handler is paused completes only at the resume', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('small and whole'));
  const d = dispatcher(t);
  const order = [];
  await new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onConnect() {},
      onHeaders(status, raw, resume) {
        this.resume = resume;
        return true;
      },
      onData(chunk) {
        order.push(`data ${chunk}`);
        setImmediate(() => {
          order.push('resume');
          this.resume();
        });
        return false;
      },
      onComplete() {
        order.push('complete');
        resolve();
      },
      onError: reject,
    });
  });
  assert.deepStrictEqual(order, ['data small and whole', 'resume', 'complete']);
  assert.strictEqual(d.http.requestCount, 1);
});

test('the newer handler API, driven directly: controller pause, resume and abort', async (t) => {
  const big = crypto.randomBytes(256 * 1024);
  const server = await httpServer(t, (req, res) => res.end(big));
  const d = dispatcher(t);
  const got = [];
  const outcome = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onRequestStart(controller, context) {
        assert.strictEqual(typeof context, 'object');
        assert.strictEqual(controller.aborted, false);
      },
      // fetch's mark of the response's start (its resource timing), before the head.
      onResponseStarted() {
        got.push('started');
      },
      onResponseStart(controller, status, headers, message) {
        got.push(['start', status, headers['content-length'], message]);
      },
      onResponseData(controller, chunk) {
        got.push(chunk);
        controller.pause();
        assert.strictEqual(controller.paused, true);
        setImmediate(() => controller.resume());
      },
      onResponseEnd(controller, trailers) {
        resolve({ end: trailers });
      },
      onResponseError(controller, err) {
        resolve({ err });
      },
    });
  });
  assert.deepStrictEqual(outcome, { end: {} });
  assert.deepStrictEqual(got.slice(0, 2), ['started', ['start', 200, String(big.length), 'OK']]);
  assert.strictEqual(sha256(Buffer.concat(got.slice(2))), sha256(big));

  // An abort from the controller fails the request with its reason, once.
  const errors = [];
  await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onRequestStart() {},
      onResponseStart(controller) {
        controller.abort(new Error('enough'));
        controller.abort(new Error('twice'));
        assert.strictEqual(controller.aborted, true);
      },
      onResponseData() {},
      onResponseEnd() { errors.push('ended'); resolve(); },
      onResponseError(controller, err) { errors.push(err.message); resolve(); },
    });
  });
  assert.deepStrictEqual(errors, ['enough']);
});

test("the newer handler API's head is undici's object of it: a repeated name's values in an array, as undici's Agent gives them", async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('age', ['0', '5']);
    res.setHeader('cache-control', ['public', 'max-age=60']);
    res.setHeader('set-cookie', 'one=1');
    res.setHeader('location', ['/a', '/b']);
    res.setHeader('__proto__', 'p');
    res.end('x');
  });
  const headsOf = (d) => new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onRequestStart() {},
      onResponseStart(controller, status, headers) {
        resolve(headers);
      },
      onResponseData() {},
      onResponseEnd() {},
      onResponseError(controller, err) { reject(err); },
    });
  });
  const theirs = new undici.Agent();
  t.after(() => theirs.destroy());
  const ours = await headsOf(dispatcher(t));
  const expected = await headsOf(theirs);
  for (const name of ['age', 'cache-control', 'set-cookie', 'location']) {
    assert.deepStrictEqual(ours[name], expected[name], name);
  }
  assert.deepStrictEqual(ours.age, ['0', '5']);
  assert.strictEqual(ours['set-cookie'], 'one=1');
  assert.deepStrictEqual(Object.getOwnPropertyDescriptor(ours, '__proto__')?.value, 'p');
  assert.strictEqual(Object.getPrototypeOf(ours), Object.prototype);
});

test('a finished exchange lets go of its handler: a controller or an abort kept by the program does not keep the handler', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const closed = await httpServer(t);
  const refused = `http://127.0.0.1:${closed.address().port}`;
  closed.close();
  const d = dispatcher(t);
  // What a program may keep of a request it made: its controller (the newer API) or its abort
  // (the older). Either leads to the exchange, as an exchange V8 moved to the old generation
  // is still reached in a young-generation collection: neither may keep the handler.
  const kept = [];
  const handlers = [];
  const run = (origin, make) => new Promise((resolve) => {
    const handler = make(resolve);
    handlers.push(new WeakRef(handler));
    d.dispatch({ origin, path: '/', method: 'GET' }, handler);
  });
  const outcomes = [];
  const newer = (done) => ({
    onRequestStart(controller) { kept.push(controller); },
    onResponseStart() {},
    onResponseData() {},
    onResponseEnd: () => done(outcomes.push('end')),
    onResponseError: (controller, err) => done(outcomes.push(err.code)),
  });
  const older = (done) => ({
    onConnect(abort) { kept.push(abort); },
    onHeaders: () => true,
    onData: () => true,
    onComplete: () => done(outcomes.push('complete')),
    onError: (err) => done(outcomes.push(err.code)),
  });
  await run(server.url, newer);
  await run(server.url, older);
  await run(refused, newer);
  await run(refused, older);
  assert.deepStrictEqual(outcomes, ['end', 'complete', 'ECONNREFUSED', 'ECONNREFUSED']);
  assert.strictEqual(kept.length, 4);
  for (const [i, weak] of handlers.entries()) assert.ok(await collected(weak), `handler ${i} collected`);
});

test('a handler that throws gets its error back, and the connection is freed', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('x'.repeat(100000)));
  const d = dispatcher(t);
  const err = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onConnect() {},
      onHeaders() { throw new Error('from onHeaders'); },
      onData() { return true; },
      onComplete() { resolve(null); },
      onError: resolve,
    });
  });
  assert.strictEqual(err.message, 'from onHeaders');
  assert.strictEqual(d.http.totalSocketCount, 0);
});

test('close() lets requests in flight finish and refuses new ones; destroy() fails them', async (t) => {
  const waiting = [];
  const server = await httpServer(t, (req, res) => {
    waiting.push(res);
    server.emit('waiting');
  });
  const d = new Dispatcher();
  const inFlight = fetch(`${server.url}/a`, { dispatcher: d });
  await once(server, 'waiting');
  let closed = false;
  const closing = d.close().then(() => { closed = true; });
  assert.strictEqual(d.closed, true);
  // A second close() settles with the first, not before.
  let closedAgain = false;
  const closingAgain = d.close().then(() => { closedAgain = true; });
  const refused = await fetch(`${server.url}/b`, { dispatcher: d }).then(() => null, (e) => e);
  assert.strictEqual(refused.cause.code, 'UND_ERR_CLOSED');
  assert.strictEqual(closed, false);
  assert.strictEqual(closedAgain, false);
  waiting.shift().end('done');
  assert.strictEqual(await (await inFlight).text(), 'done');
  await closing;
  await closingAgain;
  assert.strictEqual(closed, true);
  // Closed, it closes and is destroyed again at once.
  await d.close();
  await d.destroy();

  const d2 = new Dispatcher();
  const failing = fetch(`${server.url}/c`, { dispatcher: d2 });
  await once(server, 'waiting');
  await new Promise((resolve) => d2.destroy(null, resolve));
  const err = await failing.then(() => null, (e) => e);
  assert.strictEqual(err.cause.code, 'UND_ERR_DESTROYED');
  assert.strictEqual(d2.destroyed, true);
  await d2.destroy();
  await d2.close();
  for (const res of waiting) res.end();
});

test('bad arguments are refused at once with Node-style codes', (t) => {
  assert.throws(() => new Dispatcher(1), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Dispatcher({ http: {} }), { code: 'ERR_INVALID_ARG_TYPE' });
  // Each agent for its own scheme.
  const [plain, secure] = [new Agent(), new HttpsAgent()];
  t.after(() => [plain, secure].forEach((a) => a.destroy()));
  assert.throws(() => new Dispatcher({ http: secure }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Dispatcher({ https: plain }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Dispatcher({ headersTimeout: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  const d = dispatcher(t);
  assert.throws(() => d.dispatch({}, null), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => d.compose(1), { code: 'ERR_INVALID_ARG_TYPE' });
  const errs = [];
  d.dispatch({ origin: 'ftp://x', path: '/', method: 'GET' }, { onError: (e) => errs.push(e.code) });
  d.dispatch({ origin: 'http://x', path: 1, method: 'GET' }, { onError: (e) => errs.push(e.code) });
  assert.deepStrictEqual(errs, ['ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_TYPE']);
  // A path that is none is said to be the dispatch options' own, through request() too.
  const notAPath = { code: 'ERR_INVALID_ARG_VALUE', message: /'opts\.path' must start with a slash. Received 'aaa'/ };
  let refused = null;
  d.dispatch({ origin: 'http://x', path: 'aaa', method: 'GET' }, { onError: (e) => (refused = e) });
  assert.throws(() => { throw refused; }, notAPath);
  return assert.rejects(d.request({ origin: 'http://x', path: 'aaa', method: 'GET' }), notAPath);
});

test("undici's error classes know our errors; close() ends destroyed; callbacks and error callbacks are checked", async (t) => {
  const { errors: undiciErrors } = undici;
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const d = new Dispatcher();
  assert.strictEqual(await (await fetch(`${server.url}/`, { dispatcher: d })).text(), 'ok');
  // Once close() has ended, it is destroyed, as undici's is; with nothing in flight that is
  // a microtask later, as undici's: closed at once, destroyed once the close has ended.
  const closing = d.close();
  assert.deepStrictEqual([d.closed, d.destroyed], [true, false]);
  await closing;
  assert.strictEqual(d.destroyed, true);
  // A destroy() in between ends it at once; the close still settles.
  const d1 = new Dispatcher();
  const closing1 = d1.close();
  await d1.destroy(new Error('now'));
  assert.strictEqual(d1.destroyed, true);
  assert.strictEqual(await closing1, undefined);
  const after = await undici.request(`${server.url}/`, { dispatcher: d }).then(() => null, (e) => e);
  assert.strictEqual(after.code, 'UND_ERR_DESTROYED');
  assert.strictEqual(after.name, 'ClientDestroyedError');
  assert.ok(after instanceof undiciErrors.ClientDestroyedError);
  assert.ok(after instanceof undiciErrors.UndiciError);
  assert.ok(!(after instanceof undiciErrors.ClientClosedError));

  // An abort without a reason is undici's RequestAbortedError, which undici names AbortError.
  const d2 = dispatcher(t);
  const aborted = await new Promise((resolve) => {
    d2.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      onRequestStart(controller) { controller.abort(); },
      onResponseError(controller, err) { resolve(err); },
    });
  });
  assert.strictEqual(aborted.code, 'UND_ERR_ABORTED');
  assert.strictEqual(aborted.name, 'AbortError');
  assert.ok(aborted instanceof undiciErrors.RequestAbortedError);
  assert.ok(aborted instanceof undiciErrors.AbortError);
  assert.ok(!(aborted instanceof undiciErrors.SocketError));
  // So is one with a falsy reason, in either handler API, as undici's abort takes it.
  for (const reason of [null, 0, '']) {
    const newer = await new Promise((resolve) => {
      d2.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
        onRequestStart(controller) { controller.abort(reason); },
        onResponseError(controller, err) { resolve(err); },
      });
    });
    assert.strictEqual(newer.code, 'UND_ERR_ABORTED');
    const older = await new Promise((resolve) => {
      d2.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
        onConnect(abort) { abort(reason); },
        onHeaders() {},
        onData() {},
        onComplete() {},
        onError: resolve,
      });
    });
    assert.strictEqual(older.code, 'UND_ERR_ABORTED');
  }

  // A callback that is not a function is refused at once, as undici refuses it.
  assert.throws(() => d2.close({}), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => d2.destroy(null, 'no'), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.strictEqual(d2.destroyed, false);
  // What a handler with no error callback cannot hear is thrown, as undici's dispatch() throws it.
  assert.throws(() => d2.dispatch({ origin: server.url, method: 'GET' }, { onConnect() {} }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {}), { code: 'UND_ERR_DESTROYED' });
  assert.strictEqual(await (await fetch(`${server.url}/`, { dispatcher: d2 })).text(), 'ok');
});

test("a handler's error callback that throws within dispatch() throws to dispatch()'s caller, as undici's does: undici's request() rejects with it", async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const d = dispatcher(t);
  const thrown = new Error('onError threw');
  // Options dispatch() refuses: the handler hears of it at once, and its throw comes out.
  for (const handler of [
    { onError() { throw thrown; } },
    { onResponseStart() {}, onResponseError() { throw thrown; } },
  ]) {
    assert.throws(() => d.dispatch({ origin: server.url, path: '/', method: 'GET', headers: 5 }, handler), (err) => err === thrown);
  }
  // A body whose getters throw: undici's request() hands its handler that error, whose
  // onError throws again reading the body; the promise rejects (it was an uncaught exception).
  const body = new Proxy({}, { get() { throw thrown; } });
  await assert.rejects(undici.request(`${server.url}/`, { dispatcher: d, method: 'POST', body }), (err) => err === thrown);
  // The dispatcher goes on.
  assert.strictEqual(await (await undici.request(`${server.url}/`, { dispatcher: d })).body.text(), 'ok');
});

test("undici's maxOrigins: a new origin fails once that many are held, and is taken once one is let go", async (t) => {
  assert.throws(() => new Dispatcher({ maxOrigins: 0 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => new Dispatcher({ maxOrigins: 'foo' }), { code: 'ERR_INVALID_ARG_TYPE' });
  const a = await httpServer(t, (req, res) => res.end('a'));
  const b = await httpServer(t, (req, res) => res.end('b'));
  const d = dispatcher(t, { maxOrigins: 1 });
  // Connections are told of to a listener there before they open.
  const disconnected = once(d, 'disconnect');
  const text = async (url) => (await undici.request(url, { dispatcher: d })).body.text();
  assert.strictEqual(await text(`${a.url}/`), 'a');
  // a's idle connection holds its origin: b is one too many, on every method.
  const refused = await undici.request(`${b.url}/`, { dispatcher: d }).then(() => null, (e) => e);
  assert.strictEqual(refused.code, 'UND_ERR_MAX_ORIGINS_REACHED');
  assert.ok(refused instanceof undici.errors.MaxOriginsReachedError);
  await assert.rejects(d.request({ origin: b.url, path: '/', method: 'GET' }), { code: 'UND_ERR_MAX_ORIGINS_REACHED' });
  await assert.rejects(fetch(`${b.url}/`, { dispatcher: d }), (e) => e.cause.code === 'UND_ERR_MAX_ORIGINS_REACHED');
  assert.strictEqual(await text(`${a.url}/again`), 'a');
  assert.strictEqual(b.requestPorts.length, 0);
  // a's server closes its connection: a is held no more, and b is taken.
  a.closeAllConnections();
  await disconnected;
  assert.strictEqual(await text(`${b.url}/`), 'b');
  await assert.rejects(undici.request(`${a.url}/`, { dispatcher: d }), { code: 'UND_ERR_MAX_ORIGINS_REACHED' });
});

test("undici's WebSocket applies the dispatcher's webSocket limits (undici's by default); eventSource's are read too", async (t) => {
  const d = dispatcher(t);
  assert.deepStrictEqual(d.webSocketOptions, { maxFragments: 131072, maxPayloadSize: 128 * 1024 * 1024 });
  assert.deepStrictEqual(d.eventSourceOptions, { maxEventSize: require('node:buffer').kStringMaxLength });
  const limited = dispatcher(t, { webSocket: { maxPayloadSize: 1024, maxFragments: 3 }, eventSource: { maxEventSize: 4096 } });
  assert.deepStrictEqual(limited.webSocketOptions, { maxFragments: 3, maxPayloadSize: 1024 });
  assert.deepStrictEqual(limited.eventSourceOptions, { maxEventSize: 4096 });
  // A composed dispatcher has them too (undici's WebSocket reads them from the one it is given).
  assert.deepStrictEqual(limited.compose(undici.interceptors.dump()).webSocketOptions, limited.webSocketOptions);
  assert.throws(() => new Dispatcher({ webSocket: 1 }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Dispatcher({ webSocket: { maxPayloadSize: -1 } }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => new Dispatcher({ eventSource: { maxEventSize: 1.5 } }), { code: 'ERR_OUT_OF_RANGE' });

  // A server whose first message, 4 KiB, is over the limit of 1 KiB: undici fails the connection
  // (1006) without handing the message on.
  const server = await httpServer(t, (req, res) => res.end('plain'));
  server.on('upgrade', (req, socket) => {
    t.after(() => socket.destroy());
    socket.on('error', () => {});
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
      + `Sec-WebSocket-Accept: ${acceptKey(req.headers['sec-websocket-key'])}\r\n\r\n`);
    const payload = Buffer.alloc(4096, 0x41);
    socket.write(Buffer.concat([Buffer.from([0x82, 126, payload.length >> 8, payload.length & 0xff]), payload]));
  });
  const ws = new undici.WebSocket(`ws://127.0.0.1:${server.port}/`, { dispatcher: limited });
  const messages = [];
  ws.addEventListener('message', (e) => messages.push(e.data));
  const [closed] = await once(ws, 'close');
  assert.strictEqual(closed.code, 1006);
  assert.deepStrictEqual(messages, []);
});

// A WebSocket server of the least kind: the handshake, then one text frame from the server.
function acceptKey(key) {
  return crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
}

test("Node's WebSocket works after setGlobalDispatcher, its handshake on our agent's own connection", { skip: typeof WebSocket !== 'function' && 'no built-in WebSocket' }, async (t) => {
  const server = await httpServer(t, (req, res) => res.end('plain'));
  server.on('upgrade', (req, socket) => {
    // An upgraded socket is the server's no more: it is destroyed here, at the end.
    t.after(() => socket.destroy());
    // The client's close frame ends it.
    socket.on('data', () => socket.end());
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
      + `Sec-WebSocket-Accept: ${acceptKey(req.headers['sec-websocket-key'])}\r\n\r\n`);
    const text = Buffer.from('hi from server');
    socket.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
  });
  const before = getGlobalDispatcher();
  const d = dispatcher(t);
  setGlobalDispatcher(d);
  t.after(() => setGlobalDispatcher(before));
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/`);
  const [message] = await once(ws, 'message');
  assert.strictEqual(message.data, 'hi from server');
  // The handshake went through the agent's pool (whose slot the socket then left).
  assert.strictEqual(d.http.getCurrentStatus().createSocketCount, 1);
  ws.close();
  await once(ws, 'close');
  // Plain requests still go through ours.
  assert.strictEqual(await (await fetch(`${server.url}/`)).text(), 'plain');
  assert.strictEqual(d.http.requestCount, 1);
});

test("undici's connection events: 'connect', 'disconnect' and 'connectionError', with the origin and the dispatcher", async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const d = dispatcher(t);
  const connected = once(d, 'connect');
  const res = await fetch(`${server.url}/`, { dispatcher: d });
  assert.strictEqual(await res.text(), 'ok');
  const [origin, targets] = await connected;
  assert.ok(origin instanceof URL);
  assert.strictEqual(origin.origin, server.url);
  assert.deepStrictEqual(targets, [d]);

  // The server closes the idle connection.
  const disconnected = once(d, 'disconnect');
  server.closeAllConnections();
  const [gone, goneTargets, err] = await disconnected;
  assert.strictEqual(gone.origin, server.url);
  assert.deepStrictEqual(goneTargets, [d]);
  assert.ok(err instanceof undici.errors.SocketError);
  assert.strictEqual(err.message, 'other side closed');

  // An idle connection that idles out (undici's keepAliveTimeout).
  const brief = dispatcher(t, { keepAliveTimeout: 50 });
  const idled = once(brief, 'disconnect');
  assert.strictEqual(await (await fetch(`${server.url}/`, { dispatcher: brief })).text(), 'ok');
  const [, , timedOut] = await idled;
  assert.ok(timedOut instanceof undici.errors.InformationalError);
  assert.strictEqual(timedOut.code, 'UND_ERR_INFO');
  assert.strictEqual(timedOut.message, 'socket idle timeout');

  // A listener added once a connection is open hears of its end (not of its opening, which is
  // past), as undici's does: on a dispatcher that never had one, and on one whose listener
  // went before the connection opened.
  for (const before of ['none', 'gone']) {
    const late = dispatcher(t);
    if (before === 'gone') {
      const listener = () => assert.fail('not listening any more');
      late.on('connect', listener);
      late.off('connect', listener);
    }
    assert.strictEqual(await (await fetch(`${server.url}/`, { dispatcher: late })).text(), 'ok');
    assert.strictEqual(late.stats[server.url].connected, 1);
    const ends = [];
    late.on('disconnect', (...args) => ends.push(args));
    server.closeAllConnections();
    await until(() => ends.length > 0, 5000, `'disconnect' (${before})`);
    const [[endedAt, , cause]] = ends;
    assert.strictEqual(endedAt.origin, server.url, before);
    assert.strictEqual(cause.message, 'other side closed', before);
  }

  // A port nobody listens on.
  const closed = await httpServer(t);
  const { port } = closed.address();
  closed.close();
  await once(closed, 'close');
  const failed = once(d, 'connectionError');
  await assert.rejects(fetch(`http://127.0.0.1:${port}/`, { dispatcher: d }), (e) => e.cause.code === 'ECONNREFUSED');
  const [where, , refused] = await failed;
  assert.strictEqual(where.origin, `http://127.0.0.1:${port}`);
  assert.strictEqual(refused.code, 'ECONNREFUSED');
});

test("'disconnect' of a connection closed in use: 'reset', 'aborted', or its exchange's error", async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/close') {
      res.setHeader('connection', 'close');
      res.end('ok');
    } else if (req.url === '/hint') {
      // Less idle time than the agents' buffer (1 s): the connection is not kept.
      res.setHeader('keep-alive', 'timeout=1');
      res.end('ok');
    } else if (req.url === '/stall') {
      res.write('x'.repeat(1000));
    } else {
      res.write('partial', () => req.socket.destroy());
    }
  });
  const ended = {};
  for (const how of ['close', 'hint', 'abort', 'fail']) {
    const d = dispatcher(t);
    const disconnected = once(d, 'disconnect');
    if (how === 'close' || how === 'hint') {
      assert.strictEqual(await (await fetch(`${server.url}/${how}`, { dispatcher: d })).text(), 'ok');
    } else if (how === 'abort') {
      const ac = new AbortController();
      const res = await fetch(`${server.url}/stall`, { dispatcher: d, signal: ac.signal });
      ac.abort();
      await assert.rejects(res.text(), { name: 'AbortError' });
    } else {
      const res = await fetch(`${server.url}/fail`, { dispatcher: d });
      await assert.rejects(res.text());
    }
    const [origin, , err] = await disconnected;
    assert.strictEqual(origin.origin, server.url);
    ended[how] = err;
  }
  for (const how of ['close', 'hint', 'abort']) {
    assert.ok(ended[how] instanceof undici.errors.InformationalError, how);
    assert.strictEqual(ended[how].code, 'UND_ERR_INFO', how);
  }
  assert.strictEqual(ended.close.message, 'reset');
  assert.strictEqual(ended.hint.message, 'reset');
  assert.strictEqual(ended.abort.message, 'aborted');
  // The exchange's own error, Node's as the request got it.
  assert.strictEqual(ended.fail.code, 'ECONNRESET');
});

test("'disconnect' tells of the connections close() and destroy() close with undici's errors", async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const reason = new Error('shutting down');
  for (const [how, end, expected] of [
    ['close', (d) => d.close(), (err) => err.code === 'UND_ERR_DESTROYED' && err.name === 'ClientDestroyedError'],
    ['destroy', (d) => d.destroy(), (err) => err.code === 'UND_ERR_DESTROYED' && err instanceof undici.errors.ClientDestroyedError],
    ['destroy(err)', (d) => d.destroy(reason), (err) => err === reason],
  ]) {
    const d = new Dispatcher();
    t.after(() => d.destroy());
    const connected = once(d, 'connect');
    const res = await fetch(`${server.url}/${how}`, { dispatcher: d });
    assert.strictEqual(await res.text(), 'ok', how);
    await connected;
    const disconnected = once(d, 'disconnect');
    await end(d);
    const [origin, targets, err] = await disconnected;
    assert.strictEqual(origin.origin, server.url, how);
    assert.deepStrictEqual(targets, [d], how);
    assert.ok(expected(err), `${how}: ${err && err.stack}`);
  }
});

test("undici's errors of a Dispatcher read as undici's own: class name, stack header, instanceof", async (t) => {
  // The server holds every request: each case fails the one in flight, or one after close().
  const server = await httpServer(t, () => {});
  const { EventEmitter } = require('node:events');
  const cases = {
    destroyed: async (d) => {
      const held = once(server, 'request');
      const failed = undici.request(`${server.url}/`, { dispatcher: d });
      await held;
      d.destroy();
      return failed;
    },
    // An EventEmitter's 'abort' carries no reason: undici's RequestAbortedError.
    aborted: async (d) => {
      const signal = new EventEmitter();
      const held = once(server, 'request');
      const failed = undici.request(`${server.url}/`, { dispatcher: d, signal });
      await held;
      signal.emit('abort');
      return failed;
    },
    closed: async (d) => {
      await d.close();
      return undici.request(`${server.url}/`, { dispatcher: d });
    },
  };
  const seen = async (d, attempt) => {
    t.after(() => d.destroy());
    const err = await attempt(d).then(() => assert.fail('no error'), (e) => e);
    return {
      className: err.constructor.name,
      name: err.name,
      code: err.code,
      message: err.message,
      header: err.stack.split('\n')[0],
      undici: err instanceof undici.errors.UndiciError,
    };
  };
  for (const [kind, attempt] of Object.entries(cases)) {
    const theirs = await seen(new undici.Agent(), attempt);
    const ours = await seen(new Dispatcher(), attempt);
    assert.deepStrictEqual(ours, theirs, kind);
  }
});

test("an HTTPS request's own server name: undici's servername, or its host header's", async (t) => {
  const names = [];
  const server = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, (req, res) => {
    names.push(req.socket.servername || null);
    res.end('ok');
  });
  await listen(t, server);
  const origin = `https://127.0.0.1:${server.address().port}`;
  const d = dispatcher(t, { ca: CA });
  const plain = await undici.request(`${origin}/`, { dispatcher: d });
  assert.strictEqual(await plain.body.text(), 'ok');
  const named = await undici.request(`${origin}/`, { dispatcher: d, servername: 'localhost' });
  assert.strictEqual(await named.body.text(), 'ok');
  const hosted = await undici.request(`${origin}/`, { dispatcher: d, headers: { host: `localhost:${server.address().port}` } });
  assert.strictEqual(await hosted.body.text(), 'ok');
  // An IP address sends no name; the others send theirs, each on a connection of its own.
  assert.deepStrictEqual(names, [null, 'localhost', 'localhost']);
  // agent.request() takes it too; a name the certificate does not hold fails its check.
  const res = await d.https.request(`${origin}/`, { servername: 'localhost' });
  assert.strictEqual(await res.body.text(), 'ok');
  await assert.rejects(d.https.request(`${origin}/`, { servername: 'example.com' }), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  assert.throws(() => d.https.request(`${origin}/`, { servername: 42 }), { code: 'ERR_INVALID_ARG_TYPE' });
});

test("informational (1xx) responses reach undici's handlers: request()'s onInfo", async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' }, () => res.end('final'));
  });
  const d = dispatcher(t);
  const infos = [];
  const res = await undici.request(`${server.url}/`, { dispatcher: d, onInfo: (info) => infos.push(info) });
  assert.strictEqual(res.statusCode, 200);
  assert.strictEqual(await res.body.text(), 'final');
  assert.deepStrictEqual(infos, [{ statusCode: 103, headers: { link: '</style.css>; rel=preload; as=style' } }]);
  // The newer handler API: each head on onResponseStart, its lines on the controller's
  // rawHeaders (undici 8's request() reads them there for responseHeaders: 'raw').
  const heads = [];
  await new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET' }, {
      // As undici's request() asks for informational heads: an onInfo on its handler.
      onInfo() {},
      onRequestStart() {},
      onResponseStart: (controller, statusCode, headers) => heads.push([statusCode, headers.link ?? null, controller.rawHeaders.map(String)]),
      onResponseData() {},
      onResponseEnd: resolve,
      onResponseError: (controller, err) => reject(err),
    });
  });
  assert.deepStrictEqual(heads.map(([status, link]) => [status, link]), [[103, '</style.css>; rel=preload; as=style'], [200, null]]);
  assert.deepStrictEqual(heads[0][2], ['link', '</style.css>; rel=preload; as=style']);
  assert.ok(heads[1][2].includes('content-length'));
  // fetch's handler has no onInfo: the 103 is not asked for, and fetch sees the final response.
  const fetched = await fetch(`${server.url}/`, { dispatcher: d });
  assert.strictEqual(await fetched.text(), 'final');
  // Through interceptors, whose handlers have no onInfo of their own, the one in the options
  // still hears of it: undici's request() on a composed dispatcher, a composed dispatcher's own
  // request(), and the request() of a Dispatcher whose dispatch() is its own.
  const composed = d.compose((dispatch) => (opts, handler) => dispatch(opts, handler));
  class Own extends Dispatcher {
    dispatch(opts, handler) {
      return super.dispatch(opts, handler);
    }
  }
  const own = new Own();
  t.after(() => own.destroy());
  const callers = {
    'undici.request(), composed': (onInfo) => undici.request(`${server.url}/`, { dispatcher: composed, onInfo }),
    'composed.request()': (onInfo) => composed.request({ origin: server.url, path: '/', method: 'GET', onInfo }),
    'request() over its own dispatch()': (onInfo) => own.request({ origin: server.url, path: '/', method: 'GET', onInfo }),
  };
  for (const [name, call] of Object.entries(callers)) {
    const seen = [];
    const answered = await call((info) => seen.push(info.statusCode));
    assert.strictEqual(await answered.body.text(), 'final', name);
    assert.deepStrictEqual(seen, [103], name);
  }
});
