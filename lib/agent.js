'use strict';

// Agent: Node's http.Agent contract (addRequest, getName, keepSocketAlive, reuseSocket,
// 'free', destroy) and agentkeepalive's (options, statistics, getCurrentStatus), over a pool
// that lives in Rust. This file decides nothing about limits or order: it asks the pool, and
// does what the pool answers (bind a socket, connect, queue, serve a waiter).

const http = require('node:http');
const https = require('node:https');
const { AsyncResource } = require('node:async_hooks');
const { debuglog } = require('node:util');
const binding = require('./native');
const { NativeSocket, IdleConnection, kId, kName, kSocketNumber, kAgent } = require('./socket');
const foreign = require('./foreign');
const { hostHeaderOf, normalizeServerName, customIdentityCheck, NativeTlsSocket, keylogLines } = require('./tls');
const { Keys } = require('./keys');
const errors = require('./errors');
const { normalize } = require('./options');
const constants = require('./constants');
const slab = require('./slab');
const {
  kProxy, proxyConfigOf, proxiedTo, proxyTarget, addressChoice, checkAutoSelect, familyOf, blockListOf,
  resolve, resolvesHere, validatePort, checkConnect,
} = require('./connect');
const { kIdleFor, idleTimeout, hintBuffer, defaultIdle } = require('./release');

// The pool's own default of the largest response head (src/binding/pool), Node's default too.
const DEFAULT_MAX_HEADER_SIZE = 16 * 1024;

let debug = debuglog('hyperagent', (fn) => {
  debug = fn;
});

// Verdicts of the pool, packed as `id * BASE + kind` (declared in Rust: src/binding/protocol.rs
// `verdict`, read through binding.protocol()).
const PROTOCOL = binding.protocol();
const BASE = PROTOCOL.verdictBase;
const REUSE = PROTOCOL.reuse;
const CONNECT = PROTOCOL.connect;
const HANDOFF = PROTOCOL.handoff;
const GRANT = PROTOCOL.grant;

const {
  kPool, kPoolId, kKeys, kWaiters, kIdleFace, kCloseConn, kRemake, kNumber, kServe, kConnect,
  kTls, kSocketClass, kTunnel, kKeylog, kMake, kOpenings, kClosing, kClose,
  mergeOptions, setRequestSocket, WaiterTable, mixin,
} = require('./internals');
const { limitsOf, defineLimits, ownProperties } = require('./limits');
const { Views, STATUS_COUNTERS } = require('./views');
const { RequestSide } = require('./request-side');
const { Freed } = require('./freed');
const hooks = require('./hooks');

// agentkeepalive's marks for statusChanged (`createSocketCountLastCheck`, ...).
const LAST_CHECKS = STATUS_COUNTERS.map((name) => `${name}LastCheck`);

binding.setDebug(debug.enabled);

// Rust calls these on this thread's event loop, with the socket (or agent) as receiver. A
// second load of this file on the same thread finds them registered already and leaves them.
binding.init(
  (socket, buf) => socket._onRead(buf === null ? null : slab.chunk(buf)),
  (socket, desc) => socket._onWrite(desc),
  (socket, desc) => socket._onError(desc),
  (socket, desc, info) => socket._onConnect(desc, info),
  (agent, waiter) => agent._onGrant(waiter),
  // Chunks are decoded by the slab module of the instance that registered these callbacks (the
  // one Rust announces its slabs to), even for requests made by another instance of this file.
  (pending, kind, a, b, c, d, e, f, g) => pending._onEvent(slab.chunk, kind, a, b, c, d, e, f, g),
  slab.setSlab,
  (target, lines) => target._onKeylog(lines),
  (agent, kind, key, desc) => agent._onConnection(kind, key, desc),
  (socket, host, addresses) => socket._onStep(host, addresses),
);

// An HttpsAgent's first 'keylog' listener: its handshakes report their keys from then on.
function enableKeylog(event) {
  if (event !== 'keylog') return;
  this.removeListener('newListener', enableKeylog);
  this._logKeys();
}

// Opening `socket`'s connection for `req` threw (a `lookup` of the program's that throws, or
// calls back at once with something that cannot be connected to). From addRequest (`sync`),
// the throw goes on out of http.request(), as what Node's agent's connect throws does: the
// connection closes, its slot serves the next request, and the request (which its caller never
// got, so none can listen to it) goes with the socket; what it emits then goes nowhere.
// Otherwise the throw is the request's error, as a lookup's error is.
function connectThrew(agent, req, socket, thrown, sync) {
  if (!sync) {
    agent[kPool].countError();
    socket._lookupFailed(thrown ?? new Error(`connecting threw ${thrown}`));
    return;
  }
  req.on('error', noop);
  socket.destroy();
  throw thrown;
}

function noop() {}

// 'free' for a socket the agent did not open: a program handing a connection over, as Node's
// agent lets it (http2-wrapper does, with the TLS socket its ALPN check opened). Node's agent
// pools it; ours pools only the connections it opened, and closes it, so that it does not stay
// open with nobody to close it. The 'free' the agent emits for its own sockets and for its
// hooks' streams comes after the pool took them back.
function onSocketOffered(socket) {
  if (socket === null || typeof socket !== 'object' || typeof socket.destroy !== 'function') return;
  if (socket instanceof NativeSocket && socket[kAgent] === this) return;
  if (foreign.linkOf(socket) !== undefined) return;
  debug('a socket handed over with \'free\' is closed: the pool takes only connections it opened');
  socket.destroy();
}

// One implementation for both agents: `Base` is http.Agent or https.Agent (so that
// `instanceof` holds for the class users replace), `secure` turns on TLS.
function defineAgent(Base, secure) {
class Agent extends Base {
  constructor(options) {
    const opts = normalize(options);
    if (opts.autoSelectFamily != null || opts.autoSelectFamilyAttemptTimeout != null) checkAutoSelect(opts);
    super(opts);
    ownProperties(this, Agent.prototype);
    this[kTls] = secure;
    this[kSocketClass] = secure ? NativeTlsSocket : NativeSocket;
    // Node's constructor registered its own pool logic on 'free'; ours replaces it (the pool
    // takes a freed socket back before 'free' is emitted), leaving a listener for a socket a
    // program hands over.
    this.removeAllListeners('free');
    this.on('free', onSocketOffered);
    // How much sooner than a server's `Keep-Alive: timeout=N` a connection stops idling: Node's
    // option and rule (recent versions' agents read it), on every version.
    this.agentKeepAliveTimeoutBuffer = hintBuffer(opts.agentKeepAliveTimeoutBuffer);
    this[kProxy] = proxyConfigOf(this);
    this[kWaiters] = new WaiterTable();
    this[kClosing] = new Map();
    this[kClose] = null;
    this[kOpenings] = new WeakMap();
    this[constants.CURRENT_ID] = 0;
    // agentkeepalive's marks for statusChanged, own properties as it has them.
    for (const name of LAST_CHECKS) this[name] = 0;
    this[kPool] = new binding.NativePool(this, limitsOf(this));
    this[kPoolId] = this[kPool].id;
    // The largest response head agent.request() takes, until a request gives its own: Node's
    // (its --max-http-header-size, 16 KiB by default), as Node's parser and undici take it.
    if (http.maxHeaderSize !== DEFAULT_MAX_HEADER_SIZE) this[kPool].setMaxHeaderSize(http.maxHeaderSize);
    this[kKeys] = new Keys(this, this[kPool], secure);
    this[kKeylog] = false;
    if (secure) {
      // Node's https.Agent turns key logging on for the sockets it makes once 'keylog' is
      // listened to; ours has Rust keep the keys of its handshakes from then on.
      for (const listener of this.listeners('newListener')) {
        if (listener.name === 'maybeEnableKeylog') this.removeListener('newListener', listener);
      }
      this.on('newListener', enableKeylog);
    }
  }

  // Key material from now on: the handshakes of this agent's connections report it (see
  // _onKeylog here and on NativeTlsSocket).
  _logKeys() {
    if (this[kKeylog]) return;
    this[kKeylog] = true;
    this[kPool].logKeys();
  }

  // The key log lines of a connection of agent.request(), which has no socket to emit them on.
  _onKeylog(lines) {
    for (const line of keylogLines(lines)) this.emit('keylog', line, null);
  }

  // ---- Node's http.Agent contract -----------------------------------------------------------

  addRequest(req, options, port, localAddress) {
    if (this[kClose] !== null) {
      req.onSocket(undefined, errors.agentClosed());
      return;
    }
    // Legacy signature: addRequest(req, host, port, localAddress)
    if (typeof options === 'string') options = { host: options, port, localAddress };
    options = mergeOptions(options, this.options);
    if (options.socketPath) options.path = options.socketPath;
    // As net.connect does, before anything is queued or opened (a host that is not a string
    // as Node 22 on refuses it, Node 20 from dns.lookup; an empty one is localhost).
    if (!options.path) {
      options.port = validatePort(options.port ?? this.defaultPort);
      if (options.host && typeof options.host !== 'string') throw errors.invalidArgType('options.host', 'of type string', options.host);
    }
    checkConnect(options);
    if (this[kTls]) normalizeServerName(options, req);
    else if (!options.servername && options.servername !== '') hostHeaderOf(req);
    const name = this[kKeys].nameOf(options);
    const key = this[kKeys].keyOf(name, options);
    let verdict;
    try {
      verdict = binding.checkout(this[kPoolId], key);
    } catch (thrown) {
      // A fault of the addon (README, "Safety"): this request fails, as one whose connection
      // could not be made.
      req.onSocket(null, errors.internalError(thrown));
      return;
    }
    if (typeof verdict !== 'number') {
      debug('reuse connection %d for %s', verdict[kId], name);
      this._reuse(verdict, req);
      return;
    }
    const kind = verdict % BASE;
    const id = (verdict - kind) / BASE;
    if (kind === REUSE) {
      debug('reuse connection %d for %s (new socket)', id, name);
      this._reuse(this._face(id, name, options), req);
    } else if (kind === CONNECT) {
      debug('create connection %d for %s', id, name);
      this._open(id, name, req, options, true);
    } else {
      debug('queue request as waiter %d for %s', id, name);
      this[kWaiters].set(id, { req, options, key, name, resource: new AsyncResource('QueuedRequest') });
    }
  }

  // Reuse and connect are decided in Rust; these hooks keep Node's names for subclasses.
  keepSocketAlive(socket) {
    const idle = idleTimeout(this, socket);
    socket[kIdleFor] = idle;
    return idle > 0;
  }

  reuseSocket(socket, req) {
    req.reusedSocket = true;
    // A stream of a program's hook may have no ref() (a net.Socket has).
    if (typeof socket.ref === 'function') socket.ref();
  }

  // Graceful: requests from now on fail (ERR_HYPERAGENT_AGENT_CLOSED); those in flight or
  // waiting for a connection finish; then the agent is destroyed, which closes its idle
  // connections. A promise, or `callback(null)`.
  close(callback) {
    if (this[kClose] === null) {
      let resolve;
      const promise = new Promise((r) => { resolve = r; });
      this[kClose] = { promise, resolve, done: false };
      this._settle();
    }
    const { promise } = this[kClose];
    if (typeof callback !== 'function') return promise;
    // The program's callback, outside the promise's chain: a throw is its uncaught exception.
    promise.then(() => {
      try {
        callback(null);
      } catch (thrown) {
        errors.throwLater(thrown);
      }
    });
    return undefined;
  }

  get _closing() {
    return this[kClose] !== null;
  }

  // While a close() waits: the agent is destroyed once nothing is in flight or waiting.
  _settle() {
    const closing = this[kClose];
    if (closing === null || closing.done) return;
    const pool = this[kPool];
    if (this[kWaiters].size > 0 || pool.requestsInFlight().length > 0) return;
    // An HTTP/2 session holds its slot while it idles: its streams are the requests in flight.
    for (const k of pool.snapshot()) if (k.busy > k.sessions || k.waiting > 0) return;
    closing.done = true;
    this.destroy();
    closing.resolve();
  }

  destroy() {
    const pool = this[kPool];
    // agent.request()s waiting for a connection fail first (each leaves the queue).
    for (const pending of pool.requestsQueued()) {
      pending.abort(errors.hyperagentError(
        'AGENT_DESTROYED',
        'The agent was destroyed while this request waited for a connection',
      ));
    }
    const waiters = pool.destroy();
    for (const id of waiters) {
      const w = this[kWaiters].get(id);
      if (w === undefined) continue;
      this[kWaiters].delete(id);
      const err = errors.hyperagentError(
        'AGENT_DESTROYED',
        'The agent was destroyed while this request waited for a connection',
      );
      w.resource.runInAsyncScope(() => w.req.onSocket(undefined, err));
      w.resource.emitDestroy();
    }
    // agent.request()s on a connection lose it as the sockets below do: before the response
    // head with Node's "socket hang up", during the body with "aborted".
    for (const pending of pool.requestsInFlight()) {
      pending.abort(errors.connResetError(pending.response === null ? 'socket hang up' : 'aborted'));
    }
    const active = pool.activeSockets();
    for (let i = 1; i < active.length; i += 2) active[i].destroy();
  }

  // ---- Internals -----------------------------------------------------------------------------

  // The socket of a pooled connection, now serving the caller; a new one if the old was
  // collected while idle.
  _face(id, name, options) {
    let socket = binding.take(id);
    if (socket === undefined) {
      socket = this[kRemake](id, name, options, binding.connStamp(id));
      binding.bind(id, socket);
    }
    return socket;
  }

  // A socket for pooled connection `id`, whose old one was collected while it idled (or that
  // never had one): with the name, counts, creation time and TLS session the old one had.
  [kRemake](id, name, options, stamp) {
    const socket = new this[kSocketClass](this, name, options);
    socket._attach(id, false);
    if (stamp) {
      socket[kSocketNumber] = this[kNumber](id, stamp);
      socket[constants.SOCKET_CREATED_TIME] = stamp.created;
      socket[constants.SOCKET_REQUEST_COUNT] = stamp.finished;
      socket[constants.SOCKET_REQUEST_FINISHED_COUNT] = stamp.finished;
    }
    if (typeof socket._restoreSession === 'function') socket._restoreSession(binding.tlsSession(id));
    return socket;
  }

  // The number of connection `id` among this agent's sockets (for its name), given when a
  // socket is first made for it.
  [kNumber](id, stamp) {
    if (stamp.number < 0) {
      stamp.number = this[constants.CREATE_ID]();
      binding.numberConn(id, stamp.number);
    }
    return stamp.number;
  }

  // A pooled connection serves `req` again: an idle one that addRequest takes, through the
  // reuseSocket() hook (see reuseThrough), or (`handoff`) the one the request before it freed,
  // which a request that waited takes without the hook, as Node's agent hands it over.
  _reuse(socket, req, handoff = false) {
    if (socket instanceof foreign.ForeignLink) {
      hooks.reuseForeign(this, socket, req, handoff);
      return;
    }
    socket._serve();
    const timeout = this.options.timeout;
    if (timeout > 0) socket.setTimeout(timeout);
    if (handoff || hooks.reuseThrough(this, socket, req)) setRequestSocket(this, req, socket);
  }

  // Opens new connection `id` for `req`: in Rust, or through the program's hooks (Node calls
  // a createSocket() of its own, and the agent's createSocket() a createConnection() of its
  // own). `sync`: called by addRequest, where a hook that throws throws out of http.request(),
  // as with Node's agent.
  _open(id, name, req, options, sync = false) {
    if (this.createSocket !== hooks.createSocket) {
      hooks.openThrough(this, id, name, req, options, sync);
      return;
    }
    if (this.createConnection !== hooks.createConnection) {
      hooks.openForeign(this, id, name, options, sync, (err, stream) => {
        if (err) hooks.openFailed(this, id, req, err, null);
        else setRequestSocket(this, req, stream);
      });
      return;
    }
    const socket = this[kMake](id, name, options);
    setRequestSocket(this, req, socket);
    try {
      this[kConnect](socket, options);
    } catch (thrown) {
      connectThrew(this, req, socket, thrown, sync);
    }
  }

  // The socket of new connection `id`, bound to it (not yet connecting).
  [kMake](id, name, options) {
    const socket = new this[kSocketClass](this, name, options);
    socket._attach(id, true);
    binding.bind(id, socket);
    socket._serve();
    socket[constants.SOCKET_CREATED_TIME] = Date.now();
    socket[kSocketNumber] = this[constants.CREATE_ID]();
    binding.numberConn(id, socket[kSocketNumber]);
    this[constants.INIT_SOCKET](socket, options);
    return socket;
  }

  // The object freeSockets shows for an idle connection (see the getter).
  [kIdleFace](idle) {
    const held = binding.idleFace(idle.id);
    if (held instanceof foreign.ForeignLink) return held.stream;
    if (held instanceof IdleConnection) held._refresh(idle);
    if (held !== undefined) return held;
    let face;
    if (idle.dropIn) {
      // The socket the next request on this connection takes, as it would have been after
      // its last request: free, with its free timeout.
      face = this[kRemake](idle.id, idle.name, this.options, idle);
      face._free();
      face._parked();
      face[constants.SOCKET_REQUEST_FINISHED_COUNT] = idle.finished;
      if (idle.idleMs > 0) face.timeout = idle.idleMs;
    } else {
      this[kNumber](idle.id, idle);
      face = new IdleConnection(this, idle);
    }
    binding.adopt(idle.id, face);
    return face;
  }

  // An IdleConnection was destroyed: its connection closes if it still idles.
  _idleDestroyed(id) {
    this[kCloseConn](id, binding.closeIdle);
  }

  // Closes connection `id` through `close` (a binding function); a waiter the freed slot lets
  // connect is served.
  [kCloseConn](id, close) {
    let verdict;
    try {
      verdict = close(id);
    } catch (thrown) {
      // The connection is gone all the same; the fault is told where a debug log is kept.
      debug('closing connection %d failed: %s', id, thrown && thrown.message);
      return;
    }
    if (verdict >= 0) this[kServe](verdict, 0);
    this._settle();
  }

  // agentkeepalive's socket numbering: the names of an agent's sockets count from 0.
  [constants.CREATE_ID]() {
    const id = this[constants.CURRENT_ID]++;
    if (this[constants.CURRENT_ID] === Number.MAX_SAFE_INTEGER) this[constants.CURRENT_ID] = 0;
    return id;
  }

  // A new socket takes the agent's timeout, unless it has one already (a hook's stream whose
  // maker set its own), as agentkeepalive leaves it.
  [constants.INIT_SOCKET](socket, options) {
    if (options.timeout > 0 && !(socket.timeout > 0)) socket.setTimeout(options.timeout);
  }

  [kConnect](socket, options) {
    const pool = this[kPool];
    const id = socket[kId];
    const servername = this[kTls] ? options.servername : undefined;
    // Node's own check of the server's name applies (the program gave no check of its own): a
    // name it surely refuses fails the handshake, as Node's fails it.
    const nodeNameCheck = this[kTls] && !customIdentityCheck(options);
    if (options.path) {
      pool.connect(id, { path: String(options.path), servername, nodeNameCheck });
      return;
    }
    const host = options.host || 'localhost';
    const port = options.port;
    const proxy = proxiedTo(this, options);
    if (proxy !== null) {
      // As Node's agent with a proxy: the proxy is connected to (its own host and port, none of
      // the request's connection options), and for HTTPS a tunnel opened through it.
      const to = proxyTarget(this, this[kTls], proxy, host, port, servername);
      socket[kTunnel] = to.tunnelRequest !== undefined;
      to.nodeNameCheck = nodeNameCheck;
      pool.connect(id, to);
      return;
    }
    const family = familyOf(options);
    const localAddress = options.localAddress || undefined;
    const localPort = options.localPort || undefined;
    const blockList = blockListOf(options);
    const { attemptDelayMs, order } = addressChoice(options);
    if (!resolvesHere(options, blockList)) {
      pool.connect(id, { host, port, family, localAddress, localPort, servername, nodeNameCheck, attemptDelayMs, order });
      return;
    }
    // A user's lookup runs here, as net runs it, and so does the resolving of a host whose
    // addresses a `blockList` must pass, or that a replaced dns.lookup resolves; the addresses
    // skip Rust's resolver.
    resolve(options, host, blockList, (err, addresses, addrFamily, looked) => {
      if (looked) socket.emit('lookup', err, addresses && addresses[0], addrFamily, host);
      if (socket.destroyed || socket[kId] !== id) return;
      if (err) {
        // An error of a socket that is opening, as agentkeepalive counts it (the close
        // follows with the socket's).
        pool.countError();
        socket._lookupFailed(err);
        return;
      }
      pool.connect(id, { host, port, family, localAddress, localPort, addresses, servername, nodeNameCheck, attemptDelayMs, order });
    });
  }

  // A waiter may proceed: with a handed-off connection (`connId`) or a slot to connect.
  [kServe](verdict, connId) {
    const kind = verdict % BASE;
    const waiterId = (verdict - kind) / BASE;
    const w = this[kWaiters].get(waiterId);
    this[kWaiters].delete(waiterId);
    const pool = this[kPool];
    if (w === undefined) {
      // Unknown waiter (cannot happen while the maps agree): give the connection back.
      if (kind === HANDOFF) binding.release(connId, defaultIdle(this));
      return;
    }
    w.resource.runInAsyncScope(() => {
      // Rust serves agent.request()'s waiters itself, and hands these only connections their
      // sockets can use (an agent.request() connection gives up its slot: a grant).
      if (kind === HANDOFF) {
        debug('hand connection %d to waiter %d', connId, waiterId);
        this._reuse(this._face(connId, w.name, w.options), w.req, true);
      } else {
        const id = pool.openGranted(w.key);
        debug('create connection %d for waiter %d', id, waiterId);
        this._open(id, w.name, w.req, w.options);
      }
    });
    w.resource.emitDestroy();
  }

  // Called by Rust when a slot freed outside any JavaScript call (an idle connection died or
  // expired) lets a queued request connect.
  _onGrant(waiter) {
    this[kServe](waiter * BASE + GRANT, 0);
  }

  // An in-use socket was idle for its timeout. Called from the socket's 'timeout', by its
  // first listener, `own` (the agent's, as in Node's and agentkeepalive's agents).
  // The agent's own `timeout` fails the request unless the request listens (agentkeepalive's
  // semantics). One the program set (the request's `timeout`, req.setTimeout(),
  // res.setTimeout(), socket.setTimeout()) is the program's to handle, as with Node's agent:
  // only when nothing listens to it, on the request, its response or the socket, does the
  // agent fail the request, as agentkeepalive does, rather than leave it waiting.
  _socketTimedOut(socket, own) {
    this[kPool].countTimeout();
    const req = socket._httpMessage;
    const listening = req ? req.listenerCount('timeout') : 0;
    const programs = socket.timeout !== (this.options.timeout || 0);
    if (socket.destroyed) return;
    if (socket.connecting && socket[kTunnel] === true) {
      // A tunnel through the proxy that has not opened fails, listened to or not, as Node's
      // agent fails it.
      debug('tunnel for %s not open after %d ms', socket[kName], socket.timeout);
      socket.destroy(errors.proxyTunnelTimeout(socket.timeout));
    } else if (listening === 0 && !(programs && handled(socket, req, own))) {
      debug('socket of %s timed out after %d ms with no listener', socket[kName], socket.timeout);
      // The error goes to the socket's 'error' listeners (http's, which fail the request). A
      // socket left with none (the program removed them) is closed without it: the error would
      // be an uncaught exception, and its request fails with the close all the same.
      socket.destroy(socket.listenerCount('error') > 0 ? errors.socketTimeoutError(socket.timeout) : undefined);
      // Out of agent.sockets, and its slot free, at once (not at its 'close'), as
      // agentkeepalive removes a socket it timed out: the request's 'error' finds it gone.
      this._socketGone(socket);
    }
  }
}

defineLimits(Agent.prototype);
mixin(Agent, Views);
mixin(Agent, RequestSide);
mixin(Agent, Freed);
// Non-enumerable, as a class's methods are.
Object.defineProperty(Agent.prototype, 'createConnection', {
  configurable: true, writable: true, value: hooks.createConnection,
});
Object.defineProperty(Agent.prototype, 'createSocket', {
  configurable: true, writable: true, value: hooks.createSocket,
});
return Agent;
}

// Node's http client's own 'timeout' listeners on a socket, which hand the event to the
// request (when it has a timeout) and to its response.
const HTTP_TIMEOUT_LISTENERS = ['emitRequestTimeout', 'responseOnTimeout'];

// Whether the program listens to the 'timeout' of `socket`, serving `req`, other than through
// the request itself: on the response, or on the socket (the agent's listener `own` and http's
// own aside).
function handled(socket, req, own) {
  const res = req ? req.res : null;
  if (res && res.listenerCount('timeout') > 0) return true;
  return socket.listeners('timeout').some((fn) => fn !== own && !HTTP_TIMEOUT_LISTENERS.includes(fn.name));
}

// Node's agents construct with or without `new` (`http.Agent(options)`): so do ours. `new`
// and `extends` reach the class itself; a plain call makes a new instance. `new` constructs
// with the class as `new.target`, not the proxy: V8 gives the instances of a class one shape
// only when `new.target` is a function, and an agent of a shape of its own costs several
// times more to make, and makes every property access of the code that serves many agents
// megamorphic.
function callable(Class) {
  const Callable = new Proxy(Class, {
    apply(target, thisArg, args) {
      return new target(...args);
    },
    construct(target, args, newTarget) {
      return Reflect.construct(target, args, newTarget === Callable ? target : newTarget);
    },
  });
  Object.defineProperty(Class.prototype, 'constructor', { configurable: true, writable: true, value: Callable });
  return Callable;
}

const HttpAgentClass = defineAgent(http.Agent, false);
const Agent = callable(HttpAgentClass);

// HTTPS: TLS in Rust (rustls) off the JavaScript thread; an instance of https.Agent.
const HttpsAgent = callable(class HttpsAgent extends defineAgent(https.Agent, true) {});

// An HttpsAgent is an instance of Agent too, as agentkeepalive's HttpsAgent extends its Agent
// (ours extends https.Agent, as Node's does): a program that tells agentkeepalive's agents by
// `instanceof Agent` finds both. A subclass's instanceof is the ordinary one.
Object.defineProperty(HttpAgentClass, Symbol.hasInstance, {
  configurable: true,
  value: function hasInstance(value) {
    return Function.prototype[Symbol.hasInstance].call(this, value) || (this === Agent && value instanceof HttpsAgent);
  },
});

module.exports = { Agent, HttpsAgent, kPool };
