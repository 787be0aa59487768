'use strict';

// agent.request()'s target: the URL (a string, a URL, or { origin, path }) and undici's query
// option, read into what the request line sends.

const querystring = require('node:querystring');
const errors = require('./errors');

// What a request path may not hold unescaped, as Node's http.request and undici refuse it.
const INVALID_PATH = /[^\u0021-\u00ff]/;
const UNSAFE_IN_PATH = /[<>`|"]/g;
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

module.exports = { MAX_TARGET, queryOf, parseUrl };
