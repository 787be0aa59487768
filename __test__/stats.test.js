'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { once } = require('node:events');
const { Agent, constants } = require('..');
const { httpServer, request } = require('./helpers');

test("getCurrentStatus has agentkeepalive's keys, in its order", (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  assert.deepStrictEqual(Object.keys(agent.getCurrentStatus()), [
    'createSocketCount',
    'createSocketErrorCount',
    'closeSocketCount',
    'errorSocketCount',
    'timeoutSocketCount',
    'requestCount',
    'freeSockets',
    'sockets',
    'requests',
  ]);
});

test('the counters and views follow the pool', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ maxSockets: 2 });
  t.after(() => agent.destroy());
  const name = `127.0.0.1:${server.port}:`;
  assert.strictEqual(agent.statusChanged, true, 'first read reports a change');
  assert.strictEqual(agent.statusChanged, false);

  const freed = once(agent, 'free');
  await Promise.all([request(`${server.url}/a`, { agent }), request(`${server.url}/b`, { agent })]);
  await freed;
  await new Promise((resolve) => setImmediate(resolve));
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.createSocketCount, 2);
  assert.strictEqual(status.requestCount, 2);
  assert.strictEqual(status.closeSocketCount, 0);
  assert.deepStrictEqual(status.freeSockets, { [name]: 2 });
  assert.deepStrictEqual(status.sockets, {});
  assert.deepStrictEqual(status.requests, {});
  assert.strictEqual(agent.totalSocketCount, 2);
  assert.strictEqual(agent.createSocketCount, 2);
  assert.strictEqual(agent.requestCount, 2);
  assert.strictEqual(agent.statusChanged, true);
  assert.strictEqual(agent.freeSockets[name].length, 2);
});

test('a socket carries agentkeepalive-style names', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const { res } = await request(`${server.url}/`, { agent });
  assert.match(res.req.socket[constants.SOCKET_NAME], new RegExp(`^sock\\[\\d+#127\\.0\\.0\\.1:${server.port}:\\]$`));
});

test('the defaults are agentkeepalive\'s', (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  assert.strictEqual(agent.keepAlive, true);
  assert.strictEqual(agent.options.freeSocketTimeout, 4000);
  assert.strictEqual(agent.options.timeout, 8000);
  assert.strictEqual(agent.options.socketActiveTTL, 0);
  assert.strictEqual(agent.maxSockets, Infinity);
  assert.strictEqual(agent.maxFreeSockets, 256);
  assert.strictEqual(agent.maxTotalSockets, Infinity);
  assert.strictEqual(agent.scheduling, 'lifo');
  const custom = new Agent({ freeSocketTimeout: 10000 });
  assert.strictEqual(custom.options.timeout, 20000);
  custom.destroy();
});
