// agent.request(): promises and streams, HTTP spoken by hyper in Rust.
// Run: node examples/promise.js
'use strict';

const http = require('node:http');
const { Readable } = require('node:stream');
const { Agent } = require('..');

const server = http.createServer(async (req, res) => {
  let size = 0;
  for await (const chunk of req) size += chunk.length;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ method: req.method, url: req.url, received: size }));
});

server.listen(0, '127.0.0.1', async () => {
  const agent = new Agent({ maxSockets: 8 });
  const origin = `http://127.0.0.1:${server.address().port}`;

  // JSON in, JSON out.
  const res = await agent.request(`${origin}/items?page=2`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ q: 1 }),
    signal: AbortSignal.timeout(5000),
  });
  console.log(res.statusCode, res.headers['content-type'], await res.body.json());

  // A streamed request body (sent chunked), read back as a stream.
  const upload = Readable.from(['a', 'b', 'c'].map((s) => s.repeat(100_000)));
  const streamed = await agent.request({ origin, path: '/upload' }, { method: 'PUT', body: upload });
  for await (const chunk of streamed.body) process.stdout.write(chunk);
  process.stdout.write('\n');

  agent.destroy();
  server.close();
});
