'use strict';

// An agent's pool keys and the caches that lead to them: the name of a request's connection
// options (Node's getName()), the Rust pool's key for each name (with its TLS configuration),
// the key of each origin agent.request() reaches (with where its connections go), and what
// agent.request() needs of each URL it is called with. Each cache is bounded; keys the pool
// forgets are forgotten here too.

const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const { debuglog } = require('node:util');
const errors = require('./errors');
const { tlsOptions, checkServerName, customIdentityCheck } = require('./tls');
const { MAX_TARGET } = require('./request');
const {
  proxiedTo, proxyLinesOf, proxyTarget, addressChoice, familyOf, blockListOf, checkConnect, resolvesHere,
} = require('./connect');

let debug = debuglog('hyperagent', (fn) => {
  debug = fn;
});

// Pool keys (one per getName() string: per origin, and per TLS configuration) are forgotten
// once empty, as Node's agent deletes a name's lists, so that a process reaching many origins
// over its life does not keep one for each. Not at once: when the keys double since the last
// sweep (and there are at least SWEEP_KEYS_AT), a sweep forgets every empty key but the
// KEEP_EMPTY_KEYS most recently used, whose TLS sessions are worth keeping.
const SWEEP_KEYS_AT = 256;
const KEEP_EMPTY_KEYS = 128;

// The most URLs, origins of `{ origin, path }` targets, paths per origin and names per host
// kept: past them a cache starts again.
const MAX_URLS = 1024;
const MAX_ORIGINS = 64;

// A getName() override's name: a string, as Node's agent makes any value one (a property key).
function nameString(name) {
  return typeof name === 'string' ? name : String(name);
}

class Keys {
  constructor(agent, pool, secure) {
    this.agent = agent;
    this.pool = pool;
    this.secure = secure;
    // getName() string -> pool key.
    this.byName = new Map();
    // agent.request()'s origins (`protocol + host`) -> pool key.
    this.byOrigin = new Map();
    // The origin (`https://host:port`) of each key agent.request() named, for the connection
    // events a Dispatcher tells.
    this.origins = new Map();
    // agent.request()'s connection options per pool key (its TLS connections' names are
    // checked with them, its `lookup` called with them).
    this.options = new Map();
    // URL string -> target, and the last one asked for.
    this.urls = new Map();
    this.lastTarget = null;
    // `{ origin, path }` targets: origin -> path -> target, and the last one asked for.
    this.parts = new Map();
    this.lastParts = null;
    // The names kept per host and port (see nameOf); made on first use.
    this.names = null;
    this.sweepAt = SWEEP_KEYS_AT;
  }

  // The pool key of a name, made on first use with the TLS configuration of `options`.
  keyOf(name, options) {
    let key = this.byName.get(name);
    if (key === undefined) {
      if (this.byName.size >= this.sweepAt) this.sweep();
      key = this.pool.key(name);
      debug('pool key %d: %s', key, keyLabel(name));
      if (this.secure) {
        // Every TLS option that changes identity is part of the name: one configuration per key.
        const failure = this.pool.setTls(key, tlsOptions(this.agent, options));
        if (failure) throw errors.systemError(failure);
      }
      this.byName.set(name, key);
    }
    return key;
  }

  // Forgets the keys the pool forgets (see SWEEP_KEYS_AT), the request targets kept per URL,
  // which carry their keys, and the names kept per host (see nameOf).
  sweep() {
    const swept = this.pool.sweepKeys(KEEP_EMPTY_KEYS);
    if (swept.length > 0) {
      debug('forget %d empty pool keys', swept.length);
      const gone = new Set(swept);
      for (const [name, key] of this.byName) if (gone.has(key)) this.byName.delete(name);
      for (const [origin, key] of this.byOrigin) if (gone.has(key)) this.byOrigin.delete(origin);
      for (const key of swept) {
        this.options.delete(key);
        this.origins.delete(key);
      }
      this.urls.clear();
      this.parts.clear();
      this.lastTarget = null;
      this.lastParts = null;
      // The names kept per host and port (an HTTPS agent's hold its CA bundle each).
      this.names?.clear();
    }
    this.sweepAt = Math.max(SWEEP_KEYS_AT, 2 * this.byName.size);
  }

  // What agent.request() needs of a URL (see `targetOf`), kept per URL string, or per origin
  // and path for `{ origin, path }`: an application calls the same few URLs over and over.
  // A URL object is kept by its serialization (it may change between calls).
  target(input, parse) {
    if (typeof input === 'string') return this.keptTarget(input, parse);
    if (input instanceof URL) return this.keptTarget(input.href, parse);
    if (input !== null && typeof input === 'object') {
      const { origin, path = '/' } = input;
      if (typeof origin === 'string' && typeof path === 'string') return this.partsTarget(origin, path, parse);
    }
    // Not a URL: parse() throws the error that says why.
    return targetOf(parse(input), false, this.agent);
  }

  keptTarget(input, parse) {
    // The same URL as the last call's is the common case: one comparison, no hashing.
    const last = this.lastTarget;
    if (last !== null && last.input === input) return last.target;
    let target = this.urls.get(input);
    if (target === undefined) {
      target = targetOf(parse(input), true, this.agent);
      if (this.urls.size >= MAX_URLS) this.urls.clear();
      this.urls.set(input, target);
    }
    this.lastTarget = { input, target };
    return target;
  }

  partsTarget(origin, path, parse) {
    const last = this.lastParts;
    if (last !== null && last.origin === origin && last.path === path) return last.target;
    let paths = this.parts.get(origin);
    let target = paths === undefined ? undefined : paths.get(path);
    if (target === undefined) {
      target = targetOf(parse({ origin, path }), true, this.agent);
      if (paths === undefined) {
        if (this.parts.size >= MAX_ORIGINS) this.parts.clear();
        paths = new Map();
        this.parts.set(origin, paths);
      } else if (paths.size >= MAX_URLS) {
        paths.clear();
      }
      paths.set(path, target);
    }
    this.lastParts = { origin, path, target };
    return target;
  }

  // The pool key of a request target's origin for agent.request(), as addRequest would name
  // it; kept on the target. The first request to an origin tells the pool where its
  // connections go.
  // With `servername` (an HTTPS request's own, for SNI and the certificate's name), the key
  // is that of the origin with that name, not kept on the target.
  requestKey(target, servername) {
    if (servername !== undefined && this.secure) return this.originKey(target.url, servername);
    if (target.key !== -1) return target.key;
    target.key = this.originKey(target.url, undefined);
    return target.key;
  }

  originKey(url, servername) {
    const agent = this.agent;
    const origin = servername === undefined ? url.protocol + url.host : `${url.protocol}${url.host}\0${servername}`;
    let key = this.byOrigin.get(origin);
    if (key === undefined) {
      const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      const port = url.port ? Number(url.port) : agent.defaultPort;
      const o = { __proto__: null, ...agent.options, host, port };
      // The agent's options may have been written to since it checked them.
      checkConnect(o);
      if (servername !== undefined) o.servername = servername;
      else if (this.secure) checkServerName(o.servername);
      if (this.secure && !o.servername && o.servername !== '') o.servername = net.isIP(host) ? '' : host;
      key = this.keyOf(nameString(agent.getName(o)), o);
      const proxy = o.socketPath ? null : proxiedTo(agent, o);
      // Node's own check of the server's name applies: a name it surely refuses fails the
      // handshake (see kConnect in agent.js).
      const nodeNameCheck = this.secure && !customIdentityCheck(o);
      this.pool.setTarget(key, proxy !== null ? { ...proxyTarget(agent, this.secure, proxy, host, port, o.servername), nodeNameCheck } : {
        host,
        port,
        family: familyOf(o),
        localAddress: o.localAddress || undefined,
        localPort: o.localPort || undefined,
        path: o.socketPath || undefined,
        servername: this.secure ? o.servername : undefined,
        nodeNameCheck,
        jsLookup: resolvesHere(o, blockListOf(o)) && !o.socketPath,
        ...addressChoice(o),
      });
      this.byOrigin.set(origin, key);
      this.origins.set(key, url.origin);
      this.options.set(key, o);
    }
    return key;
  }

  // The origin of `key`, as agent.request() named it (undefined for a key only http.request
  // used).
  originOf(key) {
    return this.origins.get(key);
  }

  // The connection options agent.request() uses for the origin of `key`.
  optionsOf(key) {
    return this.options.get(key);
  }

  // getName() builds a new string on every request; an HttpsAgent's holds every TLS option (a
  // whole CA bundle, often), and hashing that string for the pool's lookups cost more than the
  // rest of addRequest. While getName is the one the agent's class inherits from Node, the name
  // is a function of the options it reads: a probe finds those once per class, and the name of
  // the last request to the same host and port is reused while every one of them is the same.
  nameOf(options) {
    const agent = this.agent;
    const getName = agent.getName;
    let keys = nameKeysOf.get(getName);
    if (keys === undefined) {
      keys = isNodeGetName(getName) ? probeNameKeys(getName) : null;
      nameKeysOf.set(getName, keys);
    }
    if (keys === null) return nameString(getName.call(agent, options));
    const names = (this.names ??= new Map());
    const short = `${options.host}:${options.port}`;
    const last = names.get(short);
    if (last !== undefined && sameValues(options, keys, last.values, last.copies)) return last.name;
    const name = getName.call(agent, options);
    if (names.size >= MAX_URLS) names.clear();
    names.set(short, { name, values: keys.map((k) => options[k]), copies: keys.map((k) => copyOf(options[k])) });
    return name;
  }
}

// The option names Node's getName() reads, per getName function (see Keys#nameOf).
const nameKeysOf = new WeakMap();

function sameValues(options, keys, values, copies) {
  for (let i = 0; i < keys.length; i++) {
    const value = options[keys[i]];
    if (value !== values[i] || !unchanged(value, copies[i])) return false;
  }
  return true;
}

// What a value the name read was, for a value a program can change in place (the bytes of a
// Buffer, the items of an array: a `ca` bundle, say), whose name getName() would read anew;
// undefined for the others (a string cannot change, and getName() reads no more of an object
// than its identity gives).
function copyOf(value) {
  if (ArrayBuffer.isView(value)) return Buffer.from(bytesOf(value));
  if (Array.isArray(value)) return value.map((item) => [item, copyOf(item)]);
  return undefined;
}

// The bytes of a view: itself when it is one of bytes (a Buffer), no copy.
function bytesOf(view) {
  return view instanceof Uint8Array ? view : Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

// Whether `value` is as `copy` (see copyOf) has it.
function unchanged(value, copy) {
  if (copy === undefined) return true;
  if (Buffer.isBuffer(copy)) return copy.equals(bytesOf(value));
  if (value.length !== copy.length) return false;
  for (let i = 0; i < copy.length; i++) {
    if (value[i] !== copy[i][0] || !unchanged(value[i], copy[i][1])) return false;
  }
  return true;
}

// Node's getName() functions as they are when this loads (a program may put our agents in the
// place of Node's classes afterwards).
const NODE_GET_NAME = http.Agent.prototype.getName;
const NODE_HTTPS_GET_NAME = https.Agent.prototype.getName;

function isNodeGetName(getName) {
  return getName === NODE_GET_NAME || getName === NODE_HTTPS_GET_NAME;
}

// The option names `getName` reads: every option present and truthy, so that every branch
// that reads one reads it. null when it does something else with its argument.
function probeNameKeys(getName) {
  const keys = new Set();
  const probe = new Proxy(Object.create(null), {
    get(_, k) {
      if (typeof k !== 'string') throw new TypeError('not a plain option read');
      keys.add(k);
      return 'x';
    },
    has: () => true,
    ownKeys: () => {
      throw new TypeError('not a plain option read');
    },
  });
  try {
    getName.call(null, probe);
  } catch {
    return null;
  }
  return [...keys];
}

// A key name for debug lines, without the PEM text of TLS options.
function keyLabel(name) {
  return name.split('-----BEGIN', 1)[0];
}

// What agent.request() takes from a URL, read once: URL getters cut a new string on each call.
// `key` is the pool key of its origin, filled on first use (Keys#requestKey).
function targetOf(parsed, kept, agent) {
  // A URL, or (`{ origin, path }`) the origin's URL and the path to send as it is.
  const { url, path } = parsed instanceof URL ? { url: parsed, path: parsed.pathname + parsed.search } : parsed;
  // Through an HTTP proxy, a plain-HTTP request names its whole URL, and carries the proxy's
  // lines, as Node's http.request sends it through an agent with a proxy.
  const proxied = url.protocol === 'http:' && proxiedTo(agent, { host: url.hostname, port: url.port }) !== null;
  const requestTarget = proxied ? `${url.protocol}//${url.host}${path}` : path;
  if (requestTarget.length > MAX_TARGET) {
    throw errors.invalidArgValue('url', `${url.href.slice(0, 64)}...`,
      `has a ${proxied ? 'request target (its whole URL, through the proxy)' : 'path and query'} of ${requestTarget.length} characters; agent.request() sends at most ${MAX_TARGET}`);
  }
  // Credentials in the URL go as basic authorization, as Node's http.request sends them.
  const auth = url.username || url.password
    ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`
    : null;
  const proxyLines = proxied ? proxyLinesOf(agent) : null;
  // The header lines every request to it carries, as they cross to Rust (lib/request.js):
  // the host, the authorization of the URL's credentials, and the proxy's.
  let baseLines = auth === null ? `host\n${url.host}` : `host\n${url.host}\nauthorization\n${auth}`;
  if (proxyLines !== null) baseLines += `\n${proxyLines.join('\n')}`;
  return {
    url,
    protocol: url.protocol,
    host: url.host,
    auth,
    proxyLines,
    baseLines,
    origin: url.origin,
    path,
    requestTarget,
    key: -1,
    // A target kept for its URL string has its request head (path and base lines) parsed in
    // Rust once, on first use (null until then); others have none (undefined).
    head: kept ? null : undefined,
  };
}

module.exports = { Keys };
