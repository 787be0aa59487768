'use strict';

// One request a Dispatcher (lib/dispatcher.js) carries: agent.request()'s exchange in Rust with
// its events handed to an undici handler (Exchange, and the newer API's Controller), or an
// upgrade on an agent's own connection; a request() of the dispatcher's own (Tracked); and the
// list of those in flight (Running).

const { setImmediate } = require('node:timers');
const errors = require('./errors');
const { announce } = require('./undici-channels');
const { request } = require('./request');
const { openUpgrade } = require('./upgrade');
const { rawHeaderObject, undiciHeaderObject, headerLines, headerBytes } = require('./headers');

// The exchanges in flight, linked through the exchanges themselves. Not a Set: exchanges enter
// and leave it at the request rate, and a Set's storage, in the old generation, kept those that
// had left reachable for every young-generation collection until a full one, and with them
// their handler, response and body (measured under undici.request(): a kilobyte promoted per
// request, and scavenges five times as long).
class Running {
  constructor() {
    this.head = null;
    this.size = 0;
  }

  add(exchange) {
    exchange.next = this.head;
    exchange.prev = null;
    if (this.head !== null) this.head.prev = exchange;
    this.head = exchange;
    exchange.running = true;
    this.size++;
  }

  // Takes `exchange` out (once), leaving it pointing at nothing.
  delete(exchange) {
    if (!exchange.running) return;
    exchange.running = false;
    if (exchange.prev !== null) exchange.prev.next = exchange.next;
    else this.head = exchange.next;
    if (exchange.next !== null) exchange.next.prev = exchange.prev;
    exchange.prev = null;
    exchange.next = null;
    this.size--;
  }

  list() {
    const out = [];
    for (let e = this.head; e !== null; e = e.next) out.push(e);
    return out;
  }
}

// A request of dispatcher.request(): among the exchanges in flight until its exchange in Rust is
// over, so that close() waits for it and destroy() stops it.
class Tracked {
  // `unfollow`: what stops an EventEmitter signal's following (see followSignal), or null.
  constructor(dispatcher, unfollow = null) {
    this.dispatcher = dispatcher;
    this.unfollow = unfollow;
    // Its request in flight (lib/pending.js), once started.
    this.pending = null;
    this.running = false;
    this.prev = null;
    this.next = null;
  }

  over() {
    if (this.unfollow !== null) {
      const unfollow = this.unfollow;
      this.unfollow = null;
      unfollow();
    }
    this.dispatcher._ended(this);
  }

  abort(reason) {
    if (this.pending !== null) this.pending.abort(reason);
    this.over();
  }
}

// An upgrade (a WebSocket's handshake) or a CONNECT tunnel: the drop-in path's to carry.
// `given`: dispatch options as lib/dispatch-options.js reads them (so are they below).
function isUpgrade(given) {
  const method = given.method;
  // Only a seven-letter method may be CONNECT in another case: no string is made for others.
  return Boolean(given.upgrade) || method === 'CONNECT' || (method.length === 7 && method.toUpperCase() === 'CONNECT');
}

// The agent.request() options of undici's dispatch options `given`, with the dispatcher's own
// timeouts where `given` has none.
function requestOptions(given, dispatcher) {
  const { servername, expectContinue } = given;
  // undici's: HTTP/2's wait for 100 Continue, which its HTTP/1.1 leaves alone; taken here and
  // the body sent at once, as on HTTP/1.1 (a request wanting the wait says so in its headers).
  if (expectContinue !== undefined && expectContinue !== null && typeof expectContinue !== 'boolean') {
    throw errors.invalidArgType('opts.expectContinue', 'of type boolean', expectContinue);
  }
  return {
    method: given.method,
    headers: given.headers ?? undefined,
    body: given.body ?? undefined,
    query: given.query ?? undefined,
    headersTimeout: given.headersTimeout ?? dispatcher._timeouts.headersTimeout,
    bodyTimeout: given.bodyTimeout ?? dispatcher._timeouts.bodyTimeout,
    reset: given.reset ?? undefined,
    // Refused by agent.request() (other than 0) as undici 7 refuses it: no redirect is
    // followed here (a redirect interceptor takes its own out before the request comes).
    // `throwOnError` is not: undici 6's request() acts on it above the dispatch.
    maxRedirections: given.maxRedirections ?? undefined,
    // undici's; without one, agent.request() takes a host header's name, as undici does.
    servername: typeof servername === 'string' && servername !== '' ? servername : undefined,
    onInfo: undefined,
  };
}

// What a handler of the older API must have, as undici's clients require it: a handler
// without one of them is refused before its request starts (its onError hears why, when it
// has one), rather than have the events it cannot take dropped. onBodySent and onRequestSent
// are optional. An upgrade (or a CONNECT) takes onUpgrade in place of the response's three.
const LEGACY_METHODS = ['onConnect', 'onError', 'onHeaders', 'onData', 'onComplete'];
const LEGACY_UPGRADE_METHODS = ['onConnect', 'onError', 'onUpgrade'];

function checkHandler(handler, methods) {
  for (const name of methods) {
    if (typeof handler[name] !== 'function') throw errors.invalidArgType(`handler.${name}`, 'of type function', handler[name]);
  }
  const { onBodySent, onRequestSent } = handler;
  if (onBodySent !== undefined && typeof onBodySent !== 'function') {
    throw errors.invalidArgType('handler.onBodySent', 'of type function', onBodySent);
  }
  if (onRequestSent !== undefined && typeof onRequestSent !== 'function') {
    throw errors.invalidArgType('handler.onRequestSent', 'of type function', onRequestSent);
  }
}

// One dispatched request: agent.request()'s exchange in Rust, its events handed to the
// handler in its API (lib/request.js HandlerRequest calls onHead, onChunk, complete, fail).
class Exchange {
  constructor(dispatcher, handler) {
    this.dispatcher = dispatcher;
    this.handler = handler;
    // The newer API (a controller), or the older one (onConnect ...) Node 20 to 24's fetch calls.
    this.controlled = typeof handler.onRequestStart === 'function' || typeof handler.onResponseStart === 'function';
    this.controller = this.controlled ? new Controller(this) : null;
    this.pending = null;
    // Stops an upgrade under way (see upgrade()).
    this.cancel = null;
    this.response = null;
    // The lines of a head with no response of its own (an informational one, or an upgrade's),
    // while the handler has it: the controller's rawHeaders.
    this.headLines = null;
    this.paused = false;
    this.finished = false;
    this.reason = null;
    // undici's maxResponseSize (-1: none), and the body bytes counted against it.
    this.limit = dispatcher._maxResponseSize;
    this.received = 0;
    this.headOnly = false;
    // The older API's onBodySent and onRequestSent are the handler's to hear (see bodySent).
    this.sending = !this.controlled && (typeof handler.onBodySent === 'function' || typeof handler.onRequestSent === 'function');
    // While dispatch() fails it (see failDispatch).
    this.dispatching = false;
    this.abort = (reason) => this.abortWith(reason);
    this.resumer = () => this.resume();
    // Its place among the dispatcher's exchanges in flight (see Running).
    this.running = false;
    this.prev = null;
    this.next = null;
  }

  // `given`: the request's dispatch options, as lib/dispatch-options.js reads them.
  start(agent, origin, given) {
    if (!this.controlled) checkHandler(this.handler, LEGACY_METHODS);
    this.dispatcher._started(this);
    // No context of the request's own, as undici's clients give none (undici 8's: null; undici
    // 7's older API: none at all); interceptors give theirs (a redirect's `history`).
    if (this.controlled) this.call('onRequestStart', this.controller, null);
    else this.call('onConnect', this.abort);
    if (this.finished) return;
    // A HEAD response's length is of a body it does not have.
    this.headOnly = this.limit >= 0 && given.method.toUpperCase() === 'HEAD';
    const options = requestOptions(given, this.dispatcher);
    announce(origin, given.path, options);
    // Informational (1xx) responses, to a handler of undici's own API that hears of them: its
    // request(), stream() and pipeline() keep the caller's onInfo on the handler and in the
    // options, which interceptors pass on with handlers of their own (so does a composed
    // dispatcher's request()).
    if (typeof this.handler.onInfo === 'function' || typeof given.onInfo === 'function') {
      options.onInfo = (info) => this.onInformational(info);
    }
    this.pending = request(agent, { origin, path: given.path }, options, this);
  }

  // An upgrade or a CONNECT, on the agent's own connection through Node's http (lib/upgrade.js):
  // the handler gets the socket in its onUpgrade (onRequestUpgrade in the newer API), with the
  // status of the answer (any, for a CONNECT), or the error; a server that answers an upgrade
  // with anything but a switch of protocols fails it, as undici fails a 'bad upgrade'.
  upgrade(agent, origin, opts) {
    if (!this.controlled) checkHandler(this.handler, LEGACY_UPGRADE_METHODS);
    this.dispatcher._started(this);
    // The newer API's callbacks are each optional but this one (the older API's is checked).
    if (this.controlled && typeof this.handler.onRequestUpgrade !== 'function') {
      this.failed(errors.invalidArgValue('handler', this.handler, 'has no onRequestUpgrade(), which an upgrade or a CONNECT needs'));
      return;
    }
    if (this.controlled) this.call('onRequestStart', this.controller, null);
    else this.call('onConnect', this.abort);
    if (this.finished) return;
    const tunnel = opts.method.toUpperCase() === 'CONNECT';
    this.cancel = openUpgrade(agent, origin, tunnel ? { ...opts, method: 'CONNECT' } : opts, {
      upgraded: (statusCode, rawHeaders, socket) => {
        if (this.finished) {
          socket.destroy();
          return;
        }
        this.finished = true;
        this.dispatcher._ended(this);
        this.headLines = rawHeaders;
        try {
          if (this.controlled) this.handler.onRequestUpgrade(this.controller, statusCode, rawHeaderObject(rawHeaders), socket);
          else this.handler.onUpgrade(statusCode, headerBytes(rawHeaders), socket);
        } catch (err) {
          // The handler's error callback hears of it; the socket, which nobody may be
          // listening to, closes without an 'error' of its own (as undici's).
          socket.destroy();
          this.report(err);
        }
        this.release();
      },
      refused: () => this.failed(errors.undiciError('SOCKET', 'bad upgrade')),
      failed: (err) => this.failed(err),
    });
  }

  // Calls a handler method with the (up to four) arguments given; a throw fails the request
  // (its error goes to the handler's error callback, as undici routes it). Fixed parameters,
  // not a rest array: it runs several times per request.
  call(name, a, b, c, d) {
    const handler = this.handler;
    // None once the exchange is over (see release).
    if (handler === null) return undefined;
    const fn = handler[name];
    if (typeof fn !== 'function') return undefined;
    try {
      switch (arguments.length) {
        case 1: return fn.call(handler);
        case 2: return fn.call(handler, a);
        case 3: return fn.call(handler, a, b);
        case 4: return fn.call(handler, a, b, c);
        default: return fn.call(handler, a, b, c, d);
      }
    } catch (err) {
      this.abortWith(err);
      return false;
    }
  }

  // The response head; true if the handler wants the body now.
  onHead(response) {
    if (this.finished) return false;
    // A body longer than maxResponseSize by its length fails before its head is handed on.
    if (this.limit >= 0 && !this.headOnly && Number(response.headers['content-length']) > this.limit) {
      this.abortWith(errors.undiciError('RES_EXCEEDED_MAX_SIZE'));
      return false;
    }
    this.response = response;
    let more;
    // fetch's time of the response's start (its resource timing's responseStart).
    this.call('onResponseStarted');
    if (this.finished) return false;
    if (this.controlled) {
      // undici's object of the head (its repeated names in arrays), not agent.request()'s.
      this.call('onResponseStart', this.controller, response.statusCode, undiciHeaderObject(response.rawHeaders), response.statusMessage);
    } else {
      more = this.call('onHeaders', response.statusCode, response.rawHeaderBuffers(), this.resumer, response.statusMessage);
    }
    if (more === false) this.paused = true;
    return !this.finished && !this.paused;
  }

  // An informational (1xx) response, as undici hands one to a handler: to onHeaders (or
  // onResponseStart) ahead of the final response's.
  onInformational({ statusCode, headers }) {
    if (this.finished) return;
    if (this.controlled) {
      this.headLines = headerLines(headers);
      this.call('onResponseStart', this.controller, statusCode, headers, '');
      this.headLines = null;
    } else {
      this.call('onHeaders', statusCode, headerBytes(headerLines(headers)), this.resumer, '');
    }
  }

  // A chunk of the body; true if the handler wants more now.
  onChunk(chunk) {
    if (this.limit >= 0) {
      this.received += chunk.length;
      if (this.received > this.limit) {
        this.abortWith(errors.undiciError('RES_EXCEEDED_MAX_SIZE'));
        return false;
      }
    }
    if (this.controlled) this.call('onResponseData', this.controller, chunk);
    else if (this.call('onData', chunk) === false) this.paused = true;
    return !this.finished && !this.paused;
  }

  // The older API's upload progress: onBodySent with each piece of the request body as it is
  // handed to the connection (a streamed one chunk by chunk, the connection taking a few chunks
  // ahead of the socket at most; a body given whole when the response head shows the server
  // had it), then onRequestSent once all of it is, as undici calls them once it has written to
  // the socket. A throw fails the request, as from any callback.
  bodySent(chunk) {
    if (this.finished || !this.sending || chunk.length === 0) return;
    this.call('onBodySent', chunk);
  }

  requestSent() {
    if (this.finished || !this.sending) return;
    this.call('onRequestSent');
  }

  pause() {
    if (this.finished || this.paused) return;
    this.paused = true;
    if (this.pending !== null) this.pending.pause();
  }

  resume() {
    if (this.finished || !this.paused) return;
    this.paused = false;
    if (this.pending !== null) this.pending.resume();
  }

  complete(response) {
    if (this.finished) return;
    this.finished = true;
    this.dispatcher._ended(this);
    const trailers = response.trailers;
    // A throw from here goes to the handler's error callback all the same (undici's retry
    // handler throws from onResponseEnd to have the request sent again).
    try {
      if (this.controlled) this.handler.onResponseEnd?.(this.controller, trailers);
      else this.handler.onComplete?.(headerBytes(headerLines(trailers)));
    } catch (err) {
      this.report(err);
    }
    this.release();
  }

  // The exchange is over and its handler has heard the end: the exchange lets go of it. An
  // exchange that V8 allocated in the old generation (it pretenures the objects of an
  // allocation site whose objects have survived collections) would otherwise keep its
  // handler, and the response, body and stream state the handler holds, alive through every
  // young-generation collection until a full one, even once the exchange itself is garbage.
  // Measured on Node 26 under undici's request(): scavenges of 13 to 16 ms in place of 0.7,
  // and a fifth fewer requests a second.
  release() {
    this.handler = null;
  }

  // Stops the request with `reason` (undici's RequestAbortedError for none, or a falsy one, as
  // undici's own abort gives); a second abort, or one after the end, does nothing.
  abortWith(reason) {
    if (this.finished || this.reason !== null) return;
    this.reason = reason || errors.undiciError('ABORTED');
    this.fail(this.reason);
  }

  // Fails the request from within dispatch(): a throw from the handler's error callback goes
  // to dispatch()'s caller (see report).
  failDispatch(err) {
    this.dispatching = true;
    try {
      this.fail(err);
    } finally {
      this.dispatching = false;
    }
  }

  // Fails the request once, from our side: its exchange stops, its error reaches the handler.
  fail(err) {
    if (this.finished) return;
    if (this.pending !== null) this.pending.abort(err);
    if (this.cancel !== null) this.cancel(err);
    this.failed(err);
  }

  // The request failed (in Rust, or stopped by `fail`): its error reaches the handler, once.
  failed(err) {
    if (this.finished) return;
    this.finished = true;
    this.dispatcher._ended(this);
    try {
      this.report(this.reason ?? err);
    } finally {
      // Also when the error callback's throw goes on to dispatch()'s caller.
      this.release();
    }
  }

  // Gives `error` to the handler's error callback; after the response head, a turn of the loop
  // later, so that a fetch body stream set up in the head's callbacks hears it.
  // The handler is taken now: the exchange lets go of it once over (see release).
  report(error) {
    const handler = this.handler;
    const call = () => {
      const name = this.controlled ? 'onResponseError' : 'onError';
      const fn = handler[name];
      if (typeof fn !== 'function') return;
      try {
        if (this.controlled) fn.call(handler, this.controller, error);
        else fn.call(handler, error);
      } catch (thrown) {
        // The handler's own error callback failed. Within dispatch(), the throw goes to
        // dispatch()'s caller, as undici's dispatch() lets it (undici's request() rejects with
        // it); later nothing of ours can take it, and it surfaces as the program's uncaught
        // exception, as it does with undici.
        if (this.dispatching) throw thrown;
        errors.throwLater(thrown);
      }
    };
    if (this.response !== null) setImmediate(call);
    else call();
  }
}

// The newer handler API's controller of one request.
class Controller {
  constructor(exchange) {
    this.exchange = exchange;
    // The head's and the trailers' lines as handed out (see rawHeaders), and what they are of.
    this.raw = null;
    this.rawOf = null;
    this.rawTrailerLines = null;
  }

  pause() {
    this.exchange.pause();
  }

  resume() {
    this.exchange.resume();
  }

  abort(reason) {
    this.exchange.abortWith(reason);
  }

  get paused() {
    return this.exchange.paused;
  }

  get aborted() {
    return this.exchange.reason !== null;
  }

  get reason() {
    return this.exchange.reason;
  }

  // The head's lines as Buffers (undici 8's handlers read them here: fetch takes a response's
  // headers, and a WebSocket's handshake answer, from them). One array for a head, which an
  // interceptor may edit in place or replace, as undici's decompress does (it takes out the
  // content-encoding of a body it decodes) for the handlers after it to read.
  get rawHeaders() {
    const { response, headLines } = this.exchange;
    const of = response ?? headLines;
    if (of === null) return null;
    if (this.rawOf !== of) {
      this.rawOf = of;
      this.raw = response !== null ? response.rawHeaderBuffers() : headerBytes(headLines);
    }
    return this.raw;
  }

  set rawHeaders(value) {
    const { response, headLines } = this.exchange;
    this.rawOf = response ?? headLines;
    this.raw = value;
  }

  get rawTrailers() {
    const res = this.exchange.response;
    if (res === null || !this.exchange.finished) return null;
    if (this.rawTrailerLines === null) this.rawTrailerLines = headerBytes(headerLines(res.trailers));
    return this.rawTrailerLines;
  }

  set rawTrailers(value) {
    this.rawTrailerLines = value;
  }
}

module.exports = { Running, Tracked, Exchange, isUpgrade, requestOptions };
