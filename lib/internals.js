'use strict';

// What the agent's modules share (lib/agent.js, and lib/hooks.js for connections a hook of the
// program's makes): the agent's private symbols, and how a request's options are merged and
// its socket handed over.

const kPool = Symbol('hyperagent.pool');
const kPoolId = Symbol('hyperagent.poolId');
const kKeys = Symbol('hyperagent.keys');
const kWaiters = Symbol('hyperagent.waiters');
const kLimits = Symbol('hyperagent.limits');
const kIdleFace = Symbol('hyperagent.idleFace');
const kCloseConn = Symbol('hyperagent.closeConn');
const kRemake = Symbol('hyperagent.remake');
const kNumber = Symbol('hyperagent.number');
const kServe = Symbol('hyperagent.serve');
const kConnect = Symbol('hyperagent.connect');
const kTls = Symbol('hyperagent.tls');
const kSocketClass = Symbol('hyperagent.socketClass');
const kTunnel = Symbol('hyperagent.tunnel');
const kKeylog = Symbol('hyperagent.keylog');
const kMake = Symbol('hyperagent.make');
const kReleased = Symbol('hyperagent.released');
// The new connection each request is being given, while a createSocket() of the program's
// runs (see lib/hooks.js openThrough).
const kOpenings = Symbol('hyperagent.openings');
// Sockets destroyed while in use whose 'close' has not come yet: Node's agent lists a socket
// in `agent.sockets` until its 'close'.
const kClosing = Symbol('hyperagent.closing');
// A graceful close() under way: { promise, resolve, done }, or null.
const kClose = Symbol('hyperagent.close');
// The watchers of the agent's agent.request() connections (see _watchConnections).
const kWatchers = Symbol('hyperagent.watchers');

// The request's options with the agent's over them, as Node's addRequest merges them
// (`{ __proto__: null, ...options, ...agent.options }`: own enumerable properties, symbols
// too), copied one by one into an object whose prototype is empty: spreading Node's
// null-prototype options objects costs a few microseconds a request, several times this.
function MergedOptions() {}
MergedOptions.prototype = Object.create(null);

function mergeOptions(options, own) {
  const out = new MergedOptions();
  copyOwn(out, options);
  copyOwn(out, own);
  return out;
}

function copyOwn(to, from) {
  const keys = Object.keys(from);
  for (let i = 0; i < keys.length; i++) to[keys[i]] = from[keys[i]];
  const symbols = Object.getOwnPropertySymbols(from);
  for (let i = 0; i < symbols.length; i++) {
    if (Object.prototype.propertyIsEnumerable.call(from, symbols[i])) to[symbols[i]] = from[symbols[i]];
  }
}

function setRequestSocket(agent, req, socket) {
  req.onSocket(socket);
  const agentTimeout = agent.options.timeout || 0;
  if (req.timeout === undefined || req.timeout === agentTimeout) return;
  socket.setTimeout(req.timeout);
}

// The requests of `http.request` waiting in the pool's queue (in Rust), by waiter id, with what
// serving them needs. Not a Map: queued requests enter and leave it at the request rate, and a
// Map's storage, in the old generation, kept those that had left (each with its ClientRequest)
// reachable for every young-generation collection until a full one. Measured with 100 callers on
// 10 sockets: 1.2 KB promoted per request, 7% fewer requests per second than with this table.
class WaiterTable {
  constructor() {
    this.byId = Object.create(null);
    this.size = 0;
  }

  set(id, waiter) {
    if (this.byId[id] === undefined) this.size++;
    this.byId[id] = waiter;
  }

  get(id) {
    return this.byId[id];
  }

  delete(id) {
    if (this.byId[id] === undefined) return;
    delete this.byId[id];
    this.size--;
  }
}

// Gives `Class` the methods and accessors of `Part`'s prototype, as if written in `Class`
// itself: one concern of a large class kept in a file of its own. (No member of a part may use
// `super`: its home object would be the part.)
function mixin(Class, Part) {
  for (const name of Reflect.ownKeys(Part.prototype)) {
    if (name === 'constructor') continue;
    Object.defineProperty(Class.prototype, name, Object.getOwnPropertyDescriptor(Part.prototype, name));
  }
}

module.exports = {
  mixin,
  WaiterTable,
  kPool,
  kPoolId,
  kKeys,
  kWaiters,
  kLimits,
  kIdleFace,
  kCloseConn,
  kRemake,
  kNumber,
  kServe,
  kConnect,
  kTls,
  kSocketClass,
  kTunnel,
  kKeylog,
  kMake,
  kReleased,
  kOpenings,
  kClosing,
  kClose,
  kWatchers,
  mergeOptions,
  copyOwn,
  MergedOptions,
  setRequestSocket,
};
