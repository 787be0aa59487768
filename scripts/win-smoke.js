'use strict';

// A runtime smoke test of the addon on Windows: run it with a Windows node.exe (under wine, or
// on Windows), with HYPERAGENT_NATIVE_PATH naming the built addon (the .dll renamed .node):
//
//   HYPERAGENT_NATIVE_PATH=path\to\hyperagent.win32-x64-gnu.node node scripts/win-smoke.js
//
// Everything runs against servers in this same process, on loopback: plain HTTP through
// http.request (a socket reused for a second request; an idle connection the server closes,
// noticed before the next request), agent.request(), HTTPS verified against the test CA (and
// refused without it), a refused connect's and an unknown host's errors, and socketPath over a
// named pipe. It prints each result and exits 1 at the first failure.

const http = require('node:http');
const https = require('node:https');
const fs = require('node:fs');
const path = require('node:path');
const assert = require('node:assert/strict');
const { Agent, HttpsAgent } = require('..');

const fixtures = path.join(__dirname, '..', '__test__', 'fixtures', 'tls');
const read = (file) => fs.readFileSync(path.join(fixtures, file));

function send(mod, url, options = {}) {
  return new Promise((resolve, reject) => {
    const req = mod.request(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => resolve({ status: res.statusCode, body, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end();
  });
}

function failure(promise) {
  return promise.then(
    () => { throw new Error('expected a failure'); },
    (err) => ({ code: err.code, errno: err.errno, syscall: err.syscall, message: err.message }),
  );
}

const listen = (server, ...args) => new Promise((resolve) => server.listen(...args, resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function step(name, fn) {
  const result = await fn();
  console.log(`ok - ${name}`, result === undefined ? '' : JSON.stringify(result));
}

async function main() {
  console.log(`node ${process.version} on ${process.platform}-${process.arch}`);
  // The client's port tells whether a request came on the connection of the one before.
  const app = (req, res) => res.end(`${req.method} ${req.url} from port ${req.socket.remotePort}`);

  const server = http.createServer(app);
  server.keepAliveTimeout = 5000;
  await listen(server, 0, '127.0.0.1');
  const base = `http://127.0.0.1:${server.address().port}`;
  const agent = new Agent({ keepAlive: true });

  await step('http.request, then a second one on the same socket', async () => {
    const first = await send(http, `${base}/one`, { agent });
    const second = await send(http, `${base}/two`, { agent });
    assert.equal(first.status, 200);
    assert.equal(second.status, 200);
    assert.equal(second.reused, true);
    assert.equal(first.body.split(' ').pop(), second.body.split(' ').pop());
    return [first, second];
  });

  await step('an idle connection the server closes is noticed before the next request', async () => {
    const before = await send(http, `${base}/before`, { agent });
    // Every connection the server holds is closed, the idle one in the agent's pool too.
    server.closeIdleConnections();
    await sleep(300);
    const after = await send(http, `${base}/after`, { agent });
    assert.equal(after.status, 200);
    assert.equal(after.reused, false);
    assert.notEqual(before.body.split(' ').pop(), after.body.split(' ').pop());
    return [before, after];
  });

  await step('agent.request()', async () => {
    const res = await agent.request(`${base}/promise`);
    const body = await res.body.text();
    assert.equal(res.statusCode, 200);
    assert.match(body, /^GET \/promise from port \d+$/);
    const again = await agent.request(`${base}/promise-again`);
    const body2 = await again.body.text();
    assert.equal(body.split(' ').pop(), body2.split(' ').pop(), 'reuses the connection');
    return [body, body2];
  });

  await step('a refused connect', async () => {
    const closed = http.createServer();
    await listen(closed, 0, '127.0.0.1');
    const port = closed.address().port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await failure(send(http, `http://127.0.0.1:${port}/`, { agent }));
    const err2 = await failure(agent.request(`http://127.0.0.1:${port}/`));
    assert.equal(err.code, 'ECONNREFUSED');
    assert.equal(err2.code, 'ECONNREFUSED');
    // libuv's own number for it on Windows (-4078), the negated errno elsewhere.
    assert.equal(require('node:util').getSystemErrorName(err.errno), 'ECONNREFUSED');
    return [err, err2];
  });

  await step('an unknown host', async () => {
    const err = await failure(send(http, 'http://no-such-host.invalid/', { agent }));
    assert.ok(['ENOTFOUND', 'EAI_AGAIN'].includes(err.code), err.code);
    return err;
  });

  const tlsServer = https.createServer(
    { key: read('localhost-key.pem'), cert: read('localhost-chain.pem') },
    app,
  );
  await listen(tlsServer, 0, '127.0.0.1');
  const tlsBase = `https://localhost:${tlsServer.address().port}`;
  const httpsAgent = new HttpsAgent({ keepAlive: true, ca: read('ca.pem') });

  await step('https.request verified against the test CA, reused', async () => {
    const first = await send(https, `${tlsBase}/secure`, { agent: httpsAgent });
    const second = await send(https, `${tlsBase}/secure-again`, { agent: httpsAgent });
    assert.equal(first.status, 200);
    assert.equal(second.reused, true);
    return [first, second];
  });

  await step('HTTPS agent.request() verified against the test CA', async () => {
    const res = await httpsAgent.request(`${tlsBase}/secure-promise`);
    const body = await res.body.text();
    assert.equal(res.statusCode, 200);
    return body;
  });

  await step('HTTPS without the test CA is refused', async () => {
    const untrusting = new HttpsAgent({ keepAlive: true });
    const err = await failure(send(https, `${tlsBase}/`, { agent: untrusting }));
    assert.ok(err.code && err.code !== 'ECONNREFUSED', err.code);
    return err;
  });

  // (A Unix socket elsewhere, for a dry run of this script.)
  const pipe = process.platform === 'win32'
    ? `\\\\.\\pipe\\hyperagent-smoke-${process.pid}`
    : path.join(require('node:os').tmpdir(), `hyperagent-smoke-${process.pid}.sock`);
  const pipeServer = http.createServer(app);
  await listen(pipeServer, pipe);

  await step(`socketPath over ${process.platform === 'win32' ? 'a named pipe' : 'a Unix socket'}`, async () => {
    const first = await send(http, 'http://localhost/pipe', { agent, socketPath: pipe });
    const second = await send(http, 'http://localhost/pipe-again', { agent, socketPath: pipe });
    assert.equal(first.status, 200);
    assert.equal(second.reused, true);
    const err = await failure(send(http, 'http://localhost/', {
      agent, socketPath: `${pipe}-none`,
    }));
    assert.equal(err.code, 'ENOENT');
    return [first, second, err];
  });

  agent.destroy();
  httpsAgent.destroy();
  await Promise.all([server, tlsServer, pipeServer].map((s) => {
    s.closeAllConnections();
    return new Promise((resolve) => s.close(resolve));
  }));
  console.log('all ok');
}

main().catch((err) => {
  console.error('not ok -', err);
  process.exit(1);
});
