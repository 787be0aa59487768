// The public API as an ES module user sees it (module: nodenext).
import http from 'node:http';
import Agent from 'hyperagent-rs';
import { Agent as Named, HttpAgent, HttpsAgent, constants, Dispatcher, setGlobalDispatcher } from 'hyperagent-rs';
import https from 'node:https';

const a = new Agent({ maxSockets: 5 });
const b = new Named({ freeSocketTimeout: 1000 });
const c: http.Agent = new HttpAgent();
const sym: symbol = constants.SOCKET_NAME;
http.get('http://127.0.0.1/', { agent: b });
const d: https.Agent = new HttpsAgent({ ca: [] });
const fetcher = new Dispatcher({ https: new HttpsAgent() });
setGlobalDispatcher(fetcher);
void [a, c, sym, d];
