'use strict';

// A seeded storm of mixed faults on every path (agent.request(), http.request, and fetch and
// undici's request() through the Dispatcher), each alone and all at once on one pool: a
// scripted raw server that answers, resets, stalls, sends garbage or closes idle connections
// just as they may be reused, while the client aborts, destroys bodies and queues past its
// socket limit. The single faults have
// their own tests (faults.test.js); this one checks what must hold whatever mix of them meets:
// every request settles, with its response or with an error that names the fault; a GET to a
// healthy path never fails; no POST reaches the server twice; the pool ends empty and its
// counters add up. STORM_SEED and STORM_N (requests per test, 400) run another storm.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { Agent, HttpsAgent } = require('..');
const binding = require('../lib/native');
const { rawServer, eachRequest, until, reset } = require('./helpers');
const { random, pick, paths: shared, runStorm, nameOf, settledByClient } = require('./storm-paths');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));

const BIG = 256 * 1024;

// What the server does with a request, by its path's first segment; after a healthy answer it
// sometimes closes the connection once idle for a moment, racing the next request on it.
async function stormServer(t, seed, tls) {
  const received = new Map();
  const open = new Set();
  const rand = random(seed);
  const server = await rawServer(t, async (socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    let idleClose = null;
    for await (const req of eachRequest(socket)) {
      clearTimeout(idleClose);
      if (socket.destroyed) return;
      const [, what, id] = /^\S+ \/(\w[\w-]*)\/(\S+) /.exec(req.head);
      received.set(id, (received.get(id) || 0) + 1);
      switch (what) {
        case 'ok':
          socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${id.length}\r\n\r\n${id}`);
          if (rand() < 0.3) idleClose = setTimeout(() => socket.end(), Math.floor(rand() * 3));
          break;
        case 'big':
          socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${BIG}\r\n\r\n`);
          socket.write(Buffer.alloc(BIG, 'x'));
          break;
        case 'close':
          socket.end(`HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: ${id.length}\r\n\r\n${id}`);
          return;
        case 'reset-after':
          // The whole response, and an RST right behind it.
          socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${id.length}\r\n\r\n${id}`, () => reset(socket));
          return;
        case 'reset-head':
          reset(socket);
          return;
        case 'reset-body':
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial');
          setImmediate(() => reset(socket));
          return;
        case 'garbage':
          socket.end('HTTP/1.1 abc OK\r\n\r\n');
          return;
        case 'stall':
          // Never answers: the client's signal ends it.
          return;
        default:
          throw new Error(`unknown path ${what}`);
      }
    }
  }, tls);
  server.received = received;
  server.open = open;
  return server;
}

// Every path that carries an agent's pool, and all of them at once.
const paths = {
  ...shared,
  // All at once on one agent, sharing its pool: each request takes one of the paths.
  'every path': (agent, url, opts) => {
    const n = Number(/\d+$/.exec(opts.id)[0]);
    const names = ['agent.request()', 'http.request', 'fetch (Dispatcher)', 'undici request() (Dispatcher)'];
    return paths[names[(Math.imul(n, 2654435761) >>> 0) % names.length]](agent, url, opts);
  },
};

// The outcomes a request may have, by what the server does and what the client did.
function check(plan, outcome) {
  if (settledByClient(plan, outcome)) return;
  const where = nameOf(plan);
  if (outcome.error) {
    const err = outcome.error;
    assert.strictEqual(typeof err.code, 'string', `${where}: an error without a code: ${err.stack}`);
    // A POST on a connection the server closed as it was reused is not sent again: it fails
    // with ECONNRESET (or EPIPE, when its write found the connection gone), whatever its path.
    // A GET is sent again, and meets its path's fault.
    const raced = plan.method === 'POST' && /^(ECONNRESET|EPIPE)$/.test(err.code);
    // Over TLS the server's RST can overtake the response's record on its own side (Node's
    // https.Agent then fails about half of such requests): the response may never arrive.
    const expected = {
      'reset-after': plan.secure ? /^ECONNRESET$/ : null,
      'reset-head': /^ECONNRESET$/,
      'reset-body': /^ECONNRESET$/,
      garbage: /^HPE_/,
    }[plan.what];
    assert.ok(raced || (expected && expected.test(err.code)), `${where}: failed with ${err.code}: ${err.message}`);
    return;
  }
  assert.notStrictEqual(plan.abort, 'at-once', `${where}: answered after an abort at once`);
  assert.ok(!['reset-head', 'reset-body', 'garbage', 'stall'].includes(plan.what), `${where}: answered ${outcome.status}`);
  assert.strictEqual(outcome.status, 200, where);
  if (plan.what === 'big') assert.strictEqual(outcome.text.length, BIG, where);
  else assert.strictEqual(outcome.text, plan.id, where);
}

const protocols = {
  HTTP: { server: undefined, agent: (opts) => new Agent(opts), origin: (port) => `http://127.0.0.1:${port}` },
  HTTPS: {
    server: { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') },
    agent: (opts) => new HttpsAgent({ ...opts, ca: fixture('ca.pem') }),
    origin: (port) => `https://localhost:${port}`,
  },
};

for (const [protocol, { server: tls, agent: makeAgent, origin: originOf }] of Object.entries(protocols)) {
for (const [name, send] of Object.entries(paths)) {
  test(`${name}, ${protocol}: a storm of faults, aborts and queueing settles every request as it should`, { timeout: 60_000 }, async (t) => {
    const seed = Number(process.env.STORM_SEED || name.length * 7919 + protocol.length);
    const [, extraBefore] = binding.heldOperations();
    const server = await stormServer(t, seed, tls);
    const agent = makeAgent({ maxSockets: 6, freeSocketTimeout: 10_000 });
    t.after(() => agent.destroy());
    const origin = originOf(server.port);
    const rand = random(seed + 1);
    const plans = Array.from({ length: Number(process.env.STORM_N || 400) }, (_, i) => {
      const what = pick(rand, [['ok', 60], ['big', 6], ['close', 8], ['reset-after', 6], ['reset-head', 6], ['reset-body', 6], ['garbage', 6], ['stall', 4]]);
      const method = what === 'big' ? 'GET' : pick(rand, [['GET', 70], ['POST', 30]]);
      const abort = pick(rand, [[null, 88], ['at-once', 6], ['destroy-body', what === 'big' ? 30 : 6]]);
      return { what, method, abort, id: `${name[0]}${i}`, secure: protocol === 'HTTPS' };
    });

    const { outcomes } = await runStorm(plans, send, agent, origin, 24);

    plans.forEach((plan, i) => check(plan, outcomes[i]));
    for (const plan of plans) {
      const count = server.received.get(plan.id) || 0;
      if (plan.method === 'POST') assert.ok(count <= 1, `POST ${plan.id} reached the server ${count} times`);
    }
    // Every kind of fault and abort came up.
    for (const what of ['ok', 'big', 'close', 'reset-after', 'reset-head', 'reset-body', 'garbage', 'stall']) {
      assert.ok(plans.some((p) => p.what === what), what);
    }
    const healthyGets = plans.filter((p) => p.what === 'ok' && p.method === 'GET' && !p.abort);
    assert.ok(healthyGets.length > 100);

    // The pool ends with nothing in use or waiting; what it made it closed or keeps idle. An
    // aborted request's connection may still be closing in Rust: wait for the pool to say so.
    let status;
    await until(() => {
      status = agent.getCurrentStatus();
      return Object.keys(status.sockets).length === 0;
    }, 5000, 'the connections in use to be released');
    assert.deepStrictEqual(status.requests, {});
    const idle = Object.values(status.freeSockets).reduce((s, n) => s + n, 0);
    assert.ok(idle <= 6, `${idle} idle connections`);
    assert.strictEqual(status.createSocketCount, status.closeSocketCount + idle, JSON.stringify(status));
    assert.ok(status.errorSocketCount > 0, JSON.stringify(status));
    // Nothing in flight keeps the process alive any more, and nothing let go of what it had
    // not taken (which would have let a process exit under other requests).
    assert.deepStrictEqual(binding.heldOperations(), [0, extraBefore]);

    // After destroy(), the server sees every connection closed.
    agent.destroy();
    await until(() => server.open.size === 0, 5000, 'the server to see every connection closed');
  });
}
}
