'use strict';

// The handler contract of dispatch(), under many requests made at random (from a fixed seed, so
// that a failure repeats): both of undici's handler APIs, handlers that throw, pause, resume
// and abort at each stage, every kind of request body, responses that end, stream, carry
// trailers or are cut, over HTTP/1.1 and HTTP/2, and the dispatcher closed or destroyed while
// requests are in flight. Each request must reach exactly one end (its completion or its
// error; a throw from the completion callback adds its error after it, as undici routes it),
// no callback may come after the end, and none may be left waiting.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');
const path = require('node:path');
const { once } = require('node:events');
const { dispatcher } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));

// A deterministic generator of numbers in [0, 1).
function random(seed) {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
}

// The body of each path's response, in bytes, when it comes whole (a cut one never completes:
// its length is none).
const LENGTHS = { '/ok': 2, '/big': 256 * 1024, '/streamed': 2, '/trailers': 1 };

// What the server does with a request, by its path.
function answer(h2) {
  return (req, res) => {
    req.on('error', () => {});
    req.resume();
    req.on('end', () => {
      const mode = req.url.slice(1);
      if (mode === 'cut') {
        res.write('part');
        if (h2) res.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        else res.socket.destroy();
      } else if (mode === 'big') {
        res.end(Buffer.alloc(256 * 1024, 97));
      } else if (mode === 'streamed') {
        res.write('a');
        setImmediate(() => res.end('b'));
      } else if (mode === 'trailers' && req.method !== 'HEAD') {
        res.setHeader('trailer', 'x-t');
        res.write('x');
        res.addTrailers({ 'x-t': '1' });
        res.end();
      } else {
        res.end('ok');
      }
    });
  };
}

async function serve(t, h2) {
  const server = h2
    ? http2.createSecureServer({ key: fixture('localhost-key.pem'), cert: fixture('localhost-chain.pem'), allowHTTP1: true }, answer(true))
    : http.createServer(answer(false));
  const sessions = [];
  server.on('session', (s) => sessions.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const s of sessions) s.destroy();
    if (!h2) server.closeAllConnections();
    server.close();
  });
  return h2 ? `https://localhost:${server.address().port}` : `http://127.0.0.1:${server.address().port}`;
}

function bodyOf(pick) {
  switch (pick(['none', 'string', 'buffer', 'iterable', 'failing', 'web'])) {
    case 'string': return 'a string';
    case 'buffer': return Buffer.from('a buffer');
    case 'iterable': return (async function* body() { yield 'a'; yield Buffer.from('b'); })();
    case 'failing': return (async function* body() { yield 'a'; throw new Error('the body fails'); })();
    case 'web': return new ReadableStream({ start(c) { c.enqueue(new Uint8Array([1, 2])); c.close(); } });
    default: return undefined;
  }
}

// One request at random; resolves with its problems (none when the contract held) once it
// reached its end.
function randomRequest(d, origin, next, i) {
  const pick = (list) => list[Math.floor(next() * list.length)];
  const controlled = next() < 0.5;
  const completion = controlled ? 'onResponseEnd' : 'onComplete';
  const throwIn = next() < 0.3
    ? pick(controlled ? ['onRequestStart', 'onResponseStart', 'onResponseData', 'onResponseEnd'] : ['onConnect', 'onHeaders', 'onData', 'onComplete'])
    : null;
  const abortIn = next() < 0.2 ? pick(['start', 'head', 'data']) : null;
  const pauses = next() < 0.25;
  const route = pick(['/ok', '/big', '/streamed', '/trailers', '/cut']);
  const body = bodyOf(pick);
  const method = body === undefined ? pick(['GET', 'HEAD', 'DELETE', 'POST']) : pick(['POST', 'PUT']);
  const log = [];
  const problems = [];
  let ends = 0;
  // The ends it is to have: one, or two when its completion callback throws (the error follows).
  let awaited = 1;
  let settle;
  const settled = new Promise((resolve) => { settle = resolve; });
  let bytes = 0;
  const end = (kind) => {
    ends++;
    // A completed response came whole: no chunk lost, however the handler paused.
    const expected = method === 'HEAD' ? 0 : LENGTHS[route];
    if (kind === 'completion' && ends === 1 && bytes !== expected) {
      problems.push(`#${i}: completed with ${bytes} bytes of ${expected} (${log.join(', ')})`);
    }
    if (kind === 'completion' && throwIn === completion) awaited = 2;
    if (ends > awaited) problems.push(`#${i}: ${ends} ends (${log.join(', ')})`);
    // A turn later, so that a callback after the end is seen.
    if (ends === awaited) setImmediate(() => settle(problems));
  };
  // A callback of the handler: logged, checked against the end, then run; throws if chosen.
  const callback = (name, fn) => (...args) => {
    log.push(name);
    if (ends > 0) problems.push(`#${i}: ${name} after the end (${log.join(', ')})`);
    const result = fn(...args);
    if (throwIn === name) throw new Error(`thrown from ${name}`);
    return result;
  };
  let abort = null;
  const handler = controlled ? {
    onRequestStart: callback('onRequestStart', (controller) => { if (abortIn === 'start') controller.abort(new Error('aborted at start')); }),
    onResponseStart: callback('onResponseStart', (controller) => {
      if (abortIn === 'head') controller.abort();
      else if (pauses) {
        controller.pause();
        setImmediate(() => controller.resume());
      }
    }),
    onResponseData: callback('onResponseData', (controller, chunk) => {
      bytes += chunk.length;
      if (abortIn === 'data') controller.abort();
    }),
    onResponseEnd: callback('onResponseEnd', () => end('completion')),
    onResponseError: (controller, err) => {
      log.push(`onResponseError(${err?.code ?? err?.message})`);
      if (!(err instanceof Error)) problems.push(`#${i}: error ${err} is not an Error`);
      end('error');
    },
  } : {
    onConnect: callback('onConnect', (fn) => {
      abort = fn;
      if (abortIn === 'start') abort(new Error('aborted at start'));
    }),
    onHeaders: callback('onHeaders', (status, rawHeaders, resume) => {
      if (!Array.isArray(rawHeaders) || !rawHeaders.every(Buffer.isBuffer)) problems.push(`#${i}: raw headers not Buffers`);
      if (abortIn === 'head') abort();
      else if (pauses) {
        setImmediate(resume);
        return false;
      }
      return true;
    }),
    onData: callback('onData', (chunk) => {
      if (!Buffer.isBuffer(chunk)) problems.push(`#${i}: a chunk not a Buffer`);
      bytes += chunk.length;
      if (abortIn === 'data') abort();
      return true;
    }),
    onComplete: callback('onComplete', () => end('completion')),
    onError: (err) => {
      log.push(`onError(${err?.code ?? err?.message})`);
      if (!(err instanceof Error)) problems.push(`#${i}: error ${err} is not an Error`);
      end('error');
    },
  };
  const opts = {
    origin: next() < 0.5 ? origin : new URL(origin),
    path: route,
    method,
    headers: pick([undefined, { 'x-a': '1' }, ['x-b', '2'], { 'x-c': ['1', '2'] }]),
    body,
  };
  try {
    d.dispatch(opts, handler);
  } catch (err) {
    problems.push(`#${i}: dispatch threw ${err.message}`);
    settle(problems);
  }
  return { settled, log, describe: () => `#${i} ${method} ${route} (${controlled ? 'newer' : 'older'} API) ${log.join(', ')}` };
}

const LATE = Symbol('late');

// What `promise` gives, or LATE when it has not settled within 10 seconds.
async function bounded(promise) {
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(resolve, 10000, LATE); });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

// `composed`: the requests go through an interceptor that passes them on, so that a handler of
// the older API meets the dispatcher through the newer one (compose()'s adapter).
async function run(t, { h2, seed, count, stop, composed = false }) {
  const origin = await serve(t, h2);
  const own = dispatcher(t, h2 ? { allowH2: true, ca: fixture('ca.pem') } : { maxSockets: 4 });
  const d = composed ? own.compose((dispatch) => (opts, handler) => dispatch(opts, handler)) : own;
  const next = random(seed);
  const requests = [];
  let stopping = null;
  const completed = (r) => /onComplete|onResponseEnd/.test(r.log.join(' '));
  const end = () => (stopping = stop.how === 'destroy' ? d.destroy() : d.close());
  for (let i = 0; i < count; i++) {
    requests.push(randomRequest(d, origin, next, i));
    // Some requests start in later turns of the loop, after others have gone some way.
    if (next() < 0.3) await new Promise(setImmediate);
    // The stop comes once a request has completed, so that both kinds of end are met however
    // slow the machine (an HTTP/2 session may not be up after the first requests).
    if (stop !== undefined && stopping === null && i >= stop.at && requests.some(completed)) end();
  }
  if (stop !== undefined && stopping === null) {
    const first = Promise.any(requests.map((r) => r.settled.then(() => assert.ok(completed(r)))));
    await bounded(first.catch(() => {}));
    end();
  }
  // Every request reaches its end, and close() or destroy() settles: nothing is left waiting
  // (bounded, so that what never ends fails the test with its story instead of hanging it).
  const problems = [];
  await Promise.all(requests.map(async (r) => {
    const outcome = await bounded(r.settled);
    if (outcome === LATE) problems.push(`never ended: ${r.describe()}`);
    else problems.push(...outcome);
  }));
  if (stopping !== null && await bounded(stopping) === LATE) problems.push(`${stop.how}() never settled`);
  assert.deepStrictEqual(problems, []);
  // The ends were of both kinds (the scenarios did what they are for).
  const logs = requests.map((r) => r.log.join(' '));
  assert.ok(logs.some((l) => /onComplete|onResponseEnd/.test(l)), 'no request completed');
  assert.ok(logs.some((l) => /onError|onResponseError/.test(l)), 'no request failed');
  return d;
}

test('the handler contract holds for requests at random, HTTP/1.1', async (t) => {
  await run(t, { h2: false, seed: 1, count: 300 });
});

test('the handler contract holds for requests at random, HTTP/2', async (t) => {
  await run(t, { h2: true, seed: 2, count: 300 });
});

test('the handler contract holds when the dispatcher closes with requests in flight', async (t) => {
  const d = await run(t, { h2: false, seed: 3, count: 300, stop: { at: 150, how: 'close' } });
  assert.strictEqual(d.closed, true);
});

test('the handler contract holds when the dispatcher is destroyed with requests in flight, HTTP/2', async (t) => {
  const d = await run(t, { h2: true, seed: 4, count: 300, stop: { at: 150, how: 'destroy' } });
  assert.strictEqual(d.destroyed, true);
});

test('the handler contract holds through a composed interceptor, HTTP/1.1, closing with requests in flight', async (t) => {
  const d = await run(t, { h2: false, seed: 5, count: 300, stop: { at: 200, how: 'close' }, composed: true });
  assert.strictEqual(d.closed, true);
});

test('the handler contract holds through a composed interceptor, HTTP/2', async (t) => {
  await run(t, { h2: true, seed: 6, count: 300, composed: true });
});
