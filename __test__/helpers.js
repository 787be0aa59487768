'use strict';

// Test servers and small promise helpers shared by the test files. Servers listen on
// 127.0.0.1 port 0, count their connections, and are closed by the test that made them.

const http = require('node:http');
const net = require('node:net');
const tls = require('node:tls');
const { once } = require('node:events');
const { spawn } = require('node:child_process');
const fs = require('node:fs');

// An HTTP server that records every connection it accepted and the remote port of each
// request. `handler(req, res)` answers; the default says hello with the request URL.
async function httpServer(t, handler = (req, res) => res.end(`hello ${req.url}`), options = {}) {
  const server = http.createServer(options, handler);
  server.connections = [];
  server.requestPorts = [];
  server.on('connection', (socket) => server.connections.push(socket));
  server.on('request', (req) => server.requestPorts.push(req.socket.remotePort));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  server.port = server.address().port;
  server.url = `http://127.0.0.1:${server.port}`;
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return server;
}

// A server that writes `chunks` copies of `chunk` as one response body, as fast as the client
// reads. It emits 'stalled' (with the bytes written) when a drain has not come for 200 ms,
// that is when the client stopped reading, and 'finished' once all is written. Its `outcome()`
// resolves with whichever comes first: { stalled } or { finished }.
async function streamingServer(t, chunk, chunks) {
  const server = await httpServer(t, async (req, res) => {
    let written = 0;
    res.writeHead(200, { 'content-length': chunk.length * chunks });
    for (let i = 0; i < chunks; i++) {
      written += chunk.length;
      if (!res.write(chunk)) {
        const stall = setTimeout(() => server.emit('stalled', written), 200);
        await once(res, 'drain');
        clearTimeout(stall);
      }
    }
    res.end();
    server.emit('finished');
  });
  server.outcome = () =>
    Promise.race([
      once(server, 'stalled').then(([at]) => ({ stalled: at })),
      once(server, 'finished').then(() => ({ finished: true })),
    ]);
  return server;
}

// A raw TCP server scripted per connection: `onConnection(socket, index)`; it sees exactly the
// bytes the client sends and decides every byte, FIN and RST itself. With `tlsOptions`, the
// same over TLS: the socket is the server's TLS socket, once its handshake is done.
async function rawServer(t, onConnection, tlsOptions) {
  const sockets = new Set();
  let count = 0;
  const accept = (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    onConnection(socket, count++);
  };
  const server = tlsOptions === undefined ? net.createServer(accept) : tls.createServer(tlsOptions, accept);
  if (tlsOptions !== undefined) server.on('tlsClientError', () => {});
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  server.port = server.address().port;
  Object.defineProperty(server, 'connectionCount', { get: () => count });
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return server;
}

// Reads one HTTP/1.1 request head (and a content-length body) from a raw socket.
function readRequest(socket) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.subarray(0, end).toString('latin1');
      const m = /content-length:\s*(\d+)/i.exec(head);
      const need = end + 4 + (m ? Number(m[1]) : 0);
      if (buf.length < need) return;
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      const rest = buf.subarray(need);
      if (rest.length) socket.unshift(rest);
      resolve({ head, body: buf.subarray(end + 4, need) });
    };
    const onEnd = () => reject(new Error('connection ended before a request arrived'));
    socket.on('data', onData);
    socket.on('end', onEnd);
  });
}

// The requests of a raw socket one after another, until the client closes it or it breaks.
async function* eachRequest(socket) {
  for (;;) {
    try {
      yield await readRequest(socket);
    } catch {
      return;
    }
  }
}

// Performs a request and resolves with { res, body, req } once the body is read.
function request(url, options = {}, body) {
  return new Promise((resolve, reject) => {
    const args = typeof url === 'object' && !(url instanceof URL) ? [{ ...url, ...options }] : [url, options];
    const req = http.request(...args, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ res, req, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

// Resolves with the error a request fails with (rejects if it succeeds).
function requestError(url, options = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, options, (res) => {
      res.resume();
      res.on('end', () => reject(new Error(`expected an error, got ${res.statusCode}`)));
      res.on('error', resolve);
    });
    req.on('error', resolve);
    req.end();
  });
}

// Waits, one event-loop turn at a time, until `predicate()` holds; fails after `ms`.
// For state that changes on I/O this test cannot observe as an event (the pool in Rust).
async function until(predicate, ms = 5000, what = 'condition') {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

// Resolves once `count()` (how many chunks a body source has given) has moved past 1 and then
// stayed the same over 20 turns of the loop: the sending waits for the connection, which takes
// no more of the body.
function stalled(count, ms = 10_000) {
  let last = -1;
  let still = 0;
  return until(() => {
    const now = count();
    still = now === last ? still + 1 : 0;
    last = now;
    return now > 1 && still >= 20;
  }, ms, 'the upload to stall');
}

// Resets a raw server's connection (an RST): a TLS socket's through the TCP socket under it,
// as a TLS socket cannot reset itself.
function reset(socket) {
  (socket._parent || socket).resetAndDestroy();
}

// Resolves when `socket` (a server-side socket) closes.
function closed(socket) {
  return socket.destroyed && socket.closed ? Promise.resolve() : once(socket, 'close');
}

// Listens on a loopback port; the server and its connections close when the test ends.
async function listen(t, server) {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return server;
}

// Runs `script` in a child Node process (with Node's `flags`; an `env` entry set to undefined
// is left out of its environment). A child that has not exited after CHILD_LIMIT_MS (an
// exception lost instead of reaching its handler, a request that never settles) is killed, and
// its stderr says so: no test waits on a hung child.
const CHILD_LIMIT_MS = 15000;

async function runChild(script, env = {}, flags = []) {
  const child = spawn(process.execPath, [...flags, '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const limit = setTimeout(() => {
    err += `\n(killed: still running after ${CHILD_LIMIT_MS} ms; stdout: ${JSON.stringify(out)})`;
    child.kill('SIGKILL');
  }, CHILD_LIMIT_MS);
  const [code, signal] = await once(child, 'exit');
  clearTimeout(limit);
  return { code, signal, out, err };
}

// Whether the object of WeakRef `weak` is collected within a bounded number of loop turns,
// collecting garbage at each (a release from tokio crosses the inbox first). Hold no strong
// reference to it meanwhile, and do not deref it in the same turn before calling this.
async function collected(weak) {
  const v8 = require('node:v8');
  const vm = require('node:vm');
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc');
  for (let i = 0; i < 200; i++) {
    gc();
    if (weak.deref() === undefined) return true;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return false;
}

// The SHA-256 of `buf`, in hex.
function sha256(buf) {
  return require('node:crypto').createHash('sha256').update(buf).digest('hex');
}

// What a request's body came to, once it has all been read: its byte count and SHA-256.
function received(req) {
  const hash = require('node:crypto').createHash('sha256');
  let bytes = 0;
  req.on('data', (c) => {
    bytes += c.length;
    hash.update(c);
  });
  return new Promise((resolve) => req.on('end', () => resolve({ bytes, sha: hash.digest('hex') })));
}

// A Dispatcher of this package that the test destroys when it ends.
function dispatcher(t, options) {
  const { Dispatcher } = require('..');
  const d = new Dispatcher(options);
  t.after(() => d.destroy());
  return d;
}

// A server that answers every request with `body`, and its SHA-256 as the trailer `x-sum`.
async function trailingServer(t, body) {
  return httpServer(t, (req, res) => {
    res.setHeader('trailer', 'x-sum');
    res.write(body);
    res.addTrailers({ 'x-sum': sha256(body) });
    res.end();
  });
}

// A request body source that gives 'first;', is silent for `gap` ms (a slow upload: the
// silence is the scenario, not a wait for something), then gives 'last' and ends.
function slowSource(gap) {
  const { Readable } = require('node:stream');
  let started = false;
  return new Readable({
    read() {
      if (started) return;
      started = true;
      this.push('first;');
      setTimeout(() => {
        this.push('last');
        this.push(null);
      }, gap);
    },
  });
}

// The TCP timer of an established connection in /proc/net/tcp, by its two ports: [timer kind,
// when] (kind 2 is keep-alive probes, 0 none), as Linux tells it.
function tcpTimer(localPort, remotePort) {
  const hex = (port) => `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length > 5 && fields[1].endsWith(hex(localPort)) && fields[2].endsWith(hex(remotePort)) && fields[3] === '01') {
      const [kind, when] = fields[5].split(':');
      return [Number.parseInt(kind, 16), Number.parseInt(when, 16)];
    }
  }
  return null;
}

module.exports = { tcpTimer, sha256, received, dispatcher, trailingServer, listen, httpServer, streamingServer, rawServer, readRequest, eachRequest, request, requestError, until, stalled, closed, reset, runChild, collected, slowSource };
