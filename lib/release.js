'use strict';

// What becomes of a drop-in connection whose request finished, as the agent's options and
// Node's keepSocketAlive() hook decide: the rules themselves are the pool core's
// (src/pool/release.rs); these read the options' live values and the response's Keep-Alive
// header, and ask it.

const binding = require('./native');
const errors = require('./errors');
const { rawHeader } = require('./headers');

// How long a socket may idle, as the agent's keepSocketAlive() found it.
const kIdleFor = Symbol('hyperagent.idleFor');

// How much longer connection `id`, whose request finished, may serve under socketActiveTTL
// and maxRequestsPerSocket (0: no longer; Infinity without either), by the agent's rule in
// Rust, with the options' live values.
function useLeft(agent, id) {
  const { socketActiveTTL: ttl, maxRequestsPerSocket: max } = agent.options;
  return ttl > 0 || max > 0 ? binding.useLeft(id, Number(ttl) || 0, Number(max) || 0) : Infinity;
}

// How long the connection of a socket its request freed may idle (-1: it may not; at most
// `remaining`), as the agent's keepSocketAlive() (Node's hook) decides. A keepSocketAlive() of
// the program's that set a timeout on the socket (as Node's and agentkeepalive's own do) has
// its idle socket time out then: Rust expires it, and the socket, if still held, emits
// 'timeout' (see NativeSocket#_onIdleEnd).
function keptIdle(agent, socket, req, remaining) {
  socket[kIdleFor] = undefined;
  if (!req) return unusedIdle(agent, socket, remaining);
  const timeoutBefore = socket.timeout;
  if (!(req.shouldKeepAlive && agent.keepAlive) || !keepThrough(agent, socket)) return -1;
  // A timeout the hook set on the socket wins over the agent's own idle time (which an
  // override calling the agent's keepSocketAlive() first has in kIdleFor).
  const set = socket.timeout > 0 && socket.timeout !== timeoutBefore ? socket.timeout : undefined;
  return Math.min(set ?? socket[kIdleFor] ?? defaultIdle(agent), remaining);
}

// How long a socket freed by no request may idle: its request was destroyed before it got the
// socket (Node's http frees the socket then). Node's agent calls no hook and closes it; this
// connection carried nothing, and a keep-alive agent keeps it for the next request, which is
// spared a connect (and a TLS handshake).
function unusedIdle(agent, socket, remaining) {
  if (!agent.keepAlive) return -1;
  const idle = idleTimeout(agent, socket);
  return idle > 0 ? Math.min(idle, remaining) : -1;
}

// The agent's keepSocketAlive() (Node's hook) for `socket`. One of the program's that throws
// has the socket closed, so that its slot serves the next request, and the throw is an uncaught
// exception, as with Node's agent (which would keep the slot until the server closes the
// connection). It is thrown on the next tick, not through http's code that emitted 'free':
// where that code has more to do (Node 24 frees the socket of a request destroyed before it
// got it, and then ends the request), a throw through it would leave the request unended.
function keepThrough(agent, socket) {
  try {
    return agent.keepSocketAlive(socket);
  } catch (thrown) {
    socket.destroy();
    errors.throwLater(thrown);
    return false;
  }
}

// How long a freed connection may idle: freeSocketTimeout (or the socket's own, as urllib
// sets it), shortened by the server's `Keep-Alive: timeout=N` hint as Node shortens it.
// 0 means "do not keep".
function idleTimeout(agent, socket) {
  const res = socket._httpMessage && socket._httpMessage.res;
  return idleFor(agent, res ? res.rawHeaders : [], socket.freeSocketTimeout || socket.freeSocketKeepAliveTimeout);
}

// freeSocketTimeout (or a custom value), shortened by the response's Keep-Alive hint: the
// agent's rule, in Rust (src/pool/release.rs), with the options as they are now.
function idleFor(agent, rawHeaders, custom) {
  const own = Number(custom || defaultIdle(agent));
  // Read from rawHeaders: building res.headers for it would cost more than the whole lookup
  // when the user never reads the headers.
  const hint = rawHeader(rawHeaders, 'keep-alive');
  // Without a hint there is nothing to shorten: no crossing into Rust on every release.
  if (hint === undefined) return own;
  return binding.idleFor(own, hint, hintBuffer(agent.agentKeepAliveTimeoutBuffer));
}

// Node's reading of `agentKeepAliveTimeoutBuffer`: a finite number of milliseconds, at least 0;
// anything else is the default, a second.
function hintBuffer(value) {
  return typeof value === 'number' && value >= 0 && Number.isFinite(value) ? value : 1000;
}

function defaultIdle(agent) {
  return agent.options.freeSocketTimeout || agent.options.timeout || Infinity;
}

module.exports = {
  kIdleFor,
  useLeft,
  keptIdle,
  idleTimeout,
  idleFor,
  hintBuffer,
  defaultIdle,
};
