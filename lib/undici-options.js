'use strict';

// undici Agent's options, as a Dispatcher takes them beside the agents' own: a program that made
// `new undici.Agent({ connections: 10, connect: { ca } })` makes `new Dispatcher(...)` with the
// same options and gets the same limits and TLS. Each option with an equivalent becomes the
// agents' option of that meaning; those that tune only how undici works (pipelining ...) are
// checked and change nothing; those whose work the agents cannot do are refused.

const errors = require('./errors');
const { numberOption } = require('./options');

// undici's name, and the agents' option of the same meaning.
const RENAMED = [
  ['connections', 'maxSockets'],
  ['keepAliveTimeout', 'freeSocketTimeout'],
  ['keepAliveTimeoutThreshold', 'agentKeepAliveTimeoutBuffer'],
  ['clientTtl', 'socketActiveTTL'],
  ['maxRequestsPerClient', 'maxRequestsPerSocket'],
];

// connect's fields that mean something else among the agents' options (`keepAlive` is TCP's
// there), and the agents' name for each, or null when the agents have none to give it to.
const CONNECT_RENAMED = new Map([
  ['keepAliveInitialDelay', 'keepAliveMsecs'],
  ['keepAlive', null],
  ['timeout', null],
]);

// Tuning of undici's own: taken (a number, or a boolean) and nothing to change here (but for
// `pipelining: 0`, see fromUndici).
// `maxRedirections` among them: undici 7 and 8 take it in an Agent's options and follow no
// redirects for it (their redirect interceptor does; undici 6's Agent did).
const TUNING = ['pipelining', 'keepAliveMaxTimeout', 'maxConcurrentStreams', 'maxRedirections'];

// The agents' options of `options` (a Dispatcher's, without its own `http`, `https` and
// timeouts), with undici's among them made the agents'; and undici's `maxHeaderSize` and
// `maxResponseSize` (-1: none), which are the dispatcher's to apply.
function fromUndici(options) {
  const out = { ...options };
  const { connect, maxHeaderSize, maxResponseSize, factory } = options;
  delete out.connect;
  delete out.maxHeaderSize;
  delete out.maxResponseSize;
  delete out.strictContentLength;
  if (factory !== undefined) {
    throw errors.hyperagentError('UNSUPPORTED', "options.factory is not supported: the dispatcher's connections are its agents' own (give it Agent options, or agents as options.http and options.https)");
  }
  if (maxResponseSize !== undefined && maxResponseSize !== null) {
    numberOption(maxResponseSize, 'options.maxResponseSize', -1, 'an integer >= -1', true);
  }
  for (const [name, agentName] of RENAMED) {
    if (!(name in out)) continue;
    let value = out[name];
    delete out[name];
    if (value === undefined) continue;
    // undici's `connections: null` (or 0): no limit.
    if (name === 'connections') {
      if (value === null || value === 0) value = Infinity;
      else numberOption(value, 'options.connections', 1, 'an integer >= 1, 0 or null', true);
    }
    // undici's `maxRequestsPerClient: null`: no limit (0 too, as the agents read it).
    if (name === 'maxRequestsPerClient' && value === null) continue;
    given(out, agentName, value, `options.${name}`);
  }
  // `pipelining: 0` is undici's way to turn keep-alive off: the agents' `keepAlive: false`
  // (each connection carries one request, which says `connection: close`).
  if (out.pipelining === 0) given(out, 'keepAlive', false, 'options.pipelining');
  for (const name of TUNING) {
    const value = out[name];
    delete out[name];
    if (value !== undefined && value !== null) numberOption(value, `options.${name}`, 0, '>= 0');
  }
  if (maxHeaderSize !== undefined && maxHeaderSize !== null) {
    numberOption(maxHeaderSize, 'options.maxHeaderSize', 1, 'an integer >= 1', true);
  }
  if (connect !== undefined && connect !== null) {
    if (typeof connect === 'function') {
      throw errors.hyperagentError('UNSUPPORTED', "options.connect as a function (a connector) is not supported: the agents open their connections in Rust; give connect's TLS and socket options as an object");
    }
    if (typeof connect !== 'object') throw errors.invalidArgType('options.connect', 'of type object', connect);
    for (const field of Object.keys(connect)) {
      const value = connect[field];
      if (value === undefined) continue;
      const agentName = CONNECT_RENAMED.has(field) ? CONNECT_RENAMED.get(field) : field;
      if (agentName !== null) given(out, agentName, value, `options.connect.${field}`);
    }
  }
  return { agentOptions: out, maxHeaderSize: maxHeaderSize ?? undefined, maxResponseSize: maxResponseSize ?? -1 };
}

// Sets the agents' option `name` to `value` (from undici's option `from`), unless the
// options give it another value.
function given(out, name, value, from) {
  if (out[name] !== undefined && out[name] !== value) {
    throw errors.invalidArgValue(from, value, `differs from options.${name} (${String(out[name])}), which means the same`);
  }
  out[name] = value;
}

module.exports = { fromUndici };
