'use strict';

// Nothing a program does with our memory, and no bug of ours, takes the process down (README,
// "Safety"). Each check runs in a child process: a crash there fails the test instead of
// ending the test runner. Each child prints one line of JSON: what it saw.

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { runChild } = require('./helpers');

const ROOT = JSON.stringify(path.resolve(__dirname, '..'));
const TLS = JSON.stringify(path.join(__dirname, 'fixtures', 'tls'));

// What every child has: an HTTP and an HTTPS server that answer a small body naming the
// request's path (small bodies go through the slab), agents for both, and a way to fetch a
// response's chunks on either path.
const PRELUDE = `
  const http = require('node:http');
  const https = require('node:https');
  const fs = require('node:fs');
  const path = require('node:path');
  const assert = require('node:assert');
  const { once } = require('node:events');
  const hyperagent = require(${ROOT});
  const binding = require(path.join(${ROOT}, 'lib', 'native'));
  const fixture = (name) => fs.readFileSync(path.join(${TLS}, name));
  const ca = fixture('ca.pem');
  const answer = (req, res) => {
    if (req.method === 'POST') {
      let n = 0;
      req.on('data', (c) => (n += c.length));
      req.on('end', () => res.end('got ' + n));
      return;
    }
    res.end(req.url.repeat(Math.max(1, Math.floor(300 / req.url.length))));
  };
  async function servers() {
    const plain = http.createServer(answer).listen(0, '127.0.0.1');
    const secure = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, answer).listen(0, '127.0.0.1');
    await Promise.all([once(plain, 'listening'), once(secure, 'listening')]);
    return {
      HTTP: { server: plain, origin: 'http://127.0.0.1:' + plain.address().port, agent: new hyperagent.Agent({ keepAlive: true }), mod: http },
      HTTPS: { server: secure, origin: 'https://localhost:' + secure.address().port, agent: new hyperagent.HttpsAgent({ keepAlive: true, ca }), mod: https },
    };
  }
  const paths = {
    async promise(side, url) {
      const res = await side.agent.request(url);
      const chunks = [];
      for await (const c of res.body) chunks.push(c);
      return chunks;
    },
    dropin(side, url) {
      return new Promise((resolve, reject) => {
        side.mod.get(url, { agent: side.agent }, (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => resolve(chunks));
          res.on('error', reject);
        }).on('error', reject);
      });
    },
  };
  const expected = (p) => p.repeat(Math.max(1, Math.floor(300 / p.length)));
  // How a Node.js version refuses to transfer or detach an ArrayBuffer marked untransferable,
  // or one a program already detached (Node 22 lets ArrayBuffer#transfer() detach a slab, and
  // the other chunks on it with it, as it does for its own Buffer pool).
  const refused = (err) => err.name === 'DataCloneError' || (err instanceof TypeError && /not detachable|detached ArrayBuffer/.test(err.message));
  async function closeAll(sides) {
    for (const side of Object.values(sides)) {
      side.agent.destroy();
      side.server.closeAllConnections();
      side.server.close();
    }
  }
`;

async function child(t, body) {
  const { code, signal, out, err } = await runChild(`${PRELUDE}\n(async () => {\n${body}\n})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });`);
  assert.strictEqual(signal, null, `the child died of ${signal}: ${err}`);
  assert.strictEqual(code, 0, `the child failed: ${err}`);
  const lines = out.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

test('a chunk whose memory a program transfers or detaches is never written again, on either path', { timeout: 60_000 }, async (t) => {
  const seen = await child(t, `
    const { MessageChannel, receiveMessageOnPort, Worker } = require('node:worker_threads');
    const sides = await servers();
    // Each way takes the ArrayBuffer and gives a reader of the memory that the program now
    // holds (a copy, where the transfer copied an untransferable slab).
    const local = (taken) => ({ read: async () => Buffer.from(taken).toString('latin1'), done: async () => {} });
    const ways = {
      structuredClone: (ab) => local(structuredClone(ab, { transfer: [ab] })),
      port: (ab) => {
        const { port1, port2 } = new MessageChannel();
        port1.postMessage(ab, [ab]);
        const got = receiveMessageOnPort(port2).message;
        port1.close();
        return local(got);
      },
      worker: (ab) => {
        // The worker keeps what it received and says what it holds whenever asked.
        const w = new Worker('const { parentPort } = require("node:worker_threads"); let kept; parentPort.on("message", (m) => { if (m instanceof ArrayBuffer) kept = m; else parentPort.postMessage(Buffer.from(kept).toString("latin1")); });', { eval: true });
        try {
          w.postMessage(ab, [ab]);
        } catch (err) {
          w.terminate();
          throw err;
        }
        return { read: async () => { w.postMessage('read'); return (await once(w, 'message'))[0]; }, done: () => w.terminate() };
      },
    };
    if (typeof ArrayBuffer.prototype.transfer === 'function') ways.detach = (ab) => local(ab.transfer());
    const results = [];
    for (const [protocol, side] of Object.entries(sides)) {
      for (const [name, get] of Object.entries(paths)) {
        for (const [way, take] of Object.entries(ways)) {
          const first = '/first-' + way;
          const chunks = await get(side, side.origin + first);
          assert.strictEqual(Buffer.concat(chunks).toString(), expected(first));
          const before = Buffer.from(chunks[0]).toString('latin1');
          const ab = chunks[0].buffer;
          // Node 22 and later refuse to transfer an untransferable ArrayBuffer (as they refuse
          // it for their own Buffer pool); Node 20 copies it. Either way the slab stays ours.
          let taken = null;
          try {
            taken = take(ab);
          } catch (err) {
            if (!refused(err)) throw err;
          }
          const atTake = taken && (await taken.read());
          for (let i = 0; i < 20; i++) {
            const p = '/SECOND-' + i;
            assert.strictEqual(Buffer.concat(await get(side, side.origin + p)).toString(), expected(p), protocol + ' ' + name + ' ' + way);
          }
          // Nothing of the later responses reached the memory the program took.
          if (taken) {
            assert.strictEqual(await taken.read(), atTake, protocol + ' ' + name + ' ' + way + ': the taken memory changed');
            await taken.done();
          }
          // A chunk the program still has (its ArrayBuffer not detached) reads as it did.
          if (ab.byteLength !== 0) assert.strictEqual(Buffer.from(chunks[0]).toString('latin1'), before);
          results.push(protocol + ' ' + name + ' ' + way);
        }
      }
    }
    await closeAll(sides);
    console.log(JSON.stringify(results));
  `);
  const ways = ['structuredClone', 'port', 'worker', ...(typeof ArrayBuffer.prototype.transfer === 'function' ? ['detach'] : [])];
  assert.strictEqual(seen.length, 2 * 2 * ways.length);
});

test('an end reached twice ends once: aborts and destroys from inside listeners, in every order', { timeout: 60_000 }, async (t) => {
  const seen = await child(t, `
    const sides = await servers();
    let uncaught = 0;
    process.on('uncaughtException', () => uncaught++);
    const outcomes = [];
    const failed = [];
    for (const [protocol, side] of Object.entries(sides)) {
      for (let i = 0; i < 30; i++) {
        const ac = new AbortController();
        const url = side.origin + '/end-' + i;
        let settled = 0;
        try {
          const res = await side.agent.request(url, { signal: ac.signal });
          settled++;
          const mode = i % 5;
          if (mode === 0) {
            // Destroyed twice, then aborted after the end.
            res.body.destroy();
            res.body.destroy();
            ac.abort();
          } else if (mode === 1) {
            // A listener that aborts, then throws: the body fails with the abort (as undici's
            // does when its signal aborts before the body is read).
            res.body.on('data', () => { ac.abort(); throw new Error('listener'); });
            await new Promise((resolve) => res.body.on('close', resolve));
            failed.push(res.body.errored && res.body.errored.name);
          } else if (mode === 2) {
            // Read whole, then every end again.
            await res.body.text();
            res.body.destroy();
            ac.abort();
            ac.abort();
          } else if (mode === 3) {
            res.body.on('data', () => { res.body.destroy(); res.body.destroy(new Error('twice')); });
            res.body.on('error', () => {});
            await once(res.body, 'close');
          } else {
            // Aborted with its body unread: the body fails with the abort.
            ac.abort();
            res.body.on('error', () => {});
            res.body.resume();
            await new Promise((resolve) => res.body.on('close', resolve));
            failed.push(res.body.errored && res.body.errored.name);
          }
        } catch (err) {
          settled++;
          assert.strictEqual(err.name, 'AbortError', err.stack);
        }
        outcomes.push(settled);
      }
      // The pool is whole: a request goes on as usual, nothing is in use, nothing is held.
      assert.strictEqual(Buffer.concat(await paths.promise(side, side.origin + '/after')).toString(), expected('/after'));
      const status = side.agent.getCurrentStatus();
      assert.deepStrictEqual(status.sockets, {}, JSON.stringify(status));
    }
    assert.deepStrictEqual(binding.heldOperations()[0], 0);
    await closeAll(sides);
    console.log(JSON.stringify({ outcomes, failed, uncaught }));
  `);
  assert.ok(seen.outcomes.every((n) => n === 1), JSON.stringify(seen.outcomes));
  // Modes 1 and 4, six times each on each of the two sides.
  assert.deepStrictEqual(seen.failed, Array(24).fill('AbortError'));
});

// Each boundary with Node, made to panic once (binding.injectPanic): the panic becomes
// ERR_HYPERAGENT_INTERNAL on the request it happened for, the connection closes, the pool's
// counts stay right and the next request works.
const PANICS = [
  // agent.request(): the call that starts it, an event on its way back, a streamed body's chunk.
  ['request', 'promise'],
  ['completion', 'promise'],
  ['body-write', 'upload'],
  // http.request() with the agent: the checkout, the socket's write, an event on its way back
  // (over TLS, whose bytes come through tokio), the read on the JavaScript thread (plain
  // sockets only), the release.
  ['checkout', 'dropin'],
  ['write', 'dropin'],
  ['completion', 'dropin', ['HTTPS']],
  ['poll', 'dropin', ['HTTP']],
  ['release', 'dropin-release'],
];

for (const [site, kind, protocols = ['HTTP', 'HTTPS']] of PANICS) {
  test(`a panic at "${site}" (${kind}, ${protocols.join(' and ')}) becomes ERR_HYPERAGENT_INTERNAL and the process goes on`, { timeout: 30_000 }, async (t) => {
    const seen = await child(t, `
      const { Readable } = require('node:stream');
      const sides = await servers();
      const results = [];
      for (const [protocol, side] of Object.entries(sides)) {
        if (!${JSON.stringify(protocols)}.includes(protocol)) continue;
        // A warm connection first, so that reuse paths run too.
        await paths.dropin(side, side.origin + '/warm');
        const before = side.agent.getCurrentStatus();
        binding.injectPanic(${JSON.stringify(site)});
        let error = null;
        try {
          if (${JSON.stringify(kind)} === 'promise') {
            await paths.promise(side, side.origin + '/hit');
          } else if (${JSON.stringify(kind)} === 'upload') {
            const res = await side.agent.request(side.origin + '/up', { method: 'POST', body: Readable.from(['a', 'b', 'c']) });
            await res.body.text();
          } else if (${JSON.stringify(kind)} === 'dropin-release') {
            // The response is whole when its socket is released: the request succeeds and the
            // socket fails and closes instead of going back to the pool.
            const closed = side.agent.getCurrentStatus().closeSocketCount;
            const chunks = await paths.dropin(side, side.origin + '/hit');
            assert.strictEqual(Buffer.concat(chunks).toString(), expected('/hit'));
            for (let i = 0; i < 100 && side.agent.getCurrentStatus().closeSocketCount === closed; i++) await new Promise(setImmediate);
            error = { code: side.agent.getCurrentStatus().closeSocketCount > closed ? 'ERR_HYPERAGENT_INTERNAL' : 'not closed' };
          } else {
            await paths.dropin(side, side.origin + '/hit');
          }
        } catch (err) {
          error = err;
        }
        binding.injectPanic('');
        assert.ok(error, protocol + ': no error');
        assert.strictEqual(error.code, 'ERR_HYPERAGENT_INTERNAL', protocol + ': ' + (error.stack || error.code));
        if (error.message) assert.match(error.message, /injected panic at ${site}/);
        // Both paths still work, and nothing is left in use.
        assert.strictEqual(Buffer.concat(await paths.promise(side, side.origin + '/after')).toString(), expected('/after'));
        assert.strictEqual(Buffer.concat(await paths.dropin(side, side.origin + '/after2')).toString(), expected('/after2'));
        for (let i = 0; i < 100 && Object.keys(side.agent.getCurrentStatus().sockets).length !== 0; i++) await new Promise(setImmediate);
        const status = side.agent.getCurrentStatus();
        assert.deepStrictEqual(status.sockets, {}, JSON.stringify(status));
        const idle = Object.values(status.freeSockets).reduce((s, n) => s + n, 0);
        assert.strictEqual(status.createSocketCount, status.closeSocketCount + idle, JSON.stringify(status));
        results.push(protocol);
      }
      assert.strictEqual(binding.heldOperations()[0], 0);
      await closeAll(sides);
      console.log(JSON.stringify(results));
    `);
    assert.deepStrictEqual(seen, protocols);
  });
}

test('a storm of transfers, detaches, double ends, aborts and ended workers settles every request once', { timeout: 120_000 }, async (t) => {
  const seen = await child(t, `
    const { Worker } = require('node:worker_threads');
    const sides = await servers();
    // A small seeded generator (mulberry32): the same storm every run.
    let a = Number(process.env.STORM_SEED || 35) >>> 0;
    const rand = () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = Math.imul(a ^ (a >>> 15), a | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const take = (chunk) => {
      const r = rand();
      try {
        if (r < 0.3) structuredClone(chunk.buffer, { transfer: [chunk.buffer] });
        else if (r < 0.5 && typeof chunk.buffer.transfer === 'function') chunk.buffer.transfer();
        else if (r < 0.7) chunk.fill(0x21);
      } catch (err) {
        if (!refused(err)) throw err;
      }
    };
    const settled = [];
    let lost = 0;
    const one = async (side, i) => {
      const ac = new AbortController();
      const abortAt = rand() < 0.3 ? Math.floor(rand() * 4) : -1;
      const dropin = rand() < 0.4;
      const big = rand() < 0.2;
      let count = 0;
      const settle = () => { count++; };
      if (abortAt === 0) ac.abort();
      try {
        if (dropin) {
          await new Promise((resolve, reject) => {
            const req = side.mod.request(side.origin + '/storm-' + i, { agent: side.agent, method: big ? 'POST' : 'GET', signal: ac.signal }, (res) => {
              // (An abort of the signal in here would make Node's http emit the AbortError on
              // a socket that has no listener left, with Node's own agent too.)
              res.on('data', (c) => { take(c); if (abortAt === 2) { res.destroy(); res.destroy(); } });
              res.on('end', resolve);
              res.on('close', resolve);
              res.on('error', reject);
            });
            req.on('error', reject);
            if (abortAt === 1) setImmediate(() => ac.abort());
            req.end(big ? Buffer.alloc(200 * 1024, 1) : undefined);
          });
        } else {
          const res = await side.agent.request(side.origin + '/storm-' + i, { signal: ac.signal, method: big ? 'POST' : 'GET', body: big ? Buffer.alloc(200 * 1024, 2) : undefined });
          if (abortAt === 1) ac.abort();
          res.body.on('error', () => {});
          for await (const c of res.body) {
            take(c);
            if (abortAt === 2) { res.body.destroy(); res.body.destroy(); }
          }
          if (abortAt === 3) { ac.abort(); res.body.destroy(); }
        }
        settle();
      } catch (err) {
        settle();
        if (!['AbortError', 'Error'].includes(err.name) && !/ECONNRESET|ABORT/.test(err.code || '')) throw err;
      }
      settled.push(count);
    };
    // Workers that upload and are ended at once, at random moments.
    const workers = [];
    for (let w = 0; w < 6; w++) {
      const side = w % 2 ? sides.HTTPS : sides.HTTP;
      const worker = new Worker(\`
        const { Agent, HttpsAgent } = require(\${JSON.stringify(${ROOT})});
        const { workerData, parentPort } = require('node:worker_threads');
        const agent = workerData.secure ? new HttpsAgent({ ca: workerData.ca }) : new Agent();
        const body = Buffer.alloc(4 << 20, 3);
        parentPort.postMessage('start');
        for (let i = 0; i < 4; i++) agent.request(workerData.origin + '/upload-' + i, { method: 'POST', body }).then((r) => r.body.resume(), () => {});
      \`, { eval: true, workerData: { origin: side.origin, secure: w % 2 === 1, ca } });
      workers.push(once(worker, 'message').then(() => new Promise((r) => setTimeout(r, Math.floor(rand() * 20)))).then(() => worker.terminate()));
    }
    const N = Number(process.env.STORM_N || 300);
    let next = 0;
    const lane = async () => {
      while (next < N) {
        const i = next++;
        await one(i % 2 ? sides.HTTPS : sides.HTTP, i);
      }
    };
    await Promise.all([...Array.from({ length: 12 }, lane), ...workers]);
    for (const side of Object.values(sides)) {
      for (let i = 0; i < 200 && Object.keys(side.agent.getCurrentStatus().sockets).length !== 0; i++) await new Promise((r) => setTimeout(r, 5));
      const status = side.agent.getCurrentStatus();
      assert.deepStrictEqual(status.sockets, {}, JSON.stringify(status));
      assert.deepStrictEqual(status.requests, {}, JSON.stringify(status));
      const idle = Object.values(status.freeSockets).reduce((s, n) => s + n, 0);
      assert.strictEqual(status.createSocketCount, status.closeSocketCount + idle, JSON.stringify(status));
      assert.strictEqual(Buffer.concat(await paths.promise(side, side.origin + '/after')).toString(), expected('/after'));
    }
    assert.strictEqual(binding.heldOperations()[0], 0);
    await closeAll(sides);
    console.log(JSON.stringify({ settled: settled.length, once: settled.every((n) => n === 1) }));
  `);
  assert.strictEqual(seen.settled, Number(process.env.STORM_N || 300));
  assert.ok(seen.once);
});
