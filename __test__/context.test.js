'use strict';

// Callbacks caused by I/O that Rust performs run in the async context of the request that
// caused them: on fresh, reused and queued connections, and on errors.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { AsyncLocalStorage, createHook, executionAsyncId } = require('node:async_hooks');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer } = require('./helpers');

const als = new AsyncLocalStorage();

// The next uncaught exception, kept from the test runner's own handlers (restored after it).
function nextUncaught() {
  return new Promise((resolve) => {
    const original = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.once('uncaughtException', (err) => {
      for (const l of original) process.on('uncaughtException', l);
      resolve(err);
    });
  });
}

function getIn(store, url, agent) {
  return als.run(store, () => new Promise((resolve, reject) => {
    const seen = {};
    const req = http.get(url, { agent }, (res) => {
      seen.response = als.getStore();
      res.on('data', () => {
        seen.data = als.getStore();
      });
      res.on('end', () => {
        seen.end = als.getStore();
        resolve(seen);
      });
    });
    req.on('socket', (socket) => {
      socket.once('connect', () => {
        seen.connect = als.getStore();
      });
    });
    req.on('error', (err) => {
      seen.error = als.getStore();
      err.seen = seen;
      reject(err);
    });
  }));
}

test('response callbacks see the store of their request on fresh, reused and queued connections', async (t) => {
  const server = await httpServer(t, (req, res) => setImmediate(() => res.end('x')));
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const stores = Array.from({ length: 6 }, (_, i) => ({ id: i }));
  const results = await Promise.all(stores.map((s) => getIn(s, `${server.url}/`, agent)));
  results.forEach((seen, i) => {
    assert.strictEqual(seen.response, stores[i], `response of ${i}`);
    assert.strictEqual(seen.data, stores[i], `data of ${i}`);
    assert.strictEqual(seen.end, stores[i], `end of ${i}`);
  });
  assert.strictEqual(results[0].connect, stores[0], 'connect of the first request');
  assert.strictEqual(server.connections.length, 1);
});

test('connection errors reach the request in its own context', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const server = http.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  const store = { id: 'refused' };
  const err = await getIn(store, `http://127.0.0.1:${port}/`, agent).then(
    () => assert.fail('expected an error'),
    (e) => e,
  );
  assert.strictEqual(err.code, 'ECONNREFUSED');
  assert.strictEqual(err.seen.error, store);
});

test('an exception in one request handler does not disturb other requests or the pool', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ maxSockets: 2 });
  t.after(() => agent.destroy());
  const boom = new Error('user bug');
  const caught = nextUncaught();
  http.get(`${server.url}/bad`, { agent }, () => {
    throw boom;
  });
  const others = Array.from({ length: 4 }, (_, i) => new Promise((resolve, reject) => {
    http.get(`${server.url}/ok${i}`, { agent }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  }));
  assert.strictEqual(await caught, boom);
  assert.deepStrictEqual(await Promise.all(others), [0, 1, 2, 3].map((i) => `hello /ok${i}`));
});

test('agent.request(): an exception in one body handler is uncaught and spares the other requests', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ maxSockets: 4 });
  t.after(() => agent.destroy());
  const boom = new Error('user bug in a data handler');
  const caught = nextUncaught();
  // All five are in flight at once, so that their responses tend to reach JavaScript together.
  const bad = agent.request(`${server.url}/bad`).then((res) => {
    res.body.on('data', () => {
      throw boom;
    });
  });
  const others = [0, 1, 2, 3].map((i) =>
    agent.request(`${server.url}/ok${i}`).then((res) => als.run({ i }, () => res.body.text())),
  );
  await bad;
  assert.strictEqual(await caught, boom);
  assert.deepStrictEqual(await Promise.all(others), [0, 1, 2, 3].map((i) => `hello /ok${i}`));
  // The pool is intact: one more request on it.
  const res = await agent.request(`${server.url}/after`);
  assert.strictEqual(await res.body.text(), 'hello /after');
});

test('async_hooks sees a request of agent.request() and a drop-in socket by their own types', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const seen = [];
  const hook = createHook({
    init(id, type, triggerId) {
      if (type.startsWith('HYPERAGENT')) seen.push({ type, triggerId });
    },
  });
  hook.enable();
  let caller;
  try {
    caller = executionAsyncId();
    const res = await agent.request(`${server.url}/promise`);
    assert.strictEqual(await res.body.text(), 'hello /promise');
    const { body } = await new Promise((resolve, reject) => {
      http.get(`${server.url}/drop-in`, { agent }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ body: text }));
      }).on('error', reject);
    });
    assert.strictEqual(body, 'hello /drop-in');
  } finally {
    hook.disable();
  }
  const request = seen.filter((r) => r.type === 'HYPERAGENT_REQUEST');
  assert.strictEqual(request.length, 1);
  // Made by the request() call itself.
  assert.strictEqual(request[0].triggerId, caller);
  assert.ok(seen.some((r) => r.type === 'HYPERAGENT_SOCKET'), JSON.stringify(seen));
});
