'use strict';

// agent.request() against real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const net = require('node:net');
const https = require('node:https');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { Readable } = require('node:stream');
const { finished } = require('node:stream/promises');
const { AsyncLocalStorage } = require('node:async_hooks');
const { once, getEventListeners, setMaxListeners } = require('node:events');
const hyperagent = require('..');
const { Agent, HttpsAgent } = hyperagent;
const { httpServer, streamingServer, rawServer, readRequest, eachRequest, request: httpGet, requestError, until, collected } = require('./helpers');

// An echo server: method, url, headers and a digest of the body.
async function echoServer(t, extra) {
  return httpServer(t, async (req, res) => {
    if (extra && extra(req, res)) return;
    const hash = crypto.createHash('sha256');
    let n = 0;
    try {
      for await (const chunk of req) {
        hash.update(chunk);
        n += chunk.length;
      }
    } catch {
      return; // the client gave up on its upload
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      method: req.method,
      url: req.url,
      headers: req.headers,
      length: n,
      sha256: hash.digest('hex'),
    }));
  });
}

const sha = (buf) => crypto.createHash('sha256').update(buf).digest('hex');
const tlsFixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));

test('a GET resolves with status, headers and a body stream', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.setHeader('x-many', ['1', '2']);
    res.end('hello');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(`${server.url}/path?q=1`);
  assert.strictEqual(res.statusCode, 200);
  assert.strictEqual(res.statusMessage, 'OK');
  assert.deepStrictEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
  assert.strictEqual(res.headers['x-many'], '1, 2');
  assert.strictEqual(res.headers['content-length'], '5');
  assert.ok(res.rawHeaders.includes('set-cookie'));
  assert.ok(res.body instanceof Readable);
  assert.strictEqual(await res.body.text(), 'hello');
});

test('rawHeaders: lower-case names, a repeated name\'s values together, as the README says; headers of any name', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.writeHead(200, ['X-A', '1', 'X-B', '2', 'x-a', '3', 'content-length', '2', 'Constructor', 'c']);
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(server.url);
  assert.deepStrictEqual(res.rawHeaders.slice(0, 6), ['x-a', '1', 'x-a', '3', 'x-b', '2']);
  assert.strictEqual(res.headers['x-a'], '1, 3');
  // A name Object.prototype also has is the header's own, as in Node's res.headers.
  assert.strictEqual(res.headers.constructor, 'c');
  assert.strictEqual(await res.body.text(), 'ok');
});

test('a response head with many header lines is taken as Node takes it', async (t) => {
  const server = await httpServer(t, (req, res) => {
    const count = Number(req.url.slice(1));
    const lines = [];
    for (let i = 0; i < count; i++) lines.push(`x-h${i}`, 'v');
    res.writeHead(200, lines);
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const count of [99, 150, 1000]) {
    const res = await agent.request(`${server.url}/${count}`);
    assert.strictEqual(res.headers[`x-h${count - 1}`], 'v', String(count));
    assert.strictEqual(await res.body.text(), 'ok');
  }
});

test('methods, URL forms and headers reach the server', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND']) {
    const res = await agent.request(`${server.url}/m`, { method, headers: { 'x-test': method } });
    const echo = await res.body.json();
    assert.strictEqual(echo.method, method);
    assert.strictEqual(echo.headers['x-test'], method);
    assert.strictEqual(echo.headers.host, `127.0.0.1:${server.port}`);
  }
  const viaUrl = await (await agent.request(new URL(`${server.url}/u?x=1`))).body.json();
  assert.strictEqual(viaUrl.url, '/u?x=1');
  const viaParts = await (await agent.request({ origin: server.url, path: '/parts' })).body.json();
  assert.strictEqual(viaParts.url, '/parts');
  const flat = await (await agent.request(server.url, { headers: ['x-a', '1', 'x-a', '2'] })).body.json();
  assert.strictEqual(flat.headers['x-a'], '1, 2');
});

test('{ origin, path } sends the path to that origin as given, never to another host', async (t) => {
  const seen = [];
  const server = await httpServer(t, (req, res) => {
    seen.push(req.url);
    res.end('origin');
  });
  const other = await httpServer(t, (req, res) => res.end('another host'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const origin = server.url;
  const otherHost = `127.0.0.1:${other.port}`;
  // A path that resolves to another host as a relative URL is a path of the origin.
  for (const path of [`//${otherHost}/x`, '/../../z', '/a"b<c>`|d']) {
    const res = await agent.request({ origin, path });
    assert.strictEqual(await res.body.text(), 'origin', path);
  }
  assert.deepStrictEqual(seen, [`//${otherHost}/x`, '/../../z', '/a%22b%3Cc%3E%60%7Cd']);
  assert.strictEqual(other.connections.length, 0);
  // Refused at once, as Node's http.request and undici refuse such paths.
  const refused = [
    [{ origin, path: `http://${otherHost}/y` }, 'ERR_INVALID_ARG_VALUE'],
    [{ origin, path: 'relative' }, 'ERR_INVALID_ARG_VALUE'],
    [{ origin, path: '/a b' }, 'ERR_UNESCAPED_CHARACTERS'],
    [{ origin, path: '/x\r\nInjected: 1' }, 'ERR_UNESCAPED_CHARACTERS'],
    [{ origin, path: 5 }, 'ERR_INVALID_ARG_TYPE'],
    [{ origin: `${origin}/base`, path: '/x' }, 'ERR_INVALID_ARG_VALUE'],
  ];
  for (const [input, code] of refused) {
    assert.throws(() => agent.request(input), { code }, JSON.stringify(input));
  }
  assert.strictEqual(seen.length, 3);
});

test('a URL given again goes where it names now: the same path of another origin, a URL object changed', async (t) => {
  const seen = [];
  const serve = (name) => (req, res) => {
    seen.push(`${name} ${req.url}`);
    res.end(name);
  };
  const a = await httpServer(t, serve('a'));
  const b = await httpServer(t, serve('b'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const send = async (input) => (await agent.request(input)).body.text();
  // { origin, path }: each pair, again and again, alternating.
  for (let i = 0; i < 2; i++) {
    assert.strictEqual(await send({ origin: a.url, path: '/p' }), 'a');
    assert.strictEqual(await send({ origin: b.url, path: '/p' }), 'b');
    assert.strictEqual(await send({ origin: a.url, path: '/q?x=1' }), 'a');
    assert.strictEqual(await send({ origin: b.url }), 'b');
  }
  // A URL object, then the same object changed.
  const url = new URL(`${a.url}/one`);
  assert.strictEqual(await send(url), 'a');
  url.pathname = '/two';
  assert.strictEqual(await send(url), 'a');
  url.port = String(b.port);
  assert.strictEqual(await send(url), 'b');
  // A string after all of them.
  assert.strictEqual(await send(`${a.url}/p`), 'a');
  assert.deepStrictEqual(seen, [
    'a /p', 'b /p', 'a /q?x=1', 'b /',
    'a /p', 'b /p', 'a /q?x=1', 'b /',
    'a /one', 'a /two', 'b /two', 'a /p',
  ]);
});

test('credentials in the URL go as basic authorization, as Node\'s http sends them', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const withAuth = `http://us%20er:p%40ss:w@127.0.0.1:${server.port}/a`;
  // What Node's http.request sends for the same URL.
  const node = await new Promise((resolve, reject) => {
    http.get(withAuth, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c)).on('end', () => resolve(JSON.parse(Buffer.concat(chunks))));
    }).on('error', reject);
  });
  const expected = `Basic ${Buffer.from('us er:p@ss:w').toString('base64')}`;
  assert.strictEqual(node.headers.authorization, expected);
  const forms = [
    [withAuth, undefined],
    [new URL(withAuth), undefined],
    [withAuth, { 'x-own': '1' }],
    [withAuth, undefined, 'POST'],
  ];
  for (const [url, headers, method] of forms) {
    // Twice: the second goes through the agent's URL cache.
    for (let i = 0; i < 2; i++) {
      const echo = await (await agent.request(url, { headers, method })).body.json();
      assert.strictEqual(echo.headers.authorization, expected, String(url));
      assert.strictEqual(echo.headers.host, `127.0.0.1:${server.port}`);
    }
  }
  // A header of one's own wins; a URL without credentials sends none.
  const own = await (await agent.request(withAuth, { headers: { Authorization: 'Bearer x' } })).body.json();
  assert.strictEqual(own.headers.authorization, 'Bearer x');
  const none = await (await agent.request(`${server.url}/a`)).body.json();
  assert.strictEqual(none.headers.authorization, undefined);
});

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
  // A source that fails: the request rejects with the source's error.
  const thrown = new Error('source broke');
  await assert.rejects(post(undefined, (async function* gen() {
    yield 'abc';
    throw thrown;
  })()), (err) => err === thrown);
  const destroyed = new Error('readable broke');
  await assert.rejects(post(undefined, new Readable({ read() { this.destroy(destroyed); } })), (err) => err === destroyed);
  // Only the matching request reached the server whole; the agent goes on.
  assert.deepStrictEqual(complete, [5]);
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

function* chunks(buf, size) {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

test('chunked responses stream, and trailers arrive at the end', async (t) => {
  // The rest of the body is written once the client has looked at the head.
  let rest;
  const headSeen = new Promise((resolve) => { rest = resolve; });
  const server = await httpServer(t, (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
    res.write('one ');
    headSeen.then(() => {
      res.write('two');
      res.addTrailers({ 'x-checksum': 'abc' });
      res.end();
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(server.url);
  assert.strictEqual(res.headers['transfer-encoding'], 'chunked');
  assert.deepStrictEqual(res.trailers, {});
  rest();
  assert.strictEqual(await res.body.text(), 'one two');
  assert.deepStrictEqual(res.trailers, { 'x-checksum': 'abc' });
});

test('HEAD, 204 and 304 have no body; redirects are returned as they are', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.method === 'HEAD') res.writeHead(200, { 'content-length': 14 }).end();
    else if (req.url === '/204') res.writeHead(204).end();
    else if (req.url === '/304') res.writeHead(304).end();
    else if (req.url === '/redirect') res.writeHead(302, { location: '/elsewhere' }).end('moved');
    else res.end('a body for GET');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const head = await agent.request(server.url, { method: 'HEAD' });
  assert.strictEqual(head.headers['content-length'], String('a body for GET'.length));
  assert.strictEqual(await head.body.text(), '');
  for (const code of [204, 304]) {
    const res = await agent.request(`${server.url}/${code}`);
    assert.strictEqual(res.statusCode, code);
    assert.strictEqual(await res.body.text(), '');
  }
  const moved = await agent.request(`${server.url}/redirect`);
  assert.strictEqual(moved.statusCode, 302);
  assert.strictEqual(moved.headers.location, '/elsewhere');
  assert.strictEqual(await moved.body.text(), 'moved');
  // All on one connection.
  assert.strictEqual(server.connections.length, 1);
});

// A server that answers `expect: 100-continue` through `onCheck(req, res)`; `continueAndEcho`
// agrees and echoes the body.
async function continueServer(t, onCheck) {
  const server = http.createServer((req, res) => res.end('unused'));
  server.on('checkContinue', onCheck);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  return `http://127.0.0.1:${server.address().port}/`;
}

function continueAndEcho(req, res) {
  res.writeContinue();
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => res.end(`got ${body}`));
}

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
  const next = await agent.request(`${url}/next`);
  assert.strictEqual(await next.body.text(), 'next');
  assert.strictEqual(server.connectionCount, 1);
  const sent = got.join('');
  assert.ok(sent.indexOf('payload') > 0 && sent.indexOf('payload') < sent.indexOf('GET /next '), sent);
});

test('the promise path and http.request share one pool: limits and statistics', async (t) => {
  let inFlight = 0;
  let maxInFlight = 0;
  const server = await httpServer(t, (req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    setImmediate(() => {
      inFlight--;
      res.end(req.url);
    });
  });
  const agent = new Agent({ maxSockets: 3 });
  t.after(() => agent.destroy());
  const all = [];
  for (let i = 0; i < 30; i++) {
    all.push(i % 2
      ? agent.request(`${server.url}/p${i}`).then((r) => r.body.text())
      : httpGet(`${server.url}/d${i}`, { agent }).then((r) => r.body));
  }
  const bodies = await Promise.all(all);
  bodies.forEach((b, i) => assert.strictEqual(b, `/${i % 2 ? 'p' : 'd'}${i}`));
  assert.ok(maxInFlight <= 3, `max in flight ${maxInFlight}`);
  assert.ok(server.connections.length >= 3);
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.createSocketErrorCount, 0);
  assert.ok(status.requestCount >= 29);
});

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

test('an abort mid-upload to a server that stopped reading closes the connection at once, the rest unsent', { timeout: 20000 }, async (t) => {
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
    const body = Buffer.alloc(32 * 1024 * 1024, 'u');
    const controller = new AbortController();
    const pending = agent.request(`${secure ? 'https' : 'http'}://localhost:${server.port}/`, { method: 'POST', body, signal: controller.signal });
    let received = await uploading;
    controller.abort();
    await assert.rejects(pending, { name: 'AbortError' });
    // What was under way arrives, then the connection's end (a FIN, or a reset when TLS data
    // the client had not read was left): never the whole body.
    const closed = new Promise((resolve) => socket.on('close', resolve));
    socket.on('data', (chunk) => (received += chunk.length));
    socket.resume();
    await closed;
    assert.ok(received < body.length, `${received} bytes of ${body.length} arrived`);
    assert.deepStrictEqual(agent.getCurrentStatus().sockets, {});
  }
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
  const reason = new Error('shut down');
  ac.abort(reason);
  for (const err of await Promise.all(reading)) assert.strictEqual(err, reason);
  for (const outcome of await Promise.allSettled([...heads, ...queued])) {
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

// A server that answers whole once 100 KB of the request have come, then reads no more of it
// and keeps the connection open (as one refusing an upload may); `url` is its address.
async function earlyServer(t) {
  const server = await rawServer(t, (socket) => {
    let received = 0;
    socket.on('data', (chunk) => {
      received += chunk.length;
      if (received > 100_000 && !socket.isPaused()) {
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nearly');
        socket.pause();
      }
    });
  });
  server.url = `http://127.0.0.1:${server.port}`;
  return server;
}

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

test('a body that came whole reads the same whatever reads it', async (t) => {
  // 40 KiB (a read large enough to cross without a copy), as text.
  const big = Buffer.from(crypto.randomBytes(20 * 1024).toString('hex'));
  const server = await httpServer(t, (req, res) => res.end(req.url === '/big' ? big : 'hello'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const readers = {
    data: (body) => new Promise((resolve, reject) => {
      const chunks = [];
      body.on('data', (c) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
    }),
    readable: (body) => new Promise((resolve) => {
      const chunks = [];
      body.on('readable', () => {
        for (let c = body.read(); c !== null; c = body.read()) chunks.push(c);
      });
      body.on('end', () => resolve(Buffer.concat(chunks)));
    }),
    pipeline: async (body) => {
      const chunks = [];
      await require('node:stream/promises').pipeline(body, async function* (source) {
        for await (const c of source) chunks.push(c);
      });
      return Buffer.concat(chunks);
    },
    iterator: async (body) => {
      const chunks = [];
      for await (const c of body) chunks.push(c);
      return Buffer.concat(chunks);
    },
    text: async (body) => Buffer.from(await body.text()),
    arrayBuffer: async (body) => Buffer.from(await body.arrayBuffer()),
    bytes: async (body) => {
      const bytes = await body.bytes();
      assert.ok(bytes instanceof Uint8Array && !Buffer.isBuffer(bytes));
      return Buffer.from(bytes);
    },
    'read after text': async (body) => {
      const text = await body.text();
      const rest = [];
      for await (const c of body) rest.push(c);
      assert.strictEqual(rest.length, 0);
      return Buffer.from(text);
    },
  };
  for (const [name, read] of Object.entries(readers)) {
    for (const [path, expected] of [['/', Buffer.from('hello')], ['/big', big]]) {
      const { body } = await agent.request(server.url + path);
      const closed = once(body, 'close');
      const bytes = await read(body);
      assert.ok(bytes.equals(expected), `${name} ${path}`);
      // Whatever read it, the stream ends and closes (text() and the like too).
      await closed;
      assert.strictEqual(body.readableEnded, true, `${name} ${path}`);
    }
  }
});

test('body.bodyUsed says whether the body was read or destroyed, as undici\'s does', async (t) => {
  const undici = require('undici');
  const server = await httpServer(t, (req, res) => res.end(req.url === '/big' ? 'x'.repeat(256 * 1024) : 'hello'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const pool = new undici.Pool(server.url);
  t.after(() => pool.close());
  const ways = {
    text: (body) => body.text(),
    'for await': async (body) => {
      for await (const chunk of body) void chunk;
    },
    'one data event': (body) => new Promise((resolve) => body.once('data', () => {
      body.pause();
      resolve();
    })),
    destroy: async (body) => {
      body.destroy();
      await finished(body).catch(() => {});
    },
    dump: (body) => body.dump(),
  };
  for (const path of ['/', '/big']) {
    for (const [way, use] of Object.entries(ways)) {
      const seen = [];
      for (const res of [await agent.request(`${server.url}${path}`), await pool.request({ path, method: 'GET' })]) {
        // undici's body emits its abort as an error when destroyed before its end.
        res.body.on('error', () => {});
        const before = res.body.bodyUsed;
        await use(res.body);
        seen.push([before, res.body.bodyUsed]);
        res.body.destroy();
      }
      assert.deepStrictEqual(seen[0], seen[1], `${way} ${path}: ours against undici's`);
      assert.deepStrictEqual(seen[0], [false, true], `${way} ${path}`);
    }
  }
});

test('text() and json() drop a leading byte order mark, as undici and fetch do', async (t) => {
  const bom = Buffer.from([0xef, 0xbb, 0xbf]);
  const server = await httpServer(t, (req, res) => res.end(Buffer.concat([bom, Buffer.from('{"a":"é"}')])));
  const agent = new Agent();
  t.after(() => agent.destroy());
  assert.strictEqual(await (await agent.request(server.url)).body.text(), '{"a":"é"}');
  assert.deepStrictEqual(await (await agent.request(server.url)).body.json(), { a: 'é' });
  // The bytes keep it.
  const bytes = Buffer.from(await (await agent.request(server.url)).body.arrayBuffer());
  assert.ok(bytes.subarray(0, 3).equals(bom));
});

test('a streamed body read by text() and the like ends and closes as a read stream', { timeout: 20000 }, async (t) => {
  const string = 'x'.repeat(1024 * 1024);
  const big = Buffer.from(JSON.stringify(string));
  const server = await httpServer(t, (req, res) => res.end(big));
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const read of ['text', 'json', 'arrayBuffer', 'bytes']) {
    const { body } = await agent.request(server.url);
    const value = await body[read]();
    if (read === 'json') assert.strictEqual(value, string);
    else assert.ok(Buffer.from(value).equals(big), read);
    await finished(body);
    assert.strictEqual(body.readableEnded, true, read);
    assert.strictEqual(body.destroyed, true, read);
    const rest = [];
    for await (const c of body) rest.push(c);
    assert.deepStrictEqual(rest, [], read);
  }
});

test('text() and the like make no error for a body they read to its end; a body destroyed mid-read still fails', { timeout: 20000 }, async (t) => {
  // An error's stack trace costs about what a small request does: the stream's destroy at its
  // end must not make the AbortError a consumer still collecting would get.
  const errors = require('../lib/errors');
  const original = errors.abortError;
  let made = 0;
  errors.abortError = (...args) => {
    made++;
    return original(...args);
  };
  t.after(() => {
    errors.abortError = original;
  });
  const big = Buffer.from(JSON.stringify('y'.repeat(1024 * 1024)));
  const small = Buffer.from('"small"');
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/big') res.end(big);
    else if (req.url === '/stall') res.write('part'); // and never ends
    else res.end(small);
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const read of ['text', 'json', 'arrayBuffer', 'bytes']) {
    for (const p of ['/small', '/big']) {
      const { body } = await agent.request(server.url + p);
      const value = await body[read]();
      const sent = p === '/big' ? big : small;
      if (read === 'json') assert.strictEqual(value, JSON.parse(sent));
      else assert.ok(Buffer.from(value).equals(sent), `${read} ${p}`);
      await finished(body);
      assert.strictEqual(body.destroyed, true);
    }
  }
  assert.strictEqual(made, 0, 'no AbortError made for bodies read to their end');
  const { body } = await agent.request(server.url + '/stall');
  const reading = body.text();
  body.destroy();
  await assert.rejects(reading, { name: 'AbortError' });
  assert.strictEqual(made, 1);
});

test('text() on a body already read, ended or destroyed, or destroyed while it reads, settles', { timeout: 20000 }, async (t) => {
  const big = Buffer.alloc(1024 * 1024, 'r');
  const server = await httpServer(t, (req, res) => {
    if (req.url !== '/part') return res.end(big);
    // Part of a body, then nothing more.
    res.writeHead(200);
    res.write('part');
    return undefined;
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const unusable = (why) => (err) => err instanceof TypeError && err.message === `Body is unusable: ${why}`;

  let res = await agent.request(server.url);
  res.body.destroy();
  await assert.rejects(res.body.text(), unusable('it was destroyed'));

  res = await agent.request(server.url);
  const boom = new Error('boom');
  res.body.on('error', () => {});
  res.body.destroy(boom);
  await assert.rejects(res.body.text(), (err) => err === boom);

  res = await agent.request(server.url);
  res.body.resume();
  await once(res.body, 'end');
  await assert.rejects(res.body.text(), unusable('it has already been read'));

  // Part read: text() has the rest.
  res = await agent.request(server.url);
  await once(res.body, 'readable');
  const first = res.body.read();
  assert.strictEqual(first.length + (await res.body.text()).length, big.length);

  // Destroyed while text() collects the rest: a premature close.
  res = await agent.request(server.url);
  res.body.once('data', () => res.body.destroy());
  await assert.rejects(res.body.text(), { code: 'ERR_STREAM_PREMATURE_CLOSE' });

  // Destroyed while text() has the body to itself: aborted, or the error it was destroyed with.
  for (const error of [undefined, new Error('enough')]) {
    res = await agent.request(`${server.url}/part`);
    const text = res.body.text();
    res.body.on('error', () => {});
    res.body.destroy(error);
    await assert.rejects(text, error ? (err) => err === error : { code: 'ABORT_ERR', name: 'AbortError' });
  }
});

test('body.dump() drops a body: within its limit the connection is reused, past it closed', async (t) => {
  const big = Buffer.alloc(1024 * 1024, 'b');
  let stall = null;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/big') return res.end(big);
    if (req.url === '/stall') {
      res.writeHead(200, { 'content-length': '10' });
      res.write('12345');
      stall = res;
      return undefined;
    }
    return res.end('hello');
  });
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const port = () => server.requestPorts[server.requestPorts.length - 1];

  // A small body, and a large one with a limit above its size: read, the connection kept.
  assert.strictEqual(await (await agent.request(server.url)).body.dump(), null);
  const first = port();
  assert.strictEqual(await (await agent.request(`${server.url}/big`)).body.dump({ limit: 2 * big.length }), null);
  assert.strictEqual(port(), first);
  // Past the default limit (128 KiB): destroyed, so the next request needs a new connection.
  const res = await agent.request(`${server.url}/big`);
  assert.strictEqual(await res.body.dump(), null);
  assert.strictEqual(res.body.destroyed, true);
  assert.strictEqual(res.body.readableEnded, false);
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'hello');
  assert.notStrictEqual(port(), first);
  // A body already read (whole, or streamed) has nothing left to drop.
  for (const path of ['/', '/big']) {
    const read = await agent.request(server.url + path);
    await read.body.text();
    assert.strictEqual(await read.body.dump(), null);
  }

  // A signal: rejects with its reason when it aborts during the dump, or had aborted before.
  const stalled = await agent.request(`${server.url}/stall`);
  const controller = new AbortController();
  const dumped = stalled.body.dump({ signal: controller.signal });
  const reason = new Error('enough');
  controller.abort(reason);
  await assert.rejects(dumped, (err) => err === reason);
  stall.destroy();
  const aborted = await agent.request(server.url);
  await assert.rejects(aborted.body.dump({ signal: AbortSignal.abort(reason) }), (err) => err === reason);
  aborted.body.destroy();

  // Bad options throw at once.
  const bad = await agent.request(server.url);
  assert.throws(() => bad.body.dump(5), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => bad.body.dump({ limit: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => bad.body.dump({ limit: '1' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => bad.body.dump({ signal: {} }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.strictEqual(await bad.body.dump(), null);
});

test('a reason phrase that is not the status code\'s usual one arrives as Node\'s parser gives it', async (t) => {
  const phrases = { '/custom': 'Alright then', '/other': 'Not Found' };
  const server = await rawServer(t, async (socket) => {
    for await (const { head } of eachRequest(socket)) {
      const phrase = phrases[head.split(' ')[1]] ?? 'OK';
      socket.write(`HTTP/1.1 200 ${phrase}\r\nContent-Length: 2\r\n\r\nok`);
    }
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  for (const path of ['/custom', '/other', '/usual']) {
    const url = `http://127.0.0.1:${server.port}${path}`;
    const viaNode = (await httpGet(url, { agent: new http.Agent() })).res.statusMessage;
    const res = await agent.request(url);
    await res.body.dump();
    assert.strictEqual(res.statusMessage, viaNode, path);
    assert.strictEqual(res.statusMessage, phrases[path] ?? 'OK', path);
  }
});

test('for await over a body that came whole acts as the stream iterator', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('hello'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  // What a loop over a fresh response's body sees, with the body's events, when the loop runs
  // to the end, breaks, or destroys the body (with and without an error).
  async function run(iterator, scenario) {
    const { body } = await agent.request(server.url);
    const closed = new Promise((resolve) => body.once('close', resolve));
    const log = [];
    body.on('error', (err) => log.push(`error ${err.code ?? err.message}`));
    body.on('end', () => log.push('end'));
    body.on('close', () => log.push('close'));
    const it = iterator(body);
    log.push(Object.prototype.toString.call(it) === '[object AsyncGenerator]' ? 'general' : 'whole');
    try {
      for await (const chunk of { [Symbol.asyncIterator]: () => it }) {
        log.push(`chunk ${chunk}`);
        if (scenario === 'break') break;
        if (scenario === 'error') body.destroy(new Error('boom'));
        if (scenario === 'destroy') body.destroy();
      }
      log.push(`after: ended ${body.readableEnded}, destroyed ${body.destroyed}`);
    } catch (err) {
      log.push(`threw ${err.code ?? err.message}`);
    }
    await closed;
    return log.slice(1).concat(log[0]);
  }
  const general = (body) => Readable.prototype[Symbol.asyncIterator].call(body);
  const own = (body) => body[Symbol.asyncIterator]();
  for (const scenario of ['end', 'break', 'error', 'destroy']) {
    const expected = (await run(general, scenario)).slice(0, -1);
    assert.deepStrictEqual(await run(own, scenario), expected.concat('whole'), scenario);
  }
  // With an encoding set, the chunks are strings, as the stream's decoder makes them.
  const { body } = await agent.request(server.url);
  body.setEncoding('utf8');
  const chunks = [];
  for await (const chunk of body) chunks.push(chunk);
  assert.deepStrictEqual(chunks, ['hello']);
  // The connection is back in the pool after each.
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'hello');
});

test('headersTimeout and bodyTimeout fail with their codes', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/body') {
      res.writeHead(200);
      res.write('some');
    }
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  await assert.rejects(agent.request(`${server.url}/head`, { headersTimeout: 50 }), {
    code: 'ERR_HYPERAGENT_HEADERS_TIMEOUT',
    timeout: 50,
  });
  const res = await agent.request(`${server.url}/body`, { bodyTimeout: 50 });
  await assert.rejects(res.body.text(), { code: 'ERR_HYPERAGENT_BODY_TIMEOUT', timeout: 50 });
  // Each closes its connection, as a socket's timeout does: counted as a timeout and, as
  // agentkeepalive counts the error its timeout destroys a socket with, as an error.
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual([status.timeoutSocketCount, status.errorSocketCount], [2, 2]);
  await until(() => agent.getCurrentStatus().closeSocketCount === 2, 5000, 'both connections to close');
});

test('a headersTimeout over a second fails a request with no head, on a new or a reused connection', async (t) => {
  let held = null;
  const sockets = {};
  const server = await httpServer(t, (req, res) => {
    (sockets[req.url] ??= []).push(req.socket);
    if (req.url === '/ok') res.end('ok');
    else if (req.url === '/held') {
      res.writeHead(200);
      res.write('a');
      held = res;
    }
    // '/silent' is never answered.
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const opts = { headersTimeout: 1100 };
  const timedOut = (err) => {
    assert.strictEqual(err.code, 'ERR_HYPERAGENT_HEADERS_TIMEOUT');
    assert.match(err.message, /within 1100 ms/);
    return true;
  };
  // Its head comes at once, the rest of its body only after the other request timed out:
  // past its deadline, with its head, it is not failed.
  const res = await agent.request(`${server.url}/held`, opts);
  const start = performance.now();
  // A new connection (the other one is busy).
  await assert.rejects(agent.request(`${server.url}/silent`, opts), timedOut);
  assert.ok(performance.now() - start >= 1100);
  const [first] = sockets['/silent'];
  if (!first.destroyed) await once(first, 'close');
  held.end('b');
  assert.strictEqual(await res.body.text(), 'ab');
  // A reused connection.
  assert.strictEqual(await (await agent.request(`${server.url}/ok`)).body.text(), 'ok');
  await assert.rejects(agent.request(`${server.url}/silent`, opts), timedOut);
  const second = sockets['/silent'][1];
  assert.strictEqual(second, sockets['/ok'][0]);
  if (!second.destroyed) await once(second, 'close');
  // Both closed their connections by a timeout, as the statistics say.
  assert.strictEqual(agent.getCurrentStatus().timeoutSocketCount, 2);
  // The agent goes on; timeouts too long to ever run out are as none.
  assert.strictEqual(await (await agent.request(`${server.url}/ok`)).body.text(), 'ok');
  const far = { headersTimeout: 1e300, bodyTimeout: Number.MAX_SAFE_INTEGER };
  assert.strictEqual(await (await agent.request(`${server.url}/ok`, far)).body.text(), 'ok');
});

test('refused and reset connections reject with Node-style errors', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const closed = await rawServer(t, () => {});
  const port = closed.port;
  closed.close();
  await once(closed, 'close');
  await assert.rejects(agent.request(`http://127.0.0.1:${port}/`), {
    code: 'ECONNREFUSED',
    syscall: 'connect',
    address: '127.0.0.1',
    port,
  });
  const reset = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.resetAndDestroy();
  });
  await assert.rejects(agent.request(`http://127.0.0.1:${reset.port}/`), { code: 'ECONNRESET' });
  const hangup = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.end();
  });
  await assert.rejects(agent.request(`http://127.0.0.1:${hangup.port}/`), {
    code: 'ECONNRESET',
    message: 'socket hang up',
  });
});

test('faults count in the statistics as on the drop-in path: a reset as a socket error, a hang-up or a bad response not', async (t) => {
  const faults = {
    'reset before the head': (socket) => socket.resetAndDestroy(),
    'reset in the body': (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial', () => setImmediate(() => socket.resetAndDestroy()));
    },
    'hang-up before the head': (socket) => socket.end(),
    'malformed head': (socket) => socket.end('HTTP/1.1 2x0 Bad\r\n\r\n'),
  };
  const counts = (agent) => {
    const s = agent.getCurrentStatus();
    return { created: s.createSocketCount, closed: s.closeSocketCount, errors: s.errorSocketCount };
  };
  for (const [name, fault] of Object.entries(faults)) {
    const server = await rawServer(t, async (socket) => {
      await readRequest(socket);
      fault(socket);
    });
    const url = `http://127.0.0.1:${server.port}/`;
    const dropIn = new Agent();
    const promise = new Agent();
    t.after(() => {
      dropIn.destroy();
      promise.destroy();
    });
    await requestError(url, { agent: dropIn });
    await assert.rejects(async () => {
      const res = await promise.request(url);
      await res.body.text();
    }, { code: /^(ECONNRESET|HPE_INVALID_STATUS)$/ });
    // The drop-in path counts as its socket closes, just after the request's error.
    await until(() => counts(dropIn).closed === 1, 5000, `the drop-in socket to close (${name})`);
    assert.deepStrictEqual(counts(promise), counts(dropIn), name);
    assert.strictEqual(counts(promise).errors, name.startsWith('reset') ? 1 : 0, name);
  }
});

test('malformed responses reject with a code that names the parse failure', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const cases = [
    ['HTTP/1.1 2x0 Bad\r\n\r\n', /^HPE_INVALID_/],
    ['HTTP/1.1 200 OK\r\nBad Header\r\n\r\n', /^HPE_INVALID_/],
    ['HTTP/9.9 200 OK\r\n\r\n', /^HPE_INVALID_/],
    [`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`, /^HPE_HEADER_OVERFLOW$/],
  ];
  for (const [reply, code] of cases) {
    const server = await rawServer(t, async (socket) => {
      await readRequest(socket);
      socket.end(reply);
    });
    await assert.rejects(agent.request(`http://127.0.0.1:${server.port}/`), (err) => {
      assert.match(err.code, code, JSON.stringify(reply.slice(0, 30)));
      return true;
    });
  }
  // Heads around a limit smaller than a read: the limit holds, and a head under it, followed
  // by a body larger than the limit, arrives whole.
  const body = crypto.randomBytes(200 * 1024);
  const limited = await rawServer(t, async (socket) => {
    const { head } = await readRequest(socket);
    const header = head.includes('/over') ? 'a'.repeat(1100) : 'a'.repeat(900);
    socket.end(Buffer.concat([
      Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\nX-Big: ${header}\r\n\r\n`),
      body,
    ]));
  });
  await assert.rejects(
    agent.request(`http://127.0.0.1:${limited.port}/over`, { maxResponseHeaderSize: 1024 }),
    { code: 'HPE_HEADER_OVERFLOW' },
  );
  const under = await agent.request(`http://127.0.0.1:${limited.port}/under`, { maxResponseHeaderSize: 1024 });
  assert.strictEqual(sha(Buffer.from(await under.body.arrayBuffer())), sha(body));
  const truncated = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort');
  });
  const res = await agent.request(`http://127.0.0.1:${truncated.port}/`);
  await assert.rejects(res.body.text(), { code: 'ECONNRESET', message: 'aborted' });
  // Both a length and a transfer coding, on a connection the server keeps open: refused as
  // Node's parser refuses it, and the connection is not used again.
  const both = await rawServer(t, async (socket) => {
    try {
      for (let i = 0; i < 10; i++) {
        await readRequest(socket);
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n');
      }
    } catch {
      // the client closed it
    }
  });
  for (let i = 0; i < 2; i++) {
    await assert.rejects(agent.request(`http://127.0.0.1:${both.port}/`), {
      code: 'HPE_INVALID_TRANSFER_ENCODING',
      message: "Parse Error: Transfer-Encoding can't be present with Content-Length",
    });
  }
  assert.strictEqual(both.connectionCount, 2);
});

test('a 101 to a request that asked for no upgrade fails it, as undici\'s fails, and the connection goes', async (t) => {
  const undici = require('undici');
  // The server switches protocols unasked, then writes what is not HTTP, and keeps the
  // connection open for the next request the client might send.
  const server = await rawServer(t, async (socket) => {
    try {
      for (;;) {
        await readRequest(socket);
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: upgrade\r\n\r\nnot http');
      }
    } catch {
      // the client closed it
    }
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  for (let i = 0; i < 2; i++) {
    await assert.rejects(agent.request(`http://127.0.0.1:${server.port}/`), {
      code: 'ERR_HYPERAGENT_HTTP',
      message: 'HTTP error: the server switched protocols (101) for a request that asked for no upgrade',
    });
  }
  // Each request had a connection of its own: the switched one was not used again.
  assert.strictEqual(server.connectionCount, 2);
  await until(() => agent.getCurrentStatus().closeSocketCount === 2, 5000, 'both connections to close');
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.createSocketCount, 2);
  assert.strictEqual(status.errorSocketCount, 0);
  assert.deepStrictEqual(status.freeSockets, {});
  const pool = new undici.Pool(`http://127.0.0.1:${server.port}`);
  t.after(() => pool.destroy());
  await assert.rejects(pool.request({ path: '/', method: 'GET' }), { code: 'UND_ERR_SOCKET' });
});

test('a malformed chunked body fails the body with the code Node\'s parser gives it, never as a short body', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
  const cases = [
    // A bad size line right after the head ended the body as if empty.
    ['zz\r\nabc\r\n0\r\n\r\n', 'HPE_INVALID_CHUNK_SIZE'],
    ['ffffffffffffffffff\r\nabc', 'HPE_INVALID_CHUNK_SIZE'],
    ['3\r\nabcXY0\r\n\r\n', 'HPE_STRICT'],
    ['3\r\nabc\r\n0\r\nbad trailer line\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
  ];
  for (const [body, code] of cases) {
    const server = await rawServer(t, async (socket) => {
      await readRequest(socket);
      socket.end(head + body);
    });
    const url = `http://127.0.0.1:${server.port}/`;
    const res = await agent.request(url);
    assert.strictEqual(res.statusCode, 200);
    await assert.rejects(res.body.text(), (err) => {
      assert.strictEqual(err.code, code, `${JSON.stringify(body)}: ${err.message}`);
      assert.match(err.message, /^Parse Error: /);
      return true;
    });
    // Node's parser, through the drop-in path, names it alike.
    const dropIn = await requestError(url, { agent });
    assert.strictEqual(dropIn.code, code, JSON.stringify(body));
  }
  // A malformed body is the server's fault, not the connection's.
  assert.strictEqual(agent.errorSocketCount, 0);
});

test('a body that fails before anything reads it throws nowhere; reading it later reports the error', async (t) => {
  // The server sends the head and part of the body, and resets the connection once the
  // response has reached the caller.
  const sockets = [];
  const server = await rawServer(t, async (socket) => {
    sockets.push(socket);
    await readRequest(socket);
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = `http://127.0.0.1:${server.port}/`;
  for (const read of [(body) => body.text(), async (body) => {
    for await (const chunk of body) assert.ok(chunk);
  }, (body) => finished(body)]) {
    const res = await agent.request(url);
    sockets.at(-1).resetAndDestroy();
    // The body fails and closes before anything reads it (no 'error' listener, which
    // events.once would add): that must not be an uncaught exception, which fails this test.
    await new Promise((resolve) => res.body.on('close', resolve));
    assert.strictEqual(res.body.errored.code, 'ECONNRESET');
    await assert.rejects(read(res.body), { code: 'ECONNRESET' });
  }
  // With a listener, the error is emitted as ever.
  const res = await agent.request(url);
  sockets.at(-1).resetAndDestroy();
  const [err] = await once(res.body, 'error');
  assert.strictEqual(err.code, 'ECONNRESET');
});

test('every URL gets its own request head, through the agent\'s URL cache and its clearing', async (t) => {
  const a = await echoServer(t);
  const b = await echoServer(t);
  const agent = new Agent({ maxSockets: 4 });
  t.after(() => agent.destroy());
  // More distinct URLs than the cache keeps (1,024), each asked for in every form: without
  // headers (a head made once per URL), with headers, with a body, and as a URL object.
  for (let i = 0; i < 1100; i++) {
    const server = i % 2 === 0 ? a : b;
    const url = `${server.url}/u/${i}?q=${i}`;
    const host = `127.0.0.1:${server.port}`;
    const plain = await (await agent.request(url)).body.json();
    assert.deepStrictEqual([plain.method, plain.url, plain.headers.host], ['GET', `/u/${i}?q=${i}`, host]);
    if (i % 50 !== 0) continue;
    const again = await (await agent.request(url)).body.json();
    assert.strictEqual(again.url, `/u/${i}?q=${i}`);
    const own = await (await agent.request(url, { headers: { 'x-i': String(i) } })).body.json();
    assert.deepStrictEqual([own.url, own.headers['x-i'], own.headers.host], [`/u/${i}?q=${i}`, String(i), host]);
    const post = await (await agent.request(url, { method: 'POST', body: 'abc' })).body.json();
    assert.deepStrictEqual([post.method, post.url, post.length], ['POST', `/u/${i}?q=${i}`, 3]);
    const viaUrl = await (await agent.request(new URL(url))).body.json();
    assert.strictEqual(viaUrl.url, `/u/${i}?q=${i}`);
  }
});

test('long methods, paths and header lines cross whole; header values go as latin1, as Node sends them', async (t) => {
  const heads = [];
  const server = await rawServer(t, async (socket) => {
    try {
      for (;;) {
        const { head } = await readRequest(socket);
        heads.push(head);
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n');
      }
    } catch {
      // The connection ended.
    }
  });
  const origin = `http://127.0.0.1:${server.port}`;
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  // Lengths on both sides of what fits the binding's fixed buffers, far past them, and a path
  // of 65534 characters, the longest a request line takes.
  const sent = [];
  // (The header lines are `host\n127.0.0.1:<port>\nx-latin1\n<value>`: about n + 37 bytes.)
  for (const n of [...Array.from({ length: 26 }, (_, i) => 975 + i), 5000, 65534 + 479]) {
    const req = {
      method: 'X'.repeat(24 + (n % 8)),
      path: `/${'p'.repeat(n - 480)}`,
      value: `caf\u00e9 \u00f1 ${'v'.repeat(n)}`,
    };
    sent.push(req);
    const res = await agent.request(origin + req.path, { method: req.method, headers: { 'x-latin1': req.value } });
    assert.strictEqual(res.statusCode, 200);
    await res.body.text();
  }
  // One character more is refused at once, not sent cut or failed on the way.
  assert.throws(() => agent.request(`${origin}/${'p'.repeat(65534)}`), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /path and query of 65535 characters; agent.request\(\) sends at most 65534/,
  });
  // What Node itself sends for the same header value: the same bytes.
  await new Promise((resolve, reject) => {
    http.get(`${origin}/node`, { agent: false, headers: { 'x-latin1': sent[0].value } }, (res) => {
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
  assert.strictEqual(heads.length, sent.length + 1);
  const headerOf = (head) => head.split('\r\n').find((l) => l.toLowerCase().startsWith('x-latin1:'));
  assert.strictEqual(headerOf(heads[0]), headerOf(heads[sent.length]));
  sent.forEach((req, i) => {
    assert.strictEqual(heads[i].split('\r\n')[0], `${req.method} ${req.path} HTTP/1.1`);
    assert.strictEqual(headerOf(heads[i]), `x-latin1: ${req.value}`);
  });
});

test('header lines go as undici sends them: the host first, a null value empty, an undefined one left out', async (t) => {
  const undici = require('undici');
  // The request's header lines as the server read them, but those of the body's framing.
  const server = await httpServer(t, (req, res) => {
    const lines = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i].toLowerCase()}: ${req.rawHeaders[i + 1]}`);
    res.end(JSON.stringify(lines.filter((l) => !/^(connection|content-length|transfer-encoding):/.test(l))));
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const cases = [
    { 'x-a': undefined, 'x-b': null, 'x-c': '', 'x-d': 0, 'x-e': true },
    { host: 'other.test', 'x-f': ['1', '2'], 'x-g': [] },
    { 'X-H': '1', 'x-h': '2' },
    ['x-i', 'a', 'x-i', 'b'],
  ];
  for (const headers of cases) {
    const theirs = await (await undici.request(`${server.url}/`, { headers })).body.text();
    const ours = await (await agent.request(`${server.url}/`, { headers })).body.text();
    assert.deepStrictEqual(JSON.parse(ours), JSON.parse(theirs), JSON.stringify(headers));
  }
});

test("undici's opaque, reset and responseHeaders options do as in undici; maxRedirections and throwOnError are refused, not ignored", async (t) => {
  const sockets = new Set();
  const seen = [];
  const server = await httpServer(t, (req, res) => {
    sockets.add(req.socket);
    seen.push(req.headers.connection);
    res.setHeader('x-a', ['1', '2']);
    res.end(req.url === '/moved' ? '' : 'ok');
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  // opaque comes back on the response (null without it); statusText is statusMessage.
  let res = await agent.request(`${server.url}/`, { opaque: { id: 7 } });
  assert.deepStrictEqual([res.opaque, res.statusText, await res.body.text()], [{ id: 7 }, 'OK', 'ok']);
  res = await agent.request(`${server.url}/`);
  assert.deepStrictEqual([res.opaque, res.headers['x-a']], [null, '1, 2']);
  await res.body.dump();
  // responseHeaders: 'raw' gives the list.
  res = await agent.request(`${server.url}/`, { responseHeaders: 'raw' });
  assert.ok(Array.isArray(res.headers));
  assert.deepStrictEqual(res.headers, res.rawHeaders);
  assert.deepStrictEqual(res.headers.slice(0, 4), ['x-a', '1', 'x-a', '2']);
  await res.body.dump();
  assert.strictEqual(sockets.size, 1, 'one kept connection so far');
  // reset: the request says connection: close and its connection is not used again (the first
  // takes the kept one, which then closes; the second needs a new one).
  for (let i = 0; i < 2; i++) await (await agent.request(`${server.url}/`, { reset: true })).body.dump();
  assert.deepStrictEqual(seen.slice(-2), ['close', 'close']);
  assert.strictEqual(sockets.size, 2);
  await (await agent.request(`${server.url}/`, { reset: false })).body.dump();
  assert.strictEqual(sockets.size, 3, 'the last reset connection was not kept');
  await (await agent.request(`${server.url}/`)).body.dump();
  assert.strictEqual(sockets.size, 3);
  assert.deepStrictEqual([agent.createSocketCount, agent.closeSocketCount], [3, 2]);
  // What undici no longer does (it follows no redirect, throws on no status) is refused.
  assert.throws(() => agent.request(`${server.url}/moved`, { maxRedirections: 2 }), { code: 'ERR_INVALID_ARG_VALUE', message: /maxRedirections/ });
  assert.throws(() => agent.request(`${server.url}/`, { throwOnError: true }), { code: 'ERR_INVALID_ARG_VALUE', message: /throwOnError/ });
  assert.throws(() => agent.request(`${server.url}/`, { reset: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE', message: /reset/ });
  for (const options of [{ maxRedirections: 0 }, { throwOnError: false }, { reset: null }]) {
    await (await agent.request(`${server.url}/`, options)).body.dump();
  }
});

test("undici's query option: serialised as undici serialises it, after a path without a query", async (t) => {
  const undici = require('undici');
  const server = await httpServer(t, (req, res) => res.end(req.url));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const queries = [
    { a: 1, b: ['2', '3'], c: 'ä &=/?', d: undefined, e: null, f: true },
    {},
    { 'key with space': '' },
  ];
  for (const query of queries) {
    const theirs = await (await undici.request(`${server.url}/x`, { query })).body.text();
    const ours = await (await agent.request(`${server.url}/x`, { query })).body.text();
    assert.strictEqual(ours, theirs, JSON.stringify(query));
    // With the origin and path given apart, and with header lines of its own.
    const parts = await agent.request({ origin: server.url, path: '/x' }, { query, headers: { 'x-a': '1' } });
    assert.strictEqual(await parts.body.text(), theirs);
  }
  assert.throws(() => agent.request(`${server.url}/x?y=1`, { query: { a: 1 } }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => agent.request(`${server.url}/x`, { query: 'a=1' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(`${server.url}/x`, { query: { a: 'q'.repeat(70000) } }), { code: 'ERR_INVALID_ARG_VALUE' });
  // A URL with a query and an empty one: nothing to add.
  assert.strictEqual(await (await agent.request(`${server.url}/x?y=1`, { query: {} })).body.text(), '/x?y=1');
});

test('bad input is refused at once with Node\'s codes', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = 'http://127.0.0.1:1/';
  assert.throws(() => agent.request(url, { method: 'GE T' }), { code: 'ERR_INVALID_HTTP_TOKEN' });
  assert.throws(() => agent.request(url, { headers: { 'bad name': 'x' } }), { code: 'ERR_INVALID_HTTP_TOKEN' });
  assert.throws(() => agent.request(url, { headers: { 'x-a': 'line\r\nbreak' } }), { code: 'ERR_INVALID_CHAR' });
  // A URL that does not parse: URL's own error, as Node's http.request and undici's request().
  const invalidUrl = { name: 'TypeError', code: 'ERR_INVALID_URL', input: 'not a url' };
  assert.throws(() => http.get('not a url'), invalidUrl);
  assert.throws(() => agent.request('not a url'), invalidUrl);
  assert.throws(() => agent.request({ origin: 'not a url', path: '/' }), invalidUrl);
  assert.throws(() => agent.request(42), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request('https://127.0.0.1/'), { code: 'ERR_INVALID_PROTOCOL' });
  assert.throws(() => agent.request(url, { body: 42 }), { code: 'ERR_INVALID_ARG_TYPE' });
  // Numbers as Node validates them: another type, or a number out of range.
  assert.throws(() => agent.request(url, { headersTimeout: '5' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { headersTimeout: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => agent.request(url, { bodyTimeout: NaN }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => agent.request(url, { maxResponseHeaderSize: '1024' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { maxResponseHeaderSize: 1.5 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => agent.request(url, { method: 42 }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { signal: 'abort' }), { code: 'ERR_INVALID_ARG_TYPE' });
  // Tunnels and upgrades take the connection over: http.request() with the agent does them.
  for (const method of ['CONNECT', 'connect']) {
    assert.throws(() => agent.request(url, { method }), { code: 'ERR_INVALID_ARG_VALUE', message: /use http\.request\(\) with the agent/ });
  }
  assert.throws(() => agent.request(url, { headers: { Upgrade: 'websocket', connection: 'upgrade' } }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /upgrade header/,
  });
});

test('what agent.request() refuses, http.request() with the agent does: an upgrade and a CONNECT tunnel free their slot', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('plain'));
  server.on('upgrade', (req, socket) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: upgrade\r\n\r\n');
    socket.on('data', (d) => socket.write(`echo:${d}`));
  });
  server.on('connect', (req, socket) => {
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    socket.on('data', (d) => socket.write(`tunnel ${req.url}:${d}`));
  });
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const { port } = new URL(server.url);
  const taken = async (event, options) => {
    const req = http.request({ host: '127.0.0.1', port, agent, ...options });
    req.end();
    const [res, socket] = await once(req, event);
    socket.write('ping');
    const [data] = await once(socket, 'data');
    socket.destroy();
    return [res.statusCode, String(data)];
  };
  assert.deepStrictEqual(await taken('upgrade', { headers: { connection: 'upgrade', upgrade: 'echo' } }), [101, 'echo:ping']);
  // The upgraded connection left the pool: with one socket allowed, the next request gets one.
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'plain');
  assert.deepStrictEqual(await taken('connect', { method: 'CONNECT', path: 'example.com:443' }), [200, 'tunnel example.com:443:ping']);
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'plain');
});

test('an agent that keeps no connection asks the server to close it, as Node\'s agent does', async (t) => {
  const server = await echoServer(t);
  const closing = new Agent({ keepAlive: false });
  const keeping = new Agent();
  t.after(() => {
    closing.destroy();
    keeping.destroy();
  });
  const sent = async (agent, options) => (await (await agent.request(`${server.url}/`, options)).body.json()).headers.connection;
  assert.strictEqual(await sent(closing), 'close');
  assert.strictEqual(await sent(closing, { headers: { 'x-a': '1' }, method: 'POST', body: 'b' }), 'close');
  // A connection header given is sent as it is.
  assert.strictEqual(await sent(closing, { headers: { Connection: 'close, x-a' } }), 'close, x-a');
  assert.strictEqual(closing.getCurrentStatus().createSocketCount, 3);
  // A keep-alive agent adds nothing: HTTP/1.1 keeps connections by default.
  assert.strictEqual(await sent(keeping), undefined);
  assert.strictEqual(await sent(keeping), undefined);
  assert.strictEqual(keeping.getCurrentStatus().createSocketCount, 1);
});

test('the agent\'s lookup resolves agent.request()\'s hosts, as on the drop-in path; what it fails with fails the request', async (t) => {
  const server = await httpServer(t, (req, res) => res.end(`at ${req.headers.host}`));
  const { port } = new URL(server.url);
  const asked = [];
  const agent = new Agent({
    lookup: (host, options, cb) => {
      asked.push([host, options.all]);
      if (host === 'nowhere.test') {
        const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host });
        process.nextTick(cb, err);
      } else if (host === 'odd.test') {
        cb(null, [{ address: 'not-an-address', family: 4 }]);
      } else {
        cb(null, [{ address: '127.0.0.1', family: 4 }]); // at once, as a cache answers
      }
    },
  });
  t.after(() => agent.destroy());
  const url = `http://service.test:${port}/`;
  assert.strictEqual(await (await agent.request(url)).body.text(), `at service.test:${port}`);
  // The idle connection is reused: no lookup.
  assert.strictEqual(await (await agent.request(url)).body.text(), `at service.test:${port}`);
  await assert.rejects(agent.request(`http://nowhere.test:${port}/`), { code: 'ENOTFOUND', hostname: 'nowhere.test' });
  await assert.rejects(agent.request(`http://odd.test:${port}/`), { code: 'ERR_INVALID_IP_ADDRESS', message: 'Invalid IP address: not-an-address' });
  assert.deepStrictEqual(asked, [['service.test', true], ['nowhere.test', true], ['odd.test', true]]);
  const status = agent.getCurrentStatus();
  // A failed lookup is an error of a socket that was opening, as agentkeepalive counts it.
  assert.deepStrictEqual(
    [status.createSocketCount, status.errorSocketCount, status.closeSocketCount, status.createSocketErrorCount, status.sockets],
    [3, 2, 2, 0, {}],
  );
  // The drop-in path counts a failed lookup the same.
  assert.strictEqual((await requestError(`http://nowhere.test:${port}/`, { agent })).code, 'ENOTFOUND');
  assert.strictEqual((await requestError(`http://odd.test:${port}/`, { agent })).code, 'ERR_INVALID_IP_ADDRESS');
  await until(() => agent.getCurrentStatus().closeSocketCount === 4, 5000, 'the failed sockets to close');
  const after = agent.getCurrentStatus();
  assert.deepStrictEqual([after.createSocketCount, after.errorSocketCount, after.createSocketErrorCount], [5, 4, 0]);
});

test('promise and stream events run in the context of the request() call', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.write('a');
    setImmediate(() => res.end('b'));
  });
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const als = new AsyncLocalStorage();
  const run = (id) => als.run({ id }, async () => {
    const res = await agent.request(server.url);
    const seen = [als.getStore().id];
    res.body.on('data', () => seen.push(als.getStore().id));
    await once(res.body, 'end');
    seen.push(als.getStore().id);
    return seen;
  });
  const results = await Promise.all([1, 2, 3].map(run));
  results.forEach((seen, i) => assert.ok(seen.every((id) => id === i + 1), JSON.stringify(seen)));
});

test('HTTPS through HttpsAgent#request, verified for real', async (t) => {
  const server = https.createServer({ cert: tlsFixture('localhost-chain.pem'), key: tlsFixture('localhost-key.pem') }, (req, res) => {
    res.end(`secure ${req.url}`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const agent = new HttpsAgent({ ca: tlsFixture('ca.pem') });
  t.after(() => agent.destroy());
  const url = `https://localhost:${server.address().port}`;
  for (let i = 0; i < 3; i++) {
    const res = await agent.request(`${url}/s${i}`);
    assert.strictEqual(await res.body.text(), `secure /s${i}`);
  }
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 1);
  const untrusted = new HttpsAgent();
  t.after(() => untrusted.destroy());
  await assert.rejects(untrusted.request(`${url}/`), { code: 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY' });
});

test('a connection that does not open within the agent\'s timeout (10 s without one) fails with ERR_SOCKET_TIMEOUT', { timeout: 30000 }, async (t) => {
  // Accepts TCP, then never answers the TLS handshake.
  const silent = net.createServer((socket) => socket.on('error', () => {}));
  silent.listen(0, '127.0.0.1');
  await once(silent, 'listening');
  t.after(() => silent.close());
  const agent = new HttpsAgent({ timeout: 200 });
  t.after(() => agent.destroy());
  const url = `https://127.0.0.1:${silent.address().port}/`;
  await assert.rejects(agent.request(url), { code: 'ERR_SOCKET_TIMEOUT', message: 'Socket timeout', timeout: 200 });
  const status = agent.getCurrentStatus();
  // As agentkeepalive counts its socket: created, a timeout, the error it was destroyed with, closed.
  assert.deepStrictEqual(
    [status.createSocketCount, status.timeoutSocketCount, status.errorSocketCount, status.closeSocketCount, status.createSocketErrorCount],
    [1, 1, 1, 1, 0],
  );
  assert.deepStrictEqual([status.sockets, status.requests], [{}, {}]);
  // The drop-in path counts it alike.
  const dropIn = new HttpsAgent({ timeout: 200 });
  t.after(() => dropIn.destroy());
  const err = await new Promise((resolve) => https.get(url, { agent: dropIn }).on('error', resolve));
  assert.strictEqual(err.code, 'ERR_SOCKET_TIMEOUT');
  await until(() => dropIn.closeSocketCount === 1, 5000, 'the socket to close');
  const { createSocketCount, createSocketErrorCount, errorSocketCount, timeoutSocketCount } = dropIn.getCurrentStatus();
  assert.deepStrictEqual([createSocketCount, createSocketErrorCount, errorSocketCount, timeoutSocketCount], [1, 0, 1, 1]);
  // The limit follows the agent's options as the limits do; with 0 (no inactivity timeout),
  // an open is still bounded, by undici's connect timeout (10 s); a signal ends it sooner.
  agent.options.timeout = 0;
  agent.maxSockets = 10;
  await assert.rejects(agent.request(url, { signal: AbortSignal.timeout(500) }), { name: 'TimeoutError' });
  // One given up while it opened counts as created and closed, as agentkeepalive's socket.
  assert.deepStrictEqual(
    [agent.createSocketCount, agent.closeSocketCount, agent.errorSocketCount],
    [2, 2, 1],
  );
  await assert.rejects(agent.request(url), { code: 'ERR_SOCKET_TIMEOUT', timeout: 10000 });
  // A connection still opening when the agent is destroyed: the same.
  const opening = agent.request(url);
  await once(silent, 'connection');
  agent.destroy();
  await assert.rejects(opening, { code: 'ECONNRESET' });
  assert.deepStrictEqual([agent.createSocketCount, agent.closeSocketCount], [4, 4]);
});

test('the module-level request() uses a default agent per protocol', async (t) => {
  const server = await httpServer(t);
  const res = await hyperagent.request(`${server.url}/default`);
  assert.strictEqual(await res.body.text(), 'hello /default');
});

test("undici's onInfo hears each informational response before the promise resolves, as undici's does", async (t) => {
  const undici = require('undici');
  const server = await httpServer(t, (req, res) => {
    res.writeProcessing();
    res.writeEarlyHints({ link: ['</a.css>; rel=preload', '</b.js>; rel=preload'], 'x-hint': '1' });
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const pool = new undici.Pool(server.url);
  t.after(() => pool.close());
  const store = new AsyncLocalStorage();
  const heard = async (send, responseHeaders) => {
    const infos = [];
    let resolved = false;
    const res = await store.run('mine', () => send({
      responseHeaders,
      onInfo: (info) => infos.push({ ...info, resolved, store: store.getStore() }),
    }));
    resolved = true;
    assert.strictEqual(await res.body.text(), 'ok');
    return infos;
  };
  for (const raw of [undefined, 'raw']) {
    const ours = await heard((o) => agent.request(`${server.url}/`, o), raw);
    const theirs = await heard((o) => pool.request({ path: '/', method: 'GET', ...o }), raw);
    // Raw lists: names lower-case on ours, as the README says of rawHeaders.
    const lower = (infos) => infos.map((i) => (Array.isArray(i.headers)
      ? { ...i, headers: i.headers.map((v, n) => (n % 2 === 0 ? v.toLowerCase() : v)) }
      : i));
    assert.deepStrictEqual(ours, lower(theirs));
    assert.deepStrictEqual(ours.map((i) => [i.statusCode, i.resolved, i.store]), [[102, false, 'mine'], [103, false, 'mine']]);
  }
  const [, hints] = await heard((o) => agent.request(`${server.url}/`, o));
  assert.deepStrictEqual(hints.headers, { link: '</a.css>; rel=preload, </b.js>; rel=preload', 'x-hint': '1' });
});

test('onInfo hears 100 Continue too; a throw from it fails the request; bad values are refused', async (t) => {
  const url = await continueServer(t, continueAndEcho);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const infos = [];
  const res = await agent.request(url, {
    method: 'POST',
    headers: { expect: '100-continue' },
    body: 'payload',
    onInfo: (info) => infos.push(info),
  });
  assert.strictEqual(await res.body.text(), 'got payload');
  assert.deepStrictEqual(infos, [{ statusCode: 100, headers: {} }]);
  // What onInfo throws is the request's error, as undici's.
  const boom = new Error('boom');
  await assert.rejects(agent.request(url, {
    method: 'POST',
    headers: { expect: '100-continue' },
    body: 'again',
    onInfo: () => { throw boom; },
  }), (err) => err === boom);
  assert.throws(() => agent.request(url, { onInfo: 'no' }), { code: 'ERR_INVALID_ARG_TYPE', message: /options\.onInfo/ });
  for (const onInfo of [undefined, null]) await (await agent.request(url, { onInfo })).body.dump();
});

test('onInfo hears a 103 whose reused connection then closes; the request fails as a hang-up, sent once', async (t) => {
  const paths = [];
  const server = await rawServer(t, (socket) => {
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      let end;
      while ((end = buffered.indexOf('\r\n\r\n')) >= 0) {
        const path = buffered.split(' ')[1];
        buffered = buffered.slice(end + 4);
        paths.push(path);
        if (path === '/hinted') {
          socket.end('HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n');
        } else {
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        }
      }
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = `http://127.0.0.1:${server.port}`;
  assert.strictEqual(await (await agent.request(`${url}/first`)).body.text(), 'ok');
  const infos = [];
  await assert.rejects(
    agent.request(`${url}/hinted`, { onInfo: (info) => infos.push(info.statusCode) }),
    { code: 'ECONNRESET', message: 'socket hang up' },
  );
  assert.deepStrictEqual(infos, [103]);
  assert.deepStrictEqual(paths, ['/first', '/hinted'], 'sent once');
  assert.strictEqual(agent.replayCount, 0);
});

test("undici's highWaterMark sets the body stream's, and is checked", async (t) => {
  const server = await httpServer(t, (req, res) => res.end('x'.repeat(100)));
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const highWaterMark of [0, 1, 1024 * 1024]) {
    const res = await agent.request(`${server.url}/`, { highWaterMark });
    assert.strictEqual(res.body.readableHighWaterMark, highWaterMark);
    assert.strictEqual(await res.body.text(), 'x'.repeat(100));
  }
  const res = await agent.request(`${server.url}/`);
  assert.strictEqual(res.body.readableHighWaterMark, new Readable().readableHighWaterMark);
  await res.body.dump();
  assert.throws(() => agent.request(`${server.url}/`, { highWaterMark: '1' }), { code: 'ERR_INVALID_ARG_TYPE', message: /options\.highWaterMark/ });
  for (const bad of [-1, 1.5, NaN, Infinity]) {
    assert.throws(() => agent.request(`${server.url}/`, { highWaterMark: bad }), { code: 'ERR_OUT_OF_RANGE', message: /options\.highWaterMark/ });
  }
});
