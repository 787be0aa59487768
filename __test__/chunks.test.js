'use strict';

// Small chunks reach JavaScript as views of shared 8 KiB slabs (lib/slab.js), large reads of a
// response body as Buffers over the read's own memory: every chunk must hold its own bytes,
// across slab boundaries, and keep them while later chunks arrive.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { Agent } = require('..');
const { httpServer } = require('./helpers');

// A body of `size` bytes that names its request: `n` repeated, padded with its own digits.
function bodyFor(n, size) {
  return Buffer.alloc(size, `${n}:`);
}

// Sizes around the slab's limits: tiny, a third of a slab, just under and over half a slab
// (the largest chunk a slab takes), a whole slab.
const SIZES = [1, 12, 2731, 4095, 4096, 4097, 8192];

function sizedServer(t) {
  return httpServer(t, (req, res) => {
    const [, n, size] = req.url.split('/');
    res.end(bodyFor(n, Number(size)));
  });
}

// The chunks of response `n` (`size` bytes) as `for await` gives them, checked.
async function checkedChunks(agent, server, n, size) {
  const res = await agent.request(`${server.url}/${n}/${size}`);
  const chunks = [];
  for await (const chunk of res.body) chunks.push(chunk);
  assert.ok(chunks.every(Buffer.isBuffer));
  assert.ok(Buffer.concat(chunks).equals(bodyFor(n, size)), `response ${n} (${size} bytes)`);
  return chunks;
}

// Every chunk kept still holds what it held when it arrived.
function assertKept(kept) {
  for (const { n, size, chunks } of kept) {
    assert.ok(Buffer.concat(chunks).equals(bodyFor(n, size)), `kept response ${n} (${size} bytes)`);
  }
}

test('agent.request(): small bodies keep their bytes across slabs, kept chunks are not overwritten', async (t) => {
  const server = await sizedServer(t);
  const agent = new Agent({ maxSockets: 4 });
  t.after(() => agent.destroy());
  const kept = [];
  for (let n = 0; n < 120; n++) {
    const size = SIZES[n % SIZES.length];
    kept.push({ n, size, chunks: await checkedChunks(agent, server, n, size) });
  }
  // The small ones came as views of slabs (a Buffer of its own has a buffer of its length).
  const viewed = kept.filter(({ size, chunks }) => size < 4096 && chunks[0].buffer.byteLength === 8192);
  assert.ok(viewed.length > 0);
  assertKept(kept);
});

test('agent.request(): large reads, which cross without a copy, keep their bytes and take writes as their own', async (t) => {
  const server = await sizedServer(t);
  // Two connections, reused all along: their read buffers serve every response.
  const agent = new Agent({ maxSockets: 2 });
  t.after(() => agent.destroy());
  const LARGE = [40 * 1024, 64 * 1024, 100 * 1024, 128 * 1024, 200 * 1024, 1024 * 1024];
  const kept = [];
  for (let n = 0; n < 36; n++) {
    const size = LARGE[n % LARGE.length];
    const chunks = await checkedChunks(agent, server, n, size);
    // Half are kept as they came; the others are overwritten at once, which must not reach
    // any later response.
    if (n % 2 === 0) kept.push({ n, size, chunks });
    else for (const chunk of chunks) chunk.fill(0);
  }
  assertKept(kept);
});

test('agent.request(): concurrent small bodies, each its own bytes', async (t) => {
  const server = await sizedServer(t);
  const agent = new Agent({ maxSockets: 8 });
  t.after(() => agent.destroy());
  const bodies = await Promise.all(
    Array.from({ length: 200 }, async (_, n) => {
      const size = SIZES[n % SIZES.length];
      const res = await agent.request(`${server.url}/${n}/${size}`);
      return { n, size, body: Buffer.from(await res.body.arrayBuffer()) };
    }),
  );
  for (const { n, size, body } of bodies) assert.ok(body.equals(bodyFor(n, size)), `response ${n}`);
});

test('drop-in path: small socket reads keep their bytes across slabs', async (t) => {
  const server = await sizedServer(t);
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  t.after(() => agent.destroy());
  const get = (n, size) =>
    new Promise((resolve, reject) => {
      http
        .get(`${server.url}/${n}/${size}`, { agent }, (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => resolve(chunks));
          res.on('error', reject);
        })
        .on('error', reject);
    });
  const kept = [];
  for (let n = 0; n < 120; n++) {
    const size = SIZES[n % SIZES.length];
    const chunks = await get(n, size);
    assert.ok(Buffer.concat(chunks).equals(bodyFor(n, size)), `response ${n} (${size} bytes)`);
    kept.push({ n, size, chunks });
  }
  assertKept(kept);
});

test('a second load of the package on the same thread gets its small chunks right', { timeout: 20000 }, async (t) => {
  const root = require('node:path').resolve(__dirname, '..');
  // A fresh instance of the package's JavaScript (as module registries that reset modules
  // make); the native binding stays the one already loaded, with the first instance's
  // callbacks registered.
  const first = require('..');
  for (const file of Object.keys(require.cache)) {
    if (file.startsWith(`${root}/lib/`) || file === `${root}/index.js`) delete require.cache[file];
  }
  const second = require('..');
  assert.notStrictEqual(second.Agent, first.Agent);
  const server = await sizedServer(t);
  const agent = new second.Agent({ keepAlive: true, maxSockets: 2 });
  t.after(() => agent.destroy());
  for (let n = 0; n < 20; n++) {
    const size = SIZES[n % SIZES.length];
    const res = await agent.request(`${server.url}/${n}/${size}`);
    assert.ok(Buffer.from(await res.body.arrayBuffer()).equals(bodyFor(n, size)), `request() ${n}`);
    const viaHttp = await new Promise((resolve, reject) => {
      http.get(`${server.url}/${n}/${size}`, { agent }, (r) => {
        const chunks = [];
        r.on('data', (c) => chunks.push(c));
        r.on('end', () => resolve(Buffer.concat(chunks)));
      }).on('error', reject);
    });
    assert.ok(viaHttp.equals(bodyFor(n, size)), `http.get ${n}`);
  }
});
