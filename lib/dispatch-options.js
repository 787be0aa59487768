'use strict';

// undici's dispatch options (what dispatch(), request() and the like are given), read once.
//
// Node 20's V8 gives each object made by a spread followed by more properties a map of its own
// (undici's request(), stream() and pipeline() make their options so: `{ ...opts, origin,
// path, method }`). No inline cache then ever hits, and each named read of such an object,
// a missing property's included, is a lookup in the runtime: about 0.1 µs, and a dispatch
// reads a dozen. A plain object is therefore read in one for-in pass, which costs about as much
// as two such reads; anything else (a class's instance, a proxy, an object with a getter
// inherited) is read by name. Only own enumerable properties are in a plain object's pass:
// those are what a spread copies, and what undici's own options are.

// The options read, each undefined when not given.
class DispatchOptions {
  constructor() {
    this.origin = undefined;
    this.path = undefined;
    this.method = undefined;
    this.upgrade = undefined;
    this.headers = undefined;
    this.body = undefined;
    this.query = undefined;
    this.headersTimeout = undefined;
    this.bodyTimeout = undefined;
    this.reset = undefined;
    this.servername = undefined;
    this.signal = undefined;
    this.opaque = undefined;
    this.onInfo = undefined;
    this.responseHeaders = undefined;
    this.highWaterMark = undefined;
    this.throwOnError = undefined;
    this.maxRedirections = undefined;
    this.expectContinue = undefined;
  }
}

const NAMES = Object.keys(new DispatchOptions());

// The options `opts` gives; `opts` is an object (the caller checks).
function readDispatchOptions(opts) {
  const out = new DispatchOptions();
  const proto = Object.getPrototypeOf(opts);
  if (proto !== Object.prototype && proto !== null) {
    for (const name of NAMES) out[name] = opts[name];
    return out;
  }
  for (const key in opts) {
    switch (key) {
      case 'origin': out.origin = opts[key]; break;
      case 'path': out.path = opts[key]; break;
      case 'method': out.method = opts[key]; break;
      case 'upgrade': out.upgrade = opts[key]; break;
      case 'headers': out.headers = opts[key]; break;
      case 'body': out.body = opts[key]; break;
      case 'query': out.query = opts[key]; break;
      case 'headersTimeout': out.headersTimeout = opts[key]; break;
      case 'bodyTimeout': out.bodyTimeout = opts[key]; break;
      case 'reset': out.reset = opts[key]; break;
      case 'servername': out.servername = opts[key]; break;
      case 'signal': out.signal = opts[key]; break;
      case 'opaque': out.opaque = opts[key]; break;
      case 'onInfo': out.onInfo = opts[key]; break;
      case 'responseHeaders': out.responseHeaders = opts[key]; break;
      case 'highWaterMark': out.highWaterMark = opts[key]; break;
      case 'throwOnError': out.throwOnError = opts[key]; break;
      case 'maxRedirections': out.maxRedirections = opts[key]; break;
      case 'expectContinue': out.expectContinue = opts[key]; break;
      default: break;
    }
  }
  return out;
}

module.exports = { readDispatchOptions };
