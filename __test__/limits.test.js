'use strict';

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer, request, until } = require('./helpers');

// A server that holds every request until `release()` is called, tracking concurrency.
async function gatedServer(t) {
  const held = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const server = await httpServer(t, (req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    res.on('finish', () => inFlight--);
    held.push(() => res.end(`ok ${req.url}`));
    server.emit('held', held.length);
  });
  server.held = held;
  server.maxInFlight = () => maxInFlight;
  server.releaseAll = () => held.splice(0).forEach((f) => f());
  return server;
}

test('maxSockets holds under 100 concurrent requests, and the queue drains', async (t) => {
  const server = await gatedServer(t);
  const agent = new Agent({ maxSockets: 10 });
  t.after(() => agent.destroy());
  const all = Array.from({ length: 100 }, (_, i) => request(`${server.url}/${i}`, { agent }));
  while (server.held.length < 10) await once(server, 'held');
  const name = `127.0.0.1:${server.port}:`;
  assert.strictEqual(agent.requests[name].length, 90);
  assert.strictEqual(agent.sockets[name].length, 10);
  server.on('held', () => server.releaseAll());
  server.releaseAll();
  const results = await Promise.all(all);
  results.forEach((r, i) => assert.strictEqual(r.body, `ok /${i}`));
  assert.strictEqual(server.connections.length, 10);
  assert.strictEqual(server.maxInFlight(), 10);
  assert.strictEqual(agent.getCurrentStatus().requestCount, 100);
});

test('queued requests wait in the pool and are visible in agent.requests', async (t) => {
  const server = await gatedServer(t);
  const agent = new Agent({ maxSockets: 2 });
  t.after(() => agent.destroy());
  const all = Array.from({ length: 5 }, (_, i) => request(`${server.url}/${i}`, { agent }));
  while (server.held.length < 2) await once(server, 'held');
  const name = `127.0.0.1:${server.port}:`;
  assert.strictEqual(agent.requests[name].length, 3);
  assert.ok(agent.requests[name].every((r) => r instanceof http.ClientRequest));
  assert.deepStrictEqual(agent.getCurrentStatus().requests, { [name]: 3 });
  assert.deepStrictEqual(agent.getCurrentStatus().sockets, { [name]: 2 });
  // Serve everything as it arrives.
  server.on('held', () => server.releaseAll());
  server.releaseAll();
  const results = await Promise.all(all);
  assert.deepStrictEqual(results.map((r) => r.body), [0, 1, 2, 3, 4].map((i) => `ok /${i}`));
  assert.strictEqual(server.connections.length, 2);
  assert.strictEqual(server.maxInFlight(), 2);
});

test('maxSockets and maxFreeSockets are read as Node reads them: falsy is the default, \'2\' is 2', async (t) => {
  // Node's agent takes any value for these two (`options.maxSockets || Infinity`) and compares
  // counts with it; a program passing a setting from its environment or configuration gets the
  // same limits from ours.
  for (const value of [0, NaN, null, '', false, '2', ' 7 ', 1.5, '2.5', 0.5]) {
    const ours = new Agent({ maxSockets: value, maxFreeSockets: value });
    const node = new http.Agent({ maxSockets: value, maxFreeSockets: value });
    assert.strictEqual(ours.maxSockets, node.maxSockets, `maxSockets ${JSON.stringify(value)}`);
    assert.strictEqual(ours.maxFreeSockets, node.maxFreeSockets, `maxFreeSockets ${JSON.stringify(value)}`);
    ours.destroy();
    node.destroy();
  }
  const server = await gatedServer(t);
  const agent = new Agent({ maxSockets: '2' });
  t.after(() => agent.destroy());
  const all = Array.from({ length: 4 }, (_, i) => request(`${server.url}/${i}`, { agent }));
  while (server.held.length < 2) await once(server, 'held');
  const name = `127.0.0.1:${server.port}:`;
  assert.strictEqual(agent.requests[name].length, 2);
  server.on('held', () => server.releaseAll());
  server.releaseAll();
  const results = await Promise.all(all);
  assert.deepStrictEqual(results.map((r) => r.body), [0, 1, 2, 3].map((i) => `ok /${i}`));
  assert.strictEqual(server.connections.length, 2);
});

test('a fraction of maxSockets or maxFreeSockets allows the next whole number, as Node\'s comparisons do', async (t) => {
  const server = await gatedServer(t);
  const name = `127.0.0.1:${server.port}:`;
  // Node's agent opens a socket while `count < maxSockets`: two for 1.5, at construction or
  // assigned later; and keeps an idle one while `idle < maxFreeSockets`: one for 0.5.
  const run = async (Make, made, assigned) => {
    const agent = new Make({ keepAlive: true, ...made });
    if (assigned !== undefined) agent.maxSockets = assigned;
    const all = Array.from({ length: 4 }, (_, i) => request(`${server.url}/${i}`, { agent }));
    const before = server.connections.length;
    while (server.held.length < 2) await once(server, 'held');
    const waiting = agent.requests[name].length;
    server.on('held', server.releaseAll);
    server.releaseAll();
    await Promise.all(all);
    server.removeListener('held', server.releaseAll);
    return { agent, seen: { connections: server.connections.length - before, waiting } };
  };
  for (const [made, assigned] of [[{ maxSockets: 1.5 }], [{ maxSockets: 1 }, 1.5], [{ maxSockets: '1.5' }]]) {
    const node = await run(http.Agent, made, assigned);
    const ours = await run(Agent, made, assigned);
    node.agent.destroy();
    ours.agent.destroy();
    assert.deepStrictEqual(ours.seen, node.seen, JSON.stringify({ made, assigned }));
    assert.deepStrictEqual(ours.seen, { connections: 2, waiting: 2 });
  }
  const idle = {};
  for (const [which, Make] of [['node', http.Agent], ['ours', Agent]]) {
    const { agent } = await run(Make, { maxSockets: 2, maxFreeSockets: 0.5 });
    await until(() => !(agent.sockets[name] || []).length, 5000, 'the sockets to be freed');
    idle[which] = (agent.freeSockets[name] || []).length;
    agent.destroy();
  }
  assert.deepStrictEqual(idle, { node: 1, ours: 1 });
});

test('maxTotalSockets holds across origins', async (t) => {
  const a = await httpServer(t, (req, res) => setImmediate(() => res.end('a')));
  const b = await httpServer(t, (req, res) => setImmediate(() => res.end('b')));
  const agent = new Agent({ maxSockets: 10, maxTotalSockets: 3 });
  t.after(() => agent.destroy());
  let maxTotal = 0;
  const track = (req) => req.on('socket', () => {
    maxTotal = Math.max(maxTotal, agent.totalSocketCount);
  });
  const all = [];
  for (let i = 0; i < 20; i++) {
    for (const s of [a, b]) {
      all.push(new Promise((resolve, reject) => {
        const req = http.get(`${s.url}/`, { agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
        track(req);
      }));
    }
  }
  await Promise.all(all);
  assert.ok(maxTotal <= 3, `total sockets reached ${maxTotal}`);
  assert.ok(a.connections.length + b.connections.length >= 2, 'both origins were served');
});

test('maxFreeSockets closes connections beyond the idle limit', async (t) => {
  const server = await gatedServer(t);
  let closedCount = 0;
  server.on('connection', (s) => s.on('close', () => closedCount++));
  const agent = new Agent({ maxSockets: 10, maxFreeSockets: 2 });
  t.after(() => agent.destroy());
  const all = Array.from({ length: 6 }, (_, i) => request(`${server.url}/${i}`, { agent }));
  while (server.held.length < 6) await once(server, 'held');
  server.releaseAll();
  await Promise.all(all);
  const name = `127.0.0.1:${server.port}:`;
  await until(() => closedCount === 4, 5000, 'four surplus connections to close');
  await until(() => (agent.freeSockets[name] || []).length === 2, 5000, 'two idle connections');
  assert.strictEqual(agent.getCurrentStatus().freeSockets[name], 2);
});

for (const scheduling of ['lifo', 'fifo']) {
  test(`scheduling '${scheduling}' picks the ${scheduling === 'lifo' ? 'most' : 'least'} recently freed connection`, async (t) => {
    const server = await gatedServer(t);
    const agent = new Agent({ maxSockets: 3, scheduling });
    t.after(() => agent.destroy());
    const all = Array.from({ length: 3 }, (_, i) => request(`${server.url}/${i}`, { agent }));
    while (server.held.length < 3) await once(server, 'held');
    // Free the three connections one after another, recording the order.
    const freedOrder = [];
    for (const release of server.held.splice(0)) {
      const freed = once(agent, 'free');
      release();
      const [socket] = await freed;
      freedOrder.push(socket.localPort);
    }
    await Promise.all(all);
    server.on('held', () => server.releaseAll());
    const { req } = await request(`${server.url}/next`, { agent });
    assert.strictEqual(req.reusedSocket, true);
    const expected = scheduling === 'lifo' ? freedOrder[2] : freedOrder[0];
    assert.strictEqual(server.requestPorts.at(-1), expected);
  });
}

test('raising maxSockets at run time lets queued requests connect', async (t) => {
  const server = await gatedServer(t);
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const all = Array.from({ length: 3 }, (_, i) => request(`${server.url}/${i}`, { agent }));
  while (server.held.length < 1) await once(server, 'held');
  agent.maxSockets = 3;
  while (server.held.length < 3) await once(server, 'held');
  assert.strictEqual(server.connections.length, 3);
  server.releaseAll();
  await Promise.all(all);
});

test('a request aborted while queued gives its turn to the next one', async (t) => {
  const server = await gatedServer(t);
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const first = request(`${server.url}/first`, { agent });
  while (server.held.length < 1) await once(server, 'held');
  const aborted = http.get(`${server.url}/aborted`, { agent });
  const abortedError = once(aborted, 'error');
  const third = request(`${server.url}/third`, { agent });
  // As with Node's agent, the aborted request hears of it when its turn comes.
  aborted.destroy();
  server.on('held', () => server.releaseAll());
  server.releaseAll();
  const [err] = await abortedError;
  assert.strictEqual(err.code, 'ECONNRESET');
  assert.strictEqual((await first).body, 'ok /first');
  assert.strictEqual((await third).body, 'ok /third');
  assert.ok(!server.requestPorts.includes(undefined));
  assert.strictEqual(server.connections.length, 1);
});

test('queued agent.request()s get their turn from every kind of freed slot: a drop-in socket, a raised limit, a close, an abort', async (t) => {
  const server = await gatedServer(t);
  const name = `127.0.0.1:${server.port}:`;
  const agent = new Agent({ keepAlive: true, maxSockets: 1, freeSocketTimeout: 60_000 });
  t.after(() => agent.destroy());
  const body = (p) => agent.request(`${server.url}${p}`).then((r) => r.body.text());

  // A drop-in request holds the one slot; an agent.request() waits, and takes the slot when
  // the socket is freed (its connection closes: agent.request() cannot use it). The socket
  // that served the drop-in request is left destroyed, holding nothing.
  const dropIn = request(`${server.url}/d1`, { agent });
  await once(server, 'held');
  const first = body('/p1');
  await until(() => agent.getCurrentStatus().requests[name] === 1, 5000, 'queued');
  server.releaseAll();
  const { req } = await dropIn;
  await once(server, 'held');
  server.releaseAll();
  assert.strictEqual(await first, 'ok /p1');
  await until(() => req.socket.destroyed, 5000, 'socket left');

  // Two wait behind a held one; raising maxSockets lets both connect at once.
  const held = body('/p2');
  await once(server, 'held');
  const waiting = [body('/p3'), body('/p4')];
  await until(() => agent.getCurrentStatus().requests[name] === 2, 5000, 'queued');
  agent.maxSockets = 3;
  while (server.held.length < 3) await once(server, 'held');
  server.releaseAll();
  assert.deepStrictEqual(await Promise.all([held, ...waiting]), ['ok /p2', 'ok /p3', 'ok /p4']);

  // A waiter behind a connection the server closes mid-request: the close gives it the slot.
  agent.destroy();
  const one = new Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => one.destroy());
  const oneBody = (p, options) => one.request(`${server.url}${p}`, options);
  const doomed = oneBody('/doomed').catch((err) => err.code);
  await once(server, 'held');
  const next = oneBody('/p5').then((r) => r.body.text());
  await until(() => one.getCurrentStatus().requests[name] === 1, 5000, 'queued');
  server.held.splice(0);
  server.closeAllConnections();
  assert.strictEqual(await doomed, 'ECONNRESET');
  await once(server, 'held');
  server.releaseAll();
  assert.strictEqual(await next, 'ok /p5');

  // A queued request aborted leaves the queue in Rust: the next waiter gets the slot.
  const holder = oneBody('/p6').then((r) => r.body.text());
  await once(server, 'held');
  const controller = new AbortController();
  const aborted = oneBody('/aborted', { signal: controller.signal }).catch((err) => err.name);
  const after = oneBody('/p7').then((r) => r.body.text());
  await until(() => one.getCurrentStatus().requests[name] === 2, 5000, 'queued');
  controller.abort();
  assert.strictEqual(await aborted, 'AbortError');
  assert.strictEqual(one.getCurrentStatus().requests[name], 1);
  server.releaseAll();
  await once(server, 'held');
  server.releaseAll();
  assert.deepStrictEqual([await holder, await after], ['ok /p6', 'ok /p7']);
});

test('a limit set after the program assigned options of another type still reaches the pool', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ socketActiveTTL: 60000, maxRequestsPerSocket: 5 });
  t.after(() => agent.destroy());
  // Read as the drop-in path reads them: a string of a number is that number, anything else none.
  agent.options.socketActiveTTL = '60000';
  agent.options.maxRequestsPerSocket = 'none';
  agent.agentKeepAliveTimeoutBuffer = 'soon';
  agent.keepAliveMsecs = undefined;
  agent.maxFreeSockets = '10';
  agent.maxSockets = 2;
  assert.strictEqual(agent.maxSockets, 2);
  assert.strictEqual(await (await agent.request(`${server.url}/`)).body.text(), 'hello /');
  const { body } = await request(`${server.url}/again`, { agent });
  assert.strictEqual(body, 'hello /again');
});
