'use strict';

// agent.request(): a promise of { statusCode, statusMessage, headers, rawHeaders, trailers,
// body }, with HTTP spoken by hyper in Rust on connections of the agent's own pool. This file
// validates the call, starts it in Rust, and turns Rust's events (src/binding/request/) into
// the promise and the body stream.

const { Readable } = require('node:stream');
const diagnostics = require('node:diagnostics_channel');
const net = require('node:net');
const binding = require('./native');
const errors = require('./errors');
const { numberOption } = require('./options');
const { TOKEN, invalidToken, headerList, headerObject, trailerLines } = require('./headers');
const { chunkBytes, lengthMismatch, bodyOf } = require('./request-body');
const { pushChunk, chunkList, ResponseBody, withExtras, Response } = require('./response');
const { MAX_TARGET, queryOf, parseUrl } = require('./target');
const { watchAbort, abortError } = require('./signal');

// agent.request()'s start in Rust: a plain Node-API function (see `request_function` in
// src/binding/mod.rs).
const startRequest = binding.requestFunction();

// Event kinds from Rust (declared in src/binding/protocol.rs `kind`), and a request's flags
// (`flags`): `expect: 100-continue`, and 1xx responses reported.
const PROTOCOL = binding.protocol();
const EVENT = Object.fromEntries(PROTOCOL.events.map((name, kind) => [name, kind]));
const { HEAD, DATA, END, ERROR, DRAIN, DONE, VERIFY, LOOKUP, ANSWERED, INFO } = EVENT;
const { expectContinue: EXPECT_CONTINUE, informational: INFORMATIONAL } = PROTOCOL;
// Answers to VERIFY: the server's name is right, or `rejectUnauthorized: false` lets it pass.
const { nameRight: NAME_RIGHT, nameLetPass: NAME_LET_PASS } = PROTOCOL;
// The order of startRequest's arguments is Rust's (`arg` in src/binding/protocol.rs): the call in
// request() below passes them so, which this load checks, once, against the addon it loaded.
const REQUEST_ARGS = 'pool,key,handle,method,path,headers,body,streamed,contentLength,flags,headersTimeout,bodyTimeout,replayLimit,contextName,trailers';
if (PROTOCOL.requestArgs.join() !== REQUEST_ARGS) {
  throw errors.hyperagentError('INTERNAL', `the addon takes agent.request()'s arguments as (${PROTOCOL.requestArgs}), not as lib/request.js passes them`);
}

// diagnostics_channel events of agent.request(), as undici publishes its own.
const channels = {
  created: diagnostics.channel('hyperagent:request:created'),
  headers: diagnostics.channel('hyperagent:request:headers'),
  completed: diagnostics.channel('hyperagent:request:completed'),
  error: diagnostics.channel('hyperagent:request:error'),
};

const DEFAULT_TIMEOUT = 300e3;
// The type of a request's async context (as async_hooks sees it).
const CONTEXT_NAME = 'HYPERAGENT_REQUEST';
// Methods that carry no body unless one is given.
const NO_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);
const noop = () => {};

function duration(value, name) {
  if (value === undefined) return DEFAULT_TIMEOUT;
  return numberOption(value, `options.${name}`, 0, '>= 0');
}

// As undici's response has it: the request's `opaque`, null when none was given (a default
// on the prototype, as the class's getters are: not enumerable).
Object.defineProperty(Response.prototype, 'opaque', { value: null, writable: true, configurable: true });

// One request in flight: receives Rust's events (its `_onEvent`) in the context of the
// request() call.
class PendingRequest {
  constructor(agent, resolve, reject, signal, info) {
    this.info = info;
    // A streamed body's source until it is all sent, its declared length (undefined: chunked),
    // and what made it fail.
    this.source = null;
    // A function giving the trailers once a streamed body has ended (see pump).
    this.trailers = null;
    this.declaredLength = undefined;
    this.bodyError = undefined;
    this.agent = agent;
    this.resolve = resolve;
    this.reject = reject;
    this.signal = signal;
    this.id = 0;
    this.response = null;
    this.done = false;
    this.ended = false;
    // The response was complete while the request was still going out: its body has ended,
    // and the exchange goes on until the rest is sent (Done).
    this.answered = false;
    this.aborted = false;
    this.drain = null;
    // Stops listening to the signal.
    this.unwatch = null;
    // undici's `opaque`, `responseHeaders`, `onInfo` and `highWaterMark`, when one is given:
    // { opaque, raw, onInfo, highWaterMark }.
    this.extras = null;
  }

  // `chunk` makes a Buffer of a chunk as Rust sent it (lib/slab.js). A listener that throws
  // in here (the body's 'data', emitted as a chunk arrives) fails its request, as Node's http
  // fails one whose listener throws while its parser runs: the rest of the response is not
  // read (its connection closes), the body fails with ECONNRESET, and the exception goes on to
  // the domain or 'uncaughtException' like any thrown in an I/O callback. Otherwise the body
  // would lose the chunks after the throw, or wait forever for a read the throw skipped.
  _onEvent(chunk, kind, a, b, c, d, e, f, g) {
    try {
      switch (kind) {
        case HEAD: return this.onHead(a, b, c, d === null ? null : chunk(d), e, f, g);
        case DATA: return this.onData(chunk(a));
        case END:
          this.onEnd(a);
          return this.completeIfEarly();
        // A body source that failed is the cause, whatever the connection made of it.
        case ERROR: return this.fail(this.bodyError !== undefined ? this.bodyError : errors.systemError(a));
        case DRAIN: return this.onDrain();
        case DONE: return this.onDone(a, b);
        case VERIFY: return this.onVerify(a, b);
        case LOOKUP: return this.onLookup(a, b);
        case ANSWERED: return this.onAnswered();
        case INFO: return this.onInfo(a, b);
        default: return undefined;
      }
    } catch (thrown) {
      this.abort(errors.connResetError('aborted'));
      throw thrown;
    }
  }

  // A new connection (`connId`, of pool key `key`) has its host resolved by the agent's
  // `lookup`: the addresses go to Rust, which connects to them; an error (or something that is
  // not an IP address) fails the request, as it fails a socket.
  onLookup(connId, key) {
    const fail = (err) => {
      binding.lookupDone(connId, null);
      this.abort(err);
    };
    try {
      this.agent._lookup(key, (err, addresses) => {
        if (this.done) return;
        if (err) fail(err);
        else if (!binding.lookupDone(connId, addresses)) fail(errors.invalidIpAddress(addresses.join(', ')));
      });
    } catch (thrown) {
      // Whatever the lookup threw fails the request (a null too: a reason is needed).
      if (!this.done) fail(thrown ?? new Error(`lookup threw ${thrown}`));
    }
  }

  // A new TLS connection (`info`, of pool key `key`): the exchange starts only if the server's
  // name passes (1 or 2, see Agent#_checkServerName); otherwise the request fails with the
  // check's error, and its connection closes without a byte of the request sent.
  onVerify(info, key) {
    let verdict;
    try {
      verdict = this.agent._checkServerName(key, info);
    } catch (thrown) {
      // What the check threw is the request's error (a null one too: the request must fail).
      this.abort(thrown ?? new Error(`checkServerIdentity threw ${thrown}`));
      return 0;
    }
    if (verdict === NAME_RIGHT || verdict === NAME_LET_PASS) return verdict;
    this.abort(verdict);
    return 0;
  }

  // An informational (1xx) response, to undici's `onInfo` (asked for only when it is given):
  // what it throws fails the request, as undici's does.
  onInfo(statusCode, raw) {
    if (this.done) return;
    const { onInfo, raw: rawWanted } = this.extras;
    const list = raw === '' ? [] : raw.split('\n');
    try {
      onInfo({ statusCode, headers: rawWanted ? list : headerObject(list) });
    } catch (thrown) {
      this.abort(thrown ?? new Error(`onInfo threw ${thrown}`));
    }
  }

  // `verdict` and `connId` come when the exchange ended with its head (the whole body came
  // with it and the connection is settled): then no Done follows.
  onHead(status, reason, raw, chunk, trailers, verdict, connId) {
    const body = new ResponseBody(this, this.extras === null ? undefined : this.extras.highWaterMark);
    this.response = new Response(status, reason, raw, body);
    if (this.extras !== null) withExtras(this.response, this.extras);
    // All of it is here: it enters the stream only if the stream is read.
    if (trailers !== null && verdict !== undefined) body._whole = chunk;
    else if (chunk !== null) pushChunk(body, chunk);
    if (trailers !== null) this.onEnd(trailers);
    if (channels.headers.hasSubscribers) channels.headers.publish({ request: this.info, response: this.response });
    this.resolve(this.response);
    if (verdict !== undefined) this.onDone(verdict, connId);
    else if (this.ended) this.completeIfEarly();
  }

  // The body's end is held until the connection is back in the pool (Done follows at once):
  // code that sends its next request when a body ends then finds the connection free.
  onData(chunk) {
    const body = this.response.body;
    if (body._sink !== null) {
      body._sink.chunks.push(...chunkList(chunk));
      this.pull();
    } else {
      pushChunk(body, chunk);
    }
  }

  // text()/json()/arrayBuffer() took the body over: finish now if it is all here.
  sinkAttached() {
    if (this.ended && (this.done || this.answered)) this.finishSink();
    else this.pull();
  }

  // The body's bytes went to text()/json()/...: the stream ends as if it had been read ('end',
  // then 'close'), so that code waiting on it (stream.finished, a later loop) sees it end.
  finishSink() {
    const body = this.response.body;
    const sink = body._sink;
    // Settled: the stream's destroy at its end has no consumer left to fail (and makes no
    // error for it).
    body._sink = null;
    sink.resolve(sink.chunks.length === 1 ? sink.chunks[0] : Buffer.concat(sink.chunks));
    body.push(null);
    body.read();
  }

  onEnd(trailers) {
    this.ended = true;
    if (trailers !== '') Object.assign(this.response.trailers, headerObject(trailers.split('\n')));
  }

  onDrain() {
    const drain = this.drain;
    this.drain = null;
    if (drain) drain();
  }

  // The exchange is over and Rust has settled its connection (back in the pool, or closed);
  // a non-negative verdict is a waiter to serve.
  onDone(verdict, connId) {
    this.done = true;
    this.cleanup();
    this.onDrain();
    if (verdict >= 0) this.agent._serveVerdict(verdict, connId);
    this.agent._settle();
    if (this.ended && !this.answered) this.complete();
  }

  // The server answered before reading all of a body given whole, and may read no more: the
  // response is complete now, as Node's and undici's are; the connection goes back only once
  // the rest is sent.
  onAnswered() {
    if (this.done || this.answered) return;
    this.answered = true;
    this.complete();
  }

  // The response has ended while the request's streamed body is still going out: the server
  // answered early (a 413, say) and may not read the rest. As undici and Node's client take
  // it, the response is complete now: the sending stops and the connection closes (it is
  // mid-request, so it cannot carry another), instead of the body's end waiting for a Done
  // that waits for the upload.
  completeIfEarly() {
    if (this.done || this.source === null) return;
    this.stop();
    this.complete();
  }

  // The exchange is over with the whole response: its held end goes to the stream, or its
  // bytes to text()/json()/... (a body that came whole waits for its reader as it is).
  complete() {
    if (channels.completed.hasSubscribers) channels.completed.publish({ request: this.info, response: this.response });
    const body = this.response.body;
    if (body._sink !== null) this.finishSink();
    else if (body._whole === undefined) body.push(null);
  }

  fail(err) {
    this.dropSource(err);
    if (channels.error.hasSubscribers) channels.error.publish({ request: this.info, error: err });
    if (this.response === null) this.reject(err);
    // A body that has all come fails too when the request is aborted before its exchange is
    // over, unless the response is already complete (Answered: what is left is the request's
    // sending, which the abort stops). A connection's error at that point is not the
    // response's: Done follows, and the body ends.
    else if (!this.answered && (!this.ended || this.aborted)) {
      const sink = this.response.body._sink;
      // The body's consumer holds a promise: it hears of the error there, not as 'error'.
      if (sink !== null) {
        sink.reject(err);
        this.response.body.destroy();
      } else {
        this.response.body.destroy(err);
      }
    }
  }

  pull() {
    if (!this.done && !this.ended && this.id !== 0) binding.bodyRead(this.id);
  }

  // The consumer destroyed the body before its end: the exchange stops, and its connection
  // (mid-response) is closed.
  bodyDestroyed() {
    if (!this.ended && !this.done) this.abort(null);
  }

  abort(reason) {
    if (this.done || this.aborted) return;
    this.aborted = true;
    this.dropSource(reason === null ? undefined : reason);
    this.stop();
    if (reason !== null) this.fail(reason);
  }

  // Ends the request here: its place in the queue or its exchange in Rust (a connection in the
  // middle of one closes), a waiting writer, and a slot freed for a waiter.
  stop() {
    this.cleanup();
    // Its place in the queue, if it waits, goes with it (in Rust).
    const verdict = binding.requestAbort(this.id);
    this.done = true;
    this.onDrain();
    if (verdict >= 0) this.agent._serveVerdict(verdict);
    this.agent._settle();
  }

  // The exchange ended before its body was all sent (it failed, was aborted, or the response
  // came whole first): a Readable source is destroyed, as stream.pipeline and undici do, so
  // that it does not wait forever holding what it reads from (a file, a socket). Other
  // sources stop at their next chunk.
  dropSource(err) {
    const source = this.source;
    if (source === null) return;
    this.source = null;
    if (typeof source.destroy === 'function' && !source.destroyed) source.destroy(err);
  }

  cleanup() {
    this.dropSource();
    if (this.unwatch !== null) {
      // An aborted signal has let go of its listeners as it called them (they are `once`):
      // removing one again would walk its list for each request it ends, a time that grows
      // with the square of the requests sharing it.
      if (!this.signal.aborted) this.unwatch();
      this.unwatch = null;
    }
  }

  // Streams a body source into Rust, as fast as the connection takes it. A declared length
  // is held to: a source that runs past it or ends short fails the request.
  async pump(source) {
    let sent = 0;
    try {
      for await (const chunk of source) {
        if (this.done) return;
        const buf = chunkBytes(chunk);
        sent += buf.length;
        if (this.declaredLength !== undefined && sent > this.declaredLength) throw lengthMismatch(this.declaredLength, sent, true);
        const r = binding.bodyWrite(this.id, buf);
        if (r === 2) return;
        if (r === 1 && !this.done) await new Promise((resolve) => { this.drain = resolve; });
      }
      if (this.declaredLength !== undefined && sent !== this.declaredLength) throw lengthMismatch(this.declaredLength, sent);
      this.source = null;
      // Trailers made when the body has ended (a checksum of it, say): their function's
      // error, or a wrong value, fails the request as a source's error does.
      let trailers;
      if (this.trailers !== null) trailers = trailerLines(await this.trailers(), 'the trailers function\'s result').lines;
      if (!this.done) binding.bodyEnd(this.id, trailers);
    } catch (err) {
      if (!this.done) {
        // A source's own error, or a fault of the addon in bodyWrite (README, "Safety").
        this.bodyError = errors.internalError(err);
        binding.bodyFail(this.id, err && err.message ? err.message : String(err));
      }
    }
  }
}

// The server name a host header gives, when it names another host than `urlHost`: its name
// without the port; none for an IP address.
function hostName(host, urlHost) {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.split(':')[0];
  if (name === '' || net.isIP(name) !== 0 || name.toLowerCase() === urlHost.toLowerCase()) return undefined;
  return name;
}

// A request whose events go to a Dispatcher's exchange (lib/dispatcher.js), which hands them to
// an undici handler: no promise and no body stream. The exchange has onHead(response),
// onChunk(buffer) (each false when it paused), complete(response) and failed(err); more of
// the body is asked for after the head and each chunk, unless it paused (then at its resume).
class HandlerRequest extends PendingRequest {
  constructor(agent, exchange, signal, info) {
    super(agent, null, null, signal, info);
    this.exchange = exchange;
    // While the exchange is paused: the chunks it has not taken yet (null: not paused), and
    // whether the response's end waits behind them.
    this.held = null;
    this.endHeld = false;
  }

  onHead(status, reason, raw, chunk, trailers, verdict, connId) {
    this.response = new Response(status, reason, raw, null);
    if (channels.headers.hasSubscribers) channels.headers.publish({ request: this.info, response: this.response });
    const list = chunkList(chunk);
    if (this.exchange.onHead(this.response)) this.deliver(list);
    else this.held = list.slice();
    if (trailers !== null) this.onEnd(trailers);
    if (verdict !== undefined) this.onDone(verdict, connId);
    else if (this.ended) this.completeIfEarly();
    else if (this.held === null) this.pull();
  }

  // Hands chunks to the exchange until it pauses (then keeps the rest); true if it wants more.
  deliver(list) {
    for (let i = 0; i < list.length; i++) {
      if (this.exchange.finished) return false;
      if (!this.exchange.onChunk(list[i])) {
        this.held = list.slice(i + 1);
        return false;
      }
    }
    return true;
  }

  onData(chunk) {
    if (this.held !== null) {
      for (const c of chunkList(chunk)) this.held.push(c);
      return;
    }
    if (this.deliver(chunkList(chunk)) && !this.ended) this.pull();
  }

  // The exchange paused outside a chunk's delivery (in its head's callback, say).
  pause() {
    if (this.held === null) this.held = [];
  }

  // The exchange resumed: chunks held by its pause go first, then the end, or more is asked for.
  resume() {
    const held = this.held;
    if (held === null) return;
    this.held = null;
    if (!this.deliver(held)) return;
    if (this.endHeld) {
      this.endHeld = false;
      this.exchange.complete(this.response);
    } else if (!this.ended) {
      this.pull();
    }
  }

  complete() {
    if (channels.completed.hasSubscribers) channels.completed.publish({ request: this.info, response: this.response });
    if (this.held !== null) this.endHeld = true;
    else this.exchange.complete(this.response);
  }

  fail(err) {
    this.dropSource(err);
    if (channels.error.hasSubscribers) channels.error.publish({ request: this.info, error: err });
    // As a body stream's: an error after the response is complete is not the response's.
    if (this.response === null || (!this.answered && (!this.ended || this.aborted))) this.exchange.failed(err);
  }
}

// agent.request(url, options): see README "agent.request()". With `exchange` (a Dispatcher's,
// see lib/dispatcher.js), the request's events go to it instead of a promise and a body
// stream, and the pending request is returned.
function request(agent, input, options = {}, exchange = null) {
  if (agent._closing) {
    const err = errors.agentClosed();
    if (exchange === null) return Promise.reject(err);
    exchange.fail(err);
    return null;
  }
  if (options === null || typeof options !== 'object') {
    throw errors.invalidArgType('options', 'of type object', options);
  }
  const target = agent._target(input, parseUrl);
  if (target.protocol !== agent.protocol) {
    const err = new TypeError(`Protocol "${target.protocol}" not supported. Expected "${agent.protocol}"`);
    err.code = 'ERR_INVALID_PROTOCOL';
    throw err;
  }
  const given = options.method === undefined ? 'GET' : options.method;
  // GET, the usual method, needs no checking.
  let method = 'GET';
  if (given !== 'GET') {
    if (typeof given !== 'string') throw errors.invalidArgType('options.method', 'of type string', given);
    if (!TOKEN.test(given)) throw invalidToken('Method', given);
    method = given.toUpperCase();
  }
  // A tunnel or an upgrade hands the connection over; the promise path has no socket to give.
  if (method === 'CONNECT') {
    throw errors.invalidArgValue('options.method', given, 'is not supported by agent.request(); use http.request() with the agent');
  }
  // No headers given (the common case): only the target's lines (host, and the URL's
  // credentials), and a length, go.
  const own = options.headers !== undefined && options.headers !== null;
  let list = own ? headerList(options.headers) : null;
  let headers;
  if (own) headers = list.flat;
  else if (target.auth === null) headers = ['host', target.host];
  else headers = ['host', target.host, 'authorization', target.auth];
  const body = bodyOf(options.body);
  const { bytes, size, source } = body;
  const signal = options.signal;
  if (signal !== undefined && signal !== null && (typeof signal !== 'object' || typeof signal.aborted !== 'boolean')) {
    throw errors.invalidArgType('options.signal', 'an instance of AbortSignal', signal);
  }
  const query = options.query === undefined || options.query === null ? '' : queryOf(options.query, target);
  const headersTimeout = duration(options.headersTimeout, 'headersTimeout');
  const bodyTimeout = duration(options.bodyTimeout, 'bodyTimeout');
  if (options.maxResponseHeaderSize !== undefined) {
    numberOption(options.maxResponseHeaderSize, 'options.maxResponseHeaderSize', 1, 'an integer >= 1', true);
  }
  // undici's: what no longer does what it did there is refused rather than ignored.
  const { maxRedirections, throwOnError, reset } = options;
  if (maxRedirections !== undefined && maxRedirections !== null && maxRedirections !== 0) {
    throw errors.invalidArgValue('options.maxRedirections', maxRedirections, 'is not supported: agent.request() returns redirect responses as they are');
  }
  if (throwOnError !== undefined && throwOnError !== null && throwOnError !== false) {
    throw errors.invalidArgValue('options.throwOnError', throwOnError, 'is not supported: check res.statusCode');
  }
  if (reset !== undefined && reset !== null && typeof reset !== 'boolean') {
    throw errors.invalidArgType('options.reset', 'of type boolean', reset);
  }
  const { onInfo, highWaterMark } = options;
  if (onInfo !== undefined && onInfo !== null && typeof onInfo !== 'function') {
    throw errors.invalidArgType('options.onInfo', 'of type function', onInfo);
  }
  // As a Readable's: a whole number of bytes (undici's body is one too).
  if (highWaterMark !== undefined && highWaterMark !== null) {
    numberOption(highWaterMark, 'options.highWaterMark', 0, 'an integer >= 0', true);
  }
  // Trailers after the body: given as headers are, or a function that gives them once the body
  // has been read to its end (for a body in memory: at once, with no promise).
  let trailers = null;
  let trailersLater = null;
  const trailersOption = options.trailers;
  if (trailersOption !== undefined && trailersOption !== null) {
    if (typeof trailersOption === 'function' && source !== null) {
      trailersLater = trailersOption;
    } else {
      const value = typeof trailersOption === 'function' ? trailersOption() : trailersOption;
      if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
        throw errors.invalidArgValue('options.trailers', trailersOption, 'must give the trailers at once for a body in memory');
      }
      trailers = trailerLines(value, 'options.trailers');
    }
  }
  const trailed = trailers !== null || trailersLater !== null;
  // An HTTPS request's own server name (SNI, and the name its certificate is checked for):
  // given, or the name of a host header that names another host than the URL (as Node's
  // https agent and undici take it; an IP address gives none). Its connections are those of
  // its origin with that name (a key of their own).
  let { servername } = options;
  if (servername !== undefined && typeof servername !== 'string') {
    throw errors.invalidArgType('options.servername', 'of type string', servername);
  }
  if (servername === undefined && own && list.host >= 0 && agent.protocol === 'https:') {
    servername = hostName(headers[list.host + 1], target.url.hostname);
  }
  const informed = typeof onInfo === 'function';
  const extras = options.opaque !== undefined || options.responseHeaders === 'raw' || informed
    || (highWaterMark !== undefined && highWaterMark !== null)
    ? {
      opaque: options.opaque,
      raw: options.responseHeaders === 'raw',
      onInfo: informed ? onInfo : null,
      highWaterMark: highWaterMark ?? undefined,
    }
    : null;

  if (own && list.upgrade >= 0) {
    throw errors.invalidArgValue('options.headers', options.headers, 'has an upgrade header, which agent.request() does not support; use http.request() with the agent');
  }
  // Through the agent's HTTP proxy, its lines take the place of the caller's of the same names,
  // as Node's http.request sets them.
  if (own && list.proxy && target.proxyLines !== null) {
    list = list.without(target.proxyLines);
    headers = list.flat;
  }
  // The target's host goes first when the headers have none (RFC 9110 §7.2), as undici sends it.
  if (own && list.host < 0) list.hostFirst(target.host);
  if (own && target.auth !== null && list.authorization < 0) headers.push('authorization', target.auth);
  // Through the agent's HTTP proxy: its lines, as Node's http.request adds them.
  if (target.proxyLines !== null) headers.push(...target.proxyLines);
  let contentLength;
  const declared = own ? list.contentLength : -1;
  // HTTP/1.1 sends trailers after a chunked body only: no length goes with them.
  if (trailed && declared >= 0) {
    throw errors.invalidArgValue('options.headers', options.headers, 'has a content-length, which trailers cannot follow (HTTP/1.1 sends them after a chunked body)');
  }
  if (trailed) {
    // Their names, as HTTP/1.1 asks (hyper sends only the trailers the header names).
    if (trailers !== null && (!own || list.trailer < 0)) headers.push('trailer', trailers.names.join(', '));
  } else if (declared >= 0) {
    const value = headers[declared + 1];
    if (!/^\d+$/.test(value)) {
      throw errors.invalidArgValue('options.headers', value, 'has a content-length that is not a non-negative integer');
    }
    contentLength = Number(value);
    // A body whose length is known must have the length declared (a stream is checked as it goes).
    const known = source === null ? size : body.length;
    if (known !== undefined && known !== contentLength) throw lengthMismatch(contentLength, known);
  } else if (body.length !== undefined) {
    // A Blob: streamed, with its size as the length.
    contentLength = body.length;
    headers.push('content-length', String(contentLength));
  } else if (source === null && (size > 0 || !NO_BODY.has(method))) {
    // As Node and undici: a known length is sent, 0 for methods that normally carry a body.
    contentLength = size;
    headers.push('content-length', String(contentLength));
  }
  const expectIndex = own ? list.expect : -1;
  const expectContinue = expectIndex >= 0 && /^100-continue$/i.test(headers[expectIndex + 1]);
  // A Blob's type is its content-type, unless one is given (as undici sends it).
  const typed = body.type !== undefined && body.type !== '' && (!own || list.contentType < 0);
  if (typed) headers.push('content-type', body.type);
  // An agent that keeps no connection says so to the server, as Node's does (RFC 9112 §9.6);
  // so does a request with undici's `reset`, whose connection is not used again.
  const closing = (!agent.keepAlive || reset === true) && (!own || list.connection < 0);
  if (closing) headers.push('connection', 'close');
  let headerLines;
  // What crosses as the path: the target's head parsed once, when the request has no header
  // lines but the target's base lines (see targetOf in agent.js).
  let pathOrHead = query === '' ? target.requestTarget : `${target.requestTarget}?${query}`;
  if (own || typed || closing || trailed) {
    headerLines = headers.join('\n');
  } else if (contentLength !== undefined) {
    headerLines = `${target.baseLines}\ncontent-length\n${contentLength}`;
  } else {
    headerLines = target.baseLines;
    // The prepared head carries the target's own path: not one with a query added.
    if (query === '') {
      if (target.head === null) target.head = binding.prepareHead(target.requestTarget, target.baseLines);
      if (target.head !== undefined) pathOrHead = target.head;
    }
  }

  const key = agent._requestKey(target, servername);
  if (options.maxResponseHeaderSize !== undefined) agent._setMaxHeaderSize(options.maxResponseHeaderSize);

  let promise = null;
  let resolve = null;
  let reject = null;
  if (exchange === null) {
    promise = new Promise(captureSettlers);
    resolve = settlers.resolve;
    reject = settlers.reject;
    settlers.resolve = null;
    settlers.reject = null;
  }
  let pending = null;
  // What throws from here on rejects the promise (or fails the exchange), as a throw in its
  // executor would.
  try {
    if (signal && signal.aborted) {
      if (exchange === null) reject(abortError(signal));
      else exchange.fail(abortError(signal));
      return promise;
    }
    const info = { origin: target.origin, method, path: query === '' ? target.path : `${target.path}?${query}`, headers };
    if (channels.created.hasSubscribers) channels.created.publish({ request: info });
    pending = exchange === null
      ? new PendingRequest(agent, resolve, reject, signal, info)
      : new HandlerRequest(agent, exchange, signal, info);
    pending.extras = extras;
    // In REQUEST_ARGS's order: pool, key, handle, method, path, headers, body, streamed,
    // contentLength, flags, headersTimeout, bodyTimeout, replayLimit, contextName, trailers.
    const result = startRequest(
      agent._poolId, key, pending, method,
      pathOrHead, headerLines, bytes, source !== null, contentLength ?? -1,
      (expectContinue ? EXPECT_CONTINUE : 0) | (informed ? INFORMATIONAL : 0),
      headersTimeout, bodyTimeout, agent._replayLimit, CONTEXT_NAME,
      trailers !== null ? trailers.lines : trailersLater !== null ? true : null,
    );
    // Sent, or queued: Rust serves it when the pool has a connection for it.
    pending.id = result;
    if (signal) pending.unwatch = watchAbort(signal, () => pending.abort(abortError(signal)));
    if (source !== null) {
      pending.source = source;
      pending.trailers = trailersLater;
      pending.declaredLength = contentLength;
      pending.pump(source);
    }
  } catch (err) {
    if (exchange === null) reject(errors.internalError(err));
    else exchange.fail(errors.internalError(err));
  }
  return exchange === null ? promise : pending;
}

// A promise's settling functions, taken from its executor without a closure made per request.
const settlers = { resolve: null, reject: null };

function captureSettlers(resolve, reject) {
  settlers.resolve = resolve;
  settlers.reject = reject;
}

module.exports = { request, PendingRequest, HandlerRequest, MAX_TARGET };
