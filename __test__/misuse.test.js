'use strict';

// A seeded storm of odd calls on every path (agent.request(), http.request and https.request
// with the agent, dispatch() with both handler APIs, undici's request() and fetch through the
// Dispatcher): odd option values, headers, bodies, methods and URLs; signals aborted at random
// moments with any reason (null, 0 and '' included); bodies read, paused or destroyed;
// handlers that throw, pause and abort; agents destroyed mid-request. What must hold whatever a
// program passes: each call throws at once or settles (its promise, its handler's end, its
// stream's close); what the library throws or fails with carries a code; once the agents are
// destroyed, no request is left held in the addon. STORM_SEED and STORM_N (calls, 300) run
// another storm (the seed fixes its choices; eight calls run at a time, and which of them takes
// the next choice depends on when each settles).

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const https = require('node:https');
const { Readable } = require('node:stream');
const undici = require('./undici');
const { Agent, HttpsAgent, Dispatcher } = require('..');
const binding = require('../lib/native');
const { httpServer, listen, until } = require('./helpers');
const { random } = require('./storm-paths');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
const ca = fixture('ca.pem');

// What the servers do, by path.
function answer(req, res) {
  req.on('error', () => {});
  const url = req.url;
  if (url.startsWith('/close')) req.socket.destroy();
  else if (url.startsWith('/big')) res.end(Buffer.alloc(200_000, 'b'));
  else if (url.startsWith('/chunk')) {
    res.write('a');
    setImmediate(() => res.end('b'));
  } else if (url.startsWith('/redirect')) {
    res.writeHead(302, { location: '/' });
    res.end();
  } else if (url.startsWith('/stall')) {
    // Answers nothing, and closes the connection a moment later (the request's abort, its
    // timeout or its agent's destroy may come first).
    setTimeout(() => req.socket.destroy(), 20);
  } else {
    let n = 0;
    req.on('data', (c) => (n += c.length));
    req.on('end', () => res.end(`got ${n}`));
  }
}

// Errors the storm makes itself (a body source's, a handler's): a call may fail with them.
class Own extends Error {}

test('a storm of odd calls: every call throws at once or settles, with a coded error, and nothing stays held', { timeout: 120_000 }, async (t) => {
  const seed = Number(process.env.STORM_SEED || 20261206);
  const N = Number(process.env.STORM_N || 300);
  const rand = random(seed);
  const chance = (p) => rand() < p;
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const throwing = new Proxy({}, { get() { throw new Own('a getter threw'); } });
  const odd = () => pick([undefined, null, 0, -1, 1.5, NaN, Infinity, '', 'x', 'a\r\nb', '\ud800', Symbol('s'), {}, [], () => 1, true, 10n, Buffer.from('b'), Object.create(null), throwing, 'x'.repeat(70_000)]);
  // Any value a program may abort with (not one whose properties throw: Node's own streams
  // read a reason's `stack`).
  const reason = () => pick([undefined, null, 0, '', false, 'why', new Own('abort'), Symbol('r'), {}]);

  const plain = await httpServer(t, answer);
  const secure = await listen(t, https.createServer({ key: fixture('localhost-key.pem'), cert: fixture('localhost-chain.pem') }, answer));
  const origins = { http: plain.url, https: `https://localhost:${secure.address().port}` };

  const options = () => {
    const o = {};
    for (const name of ['keepAlive', 'maxSockets', 'maxFreeSockets', 'timeout', 'freeSocketTimeout', 'scheduling', 'maxTotalSockets', 'replay', 'headersTimeout', 'bodyTimeout']) {
      if (chance(0.1)) o[name] = chance(0.5) ? odd() : pick([0, 1, 2, 50, 'lifo', 'fifo', true, false]);
    }
    return o;
  };
  const body = () => pick([
    () => undefined, () => 'text', () => Buffer.alloc(100_000, 1), () => new Uint8Array(5),
    () => Readable.from(['a', 'b']),
    () => Readable.from((async function* () { yield 'x'; throw new Own('source'); })()),
    () => (async function* () { yield Buffer.from('q'); yield 'r'; })(),
    () => new Blob(['blob']),
    () => new ReadableStream({ start(c) { c.enqueue(new Uint8Array([1])); c.close(); } }),
    () => new ReadableStream({ pull(c) { c.error(new Own('web source')); } }),
    odd,
  ])();
  const wellFormed = () => pick([undefined, { 'x-a': 'b' }, { 'x-a': ['1', '2'] }, { 'bad name': 'v' }, { 'x-v': 'a\nb' }, { 'content-length': '3' }, { 'content-length': 'abc' }, { host: 'other' }, { connection: 'close' }, { expect: '100-continue' }, { 'transfer-encoding': 'chunked' }]);
  const headers = () => (chance(0.7) ? wellFormed() : pick([['x-a', 'b'], ['odd'], { 'x-o': odd() }, odd()]));
  const route = () => pick(['/', '/close', '/big', '/chunk', '/redirect', '/stall', '/?q=1', `/${'p'.repeat(9000)}`, 'nope', '/a b']);
  const method = () => pick(['GET', 'GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'get', 'bad method', odd()]);

  // The body of a response, read one way or another.
  const read = async (stream) => {
    stream.on('error', () => {});
    switch (pick(['text', 'iterate', 'destroy', 'destroyWithError', 'resume', 'pauseThenDestroy'])) {
      case 'text': return typeof stream.text === 'function' ? stream.text() : stream.toArray();
      case 'iterate': {
        let n = 0;
        for await (const chunk of stream) if (++n > 1 && chunk.length > 0 && chance(0.5)) break;
        return undefined;
      }
      case 'destroy': return stream.destroy();
      case 'destroyWithError': return stream.destroy(new Own('destroyed'));
      case 'resume': return stream.resume();
      default:
        stream.pause();
        await new Promise((resolve) => setImmediate(resolve));
        return stream.destroy();
    }
  };

  // What a library error must have: a code (Node's, undici's or ours), or be an abort.
  const uncoded = [];
  const check = (where, err) => {
    if (!(err instanceof Error) || err instanceof Own) return;
    if (typeof err.code === 'string' || err.name === 'AbortError') return;
    uncoded.push(`${where}: ${err.stack}`);
  };

  const agents = [];
  const calls = {
    async request(agent, base, signal) {
      const res = await agent.request(chance(0.95) ? base + route() : odd(), chance(0.95)
        ? { method: method(), headers: headers(), body: body(), signal, headersTimeout: chance(0.2) ? pick([1, 5, odd()]) : undefined, trailers: chance(0.1) ? pick([{ 'x-t': '1' }, () => ({ 'x-t': '2' }), odd()]) : undefined }
        : odd());
      await read(res.body);
    },
    async dropIn(agent, base, signal, secureCall) {
      await new Promise((resolve, reject) => {
        const m = method();
        const req = (secureCall ? https : http).request(base + route(), { agent, method: typeof m === 'string' ? m : 'GET', headers: wellFormed() ?? {}, signal }, (res) => {
          res.on('error', () => {});
          res.on('close', resolve);
          if (chance(0.2)) res.destroy();
          else res.resume();
        });
        req.on('error', reject);
        if (chance(0.2)) setImmediate(() => req.destroy(chance(0.5) ? new Own('destroyed') : undefined));
        if (chance(0.3)) req.write(pick(['abc', Buffer.alloc(70_000)]));
        req.end();
      });
    },
    async dispatch(agent, base, signal, secureCall, d) {
      await new Promise((resolve) => {
        const legacy = chance(0.5);
        const handler = legacy ? {
          onConnect(abort) { if (chance(0.1)) abort(reason()); },
          onHeaders(status, raw, resume) {
            this.resume = resume;
            if (chance(0.1)) throw new Own('onHeaders');
            if (chance(0.3)) { setImmediate(resume); return false; }
            return true;
          },
          onData() {
            if (chance(0.05)) throw new Own('onData');
            if (chance(0.2)) { setImmediate(this.resume); return false; }
            return true;
          },
          onComplete: resolve,
          onError(err) { check('dispatch', err); resolve(); },
        } : {
          onRequestStart(controller) { if (chance(0.1)) controller.abort(reason()); },
          onResponseStart(controller) {
            if (chance(0.2)) { controller.pause(); setImmediate(() => controller.resume()); }
            if (chance(0.1)) throw new Own('onResponseStart');
          },
          onResponseData(controller) { if (chance(0.05)) controller.abort(new Own('abort')); },
          onResponseEnd: resolve,
          onResponseError(controller, err) { check('dispatch', err); resolve(); },
        };
        const m = method();
        try {
          d.dispatch(chance(0.95) ? { origin: chance(0.9) ? base : odd(), path: route(), method: m, body: chance(0.3) ? body() : undefined, headers: chance(0.3) ? headers() : undefined } : odd(), handler);
        } catch (err) {
          // Thrown only to a handler without an error callback; here, bad options or handler.
          check('dispatch (thrown)', err);
          resolve();
        }
      });
    },
    async undici(agent, base, signal, secureCall, d) {
      const m = method();
      const res = await undici.request(base + route(), { dispatcher: d, method: typeof m === 'string' ? m : 'GET', body: chance(0.5) ? body() : undefined, headers: chance(0.5) ? headers() ?? undefined : undefined, signal });
      await read(res.body);
    },
    async fetch(agent, base, signal, secureCall, d) {
      const m = pick(['GET', 'POST', 'PUT', 'HEAD']);
      const res = await fetch(base + route(), { dispatcher: d, method: m, body: m === 'GET' || m === 'HEAD' ? undefined : pick(['x', new Uint8Array(10)]), signal });
      if (res.body === null) return;
      switch (pick(['text', 'cancel', 'readOne'])) {
        case 'text': await res.text(); break;
        case 'cancel': await res.body.cancel(); break;
        default: {
          const reader = res.body.getReader();
          await reader.read();
          await reader.cancel();
        }
      }
    },
  };

  const hung = [];
  let settled = 0;
  // Each path's calls, answered or failed (dispatch() counts as answered).
  const tally = {};
  const one = async (i) => {
    const secureCall = chance(0.3);
    let agent;
    try {
      agent = secureCall ? new HttpsAgent({ ca, allowH2: chance(0.3), ...options() }) : new Agent(options());
    } catch (err) {
      check('constructor', err);
      agent = secureCall ? new HttpsAgent({ ca }) : new Agent();
    }
    agents.push(agent);
    const kind = pick(Object.keys(calls));
    let d = null;
    if (kind === 'dispatch' || kind === 'undici' || kind === 'fetch') {
      try {
        d = chance(0.5) ? new Dispatcher(secureCall ? { https: agent } : { http: agent }) : new Dispatcher({ ca, ...options() });
      } catch (err) {
        check('constructor', err);
        d = new Dispatcher({ ca });
      }
    }
    const controller = chance(0.3) ? new AbortController() : null;
    if (controller !== null && chance(0.7)) setImmediate(() => controller.abort(reason()));
    if (chance(0.1)) setImmediate(() => agent.destroy());
    let timer;
    const bound = new Promise((resolve) => {
      timer = setTimeout(() => resolve('hung'), 10_000);
    });
    const call = calls[kind](agent, secureCall ? origins.https : origins.http, controller?.signal, secureCall, d)
      .then(() => 'answered', (err) => {
        // fetch's failures are its own TypeErrors, which carry no code, and their causes are
        // not all ours (Node 20's fetch fails a redirected typed-array body on a detached
        // ArrayBuffer, over its own dispatcher too): only that fetch settles is checked.
        if (kind !== 'fetch') check(kind, err);
        return 'failed';
      });
    const outcome = await Promise.race([call, bound]);
    clearTimeout(timer);
    if (outcome === 'hung') hung.push(`call ${i} (${kind}${secureCall ? ', TLS' : ''})`);
    else settled++;
    tally[`${kind} ${outcome}`] = (tally[`${kind} ${outcome}`] ?? 0) + 1;
    if (d !== null) {
      if (chance(0.5)) await d.close();
      else d.destroy();
    }
    if (chance(0.5)) await agent.close();
    else agent.destroy();
  };

  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < N) await one(next++);
  }));
  for (const agent of agents) agent.destroy();
  t.diagnostic(JSON.stringify(tally));
  assert.deepStrictEqual(hung, [], 'calls that never settled');
  assert.strictEqual(settled, N);
  assert.deepStrictEqual(uncoded, [], 'library errors without a code');
  await until(() => binding.heldOperations()[0] === 0, 5000, 'no request held in the addon');
});
