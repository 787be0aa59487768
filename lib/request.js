'use strict';

// agent.request(): a promise of { statusCode, statusMessage, headers, rawHeaders, trailers,
// body }, with HTTP spoken by hyper in Rust on connections of the agent's own pool. This file
// validates the call and starts it in Rust; lib/pending.js turns Rust's events into the
// promise and the body stream.

const net = require('node:net');
const binding = require('./native');
const errors = require('./errors');
const { numberOption } = require('./options');
const { TOKEN, invalidToken, checkValue, headerList, trailerLines } = require('./headers');
const { lengthMismatch, bodyOf } = require('./request-body');
const undiciChannels = require('./undici-channels');
const { Response } = require('./response');
const { MAX_TARGET, queryOf, parseUrl } = require('./target');
const { watchAbort, abortError, undiciAbortError } = require('./signal');
const { PendingRequest, HandlerRequest, channels } = require('./pending');
const { checkServerName } = require('./tls');

// agent.request()'s start in Rust: a plain Node-API function (see `request_function` in
// src/binding/exports/request.rs).
const startRequest = binding.requestFunction();

// A request's flags (declared in src/binding/protocol.rs `flags`): `expect: 100-continue`,
// 1xx responses reported, and the connection it goes out on told (undici's sendHeaders).
const PROTOCOL = binding.protocol();
const { expectContinue: EXPECT_CONTINUE, informational: INFORMATIONAL, sending: SENDING } = PROTOCOL;
// The order of startRequest's arguments is Rust's (`arg` in src/binding/protocol.rs): the call in
// request() below passes them so, which this load checks, once, against the addon it loaded.
const REQUEST_ARGS = 'pool,key,handle,method,path,headers,body,streamed,contentLength,flags,headersTimeout,bodyTimeout,replayLimit,contextName,trailers';
if (PROTOCOL.requestArgs.join() !== REQUEST_ARGS) {
  throw errors.hyperagentError('INTERNAL', `the addon takes agent.request()'s arguments as (${PROTOCOL.requestArgs}), not as lib/request.js passes them`);
}

const DEFAULT_TIMEOUT = 300e3;
// The type of a request's async context (as async_hooks sees it).
const CONTEXT_NAME = 'HYPERAGENT_REQUEST';
// Methods that carry no body unless one is given.
const NO_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

function duration(value, name) {
  if (value === undefined) return DEFAULT_TIMEOUT;
  return numberOption(value, `options.${name}`, 0, '>= 0');
}

// As undici's response has it: the request's `opaque`, null when none was given (a default
// on the prototype, as the class's getters are: not enumerable).
Object.defineProperty(Response.prototype, 'opaque', { value: null, writable: true, configurable: true });
// And its `context`, what the interceptors of a composed Dispatcher share (a redirect's
// `history`): null when none gave one, as undici 8's (undici 7's is undefined).
Object.defineProperty(Response.prototype, 'context', { value: null, writable: true, configurable: true });

// The server name a host header gives, when it names another host than `urlHost`: its name
// without the port; none for an IP address.
function hostName(host, urlHost) {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.split(':')[0];
  if (name === '' || net.isIP(name) !== 0 || name.toLowerCase() === urlHost.toLowerCase()) return undefined;
  return name;
}

// agent.request(url, options): see README "agent.request()". With `exchange` (a Dispatcher's,
// see lib/exchange.js), the request's events go to it instead of a promise and a body
// stream, and the pending request is returned. A `tracker` (a Dispatcher's, for its
// request()) is given the pending request as `tracker.pending`, and its `over()` is called
// once the exchange is over.
function request(agent, input, options = {}, exchange = null, tracker = null) {
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
    throw errors.invalidArgValue('options.maxRedirections', maxRedirections, 'is not supported: a redirect response is returned as it is (undici\'s redirect interceptor, composed on a Dispatcher, follows them)');
  }
  refuseThrowOnError(throwOnError, 'options.throwOnError');
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
        // Refused: what the promise comes to goes nowhere (a rejection of it unhandled would be
        // the process's, on top of this request's error).
        value.then(undefined, () => {});
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
  // An IP address, as tls.connect takes it (refused from Node 26 on).
  if (servername && agent.protocol === 'https:') checkServerName(servername);
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
  if (typed) {
    checkValue('content-type', body.type);
    headers.push('content-type', body.type);
  }
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
  // The error an abort of the signal gives: a Dispatcher's request() gives undici's.
  const abortReason = tracker === null ? abortError : undiciAbortError;
  // What throws from here on rejects the promise (or fails the exchange), as a throw in its
  // executor would.
  try {
    if (signal && signal.aborted) {
      if (exchange === null) reject(abortReason(signal));
      else exchange.fail(abortReason(signal));
      return promise;
    }
    const info = { origin: target.origin, method, path: query === '' ? target.path : `${target.path}?${query}`, headers };
    if (channels.created.hasSubscribers) channels.created.publish({ request: info });
    pending = exchange === null
      ? new PendingRequest(agent, resolve, reject, signal, info)
      : new HandlerRequest(agent, exchange, signal, info);
    pending.extras = extras;
    pending.undici = undiciChannels.announced(options);
    if (tracker !== null) {
      tracker.pending = pending;
      pending.tracker = tracker;
    }
    // In REQUEST_ARGS's order: pool, key, handle, method, path, headers, body, streamed,
    // contentLength, flags, headersTimeout, bodyTimeout, replayLimit, contextName, trailers.
    const result = startRequest(
      agent._poolId, key, pending, method,
      pathOrHead, headerLines, bytes, source !== null, contentLength ?? -1,
      (expectContinue ? EXPECT_CONTINUE : 0) | (informed ? INFORMATIONAL : 0)
        | (pending.undici !== null && undiciChannels.wantsSending() ? SENDING : 0),
      headersTimeout, bodyTimeout, agent._replayLimit, CONTEXT_NAME,
      trailers !== null ? trailers.lines : trailersLater !== null ? true : null,
    );
    // Sent, or queued: Rust serves it when the pool has a connection for it.
    pending.id = result;
    if (signal) pending.unwatch = watchAbort(signal, () => pending.abort(abortReason(signal)));
    if (source !== null) {
      pending.source = source;
      pending.trailers = trailersLater;
      pending.declaredLength = contentLength;
      pending.pump(source);
    } else if (pending.undici !== null || (exchange !== null && exchange.sending)) {
      // A body given whole: told as sent when the response head shows the server had the
      // request (a request that never reached one is not).
      pending.sentWhole = bytes === null ? NO_BYTES : typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    }
  } catch (err) {
    // Not started: nothing will end it later, so its tracker hears of its end now.
    if (pending !== null && pending.id === 0 && pending.tracker !== null) {
      pending.tracker = null;
      tracker.over();
    }
    if (exchange === null) reject(errors.internalError(err));
    else exchange.fail(errors.internalError(err));
  }
  return exchange === null ? promise : pending;
}

// agent.request()'s options, as index.d.ts's RequestOptions names them (and undici's two that
// it refuses).
const OPTION_NAMES = [
  'method', 'headers', 'query', 'body', 'servername', 'trailers', 'signal', 'headersTimeout', 'bodyTimeout',
  'maxResponseHeaderSize', 'opaque', 'reset', 'responseHeaders', 'onInfo', 'highWaterMark', 'maxRedirections',
  'throwOnError',
];

// The options of agent.request(url, options): given apart, or, as undici's dispatcher.request()
// takes them, in one object with the origin and the path (`{ origin, path, method, body }`).
// With both, the url object may not hold an option too: one of the two would be dropped.
function callOptions(url, options) {
  if (url === null || typeof url !== 'object' || url instanceof URL) return options;
  if (options === undefined) return url;
  for (const name of OPTION_NAMES) {
    if (url[name] !== undefined) {
      throw errors.invalidArgValue('url', url, `holds the option ${name} while options are given too: give the options in one place`);
    }
  }
  return options;
}

// undici 6's request() failed a response of status 400 or more when given `throwOnError`;
// undici 7's refuses the option. A request() of ours refuses it too, rather than resolve with
// the response a program that gives it expects to fail.
function refuseThrowOnError(value, name) {
  if (value !== undefined && value !== null && value !== false) {
    throw errors.invalidArgValue(name, value, 'is not supported: check res.statusCode');
  }
}

const NO_BYTES = Buffer.alloc(0);

// A promise's settling functions, taken from its executor without a closure made per request.
const settlers = { resolve: null, reject: null };

function captureSettlers(resolve, reject) {
  settlers.resolve = resolve;
  settlers.reject = reject;
}

module.exports = { request, callOptions, refuseThrowOnError, MAX_TARGET };
