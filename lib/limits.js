'use strict';

// The limits of an agent's pool (Node's and agentkeepalive's options) as the pool in Rust takes
// them, and the accessors through which a program changes them at any time.

const binding = require('./native');
const { defaultIdle, hintBuffer } = require('./release');
const { kPool, kLimits, kServe, kTls } = require('./internals');

const PROTOCOL = binding.protocol();
const BASE = PROTOCOL.verdictBase;
const GRANT = PROTOCOL.grant;

// What crosses to Rust must be of the type it takes, whatever a program assigned since (Node's
// agents let it assign any value to these): a number is read as JavaScript's comparisons read
// it ('5000' is 5000; what is no number is NaN, which the pool reads as no limit).
function num(value) {
  return typeof value === 'number' ? value : Number(value);
}

function limitsOf(agent) {
  const l = agent[kLimits];
  const timeout = num(agent.options.timeout);
  return {
    // Node compares counts with these (`<`, and `>=` for the idle ones): a fraction allows
    // the next whole number.
    maxSockets: Math.ceil(num(l.maxSockets)),
    maxFreeSockets: Math.ceil(num(l.maxFreeSockets)),
    maxTotalSockets: Math.ceil(num(l.maxTotalSockets)),
    lifo: l.scheduling !== 'fifo',
    noDelay: agent.options.noDelay !== false,
    keepAliveMsecs: l.keepAlive ? num(agent.keepAliveMsecs) : undefined,
    replayLimit: agent.options.replay ? num(agent.options.replayLimit) : 0,
    // What becomes of a promise-path connection when its exchange ends: Rust applies these
    // (the drop-in path asks Rust's same rule with its options' live values, in idleFor).
    keepAlive: Boolean(l.keepAlive),
    idleMs: num(defaultIdle(agent)),
    activeTtlMs: num(agent.options.socketActiveTTL) || undefined,
    maxRequests: num(agent.options.maxRequestsPerSocket) || undefined,
    // A promise-path connection that takes longer than this to open (TLS included) fails:
    // the agent's timeout, or without one undici's connect timeout, so that no open waits
    // forever on a peer that accepted and went quiet.
    connectTimeoutMs: timeout > 0 ? timeout : OPEN_TIMEOUT_MS,
    hintBufferMs: hintBuffer(agent.agentKeepAliveTimeoutBuffer),
    http2: Boolean(agent[kTls] ? agent.options.allowH2 : agent.options.h2c),
  };
}

// How long an agent.request() connection may take to open when the agent has no timeout
// (undici's connect timeout).
const OPEN_TIMEOUT_MS = 10_000;

// Accessors for the limits Node lets users assign at any time (`agent.maxSockets = 10`):
// the pool in Rust follows every change.
function limitAccessor(name, fallback) {
  return {
    configurable: true,
    enumerable: true,
    get() {
      return (this[kLimits] ??= {})[name];
    },
    set(value) {
      const limits = (this[kLimits] ??= {});
      // Node's constructor maps 0 to the default itself (`options.maxSockets || Infinity`); a
      // value assigned later is taken as it is, 0 included (no new socket until it changes).
      limits[name] = value === undefined || value === null ? fallback(this) : value;
      if (this[kPool] !== undefined) {
        for (const waiter of this[kPool].setLimits(limitsOf(this))) {
          this[kServe](waiter * BASE + GRANT, 0);
        }
      }
    },
  };
}

// Gives `proto` (an Agent class's) the accessors of the limits Node lets a program assign.
function defineLimits(proto) {
  for (const [name, fallback] of [
    ['keepAlive', () => false],
    ['maxSockets', () => Infinity],
    ['maxFreeSockets', () => 256],
    ['maxTotalSockets', () => Infinity],
    ['scheduling', () => 'lifo'],
  ]) {
    Object.defineProperty(proto, name, limitAccessor(name, fallback));
  }
}

// Node's agent has its pool's views and limits as its own enumerable properties, which
// Object.keys(), a spread or Object.assign() of an agent copies (programs merge an agent into
// their options that way). Ours are accessors on `proto`, the agent class's prototype: each
// agent gets them as its own, unless a subclass defines one of them itself.
const OWN = [
  'requests', 'sockets', 'freeSockets', 'keepAlive', 'maxSockets', 'maxFreeSockets', 'scheduling', 'maxTotalSockets',
  'totalSocketCount',
];

function ownProperties(agent, proto) {
  // Which of them an agent of its class gets, found once per class.
  const cls = Object.getPrototypeOf(agent);
  let descriptors = ownDescriptors.get(cls);
  if (descriptors === undefined) {
    descriptors = {};
    for (const name of OWN) {
      let p = cls;
      while (p !== null && p !== proto && !Object.hasOwn(p, name)) p = Object.getPrototypeOf(p);
      if (p !== proto) continue;
      const { get, set } = Object.getOwnPropertyDescriptor(proto, name);
      descriptors[name] = { get, set, enumerable: true, configurable: true };
    }
    ownDescriptors.set(cls, descriptors);
  }
  Object.defineProperties(agent, descriptors);
}

const ownDescriptors = new WeakMap();

module.exports = { limitsOf, defineLimits, ownProperties };
