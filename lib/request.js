'use strict';

// agent.request(): a promise of { statusCode, statusMessage, headers, rawHeaders, trailers,
// body }, with HTTP spoken by hyper in Rust on connections of the agent's own pool. This file
// validates the call, starts it in Rust, and turns Rust's events (src/binding/request.rs) into
// the promise and the body stream.

const { Readable, finished, isDisturbed } = require('node:stream');
const diagnostics = require('node:diagnostics_channel');
const { addAbortListener } = require('node:events');
const querystring = require('node:querystring');
const crypto = require('node:crypto');
const binding = require('./native');
const errors = require('./errors');

// agent.request()'s start in Rust: a plain Node-API function (see `request_function` in
// src/binding/mod.rs).
const startRequest = binding.requestFunction();

// Event kinds from Rust (declared in src/binding/request.rs `kind`), and a request's flags
// (src/binding/mod.rs): `expect: 100-continue`, and 1xx responses reported.
const PROTOCOL = binding.protocol();
const EVENT = Object.fromEntries(PROTOCOL.events.map((name, kind) => [name, kind]));
const { HEAD, DATA, END, ERROR, DRAIN, DONE, VERIFY, LOOKUP, ANSWERED, INFO } = EVENT;
const { expectContinue: EXPECT_CONTINUE, informational: INFORMATIONAL } = PROTOCOL;
// Answers to VERIFY: the server's name is right, or `rejectUnauthorized: false` lets it pass.
const { nameRight: NAME_RIGHT, nameLetPass: NAME_LET_PASS } = PROTOCOL;

// diagnostics_channel events of agent.request(), as undici publishes its own.
const channels = {
  created: diagnostics.channel('hyperagent:request:created'),
  headers: diagnostics.channel('hyperagent:request:headers'),
  completed: diagnostics.channel('hyperagent:request:completed'),
  error: diagnostics.channel('hyperagent:request:error'),
};

const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
// What a request path may not hold unescaped, as Node's http.request and undici refuse it.
const INVALID_PATH = /[^\u0021-\u00ff]/;
const UNSAFE_IN_PATH = /[<>`|"]/g;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const DEFAULT_TIMEOUT = 300e3;
// The type of a request's async context (as async_hooks sees it).
const CONTEXT_NAME = 'HYPERAGENT_REQUEST';
// What body.dump() reads at most before it closes the connection instead (undici's default).
const DUMP_LIMIT = 128 * 1024;
// Methods that carry no body unless one is given.
const NO_BODY = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);
const noop = () => {};

function invalidToken(what, value) {
  const err = new TypeError(`${what} must be a valid HTTP token ["${value}"]`);
  err.code = 'ERR_INVALID_HTTP_TOKEN';
  return err;
}

function invalidChar(name) {
  const err = new TypeError(`Invalid character in header content ["${name}"]`);
  err.code = 'ERR_INVALID_CHAR';
  return err;
}

// A chunk of a streamed request body as bytes: strings, Buffers, typed arrays and ArrayBuffers
// are; anything else (numbers, objects, the pairs of a URLSearchParams) fails the request.
function chunkBytes(chunk) {
  if (typeof chunk === 'string') return Buffer.from(chunk);
  if (Buffer.isBuffer(chunk)) return chunk;
  if (ArrayBuffer.isView(chunk)) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return Buffer.from(chunk);
  throw errors.invalidArgType('options.body', 'an iterable of strings, Buffers, Uint8Arrays or ArrayBuffers', chunk);
}

// A body whose length differs from the content-length given with it.
function lengthMismatch(declared, actual, atLeast = false) {
  return errors.hyperagentError(
    'CONTENT_LENGTH_MISMATCH',
    `content-length is ${declared} but the body is ${atLeast ? 'at least ' : ''}${actual} bytes`,
  );
}

// Calls `listener` once `signal` (not aborted yet) aborts; returns what stops that. Through
// events.addAbortListener where Node has it (20.5 on), as Node's own requests listen: the
// listener runs even when one registered before it stops the event's propagation, which would
// otherwise leave the request waiting for a response nobody wants (as undici's request() is).
function watchAbort(signal, listener) {
  if (addAbortListener !== undefined) {
    const watch = addAbortListener(signal, listener);
    return () => watch[Symbol.dispose]();
  }
  signal.addEventListener('abort', listener, { once: true });
  return () => signal.removeEventListener('abort', listener);
}

function abortError(signal) {
  if (signal && signal.reason !== undefined) return signal.reason;
  return new DOMException('This operation was aborted', 'AbortError');
}

// The longest request target (path and query) hyper's request line takes.
const MAX_TARGET = 65534;

// undici's `query` option: an object serialised as Node's querystring does, after a path that
// has no query of its own. Empty: nothing to add.
function queryOf(query, target) {
  if (typeof query !== 'object') throw errors.invalidArgType('options.query', 'of type object', query);
  const serialized = querystring.stringify(query);
  if (serialized === '') return '';
  if (target.path.includes('?') || target.path.includes('#')) {
    throw errors.invalidArgValue('options.query', query, 'cannot be given with a URL that has a query or a fragment');
  }
  const requestTarget = `${target.requestTarget}?${serialized}`;
  if (requestTarget.length > MAX_TARGET) {
    throw errors.invalidArgValue('options.query', `${serialized.slice(0, 64)}...`,
      `makes a request target of ${requestTarget.length} characters; agent.request() sends at most ${MAX_TARGET}`);
  }
  return serialized;
}

// The URL as a string, a URL, or { origin, path }.
function parseUrl(input) {
  if (input instanceof URL) return input;
  // A string that does not parse throws URL's own TypeError (ERR_INVALID_URL, with `input`), as
  // Node's http.request and undici's request() throw it.
  if (typeof input === 'string') return new URL(input);
  // The path goes to the origin as given, as undici sends it: never resolved against the
  // origin, which would send `//other.host/x` or `http://other.host/` to another host.
  if (input && typeof input === 'object' && typeof input.origin === 'string') {
    const path = input.path === undefined ? '/' : input.path;
    if (typeof path !== 'string') throw errors.invalidArgType('url.path', 'of type string', path);
    if (path[0] !== '/') throw errors.invalidArgValue('url.path', path, 'must start with a slash');
    if (INVALID_PATH.test(path)) {
      const err = new TypeError('Request path contains unescaped characters');
      err.code = 'ERR_UNESCAPED_CHARACTERS';
      throw err;
    }
    const url = new URL(input.origin);
    if (url.pathname !== '/' || url.search !== '' || url.hash !== '') {
      throw errors.invalidArgValue('url.origin', input.origin, 'must be an origin, without a path');
    }
    // Printable characters a request line may not hold as they are go percent-encoded (Node
    // and undici write them as given; hyper's request line takes them only so).
    return { url, path: path.replace(UNSAFE_IN_PATH, encodeURIComponent) };
  }
  throw errors.invalidArgType('url', 'of type string or an instance of URL, or { origin, path }', input);
}

// Header names seen before, valid, with their lower-case form: the same few names come with
// request after request. Bounded: a full store starts over.
const headerNames = new Map();

function lowerName(name) {
  let lower = headerNames.get(name);
  if (lower === undefined) {
    if (!TOKEN.test(name)) throw invalidToken('Header name', name);
    lower = name.toLowerCase();
    if (headerNames.size >= 1024) headerNames.clear();
    headerNames.set(name, lower);
  }
  return lower;
}

// Headers as [name, value, ...] (`flat`), with where the ones the request acts on are (the
// first of each; -1: absent), found in the one pass that validates them.
class HeaderList {
  constructor() {
    this.flat = [];
    this.host = -1;
    this.authorization = -1;
    this.contentLength = -1;
    this.contentType = -1;
    this.expect = -1;
    this.upgrade = -1;
    this.connection = -1;
    // A proxy-authorization or proxy-connection line is there.
    this.proxy = false;
  }

  // An array value repeats the name; undefined values are left out, null ones are empty (as
  // undici sends them).
  add(name, value) {
    if (typeof name !== 'string') name = String(name);
    const lower = lowerName(name);
    if (Array.isArray(value)) {
      for (const v of value) this.addOne(name, lower, v);
    } else {
      this.addOne(name, lower, value);
    }
  }

  addOne(name, lower, value) {
    if (value === undefined) return;
    const s = typeof value === 'string' ? value : value === null ? '' : String(value);
    if (BAD_VALUE.test(s)) throw invalidChar(name);
    const at = this.flat.length;
    this.flat.push(name, s);
    switch (lower) {
      case 'host': if (this.host < 0) this.host = at; break;
      case 'authorization': if (this.authorization < 0) this.authorization = at; break;
      case 'content-length': if (this.contentLength < 0) this.contentLength = at; break;
      case 'content-type': if (this.contentType < 0) this.contentType = at; break;
      case 'expect': if (this.expect < 0) this.expect = at; break;
      case 'upgrade': if (this.upgrade < 0) this.upgrade = at; break;
      case 'connection': if (this.connection < 0) this.connection = at; break;
      case 'proxy-authorization': case 'proxy-connection': this.proxy = true; break;
      default: break;
    }
  }

  // The same lines less those whose names `lines` (name, value, ...) has.
  without(lines) {
    const drop = new Set();
    for (let i = 0; i < lines.length; i += 2) drop.add(lines[i]);
    const list = new HeaderList();
    const flat = this.flat;
    for (let i = 0; i < flat.length; i += 2) {
      const lower = lowerName(flat[i]);
      if (!drop.has(lower)) list.addOne(flat[i], lower, flat[i + 1]);
    }
    return list;
  }

  // The target's host put before the list's own lines (there was none): the indexes move.
  hostFirst(host) {
    this.flat.unshift('host', host);
    this.host = 0;
    if (this.authorization >= 0) this.authorization += 2;
    if (this.contentLength >= 0) this.contentLength += 2;
    if (this.contentType >= 0) this.contentType += 2;
    if (this.expect >= 0) this.expect += 2;
    if (this.upgrade >= 0) this.upgrade += 2;
    if (this.connection >= 0) this.connection += 2;
  }
}

// The headers option: an object (array values repeat the name), a flat array, or an iterable
// of [name, value] pairs (a Headers, a Map).
function headerList(headers) {
  const list = new HeaderList();
  if (Array.isArray(headers)) {
    if (headers.length % 2 !== 0) throw errors.invalidArgValue('options.headers', headers, 'must hold name/value pairs');
    for (let i = 0; i < headers.length; i += 2) list.add(headers[i], headers[i + 1]);
    return list;
  }
  if (typeof headers !== 'object') throw errors.invalidArgType('options.headers', 'of type object or an Array', headers);
  if (typeof headers[Symbol.iterator] === 'function') {
    for (const pair of headers) {
      if (!Array.isArray(pair) || pair.length !== 2) {
        throw errors.invalidArgValue('options.headers', headers, 'must hold [name, value] pairs');
      }
      list.add(pair[0], pair[1]);
    }
    return list;
  }
  for (const name of Object.keys(headers)) list.add(name, headers[name]);
  return list;
}

// What goes to Rust for a body: bytes of a known count (`size`): a Buffer, or a short string,
// which Rust encodes as UTF-8 itself (as Buffer.from would, without a Buffer made and copied
// once more; a longer one costs less through Buffer.from, whose encoder is faster than the one
// Node-API uses); or a source to stream, with its length and content type when it has them (a
// Blob's). One shape for all, and one object for none.
const SHORT_STRING_BODY = 512;
const ABSENT_BODY = Object.freeze({ bytes: null, size: 0, source: null, length: undefined, type: undefined });
const bytesBody = (bytes, size) => ({ bytes, size, source: null, length: undefined, type: undefined });
const sourceBody = (source, length, type) => ({ bytes: null, size: 0, source, length, type });

// Rust copies the bytes during the call that starts the request (README, "Safety"): the
// Buffer is the caller's again as soon as request() returns.
function bufferBody(buf) {
  return bytesBody(buf, buf.length);
}

function bodyOf(body) {
  if (body === undefined || body === null) return ABSENT_BODY;
  if (typeof body === 'string') {
    return body.length <= SHORT_STRING_BODY ? bytesBody(body, Buffer.byteLength(body)) : bufferBody(Buffer.from(body));
  }
  if (Buffer.isBuffer(body)) return bufferBody(body);
  if (ArrayBuffer.isView(body)) return bufferBody(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  if (body instanceof ArrayBuffer) return bufferBody(Buffer.from(body));
  if (body instanceof Blob) return blobBody(body);
  // Forms, as fetch sends them (a FormData of undici's own too).
  if (body instanceof URLSearchParams) {
    const bytes = Buffer.from(body.toString());
    return { bytes, size: bytes.length, source: null, length: undefined, type: URLENCODED };
  }
  if (body[Symbol.toStringTag] === 'FormData') return blobBody(multipart(body));
  if (typeof body[Symbol.asyncIterator] === 'function' || typeof body[Symbol.iterator] === 'function') {
    return sourceBody(body, undefined, undefined);
  }
  throw errors.invalidArgType(
    'options.body',
    'a string, Buffer, Uint8Array, ArrayBuffer, Blob, FormData, URLSearchParams, Readable or async iterable',
    body,
  );
}

// Streamed, with its size as the length and its type as the content type.
function blobBody(blob) {
  return sourceBody(blob.stream(), blob.size, blob.type);
}

const URLENCODED = 'application/x-www-form-urlencoded;charset=UTF-8';

// A FormData in the multipart/form-data encoding (the HTML standard's algorithm, as fetch
// sends it), as a Blob of its parts: a file's bytes are read only as they are sent, and the
// length is known before. Line breaks in names and text values become CRLF; in names and file
// names, CR, LF and the double quote are percent-escaped.
function multipart(form) {
  const boundary = `----hyperagent-${crypto.randomBytes(12).toString('hex')}`;
  const escape = (text) => text.replace(/[\r\n"]/g, (c) => (c === '\r' ? '%0D' : c === '\n' ? '%0A' : '%22'));
  const crlf = (text) => text.replace(/\r\n|\r|\n/g, '\r\n');
  const parts = [];
  for (const [name, value] of form) {
    const disposition = `--${boundary}\r\nContent-Disposition: form-data; name="${escape(crlf(name))}"`;
    if (typeof value === 'string') {
      parts.push(`${disposition}\r\n\r\n${crlf(value)}\r\n`);
    } else {
      const type = value.type || 'application/octet-stream';
      parts.push(`${disposition}; filename="${escape(value.name ?? 'blob')}"\r\nContent-Type: ${type}\r\n\r\n`, value, '\r\n');
    }
  }
  parts.push(`--${boundary}--\r\n`);
  return new Blob(parts, { type: `multipart/form-data; boundary=${boundary}` });
}

// A number option validated as Node validates one: another type is ERR_INVALID_ARG_TYPE, a
// number out of range (NaN too) ERR_OUT_OF_RANGE.
function numberOption(value, name, min, range, integer = false) {
  if (typeof value !== 'number') throw errors.invalidArgType(name, 'of type number', value);
  if (Number.isNaN(value) || value < min || (integer && !Number.isInteger(value))) {
    throw errors.outOfRange(name, range, value);
  }
  return value;
}

function duration(value, name) {
  if (value === undefined) return DEFAULT_TIMEOUT;
  return numberOption(value, `options.${name}`, 0, '>= 0');
}

// Node's rules for joining repeated response headers (IncomingMessage#headers).
const FIRST_WINS = new Set([
  'content-type', 'content-length', 'user-agent', 'referer', 'host', 'authorization',
  'proxy-authorization', 'if-modified-since', 'if-unmodified-since', 'from', 'location',
  'max-forwards', 'retry-after', 'etag', 'last-modified', 'server', 'age', 'expires',
]);

function headerObject(raw) {
  const out = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const value = raw[i + 1];
    // Its own value only: a header named `constructor` or `toString` would find
    // Object.prototype's otherwise.
    const prev = Object.hasOwn(out, name) ? out[name] : undefined;
    if (prev === undefined) {
      out[name] = name === 'set-cookie' ? [value] : value;
    } else if (name === 'set-cookie') {
      prev.push(value);
    } else if (!FIRST_WINS.has(name)) {
      out[name] = `${prev}${name === 'cookie' ? '; ' : ', '}${value}`;
    }
  }
  return out;
}

// Body bytes from Rust: a Buffer, or an array of them (large reads, each shared as it was read).
function pushChunk(body, chunk) {
  if (Array.isArray(chunk)) for (const c of chunk) body.push(c);
  else body.push(chunk);
}

// The same as a list of Buffers (none for null).
function chunkList(chunk) {
  return chunk === null ? [] : Array.isArray(chunk) ? chunk : [chunk];
}

// The response body: a Readable that asks Rust for one chunk whenever it wants more, so a
// paused consumer stops the socket.
class ResponseBody extends Readable {
  constructor(pending, highWaterMark) {
    super(highWaterMark === undefined ? undefined : { highWaterMark });
    this._pending = pending;
    // When text()/json()/arrayBuffer() consume an untouched body, chunks bypass the stream.
    this._sink = null;
    this._used = false;
    // Its chunks were handed to a `for await` loop without passing through the stream.
    this._iterated = false;
    // A body that came whole with its head waits here, out of the stream, until something
    // reads it: a Buffer, an array of them, or null (no bytes). Undefined otherwise.
    this._whole = undefined;
  }

  // As undici's body: whether anything has read from it (or destroyed it), after which the
  // body mixins refuse it.
  get bodyUsed() {
    return this._used || this._iterated || isDisturbed(this);
  }

  _read() {
    const whole = this._whole;
    if (whole === undefined) {
      this._pending.pull();
      return;
    }
    this._whole = undefined;
    if (whole !== null) pushChunk(this, whole);
    this.push(null);
  }

  // `for await`: a body that has arrived whole (a small response comes with its head) is
  // handed out without the general iterator's machinery (an async generator and listeners for
  // every way a stream can end); anything else gets the general one, as does a body with an
  // encoding set (setEncoding: the stream's decoder makes its chunks strings).
  [Symbol.asyncIterator]() {
    if (
      this._whole !== undefined && !this.destroyed && this.readableFlowing === null
      && !this.readableDidRead && this.readableEncoding === null
    ) {
      return new WholeBodyIterator(this);
    }
    return super[Symbol.asyncIterator]();
  }

  // The chunks of a body that came whole; the stream, if read after all, then ends at once.
  _takeWhole() {
    const whole = this._whole;
    this._whole = null;
    return chunkList(whole);
  }

  // A text()/json()/... still collecting fails with the error, or as aborted (a sink that
  // has its bytes already is settled, and ignores this). As Node's IncomingMessage, an error
  // is emitted only if something listens by then: a body that fails before its reader comes
  // (the response awaited, its body read later) does not throw from the event loop; the error
  // stays (`body.errored`) for text(), for await or stream.finished to report.
  _destroy(err, cb) {
    if (this._sink !== null) this._sink.reject(err || errors.abortError());
    this._pending.bodyDestroyed();
    if (err) process.nextTick(() => cb(this.listenerCount('error') > 0 ? err : undefined));
    else cb();
  }

  // The whole body as one Buffer.
  _consume() {
    if (this._used) return Promise.reject(new TypeError('Body is unusable: it has already been read'));
    // Destroyed (read to its end, destroyed by its consumer, or failed): nothing is left.
    if (this.destroyed) {
      const why = this.readableEnded ? 'it has already been read' : 'it was destroyed';
      return Promise.reject(this.errored ?? new TypeError(`Body is unusable: ${why}`));
    }
    this._used = true;
    if (this.readableFlowing === null && !this.readableDidRead) {
      return new Promise((resolve, reject) => {
        const chunks = [];
        if (this._whole !== undefined) chunks.push(...this._takeWhole());
        else if (this.readableLength > 0) chunks.push(this.read());
        this._sink = { chunks, resolve, reject };
        this._pending.sinkAttached();
      });
    }
    // Something already read from the stream: collect the rest of it (nothing, if it ended),
    // failing if it errors or is destroyed before its end.
    return new Promise((resolve, reject) => {
      const chunks = [];
      this.on('data', (chunk) => chunks.push(chunk));
      finished(this, (err) => (err ? reject(err) : resolve(Buffer.concat(chunks))));
    });
  }

  // UTF-8, without a leading byte order mark (as undici and fetch decode a body).
  async text() {
    const buf = await this._consume();
    const bom = buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf;
    return buf.toString('utf8', bom ? 3 : 0);
  }

  async json() {
    return JSON.parse(await this.text());
  }

  async arrayBuffer() {
    const buf = await this._consume();
    return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  }

  async blob() {
    return new Blob([await this.arrayBuffer()]);
  }

  // The whole body in a Uint8Array of its own.
  async bytes() {
    return new Uint8Array(await this.arrayBuffer());
  }

  // Reads the body to its end and drops it, as undici's dump(): so that its connection goes
  // back to the pool. A body longer than `limit` bytes (128 KiB by default) is destroyed
  // instead, which closes its connection. Resolves null once the body has closed, whatever
  // ended it; rejects only when `signal` aborts it.
  dump(options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw errors.invalidArgType('options', 'of type object', options);
    }
    const limit = options === undefined || options.limit === undefined
      ? DUMP_LIMIT
      : numberOption(options.limit, 'options.limit', 0, '>= 0');
    const signal = options === undefined ? undefined : options.signal;
    if (signal !== undefined && signal !== null && (typeof signal !== 'object' || typeof signal.aborted !== 'boolean')) {
      throw errors.invalidArgType('options.signal', 'an instance of AbortSignal', signal);
    }
    if (signal && signal.aborted) return Promise.reject(abortError(signal));
    // Already read whole (text() and the like), or closed: nothing is left to drop.
    if (this._used || this.closed) return Promise.resolve(null);
    this._used = true;
    return new Promise((resolve, reject) => {
      const unwatch = signal ? watchAbort(signal, () => this.destroy(abortError(signal))) : noop;
      this.once('close', () => {
        if (!signal) return resolve(null);
        if (signal.aborted) return reject(abortError(signal));
        unwatch();
        return resolve(null);
      });
      // Any error ends it through 'close'.
      this.on('error', noop);
      let read = 0;
      this.on('data', (chunk) => {
        read += chunk.length;
        if (read > limit) this.destroy();
      });
      this.resume();
    });
  }
}

// Iterates a body that came whole, as Node's stream iterator would iterate it once buffered:
// the chunks one by one; taking the last ends the stream ('end' is due on the next tick, as
// after a read of a stream's last buffered chunk); the iteration ends after that, and the body
// is destroyed when the iteration ends, whether it ran to the end, was left early or was
// thrown into. A body destroyed meanwhile ends it with the body's error, or as a premature
// close. The chunks go straight from the iterator, not through the stream's buffer.
class WholeBodyIterator {
  constructor(body) {
    this.body = body;
    body._iterated = true;
    this.chunks = body._takeWhole();
    this.index = 0;
    this.finished = false;
    this.streamEnded = false;
  }

  endStream() {
    if (this.streamEnded) return;
    this.streamEnded = true;
    const body = this.body;
    // Nothing is left out of the stream; a read of nothing first ends the stream's first
    // synchronous read (its _read has nothing to ask for), so that the end is taken at once
    // instead of on a tick of its own. Then the read that finds the end: 'end' is due.
    body._whole = undefined;
    body.read(0);
    body.push(null);
    body.read();
  }

  next() {
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    const body = this.body;
    if (body.destroyed) {
      // Destroyed by the loop: it ends once the body has closed.
      this.finished = true;
      return new Promise((resolve, reject) => {
        const settle = () => {
          if (body.errored) reject(body.errored);
          else if (!body.readableEnded) reject(errors.prematureClose());
          else resolve({ value: undefined, done: true });
        };
        if (body._readableState.closeEmitted) settle();
        else body.once('close', settle);
      });
    }
    const chunks = this.chunks;
    if (this.index < chunks.length) {
      const value = chunks[this.index++];
      if (this.index === chunks.length) this.endStream();
      return Promise.resolve({ value, done: false });
    }
    this.endStream();
    this.finished = true;
    return new Promise((resolve) => {
      process.nextTick(() => {
        body.destroy();
        resolve({ value: undefined, done: true });
      });
    });
  }

  return(value) {
    this.finish();
    return Promise.resolve({ value, done: true });
  }

  throw(err) {
    this.finish();
    return Promise.reject(err);
  }

  finish() {
    if (this.finished) return;
    this.finished = true;
    const body = this.body;
    body.destroy(body.readableEnded ? undefined : errors.abortError());
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

// undici's request options of a response: `opaque` as given, the headers as the raw list.
function withExtras(response, { opaque, raw }) {
  if (opaque !== undefined) response.opaque = opaque;
  if (raw) Object.defineProperty(response, 'headers', { value: response.rawHeaders, enumerable: true, writable: true, configurable: true });
}

class Response {
  constructor(statusCode, statusMessage, raw, body) {
    this.statusCode = statusCode;
    this.statusMessage = statusMessage;
    this._raw = raw;
    this._rawHeaders = null;
    this._headers = null;
    this.trailers = {};
    this.body = body;
  }

  // Rust sends the head as one string, `name\nvalue\n...`: split and joined on first use only.
  get rawHeaders() {
    if (this._rawHeaders === null) this._rawHeaders = this._raw === '' ? [] : this._raw.split('\n');
    return this._rawHeaders;
  }

  get headers() {
    if (this._headers === null) this._headers = headerObject(this.rawHeaders);
    return this._headers;
  }

  // undici's name for it.
  get statusText() {
    return this.statusMessage;
  }
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
      if (!this.done) binding.bodyEnd(this.id);
    } catch (err) {
      if (!this.done) {
        // A source's own error, or a fault of the addon in bodyWrite (README, "Safety").
        this.bodyError = errors.internalError(err);
        binding.bodyFail(this.id, err && err.message ? err.message : String(err));
      }
    }
  }
}

// agent.request(url, options): see README "agent.request()".
function request(agent, input, options = {}) {
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
  if (declared >= 0) {
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
  if (own || typed || closing) {
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

  const key = agent._requestKey(target);
  if (options.maxResponseHeaderSize !== undefined) agent._setMaxHeaderSize(options.maxResponseHeaderSize);

  const promise = new Promise(captureSettlers);
  const resolve = settlers.resolve;
  const reject = settlers.reject;
  settlers.resolve = null;
  settlers.reject = null;
  // What throws from here on rejects the promise, as a throw in its executor would.
  try {
    if (signal && signal.aborted) {
      reject(abortError(signal));
      return promise;
    }
    const info = { origin: target.origin, method, path: query === '' ? target.path : `${target.path}?${query}`, headers };
    if (channels.created.hasSubscribers) channels.created.publish({ request: info });
    const pending = new PendingRequest(agent, resolve, reject, signal, info);
    pending.extras = extras;
    const result = startRequest(
      agent._poolId, key, pending, method,
      pathOrHead, headerLines, bytes, source !== null, contentLength ?? -1,
      (expectContinue ? EXPECT_CONTINUE : 0) | (informed ? INFORMATIONAL : 0),
      headersTimeout, bodyTimeout, agent._replayLimit, CONTEXT_NAME,
    );
    // Sent, or queued: Rust serves it when the pool has a connection for it.
    pending.id = result;
    if (signal) pending.unwatch = watchAbort(signal, () => pending.abort(abortError(signal)));
    if (source !== null) {
      pending.source = source;
      pending.declaredLength = contentLength;
      pending.pump(source);
    }
  } catch (err) {
    reject(errors.internalError(err));
  }
  return promise;
}

// A promise's settling functions, taken from its executor without a closure made per request.
const settlers = { resolve: null, reject: null };

function captureSettlers(resolve, reject) {
  settlers.resolve = resolve;
  settlers.reject = reject;
}

module.exports = { request, PendingRequest, MAX_TARGET };
