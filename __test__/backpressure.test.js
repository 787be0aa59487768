'use strict';

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const crypto = require('node:crypto');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer, streamingServer } = require('./helpers');

const TOTAL = 256 * 1024 * 1024;
const CHUNK = crypto.randomBytes(1024 * 1024);

test('a paused response stops reads in Rust: the server stalls and client memory stays flat', async (t) => {
  const server = await streamingServer(t, CHUNK, TOTAL / CHUNK.length);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const rssBefore = process.memoryUsage().rss;
  const req = http.get(`${server.url}/`, { agent });
  const [res] = await once(req, 'response');
  const hash = crypto.createHash('sha256');
  let received = 0;
  const onData = (chunk) => {
    hash.update(chunk);
    received += chunk.length;
  };
  res.once('data', (chunk) => {
    onData(chunk);
    res.pause();
  });
  const outcome = await server.outcome();
  assert.ok(outcome.stalled, 'the server must stall while the response is paused');
  assert.ok(outcome.stalled < 64 * 1024 * 1024, `server wrote ${outcome.stalled} bytes before stalling`);
  assert.ok(res.socket.bytesRead < 64 * 1024 * 1024, `client read ${res.socket.bytesRead} bytes while paused`);
  const grown = process.memoryUsage().rss - rssBefore;
  assert.ok(grown < 128 * 1024 * 1024, `client RSS grew by ${grown} bytes`);

  // Resume: the whole body arrives, intact.
  const expected = crypto.createHash('sha256');
  for (let i = 0; i < TOTAL / CHUNK.length; i++) expected.update(CHUNK);
  res.on('data', onData);
  res.resume();
  await once(res, 'end');
  assert.strictEqual(received, TOTAL);
  assert.strictEqual(hash.digest('hex'), expected.digest('hex'));
});

test('a large request body is written in full, with back-pressure from the socket', async (t) => {
  const size = 32 * 1024 * 1024;
  const server = await httpServer(t, async (req, res) => {
    const hash = crypto.createHash('sha256');
    let n = 0;
    for await (const chunk of req) {
      hash.update(chunk);
      n += chunk.length;
    }
    res.end(`${n} ${hash.digest('hex')}`);
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const body = crypto.randomBytes(size);
  const req = http.request(`${server.url}/`, { method: 'POST', agent, headers: { 'content-length': size } });
  // Write in 1 MiB pieces, honouring write()'s answer.
  for (let off = 0; off < size; off += CHUNK.length) {
    if (!req.write(body.subarray(off, off + CHUNK.length))) await once(req, 'drain');
  }
  req.end();
  const [res] = await once(req, 'response');
  let text = '';
  for await (const chunk of res) text += chunk;
  assert.strictEqual(text, `${size} ${crypto.createHash('sha256').update(body).digest('hex')}`);
});
