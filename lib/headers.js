'use strict';

// agent.request()'s headers: names and values checked as Node checks them, given in any
// form undici takes, and a response's headers as an object.

const { inspect } = require('node:util');
const errors = require('./errors');

// An HTTP token (RFC 9110 §5.6.2), and a comma-separated list of them (a connection header's
// value, §7.6.1).
const TOKEN_PATTERN = "[\\^_`a-zA-Z\\-0-9!#$%&'*+.|~]+";
const TOKEN = new RegExp(`^${TOKEN_PATTERN}$`);
const CONNECTION = new RegExp(`^[\\t ]*${TOKEN_PATTERN}[\\t ]*(?:,[\\t ]*${TOKEN_PATTERN}[\\t ]*)*$`);
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
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

// A header value with no string form (a symbol, an object with no prototype): Node's code
// for a value it cannot send.
function invalidValue(name, value) {
  const err = new TypeError(`Invalid value "${inspect(value)}" for header "${name}"`);
  err.code = 'ERR_HTTP_INVALID_HEADER_VALUE';
  return err;
}

// A header's name or value given as another value than a string: its string form, as sent;
// `refuse()` makes the error for a value that has none (a symbol, as Node's http takes it, or
// an object with no prototype).
function stringOf(value, refuse) {
  if (typeof value !== 'symbol') {
    try {
      return String(value);
    } catch {
      // refused below
    }
  }
  throw refuse();
}

// A header value the request makes of what it was given (a Blob's type, say), checked as the
// caller's own values are: a line break or a control character in it is refused.
function checkValue(name, value) {
  if (BAD_VALUE.test(value)) throw invalidChar(name);
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

// A second host or content-length line: a request has one target and one length (RFC 9112
// §3.2, §6.3), and a server refuses one with two; refused at once, as undici refuses it.
function duplicate(what, lower, value) {
  return errors.invalidArgValue(what, value, `has more than one ${lower} header`);
}

// A header line the request refuses, as undici refuses it (its `invalid X header`); `what`
// names the lines (the headers option, or trailers), `why` ends the sentence.
function refusedHeader(what, lower, value, why) {
  return errors.invalidArgValue(what, value, `has a ${lower} header${why}`);
}

// Headers as [name, value, ...] (`flat`), with where the ones the request acts on are (the
// first of each; -1: absent), found in the one pass that validates them.
class HeaderList {
  constructor(what = 'options.headers') {
    this.what = what;
    this.flat = [];
    this.host = -1;
    this.authorization = -1;
    this.contentLength = -1;
    this.contentType = -1;
    this.expect = -1;
    this.upgrade = -1;
    this.connection = -1;
    this.trailer = -1;
    // A proxy-authorization or proxy-connection line is there.
    this.proxy = false;
  }

  // An array value repeats the name; undefined values are left out, null ones are empty (as
  // undici sends them).
  add(name, value) {
    if (typeof name !== 'string') name = stringOf(name, () => invalidToken('Header name', inspect(name)));
    const lower = lowerName(name);
    if (Array.isArray(value)) {
      // One connection line holds its whole list, as undici takes it.
      if (lower === 'connection') throw refusedHeader(this.what, lower, value, ' with more than one value');
      for (const v of value) this.addOne(name, lower, v);
    } else {
      this.addOne(name, lower, value);
    }
  }

  addOne(name, lower, value) {
    if (value === undefined) return;
    // An object (a Date, a Buffer, a nested array) has no form a header line can carry: refused,
    // as undici refuses it, rather than sent as its String() ('[object Object]').
    if (value !== null && typeof value === 'object') throw invalidValue(name, value);
    const s = typeof value === 'string' ? value : value === null ? '' : stringOf(value, () => invalidValue(name, value));
    checkValue(name, s);
    const at = this.flat.length;
    this.flat.push(name, s);
    switch (lower) {
      case 'host': if (this.host < 0) this.host = at; else throw duplicate(this.what, lower, value); break;
      case 'authorization': if (this.authorization < 0) this.authorization = at; break;
      case 'content-length': if (this.contentLength < 0) this.contentLength = at; else throw duplicate(this.what, lower, value); break;
      case 'content-type': if (this.contentType < 0) this.contentType = at; break;
      case 'expect': if (this.expect < 0) this.expect = at; break;
      case 'upgrade': if (this.upgrade < 0) this.upgrade = at; break;
      case 'connection':
        if (!CONNECTION.test(s)) throw refusedHeader(this.what, lower, value, ' that is not a list of tokens');
        if (this.connection < 0) this.connection = at;
        break;
      case 'trailer': if (this.trailer < 0) this.trailer = at; break;
      case 'proxy-authorization': case 'proxy-connection': this.proxy = true; break;
      // The message's framing and the connection's persistence are the client's to state: a
      // line of the caller's could contradict what it sends (chunked on top of a length),
      // and undici refuses both.
      case 'transfer-encoding': case 'keep-alive': throw refusedHeader(this.what, lower, value, ', which the client sets itself');
      default: break;
    }
  }

  // The same lines less those whose names `lines` (name, value, ...) has.
  without(lines) {
    const drop = new Set();
    for (let i = 0; i < lines.length; i += 2) drop.add(lines[i]);
    const list = new HeaderList(this.what);
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
    if (this.trailer >= 0) this.trailer += 2;
  }
}

// An object iterated for its pairs: one whose class gives it an iterator (a Headers, a Map), or
// that has one of its own. A plain object is read by its keys, even where Object.prototype was
// given an iterator (as undici reads it), so that a polluted prototype does not empty it.
function iterableOwn(headers) {
  const proto = Object.getPrototypeOf(headers);
  if (proto === Object.prototype || proto === null) return Object.hasOwn(headers, Symbol.iterator);
  return typeof headers[Symbol.iterator] === 'function';
}

// The headers option: an object (array values repeat the name), a flat array, or an iterable
// of [name, value] pairs (a Headers, a Map); `what` names it in errors.
function headerList(headers, what = 'options.headers') {
  const list = new HeaderList(what);
  if (Array.isArray(headers)) {
    if (headers.length % 2 !== 0) throw errors.invalidArgValue(what, headers, 'must hold name/value pairs');
    for (let i = 0; i < headers.length; i += 2) list.add(headers[i], headers[i + 1]);
    return list;
  }
  if (typeof headers !== 'object') throw errors.invalidArgType(what, 'of type object or an Array', headers);
  if (iterableOwn(headers)) {
    for (const pair of headers) {
      if (!Array.isArray(pair) || pair.length !== 2) {
        throw errors.invalidArgValue(what, headers, 'must hold [name, value] pairs');
      }
      list.add(pair[0], pair[1]);
    }
    return list;
  }
  for (const name of Object.keys(headers)) list.add(name, headers[name]);
  return list;
}

// Fields a request may not carry as trailers (RFC 9110 §6.5.1: framing, routing, request
// modifiers, content handling), which HTTP/1.1 would drop.
const NOT_TRAILERS = new Set([
  'authorization', 'cache-control', 'content-encoding', 'content-length', 'content-range',
  'content-type', 'host', 'max-forwards', 'set-cookie', 'trailer', 'transfer-encoding', 'te',
  'connection', 'keep-alive', 'upgrade', 'proxy-authorization', 'cookie', 'expect',
]);

// A request's trailers (`what` names them in errors), given as headers are: the lines as they
// cross to Rust (`name\nvalue...`, names lower-case) and the names, for the `trailer` header.
function trailerLines(trailers, what) {
  if (trailers === null || typeof trailers !== 'object') throw errors.invalidArgType(what, 'of type object', trailers);
  const list = headerList(trailers, what);
  const flat = list.flat;
  const names = [];
  for (let i = 0; i < flat.length; i += 2) {
    const name = lowerName(flat[i]);
    if (NOT_TRAILERS.has(name)) throw errors.invalidArgValue(what, trailers, `may not carry ${name} (RFC 9110 §6.5.1)`);
    flat[i] = name;
    if (!names.includes(name)) names.push(name);
  }
  return { lines: flat.join('\n'), names };
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

// Header lines (names lower-case) as undici's object of them, which its handlers of the newer
// API and its upgrade() and connect() are given: a name's value as a string, or, when the name
// comes again, all its values in an array, in order (where Node's keeps the first of some names
// and joins the others). A name that is a property of Object.prototype (`__proto__`,
// `constructor`) is an own property too.
function undiciHeaderObject(lines) {
  const out = {};
  for (let i = 0; i < lines.length; i += 2) {
    const name = lines[i];
    const value = lines[i + 1];
    if (!Object.hasOwn(out, name)) {
      if (name === '__proto__') Object.defineProperty(out, name, { value, writable: true, enumerable: true, configurable: true });
      else out[name] = value;
    } else {
      const prev = out[name];
      if (typeof prev === 'string') out[name] = [prev, value];
      else prev.push(value);
    }
  }
  return out;
}

// Header lines as a server wrote them (Node's IncomingMessage#rawHeaders, or their Buffers,
// latin1 as on the wire) as undici's object of them (see undiciHeaderObject).
function rawHeaderObject(raw) {
  const lines = new Array(raw.length);
  for (let i = 0; i < raw.length; i += 2) {
    lines[i] = lineText(raw[i]).toLowerCase();
    lines[i + 1] = lineText(raw[i + 1]);
  }
  return undiciHeaderObject(lines);
}

function lineText(line) {
  if (typeof line === 'string') return line;
  if (line instanceof Uint8Array) return Buffer.from(line.buffer, line.byteOffset, line.byteLength).toString('latin1');
  return String(line);
}

// A header object (headerObject's, or an undici handler's) as flat name/value lines: an array
// value gives a line for each of its values; an undefined value, none.
function headerLines(headers) {
  const out = [];
  if (headers === null || headers === undefined) return out;
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.push(name, String(v));
    else out.push(name, String(value));
  }
  return out;
}

// The first value of header `name` (lower-case) among raw lines (name, value, ...) as a server
// wrote them; undefined when there is none. For one header, cheaper than headerObject.
function rawHeader(raw, name) {
  for (let i = 0; i < raw.length; i += 2) {
    const line = raw[i];
    if (line.length === name.length && line.toLowerCase() === name) return raw[i + 1];
  }
  return undefined;
}

// Header lines as undici's older handler API takes them: a flat array of Buffers (latin1, as
// on the wire).
function headerBytes(lines) {
  const out = new Array(lines.length);
  for (let i = 0; i < lines.length; i++) out[i] = Buffer.from(lines[i], 'latin1');
  return out;
}

module.exports = { TOKEN, invalidToken, checkValue, headerList, headerObject, undiciHeaderObject, rawHeaderObject, rawHeader, trailerLines, headerLines, headerBytes };
