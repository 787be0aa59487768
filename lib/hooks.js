'use strict';

// Connections a hook of the program's makes, as Node's agent lets programs make them: a
// createSocket() of the program's (a subclass's, or one assigned to the agent) is called for
// every new connection, as Node's addRequest calls it; a createConnection() of the program's
// gives the stream the request goes over. Such a stream is a connection of the pool like any
// other (lib/foreign.js), its bytes never reaching Rust.

const http = require('node:http');
const https = require('node:https');
const { debuglog } = require('node:util');
const binding = require('./native');
const foreign = require('./foreign');
const errors = require('./errors');
const constants = require('./constants');
const { useLeft, keptIdle } = require('./release');
const {
  kPool, kOpenings, kTls, kKeylog, kMake, kConnect, kReleased, MergedOptions, copyOwn, setRequestSocket,
} = require('./internals');

let debug = debuglog('hyperagent', (fn) => {
  debug = fn;
});

// A createSocket() of the program's (a subclass's, or one assigned to the agent) is called
// as Node's addRequest calls it, for every new connection. The usual override (as
// agentkeepalive's) calls the agent's own createSocket() and passes its socket on, perhaps
// after listening to it or counting it; one that passes on a stream of its own makes it the
// connection (see lib/foreign.js). A createSocket() that throws when `sync` (called by
// addRequest) throws out of http.request(), as with Node's agent, its slot freed.
function openThrough(agent, id, name, req, options, sync) {
  agent[kOpenings].set(req, { id, name, socket: null });
  let called = false;
  const done = (err, socket) => {
    if (called) return;
    called = true;
    const opening = agent[kOpenings].get(req);
    agent[kOpenings].delete(req);
    if (!err && opening !== undefined && opening.socket === null && isStream(socket)) {
      // A stream of the program's own: the connection, in the slot opened for it.
      err = adoptForeign(agent, id, name, socket, options, 'createSocket()');
    } else if (!err && (opening === undefined || !isStream(socket) || socket !== opening.socket)) {
      err = errors.hyperagentError(
        'UNSUPPORTED',
        socket === null || socket === undefined
          ? 'createSocket() passed on no socket and no error'
          : "createSocket() passed on a socket other than the one the agent's own createSocket() made for the request",
      );
    }
    if (err) {
      openFailed(agent, id, req, err, opening?.socket ?? null);
      // A stream that cannot carry the request is closed: nobody else will.
      if (isStream(socket) && socket !== opening?.socket && foreign.linkOf(socket) === undefined) socket.destroy();
      return;
    }
    setRequestSocket(agent, req, socket);
  };
  try {
    agent.createSocket(req, options, done);
  } catch (thrown) {
    if (!sync) {
      done(thrown);
      return;
    }
    if (!called) {
      called = true;
      const opening = agent[kOpenings].get(req);
      agent[kOpenings].delete(req);
      slotFailed(agent, id, opening?.socket ?? null);
    }
    throw thrown;
  }
}

// No socket could be made for `req` in slot `id` (`made`: the socket made for it, if any):
// agentkeepalive's createSocketErrorCount, the slot freed, the request failed.
function openFailed(agent, id, req, err, made) {
  slotFailed(agent, id, made);
  req.onSocket(null, err);
}

// The counting and freeing of openFailed, for a hook's throw that goes on out of
// http.request() (the request never had the slot).
function slotFailed(agent, id, made) {
  agent[kPool].countConnectError();
  if (made !== null) made.destroy();
  else agent._socketClosed(null, id, null, false);
}

// Opens connection `id` through the program's createConnection(), called as Node's
// createSocket() calls it (its options, a callback, or a stream returned). `done(err,
// stream)`; the slot is left to the caller when it fails. A hook that throws when `sync`
// frees the slot and throws on.
function openForeign(agent, id, name, options, sync, done) {
  const opts = new MergedOptions();
  copyOwn(opts, options);
  opts._agentKey = name;
  opts.encoding = null;
  if (agent.keepAlive) {
    opts.keepAlive = true;
    opts.keepAliveInitialDelay = agent.keepAliveMsecs;
  }
  let called = false;
  const oncreate = (err, stream) => {
    if (called) return;
    called = true;
    if (!err && !isStream(stream)) {
      err = errors.hyperagentError('UNSUPPORTED', 'createConnection() gave no stream and no error');
    }
    if (!err) {
      err = adoptForeign(agent, id, name, stream, options, 'createConnection()');
      if (err) stream.destroy();
    }
    done(err || null, err ? undefined : stream);
  };
  let made;
  try {
    made = agent.createConnection(opts, oncreate);
  } catch (thrown) {
    if (!sync) {
      oncreate(thrown);
      return;
    }
    called = true;
    slotFailed(agent, id, null);
    throw thrown;
  }
  if (made) oncreate(null, made);
}

// Makes `stream` (from `hook`, a hook of the program's) connection `id`, as Node's agent takes
// a new socket: its listeners, agentkeepalive's marks, the agent's timeout, its key log. Returns
// null, or the error that fails the request when it cannot be (the slot was closed meanwhile,
// or the stream takes none of the marks), the slot then left to the caller.
function adoptForeign(agent, id, name, stream, options, hook) {
  let link;
  try {
    link = foreign.adopt(agent, id, stream, name, options);
  } catch (thrown) {
    return thrown instanceof Error ? thrown : errors.internalError(thrown);
  }
  if (link === null) return errors.hyperagentError('AGENT_DESTROYED', `The connection slot was closed while ${hook} ran`);
  debug('connection %d of %s is a stream of a hook', id, name);
  if (typeof stream.setTimeout === 'function') agent[constants.INIT_SOCKET](stream, options);
  if (agent[kTls] && agent[kKeylog]) stream.on('keylog', (line) => agent.emit('keylog', line, stream));
  return null;
}

// A pooled connection of a hook's stream serves `req` again (`handoff`: as the agent's `_reuse`).
function reuseForeign(agent, link, req, handoff) {
  link.free = false;
  const stream = link.stream;
  stream[constants.SOCKET_REQUEST_COUNT]++;
  const timeout = agent.options.timeout;
  if (timeout > 0 && typeof stream.setTimeout === 'function') stream.setTimeout(timeout);
  if (handoff || reuseThrough(agent, stream, req)) setRequestSocket(agent, req, stream);
}

// Calls the agent's reuseSocket() (Node's hook) for `socket`, an idle one addRequest is about
// to give `req`: true. A throw costs the connection (it closes, and its slot serves the next
// request) and goes on out of http.request(), as Node's agent throws it.
function reuseThrough(agent, socket, req) {
  try {
    agent.reuseSocket(socket, req);
    return true;
  } catch (thrown) {
    debug('reuseSocket() threw; the connection closes');
    socket.destroy();
    throw thrown;
  }
}

function releaseForeign(agent, link) {
  const { id, stream } = link;
  if (id === 0 || link.free) return;
  stream[constants.SOCKET_REQUEST_FINISHED_COUNT]++;
  if (!stream.writable || stream.destroyed) {
    stream.destroy();
    return;
  }
  const req = stream._httpMessage;
  const remaining = useLeft(agent, id);
  if (remaining <= 0) {
    debug('connection %d of %s reached socketActiveTTL or maxRequestsPerSocket', id, link.name);
    stream.destroy();
    return;
  }
  const idle = keptIdle(agent, stream, req, remaining);
  link.free = true;
  let verdict;
  try {
    verdict = binding.release(id, idle);
  } catch (thrown) {
    debug('releasing connection %d failed: %s', id, thrown && thrown.message);
    link._orphan();
    return;
  }
  agent[kReleased](verdict, id, link);
}

// Node's createSocket(req, options, cb), for a program's createSocket() that calls it: makes
// the socket of the connection addRequest() is opening for `req` (in Rust, or through a
// createConnection() of the program's), and passes it to `cb`. It makes no socket outside
// addRequest(): a connection has a slot in the pool first.
function createSocket(req, options, cb) {
  const opening = this[kOpenings].get(req);
  if (opening === undefined || opening.socket !== null) {
    const err = errors.hyperagentError('UNSUPPORTED', "createSocket() makes a socket only for the request addRequest() is serving: a connection gets its slot in the agent's pool first");
    if (typeof cb === 'function') {
      cb(err);
      return;
    }
    throw err;
  }
  if (this.createConnection !== createConnection) {
    openForeign(this, opening.id, opening.name, options, false, (err, stream) => {
      if (!err) opening.socket = stream;
      cb(err, stream);
    });
    return;
  }
  const socket = this[kMake](opening.id, opening.name, options);
  opening.socket = socket;
  this[kConnect](socket, options);
  cb(null, socket);
}

// Node's agent classes as they are when this loads: a program may put ours in their place
// (`http.Agent = Agent`), and Node's own methods are still the ones to call.
const NodeAgent = http.Agent;
const NodeHttpsAgent = https.Agent;

// The agent's own createConnection() opens no connection of the pool (those are opened in
// Rust): called, as a subclass's override calls super.createConnection(), it is Node's, with
// every form of arguments Node's takes ((options[, cb]), (port[, host][, options])), and the
// stream it gives carries the request as any stream of a hook does.
function createConnection(...args) {
  const Base = this instanceof NodeHttpsAgent ? NodeHttpsAgent : NodeAgent;
  return Base.prototype.createConnection.apply(this, args);
}

// agent.request() speaks HTTP in Rust, over connections Rust opens: an agent whose
// connections a createConnection() of the program's makes serves http.request() alone.
function refuseOwnConnect(agent) {
  if (agent.createConnection !== createConnection) {
    throw errors.hyperagentError(
      'UNSUPPORTED',
      'agent.request() speaks HTTP in Rust over connections it opens itself; an agent with a createConnection() hook carries http.request() only',
    );
  }
}

// Something a hook may pass on as a connection: a stream (a net.Socket, a TLSSocket, a
// Duplex of the program's).
function isStream(value) {
  return value !== null && typeof value === 'object' && typeof value.write === 'function'
    && typeof value.on === 'function' && typeof value.destroy === 'function';
}

module.exports = {
  openThrough,
  openFailed,
  openForeign,
  reuseForeign,
  reuseThrough,
  releaseForeign,
  createSocket,
  createConnection,
  refuseOwnConnect,
  isStream,
};
