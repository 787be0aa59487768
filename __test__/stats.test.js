'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { once } = require('node:events');
const { Agent, constants } = require('..');
const { httpServer, request, until } = require('./helpers');

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
  // As agentkeepalive's: a new agent has nothing changed, and the marks are own properties.
  assert.strictEqual(agent.statusChanged, false, 'a new agent reports no change');
  assert.strictEqual(agent.createSocketCountLastCheck, 0);

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
  assert.strictEqual(agent.createSocketCountLastCheck, 2);
  assert.strictEqual(agent.requestCountLastCheck, 2);
  assert.strictEqual(agent.statusChanged, false);
  assert.strictEqual(agent.freeSockets[name].length, 2);
});

test('the counters may be assigned, as agentkeepalive\'s fields: the count goes on from what was assigned', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  await request(`${server.url}/a`, { agent });
  assert.strictEqual(agent.requestCount, 1);
  assert.strictEqual(agent.statusChanged, true);
  // agentkeepalive's test "getter statusChanged" moves a counter by hand.
  agent.createSocketCount++;
  assert.strictEqual(agent.createSocketCount, 2);
  assert.strictEqual(agent.statusChanged, true);
  assert.strictEqual(agent.createSocketCountLastCheck, 2);
  // A program that resets its counters.
  agent.requestCount = 0;
  agent.replayCount = 0;
  assert.strictEqual(agent.getCurrentStatus().requestCount, 0);
  await request(`${server.url}/b`, { agent });
  assert.strictEqual(agent.requestCount, 1);
  assert.strictEqual(agent.getCurrentStatus().requestCount, 1);
  assert.strictEqual(agent.createSocketCount, 2, 'the connection was reused');
  assert.strictEqual(agent.replayCount, 0);
  // Another agent's counts are its own.
  const other = new Agent();
  t.after(() => other.destroy());
  assert.strictEqual(other.createSocketCount, 0);
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

test('empty pool keys are forgotten, as Node deletes a name once its lists are empty; keys in use stay', async (t) => {
  const { kPool } = require('../lib/agent');
  // Every host is this server (through the agent's lookup); only `held.test` keeps its
  // connection, and `slow.test` answers when told.
  let answerSlow;
  const slowAnswered = new Promise((resolve) => { answerSlow = resolve; });
  const server = await httpServer(t, (req, res) => {
    const host = req.headers.host.split(':')[0];
    if (host !== 'held.test') res.setHeader('connection', 'close');
    if (host === 'slow.test') slowAnswered.then(() => res.end('slow'));
    else res.end(host);
  });
  const agent = new Agent({
    maxSockets: 2,
    lookup: (host, options, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]),
  });
  t.after(() => agent.destroy());
  const url = (host) => `http://${host}:${server.port}/`;
  const viaRequest = async (host) => (await agent.request(url(host))).body.text();
  const viaHttp = async (host) => (await request(url(host), { agent })).body;

  assert.strictEqual(await viaHttp('held.test'), 'held.test');
  const heldPort = server.requestPorts.at(-1);
  // Two slow requests on their connections, and a third queued behind them.
  const slow = [viaRequest('slow.test'), viaHttp('slow.test'), viaRequest('slow.test')];
  const slowName = `slow.test:${server.port}:`;
  await until(() => {
    const { sockets, requests } = agent.getCurrentStatus();
    return sockets[slowName] === 2 && requests[slowName] === 1;
  }, 5000, 'the slow requests');

  // 700 origins, each closed after one request: half on each path, eight at a time.
  const hosts = Array.from({ length: 700 }, (_, i) => `h${i}.test`);
  for (let i = 0; i < hosts.length; i += 8) {
    const batch = hosts.slice(i, i + 8);
    const bodies = await Promise.all(batch.map((h, j) => ((i + j) % 2 ? viaRequest(h) : viaHttp(h))));
    assert.deepStrictEqual(bodies, batch);
  }
  await until(() => agent.getCurrentStatus().closeSocketCount === 700, 5000, 'the 700 connections to close');
  const keys = agent[kPool].keyCount;
  assert.ok(keys < 300, `${keys} keys kept for 703 names`);
  assert.ok(keys >= 130, `${keys} keys kept: the most recently used empty ones stay`);

  // The keys in use kept their connections and their requests.
  assert.deepStrictEqual(agent.getCurrentStatus().freeSockets, { [`held.test:${server.port}:`]: 1 });
  assert.strictEqual(await viaHttp('held.test'), 'held.test');
  assert.strictEqual(server.requestPorts.at(-1), heldPort, 'the idle connection was reused');
  answerSlow();
  assert.deepStrictEqual(await Promise.all(slow), ['slow', 'slow', 'slow']);
  // Forgotten origins come back as new keys, on both paths, to the right host; a kept one
  // serves as before.
  assert.strictEqual(await viaHttp('h0.test'), 'h0.test');
  assert.strictEqual(await viaRequest('h1.test'), 'h1.test');
  assert.strictEqual(await viaRequest(hosts.at(-1)), hosts.at(-1));
  const status = agent.getCurrentStatus();
  // held.test's one, three for slow.test (its connections close too), 700, and three again.
  assert.strictEqual(status.createSocketCount, 1 + 3 + 700 + 3);
  assert.deepStrictEqual(status.sockets, {});
  assert.deepStrictEqual(status.requests, {});
});

// From Node 22 on, a free socket of Node's agent (and so of agentkeepalive's) that its server
// resets closes without an error; agentkeepalive counts it as a close alone. So do both paths,
// over HTTP and HTTPS, for a reset as for a close.
test('an idle connection its server resets or closes counts as a close, not a socket error', async (t) => {
  const fs = require('node:fs');
  const path = require('node:path');
  const http = require('node:http');
  const https = require('node:https');
  const { HttpsAgent } = require('..');
  const { rawServer, readRequest, reset } = require('./helpers');
  const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
  const tlsOptions = { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') };
  // Each connection answers one request and is kept.
  const served = [];
  const onConnection = async (socket) => {
    await readRequest(socket);
    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    served.push(socket);
  };
  const plain = await rawServer(t, onConnection);
  const secure = await rawServer(t, onConnection, tlsOptions);
  const counts = async (agent, how, { promise = false, tls = false } = {}) => {
    t.after(() => agent.destroy());
    const url = `${tls ? 'https' : 'http'}://localhost:${(tls ? secure : plain).port}/`;
    if (promise) {
      assert.strictEqual(await (await agent.request(url)).body.text(), 'ok');
    } else {
      await new Promise((resolve, reject) => {
        (tls ? https : http).get(url, { agent }, (res) => res.resume().on('end', resolve)).on('error', reject);
      });
    }
    // Idle in the pool, the server ends it.
    await until(() => Object.keys(agent.getCurrentStatus().freeSockets).length === 1, 5000, 'the connection idle');
    const socket = served.pop();
    if (how === 'reset') reset(socket);
    else socket.end();
    await until(() => agent.getCurrentStatus().closeSocketCount === 1, 5000, 'the end heard');
    const s = agent.getCurrentStatus();
    return [s.createSocketCount, s.closeSocketCount, s.errorSocketCount, s.timeoutSocketCount, Object.keys(s.freeSockets).length];
  };
  const ca = fixture('ca.pem');
  for (const how of ['reset', 'close']) {
    const expected = [1, 1, 0, 0, 0];
    assert.deepStrictEqual(await counts(new Agent(), how), expected, `drop-in, ${how}`);
    assert.deepStrictEqual(await counts(new Agent(), how, { promise: true }), expected, `agent.request(), ${how}`);
    assert.deepStrictEqual(await counts(new HttpsAgent({ ca }), how, { tls: true }), expected, `drop-in HTTPS, ${how}`);
    assert.deepStrictEqual(await counts(new HttpsAgent({ ca }), how, { promise: true, tls: true }), expected, `agent.request() HTTPS, ${how}`);
  }
});

// An upgrade takes its socket out of the pool ('agentRemove'): from then on it is the user's,
// as a net.Socket is through Node's agent. agentkeepalive stops watching it there: its idle
// timeout only emits 'timeout', and its close or error counts nowhere.
test('a socket an upgrade took over times out and closes as agentkeepalive\'s: an event, no count', async (t) => {
  const http = require('node:http');
  const AgentKeepAlive = require('agentkeepalive');
  const server = http.createServer((req, res) => res.end());
  server.on('upgrade', (req, socket) => {
    socket.on('error', () => {});
    socket.on('data', (d) => socket.write(d));
    socket.write('HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const upgraded = async (agent) => {
    const req = http.request({ port: server.address().port, host: '127.0.0.1', agent, headers: { connection: 'upgrade', upgrade: 'echo' } });
    req.end();
    const [, socket] = await once(req, 'upgrade');
    // Idle past the agent's timeout: 'timeout', and the socket stays open and answers.
    await once(socket, 'timeout');
    await new Promise((resolve) => setImmediate(resolve));
    const open = !socket.destroyed;
    socket.write('ping');
    const [echo] = await once(socket, 'data');
    // Destroyed with an error by its user.
    socket.on('error', () => {});
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.destroy(new Error('done with it'));
    await closed;
    const s = agent.getCurrentStatus();
    return {
      open,
      echo: echo.toString(),
      counts: [s.createSocketCount, s.closeSocketCount, s.errorSocketCount, s.timeoutSocketCount],
      sockets: s.sockets,
    };
  };
  const ours = new Agent({ timeout: 50 });
  t.after(() => ours.destroy());
  const theirs = new AgentKeepAlive({ timeout: 50 });
  t.after(() => theirs.destroy());
  const expected = await upgraded(theirs);
  assert.deepStrictEqual(expected, { open: true, echo: 'ping', counts: [1, 0, 0, 0], sockets: {} });
  assert.deepStrictEqual(await upgraded(ours), expected);
});
