'use strict';

// Where a migrating program can tell Node's agent from ours: the same program runs against
// Node's http.Agent and against hyperagent, and both must behave alike.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const http = require('node:http');
const net = require('node:net');
const https = require('node:https');
const { once } = require('node:events');
const { Agent, HttpsAgent } = require('..');
const { httpServer, collected, listen, runChild, request, until } = require('./helpers');

const agents = {
  node: (options) => new http.Agent(options),
  ours: (options) => new Agent(options),
};

const tlsFixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));

// An HTTPS server on loopback with the fixture chain for localhost (the test CA's).
function httpsServer(t) {
  return listen(t, https.createServer({ cert: tlsFixture('localhost-chain.pem'), key: tlsFixture('localhost-key.pem') },
    (req, res) => res.end(`hello ${req.url}`)));
}

test('keepAliveMsecs under a second connects, as Node rounds it to whole seconds', async (t) => {
  const server = await httpServer(t);
  for (const ms of [1, 500, 999, 1000, 1500]) {
    for (const [which, make] of Object.entries(agents)) {
      const agent = make({ keepAlive: true, keepAliveMsecs: ms });
      t.after(() => agent.destroy());
      const req = http.get(`${server.url}/ka${ms}`, { agent });
      const [socket] = await once(req, 'socket');
      const [res] = await once(req, 'response');
      res.setEncoding('utf8');
      let body = '';
      for await (const chunk of res) body += chunk;
      assert.strictEqual(body, `hello /ka${ms}`, `${which} ${ms}`);
      // The socket's own setKeepAlive takes such a delay too.
      assert.doesNotThrow(() => socket.setKeepAlive(true, ms), `${which} ${ms}`);
    }
    const ours = new Agent({ keepAlive: true, keepAliveMsecs: ms });
    t.after(() => ours.destroy());
    const res = await ours.request(`${server.url}/promise${ms}`);
    assert.strictEqual(await res.body.text(), `hello /promise${ms}`);
  }
});

test('a Host header that is not a string throws out of http.request(), as with Node\'s agents, unless a servername is given', async (t) => {
  const server = await httpServer(t);
  const makers = {
    'node http': () => new http.Agent(),
    'ours http': () => new Agent(),
    'node https': () => new https.Agent(),
    'ours https': () => new HttpsAgent(),
  };
  const outcomes = {};
  for (const [which, make] of Object.entries(makers)) {
    const agent = make();
    t.after(() => agent.destroy());
    const { request } = which.endsWith('https') ? https : http;
    for (const host of [[], ['a', 'b'], 7]) {
      let thrown = null;
      try {
        request({ port: server.port, headers: { host }, agent }).on('error', () => {}).destroy();
      } catch (err) {
        thrown = `${err.code}: ${err.message}`;
      }
      (outcomes[which] ??= []).push(thrown);
    }
    // A servername given leaves the header unread (over HTTP here, where it names nothing).
    if (!which.endsWith('https')) {
      assert.doesNotThrow(() => {
        request({ port: server.port, headers: { host: [] }, servername: 'x', agent }).on('error', () => {}).destroy();
      }, which);
    }
  }
  assert.deepStrictEqual(outcomes['ours http'], outcomes['node http']);
  assert.deepStrictEqual(outcomes['ours https'], outcomes['node https']);
  assert.match(outcomes['ours http'][0], /^ERR_INVALID_ARG_TYPE: The "options.headers.host" property must be of type string\. Received an instance of Array$/);
});

test("a request's highWaterMark is its socket's and its response's, as with Node's agents", async (t) => {
  const plain = await httpServer(t);
  const secure = await httpsServer(t);
  const ca = tlsFixture('ca.pem');
  const makers = {
    'node http': [http, plain.port, () => new http.Agent()],
    'ours http': [http, plain.port, () => new Agent()],
    'node https': [https, secure.address().port, () => new https.Agent({ ca })],
    'ours https': [https, secure.address().port, () => new HttpsAgent({ ca })],
  };
  const seen = {};
  for (const [which, [module, port, make]] of Object.entries(makers)) {
    const agent = make();
    t.after(() => agent.destroy());
    const req = module.get({ host: 'localhost', port, agent, highWaterMark: 128000 });
    const [res] = await once(req, 'response');
    seen[which] = [res.readableHighWaterMark, res.socket.readableHighWaterMark, res.socket.writableHighWaterMark];
    res.resume();
    await once(res, 'end');
  }
  assert.deepStrictEqual(seen['ours http'], seen['node http']);
  assert.deepStrictEqual(seen['ours https'], seen['node https']);
  assert.deepStrictEqual(seen['ours https'], [128000, 128000, 128000]);
});

test('Agent(options) and HttpsAgent(options) construct without new, as Node\'s agents do', (t) => {
  const plain = Agent({ keepAlive: true, maxSockets: 3 });
  const secure = HttpsAgent({ keepAlive: true });
  const nodes = [http.Agent({ keepAlive: true }), https.Agent({ keepAlive: true })];
  t.after(() => [plain, secure, ...nodes].forEach((a) => a.destroy()));
  assert.ok(plain instanceof Agent && plain instanceof http.Agent);
  assert.ok(secure instanceof HttpsAgent && secure instanceof https.Agent);
  assert.strictEqual(plain.maxSockets, 3);
  assert.strictEqual(plain.keepAlive, true);
  assert.strictEqual(plain.constructor, Agent);
  assert.strictEqual(secure.constructor, HttpsAgent);
  assert.strictEqual(Agent.name, 'Agent');
  // Subclasses still work.
  class Mine extends Agent {}
  const mine = new Mine();
  t.after(() => mine.destroy());
  assert.ok(mine instanceof Mine && mine instanceof Agent);
});

// V8 gives a class's instances one shape only when `new.target` is a function: agents made
// through the callable wrapper with the wrapper as `new.target` each had a shape of their own,
// which made an agent several times dearer to make and the code serving many agents slow.
test('agents made with new, without new, or by a subclass share one shape per class', async () => {
  const script = `
    const { Agent, HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    class Mine extends Agent {}
    const made = [[new Agent(), new Agent(), Agent()], [new HttpsAgent(), HttpsAgent()], [new Mine(), new Mine()]];
    const same = made.map((group) => group.every((a) => %HaveSameMap(a, group[0])));
    made.flat().forEach((a) => a.destroy());
    console.log(JSON.stringify(same));
  `;
  const { code, out, err } = await runChild(script, {}, ['--allow-natives-syntax']);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), [true, true, true]);
});

test('an HttpsAgent is an instance of Agent, as agentkeepalive\'s is of its Agent; a subclass\'s instanceof is the ordinary one', (t) => {
  const AgentKeepAlive = require('agentkeepalive');
  const facts = (A, H) => {
    class Sub extends A {}
    const [a, h, s] = [new A(), new H(), new Sub()];
    t.after(() => [a, h, s].forEach((x) => x.destroy()));
    return [
      h instanceof A, a instanceof H, a instanceof A, s instanceof A, h instanceof Sub, a instanceof Sub,
      s instanceof Sub, h instanceof http.Agent, {} instanceof A, null instanceof A, Object.create(A.prototype) instanceof A,
    ];
  };
  const expected = facts(AgentKeepAlive, AgentKeepAlive.HttpsAgent);
  assert.deepStrictEqual(facts(Agent, HttpsAgent), expected);
  assert.strictEqual(expected[0], true);
  // And, as Node's https.Agent, an instance of https.Agent.
  const secure = new HttpsAgent();
  t.after(() => secure.destroy());
  assert.ok(secure instanceof https.Agent);
});

test('maxSockets = 0 assigned at run time lets no request have a socket, as with Node\'s agent', async (t) => {
  const server = await httpServer(t);
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    agent.maxSockets = 0;
    assert.strictEqual(agent.maxSockets, 0);
    let answered = false;
    const req = http.get(`${server.url}/zero`, { agent }, (res) => {
      answered = true;
      res.resume();
    });
    req.on('error', () => {});
    // The request waits in the agent's queue: it was given no socket when it was made.
    await new Promise(setImmediate);
    seen[which] = {
      answered,
      queued: Object.values(agent.requests).reduce((n, list) => n + list.length, 0),
      sockets: Object.values(agent.sockets).reduce((n, list) => n + list.length, 0),
    };
    req.destroy();
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, { answered: false, queued: 1, sockets: 0 });
  assert.strictEqual(server.connections.length, 0);
});

// The socket a request was served on, and its response read to the end.
async function served(url, agent) {
  const req = http.get(url, { agent });
  const [socket] = await once(req, 'socket');
  const [res] = await once(req, 'response');
  res.resume();
  await once(res, 'end');
  return socket;
}

test('an idle socket that expires emits \'timeout\' and \'close\' and is destroyed, as agentkeepalive\'s does', async (t) => {
  const server = await httpServer(t);
  const AgentKeepAlive = require('agentkeepalive');
  const makers = {
    agentkeepalive: () => new AgentKeepAlive({ keepAlive: true, freeSocketTimeout: 50 }),
    ours: () => new Agent({ keepAlive: true, freeSocketTimeout: 50 }),
  };
  const seen = {};
  for (const [which, make] of Object.entries(makers)) {
    const agent = make();
    t.after(() => agent.destroy());
    const socket = await served(`${server.url}/expire`, agent);
    const events = [];
    // The agent's own listener has closed the socket, and taken it out of freeSockets, when
    // the program's hears the timeout (agentkeepalive's test "timeout and remove free socket").
    socket.on('timeout', () => events.push(`timeout: destroyed ${socket.destroyed}, writable ${socket.writable}, free ${Object.keys(agent.freeSockets).length}`));
    await once(socket, 'close');
    events.push('close');
    seen[which] = { events, destroyed: socket.destroyed, free: Object.keys(agent.freeSockets).length };
  }
  assert.deepStrictEqual(seen.ours, seen.agentkeepalive);
  assert.deepStrictEqual(seen.ours, {
    events: ['timeout: destroyed true, writable false, free 0', 'close'],
    destroyed: true,
    free: 0,
  });
});

test('an idle socket the server closes emits \'close\' and is destroyed, as with Node\'s agent', async (t) => {
  const server = await httpServer(t);
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    const socket = await served(`${server.url}/server-closes`, agent);
    const closed = once(socket, 'close');
    server.closeIdleConnections();
    await closed;
    seen[which] = { destroyed: socket.destroyed, free: Object.keys(agent.freeSockets).length };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, { destroyed: true, free: 0 });
});

test('a timeout a keepSocketAlive() override sets on the socket fires while it is free, as with Node\'s agent', async (t) => {
  const server = await httpServer(t);
  // The override sets its timeout alone, or after the agent's own keepSocketAlive() (Node's
  // test-http-agent-timeout), whose idle time (freeSocketTimeout for ours) it replaces.
  const withOverride = (Base, callsBase) => class extends Base {
    keepSocketAlive(socket) {
      if (callsBase && !super.keepSocketAlive(socket)) return false;
      socket.setTimeout(50);
      return true;
    }
  };
  for (const callsBase of [false, true]) {
    const makers = { node: withOverride(http.Agent, callsBase), ours: withOverride(Agent, callsBase) };
    const seen = {};
    for (const [which, Made] of Object.entries(makers)) {
      const agent = new Made({ keepAlive: true, timeout: 40, freeSocketTimeout: 60_000 });
      t.after(() => agent.destroy());
      const socket = await served(`${server.url}/override`, agent);
      const events = [];
      socket.on('timeout', () => events.push(`timeout ${socket.timeout}`));
      await once(socket, 'close');
      events.push('close');
      seen[which] = { events, destroyed: socket.destroyed };
    }
    assert.deepStrictEqual(seen.ours, seen.node, `calls the agent's own: ${callsBase}`);
    assert.deepStrictEqual(seen.ours, { events: ['timeout 50', 'close'], destroyed: true });
  }
});

// What a request of `agent` to `url` came to: the body, or the error's message.
function outcome(url, agent) {
  return request(url, { agent }).then(({ body }) => body, (err) => `error: ${err.message}`);
}

test('a reuseSocket() that throws costs its request and its connection, not the requests after it', async (t) => {
  // Node's agent throws it out of http.request() when an idle socket is reused there, and so
  // does ours; the connection closes and its slot serves the next request.
  const server = await httpServer(t);
  for (const hookStream of [false, true]) {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    if (hookStream) agent.createConnection = (options) => require('node:net').connect(options.port, options.host);
    // The call of reuseSocket() (counted from 0) that throws.
    let calls = 0;
    let throwAt = -1;
    const reuse = agent.reuseSocket;
    agent.reuseSocket = function (socket, req) {
      if (calls++ === throwAt) throw new Error('reuseSocket threw');
      return reuse.call(this, socket, req);
    };
    assert.strictEqual(await outcome(`${server.url}/first`, agent), 'hello /first');
    throwAt = calls;
    assert.throws(() => http.get(`${server.url}/sync`, { agent }), { message: 'reuseSocket threw' });
    assert.deepStrictEqual(
      await Promise.all(['/a', '/b'].map((p) => outcome(`${server.url}${p}`, agent))),
      ['hello /a', 'hello /b'],
      `hook stream: ${hookStream}`,
    );
    assert.strictEqual(agent.totalSocketCount, 1);
  }
});

test("a request that waited takes the socket freed before it without reuseSocket(), as with Node's agent", async (t) => {
  const server = await httpServer(t);
  const story = async (agent) => {
    const hooked = [];
    const reuse = agent.reuseSocket;
    agent.reuseSocket = function (socket, req) {
      hooked.push(req.path);
      return reuse.call(this, socket, req);
    };
    const get = (path) => new Promise((resolve, reject) => {
      const req = http.get(`${server.url}${path}`, { agent }, (res) => res.resume().on('end', () => resolve(`${path} reused: ${req.reusedSocket}`)));
      req.on('error', reject);
    });
    // /first opens the socket; /idle and /a reuse it idle; /b and /c wait for it, in turn.
    const seen = [await get('/first'), await get('/idle'), ...await Promise.all(['/a', '/b', '/c'].map(get))];
    return { seen, hooked };
  };
  const node = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const ours = new Agent({ maxSockets: 1 });
  t.after(() => node.destroy());
  t.after(() => ours.destroy());
  const expected = await story(node);
  assert.deepStrictEqual(expected.hooked, ['/idle', '/a']);
  assert.deepStrictEqual(await story(ours), expected);
});

test('a request destroyed before it gets its reused socket frees the socket, calling keepSocketAlive() as Node\'s agent calls it', async (t) => {
  // Node's http frees the socket in the request's place. Before Node 24 it is freed with no
  // request ('free' with no _httpMessage): Node's agent closes it without calling the hook,
  // where ours keeps the unused connection. Node 24 frees it with the request, and both agents
  // call the hook.
  const server = await httpServer(t);
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    let hookCalls = 0;
    agent.keepSocketAlive = function (socket) {
      hookCalls++;
      if (socket._httpMessage === null) throw new Error('keepSocketAlive called with no request');
      return Object.getPrototypeOf(this).keepSocketAlive.call(this, socket);
    };
    await served(`${server.url}/first`, agent);
    const callsBefore = hookCalls;
    const req = http.get(`${server.url}/destroyed`, { agent });
    const events = [];
    req.on('error', (err) => events.push(`error ${err.code}`));
    req.on('socket', () => events.push('socket'));
    const closed = new Promise((resolve) => req.on('close', resolve));
    req.destroy();
    await closed;
    seen[which] = { events, hookCalls: hookCalls - callsBefore };
    // The agent serves the next request: ours over the kept connection.
    await served(`${server.url}/next`, agent);
    if (which === 'ours') assert.strictEqual(agent.createSocketCount, 1);
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours.events, ['error ECONNRESET']);
});

test('a keepSocketAlive() that throws closes the socket, so the requests waiting for its slot are served; the throw is uncaught, as with Node\'s agent', async () => {
  const script = `
    const http = require('node:http');
    const { Agent } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const uncaught = [];
    process.on('uncaughtException', (err) => uncaught.push(err.message));
    const server = http.createServer((req, res) => res.end('hello ' + req.url));
    // The server would close the connection, and free the slot, only after a minute.
    server.keepAliveTimeout = 60000;
    server.listen(0, async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      let calls = 0;
      const keep = agent.keepSocketAlive;
      agent.keepSocketAlive = function (socket) {
        if (calls++ === 0) throw new Error('keepSocketAlive threw');
        return keep.call(this, socket);
      };
      const get = (p) => new Promise((resolve) => {
        http.get({ port: server.address().port, path: p, agent }, (res) => {
          let body = '';
          res.on('data', (chunk) => (body += chunk));
          res.on('end', () => resolve(body));
        }).on('error', (err) => resolve('error: ' + err.message));
      });
      const bodies = await Promise.all(['/a', '/b', '/c'].map(get));
      const sockets = agent.totalSocketCount;
      // A request destroyed before it gets the idle socket: Node 24 calls the hook as it frees
      // the socket, which throws now; the request still ends.
      const caught = uncaught.length;
      agent.keepSocketAlive = () => {
        throw new Error('keepSocketAlive threw');
      };
      const req = http.get({ port: server.address().port, path: '/destroyed', agent });
      const errors = [];
      req.on('error', (err) => errors.push(err.code));
      req.destroy();
      await new Promise((resolve) => req.on('close', resolve));
      await new Promise((resolve) => setImmediate(resolve));
      const thrownAfter = uncaught.slice(caught);
      console.log(JSON.stringify({ bodies, uncaught: uncaught.slice(0, caught), sockets, errors, thrownAfter }));
      agent.destroy();
      server.close();
    });
  `;
  const { code, out, err } = await runChild(script);
  assert.strictEqual(code, 0, err);
  const seen = JSON.parse(out);
  assert.deepStrictEqual(seen.thrownAfter, seen.thrownAfter.length === 0 ? [] : ['keepSocketAlive threw']);
  delete seen.thrownAfter;
  assert.deepStrictEqual(seen, {
    bodies: ['hello /a', 'hello /b', 'hello /c'],
    uncaught: ['keepSocketAlive threw'],
    sockets: 1,
    errors: ['ECONNRESET'],
  });
});

test("a socket a program hands over with 'free' is not left open: Node's agent pools it, ours closes it", { timeout: 20_000 }, async (t) => {
  // http2-wrapper hands the agent the TLS socket its ALPN check opened, this way, when the
  // agent's createConnection() is Node's (our classes put in the place of Node's).
  const server = await httpServer(t);
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    const handed = net.connect(server.port, '127.0.0.1');
    await once(handed, 'connect');
    handed._httpMessage = { shouldKeepAlive: true };
    const closed = once(handed, 'close');
    agent.emit('free', handed, { host: '127.0.0.1', port: server.port });
    const pooled = Object.values(agent.freeSockets).flat().includes(handed);
    const destroyed = handed.destroyed;
    const { body } = await request(`${server.url}/after`, { agent });
    // Node's agent closes it with the agent; ours has closed it already.
    agent.destroy();
    await closed;
    seen[which] = { pooled, destroyed, body, listeners: agent.listenerCount('free') };
  }
  assert.deepStrictEqual(seen.node, { pooled: true, destroyed: false, body: 'hello /after', listeners: 1 });
  assert.deepStrictEqual(seen.ours, { pooled: false, destroyed: true, body: 'hello /after', listeners: 1 });
});

test('a socket destroyed with its request stays in agent.sockets until its \'close\', as with Node\'s agent', async (t) => {
  const server = await httpServer(t, () => {});
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    const listed = (socket) => Object.values(agent.sockets).some((list) => list.includes(socket));
    for (const how of ['destroy', 'abort']) {
      const req = http.get(`${server.url}/${how}`, { agent });
      req.on('error', () => {});
      const [socket] = await once(req, 'socket');
      await once(server, 'request');
      const before = listed(socket);
      req[how]();
      const afterDestroy = listed(socket);
      await once(socket, 'close');
      seen[`${which} ${how}`] = [before, afterDestroy, listed(socket)];
    }
  }
  assert.deepStrictEqual(seen['ours destroy'], seen['node destroy']);
  assert.deepStrictEqual(seen['ours abort'], seen['node abort']);
  assert.deepStrictEqual(seen['ours destroy'], [true, true, false]);
});

test('resetAndDestroy() resets the connection (the server sees ECONNRESET) and the byte counts stay readable after the close, as with Node\'s agent', async (t) => {
  const plain = await httpServer(t, (req, res) => res.end('hello'));
  const secure = await httpsServer(t);
  // The server's error on each connection, by the client's local port.
  const serverErrors = new Map();
  plain.on('connection', (socket) => socket.on('error', (err) => serverErrors.set(socket.remotePort, err.code)));
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    const { req, body } = await request(plain.url, { agent });
    assert.strictEqual(body, 'hello');
    const socket = req.socket;
    const port = socket.localPort;
    const counts = [socket.bytesRead, socket.bytesWritten];
    // (Not once(): the server's socket emits 'error' first.)
    const serverClosed = new Promise((resolve) => plain.connections.find((s) => s.remotePort === port).on('close', resolve));
    assert.strictEqual(socket.resetAndDestroy(), socket);
    await once(socket, 'close');
    await serverClosed;
    // Once closed: an error of Node's, emitted on the socket.
    const late = once(socket, 'error').then(([err]) => err.code, () => 'none');
    socket.resetAndDestroy();
    seen[which] = { counts, after: [socket.bytesRead, socket.bytesWritten], server: serverErrors.get(port), late: await Promise.race([late, new Promise((r) => setImmediate(r, 'none'))]) };
    // A TLS socket's refuses, its handle not being TCP's.
    const tlsAgent = which === 'node' ? new https.Agent({ keepAlive: true, ca: tlsFixture('ca.pem') }) : new HttpsAgent({ keepAlive: true, ca: tlsFixture('ca.pem') });
    t.after(() => tlsAgent.destroy());
    const tlsReq = await new Promise((resolve, reject) => {
      https.get({ host: 'localhost', port: secure.address().port, agent: tlsAgent }, (res) => res.resume().on('end', () => resolve(res.req))).on('error', reject);
    });
    assert.throws(() => tlsReq.socket.resetAndDestroy(), { name: 'TypeError', code: 'ERR_INVALID_HANDLE_TYPE', message: 'This handle type cannot be sent' });
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.strictEqual(seen.ours.server, 'ECONNRESET');
  assert.ok(seen.ours.counts[0] > 0 && seen.ours.counts[1] > 0);
  assert.deepStrictEqual(seen.ours.after, seen.ours.counts);
});

test('a socket destroyed in use holds its maxSockets slot until its \'close\', as with Node\'s agent', async (t) => {
  // Node's test-http-agent-maxsockets-respected: six requests through two sockets, each
  // aborted in its 'response'. A waiting request connects only once the aborted socket closed.
  const plain = await httpServer(t);
  const secure = await httpsServer(t);
  const kinds = {
    http: { module: http, port: plain.port, node: (o) => new http.Agent(o), ours: (o) => new Agent(o) },
    https: {
      module: https,
      port: secure.address().port,
      node: (o) => new https.Agent({ ...o, ca: tlsFixture('ca.pem') }),
      ours: (o) => new HttpsAgent({ ...o, ca: tlsFixture('ca.pem') }),
    },
  };
  const seen = {};
  for (const [kind, { module, port, ...makers }] of Object.entries(kinds)) {
    for (const which of ['node', 'ours']) {
      const agent = makers[which]({ keepAlive: true, maxSockets: 2, maxFreeSockets: 2 });
      t.after(() => agent.destroy());
      const listed = [];
      const responses = [];
      for (let i = 0; i < 6; i++) {
        const req = module.get({ host: 'localhost', port, path: `/${i}`, agent });
        req.on('error', () => {});
        responses.push(once(req, 'response').then(() => {
          req.abort();
          const name = Object.keys(agent.sockets)[0];
          listed.push([agent.sockets[name].length, agent.requests[name]?.length ?? 0, agent.totalSocketCount]);
        }));
      }
      await Promise.all(responses);
      seen[`${kind} ${which}`] = listed;
    }
    // The batches in which responses arrive differ from run to run: what holds is the limit.
    for (const which of ['node', 'ours']) {
      const listed = seen[`${kind} ${which}`];
      assert.strictEqual(listed.length, 6, `${kind} ${which}`);
      assert.deepStrictEqual(listed[0], [2, 4, 2], `${kind} ${which}`);
      for (const [sockets, , total] of listed) {
        assert.ok(sockets <= 2 && total <= 2, `${kind} ${which}: ${JSON.stringify(listed)}`);
      }
    }
  }
});

test('statusChanged and its marks behave as agentkeepalive\'s', async (t) => {
  const server = await httpServer(t);
  const AgentKeepAlive = require('agentkeepalive');
  const seen = {};
  for (const [which, make] of Object.entries({ agentkeepalive: () => new AgentKeepAlive(), ours: () => new Agent() })) {
    const agent = make();
    t.after(() => agent.destroy());
    const marks = () => ['createSocketCount', 'requestCount'].map((n) => agent[`${n}LastCheck`]);
    const steps = [agent.statusChanged, marks()];
    const req = http.get(`${server.url}/status`, { agent }, (res) => res.resume());
    await once(req, 'close');
    await new Promise(setImmediate);
    steps.push(agent.statusChanged, marks(), agent.statusChanged);
    seen[which] = steps;
  }
  assert.deepStrictEqual(seen.ours, seen.agentkeepalive);
  assert.deepStrictEqual(seen.ours, [false, [0, 0], true, [1, 1], false]);
});

test('the options Node\'s agent validates fail with Node\'s errors, word for word', () => {
  for (const options of [{ maxTotalSockets: 0 }, { maxTotalSockets: 'x' }, { maxTotalSockets: NaN }, { scheduling: 'x' }]) {
    let expected;
    try {
      new http.Agent(options).destroy();
    } catch (err) {
      expected = err;
    }
    assert.ok(expected, JSON.stringify(options));
    assert.throws(() => new Agent(options), { name: expected.name, code: expected.code, message: expected.message });
  }
  // What Node takes, ours takes too.
  new Agent({ maxTotalSockets: 1.5 }).destroy();
});

test('a createSocket() override is called for every new connection and carries the request, as with Node\'s agent', async (t) => {
  const server = await httpServer(t);
  const counting = (Base) => class extends Base {
    constructor(options) {
      super(options);
      this.made = 0;
      this.closed = 0;
    }

    createSocket(req, options, cb) {
      super.createSocket(req, options, (err, socket) => {
        if (!err) {
          this.made++;
          socket.once('close', () => this.closed++);
        }
        cb(err, socket);
      });
    }
  };
  const makers = { node: counting(http.Agent), ours: counting(Agent) };
  const seen = {};
  for (const [which, Made] of Object.entries(makers)) {
    const agent = new Made({ keepAlive: true, maxSockets: 2 });
    t.after(() => agent.destroy());
    const get = (p) => new Promise((resolve, reject) => {
      http.get(`${server.url}${p}`, { agent }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(body));
      }).on('error', reject);
    });
    const bodies = [await get('/one'), await get('/two')];
    bodies.push(...(await Promise.all([get('/three'), get('/four'), get('/five')])));
    const status = [agent.made];
    agent.destroy();
    await new Promise(setImmediate);
    seen[which] = { bodies, made: status[0] };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours.made, 2);
});

test('agentkeepalive\'s socket names, socket timeouts and agent properties are there with its values', async (t) => {
  const server = await httpServer(t);
  const AgentKeepAlive = require('agentkeepalive');
  const ours = require('..').constants;
  const seen = {};
  for (const [which, make] of Object.entries({
    agentkeepalive: () => new AgentKeepAlive({ freeSocketTimeout: 3000, timeout: 7000, socketActiveTTL: 60000 }),
    ours: () => new Agent({ freeSocketTimeout: 3000, timeout: 7000, socketActiveTTL: 60000 }),
  })) {
    const agent = make();
    t.after(() => agent.destroy());
    // Two sockets at once, then a reuse.
    const sockets = await Promise.all(['/a', '/b'].map((p) => served(`${server.url}${p}`, agent)));
    await new Promise(setImmediate);
    const { SOCKET_NAME } = which === 'ours' ? ours : AgentKeepAlive.constants;
    const names = sockets.map((s) => s[SOCKET_NAME].replace(/#.*/, '#'));
    const freeTimeouts = sockets.map((s) => s.timeout);
    const req = http.get(`${server.url}/c`, { agent });
    const [socket] = await once(req, 'socket');
    const activeTimeout = socket.timeout;
    const [res] = await once(req, 'response');
    res.resume();
    await once(res, 'end');
    const deprecated = [agent.timeout, agent.freeSocketKeepAliveTimeout, agent.socketActiveTTL];
    seen[which] = { names: names.sort(), freeTimeouts, activeTimeout, deprecated };
  }
  assert.deepStrictEqual(seen.ours, seen.agentkeepalive);
  assert.deepStrictEqual(seen.ours, {
    names: ['sock[0#', 'sock[1#'],
    freeTimeouts: [3000, 3000],
    activeTimeout: 7000,
    deprecated: [7000, 3000, 60000],
  });
});

test('an agent\'s limits and pool views are its own enumerable properties, as Node\'s: Object.assign() and a spread copy them', async (t) => {
  const server = await httpServer(t);
  const names = ['requests', 'sockets', 'freeSockets', 'keepAlive', 'maxSockets', 'maxFreeSockets', 'scheduling', 'maxTotalSockets', 'totalSocketCount'];
  const seen = {};
  for (const [which, Base] of [['node', http.Agent], ['ours', Agent]]) {
    const agent = new Base({ keepAlive: false, maxSockets: 3, maxFreeSockets: 2 });
    t.after(() => agent.destroy());
    const keys = Object.keys(agent);
    // A library that takes an agent where it expects options, and merges it over its defaults.
    const merged = Object.assign({ keepAlive: true, maxSockets: 10, scheduling: 'fifo' }, agent);
    const copy = new Base({ ...merged });
    t.after(() => copy.destroy());
    const { req } = await request(`${server.url}/`, { agent: copy });
    seen[which] = {
      own: names.filter((name) => keys.includes(name)),
      merged: [merged.keepAlive, merged.maxSockets, merged.maxFreeSockets, merged.scheduling],
      connection: req.getHeader('connection') ?? req.shouldKeepAlive,
      spread: Object.keys({ ...agent }).filter((name) => names.includes(name)),
    };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours.own, names);
  assert.deepStrictEqual(seen.ours.merged, [false, 3, 2, 'lifo']);
  // A subclass's own accessor is left its own.
  class Fixed extends Agent {
    get maxSockets() {
      return 7;
    }

    set maxSockets(_) {}
  }
  const fixed = new Fixed();
  t.after(() => fixed.destroy());
  assert.strictEqual(fixed.maxSockets, 7);
  assert.ok(!Object.keys(fixed).includes('maxSockets'));
});

test('a subclass that assigns this.timeout (as socks-proxy-agent does) constructs and reads it back, as with Node\'s agent', async (t) => {
  const server = await httpServer(t);
  const seen = {};
  for (const [which, Base] of [['node', http.Agent], ['ours', Agent]]) {
    class Assigning extends Base {
      constructor(options) {
        super(options);
        // A class body is strict: assigning a getter without a setter would throw.
        this.timeout = options.timeout ?? null;
        this.freeSocketKeepAliveTimeout = 'mine';
        this.socketActiveTTL = undefined;
      }
    }
    const agent = new Assigning({ keepAlive: true, timeout: 7000 });
    t.after(() => agent.destroy());
    const before = [agent.timeout, agent.freeSocketKeepAliveTimeout, agent.socketActiveTTL];
    agent.timeout = null;
    const { body } = await request(`${server.url}/`, { agent });
    seen[which] = { before, after: agent.timeout, options: agent.options.timeout, body };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, { before: [7000, 'mine', undefined], after: null, options: 7000, body: 'hello /' });
});

test('the counters of sockets that fail or are given up while opening are agentkeepalive\'s, on both paths', async (t) => {
  const AK = require('agentkeepalive');
  const net = require('node:net');
  // A port nothing listens on, a server that accepts TCP and never speaks TLS, one that never
  // answers, and one that answers.
  const gone = net.createServer().listen(0, '127.0.0.1');
  await once(gone, 'listening');
  const refusedPort = gone.address().port;
  gone.close();
  const silent = net.createServer((s) => s.on('error', () => {})).listen(0, '127.0.0.1');
  await once(silent, 'listening');
  t.after(() => silent.close());
  const quiet = await httpServer(t, () => {});
  const counts = (a) => [a.createSocketCount, a.createSocketErrorCount, a.closeSocketCount, a.errorSocketCount, a.timeoutSocketCount];
  const cases = {
    refused: { secure: false, options: {}, url: `http://127.0.0.1:${refusedPort}/` },
    'connect timeout': { secure: true, options: { timeout: 150 }, url: `https://127.0.0.1:${silent.address().port}/` },
    // agent.request()'s active timeout is its headersTimeout (its `timeout` is the connect's).
    'active timeout': { secure: false, options: { timeout: 100 }, url: `${quiet.url}/`, promise: { headersTimeout: 100 } },
    'aborted while opening': { secure: true, options: {}, url: `https://127.0.0.1:${silent.address().port}/`, abort: true },
  };
  for (const [name, { secure, options, url, abort, promise }] of Object.entries(cases)) {
    const seen = {};
    const make = {
      agentkeepalive: () => (secure ? new AK.HttpsAgent(options) : new AK(options)),
      ours: () => (secure ? new HttpsAgent(options) : new Agent(options)),
    };
    for (const [which, mk] of Object.entries(make)) {
      const agent = mk();
      t.after(() => agent.destroy());
      const req = (secure ? https : http).get(url, { agent });
      const afterGet = counts(agent);
      req.on('error', () => {});
      // Listening from the start: the socket's 'close' may come in the same tick as the error.
      const closed = new Promise((resolve) => req.on('socket', (socket) => socket.on('close', resolve)));
      if (abort) {
        await once(silent, 'connection');
        req.destroy();
      } else {
        await once(req, 'error');
      }
      await closed;
      seen[which] = { afterGet, atClose: counts(agent), sockets: agent.getCurrentStatus().sockets };
    }
    assert.deepStrictEqual(seen.ours, seen.agentkeepalive, name);
    // agent.request() counts the same socket alike.
    if (!abort) {
      const agent = make.ours();
      t.after(() => agent.destroy());
      await assert.rejects(agent.request(url, promise));
      assert.deepStrictEqual(counts(agent), seen.agentkeepalive.atClose, `${name}: agent.request()`);
    }
  }
});

test('agent.freeSockets holds socket objects, as agentkeepalive\'s, on both paths', async (t) => {
  const AK = require('agentkeepalive');
  const ours = require('..').constants;
  const { EventEmitter } = require('node:events');
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const url = `${server.url}/`;
  const get = (agent) => new Promise((resolve, reject) => {
    http.get(url, { agent }, (res) => {
      const { socket } = res;
      res.resume();
      res.on('end', () => resolve(socket));
    }).on('error', reject);
  });
  // What a program sees of a free socket, in agentkeepalive's terms.
  const look = (agent, socket, symbols) => {
    const [name] = Object.keys(agent.freeSockets);
    const free = agent.freeSockets[name];
    return {
      count: free.length,
      same: free[0] === socket,
      timeout: free[0].timeout,
      name: free[0][symbols.SOCKET_NAME].startsWith('sock[0#'),
      requests: [free[0][symbols.SOCKET_REQUEST_COUNT], free[0][symbols.SOCKET_REQUEST_FINISHED_COUNT]],
      emitter: ['on', 'once', 'emit', 'destroy'].every((m) => typeof free[0][m] === 'function'),
    };
  };
  const seen = {};
  for (const [which, agent, symbols] of [
    ['agentkeepalive', new AK({ freeSocketTimeout: 3000 }), AK.constants],
    ['ours', new Agent({ freeSocketTimeout: 3000 }), ours],
  ]) {
    t.after(() => agent.destroy());
    const socket = await get(agent);
    const before = look(agent, socket, symbols);
    // Destroying a free socket closes its connection, which leaves the pool.
    const [name] = Object.keys(agent.freeSockets);
    const closed = once(agent.freeSockets[name][0], 'close');
    agent.freeSockets[name][0].destroy();
    await closed;
    seen[which] = { before, after: Object.keys(agent.freeSockets).length, closes: agent.closeSocketCount };
  }
  assert.deepStrictEqual(seen.ours, seen.agentkeepalive);
  assert.deepStrictEqual(seen.ours.before, {
    count: 1, same: true, timeout: 3000, name: true, requests: [1, 1], emitter: true,
  });

  // An idle connection whose socket the program let go of gets one when a program looks: the
  // socket the next request takes, with the numbers the old one had.
  const agent = new Agent({ freeSocketTimeout: 3000 });
  t.after(() => agent.destroy());
  assert.ok(await collected(new WeakRef(await get(agent))), 'the idle socket to be collected');
  const [name] = Object.keys(agent.freeSockets);
  const [made] = agent.freeSockets[name];
  assert.strictEqual(agent.freeSockets[name][0], made);
  assert.deepStrictEqual(
    [made.timeout, made[ours.SOCKET_NAME], made[ours.SOCKET_REQUEST_COUNT], made.destroyed, made.listenerCount('error')],
    [3000, `sock[0#${name}]`, 1, false, 1],
  );
  // When it was created (agentkeepalive keeps it for socketActiveTTL; ours always has it).
  assert.ok(made[ours.SOCKET_CREATED_TIME] > Date.now() - 60000 && made[ours.SOCKET_CREATED_TIME] <= Date.now());
  const socket = await get(agent);
  assert.strictEqual(socket, made);
  assert.strictEqual(socket[ours.SOCKET_REQUEST_COUNT], 2);
  assert.strictEqual(agent.createSocketCount, 1);

  // agent.request()'s connections have no socket: a stand-in with the same surface.
  const promised = new Agent({ freeSocketTimeout: 3000 });
  t.after(() => promised.destroy());
  await (await promised.request(url)).body.text();
  await (await promised.request(url)).body.text();
  const [idle] = promised.freeSockets[name];
  assert.ok(idle instanceof EventEmitter);
  assert.strictEqual(promised.freeSockets[name][0], idle, 'the same object at each look');
  assert.deepStrictEqual(
    [idle.timeout, idle[ours.SOCKET_NAME], idle[ours.SOCKET_REQUEST_COUNT], idle.destroyed],
    [3000, `sock[0#${name}]`, 2, false],
  );
  const closed = once(idle, 'close');
  idle.destroy();
  idle.destroy();
  await closed;
  assert.deepStrictEqual([Object.keys(promised.freeSockets).length, promised.closeSocketCount, idle.destroyed], [0, 1, true]);
  await (await promised.request(url)).body.text();
  assert.strictEqual(promised.createSocketCount, 2);
  // One that expires says so, as a free socket's timeout does.
  const short = new Agent({ freeSocketTimeout: 50 });
  t.after(() => short.destroy());
  await (await short.request(url)).body.text();
  const expiring = short.freeSockets[name][0];
  const events = [];
  expiring.on('timeout', () => events.push('timeout'));
  await new Promise((resolve) => expiring.on('close', () => resolve(events.push('close'))));
  assert.deepStrictEqual([events, short.timeoutSocketCount, short.closeSocketCount], [['timeout', 'close'], 1, 1]);
});

test('a socket\'s \'close\' says whether it closed with an error, as net.Socket\'s', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const seen = {};
  for (const [which, agent] of [
    ['node', new http.Agent({ keepAlive: true, timeout: 100 })],
    ['ours', new Agent({ freeSocketTimeout: 100 })],
  ]) {
    t.after(() => agent.destroy());
    const get = () => new Promise((resolve, reject) => {
      http.get(`${server.url}/`, { agent }, (res) => {
        const { socket } = res;
        res.resume();
        res.on('end', () => resolve(socket));
      }).on('error', reject);
    });
    const closing = (socket) => new Promise((resolve) => socket.once('close', (...args) => resolve(args)));
    const events = [];
    let socket = await get();
    let closed = closing(socket);
    socket.destroy();
    events.push(await closed);
    socket = await get();
    closed = closing(socket);
    socket.on('error', (err) => events.push(err.message));
    socket.destroy(new Error('gone'));
    events.push(await closed);
    // An idle socket that times out.
    socket = await get();
    events.push(await closing(socket));
    seen[which] = events;
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, [[false], 'gone', [true], [false]]);
});

test("a socket tells its connect's steps as Node's does: 'lookup' for a name, 'connect', 'ready', then 'secureConnect' over TLS", async (t) => {
  const plain = await httpServer(t);
  const secure = await httpsServer(t);
  const ca = tlsFixture('ca.pem');
  // The events of the socket of each of two requests, in order (a reused socket has none).
  const steps = async (agent, url) => {
    const logs = [];
    for (let i = 0; i < 2; i++) {
      const log = [];
      await new Promise((resolve, reject) => {
        const req = (url.startsWith('https:') ? https : http).get(url, { agent }, (res) => res.resume().on('end', resolve));
        req.on('error', reject);
        req.on('socket', (socket) => {
          socket.on('lookup', (...args) => log.push(['lookup', ...args]));
          for (const name of ['connect', 'ready', 'secureConnect']) socket.on(name, () => log.push([name, socket.secureConnecting]));
          // What a check of the peer on 'connect' reads (an allowlist of addresses, say), and
          // net.Socket's `_host`: the name it looked up (programs log it, or read it off a
          // response to learn where a redirect went).
          socket.on('connect', () => log.push([
            socket.connecting, socket.remoteAddress, typeof socket.remotePort, typeof socket.localPort, Object.keys(socket.address()),
            socket._host,
          ]));
        });
      });
      logs.push(log);
    }
    return logs;
  };
  const cases = {
    'http, a name': [false, `http://localhost:${plain.port}/`],
    'http, an address': [false, `http://127.0.0.1:${plain.port}/`],
    'https, a name': [true, `https://localhost:${secure.address().port}/`],
    'https, an address': [true, `https://127.0.0.1:${secure.address().port}/`],
  };
  for (const [name, [tls, url]] of Object.entries(cases)) {
    const node = tls ? new https.Agent({ keepAlive: true, ca }) : new http.Agent({ keepAlive: true });
    const ours = tls ? new HttpsAgent({ ca }) : new Agent();
    t.after(() => node.destroy());
    t.after(() => ours.destroy());
    const expected = await steps(node, url);
    assert.deepStrictEqual(expected[0].map(([event]) => event).filter((e) => typeof e === 'string' && e !== 'lookup'), tls ? ['connect', 'ready', 'secureConnect'] : ['connect', 'ready'], name);
    assert.deepStrictEqual(await steps(ours, url), expected, name);
  }
});

test('a write under way when its request is destroyed hears ECANCELED after the error and before the close, as from Node 22 on', async (t) => {
  // Reads nothing: a large upload stalls.
  const server = await listen(t, http.createServer(() => {}));
  const story = (agent) => new Promise((resolve) => {
    const log = [];
    const req = http.request({ host: '127.0.0.1', port: server.address().port, method: 'POST', agent });
    req.on('error', (err) => log.push(`error ${err.message}`));
    req.on('close', () => {
      log.push('close');
      resolve(log);
    });
    req.write(Buffer.alloc(32 * 1024 * 1024), (err) => log.push(`write ${err ? err.code : 'ok'}`));
    // The write is under way once it has stalled: the socket holds the rest.
    until(() => req.socket && req.socket.writableLength > 0 && !req.socket.connecting, 5000, 'the upload to stall')
      .then(() => req.destroy(new Error('boom')), (err) => req.destroy(err));
  });
  const ours = new Agent();
  t.after(() => ours.destroy());
  const seen = await story(ours);
  assert.deepStrictEqual(seen, ['error boom', 'write ECANCELED', 'close']);
  // Node 20's write hears nothing wrong; from Node 22 on, it is cancelled.
  if (Number(process.versions.node.split('.')[0]) >= 22) assert.deepStrictEqual(await story(new http.Agent()), seen);
});

test('a response, its request and its socket close in the order Node\'s agent closes them', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/close') res.setHeader('connection', 'close');
    if (req.url === '/big') res.end(Buffer.alloc(256 * 1024, 97));
    else if (req.url === '/cut') res.write('part', () => res.socket.destroy());
    else res.end('ok');
  });
  // Each event of the request, its response and its socket, in order, up to the socket's
  // 'close' and the turn after it.
  const story = (agent, path, onResponse = () => {}) => new Promise((resolve) => {
    const log = [];
    const req = http.get(`${server.url}${path}`, { agent }, (res) => {
      log.push('response');
      for (const name of ['aborted', 'end', 'close']) res.on(name, () => log.push(`res ${name}`));
      res.on('error', (err) => log.push(`res error ${err.code}`));
      onResponse(req, res);
    });
    for (const name of ['finish', 'close']) req.on(name, () => log.push(`req ${name}`));
    req.on('error', (err) => log.push(`req error ${err.code}`));
    req.on('socket', (socket) => socket.on('close', () => {
      log.push('socket close');
      setImmediate(() => resolve(log));
    }));
  });
  const scenarios = {
    // The response destroyed while its body comes.
    destroyed: (agent) => story(agent, '/big', (req, res) => res.once('data', () => res.destroy())),
    // A whole response on a connection the server closes.
    'connection: close': (agent) => story(agent, '/close', (req, res) => res.resume()),
    // The server cuts the connection within the body.
    cut: (agent) => story(agent, '/cut', (req, res) => res.resume()),
  };
  for (const [name, scenario] of Object.entries(scenarios)) {
    const seen = {};
    for (const [which, make] of Object.entries(agents)) {
      const agent = make({ keepAlive: true });
      t.after(() => agent.destroy());
      seen[which] = await scenario(agent);
    }
    assert.deepStrictEqual(seen.ours, seen.node, name);
  }
});

// A CONNECT through `agent` to `server`: its 'connect' arguments (the response, the socket).
function connectThrough(server, agent) {
  const req = http.request({ port: server.port, host: '127.0.0.1', method: 'CONNECT', path: 'example.com:443', agent });
  req.end();
  return once(req, 'connect');
}

test("a socket a CONNECT took over has none of the agent's listeners, as with Node's agent", async (t) => {
  const server = await httpServer(t);
  server.on('connect', (req, socket) => {
    socket.on('error', () => {});
    socket.end('HTTP/1.1 200 Connection established\r\n\r\n');
  });
  const events = ['end', 'error', 'timeout', 'close', 'free', 'agentRemove'];
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    const [, socket] = await connectThrough(server, agent);
    seen[which] = Object.fromEntries(events.map((e) => [e, socket.listenerCount(e)]));
    socket.destroy();
  }
  assert.deepStrictEqual(seen.ours, seen.node);
});

test("a socket nobody reads from ends and closes when the server closes its side, as net.Socket's (a CONNECT a proxy refused)", { timeout: 20_000 }, async (t) => {
  // A proxy that refuses a tunnel: a 403, then its end of the connection. The program takes
  // the socket ('connect') and never reads from it; net.Socket still emits 'end' at the EOF
  // and, not allowing half-open, closes.
  const server = await httpServer(t);
  server.on('connect', (req, socket) => {
    socket.on('error', () => {});
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true });
    t.after(() => agent.destroy());
    const [res, socket] = await connectThrough(server, agent);
    const events = [];
    socket.on('end', () => events.push('end'));
    await once(socket, 'close');
    seen[which] = { status: res.statusCode, events, destroyed: socket.destroyed };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, { status: 403, events: ['end'], destroyed: true });
});

test("a socket destroyed in use and then removed ('agentRemove', as agentkeepalive asks of a program's timeout handling) frees its slot", async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/hang') res.flushHeaders();
    else res.end('ok');
  });
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make({ keepAlive: true, maxSockets: 1 });
    t.after(() => agent.destroy());
    const first = http.get(`${server.url}/hang`, { agent }, (res) => {
      res.on('error', () => {});
      res.socket.destroy();
      res.socket.emit('agentRemove');
    });
    first.on('error', () => {});
    const firstClosed = once(first, 'close');
    // It waits for the one socket, and gets a new one once the first is gone.
    const second = http.get(`${server.url}/second`, { agent });
    const [res] = await once(second, 'response');
    let body = '';
    for await (const chunk of res) body += chunk;
    await firstClosed;
    seen[which] = { body, sockets: Object.keys(agent.sockets).length };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, { body: 'ok', sockets: 0 });
});

test('a socket has the listeners a socket of Node\'s agent has, in use and free', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const events = ['end', 'error', 'timeout', 'close', 'free', 'agentRemove'];
  const counts = (socket) => Object.fromEntries(events.map((e) => [e, socket.listenerCount(e)]));
  const seen = {};
  // The same active timeout (ours has one by default, as agentkeepalive's).
  for (const [which, agent] of [['node', new http.Agent({ keepAlive: true, timeout: 5000 })], ['ours', new Agent({ timeout: 5000 })]]) {
    t.after(() => agent.destroy());
    let inUse;
    const freed = once(agent, 'free');
    const socket = await new Promise((resolve, reject) => {
      const req = http.get(`${server.url}/`, { agent }, (res) => {
        inUse = counts(res.socket);
        const { socket: s } = res;
        res.resume();
        res.on('end', () => resolve(s));
      });
      req.on('error', reject);
    });
    await freed;
    // The agent's own 'free' listener ran before; http's listener, after the test's.
    await new Promise((resolve) => setImmediate(resolve));
    const free = counts(socket);
    // An error of a free socket closes it and goes no further: no uncaught exception.
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.emit('error', new Error('free socket error'));
    await closed;
    seen[which] = { inUse, free, destroyed: socket.destroyed };
  }
  assert.deepStrictEqual(seen.ours, seen.node);
});

test('timers a test library fakes (sinon, jest) do not reach the sockets: a socket timeout fires, the request errors, then closes, and frees its slot', { timeout: 20000 }, async (t) => {
  // A server that never answers; the request times out on its socket and is destroyed with
  // the program's error, as got's `timeout` does.
  const server = await httpServer(t, (req) => req.resume());
  const run = async (agent) => {
    const names = ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval'];
    const real = Object.fromEntries(names.map((name) => [name, globalThis[name]]));
    // A fake clock that never advances: what it is given never runs.
    const stub = () => ({ ref() { return this; }, unref() { return this; }, refresh() { return this; }, hasRef: () => false });
    for (const name of names) globalThis[name] = stub;
    const events = [];
    try {
      const req = http.get({ port: server.port, host: '127.0.0.1', agent });
      req.setTimeout(30, () => {
        events.push('timeout');
        req.destroy(new Error('mine'));
      });
      req.on('error', (err) => events.push(`error ${err.message}`));
      const closed = new Promise((resolve) => req.on('close', resolve));
      const [socket] = await once(req, 'socket');
      const socketClosed = new Promise((resolve) => socket.on('close', resolve));
      await closed;
      events.push('close');
      await socketClosed;
      events.push('socket close');
    } finally {
      for (const name of names) globalThis[name] = real[name];
    }
    return { events, inUse: Object.keys(agent.sockets).length };
  };
  const node = await run(agents.node({ keepAlive: true }));
  const ours = await run(agents.ours({ keepAlive: true }));
  assert.deepStrictEqual(node.events, ['timeout', 'error mine', 'close', 'socket close']);
  assert.deepStrictEqual(ours, node);
  assert.strictEqual(ours.inUse, 0);
});
