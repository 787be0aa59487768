'use strict';

// NODE_DEBUG=hyperagent lines and diagnostics_channel events.

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const diagnostics = require('node:diagnostics_channel');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer } = require('./helpers');

test('NODE_DEBUG=hyperagent shows pool keys, creation, reuse and expiry', async (t) => {
  const server = await httpServer(t);
  const script = `
    const http = require('node:http');
    const { Agent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const agent = new Agent({ freeSocketTimeout: 20 });
    const get = (p) => new Promise((resolve) => http.get('${server.url}' + p, { agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    }));
    (async () => {
      const freed = new Promise((resolve) => agent.once('free', resolve));
      await get('/a');
      await freed;
      await get('/b');
      await (await agent.request('${server.url}/c')).body.text();
      setTimeout(() => agent.destroy(), 200);
    })();
  `;
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, NODE_DEBUG: 'hyperagent' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const [code] = await once(child, 'exit');
  assert.strictEqual(code, 0, err);
  for (const expected of [/HYPERAGENT \d+: pool key \d+: 127\.0\.0\.1:\d+:/, /create connection/, /reuse connection/, /expired/]) {
    assert.match(err, expected);
  }
});

test('agent.request() publishes created, headers, completed and error on diagnostics_channel', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const seen = [];
  const subs = ['created', 'headers', 'completed', 'error'].map((name) => {
    const fn = (message) => seen.push([name, message.request.method, message.request.path, message.response ? message.response.statusCode : message.error && message.error.code]);
    diagnostics.subscribe(`hyperagent:request:${name}`, fn);
    return [name, fn];
  });
  t.after(() => subs.forEach(([name, fn]) => diagnostics.unsubscribe(`hyperagent:request:${name}`, fn)));
  await (await agent.request(`${server.url}/x`)).body.text();
  await agent.request('http://127.0.0.1:1/refused').catch(() => {});
  assert.deepStrictEqual(seen, [
    ['created', 'GET', '/x', undefined],
    ['headers', 'GET', '/x', 200],
    ['completed', 'GET', '/x', 200],
    ['created', 'GET', '/refused', undefined],
    ['error', 'GET', '/refused', 'ECONNREFUSED'],
  ]);
});

test("diagnostics_channel's request is one object per request, with its origin and header lines", async (t) => {
  const server = await httpServer(t, (req, res) => req.resume().on('end', () => res.end('ok')));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const requests = { created: [], headers: [], completed: [] };
  const subs = Object.keys(requests).map((name) => {
    const fn = (message) => requests[name].push(message.request);
    diagnostics.subscribe(`hyperagent:request:${name}`, fn);
    return [name, fn];
  });
  t.after(() => subs.forEach(([name, fn]) => diagnostics.unsubscribe(`hyperagent:request:${name}`, fn)));
  const host = new URL(server.url).host;
  await (await agent.request(`${server.url}/plain`)).body.text();
  await (await agent.request(`${server.url}/post`, { method: 'POST', headers: { 'X-A': '1' }, body: 'abc' })).body.text();
  const auth = new URL(server.url);
  auth.username = 'u';
  auth.password = 'p';
  await (await agent.request(`${auth.href}put`, { method: 'PUT' })).body.text();
  assert.strictEqual(requests.created.length, 3);
  for (const name of ['headers', 'completed']) {
    requests[name].forEach((request, i) => assert.strictEqual(request, requests.created[i], `${name} ${i}`));
  }
  assert.deepStrictEqual(requests.created.map(({ origin, method, path, headers }) => ({ origin, method, path, headers })), [
    { origin: server.url, method: 'GET', path: '/plain', headers: ['host', host] },
    { origin: server.url, method: 'POST', path: '/post', headers: ['host', host, 'X-A', '1', 'content-length', '3'] },
    {
      origin: server.url,
      method: 'PUT',
      path: '/put',
      headers: ['host', host, 'authorization', `Basic ${Buffer.from('u:p').toString('base64')}`, 'content-length', '0'],
    },
  ]);
});
