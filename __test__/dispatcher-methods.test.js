'use strict';

// The Dispatcher's own request() and stream(), as undici's dispatchers have them, against real
// HTTP and HTTPS servers on loopback (fixture certificates verified for real) and a scripted
// raw server for a fault.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const https = require('node:https');
const { once, EventEmitter } = require('node:events');
const { Readable, Writable, PassThrough } = require('node:stream');
const { Dispatcher } = require('..');
const undici = require('./undici');
const { httpServer, sha256, received, dispatcher, trailingServer, rawServer, readRequest, listen, until } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));

// Answers with what it received: method, path, byte count and checksum, and a trailer.
async function echo(req, res) {
  const { bytes, sha } = await received(req);
  res.setHeader('x-seen', req.headers['x-given'] ?? '');
  res.setHeader('trailer', 'x-sum');
  res.write(JSON.stringify({ method: req.method, url: req.url, bytes, sha }));
  res.addTrailers({ 'x-sum': String(bytes) });
  res.end();
}

test('request() answers as undici\'s: status, headers, body, trailers, opaque; bodies of 1 MiB both ways', async (t) => {
  const server = await httpServer(t, echo);
  const d = dispatcher(t);
  const res = await d.request({
    origin: server.url, path: '/a', method: 'GET', query: { q: 'x y' }, headers: { 'x-given': 'yes' }, opaque: { mine: 1 },
  });
  assert.strictEqual(res.statusCode, 200);
  assert.strictEqual(res.headers['x-seen'], 'yes');
  assert.deepStrictEqual(res.opaque, { mine: 1 });
  const seen = await res.body.json();
  assert.deepStrictEqual([seen.method, seen.url, seen.bytes], ['GET', '/a?q=x%20y', 0]);
  assert.deepStrictEqual(res.trailers, { 'x-sum': '0' });

  // A streamed body of 1 MiB goes whole, checksummed; the answer comes back as raw headers.
  const big = crypto.randomBytes(1 << 20);
  const parts = [];
  for (let i = 0; i < big.length; i += 64 * 1024) parts.push(big.subarray(i, i + 64 * 1024));
  const posted = await d.request({
    origin: new URL(server.url), path: '/up', method: 'POST', body: Readable.from(parts), responseHeaders: 'raw',
  });
  assert.ok(Array.isArray(posted.headers));
  const up = await posted.body.json();
  assert.deepStrictEqual([up.method, up.bytes, up.sha], ['POST', big.length, sha256(big)]);

  // Down: a body of 1 MiB read as a stream.
  const down = await httpServer(t, (req, res) => res.end(big));
  const got = await d.request({ origin: down.url, path: '/', method: 'GET' });
  const chunks = [];
  for await (const c of got.body) chunks.push(c);
  assert.strictEqual(sha256(Buffer.concat(chunks)), sha256(big));
  // Statistics are the agents'.
  assert.strictEqual(d.http.getCurrentStatus().requestCount >= 3, true);
});

test('request() with a callback; its errors are Node-style, as agent.request() gives them', async (t) => {
  const server = await httpServer(t);
  const d = dispatcher(t);
  const data = await new Promise((resolve, reject) => {
    d.request({ origin: server.url, path: '/cb', method: 'GET', opaque: 'o' }, (err, value) => (err ? reject(err) : resolve(value)));
  });
  assert.strictEqual(await data.body.text(), 'hello /cb');

  // A refused connection.
  const closed = require('node:net').createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = closed.address().port;
  await new Promise((resolve) => closed.close(resolve));
  const refused = await new Promise((resolve) => {
    d.request({ origin: `http://127.0.0.1:${port}`, path: '/', method: 'GET', opaque: 'o' }, (err, value) => resolve({ err, value }));
  });
  assert.strictEqual(refused.err.code, 'ECONNREFUSED');
  assert.strictEqual(refused.value.opaque, 'o');

  // A connection reset before the answer.
  const raw = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.resetAndDestroy();
  });
  const reset = await d.request({ origin: `http://127.0.0.1:${raw.address().port}`, path: '/', method: 'POST', body: 'x' }).then(() => null, (e) => e);
  assert.strictEqual(reset.code, 'ECONNRESET');

  // An abort by signal.
  const held = await httpServer(t, () => {});
  const controller = new AbortController();
  const aborted = d.request({ origin: held.url, path: '/', method: 'GET', signal: controller.signal });
  await until(() => held.connections.length === 1, 5000, 'connected');
  controller.abort();
  assert.strictEqual((await aborted.then(() => null, (e) => e)).name, 'AbortError');

  // Arguments refused: an upgrade, a tunnel, a bad callback.
  await assert.rejects(d.request({ origin: server.url, path: '/', method: 'GET', upgrade: 'websocket' }), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(d.request({ origin: server.url, path: '/', method: 'CONNECT' }), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(d.request({ origin: server.url, path: 1, method: 'GET' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => d.request({ origin: server.url, path: '/', method: 'GET' }, 1), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('a request() refused before it starts destroys its stream body with the error, as undici\'s does', async (t) => {
  const server = await httpServer(t);
  const d = dispatcher(t);
  // A body that never ends on its own: left open, it would hold what it reads from forever.
  const held = () => new Readable({ read() {} });
  const refusedWith = async (body, start) => {
    const err = await start(body);
    assert.strictEqual(body.destroyed, true, `${err.code}: the body is destroyed`);
    // Destroyed with the request's error; its 'error' goes nowhere (no uncaught exception).
    assert.strictEqual(body.errored, err);
    return err;
  };
  const rejected = (opts, target = d) => (body) => target.request({ ...opts, body }).then(() => assert.fail('resolved'), (e) => e);

  let err = await refusedWith(held(), rejected({ origin: server.url, path: 'no-slash', method: 'POST' }));
  assert.strictEqual(err.code, 'ERR_INVALID_ARG_VALUE');
  err = await refusedWith(held(), rejected({ origin: server.url, path: '/', method: 'POST', highWaterMark: -1 }));
  assert.strictEqual(err.code, 'ERR_OUT_OF_RANGE');
  err = await refusedWith(held(), (body) => {
    try {
      d.request({ origin: server.url, path: '/', method: 'POST', body }, 'not a function');
    } catch (e) {
      return e;
    }
    return assert.fail('no throw');
  });
  assert.strictEqual(err.code, 'ERR_INVALID_ARG_TYPE');
  // So does stream(), given a callback or a factory that is not a function.
  err = await refusedWith(held(), (body) => {
    try {
      d.stream({ origin: server.url, path: '/', method: 'POST', body }, () => new PassThrough(), null);
    } catch (e) {
      return e;
    }
    return assert.fail('no throw');
  });
  assert.strictEqual(err.code, 'ERR_INVALID_ARG_TYPE');
  err = await refusedWith(held(), (body) => d.stream({ origin: server.url, path: '/', method: 'POST', body }, 'no').then(() => assert.fail('resolved'), (e) => e));
  assert.strictEqual(err.code, 'ERR_INVALID_ARG_TYPE');

  // Through a composed dispatcher (its request() goes through dispatch()): the same.
  const composed = d.compose((dispatch) => (opts, handler) => dispatch(opts, handler));
  err = await refusedWith(held(), rejected({ origin: server.url, path: 'no-slash', method: 'POST' }, composed));
  assert.strictEqual(err.code, 'ERR_INVALID_ARG_VALUE');
  // undici 6's throwOnError is refused by every request() of ours (undici 7 refuses it too),
  // rather than answered with the response it was to fail, and so by stream() over it.
  for (const target of [d, composed]) {
    err = await refusedWith(held(), rejected({ origin: server.url, path: '/', method: 'POST', throwOnError: true }, target));
    assert.strictEqual(err.code, 'ERR_INVALID_ARG_VALUE');
    assert.match(err.message, /throwOnError/);
    await assert.rejects(target.stream({ origin: server.url, path: '/', method: 'GET', throwOnError: true }, () => new PassThrough()), { code: 'ERR_INVALID_ARG_VALUE' });
  }

  // A closing dispatcher refuses, and drops the body too.
  const closing = dispatcher(t);
  const closed = closing.close();
  err = await refusedWith(held(), rejected({ origin: server.url, path: '/', method: 'POST' }, closing));
  assert.strictEqual(err.code, 'UND_ERR_CLOSED');
  await closed;

  // A body the request sent whole is left as it is.
  const sent = Readable.from(['x']);
  const res = await d.request({ origin: server.url, path: '/', method: 'POST', body: sent });
  await res.body.text();
  assert.strictEqual(sent.errored, null);
});

test('HTTPS through request() is verified against the CA given', async (t) => {
  const server = https.createServer({ key: fixture('localhost-key.pem'), cert: fixture('localhost-chain.pem') }, (req, res) => res.end('secure'));
  await listen(t, server);
  const origin = `https://localhost:${server.address().port}`;
  const trusted = dispatcher(t, { ca: fixture('ca.pem') });
  assert.strictEqual(await (await trusted.request({ origin, path: '/', method: 'GET' })).body.text(), 'secure');
  const untrusted = dispatcher(t);
  const err = await untrusted.request({ origin, path: '/', method: 'GET' }).then(() => null, (e) => e);
  assert.match(err.code, /UNABLE_TO|SELF_SIGNED|CERT/);
});

test('close() waits for a request() in flight and refuses new ones; destroy() fails those in flight', async (t) => {
  const waiting = [];
  const server = await httpServer(t, (req, res) => {
    waiting.push(res);
    server.emit('waiting');
  });
  const d = new Dispatcher();
  const inFlight = d.request({ origin: server.url, path: '/a', method: 'GET' });
  await once(server, 'waiting');
  let closed = false;
  const closing = d.close().then(() => { closed = true; });
  await assert.rejects(d.request({ origin: server.url, path: '/b', method: 'GET' }), { code: 'UND_ERR_CLOSED' });
  assert.strictEqual(closed, false);
  waiting.shift().end('done');
  assert.strictEqual(await (await inFlight).body.text(), 'done');
  await closing;
  assert.strictEqual(closed, true);

  const d2 = new Dispatcher();
  const failing = d2.request({ origin: server.url, path: '/c', method: 'GET' });
  await once(server, 'waiting');
  await d2.destroy();
  assert.strictEqual((await failing.then(() => null, (e) => e)).code, 'UND_ERR_DESTROYED');
  await assert.rejects(d2.request({ origin: server.url, path: '/d', method: 'GET' }), { code: 'UND_ERR_DESTROYED' });
  for (const res of waiting) res.end();
});

test('stream() writes the body into the factory\'s Writable and resolves with opaque and trailers', async (t) => {
  const big = crypto.randomBytes(256 * 1024);
  const server = await trailingServer(t, big);
  const d = dispatcher(t);
  const chunks = [];
  let head = null;
  const done = await d.stream({ origin: server.url, path: '/', method: 'GET', opaque: chunks }, ({ statusCode, headers, opaque }) => {
    head = { statusCode, trailer: headers.trailer };
    return new Writable({
      write(chunk, _encoding, callback) {
        opaque.push(chunk);
        callback();
      },
    });
  });
  assert.deepStrictEqual(head, { statusCode: 200, trailer: 'x-sum' });
  assert.strictEqual(done.opaque, chunks);
  assert.strictEqual(sha256(Buffer.concat(chunks)), sha256(big));
  assert.deepStrictEqual(done.trailers, { 'x-sum': sha256(big) });

  // With a callback.
  const viaCallback = await new Promise((resolve, reject) => {
    d.stream({ origin: server.url, path: '/', method: 'GET', opaque: 'o' }, () => new Writable({ write: (c, e, cb) => cb() }), (err, data) => (err ? reject(err) : resolve(data)));
  });
  assert.strictEqual(viaCallback.opaque, 'o');

  // A factory that throws, or gives no Writable, fails it; the connection is freed.
  const boom = new Error('boom');
  await assert.rejects(d.stream({ origin: server.url, path: '/', method: 'GET' }, () => { throw boom; }), (e) => e === boom);
  await assert.rejects(d.stream({ origin: server.url, path: '/', method: 'GET' }, () => ({})), { code: 'ERR_INVALID_ARG_VALUE' });
  await assert.rejects(d.stream({ origin: server.url, path: '/', method: 'GET' }, null), { code: 'ERR_INVALID_ARG_TYPE' });
  // A Writable that fails fails it too.
  const broken = new Error('disk full');
  await assert.rejects(d.stream({ origin: server.url, path: '/', method: 'GET' }, () => new Writable({ write: (c, e, cb) => cb(broken) })), (e) => e === broken);
  await until(() => d.http.getCurrentStatus().sockets[`127.0.0.1:${server.port}:`] === undefined, 5000, 'connections back');

  // The signal stops it until the body is all written. An abort in the factory (undici calls
  // it before its response has ended) fails it, the Writable destroyed, even when the whole
  // response had come: with undici's RequestAbortedError for an emitter's, the reason for an
  // AbortSignal's; the emitter's listener goes.
  const small = await httpServer(t);
  const emitter = new EventEmitter();
  let given = null;
  const fromFactory = await new Promise((resolve) => {
    d.stream({ origin: small.url, path: '/', method: 'GET', signal: emitter }, () => {
      emitter.emit('abort');
      given = new PassThrough();
      return given;
    }, (e) => resolve(e));
  });
  assert.strictEqual(fromFactory?.code, 'UND_ERR_ABORTED');
  assert.strictEqual(given.destroyed, true);
  assert.strictEqual(emitter.listenerCount('abort'), 0);
  const reason = new Error('enough');
  const ac = new AbortController();
  await assert.rejects(d.stream({ origin: small.url, path: '/', method: 'GET', signal: ac.signal }, () => {
    ac.abort(reason);
    return new PassThrough();
  }), (e) => e === reason);
  // An abort while the Writable is still taking the body fails it too.
  const slow = new AbortController();
  let wrote = 0;
  await assert.rejects(d.stream({ origin: server.url, path: '/', method: 'GET', signal: slow.signal }, () => new Writable({
    highWaterMark: 1024,
    write(chunk, _encoding, callback) {
      wrote += chunk.length;
      if (wrote === chunk.length) slow.abort(reason);
      setImmediate(callback);
    },
  })), (e) => e === reason);
  assert.ok(wrote < big.length, `${wrote} of ${big.length} bytes written after the abort`);
  await until(() => d.http.getCurrentStatus().sockets[`127.0.0.1:${server.port}:`] === undefined, 5000, 'connections back');
});

// A server that upgrades to an echo protocol (sending `early` right after its 101, in the same
// write), opens CONNECT tunnels that answer once, answers plain requests with the bytes it got,
// and refuses upgrades to 'nope' with a 200.
async function upgradingServer(t) {
  const server = await httpServer(t, (req, res) => {
    let n = 0;
    req.on('data', (c) => { n += c.length; });
    req.on('end', () => res.end(`got ${n}`));
  });
  server.on('upgrade', (req, socket) => {
    if (req.headers.upgrade === 'nope') {
      socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nno');
      return;
    }
    // Names as servers write them: a handler's header object has them lowercase, as undici's.
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${req.headers.upgrade}\r\nConnection: Upgrade\r\nX-Path: ${req.url}\r\n\r\nearly`);
    socket.on('data', (d) => socket.write(`echo:${d}`));
  });
  server.on('connect', (req, socket) => {
    // A proxy that wants credentials first, with a body that says so.
    if (req.url === 'refused.example:443') {
      socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\ncontent-length: 9\r\n\r\nwho goes?');
      return;
    }
    socket.write(`HTTP/1.1 200 Connection Established\r\nX-Target: ${req.url}\r\n\r\n`);
    socket.on('data', (d) => socket.end(`tunnel:${d}`));
  });
  return server;
}

function nextData(socket) {
  return once(socket, 'data').then(([d]) => String(d));
}

test('an upgrade dispatched goes on the agent\'s own connection: onUpgrade (and onRequestUpgrade) get its socket', async (t) => {
  const server = await upgradingServer(t);
  const d = dispatcher(t);
  // The handler API Node's fetch and WebSocket call.
  const old = await new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/old', method: 'GET', upgrade: 'echo' }, {
      onConnect() {},
      onUpgrade: (statusCode, rawHeaders, socket) => resolve({ statusCode, rawHeaders, socket }),
      onError: reject,
    });
  });
  assert.strictEqual(old.statusCode, 101);
  assert.ok(old.rawHeaders.every((h) => Buffer.isBuffer(h)));
  assert.ok(old.rawHeaders.map(String).includes('/old'));
  // What the server sent right behind its head is the socket's first data.
  assert.strictEqual(await nextData(old.socket), 'early');
  old.socket.write('one');
  assert.strictEqual(await nextData(old.socket), 'echo:one');
  old.socket.destroy();

  // The newer API, with a controller.
  const newer = await new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/new', method: 'GET', upgrade: 'echo' }, {
      onRequestStart() {},
      // undici 8's fetch (Node 26's WebSocket) reads the head from the controller's rawHeaders.
      onRequestUpgrade: (controller, statusCode, headers, socket) => resolve({ statusCode, headers, socket, raw: controller.rawHeaders }),
      onResponseError: (controller, err) => reject(err),
    });
  });
  assert.strictEqual(newer.statusCode, 101);
  assert.deepStrictEqual([newer.headers.upgrade, newer.headers.connection, newer.headers['x-path']], ['echo', 'Upgrade', '/new']);
  assert.ok(newer.raw.every((h) => Buffer.isBuffer(h)));
  assert.deepStrictEqual(newer.raw.map(String).slice(0, 6), ['Upgrade', 'echo', 'Connection', 'Upgrade', 'X-Path', '/new']);
  assert.strictEqual(await nextData(newer.socket), 'early');
  newer.socket.destroy();
  // Both went through the agent's pool, whose slots they gave up.
  assert.strictEqual(d.http.getCurrentStatus().createSocketCount, 2);
  await until(() => Object.keys(d.http.getCurrentStatus().sockets).length === 0, 5000, 'slots freed');

  // A server that does not switch fails it, as undici fails a 'bad upgrade'; so does a handler
  // with no onUpgrade (onRequestUpgrade in the newer API), before anything is sent.
  const refused = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET', upgrade: 'nope' }, { onConnect() {}, onUpgrade: () => resolve(null), onError: resolve });
  });
  assert.deepStrictEqual([refused.code, refused.message], ['UND_ERR_SOCKET', 'bad upgrade']);
  const noHandler = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET', upgrade: 'echo' }, { onConnect() {}, onError: resolve });
  });
  assert.strictEqual(noHandler.code, 'ERR_INVALID_ARG_TYPE');
  assert.match(noHandler.message, /"handler\.onUpgrade" property must be of type function/);
  const noNewer = await new Promise((resolve) => {
    d.dispatch({ origin: server.url, path: '/', method: 'GET', upgrade: 'echo' }, { onRequestStart() {}, onResponseError: (c, err) => resolve(err) });
  });
  assert.strictEqual(noNewer.code, 'ERR_INVALID_ARG_VALUE');
});

test('an upgrade sends a streamed body; a handler whose onUpgrade throws hears of it in its error callback alone', async (t) => {
  const server = await upgradingServer(t);
  // The upgrades of this test: the server answers 'got' once the body has come.
  server.removeAllListeners('upgrade');
  server.on('upgrade', (req, socket, head) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    let seen = String(head);
    const check = () => { if (seen.includes('hello')) socket.end('got'); };
    socket.on('data', (d) => { seen += d; check(); });
    socket.on('error', () => {});
    check();
  });
  const d = new Dispatcher({ connections: 1 });
  t.after(() => d.destroy());
  const upgrade = (body, handler) => new Promise((resolve, reject) => {
    d.dispatch({ origin: server.url, path: '/b', method: 'GET', upgrade: 'echo', body }, {
      onConnect() {},
      onUpgrade: (statusCode, rawHeaders, socket) => resolve({ statusCode, socket }),
      onError: reject,
      ...handler,
    });
  });
  // Every kind of body a dispatch takes, streamed ones too, goes out with its upgrade.
  for (const body of [Readable.from(['hello']), (async function* () { yield 'hello'; })(), new Blob(['hello']), 'hello']) {
    const { statusCode, socket } = await upgrade(body);
    assert.strictEqual(statusCode, 101);
    let answer = '';
    for await (const chunk of socket) answer += chunk;
    assert.strictEqual(answer, 'got');
  }
  // A body that fails fails the upgrade, and gives its connection up.
  const failing = (async function* () { yield 'x'; throw new Error('source failed'); })();
  await assert.rejects(upgrade(failing), { message: 'source failed' });
  await assert.rejects(upgrade(5), { code: 'ERR_INVALID_ARG_TYPE' });
  // The handler's throw goes to onError; the socket it was given closes without an 'error'
  // nobody listens to (an uncaught exception would fail this test).
  const thrown = new Error('onUpgrade threw');
  const heard = await new Promise((resolve) => {
    upgrade(undefined, { onUpgrade() { throw thrown; }, onError: resolve });
  });
  assert.strictEqual(heard, thrown);
  await new Promise((resolve) => setImmediate(resolve));
  // Its one connection is free for the next request.
  const res = await d.request({ origin: server.url, path: '/', method: 'POST', body: 'abc' });
  assert.strictEqual(await res.body.text(), 'got 3');
});

test('upgrade() and connect() as undici\'s: the socket with the server\'s headers, errors, an abort', async (t) => {
  const server = await upgradingServer(t);
  const d = dispatcher(t);
  const up = await d.upgrade({ origin: server.url, path: '/u', protocol: 'echo', opaque: 'o' });
  assert.deepStrictEqual([up.headers.upgrade, up.headers['x-path'], up.opaque], ['echo', '/u', 'o']);
  assert.strictEqual(await nextData(up.socket), 'early');
  up.socket.destroy();

  const tunnel = await d.connect({ origin: server.url, path: 'example.com:443' });
  assert.deepStrictEqual([tunnel.statusCode, tunnel.headers['x-target']], [200, 'example.com:443']);
  tunnel.socket.write('x');
  assert.strictEqual(await nextData(tunnel.socket), 'tunnel:x');

  const viaCallback = await new Promise((resolve, reject) => {
    d.upgrade({ origin: server.url, path: '/cb', protocol: 'echo' }, (err, data) => (err ? reject(err) : resolve(data)));
  });
  viaCallback.socket.destroy();
  await assert.rejects(d.upgrade({ origin: server.url, path: '/', protocol: 'nope' }), { code: 'UND_ERR_SOCKET', message: 'bad upgrade' });

  // An abort before the server answers.
  const silent = await rawServer(t, () => {});
  const controller = new AbortController();
  const aborted = d.upgrade({ origin: `http://127.0.0.1:${silent.address().port}`, path: '/', signal: controller.signal });
  await until(() => silent.connectionCount === 1, 5000, 'connected');
  controller.abort(new Error('changed my mind'));
  await assert.rejects(aborted, { message: 'changed my mind' });
});

// What a dispatcher's connect() gives for an answer: its status, headers, and the socket with
// the bytes the server sent after its head.
async function connectAnswer(origin, dispatcher, target) {
  const { statusCode, headers, socket } = await dispatcher.connect({ origin, path: target });
  let rest = '';
  socket.on('data', (c) => { rest += c; });
  await once(socket, 'end');
  socket.destroy();
  return { statusCode, proxyAuthenticate: headers['proxy-authenticate'], rest };
}

test('a CONNECT answered with a refusal (a proxy\'s 407) gives its status, headers and body, as undici\'s connect() does', { timeout: 10_000 }, async (t) => {
  const server = await upgradingServer(t);
  const ours = dispatcher(t);
  const theirs = new undici.Agent();
  t.after(() => theirs.destroy());
  const expected = await connectAnswer(server.url, theirs, 'refused.example:443');
  assert.deepStrictEqual(expected, { statusCode: 407, proxyAuthenticate: 'Basic', rest: 'who goes?' });
  assert.deepStrictEqual(await connectAnswer(server.url, ours, 'refused.example:443'), expected);
  // The newer handler API hears it in onRequestUpgrade, with the status.
  const heard = await new Promise((resolve, reject) => {
    ours.dispatch({ origin: server.url, path: 'refused.example:443', method: 'CONNECT' }, {
      onRequestStart() {},
      onRequestUpgrade: (controller, statusCode, headers, socket) => {
        socket.destroy();
        resolve([statusCode, headers['proxy-authenticate']]);
      },
      onResponseError: (controller, err) => reject(err),
    });
  });
  assert.deepStrictEqual(heard, [407, 'Basic']);
});

test('a signal that is an EventEmitter, or one aborted with null, aborts as undici\'s does, and its listener goes with the request', { timeout: 30000 }, async (t) => {
  const server = await httpServer(t, echo);
  const d = dispatcher(t);
  // Not aborted: once the request is over, nothing listens on the emitter any more.
  const calm = new EventEmitter();
  const res = d.request({ origin: server.url, path: '/', method: 'GET', signal: calm });
  assert.strictEqual(calm.listenerCount('abort'), 1);
  await (await res).body.dump();
  await until(() => calm.listenerCount('abort') === 0, 5000, 'the listener removed');

  // Aborted while the server is silent: request(), and upgrade() until its socket is given.
  const silent = await rawServer(t, () => {});
  const origin = `http://127.0.0.1:${silent.address().port}`;
  const ee = new EventEmitter();
  const pending = d.request({ origin, path: '/', method: 'GET', signal: ee });
  await until(() => silent.connectionCount === 1, 5000, 'connected');
  ee.emit('abort');
  // undici's RequestAbortedError, as its request() gives for an emitter's abort.
  await assert.rejects(pending, { name: 'AbortError', code: 'UND_ERR_ABORTED' });
  await until(() => ee.listenerCount('abort') === 0, 5000, 'the listener removed');
  const upgrading = new EventEmitter();
  const upgrade = d.upgrade({ origin, path: '/', signal: upgrading });
  await until(() => silent.connectionCount === 2, 5000, 'connected');
  upgrading.emit('abort');
  await assert.rejects(upgrade, { name: 'AbortError', code: 'UND_ERR_ABORTED' });
  assert.strictEqual(upgrading.listenerCount('abort'), 0);
  // An AbortSignal aborted with null has no reason to give: undici's RequestAbortedError too,
  // already aborted or while the server is silent.
  const early = new AbortController();
  early.abort(null);
  await assert.rejects(d.request({ origin, path: '/', method: 'GET', signal: early.signal }), { code: 'UND_ERR_ABORTED' });
  const late = new AbortController();
  const waiting = d.request({ origin, path: '/', method: 'GET', signal: late.signal });
  await until(() => silent.connectionCount === 3, 5000, 'connected');
  late.abort(null);
  await assert.rejects(waiting, { code: 'UND_ERR_ABORTED' });
  // pipeline()'s stream errors with it (it does not just close).
  const piped = new AbortController();
  const duplex = d.pipeline({ origin, path: '/', method: 'GET', signal: piped.signal }, ({ body }) => body);
  duplex.end();
  await until(() => silent.connectionCount === 4, 5000, 'connected');
  const errored = once(duplex, 'error');
  piped.abort(null);
  const [pipeErr] = await errored;
  assert.strictEqual(pipeErr.code, 'UND_ERR_ABORTED');
  // Anything else is refused at once.
  await assert.rejects(d.request({ origin, path: '/', method: 'GET', signal: {} }), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('a response\'s context and formData() are undici\'s: none given, and not supported', async (t) => {
  const server = await httpServer(t, echo);
  const d = dispatcher(t);
  const res = await d.request({ origin: server.url, path: '/', method: 'GET' });
  // undici 8's (undici 7's is undefined): no interceptor gave one.
  assert.strictEqual(res.context, null);
  await assert.rejects(res.body.formData(), { code: 'ERR_HYPERAGENT_UNSUPPORTED' });
  // undici's body.body is a web stream (responses.test.js reads it); left unread, it reads
  // nothing, and dump() still drops the body.
  assert.ok(res.body.body instanceof ReadableStream);
  await res.body.dump();
  let given = null;
  await d.stream({ origin: server.url, path: '/', method: 'GET' }, ({ context }) => {
    given = context;
    return new Writable({ write: (chunk, encoding, callback) => callback() });
  });
  assert.strictEqual(given, null);
  // undici's request() makes its response's context of what the dispatcher's handler call
  // gives it: the same through ours as through undici's Agent (null or undefined, by version).
  const contextOf = async (dispatcher) => {
    const { context, body } = await undici.request(server.url, { dispatcher });
    await body.dump();
    return context;
  };
  const theirs = new undici.Agent();
  t.after(() => theirs.close());
  assert.strictEqual(await contextOf(d), await contextOf(theirs));
});

test('a composed dispatcher\'s request() and stream() give the context its interceptors share, as undici\'s do', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/from') {
      res.writeHead(302, { location: '/to' });
      res.end();
      return;
    }
    res.end('arrived');
  });
  const d = dispatcher(t);
  // An interceptor that gives its handler's onRequestStart a context of its own, as undici's
  // redirect interceptor gives its `history`.
  const tagged = (dispatch) => (opts, handler) => dispatch(opts, {
    ...handler,
    onRequestStart: (controller, context) => handler.onRequestStart(controller, { ...context, tag: opts.path }),
    onResponseStart: (...args) => handler.onResponseStart(...args),
    onResponseData: (...args) => handler.onResponseData(...args),
    onResponseEnd: (...args) => handler.onResponseEnd(...args),
    onResponseError: (...args) => handler.onResponseError(...args),
  });
  const res = await d.compose(tagged).request({ origin: server.url, path: '/to', method: 'GET' });
  assert.deepStrictEqual(res.context, { tag: '/to' });
  assert.strictEqual(await res.body.text(), 'arrived');
  let given = null;
  await d.compose(tagged).stream({ origin: server.url, path: '/to', method: 'GET' }, ({ context }) => {
    given = context;
    return new Writable({ write: (chunk, encoding, callback) => callback() });
  });
  assert.deepStrictEqual(given, { tag: '/to' });
  // undici's redirect interceptor: the history of the redirects it followed.
  const redirected = await d.compose(undici.interceptors.redirect({ maxRedirections: 2 })).request({ origin: server.url, path: '/from', method: 'GET' });
  assert.strictEqual(await redirected.body.text(), 'arrived');
  assert.deepStrictEqual(redirected.context.history.map(String), [`${server.url}/from`, `${server.url}/to`]);
});

test('a composed dispatcher\'s request() takes the older handler API from an interceptor written for it, as undici\'s does', async (t) => {
  const big = Buffer.alloc(1 << 20, 'a');
  const server = await httpServer(t, (req, res) => res.end(req.url === '/big' ? big : 'origin'));
  const d = dispatcher(t);
  // An interceptor that answers itself through the older API, as undici 7's cache interceptor
  // answers `only-if-cached`.
  const answering = (dispatch) => (opts, handler) => {
    if (opts.path !== '/local') return dispatch(opts, handler);
    handler.onConnect(() => {}, { from: 'local' });
    handler.onHeaders(203, ['x-a', '1', 'x-a', '2'].map((s) => Buffer.from(s)), () => {}, 'Local');
    handler.onData(Buffer.from('here'));
    handler.onComplete([Buffer.from('x-t'), Buffer.from('done')]);
    return true;
  };
  const local = await d.compose(answering).request({ origin: server.url, path: '/local', method: 'GET' });
  assert.deepStrictEqual([local.statusCode, local.statusMessage, local.headers['x-a'], local.context], [203, 'Local', '1, 2', { from: 'local' }]);
  assert.strictEqual(await local.body.text(), 'here');
  assert.deepStrictEqual(local.trailers, { 'x-t': 'done' });

  // One that relays the older API: the body's back-pressure is onData's false and the resume
  // given with the head.
  const told = [];
  let resumed = 0;
  const relaying = (dispatch) => (opts, handler) => dispatch(opts, {
    onConnect: (abort, context) => handler.onConnect(abort, context),
    onHeaders: (status, raw, resume, message) => handler.onHeaders(status, raw, () => { resumed++; resume(); }, message),
    onData: (chunk) => {
      const more = handler.onData(chunk);
      told.push(more);
      return more;
    },
    onComplete: (trailers) => handler.onComplete(trailers),
    onError: (err) => handler.onError(err),
  });
  const res = await d.compose(relaying).request({ origin: server.url, path: '/big', method: 'GET' });
  await until(() => told.includes(false), 5000, 'the unread body asked for a pause');
  const got = Buffer.concat(await res.body.toArray());
  assert.ok(got.equals(big), 'the whole body, in order');
  assert.ok(resumed > 0, 'reading resumed it');
  const passed = await d.compose(relaying).request({ origin: server.url, path: '/', method: 'GET' });
  assert.strictEqual(await passed.body.text(), 'origin');

  // undici's cache interceptor with `only-if-cached` and nothing cached: its own 504.
  const cached = d.compose(undici.interceptors.cache());
  const none = await cached.request({ origin: server.url, path: '/nothing', method: 'GET', headers: { 'cache-control': 'only-if-cached' } });
  assert.strictEqual(none.statusCode, 504);
  await none.body.dump();
});

test('pipeline() as undici\'s: writes are the request body, reads what the handler makes of the response', async (t) => {
  const server = await upgradingServer(t);
  const d = dispatcher(t);
  const big = crypto.randomBytes(512 * 1024);
  let status = null;
  const duplex = d.pipeline({ origin: server.url, path: '/p', method: 'POST' }, ({ statusCode, body }) => {
    status = statusCode;
    return body;
  });
  const out = [];
  duplex.on('data', (c) => out.push(c));
  const ended = once(duplex, 'end');
  for (let i = 0; i < big.length; i += 64 * 1024) {
    if (!duplex.write(big.subarray(i, i + 64 * 1024))) await once(duplex, 'drain');
  }
  duplex.end();
  await ended;
  assert.strictEqual(status, 200);
  assert.strictEqual(Buffer.concat(out).toString(), `got ${big.length}`);

  // A consumer slower than the response: the handler's Readable ends (and closes) while the
  // duplex still holds what was not read yet, which all comes, then the end.
  const echo = await httpServer(t, (req, res) => req.pipe(res));
  const slowly = d.pipeline({ origin: echo.url, path: '/', method: 'PUT' }, ({ body }) => body.pipe(new PassThrough()));
  slowly.end(big);
  let read = 0;
  slowly.on('data', (chunk) => {
    read += chunk.length;
    slowly.pause();
    setImmediate(() => slowly.resume());
  });
  const [outcome] = await Promise.race([once(slowly, 'end').then(() => ['end']), once(slowly, 'error')]);
  assert.strictEqual(outcome, 'end');
  assert.strictEqual(read, big.length);

  // A handler that throws, or gives no Readable, destroys the duplex with the error.
  const boom = new Error('boom');
  const failing = d.pipeline({ origin: server.url, path: '/', method: 'GET' }, () => { throw boom; });
  failing.resume();
  failing.end();
  assert.strictEqual((await once(failing, 'error'))[0], boom);
  const empty = d.pipeline({ origin: server.url, path: '/', method: 'GET' }, () => 1);
  empty.resume();
  empty.end();
  assert.strictEqual((await once(empty, 'error'))[0].code, 'ERR_INVALID_ARG_VALUE');
  // A handler that is not a function: the duplex errors, and nothing else does (its request
  // body, never read, is destroyed with no uncaught 'error'; node:test fails a test on one).
  const refused = d.pipeline({ origin: server.url, path: '/', method: 'POST' }, null);
  assert.strictEqual((await once(refused, 'error'))[0].code, 'ERR_INVALID_ARG_TYPE');
  await new Promise(setImmediate);
  await until(() => Object.keys(d.http.getCurrentStatus().sockets).length === 0, 5000, 'connections back');
});

test('pipeline(): the response\'s error fails it whatever the handler made of the body, and a destroy() fails it as aborted', { timeout: 20_000 }, async (t) => {
  // A response cut in the middle of its body: the server resets its connection.
  const server = await httpServer(t, (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-length': 100_000 });
    res.write(Buffer.alloc(1000, 97), () => res.socket.resetAndDestroy());
  });
  const d = dispatcher(t);
  // The usual transform: a pipe() from the body, which does not carry its error on.
  const piped = d.pipeline({ origin: server.url, path: '/', method: 'POST' }, ({ body }) => body.pipe(new PassThrough()));
  piped.resume();
  piped.end('request body');
  const [err] = await once(piped, 'error');
  assert.strictEqual(err.code, 'ECONNRESET');

  // Destroyed with no error before its end: its consumers hear that it did not end.
  const slow = await httpServer(t, (req, res) => {
    req.resume();
    res.writeHead(200);
    res.write('part');
  });
  const stopped = d.pipeline({ origin: slow.url, path: '/', method: 'GET' }, ({ body }) => body);
  stopped.end();
  await once(stopped, 'data');
  stopped.destroy();
  const [aborted] = await once(stopped, 'error');
  assert.strictEqual(aborted.code, 'UND_ERR_ABORTED');
  await until(() => Object.keys(d.http.getCurrentStatus().sockets).length === 0, 5000, 'connections back');
});

test('pipeline(): a response that comes whole while the request body is still being written ends it; the rest goes nowhere', { timeout: 20_000 }, async (t) => {
  // The server answers as the head arrives, reading none of the body; the source writes until
  // then, and ends after.
  let answered = false;
  const server = await httpServer(t, (req, res) => {
    res.end('early');
    answered = true;
  });
  const d = dispatcher(t);
  const out = [];
  const source = new Readable({
    read() {
      this.push(answered ? null : Buffer.alloc(64 * 1024));
    },
  });
  await require('node:stream/promises').pipeline(
    source,
    d.pipeline({ origin: server.url, path: '/', method: 'PUT' }, ({ body }) => body),
    new Writable({ write(chunk, encoding, cb) { out.push(chunk); cb(); } }),
  );
  assert.strictEqual(Buffer.concat(out).toString(), 'early');
  assert.strictEqual(source.readableEnded, true, 'the source was read to its end');
});

test('a request() whose start fails in the addon is not waited for by close()', { timeout: 20_000 }, async (t) => {
  const binding = require('../lib/native');
  const server = await httpServer(t);
  const d = new Dispatcher();
  binding.injectPanic('request');
  let err;
  try {
    err = await d.request({ origin: server.url, path: '/', method: 'GET' }).then(() => null, (e) => e);
  } finally {
    binding.injectPanic('');
  }
  assert.strictEqual(err.code, 'ERR_HYPERAGENT_INTERNAL');
  await d.close();
  assert.strictEqual(d.closed, true);
});

test('dispatch options are read whatever their object: spread, class instance with getters, null prototype', async (t) => {
  const server = await httpServer(t, echo);
  const d = dispatcher(t);
  const url = new URL(server.url);
  const body = 'seven b';
  const send = async (opts) => {
    const res = await d.request(opts);
    assert.strictEqual(res.headers['x-seen'], 'yes');
    return res.body.json();
  };
  // undici's request() makes its options so: a spread followed by more properties.
  const base = { method: 'POST', body, headers: { 'x-given': 'yes' } };
  const spread = await send({ ...base, origin: server.url, path: '/spread', query: { a: '1' } });
  assert.deepStrictEqual([spread.method, spread.url, spread.bytes], ['POST', '/spread?a=1', 7]);

  // Options whose properties are getters on a class's prototype (not own, not enumerable).
  class Options {
    get origin() { return url; }
    get path() { return '/class'; }
    get method() { return 'PUT'; }
    get body() { return body; }
    get headers() { return { 'x-given': 'yes' }; }
  }
  const viaClass = await send(new Options());
  assert.deepStrictEqual([viaClass.method, viaClass.url, viaClass.bytes], ['PUT', '/class', 7]);

  const bare = Object.assign(Object.create(null), { origin: server.url, path: '/bare', method: 'DELETE', headers: { 'x-given': 'yes' } });
  const viaBare = await send(bare);
  assert.deepStrictEqual([viaBare.method, viaBare.url], ['DELETE', '/bare']);

  // Through dispatch() and the older handler API, the same three forms.
  for (const [opts, want] of [
    [{ ...base, origin: server.url, path: '/d1' }, ['POST', '/d1', 7]],
    [new Options(), ['PUT', '/class', 7]],
    [bare, ['DELETE', '/bare', 0]],
  ]) {
    const parts = [];
    const done = new Promise((resolve, reject) => {
      d.dispatch(opts, {
        onConnect() {},
        onHeaders() { return true; },
        onData(chunk) { parts.push(chunk); return true; },
        onComplete: resolve,
        onError: reject,
      });
    });
    await done;
    const seen = JSON.parse(Buffer.concat(parts).toString());
    assert.deepStrictEqual([seen.method, seen.url, seen.bytes], want);
  }
});
