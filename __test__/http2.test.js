'use strict';

// HTTP/2 on agent.request() and the Dispatcher: against Node's http2 servers (TLS with the
// committed fixture certificates verified for real, and h2c), with the faults a server can
// script at the frame level: a stream limit, REFUSED_STREAM, GOAWAY, resets.

const test = require('node:test');
const assert = require('node:assert');
const http2 = require('node:http2');
const https = require('node:https');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { Readable } = require('node:stream');
const { once } = require('node:events');
const { Agent, HttpsAgent, Dispatcher } = require('..');
const { until, stalled, slowSource } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
const CA = fixture('ca.pem');
const TLS = { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') };
const { NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR, NGHTTP2_CANCEL } = http2.constants;

// An HTTP/2 server (TLS with HTTP/1.1 too, or h2c) that counts its sessions and closes them
// when the test ends. `handler` takes requests of the compatibility API, or with `streams`
// the streams themselves (that API's request reads a stream on ahead of its consumer).
async function h2Server(t, handler, { plain = false, settings, streams = false, maxSessionMemory } = {}) {
  const server = plain
    ? http2.createServer({ settings, maxSessionMemory })
    : http2.createSecureServer({ ...TLS, allowHTTP1: !streams, settings, maxSessionMemory });
  server.sessions = [];
  server.on('session', (s) => server.sessions.push(s));
  server.on(streams ? 'stream' : 'request', handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  server.origin = `${plain ? 'http' : 'https'}://localhost:${server.address().port}`;
  t.after(() => {
    for (const s of server.sessions) s.destroy();
    server.close();
  });
  return server;
}

function h2Agent(t, options = {}) {
  const agent = new HttpsAgent({ allowH2: true, ca: CA, ...options });
  t.after(() => agent.destroy());
  return agent;
}

async function text(res) {
  let s = '';
  for await (const chunk of res.body) s += chunk;
  return s;
}

test('ALPN decides: h2 where the server takes it, HTTP/1.1 otherwise or without allowH2', async (t) => {
  const seen = [];
  const server = await h2Server(t, (req, res) => {
    seen.push({ version: req.httpVersion, authority: req.headers[':authority'], scheme: req.headers[':scheme'], host: req.headers.host });
    res.end(`v${req.httpVersion}`);
  });
  const agent = h2Agent(t);
  const res = await agent.request(`${server.origin}/a`);
  assert.strictEqual(res.httpVersion, '2.0');
  assert.strictEqual(res.statusMessage, '');
  assert.strictEqual(await text(res), 'v2.0');
  // The host header became :authority, with the scheme.
  assert.deepStrictEqual(seen[0], { version: '2.0', authority: `localhost:${server.address().port}`, scheme: 'https', host: undefined });

  const plain = new HttpsAgent({ ca: CA });
  t.after(() => plain.destroy());
  const old = await plain.request(`${server.origin}/b`);
  assert.strictEqual(old.httpVersion, '1.1');
  assert.strictEqual(old.statusMessage, 'OK');
  assert.strictEqual(await text(old), 'v1.1');

  // A server without h2 in ALPN: HTTP/1.1, as before.
  const h1 = https.createServer(TLS, (req, res) => res.end(`v${req.httpVersion}`));
  h1.listen(0, '127.0.0.1');
  await once(h1, 'listening');
  t.after(() => { h1.closeAllConnections(); h1.close(); });
  const fallback = await agent.request(`https://localhost:${h1.address().port}/c`);
  assert.strictEqual(fallback.httpVersion, '1.1');
  assert.strictEqual(await text(fallback), 'v1.1');
  // And http.request through the same agent stays on HTTP/1.1 (it offers http/1.1 alone).
  const dropIn = await new Promise((resolve, reject) => {
    https.get(`${server.origin}/d`, { agent }, (r) => {
      let s = '';
      r.on('data', (c) => { s += c; }).on('end', () => resolve(s));
    }).on('error', reject);
  });
  assert.strictEqual(dropIn, 'v1.1');
});

test('connection-specific request headers are not sent over HTTP/2 (RFC 9113 §8.2.2)', async (t) => {
  let seen = null;
  const server = await h2Server(t, (req, res) => {
    seen = req.headers;
    res.end('ok');
  });
  const agent = h2Agent(t);
  const res = await agent.request(`${server.origin}/`, {
    headers: { connection: 'keep-alive, x-hop', 'x-hop': 'named by connection', te: 'trailers', 'x-kept': 'yes' },
  });
  assert.strictEqual(await text(res), 'ok');
  for (const name of ['connection', 'x-hop', 'host']) assert.strictEqual(seen[name], undefined, name);
  // `te: trailers` is the one value HTTP/2 allows.
  assert.strictEqual(seen.te, 'trailers');
  assert.strictEqual(seen['x-kept'], 'yes');
});

test('100 requests at once share one connection, with headers as on HTTP/1.1', async (t) => {
  const server = await h2Server(t, (req, res) => {
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.setHeader('X-Mixed-Case', 'yes');
    res.end(`${req.method} ${req.url}`);
  });
  const agent = h2Agent(t);
  const bodies = await Promise.all(Array.from({ length: 100 }, async (_, i) => {
    const res = await agent.request(`${server.origin}/${i}`, i % 2 ? { method: 'POST', body: `b${i}` } : {});
    assert.deepStrictEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
    assert.strictEqual(res.headers['x-mixed-case'], 'yes');
    return text(res);
  }));
  assert.deepStrictEqual(bodies, Array.from({ length: 100 }, (_, i) => `${i % 2 ? 'POST' : 'GET'} /${i}`));
  assert.strictEqual(server.sessions.length, 1);
});

test('a small stream limit: every request is served, never more streams at once than allowed', async (t) => {
  // Streams open at once, per session (past the limit, more sessions may open).
  const open = new Map();
  let most = 0;
  const server = await h2Server(t, (req, res) => {
    const session = req.stream.session;
    open.set(session, (open.get(session) || 0) + 1);
    most = Math.max(most, open.get(session));
    setImmediate(() => {
      open.set(session, open.get(session) - 1);
      res.end(req.url);
    });
  }, { settings: { maxConcurrentStreams: 2 } });
  const agent = h2Agent(t);
  // The session's settings are known once its first request is answered.
  assert.strictEqual(await text(await agent.request(`${server.origin}/first`)), '/first');
  const bodies = await Promise.all(Array.from({ length: 30 }, async (_, i) => text(await agent.request(`${server.origin}/${i}`))));
  assert.deepStrictEqual(bodies, Array.from({ length: 30 }, (_, i) => `/${i}`));
  assert.ok(most <= 2, `at most 2 streams at once per session, saw ${most}`);
});

// A server that refuses the first stream of each path (REFUSED_STREAM) and hands the next to
// `answer`; `server.attempts` counts the streams per path.
async function refusingServer(t, answer) {
  const attempts = new Map();
  const server = await h2Server(t, (req, res) => {
    const n = (attempts.get(req.url) || 0) + 1;
    attempts.set(req.url, n);
    if (n === 1) req.stream.close(NGHTTP2_REFUSED_STREAM);
    else answer(req, res);
  });
  server.attempts = attempts;
  return server;
}

test('REFUSED_STREAM: the request goes again, whatever its method, and is processed once', async (t) => {
  const processed = [];
  const server = await refusingServer(t, (req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; }).on('end', () => {
      processed.push(`${req.method} ${req.url} ${body}`);
      res.end('ok');
    });
  });
  const agent = h2Agent(t);
  const post = await agent.request(`${server.origin}/post`, { method: 'POST', body: 'payload' });
  assert.strictEqual(await text(post), 'ok');
  const get = await agent.request(`${server.origin}/get`);
  assert.strictEqual(await text(get), 'ok');
  assert.deepStrictEqual(processed, ['POST /post payload', 'GET /get ']);
  assert.strictEqual(server.attempts.get('/post'), 2);
});

test('a refused stream with a streamed body goes again whole; without replay it fails with Node\'s code', async (t) => {
  const server = await refusingServer(t, (req, res) => {
    const hash = crypto.createHash('sha256');
    req.on('data', (c) => hash.update(c)).on('end', () => res.end(hash.digest('hex')));
  });
  const agent = h2Agent(t);
  const chunk = Buffer.alloc(4096, 7);
  const expected = crypto.createHash('sha256');
  for (let i = 0; i < 8; i++) expected.update(chunk);
  const res = await agent.request(`${server.origin}/streamed`, {
    method: 'POST',
    body: Readable.from((function* () { for (let i = 0; i < 8; i++) yield chunk; })()),
  });
  assert.strictEqual(await text(res), expected.digest('hex'));
  assert.strictEqual(server.attempts.get('/streamed'), 2);

  const strict = h2Agent(t, { replay: false });
  await assert.rejects(strict.request(`${server.origin}/strict`, { method: 'POST', body: 'x' }), (err) => {
    assert.strictEqual(err.code, 'ERR_HTTP2_STREAM_ERROR');
    assert.match(err.message, /NGHTTP2_REFUSED_STREAM/);
    return true;
  });
  assert.strictEqual(server.attempts.get('/strict'), 1);
});

test('GOAWAY with requests in flight: those left out go again on a new connection, none twice', async (t) => {
  const processed = new Map();
  let firstSession = null;
  const held = [];
  const server = await h2Server(t, (req, res) => {
    const session = req.stream.session;
    if (firstSession === null) firstSession = session;
    let body = '';
    req.on('data', (c) => { body += c; }).on('end', () => {
      const answer = () => {
        processed.set(req.url, (processed.get(req.url) || 0) + 1);
        res.end(`${req.url} ${body}`);
      };
      if (session !== firstSession) return answer();
      held.push({ id: req.stream.id, answer });
      // Once all five are here, the first session processes its first stream only.
      if (held.length === 5) {
        held.sort((a, b) => a.id - b.id);
        session.goaway(0, held[0].id);
        held[0].answer();
      }
    });
  });
  const agent = h2Agent(t);
  // GETs, POSTs and PUTs alike.
  const methods = ['GET', 'POST', 'PUT', 'POST', 'GET'];
  const results = await Promise.all(methods.map(async (method, i) => {
    const res = await agent.request(`${server.origin}/${i}`, { method, body: method === 'GET' ? undefined : `body${i}` });
    return text(res);
  }));
  assert.deepStrictEqual(results, methods.map((method, i) => `/${i} ${method === 'GET' ? '' : `body${i}`}`));
  for (let i = 0; i < 5; i++) assert.strictEqual(processed.get(`/${i}`), 1, `/${i} processed once`);
  assert.ok(server.sessions.length >= 2, 'the rest went on a new connection');
});

test('a stream the server resets fails with Node\'s HTTP/2 code; the other streams go on', async (t) => {
  const server = await h2Server(t, (req, res) => {
    if (req.url === '/reset') req.stream.close(NGHTTP2_INTERNAL_ERROR);
    else res.end('fine');
  });
  const agent = h2Agent(t);
  await assert.rejects(agent.request(`${server.origin}/reset`), (err) => {
    assert.strictEqual(err.code, 'ERR_HTTP2_STREAM_ERROR');
    assert.match(err.message, /NGHTTP2_INTERNAL_ERROR/);
    return true;
  });
  assert.strictEqual(await text(await agent.request(`${server.origin}/ok`)), 'fine');
  assert.strictEqual(server.sessions.length, 1);
});

test('abort resets only its stream (CANCEL); the others on the connection complete', async (t) => {
  const waiting = [];
  let cancelled = null;
  const server = await h2Server(t, (req, res) => {
    req.stream.on('close', () => { if (req.url === '/abort') cancelled = req.stream.rstCode; });
    waiting.push(res);
    if (waiting.length === 3) for (const r of waiting) if (!r.req.url.startsWith('/abort')) r.end('done');
  });
  const agent = h2Agent(t);
  const ac = new AbortController();
  const aborted = agent.request(`${server.origin}/abort`, { signal: ac.signal });
  const a = agent.request(`${server.origin}/a`);
  const b = agent.request(`${server.origin}/b`);
  await until(() => waiting.length === 3, 5000, 'three streams at the server');
  assert.deepStrictEqual(Object.values(agent.getCurrentStatus().http2), [{ sessions: 1, streams: 3 }]);
  ac.abort();
  await assert.rejects(aborted, { name: 'AbortError' });
  assert.strictEqual(await text(await a), 'done');
  assert.strictEqual(await text(await b), 'done');
  await until(() => cancelled !== null, 5000, 'the stream reset');
  assert.strictEqual(cancelled, NGHTTP2_CANCEL);
  assert.strictEqual(server.sessions.length, 1);
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(Object.values(status.http2), [{ sessions: 1, streams: 0 }]);
  assert.strictEqual(status.requestCount, 2, 'the two completed streams count as requests');
});

test('an upload aborted midway resets its stream: the server never sees the cut body end as whole', async (t) => {
  let got = null;
  const server = await h2Server(t, (req, res) => {
    let n = 0;
    const seen = { ended: false, reset: null, bytes: 0 };
    req.on('data', (c) => { n += c.length; if (n >= 3000) server.emit('midway'); });
    // The stream's own end: END_STREAM came (the compatibility request ends at a reset too).
    req.stream.on('end', () => { seen.ended = true; });
    req.on('error', () => {});
    req.stream.on('close', () => { seen.bytes = n; seen.reset = req.stream.rstCode; got = seen; });
    res.writeHead(200);
    res.write('head');
  });
  const agent = h2Agent(t);
  const ac = new AbortController();
  // A source slower than the connection: the body waits on it, not on the server's window.
  let sent = 0;
  async function* slow() {
    for (; sent < 10_000; sent++) {
      await new Promise(setImmediate);
      yield Buffer.alloc(1000, 1);
    }
  }
  const midway = once(server, 'midway');
  const res = await agent.request(`${server.origin}/up`, { method: 'POST', body: slow(), signal: ac.signal });
  res.body.on('error', () => {});
  res.body.resume();
  await midway;
  ac.abort();
  await until(() => got !== null, 5000, 'the stream to close at the server');
  assert.strictEqual(got.ended, false, `the server saw the body end after ${got.bytes} bytes`);
  assert.notStrictEqual(got.reset, 0);
  assert.ok(sent < 10_000);
});

test('a body the server ends short of its content-length with RST_STREAM(NO_ERROR) fails, not passes as whole', async (t) => {
  const { NGHTTP2_NO_ERROR } = http2.constants;
  const server = await h2Server(t, (req, res) => {
    res.writeHead(200, { 'content-length': '10' });
    if (req.method === 'HEAD') return res.end();
    if (req.url === '/whole') return res.end('0123456789');
    res.write('ab', () => res.stream.close(NGHTTP2_NO_ERROR));
  });
  const agent = h2Agent(t);
  const res = await agent.request(`${server.origin}/short`);
  assert.strictEqual(res.statusCode, 200);
  await assert.rejects(text(res), { code: 'ERR_HTTP2_STREAM_ERROR', message: /PROTOCOL_ERROR/ });
  // A whole body and a HEAD response's length pass; the session goes on.
  assert.strictEqual(await text(await agent.request(`${server.origin}/whole`)), '0123456789');
  const head = await agent.request(`${server.origin}/head`, { method: 'HEAD' });
  assert.strictEqual(head.headers['content-length'], '10');
  assert.strictEqual(await text(head), '');
  assert.strictEqual(server.sessions.length, 1);
  // Through the Dispatcher, fetch's body fails with it as the cause.
  const dispatcher = new Dispatcher({ allowH2: true, ca: CA });
  t.after(() => dispatcher.destroy());
  const response = await fetch(`${server.origin}/short`, { dispatcher });
  await assert.rejects(response.text(), (err) => err.cause?.code === 'ERR_HTTP2_STREAM_ERROR');
});

test('a body the server resets before its end, with NO_ERROR or CANCEL and no content-length, fails, not passes as whole', async (t) => {
  const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL } = http2.constants;
  const server = await h2Server(t, (req, res) => {
    const code = req.url === '/cancel' ? NGHTTP2_CANCEL : NGHTTP2_NO_ERROR;
    res.writeHead(200);
    res.write('part', () => res.stream.close(code));
  });
  const agent = h2Agent(t);
  for (const path of ['/no-error', '/cancel']) {
    const res = await agent.request(`${server.origin}${path}`);
    assert.strictEqual(res.statusCode, 200);
    await assert.rejects(text(res), { code: 'ERR_HTTP2_STREAM_ERROR' }, path);
  }
  assert.strictEqual(server.sessions.length, 1);
});

test('trailers both ways, and a large upload streamed with its checksum', async (t) => {
  let sent = null;
  const server = await h2Server(t, (req, res) => {
    const hash = crypto.createHash('sha256');
    let bytes = 0;
    req.on('data', (c) => { hash.update(c); bytes += c.length; });
    req.on('end', () => {
      sent = req.trailers;
      res.addTrailers({ 'x-sum': hash.digest('hex') });
      res.end(String(bytes));
    });
  });
  const agent = h2Agent(t);
  const chunk = crypto.randomBytes(64 * 1024);
  const count = 128; // 8 MiB
  const expected = crypto.createHash('sha256');
  for (let i = 0; i < count; i++) expected.update(chunk);
  const res = await agent.request(`${server.origin}/up`, {
    method: 'POST',
    body: Readable.from((function* () { for (let i = 0; i < count; i++) yield chunk; })()),
    trailers: () => ({ 'x-sent': String(count) }),
  });
  assert.strictEqual(await text(res), String(count * chunk.length));
  assert.strictEqual(res.trailers['x-sum'], expected.digest('hex'));
  // Over HTTP/2 the request's trailers need no trailer header.
  assert.strictEqual(sent['x-sent'], String(count));
});

test('an unread body stalls only its own stream, within its window', async (t) => {
  let written = 0;
  let stalled = null;
  const server = await h2Server(t, (req, res) => {
    if (req.url !== '/big') return res.end('small');
    const chunk = Buffer.alloc(64 * 1024, 1);
    const pump = () => {
      // 64 MiB at most; stops when the stream's window is full and Node buffers.
      while (written < 64 * 1024 * 1024) {
        written += chunk.length;
        if (!res.write(chunk)) {
          stalled = written;
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
  });
  const agent = h2Agent(t);
  const big = await agent.request(`${server.origin}/big`);
  await until(() => stalled !== null, 5000, 'the server to stall');
  // Another stream on the same connection is served meanwhile.
  assert.strictEqual(await text(await agent.request(`${server.origin}/small`)), 'small');
  assert.strictEqual(server.sessions.length, 1);
  assert.ok(written < 8 * 1024 * 1024, `the unread body held ${written} bytes`);
  big.body.destroy();
});

test('a stream reset as its response comes: listeners put on the body after the await hear of it', { timeout: 30000 }, async (t) => {
  // The head, some of the body and the reset come in one flight, and reach JavaScript
  // together at times: the body fails as its promise resolves. Its error and 'close' wait for
  // the code that awaited it, as undici's do.
  const server = await h2Server(t, (stream) => {
    stream.on('error', () => {});
    stream.respond({ ':status': 200, 'content-length': '100000' });
    stream.write(Buffer.alloc(35000, 'x'), () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
  }, { plain: true, streams: true });
  const agent = new Agent({ h2c: true });
  t.after(() => agent.destroy());
  let resolved = 0;
  for (let i = 0; i < 100; i++) {
    // The reset may come before the head has been taken: then the request itself fails.
    const res = await agent.request(server.origin).catch((err) => err);
    if (res instanceof Error) {
      assert.strictEqual(res.code, 'ERR_HTTP2_STREAM_ERROR');
      continue;
    }
    resolved++;
    const { body } = res;
    assert.strictEqual(body.closed, false, `request ${i}: closed before its listeners came`);
    const heard = [];
    body.on('data', () => {});
    body.on('error', (err) => heard.push(err.code));
    await new Promise((resolve) => body.on('close', resolve));
    assert.deepStrictEqual(heard, ['ERR_HTTP2_STREAM_ERROR'], `request ${i}`);
  }
  assert.ok(resolved > 50, `${resolved} of 100 responses came`);
});

test('unread bodies hold their own streams only: a request among twenty of them is answered', { timeout: 30000 }, async (t) => {
  // Twenty 2 MiB bodies left unread, each holding its stream's window (1 MiB): 20 MiB a
  // connection's window of 16 MiB could not hold.
  const big = Buffer.alloc(2 * 1024 * 1024, 'u');
  let session = null;
  let window = 0;
  const server = await h2Server(t, (stream, headers) => {
    stream.on('error', () => {});
    if (session === null) {
      session = stream.session;
      window = session.state.remoteWindowSize;
    }
    stream.respond({ ':status': 200 });
    stream.end(headers[':path'] === '/small' ? 'small' : big);
  }, { plain: true, streams: true, maxSessionMemory: 100 });
  const agent = new Agent({ h2c: true });
  t.after(() => agent.destroy());
  const unread = [];
  for (let i = 0; i < 20; i++) unread.push(await agent.request(`${server.origin}/big`));
  // The server has sent more than 16 MiB: every stream its window's worth.
  const sent = () => window - session.state.remoteWindowSize;
  await until(() => sent() >= 18 * 1024 * 1024, 10_000, 'the windows to fill');
  const small = await agent.request(`${server.origin}/small`);
  assert.strictEqual(await small.body.text(), 'small');
  for (const res of unread) assert.strictEqual((await res.body.arrayBuffer()).byteLength, big.length);
});

test("trailers past the head's limit fail the response, as a head past it does, over HTTP/2 too", async (t) => {
  // Fifty fields of 800 bytes: 40 KB, past the default limit (16 KiB).
  const fields = {};
  for (let i = 0; i < 50; i++) fields[`x-trailer-${i}`] = 'v'.repeat(800);
  const server = await h2Server(t, (stream, headers) => {
    stream.on('error', () => {});
    if (headers[':path'] === '/head') {
      stream.respond({ ':status': 200, 'x-big': 'h'.repeat(17_000) });
      return stream.end('body');
    }
    stream.respond({ ':status': 200 }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers(fields));
    return stream.end('body');
  }, { plain: true, streams: true });
  const agent = new Agent({ h2c: true });
  t.after(() => agent.destroy());
  const res = await agent.request(`${server.origin}/trailers`);
  await assert.rejects(res.body.text(), { code: 'HPE_HEADER_OVERFLOW' });
  await assert.rejects(agent.request(`${server.origin}/head`), { code: 'HPE_HEADER_OVERFLOW' });
  // Within a larger limit, all of them.
  const whole = await agent.request(`${server.origin}/trailers`, { maxResponseHeaderSize: 64 * 1024 });
  assert.strictEqual(await whole.body.text(), 'body');
  assert.strictEqual(Object.keys(whole.trailers).filter((k) => k.startsWith('x-trailer-')).length, 50);
});

test('h2c: HTTP/2 by prior knowledge on a plain Agent', async (t) => {
  const server = await h2Server(t, (req, res) => res.end(`h2c ${req.httpVersion} ${req.headers[':scheme']}`), { plain: true });
  const agent = new Agent({ h2c: true });
  t.after(() => agent.destroy());
  const res = await agent.request(`http://127.0.0.1:${server.address().port}/`);
  assert.strictEqual(res.httpVersion, '2.0');
  assert.strictEqual(await text(res), 'h2c 2.0 http');
});

test('a session past socketActiveTTL takes no new stream and does not hold the next session to one', async (t) => {
  // The first response comes after the TTL: its session is past it from then on.
  let first = true;
  const server = await h2Server(t, (req, res) => {
    const delay = first ? 250 : 0;
    first = false;
    setTimeout(() => res.end('hi'), delay);
  });
  const agent = h2Agent(t, { socketActiveTTL: 200 });
  assert.strictEqual(await text(await agent.request(`${server.origin}/first`)), 'hi');
  const bodies = await Promise.all(Array.from({ length: 6 }, (_, i) => agent.request(`${server.origin}/${i}`).then(text)));
  assert.deepStrictEqual(bodies, Array(6).fill('hi'));
  // One new session carries the six, rather than a connection each.
  assert.strictEqual(server.sessions.length, 2);
});

test('a session past socketActiveTTL closes once it carries no stream, freeing its slot', { timeout: 20_000 }, async (t) => {
  // The first response's head comes after the TTL; its end waits for the test's word.
  let endFirst = null;
  let first = true;
  const server = await h2Server(t, (req, res) => {
    if (!first) return res.end('fresh');
    first = false;
    setTimeout(() => {
      res.writeHead(200);
      res.write('old ');
      endFirst = () => res.end('session');
    }, 250);
  });
  const agent = h2Agent(t, { socketActiveTTL: 200, maxSockets: 1, freeSocketTimeout: 60_000 });
  const old = await agent.request(`${server.origin}/first`);
  // Its session is past the TTL with a stream in flight: the next request waits for the slot
  // rather than take a stream on it, and gets a session of its own once the old one closes.
  const next = agent.request(`${server.origin}/next`);
  await until(() => endFirst !== null, 5000, "the first response's head");
  endFirst();
  assert.strictEqual(await text(old), 'old session');
  assert.strictEqual(await text(await next), 'fresh');
  assert.strictEqual(server.sessions.length, 2);
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 2);
});

test('an idle session past socketActiveTTL is closed by the next request, which takes its slot', { timeout: 20_000 }, async (t) => {
  let first = true;
  const server = await h2Server(t, (req, res) => {
    const delay = first ? 250 : 0;
    first = false;
    setTimeout(() => res.end('hi'), delay);
  });
  // One slot, and an idle time that would keep the old session for a minute.
  const agent = h2Agent(t, { socketActiveTTL: 200, maxSockets: 1, freeSocketTimeout: 60_000 });
  assert.strictEqual(await text(await agent.request(`${server.origin}/first`)), 'hi');
  assert.strictEqual(await text(await agent.request(`${server.origin}/second`)), 'hi');
  assert.strictEqual(server.sessions.length, 2);
  const old = server.sessions[0];
  if (!old.closed) await once(old, 'close');
});

test('an idle session closes when it reaches socketActiveTTL, not a free timeout later', { timeout: 20_000 }, async (t) => {
  const server = await h2Server(t, (req, res) => res.end('hi'));
  const agent = h2Agent(t, { socketActiveTTL: 300, freeSocketTimeout: 60_000 });
  assert.strictEqual(await text(await agent.request(`${server.origin}/1`)), 'hi');
  const session = server.sessions[0];
  if (!session.closed) await once(session, 'close');
  await until(() => agent.getCurrentStatus().closeSocketCount === 1, 5000, 'the close counted');
  // The next request opens a session of its own.
  assert.strictEqual(await text(await agent.request(`${server.origin}/2`)), 'hi');
  assert.strictEqual(server.sessions.length, 2);
});

test('a session that fails counts one socket error, whatever its streams in flight met; one closed cleanly counts none', async (t) => {
  let opened = 0;
  const sockets = [];
  const server = await h2Server(t, (stream) => {
    stream.respond({ ':status': 200 });
    stream.write('part');
    // Its fifth stream's head is out: the server resets the session's connection.
    if (++opened === 5) setImmediate(() => sockets[0].resetAndDestroy());
  }, { streams: true, plain: true });
  server.on('connection', (socket) => sockets.push(socket));
  const agent = new Agent({ h2c: true });
  t.after(() => agent.destroy());
  const results = await Promise.allSettled([1, 2, 3, 4, 5].map(async (i) => text(await agent.request(`${server.origin}/${i}`))));
  for (const r of results) assert.strictEqual(r.status, 'rejected');
  await until(() => agent.getCurrentStatus().closeSocketCount === 1, 5000, 'the session closed');
  let status = agent.getCurrentStatus();
  assert.deepStrictEqual([status.createSocketCount, status.errorSocketCount, status.timeoutSocketCount], [1, 1, 0]);

  // A session its server ends with GOAWAY, no error, then a close: not the connection's fault.
  const clean = await h2Server(t, (req, res) => res.end('hi'));
  const other = h2Agent(t);
  assert.strictEqual(await text(await other.request(`${clean.origin}/`)), 'hi');
  clean.sessions[0].close();
  await until(() => other.getCurrentStatus().closeSocketCount === 1, 5000, 'the session closed');
  status = other.getCurrentStatus();
  assert.deepStrictEqual([status.createSocketCount, status.errorSocketCount, status.timeoutSocketCount], [1, 0, 0]);

  // A GOAWAY with an error code is the session's error, as Node's http2 client has it.
  assert.strictEqual(await text(await other.request(`${clean.origin}/`)), 'hi');
  clean.sessions[1].goaway(http2.constants.NGHTTP2_PROTOCOL_ERROR);
  await until(() => other.getCurrentStatus().closeSocketCount === 2, 5000, 'the session closed');
  status = other.getCurrentStatus();
  assert.deepStrictEqual([status.createSocketCount, status.errorSocketCount, status.timeoutSocketCount], [2, 1, 0]);
});

// An http.request through `agent`: its body, as text.
function dropInGet(agent, url) {
  return new Promise((resolve, reject) => {
    https.get(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

test("an idle session gives its slot to a request that maxSockets or maxTotalSockets holds back", { timeout: 20_000 }, async (t) => {
  const server = await h2Server(t, (req, res) => res.end(`hi ${req.httpVersion}`));
  const other = await h2Server(t, (req, res) => res.end(`other ${req.httpVersion}`));
  // An idle time that would hold the slot for a minute.
  const agent = h2Agent(t, { maxSockets: 1, freeSocketTimeout: 60_000 });
  assert.strictEqual(await text(await agent.request(`${server.origin}/`)), 'hi 2.0');
  // http.request speaks HTTP/1.1 on a connection of its own: the idle session makes room.
  assert.strictEqual(await dropInGet(agent, `${server.origin}/`), 'hi 1.1');
  assert.strictEqual(server.sessions.length, 1);
  await until(() => server.sessions[0].closed || server.sessions[0].destroyed, 5000, 'the idle session to close');

  const total = h2Agent(t, { maxTotalSockets: 1, freeSocketTimeout: 60_000 });
  assert.strictEqual(await text(await total.request(`${server.origin}/`)), 'hi 2.0');
  assert.strictEqual(await text(await total.request(`${other.origin}/`)), 'other 2.0');
  assert.strictEqual(total.getCurrentStatus().closeSocketCount, 1);
});

test('a session whose last stream ends gives its slot to a request waiting for one', { timeout: 20_000 }, async (t) => {
  let answer = null;
  const server = await h2Server(t, (req, res) => {
    if (req.httpVersion === '2.0') answer = () => res.end('h2');
    else res.end('h1');
  });
  const agent = h2Agent(t, { maxSockets: 1, freeSocketTimeout: 60_000 });
  const first = agent.request(`${server.origin}/`);
  await until(() => answer !== null, 5000, 'the HTTP/2 request');
  // The session carries a stream: the http.request waits for the slot...
  const second = dropInGet(agent, `${server.origin}/`);
  await until(() => Object.keys(agent.getCurrentStatus().requests).length === 1, 5000, 'the http.request to wait');
  // ... which the session gives up once its stream ends, rather than idle with it.
  answer();
  assert.strictEqual(await text(await first), 'h2');
  assert.strictEqual(await second, 'h1');
});

test('maxRequestsPerSocket limits HTTP/1.1 connections only: a session carries any number of streams', async (t) => {
  const server = await h2Server(t, (req, res) => res.end('hi'));
  const agent = h2Agent(t, { maxRequestsPerSocket: 1 });
  for (let i = 0; i < 3; i++) assert.strictEqual(await text(await agent.request(`${server.origin}/${i}`)), 'hi');
  assert.strictEqual(server.sessions.length, 1);
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 1);
});

test('a session the server closes is replaced by a new one for the next request', async (t) => {
  const server = await h2Server(t, (req, res) => res.end('hi'));
  const agent = h2Agent(t);
  assert.strictEqual(await text(await agent.request(`${server.origin}/1`)), 'hi');
  const first = server.sessions[0];
  first.close();
  await once(first, 'close');
  // The client hears the close (GOAWAY, then the end of the connection) asynchronously: the
  // next request is served either way, on a new session.
  assert.strictEqual(await text(await agent.request(`${server.origin}/2`)), 'hi');
  assert.strictEqual(server.sessions.length, 2);
});

test('allowH2 and h2c are checked as booleans', () => {
  assert.throws(() => new HttpsAgent({ allowH2: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Agent({ h2c: 1 }), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('fetch over HTTP/2 through the Dispatcher', async (t) => {
  const server = await h2Server(t, (req, res) => res.end(`fetched over ${req.httpVersion}`));
  const dispatcher = new Dispatcher({ allowH2: true, ca: CA });
  t.after(() => dispatcher.destroy());
  const res = await fetch(`${server.origin}/`, { dispatcher });
  assert.strictEqual(res.status, 200);
  assert.strictEqual(await res.text(), 'fetched over 2.0');
});

test('an idle session closes after freeSocketTimeout, and agent.destroy() closes the rest', async (t) => {
  const server = await h2Server(t, (req, res) => res.end('hi'));
  const agent = h2Agent(t, { freeSocketTimeout: 50 });
  assert.strictEqual(await text(await agent.request(`${server.origin}/1`)), 'hi');
  await once(server.sessions[0], 'close');

  const other = h2Agent(t);
  assert.strictEqual(await text(await other.request(`${server.origin}/2`)), 'hi');
  const session = server.sessions[1];
  assert.strictEqual(session.closed, false);
  other.destroy();
  await once(session, 'close');

  const once1 = h2Agent(t, { keepAlive: false });
  assert.strictEqual(await text(await once1.request(`${server.origin}/3`)), 'hi');
  await once(server.sessions[2], 'close');
});

test('a session whose upload waits for the server to read closes on agent.destroy() and with its Worker', { timeout: 20_000 }, async (t) => {
  // The server answers and reads none of the upload: the stream's window stays shut, and the
  // body's sending waits for it.
  const server = await h2Server(t, (req, res) => {
    req.pause();
    res.writeHead(200);
    res.write('head');
  });
  let pulled = 0;
  async function* endless() {
    // Bounded: a source read on without end would show here.
    for (; pulled < 100_000; pulled++) yield Buffer.alloc(16 * 1024);
  }
  const agent = new HttpsAgent({ allowH2: true, ca: CA });
  const res = await agent.request(`${server.origin}/up`, { method: 'POST', body: endless() });
  const failed = new Promise((resolve) => res.body.on('error', resolve));
  res.body.resume();
  const closed = once(server.sessions[0], 'close');
  agent.destroy();
  assert.ok(await failed);
  await closed;
  assert.ok(pulled < 1000, `${pulled} chunks read`);

  // The same upload from a Worker, through fetch: the connection closes when the Worker goes.
  const { Worker } = require('node:worker_threads');
  const worker = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads');
    const { Dispatcher } = require(workerData.root);
    const dispatcher = new Dispatcher({ allowH2: true, ca: workerData.ca });
    const body = new ReadableStream({ pull(c) { c.enqueue(new Uint8Array(16 * 1024)); } });
    fetch(workerData.url, { dispatcher, method: 'POST', body, duplex: 'half' })
      .then((r) => { parentPort.postMessage(r.status); return r.body.pipeTo(new WritableStream()); })
      .catch(() => {});
  `, { eval: true, workerData: { root: path.join(__dirname, '..'), ca: CA, url: `${server.origin}/up` } });
  t.after(() => worker.terminate());
  const [status] = await once(worker, 'message');
  assert.strictEqual(status, 200);
  const inWorker = once(server.sessions[1], 'close');
  await worker.terminate();
  await inWorker;
});

test('an upload aborted while the server holds its window shut frees its stream; the next requests go on', { timeout: 20_000 }, async (t) => {
  let upload = null;
  const server = await h2Server(t, (stream, headers) => {
    stream.on('error', () => {});
    stream.respond({ ':status': 200 });
    if (headers[':path'] !== '/up') return stream.end('ok');
    // Reads none of the upload: the stream's window stays shut.
    upload = once(stream, 'close');
    stream.write('head');
  }, { streams: true });
  // An idle session would close at its free timeout, and the stream with it: not in this test.
  const agent = h2Agent(t, { freeSocketTimeout: 60_000 });
  const ac = new AbortController();
  let pulled = 0;
  async function* endless() {
    for (; pulled < 100_000; pulled++) yield Buffer.alloc(16 * 1024);
  }
  const res = await agent.request(`${server.origin}/up`, { method: 'POST', body: endless(), signal: ac.signal });
  res.body.on('error', () => {});
  res.body.resume();
  // The upload stalls: the server has a window's worth and reads no more, and the connection
  // holds the body back.
  await until(() => upload !== null, 5000, 'the upload at the server');
  await stalled(() => pulled);
  ac.abort();
  // Its stream closes at the server while the agent lives (its session takes no new stream,
  // and closes once its last ends); other requests are served meanwhile.
  assert.strictEqual(await text(await agent.request(`${server.origin}/x`)), 'ok');
  await upload;
  assert.strictEqual(await text(await agent.request(`${server.origin}/y`)), 'ok');
});

test('requests waiting for a session fail with its connect error, and on agent.destroy()', async (t) => {
  // Nothing listens on this port once the server has closed.
  const server = await h2Server(t, (req, res) => res.end('hi'));
  const { port } = server.address();
  server.close();
  for (const s of server.sessions) s.destroy();
  await once(server, 'close');
  const agent = h2Agent(t);
  const results = await Promise.allSettled(Array.from({ length: 5 }, () => agent.request(`https://localhost:${port}/`)));
  for (const r of results) {
    assert.strictEqual(r.status, 'rejected');
    assert.strictEqual(r.reason.code, 'ECONNREFUSED');
  }

  // A server that accepts and never answers the handshake: the waiters fail with the agent.
  const net = require('node:net');
  const silent = net.createServer(() => {});
  silent.listen(0, '127.0.0.1');
  await once(silent, 'listening');
  t.after(() => silent.close());
  const other = h2Agent(t);
  const pending = Array.from({ length: 3 }, () => other.request(`https://localhost:${silent.address().port}/`));
  await until(() => other.getCurrentStatus().createSocketCount >= 1, 5000, 'the connect to start');
  other.destroy();
  const settled = await Promise.allSettled(pending);
  for (const r of settled) assert.strictEqual(r.status, 'rejected');
});

test('agent.close(): the streams in flight finish, then the session closes', async (t) => {
  let release = null;
  const server = await h2Server(t, (req, res) => {
    if (req.url === '/slow') release = () => res.end('slow done');
    else res.end('quick');
  });
  const agent = h2Agent(t);
  const slow = agent.request(`${server.origin}/slow`);
  await until(() => release !== null, 5000, 'the slow stream at the server');
  const closing = agent.close();
  await assert.rejects(agent.request(`${server.origin}/late`), { code: 'ERR_HYPERAGENT_AGENT_CLOSED' });
  release();
  assert.strictEqual(await text(await slow), 'slow done');
  await closing;
  await once(server.sessions[0], 'close');
});

test('a headers timeout on a stream waits out a slow body source, as on HTTP/1.1', { timeout: 30_000 }, async (t) => {
  const server = await h2Server(t, async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    res.end(`${req.httpVersion} ${body}`);
  });
  const agent = h2Agent(t);
  // A silence longer than the timeout, exact and swept.
  for (const [headersTimeout, gap] of [[800, 1800], [1100, 2500]]) {
    const res = await agent.request(`${server.origin}/`, { method: 'POST', body: slowSource(gap), headersTimeout });
    assert.strictEqual(await text(res), '2.0 first;last', `headersTimeout ${headersTimeout}`);
  }
});

test('a headers timeout on a stream fails that request alone; the session goes on', async (t) => {
  let reset = null;
  const server = await h2Server(t, (req, res) => {
    if (req.url === '/hang') {
      req.stream.on('close', () => { reset = req.stream.rstCode; });
      return;
    }
    res.end('fine');
  });
  const agent = h2Agent(t);
  await assert.rejects(agent.request(`${server.origin}/hang`, { headersTimeout: 50 }), { code: 'ERR_HYPERAGENT_HEADERS_TIMEOUT' });
  assert.strictEqual(await text(await agent.request(`${server.origin}/ok`)), 'fine');
  await until(() => reset !== null, 5000, 'the stream reset');
  assert.strictEqual(reset, NGHTTP2_CANCEL);
  assert.strictEqual(server.sessions.length, 1);
});

test('a request body is read from its source only as the stream\'s window opens', async (t) => {
  let upload = null;
  const server = await h2Server(t, (req, res) => {
    if (req.url !== '/up') return res.end('pong');
    // Not read until the test says so: the stream's window stays shut.
    req.pause();
    upload = { req, res };
  });
  const agent = h2Agent(t);
  const chunk = Buffer.alloc(16 * 1024, 1);
  const total = 16 * 1024 * 1024;
  let pulled = 0;
  async function* source() {
    while (pulled < total) {
      pulled += chunk.length;
      yield chunk;
    }
  }
  const response = agent.request(`${server.origin}/up`, { method: 'POST', body: source() });
  await until(() => upload !== null, 5000, 'the upload at the server');
  // Round trips on the same connection: time for the body to run ahead, were it not held.
  for (let i = 0; i < 5; i++) assert.strictEqual(await text(await agent.request(`${server.origin}/ping`)), 'pong');
  assert.ok(pulled < 2 * 1024 * 1024, `the source was read ${pulled} bytes ahead of a server that reads nothing`);
  // The server reads now: the rest follows.
  let received = 0;
  upload.req.on('data', (c) => { received += c.length; });
  upload.req.on('end', () => upload.res.end(String(received)));
  upload.req.resume();
  assert.strictEqual(await text(await response), String(total));
});

test('a session ended gracefully with requests queued for its streams: each goes again and is answered once', async (t) => {
  // The server takes 4 streams at once and ends each of its first sessions after its first
  // answer: the requests queued behind their streams, and those above a GOAWAY's last stream,
  // were not processed, and go again on new sessions (some more than once), whatever their
  // method.
  const processed = new Map();
  const ended = new Set();
  const server = await h2Server(t, (req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; }).on('end', () => {
      processed.set(req.url, (processed.get(req.url) || 0) + 1);
      res.end(`${req.url} ${body}`);
      const session = req.stream.session;
      if (ended.size < 3 && !ended.has(session)) {
        ended.add(session);
        session.close();
      }
    });
  }, { settings: { maxConcurrentStreams: 4 } });
  const agent = h2Agent(t);
  const methods = Array.from({ length: 24 }, (_, i) => (i % 3 === 0 ? 'POST' : 'GET'));
  const results = await Promise.all(methods.map(async (method, i) => {
    const res = await agent.request(`${server.origin}/${i}`, { method, body: method === 'GET' ? undefined : `body${i}` });
    return text(res);
  }));
  assert.deepStrictEqual(results, methods.map((method, i) => `/${i} ${method === 'GET' ? '' : `body${i}`}`));
  for (let i = 0; i < methods.length; i++) assert.strictEqual(processed.get(`/${i}`), 1, `/${i} processed once`);
  assert.ok(server.sessions.length >= 2);
});

test('a session whose connection drops mid-body fails its request with a socket error\'s code, on both paths', async (t) => {
  const server = await h2Server(t, (req, res) => {
    res.write('partial');
    // The connection goes at once, with no GOAWAY: the socket's error is the request's.
    setImmediate(() => { for (const s of server.sockets) s.destroy(); });
  });
  server.sockets = new Set();
  server.on('secureConnection', (s) => server.sockets.add(s));
  const agent = h2Agent(t);
  const res = await agent.request(`${server.origin}/`);
  await assert.rejects(res.body.text(), (err) => {
    assert.match(err.code, /^(ECONNRESET|EPIPE)$/, err.message);
    return true;
  });
  const dispatcher = new Dispatcher({ https: agent });
  await assert.rejects(fetch(`${server.origin}/`, { dispatcher }).then((r) => r.text()), (err) => {
    assert.match(err.cause?.code, /^(ECONNRESET|EPIPE)$/, String(err.cause));
    return true;
  });
});
