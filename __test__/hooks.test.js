'use strict';

// Node's connection hooks: a createConnection() of the program's (a subclass's method, or an
// own property) and a createSocket() that passes on a stream of its own. The stream carries
// the request, as with Node's agent, and the connection is pooled, limited and counted by the
// agent as any other. Where the behaviour is Node's, the same program runs against Node's
// agent and ours and the two are compared.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const tls = require('node:tls');
const fs = require('node:fs');
const path = require('node:path');
const { Duplex } = require('node:stream');
const { once } = require('node:events');
const { Agent, HttpsAgent } = require('..');
const { httpServer, request, requestError, until } = require('./helpers');

const CA = fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', 'ca.pem'));

// A subclass of `Base` whose createConnection() counts and keeps the streams it makes.
const hooked = (Base) => class extends Base {
  constructor(options) {
    super(options);
    this.made = [];
  }

  createConnection(options, cb) {
    const socket = net.createConnection(options, cb);
    this.made.push(socket);
    return socket;
  }
};

// An Agent whose createSocket() passes on a stream of its own (kept in `made`).
const ownStreams = (made) => class extends Agent {
  createSocket(req, options, cb) {
    const socket = net.connect(options.port, options.host);
    made.push(socket);
    cb(null, socket);
  }
};

test('a createConnection() override opens every connection, which the agent pools and limits as Node\'s does', async (t) => {
  const server = await httpServer(t);
  const seen = {};
  for (const [which, Base] of [['node', http.Agent], ['ours', Agent]]) {
    const agent = new (hooked(Base))({ keepAlive: true, maxSockets: 2 });
    t.after(() => agent.destroy());
    const get = (p) => request(`${server.url}${p}`, { agent }).then(({ body, req }) => [body, req.reusedSocket]);
    const sequential = [await get('/one'), await get('/two')];
    const concurrent = await Promise.all(['/a', '/b', '/c', '/d', '/e'].map(get));
    // The pool's views show the streams the hook made.
    const free = Object.values(agent.freeSockets).flat();
    seen[which] = {
      sequential,
      bodies: concurrent.map(([body]) => body),
      made: agent.made.length,
      freeAreMade: free.length > 0 && free.every((s) => agent.made.includes(s)),
      free: free.length,
      sockets: Object.keys(agent.sockets).length,
    };
    agent.destroy();
    await until(() => agent.made.every((s) => s.destroyed), 5000, 'streams destroyed');
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours.sequential, [['hello /one', false], ['hello /two', true]]);
  assert.strictEqual(seen.ours.made, 2);
});

test('statistics and socket marks count a hook\'s connections as agentkeepalive counts its sockets', async (t) => {
  const server = await httpServer(t);
  const agent = new (hooked(Agent))({ keepAlive: true, freeSocketTimeout: 60_000 });
  t.after(() => agent.destroy());
  await request(`${server.url}/1`, { agent });
  const { req } = await request(`${server.url}/2`, { agent });
  const [stream] = agent.made;
  assert.strictEqual(req.socket, stream);
  const { constants } = require('..');
  assert.strictEqual(stream[constants.SOCKET_REQUEST_COUNT], 2);
  assert.match(stream[constants.SOCKET_NAME], /^sock\[0#127\.0\.0\.1:\d+:\]$/);
  await until(() => stream[constants.SOCKET_REQUEST_FINISHED_COUNT] === 2, 5000, 'second request finished');
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(
    [status.createSocketCount, status.closeSocketCount, status.requestCount, status.freeSockets],
    [1, 0, 2, { [`127.0.0.1:${server.port}:`]: 1 }],
  );
  // Free, the stream does not keep the process alive, as a free socket of Node's agent.
  assert.strictEqual(stream._handle.hasRef(), false);
  stream.destroy();
  await once(stream, 'close');
  assert.deepStrictEqual(Object.keys(agent.freeSockets), []);
  assert.strictEqual(agent.getCurrentStatus().closeSocketCount, 1);
  // The next request opens another through the hook.
  await request(`${server.url}/3`, { agent });
  assert.strictEqual(agent.made.length, 2);
});

test('a hook\'s idle stream that the server closes leaves the pool; one that idles too long is ended', async (t) => {
  const server = await httpServer(t);
  const agent = new (hooked(Agent))({ keepAlive: true, freeSocketTimeout: 60_000 });
  t.after(() => agent.destroy());
  await request(`${server.url}/1`, { agent });
  await until(() => Object.keys(agent.freeSockets).length === 1, 5000, 'free');
  const [first] = agent.made;
  server.closeAllConnections();
  await once(first, 'close');
  assert.deepStrictEqual(Object.keys(agent.freeSockets), []);
  const { req } = await request(`${server.url}/2`, { agent });
  assert.strictEqual(req.reusedSocket, false);
  assert.strictEqual(agent.made.length, 2);

  // freeSocketTimeout: the pool ends the idle stream ('timeout', then its close), as
  // agentkeepalive times out a free socket, and counts it so.
  const short = new (hooked(Agent))({ keepAlive: true, freeSocketTimeout: 50 });
  t.after(() => short.destroy());
  await request(`${server.url}/3`, { agent: short });
  const [stream] = short.made;
  const events = [];
  stream.on('timeout', () => events.push('timeout'));
  await once(stream, 'close');
  events.push('close');
  assert.deepStrictEqual(events, ['timeout', 'close']);
  const status = short.getCurrentStatus();
  assert.deepStrictEqual([status.timeoutSocketCount, status.closeSocketCount, Object.keys(status.freeSockets)], [1, 1, []]);
});

test('a createConnection() assigned to an agent, calling back later, carries the request; its failures reach the request', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const calls = [];
  agent.createConnection = (options, cb) => {
    calls.push({ host: options.host, port: options.port, keepAlive: options.keepAlive, key: options._agentKey });
    // Made asynchronously, as a tunnel or a proxy client would.
    setImmediate(() => {
      const socket = net.connect(options.port, options.host);
      socket.once('connect', () => cb(null, socket));
    });
  };
  const bodies = await Promise.all([1, 2, 3].map((i) => request(`${server.url}/${i}`, { agent }).then((r) => r.body)));
  assert.deepStrictEqual(bodies, ['hello /1', 'hello /2', 'hello /3']);
  assert.deepStrictEqual(calls, [{ host: '127.0.0.1', port: server.port, keepAlive: true, key: `127.0.0.1:${server.port}:` }]);

  // A hook that fails through its callback: the request gets that error, and the slot is free
  // again for the next one.
  const failing = new Agent({ maxSockets: 1 });
  t.after(() => failing.destroy());
  let fail = true;
  failing.createConnection = (options, cb) => {
    if (fail) {
      fail = false;
      process.nextTick(cb, Object.assign(new Error('no route'), { code: 'ENETUNREACH' }));
      return undefined;
    }
    return net.connect(options.port, options.host);
  };
  const err = await requestError(`${server.url}/x`, { agent: failing });
  assert.strictEqual(err.code, 'ENETUNREACH');
  assert.strictEqual((await request(`${server.url}/y`, { agent: failing })).body, 'hello /y');
  const status = failing.getCurrentStatus();
  assert.strictEqual(status.createSocketErrorCount, 1);
  assert.deepStrictEqual(status.sockets, {});
});

test('a createConnection() or createSocket() that throws makes http.request() throw, as with Node\'s agent, and frees its slot', async (t) => {
  const server = await httpServer(t);
  for (const hook of ['createConnection', 'createSocket']) {
    const seen = {};
    for (const [which, Base] of [['node', http.Agent], ['ours', Agent]]) {
      const agent = new Base({ maxSockets: 1 });
      t.after(() => agent.destroy());
      let thrown = true;
      const refuse = () => {
        if (!thrown) return false;
        thrown = false;
        throw new RangeError('refused by the hook');
      };
      if (hook === 'createConnection') {
        agent.createConnection = (options) => refuse() || net.connect(options.port, options.host);
      } else {
        agent.createSocket = function (req, options, cb) {
          return refuse() || Base.prototype.createSocket.call(this, req, options, cb);
        };
      }
      let err;
      try {
        http.get(`${server.url}/`, { agent });
      } catch (e) {
        err = e;
      }
      const { body } = await request(`${server.url}/after`, { agent });
      seen[which] = { error: err && err.message, body };
    }
    assert.deepStrictEqual(seen.ours, seen.node, hook);
    assert.deepStrictEqual(seen.ours, { error: 'refused by the hook', body: 'hello /after' }, hook);
  }
});

test('a createConnection() override on an HttpsAgent carries requests over the TLS socket it makes, verified for real', async (t) => {
  const server = https.createServer({
    cert: fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', 'localhost-chain.pem')),
    key: fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', 'localhost-key.pem')),
  }, (req, res) => res.end(`secure ${req.url}`));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address();
  const made = [];
  class Hooked extends HttpsAgent {
    createConnection(options, cb) {
      // The TLS options of the request reach the hook, as Node passes them.
      assert.strictEqual(options.ca, CA);
      assert.strictEqual(options.servername, 'localhost');
      const socket = tls.connect({ ...options, host: '127.0.0.1' }, cb);
      made.push(socket);
      return socket;
    }
  }
  const agent = new Hooked({ keepAlive: true, ca: CA });
  t.after(() => agent.destroy());
  const get = (p) => new Promise((resolve, reject) => {
    https.get({ host: 'localhost', port, path: p, agent }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
  assert.deepStrictEqual([await get('/a'), await get('/b')], ['secure /a', 'secure /b']);
  assert.strictEqual(made.length, 1);
  assert.strictEqual(made[0].authorized, true);
  // Without the CA the hook's own TLS socket refuses the server, and the request fails so.
  const untrusting = new (class extends HttpsAgent {
    createConnection(options, cb) {
      return tls.connect({ ...options, host: '127.0.0.1' }, cb);
    }
  })();
  t.after(() => untrusting.destroy());
  const err = await new Promise((resolve, reject) => {
    https.get({ host: 'localhost', port, agent: untrusting }, () => reject(new Error('trusted'))).on('error', resolve);
  });
  assert.strictEqual(err.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  assert.strictEqual(untrusting.getCurrentStatus().errorSocketCount, 1);
});

test('a hook may give any Duplex (a custom transport) with the few socket methods Node\'s http calls', async (t) => {
  const server = await httpServer(t);
  // A transport of the program's: a Duplex that relays to a connection it keeps to itself.
  class Relay extends Duplex {
    constructor(port) {
      super();
      this.inner = net.connect(port, '127.0.0.1');
      this.inner.on('data', (d) => {
        if (!this.push(d)) this.inner.pause();
      });
      this.inner.on('end', () => this.push(null));
      this.inner.on('error', (err) => this.destroy(err));
      this.inner.on('close', () => this.destroy());
    }

    _read() {
      this.inner.resume();
    }

    _write(chunk, encoding, cb) {
      this.inner.write(chunk, encoding, cb);
    }

    _final(cb) {
      this.inner.end(cb);
    }

    _destroy(err, cb) {
      this.inner.destroy();
      cb(err);
    }

    // What Node's http client calls on its socket (the agent's timeout is cleared with it).
    setTimeout(ms, cb) {
      if (cb) this[ms === 0 ? 'removeListener' : 'once']('timeout', cb);
      return this;
    }
  }
  const relays = [];
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  agent.createConnection = (options) => {
    const relay = new Relay(options.port);
    relays.push(relay);
    return relay;
  };
  const first = await request(`${server.url}/1`, { agent });
  const second = await request(`${server.url}/2`, { agent });
  assert.deepStrictEqual([first.body, second.body, second.req.reusedSocket], ['hello /1', 'hello /2', true]);
  assert.strictEqual(relays.length, 1);
  assert.strictEqual(server.connections.length, 1);
  assert.deepStrictEqual(Object.values(agent.freeSockets).flat(), relays);
  agent.destroy();
  await until(() => relays[0].destroyed, 5000, 'relay destroyed');
  assert.strictEqual(relays[0].inner.destroyed, true);
});

test('a createConnection() that passes on a CONNECT tunnel made through an agent of ours carries the request (hpagent\'s shape)', async (t) => {
  const origin = await httpServer(t);
  // A CONNECT proxy on loopback: each tunnel is a connection to the port asked for.
  const proxy = http.createServer((req, res) => res.writeHead(405).end());
  proxy.on('connect', (req, client, head) => {
    const upstream = net.connect(Number(req.url.split(':')[1]), '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => {
    proxy.closeAllConnections();
    proxy.close(resolve);
  }));
  // The agent's connections are tunnels, each opened by a CONNECT request through `via`.
  const tunnelling = (Base, via) => class extends Base {
    createConnection(options, cb) {
      const connect = http.request({
        host: '127.0.0.1', port: proxy.address().port, method: 'CONNECT', path: `127.0.0.1:${options.port}`, agent: via,
      });
      connect.once('connect', (res, socket) => cb(res.statusCode === 200 ? null : new Error('refused'), socket));
      connect.once('error', cb);
      connect.end();
    }
  };
  for (const [label, Base, via] of [
    ['ours over ours', Agent, () => new Agent()],
    ['ours over Node\'s', Agent, () => new http.Agent()],
    ['Node\'s over ours', http.Agent, () => new Agent()],
  ]) {
    const connects = via();
    const agent = new (tunnelling(Base, connects))({ keepAlive: true });
    t.after(() => {
      agent.destroy();
      connects.destroy();
    });
    const first = await request(`${origin.url}/1`, { agent });
    const second = await request(`${origin.url}/2`, { agent });
    assert.deepStrictEqual([first.body, second.body], ['hello /1', 'hello /2'], label);
    assert.strictEqual(first.req.socket, second.req.socket, label);
  }
});

test('a hook\'s stream that has a timeout of its own keeps it, as with Node\'s agent and agentkeepalive', async (t) => {
  // @npmcli/agent's shape: the hook sets a short idle timeout on the stream it makes and fails
  // the request when it fires; the agent's own (longer) timeout does not replace it.
  const AgentKeepAlive = require('agentkeepalive');
  const held = [];
  const server = await httpServer(t, (req, res) => held.push(res));
  t.after(() => held.forEach((res) => res.end()));
  const hooked = (Base) => class extends Base {
    createConnection(options, cb) {
      const socket = net.connect(options.port, options.host);
      socket.setTimeout(50);
      socket.once('timeout', () => socket.destroy(Object.assign(new Error('idle'), { code: 'EIDLE' })));
      cb(null, socket);
    }
  };
  const seen = {};
  for (const [which, Base, options] of [
    ['node', http.Agent, { keepAlive: true }],
    ['agentkeepalive', AgentKeepAlive, { timeout: 8000 }],
    ['ours', Agent, { timeout: 8000 }],
  ]) {
    const agent = new (hooked(Base))(options);
    t.after(() => agent.destroy());
    let timeout;
    agent.once('free', () => assert.fail('the request ended'));
    const req = http.get(`${server.url}/${which}`, { agent });
    req.once('socket', (socket) => {
      timeout = socket.timeout;
    });
    const [err] = await once(req, 'error');
    seen[which] = [err.code, timeout];
  }
  assert.deepStrictEqual(seen, { node: ['EIDLE', 50], agentkeepalive: ['EIDLE', 50], ours: ['EIDLE', 50] });
});

test('a hook\'s stream that takes no property fails its request, without a throw, and its slot serves the next request', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  let sealed = null;
  agent.createConnection = (options) => {
    const socket = net.connect(options.port, options.host);
    if (sealed === null) {
      sealed = socket;
      Object.preventExtensions(socket);
    }
    return socket;
  };
  const err = await requestError(`${server.url}/sealed`, { agent });
  assert.ok(err instanceof TypeError, String(err));
  await until(() => sealed.destroyed, 5000, 'the sealed stream destroyed');
  const { body } = await request(`${server.url}/after`, { agent });
  assert.strictEqual(body, 'hello /after');
});

test('a createSocket() override that passes on a stream of its own carries the request, and the pool keeps it', async (t) => {
  const server = await httpServer(t);
  const made = [];
  const agent = new (ownStreams(made))({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const bodies = await Promise.all(['/one', '/two', '/three'].map((p) => request(`${server.url}${p}`, { agent })));
  assert.deepStrictEqual(bodies.map((r) => r.body), ['hello /one', 'hello /two', 'hello /three']);
  // One stream, within maxSockets, carried all three (Node's agent leaves such a stream out of
  // its pool and its counts: one connection per request, each left open).
  assert.strictEqual(made.length, 1);
  assert.ok(bodies.every((r) => r.req.socket === made[0]));
  await until(() => Object.keys(agent.freeSockets).length === 1, 5000, 'free');
  assert.deepStrictEqual(Object.values(agent.freeSockets).flat(), made);
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 1);
  // Called outside addRequest(), the agent's own createSocket() makes nothing: a connection
  // has its slot in the pool first.
  assert.throws(() => new Agent().createSocket({}, {}), { code: 'ERR_HYPERAGENT_UNSUPPORTED' });
});

test('a createSocket() override that passes on no socket, or another than the one made, fails its request with a clear error', async (t) => {
  const server = await httpServer(t);
  class Other extends Agent {
    createSocket(req, options, cb) {
      super.createSocket(req, options, (err) => cb(err, net.connect(server.port, '127.0.0.1')));
    }
  }
  const agent = new Other();
  t.after(() => agent.destroy());
  const err = await requestError(`${server.url}/other`, { agent });
  assert.strictEqual(err.code, 'ERR_HYPERAGENT_UNSUPPORTED');
  assert.match(err.message, /createSocket\(\) passed on a socket other than/);
  await until(() => Object.keys(agent.getCurrentStatus().sockets).length === 0, 5000, 'slot freed');
  class None extends Agent {
    createSocket(req, options, cb) {
      cb(null, null);
    }
  }
  const none = new None();
  t.after(() => none.destroy());
  const nothing = await requestError(`${server.url}/none`, { agent: none });
  assert.match(nothing.message, /createSocket\(\) passed on no socket/);
  assert.strictEqual(none.getCurrentStatus().createSocketErrorCount, 1);
});

test('a createSocket() override that calls super.createSocket(), with a createConnection() of its own, carries the request over that connection, as with Node\'s agent', async (t) => {
  // agent-base's shape (http-proxy-agent, https-proxy-agent, socks-proxy-agent, @npmcli/agent):
  // createSocket() calls Node's, at once or after a promise, and Node's calls the subclass's
  // createConnection().
  const server = await httpServer(t);
  const shaped = (Base, later) => class extends hooked(Base) {
    createSocket(req, options, cb) {
      if (later) Promise.resolve().then(() => super.createSocket(req, options, cb));
      else super.createSocket(req, options, cb);
    }
  };
  for (const later of [false, true]) {
    for (const [label, Base] of [['node', http.Agent], ['ours', Agent]]) {
      const agent = new (shaped(Base, later))({ keepAlive: true, maxSockets: 1 });
      t.after(() => agent.destroy());
      const results = await Promise.all(['/a', '/b'].map((p) => request(`${server.url}${p}`, { agent })));
      const what = `${label}, ${later ? 'after a promise' : 'at once'}`;
      assert.deepStrictEqual(results.map((r) => r.body), ['hello /a', 'hello /b'], what);
      assert.ok(results.every((r) => agent.made.includes(r.req.socket)), what);
      // Ours gives a connection its slot before createSocket() runs, so maxSockets holds either
      // way (Node's agent counts a socket only once made: after a promise it makes two).
      if (label === 'ours') assert.strictEqual(agent.made.length, 1, what);
    }
  }
});

test('agent.request() refuses an agent whose connections a hook makes, naming why; http.request() on it works', async (t) => {
  const server = await httpServer(t);
  const agent = new (hooked(Agent))({ keepAlive: true });
  t.after(() => agent.destroy());
  assert.throws(() => agent.request(`${server.url}/`), {
    code: 'ERR_HYPERAGENT_UNSUPPORTED',
    message: /createConnection\(\) hook carries http\.request\(\) only/,
  });
  assert.strictEqual((await request(`${server.url}/`, { agent })).body, 'hello /');
  // The agent's own createConnection(), called as a subclass's super call calls it, is Node's.
  const plain = new Agent();
  const socket = plain.createConnection({ port: server.port, host: '127.0.0.1' });
  assert.ok(socket instanceof net.Socket);
  await once(socket, 'connect');
  socket.destroy();
  const res = await plain.request(`${server.url}/plain`);
  assert.strictEqual(await res.body.text(), 'hello /plain');
  plain.destroy();
});

test('a hook\'s stream that an upgrade takes over leaves the pool, and its slot serves the next request', async (t) => {
  const server = await httpServer(t);
  server.on('upgrade', (req, socket) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
    socket.pipe(socket);
  });
  const agent = new (hooked(Agent))({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const req = http.get(`${server.url}/up`, { agent, headers: { connection: 'upgrade', upgrade: 'echo' } });
  const [, upgraded] = await once(req, 'upgrade');
  assert.strictEqual(upgraded, agent.made[0]);
  // The slot is the next request's; the upgraded stream is the program's.
  assert.strictEqual((await request(`${server.url}/next`, { agent })).body, 'hello /next');
  upgraded.write('ping');
  const [echo] = await once(upgraded, 'data');
  assert.strictEqual(echo.toString(), 'ping');
  upgraded.destroy();
  assert.strictEqual(agent.made.length, 2);
});

test('a hook\'s stream whose slot an agent.request() takes is ended, and nothing leaks', async (t) => {
  const server = await httpServer(t);
  const made = [];
  // agent.request() still opens its connections in Rust, on the same pool.
  const agent = new (ownStreams(made))({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  let release;
  const held = new Promise((resolve) => (release = resolve));
  const slow = new Promise((resolve, reject) => {
    http.get(`${server.url}/slow`, { agent }, (res) => {
      res.setEncoding('utf8');
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
      // The response is read only once agent.request() waits for the slot.
      res.pause();
      held.then(() => res.resume());
    }).on('error', reject);
  });
  await until(() => made.length === 1 && Object.keys(agent.sockets).length === 1, 5000, 'in use');
  const promised = agent.request(`${server.url}/promised`);
  await until(() => agent.getCurrentStatus().requests[`127.0.0.1:${server.port}:`] === 1, 5000, 'queued');
  release();
  assert.strictEqual(await slow, 'hello /slow');
  const res = await promised;
  assert.strictEqual(await res.body.text(), 'hello /promised');
  // The stream gave its slot to agent.request()'s connection and was ended.
  await until(() => made[0].destroyed, 5000, 'stream ended');
  assert.strictEqual(made.length, 1);
  assert.strictEqual(server.connections.length, 2);
});

test('a hook\'s idle stream closed to make room for agent.request() is ended with it', async (t) => {
  const server = await httpServer(t);
  const made = [];
  const agent = new (ownStreams(made))({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  await request(`${server.url}/dropin`, { agent });
  await until(() => Object.keys(agent.freeSockets).length === 1, 5000, 'free');
  // agent.request() cannot use the hook's connection; at maxSockets, the pool closes it.
  const res = await agent.request(`${server.url}/promised`);
  assert.strictEqual(await res.body.text(), 'hello /promised');
  await until(() => made[0].destroyed, 5000, 'stream ended');
  assert.strictEqual(agent.getCurrentStatus().closeSocketCount, 1);
});

test('a hook\'s stream that fails to connect fails its request, counted as agentkeepalive counts it', async (t) => {
  // A port nobody listens on: taken, then closed.
  const probe = net.createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  const agent = new (hooked(Agent))({ keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  const err = await requestError(`http://127.0.0.1:${port}/`, { agent });
  assert.strictEqual(err.code, 'ECONNREFUSED');
  await until(() => agent.getCurrentStatus().closeSocketCount === 1, 5000, 'closed');
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(
    [status.createSocketCount, status.errorSocketCount, status.closeSocketCount, Object.keys(status.sockets)],
    [1, 1, 1, []],
  );
});

test("createConnection() is Node's in every form of its arguments, even with our classes put in the place of Node's", async (t) => {
  const server = await httpServer(t);
  const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
  const secure = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, (req, res) => res.end());
  secure.listen(0, '127.0.0.1');
  await once(secure, 'listening');
  t.after(() => secure.close());
  // A program that installs ours for every http.Agent of its dependencies.
  const saved = [http.Agent, https.Agent];
  http.Agent = Agent;
  https.Agent = HttpsAgent;
  t.after(() => { [http.Agent, https.Agent] = saved; });
  const sockets = [];
  t.after(() => sockets.forEach((s) => s.destroy()));
  const agent = new Agent();
  const byOptions = agent.createConnection({ port: server.port, host: '127.0.0.1' });
  sockets.push(byOptions);
  await once(byOptions, 'connect');
  // net's (port, host, connectListener).
  let heard = false;
  const byPort = agent.createConnection(server.port, '127.0.0.1', () => { heard = true; });
  sockets.push(byPort);
  await once(byPort, 'connect');
  assert.strictEqual(heard, true);
  // https.Agent's (port, host, options): the options (the CA, the name) are taken.
  const tlsAgent = new HttpsAgent();
  const port = secure.address().port;
  for (const made of [
    tlsAgent.createConnection({ port, host: '127.0.0.1', ca: CA, servername: 'localhost' }),
    tlsAgent.createConnection(port, { host: '127.0.0.1', ca: CA, servername: 'localhost' }),
    tlsAgent.createConnection(port, '127.0.0.1', { ca: CA, servername: 'localhost' }),
  ]) {
    sockets.push(made);
    assert.ok(made instanceof tls.TLSSocket);
    await once(made, 'secureConnect');
    assert.strictEqual(made.authorized, true);
  }
});
