// Node's built-in fetch over hyperagent's pools, through a Dispatcher.
// Run: node examples/fetch.js
'use strict';

const http = require('node:http');
const { Dispatcher, setGlobalDispatcher, getGlobalDispatcher } = require('..');

const server = http.createServer((req, res) => {
  if (req.url === '/old') {
    res.writeHead(301, { location: '/new' });
    return res.end();
  }
  res.setHeader('content-type', 'application/json');
  return res.end(JSON.stringify({ url: req.url }));
});

server.listen(0, '127.0.0.1', async () => {
  const origin = `http://127.0.0.1:${server.address().port}`;
  const dispatcher = new Dispatcher({ maxSockets: 8 });

  // One fetch with the dispatcher given; fetch follows the redirect itself.
  const res = await fetch(`${origin}/old`, { dispatcher });
  console.log(res.status, res.url, await res.json());

  // Every fetch from now on, until the previous dispatcher is set back.
  const previous = getGlobalDispatcher();
  setGlobalDispatcher(dispatcher);
  const all = await Promise.all([1, 2, 3].map((i) => fetch(`${origin}/item/${i}`).then((r) => r.json())));
  console.log(all.map((body) => body.url).join(', '));
  setGlobalDispatcher(previous);

  console.log('requests on the pool:', dispatcher.http.requestCount);
  await dispatcher.close();
  server.close();
});
