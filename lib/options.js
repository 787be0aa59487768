'use strict';

// Agent options: validated once, at construction, with Node's error codes and messages that
// name the option; agentkeepalive's defaults, duration strings and legacy names.

const net = require('node:net');
const errors = require('./errors');
const { copyOwn } = require('./internals');

const UNITS = {
  ms: 1, msec: 1, msecs: 1, millisecond: 1, milliseconds: 1,
  s: 1e3, sec: 1e3, secs: 1e3, second: 1e3, seconds: 1e3,
  m: 6e4, min: 6e4, mins: 6e4, minute: 6e4, minutes: 6e4,
  h: 36e5, hr: 36e5, hrs: 36e5, hour: 36e5, hours: 36e5,
  d: 864e5, day: 864e5, days: 864e5,
  w: 6048e5, week: 6048e5, weeks: 6048e5,
  y: 315576e5, yr: 315576e5, yrs: 315576e5, year: 315576e5, years: 315576e5,
};

// A duration in milliseconds from a number or a string such as '4s', '1.5 min', '500ms'
// (agentkeepalive accepts these through humanize-ms).
function duration(value, name) {
  if (typeof value === 'number') {
    if (Number.isNaN(value) || value < 0) throw errors.outOfRange(name, '>= 0', value);
    return value;
  }
  if (typeof value === 'string') {
    const m = /^\s*(\d*\.?\d+)\s*([a-z]*)\s*$/i.exec(value);
    const unit = m && (m[2] === '' ? 1 : UNITS[m[2].toLowerCase()]);
    if (!unit) {
      throw errors.invalidArgValue(name, value, "must be a number of milliseconds or a duration such as '4s'");
    }
    return Number(m[1]) * unit;
  }
  throw errors.invalidArgType(name, 'of type number or string', value);
}

// The longest timer Node keeps (a signed 32-bit count of milliseconds): net's setTimeout cuts
// a longer socket timeout to it, with a TimeoutOverflowWarning.
const TIMEOUT_MAX = 2 ** 31 - 1;

// A timer's `ms`, cut to the longest timer as Node's timers cut it, with their warning.
function timerMs(ms) {
  if (ms <= TIMEOUT_MAX) return ms;
  process.emitWarning(`${ms} does not fit into a 32-bit signed integer.\nTimer duration was truncated to ${TIMEOUT_MAX}.`, 'TimeoutOverflowWarning');
  return TIMEOUT_MAX;
}

// A duration a timer runs for: finite, as net's setTimeout requires.
function timerDuration(value, name) {
  const ms = duration(value, name);
  if (!Number.isFinite(ms)) throw errors.outOfRange(name, 'a non-negative finite number', value);
  return ms;
}

// `given` is what the program passed, named in the error when `value` was read from it.
function count(value, name, min, given = value) {
  if (typeof value !== 'number') throw errors.invalidArgType(name, 'of type number', given);
  if (Number.isNaN(value) || value < min || (value !== Infinity && !Number.isInteger(value))) {
    throw errors.outOfRange(name, `an integer >= ${min} or Infinity`, given);
  }
  return value;
}

// A limit Node's agent compares counts with (`count < limit`): any number above `floor`, a
// fraction included (1.5 lets a second connection open, as the pool reads it rounded up).
function limit(value, name, floor, given) {
  if (typeof value !== 'number') throw errors.invalidArgType(name, 'of type number', given);
  if (Number.isNaN(value) || value <= floor) throw errors.outOfRange(name, `> ${floor}`, given);
  return value;
}

// A string of a number as JavaScript's comparisons read it ('5' is 5, '2.5' is 2.5); any
// other value as it is.
function looseNumber(value) {
  return typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : value;
}

function bool(value, name) {
  if (typeof value !== 'boolean') throw errors.invalidArgType(name, 'of type boolean', value);
  return value;
}

const LEGACY = [
  ['keepAliveTimeout', 'freeSocketTimeout'],
  ['freeSocketKeepAliveTimeout', 'freeSocketTimeout'],
];

const warned = new Set();
function deprecate(oldName, newName) {
  if (warned.has(oldName)) return;
  warned.add(oldName);
  process.emitWarning(
    `options.${oldName} is deprecated, please use options.${newName} instead`,
    'DeprecationWarning',
    'HYPERAGENT_DEP_' + oldName.replace(/[A-Z]/g, (c) => '_' + c).toUpperCase(),
  );
}

// What the agent passes on to Node's constructor, which copies it into `agent.options`.
function Options() {}
Options.prototype = Object.create(null);

// Returns the options object the agent keeps as `agent.options`: the user's options, legacy
// names mapped, defaults filled in, durations in milliseconds. Throws on bad input.
function normalize(input) {
  if (input === undefined || input === null) input = {};
  if (typeof input !== 'object') throw errors.invalidArgType('options', 'of type object', input);
  // The caller's own enumerable properties, as a spread copies them, into an object whose
  // prototype chain is empty (so a "__proto__" key is a property, as in a spread): Node 20's
  // V8 makes every property added to a spread's copy cost about half a microsecond.
  const options = new Options();
  copyOwn(options, input);

  for (const [oldName, newName] of LEGACY) {
    if (options[oldName] !== undefined && options[oldName] !== null) {
      deprecate(oldName, newName);
      if (options[newName] === undefined) options[newName] = options[oldName];
    }
    delete options[oldName];
  }

  // agentkeepalive: keep-alive unless explicitly off.
  options.keepAlive = options.keepAlive === undefined ? true : bool(options.keepAlive, 'options.keepAlive');
  if (options.keepAliveMsecs !== undefined) {
    options.keepAliveMsecs = duration(options.keepAliveMsecs, 'options.keepAliveMsecs');
  }
  options.freeSocketTimeout = options.freeSocketTimeout === undefined
    ? 4000
    : timerDuration(options.freeSocketTimeout, 'options.freeSocketTimeout');
  // The sockets' timeout, cut to the longest timer once here (the sockets then take it as it
  // is, rather than warn at each request).
  options.timeout = options.timeout === undefined
    ? Math.min(Math.max(options.freeSocketTimeout * 2, 8000), TIMEOUT_MAX)
    : timerMs(timerDuration(options.timeout, 'options.timeout'));
  options.socketActiveTTL = options.socketActiveTTL
    ? duration(options.socketActiveTTL, 'options.socketActiveTTL')
    : 0;
  // The most requests an HTTP/1.1 connection carries before it closes (0: no limit).
  if (options.maxRequestsPerSocket !== undefined) {
    numberOption(options.maxRequestsPerSocket, 'options.maxRequestsPerSocket', 0, 'an integer >= 0', true);
  }

  // Node's agent takes any value here and reads it as its comparisons do: what is falsy (0,
  // NaN, null, '') is the default (`options.maxSockets || Infinity`), '5' is 5. Those are taken
  // as Node takes them; a value Node would read as no count at all (-1, 'many') throws.
  if (options.maxSockets) limit(looseNumber(options.maxSockets), 'options.maxSockets', 0, options.maxSockets);
  // Node's agent validates these two itself: the same checks, in its words.
  if (options.maxTotalSockets !== undefined) {
    const n = options.maxTotalSockets;
    if (typeof n !== 'number') throw errors.invalidArgType('maxTotalSockets', 'of type number', n);
    if (Number.isNaN(n) || n < 1) throw errors.outOfRange('maxTotalSockets', '>= 1', n);
  }
  // The same for maxFreeSockets, whose default (256) Node takes for what is falsy.
  if (options.maxFreeSockets) {
    limit(looseNumber(options.maxFreeSockets), 'options.maxFreeSockets', 0, options.maxFreeSockets);
  }
  if (options.scheduling !== undefined && options.scheduling !== 'fifo' && options.scheduling !== 'lifo') {
    throw errors.invalidArgValue('scheduling', options.scheduling, "must be one of: 'fifo', 'lifo'");
  }
  if (options.noDelay !== undefined) bool(options.noDelay, 'options.noDelay');
  // Sending an idempotent request again when a reused connection dies before answering.
  options.replay = options.replay === undefined ? true : bool(options.replay, 'options.replay');
  options.replayLimit = options.replayLimit === undefined ? 65536 : count(options.replayLimit, 'options.replayLimit', 0);
  // HTTP/2 on agent.request(): offered in ALPN over TLS (`allowH2`), spoken by prior knowledge
  // over plain TCP (`h2c`). http.request stays on HTTP/1.1.
  for (const name of ['allowH2', 'h2c']) {
    options[name] = options[name] === undefined ? false : bool(options[name], `options.${name}`);
  }
  for (const name of ['localAddress', 'socketPath']) {
    if (options[name] !== undefined && typeof options[name] !== 'string') {
      throw errors.invalidArgType(`options.${name}`, 'of type string', options[name]);
    }
  }
  // As net.connect would, at the first request.
  if (options.localAddress && !net.isIP(options.localAddress)) throw errors.invalidIpAddress(options.localAddress);
  errors.checkLocalPort(options.localPort);
  if (options.blockList !== undefined && options.blockList !== null && !(options.blockList instanceof net.BlockList)) {
    throw errors.invalidArgType('options.blockList', 'an instance of net.BlockList', options.blockList);
  }
  // `family` is checked at a request, as Node's agent leaves it to net.connect: a program's own
  // `lookup` gets it as it is (lib/connect.js, checkConnect()).
  if (options.lookup !== undefined && typeof options.lookup !== 'function') {
    throw errors.invalidArgType('options.lookup', 'of type function', options.lookup);
  }
  return options;
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

module.exports = { normalize, duration, numberOption, timerMs };
