'use strict';

// Dispatcher: undici's Dispatcher contract over the agents' agent.request() path, so that
// Node's built-in fetch and undici's request/stream/pipeline/fetch reach the Rust pool:
// dispatch(opts, handler) with both of undici's handler APIs, undici's request() and stream()
// as methods, close(), destroy(), compose(), and the global dispatcher that fetch reads.

const { EventEmitter } = require('node:events');
const { kStringMaxLength } = require('node:buffer');
const { pipeline, Duplex, PassThrough } = require('node:stream');
const errors = require('./errors');
const { Agent, HttpsAgent } = require('./agent');
const { request, refuseThrowOnError } = require('./request');
const { rawHeaderObject } = require('./headers');
const { watchAbort, followSignal, undiciAbortError } = require('./signal');
const { LegacyHandler } = require('./legacy-handler');
const { ResponseHandler } = require('./handler-response');
const { Running, Tracked, Exchange, isUpgrade, requestOptions } = require('./exchange');
const { readDispatchOptions } = require('./dispatch-options');
const { fromUndici } = require('./undici-options');
const { numberOption } = require('./options');
const { dropBody } = require('./request-body');
const { announce } = require('./undici-channels');

// Where Node's built-in fetch (undici 6 and 7) reads the global dispatcher, and where undici's
// newer releases keep theirs.
const GLOBAL = Symbol.for('undici.globalDispatcher.1');
const GLOBAL_NEXT = Symbol.for('undici.globalDispatcher.2');
// The one the running Node's fetch reads: undici 8's (Node 26) the newer, with a wrapper of it
// for older undici copies in the first.
const FETCH_GLOBAL = Number(String(process.versions.undici).split('.')[0]) >= 8 ? GLOBAL_NEXT : GLOBAL;

const kHttp = Symbol('hyperagent.http');
const kHttps = Symbol('hyperagent.https');
const kOptions = Symbol('hyperagent.agentOptions');
const kOwned = Symbol('hyperagent.owned');
const kRunning = Symbol('hyperagent.running');
const kState = Symbol('hyperagent.state');
const kEnded = Symbol('hyperagent.ended');
const kIdle = Symbol('hyperagent.idle');
const kRoutes = Symbol('hyperagent.routes');
const kTimeouts = Symbol('hyperagent.timeouts');
const kWatching = Symbol('hyperagent.watching');
const kMaxHeaderSize = Symbol('hyperagent.maxHeaderSize');
const kMaxOrigins = Symbol('hyperagent.maxOrigins');
const kWebSocket = Symbol('hyperagent.webSocket');
const kEventSource = Symbol('hyperagent.eventSource');

// undici's connection events, and the kinds Rust tells them by.
const CONNECTION_EVENTS = ['connect', 'disconnect', 'connectionError'];
const {
  connectionConnect: CONNECTED,
  connectionError: CONNECTION_ERROR,
  connectionIdleTimeout: IDLE_TIMEOUT,
  connectionOtherSide: OTHER_SIDE,
  connectionReset: RESET,
  connectionAborted: ABORTED,
} = require('./native').protocol();

// The most origin strings whose route a dispatcher keeps.
const MAX_ROUTES = 256;

// undici's limits of a WebSocket's messages (its parser reads a missing one as no limit) and
// of an EventSource's events, unless the options give others.
const WEBSOCKET_MAX_FRAGMENTS = 131072;
const WEBSOCKET_MAX_PAYLOAD = 128 * 1024 * 1024;

const OPEN = 0;
const CLOSED = 1;
const DESTROYED = 2;

// The error of a 'disconnect' of `kind` (a kind of connection end Rust tells).
function endError(kind) {
  if (kind === IDLE_TIMEOUT) return errors.undiciError('INFO', 'socket idle timeout');
  if (kind === OTHER_SIDE) return errors.undiciError('SOCKET', 'other side closed');
  if (kind === RESET) return errors.undiciError('INFO', 'reset');
  if (kind === ABORTED) return errors.undiciError('INFO', 'aborted');
  return errors.undiciError('SOCKET');
}

// A callback of close() or destroy(): a function, or none (undefined) for a promise.
function checkCallback(callback) {
  if (callback !== undefined && typeof callback !== 'function') {
    throw errors.invalidArgType('callback', 'of type function', callback);
  }
}

// Settles through `callback` when one is given (then returns nothing), else through the
// promise returned, as undici's close() and destroy() do.
function settle(promise, callback) {
  if (callback === undefined) return promise;
  promise.then(() => callOut(callback, null, null), (err) => callOut(callback, err, null));
  return undefined;
}

// Hands the result of `promise` to `callback(err, value)`, undici's callback form of request(),
// stream(), upgrade() and connect(): on failure with `{ opaque }` of the options `opts`. The
// callback is the program's, outside the promise's chain: one that throws raises an uncaught
// exception, as undici's (and Node's) callbacks do, not an unhandled rejection.
function answer(promise, callback, opts) {
  promise.then((value) => callOut(callback, null, value), (err) => callOut(callback, err, { opaque: opts?.opaque }));
}

function noop() {}

function callOut(callback, err, value) {
  try {
    callback(err, value);
  } catch (thrown) {
    errors.throwLater(thrown);
  }
}

// undici's options of limits (`webSocket`, `eventSource`): an object whose `fields` are each a
// whole number of bytes or fragments, 0 for no limit, as undici reads them; none given is {}.
function limitsOption(value, name, fields) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object') throw errors.invalidArgType(name, 'of type object', value);
  const out = {};
  for (const field of fields) {
    const given = value[field];
    if (given !== undefined && given !== null) out[field] = numberOption(given, `${name}.${field}`, 0, 'an integer >= 0', true);
  }
  return out;
}

class Dispatcher extends EventEmitter {
  constructor(options = {}) {
    super();
    if (options === null || typeof options !== 'object') {
      throw errors.invalidArgType('options', 'of type object', options);
    }
    const { http, https, headersTimeout, bodyTimeout, maxOrigins, webSocket, eventSource, ...rest } = options;
    // undici Agent's options among them become the agents' (see lib/undici-options.js).
    const { agentOptions, maxHeaderSize, maxResponseSize } = fromUndici(rest);
    // (An HttpsAgent is an instance of Agent too, as agentkeepalive's: not an HTTP agent.)
    if (http !== undefined && (!(http instanceof Agent) || http instanceof HttpsAgent)) {
      throw errors.invalidArgType('options.http', 'an instance of Agent', http);
    }
    if (https !== undefined && !(https instanceof HttpsAgent)) {
      throw errors.invalidArgType('options.https', 'an instance of HttpsAgent', https);
    }
    // The agents given are shared: closing the dispatcher leaves them open. The ones it makes
    // (on first use, with the other options, keep-alive on as undici's) are its own.
    this[kHttp] = http ?? null;
    this[kHttps] = https ?? null;
    this[kOptions] = { keepAlive: true, ...agentOptions };
    // undici's maxHeaderSize: the largest response head its own agents take.
    this[kMaxHeaderSize] = maxHeaderSize;
    // undici's maxResponseSize: the most body bytes a response may have (-1: no limit), which
    // each request's exchange applies (see Exchange).
    this._maxResponseSize = maxResponseSize;
    // undici Agent's options: each request's timeouts unless it gives its own.
    if (headersTimeout !== undefined) numberOption(headersTimeout, 'options.headersTimeout', 0, '>= 0');
    if (bodyTimeout !== undefined) numberOption(bodyTimeout, 'options.bodyTimeout', 0, '>= 0');
    this[kTimeouts] = { headersTimeout, bodyTimeout };
    // undici Agent's maxOrigins: the most origins its agents hold connections or requests of.
    this[kMaxOrigins] = maxOrigins === undefined ? Infinity : numberOption(maxOrigins, 'options.maxOrigins', Number.MIN_VALUE, '> 0');
    // undici's `webSocket` and `eventSource` options, which its WebSocket and EventSource read
    // through webSocketOptions and eventSourceOptions.
    this[kWebSocket] = limitsOption(webSocket, 'options.webSocket', ['maxFragments', 'maxPayloadSize']);
    this[kEventSource] = limitsOption(eventSource, 'options.eventSource', ['maxEventSize']);
    this[kOwned] = [];
    // Exchanges in flight, and what waits for the last one to end (close()).
    this[kRunning] = new Running();
    this[kIdle] = null;
    this[kRoutes] = new Map();
    this[kState] = OPEN;
    // Why its own agents' connections closed at its end: what 'disconnect' tells of them.
    this[kEnded] = null;
    // Each agent checks its options now: a wrong one is said at construction, not at the
    // first request.
    if (http === undefined) void this.http;
    if (https === undefined) void this.https;
    // undici's 'connect', 'disconnect' and 'connectionError': the agents tell of their
    // agent.request() connections while someone listens.
    this[kWatching] = false;
    this.on('newListener', (name) => {
      if (CONNECTION_EVENTS.includes(name)) this._watch(true);
    });
    this.on('removeListener', (name) => {
      if (CONNECTION_EVENTS.includes(name)) this._watch(CONNECTION_EVENTS.some((n) => this.listenerCount(n) > 0));
    });
  }

  _watch(on) {
    if (this[kWatching] === on) return;
    this[kWatching] = on;
    this.http._watchConnections(this, on);
    this.https._watchConnections(this, on);
  }

  // Closed: shared agents' connections are no longer its own to tell of (its own agents'
  // last closes still are).
  _unwatchShared() {
    for (const agent of [this[kHttp], this[kHttps]]) {
      if (agent !== null && !this[kOwned].includes(agent)) agent._watchConnections(this, false);
    }
  }

  // A connection of one of its agents opened, closed or failed to open, told as undici's
  // Agent tells it: the origin (a URL), the dispatchers it went through, and the error.
  // A connection's end is told with the error undici's closes it with: its exchange's error
  // when that failed; ClientDestroyedError (or destroy()'s) by its close() or destroy();
  // InformationalError 'socket idle timeout' when it idled out, 'reset' when it was not
  // kept after its completed exchange, 'aborted' when its request was aborted; SocketError
  // 'other side closed' when its server closed it while idle; SocketError 'closed' otherwise.
  _onConnection(kind, origin, err) {
    const url = new URL(origin);
    if (kind === CONNECTED) this.emit('connect', url, [this]);
    else if (kind === CONNECTION_ERROR) this.emit('connectionError', url, [this], err);
    else this.emit('disconnect', url, [this], err ?? this[kEnded] ?? endError(kind));
  }

  // undici's: the limits its WebSocket (and WebSocketStream) applies to the messages of a
  // connection opened through this dispatcher, and its EventSource to the events.
  get webSocketOptions() {
    const given = this[kWebSocket];
    return {
      maxFragments: given.maxFragments ?? WEBSOCKET_MAX_FRAGMENTS,
      maxPayloadSize: given.maxPayloadSize ?? WEBSOCKET_MAX_PAYLOAD,
    };
  }

  get eventSourceOptions() {
    return { maxEventSize: this[kEventSource].maxEventSize ?? kStringMaxLength };
  }

  // Each request's timeouts unless it gives its own (see requestOptions).
  get _timeouts() {
    return this[kTimeouts];
  }

  // The Agent and HttpsAgent whose pools carry the requests.
  get http() {
    if (this[kHttp] === null) this[kHttp] = this._own(new Agent(this[kOptions]));
    return this[kHttp];
  }

  get https() {
    if (this[kHttps] === null) this[kHttps] = this._own(new HttpsAgent(this[kOptions]));
    return this[kHttps];
  }

  _own(agent) {
    this[kOwned].push(agent);
    if (this[kMaxHeaderSize] !== undefined) agent._setMaxHeaderSize(this[kMaxHeaderSize]);
    return agent;
  }

  // undici Agent's `stats`: by origin, its agents' connections and requests, counted as
  // undici's PoolStats counts them (see Agent#_originStats).
  get stats() {
    const out = {};
    if (this[kHttp] !== null) this[kHttp]._originStats(out);
    if (this[kHttps] !== null) this[kHttps]._originStats(out);
    return out;
  }

  get closed() {
    return this[kState] !== OPEN;
  }

  get destroyed() {
    return this[kState] === DESTROYED;
  }

  // undici's dispatch(): starts the request `opts` describes; `handler` hears of it. Returns
  // true: the dispatcher takes more at once (its agents queue within their limits).
  dispatch(opts, handler) {
    if (handler === null || typeof handler !== 'object') {
      throw errors.invalidArgType('handler', 'of type object', handler);
    }
    const exchange = new Exchange(this, handler);
    try {
      if (this[kState] === DESTROYED) throw errors.undiciError('DESTROYED');
      if (this[kState] === CLOSED) throw errors.undiciError('CLOSED');
      const given = this._read(opts);
      const { agent, origin } = this._route(given);
      if (isUpgrade(given)) exchange.upgrade(agent, origin, opts);
      else exchange.start(agent, origin, given);
    } catch (err) {
      exchange.failDispatch(err);
      // As undici's dispatch(): an error the handler has no callback for is thrown.
      if (typeof handler[exchange.controlled ? 'onResponseError' : 'onError'] !== 'function') throw err;
    }
    return true;
  }

  // undici's dispatcher.request(opts[, callback]): the response (statusCode, headers, trailers,
  // opaque, body), straight from agent.request() with no handler between; through dispatch()
  // when that is not this class's own (a composed dispatcher, whose interceptors must see it),
  // or when the dispatch's exchange has a response size to apply.
  request(opts, callback) {
    if (callback !== undefined) {
      if (typeof callback !== 'function') {
        const err = errors.invalidArgType('callback', 'of type function', callback);
        dropBody(opts?.body, err);
        throw err;
      }
      answer(this.request(opts), callback, opts);
      return undefined;
    }
    if (this.dispatch !== Dispatcher.prototype.dispatch || this._maxResponseSize >= 0) return this._requestDispatched(opts);
    let tracked = null;
    try {
      if (this[kState] === DESTROYED) throw errors.undiciError('DESTROYED');
      if (this[kState] === CLOSED) throw errors.undiciError('CLOSED');
      const given = this._read(opts);
      const { agent, origin } = this._route(given);
      if (isUpgrade(given)) {
        throw errors.invalidArgValue('opts', opts, 'is an upgrade or a CONNECT, which request() does not carry; use upgrade() or connect()');
      }
      const options = requestOptions(given, this);
      announce(origin, given.path, options);
      const followed = followSignal(given.signal);
      options.signal = followed.signal;
      options.opaque = given.opaque;
      options.onInfo = given.onInfo ?? undefined;
      options.responseHeaders = given.responseHeaders ?? undefined;
      options.highWaterMark = given.highWaterMark ?? undefined;
      options.throwOnError = given.throwOnError ?? undefined;
      tracked = new Tracked(this, followed.unfollow);
      this._started(tracked);
      const promise = request(agent, { origin, path: given.path }, options, null, tracked);
      // Refused before it started (the agent closing, the signal aborted): nothing to wait for.
      if (tracked.pending === null) tracked.over();
      return promise;
    } catch (err) {
      if (tracked !== null) tracked.over();
      dropBody(opts?.body, err);
      return Promise.reject(err);
    }
  }

  // request() through this.dispatch (see lib/handler-response.js).
  _requestDispatched(opts) {
    try {
      if (opts === null || typeof opts !== 'object') throw errors.invalidArgType('opts', 'of type object', opts);
      const { onInfo, highWaterMark } = opts;
      if (onInfo !== undefined && onInfo !== null && typeof onInfo !== 'function') {
        throw errors.invalidArgType('opts.onInfo', 'of type function', onInfo);
      }
      refuseThrowOnError(opts.throwOnError, 'opts.throwOnError');
      if (highWaterMark !== undefined && highWaterMark !== null) {
        numberOption(highWaterMark, 'opts.highWaterMark', 0, 'an integer >= 0', true);
      }
      const followed = followSignal(opts.signal);
      const signal = followed.signal;
      if (signal !== undefined && (signal === null || typeof signal !== 'object' || typeof signal.aborted !== 'boolean')) {
        throw errors.invalidArgType('opts.signal', 'an instance of AbortSignal', signal);
      }
      const extras = { opaque: opts.opaque, raw: opts.responseHeaders === 'raw', highWaterMark: highWaterMark ?? undefined, onInfo, body: opts.body };
      return new Promise((resolve, reject) => {
        const handler = new ResponseHandler(extras, signal, followed.unfollow, resolve, reject);
        try {
          this.dispatch(opts, handler);
        } catch (err) {
          handler.onResponseError(null, err);
        }
      });
    } catch (err) {
      dropBody(opts?.body, err);
      return Promise.reject(err);
    }
  }

  // undici's dispatcher.stream(opts, factory[, callback]): the response body written into the
  // Writable `factory({ statusCode, headers, opaque, context })` gives; resolves with
  // `{ opaque, trailers }` once it is all written.
  stream(opts, factory, callback) {
    if (callback !== undefined) {
      if (typeof callback !== 'function') {
        const err = errors.invalidArgType('callback', 'of type function', callback);
        dropBody(opts?.body, err);
        throw err;
      }
      answer(this.stream(opts, factory), callback, opts);
      return undefined;
    }
    if (typeof factory !== 'function') {
      const err = errors.invalidArgType('factory', 'of type function', factory);
      dropBody(opts?.body, err);
      return Promise.reject(err);
    }
    return this.request(opts).then((res) => new Promise((resolve, reject) => {
      // The signal stops it until the body is all written, the factory's call included: undici
      // calls the factory with the head, before its response has ended, and an abort there fails
      // the stream. (The request's own watch may have ended with the exchange already.)
      const { signal, unfollow } = followSignal(opts.signal);
      let aborted = null;
      let unwatch = null;
      if (signal !== undefined) {
        if (signal.aborted) aborted = undiciAbortError(signal);
        else unwatch = watchAbort(signal, () => res.body.destroy((aborted = undiciAbortError(signal))));
      }
      const settle = (err) => {
        if (unwatch !== null) unwatch();
        if (unfollow !== null) unfollow();
        if (err) reject(err);
        else resolve({ opaque: res.opaque, trailers: res.trailers });
      };
      let writable;
      try {
        if (aborted !== null) throw aborted;
        writable = factory({ statusCode: res.statusCode, headers: res.headers, opaque: res.opaque, context: res.context });
        if (aborted !== null) throw aborted;
        if (writable === null || typeof writable !== 'object' || typeof writable.write !== 'function' || typeof writable.on !== 'function') {
          throw errors.invalidArgValue('factory', factory, 'must return a Writable');
        }
      } catch (err) {
        // The error is the stream's to report: the body's own 'error' goes nowhere.
        res.body.on('error', noop);
        res.body.destroy(err);
        if (aborted !== null && typeof writable?.destroy === 'function') {
          if (typeof writable.on === 'function') writable.on('error', noop);
          writable.destroy(err);
        }
        settle(err);
        return;
      }
      pipeline(res.body, writable, (err) => settle(err));
    }));
  }

  // undici's dispatcher.upgrade(opts[, callback]): the socket of an upgraded connection (101),
  // with the server's headers: `{ headers, socket, opaque }`.
  upgrade(opts, callback) {
    return this._open(opts, callback, false);
  }

  // undici's dispatcher.connect(opts[, callback]): a CONNECT's socket once the server answered,
  // with a tunnel open (2xx) or not (a proxy's 407, its body to read from the socket), as
  // undici's gives it: `{ statusCode, headers, socket, opaque }`.
  connect(opts, callback) {
    return this._open(opts, callback, true);
  }

  _open(opts, callback, tunnel) {
    if (callback !== undefined) {
      if (typeof callback !== 'function') throw errors.invalidArgType('callback', 'of type function', callback);
      answer(this._open(opts, undefined, tunnel), callback, opts);
      return undefined;
    }
    return new Promise((resolve, reject) => {
      const opaque = opts?.opaque ?? null;
      const given = opts !== null && typeof opts === 'object' ? opts : {};
      // The signal aborts it until the socket is given.
      const followed = followSignal(given.signal);
      const signal = followed.signal ?? null;
      let unwatch = followed.unfollow;
      const handler = {
        onConnect: (abort) => {
          if (signal === null) return;
          if (signal.aborted) {
            abort(signal.reason);
            return;
          }
          const unwatchAbort = watchAbort(signal, () => abort(signal.reason));
          const unfollow = unwatch;
          unwatch = () => {
            unwatchAbort();
            if (unfollow !== null) unfollow();
          };
        },
        onUpgrade: (statusCode, rawHeaders, socket) => {
          if (unwatch !== null) unwatch();
          const headers = rawHeaderObject(rawHeaders);
          resolve(tunnel ? { statusCode, headers, socket, opaque } : { headers, socket, opaque });
        },
        onError: (err) => {
          if (unwatch !== null) unwatch();
          reject(err);
        },
      };
      const method = tunnel ? 'CONNECT' : given.method ?? 'GET';
      const upgrade = tunnel ? undefined : given.protocol ?? 'Websocket';
      this.dispatch({ ...given, method, upgrade }, handler);
    });
  }

  // undici's dispatcher.pipeline(opts, handler): a Duplex whose writes are the request body
  // and whose reads are what `handler({ statusCode, headers, opaque, body, context })` gives
  // of the response.
  pipeline(opts, handler) {
    let ret = null;
    let response = null;
    // Stops the request until its response has come (the caller's signal too).
    const controller = new AbortController();
    const source = new PassThrough();
    const duplex = new Duplex({
      // Once the request takes no more of its body (the response came whole while it was still
      // going out, and the sending stopped: see PendingRequest.completeIfEarly), what is written
      // goes nowhere, as undici's pipeline lets it be written.
      write(chunk, encoding, cb) {
        if (source.destroyed || source.write(chunk, encoding)) {
          cb();
          return;
        }
        const go = () => {
          source.off('drain', go);
          source.off('close', go);
          cb();
        };
        source.on('drain', go);
        source.on('close', go);
      },
      final(cb) {
        if (!source.destroyed) source.end();
        cb();
      },
      read() {
        if (ret !== null && typeof ret.resume === 'function') ret.resume();
      },
      destroy(err, cb) {
        // Destroyed before the response's own end: the request stops.
        const reason = err ?? (duplex.readableEnded ? null : errors.undiciError('ABORTED'));
        // The error is the duplex's to report: the request body's own (it may never have been
        // read, a handler refused) goes nowhere.
        source.on('error', noop);
        source.destroy(reason ?? undefined);
        if (response !== null) response.body.destroy(reason ?? undefined);
        else if (reason !== null) controller.abort(reason);
        if (ret !== null && typeof ret.destroy === 'function') ret.destroy(reason ?? undefined);
        // Destroyed with no error before its end: it fails with undici's RequestAbortedError,
        // as undici's pipeline does, so that its consumers hear that it did not end.
        cb(reason ?? err);
      },
    });
    if (typeof handler !== 'function') {
      process.nextTick(() => duplex.destroy(errors.invalidArgType('handler', 'of type function', handler)));
      return duplex;
    }
    const { signal, unfollow } = followSignal(opts?.signal);
    if (unfollow !== null) duplex.once('close', unfollow);
    if (signal !== undefined) {
      if (signal.aborted) controller.abort(undiciAbortError(signal));
      else duplex.once('close', watchAbort(signal, () => duplex.destroy(undiciAbortError(signal))));
    }
    const method = opts?.method;
    const bodyless = method === undefined || method === 'GET' || method === 'HEAD';
    // A GET or HEAD sends no body: what is written goes nowhere. (undici sends what was written
    // before its request went out; ours goes out at once, and a chunked empty body on every
    // GET would be refused by servers that take no body with one.)
    if (bodyless) source.resume();
    const given = opts !== null && typeof opts === 'object' ? opts : {};
    this.request({ ...given, body: bodyless ? undefined : source, signal: controller.signal }).then((res) => {
      response = res;
      if (duplex.destroyed) {
        res.body.destroy();
        return;
      }
      try {
        ret = handler({ statusCode: res.statusCode, headers: res.headers, opaque: res.opaque, body: res.body, context: res.context });
        if (ret === null || typeof ret !== 'object' || typeof ret.on !== 'function') {
          throw errors.invalidArgValue('handler', handler, 'must return a Readable');
        }
      } catch (err) {
        ret = null;
        duplex.destroy(err);
        return;
      }
      // The response's error fails the duplex (and what the handler made of the body, which a
      // pipe() from the body does not hear of), as undici's pipeline does.
      res.body.on('error', (err) => duplex.destroy(err));
      ret.on('data', (chunk) => {
        if (!duplex.push(chunk) && typeof ret.pause === 'function') ret.pause();
      });
      // The handler's Readable closing before its end aborts; once it has ended, what the
      // duplex still holds is read at the consumer's pace.
      let ended = false;
      ret.on('end', () => {
        ended = true;
        duplex.push(null);
      });
      ret.on('error', (err) => duplex.destroy(err));
      ret.on('close', () => {
        if (!ended && !duplex.destroyed) duplex.destroy(errors.undiciError('ABORTED'));
      });
    }, (err) => duplex.destroy(err));
    return duplex;
  }

  // The dispatch options `opts` gives (see lib/dispatch-options.js).
  _read(opts) {
    if (opts === null || typeof opts !== 'object') throw errors.invalidArgType('opts', 'of type object', opts);
    return readDispatchOptions(opts);
  }

  // Which agent carries the request of dispatch options `given` (read by _read), and its origin.
  _route(given) {
    const route = this._routeOrigin(given);
    if (this[kMaxOrigins] !== Infinity) this._admitOrigin(route.origin);
    return route;
  }

  _routeOrigin(given) {
    const { origin, path, method } = given;
    if (typeof path !== 'string') throw errors.invalidArgType('opts.path', 'of type string', path);
    if (typeof method !== 'string') throw errors.invalidArgType('opts.method', 'of type string', method);
    // A CONNECT's path is the authority it tunnels to; any other must be a path (undici's
    // absolute URL in the path, for a forward proxy, is not taken: the agents' proxies are).
    if (path.charCodeAt(0) !== 0x2f && method.toUpperCase() !== 'CONNECT') {
      throw errors.invalidArgValue('opts.path', path, 'must start with a slash');
    }
    // An application calls a few origins over and over: each string's route is kept.
    if (typeof origin === 'string') {
      let route = this[kRoutes].get(origin);
      if (route === undefined) {
        route = this._routeOf(new URL(origin), origin);
        if (this[kRoutes].size >= MAX_ROUTES) this[kRoutes].clear();
        this[kRoutes].set(origin, route);
      }
      return route;
    }
    if (origin instanceof URL) return this._routeOf(origin, origin);
    throw errors.invalidArgType('opts.origin', 'of type string or an instance of URL', origin);
  }

  // undici's maxOrigins: a request to an origin of which the agents hold no connection and no
  // request fails once they hold that many origins.
  _admitOrigin(origin) {
    const held = this.stats;
    let count = 0;
    for (const name of Object.keys(held)) {
      const s = held[name];
      if (s.connected + s.size === 0) continue;
      if (name === origin) return;
      count++;
    }
    if (count >= this[kMaxOrigins]) throw errors.undiciError('MAX_ORIGINS_REACHED');
  }

  _routeOf(url, given) {
    if (url.protocol === 'http:') return { agent: this.http, origin: url.origin };
    if (url.protocol === 'https:') return { agent: this.https, origin: url.origin };
    throw errors.invalidArgValue('opts.origin', given, 'is not an http: or https: origin');
  }

  _started(exchange) {
    this[kRunning].add(exchange);
  }

  _ended(exchange) {
    this[kRunning].delete(exchange);
    if (this[kRunning].size === 0 && this[kIdle] !== null) {
      const idle = this[kIdle];
      this[kIdle] = null;
      idle();
    }
  }

  // Graceful: refuses new requests, lets those in flight finish, then closes its own agents'
  // connections; it is then destroyed, as undici's close() ends. With none in flight that is a
  // microtask later, as undici's: `closed` at once, `destroyed` once the close has ended.
  close(callback) {
    checkCallback(callback);
    if (this[kState] === OPEN) this[kState] = CLOSED;
    const promise = new Promise((resolve) => {
      const done = () => {
        this[kState] = DESTROYED;
        this[kEnded] ??= errors.undiciError('DESTROYED');
        for (const agent of this[kOwned]) agent.destroy();
        this._unwatchShared();
        resolve();
      };
      if (this[kRunning].size === 0) queueMicrotask(done);
      else {
        const before = this[kIdle];
        this[kIdle] = before === null ? done : () => { before(); done(); };
      }
    });
    return settle(promise, callback);
  }

  // At once: requests in flight fail with `err` (undici's ClientDestroyedError when none is
  // given), and its own agents close.
  destroy(err, callback) {
    if (typeof err === 'function') {
      callback = err;
      err = null;
    }
    checkCallback(callback);
    this[kState] = DESTROYED;
    const reason = err ?? errors.undiciError('DESTROYED');
    this[kEnded] ??= reason;
    for (const exchange of this[kRunning].list()) exchange.abort(reason);
    for (const agent of this[kOwned]) agent.destroy();
    this._unwatchShared();
    const idle = this[kIdle];
    this[kIdle] = null;
    if (idle !== null) idle();
    return settle(Promise.resolve(), callback);
  }

  // undici's compose(): each interceptor wraps the dispatch before it, so that the last is
  // called first; none (null) is skipped. As undici's compose() does, the handler each
  // interceptor is given has the newer handler API (see lib/legacy-handler.js). The result is
  // this dispatcher with the composed dispatch.
  compose(...interceptors) {
    const list = interceptors.length === 1 && Array.isArray(interceptors[0]) ? interceptors[0] : interceptors;
    let dispatch = this.dispatch.bind(this);
    for (const interceptor of list) {
      if (interceptor === null || interceptor === undefined) continue;
      if (typeof interceptor !== 'function') {
        throw errors.invalidArgType('interceptor', 'of type function', interceptor);
      }
      const intercepted = interceptor(dispatch);
      if (typeof intercepted !== 'function') {
        throw errors.invalidArgValue('interceptor', interceptor, 'must return a function (opts, handler)');
      }
      dispatch = (opts, handler) => intercepted(opts, LegacyHandler.wrap(handler));
    }
    return new Proxy(this, {
      get(target, key) {
        return key === 'dispatch' ? dispatch : Reflect.get(target, key);
      },
    });
  }
}

// Has Node load its fetch implementation (undici), which makes its default global dispatcher
// (then replaced, not left to replace ours later).
function loadFetch() {
  void globalThis.Headers;
}

// Makes `dispatcher` the global one: Node's built-in fetch (Node 20 to 26) and undici's own
// getGlobalDispatcher() use it from now on.
function setGlobalDispatcher(dispatcher) {
  if (dispatcher === null || typeof dispatcher !== 'object' || typeof dispatcher.dispatch !== 'function') {
    throw errors.invalidArgType('dispatcher', 'an object with a dispatch() method', dispatcher);
  }
  loadFetch();
  setGlobal(GLOBAL, dispatcher);
  setGlobal(GLOBAL_NEXT, dispatcher);
}

function setGlobal(symbol, value) {
  if (Object.getOwnPropertyDescriptor(globalThis, symbol) === undefined) {
    Object.defineProperty(globalThis, symbol, { value, writable: true, enumerable: false, configurable: false });
  } else {
    globalThis[symbol] = value;
  }
}

function getGlobalDispatcher() {
  loadFetch();
  return globalThis[FETCH_GLOBAL];
}

module.exports = { Dispatcher, setGlobalDispatcher, getGlobalDispatcher };
