// The HTTP clients people use take hyperagent's agents unchanged, over HTTP and HTTPS:
// axios, got, node-fetch, superagent and needle.

import test from 'node:test';
import assert from 'node:assert';
import http from 'node:http';
import https from 'node:https';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import axios from 'axios';
import got from 'got';
import fetch from 'node-fetch';
import superagent from 'superagent';
import needle from 'needle';
import { Agent, HttpsAgent } from 'hyperagent-rs';
import helpers from './helpers.js';

const fixture = (name) => fs.readFileSync(fileURLToPath(new URL(`./fixtures/tls/${name}`, import.meta.url)));
const CA = fixture('ca.pem');
const BIG = crypto.createHash('sha512').update('seed').digest().toString('hex').repeat(8192).slice(0, 1024 * 1024);
const BIG_SHA = crypto.createHash('sha256').update(BIG).digest('hex');

function handler(req, res) {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/json') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ hello: 'world' }));
  } else if (url.pathname === '/echo') {
    const hash = crypto.createHash('sha256');
    let n = 0;
    req.on('data', (d) => {
      hash.update(d);
      n += d.length;
    });
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, length: n, sha256: hash.digest('hex') }));
    });
  } else if (url.pathname === '/big') {
    res.end(BIG);
  } else if (url.pathname === '/chunked') {
    res.write('one,');
    setImmediate(() => {
      res.write('two,');
      setImmediate(() => res.end('three'));
    });
  } else if (url.pathname === '/gzip') {
    res.setHeader('content-type', 'application/json');
    res.setHeader('content-encoding', 'gzip');
    res.end(zlib.gzipSync(JSON.stringify({ compressed: true })));
  } else if (url.pathname === '/redirect') {
    res.writeHead(302, { location: '/json' }).end();
  } else if (url.pathname === '/slow') {
    setTimeout(() => res.end('slow'), 5);
  } else {
    res.writeHead(404).end();
  }
}

async function start(t, secure) {
  const server = secure
    ? https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, handler)
    : http.createServer(handler);
  // Connections open at once, at most (the limit is on concurrency, not on the total).
  let open = 0;
  server.maxOpen = 0;
  server.on('connection', (socket) => {
    open++;
    server.maxOpen = Math.max(server.maxOpen, open);
    socket.on('close', () => open--);
  });
  return helpers.listen(t, server);
}

// Each client as a uniform function: (url, { method, body, agent }) -> { status, text }.
const clients = {
  async axios(url, { method = 'GET', body, agent }) {
    const res = await axios.request({
      url,
      method,
      data: body,
      httpAgent: agent,
      httpsAgent: agent,
      responseType: 'text',
      transformResponse: (x) => x,
      maxRedirects: 5,
    });
    return { status: res.status, text: res.data };
  },
  async got(url, { method = 'GET', body, agent }) {
    const res = await got(url, { method, body, agent: { http: agent, https: agent }, retry: { limit: 0 } });
    return { status: res.statusCode, text: res.body };
  },
  async 'node-fetch'(url, { method = 'GET', body, agent }) {
    const res = await fetch(url, { method, body, agent });
    return { status: res.status, text: await res.text() };
  },
  async superagent(url, { method = 'GET', body, agent }) {
    const req = superagent(method, url).agent(agent).buffer(true).parse((res, cb) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => cb(null, text));
    });
    const res = await (body === undefined ? req : req.send(body));
    return { status: res.status, text: res.body };
  },
  async needle(url, { method = 'GET', body, agent }) {
    const res = await needle(method.toLowerCase(), url, body ?? null, { agent, follow_max: 5, parse: false, decode: true, compressed: true });
    return { status: res.statusCode, text: Buffer.isBuffer(res.body) ? res.body.toString() : String(res.body) };
  },
};

for (const secure of [false, true]) {
  const scheme = secure ? 'https' : 'http';
  for (const [name, call] of Object.entries(clients)) {
    test(`${name} over ${scheme}: JSON, bodies, 1 MiB, chunked, gzip, redirects, reuse and maxSockets`, async (t) => {
      const server = await start(t, secure);
      const agent = secure ? new HttpsAgent({ ca: CA, maxSockets: 4 }) : new Agent({ maxSockets: 4 });
      t.after(() => agent.destroy());
      const base = `${scheme}://localhost:${server.address().port}`;

      const json = await call(`${base}/json`, { agent });
      assert.strictEqual(json.status, 200);
      assert.deepStrictEqual(JSON.parse(json.text), { hello: 'world' });

      const payload = crypto.randomBytes(200_000).toString('base64');
      const echo = JSON.parse((await call(`${base}/echo`, { method: 'POST', body: payload, agent })).text);
      assert.strictEqual(echo.method, 'POST');
      assert.strictEqual(echo.length, payload.length);
      assert.strictEqual(echo.sha256, crypto.createHash('sha256').update(payload).digest('hex'));

      const big = await call(`${base}/big`, { agent });
      assert.strictEqual(crypto.createHash('sha256').update(big.text).digest('hex'), BIG_SHA);

      assert.strictEqual((await call(`${base}/chunked`, { agent })).text, 'one,two,three');
      assert.deepStrictEqual(JSON.parse((await call(`${base}/gzip`, { agent })).text), { compressed: true });
      const redirected = await call(`${base}/redirect`, { agent });
      assert.deepStrictEqual(JSON.parse(redirected.text), { hello: 'world' });

      // 24 concurrent requests through maxSockets 4.
      const results = await Promise.all(Array.from({ length: 24 }, () => call(`${base}/slow`, { agent })));
      assert.ok(results.every((r) => r.text === 'slow'));
      assert.ok(server.maxOpen <= 4, `${server.maxOpen} connections at once for maxSockets 4`);
      assert.ok(agent.getCurrentStatus().requestCount >= 24);
    });
  }
}

// got times the phases of a new connection by its socket's events: 'lookup' ends the lookup
// and starts the connect, 'connect' ends that and starts TLS, 'secureConnect' ends TLS. A phase
// whose event never comes fails the request once its limit is past, however the rest went.
for (const secure of [false, true]) {
  const scheme = secure ? 'https' : 'http';
  test(`got's phase timeouts over ${scheme}: a response slower than the lookup limit still comes`, async (t) => {
    // Answers once the lookup limit (100 ms) is well past.
    const slow = (req, res) => setTimeout(() => res.end('late'), 400);
    const server = await helpers.listen(t, secure
      ? https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') }, slow)
      : http.createServer(slow));
    const agent = secure ? new HttpsAgent({ ca: CA }) : new Agent();
    t.after(() => agent.destroy());
    const res = await got(`${scheme}://localhost:${server.address().port}/`, {
      agent: { http: agent, https: agent },
      timeout: { lookup: 100, connect: 5000, secureConnect: 5000, response: 5000 },
      retry: { limit: 0 },
    });
    assert.strictEqual(res.body, 'late');
    assert.ok(res.timings.lookup >= res.timings.socket && res.timings.connect >= res.timings.lookup, JSON.stringify(res.timings));
    if (secure) assert.ok(res.timings.secureConnect >= res.timings.connect, JSON.stringify(res.timings));
  });
}

// got's send phase ends when the body is written; a server that reads none of a large body
// makes it time out, which got reports as its TimeoutError only when the request's 'error'
// comes before the cancelled write's callback.
test("got's send timeout is got's TimeoutError, as with Node's agent", async (t) => {
  const server = await helpers.listen(t, http.createServer(() => {}));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const err = await got.post(`http://127.0.0.1:${server.address().port}/`, {
    agent: { http: agent },
    body: Buffer.alloc(32 * 1024 * 1024),
    timeout: { send: 300 },
    retry: { limit: 0 },
  }).then(() => null, (e) => e);
  assert.ok(err, 'the request fails');
  assert.strictEqual(err.name, 'TimeoutError', err.stack);
  assert.strictEqual(err.event, 'send');
});
