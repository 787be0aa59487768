'use strict';

// Where an agent's connection goes, read from a request's options as net.connect and Node's
// agent read them: the port, the address family and Happy Eyeballs, a `blockList`, a user's
// `lookup`, and the agent's proxy (`proxyEnv`) with the tunnel an HTTPS request opens through it.

const dns = require('node:dns');
const net = require('node:net');
const errors = require('./errors');
const { syncDefaultCa, rejectsUnauthorized } = require('./tls');

// The agent's proxy configuration (see proxyConfigOf), kept on the agent.
const kProxy = Symbol('hyperagent.proxy');

// The proxy of an agent made with `proxyEnv` (Node 24.5 on, later 22.x releases; where Node
// ignores the option, so does the agent): Node's own configuration, which its constructor leaves
// on the agent, so that which hosts go through it (NO_PROXY) is decided as Node decides.
function proxyConfigOf(agent) {
  const symbol = Object.getOwnPropertySymbols(agent).find((s) => s.description === 'kProxyConfig');
  return symbol === undefined ? null : agent[symbol] ?? null;
}

// The agent's proxy, if a request to `options`'s host and port goes through it (Node's rule:
// not for a Unix socket, nor for a host NO_PROXY names).
function proxiedTo(agent, options) {
  const proxy = agent[kProxy];
  if (proxy === null || options.socketPath) return null;
  let host = options.host || 'localhost';
  if (host.startsWith('[')) host = host.slice(1, -1);
  const port = options.port ? Number(options.port) : agent.defaultPort;
  return proxy.shouldUseProxy(host || 'localhost', port) ? proxy : null;
}

// The header lines a plain-HTTP request through the proxy carries, as Node's http.request adds
// them.
function proxyLinesOf(agent) {
  const proxy = agent[kProxy];
  const lines = proxy.auth ? ['proxy-authorization', proxy.auth] : [];
  lines.push('proxy-connection', agent.keepAlive ? 'keep-alive' : 'close');
  return lines;
}

// Where a connection to `host`:`port` through `proxy` goes: the proxy (over TLS for an https:
// one, as tls.connect with no options of its own reaches it), and for HTTPS the tunnel to open
// (the CONNECT request Node's https.Agent writes). The TLS session inside is the origin's: an IP
// address names it when no server name does.
function proxyTarget(agent, secure, proxy, host, port, servername) {
  const { host: proxyHost, port: proxyPort } = proxy.proxyConnectionOptions;
  const to = { host: proxyHost, port: proxyPort };
  if (proxy.protocol === 'https:') {
    syncDefaultCa();
    to.proxyTls = true;
    to.proxyRejectUnauthorized = rejectsUnauthorized({});
  }
  if (!secure) return to;
  const origin = `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
  let request = `CONNECT ${origin} HTTP/1.1\r\n`;
  if (proxy.auth) request += `proxy-authorization: ${proxy.auth}\r\n`;
  if (agent.keepAlive || agent.maxSockets !== Infinity) request += 'proxy-connection: keep-alive\r\n';
  request += `host: ${origin}\r\n\r\n`;
  to.servername = servername || host;
  to.tunnelRequest = request;
  to.tunnelRefused = `Failed to establish tunnel to ${origin} via ${proxy.href}: `;
  return to;
}

// Whether a connection tries a name's addresses by Happy Eyeballs: its `autoSelectFamily`, or
// Node's process-wide default.
function autoSelects(options) {
  return options.autoSelectFamily ?? net.getDefaultAutoSelectFamily();
}

// How net.connect tries the addresses of a name: Happy Eyeballs unless `autoSelectFamily` is
// false, each attempt alone for `autoSelectFamilyAttemptTimeout` (at least 10 ms), in the
// resolver's order (`dns.setDefaultResultOrder()`); Node's process-wide defaults where the
// options say nothing, read for each new connection as net.connect reads them.
function addressChoice(options) {
  const auto = autoSelects(options);
  const wait = options.autoSelectFamilyAttemptTimeout ?? net.getDefaultAutoSelectFamilyAttemptTimeout();
  return {
    attemptDelayMs: auto ? Math.max(wait, 10) : 0,
    order: typeof dns.getDefaultResultOrder === 'function' ? dns.getDefaultResultOrder() : 'verbatim',
  };
}

// The two options as net.connect checks them, before anything is queued or opened.
function checkAutoSelect(options) {
  const { autoSelectFamily: auto, autoSelectFamilyAttemptTimeout: wait } = options;
  if (auto != null && typeof auto !== 'boolean') {
    throw errors.invalidArgType('options.autoSelectFamily', 'of type boolean', auto);
  }
  if (wait == null) return;
  const name = 'options.autoSelectFamilyAttemptTimeout';
  if (typeof wait !== 'number') throw errors.invalidArgType(name, 'of type number', wait);
  if (!Number.isInteger(wait)) throw errors.outOfRange(name, 'an integer', wait);
  if (wait < 1 || wait > 2147483647) throw errors.outOfRange(name, '>= 1 && <= 2147483647', wait);
}

// A connection's own options as net.connect checks them, before anything is queued or opened
// (the drop-in path's request options, agent.request()'s agent options as they are at its
// first request to an origin).
function checkConnect(options) {
  const { localAddress, socketPath } = options;
  if (socketPath && typeof socketPath !== 'string') throw errors.invalidArgType('options.socketPath', 'of type string', socketPath);
  if (localAddress && !net.isIP(localAddress)) throw errors.invalidIpAddress(localAddress);
  if (options.autoSelectFamily != null || options.autoSelectFamilyAttemptTimeout != null) checkAutoSelect(options);
  errors.checkLocalPort(options.localPort);
  blockListOf(options);
  // A family dns.lookup refuses, where it is the one to resolve the host (net.connect hands a
  // program's lookup the family as it is, and needs none for an IP address).
  const family = dnsFamily(options.family);
  if (family !== undefined && family !== null && family !== 0 && family !== 4 && family !== 6
    && typeof options.lookup !== 'function' && !socketPath && !net.isIP(options.host || 'localhost')) {
    throw errors.invalidArgValue('options.family', options.family, 'must be one of: 0, 4, 6');
  }
}

// Node's `family` option as net.connect reads it: 4 or 6 (or 'IPv4', 'IPv6'); anything else
// is what it hands dns.lookup as it is.
function dnsFamily(family) {
  if (family === 'IPv4') return 4;
  if (family === 'IPv6') return 6;
  return family;
}

// Node's `family` option as a connection takes it: 4, 6, or 0 for either.
function familyOf(options) {
  const family = dnsFamily(options.family);
  return family === 4 || family === 6 ? family : 0;
}

// What net.connect hands a lookup: the family as given, the hints (ADDRCONFIG, but on Windows,
// when neither a family nor hints are given), and `all` when it is to try every address (Happy
// Eyeballs: no family, no localAddress, autoSelectFamily on).
function lookupOptions(options) {
  const family = dnsFamily(options.family);
  let hints = options.hints || 0;
  const either = family !== 4 && family !== 6;
  if (either && hints === 0 && process.platform !== 'win32') hints = dns.ADDRCONFIG;
  const out = { family, hints };
  if (either && !options.localAddress && autoSelects(options)) out.all = true;
  return out;
}

// net.connect's `blockList` (Node 22.13 on; taken on every version here, where net.BlockList
// is): addresses it blocks are not connected to.
function blockListOf(options) {
  const list = options.blockList;
  if (list === undefined || list === null) return null;
  const isBlockList = net.BlockList.isBlockList ?? ((value) => value instanceof net.BlockList);
  if (!isBlockList(list)) throw errors.invalidArgType('options.blockList', 'an instance of net.BlockList', list);
  return list;
}

// Node's own dns.lookup, as this module found it; null when a program had already replaced it.
// Node's is recognised by its source (the same from Node 20 to 26): what a tool that replaced it
// before this loaded put in its place is not Node's.
const NODE_LOOKUP = /^function lookup\(hostname, options, callback\) \{/.test(Function.prototype.toString.call(dns.lookup))
  ? dns.lookup
  : null;

// Whether a connection's host is resolved here, on the JavaScript thread, rather than by Rust's
// resolver (which is getaddrinfo, as Node's dns.lookup): for a `lookup` of the program's, a
// `blockList` that must see the addresses, or a dns.lookup a program replaced (a DNS cache, a
// test's stub), which net.connect would call.
function resolvesHere(options, blockList) {
  return typeof options.lookup === 'function' || blockList !== null || dns.lookup !== NODE_LOOKUP;
}

// The addresses to connect to for `host`: from the user's `lookup` (called as net.connect calls
// it), or from dns.lookup as it is now (an IP address is its own), those the
// block list blocks left out (all of them: ERR_IP_BLOCKED, as net reports it).
// `done(err, addresses, family, looked)`, `looked` when a lookup ran (net emits 'lookup' then).
function resolve(options, host, blockList, done) {
  const user = typeof options.lookup === 'function';
  if (!user && net.isIP(host)) {
    done(blocked(blockList, [host]), [host], net.isIP(host), false);
    return;
  }
  const lookup = user ? options.lookup : dns.lookup;
  let called = false;
  lookup(host, lookupOptions(options), (err, address, family) => {
    // A program's lookup may call back more than once: the first answer is taken.
    if (called) return undefined;
    called = true;
    if (err) return done(err, undefined, family, true);
    // What is not an entry of `all: true` ({ address, family }) is checked as an address (a
    // lookup that answered one address without being asked for all of them included).
    const addresses = Array.isArray(address) ? address.map((a) => (a !== null && typeof a === 'object' ? a.address : a)) : [address];
    const bad = notAnAddress(addresses);
    if (bad >= 0) return done(errors.invalidIpAddress(addresses[bad]), undefined, family, true);
    const allowed = blockList === null ? addresses : addresses.filter((a) => blocked(blockList, [a]) === null);
    done(allowed.length > 0 ? null : blocked(blockList, addresses), allowed, family, true);
  });
}

// ERR_IP_BLOCKED for the first of `addresses` the block list blocks, or null.
function blocked(blockList, addresses) {
  if (blockList === null) return null;
  const hit = addresses.find((a) => blockList.check(a, net.isIPv6(a) ? 'ipv6' : 'ipv4'));
  return hit === undefined ? null : errors.ipBlocked(hit);
}

// Where in what a lookup gave the first that is not an IP address is (0 for none at all: an
// error about `undefined`), or -1 when all are.
function notAnAddress(addresses) {
  if (addresses.length === 0) return 0;
  return addresses.findIndex((a) => typeof a !== 'string' || net.isIP(a) === 0);
}

function validatePort(port) {
  if (typeof port === 'number' && (port >>> 0) === port && port < 65536) return port;
  const n = typeof port === 'string' && port.trim() !== '' ? Number(port) : port;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 65535) throw errors.badPort(port);
  return n;
}

module.exports = {
  kProxy,
  checkConnect,
  proxyConfigOf,
  proxiedTo,
  proxyLinesOf,
  proxyTarget,
  addressChoice,
  checkAutoSelect,
  familyOf,
  blockListOf,
  resolvesHere,
  resolve,
  blocked,
  notAnAddress,
  validatePort,
};
