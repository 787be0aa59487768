'use strict';

// agent.request(): aborts, signals, back-pressure, early responses and agent.destroy().
// Real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const fs = require('node:fs');
const { Readable } = require('node:stream');
const { finished } = require('node:stream/promises');
const { once, getEventListeners, setMaxListeners } = require('node:events');
const hyperagent = require('../..');
const { Agent, HttpsAgent } = hyperagent;
const { httpServer, streamingServer, rawServer, until } = require('../helpers');
const { tlsFixture, chunks, earlyServer } = require('./helpers');

test('a paused body stops reads in Rust: the server stalls and memory stays flat', async (t) => {
  const TOTAL = 256 * 1024 * 1024;
  const CHUNK = crypto.randomBytes(1024 * 1024);
  const server = await streamingServer(t, CHUNK, TOTAL / CHUNK.length);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const rss = process.memoryUsage().rss;
  const res = await agent.request(server.url);
  // Never read: the stream's buffer fills, then Rust stops reading.
  const outcome = await server.outcome();
  assert.ok(outcome.stalled, 'the server must stall');
  assert.ok(outcome.stalled < 64 * 1024 * 1024, `wrote ${outcome.stalled} bytes before stalling`);
  assert.ok(process.memoryUsage().rss - rss < 128 * 1024 * 1024);
  let received = 0;
  for await (const chunk of res.body) received += chunk.length;
  assert.strictEqual(received, TOTAL);
});

test('aborting works while queued, before the head, and during the body', async (t) => {
  let hold;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/slow-head') hold = res;
    else if (req.url === '/slow-body') {
      res.writeHead(200);
      res.write('start');
    } else res.end('ok');
  });
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());

  // Before the head: the promise rejects with the signal's reason.
  const ac1 = new AbortController();
  const p1 = agent.request(`${server.url}/slow-head`, { signal: ac1.signal });
  await once(server, 'request');
  // Queued behind it (maxSockets 1): aborted while waiting.
  const ac2 = new AbortController();
  const p2 = agent.request(`${server.url}/queued`, { signal: ac2.signal });
  ac2.abort();
  await assert.rejects(p2, { name: 'AbortError' });
  const reason = new Error('stop');
  ac1.abort(reason);
  await assert.rejects(p1, (err) => err === reason);
  assert.ok(hold);

  // During the body: the stream errors with the reason; the connection is not reused.
  const ac3 = new AbortController();
  const res = await agent.request(`${server.url}/slow-body`, { signal: ac3.signal });
  const errored = once(res.body, 'error');
  res.body.once('data', () => ac3.abort());
  res.body.resume();
  const [err] = await errored;
  assert.strictEqual(err.name, 'AbortError');

  // The pool is healthy afterwards.
  assert.strictEqual(await (await agent.request(`${server.url}/after`)).body.text(), 'ok');
  // An already aborted signal rejects at once.
  await assert.rejects(agent.request(server.url, { signal: AbortSignal.abort() }), { name: 'AbortError' });
});

test('a signal aborted with a falsy reason (null, 0, false, \'\') still ends the request with that reason, at every stage', { timeout: 20000 }, async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/slow-head') return;
    if (req.url === '/slow-upload') {
      // Reads nothing of the request's streamed body and answers nothing: the abort comes
      // while the body is still going out; the connection closes under it.
      req.pause();
      req.on('error', () => {});
      return;
    }
    if (req.url === '/after') {
      res.end('ok');
      return;
    }
    res.writeHead(200);
    res.write('start');
  });
  // The upload's connection ends mid-body: the server's parser calls that an error.
  server.on('clientError', (err, socket) => socket.destroy());
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  for (const reason of [null, 0, false, '']) {
    // Already aborted.
    const early = new AbortController();
    early.abort(reason);
    await assert.rejects(agent.request(server.url, { signal: early.signal }), (err) => err === reason);

    // Before the head.
    const head = new AbortController();
    const waiting = agent.request(`${server.url}/slow-head`, { signal: head.signal });
    const [req] = await once(server, 'request');
    head.abort(reason);
    await assert.rejects(waiting, (err) => err === reason);
    await once(req.socket, 'close');

    // While a streamed body is going out: the source is destroyed, the promise rejects.
    const upload = new AbortController();
    const source = new Readable({ read() {} });
    source.push('part');
    const uploading = agent.request(`${server.url}/slow-upload`, { method: 'POST', body: source, signal: upload.signal });
    const [uploadReq] = await once(server, 'request');
    upload.abort(reason);
    await assert.rejects(uploading, (err) => err === reason);
    assert.ok(source.destroyed, 'the body source is destroyed');
    await once(uploadReq.socket, 'close');

    // During the body: its reader sees the body end early, and text() rejects with the reason.
    const body = new AbortController();
    const res = await agent.request(`${server.url}/slow-body`, { signal: body.signal });
    const text = res.body.text();
    body.abort(reason);
    await assert.rejects(text, (err) => err === reason);
    assert.ok(res.body.destroyed);
  }
  // The one slot (maxSockets 1) each request held is free again.
  assert.strictEqual(await (await agent.request(`${server.url}/after`)).body.text(), 'ok');
});

// How much a loopback connection may hold in its kernel buffers: the sender's and the
// receiver's, which Linux grows up to tcp_wmem's and tcp_rmem's maximum (32 MiB here for the
// receiver, far above net.core.rmem_max). A body to a server that stopped reading has to be
// well over this for its rest to be unsent at an abort, whatever the abort's delay.
function kernelBuffering() {
  const max = (name) => {
    try {
      return Number(fs.readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/)[2]) || 0;
    } catch {
      return 0;
    }
  };
  return Math.max(max('tcp_rmem') + max('tcp_wmem'), 16 * 1024 * 1024);
}

test('an abort mid-upload to a server that stopped reading closes the connection at once, the rest unsent', { timeout: 30000 }, async (t) => {
  const size = 4 * kernelBuffering();
  const body = Buffer.alloc(size, 'u');
  for (const secure of [false, true]) {
    let socket;
    let started;
    const uploading = new Promise((resolve) => (started = resolve));
    const tlsOptions = secure ? { key: tlsFixture('localhost-key.pem'), cert: tlsFixture('localhost-chain.pem') } : undefined;
    const server = await rawServer(t, (s) => {
      socket = s;
      s.once('data', (chunk) => {
        s.pause();
        started(chunk.length);
      });
    }, tlsOptions);
    const agent = secure ? new HttpsAgent({ ca: tlsFixture('ca.pem') }) : new Agent();
    t.after(() => agent.destroy());
    const controller = new AbortController();
    const pending = agent.request(`${secure ? 'https' : 'http'}://localhost:${server.port}/`, { method: 'POST', body, signal: controller.signal });
    let received = await uploading;
    const atAbort = received;
    controller.abort();
    await assert.rejects(pending, { name: 'AbortError' });
    // What was under way arrives, then the connection's end (a FIN, or a reset when TLS data
    // the client had not read was left): never the whole body.
    const closed = new Promise((resolve) => socket.on('close', resolve));
    socket.on('data', (chunk) => (received += chunk.length));
    socket.resume();
    await closed;
    assert.ok(received < body.length,
      `${received} bytes of ${body.length} arrived over ${secure ? 'HTTPS' : 'HTTP'} (${atAbort} when the abort came)`);
    assert.deepStrictEqual(agent.getCurrentStatus().sockets, {});
  }
});

test('a signal that aborts once the exchange is over fails a body not yet read to its end, as undici\'s', async (t) => {
  // Small bodies come whole with their heads: the exchange is over as the promise resolves.
  const big = Buffer.alloc(64 * 1024, 'b');
  const server = await httpServer(t, (req, res) => res.end(req.url === '/big' ? big : 'small'));
  const agent = new Agent();
  const d = new hyperagent.Dispatcher();
  t.after(() => { agent.destroy(); d.destroy(); });
  const calls = {
    'agent.request()': (path, signal) => agent.request(server.url + path, { signal }),
    'd.request()': (path, signal) => d.request({ origin: server.url, path, method: 'GET', signal }),
  };
  for (const [how, call] of Object.entries(calls)) {
    for (const path of ['/', '/big']) {
      // Unread: text() rejects with the signal's reason, and so does a loop over it.
      let ac = new AbortController();
      let res = await call(path, ac.signal);
      const reason = new Error('late');
      ac.abort(reason);
      await assert.rejects(res.body.text(), (err) => err === reason, `${how} ${path}`);
      ac = new AbortController();
      res = await call(path, ac.signal);
      ac.abort(reason);
      await assert.rejects(async () => { for await (const c of res.body) void c; }, (err) => err === reason, `${how} ${path}`);
      // Read to its end first: it stays as it was read, and the signal has no listener left.
      ac = new AbortController();
      res = await call(path, ac.signal);
      const text = await res.body.text();
      assert.strictEqual(text.length, path === '/' ? 5 : big.length, `${how} ${path}`);
      assert.strictEqual(getEventListeners(ac.signal, 'abort').length, 0, `${how} ${path}: the signal let go`);
      ac.abort(reason);
      assert.strictEqual(res.body.errored, null, `${how} ${path}`);
      // Destroyed by its reader: the signal is let go of too.
      ac = new AbortController();
      res = await call(path, ac.signal);
      res.body.destroy();
      await once(res.body, 'close');
      assert.strictEqual(getEventListeners(ac.signal, 'abort').length, 0, `${how} ${path}: destroyed`);
    }
  }
  // The connections went back whole: the next requests reuse them.
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'small');
});

test('one signal shared by many requests: the finished ones let go of it, and its abort ends the rest, at every stage', async (t) => {
  const held = [];
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/fast') return res.end('fast');
    if (req.url === '/body') {
      res.writeHead(200);
      return res.write('start');
    }
    return held.push(res);
  });
  const agent = new Agent({ maxSockets: 4 });
  t.after(() => agent.destroy());
  const ac = new AbortController();
  const { signal } = ac;
  setMaxListeners(0, signal);
  // Finished requests (here on another agent) leave no listener behind.
  const other = new Agent();
  t.after(() => other.destroy());
  for (let i = 0; i < 20; i++) assert.strictEqual(await (await other.request(`${server.url}/fast`, { signal })).body.text(), 'fast');
  assert.strictEqual(getEventListeners(signal, 'abort').length, 0);

  // Two bodies being read, two waiting for their heads, 200 queued behind them.
  const reading = [];
  for (let i = 0; i < 2; i++) {
    const res = await agent.request(`${server.url}/body`, { signal });
    reading.push(new Promise((resolve) => res.body.on('error', resolve)));
    res.body.resume();
  }
  const heads = [agent.request(`${server.url}/head`, { signal }), agent.request(`${server.url}/head`, { signal })];
  await until(() => held.length === 2, 5000, 'the held requests');
  const queued = Array.from({ length: 200 }, () => agent.request(`${server.url}/fast`, { signal }));
  assert.strictEqual(getEventListeners(signal, 'abort').length, 204);
  // Their rejections are handled from the abort on: the bodies' errors come a turn later.
  const outcomes = Promise.allSettled([...heads, ...queued]);
  const reason = new Error('shut down');
  ac.abort(reason);
  for (const err of await Promise.all(reading)) assert.strictEqual(err, reason);
  for (const outcome of await outcomes) {
    assert.strictEqual(outcome.status, 'rejected');
    assert.strictEqual(outcome.reason, reason);
  }
  assert.strictEqual(getEventListeners(signal, 'abort').length, 0);
  // Nothing was left waiting, and the pool serves the next request.
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(status.requests, {});
  assert.strictEqual(await (await agent.request(`${server.url}/fast`)).body.text(), 'fast');
});

test('a signal listener that stops the abort event\'s propagation does not keep the request or dump() from ending', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/body') {
      res.writeHead(200);
      res.write('start');
    }
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const stopping = () => {
    const ac = new AbortController();
    ac.signal.addEventListener('abort', (event) => event.stopImmediatePropagation());
    return ac;
  };
  const head = stopping();
  const pending = agent.request(`${server.url}/head`, { signal: head.signal });
  await once(server, 'request');
  head.abort();
  await assert.rejects(pending, { name: 'AbortError' });

  const dump = stopping();
  const res = await agent.request(`${server.url}/body`);
  const dumped = res.body.dump({ signal: dump.signal });
  res.body.once('data', () => dump.abort());
  await assert.rejects(dumped, { name: 'AbortError' });
  assert.strictEqual(res.body.destroyed, true);
});

// A streamed request body is still going out when the response ends: the response is complete
// then, as undici and Node's client take it. The sending stops, the source is destroyed and
// the connection closes (it is mid-request); the body does not wait on the stalled upload.
test('a response that ends while the streamed request body is still going out completes at once', { timeout: 20000 }, async (t) => {
  const server = await earlyServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const sources = {
    Readable: () => Readable.from((function* () {
      for (let i = 0; i < 4096; i++) yield Buffer.alloc(16384, 1);
    })()),
    'async iterable': () => (async function* () {
      for (let i = 0; i < 4096; i++) yield Buffer.alloc(16384, 2);
    })(),
  };
  for (const [name, source] of Object.entries(sources)) {
    const body = source();
    const res = await agent.request(server.url, { method: 'POST', body });
    assert.strictEqual(res.statusCode, 200, name);
    assert.strictEqual(await res.body.text(), 'early', name);
    if (name === 'Readable') assert.ok(body.destroyed, 'the source is destroyed');
  }
  await until(() => Object.keys(agent.getCurrentStatus().sockets).length === 0, 5000, 'the connections to close');
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(status.freeSockets, {});
  assert.strictEqual(status.closeSocketCount, 2);
});

// The same with a body given whole (a Buffer, too large for the socket's buffers): the response
// is complete once it has all come, as Node's and undici's are, though the rest of the request
// is still to be written. The connection stays with the request until the rest is sent: it is
// closed after `bodyTimeout` when the server reads no more, at once when the request is aborted,
// and back in the pool when the server reads on (as Node's server drains an unread request).
test('a response that ends while a request body given whole is still going out completes at once', { timeout: 20000 }, async (t) => {
  const server = await earlyServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const body = Buffer.alloc(32 * 1024 * 1024, 1);
  const sockets = () => Object.keys(agent.getCurrentStatus().sockets).length;

  // Read whole, and by a loop; the server never reads the rest: the connection goes after the
  // body timeout (300 ms here).
  const res = await agent.request(server.url, { method: 'POST', body, bodyTimeout: 300 });
  assert.strictEqual(res.statusCode, 200);
  assert.strictEqual(await res.body.text(), 'early');
  const looped = await agent.request(server.url, { method: 'POST', body, bodyTimeout: 300 });
  const chunks = [];
  for await (const chunk of looped.body) chunks.push(chunk);
  assert.strictEqual(Buffer.concat(chunks).toString(), 'early');
  await until(() => sockets() === 0, 5000, 'the connections to close');
  assert.strictEqual(agent.getCurrentStatus().closeSocketCount, 2);
  assert.strictEqual(agent.getCurrentStatus().timeoutSocketCount, 2);
  assert.deepStrictEqual(agent.getCurrentStatus().freeSockets, {});

  // An abort once the response is read stops the sending (the default body timeout is 300 s):
  // the response stays as it was read.
  const controller = new AbortController();
  const aborted = await agent.request(server.url, { method: 'POST', body, signal: controller.signal });
  assert.strictEqual(await aborted.body.text(), 'early');
  controller.abort(new Error('stop'));
  await until(() => sockets() === 0, 5000, 'the aborted connection to close');
  assert.strictEqual(agent.getCurrentStatus().closeSocketCount, 3);
  assert.strictEqual(aborted.body.errored, null);

  // A server that answers at once and then reads the rest: the connection carries the next
  // request once the first has all gone out.
  const draining = await httpServer(t, (req, res) => res.end(`early ${req.method}`));
  const first = await agent.request(draining.url, { method: 'POST', body });
  assert.strictEqual(await first.body.text(), 'early POST');
  await until(() => Object.keys(agent.getCurrentStatus().freeSockets).length === 1, 10000, 'the connection to come back');
  const second = await agent.request(draining.url);
  assert.strictEqual(await second.body.text(), 'early GET');
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 4);
});

test('agent.destroy() ends agent.request()s: queued, waiting for the head, and mid-body', { timeout: 20000 }, async (t) => {
  const arrived = [];
  let notify = null;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/after') return res.end('after');
    // /body sends its head and part of its body; /head nothing. Both hold on.
    if (req.url === '/body') {
      res.writeHead(200);
      res.write('part');
    }
    arrived.push(req.url);
    if (notify) notify();
    return undefined;
  });
  const agent = new Agent({ maxSockets: 2 });
  t.after(() => agent.destroy());
  const both = new Promise((resolve) => {
    notify = () => arrived.length === 2 && resolve();
  });
  const head = agent.request(`${server.url}/head`);
  const body = agent.request(`${server.url}/body`);
  const queued = agent.request(`${server.url}/queued`);
  await both;
  const res = await body;
  const text = res.body.text();
  assert.deepStrictEqual(agent.getCurrentStatus().requests, { [`127.0.0.1:${server.port}:`]: 1 });

  agent.destroy();
  await assert.rejects(head, { code: 'ECONNRESET', message: 'socket hang up' });
  await assert.rejects(text, { code: 'ECONNRESET', message: 'aborted' });
  await assert.rejects(queued, { code: 'ERR_HYPERAGENT_AGENT_DESTROYED' });
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual([status.sockets, status.requests], [{}, {}]);
  // The agent stays usable, as Node's does.
  assert.strictEqual(await (await agent.request(`${server.url}/after`)).body.text(), 'after');
});

test('destroying the body mid-way frees the connection slot', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/endless') {
      res.writeHead(200);
      res.write('x'.repeat(1024));
    } else res.end('next');
  });
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const res = await agent.request(`${server.url}/endless`);
  res.body.destroy();
  assert.strictEqual(await (await agent.request(`${server.url}/next`)).body.text(), 'next');
});
