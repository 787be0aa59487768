'use strict';

// HttpsAgent through real https.request against Node https servers, with the committed
// fixture certificates (__test__/fixtures/tls) verified for real.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const tls = require('node:tls');
const os = require('node:os');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const util = require('node:util');
const { HttpsAgent } = require('..');
const { until, rawServer, readRequest, runChild, collected, tcpTimer } = require('./helpers');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
const CA = fixture('ca.pem');

async function httpsServer(t, options = {}, handler = (req, res) => res.end(`secure ${req.url}`)) {
  const server = https.createServer({
    cert: fixture(options.cert || 'localhost-chain.pem'),
    key: fixture(options.key || 'localhost-key.pem'),
    ...options.tls,
  }, handler);
  server.connections = [];
  server.tlsSockets = [];
  server.on('connection', (s) => server.connections.push(s));
  server.on('secureConnection', (s) => server.tlsSockets.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  server.port = server.address().port;
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return server;
}

function get(options) {
  return new Promise((resolve, reject) => {
    const req = https.get(options, (res) => {
      const socket = res.socket;
      const seen = {
        authorized: socket.authorized,
        authorizationError: socket.authorizationError,
        encrypted: socket.encrypted,
        protocol: socket.getProtocol(),
        cipher: socket.getCipher(),
        alpnProtocol: socket.alpnProtocol,
        servername: socket.servername,
        resumed: socket.isSessionReused(),
        cert: socket.getPeerCertificate(true),
        socket,
      };
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ res, req, body, ...seen }));
    });
    req.on('error', reject);
  });
}

function getError(options) {
  return get(options).then(
    (r) => assert.fail(`expected an error, got ${r.res.statusCode}`),
    (err) => err,
  );
}

test('TLS options of the wrong type are refused with Node\'s codes on both paths; maxCachedSessions is read as a number', async (t) => {
  const server = await httpsServer(t);
  const cases = [
    [{ ciphers: 5 }, 'ERR_INVALID_ARG_TYPE', /"options.ciphers" property must be of type string/],
    [{ minVersion: [] }, 'ERR_TLS_INVALID_PROTOCOL_VERSION', /^\[\] is not a valid minimum TLS protocol version$/],
    [{ maxVersion: {} }, 'ERR_TLS_INVALID_PROTOCOL_VERSION', /^\{\} is not a valid maximum TLS protocol version$/],
    [{ servername: ['x'] }, 'ERR_INVALID_ARG_TYPE', /"options.servername" property must be of type string/],
  ];
  for (const [options, code, message] of cases) {
    // Node's agent refuses them at the request too (a servername with another message).
    if (!options.servername) {
      assert.throws(() => https.get({ host: '127.0.0.1', port: server.port, agent: new https.Agent(options) }), { code, message });
    }
    const agent = new HttpsAgent({ ca: CA, ...options });
    t.after(() => agent.destroy());
    assert.throws(() => https.get({ host: 'localhost', port: server.port, agent }), { code, message }, util.inspect(options));
    assert.throws(() => agent.request(`https://localhost:${server.port}/`), { code, message }, util.inspect(options));
    assert.strictEqual(agent.totalSocketCount, 0);
  }
  // None (null) is none, as Node takes it.
  const agent = new HttpsAgent({ ca: CA, maxCachedSessions: '5', ciphers: null, minVersion: null });
  t.after(() => agent.destroy());
  assert.strictEqual((await get({ host: 'localhost', port: server.port, path: '/a', agent })).body, 'secure /a');
  assert.strictEqual(await (await agent.request(`https://localhost:${server.port}/b`)).body.text(), 'secure /b');
});

test('an HttpsAgent is an https.Agent and an http.Agent', (t) => {
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  assert.ok(agent instanceof https.Agent);
  assert.ok(agent instanceof http.Agent);
  assert.strictEqual(agent.protocol, 'https:');
  assert.strictEqual(agent.defaultPort, 443);
  assert.strictEqual(agent.maxCachedSessions, 100);
});

test('a CA bundle given as an array or a string serves every new connection\'s chain, on both paths', async (t) => {
  const server = await httpsServer(t);
  const roots = require('node:tls').rootCertificates;
  const bundles = { array: [...roots, CA.toString()], string: `${roots.join('\n')}\n${CA}` };
  for (const [form, ca] of Object.entries(bundles)) {
    // A name check of the user's own runs on every new session (none is resumed here), on a
    // chain completed from `ca`.
    const seen = [];
    const checkServerIdentity = (host, cert) => {
      seen.push(cert.issuerCertificate.issuerCertificate.subject.CN);
    };
    const agent = new HttpsAgent({ ca, checkServerIdentity, keepAlive: false, maxCachedSessions: 0 });
    t.after(() => agent.destroy());
    for (let i = 0; i < 3; i++) {
      const r = await get({ host: 'localhost', port: server.port, path: `/${form}${i}`, agent });
      assert.strictEqual(r.body, `secure /${form}${i}`);
      assert.strictEqual(r.cert.issuerCertificate.issuerCertificate.subject.CN, 'hyperagent test CA', form);
      const res = await agent.request(`https://localhost:${server.port}/${form}${i}`);
      assert.strictEqual(await res.body.text(), `secure /${form}${i}`);
    }
    assert.deepStrictEqual(seen, Array(6).fill('hyperagent test CA'), form);
  }
  // Another CA of the same shape still fails the chain it did not issue.
  const other = new HttpsAgent({ ca: [...roots, fixture('other-ca.pem').toString()] });
  t.after(() => other.destroy());
  await assert.rejects(other.request(`https://localhost:${server.port}/`), { code: 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY' });
});

test('requests reuse one verified TLS connection, with TLSSocket-shaped details', async (t) => {
  const server = await httpsServer(t);
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  for (let i = 0; i < 10; i++) {
    const freed = once(agent, 'free');
    const r = await get({ host: 'localhost', port: server.port, path: `/n${i}`, agent });
    assert.strictEqual(r.body, `secure /n${i}`);
    assert.strictEqual(r.req.reusedSocket, i > 0);
    await freed;
    if (i === 0) {
      assert.strictEqual(r.encrypted, true);
      assert.strictEqual(r.authorized, true);
      assert.strictEqual(r.authorizationError, null);
      assert.strictEqual(r.protocol, 'TLSv1.3');
      assert.match(r.cipher.name, /^TLS_(AES_(128|256)_GCM_SHA(256|384)|CHACHA20_POLY1305_SHA256)$/);
      assert.strictEqual(r.cipher.version, 'TLSv1.3');
      assert.strictEqual(r.alpnProtocol, false);
      assert.strictEqual(r.servername, 'localhost');
      assert.strictEqual(r.cert.subject.CN, 'localhost');
      assert.match(r.cert.subjectaltname, /DNS:localhost/);
      assert.match(r.cert.fingerprint256, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
      assert.ok(Buffer.isBuffer(r.cert.raw));
      assert.ok(r.cert.valid_from && r.cert.valid_to && r.cert.serialNumber);
      // As Node: the chain up to the trusted root, which is its own issuer.
      const intermediate = r.cert.issuerCertificate;
      assert.strictEqual(intermediate.subject.CN, 'hyperagent test intermediate CA');
      assert.strictEqual(intermediate.issuerCertificate.subject.CN, 'hyperagent test CA');
      assert.strictEqual(intermediate.issuerCertificate.issuerCertificate, intermediate.issuerCertificate);
    }
  }
  assert.strictEqual(server.connections.length, 1);
  assert.strictEqual(agent.getCurrentStatus().createSocketCount, 1);
});

test('getPeerCertificate(true) on a connection left unverified links the chain the server sent, as Node\'s', async (t) => {
  // A pinning check (a CA fingerprint, say) on a connection made with rejectUnauthorized: false
  // walks issuerCertificate: Node links what the server sent, and a root of `ca` that issued its
  // last, whether or not the chain was verified.
  const issuers = (cert) => {
    const names = [];
    for (let c = cert; c && names.length < 5; c = c.issuerCertificate === c ? null : c.issuerCertificate) {
      names.push(c.subject.CN + (c.issuerCertificate === c ? ' (itself)' : ''));
    }
    return names;
  };
  const cases = {
    'chain with its root, no ca': [{ tls: { cert: Buffer.concat([fixture('localhost-chain.pem'), CA]) } }, {}],
    'chain without its root, no ca': [{}, {}],
    'an expired leaf, its root in ca': [{ cert: 'expired.pem', key: 'expired-key.pem' }, { ca: CA }],
    'self-signed': [{ cert: 'self-signed.pem', key: 'self-signed-key.pem' }, {}],
  };
  for (const [name, [serverOptions, agentOptions]] of Object.entries(cases)) {
    const server = await httpsServer(t, serverOptions);
    const seen = {};
    for (const [which, Agent] of [['node', https.Agent], ['ours', HttpsAgent]]) {
      const agent = new Agent({ rejectUnauthorized: false, ...agentOptions });
      t.after(() => agent.destroy());
      const r = await get({ host: 'localhost', port: server.port, agent });
      seen[which] = { authorizationError: r.authorizationError, issuers: issuers(r.cert) };
    }
    assert.deepStrictEqual(seen.ours, seen.node, name);
    assert.notStrictEqual(seen.ours.authorizationError, null, name);
    if (name !== 'chain without its root, no ca') assert.match(seen.ours.issuers.at(-1), / \(itself\)$/, name);
  }
});

test('maxSockets holds for HTTPS under concurrency', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => setImmediate(() => res.end('ok')));
  const agent = new HttpsAgent({ ca: CA, maxSockets: 2 });
  t.after(() => agent.destroy());
  const all = await Promise.all(Array.from({ length: 20 }, () => get({ host: 'localhost', port: server.port, agent })));
  assert.ok(all.every((r) => r.body === 'ok'));
  assert.ok(server.connections.length <= 2);
});

test('verification failures carry Node\'s codes and messages, side by side with Node\'s agent', async (t) => {
  const cases = [
    ['self-signed.pem', 'self-signed-key.pem', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'],
    ['expired.pem', 'expired-key.pem', 'CERT_HAS_EXPIRED', 'certificate has expired'],
    ['notyet.pem', 'notyet-key.pem', 'CERT_NOT_YET_VALID', 'certificate is not yet valid'],
    ['unknown-ca.pem', 'unknown-ca-key.pem', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'],
    ['unknown-ca-chain.pem', 'unknown-ca-key.pem', 'SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain'],
    ['localhost.pem', 'localhost-key.pem', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'],
    // A client's certificate (extended key usage clientAuth alone) served as a server's.
    ['client.pem', 'client-key.pem', 'INVALID_PURPOSE', 'unsuitable certificate purpose'],
  ];
  const agent = new HttpsAgent({ ca: CA });
  const node = new https.Agent({ ca: CA });
  t.after(() => { agent.destroy(); node.destroy(); });
  for (const [cert, key, code, message] of cases) {
    const server = await httpsServer(t, { cert, key });
    const expected = await getError({ host: 'localhost', port: server.port, agent: node });
    const err = await getError({ host: 'localhost', port: server.port, agent });
    assert.strictEqual(expected.code, code, cert);
    // OpenSSL's words; Node 24 on adds a hint to some of them.
    assert.ok(expected.message.startsWith(message), expected.message);
    assert.strictEqual(err.code, code, cert);
    assert.strictEqual(err.message, expected.message, cert);
    const viaRequest = await agent.request(`https://localhost:${server.port}/`).catch((e) => e);
    assert.deepStrictEqual([viaRequest.code, viaRequest.message], [code, expected.message], cert);
  }
  // Each a socket that failed, as agentkeepalive counts it: created, an error, closed.
  const status = agent.getCurrentStatus();
  assert.deepStrictEqual(
    [status.createSocketCount, status.errorSocketCount, status.closeSocketCount, status.createSocketErrorCount],
    [2 * cases.length, 2 * cases.length, 2 * cases.length, 0],
  );
});

test('without ca, the default roots do not trust the test CA', async (t) => {
  const server = await httpsServer(t);
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  const err = await getError({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(err.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
});

test('a wrong host name fails with ERR_TLS_CERT_ALTNAME_INVALID, reason, host and cert', async (t) => {
  const server = await httpsServer(t, { cert: 'wrong-host.pem', key: 'wrong-host-key.pem' });
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const err = await getError({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(err.code, 'ERR_TLS_CERT_ALTNAME_INVALID');
  assert.strictEqual(err.host, 'localhost');
  assert.match(err.reason, /localhost.*is not in the cert's altnames: DNS:example\.com/);
  assert.strictEqual(err.cert.subjectaltname, 'DNS:example.com');
});

test('a name Node\'s own check refuses fails within the handshake: the server never sees it finish, nor the client certificate', async (t) => {
  // The server asks for a client certificate (and takes any): each handshake's end says
  // whether the client finished its side and sent its certificate.
  const server = await httpsServer(t, {
    cert: 'wrong-host.pem',
    key: 'wrong-host-key.pem',
    tls: { requestCert: true, rejectUnauthorized: false },
  });
  const ends = [];
  server.on('secureConnection', (s) => ends.push(s.getPeerCertificate().subject ? 'finished, client certificate sent' : 'finished'));
  server.on('tlsClientError', () => ends.push('not finished'));
  const identity = { ca: CA, cert: fixture('client.pem'), key: fixture('client-key.pem') };
  const url = `https://localhost:${server.port}/`;
  const seen = async (attempt) => {
    const before = ends.length;
    const outcome = await attempt().then((r) => r.body, (err) => err);
    await until(() => ends.length > before, 5000, 'the end of the server\'s handshake');
    return { outcome, end: ends[before] };
  };
  const node = new https.Agent(identity);
  const ours = new HttpsAgent(identity);
  const lenient = new HttpsAgent({ ...identity, checkServerIdentity: () => undefined });
  t.after(() => [node, ours, lenient].forEach((a) => a.destroy()));

  // The error's `cert` is getPeerCertificate(true)'s: each certificate with its issuer, up to
  // the root.
  const issuers = (cert) => {
    const names = [];
    for (let c = cert; c && names.length < 5; c = c.issuerCertificate === c ? null : c.issuerCertificate) names.push(c.subject.CN);
    return names;
  };
  const nodes = await seen(() => get({ host: 'localhost', port: server.port, agent: node }));
  assert.strictEqual(nodes.end, 'not finished');
  const expected = { code: 'ERR_TLS_CERT_ALTNAME_INVALID', host: 'localhost', reason: nodes.outcome.reason, issuers: issuers(nodes.outcome.cert) };
  assert.match(expected.reason, /DNS:example\.com/);
  assert.strictEqual(expected.issuers.length, 2);
  for (const attempt of [
    () => get({ host: 'localhost', port: server.port, agent: ours }),
    () => ours.request(url),
  ]) {
    const { outcome, end } = await seen(attempt);
    assert.strictEqual(end, 'not finished');
    assert.deepStrictEqual({ code: outcome.code, host: outcome.host, reason: outcome.reason, issuers: issuers(outcome.cert) }, expected);
    assert.strictEqual(outcome.cert.subjectaltname, 'DNS:example.com');
  }
  // A check of the program's decides after the handshake, as in Node: it may take the name.
  for (const attempt of [
    () => get({ host: 'localhost', port: server.port, agent: lenient }),
    () => lenient.request(url).then(async (res) => ({ body: await res.body.text() })),
  ]) {
    assert.deepStrictEqual(await seen(attempt), { outcome: 'secure /', end: 'finished, client certificate sent' });
  }
});

test('checkServerIdentity is called as Node calls it, and its verdict counts', async (t) => {
  const server = await httpsServer(t);
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const calls = [];
  const veto = new Error('not this server');
  const err = await getError({
    host: 'localhost',
    port: server.port,
    agent,
    checkServerIdentity: (host, cert) => {
      calls.push([host, cert.subject.CN]);
      return veto;
    },
  });
  assert.strictEqual(err, veto);
  assert.deepStrictEqual(calls, [['localhost', 'localhost']]);
  // One that throws fails the request with what it threw, with rejectUnauthorized: false too.
  const broke = new Error('checker broke');
  for (const rejectUnauthorized of [true, false]) {
    const thrown = await getError({
      host: 'localhost',
      port: server.port,
      agent,
      rejectUnauthorized,
      checkServerIdentity: () => {
        throw broke;
      },
    });
    assert.strictEqual(thrown, broke);
  }
  const nothing = await getError({
    host: 'localhost',
    port: server.port,
    agent,
    checkServerIdentity: () => {
      throw null; // eslint-disable-line no-throw-literal
    },
  });
  assert.strictEqual(nothing.message, 'checkServerIdentity threw null');
});

test('a self-signed certificate passed as ca is trusted, as Node trusts it', async (t) => {
  const server = await httpsServer(t, { cert: 'self-signed.pem', key: 'self-signed-key.pem' });
  const agent = new HttpsAgent({ ca: fixture('self-signed.pem') });
  t.after(() => agent.destroy());
  const r = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(r.authorized, true);
});

test('rejectUnauthorized: false connects and reports why the peer is not authorized', async (t) => {
  const server = await httpsServer(t, { cert: 'self-signed.pem', key: 'self-signed-key.pem' });
  const agent = new HttpsAgent({ rejectUnauthorized: false });
  t.after(() => agent.destroy());
  const r = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(r.body, 'secure /');
  assert.strictEqual(r.authorized, false);
  assert.strictEqual(r.authorizationError, 'DEPTH_ZERO_SELF_SIGNED_CERT');
});

test('connections with different trust never mix', async (t) => {
  const server = await httpsServer(t);
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  const good = await get({ host: 'localhost', port: server.port, agent, ca: CA });
  assert.strictEqual(good.authorized, true);
  // Same origin, other trust (the default roots): a new key, a new handshake, a failure.
  const err = await getError({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(err.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  assert.strictEqual(Object.keys(agent.getCurrentStatus().freeSockets).length, 1);
});

test('SNI carries the host name, and none is sent for an IP address', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => res.end(String(req.socket.servername)));
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  assert.strictEqual((await get({ host: 'localhost', port: server.port, agent })).body, 'localhost');
  const byIp = await get({ host: '127.0.0.1', port: server.port, agent });
  assert.strictEqual(byIp.body, 'false');
  assert.strictEqual(byIp.authorized, true, 'the certificate lists IP:127.0.0.1');
  const custom = await get({ host: '127.0.0.1', port: server.port, agent, servername: 'localhost' });
  assert.strictEqual(custom.body, 'localhost');
});

test('mutual TLS: the client certificate is presented when the server asks', async (t) => {
  const server = await httpsServer(t, { tls: { ca: CA, requestCert: true, rejectUnauthorized: true } }, (req, res) => {
    res.end(req.socket.getPeerCertificate().subject.CN);
  });
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const r = await get({ host: 'localhost', port: server.port, agent, cert: fixture('client.pem'), key: fixture('client-key.pem') });
  assert.strictEqual(r.body, 'hyperagent client');
  // An encrypted key, with its passphrase.
  const enc = await get({
    host: 'localhost',
    port: server.port,
    agent,
    cert: fixture('client.pem'),
    key: fixture('client-key-encrypted.pem'),
    passphrase: 'secret',
  });
  assert.strictEqual(enc.body, 'hyperagent client');
  // An X.509 version 1 certificate (no extensions, as `openssl x509 -req` makes one), as Node
  // presents it.
  const v1 = { host: 'localhost', port: server.port, cert: fixture('v1-leaf.pem'), key: fixture('v1-leaf-key.pem') };
  const node = new https.Agent({ ca: CA });
  t.after(() => node.destroy());
  assert.strictEqual((await get({ ...v1, agent: node })).body, 'localhost');
  assert.strictEqual((await get({ ...v1, agent })).body, 'localhost');
});

test("secureOptions turns TLS 1.2 or 1.3 off as OpenSSL's flags do; both off fails at the handshake, as Node's", async (t) => {
  const { SSL_OP_NO_TLSv1_2: NO_TLS12, SSL_OP_NO_TLSv1_3: NO_TLS13 } = require('node:crypto').constants;
  const server = await httpsServer(t, {}, (req, res) => res.end(req.socket.getProtocol()));
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: server.port, agent };
  assert.strictEqual((await get({ ...base, secureOptions: NO_TLS13 })).body, 'TLSv1.2');
  assert.strictEqual((await get({ ...base, secureOptions: NO_TLS12 })).body, 'TLSv1.3');
  // A server of TLS 1.2 only shares no version with TLS 1.3 alone.
  const older = await httpsServer(t, { tls: { maxVersion: 'TLSv1.2' } });
  assert.strictEqual((await getError({ ...base, port: older.port, secureOptions: NO_TLS12 })).code, 'EPROTO');
  const node = new https.Agent({ ca: CA });
  t.after(() => node.destroy());
  for (const a of [node, agent]) {
    // The request's 'error', not a throw out of https.get() (which getError() would take too).
    const req = https.get({ ...base, agent: a, secureOptions: NO_TLS12 | NO_TLS13 });
    const [err] = await once(req, 'error');
    assert.strictEqual(err.code, 'ERR_SSL_NO_PROTOCOLS_AVAILABLE');
  }
  assert.throws(() => https.get({ ...base, secureOptions: '1' }), { code: 'ERR_INVALID_ARG_TYPE' });
  // agent.request() with the agent's own.
  const only12 = new HttpsAgent({ ca: CA, secureOptions: NO_TLS13 });
  t.after(() => only12.destroy());
  assert.strictEqual(await (await only12.request(`https://localhost:${server.port}/`)).body.text(), 'TLSv1.2');
});

test('secureProtocol is read as Node reads it: by name, a value that is no string not read, an unknown name refused at once', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => res.end(req.socket.getProtocol()));
  // What a request with `secureProtocol` gets through `agent`: the protocol spoken, or the throw.
  const outcome = (agent, secureProtocol) => {
    try {
      return get({ host: 'localhost', port: server.port, agent, secureProtocol }).then((r) => r.body, (err) => `error ${err.code}`);
    } catch (err) {
      return `threw ${err.name} ${err.code}: ${err.message}`;
    }
  };
  const nodes = new https.Agent({ ca: CA });
  const ours = new HttpsAgent({ ca: CA });
  t.after(() => {
    nodes.destroy();
    ours.destroy();
  });
  // SSLv23's stop at TLS 1.2, as Node's own rule has them.
  const values = ['TLSv1_2_method', 'TLSv1_2_client_method', 'TLS_method', 'SSLv23_method', 'SSLv23_client_method', 'TLSv1_3_method', 'SSLv3_method', 'SSLv2_client_method', 'nope', 'constructor', '', null, false, 42, {}];
  for (const value of values) {
    assert.strictEqual(await outcome(ours, value), await outcome(nodes, value), util.inspect(value));
  }
  // A version given as well conflicts with any method (a truthy value), even one not read.
  for (const [secureProtocol, version] of [['TLS_method', { minVersion: 'TLSv1.2' }], ['TLSv1_2_method', { maxVersion: 'TLSv1.3' }], [42, { maxVersion: 'TLSv9' }], ['', { minVersion: 'TLSv1.3' }]]) {
    const options = { host: 'localhost', port: server.port, secureProtocol, ...version };
    let expected;
    assert.throws(() => https.get({ ...options, agent: nodes }), (err) => {
      expected = { name: err.name, code: err.code, message: err.message };
      return true;
    });
    assert.throws(() => https.get({ ...options, agent: ours }), expected, util.inspect(options));
  }
  // agent.request() reads its agent's the same way.
  const only12 = new HttpsAgent({ ca: CA, secureProtocol: 'TLSv1_2_method' });
  const none = new HttpsAgent({ ca: CA, secureProtocol: null });
  const unknown = new HttpsAgent({ ca: CA, secureProtocol: 'TLSv1_3_method' });
  t.after(() => [only12, none, unknown].forEach((a) => a.destroy()));
  const url = `https://localhost:${server.port}/`;
  assert.strictEqual(await (await only12.request(url)).body.text(), 'TLSv1.2');
  assert.strictEqual(await (await none.request(url)).body.text(), 'TLSv1.3');
  assert.throws(() => unknown.request(url), { name: 'TypeError', code: 'ERR_TLS_INVALID_PROTOCOL_METHOD', message: 'Unknown method: TLSv1_3_method' });
  // TLS before 1.2, which rustls does not speak: the request fails at the handshake, as Node's
  // does with a server of today (there the server's alert, EPROTO; here before a word is sent).
  for (const value of ['TLSv1_1_method', 'TLSv1_1_client_method', 'TLSv1_method', 'TLSv1_client_method']) {
    assert.match(await outcome(nodes, value), /^error /, value);
    assert.strictEqual(await outcome(ours, value), 'error ERR_SSL_NO_PROTOCOLS_AVAILABLE', value);
  }
  // A server's method.
  assert.throws(() => https.get({ host: 'localhost', port: server.port, agent: ours, secureProtocol: 'TLS_server_method' }), { code: 'ERR_HYPERAGENT_UNSUPPORTED' });
});

test("maxVersion before TLS 1.2 fails the request at the handshake with OpenSSL's code, as Node's, on both paths", async (t) => {
  const server = await httpsServer(t, {}, (req, res) => res.end('ok'));
  const node = new https.Agent({ ca: CA });
  const ours = new HttpsAgent({ ca: CA });
  const agentWide = new HttpsAgent({ ca: CA, maxVersion: 'TLSv1.1' });
  t.after(() => [node, ours, agentWide].forEach((a) => a.destroy()));
  for (const maxVersion of ['TLSv1.1', 'TLSv1']) {
    const options = { host: 'localhost', port: server.port, maxVersion };
    const expected = await getError({ ...options, agent: node });
    assert.strictEqual(expected.code, 'ERR_SSL_NO_PROTOCOLS_AVAILABLE');
    assert.strictEqual((await getError({ ...options, agent: ours })).code, expected.code, maxVersion);
  }
  await assert.rejects(agentWide.request(`https://localhost:${server.port}/`), { code: 'ERR_SSL_NO_PROTOCOLS_AVAILABLE' });
  // The agent is as good as before for the requests that follow.
  assert.strictEqual((await get({ host: 'localhost', port: server.port, agent: ours })).body, 'ok');
});

test('a ca value is read as Node reads it: its certificates up to the first that does not read', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => res.end('ok'));
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: server.port, agent };
  const text = CA.toString();
  const truncated = text.slice(0, text.length >> 1);
  const url = `https://localhost:${server.port}/`;
  // The certificates before a broken one are trusted; text or a key adds nothing.
  for (const ca of [text + truncated, [CA, 'nope'], [fixture('ca-key.pem'), CA]]) {
    assert.strictEqual((await get({ ...base, ca })).body, 'ok');
    const own = new HttpsAgent({ ca });
    t.after(() => own.destroy());
    assert.strictEqual(await (await own.request(url)).body.text(), 'ok');
  }
  // Nothing read: no trust, and the server is refused, as with Node's agent.
  for (const ca of [truncated + text, 'nope', fixture('ca-key.pem')]) {
    assert.strictEqual((await getError({ ...base, ca })).code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  }
});

test('a ca array or Buffer changed in place is trusted as it now is, as Node names it anew', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => {
    res.setHeader('connection', 'close');
    res.end('ok');
  });
  const agent = new HttpsAgent({ maxCachedSessions: 0 });
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: server.port, agent };
  const trust = [CA];
  assert.strictEqual((await get({ ...base, ca: trust })).body, 'ok');
  trust[0] = fixture('other-ca.pem');
  assert.strictEqual((await getError({ ...base, ca: trust })).code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  // One Buffer, its bytes those of the test CA, then of the other (padded with line feeds).
  const other = fixture('other-ca.pem');
  const bytes = Buffer.alloc(Math.max(CA.length, other.length), 10);
  CA.copy(bytes);
  assert.strictEqual((await get({ ...base, ca: bytes })).body, 'ok');
  bytes.fill(10);
  other.copy(bytes);
  assert.strictEqual((await getError({ ...base, ca: bytes })).code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
});

test("a name a checkServerIdentity of the program's let pass is checked by Node's own check on the next new session", async (t) => {
  // A certificate for example.com, asked for as localhost. On Node 20 a request's own
  // checkServerIdentity is not part of the pool name: both requests below share a key.
  const server = await httpsServer(t, { cert: 'wrong-host.pem', key: 'wrong-host-key.pem' }, (req, res) => {
    res.setHeader('connection', 'close');
    res.end('ok');
  });
  const agent = new HttpsAgent({ ca: CA, maxCachedSessions: 0 });
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: server.port, agent };
  assert.strictEqual((await get({ ...base, checkServerIdentity: () => undefined })).body, 'ok');
  // A new connection and a full handshake, checked by Node's own function: refused, as Node's
  // agent refuses it.
  assert.strictEqual((await getError(base)).code, 'ERR_TLS_CERT_ALTNAME_INVALID');
  await assert.rejects(agent.request(`https://localhost:${server.port}/`), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  // The program's check an agent's own, passing on agent.request(); then the agent's options
  // without it (read by each http.request()), so that Node's own checks the next session.
  const lenient = new HttpsAgent({ ca: CA, maxCachedSessions: 0, checkServerIdentity: () => undefined });
  t.after(() => lenient.destroy());
  assert.strictEqual(await (await lenient.request(`https://localhost:${server.port}/`)).body.text(), 'ok');
  delete lenient.options.checkServerIdentity;
  assert.strictEqual((await getError({ ...base, agent: lenient })).code, 'ERR_TLS_CERT_ALTNAME_INVALID');
});

test('mutual TLS: a server that wants a certificate it did not get is heard, on every path', async (t) => {
  const server = await httpsServer(t, { tls: { ca: CA, requestCert: true, rejectUnauthorized: true } });
  server.on('tlsClientError', () => {});
  const { Dispatcher } = require('..');
  const url = `https://localhost:${server.port}/`;
  // With TLS 1.3 the server refuses after the client's handshake: its alert comes after the
  // client has sent its request, and the server's close then resets the connection. As with
  // Node's own agent, the request fails with the alert, not with the reset a write met
  // (EPIPE) or hyper's closed connection (socket hang up). Fresh agents, a few times over:
  // which of the read and the write meets the close first varies.
  const alert = { code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', message: 'tlsv13 alert certificate required (SSL alert number 116)' };
  for (let i = 0; i < 5; i++) {
    const agent = new HttpsAgent({ ca: CA });
    const dispatcher = new Dispatcher({ ca: CA });
    try {
      assert.deepStrictEqual(pick(await getError({ host: 'localhost', port: server.port, agent })), alert, 'http.request()');
      await assert.rejects(agent.request(url), alert, 'agent.request()');
      const failed = await fetch(url, { dispatcher }).then(() => null, (err) => err);
      assert.deepStrictEqual(pick(failed.cause), alert, 'fetch');
    } finally {
      agent.destroy();
      dispatcher.destroy();
    }
  }
  function pick(err) {
    return { code: err.code, message: err.message };
  }
});

test('a handshake answered by something that is not TLS fails as Node fails it: EPROTO, OpenSSL\'s reason', async (t) => {
  // A plain HTTP server (a common mistake: https:// to an http port), a record too long, and
  // a record out of turn.
  const replies = [
    ['wrong version number', Buffer.from('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n')],
    ['packet length too long', Buffer.concat([Buffer.from([0x16, 0x03, 0x03, 0xff, 0xff]), Buffer.alloc(64)])],
    ['unexpected message', Buffer.concat([Buffer.from([0x17, 0x03, 0x03, 0x00, 0x10]), Buffer.alloc(16)])],
  ];
  for (const [reason, reply] of replies) {
    const server = await rawServer(t, (socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.end(reply));
    });
    const agent = new HttpsAgent({ ca: CA });
    t.after(() => agent.destroy());
    const expected = { code: 'EPROTO', syscall: 'write', message: `write EPROTO ${reason}` };
    const err = await getError({ host: 'localhost', port: server.port, agent });
    assert.deepStrictEqual({ code: err.code, syscall: err.syscall, message: err.message }, expected, reason);
    assert.strictEqual(util.getSystemErrorName(err.errno), 'EPROTO');
    await assert.rejects(agent.request(`https://localhost:${server.port}/`), expected, reason);
  }
});

test('mutual TLS from a PKCS#12 file (pfx): modern and legacy encryption, both paths', async (t) => {
  const server = await httpsServer(t, { tls: { ca: CA, requestCert: true, rejectUnauthorized: true } }, (req, res) => {
    res.end(req.socket.getPeerCertificate().subject.CN);
  });
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: server.port, agent };
  // OpenSSL 3's default (PBES2, AES-256-CBC), with the top-level passphrase.
  assert.strictEqual((await get({ ...base, pfx: fixture('client.p12'), passphrase: 'secret' })).body, 'hyperagent client');
  // The legacy form (RC2-40 and 3DES, SHA-1 MAC), in the array form with its own passphrase.
  const legacy = [{ buf: fixture('client-legacy.p12'), passphrase: 'secret' }];
  assert.strictEqual((await get({ ...base, pfx: legacy })).body, 'hyperagent client');
  // Neither MAC nor encryption, and no passphrase: read as it is, as OpenSSL reads it.
  assert.strictEqual((await get({ ...base, pfx: fixture('client-plain.p12') })).body, 'hyperagent client');
  // The promise path, with pfx among the agent's options.
  const promise = new HttpsAgent({ ca: CA, pfx: fixture('client.p12'), passphrase: 'secret' });
  t.after(() => promise.destroy());
  const res = await promise.request(`https://localhost:${server.port}/`);
  assert.strictEqual(await res.body.text(), 'hyperagent client');
});

test('the certificate authorities in a pfx are trusted, as Node trusts them', async (t) => {
  // No `ca`: the server's chain ends at the root that client.p12 carries (client-legacy.p12
  // carries none, so the same server is not trusted with it).
  const server = await httpsServer(t, { tls: { ca: CA, requestCert: true } }, (req, res) => res.end('ok'));
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: server.port, agent, passphrase: 'secret' };
  const r = await get({ ...base, pfx: fixture('client.p12') });
  assert.strictEqual(r.authorized, true);
  assert.strictEqual(r.body, 'ok');
  const err = await getError({ ...base, pfx: fixture('client-legacy.p12') });
  assert.strictEqual(err.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
});

test('a pfx that cannot be read fails at once, with Node\'s errors', (t) => {
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: 1, agent };
  assert.throws(() => https.get({ ...base, pfx: fixture('client.p12'), passphrase: 'wrong' }), {
    code: 'ERR_OSSL_PKCS12_MAC_VERIFY_FAILURE',
    message: 'mac verify failure',
  });
  // No passphrase: the empty one, which is not this file's.
  assert.throws(() => https.get({ ...base, pfx: fixture('client.p12') }), { code: 'ERR_OSSL_PKCS12_MAC_VERIFY_FAILURE' });
  // A passphrase for a file without a MAC: nothing can check it (Node's message).
  for (const file of ['client-nomac.p12', 'client-plain.p12']) {
    assert.throws(() => https.get({ ...base, pfx: fixture(file), passphrase: 'secret' }), {
      code: 'ERR_OSSL_PKCS12_MAC_ABSENT',
      message: 'mac absent',
    }, file);
  }
  // Without one, the encrypted file without a MAC fails to decrypt.
  assert.throws(() => https.get({ ...base, pfx: fixture('client-nomac.p12') }), {
    code: 'ERR_OSSL_BAD_DECRYPT',
    message: 'bad decrypt',
  });
  assert.throws(() => https.get({ ...base, pfx: Buffer.from('not a pfx'), passphrase: 'x' }), {
    code: 'ERR_CRYPTO_OPERATION_FAILED',
    message: /^Unable to load PFX certificate/,
  });
  assert.throws(() => https.get({ ...base, pfx: 5 }), { code: 'ERR_CRYPTO_OPERATION_FAILED', message: 'Unable to load PFX certificate' });
  assert.throws(() => https.get({ ...base, pfx: [{ buf: fixture('client.p12'), passphrase: 5 }] }), { code: 'ERR_INVALID_ARG_TYPE' });
  // The promise path throws the same, at once.
  const promise = new HttpsAgent({ pfx: fixture('client.p12'), passphrase: 'wrong' });
  t.after(() => promise.destroy());
  assert.throws(() => promise.request('https://localhost:1/'), { code: 'ERR_OSSL_PKCS12_MAC_VERIFY_FAILURE' });
});

test("a TLS socket answers TLSSocket's questions as Node's does; what rustls cannot do fails with a code", async (t) => {
  const server = await httpsServer(t, { tls: { ca: CA, requestCert: true, rejectUnauthorized: false } });
  // Its server speaks P-256 alone.
  const p256 = await httpsServer(t, { tls: { ecdhCurve: 'prime256v1' } });
  const client = { cert: fixture('client.pem'), key: fixture('client-key.pem') };
  const answers = (agent, port, options = {}) => new Promise((resolve, reject) => {
    https.get({ host: 'localhost', port, agent, ...options }, (res) => {
      const socket = res.socket;
      try {
        const x509 = socket.getX509Certificate();
        const seen = {
          certificate: socket.getCertificate(),
          x509: x509 && x509.fingerprint256,
          ephemeral: socket.getEphemeralKeyInfo(),
          disabled: socket.disableRenegotiation(),
        };
        socket.renegotiate({}, (err) => {
          seen.renegotiate = err.code;
          res.resume().on('end', () => {
            socket.destroy();
            seen.destroyed = [socket.getCertificate(), socket.getEphemeralKeyInfo()];
            resolve(seen);
          });
        });
      } catch (err) {
        res.destroy();
        reject(err);
      }
    }).on('error', reject);
  });
  // The key exchange is rustls's, which has no post-quantum group (Node 24's OpenSSL speaks
  // X25519MLKEM768 to Node's server), in Node 20's and 24's words (Node 22 gives {} for it).
  const x25519 = { type: 'ECDH', name: 'X25519', size: 253 };
  const cases = [
    ['no certificate', server.port, {}, x25519],
    ['a client certificate', server.port, client, x25519],
    ['P-256', p256.port, {}, { type: 'ECDH', name: 'prime256v1', size: 256 }],
  ];
  for (const [name, port, options, ephemeral] of cases) {
    const node = new https.Agent({ ca: CA });
    const ours = new HttpsAgent({ ca: CA });
    t.after(() => ours.destroy());
    const expected = await answers(node, port, options);
    const seen = await answers(ours, port, options);
    assert.deepStrictEqual(seen.ephemeral, ephemeral, name);
    assert.deepStrictEqual({ ...seen, ephemeral: null }, { ...expected, ephemeral: null }, name);
  }
  // Past what rustls lets a socket do: Node's errors for bad arguments, a code for the rest.
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  await new Promise((resolve, reject) => {
    https.get({ host: 'localhost', port: server.port, agent }, (res) => {
      const socket = res.socket;
      res.resume().on('end', resolve);
      try {
        assert.strictEqual(socket.setMaxSendFragment(1024), false);
        assert.throws(() => socket.setMaxSendFragment('1024'), { code: 'ERR_INVALID_ARG_TYPE' });
        assert.throws(() => socket.renegotiate(null), { code: 'ERR_INVALID_ARG_TYPE' });
        for (const method of ['exportKeyingMaterial', 'getFinished', 'getPeerFinished', 'getSharedSigalgs']) {
          assert.throws(() => socket[method](16, 'EXPORTER-test'), { code: 'ERR_HYPERAGENT_UNSUPPORTED' }, method);
        }
      } catch (err) {
        reject(err);
      }
    }).on('error', reject);
  });
});

test("an encrypted key's passphrase is checked and read as Node's secure context reads it", (t) => {
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  const base = { host: 'localhost', port: 1, agent, cert: fixture('client.pem'), key: fixture('client-key-encrypted.pem') };
  // None, or null: the empty passphrase, which does not decrypt this key.
  for (const passphrase of [undefined, null]) {
    assert.throws(() => https.get({ ...base, passphrase }), { code: 'ERR_OSSL_BAD_DECRYPT' }, String(passphrase));
  }
  assert.throws(() => https.get({ ...base, passphrase: 'wrong' }), { code: 'ERR_OSSL_BAD_DECRYPT' });
  // Anything but a string, also a Buffer, is refused, for the top-level passphrase or a key's own.
  const notString = { code: 'ERR_INVALID_ARG_TYPE', message: /"options\.passphrase" property must be of type string/ };
  assert.throws(() => https.get({ ...base, passphrase: Buffer.from('secret') }), notString);
  assert.throws(() => https.get({ ...base, passphrase: 42 }), notString);
  assert.throws(() => https.get({ ...base, key: [{ pem: base.key, passphrase: Buffer.from('secret') }] }), notString);
  // An unencrypted key is not read with the passphrase, but it is still checked.
  assert.throws(() => https.get({ ...base, key: fixture('client-key.pem'), passphrase: Buffer.from('x') }), notString);
  // The promise path throws the same, at once.
  const promise = new HttpsAgent({ cert: base.cert, key: base.key });
  t.after(() => promise.destroy());
  assert.throws(() => promise.request('https://localhost:1/'), { code: 'ERR_OSSL_BAD_DECRYPT' });
});

test('crl: a revoked server certificate fails as in Node, on both paths', async (t) => {
  const server = await httpsServer(t);
  const base = { host: 'localhost', port: server.port };
  const crls = (...names) => names.map((n) => fixture(n));
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  // Every certificate of the chain is covered by a current CRL of its issuer.
  const good = await get({ ...base, agent, crl: crls('crl-root.pem', 'crl-intermediate.pem') });
  assert.strictEqual(good.authorized, true);
  const revoked = await getError({ ...base, agent, crl: crls('crl-root.pem', 'crl-intermediate-revoked.pem') });
  assert.strictEqual(revoked.code, 'CERT_REVOKED');
  assert.strictEqual(revoked.message, 'certificate revoked');
  // As OpenSSL with Node's flags: a certificate without a CRL of its issuer fails, and so does
  // an expired CRL.
  assert.strictEqual((await getError({ ...base, agent, crl: fixture('crl-intermediate.pem') })).code, 'UNABLE_TO_GET_CRL');
  const expired = await getError({ ...base, agent, crl: crls('crl-root-expired.pem', 'crl-intermediate.pem') });
  assert.strictEqual(expired.code, 'CRL_HAS_EXPIRED');
  // A CRL whose signature does not verify (its last byte flipped).
  const der = Buffer.from(fixture('crl-root.pem').toString().replace(/-----[^-]+-----|\s/g, ''), 'base64');
  der[der.length - 1] ^= 0xff;
  const forged = `-----BEGIN X509 CRL-----\n${der.toString('base64')}\n-----END X509 CRL-----\n`;
  const unsigned = await getError({ ...base, agent, crl: [forged, fixture('crl-intermediate.pem')] });
  assert.strictEqual(unsigned.code, 'CRL_SIGNATURE_FAILURE');
  assert.strictEqual(unsigned.message, 'CRL signature failure');
  // rejectUnauthorized: false connects, and says why the server is not authorized.
  const lax = await get({ ...base, agent, crl: crls('crl-root.pem', 'crl-intermediate-revoked.pem'), rejectUnauthorized: false });
  assert.strictEqual(lax.authorized, false);
  assert.strictEqual(lax.authorizationError, 'CERT_REVOKED');
  // agent.request(), with crl among the agent's options.
  const promise = new HttpsAgent({ ca: CA, crl: crls('crl-root.pem', 'crl-intermediate-revoked.pem') });
  t.after(() => promise.destroy());
  await assert.rejects(promise.request(`https://localhost:${server.port}/`), { code: 'CERT_REVOKED' });
  // A crl that is not one fails at once.
  assert.throws(() => https.get({ ...base, agent, crl: 'not a crl' }), {
    code: 'ERR_CRYPTO_OPERATION_FAILED',
    message: 'Failed to parse CRL',
  });
});

test('sessions resume on a new connection: the server sees isSessionReused()', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => res.end(String(req.socket.isSessionReused())));
  const agent = new HttpsAgent({ ca: CA, maxSockets: 1 });
  t.after(() => agent.destroy());
  const first = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(first.body, 'false');
  // Close the pooled connection: the next request must open a new one and resume.
  agent.destroy();
  await until(() => server.connections.every((s) => s.destroyed), 5000, 'the server to see the close');
  const second = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(second.body, 'true');
  assert.strictEqual(second.resumed, true);
  assert.strictEqual(server.connections.length, 2);
});

test('maxCachedSessions: 0 turns resumption off', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => res.end(String(req.socket.isSessionReused())));
  const agent = new HttpsAgent({ ca: CA, maxCachedSessions: 0 });
  t.after(() => agent.destroy());
  await get({ host: 'localhost', port: server.port, agent });
  agent.destroy();
  await until(() => server.connections.every((s) => s.destroyed), 5000, 'the server to see the close');
  assert.strictEqual((await get({ host: 'localhost', port: server.port, agent })).body, 'false');
});

test('maxCachedSessions counts the servers of the whole agent, as Node\'s: past it, the first cached loses its sessions', async (t) => {
  const servers = [await httpsServer(t), await httpsServer(t)];
  // Requests to A, A, B, A, each on a new connection; whether each resumed a session.
  const run = async (agent) => {
    const seen = [];
    for (const which of [0, 0, 1, 0]) {
      const r = await get({ host: 'localhost', port: servers[which].port, agent, ca: CA });
      seen.push(r.resumed);
    }
    agent.destroy();
    return seen;
  };
  const agents = (options) => [new https.Agent({ keepAlive: false, ...options }), new HttpsAgent({ keepAlive: false, ...options })];
  const [node, ours] = agents({ maxCachedSessions: 1 });
  t.after(() => ours.destroy());
  // B's session takes the one place: A's next connection is a full handshake.
  assert.deepStrictEqual(await run(node), [false, true, false, false]);
  assert.deepStrictEqual(await run(ours), [false, true, false, false]);
  // With room for both (the default, 100), A's session is still there.
  const [node100, ours100] = agents({});
  t.after(() => ours100.destroy());
  assert.deepStrictEqual(await run(node100), [false, true, false, true]);
  assert.deepStrictEqual(await run(ours100), [false, true, false, true]);
  // agent.request() counts in the same place: its session for B evicts A's.
  const both = new HttpsAgent({ ca: CA, keepAlive: false, maxCachedSessions: 1 });
  t.after(() => both.destroy());
  assert.strictEqual((await get({ host: 'localhost', port: servers[0].port, agent: both })).resumed, false);
  assert.strictEqual((await get({ host: 'localhost', port: servers[0].port, agent: both })).resumed, true);
  await (await both.request(`https://localhost:${servers[1].port}/`)).body.dump();
  assert.strictEqual((await get({ host: 'localhost', port: servers[0].port, agent: both })).resumed, false);
});

test('TLS 1.2 and its cipher names, ALPN negotiation', async (t) => {
  const server = await httpsServer(t, { tls: { ALPNProtocols: ['http/1.1'] } });
  const agent = new HttpsAgent({ ca: CA, maxVersion: 'TLSv1.2', ALPNProtocols: ['h2', 'http/1.1'] });
  t.after(() => agent.destroy());
  const r = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(r.protocol, 'TLSv1.2');
  assert.match(r.cipher.name, /^ECDHE-RSA-(AES(128|256)-GCM-SHA(256|384)|CHACHA20-POLY1305)$/);
  assert.match(r.cipher.standardName, /^TLS_ECDHE_RSA_WITH_/);
  assert.strictEqual(r.cipher.version, 'TLSv1.2');
  assert.strictEqual(r.alpnProtocol, 'http/1.1');
});

// The key log lines of a server's handshakes, as Node's TLS server writes them (OpenSSL's):
// the client's lines must be the same text.
function serverKeylog(server) {
  const lines = [];
  server.on('keylog', (line) => lines.push(line.toString('latin1')));
  return lines;
}

const TLS13_LABELS = ['CLIENT_HANDSHAKE_TRAFFIC_SECRET', 'CLIENT_TRAFFIC_SECRET_0', 'EXPORTER_SECRET',
  'SERVER_HANDSHAKE_TRAFFIC_SECRET', 'SERVER_TRAFFIC_SECRET_0'];

// The lines of one handshake, by the client random they name.
function ofHandshake(lines, random) {
  return lines.filter((l) => l.split(' ')[1] === random).sort();
}

test("'keylog': each handshake's keys on the agent with its socket and on the socket, before 'secureConnect', as the server logs them", async (t) => {
  const server = await httpsServer(t, { tls: { maxVersion: 'TLSv1.3' } });
  const logged = serverKeylog(server);
  const agent = new HttpsAgent({ ca: CA, keepAlive: true });
  t.after(() => agent.destroy());
  const seen = [];
  agent.on('keylog', (line, socket) => seen.push({ line, socket }));
  const order = [];
  let reqSocket = null;
  const req = https.get({ host: 'localhost', port: server.port, agent });
  req.on('socket', (socket) => {
    reqSocket = socket;
    socket.on('keylog', (line) => order.push(`keylog ${line.toString().split(' ')[0]}`));
    socket.on('secureConnect', () => order.push('secureConnect'));
  });
  const res = await once(req, 'response').then(([r]) => r);
  res.resume();
  await once(res, 'end');
  assert.strictEqual(seen.length, 5);
  for (const { line, socket } of seen) {
    assert.ok(Buffer.isBuffer(line));
    assert.strictEqual(socket, reqSocket);
    assert.strictEqual(line.at(-1), 0x0a, 'a line ends with its line feed');
  }
  const lines = seen.map((s) => s.line.toString('latin1'));
  const random = lines[0].split(' ')[1];
  assert.match(random, /^[0-9a-f]{64}$/);
  assert.deepStrictEqual(lines.map((l) => l.split(' ')[0]).sort(), TLS13_LABELS);
  assert.deepStrictEqual(lines.slice().sort(), ofHandshake(logged, random));
  assert.deepStrictEqual(order, [...lines.map((l) => `keylog ${l.split(' ')[0]}`), 'secureConnect']);

  // agent.request()'s connections have no socket: the agent's event says null.
  seen.length = 0;
  const r = await agent.request(`https://localhost:${server.port}/`, { reset: true });
  assert.strictEqual(await r.body.text(), 'secure /');
  assert.strictEqual(seen.length, 5);
  assert.ok(seen.every((s) => s.socket === null));
  const promised = seen.map((s) => s.line.toString('latin1'));
  assert.notStrictEqual(promised[0].split(' ')[1], random, 'a new connection, a new handshake');
  assert.deepStrictEqual(promised.slice().sort(), ofHandshake(logged, promised[0].split(' ')[1]));
});

test("'keylog': a handshake that fails reports the keys it had before its error, on both paths", async (t) => {
  const server = await httpsServer(t, { tls: { maxVersion: 'TLSv1.3' } });
  const logged = serverKeylog(server);
  // Another CA: the server's certificate fails after the handshake's keys were made.
  const agent = new HttpsAgent({ ca: fixture('other-ca.pem') });
  t.after(() => agent.destroy());
  const order = [];
  agent.on('keylog', (line) => order.push(line.toString('latin1')));
  const err = await getError({ host: 'localhost', port: server.port, agent });
  order.push(err.code);
  await assert.rejects(agent.request(`https://localhost:${server.port}/`), { code: err.code });
  order.push(err.code);
  const labels = order.map((l) => l.split(' ')[0]);
  const handshake = ['CLIENT_HANDSHAKE_TRAFFIC_SECRET', 'SERVER_HANDSHAKE_TRAFFIC_SECRET'];
  assert.deepStrictEqual(labels.slice(0, 2).sort(), handshake);
  assert.deepStrictEqual(labels.slice(3, 5).sort(), handshake);
  assert.deepStrictEqual([labels[2], labels[5]], [err.code, err.code]);
  assert.strictEqual(err.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  for (const line of [...order.slice(0, 2), ...order.slice(3, 5)]) {
    assert.ok(logged.includes(line), `the server logged ${line.slice(0, 40)}`);
  }
});

test("'keylog' over TLS 1.2, on a socket's own listener, and on an agent that was already connected", async (t) => {
  const server = await httpsServer(t, { tls: { maxVersion: 'TLSv1.2' } });
  const logged = serverKeylog(server);
  const agent = new HttpsAgent({ ca: CA, keepAlive: true, maxSockets: 1 });
  t.after(() => agent.destroy());
  // A first connection with no 'keylog' listener anywhere: the agent attached none to its
  // socket (as Node's agent attaches its own only once the agent is listened to).
  const first = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(first.body, 'secure /');
  assert.strictEqual(first.socket.listenerCount('keylog'), 0);
  // A listener on the socket of a request whose connection is new (the idle one is dropped).
  agent.destroy();
  await until(() => server.connections.every((s) => s.destroyed), 5000, 'the server to see the close');
  const own = [];
  const req = https.get({ host: 'localhost', port: server.port, agent });
  req.on('socket', (socket) => socket.on('keylog', (line) => own.push(line.toString('latin1'))));
  const [res] = await once(req, 'response');
  res.resume();
  await once(res, 'end');
  assert.strictEqual(own.length, 1);
  assert.match(own[0], /^CLIENT_RANDOM [0-9a-f]{64} [0-9a-f]{96}\n$/);
  assert.ok(logged.includes(own[0]), 'the server logged the same master secret');
  // A listener added to the agent while a connection is open (Node 20's own agent throws here)
  // reports the handshakes that come after.
  const later = [];
  agent.on('keylog', (line, socket) => later.push([line.toString('latin1'), socket]));
  agent.destroy();
  await until(() => server.connections.every((s) => s.destroyed), 5000, 'the server to see the close');
  const third = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(later.length, 1);
  assert.strictEqual(later[0][1], third.socket);
  assert.ok(logged.includes(later[0][0]));
  assert.notStrictEqual(later[0][0], own[0]);
});

test('a server that only speaks TLS 1.3 fails a TLS 1.2 client with a protocol error', async (t) => {
  const server = await httpsServer(t, { tls: { minVersion: 'TLSv1.3' } });
  const agent = new HttpsAgent({ ca: CA, maxVersion: 'TLSv1.2' });
  t.after(() => agent.destroy());
  // As Node reports it: EPROTO on the handshake's write, with OpenSSL's alert text.
  const err = await getError({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(err.code, 'EPROTO');
  assert.strictEqual(util.getSystemErrorName(err.errno), 'EPROTO');
  assert.strictEqual(err.syscall, 'write');
  assert.match(err.message, /^write EPROTO tlsv1 alert protocol version: SSL alert number 70$/);
});

test('an EC server certificate works', async (t) => {
  const server = await httpsServer(t, { cert: 'ec-localhost.pem', key: 'ec-localhost-key.pem' });
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const r = await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(r.authorized, true);
});

test('OpenSSL cipher strings Node accepts select the same kind of suites, with Node\'s agent and ours', async (t) => {
  const server = await httpsServer(t);
  const agents = { ours: new HttpsAgent({ ca: CA }), node: new https.Agent({ ca: CA }) };
  t.after(() => Object.values(agents).forEach((a) => a.destroy()));
  const cases = {
    DEFAULT: { protocol: 'TLSv1.3' },
    'HIGH:!aNULL:!MD5': { protocol: 'TLSv1.3' },
    'ALL@SECLEVEL=0': { protocol: 'TLSv1.3' },
    'ECDHE+AESGCM': { protocol: 'TLSv1.3' },
    // TLS 1.2 only (no TLS 1.3 suite can be chosen once TLS 1.3 is off): the list decides.
    'ECDHE+AESGCM+AES128': { maxVersion: 'TLSv1.2', cipher: 'ECDHE-RSA-AES128-GCM-SHA256' },
    'ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384': { maxVersion: 'TLSv1.2', cipher: 'ECDHE-RSA-CHACHA20-POLY1305' },
    'AES256:-ECDSA': { maxVersion: 'TLSv1.2', cipher: 'ECDHE-RSA-AES256-GCM-SHA384' },
    // TLS 1.3 names alone: TLS 1.3 with that suite.
    TLS_AES_128_GCM_SHA256: { protocol: 'TLSv1.3', cipher: 'TLS_AES_128_GCM_SHA256' },
  };
  for (const [ciphers, want] of Object.entries(cases)) {
    for (const [which, agent] of Object.entries(agents)) {
      const r = await get({ host: 'localhost', port: server.port, agent, ciphers, maxVersion: want.maxVersion });
      assert.strictEqual(r.body, 'secure /', `${which} ${ciphers}`);
      if (want.protocol) assert.strictEqual(r.protocol, want.protocol, `${which} ${ciphers}`);
      if (want.cipher) assert.strictEqual(r.cipher.name, want.cipher, `${which} ${ciphers}`);
    }
  }
});

test("ecdhCurve picks and orders the key exchange groups as with Node's agent, on both paths", async (t) => {
  const open = await httpsServer(t);
  // A server that takes P-384 alone.
  const strict = await httpsServer(t, { tls: { ecdhCurve: 'P-384' } });
  const agents = { ours: new HttpsAgent({ ca: CA }), node: new https.Agent({ ca: CA }) };
  t.after(() => Object.values(agents).forEach((a) => a.destroy()));
  const outcome = async (server, agent, ecdhCurve) => {
    try {
      const req = https.get({ host: 'localhost', port: server.port, agent, ecdhCurve });
      const [res] = await once(req, 'response');
      const { name } = res.socket.getEphemeralKeyInfo();
      res.resume();
      await once(res, 'end');
      return name;
    } catch (err) {
      return err.code;
    }
  };
  const cases = [
    [open, undefined, 'X25519'],
    [open, 'auto', 'X25519'],
    [open, 'P-256:P-384', 'prime256v1'],
    [open, 'secp384r1', 'secp384r1'],
    [strict, undefined, 'secp384r1'],
    [strict, 'P-256:P-384', 'secp384r1'],
    [strict, 'X25519', 'EPROTO'],
    [strict, 'prime256v1', 'EPROTO'],
    [open, 'foo', 'ERR_CRYPTO_OPERATION_FAILED'],
    [open, 'X25519:', 'ERR_CRYPTO_OPERATION_FAILED'],
    [open, 42, 'ERR_INVALID_ARG_TYPE'],
  ];
  for (const [server, curve, want] of cases) {
    for (const [which, agent] of Object.entries(agents)) {
      // Node's default groups are its OpenSSL's (X25519MLKEM768 first from Node 22.20 and 24).
      if (which === 'node' && server === open && (curve === undefined || curve === 'auto')) continue;
      assert.strictEqual(await outcome(server, agent, curve), want, `${which} ${server === strict ? 'P-384 server' : 'server'} ${curve}`);
    }
  }
  // A group rustls does not offer (P-521) is passed over; alone, it fails at once.
  assert.strictEqual(await outcome(strict, agents.ours, 'P-521:P-384'), 'secp384r1');
  assert.strictEqual(await outcome(open, agents.ours, 'P-521'), 'ERR_HYPERAGENT_UNSUPPORTED');
  // agent.request(): the agent's option.
  const url = `https://localhost:${strict.port}/`;
  for (const [ecdhCurve, want] of [['P-384', 200], ['X25519', 'EPROTO']]) {
    const agent = new HttpsAgent({ ca: CA, ecdhCurve });
    t.after(() => agent.destroy());
    const got = await agent.request(url).then(async (res) => {
      await res.body.text();
      return res.statusCode;
    }, (err) => err.code);
    assert.strictEqual(got, want, `agent.request() ${ecdhCurve}`);
  }
});

test("tls.DEFAULT_ECDH_CURVE and tls.DEFAULT_CIPHERS, as a program set them, are the defaults of new pool keys, as with Node's agent", async (t) => {
  const server = await httpsServer(t);
  const saved = [tls.DEFAULT_ECDH_CURVE, tls.DEFAULT_CIPHERS];
  t.after(() => {
    [tls.DEFAULT_ECDH_CURVE, tls.DEFAULT_CIPHERS] = saved;
  });
  const seen = async (agent) => {
    const r = await get({ host: 'localhost', port: server.port, agent });
    return [r.socket.getEphemeralKeyInfo().name, r.cipher.name];
  };
  tls.DEFAULT_ECDH_CURVE = 'P-384';
  tls.DEFAULT_CIPHERS = 'TLS_AES_128_GCM_SHA256';
  for (const [which, make] of [['node', () => new https.Agent({ ca: CA })], ['ours', () => new HttpsAgent({ ca: CA })]]) {
    const agent = make();
    t.after(() => agent.destroy());
    assert.deepStrictEqual(await seen(agent), ['secp384r1', 'TLS_AES_128_GCM_SHA256'], which);
  }
  [tls.DEFAULT_ECDH_CURVE, tls.DEFAULT_CIPHERS] = saved;
  const ours = new HttpsAgent({ ca: CA });
  t.after(() => ours.destroy());
  assert.deepStrictEqual(await seen(ours), ['X25519', 'TLS_AES_256_GCM_SHA384']);
});

test("sigalgs limits the signatures offered, taken and made, as with Node's agent, on both paths", async (t) => {
  // An RSA server (TLS 1.3 signs with RSA-PSS only), and an ECDSA one that asks for a client
  // certificate and says whether it got one.
  const rsa = await httpsServer(t);
  const ec = await httpsServer(t, {
    cert: 'ec-localhost.pem',
    key: 'ec-localhost-key.pem',
    tls: { ca: CA, requestCert: true, rejectUnauthorized: false },
  }, (req, res) => res.end(req.socket.getPeerCertificate().subject ? 'client certificate' : 'none'));
  const identity = { ca: CA, cert: fixture('client.pem'), key: fixture('client-key.pem') };
  const agents = { ours: new HttpsAgent(identity), node: new https.Agent(identity) };
  t.after(() => Object.values(agents).forEach((a) => a.destroy()));
  const outcome = (server, agent, sigalgs, maxVersion) => get({ host: 'localhost', port: server.port, agent, sigalgs, maxVersion })
    .then((r) => r.body, (err) => err.code);
  const cases = [
    [rsa, undefined, undefined, 'secure /'],
    [rsa, 'RSA-PSS+SHA256', undefined, 'secure /'],
    [rsa, 'rsa_pss_rsae_sha512:ecdsa_secp256r1_sha256', undefined, 'secure /'],
    [rsa, 'ECDSA+SHA256', undefined, 'EPROTO'],
    [rsa, 'ed25519', undefined, 'EPROTO'],
    // PKCS#1 signs no TLS 1.3 handshake.
    [rsa, 'RSA+SHA256', undefined, 'EPROTO'],
    [rsa, 'RSA+SHA256', 'TLSv1.2', 'secure /'],
    [rsa, 'ECDSA+SHA256', 'TLSv1.2', 'EPROTO'],
    // The client's RSA key signs with a scheme named, or its certificate is not sent.
    [ec, undefined, undefined, 'client certificate'],
    [ec, 'ECDSA+SHA256', undefined, 'none'],
    [ec, 'ECDSA+SHA256:RSA-PSS+SHA256', undefined, 'client certificate'],
    [ec, 'ECDSA+SHA256:RSA+SHA256', undefined, 'none'],
    [ec, 'ECDSA+SHA256:RSA+SHA256', 'TLSv1.2', 'client certificate'],
  ];
  for (const [server, sigalgs, maxVersion, want] of cases) {
    for (const [which, agent] of Object.entries(agents)) {
      assert.strictEqual(await outcome(server, agent, sigalgs, maxVersion), want, `${which} ${sigalgs} ${maxVersion}`);
    }
  }
  // What is not a list of signature algorithms is refused at once: Node's codes where it has
  // them (OpenSSL's error for an unknown name has none).
  for (const [sigalgs, code] of [['', 'ERR_INVALID_ARG_VALUE'], [42, 'ERR_INVALID_ARG_TYPE'], ['RSA+MD5', 'ERR_INVALID_ARG_VALUE'], ['foo:RSA-PSS+SHA256', 'ERR_INVALID_ARG_VALUE']]) {
    const fresh = { node: new https.Agent(identity), ours: new HttpsAgent(identity) };
    t.after(() => Object.values(fresh).forEach((a) => a.destroy()));
    assert.throws(() => https.get({ host: 'localhost', port: rsa.port, agent: fresh.node, sigalgs }), `node ${sigalgs}`);
    assert.throws(() => https.get({ host: 'localhost', port: rsa.port, agent: fresh.ours, sigalgs }), { code }, `ours ${sigalgs}`);
  }
  // Schemes rustls does not speak are passed over; alone, they fail at once.
  assert.strictEqual(await outcome(rsa, agents.ours, 'DSA+SHA256:RSA-PSS+SHA256'), 'secure /');
  assert.throws(() => https.get({ host: 'localhost', port: rsa.port, agent: agents.ours, sigalgs: 'DSA+SHA256' }), { code: 'ERR_HYPERAGENT_UNSUPPORTED' });
  // agent.request(): the agent's option.
  for (const [sigalgs, want] of [['RSA-PSS+SHA256', 200], ['ECDSA+SHA256', 'EPROTO']]) {
    const agent = new HttpsAgent({ ca: CA, sigalgs });
    t.after(() => agent.destroy());
    const got = await agent.request(`https://localhost:${rsa.port}/`).then(async (res) => {
      await res.body.text();
      return res.statusCode;
    }, (err) => err.code);
    assert.strictEqual(got, want, `agent.request() ${sigalgs}`);
  }
});

test('an X.509 version 1 certificate: reached with rejectUnauthorized false, trusted given in ca, refused otherwise, as with Node\'s agent', async (t) => {
  const server = await httpsServer(t, { cert: 'v1-localhost.pem', key: 'v1-localhost-key.pem' });
  const V1 = fixture('v1-localhost.pem');
  const configs = {
    'rejectUnauthorized: false': { rejectUnauthorized: false },
    'rejectUnauthorized: false, TLS 1.2': { rejectUnauthorized: false, maxVersion: 'TLSv1.2' },
    'in ca': { ca: V1 },
    'in ca, TLS 1.2': { ca: V1, maxVersion: 'TLSv1.2' },
    default: {},
  };
  const seen = {};
  for (const [name, options] of Object.entries(configs)) {
    for (const [which, make] of Object.entries({ node: (o) => new https.Agent(o), ours: (o) => new HttpsAgent(o) })) {
      const agent = make(options);
      t.after(() => agent.destroy());
      const outcome = await get({ host: 'localhost', port: server.port, agent }).then(
        (r) => ({ body: r.body, authorized: r.authorized, authorizationError: r.authorizationError ?? null }),
        (err) => ({ code: err.code }),
      );
      seen[`${which} ${name}`] = outcome;
      if (which === 'ours') {
        // agent.request() on the same agent alike.
        const promised = await agent.request(`https://localhost:${server.port}/`).then((res) => res.body.text(), (err) => err.code);
        assert.strictEqual(promised, outcome.body ?? outcome.code, `agent.request() ${name}`);
      }
    }
    assert.deepStrictEqual(seen[`ours ${name}`], seen[`node ${name}`], name);
  }
  assert.strictEqual(seen['ours rejectUnauthorized: false'].body, 'secure /');
  assert.strictEqual(seen['ours in ca'].authorized, true);
  assert.strictEqual(seen['ours default'].code, 'DEPTH_ZERO_SELF_SIGNED_CERT');
});

test('an X.509 version 1 leaf issued by a trusted root is trusted, as with Node\'s agent', async (t) => {
  const server = await httpsServer(t, { cert: 'v1-leaf.pem', key: 'v1-leaf-key.pem' });
  const seen = {};
  for (const [which, make] of Object.entries({ node: (o) => new https.Agent(o), ours: (o) => new HttpsAgent(o) })) {
    const agent = make({ ca: CA });
    t.after(() => agent.destroy());
    // Its name is its CN (version 1 has no subjectAltName), checked by checkServerIdentity.
    const r = await get({ host: 'localhost', port: server.port, agent });
    const wrong = await getError({ host: '127.0.0.1', port: server.port, agent });
    seen[which] = { body: r.body, authorized: r.authorized, wrong: wrong.code };
    if (which === 'ours') {
      const res = await agent.request(`https://localhost:${server.port}/`);
      assert.strictEqual(await res.body.text(), 'secure /');
    }
  }
  assert.deepStrictEqual(seen.ours, seen.node);
  assert.deepStrictEqual(seen.ours, { body: 'secure /', authorized: true, wrong: 'ERR_TLS_CERT_ALTNAME_INVALID' });
});

test('a chain through a CA whose RSA key has 1024 bits fails with CA_KEY_TOO_SMALL', async (t) => {
  const server = await httpsServer(t, { cert: 'weak-ca-leaf.pem', key: 'weak-ca-leaf-key.pem' });
  const agent = new HttpsAgent({ ca: fixture('weak-ca.pem') });
  t.after(() => agent.destroy());
  const err = await getError({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(err.code, 'CA_KEY_TOO_SMALL');
  assert.match(err.message, /^CA certificate key too weak/);
  // The server's own key can still be checked: rejectUnauthorized: false connects and says why.
  const lenient = new HttpsAgent({ rejectUnauthorized: false, ca: fixture('weak-ca.pem') });
  t.after(() => lenient.destroy());
  const r = await get({ host: 'localhost', port: server.port, agent: lenient });
  assert.deepStrictEqual([r.body, r.authorized, r.authorizationError], ['secure /', false, 'CA_KEY_TOO_SMALL']);
});

test('a server whose RSA key has 1024 bits fails with EE_KEY_TOO_SMALL, whatever rejectUnauthorized says', async (t) => {
  let server;
  try {
    server = await httpsServer(t, { cert: 'weak-localhost.pem', key: 'weak-localhost-key.pem' });
  } catch (err) {
    // Node 24 (OpenSSL's security level 2) refuses to serve such a key at all.
    if (!/ee key too small/.test(err.message)) throw err;
    t.skip(`this Node's OpenSSL refuses to serve an RSA key of 1024 bits (${err.message})`);
    return;
  }
  for (const options of [{ ca: CA }, { rejectUnauthorized: false }, { rejectUnauthorized: false, maxVersion: 'TLSv1.2' }]) {
    const name = JSON.stringify(Object.keys(options));
    // Node's agent, at OpenSSL's security level 1 (Node 20 and 22), takes such a key.
    const node = new https.Agent(options);
    t.after(() => node.destroy());
    assert.strictEqual((await get({ host: 'localhost', port: server.port, agent: node })).body, 'secure /', name);
    // Ours cannot check the handshake's signature with it, and says so.
    const agent = new HttpsAgent(options);
    t.after(() => agent.destroy());
    const err = await getError({ host: 'localhost', port: server.port, agent });
    assert.strictEqual(err.code, 'EE_KEY_TOO_SMALL', name);
    assert.match(err.message, /^EE certificate key too weak: RSA keys of fewer than 2048 bits are not supported/, name);
    await assert.rejects(agent.request(`https://localhost:${server.port}/`), { code: 'EE_KEY_TOO_SMALL' }, name);
  }
});

test('a client certificate whose RSA key has 1024 bits is refused at once with ERR_SSL_EE_KEY_TOO_SMALL', async (t) => {
  const server = await httpsServer(t);
  const agent = new HttpsAgent({ ca: CA, cert: fixture('weak-localhost.pem'), key: fixture('weak-localhost-key.pem') });
  t.after(() => agent.destroy());
  // rustls signs with RSA keys of 2048 bits or more only (Node 24 refuses such a key too).
  const refused = { code: 'ERR_SSL_EE_KEY_TOO_SMALL', message: /ee key too small: RSA keys of fewer than 2048 bits are not supported/ };
  assert.throws(() => https.get({ host: 'localhost', port: server.port, agent }), refused);
  // Bad options, like a wrong argument, throw from agent.request() itself.
  assert.throws(() => agent.request(`https://localhost:${server.port}/`), refused);
  assert.strictEqual(server.connections.length, 0);
});

test('unsupported and bad TLS options fail at once with clear errors', (t) => {
  const agent = new HttpsAgent();
  t.after(() => agent.destroy());
  assert.throws(() => https.get({ host: 'localhost', port: 1, agent, secureContext: {} }), {
    code: 'ERR_HYPERAGENT_UNSUPPORTED',
    message: /'secureContext'/,
  });
  // A client certificate that does not read, as Node refuses it (a ca that does not read adds
  // nothing to the trust, as in Node: see the ca tests).
  assert.throws(() => https.get({ host: 'localhost', port: 1, agent, cert: 'not a certificate', key: fixture('client-key.pem') }), {
    code: 'ERR_OSSL_PEM_NO_START_LINE',
  });
  // A list that selects no suite fails as OpenSSL fails it in Node.
  for (const ciphers of ['RC4-MD5', '!ALL']) {
    assert.throws(() => https.get({ host: 'localhost', port: 1, agent, ciphers }), {
      code: 'ERR_SSL_NO_CIPHER_MATCH',
      message: /no cipher match/,
    });
    assert.throws(() => https.get({ host: 'localhost', port: 1, agent: new https.Agent(), ciphers }), {
      code: 'ERR_SSL_NO_CIPHER_MATCH',
    });
  }
  assert.throws(() => https.get({ host: 'localhost', port: 1, agent, minVersion: 'TLSv9' }), {
    code: 'ERR_TLS_INVALID_PROTOCOL_VERSION',
  });
});

test('NODE_EXTRA_CA_CERTS extends the default roots', async (t) => {
  const server = await httpsServer(t);
  const script = `
    const https = require('node:https');
    const { HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const agent = new HttpsAgent();
    https.get({ host: 'localhost', port: ${server.port}, agent }, (res) => {
      res.resume();
      res.on('end', () => { console.log(res.socket === null ? 'ok' : 'ok'); agent.destroy(); });
    }).on('error', (e) => { console.log(e.code); process.exitCode = 1; });
  `;
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: path.join(__dirname, 'fixtures', 'tls', 'ca.pem') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const [code] = await once(child, 'exit');
  assert.strictEqual(out.trim(), 'ok');
  assert.strictEqual(code, 0);
});

test("without `ca`, a server's chain reaches its root in the default trust, as Node's documentation walks it to pin it", async (t) => {
  const server = await httpsServer(t);
  const script = `
    const https = require('node:https');
    const tls = require('node:tls');
    const { HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const url = 'https://localhost:${server.port}/';
    // Node's documentation's pinning loop: up the issuers to the self-signed root.
    const walk = (cert) => {
      const names = [];
      let last;
      do {
        names.push(cert.subject.CN);
        last = cert.fingerprint256;
        cert = cert.issuerCertificate;
      } while (cert.fingerprint256 !== last);
      return names.join(' > ');
    };
    const walked = [];
    const checkServerIdentity = (host, cert) => {
      walked.push(walk(cert));
      return tls.checkServerIdentity(host, cert);
    };
    const viaGet = (agent) => new Promise((resolve, reject) => {
      https.get(url, { agent, checkServerIdentity }, (res) => {
        walked.push(walk(res.socket.getPeerCertificate(true)));
        res.resume().on('end', resolve);
      }).on('error', reject);
    });
    (async () => {
      const agents = [new https.Agent(), new HttpsAgent(), new HttpsAgent({ checkServerIdentity })];
      await viaGet(agents[0]);
      await viaGet(agents[1]);
      await (await agents[2].request(url)).body.dump();
      agents.forEach((a) => a.destroy());
      console.log(JSON.stringify(walked));
    })();
  `;
  const { code, out, err } = await runChild(script, { NODE_EXTRA_CA_CERTS: path.join(__dirname, 'fixtures', 'tls', 'ca.pem') });
  assert.strictEqual(code, 0, err);
  const chain = 'localhost > hyperagent test intermediate CA > hyperagent test CA';
  // Node's agent (check, then socket), the drop-in path (the same), agent.request() (check).
  assert.deepStrictEqual(JSON.parse(out), Array(5).fill(chain));
});

test("NODE_TLS_REJECT_UNAUTHORIZED=0 lets an unverified server through where the options say nothing, as Node's agent, with Node's warning", async (t) => {
  const server = await httpsServer(t);
  const script = `
    const https = require('node:https');
    const { HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const url = 'https://localhost:${server.port}/';
    const viaGet = (agent, options) => new Promise((resolve) => {
      https.get(url, { agent, ...options }, (res) => {
        const seen = [res.statusCode, res.socket.authorized, res.socket.authorizationError];
        res.resume().on('end', () => resolve(seen));
      }).on('error', (err) => resolve(err.code));
    });
    (async () => {
      const seen = [];
      for (const options of [{}, { rejectUnauthorized: true }, { rejectUnauthorized: undefined }]) {
        const agents = [new https.Agent(), new HttpsAgent()];
        seen.push([await viaGet(agents[0], options), await viaGet(agents[1], options)]);
        const promise = new HttpsAgent(options);
        seen.push(await promise.request(url).then(async (res) => (await res.body.dump(), res.statusCode), (err) => err.code));
        [...agents, promise].forEach((a) => a.destroy());
      }
      console.log(JSON.stringify(seen));
    })();
  `;
  const { code, out, err } = await runChild(script, { NODE_TLS_REJECT_UNAUTHORIZED: '0', NODE_EXTRA_CA_CERTS: undefined });
  assert.strictEqual(code, 0, err);
  const unverified = [200, false, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'];
  const refused = 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY';
  assert.deepStrictEqual(JSON.parse(out), [
    [unverified, unverified], 200,
    [refused, refused], refused,
    [refused, refused], refused,
  ]);
  // Node's warning (emitted by Node's agent) and ours, each once.
  assert.strictEqual(err.match(/NODE_TLS_REJECT_UNAUTHORIZED environment variable to '0' makes TLS connections/g).length, 2, err);
});

test('an IP address as servername is refused where Node\'s tls.connect refuses it (Node 26 on), and warned about once where it warns', async (t) => {
  const server = await httpsServer(t);
  // One process per client: each warning is emitted once per process.
  const script = (client) => `
    const https = require('node:https');
    const { HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const ca = ${JSON.stringify(CA.toString())};
    const url = 'https://127.0.0.1:${server.port}/';
    const warnings = [];
    process.on('warning', (w) => warnings.push(w.code));
    const attempt = (fn) => new Promise((resolve) => {
      try {
        fn(resolve);
      } catch (err) {
        resolve('throws ' + err.code);
      }
    });
    const viaGet = (agent) => attempt((resolve) => {
      https.get(url, { agent, servername: '127.0.0.1' }, (res) => res.resume().on('end', () => resolve(res.statusCode)))
        .on('error', (err) => resolve(err.code));
    });
    (async () => {
      const seen = [];
      const agent = ${client === 'node' ? 'new https.Agent({ ca })' : 'new HttpsAgent({ ca })'};
      for (let i = 0; i < 2; i++) seen.push(await viaGet(agent));
      ${client === 'ours' ? `for (let i = 0; i < 2; i++) {
        seen.push(await attempt((resolve) => agent.request(url, { servername: '127.0.0.1' }).then(async (res) => resolve((await res.body.dump(), res.statusCode)), (err) => resolve(err.code))));
      }` : ''}
      agent.destroy();
      setImmediate(() => console.log(JSON.stringify({ seen, warnings })));
    })();
  `;
  const run = async (client) => {
    const { code, out, err } = await runChild(script(client));
    assert.strictEqual(code, 0, err);
    return JSON.parse(out);
  };
  const node = await run('node');
  const ours = await run('ours');
  const refused = node.seen[0] !== 200;
  assert.deepStrictEqual(node.seen, refused ? ['throws ERR_INVALID_ARG_VALUE', 'throws ERR_INVALID_ARG_VALUE'] : [200, 200]);
  assert.deepStrictEqual(node.warnings, refused ? [] : ['DEP0123']);
  // agent.request() takes a servername as the drop-in path does.
  assert.deepStrictEqual(ours, { seen: [...node.seen, ...node.seen], warnings: node.warnings });
});

// Node 22.15 and 23.10 on can tell their default trust (tls.getCACertificates); before them
// the default is Mozilla's roots plus NODE_EXTRA_CA_CERTS (the test above).
const tellsDefaultCa = typeof tls.getCACertificates === 'function' ? false : 'Node before 22.15 and 23.10 cannot tell its default trust';

test("without `ca`, both paths trust what Node's agent trusts: --use-system-ca, --use-openssl-ca, NODE_EXTRA_CA_CERTS", { skip: tellsDefaultCa }, async (t) => {
  const server = await httpsServer(t);
  const caFile = path.join(__dirname, 'fixtures', 'tls', 'ca.pem');
  // The system's store, as OpenSSL finds it: the test CA alone.
  const emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyperagent-ca-'));
  t.after(() => fs.rmSync(emptyDir, { recursive: true, force: true }));
  const script = `
    const https = require('node:https');
    const { HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const url = 'https://localhost:${server.port}/';
    const outcome = (p) => p.then((status) => status, (err) => err.code);
    const viaGet = (agent) => outcome(new Promise((resolve, reject) => {
      https.get(url, { agent }, (res) => res.resume().on('end', () => resolve(res.statusCode))).on('error', reject);
    }));
    (async () => {
      const node = new https.Agent();
      const ours = new HttpsAgent();
      const promise = new HttpsAgent();
      const seen = [
        await viaGet(node),
        await viaGet(ours),
        await outcome(promise.request(url).then(async (res) => (await res.body.dump(), res.statusCode))),
      ];
      for (const agent of [node, ours, promise]) agent.destroy();
      console.log(JSON.stringify(seen));
    })();
  `;
  const base = { NODE_EXTRA_CA_CERTS: undefined, NODE_USE_SYSTEM_CA: undefined, NODE_OPTIONS: undefined, SSL_CERT_FILE: caFile, SSL_CERT_DIR: emptyDir };
  // [flags, environment, what Node's agent gives (undefined: whatever it gives, where the
  // Node running the tests may predate the switch)]
  const cases = [
    [[], {}, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'],
    [['--use-system-ca'], {}, 200],
    [[], { NODE_USE_SYSTEM_CA: '1' }, undefined],
    [['--use-openssl-ca'], {}, 200],
    [[], { NODE_OPTIONS: '--use-openssl-ca' }, 200],
    [['--use-openssl-ca'], { SSL_CERT_FILE: undefined, NODE_EXTRA_CA_CERTS: caFile }, 200],
    [['--use-bundled-ca'], { NODE_EXTRA_CA_CERTS: caFile }, 200],
    [['--use-bundled-ca'], {}, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'],
  ];
  for (const [flags, env, expected] of cases) {
    const what = `${flags.join(' ')} ${JSON.stringify(env)}`;
    const { code, out, err } = await runChild(script, { ...base, ...env }, flags);
    assert.strictEqual(code, 0, `${what}: ${err}`);
    const [node, dropIn, promise] = JSON.parse(out);
    if (expected !== undefined) assert.strictEqual(node, expected, `${what}: Node's agent`);
    assert.deepStrictEqual([dropIn, promise], [node, node], `${what}: as Node's agent`);
  }
});

test('tls.setDefaultCACertificates() sets the trust of the pool keys made afterwards', {
  skip: typeof tls.setDefaultCACertificates === 'function' ? false : 'this Node has no tls.setDefaultCACertificates()',
}, async (t) => {
  const server = await httpsServer(t);
  const url = `https://localhost:${server.port}/`;
  const original = tls.getCACertificates('default');
  t.after(() => tls.setDefaultCACertificates(original));
  const agents = [];
  t.after(() => agents.forEach((a) => a.destroy()));
  const outcomes = async () => {
    const [node, dropIn, promise] = [new https.Agent(), new HttpsAgent(), new HttpsAgent()];
    agents.push(node, dropIn, promise);
    const viaGet = (agent) => get({ host: 'localhost', port: server.port, agent }).then((r) => r.res.statusCode, (e) => e.code);
    const viaRequest = promise.request(url).then(async (res) => (await res.body.dump(), res.statusCode), (e) => e.code);
    return [await viaGet(node), await viaGet(dropIn), await viaRequest];
  };
  assert.deepStrictEqual(await outcomes(), Array(3).fill('UNABLE_TO_GET_ISSUER_CERT_LOCALLY'));
  tls.setDefaultCACertificates([...original, CA.toString()]);
  assert.deepStrictEqual(await outcomes(), [200, 200, 200]);
  tls.setDefaultCACertificates(original);
  assert.deepStrictEqual(await outcomes(), Array(3).fill('UNABLE_TO_GET_ISSUER_CERT_LOCALLY'));
});

test('a change to agent.options between requests changes the pool key (names are not stale)', async (t) => {
  const server = await httpsServer(t);
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  assert.strictEqual((await get({ host: 'localhost', port: server.port, agent })).authorized, true);
  assert.strictEqual((await get({ host: 'localhost', port: server.port, agent })).authorized, true);
  // Without the CA, the same origin is another key: a new handshake, against the default roots.
  delete agent.options.ca;
  const err = await getError({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(err.code, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  agent.options.ca = CA;
  assert.strictEqual((await get({ host: 'localhost', port: server.port, agent })).authorized, true);
  assert.strictEqual(server.connections.length, 2, 'the first connection was reused at the end');
});

test('a subclass getName is called for every request and names the pool', async (t) => {
  const server = await httpsServer(t);
  const names = [];
  class NamedAgent extends HttpsAgent {
    getName(options) {
      const name = `custom:${super.getName(options).length}`;
      names.push(name);
      return name;
    }
  }
  const agent = new NamedAgent({ ca: CA, keepAlive: true });
  t.after(() => agent.destroy());
  for (let i = 0; i < 3; i++) await get({ host: 'localhost', port: server.port, agent });
  assert.strictEqual(names.length, 3);
  assert.deepStrictEqual(Object.keys(agent.freeSockets), [names[0]]);
});

test('a server whose certificate names another host is refused on both paths, every time, before a byte of HTTP', async (t) => {
  for (const maxVersion of ['TLSv1.2', 'TLSv1.3']) {
    const server = await httpsServer(t, { cert: 'wrong-host.pem', key: 'wrong-host-key.pem', tls: { maxVersion } });
    let requests = 0;
    server.on('request', () => requests++);
    const dropIn = new HttpsAgent({ ca: CA });
    const promise = new HttpsAgent({ ca: CA });
    t.after(() => {
      dropIn.destroy();
      promise.destroy();
    });
    const wrongName = { code: 'ERR_TLS_CERT_ALTNAME_INVALID', host: 'localhost', reason: /not in the cert's altnames: DNS:example.com/ };
    // Each time: a session cached by a refused connection must not let the next one skip the
    // check (as Node's agent evicts the session of a socket that failed).
    for (let i = 0; i < 3; i++) {
      const err = await getError({ host: 'localhost', port: server.port, agent: dropIn });
      assert.strictEqual(err.code, wrongName.code, `${maxVersion} drop-in ${i}`);
      await assert.rejects(promise.request(`https://localhost:${server.port}/`), wrongName, `${maxVersion} promise ${i}`);
    }
    assert.strictEqual(requests, 0, 'no request reached the impostor');
    // Counted as the drop-in path counts them: connections made, failed by an error, closed.
    await until(() => dropIn.closeSocketCount === 3, 5000, 'the drop-in sockets to close');
    const counts = (a) => [a.createSocketCount, a.errorSocketCount, a.closeSocketCount];
    assert.deepStrictEqual(counts(promise), counts(dropIn));
    assert.deepStrictEqual(counts(promise), [3, 3, 3]);
  }
});

test('checkServerIdentity is called on agent.request()\'s connections as on the drop-in path\'s', { timeout: 20000 }, async (t) => {
  const server = await httpsServer(t, { cert: 'wrong-host.pem', key: 'wrong-host-key.pem' });
  const seen = [];
  const refuse = new HttpsAgent({
    ca: CA,
    checkServerIdentity: (host, cert) => {
      seen.push([host, cert.subjectaltname, Boolean(cert.issuerCertificate)]);
      return new Error(`pinned elsewhere: ${host}`);
    },
  });
  const accept = new HttpsAgent({ ca: CA, checkServerIdentity: () => undefined });
  const throwing = new HttpsAgent({ ca: CA, checkServerIdentity: () => { throw new Error('checker broke'); } });
  t.after(() => [refuse, accept, throwing].forEach((a) => a.destroy()));
  const url = `https://localhost:${server.port}/x`;
  await assert.rejects(refuse.request(url), { message: 'pinned elsewhere: localhost' });
  await assert.rejects(getError({ host: 'localhost', port: server.port, agent: refuse }).then((e) => { throw e; }), {
    message: 'pinned elsewhere: localhost',
  });
  // Both paths give the function the same: the host, and the detailed peer certificate.
  assert.deepStrictEqual(seen, [['localhost', 'DNS:example.com', true], ['localhost', 'DNS:example.com', true]]);
  // A function that lets the name pass is obeyed; one that throws fails the request with its
  // error, not the process.
  assert.strictEqual(await (await accept.request(url)).body.text(), 'secure /x');
  await assert.rejects(throwing.request(url), { message: 'checker broke' });
  // Even a check that throws nothing usable fails the request rather than leave it waiting.
  const throwingNull = new HttpsAgent({
    ca: CA,
    checkServerIdentity: () => {
      throw null; // eslint-disable-line no-throw-literal
    },
  });
  t.after(() => throwingNull.destroy());
  await assert.rejects(throwingNull.request(url), { message: 'checkServerIdentity threw null' });
});

test('agent.request() resumes a session whose name was found right, and checks it no more', async (t) => {
  const server = await httpsServer(t, {}, (req, res) => {
    res.setHeader('connection', 'close');
    res.end(String(req.socket.isSessionReused()));
  });
  let checks = 0;
  const agent = new HttpsAgent({
    ca: CA,
    checkServerIdentity: (host, cert) => {
      checks++;
      return require('node:tls').checkServerIdentity(host, cert);
    },
  });
  t.after(() => agent.destroy());
  const url = `https://localhost:${server.port}/`;
  const bodies = [];
  for (let i = 0; i < 3; i++) bodies.push(await (await agent.request(url)).body.text());
  assert.deepStrictEqual(bodies, ['false', 'true', 'true']);
  assert.strictEqual(checks, 1);
  // Without resumption every connection is a new session: an agent's own function is called
  // on each, as Node calls it (only Node's own check is taken as known for a certificate).
  let fresh = 0;
  const noResume = new HttpsAgent({
    ca: CA,
    maxCachedSessions: 0,
    checkServerIdentity: (host, cert) => {
      fresh++;
      return require('node:tls').checkServerIdentity(host, cert);
    },
  });
  t.after(() => noResume.destroy());
  for (let i = 0; i < 3; i++) assert.strictEqual(await (await noResume.request(url)).body.text(), 'false');
  assert.strictEqual(fresh, 3);
});

test('a body that ends with the connection ends there without a close_notify, as in Node', async (t) => {
  // The server sends a response whose body runs to the end of the connection, then closes the
  // TCP connection under TLS without a close_notify (many servers do): Node reads the body to
  // its end; so do both paths (rustls reports the missing close_notify as an error).
  const server = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.write('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe whole body', () => socket._parent.end());
  }, { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') });
  const url = `https://localhost:${server.port}/`;
  const agent = new HttpsAgent({ ca: CA });
  t.after(() => agent.destroy());
  const res = await agent.request(url);
  assert.strictEqual(await res.body.text(), 'the whole body');
  const dropIn = await new Promise((resolve, reject) => {
    https.get(url, { agent }, (r) => {
      let body = '';
      r.setEncoding('latin1');
      r.on('data', (c) => (body += c));
      r.on('end', () => resolve(body));
    }).on('error', reject);
  });
  assert.strictEqual(dropIn, 'the whole body');
  // A body with a length is still held to it: cut short, it fails as Node's does.
  const short = await rawServer(t, async (socket) => {
    await readRequest(socket);
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort', () => socket._parent.end());
  }, { cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') });
  const cut = await agent.request(`https://localhost:${short.port}/`);
  await assert.rejects(cut.body.text(), { code: 'ECONNRESET', message: 'aborted' });
});

test('a socket made again for a pooled connection whose socket was collected has its session and verdict', async (t) => {
  const good = await httpsServer(t);
  const wrong = await httpsServer(t, { cert: 'wrong-host.pem', key: 'wrong-host-key.pem' });
  const cases = [
    { server: good, options: { ca: CA } },
    { server: wrong, options: { ca: CA, rejectUnauthorized: false } },
  ];
  for (const { server, options } of cases) {
    const agent = new HttpsAgent(options);
    t.after(() => agent.destroy());
    const get = () => new Promise((resolve, reject) => {
      https.get({ host: 'localhost', port: server.port, agent }, (res) => {
        const { socket } = res;
        res.resume();
        res.on('end', () => resolve(socket));
      }).on('error', reject);
    });
    const view = (socket) => ({
      authorized: socket.authorized,
      authorizationError: socket.authorizationError,
      servername: socket.servername,
      alpnProtocol: socket.alpnProtocol,
      protocol: socket.getProtocol(),
      subject: socket.getPeerCertificate().subject.CN,
    });
    let first = await get();
    const before = view(first);
    const weak = new WeakRef(first);
    first = null;
    assert.ok(await collected(weak), 'the idle socket to be collected');
    // Made when a program looks at the pool, and again when a request takes the connection.
    const [name] = Object.keys(agent.freeSockets);
    assert.deepStrictEqual(view(agent.freeSockets[name][0]), before);
    assert.ok(await collected(new WeakRef(agent.freeSockets[name][0])), 'the looked-at socket to be collected');
    const second = await get();
    assert.deepStrictEqual(view(second), before);
    assert.strictEqual(agent.createSocketCount, 1);
  }
});

test('socket.unref() on an HTTPS socket lets the process exit during a request, before, during or after its handshake', async (t) => {
  const server = await httpsServer(t, {}, () => {});
  // A server that accepts the connection and never answers the handshake (Node's
  // test-https-agent-unref-socket).
  const silent = await rawServer(t, () => {});
  const ways = [['socket', server.port], ['secureConnect', server.port], ['socket', silent.port]];
  for (const [when, port] of ways) {
    const script = `
      const https = require('node:https');
      const { HttpsAgent } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      const ca = require('node:fs').readFileSync(${JSON.stringify(path.join(__dirname, 'fixtures', 'tls', 'ca.pem'))});
      const req = https.get({ host: 'localhost', port: ${port}, agent: new HttpsAgent({ ca }) });
      req.on('error', (err) => console.log(err.code));
      req.on('socket', (s) => {
        const off = () => { s.unref(); console.log('unref'); };
        if (${JSON.stringify(when)} === 'socket') off();
        else s.on('secureConnect', off);
      });
    `;
    const { code, out, err } = await runChild(script);
    const name = `${when}, ${port === silent.port ? 'silent server' : 'server'}`;
    assert.strictEqual(code, 0, `${name}: ${err}`);
    assert.strictEqual(out.trim(), 'unref', name);
  }
});

test("setTypeOfService/getTypeOfService reach the kernel's socket on plain and TLS connections, as net.Socket's of Node 24", async (t) => {
  const secure = await httpsServer(t);
  const plain = http.createServer((req, res) => res.end('plain'));
  plain.listen(0, '127.0.0.1');
  await once(plain, 'listening');
  const socketPath = path.join(os.tmpdir(), `hyperagent-tos-${process.pid}.sock`);
  const piped = http.createServer((req, res) => res.end('piped'));
  piped.listen(socketPath);
  await once(piped, 'listening');
  t.after(() => {
    for (const server of [plain, piped]) {
      server.closeAllConnections();
      server.close();
    }
  });
  const nodeHas = typeof net.Socket.prototype.setTypeOfService === 'function';
  const { Agent } = require('..');
  const cases = {
    http: [http, () => new Agent(), { port: plain.address().port }],
    https: [https, () => new HttpsAgent({ ca: CA }), { port: secure.port, servername: 'localhost' }],
    socketPath: [http, () => new Agent(), { socketPath }],
  };
  for (const [which, [mod, make, where]] of Object.entries(cases)) {
    const agent = make();
    t.after(() => agent.destroy());
    const req = mod.get({ host: '127.0.0.1', ...where, agent });
    // Set while it connects: kept, and set once it is open.
    req.on('socket', (socket) => socket.setTypeOfService(0x10));
    const [res] = await once(req, 'response');
    const socket = res.socket;
    const seen = [socket.getTypeOfService()];
    socket.setTypeOfService(0x28);
    seen.push(socket.getTypeOfService());
    res.resume();
    await once(res, 'end');
    // The kernel's byte over IP (read back with getsockopt); a Unix socket keeps the value.
    assert.deepStrictEqual(seen, [0x10, 0x28], which);
  }
  // Bad values fail as net.Socket's do.
  const agent = new Agent();
  t.after(() => agent.destroy());
  const req = http.get({ host: '127.0.0.1', port: plain.address().port, agent });
  const [res] = await once(req, 'response');
  res.resume();
  const node = nodeHas ? new net.Socket() : null;
  for (const bad of [256, -1, 1.5, NaN, '1', undefined]) {
    const ours = (() => {
      try {
        res.socket.setTypeOfService(bad);
      } catch (err) {
        return [err.code, err.message];
      }
    })();
    assert.strictEqual(ours[0], typeof bad === 'number' && !Number.isNaN(bad) ? 'ERR_OUT_OF_RANGE' : 'ERR_INVALID_ARG_TYPE', String(bad));
    if (node) assert.throws(() => node.setTypeOfService(bad), { code: ours[0], message: ours[1] }, String(bad));
  }
  await once(res, 'end');
});

test('setKeepAlive reaches the TCP socket of plain and TLS connections, set while it connects or after, as with Node\'s agent', { skip: !fs.existsSync('/proc/net/tcp') && 'no /proc/net/tcp' }, async (t) => {
  const secure = await httpsServer(t);
  const plain = http.createServer((req, res) => res.end('plain'));
  plain.listen(0, '127.0.0.1');
  await once(plain, 'listening');
  t.after(() => {
    plain.closeAllConnections();
    plain.close();
  });
  const { Agent } = require('..');
  // Each agent keeps TCP keep-alive on at 1 s (keepAliveMsecs), as Node's keep-alive agent
  // does; a request turns it off, or sets a longer delay, before or after its connect.
  const agents = {
    'Node http': () => new http.Agent({ keepAlive: true }),
    'Node https': () => new https.Agent({ keepAlive: true, ca: CA }),
    http: () => new Agent({ keepAlive: true }),
    https: () => new HttpsAgent({ keepAlive: true, ca: CA }),
  };
  const seen = {};
  for (const [which, make] of Object.entries(agents)) {
    const agent = make();
    t.after(() => agent.destroy());
    const mod = which.endsWith('https') ? https : http;
    const port = which.endsWith('https') ? secure.port : plain.address().port;
    const timers = [];
    for (const set of ['none', 'off while connecting', 'off once connected', '60 s while connecting', '35 days once connected']) {
      const req = mod.get({ host: '127.0.0.1', servername: 'localhost', port, agent });
      if (set === 'off while connecting') req.setSocketKeepAlive(false);
      if (set === '60 s while connecting') req.on('socket', (socket) => socket.setKeepAlive(true, 60_000));
      const [res] = await once(req, 'response');
      const socket = res.socket;
      if (set === 'off once connected') socket.setKeepAlive(false);
      // Past 2^31 ms: the longest delay the kernel takes, 32,767 s (Node's asks for more, and
      // fails), not the system's default (7,200 s).
      if (set === '35 days once connected') socket.setKeepAlive(true, 3e9);
      timers.push(tcpTimer(socket.localPort, port));
      res.resume();
      await once(res, 'end');
      // A new connection for each.
      socket.destroy();
    }
    const [none, offConnecting, offConnected, long, longest] = timers;
    seen[which] = [none[0], offConnecting[0], offConnected[0], long[0], long[1] > none[1] * 10];
    if (!which.startsWith('Node')) seen[which].push(longest[0], longest[1] > long[1] * 300);
  }
  // Node's https agent turns TCP keep-alive on from Node 24 on (tls.connect took no keepAlive
  // before); ours does on every Node, as Node's http agent does.
  if (seen['Node https'][0] === 0) seen['Node https'][0] = 2;
  for (const which of Object.keys(agents)) {
    assert.deepStrictEqual(seen[which], which.startsWith('Node') ? [2, 0, 0, 2, true] : [2, 0, 0, 2, true, 2, true], which);
  }
});

// A server that answers an upgrade with 101 and closes its side at once: the socket handed
// over ends a turn after it, as Node's TLS socket does, so a program that listens from a
// promise's continuation (dockerode's `await container.attach({ hijack: true })`) hears its
// 'end'; with bytes behind the 101, those too.
test("an upgraded TLS socket whose server ends at once: 'end' reaches listeners added after the upgrade's turn, as with Node's agent", { timeout: 20_000 }, async (t) => {
  const server = await httpsServer(t);
  server.on('upgrade', (req, socket) => {
    socket.on('error', () => {});
    const payload = req.url === '/bytes' ? 'after' : '';
    socket.end(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n${payload}`);
  });
  const heard = (agent, path) => new Promise((resolve, reject) => {
    const req = https.request({
      host: 'localhost', port: server.port, path, method: 'POST', agent, headers: { Connection: 'Upgrade', Upgrade: 'tcp' },
    });
    req.on('error', reject);
    req.on('upgrade', (res, socket, head) => {
      Promise.resolve().then(() => {
        const events = [];
        if (head.length > 0) events.push(`head ${head}`);
        socket.on('data', (d) => events.push(`data ${d}`));
        socket.on('end', () => events.push('end'));
        socket.on('close', () => resolve(events));
      });
    });
    req.end();
  });
  for (const path of ['/empty', '/bytes']) {
    const seen = {};
    for (const [which, Make] of [['node', https.Agent], ['ours', HttpsAgent]]) {
      const agent = new Make({ ca: CA });
      t.after(() => agent.destroy());
      seen[which] = await heard(agent, path);
    }
    assert.deepStrictEqual(seen.ours, seen.node, path);
    assert.ok(seen.ours.includes('end'), path);
  }
});

// The server's end of a connection that served a `Connection: close` response reaches its socket
// as 'end' before 'close', as with Node's TLS socket (which hears it after the response's
// 'close'; ours may before the response's 'end', see README "What differs").
test("a Connection: close response's TLS socket hears the server's end before its 'close'", { timeout: 20_000 }, async (t) => {
  const server = await httpsServer(t, {}, (req, res) => {
    res.setHeader('connection', 'close');
    res.end(req.url === '/big' ? 'x'.repeat(100_000) : 'ok');
  });
  for (const path of ['/small', '/big']) {
    for (const Make of [https.Agent, HttpsAgent]) {
      const agent = new Make({ ca: CA, keepAlive: true });
      t.after(() => agent.destroy());
      const events = await new Promise((resolve, reject) => {
        const seen = [];
        https.get({ host: 'localhost', port: server.port, path, agent }, (res) => {
          res.resume();
          res.socket.on('end', () => seen.push('end'));
          res.socket.on('close', () => resolve(seen.concat('close')));
        }).on('error', reject);
      });
      assert.deepStrictEqual(events, ['end', 'close'], `${Make.name} ${path}`);
    }
  }
});
