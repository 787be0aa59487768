// HTTP/2 on agent.request() and fetch: one connection carries many requests at once.
// Run: node examples/http2.js
'use strict';

const http2 = require('node:http2');
const fs = require('node:fs');
const path = require('node:path');
const { HttpsAgent, Dispatcher } = require('..');

const tls = (name) => fs.readFileSync(path.join(__dirname, '..', '__test__', 'fixtures', 'tls', name));
const server = http2.createSecureServer({ cert: tls('localhost-chain.pem'), key: tls('localhost-key.pem'), allowHTTP1: true });
const sessions = new Set();
server.on('session', (s) => sessions.add(s));
server.on('request', (req, res) => res.end(`HTTP/${req.httpVersion} ${req.url}`));

server.listen(0, '127.0.0.1', async () => {
  const origin = `https://localhost:${server.address().port}`;
  const agent = new HttpsAgent({ allowH2: true, ca: tls('ca.pem') });
  const bodies = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    const res = await agent.request(`${origin}/item/${i}`);
    return `${res.httpVersion} ${await res.body.text()}`;
  }));
  console.log(bodies.slice(0, 3).join('\n'), `\n... ${bodies.length} responses over ${sessions.size} connection`);

  // fetch, through a Dispatcher over the same agent.
  const dispatcher = new Dispatcher({ https: agent });
  const res = await fetch(`${origin}/fetched`, { dispatcher });
  console.log(res.status, await res.text());

  agent.destroy();
  for (const s of sessions) s.close();
  server.close();
});
