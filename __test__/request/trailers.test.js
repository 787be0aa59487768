'use strict';

// agent.request()'s request trailers: given with the request, or made by a function once a
// streamed body has ended; against Node's http server, which reads them after a chunked body.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const { Readable } = require('node:stream');
const { Agent } = require('../..');
const { httpServer } = require('../helpers');

// Answers with what it received: the body's size and hash, its trailers and framing headers.
function received(req, res) {
  const hash = crypto.createHash('sha256');
  let size = 0;
  req.on('data', (c) => { hash.update(c); size += c.length; });
  req.on('end', () => res.end(JSON.stringify({
    size,
    sha256: hash.digest('hex'),
    trailers: req.trailers,
    trailer: req.headers.trailer,
    contentLength: req.headers['content-length'],
    chunked: req.headers['transfer-encoding'] === 'chunked',
  })));
}

function agentFor(t) {
  const agent = new Agent();
  t.after(() => agent.destroy());
  return agent;
}

test('trailers given with the request follow the body, chunked, their names in a trailer header', async (t) => {
  const server = await httpServer(t, received);
  const agent = agentFor(t);
  const res = await agent.request(`${server.url}/`, { method: 'POST', body: 'hello', trailers: { 'X-Sum': 'abc', 'x-count': ['1', '2'] } });
  const got = JSON.parse(await res.body.text());
  assert.deepStrictEqual(got.trailers, { 'x-sum': 'abc', 'x-count': '1, 2' });
  assert.strictEqual(got.trailer, 'x-sum, x-count');
  assert.strictEqual(got.chunked, true);
  assert.strictEqual(got.contentLength, undefined);
  assert.strictEqual(got.size, 5);
});

test('a function makes the trailers once a streamed body has ended: a checksum of it', async (t) => {
  const server = await httpServer(t, received);
  const agent = agentFor(t);
  const hash = crypto.createHash('sha256');
  const chunk = crypto.randomBytes(64 * 1024);
  async function* source() {
    for (let i = 0; i < 16; i++) {
      hash.update(chunk);
      yield chunk;
    }
  }
  const res = await agent.request(`${server.url}/`, {
    method: 'PUT',
    headers: { trailer: 'x-sha256' },
    body: source(),
    trailers: async () => ({ 'x-sha256': hash.copy().digest('hex') }),
  });
  const got = JSON.parse(await res.body.text());
  assert.strictEqual(got.size, 16 * chunk.length);
  assert.strictEqual(got.trailers['x-sha256'], got.sha256);
});

test('a trailers function that throws fails the request with its error', async (t) => {
  const server = await httpServer(t, received);
  const agent = agentFor(t);
  const boom = new Error('no checksum');
  await assert.rejects(agent.request(`${server.url}/`, {
    method: 'POST',
    body: Readable.from(['a', 'b']),
    trailers: () => { throw boom; },
  }), (err) => err === boom);
  // The connection's state is clean for the next request.
  const res = await agent.request(`${server.url}/`, { method: 'POST', body: 'x' });
  assert.strictEqual(JSON.parse(await res.body.text()).size, 1);
});

test('bad trailers are refused at once with Node-style codes', async (t) => {
  const server = await httpServer(t, received);
  const agent = agentFor(t);
  const url = `${server.url}/`;
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', trailers: 'x-sum: 1' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', trailers: { 'content-length': '1' } }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', trailers: { 'bad name': '1' } }), { code: 'ERR_INVALID_HTTP_TOKEN' });
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', trailers: { 'x-a': 'line\nbreak' } }), { code: 'ERR_INVALID_CHAR' });
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', headers: { 'content-length': '1' }, trailers: { 'x-a': '1' } }), { code: 'ERR_INVALID_ARG_VALUE' });
  // A body in memory: the function must give them at once.
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', trailers: async () => ({ 'x-a': '1' }) }), { code: 'ERR_INVALID_ARG_VALUE' });
  // One whose promise fails: the refusal is all the caller hears (no unhandled rejection).
  assert.throws(() => agent.request(url, { method: 'POST', body: 'x', trailers: async () => { throw new Error('no sum'); } }), { code: 'ERR_INVALID_ARG_VALUE' });
  await new Promise((resolve) => setImmediate(resolve));
  // A streamed body's function that gives something else fails the request.
  await assert.rejects(agent.request(url, { method: 'POST', body: Readable.from(['x']), trailers: () => 42 }), { code: 'ERR_INVALID_ARG_TYPE' });
});
