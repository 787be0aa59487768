'use strict';

// The keep-alive race: the server drops a reused connection just as a request arrives on it.
// Idempotent requests are sent again on a fresh connection, once; others fail saying whether
// they went out, and are never sent twice.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const { once } = require('node:events');
const { Readable } = require('node:stream');
const fs = require('node:fs');
const path = require('node:path');
const { Agent, HttpsAgent } = require('..');
const { rawServer, readRequest, eachRequest, request, requestError, tcpTimer } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));

const OK = (body) => `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

// A server that answers the first request of every connection, and drops the connection when
// a second request arrives on it (with a FIN, or an RST), as a server whose idle timeout fired
// at that instant does; `{ tail }`: with a FIN after those bytes, the start of a response. It
// records every request it received.
async function racingServer(t, how) {
  const seen = [];
  const server = await rawServer(t, async (socket) => {
    for (let n = 0; ; n++) {
      let req;
      try {
        req = await readRequest(socket);
      } catch {
        return;
      }
      const line = req.head.split('\r\n')[0];
      seen.push({ line, conn: socket.remotePort, dropped: n > 0, body: req.body.toString() });
      if (n > 0) {
        if (how === 'rst') socket.resetAndDestroy();
        else socket.end(how.tail);
        return;
      }
      socket.write(OK(`answer to ${line}`));
    }
  });
  server.seen = seen;
  server.url = `http://127.0.0.1:${server.port}`;
  return server;
}

// One request to open a connection, then (with it idle in the pool) the request under test.
async function warmThen(agent, server, fn) {
  const freed = new Promise((resolve) => agent.once('free', resolve));
  await request(`${server.url}/warm`, { agent });
  await freed;
  return fn();
}

for (const how of ['fin', 'rst']) {
  test(`http.request: a GET on a reused connection that dies (${how}) is replayed, once`, async (t) => {
    const server = await racingServer(t, how);
    const agent = new Agent();
    t.after(() => agent.destroy());
    const { body, req } = await warmThen(agent, server, () => request(`${server.url}/get`, { agent }));
    assert.strictEqual(body, 'answer to GET /get HTTP/1.1');
    assert.strictEqual(req.reusedSocket, true, 'Node saw a reused socket and no failure');
    assert.deepStrictEqual(server.seen.map((s) => [s.line, s.dropped]), [
      ['GET /warm HTTP/1.1', false],
      ['GET /get HTTP/1.1', true],
      ['GET /get HTTP/1.1', false],
    ]);
    assert.strictEqual(agent.replayCount, 1);
  });

  test(`agent.request(): a GET on a reused connection that dies (${how}) is replayed`, async (t) => {
    const server = await racingServer(t, how);
    const agent = new Agent();
    t.after(() => agent.destroy());
    const first = await agent.request(`${server.url}/warm`);
    assert.strictEqual(await first.body.text(), 'answer to GET /warm HTTP/1.1');
    const res = await agent.request(`${server.url}/get`);
    assert.strictEqual(await res.body.text(), 'answer to GET /get HTTP/1.1');
    assert.strictEqual(server.seen.filter((s) => s.line === 'GET /get HTTP/1.1').length, 2);
    assert.strictEqual(agent.replayCount, 1);
  });
}

test('agent.request(): a PUT with a body on a reused connection that dies is replayed with its whole body', async (t) => {
  const server = await racingServer(t, 'fin');
  const agent = new Agent();
  t.after(() => agent.destroy());
  await (await agent.request(`${server.url}/warm`)).body.text();
  // A small body (copied into Rust) and a large one (sent from the Buffer's memory), each on
  // the connection the last request left idle.
  for (const [i, size] of [3000, 48 * 1024].entries()) {
    const body = Buffer.alloc(size, `put body ${i} `);
    const res = await agent.request(`${server.url}/put${i}`, { method: 'PUT', body });
    assert.strictEqual(await res.body.text(), `answer to PUT /put${i} HTTP/1.1`);
    const puts = server.seen.filter((s) => s.line === `PUT /put${i} HTTP/1.1`);
    assert.deepStrictEqual(puts.map((s) => [s.dropped, s.body === body.toString()]), [[true, true], [false, true]]);
    assert.strictEqual(agent.replayCount, i + 1);
  }
});

// A server whose first connection answers one request, then closes (a FIN) as soon as the
// head of the next arrives, before its body; later connections answer every request with the
// size of its body. `dropped` resolves at the close; `bodies` are the bodies answered after it.
async function headDroppingServer(t) {
  let dropped;
  const bodies = [];
  const server = await rawServer(t, async (socket, index) => {
    if (index > 0) {
      for await (const req of eachRequest(socket)) {
        bodies.push(req.body.toString());
        socket.write(OK(`got ${req.body.length}`));
      }
      return;
    }
    const req = await readRequest(socket);
    socket.write(OK(`got ${req.body.length}`));
    let seen = '';
    socket.on('data', (chunk) => {
      seen += chunk.toString('latin1');
      if (seen.includes('\r\n\r\n') && socket.writable) {
        socket.end();
        dropped();
      }
    });
  });
  server.bodies = bodies;
  server.dropped = new Promise((resolve) => (dropped = resolve));
  server.url = `http://127.0.0.1:${server.port}`;
  return server;
}

test('agent.request(): a PUT streamed from its source is replayed as it went, then the rest of the source follows', async (t) => {
  const server = await headDroppingServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  assert.strictEqual(await (await agent.request(`${server.url}/warm`)).body.text(), 'got 0');
  // Part of the body goes before the server drops the connection, the rest after.
  async function* source() {
    yield 'one,';
    await server.dropped;
    yield 'two,';
    yield 'three';
  }
  const res = await agent.request(`${server.url}/put`, { method: 'PUT', body: source(), headers: { 'content-length': '13' } });
  assert.strictEqual(await res.body.text(), 'got 13');
  assert.deepStrictEqual(server.bodies, ['one,two,three']);
  assert.strictEqual(agent.replayCount, 1);
});

test('agent.request(): a streamed body past the replay limit is not replayed; its source is destroyed', async (t) => {
  const server = await headDroppingServer(t);
  const agent = new Agent({ replayLimit: 8 });
  t.after(() => agent.destroy());
  await (await agent.request(`${server.url}/warm`)).body.text();
  const body = new Readable({ read() {} });
  body.push('0123456789');
  server.dropped.then(() => body.push('rest'));
  await assert.rejects(
    agent.request(`${server.url}/put`, { method: 'PUT', body, headers: { 'content-length': '14' } }),
    (err) => err.code === 'ECONNRESET' && err.requestSent === true,
  );
  assert.ok(body.destroyed);
  assert.deepStrictEqual(server.bodies, []);
  assert.strictEqual(agent.replayCount, 0);
});

test('a POST is never sent twice: it fails with ECONNRESET and says it went out', async (t) => {
  const server = await racingServer(t, 'fin');
  const agent = new Agent();
  t.after(() => agent.destroy());
  const err = await warmThen(agent, server, () => requestError(`${server.url}/pay`, { agent, method: 'POST' }));
  assert.strictEqual(err.code, 'ECONNRESET');
  assert.strictEqual(err.requestSent, true);
  assert.strictEqual(server.seen.filter((s) => s.line === 'POST /pay HTTP/1.1').length, 1);
  assert.strictEqual(agent.replayCount, 0);
});

test('agent.request(): a POST is not replayed and rejects with ECONNRESET', async (t) => {
  const server = await racingServer(t, 'fin');
  const agent = new Agent();
  t.after(() => agent.destroy());
  await (await agent.request(`${server.url}/warm`)).body.text();
  await assert.rejects(agent.request(`${server.url}/pay`, { method: 'POST', body: 'x' }), (err) => {
    assert.strictEqual(err.code, 'ECONNRESET');
    assert.strictEqual(err.requestSent, true);
    return true;
  });
  assert.strictEqual(server.seen.filter((s) => s.line === 'POST /pay HTTP/1.1').length, 1);
});

// Once a byte of a response has come, the server has the request: it is not sent again.
for (const [what, tail] of [
  ['one byte of its response', 'H'],
  ['part of a response head', 'HTTP/1.1 200 OK\r\ncontent-'],
  ['an informational response', 'HTTP/1.1 103 Early Hints\r\n\r\n'],
]) {
  test(`a GET whose reused connection dies after ${what} is not replayed, on either path`, async (t) => {
    const server = await racingServer(t, { tail });
    const agent = new Agent();
    t.after(() => agent.destroy());
    const dropIn = await warmThen(agent, server, () => requestError(`${server.url}/get`, { agent }));
    await (await agent.request(`${server.url}/warm`)).body.text();
    const promised = await agent.request(`${server.url}/get2`).then(() => null, (err) => err);
    for (const err of [dropIn, promised]) {
      assert.deepStrictEqual([err?.code, err?.message], ['ECONNRESET', 'socket hang up']);
    }
    assert.deepStrictEqual(server.seen.map((s) => [s.line, s.dropped]), [
      ['GET /warm HTTP/1.1', false],
      ['GET /get HTTP/1.1', true],
      ['GET /warm HTTP/1.1', false],
      ['GET /get2 HTTP/1.1', true],
    ]);
    assert.strictEqual(agent.replayCount, 0);
  });
}

test('an Idempotency-Key header makes a POST replayable', async (t) => {
  const server = await racingServer(t, 'fin');
  const agent = new Agent();
  t.after(() => agent.destroy());
  const { body } = await warmThen(agent, server, () => request(`${server.url}/pay`, {
    agent,
    method: 'POST',
    headers: { 'idempotency-key': 'order-42', 'content-length': 2 },
  }, 'hi'));
  assert.strictEqual(body, 'answer to POST /pay HTTP/1.1');
  assert.strictEqual(agent.replayCount, 1);
});

test('replay: false turns replays off', async (t) => {
  const server = await racingServer(t, 'fin');
  const agent = new Agent({ replay: false });
  t.after(() => agent.destroy());
  const err = await warmThen(agent, server, () => requestError(`${server.url}/get`, { agent }));
  assert.strictEqual(err.code, 'ECONNRESET');
  assert.strictEqual(agent.replayCount, 0);
  await (await agent.request(`${server.url}/warm2`)).body.text().catch(() => {});
});

test('a request on a fresh connection is never replayed', async (t) => {
  const server = await rawServer(t, async (socket) => {
    try {
      await readRequest(socket);
    } catch {
      return;
    }
    socket.end();
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const err = await requestError(`http://127.0.0.1:${server.port}/`, { agent });
  assert.strictEqual(err.code, 'ECONNRESET');
  assert.strictEqual(err.message, 'socket hang up');
  assert.strictEqual(server.connectionCount, 1);
  await assert.rejects(agent.request(`http://127.0.0.1:${server.port}/`), { code: 'ECONNRESET' });
  assert.strictEqual(server.connectionCount, 2);
  assert.strictEqual(agent.replayCount, 0);
});

test('a body larger than the replay limit is not replayed', async (t) => {
  const server = await racingServer(t, 'fin');
  const agent = new Agent({ replayLimit: 1024 });
  t.after(() => agent.destroy());
  const big = 'x'.repeat(4096);
  const err = await warmThen(agent, server, () => request(`${server.url}/put`, {
    agent,
    method: 'PUT',
    headers: { 'content-length': big.length },
  }, big).then(() => assert.fail('expected an error'), (e) => e));
  assert.strictEqual(err.code, 'ECONNRESET');
  assert.strictEqual(err.requestSent, true);
  assert.strictEqual(agent.replayCount, 0);
});

test('https.request: a GET on a reused TLS connection that closes between its checkout and its first write is sent on a new one; a POST is not', async (t) => {
  const sockets = [];
  const seen = [];
  const server = await rawServer(t, async (socket) => {
    sockets.push(socket);
    for await (const req of eachRequest(socket)) {
      const line = req.head.split('\r\n')[0];
      seen.push(line);
      socket.write(OK(`answer to ${line}`));
    }
  }, { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') });
  const agent = new HttpsAgent({ ca: fixture('ca.pem'), maxSockets: 1 });
  t.after(() => agent.destroy());
  const send = (reqPath, method = 'GET') => new Promise((resolve) => {
    const req = https.request(`https://localhost:${server.port}${reqPath}`, { agent, method }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ body }));
    });
    req.on('error', (error) => resolve({ error }));
    req.end();
  });
  // A request takes the idle connection at once and writes its bytes on a later tick. Here the
  // server closes the connection in between, and this thread stays busy long enough for the
  // close to reach Rust first: the write finds the connection gone.
  const racing = (reqPath, method) => {
    const outcome = send(reqPath, method);
    sockets.at(-1).end();
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    return outcome;
  };

  assert.deepStrictEqual(await send('/warm'), { body: 'answer to GET /warm HTTP/1.1' });
  assert.deepStrictEqual(await racing('/get'), { body: 'answer to GET /get HTTP/1.1' });
  assert.strictEqual(agent.replayCount, 1);
  assert.strictEqual(sockets.length, 2);

  // Not idempotent: it fails, never sent twice (EPIPE when its write found the connection
  // gone; the hang-up when it went out first, and the server, which only half-closed, read it).
  const { error } = await racing('/pay', 'POST');
  assert.match(error.code, /^(EPIPE|ECONNRESET)$/, error.stack);
  assert.strictEqual(agent.replayCount, 1);
  // The GET reached the server once, or twice when its write went out before the close reached
  // Rust (a loaded machine) and the server, which only half-closed, read it: a GET that went out
  // and got no answer is sent again, as its idempotency allows. The POST, at most once.
  const count = (line) => seen.filter((l) => l === line).length;
  assert.strictEqual(seen[0], 'GET /warm HTTP/1.1');
  assert.ok([1, 2].includes(count('GET /get HTTP/1.1')), seen.join(', '));
  const posts = count('POST /pay HTTP/1.1');
  assert.ok(posts === 0 || (posts === 1 && error.code === 'ECONNRESET'), seen.join(', '));
  assert.strictEqual(seen.length, 1 + count('GET /get HTTP/1.1') + posts, seen.join(', '));
});

test("https.request: a replay whose new connection does not open within the agent's timeout fails as the first attempt would have", async (t) => {
  // The TLS server answers a connection's first request and drops the connection at its second.
  const origin = await rawServer(t, async (socket) => {
    let n = 0;
    for await (const req of eachRequest(socket)) {
      if (n++ > 0 || !req) {
        socket.destroy();
        return;
      }
      socket.write(OK('first'));
    }
  }, { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') });
  // In front of it: the first connection goes through; later ones are accepted and never
  // answered (a TLS handshake that stalls, as behind a proxy's tunnel that never opens).
  const held = [];
  const front = net.createServer((socket) => {
    socket.on('error', () => {});
    if (held.length === 0 && !front.passed) {
      front.passed = true;
      const up = net.connect(origin.port, '127.0.0.1');
      up.on('error', () => socket.destroy());
      socket.on('close', () => up.destroy());
      socket.pipe(up).pipe(socket);
    } else {
      held.push(socket);
    }
  });
  front.listen(0, '127.0.0.1');
  await once(front, 'listening');
  t.after(() => {
    for (const socket of held) socket.destroy();
    front.close();
  });
  const agent = new HttpsAgent({ ca: fixture('ca.pem'), timeout: 300 });
  t.after(() => agent.destroy());
  const url = `https://localhost:${front.address().port}`;
  const freed = new Promise((resolve) => agent.once('free', resolve));
  assert.strictEqual((await request(`${url}/warm`, { agent })).body, 'first');
  await freed;
  // The caller listens for 'timeout' and leaves the request be (as Node leaves it to them): only
  // the replay's own bound ends the wait.
  const err = await new Promise((resolve) => {
    const req = https.get(`${url}/again`, { agent }, () => resolve(new Error('a response came')));
    req.on('timeout', () => {});
    req.on('error', resolve);
  });
  assert.deepStrictEqual([err.code, err.message], ['ECONNRESET', 'socket hang up']);
  assert.strictEqual(agent.replayCount, 1);
  assert.strictEqual(held.length, 1, 'the replay reached the server');
});


test("what a socket set with setKeepAlive() and setTypeOfService() holds for a replay's new connection, plain and TLS", { skip: !fs.existsSync('/proc/net/tcp') && 'no /proc/net/tcp' }, async (t) => {
  for (const secure of [false, true]) {
    // The first connection answers its first request and drops on the second. The client's
    // port of the connection that answered is told with each answer.
    const server = await rawServer(t, async (socket, n) => {
      for (let i = 0; ; i++) {
        try {
          await readRequest(socket);
        } catch {
          return;
        }
        if (n === 0 && i > 0) {
          socket.destroy();
          return;
        }
        socket.write(OK(String(socket.remotePort)));
      }
    }, secure ? { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') } : undefined);
    // TCP keep-alive is on by default (keepAlive: true); the socket turns it off.
    const agent = secure ? new HttpsAgent({ ca: fixture('ca.pem') }) : new Agent();
    t.after(() => agent.destroy());
    const url = `${secure ? 'https://localhost' : 'http://127.0.0.1'}:${server.port}`;
    // The keep-alive timer of the client's end, once the answer came (its request is acked
    // then, so no retransmission timer hides it): Linux's kind, 2 for probes, 0 for none.
    const get = (path, onSocket) => new Promise((resolve, reject) => {
      const req = (secure ? https : http).get(`${url}${path}`, { agent }, (res) => {
        const tos = res.socket.getTypeOfService();
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (d) => (body += d));
        res.on('end', () => {
          const timer = tcpTimer(Number(body), server.port);
          resolve({ req, port: Number(body), timer: timer && timer[0], tos });
        });
      });
      req.on('error', reject);
      if (onSocket) req.once('socket', onSocket);
    });
    const freed = once(agent, 'free');
    const warm = await get('/warm', (socket) => socket.setKeepAlive(false).setTypeOfService(0x10));
    await freed;
    const again = await get('/get');
    const which = secure ? 'TLS' : 'plain';
    assert.strictEqual(again.req.reusedSocket, true, which);
    assert.strictEqual(agent.replayCount, 1, which);
    assert.notStrictEqual(again.port, warm.port, which);
    assert.deepStrictEqual([warm.timer, again.timer], [0, 0], which);
    // And its type of service, as the kernel has it on each connection.
    assert.deepStrictEqual([warm.tos, again.tos], [0x10, 0x10], which);
  }
});
