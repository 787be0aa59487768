// Compiled with `tsc --noEmit` by `npm run test:types` against @types/node 18 (and no other
// Node types): the agents go where Node's are taken, as a program on Node 18's types has them.
import http = require('node:http');
import https = require('node:https');
import hyperagent = require('../../..');

const agent = new hyperagent.Agent({ keepAlive: true, maxSockets: 10 });
const httpsAgent = new hyperagent.HttpsAgent({ keepAlive: true, allowH2: true });
http.get('http://localhost/', { agent }, (res) => res.resume());
https.get('https://localhost/', { agent: httpsAgent }, (res) => res.resume());
const options: http.RequestOptions = { agent };
const httpsOptions: https.RequestOptions = { agent: httpsAgent };
const base: http.Agent = agent;
const secure: https.Agent = httpsAgent;
// What the agents' own typings add, read through Node 18's types.
const waiting: number = Object.keys(agent.requests).length + Object.keys(secure.requests).length;
const status = agent.getCurrentStatus();
const created: number = status.createSocketCount;
void agent.request('http://localhost/').then((res) => res.body.text());
void [options, httpsOptions, base, waiting, created];
