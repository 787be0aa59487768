// The agents in other clients: axios, got and node-fetch (install them first).
// Run: node examples/clients.js
'use strict';

const http = require('node:http');
const { Agent, HttpsAgent } = require('..');

const server = http.createServer((req, res) => res.end(JSON.stringify({ url: req.url })));
server.listen(0, '127.0.0.1', async () => {
  const url = `http://127.0.0.1:${server.address().port}/json`;
  const httpAgent = new Agent({ maxSockets: 50 });
  const httpsAgent = new HttpsAgent({ maxSockets: 50 });

  const { default: axios } = await import('axios');
  console.log('axios', (await axios.get(url, { httpAgent, httpsAgent })).data);

  const { default: got } = await import('got');
  console.log('got', await got(url, { agent: { http: httpAgent, https: httpsAgent } }).json());

  const { default: fetch } = await import('node-fetch');
  console.log('node-fetch', await (await fetch(url, { agent: httpAgent })).json());

  httpAgent.destroy();
  httpsAgent.destroy();
  server.close();
});
