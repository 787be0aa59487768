'use strict';

// Servers and helpers the agent.request() tests share.

const test = require('node:test');
const http = require('node:http');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');
const { httpServer, rawServer } = require('../helpers');

// An echo server: method, url, headers and a digest of the body.
async function echoServer(t, extra) {
  return httpServer(t, async (req, res) => {
    if (extra && extra(req, res)) return;
    const hash = crypto.createHash('sha256');
    let n = 0;
    try {
      for await (const chunk of req) {
        hash.update(chunk);
        n += chunk.length;
      }
    } catch {
      return; // the client gave up on its upload
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      method: req.method,
      url: req.url,
      headers: req.headers,
      length: n,
      sha256: hash.digest('hex'),
    }));
  });
}

const sha = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

const tlsFixture = (name) => fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'tls', name));

function* chunks(buf, size) {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

// A server that answers `expect: 100-continue` through `onCheck(req, res)`; `continueAndEcho`
// agrees and echoes the body.
async function continueServer(t, onCheck) {
  const server = http.createServer((req, res) => res.end('unused'));
  server.on('checkContinue', onCheck);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  return `http://127.0.0.1:${server.address().port}/`;
}

function continueAndEcho(req, res) {
  res.writeContinue();
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => res.end(`got ${body}`));
}

// A server that answers whole once 100 KB of the request have come, then reads no more of it
// and keeps the connection open (as one refusing an upload may); `url` is its address.
async function earlyServer(t) {
  const server = await rawServer(t, (socket) => {
    let received = 0;
    socket.on('data', (chunk) => {
      received += chunk.length;
      if (received > 100_000 && !socket.isPaused()) {
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nearly');
        socket.pause();
      }
    });
  });
  server.url = `http://127.0.0.1:${server.port}`;
  return server;
}

module.exports = { echoServer, sha, tlsFixture, chunks, continueServer, continueAndEcho, earlyServer };
