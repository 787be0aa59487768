// The drop-in agent with Node's own http client: keep-alive, limits, statistics.
// Run: node examples/drop-in.js
'use strict';

const http = require('node:http');
const { Agent } = require('..');

const server = http.createServer((req, res) => res.end(`hello from ${req.url}`));
server.listen(0, '127.0.0.1', async () => {
  const agent = new Agent({ maxSockets: 4, freeSocketTimeout: '4s' });
  const url = `http://127.0.0.1:${server.address().port}`;

  const get = (path) => new Promise((resolve, reject) => {
    http.get(`${url}${path}`, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });

  const bodies = await Promise.all(Array.from({ length: 20 }, (_, i) => get(`/item/${i}`)));
  console.log(bodies.slice(0, 3), '...');
  // 20 requests, at most 4 connections.
  console.log(agent.getCurrentStatus());
  agent.destroy();
  server.close();
});
