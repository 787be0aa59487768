'use strict';

// agent.request(): one pool with http.request: limits, upgrades, lookup, async context, HTTPS.
// Real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const https = require('node:https');
const { AsyncLocalStorage } = require('node:async_hooks');
const { once } = require('node:events');
const hyperagent = require('../..');
const { Agent, HttpsAgent } = hyperagent;
const { httpServer, request: httpGet, requestError, until } = require('../helpers');
const { echoServer, tlsFixture } = require('./helpers');

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
