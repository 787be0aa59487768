'use strict';

// Agents made with `proxyEnv` (Node 24.5 on, later 22.x releases) go through the HTTP proxy it
// names, as Node's own agents do: plain HTTP in absolute form, HTTPS through a CONNECT tunnel,
// NO_PROXY honoured. Each case runs through Node's agent, the drop-in path and agent.request()
// side by side, against a real forwarding proxy on loopback.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const https = require('node:https');
const tls = require('node:tls');
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');
const { Agent, HttpsAgent } = require('..');
const { httpServer, listen, runChild, until } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
const CA = fixture('ca.pem');
const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const AUTH = `Basic ${Buffer.from('user:pa@ss').toString('base64')}`;

// A forwarding proxy: absolute-form requests are sent on to their origin, CONNECT opens a
// tunnel; with `auth`, anything without that proxy-authorization is refused with 407. It notes
// what it is asked (method, target, the proxy's own headers) and counts its connections.
async function proxyServer(t, { auth, cert } = {}) {
  const seen = [];
  const note = (req) => seen.push({
    method: req.method,
    target: req.url,
    authorization: req.headers['proxy-authorization'],
    connection: req.headers['proxy-connection'],
    host: req.headers.host,
  });
  // With `cert` (a fixture name, with its key), a proxy reached over TLS, as localhost.
  const onRequest = (req, res) => {
    note(req);
    if (auth && req.headers['proxy-authorization'] !== auth) {
      res.writeHead(407, { 'proxy-authenticate': 'Basic' }).end('proxy says no');
      return;
    }
    // Hop-by-hop lines stay on their hop (RFC 9110 §7.6.1).
    const hop = (headers) => {
      const out = { ...headers };
      for (const name of ['connection', 'keep-alive', 'proxy-authorization', 'proxy-connection']) delete out[name];
      return out;
    };
    const url = new URL(req.url);
    const options = { host: url.hostname, port: url.port, path: url.pathname + url.search, method: req.method, headers: hop(req.headers), agent: false };
    const upstream = http.request(options, (up) => {
      res.writeHead(up.statusCode, hop(up.headers));
      up.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  };
  const server = cert
    ? https.createServer({ cert: fixture(`${cert}.pem`), key: fixture(`${cert.replace(/-chain$/, '')}-key.pem`) }, onRequest)
    : http.createServer(onRequest);
  server.on('connect', (req, socket, head) => {
    note(req);
    socket.on('error', () => {});
    if (auth && req.headers['proxy-authorization'] !== auth) {
      socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic\r\n\r\n');
      return;
    }
    const at = req.url.lastIndexOf(':');
    const upstream = net.connect(Number(req.url.slice(at + 1)), req.url.slice(0, at).replace(/^\[|\]$/g, ''), () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
  });
  server.connections = 0;
  server.on('connection', () => server.connections++);
  // Over TLS: how each handshake with it ended.
  server.handshakes = [];
  server.on('secureConnection', () => server.handshakes.push('finished'));
  server.on('tlsClientError', () => server.handshakes.push('not finished'));
  await listen(t, server);
  server.seen = seen;
  server.url = cert ? `https://localhost:${server.address().port}` : `http://127.0.0.1:${server.address().port}`;
  return server;
}

// A scripted proxy on a raw socket: `answer(socket)` once the CONNECT request has come.
async function rawProxy(t, answer) {
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.once('data', () => answer(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return server;
}

function httpsOrigin(t) {
  const tls = { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') };
  return listen(t, https.createServer(tls, (req, res) => res.end(`secure ${req.url}`)));
}

// One request through `agent`: with http(s).get for Node's agent and the drop-in path, with
// agent.request() for 'promise'. Resolves with [status, body], or the error's fields.
function through(kind, agent, url) {
  const outcome = (err) => {
    const seen = { code: err.code, message: err.message, statusCode: err.statusCode, proxyTunnelTimeout: err.proxyTunnelTimeout };
    // A name check's failure: Node's reason, host and certificate.
    if (err.reason !== undefined) Object.assign(seen, { reason: err.reason, host: err.host, altnames: err.cert?.subjectaltname, fingerprint: err.cert?.fingerprint256 });
    return seen;
  };
  if (kind === 'promise') {
    return agent.request(url).then(async (res) => [res.statusCode, await res.body.text()], outcome);
  }
  const get = url.startsWith('https:') ? https.get : http.get;
  return new Promise((resolve) => {
    get(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d) => (body += d)).on('end', () => resolve([res.statusCode, body]));
    }).on('error', (err) => resolve(outcome(err)));
  });
}

// Node's agent, the drop-in path and agent.request(), each on its own agent made with `options`.
function agentsOf(t, secure, options) {
  const agents = secure
    ? { node: new https.Agent({ keepAlive: true, ...options }), dropIn: new HttpsAgent(options), promise: new HttpsAgent(options) }
    : { node: new http.Agent({ keepAlive: true, ...options }), dropIn: new Agent(options), promise: new Agent(options) };
  t.after(() => Object.values(agents).forEach((a) => a.destroy()));
  return agents;
}

async function nodeUsesProxyEnv(t) {
  const proxy = await proxyServer(t);
  const origin = await httpServer(t);
  const agent = new http.Agent({ proxyEnv: { HTTP_PROXY: proxy.url } });
  await through('node', agent, `${origin.url}/`);
  agent.destroy();
  return proxy.seen.length === 1;
}

test('plain HTTP goes through the proxy in absolute form, with its credentials, on both paths as with Node\'s agent', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const origin = await httpServer(t, (req, res) => res.end(`origin ${req.url}`));
  for (const kind of ['node', 'dropIn', 'promise']) {
    const proxy = await proxyServer(t, { auth: AUTH });
    const proxyUrl = proxy.url.replace('//', '//user:pa%40ss@');
    const agent = agentsOf(t, false, { proxyEnv: { HTTP_PROXY: proxyUrl } })[kind];
    const urls = [`${origin.url}/a?x=1`, `${origin.url}/b`];
    const got = [];
    for (const url of urls) got.push(await through(kind, agent, url));
    assert.deepStrictEqual(got, [[200, 'origin /a?x=1'], [200, 'origin /b']], kind);
    assert.deepStrictEqual(proxy.seen, urls.map((url) => ({
      method: 'GET', target: url, authorization: AUTH, connection: 'keep-alive', host: new URL(url).host,
    })), kind);
    assert.strictEqual(proxy.connections, 1, `${kind}: one kept connection to the proxy`);
  }
});

test("a request's own proxy-authorization and proxy-connection lines give way to the agent's proxy's, as Node's http.request sets them", async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const origin = await httpServer(t, (req, res) => res.end('origin'));
  const headers = { 'proxy-authorization': 'Basic theirs', 'proxy-connection': 'close', 'x-other': 'kept' };
  // With credentials in the proxy's URL, they replace the caller's; without, the caller's go.
  for (const [credentials, expected] of [[true, AUTH], [false, 'Basic theirs']]) {
    for (const kind of ['node', 'dropIn', 'promise']) {
      const proxy = await proxyServer(t, { auth: expected });
      const lines = [];
      proxy.on('request', (req) => {
        for (let i = 0; i < req.rawHeaders.length; i += 2) {
          if (/^(proxy-|x-other)/i.test(req.rawHeaders[i])) lines.push(req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]);
        }
      });
      const proxyUrl = credentials ? proxy.url.replace('//', '//user:pa%40ss@') : proxy.url;
      const agent = agentsOf(t, false, { proxyEnv: { HTTP_PROXY: proxyUrl } })[kind];
      const url = `${origin.url}/`;
      let status;
      if (kind === 'promise') {
        const res = await agent.request(url, { headers });
        await res.body.text();
        status = res.statusCode;
      } else {
        status = await new Promise((resolve, reject) => {
          http.get(url, { agent, headers }, (res) => res.resume().on('end', () => resolve(res.statusCode))).on('error', reject);
        });
      }
      assert.strictEqual(status, 200, `${kind}, credentials ${credentials}`);
      assert.deepStrictEqual(lines.filter((_, i) => i % 2 === 0).sort(), ['proxy-authorization', 'proxy-connection', 'x-other'], kind);
      const value = (name) => lines[lines.indexOf(name) + 1];
      assert.strictEqual(value('proxy-authorization'), expected, kind);
      assert.strictEqual(value('proxy-connection'), 'keep-alive', kind);
    }
  }
});

test('HTTPS goes through a CONNECT tunnel, verified for the origin, on both paths as with Node\'s agent', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const origin = await httpsOrigin(t);
  const port = origin.address().port;
  for (const kind of ['node', 'dropIn', 'promise']) {
    const proxy = await proxyServer(t, { auth: AUTH });
    const proxyUrl = proxy.url.replace('//', '//user:pa%40ss@');
    const agent = agentsOf(t, true, { ca: CA, proxyEnv: { HTTPS_PROXY: proxyUrl } })[kind];
    const got = [];
    for (const p of ['/a', '/b']) got.push(await through(kind, agent, `https://localhost:${port}${p}`));
    assert.deepStrictEqual(got, [[200, 'secure /a'], [200, 'secure /b']], kind);
    // One tunnel, kept for the second request.
    assert.deepStrictEqual(proxy.seen, [{
      method: 'CONNECT', target: `localhost:${port}`, authorization: AUTH, connection: 'keep-alive', host: `localhost:${port}`,
    }], kind);
    // The origin's certificate is checked against the origin's name, not the proxy's.
    const wrongCa = agentsOf(t, true, { proxyEnv: { HTTPS_PROXY: proxyUrl } })[kind];
    const refused = await through(kind, wrongCa, `https://localhost:${port}/`);
    assert.strictEqual(refused.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', kind);
  }
});

test('HTTP/2 goes through a CONNECT tunnel too: one tunnel carries the streams', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const http2 = require('node:http2');
  const origin = http2.createSecureServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') });
  const sessions = [];
  origin.on('session', (s) => sessions.push(s));
  origin.on('stream', (stream, headers) => {
    stream.respond({ ':status': 200 });
    stream.end(`h2 ${headers[':path']}`);
  });
  origin.listen(0, '127.0.0.1');
  await once(origin, 'listening');
  t.after(() => {
    for (const s of sessions) s.destroy();
    origin.close();
  });
  const proxy = await proxyServer(t);
  const agent = new HttpsAgent({ ca: CA, allowH2: true, proxyEnv: { HTTPS_PROXY: proxy.url } });
  t.after(() => agent.destroy());
  const url = `https://localhost:${origin.address().port}`;
  const results = await Promise.all(['/a', '/b', '/c'].map(async (p) => {
    const res = await agent.request(url + p);
    return `${res.httpVersion} ${await res.body.text()}`;
  }));
  assert.deepStrictEqual(results, ['2.0 h2 /a', '2.0 h2 /b', '2.0 h2 /c']);
  assert.strictEqual(proxy.seen.length, 1, 'one tunnel');
  assert.strictEqual(sessions.length, 1);
});

test('a tunnel the proxy refuses fails with ERR_PROXY_TUNNEL and its status, as Node\'s agent fails', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const origin = await httpsOrigin(t);
  const proxy = await proxyServer(t, { auth: AUTH });
  const url = `https://localhost:${origin.address().port}/`;
  const agents = agentsOf(t, true, { ca: CA, proxyEnv: { HTTPS_PROXY: proxy.url } });
  const seen = {};
  for (const kind of Object.keys(agents)) seen[kind] = await through(kind, agents[kind], url);
  assert.strictEqual(seen.node.code, 'ERR_PROXY_TUNNEL');
  assert.strictEqual(seen.node.statusCode, 407);
  assert.match(seen.node.message, /^Failed to establish tunnel to localhost:\d+ via http:\/\/127\.0\.0\.1:\d+\/?: HTTP\/1\.1 407 Proxy Authentication Required$/);
  assert.deepStrictEqual(seen.dropIn, seen.node);
  assert.deepStrictEqual(seen.promise, seen.node);
  // The origin's errors stay the origin's: its 407 over plain HTTP is a response like any.
  const plainOrigin = await httpServer(t);
  const plain = agentsOf(t, false, { proxyEnv: { HTTP_PROXY: proxy.url } });
  for (const kind of Object.keys(plain)) {
    assert.deepStrictEqual(await through(kind, plain[kind], `${plainOrigin.url}/`), [407, 'proxy says no'], kind);
  }
});

test('a tunnel that stalls, is cut short or answers with too long a head fails with ERR_PROXY_TUNNEL, as Node\'s agent fails', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  // Scripted proxies: each reads the CONNECT request and answers it so.
  const answers = {
    stalls: () => {},
    'stalls mid-head': (socket) => socket.write('HTTP/1.1 200 Connection Established\r\n'),
    'is cut short': (socket) => socket.end('HTTP/1.1 200 Conn'),
    // Ended after the head: Node 22's agent has no limit on a proxy's head, takes the 200 and
    // starts TLS on the connection, which then ends instead of waiting forever.
    'answers with too long a head': (socket) => socket.end(`HTTP/1.1 200 OK\r\nx-pad: ${'a'.repeat(20000)}\r\n\r\n`),
  };
  const expected = {
    stalls: 'Connection to establish proxy tunnel timed out after 200ms',
    'stalls mid-head': 'Connection to establish proxy tunnel timed out after 200ms',
    'is cut short': 'Connection to establish proxy tunnel ended unexpectedly',
    'answers with too long a head': 'Proxy response headers exceeded 16384 bytes',
  };
  for (const [name, answer] of Object.entries(answers)) {
    const proxy = await rawProxy(t, answer);
    // The agents' timeout bounds the tunnel, as the request's own does for Node's agent.
    const env = { HTTPS_PROXY: `http://127.0.0.1:${proxy.address().port}` };
    const agents = agentsOf(t, true, { ca: CA, timeout: 200, proxyEnv: env });
    const seen = {};
    for (const kind of Object.keys(agents)) seen[kind] = await through(kind, agents[kind], 'https://localhost:9/');
    const stalled = name.startsWith('stalls');
    const want = {
      code: 'ERR_PROXY_TUNNEL', message: expected[name], statusCode: undefined, proxyTunnelTimeout: stalled ? 200 : undefined,
    };
    // Node's agent limits the proxy's head from Node 24 on; ours do on every Node.
    if (name !== 'answers with too long a head' || NODE_MAJOR >= 24) assert.deepStrictEqual(seen.node, want, name);
    assert.deepStrictEqual([seen.dropIn, seen.promise], [want, want], name);
    // A connect that failed, on both paths alike; a timeout too when it stalled.
    for (const kind of ['dropIn', 'promise']) {
      const { createSocketCount, createSocketErrorCount, errorSocketCount, timeoutSocketCount } = agents[kind].getCurrentStatus();
      assert.deepStrictEqual(
        [createSocketCount, createSocketErrorCount, errorSocketCount, timeoutSocketCount],
        [1, 0, 1, stalled ? 1 : 0],
        `${name}: ${kind}`,
      );
    }
    for (const agent of Object.values(agents)) agent.destroy();
  }
  // A request's own timeout bounds it on the drop-in path, as on Node's: 'timeout' first, then
  // the error, listened to or not.
  const proxy = await rawProxy(t, answers.stalls);
  const agents = agentsOf(t, true, { ca: CA, proxyEnv: { HTTPS_PROXY: `http://127.0.0.1:${proxy.address().port}` } });
  for (const kind of ['node', 'dropIn']) {
    const events = [];
    const req = https.get('https://localhost:9/', { agent: agents[kind], timeout: 150 });
    req.on('timeout', () => events.push('timeout'));
    const [err] = await once(req, 'error');
    events.push(`${err.code} ${err.proxyTunnelTimeout}`);
    assert.deepStrictEqual(events, ['timeout', 'ERR_PROXY_TUNNEL 150'], kind);
  }
});

test('NO_PROXY and an unreachable proxy: as Node\'s agent decides and fails', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const origin = await httpServer(t, (req, res) => res.end('direct'));
  const proxy = await proxyServer(t);
  const port = origin.address().port;
  // localhost is named by NO_PROXY: straight to the origin; 127.0.0.1 is not: through the proxy.
  const agents = agentsOf(t, false, { proxyEnv: { HTTP_PROXY: proxy.url, NO_PROXY: 'example.com, localhost' } });
  for (const kind of Object.keys(agents)) {
    const before = proxy.seen.length;
    assert.deepStrictEqual(await through(kind, agents[kind], `http://localhost:${port}/`), [200, 'direct'], kind);
    assert.strictEqual(proxy.seen.length, before, `${kind}: localhost bypasses the proxy`);
    assert.deepStrictEqual(await through(kind, agents[kind], `http://127.0.0.1:${port}/`), [200, 'direct'], kind);
    assert.strictEqual(proxy.seen.length, before + 1, `${kind}: 127.0.0.1 goes through it`);
  }
  // A proxy nobody listens on: the connect to it fails, naming it.
  const gone = net.createServer().listen(0, '127.0.0.1');
  await once(gone, 'listening');
  const deadPort = gone.address().port;
  gone.close();
  for (const secure of [false, true]) {
    const env = secure ? { HTTPS_PROXY: `http://127.0.0.1:${deadPort}` } : { HTTP_PROXY: `http://127.0.0.1:${deadPort}` };
    const dead = agentsOf(t, secure, { ca: CA, proxyEnv: env });
    const url = secure ? `https://localhost:${port}/` : `http://127.0.0.1:${port}/`;
    const seen = {};
    for (const kind of Object.keys(dead)) seen[kind] = await through(kind, dead[kind], url);
    assert.strictEqual(seen.node.code, 'ECONNREFUSED', `secure ${secure}`);
    assert.deepStrictEqual([seen.dropIn, seen.promise], [seen.node, seen.node], `secure ${secure}`);
    const { createSocketCount, errorSocketCount, closeSocketCount } = dead.dropIn.getCurrentStatus();
    assert.deepStrictEqual([createSocketCount, errorSocketCount, closeSocketCount], [1, 1, 1], `secure ${secure}`);
  }
});

test('a proxy reached over TLS: plain HTTP inside its session, HTTPS through a tunnel inside it, as with Node\'s agent', async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  if (typeof tls.setDefaultCACertificates !== 'function') return t.skip('this Node cannot add the test CA to its default trust');
  // The proxy's certificate is checked against the default trust, as tls.connect checks it.
  const original = tls.getCACertificates('default');
  t.after(() => tls.setDefaultCACertificates(original));
  tls.setDefaultCACertificates([...original, CA.toString()]);
  const origin = await httpServer(t, (req, res) => res.end(`origin ${req.url}`));
  const secureOrigin = await httpsOrigin(t);
  const port = secureOrigin.address().port;
  for (const kind of ['node', 'dropIn', 'promise']) {
    const proxy = await proxyServer(t, { auth: AUTH, cert: 'localhost-chain' });
    const proxyUrl = proxy.url.replace('//', '//user:pa%40ss@');
    const plain = agentsOf(t, false, { proxyEnv: { HTTP_PROXY: proxyUrl } })[kind];
    const secure = agentsOf(t, true, { ca: CA, proxyEnv: { HTTPS_PROXY: proxyUrl } })[kind];
    const got = [];
    for (const p of ['/a', '/b']) got.push(await through(kind, plain, `${origin.url}${p}`));
    for (const p of ['/c', '/d']) got.push(await through(kind, secure, `https://localhost:${port}${p}`));
    assert.deepStrictEqual(got, [[200, 'origin /a'], [200, 'origin /b'], [200, 'secure /c'], [200, 'secure /d']], kind);
    assert.deepStrictEqual(proxy.seen.map((r) => [r.method, r.target, r.authorization]), [
      ['GET', `${origin.url}/a`, AUTH], ['GET', `${origin.url}/b`, AUTH], ['CONNECT', `localhost:${port}`, AUTH],
    ], kind);
    assert.strictEqual(proxy.connections, 2, `${kind}: one kept session to the proxy per agent`);
  }
  // A proxy whose certificate names another host, or that the default trust does not know.
  for (const cert of ['wrong-host', 'self-signed']) {
    const proxy = await proxyServer(t, { cert });
    const agents = agentsOf(t, false, { proxyEnv: { HTTP_PROXY: proxy.url } });
    const seen = {};
    for (const kind of Object.keys(agents)) {
      // As Node words it: the certificate's names in the message, with reason, host and cert.
      seen[kind] = await through(kind, agents[kind], `${origin.url}/`);
    }
    assert.ok(seen.node.code, `${cert}: Node's agent refuses the proxy`);
    if (cert === 'wrong-host') assert.match(seen.node.message, /is not in the cert's altnames: DNS:example\.com$/);
    assert.deepStrictEqual([seen.dropIn, seen.promise], [seen.node, seen.node], cert);
    assert.strictEqual(proxy.seen.length, 0, `${cert}: nothing was asked of it`);
    // Refused within the handshake, as Node's agent refuses it: the proxy never sees it finish.
    await until(() => proxy.handshakes.length === 3, 5000, 'the ends of the proxy\'s handshakes');
    assert.deepStrictEqual(proxy.handshakes, Array(3).fill('not finished'), cert);
  }
});

test("the module's request() goes through the environment's proxy where Node's global agent does (NODE_USE_ENV_PROXY)", async (t) => {
  if (!(await nodeUsesProxyEnv(t))) return t.skip('this Node ignores proxyEnv');
  const origin = await httpServer(t, (req, res) => res.end('origin'));
  const proxy = await proxyServer(t);
  const url = `${origin.url}/env`;
  const script = `
    const http = require('node:http');
    const { request } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    http.get(${JSON.stringify(url)}, (res) => {
      res.resume().on('end', async () => {
        const ours = await request(${JSON.stringify(url)});
        console.log(JSON.stringify([res.statusCode, ours.statusCode, await ours.body.text()]));
        process.exit(0);
      });
    });
  `;
  for (const [env, through] of [[{ NODE_USE_ENV_PROXY: '1' }, true], [{ NODE_USE_ENV_PROXY: undefined }, false]]) {
    const before = proxy.seen.length;
    const { code, out, err } = await runChild(script, { ...env, HTTP_PROXY: proxy.url, NO_PROXY: undefined, no_proxy: undefined, http_proxy: undefined });
    assert.strictEqual(code, 0, err);
    assert.deepStrictEqual(JSON.parse(out), [200, 200, 'origin']);
    // Both Node's global agent and the default agent, or neither.
    assert.strictEqual(proxy.seen.length - before, through ? 2 : 0, JSON.stringify(env));
  }
});
