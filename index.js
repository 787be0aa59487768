'use strict';

// hyperagent: Node's http.Agent with its pool, sockets and DNS in Rust.
//
//   const { Agent } = require('hyperagent-rs');       // or: const Agent = require('hyperagent-rs')
//   http.get(url, { agent: new Agent({ maxSockets: 50 }) }, callback);

const http = require('node:http');
const https = require('node:https');
const { Agent, HttpsAgent } = require('./lib/agent');
const constants = require('./lib/constants');
const { Dispatcher, setGlobalDispatcher, getGlobalDispatcher } = require('./lib/dispatcher');

let defaultHttp = null;
let defaultHttps = null;

// The default agents go through the environment's proxy where Node's global agents do
// (NODE_USE_ENV_PROXY=1, --use-env-proxy): Node gives its own agents the environment then.
function envProxy(nodeAgent) {
  return (nodeAgent && nodeAgent.options && nodeAgent.options.proxyEnv) || undefined;
}

// agent.request() on a default agent of the URL's protocol.
function request(url, options) {
  const protocol = typeof url === 'string' ? url.slice(0, 6).toLowerCase() : (url && (url.protocol || url.origin)) || '';
  if (String(protocol).startsWith('https')) {
    defaultHttps ??= new HttpsAgent({ proxyEnv: envProxy(https.globalAgent) });
    return defaultHttps.request(url, options);
  }
  defaultHttp ??= new Agent({ proxyEnv: envProxy(http.globalAgent) });
  return defaultHttp.request(url, options);
}

module.exports = Agent;
module.exports.Agent = Agent;
module.exports.HttpAgent = Agent;
module.exports.HttpsAgent = HttpsAgent;
module.exports.constants = constants;
module.exports.request = request;
module.exports.Dispatcher = Dispatcher;
module.exports.setGlobalDispatcher = setGlobalDispatcher;
module.exports.getGlobalDispatcher = getGlobalDispatcher;
module.exports.default = Agent;
