'use strict';

const test = require('node:test');
const assert = require('node:assert');
const dns = require('node:dns');
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer, rawServer, readRequest, request, runChild } = require('./helpers');

test('30 sequential requests share one connection', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const reused = [];
  for (let i = 0; i < 30; i++) {
    // Wait for 'free' (the connection back in the pool) before the next request, as a
    // sequential client does when it awaits the whole response.
    const freed = once(agent, 'free');
    const { body, req } = await request(`${server.url}/n${i}`, { agent });
    assert.strictEqual(body, `hello /n${i}`);
    reused.push(req.reusedSocket);
    await freed;
  }
  assert.strictEqual(server.connections.length, 1);
  assert.deepStrictEqual(reused, [false, ...Array(29).fill(true)]);
  assert.strictEqual(new Set(server.requestPorts).size, 1);
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.createSocketCount, 1);
  assert.strictEqual(status.requestCount, 30);
});

test('the socket is shaped like net.Socket and reports both ends', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const req = http.get(`${server.url}/`, { agent });
  const [socket] = await once(req, 'socket');
  assert.strictEqual(socket.connecting, true);
  await once(socket, 'connect');
  const [res] = await once(req, 'response');
  assert.strictEqual(res.socket, socket);
  assert.strictEqual(socket.remoteAddress, '127.0.0.1');
  assert.strictEqual(socket.remotePort, server.port);
  assert.strictEqual(socket.remoteFamily, 'IPv4');
  assert.strictEqual(socket.localAddress, '127.0.0.1');
  assert.strictEqual(socket.localPort, server.requestPorts[0]);
  assert.deepStrictEqual(socket.address(), { address: '127.0.0.1', family: 'IPv4', port: socket.localPort });
  for (const method of ['setTimeout', 'setNoDelay', 'setKeepAlive', 'ref', 'unref', 'destroy']) {
    assert.strictEqual(typeof socket[method], 'function', method);
  }
  assert.strictEqual(socket.setNoDelay(true), socket);
  assert.strictEqual(socket.setKeepAlive(true, 1000), socket);
  res.resume();
  await once(res, 'end');
  assert.ok(socket.bytesWritten > 0);
  assert.ok(socket.bytesRead > 0);
});

test('a Connection: close response is never pooled', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('connection', 'close');
    res.end('bye');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (let i = 0; i < 3; i++) {
    const { body, req } = await request(`${server.url}/`, { agent });
    assert.strictEqual(body, 'bye');
    assert.strictEqual(req.reusedSocket, false);
  }
  assert.strictEqual(server.connections.length, 3);
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 3);
});

test('an HTTP/1.0 response without keep-alive is not pooled', async (t) => {
  const server = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.end('HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (let i = 0; i < 2; i++) {
    const { body } = await request(`http://127.0.0.1:${server.port}/`, { agent });
    assert.strictEqual(body, 'ok');
  }
  assert.strictEqual(server.connectionCount, 2);
});

test('requests over a Unix socket (socketPath; a named pipe on Windows) reuse their connection', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-'));
  const socketPath = process.platform === 'win32'
    ? `\\\\.\\pipe\\${path.basename(dir)}`
    : path.join(dir, 'server.sock');
  const server = http.createServer((req, res) => res.end(`unix ${req.url}`));
  let connections = 0;
  server.on('connection', () => connections++);
  server.listen(socketPath);
  await once(server, 'listening');
  const agent = new Agent();
  t.after(() => {
    agent.destroy();
    server.closeAllConnections();
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  for (let i = 0; i < 3; i++) {
    const freed = once(agent, 'free');
    const { body } = await request({ socketPath, path: `/u${i}`, agent });
    assert.strictEqual(body, `unix /u${i}`);
    await freed;
  }
  assert.strictEqual(connections, 1);
});

test("a request's options with the agent's over them reach getName and the connection, as Node's addRequest merges them", async (t) => {
  const server = await httpServer(t);
  const tag = Symbol('tag');
  const seen = {};
  for (const [kind, Base] of [['node', http.Agent], ['ours', Agent]]) {
    class Capturing extends Base {
      getName(options) {
        // The first call's, as a spread sees them (own enumerable keys and symbols).
        seen[kind] ??= { ...options };
        return super.getName(options);
      }
    }
    const agent = new Capturing({ keepAlive: true, family: 4, localAddress: '127.0.0.1', headers: { from: 'agent' } });
    t.after(() => agent.destroy());
    const { res } = await request({ host: 'localhost', port: server.port, path: '/x', agent, family: 6, headers: { from: 'request' }, [tag]: 'kept' });
    assert.strictEqual(res.statusCode, 200, kind);
    assert.strictEqual(Object.keys(agent.freeSockets).length, 1, kind);
  }
  // The agent's family, local address and headers over the request's (and its path: null, not
  // the request's); the request's own keys and its symbol kept.
  const picked = (o) => [o.family, o.localAddress, o.headers, o.path, o.host, o.port, o.keepAlive, o[tag]];
  assert.deepStrictEqual(picked(seen.ours), [4, '127.0.0.1', { from: 'agent' }, null, 'localhost', server.port, true, 'kept']);
  assert.deepStrictEqual(picked(seen.ours), picked(seen.node));
});

// macOS answers only 127.0.0.1 on its loopback interface unless more addresses are added to it.
test('localAddress binds the local side and is part of the pool key', { skip: process.platform === 'darwin' && 'no 127.0.0.2 on macOS loopback' }, async (t) => {
  const server = await httpServer(t, (req, res) => res.end(req.socket.remoteAddress));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const a = await request(`${server.url}/`, { agent, localAddress: '127.0.0.2' });
  assert.strictEqual(a.body, '127.0.0.2');
  const b = await request(`${server.url}/`, { agent, localAddress: '127.0.0.3' });
  assert.strictEqual(b.body, '127.0.0.3');
  assert.strictEqual(server.connections.length, 2);
});

test('a lookup function resolves the host, called with the options net.connect gives it', async (t) => {
  const server = await httpServer(t);
  // Per case: the agent's options, the request's. 'IPv4' and 'IPv6' are net's spellings of 4
  // and 6; without a family net asks for every address (Happy Eyeballs) with ADDRCONFIG,
  // unless autoSelectFamily is off or a localAddress is bound.
  const marker = Symbol('family');
  const cases = [
    [{}, {}],
    [{}, { family: 4 }],
    [{}, { family: 'IPv4' }],
    [{ family: 'IPv6' }, {}],
    [{}, { autoSelectFamily: false }],
    [{}, { hints: dns.V4MAPPED }],
    [{}, { localAddress: '127.0.0.1' }],
    // A family the agent was given, that dns.lookup would refuse: as it is.
    [{ family: 5 }, {}],
    [{ family: '4' }, {}],
    [{ family: marker }, {}],
  ];
  const run = async (make) => {
    const calls = [];
    for (const [agentOptions, requestOptions] of cases) {
      const agent = make(agentOptions);
      const lookup = (host, opts, cb) => {
        calls.push({ host, opts: { ...opts } });
        // Answered as asked: every address, or one (IPv4 whatever the family asked).
        if (opts.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
        else cb(null, '127.0.0.1', 4);
      };
      try {
        const { body } = await request(`http://api.example.test:${server.port}/x`, { agent, lookup, ...requestOptions });
        assert.strictEqual(body, 'hello /x');
      } finally {
        agent.destroy();
      }
    }
    return calls;
  };
  const expected = await run((options) => new http.Agent(options));
  assert.strictEqual(expected.length, cases.length);
  assert.deepStrictEqual(await run((options) => new Agent(options)), expected);
  // agent.request() hands the agent's lookup the agent's family as it is too.
  const seen = [];
  const agent = new Agent({ family: marker, lookup: (host, opts, cb) => { seen.push(opts.family); cb(null, '127.0.0.1', 4); } });
  t.after(() => agent.destroy());
  const res = await agent.request(`http://api.example.test:${server.port}/y`);
  assert.strictEqual(await res.body.text(), 'hello /y');
  assert.deepStrictEqual(seen, [marker]);
});

test('a dns.lookup a program replaced resolves the hosts, on both paths, as net.connect calls it', async (t) => {
  // A DNS cache, or a test's stub, put in place of dns.lookup: net.connect calls what is there
  // at each connection, and so does ours.
  const server = await httpServer(t);
  const original = dns.lookup;
  t.after(() => {
    dns.lookup = original;
  });
  let calls = [];
  dns.lookup = function stub(host, opts, cb) {
    if (host !== 'stubbed.example.test') return original(host, opts, cb);
    calls.push({ host, opts: { ...opts } });
    if (opts.all) process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }]);
    else process.nextTick(cb, null, '127.0.0.1', 4);
    return undefined;
  };
  const seen = {};
  for (const [which, agent] of [['node', new http.Agent({ keepAlive: true })], ['ours', new Agent()]]) {
    t.after(() => agent.destroy());
    calls = [];
    const { body } = await request(`http://stubbed.example.test:${server.port}/a`, { agent });
    seen[which] = { body, calls };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.strictEqual(seen.ours.calls.length, 1);
  calls = [];
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(`http://stubbed.example.test:${server.port}/b`);
  assert.strictEqual(await res.body.text(), 'hello /b');
  assert.deepStrictEqual(calls.map((c) => c.host), ['stubbed.example.test']);
  // Put back, Node's own resolves again: the name is unknown.
  dns.lookup = original;
  const fresh = new Agent();
  t.after(() => fresh.destroy());
  await assert.rejects(fresh.request(`http://stubbed.example.test:${server.port}/c`), { code: 'ENOTFOUND' });
});

test('a dns.lookup replaced before hyperagent loads is the one called', async () => {
  const script = `
    const dns = require('node:dns');
    const http = require('node:http');
    const original = dns.lookup;
    let called = 0;
    dns.lookup = (host, opts, cb) => {
      if (host !== 'early.example.test') return original(host, opts, cb);
      called++;
      if (opts.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
      else cb(null, '127.0.0.1', 4);
    };
    const { Agent } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const server = http.createServer((req, res) => res.end('ok')).listen(0, '127.0.0.1', async () => {
      const agent = new Agent();
      const res = await agent.request('http://early.example.test:' + server.address().port + '/');
      console.log(JSON.stringify({ body: await res.body.text(), called }));
      agent.destroy();
      server.close();
    });
  `;
  const { code, out, err } = await runChild(script);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), { body: 'ok', called: 1 });
});

test('a family dns.lookup refuses throws out of http.request() where dns.lookup would resolve the host, as with Node\'s agent', async (t) => {
  const server = await httpServer(t);
  const outcome = (agent, options) => {
    try {
      const req = http.get({ port: server.port, agent, ...options });
      req.destroy();
      req.on('error', () => {});
      return 'sent';
    } catch (err) {
      return `${err.code}: ${err.message}`;
    }
  };
  // A name to resolve: refused at once. An IP address, or a program's own lookup, which gets
  // the family as it is: sent.
  const cases = [
    { host: 'localhost', family: 5 },
    { host: 'localhost', family: 'x' },
    { host: '127.0.0.1', family: 5 },
    { host: 'localhost', family: 5, lookup: (h, o, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]) },
  ];
  const node = new http.Agent();
  const ours = new Agent();
  t.after(() => {
    node.destroy();
    ours.destroy();
  });
  const expected = cases.map((c) => outcome(node, c));
  assert.deepStrictEqual(expected.slice(1, 3), ["ERR_INVALID_ARG_VALUE: The property 'options.family' must be one of: 0, 4, 6. Received 'x'", 'sent']);
  assert.deepStrictEqual(cases.map((c) => outcome(ours, c)), expected);
  // Given to the agent, such a family is checked at the request, not at the agent's making.
  const node5 = new http.Agent({ family: 5 });
  const ours5 = new Agent({ family: 5 });
  t.after(() => {
    node5.destroy();
    ours5.destroy();
  });
  const agentFamily = [node5, ours5].map((agent) => outcome(agent, { host: 'localhost' }));
  assert.match(agentFamily[0], /^ERR_INVALID_ARG_VALUE: The property 'options.family' must be one of: 0, 4, 6. Received 5/);
  assert.deepStrictEqual(agentFamily[1], agentFamily[0]);
  assert.throws(() => ours5.request(`http://localhost:${server.port}/`), { code: 'ERR_INVALID_ARG_VALUE' });
});

test('a lookup error fails the request with that error', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const boom = Object.assign(new Error('no such host'), { code: 'ENOTFOUND' });
  const req = http.get('http://nowhere.test/', { agent, lookup: (h, o, cb) => cb(boom) });
  const [err] = await once(req, 'error');
  assert.strictEqual(err, boom);
});

test("family 4 (or net's 'IPv4') resolves localhost to IPv4 only", async (t) => {
  const server = await httpServer(t, (req, res) => res.end(req.socket.remoteFamily));
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const family of [4, 'IPv4']) {
    const { body } = await request(`http://localhost:${server.port}/`, { agent, family });
    assert.strictEqual(body, 'IPv4');
  }
});

test('an IP address is connected to whatever the family asks for, as net connects to it', async (t) => {
  const server = await httpServer(t, (req, res) => res.end(req.socket.remoteFamily));
  const agent = new Agent({ family: 6 });
  t.after(() => agent.destroy());
  const { body } = await request(`${server.url}/`, { agent });
  assert.strictEqual(body, 'IPv4');
  assert.strictEqual(await (await agent.request(`${server.url}/`)).body.text(), 'IPv4');
});

test('the module is agentkeepalive-shaped: default export, HttpAgent, constants', () => {
  const mod = require('..');
  assert.strictEqual(mod, mod.Agent);
  assert.strictEqual(mod.HttpAgent, mod.Agent);
  assert.strictEqual(typeof mod.constants.SOCKET_NAME, 'symbol');
  const agent = new mod();
  assert.ok(agent instanceof http.Agent);
  agent.destroy();
});
