'use strict';

// hyperagent: Node's http.Agent with its pool, sockets and DNS in Rust.
//
//   const { Agent } = require('hyperagent');       // or: const Agent = require('hyperagent')
//   http.get(url, { agent: new Agent({ maxSockets: 50 }) }, callback);

const { Agent, HttpsAgent } = require('./lib/agent');
const constants = require('./lib/constants');

module.exports = Agent;
module.exports.Agent = Agent;
module.exports.HttpAgent = Agent;
module.exports.HttpsAgent = HttpsAgent;
module.exports.constants = constants;
module.exports.default = Agent;
