'use strict';

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const util = require('node:util');
const { once } = require('node:events');
const { Agent } = require('..');
const { httpServer, request, requestError, closed, until } = require('./helpers');

async function closedPort() {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  await once(server, 'close');
  return port;
}

test('a refused connection fails the request with ECONNREFUSED, as net reports it', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const port = await closedPort();
  const err = await requestError(`http://127.0.0.1:${port}/`, { agent });
  assert.strictEqual(err.code, 'ECONNREFUSED');
  // libuv's number for it, as Node names it back (-111 on Linux, -61 on macOS, -4078 on Windows).
  assert.strictEqual(util.getSystemErrorName(err.errno), 'ECONNREFUSED');
  assert.strictEqual(err.syscall, 'connect');
  assert.strictEqual(err.address, '127.0.0.1');
  assert.strictEqual(err.port, port);
  assert.strictEqual(err.message, `connect ECONNREFUSED 127.0.0.1:${port}`);
  // Counted as agentkeepalive counts its socket: created, an error, closed.
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(
    [status.createSocketCount, status.createSocketErrorCount, status.errorSocketCount, status.closeSocketCount],
    [1, 0, 1, 1],
  );
  assert.deepStrictEqual(status.sockets, {});
});

// Linux refuses a TCP connect to the broadcast address in the call itself (ENETUNREACH), which
// net words with the socket's local end; the failure still comes later, as an event.
test('a connect the kernel refuses at once fails as net reports it, and frees its slot', { skip: process.platform !== 'linux', timeout: 20_000 }, async (t) => {
  const fail = async (agent) => {
    const errors = [];
    let sync = true;
    const done = Promise.all(['/a', '/b'].map((path) => new Promise((resolve) => {
      const req = http.get({ host: '255.255.255.255', port: 80, path, agent }, () => resolve(null));
      req.on('error', (err) => {
        errors.push({ sync, ...err, message: err.message });
        resolve(err);
      });
    })));
    sync = false;
    await done;
    return errors;
  };
  const node = new http.Agent({ maxSockets: 1 });
  const ours = new Agent({ maxSockets: 1 });
  t.after(() => {
    node.destroy();
    ours.destroy();
  });
  const expected = await fail(node);
  assert.strictEqual(expected.length, 2);
  assert.strictEqual(expected[0].code, 'ENETUNREACH');
  assert.deepStrictEqual(await fail(ours), expected);
  const status = ours.getCurrentStatus();
  assert.deepStrictEqual(
    [status.createSocketCount, status.errorSocketCount, status.closeSocketCount, status.sockets, status.requests],
    [2, 2, 2, {}, {}],
  );
});

test('a socketPath nobody listens at fails as net reports it: missing, or not a socket', { skip: process.platform === 'win32' }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-path-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fail = async (Make, socketPath) => {
    const agent = new Make();
    t.after(() => agent.destroy());
    const err = await requestError('http://localhost/', { socketPath, agent });
    return { code: err.code, errno: err.errno, syscall: err.syscall, address: err.address, port: err.port, message: err.message };
  };
  // A path with nothing there, and a path that is a directory (Linux refuses the connect).
  for (const socketPath of [path.join(dir, 'missing.sock'), ...(process.platform === 'linux' ? [dir] : [])]) {
    const expected = await fail(http.Agent, socketPath);
    assert.deepStrictEqual(await fail(Agent, socketPath), expected, socketPath);
    assert.strictEqual(expected.address, socketPath);
  }
});

test("an unknown host fails with ENOTFOUND and the hostname, its socket's 'lookup' first, as net's", async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const heard = [];
  const err = await new Promise((resolve) => {
    const req = http.get('http://no-such-host.invalid/', { agent });
    req.on('socket', (socket) => socket.on('lookup', (...args) => heard.push(args)));
    req.on('error', resolve);
  });
  assert.strictEqual(err.code, 'ENOTFOUND');
  assert.strictEqual(err.syscall, 'getaddrinfo');
  assert.strictEqual(err.hostname, 'no-such-host.invalid');
  assert.strictEqual(err.message, 'getaddrinfo ENOTFOUND no-such-host.invalid');
  assert.deepStrictEqual(heard, [[err, undefined, undefined, 'no-such-host.invalid']]);
});

test('a localAddress of the other family fails at bind with EINVAL, as net reports it, on both paths', async (t) => {
  const server = await httpServer(t);
  const agent = new Agent({ localAddress: '::1' });
  t.after(() => agent.destroy());
  // Node's own agent, for the record of what it reports (errno -22 on Linux).
  const node = await requestError(`${server.url}/`, { agent: new http.Agent(), localAddress: '::1' });
  const expected = { errno: node.errno, code: 'EINVAL', syscall: 'bind', address: '::1', message: 'bind EINVAL ::1' };
  assert.strictEqual(util.getSystemErrorName(node.errno), 'EINVAL');
  const ours = await requestError(`${server.url}/`, { agent });
  const promised = await agent.request(`${server.url}/`).then(() => null, (err) => err);
  for (const err of [node, ours, promised]) {
    assert.deepStrictEqual({ errno: err.errno, code: err.code, syscall: err.syscall, address: err.address, message: err.message }, expected);
  }
  assert.strictEqual(server.connections.length, 0);
});

test('localPort binds the connection\'s local port on both paths, and a failed connect names it, as net does', async (t) => {
  const server = await httpServer(t, (req, res) => res.end(String(req.socket.remotePort)));
  const dropIn = new Agent();
  const promise = new Agent({ localPort: await closedPort() });
  t.after(() => [dropIn, promise].forEach((a) => a.destroy()));
  const localPort = await closedPort();
  assert.strictEqual((await request(`${server.url}/`, { agent: dropIn, localPort })).body, String(localPort));
  assert.strictEqual(await (await promise.request(`${server.url}/`)).body.text(), String(promise.options.localPort));
  // A refused connect from a given port: Node's message and fields, on both paths.
  const port = await closedPort();
  const from = await closedPort();
  const fields = (err) => ({ code: err.code, message: err.message, localAddress: err.localAddress, localPort: err.localPort });
  const node = fields(await requestError(`http://127.0.0.1:${port}/`, { agent: new http.Agent(), localPort: from }));
  assert.deepStrictEqual(node, {
    code: 'ECONNREFUSED', message: `connect ECONNREFUSED 127.0.0.1:${port} - Local (0.0.0.0:${from})`, localAddress: '0.0.0.0', localPort: from,
  });
  assert.deepStrictEqual(fields(await requestError(`http://127.0.0.1:${port}/`, { agent: dropIn, localPort: from })), node);
  const refused = new Agent({ localPort: from });
  t.after(() => refused.destroy());
  assert.deepStrictEqual(fields(await refused.request(`http://127.0.0.1:${port}/`).then(() => null, (err) => err)), node);
  // Not a number: refused at once, as net.connect refuses it.
  const typeError = { code: 'ERR_INVALID_ARG_TYPE', message: /"options.localPort" property must be of type number/ };
  assert.throws(() => http.get({ host: '127.0.0.1', port, localPort: '1', agent: new http.Agent() }), typeError);
  assert.throws(() => http.get({ host: '127.0.0.1', port, localPort: '1', agent: dropIn }), typeError);
  assert.throws(() => new Agent({ localPort: '1' }), typeError);
});

test('a blockList keeps both paths from the addresses it blocks, as net.connect does', async (t) => {
  const server = await httpServer(t);
  const blockList = new net.BlockList();
  blockList.addAddress('127.0.0.1');
  const elsewhere = new net.BlockList();
  elsewhere.addAddress('10.0.0.1');
  const port = new URL(server.url).port;
  const outcome = (p) => p.then((r) => r.body, (err) => `${err.code}: ${err.message}`);
  const blocked = 'ERR_IP_BLOCKED: IP(127.0.0.1) is blocked by net.BlockList';
  // Node's own agent takes the option from Node 22.13 on: there, it must agree.
  const nodeTakes = typeof net.BlockList.isBlockList === 'function';
  for (const host of ['127.0.0.1', 'localhost']) {
    const url = `http://${host}:${port}/`;
    const agents = [new Agent(), new Agent({ blockList })];
    t.after(() => agents.forEach((a) => a.destroy()));
    assert.strictEqual(await outcome(request(url, { agent: agents[0], blockList })), blocked, host);
    assert.strictEqual(await outcome(request(url, { agent: agents[1] })), blocked, host);
    assert.strictEqual(await outcome(agents[1].request(url).then(async (r) => ({ body: await r.body.text() }))), blocked, host);
    if (nodeTakes) assert.strictEqual(await outcome(request(url, { agent: new http.Agent(), blockList })), blocked, `${host}: Node's agent`);
  }
  assert.strictEqual(server.connections.length, 0, 'nothing reached the server');
  // A list that blocks other addresses lets the request through.
  const open = new Agent({ blockList: elsewhere });
  t.after(() => open.destroy());
  assert.strictEqual((await request(`${server.url}/a`, { agent: open })).body, 'hello /a');
  assert.strictEqual(await (await open.request(`${server.url}/b`)).body.text(), 'hello /b');
  // Not a BlockList: refused at once.
  assert.throws(() => http.get({ host: '127.0.0.1', port, agent: new Agent(), blockList: 'x' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => new Agent({ blockList: {} }), { code: 'ERR_INVALID_ARG_TYPE' });
});

test('a failed connect lets a queued request try again', async (t) => {
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const port = await closedPort();
  const errors = await Promise.all([
    requestError(`http://127.0.0.1:${port}/a`, { agent }),
    requestError(`http://127.0.0.1:${port}/b`, { agent }),
  ]);
  assert.deepStrictEqual(errors.map((e) => e.code), ['ECONNREFUSED', 'ECONNREFUSED']);
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual([status.createSocketCount, status.errorSocketCount, status.closeSocketCount], [2, 2, 2]);
});

test('an active socket timeout with nobody listening fails with ERR_SOCKET_TIMEOUT', async (t) => {
  const server = await httpServer(t, () => {});
  const agent = new Agent({ timeout: 50 });
  t.after(() => agent.destroy());
  const err = await requestError(`${server.url}/`, { agent });
  assert.strictEqual(err.code, 'ERR_SOCKET_TIMEOUT');
  assert.strictEqual(err.message, 'Socket timeout');
  assert.strictEqual(err.timeout, 50);
  await closed(server.connections[0]);
  const status = agent.getCurrentStatus();
  assert.strictEqual(status.timeoutSocketCount, 1);
  assert.strictEqual(status.closeSocketCount, 1);
});

test('an active socket timeout on a socket the program left without error listeners closes it, and takes nothing else down', async (t) => {
  const server = await httpServer(t, () => {});
  const agent = new Agent({ timeout: 50 });
  t.after(() => agent.destroy());
  const req = http.get(`${server.url}/`, { agent });
  const [socket] = await once(req, 'socket');
  await once(server, 'request');
  socket.removeAllListeners('error');
  const outcome = await new Promise((resolve) => {
    req.on('error', (err) => resolve(err.code));
    req.on('response', () => resolve('response'));
  });
  // http's own 'close' listener fails the request, as for any socket closed under it.
  assert.strictEqual(outcome, 'ECONNRESET');
  assert.strictEqual(socket.destroyed, true);
  assert.strictEqual(agent.getCurrentStatus().timeoutSocketCount, 1);
});

test('a socket the agent times out has left agent.sockets when its request\'s error comes, as with agentkeepalive', async (t) => {
  const server = await httpServer(t, () => {});
  const AgentKeepAlive = require('agentkeepalive');
  const seen = {};
  for (const [which, Made] of [['agentkeepalive', AgentKeepAlive], ['ours', Agent]]) {
    const agent = new Made({ keepAlive: true, timeout: 50 });
    t.after(() => agent.destroy());
    const req = http.get(`${server.url}/${which}`, { agent });
    const [socket] = await once(req, 'socket');
    seen[which] = await new Promise((resolve) => req.on('error', (err) => resolve({
      code: err.code,
      sockets: Object.keys(agent.sockets).length,
      destroyed: socket.destroyed,
    })));
  }
  assert.deepStrictEqual(seen.ours, seen.agentkeepalive);
  assert.deepStrictEqual(seen.ours, { code: 'ERR_SOCKET_TIMEOUT', sockets: 0, destroyed: true });
});

test("a timeout the program set is the program's when it listens on the response or the socket, as with Node's agent", async (t) => {
  // The server sends the head and then nothing: only the timeout can end the exchange.
  const server = await httpServer(t, (req, res) => res.flushHeaders());
  const ways = {
    'res.setTimeout()': (res, tell) => res.setTimeout(40, () => tell('timeout')),
    'socket.setTimeout()': (res, tell) => res.socket.setTimeout(40, () => tell('timeout')),
    "the request's timeout, a response listener": (res, tell) => res.on('timeout', () => tell('timeout')),
  };
  for (const [name, listen] of Object.entries(ways)) {
    const outcomes = {};
    for (const [which, agent] of [['node', new http.Agent({ keepAlive: true })], ['ours', new Agent({ keepAlive: true })]]) {
      t.after(() => agent.destroy());
      const seen = [];
      let heard;
      const first = new Promise((resolve) => { heard = resolve; });
      const tell = (what) => {
        seen.push(what);
        heard();
      };
      const req = http.get(`${server.url}/`, { agent, timeout: name.startsWith('the request') ? 40 : undefined });
      req.on('error', (err) => tell(err.code));
      const [res] = await once(req, 'response');
      listen(res, tell);
      // The program ends the exchange once it has heard of the timeout (or of an error).
      await first;
      req.destroy();
      await once(req, 'close');
      outcomes[which] = seen;
    }
    assert.deepStrictEqual(outcomes.ours, outcomes.node, name);
    assert.deepStrictEqual(outcomes.ours, ['timeout'], name);
  }
  // Nobody listens to the request's own timeout: the request fails rather than wait forever,
  // as with agentkeepalive (Node's agent leaves it waiting).
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const req = http.get(`${server.url}/`, { agent, timeout: 40 });
  const [err] = await once(req, 'error');
  assert.strictEqual(err.code, 'ERR_SOCKET_TIMEOUT');
  assert.strictEqual(err.timeout, 40);
});

test("a request's own timeout listener decides what a timeout means", async (t) => {
  // The server answers once the client's timeout has fired; on a loaded machine the timeout
  // may fire before the server has seen the request, so the answer waits for both.
  let arrived;
  const answer = new Promise((resolve) => { arrived = resolve; });
  const server = await httpServer(t, (req, res) => {
    arrived(() => res.end('late but fine'));
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const req = http.get(`${server.url}/`, { agent, timeout: 30 });
  const [, response] = await Promise.all([
    once(req, 'timeout').then(async () => (await answer)()),
    once(req, 'response'),
  ]);
  let body = '';
  for await (const chunk of response[0]) body += chunk;
  assert.strictEqual(body, 'late but fine');
  assert.strictEqual(agent.getCurrentStatus().timeoutSocketCount, 1);
});

test('a request timeout set with req.setTimeout fires on the socket', async (t) => {
  const server = await httpServer(t, () => {});
  const agent = new Agent();
  t.after(() => agent.destroy());
  const req = http.get(`${server.url}/`, { agent });
  req.setTimeout(30, () => req.destroy(new Error('gave up')));
  const [err] = await once(req, 'error');
  assert.strictEqual(err.message, 'gave up');
});

test('a reset during the response fails the request with ECONNRESET', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.writeHead(200, { 'content-length': 100 });
    res.write('partial');
    setImmediate(() => req.socket.resetAndDestroy());
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const err = await requestError(`${server.url}/`, { agent });
  assert.strictEqual(err.code, 'ECONNRESET');
  assert.strictEqual(agent.getCurrentStatus().errorSocketCount, 1);
});

test('agent.destroy() closes idle and active connections and fails queued requests', async (t) => {
  let hold;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/hold') hold = res;
    else res.end('ok');
  });
  const agent = new Agent({ maxSockets: 1 });
  const freed = once(agent, 'free');
  await request(`${server.url}/first`, { agent });
  await freed;
  const active = requestError(`${server.url}/hold`, { agent });
  await once(server, 'request');
  const queued = requestError(`${server.url}/queued`, { agent });
  const idleClosed = closed(server.connections[0]);
  agent.destroy();
  const [activeErr, queuedErr] = await Promise.all([active, queued]);
  assert.strictEqual(activeErr.code, 'ECONNRESET');
  assert.strictEqual(queuedErr.code, 'ERR_HYPERAGENT_AGENT_DESTROYED');
  assert.match(queuedErr.message, /destroyed/);
  await idleClosed;
  assert.ok(hold);
  // Like Node's agent, a destroyed agent can still be used.
  const { body } = await request(`${server.url}/after`, { agent });
  assert.strictEqual(body, 'ok');
  agent.destroy();
});

test('bad options throw Node-style errors at construction', () => {
  const cases = [
    // What Node's agent would read as no count: its requests would wait for ever.
    [{ maxSockets: 'many' }, 'ERR_INVALID_ARG_TYPE', /"options.maxSockets" property must be of type number. Received type string \('many'\)/],
    [{ maxSockets: '-1' }, 'ERR_INVALID_ARG_TYPE', /maxSockets/],
    [{ maxSockets: -1 }, 'ERR_OUT_OF_RANGE', /maxSockets/],
    [{ maxFreeSockets: {} }, 'ERR_INVALID_ARG_TYPE', /maxFreeSockets/],
    [{ maxTotalSockets: NaN }, 'ERR_OUT_OF_RANGE', /maxTotalSockets/],
    [{ maxFreeSockets: -2 }, 'ERR_OUT_OF_RANGE', /maxFreeSockets/],
    [{ scheduling: 'random' }, 'ERR_INVALID_ARG_VALUE', /scheduling/],
    [{ keepAlive: 'yes' }, 'ERR_INVALID_ARG_TYPE', /keepAlive/],
    [{ freeSocketTimeout: -1 }, 'ERR_OUT_OF_RANGE', /freeSocketTimeout/],
    [{ freeSocketTimeout: 'soon' }, 'ERR_INVALID_ARG_VALUE', /freeSocketTimeout/],
    [{ timeout: {} }, 'ERR_INVALID_ARG_TYPE', /timeout/],
    // Node's timers take no Infinity (net's setTimeout refuses it).
    [{ timeout: Infinity }, 'ERR_OUT_OF_RANGE', /"options.timeout" is out of range. It must be a non-negative finite number/],
    [{ freeSocketTimeout: Infinity }, 'ERR_OUT_OF_RANGE', /"options.freeSocketTimeout" is out of range/],
    [{ socketActiveTTL: '1 fortnight' }, 'ERR_INVALID_ARG_VALUE', /socketActiveTTL/],
    [{ maxRequestsPerSocket: '2' }, 'ERR_INVALID_ARG_TYPE', /"options.maxRequestsPerSocket" property must be of type number/],
    [{ maxRequestsPerSocket: 1.5 }, 'ERR_OUT_OF_RANGE', /maxRequestsPerSocket/],
    [{ maxRequestsPerSocket: -1 }, 'ERR_OUT_OF_RANGE', /maxRequestsPerSocket/],
    [{ lookup: 'dns' }, 'ERR_INVALID_ARG_TYPE', /lookup/],
    [{ localAddress: 127 }, 'ERR_INVALID_ARG_TYPE', /localAddress/],
    ['fast', 'ERR_INVALID_ARG_TYPE', /options/],
  ];
  for (const [options, code, message] of cases) {
    assert.throws(() => new Agent(options), (err) => {
      assert.strictEqual(err.code, code, JSON.stringify(options));
      assert.match(err.message, message);
      return true;
    });
  }
});

test('a bad port throws ERR_SOCKET_BAD_PORT at once', (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  // In Node's words: its own agent's throw is compared.
  for (const port of [70000, -1, '70000', 'abc', 1.5]) {
    let expected;
    try {
      http.get({ host: '127.0.0.1', port, agent: new http.Agent() });
    } catch (err) {
      expected = err;
    }
    assert.throws(() => http.get({ host: '127.0.0.1', port, agent }), (err) => {
      assert.strictEqual(err.code, 'ERR_SOCKET_BAD_PORT');
      assert.strictEqual(err.name, expected.name);
      assert.strictEqual(err.message, expected.message);
      return true;
    });
  }
});

test('a localAddress that is not an IP address throws ERR_INVALID_IP_ADDRESS at once, as net.connect does', (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const expected = { code: 'ERR_INVALID_IP_ADDRESS', name: 'TypeError', message: 'Invalid IP address: abc' };
  assert.throws(() => http.get({ host: '127.0.0.1', port: 80, agent: new http.Agent(), localAddress: 'abc' }), expected);
  assert.throws(() => http.get({ host: '127.0.0.1', port: 80, agent, localAddress: 'abc' }), expected);
  // Nothing was opened or queued for it.
  assert.strictEqual(agent.totalSocketCount, 0);
  assert.deepStrictEqual(agent.getCurrentStatus().requests, {});
  // An agent's own option says so when it is made.
  assert.throws(() => new Agent({ localAddress: 'abc' }), expected);
});

test('a host that is not a string throws ERR_INVALID_ARG_TYPE at once, as net.connect throws it', (t) => {
  const agent = new Agent({ host: 5 });
  t.after(() => agent.destroy());
  let expected;
  try {
    http.get({ port: 80, agent: new http.Agent({ host: 5 }) });
  } catch (err) {
    expected = err;
  }
  // In Node 22's words (Node 20's dns.lookup names it "hostname").
  assert.strictEqual(expected.code, 'ERR_INVALID_ARG_TYPE');
  assert.throws(() => http.get({ port: 80, agent }), {
    code: 'ERR_INVALID_ARG_TYPE',
    name: expected.name,
    message: 'The "options.host" property must be of type string. Received type number (5)',
  });
  assert.strictEqual(agent.totalSocketCount, 0);
  assert.deepStrictEqual(agent.getCurrentStatus().requests, {});
});

test('a lookup that throws throws out of http.request(), as with Node\'s agent, and leaves nothing behind', { timeout: 20_000 }, async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const { port } = server.address();
  // One slot: the request after the throw gets it back.
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const thrown = new Error('no lookup today');
  const lookup = () => {
    throw thrown;
  };
  assert.throws(() => http.get({ host: 'example.test', port, agent: new http.Agent(), lookup }), thrown);
  assert.throws(() => http.get({ host: 'example.test', port, agent, lookup }), thrown);
  assert.strictEqual((await request(`http://127.0.0.1:${port}/`, { agent })).body, 'ok');
  // The request the caller never got emits nothing it could not listen to, the agent's end
  // included.
  agent.destroy();
  await new Promise((resolve) => setImmediate(resolve));
});

test('a lookup that throws for a queued request fails that request with what it threw', { timeout: 20_000 }, async (t) => {
  let finish = null;
  const server = await httpServer(t, (req, res) => {
    // Its connection closes: the queued request gets the slot, and connects.
    if (req.url === '/hold') finish = () => res.setHeader('connection', 'close').end('held');
    else res.end('ok');
  });
  const { port } = server.address();
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  // Both of one origin, looked up by lookups of their own.
  const held = request(`http://example.test:${port}/hold`, { agent, lookup: (host, options, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]) });
  const thrown = new Error('no lookup today');
  const queued = requestError(`http://example.test:${port}/`, { agent, lookup: () => { throw thrown; } });
  await until(() => finish !== null, 5000, 'the held request');
  finish();
  assert.strictEqual((await held).body, 'held');
  assert.strictEqual(await queued, thrown);
  assert.strictEqual((await request(`http://127.0.0.1:${port}/`, { agent })).body, 'ok');
});

test('a lookup that answers with no address fails with ERR_INVALID_IP_ADDRESS, at once or later, on both paths', { timeout: 20_000 }, async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const { port } = server.address();
  const answers = [
    [null, [{}]],
    [null, [null]],
    [null, undefined, 4],
    [null, [{ address: '127.0.0.1', family: 4 }, 7]],
  ];
  for (const answer of answers) {
    for (const later of [false, true]) {
      const lookup = (host, options, cb) => (later ? setImmediate(() => cb(...answer)) : cb(...answer));
      const agent = new Agent({ lookup });
      t.after(() => agent.destroy());
      const err = await requestError(`http://example.test:${port}/`, { agent });
      assert.strictEqual(err.code, 'ERR_INVALID_IP_ADDRESS', `${util.inspect(answer)}, later: ${later}`);
      await assert.rejects(agent.request(`http://example.test:${port}/`), { code: 'ERR_INVALID_IP_ADDRESS' });
    }
  }
});

test('options past what timers and the kernel take: cut to what they take, the requests served', { timeout: 20_000 }, async (t) => {
  const server = await httpServer(t, (req, res) => setTimeout(() => res.end('ok'), 20));
  const url = `http://127.0.0.1:${server.address().port}/`;
  // A timeout past the longest timer is cut to it once, with Node's warning (a timer would
  // otherwise fire at once); a keep-alive delay past the kernel's longest is cut to that.
  const warned = once(process, 'warning');
  const agent = new Agent({ timeout: 2 ** 31, keepAliveMsecs: 40_000_000 });
  t.after(() => agent.destroy());
  const [warning] = await warned;
  assert.strictEqual(warning.name, 'TimeoutOverflowWarning');
  assert.strictEqual(agent.options.timeout, 2 ** 31 - 1);
  const { body, req } = await request(url, { agent });
  // Not timed out by a timer cut to a millisecond: the response comes 20 ms later.
  assert.strictEqual(body, 'ok');
  assert.strictEqual(await (await agent.request(url)).body.text(), 'ok');
  // A socket's timeout as net.Socket takes it.
  assert.throws(() => req.socket.setTimeout(Infinity), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => req.socket.setTimeout(-1), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => req.socket.setTimeout('5'), { code: 'ERR_INVALID_ARG_TYPE' });
  // A response head limit past what the pool counts is no limit.
  assert.strictEqual(await (await agent.request(url, { maxResponseHeaderSize: 2 ** 32 })).body.text(), 'ok');
});

test('connection options written after the agent checked them are checked at agent.request()\'s first request', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const url = `http://127.0.0.1:${server.address().port}/`;
  const cases = [
    ['localAddress', 5, 'ERR_INVALID_IP_ADDRESS'],
    ['localPort', '5', 'ERR_INVALID_ARG_TYPE'],
    ['socketPath', 5, 'ERR_INVALID_ARG_TYPE'],
  ];
  for (const [name, value, code] of cases) {
    const agent = new Agent();
    t.after(() => agent.destroy());
    agent.options[name] = value;
    assert.throws(() => agent.request(url), { code }, name);
  }
  // A getName() that gives no string: its name as a string, as Node's agent keys it.
  const agent = new Agent();
  t.after(() => agent.destroy());
  agent.getName = () => 5;
  assert.strictEqual(await (await agent.request(url)).body.text(), 'ok');
  assert.strictEqual((await request(url, { agent })).body, 'ok');
  assert.deepStrictEqual(Object.keys(agent.freeSockets), ['5']);
});

test('autoSelectFamily and autoSelectFamilyAttemptTimeout: bad values throw at once, as net.connect throws them', (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const bad of [{ autoSelectFamily: 1 }, { autoSelectFamilyAttemptTimeout: '5' }, { autoSelectFamilyAttemptTimeout: 0 },
    { autoSelectFamilyAttemptTimeout: 1.5 }, { autoSelectFamilyAttemptTimeout: 2 ** 31 }]) {
    let expected;
    try {
      net.connect({ host: '127.0.0.1', port: 9, ...bad }).on('error', () => {});
      assert.fail('net.connect took it');
    } catch (err) {
      expected = { code: err.code, name: err.name, message: err.message };
    }
    assert.throws(() => http.get({ host: '127.0.0.1', port: 9, agent, ...bad }), expected);
    assert.throws(() => new Agent(bad), expected);
  }
  assert.strictEqual(agent.totalSocketCount, 0);
});

test('autoSelectFamily: false connects to the first address only, as Node; by default the next ones are tried, on both paths', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('v4'));
  const { port } = server.address();
  // A name with an IPv6 address first, where nothing listens, then the server's.
  const lookup = (host, options, cb) => {
    if (options.all) cb(null, [{ address: '::1', family: 6 }, { address: '127.0.0.1', family: 4 }]);
    else cb(null, '::1', 6);
  };
  const url = `http://dual.test:${port}/`;
  const nodeError = await requestError(url, { agent: new http.Agent(), lookup, autoSelectFamily: false });
  assert.strictEqual(nodeError.address, '::1');
  const ours = new Agent({ lookup, autoSelectFamily: false });
  const either = new Agent({ lookup });
  t.after(() => { ours.destroy(); either.destroy(); });
  const err = await requestError(url, { agent: ours });
  assert.strictEqual(err.code, nodeError.code);
  assert.strictEqual(err.address, '::1');
  await assert.rejects(ours.request(url), { code: nodeError.code, address: '::1' });
  // The agent's option counts over the request's, as Node's agent merges them.
  const nodeAgent = new http.Agent({ lookup, autoSelectFamily: false });
  t.after(() => nodeAgent.destroy());
  assert.strictEqual((await requestError(url, { agent: nodeAgent, autoSelectFamily: true })).address, '::1');
  assert.strictEqual((await requestError(url, { agent: ours, autoSelectFamily: true })).address, '::1');
  assert.strictEqual((await request(url, { agent: new http.Agent(), lookup })).body, 'v4');
  assert.strictEqual((await request(url, { agent: either })).body, 'v4');
  assert.strictEqual(await (await either.request(url)).body.text(), 'v4');
});

test('legacy option names work, with a deprecation warning', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  const agent = new Agent({ freeSocketKeepAliveTimeout: 1234 });
  const other = new Agent({ keepAliveTimeout: '2s' });
  await new Promise((resolve) => setImmediate(resolve));
  process.removeListener('warning', onWarning);
  assert.strictEqual(agent.options.freeSocketTimeout, 1234);
  assert.strictEqual(other.options.freeSocketTimeout, 2000);
  assert.ok(warnings.some((w) => w.name === 'DeprecationWarning' && /freeSocketKeepAliveTimeout/.test(w.message)));
  assert.ok(warnings.some((w) => /keepAliveTimeout is deprecated/.test(w.message)));
  agent.destroy();
  other.destroy();
});
