'use strict';

// agentkeepalive's statistics, getCurrentStatus() and deprecated views of its options, and the
// views of the pool that Node's agent has (sockets, freeSockets, requests, totalSocketCount),
// keyed by name as Node's are: each asks the pool in Rust when it is read. An Agent class takes
// them as its own (`mixin`).

const foreign = require('./foreign');
const { kName } = require('./socket');
const { kPool, kClosing, kIdleFace, kWaiters } = require('./internals');

// The counters agentkeepalive's statusChanged watches.
const STATUS_COUNTERS = ['createSocketCount', 'createSocketErrorCount', 'closeSocketCount', 'errorSocketCount', 'timeoutSocketCount', 'requestCount'];

class Views {
  // agentkeepalive's deprecated views of its options, with its warnings.
  get timeout() {
    warnDeprecated('agent.timeout', 'agent.options.timeout');
    return this.options.timeout;
  }

  get freeSocketKeepAliveTimeout() {
    warnDeprecated('agent.freeSocketKeepAliveTimeout', 'agent.options.freeSocketTimeout');
    return this.options.freeSocketTimeout;
  }

  get socketActiveTTL() {
    warnDeprecated('agent.socketActiveTTL', 'agent.options.socketActiveTTL');
    return this.options.socketActiveTTL;
  }

  // On Node's agent these names are no properties of its own, and a program or a subclass may
  // assign them (socks-proxy-agent's constructor sets `this.timeout`): what it assigns is a
  // plain property from then on, read back as it was assigned and changing nothing else.
  set timeout(value) {
    own(this, 'timeout', value);
  }

  set freeSocketKeepAliveTimeout(value) {
    own(this, 'freeSocketKeepAliveTimeout', value);
  }

  set socketActiveTTL(value) {
    own(this, 'socketActiveTTL', value);
  }

  // The counters (each defined below, after the class): the pool's counts, which a program
  // may also assign (agentkeepalive's are plain fields), as a program resets them.

  // agentkeepalive's: whether a counter moved since the last look (the `*LastCheck`
  // properties, which a look that finds a change brings up to date). A new agent's is false.
  get statusChanged() {
    const now = counts(this);
    let changed = false;
    for (const name of STATUS_COUNTERS) {
      if (now[name] !== this[`${name}LastCheck`]) changed = true;
    }
    if (changed) {
      for (const name of STATUS_COUNTERS) this[`${name}LastCheck`] = now[name];
    }
    return changed;
  }

  getCurrentStatus() {
    const s = counts(this);
    return {
      createSocketCount: s.createSocketCount,
      createSocketErrorCount: s.createSocketErrorCount,
      closeSocketCount: s.closeSocketCount,
      errorSocketCount: s.errorSocketCount,
      timeoutSocketCount: s.timeoutSocketCount,
      requestCount: s.requestCount,
      // Counts straight from the pool: connections in use by either request path (and, for
      // an agent that may speak HTTP/2, its sessions: agentkeepalive's keys alone otherwise).
      ...snapshotCounts(this[kPool].snapshot(), this.options.allowH2 || this.options.h2c),
    };
  }

  // The views of the pool.

  // In-use (and connecting) sockets.
  get sockets() {
    const out = { __proto__: null };
    const active = this[kPool].activeSockets();
    for (let i = 0; i < active.length; i += 2) (out[active[i]] ??= []).push(faceOf(active[i + 1]));
    for (const socket of this[kClosing].keys()) (out[socket[kName]] ??= []).push(socket);
    return out;
  }

  // Idle connections, each as a socket object: the one that served its last request if the
  // program still holds it, else one made now (an idle connection costs no JavaScript object
  // until a program looks).
  get freeSockets() {
    const out = { __proto__: null };
    for (const idle of this[kPool].idleConnections()) (out[idle.name] ??= []).push(this[kIdleFace](idle));
    return out;
  }

  // Requests waiting for a connection, in the order they will be served.
  get requests() {
    const out = { __proto__: null };
    for (const k of this[kPool].snapshot()) {
      if (k.waiting > 0) {
        out[k.name] = k.waiters.map((id) => this[kWaiters].get(id)?.req).filter(Boolean);
      }
    }
    return out;
  }

  get totalSocketCount() {
    let n = 0;
    for (const k of this[kPool].snapshot()) n += k.busy + k.idle;
    return n;
  }

  // Node's constructor assigns these; the views above are computed, so assignments are ignored.
  set sockets(_) {}
  set freeSockets(_) {}
  set requests(_) {}
  set totalSocketCount(_) {}
}

function own(agent, name, value) {
  Object.defineProperty(agent, name, { value, writable: true, enumerable: true, configurable: true });
}

// Each counter of the pool, as a property a program may assign: what it assigns is the count
// from then on, and the pool's counting goes on from there (`agent.requestCount = 0` resets
// it). Requests sent again after the keep-alive race are hyperagent's own counter.
const kShift = Symbol('hyperagent.counterShift');
const COUNTERS = [...STATUS_COUNTERS, 'replayCount'];
for (const name of COUNTERS) {
  Object.defineProperty(Views.prototype, name, {
    configurable: true,
    get() {
      return counts(this)[name];
    },
    set(value) {
      const shift = (this[kShift] ??= { __proto__: null });
      shift[name] = Number(value) - this[kPool].stats()[name];
    },
  });
}

// The pool's counters, with what the program assigned to them.
function counts(agent) {
  const raw = agent[kPool].stats();
  const shift = agent[kShift];
  if (shift === undefined) return raw;
  const out = { ...raw };
  for (const name in shift) out[name] += shift[name];
  return out;
}

// What `agent.sockets` shows for a socket Rust lists: a hook's stream for its link.
function faceOf(socket) {
  return socket instanceof foreign.ForeignLink ? socket.stream : socket;
}

function snapshotCounts(snapshot, withHttp2) {
  const freeSockets = {};
  const sockets = {};
  const requests = {};
  // HTTP/2 connections (also counted in `sockets`) and their streams in use.
  const http2 = {};
  for (const k of snapshot) {
    if (k.idle > 0) freeSockets[k.name] = k.idle;
    if (k.busy > 0) sockets[k.name] = k.busy;
    if (k.waiting > 0) requests[k.name] = k.waiting;
    if (k.sessions > 0) http2[k.name] = { sessions: k.sessions, streams: k.streams };
  }
  return withHttp2 ? { freeSockets, sockets, requests, http2 } : { freeSockets, sockets, requests };
}

const deprecationsShown = new Set();
function warnDeprecated(what, instead) {
  if (deprecationsShown.has(what)) return;
  deprecationsShown.add(what);
  process.emitWarning(`${what} is deprecated, please use ${instead} instead`, 'DeprecationWarning');
}

module.exports = { Views, STATUS_COUNTERS };
