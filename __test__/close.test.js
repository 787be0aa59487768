'use strict';

// agent.close(): graceful. Requests in flight or waiting finish; new ones fail at once; then
// the agent's connections close.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer, request, requestError } = require('./helpers');

// A server that holds each response until the test releases it.
async function holdingServer(t) {
  const held = [];
  const server = await httpServer(t, (req, res) => {
    held.push(res);
    server.emit('held', req.url);
  });
  server.held = held;
  return server;
}

test('close() lets both paths finish, queued requests too, then closes the connections', { timeout: 20_000 }, async (t) => {
  const server = await holdingServer(t);
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const dropIn = request(`${server.url}/drop-in`, { agent });
  await once(server, 'held');
  // These two wait for the one connection.
  const promised = agent.request(`${server.url}/promise`).then((r) => r.body.text());
  const queued = request(`${server.url}/queued`, { agent });
  let closed = false;
  const closing = agent.close().then(() => { closed = true; });

  // New requests fail at once, on both paths, and are never sent.
  const refused = await requestError(`${server.url}/late`, { agent });
  assert.strictEqual(refused.code, 'ERR_HYPERAGENT_AGENT_CLOSED');
  await assert.rejects(agent.request(`${server.url}/late`), { code: 'ERR_HYPERAGENT_AGENT_CLOSED' });

  for (const name of ['/drop-in', '/promise', '/queued']) {
    if (server.held.length === 0) await once(server, 'held');
    assert.strictEqual(closed, false, `closed before ${name} was answered`);
    server.held.shift().end(`done ${name}`);
  }
  assert.strictEqual((await dropIn).body, 'done /drop-in');
  assert.strictEqual(await promised, 'done /promise');
  assert.strictEqual((await queued).body, 'done /queued');
  await closing;
  assert.strictEqual(closed, true);
  assert.strictEqual(agent.totalSocketCount, 0);
  assert.strictEqual(agent.requestCount, 3);
});

test('close() of an idle agent ends at once; a callback hears it; a second close is the same', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  await request(`${server.url}/`, { agent });
  assert.strictEqual(Object.keys(agent.freeSockets).length, 1);
  const first = agent.close();
  await new Promise((resolve) => agent.close((err) => {
    assert.strictEqual(err, null);
    resolve();
  }));
  assert.strictEqual(agent.close(), first);
  await first;
  assert.strictEqual(agent.totalSocketCount, 0);
  assert.deepStrictEqual(Object.keys(agent.freeSockets), []);
});

test('a request that fails or is aborted still lets close() end', { timeout: 20_000 }, async (t) => {
  const server = await holdingServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const ac = new AbortController();
  const aborted = agent.request(`${server.url}/a`, { signal: ac.signal });
  const failing = new Promise((resolve) => {
    const req = http.get(`${server.url}/b`, { agent }, () => {});
    req.on('error', resolve);
  });
  while (server.held.length < 2) await once(server, 'held');
  const closing = agent.close();
  ac.abort();
  await assert.rejects(aborted, { name: 'AbortError' });
  server.held[1].socket.destroy();
  await failing;
  await closing;
  assert.strictEqual(agent.totalSocketCount, 0);
});

test('close() waits for an agent.request() in flight alone, then ends with it', { timeout: 20_000 }, async (t) => {
  const server = await holdingServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const pending = agent.request(`${server.url}/only`);
  await once(server, 'held');
  let closed = false;
  const closing = agent.close().then(() => { closed = true; });
  server.held[0].end('last one');
  const res = await pending;
  assert.strictEqual(await res.body.text(), 'last one');
  await closing;
  assert.strictEqual(closed, true);
  assert.strictEqual(agent.totalSocketCount, 0);
});
