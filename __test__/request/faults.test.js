'use strict';

// agent.request(): timeouts, refused and reset connections, malformed responses.
// Real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const https = require('node:https');
const crypto = require('node:crypto');
const { finished } = require('node:stream/promises');
const { once } = require('node:events');
const hyperagent = require('../..');
const { Agent, HttpsAgent } = hyperagent;
const { httpServer, rawServer, readRequest, requestError, until, slowSource } = require('../helpers');
const { sha } = require('./helpers');

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

test('headersTimeout is the wait for the server, not for a slow body source (as undici\'s): it runs from the body\'s last progress', { timeout: 30_000 }, async (t) => {
  // The server answers once it has read the whole body, with what it read.
  const server = await httpServer(t, async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    res.end(body);
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const { Dispatcher } = hyperagent;
  const d = new Dispatcher({ http: agent });
  t.after(() => d.destroy());
  // An exact timeout (up to a second, kept in the exchange) and a long one (kept by the
  // binding's sweep), each outlived by the source's silence; each long enough for the server
  // to answer in once the body has come, however busy the machine.
  for (const [headersTimeout, gap] of [[800, 1800], [1100, 2500]]) {
    const res = await agent.request(`${server.url}/`, { method: 'POST', body: slowSource(gap), headersTimeout });
    assert.strictEqual(await res.body.text(), 'first;last', `headersTimeout ${headersTimeout}`);
  }
  // Through the Dispatcher, as fetch and undici's request() send a streamed body.
  const undici = require('../undici');
  const viaUndici = await undici.request(`${server.url}/`, { method: 'POST', body: slowSource(1800), headersTimeout: 800, dispatcher: d });
  assert.strictEqual(await viaUndici.body.text(), 'first;last');
  // Once the body has all gone, the timeout runs: a server that then never answers fails it.
  const silent = await httpServer(t, async (req) => {
    for await (const chunk of req) assert.ok(chunk);
  });
  await assert.rejects(agent.request(`${silent.url}/`, { method: 'POST', body: slowSource(300), headersTimeout: 150 }), {
    code: 'ERR_HYPERAGENT_HEADERS_TIMEOUT',
  });
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
  const undici = require('../undici');
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
