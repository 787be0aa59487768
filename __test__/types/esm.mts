// The public API as an ES module user sees it (module: nodenext).
import http from 'node:http';
import Agent from 'hyperagent';
import { Agent as Named, HttpAgent, constants } from 'hyperagent';

const a = new Agent({ maxSockets: 5 });
const b = new Named({ freeSocketTimeout: 1000 });
const c: http.Agent = new HttpAgent();
const sym: symbol = constants.SOCKET_NAME;
http.get('http://127.0.0.1/', { agent: b });
void [a, c, sym];
