#!/usr/bin/env node
'use strict';

// Runs Node's agent, agentkeepalive and hyperagent through the same keep-alive fault scenarios
// and prints how many requests failed: `node scripts/faults.js` (the README's table).
// Servers are raw `net` servers on 127.0.0.1 that script their closes and resets.

const http = require('node:http');
const net = require('node:net');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const { Agent } = require(root);
const AgentKeepAlive = require(require.resolve('agentkeepalive', { paths: [root] }));

const reply = (id) => `HTTP/1.1 200 OK\r\nContent-Length: ${id.length}\r\n\r\n${id}`;

// Reads request heads (no bodies in these scenarios) and calls onRequest(id, index).
function serve(onConnection) {
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = '';
    let index = 0;
    const api = onConnection(socket);
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      let end;
      while ((end = buf.indexOf('\r\n\r\n')) >= 0) {
        const head = buf.slice(0, end);
        buf = buf.slice(end + 4);
        const m = /x-id: (\S+)/i.exec(head);
        api.request(m ? m[1] : '?', index++);
      }
    });
  });
  server.closeAll = () => {
    for (const s of sockets) s.destroy();
    server.close();
  };
  return server;
}

const scenarios = {
  // The server closes a connection after it has been idle for 20 ms; the client reuses it
  // at 17..23 ms, 200 times.
  'idle close (FIN) at reuse time': { idle: 'fin', requests: 200, gap: true },
  'idle close (RST) at reuse time': { idle: 'rst', requests: 200, gap: true },
  // The server closes after every response without saying so; 200 requests queue behind
  // maxSockets: 1.
  'close after every response, queued (maxSockets 1)': { closeEach: true, requests: 200, maxSockets: 1 },
  // The server resets each connection after its third response; 300 requests, 8 at a time.
  'RST after 3 responses, concurrent': { resetAfter: 3, requests: 300, maxSockets: 8 },
};

function makeServer(sc, received) {
  return serve((socket) => {
    let timer = null;
    const arm = () => {
      if (!sc.idle) return;
      clearTimeout(timer);
      timer = setTimeout(() => (sc.idle === 'rst' ? socket.resetAndDestroy() : socket.end()), 20);
    };
    socket.on('close', () => clearTimeout(timer));
    arm();
    return {
      request(id, index) {
        clearTimeout(timer);
        received.set(id, (received.get(id) || 0) + 1);
        if (socket.destroyed) return;
        if (sc.resetAfter !== undefined && index === sc.resetAfter) {
          socket.resetAndDestroy();
          return;
        }
        if (sc.closeEach) socket.end(reply(id));
        else socket.write(reply(id));
        arm();
      },
    };
  });
}

const clients = {
  "Node's http.Agent (keepAlive)": (o) => ({ agent: new http.Agent({ keepAlive: true, ...o }), promise: false }),
  agentkeepalive: (o) => ({ agent: new AgentKeepAlive(o), promise: false }),
  'hyperagent (http.request)': (o) => ({ agent: new Agent(o), promise: false }),
  'hyperagent (agent.request())': (o) => ({ agent: new Agent(o), promise: true }),
};

function send({ agent, promise }, port, id) {
  if (promise) {
    return agent.request(`http://127.0.0.1:${port}/`, { headers: { 'x-id': id } }).then((r) => r.body.text());
  }
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, agent, headers: { 'x-id': id } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function run(sc, makeClient) {
  const received = new Map();
  const server = makeServer(sc, received);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  const client = makeClient({ maxSockets: sc.maxSockets || 50, freeSocketTimeout: 10_000, timeout: 10_000 });
  const errors = new Map();
  let failed = 0;
  const one = async (id) => {
    try {
      if ((await send(client, port, id)) !== id) throw Object.assign(new Error('wrong body'), { code: 'WRONG' });
    } catch (err) {
      failed++;
      errors.set(err.code, (errors.get(err.code) || 0) + 1);
    }
  };
  if (sc.gap) {
    for (let i = 0; i < sc.requests; i++) {
      await one(`i${i}`);
      await sleep(17 + (i % 7));
    }
  } else {
    const ids = Array.from({ length: sc.requests }, (_, i) => `i${i}`);
    await Promise.all(ids.map(one));
  }
  client.agent.destroy();
  server.closeAll();
  return { failed, errors: [...errors].map(([c, n]) => `${n} ${c}`).join(', ') };
}

async function main() {
  const rows = [];
  for (const [name, sc] of Object.entries(scenarios)) {
    const row = { name, cells: [] };
    for (const [client, make] of Object.entries(clients)) {
      const r = await run(sc, make);
      row.cells.push(r.failed ? `${r.failed} / ${sc.requests} (${r.errors})` : `0 / ${sc.requests}`);
      process.stderr.write(`${name} | ${client}: ${r.failed} failed ${r.errors}\n`);
    }
    rows.push(row);
  }
  const names = Object.keys(clients);
  const out = [
    `| scenario (GET requests failed) | ${names.join(' | ')} |`,
    `| --- | ${names.map(() => '---:').join(' | ')} |`,
    ...rows.map((r) => `| ${r.name} | ${r.cells.join(' | ')} |`),
  ].join('\n');
  console.log(out);
  console.log(`\nNode ${process.version}, ${new Date().toISOString().slice(0, 10)}; \`node scripts/faults.js\``);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
