#!/usr/bin/env node
'use strict';

// Soak: sends many requests through each path of one agent (1,000,000 by default; the first
// argument changes it) against a local server, then as many again on both paths with every
// second request aborted as soon as it is made, and reports RSS, JS heap and open descriptors
// at the start, the middle and the end of each, and at the end what still keeps the process
// alive for the agent (`heldOperations()`: [0, 0] when all is well). Not part of `npm test`:
// `node --expose-gc scripts/soak.js`.

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');
const { Agent } = require(path.resolve(__dirname, '..'));
const binding = require(path.resolve(__dirname, '..', 'lib', 'native'));

const total = Number(process.argv[2]) || 1_000_000;
const concurrency = 50;

function snapshot(label) {
  if (global.gc) global.gc();
  const m = process.memoryUsage();
  const fds = fs.readdirSync('/proc/self/fd').length;
  console.log(`${label.padEnd(28)} rss ${(m.rss / 2 ** 20).toFixed(1)} MiB  heap ${(m.heapUsed / 2 ** 20).toFixed(1)} MiB  fds ${fds}`);
}

function dropIn(agent, port, signal) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent, signal }, (res) => {
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
}

async function promise(agent, port, signal) {
  const res = await agent.request(`http://127.0.0.1:${port}/`, { signal });
  await res.body.text();
}

// Both paths in turn, every second request aborted at once (queued, connecting or sent).
function aborting() {
  let n = 0;
  return (agent, port) => {
    n++;
    const controller = new AbortController();
    const sent = (n % 4 < 2 ? dropIn : promise)(agent, port, controller.signal);
    if (n % 2 === 0) controller.abort();
    return sent;
  };
}

async function soak(name, send, agent, port) {
  let started = 0;
  let failed = 0;
  const worker = async () => {
    while (started < total) {
      started++;
      if (started === total / 2) snapshot(`${name}: middle`);
      await send(agent, port).catch(() => failed++);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  snapshot(`${name}: end (${failed} failed)`);
}

async function main() {
  const server = http.createServer((req, res) => res.end('hello'));
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  const agent = new Agent({ maxSockets: concurrency });
  snapshot('start');
  await soak('http.request', dropIn, agent, port);
  await soak('agent.request()', promise, agent, port);
  await soak('half aborted', aborting(), agent, port);
  agent.destroy();
  server.close();
  await new Promise((resolve) => setTimeout(resolve, 100));
  snapshot('after destroy()');
  console.log(agent.getCurrentStatus());
  console.log('heldOperations()', binding.heldOperations());
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
