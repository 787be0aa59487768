'use strict';

// Smoke test of a (cross-)built addon, on the Node.js that runs it: loads the package from this
// checkout (HYPERAGENT_NATIVE_PATH=/path/to/hyperagent.<system>.node picks the addon) and does
// real requests on loopback, over HTTP and over HTTPS with the committed test CA verified:
//   - http.request with new Agent({ keepAlive: true }), twice: the second reuses the connection
//   - await agent.request(url), reading the body, twice: the second reuses the connection too
//   - https.request and agent.request() with new HttpsAgent({ ca }) against a server whose
//     chain ends at __test__/fixtures/tls/ca.pem
// Prints one line per check and exits 1 on any mismatch, 0 when every check passed.
//
//   HYPERAGENT_NATIVE_PATH=/tmp/x/hyperagent.linux-arm64-gnu.node node scripts/smoke.js

const http = require('node:http');
const https = require('node:https');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');

const root = path.join(__dirname, '..');
const fixture = (name) => fs.readFileSync(path.join(root, '__test__', 'fixtures', 'tls', name));

let failures = 0;
function check(what, actual, expected) {
  const ok = actual === expected;
  if (!ok) failures++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}: ${JSON.stringify(actual)}${ok ? '' : ` (expected ${JSON.stringify(expected)})`}`);
}

function libcOf() {
  const report = process.report.getReport();
  if (report.header.glibcVersionRuntime) return `glibc ${report.header.glibcVersionRuntime}`;
  const musl = (report.sharedObjects || []).find((f) => /ld-musl-|libc\.musl-/.test(f));
  return musl ? `musl (${musl})` : 'unknown';
}

// Node's http.request with a callback, resolving with status, body and the local port.
function nodeRequest(mod, url, options) {
  return new Promise((resolve, reject) => {
    const req = mod.request(url, options, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString(), reused: req.reusedSocket }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

async function listen(server) {
  server.ports = [];
  server.connections = 0;
  server.on(server instanceof https.Server ? 'secureConnection' : 'connection', () => server.connections++);
  server.on('request', (req) => server.ports.push(req.socket.remotePort));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server.address().port;
}

async function main() {
  const native = process.env.HYPERAGENT_NATIVE_PATH;
  console.log(`node ${process.version} ${process.platform}-${process.arch}, ${libcOf()}`);
  console.log(`addon ${native || '(found by the loader)'}`);
  const { Agent, HttpsAgent } = require(root);
  const loaded = process.report.getReport().sharedObjects.filter((f) => f.endsWith('.node'));
  console.log(`loaded ${loaded.join(', ')}`);
  if (native) check('the addon loaded is HYPERAGENT_NATIVE_PATH', loaded.includes(path.resolve(native)), true);

  // --- HTTP ---
  const server = http.createServer((req, res) => res.end(`hello ${req.url}`));
  const port = await listen(server);
  const base = `http://127.0.0.1:${port}`;

  const agent = new Agent({ keepAlive: true });
  const a = await nodeRequest(http, `${base}/one`, { agent });
  check('http.request #1 status', a.status, 200);
  check('http.request #1 body', a.body, 'hello /one');
  const b = await nodeRequest(http, `${base}/two`, { agent });
  check('http.request #2 body', b.body, 'hello /two');
  check('http.request #2 reusedSocket', b.reused, true);
  check('http.request: one connection for both', server.connections, 1);
  check('http.request: same client port', server.ports[1], server.ports[0]);

  const promiseAgent = new Agent({ keepAlive: true });
  const before = server.connections;
  const r1 = await promiseAgent.request(`${base}/three?x=1`);
  check('agent.request #1 status', r1.statusCode, 200);
  check('agent.request #1 body', await r1.body.text(), 'hello /three?x=1');
  const r2 = await promiseAgent.request(`${base}/four`, { method: 'POST', body: 'payload' });
  check('agent.request #2 body', await r2.body.text(), 'hello /four');
  check('agent.request: one connection for both', server.connections - before, 1);

  // --- HTTPS, verified with the test CA ---
  const ca = fixture('ca.pem');
  const secure = https.createServer({ cert: fixture('localhost-chain.pem'), key: fixture('localhost-key.pem') },
    (req, res) => res.end(`secure ${req.url} ${req.socket.getProtocol()}`));
  const sport = await listen(secure);
  const sbase = `https://localhost:${sport}`;

  const httpsAgent = new HttpsAgent({ ca, keepAlive: true });
  const s1 = await nodeRequest(https, `${sbase}/five`, { agent: httpsAgent, lookup: (h, o, cb) => cb(null, o && o.all ? [{ address: '127.0.0.1', family: 4 }] : '127.0.0.1', 4) });
  check('https.request status', s1.status, 200);
  check('https.request body', s1.body.startsWith('secure /five TLSv1.'), true);
  const s2 = await nodeRequest(https, `https://127.0.0.1:${sport}/six`, { agent: httpsAgent });
  check('https.request (IP SAN) body', s2.body.startsWith('secure /six TLSv1.'), true);

  const httpsPromise = new HttpsAgent({ ca });
  const s3 = await httpsPromise.request(`https://127.0.0.1:${sport}/seven`);
  check('HttpsAgent agent.request status', s3.statusCode, 200);
  const body3 = await s3.body.text();
  check('HttpsAgent agent.request body', body3.startsWith('secure /seven TLSv1.'), true);
  console.log(`     (${body3})`);

  // The same server with an agent that does not trust the CA: the request must fail.
  const untrusting = new HttpsAgent({ ca: fixture('other-ca.pem') });
  const refused = await untrusting.request(`https://127.0.0.1:${sport}/eight`).then(
    (res) => { res.body.destroy(); return 'no error'; },
    (err) => err.code || err.message);
  check('untrusted CA refused', refused !== 'no error', true);
  console.log(`     (${refused})`);

  for (const x of [agent, promiseAgent, httpsAgent, httpsPromise, untrusting]) x.destroy();
  for (const s of [server, secure]) {
    s.closeAllConnections();
    s.close();
  }
  console.log(failures ? `SMOKE FAILED: ${failures} check(s)` : 'SMOKE OK');
  process.exitCode = failures ? 1 : 0;
}

main().catch((err) => {
  console.error('SMOKE FAILED:', err);
  process.exit(1);
});
