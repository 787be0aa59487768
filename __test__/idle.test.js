'use strict';

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer, rawServer, readRequest, request, until, closed, runChild } = require('./helpers');

const RESPONSE = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

// Makes one request and waits until its connection is idle in the pool.
async function idleOnce(agent, url) {
  const freed = once(agent, 'free');
  const result = await request(url, { agent });
  await freed;
  return result;
}

test('an idle connection closes after freeSocketTimeout', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ freeSocketTimeout: 50 });
  t.after(() => agent.destroy());
  const started = Date.now();
  await idleOnce(agent, `${server.url}/`);
  await closed(server.connections[0]);
  assert.ok(Date.now() - started >= 45, 'not before the timeout');
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.timeoutSocketCount, 1);
  assert.strictEqual(status.closeSocketCount, 1);
  assert.deepStrictEqual(status.freeSockets, {});
  // The next request opens a new connection.
  const { req } = await request(`${server.url}/`, { agent });
  assert.strictEqual(req.reusedSocket, false);
});

test("the server's Keep-Alive timeout hint shortens the idle time, as Node does", async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('keep-alive', 'timeout=2');
    res.end('ok');
  });
  // Node expires a second before the server says: 2 s -> 1 s, shorter than 60 s.
  const agent = new Agent({ freeSocketTimeout: 60000 });
  t.after(() => agent.destroy());
  const started = Date.now();
  await idleOnce(agent, `${server.url}/`);
  await closed(server.connections[0]);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 950 && elapsed < 5000, `closed after ${elapsed} ms`);
});

test('a hint of one second or less means the connection is not kept', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('keep-alive', 'timeout=1');
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  await idleOnce(agent, `${server.url}/`);
  await closed(server.connections[0]);
  assert.strictEqual(agent.getCurrentStatus().closeSocketCount, 1);
});

test("agentKeepAliveTimeoutBuffer sets how much sooner than the server's hint a connection stops idling, on both paths", async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('keep-alive', 'timeout=1');
    res.end('ok');
  });
  const url = `${server.url}/`;
  const idle = (agent) => Object.values(agent.getCurrentStatus().freeSockets).reduce((a, b) => a + b, 0);
  // Whether the one connection a request leaves is kept idle, or closed.
  const settled = (agent) => until(() => idle(agent) === 1 || agent.getCurrentStatus().closeSocketCount === 1, 5000, 'kept or closed');
  // Node's agent reads the option in recent versions: there, it must agree.
  const nodeReads = new http.Agent({ agentKeepAliveTimeoutBuffer: 5 }).agentKeepAliveTimeoutBuffer === 5;
  // [option, as Node reads it]: what is not a finite number of at least 0 is the default, a second.
  const cases = [[0, 0], [500, 500], [1000, 1000], [undefined, 1000], [-1, 1000], ['0', 1000], [Infinity, 1000]];
  for (const [given, buffer] of cases) {
    const kept = buffer < 1000;
    const dropIn = new Agent({ agentKeepAliveTimeoutBuffer: given });
    const promise = new Agent({ agentKeepAliveTimeoutBuffer: given });
    t.after(() => [dropIn, promise].forEach((a) => a.destroy()));
    assert.strictEqual(dropIn.agentKeepAliveTimeoutBuffer, buffer, String(given));
    await idleOnce(dropIn, url);
    await (await promise.request(url)).body.text();
    await settled(dropIn);
    await settled(promise);
    assert.deepStrictEqual([idle(dropIn), idle(promise)], kept ? [1, 1] : [0, 0], `${given}: kept`);
    if (nodeReads) {
      const node = new http.Agent({ keepAlive: true, agentKeepAliveTimeoutBuffer: given });
      t.after(() => node.destroy());
      await idleOnce(node, url);
      assert.strictEqual(Object.keys(node.freeSockets).length, kept ? 1 : 0, `${given}: as Node's agent`);
    }
  }
});

test('socketActiveTTL retires a connection at its first release after the TTL', async (t) => {
  const server = await httpServer(t, (req, res) => setTimeout(() => res.end('slow'), 20));
  const agent = new Agent({ socketActiveTTL: 10 });
  t.after(() => agent.destroy());
  for (let i = 0; i < 3; i++) {
    const { req } = await request(`${server.url}/`, { agent });
    assert.strictEqual(req.reusedSocket, false);
    await closed(server.connections[i]);
  }
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 3);
  assert.strictEqual(agent.getCurrentStatus().requestCount, 3);
});

// Which of the server's connections each request came on (its index in `server.connections`).
function connectionOf(server, req) {
  return server.connections.indexOf(req.socket);
}

test('maxRequestsPerSocket retires a connection once it carried that many requests', async (t) => {
  const on = [];
  const server = await httpServer(t, (req, res) => {
    on.push(connectionOf(server, req));
    res.end('ok');
  });
  const agent = new Agent({ maxRequestsPerSocket: 2 });
  t.after(() => agent.destroy());
  const reused = [];
  for (let i = 0; i < 5; i++) {
    const { req, body } = await request(`${server.url}/`, { agent });
    assert.strictEqual(body, 'ok');
    reused.push(req.reusedSocket);
  }
  assert.deepStrictEqual(on, [0, 0, 1, 1, 2]);
  assert.deepStrictEqual(reused, [false, true, false, true, false]);
  // The first two closed after their second request; the third idles with one done.
  await closed(server.connections[0]);
  await closed(server.connections[1]);
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.createSocketCount, 3);
  assert.strictEqual(status.closeSocketCount, 2);
  // Every completed request counts, as agentkeepalive counts them, closed after it or not.
  assert.strictEqual(status.requestCount, 5);
  assert.deepStrictEqual(Object.values(status.freeSockets), [1]);
  // The live value holds, as socketActiveTTL's does: 0 lifts the limit.
  agent.options.maxRequestsPerSocket = 0;
  for (let i = 0; i < 3; i++) await request(`${server.url}/`, { agent });
  assert.deepStrictEqual(on.slice(5), [2, 2, 2]);
});

test('agent.request(): maxRequestsPerSocket retires a connection once it carried that many requests', async (t) => {
  const on = [];
  const server = await httpServer(t, (req, res) => {
    on.push(connectionOf(server, req));
    res.end('ok');
  });
  const agent = new Agent({ maxRequestsPerSocket: 3 });
  t.after(() => agent.destroy());
  for (let i = 0; i < 7; i++) {
    assert.strictEqual(await (await agent.request(`${server.url}/`)).body.text(), 'ok');
  }
  assert.deepStrictEqual(on, [0, 0, 0, 1, 1, 1, 2]);
  await closed(server.connections[0]);
  await closed(server.connections[1]);
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.createSocketCount, 3);
  assert.strictEqual(status.closeSocketCount, 2);
  assert.strictEqual(status.requestCount, 7);

  // One request per connection: each closes after its response.
  const once = new Agent({ maxRequestsPerSocket: 1 });
  t.after(() => once.destroy());
  for (let i = 0; i < 2; i++) await (await once.request(`${server.url}/`)).body.text();
  assert.deepStrictEqual(on.slice(7), [3, 4]);
  await closed(server.connections[3]);
  assert.strictEqual(once.getCurrentStatus().createSocketCount, 2);
});

// The three ways a server spoils an idle keep-alive connection.
for (const [what, spoil] of [
  ['a FIN', (socket) => socket.end()],
  ['an RST', (socket) => socket.resetAndDestroy()],
  ['stray bytes', (socket) => socket.write('HTTP/1.1 200 OK\r\n')],
]) {
  test(`an idle connection is evicted at once on ${what}`, async (t) => {
    const serverSockets = [];
    const server = await rawServer(t, async (socket) => {
      serverSockets.push(socket);
      for (;;) {
        try {
          await readRequest(socket);
        } catch {
          return;
        }
        socket.write(RESPONSE);
      }
    });
    const agent = new Agent();
    t.after(() => agent.destroy());
    const url = `http://127.0.0.1:${server.port}/`;
    await idleOnce(agent, url);
    // The response was read and the connection is idle: now the server spoils it.
    spoil(serverSockets[0]);
    const name = `127.0.0.1:${server.port}:`;
    await until(() => agent.getCurrentStatus().freeSockets[name] === undefined, 5000, 'the eviction');
    assert.strictEqual(agent.getCurrentStatus().closeSocketCount, 1);
    const { body, req } = await request(url, { agent });
    assert.strictEqual(body, 'ok');
    assert.strictEqual(req.reusedSocket, false);
    assert.strictEqual(server.connectionCount, 2);
  });
}

test('a connection the server closed is caught at checkout, before any request is sent on it', async (t) => {
  // The server closes the idle connection; the client reuses at once, in the same turn as
  // the close may arrive. Whichever notices first (the idle watch or the check at checkout),
  // the request must go out on a fresh connection and succeed.
  const server = await rawServer(t, async (socket) => {
    for (;;) {
      try {
        await readRequest(socket);
      } catch {
        return;
      }
      socket.end(RESPONSE);
    }
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = `http://127.0.0.1:${server.port}/`;
  for (let i = 0; i < 20; i++) {
    const { body } = await idleOnce(agent, url);
    assert.strictEqual(body, 'ok');
  }
  assert.strictEqual(server.connectionCount, 20);
});

test('idle connections do not keep the process alive; in-flight requests do', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/slow') setTimeout(() => res.end('late'), 200);
    else res.end('quick');
  });
  const script = `
    const http = require('node:http');
    const { Agent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const agent = new Agent({ freeSocketTimeout: 60000 });
    const get = (p) => http.get('${server.url}' + p, { agent }, (res) => {
      let b = '';
      res.on('data', (d) => (b += d));
      res.on('end', () => process.stdout.write(b + '\\n'));
    });
    get('/quick');
    get('/slow');
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const [code] = await once(child, 'exit');
  assert.strictEqual(code, 0);
  assert.deepStrictEqual(out.trim().split('\n').sort(), ['late', 'quick']);
  // The child exited with its two connections idle in the pool (60 s timeout).
  assert.strictEqual(server.connections.length, 2);
});

// A request given up while its connection is still being made lets go of what kept the process
// alive for it once, not twice: the other requests in flight keep it alive until they finish.
test('agent.request() aborted while connecting: the other requests still keep the process alive', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('b done'));
  const script = `
    const { Agent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const agent = new Agent();
    agent.request('${server.url}/b')
      .then((res) => res.body.text())
      .then((text) => console.log(text));
    const controller = new AbortController();
    agent.request('${server.url}/a', { signal: controller.signal })
      .catch((err) => console.log('a ' + err.name));
    controller.abort();
  `;
  const { code, out, err } = await runChild(script);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(out.trim().split('\n').sort(), ['a AbortError', 'b done']);
});

test('a socket destroyed during its lookup: the other requests still keep the process alive', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('b done'));
  const script = `
    const http = require('node:http');
    const { Agent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const agent = new Agent();
    http.get('${server.url}/b', { agent }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => console.log(text));
    });
    // A lookup that never answers; the request is destroyed once it has been asked.
    const a = http.get('${server.url}/a', { agent, lookup: () => process.nextTick(() => a.destroy()) });
    a.on('error', (err) => console.log('a ' + err.code));
  `;
  const { code, out, err } = await runChild(script);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(out.trim().split('\n').sort(), ['a ECONNRESET', 'b done']);
});

test('socket.unref() lets the process exit during a request, while it connects or once connected', async (t) => {
  const server = await httpServer(t, () => {});
  // An IP address (connected on the JavaScript thread's loop) and a name (resolved and
  // connected on tokio).
  for (const host of ['127.0.0.1', 'localhost']) {
    for (const when of ['socket', 'connect']) {
      const script = `
        const http = require('node:http');
        const { Agent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
        const req = http.get({ host: '${host}', port: ${server.port}, agent: new Agent() });
        req.on('error', (err) => console.log(err.code));
        req.on('socket', (s) => {
          const off = () => { s.unref(); console.log('unref'); };
          if ('${when}' === 'socket') off();
          else s.on('connect', off);
        });
      `;
      const { code, out, err } = await runChild(script);
      assert.strictEqual(code, 0, `${host}, at '${when}': ${err}`);
      assert.strictEqual(out.trim(), 'unref', `${host}, at '${when}'`);
    }
  }
});

test('freeSocketTimeout accepts agentkeepalive duration strings', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ freeSocketTimeout: '50ms' });
  t.after(() => agent.destroy());
  assert.strictEqual(agent.options.freeSocketTimeout, 50);
  assert.strictEqual(agent.options.timeout, 8000);
  await idleOnce(agent, `${server.url}/`);
  await closed(server.connections[0]);
  assert.strictEqual(http.globalAgent instanceof http.Agent, true);
});

// agent.request(): the same rules, applied in Rust when an exchange ends.
test('agent.request(): freeSocketTimeout, the Keep-Alive hint and socketActiveTTL hold', async (t) => {
  let hint = null;
  const server = await httpServer(t, (req, res) => {
    if (hint) res.setHeader('keep-alive', hint);
    res.end('ok');
  });
  const url = `${server.url}/`;

  // freeSocketTimeout: idle, then closed after it.
  const short = new Agent({ freeSocketTimeout: 50 });
  t.after(() => short.destroy());
  let started = Date.now();
  assert.strictEqual(await (await short.request(url)).body.text(), 'ok');
  assert.deepStrictEqual(Object.values(short.getCurrentStatus().freeSockets), [1]);
  await closed(server.connections[0]);
  assert.ok(Date.now() - started >= 45, 'not before the timeout');
  assert.strictEqual(short.getCurrentStatus().timeoutSocketCount, 1);

  // The server's hint shortens a long freeSocketTimeout (2 s -> 1 s, as Node).
  hint = 'timeout=2';
  const long = new Agent({ freeSocketTimeout: 60000 });
  t.after(() => long.destroy());
  started = Date.now();
  await (await long.request(url)).body.text();
  await closed(server.connections[1]);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= 950 && elapsed < 5000, `closed after ${elapsed} ms`);

  // A hint of one second: not kept at all.
  hint = 'timeout=1';
  const none = new Agent();
  t.after(() => none.destroy());
  await (await none.request(url)).body.text();
  await closed(server.connections[2]);
  assert.strictEqual(none.getCurrentStatus().closeSocketCount, 1);
  hint = null;

  // keepAlive: false keeps nothing idle.
  const off = new Agent({ keepAlive: false });
  t.after(() => off.destroy());
  await (await off.request(url)).body.text();
  await closed(server.connections[3]);
  assert.deepStrictEqual(off.getCurrentStatus().freeSockets, {});
});

test('agent.request(): socketActiveTTL retires a connection at its first release after the TTL', async (t) => {
  const server = await httpServer(t, (req, res) => setTimeout(() => res.end('slow'), 20));
  const agent = new Agent({ socketActiveTTL: 10 });
  t.after(() => agent.destroy());
  for (let i = 0; i < 3; i++) {
    assert.strictEqual(await (await agent.request(`${server.url}/`)).body.text(), 'slow');
    await closed(server.connections[i]);
  }
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 3);
  assert.strictEqual(agent.getCurrentStatus().requestCount, 3);
});
