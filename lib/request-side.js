'use strict';

// What agent.request() and a Dispatcher ask of their agent: the request itself, the pool key
// and target of a URL, the server name check and `lookup` of a new connection, and the
// watchers of its connections. An Agent class takes these as its own (`mixin`).

const binding = require('./native');
const errors = require('./errors');
const hooks = require('./hooks');
const { request, callOptions } = require('./request');
const { serverNameError, customIdentityCheck, rejectsUnauthorized } = require('./tls');
const { resolve, blockListOf } = require('./connect');
const { kPool, kPoolId, kKeys, kServe, kWatchers } = require('./internals');

const PROTOCOL = binding.protocol();

class RequestSide {
  /**
   * Sends a request with HTTP spoken by hyper in Rust, on this agent's pool. Resolves with
   * `{ statusCode, statusMessage, headers, rawHeaders, trailers, body }` when the response
   * head arrives; `body` is a Readable (also `.text()`, `.json()`, `.arrayBuffer()`). The
   * options may also come in the url object: `{ origin, path, method, ... }`.
   */
  request(url, options) {
    return request(this, url, callOptions(url, options));
  }

  get _poolId() {
    return this[kPoolId];
  }

  // What agent.request() needs of a URL (see lib/keys.js).
  _target(input, parse) {
    hooks.refuseOwnConnect(this);
    return this[kKeys].target(input, parse);
  }

  // The pool key of a request target's origin for agent.request().
  _requestKey(target, servername) {
    return this[kKeys].requestKey(target, servername);
  }

  // The largest agent.request() body sent again after the keep-alive race (-1: never).
  get _replayLimit() {
    return this.options.replay ? this.options.replayLimit : -1;
  }

  // A new TLS connection of agent.request() to the origin of `key`: what its server's name
  // check gives (see lib/tls.js): NAME_RIGHT, NAME_LET_PASS when it is not right but
  // `rejectUnauthorized: false` lets it pass, or the error that fails the request.
  _checkServerName(key, info) {
    const options = this[kKeys].optionsOf(key);
    const err = serverNameError(options, info);
    // A check of the program's that lets the name pass is remembered as such (see
    // lib/tls.js): Node's own check, on a later new session of the key, checks again.
    if (err === null) return customIdentityCheck(options) ? PROTOCOL.namePassed : PROTOCOL.nameRight;
    return rejectsUnauthorized(options) ? err : PROTOCOL.nameLetPass;
  }

  // A new agent.request() connection to the origin of `key` resolves its host through the
  // agent's `lookup`, called as net.connect calls it; `done(err, addresses)`, an answer that is
  // not IP addresses being an error.
  _lookup(key, done) {
    const o = this[kKeys].optionsOf(key);
    resolve(o, o.host, blockListOf(o), (err, addresses) => done(err, err ? undefined : addresses));
  }

  // agent.request()'s `maxResponseHeaderSize`: the largest response head of the pool from now on.
  _setMaxHeaderSize(n) {
    // Past what the pool counts (a u32 of bytes) is no limit the pool could reach either.
    this[kPool].setMaxHeaderSize(Math.min(n, 2 ** 32 - 1));
  }

  // The agent.request() origins of its pool, with their connections and requests counted as
  // undici's Pool counts its own (PoolStats): connected, free (idle connections, and HTTP/2
  // sessions, which take more streams), pending and queued (requests waiting for a
  // connection: none waits on a connection here), running (requests on connections: one a
  // busy HTTP/1.1 connection, an HTTP/2 session's streams) and size (waiting and running). A
  // connection counts whichever request path uses it.
  _originStats(into) {
    for (const k of this[kPool].snapshot()) {
      const origin = this[kKeys].originOf(k.key);
      if (origin === undefined) continue;
      const s = (into[origin] ??= { connected: 0, free: 0, pending: 0, queued: 0, running: 0, size: 0 });
      const running = k.busy - k.sessions + k.streams;
      s.connected += k.busy + k.idle;
      s.free += k.idle + k.sessions;
      s.pending += k.waiting;
      s.queued += k.waiting;
      s.running += running;
      s.size += k.waiting + running;
    }
    return into;
  }

  // A verdict of the pool for a waiter (a connection `connId` handed off, or a slot granted).
  _serveVerdict(verdict, connId = 0) {
    this[kServe](verdict, connId);
  }

  // `watcher` (a Dispatcher with 'connect', 'disconnect' or 'connectionError' listeners)
  // hears of this agent's agent.request() connections from now on (`on`), or no longer. Rust
  // tells of them only while someone listens.
  _watchConnections(watcher, on) {
    const watchers = (this[kWatchers] ??= new Set());
    if (on) watchers.add(watcher);
    else watchers.delete(watcher);
    this[kPool].watchConnections(watchers.size > 0);
  }

  // Called by Rust on a later turn than the event: an agent.request() connection of pool key
  // `key` opened, closed, or failed to open (`desc`, its error).
  _onConnection(kind, key, desc) {
    const watchers = this[kWatchers];
    const origin = this[kKeys].originOf(key);
    if (watchers === undefined || watchers.size === 0 || origin === undefined) return;
    const err = desc === null ? null : errors.systemError(desc);
    for (const watcher of watchers) watcher._onConnection(kind, origin, err);
  }
}

module.exports = { RequestSide };
