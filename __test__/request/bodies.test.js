'use strict';

// agent.request(): request bodies of every kind, their lengths, large ones, expect: 100-continue.
// Real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const crypto = require('node:crypto');
const { Readable } = require('node:stream');
const { once } = require('node:events');
const hyperagent = require('../..');
const { Agent } = hyperagent;
const { httpServer, rawServer, until, collected, received } = require('../helpers');
const { echoServer, sha, chunks, continueServer, continueAndEcho, earlyServer } = require('./helpers');

test('every body type is sent, with content-length when known and chunked otherwise', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const data = crypto.randomBytes(100_000);
  const bodies = {
    string: [data.toString('base64'), Buffer.from(data.toString('base64'))],
    buffer: [data, data],
    uint8array: [new Uint8Array(data), data],
    arraybuffer: [data.buffer.slice(data.byteOffset, data.byteOffset + data.length), data],
    readable: [Readable.from([data.subarray(0, 40_000), data.subarray(40_000)]), data],
    asyncIterable: [(async function* gen() {
      yield data.subarray(0, 1);
      yield data.subarray(1);
    })(), data],
  };
  for (const [kind, [body, expected]] of Object.entries(bodies)) {
    const res = await agent.request(server.url, { method: 'POST', body });
    const echo = await res.body.json();
    assert.strictEqual(echo.length, expected.length, kind);
    assert.strictEqual(echo.sha256, sha(expected), kind);
    const streamed = kind === 'readable' || kind === 'asyncIterable';
    assert.strictEqual(echo.headers['transfer-encoding'], streamed ? 'chunked' : undefined, kind);
    assert.strictEqual(echo.headers['content-length'], streamed ? undefined : String(expected.length), kind);
  }
  const none = await (await agent.request(server.url, { method: 'POST' })).body.json();
  assert.strictEqual(none.headers['content-length'], '0');
});

test('a streamed body or trailers go with a GET or a HEAD too, chunked, as with other methods', async (t) => {
  // What the server read, in headers (a HEAD's response has no body).
  const server = await httpServer(t, async (req, res) => {
    const { bytes, sha: digest } = await received(req);
    res.setHeader('x-length', bytes);
    res.setHeader('x-sha256', digest);
    res.setHeader('x-te', req.headers['transfer-encoding'] ?? 'none');
    res.setHeader('x-trailer', req.trailers['x-sum'] ?? 'none');
    res.end();
  });
  const agent = new Agent();
  const d = new hyperagent.Dispatcher();
  t.after(() => { agent.destroy(); d.destroy(); });
  const undici = require('../undici');
  const data = crypto.randomBytes(50_000);
  const readable = () => Readable.from([data.subarray(0, 20_000), data.subarray(20_000)]);
  const webStream = () => Readable.toWeb(readable());
  const read = (res) => ({ length: Number(res.headers['x-length']), sha: res.headers['x-sha256'], te: res.headers['x-te'], trailer: res.headers['x-trailer'] });
  const whole = { length: data.length, sha: sha(data), te: 'chunked', trailer: 'none' };
  for (const method of ['GET', 'HEAD']) {
    const calls = {
      'agent.request(), a Readable': () => agent.request(server.url, { method, body: readable() }),
      'agent.request(), a web stream': () => agent.request(server.url, { method, body: webStream() }),
      'd.request()': () => d.request({ origin: server.url, path: '/', method, body: readable() }),
      "undici's request() through d.dispatch()": () => undici.request(server.url, { dispatcher: d, method, body: readable() }),
    };
    for (const [how, call] of Object.entries(calls)) {
      const res = await call();
      await res.body.text();
      assert.deepStrictEqual(read(res), whole, `${method}, ${how}`);
    }
    // Trailers go after a chunked body only, a body given whole included.
    const res = await agent.request(server.url, { method, body: data, trailers: { 'x-sum': 'abc' } });
    await res.body.text();
    assert.deepStrictEqual(read(res), { ...whole, trailer: 'abc' }, `${method} with trailers`);
  }
  // A known length still goes as content-length.
  const res = await agent.request(server.url, { method: 'GET', body: readable(), headers: { 'content-length': String(data.length) } });
  await res.body.text();
  assert.deepStrictEqual(read(res), { ...whole, te: 'none' });
});

test('a string body goes as Buffer.from() encodes it: UTF-8, a lone surrogate as U+FFFD, at any length', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const strings = {
    empty: '',
    ascii: 'plain',
    multibyte: 'é€😀 ünïcödé',
    loneSurrogates: 'a\ud800b\udc00c\ud83d',
    jsonNotAscii: JSON.stringify({ name: 'Zoë', note: '→ ✓' }),
  };
  // Short strings (Rust encodes them) of around 1 KiB of UTF-8, what is encoded without a
  // buffer of its own, with a character of 1 to 4 bytes last; strings either side of the
  // length from which Buffer.from encodes them instead; and a long one.
  for (let bytes = 1015; bytes <= 1025; bytes++) {
    for (const last of ['x', 'é', '€', '😀']) {
      const rest = bytes - Buffer.byteLength(last);
      strings[`${bytes} B, ${last} last`] = '€'.repeat(Math.floor(rest / 3)) + 'y'.repeat(rest % 3) + last;
    }
  }
  for (const n of [511, 512, 513]) strings[`${n} characters`] = '€'.repeat(n);
  strings.long = 'ab€'.repeat(50_000);
  for (const [name, body] of Object.entries(strings)) {
    const expected = Buffer.from(body);
    const echo = await (await agent.request(server.url, { method: 'POST', body })).body.json();
    assert.strictEqual(echo.headers['content-length'], String(expected.length), name);
    assert.strictEqual(echo.length, expected.length, name);
    assert.strictEqual(echo.sha256, sha(expected), name);
  }
  // A content-length given is held to the encoded length, not the string's.
  const headers = { 'content-length': String(Buffer.byteLength('€')) };
  const echo = await (await agent.request(server.url, { method: 'POST', body: '€', headers })).body.json();
  assert.strictEqual(echo.sha256, sha(Buffer.from('€')));
  assert.throws(() => agent.request(server.url, { method: 'POST', body: '€', headers: { 'content-length': '1' } }), {
    code: 'ERR_HYPERAGENT_CONTENT_LENGTH_MISMATCH',
  });
});

test('a string body whose bytes were miscounted fails at once, and the agent goes on', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  // JavaScript counts a short string's bytes (Buffer.byteLength) and Rust encodes it: were the
  // count ever wrong, the request must fail rather than send a length its body does not have.
  const { byteLength } = Buffer;
  Buffer.byteLength = (value, ...rest) => (value === 'miscounted' ? 3 : byteLength(value, ...rest));
  try {
    await assert.rejects(agent.request(server.url, { method: 'POST', body: 'miscounted' }), /content-length 3 for a body of 10 bytes/);
  } finally {
    Buffer.byteLength = byteLength;
  }
  const echo = await (await agent.request(server.url, { method: 'POST', body: 'counted' })).body.json();
  assert.strictEqual(echo.sha256, sha(Buffer.from('counted')));
  assert.strictEqual(agent.getCurrentStatus().requestCount, 1);
});

test('a Readable body read whole is destroyed, even one made with autoDestroy off', async (t) => {
  const server = await httpServer(t, async (req, res) => {
    let n = 0;
    for await (const chunk of req) n += chunk.length;
    res.end(`got ${n}`);
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const autoDestroy of [false, true]) {
    let destroys = 0;
    const source = new Readable({
      autoDestroy,
      read() {
        this.push('abc');
        this.push(null);
      },
      destroy(err, callback) {
        destroys++;
        callback(err);
      },
    });
    const res = await agent.request(server.url, { method: 'POST', body: source });
    assert.strictEqual(await res.body.text(), 'got 3');
    // The server answered once it had the whole body, which the source's end ended.
    assert.deepStrictEqual([source.destroyed, source.errored, destroys], [true, null, 1], `autoDestroy: ${autoDestroy}`);
    await until(() => source.closed, 2000, 'the source closed');
  }
});

test('a Readable body is destroyed when the request ends before all of it is sent', { timeout: 20000 }, async (t) => {
  const server = await httpServer(t, (req, res) => {
    req.resume();
    if (req.url === '/early') res.end('early');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  // A source that sends a little, then waits for ever (as a stalled upload would).
  const stalled = () => {
    const source = new Readable({ read() {} });
    source.push('start');
    return source;
  };
  // Aborted: destroyed with the signal's reason.
  let source = stalled();
  const controller = new AbortController();
  const reason = new Error('stop');
  server.once('request', () => controller.abort(reason));
  await assert.rejects(agent.request(server.url, { method: 'POST', body: source, signal: controller.signal }), (err) => err === reason);
  if (!source.closed) await once(source, 'close');
  assert.strictEqual(source.errored, reason);
  // Failed (nobody listens).
  source = stalled();
  await assert.rejects(agent.request('http://127.0.0.1:1/', { method: 'POST', body: source }), { code: 'ECONNREFUSED' });
  if (!source.closed) await once(source, 'close');
  assert.strictEqual(source.destroyed, true);
  // Answered in full before the upload ends: destroyed without an error.
  source = stalled();
  const res = await agent.request(`${server.url}/early`, { method: 'POST', body: source });
  assert.strictEqual(await res.body.text(), 'early');
  if (!source.closed) await once(source, 'close');
  assert.strictEqual(source.errored, null);
});

test('a Blob or a web stream as the body, a Headers or a Map as the headers; chunks must be bytes', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const post = async (body, headers) => (await agent.request(server.url, { method: 'POST', body, headers })).body.json();
  const data = crypto.randomBytes(70_000);
  // A Blob goes with its size as content-length and its type as content-type (unless given).
  let echo = await post(new Blob([data.subarray(0, 10), data.subarray(10)], { type: 'application/x-test' }));
  assert.deepStrictEqual([echo.length, echo.sha256], [data.length, sha(data)]);
  assert.strictEqual(echo.headers['content-length'], String(data.length));
  assert.strictEqual(echo.headers['content-type'], 'application/x-test');
  echo = await post(new Blob([data]), { 'content-type': 'text/plain' });
  assert.deepStrictEqual([echo.sha256, echo.headers['content-type']], [sha(data), 'text/plain']);
  echo = await post(new Blob(['x']));
  assert.deepStrictEqual([echo.headers['content-length'], echo.headers['content-type']], ['1', undefined]);
  assert.throws(() => agent.request(server.url, { method: 'POST', body: new Blob(['12345']), headers: { 'content-length': '4' } }), {
    code: 'ERR_HYPERAGENT_CONTENT_LENGTH_MISMATCH',
  });
  // A type that would break the head (a header line smuggled in) is refused at once, as a
  // header value of the caller's own is.
  class Smuggling extends Blob {
    // eslint-disable-next-line class-methods-use-this
    get type() { return 'text/html\r\nx-injected: true'; }
  }
  assert.throws(() => agent.request(server.url, { method: 'POST', body: new Smuggling(['x']) }), { code: 'ERR_INVALID_CHAR', message: /content-type/ });
  // A web ReadableStream streams chunked.
  echo = await post(new Blob([data]).stream());
  assert.deepStrictEqual([echo.sha256, echo.headers['transfer-encoding']], [sha(data), 'chunked']);
  // Headers from a Headers or a Map (of [name, value] pairs).
  echo = await post(undefined, new Headers({ 'x-a': '1', 'X-B': '2' }));
  assert.deepStrictEqual([echo.headers['x-a'], echo.headers['x-b']], ['1', '2']);
  echo = await post(undefined, new Map([['x-a', '1'], ['x-b', ['2', '3']]]));
  assert.deepStrictEqual([echo.headers['x-a'], echo.headers['x-b']], ['1', '2, 3']);
  assert.throws(() => agent.request(server.url, { headers: new Set(['x-a']) }), { code: 'ERR_INVALID_ARG_VALUE' });
  // A source whose chunks are not bytes fails the request rather than sending something else.
  for (const body of [[1, 2, 3], new Set([{ a: 1 }]), (async function* gen() { yield { a: 1 }; })()]) {
    await assert.rejects(agent.request(server.url, { method: 'POST', body }), { code: 'ERR_INVALID_ARG_TYPE' });
  }
  assert.deepStrictEqual((await post(['a', Buffer.from('b'), new Uint8Array([99])])).length, 3);
});

test('a FormData or URLSearchParams body goes as fetch sends it, byte for byte', async (t) => {
  const received = [];
  const server = await httpServer(t, async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    received.push({ type: req.headers['content-type'], length: req.headers['content-length'], body: Buffer.concat(chunks) });
    res.end();
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const file = crypto.randomBytes(300_000);
  const form = () => {
    const f = new FormData();
    f.append('plain', 'value');
    f.append('lines', 'a\nb\rc\r\nd');
    f.append('na"me\nwith\r\nbreaks', 'é ✓');
    f.append('file', new File([file], 'da"ta\n.bin', { type: 'application/x-test' }));
    f.append('blob', new Blob(['untyped']));
    f.append('empty', new File([], 'empty.txt'));
    return f;
  };
  const params = () => new URLSearchParams({ a: '1', b: 'x y&z', c: 'é' });
  for (const body of [form, params]) {
    await (await fetch(server.url, { method: 'POST', body: body() })).arrayBuffer();
    await (await agent.request(server.url, { method: 'POST', body: body() })).body.dump();
  }
  assert.strictEqual(received.length, 4);
  // The multipart boundaries are random (and of different lengths): each is put back to one
  // name before comparing; each length is its own body's.
  const boundaryOf = (r) => /boundary=(.+)$/.exec(r.type)[1];
  const unbounded = (r) => ({
    type: r.type.replace(boundaryOf(r), 'B'),
    length: Number(r.length) === r.body.length,
    body: sha(Buffer.from(r.body.toString('latin1').split(boundaryOf(r)).join('B'), 'latin1')),
  });
  const [viaFetch, ours] = [unbounded(received[0]), unbounded(received[1])];
  assert.deepStrictEqual(ours, { ...viaFetch, type: 'multipart/form-data; boundary=B', length: true });
  assert.ok(received[1].body.includes(file));
  assert.deepStrictEqual(received[3], received[2]);
  assert.strictEqual(received[3].type, 'application/x-www-form-urlencoded;charset=UTF-8');
  // A content-type of the caller's stays.
  await (await agent.request(server.url, { method: 'POST', body: params(), headers: { 'content-type': 'text/plain' } })).body.dump();
  assert.strictEqual(received[4].type, 'text/plain');
});

test('a content-length given with a body is held to; a failing body source rejects with its own error', async (t) => {
  const complete = [];
  const server = await httpServer(t, (req, res) => {
    let n = 0;
    req.on('data', (c) => { n += c.length; });
    req.on('error', () => {});
    req.on('end', () => {
      complete.push(n);
      res.end(`got ${n}`);
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const post = (headers, body) => agent.request(server.url, { method: 'POST', headers, body });
  const mismatch = { code: 'ERR_HYPERAGENT_CONTENT_LENGTH_MISMATCH' };
  // A body of known length: refused at once.
  assert.throws(() => post({ 'content-length': '10' }, '12345'), mismatch);
  assert.throws(() => post({ 'content-length': '3' }, Buffer.from('12345')), mismatch);
  assert.throws(() => post({ 'content-length': '5' }), mismatch);
  for (const bad of ['abc', '-1', '1.5', '']) {
    assert.throws(() => post({ 'content-length': bad }, ''), { code: 'ERR_INVALID_ARG_VALUE' }, bad);
  }
  // A stream: held to the length as it goes, past it or short of it.
  const stream = (...parts) => Readable.from(parts.map((p) => Buffer.from(p)));
  await assert.rejects(post({ 'content-length': '3' }, stream('12', '345')), { ...mismatch, message: /is 3 but the body is at least 5 bytes/ });
  await assert.rejects(post({ 'content-length': '10' }, stream('12345')), { ...mismatch, message: /is 10 but the body is 5 bytes/ });
  assert.strictEqual(await (await post({ 'content-length': '5' }, stream('12', '345'))).body.text(), 'got 5');
  // A length of 0 goes out whole with the head: a source with bytes in it still fails it.
  await assert.rejects(post({ 'content-length': '0' }, stream('', 'abc')), { ...mismatch, message: /is 0 but the body is at least 3 bytes/ });
  assert.strictEqual(await (await post({ 'content-length': '0' }, stream('', ''))).body.text(), 'got 0');
  // A source that fails: the request rejects with the source's error.
  const thrown = new Error('source broke');
  await assert.rejects(post(undefined, (async function* gen() {
    yield 'abc';
    throw thrown;
  })()), (err) => err === thrown);
  // One that throws a falsy value: an Error that says what was thrown (a falsy rejection
  // reads as none to undici's request()); another value is the rejection as it was thrown.
  const thrower = (value) => (async function* gen() {
    yield 'abc';
    throw value;
  })();
  for (const [value, said] of [[null, 'null'], [0, '0'], ['', '""']]) {
    await assert.rejects(post(undefined, thrower(value)), (err) => err instanceof Error && err.message === `the request body's source threw ${said}`);
  }
  await assert.rejects(post(undefined, thrower('oops')), (err) => err === 'oops');
  const destroyed = new Error('readable broke');
  await assert.rejects(post(undefined, new Readable({ read() { this.destroy(destroyed); } })), (err) => err === destroyed);
  // Only the matching requests reached the server whole (a length of 0 may have, before it
  // failed); the agent goes on.
  assert.deepStrictEqual(complete.filter((n) => n > 0), [5]);
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'got 0');
});

test('large bodies both ways arrive intact', async (t) => {
  const size = 16 * 1024 * 1024;
  const down = crypto.randomBytes(size);
  const server = await echoServer(t, (req, res) => {
    if (req.url !== '/down') return false;
    res.end(down);
    return true;
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const up = crypto.randomBytes(size);
  const echo = await (await agent.request(`${server.url}/up`, { method: 'PUT', body: Readable.from(chunks(up, 65536)) })).body.json();
  assert.strictEqual(echo.sha256, sha(up));
  const res = await agent.request(`${server.url}/down`);
  const got = Buffer.from(await res.body.arrayBuffer());
  assert.strictEqual(got.length, size);
  assert.strictEqual(sha(got), sha(down));
});

// A large Buffer body is sent from the Buffer's own memory (no copy): the bytes arrive as they
// are, whatever view they come in, and the Buffer is let go of once the request is over, however
// it ends: answered, answered before its upload ended, aborted mid-upload, or never connected.
test('a large body given whole is sent as it was when request() was called, and its Buffer is let go of whatever ends the request', { timeout: 30000 }, async (t) => {
  const server = await echoServer(t);
  const early = await earlyServer(t);
  let stalled;
  const receiving = new Promise((resolve) => (stalled = resolve));
  const stall = await rawServer(t, (socket) => socket.once('data', () => {
    socket.pause();
    stalled();
  }));
  const agent = new Agent();
  t.after(() => agent.destroy());

  // Views at an offset into a larger memory, every kind of them; one Buffer sent by many
  // requests at once.
  const backing = crypto.randomBytes(300 * 1024);
  const views = [
    backing.subarray(1000, 1000 + 100 * 1024),
    new Uint8Array(backing.buffer, backing.byteOffset + 7, 64 * 1024),
    new DataView(backing.buffer, backing.byteOffset + 3, 20 * 1024),
    backing.buffer.slice(0, 128 * 1024),
  ];
  for (const view of views) {
    const bytes = view instanceof ArrayBuffer ? Buffer.from(view) : Buffer.from(view.buffer, view.byteOffset, view.byteLength);
    const echo = await (await agent.request(`${server.url}/view`, { method: 'POST', body: view })).body.json();
    assert.deepStrictEqual([echo.length, echo.sha256], [bytes.length, sha(bytes)]);
  }
  // A view over a resizable ArrayBuffer is sent as it was when the request was made, though
  // the buffer shrinks at once.
  const resizable = new ArrayBuffer(1024 * 1024, { maxByteLength: 2 * 1024 * 1024 });
  const before = crypto.randomBytes(resizable.byteLength);
  before.copy(Buffer.from(resizable));
  const pending = agent.request(`${server.url}/resizable`, { method: 'POST', body: new Uint8Array(resizable) });
  resizable.resize(0);
  const echoed = await (await pending).body.json();
  assert.deepStrictEqual([echoed.length, echoed.sha256], [before.length, sha(before)]);
  // Whatever the program does with the memory once request() has returned (detach it by a
  // transfer, write into a SharedArrayBuffer) changes nothing of what is sent.
  const detachable = crypto.randomBytes(512 * 1024);
  const kept = Buffer.from(detachable);
  const pendingDetached = agent.request(`${server.url}/detached`, { method: 'POST', body: detachable });
  structuredClone(detachable.buffer, { transfer: [detachable.buffer] });
  assert.strictEqual(detachable.length, 0, 'detached');
  const echoDetached = await (await pendingDetached).body.json();
  assert.deepStrictEqual([echoDetached.length, echoDetached.sha256], [kept.length, sha(kept)]);
  const sab = Buffer.from(new SharedArrayBuffer(256 * 1024)).fill(1);
  const sabBefore = Buffer.from(sab);
  const pendingShared = agent.request(`${server.url}/sab`, { method: 'POST', body: sab });
  sab.fill(2);
  const echoShared = await (await pendingShared).body.json();
  assert.deepStrictEqual([echoShared.length, echoShared.sha256], [sabBefore.length, sha(sabBefore)]);
  const shared = crypto.randomBytes(256 * 1024);
  const echoes = await Promise.all(Array.from({ length: 20 }, async () => (await agent.request(`${server.url}/many`, { method: 'PUT', body: shared })).body.json()));
  assert.ok(echoes.every((e) => e.sha256 === sha(shared)));

  // Each way a request ends, with a Buffer only the request holds.
  const send = async (fn) => {
    let weak;
    await (async () => {
      const body = Buffer.alloc(4 * 1024 * 1024, 7);
      weak = new WeakRef(body);
      await fn(body);
    })();
    return collected(weak);
  };
  assert.ok(await send(async (body) => {
    const echo = await (await agent.request(`${server.url}/answered`, { method: 'POST', body })).body.json();
    assert.strictEqual(echo.length, body.length);
  }), 'answered');
  assert.ok(await send(async (body) => {
    // Answered after 100 kB; the rest goes on (and is not read) until the body timeout.
    const res = await agent.request(early.url, { method: 'POST', body, bodyTimeout: 300 });
    assert.strictEqual(await res.body.text(), 'early');
  }), 'answered early');
  assert.ok(await send(async (body) => {
    const controller = new AbortController();
    const pending = agent.request(`http://127.0.0.1:${stall.port}/`, { method: 'POST', body, signal: controller.signal });
    await receiving;
    controller.abort();
    await assert.rejects(pending, { name: 'AbortError' });
  }), 'aborted mid-upload');
  assert.ok(await send(async (body) => {
    const closed = net.createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address();
    closed.close();
    await once(closed, 'close');
    await assert.rejects(agent.request(`http://127.0.0.1:${port}/`, { method: 'POST', body }), { code: 'ECONNREFUSED' });
  }), 'never connected');
});

test('expect: 100-continue holds the body until the server agrees', async (t) => {
  let sawContinueFirst = null;
  const url = await continueServer(t, (req, res) => {
    let early = false;
    req.on('data', () => {
      if (sawContinueFirst === null) sawContinueFirst = !early;
    });
    early = true;
    setImmediate(() => {
      early = false;
      continueAndEcho(req, res);
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(url, {
    method: 'POST',
    headers: { expect: '100-continue' },
    body: 'payload',
  });
  assert.strictEqual(await res.body.text(), 'got payload');
  assert.strictEqual(sawContinueFirst, true, 'the body waited for 100 Continue');
});

// A server that refuses at once (a final status instead of 100 Continue) still gets the held
// body afterwards (RFC 9110 lets the client send it), so the connection carries the next request.
test('expect: 100-continue answered with a final status: the body still goes, the connection is kept', async (t) => {
  const got = [];
  const server = await rawServer(t, (socket) => {
    let buffered = '';
    let answered = 0;
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      got.push(chunk.toString('latin1'));
      if (answered === 0 && buffered.includes('\r\n\r\n')) {
        answered = 1;
        socket.write('HTTP/1.1 413 Payload Too Large\r\ncontent-length: 3\r\n\r\nbig');
      } else if (answered === 1 && /GET \/next /.test(buffered)) {
        answered = 2;
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nnext');
      }
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = `http://127.0.0.1:${server.port}`;
  const res = await agent.request(`${url}/upload`, {
    method: 'POST',
    headers: { expect: '100-continue' },
    body: 'payload',
  });
  assert.strictEqual(res.statusCode, 413);
  assert.strictEqual(await res.body.text(), 'big');
  // The response ended before the held body went out (it was answered early): the connection
  // comes back to the pool once the body is sent, a moment after.
  await until(() => Object.values(agent.getCurrentStatus().freeSockets).reduce((a, b) => a + b, 0) === 1, 5000, 'the connection back in the pool');
  const next = await agent.request(`${url}/next`);
  assert.strictEqual(await next.body.text(), 'next');
  assert.strictEqual(server.connectionCount, 1);
  const sent = got.join('');
  assert.ok(sent.indexOf('payload') > 0 && sent.indexOf('payload') < sent.indexOf('GET /next '), sent);
});
