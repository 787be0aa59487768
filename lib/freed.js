'use strict';

// What an agent does with a socket its request freed ('free': back to the pool, or closed, or
// to a waiter), with a hook's stream that did the same, and with a socket that left the pool
// or closed. An Agent class takes these as its own (`mixin`).

const { debuglog } = require('node:util');
const binding = require('./native');
const errors = require('./errors');
const hooks = require('./hooks');
const { kId, kName, kOptions, kConnecting } = require('./socket');
const { useLeft, keptIdle } = require('./release');
const { kPool, kServe, kCloseConn, kClosing, kReleased } = require('./internals');

let debug = debuglog('hyperagent', (fn) => {
  debug = fn;
});

const PROTOCOL = binding.protocol();
const BASE = PROTOCOL.verdictBase;
const GRANT = PROTOCOL.grant;
const CLOSED = PROTOCOL.closed;
const RETIRED = PROTOCOL.retired;
const IDLE = PROTOCOL.idle;

class Freed {
  // The socket's request is done ('free' from http's ClientRequest): back to the pool, then
  // 'free' for listeners, as Node's agent runs its own 'free' listener (registered first)
  // before the user's: a listener that throws cannot keep the connection from the pool.
  _socketFreed(socket) {
    const options = socket[kOptions];
    try {
      this._releaseFreed(socket);
    } finally {
      this.emit('free', socket, options);
    }
  }

  _releaseFreed(socket) {
    const id = socket[kId];
    if (id === 0) return;
    if (!socket.writable || socket.destroyed || socket.readableLength > 0 || socket[kConnecting]) {
      socket.destroy();
      return;
    }
    const req = socket._httpMessage;
    const remaining = useLeft(this, id);
    if (remaining <= 0) {
      debug('connection %d of %s reached socketActiveTTL or maxRequestsPerSocket', id, socket[kName]);
      socket.destroy();
      return;
    }
    const idle = keptIdle(this, socket, req, remaining);
    // While free, the socket's timeout is how long it may idle, as agentkeepalive sets it
    // (Rust expires it; the socket's own timer ignores a free socket).
    if (idle > 0 && Number.isFinite(idle)) socket.timeout = idle;
    socket._free();
    let verdict;
    try {
      verdict = binding.release(id, idle);
    } catch (thrown) {
      // A fault of the addon (README, "Safety"): the socket closes instead of going back. An
      // idle socket's error reaches a listener if it has one; otherwise it is dropped, as
      // Node's http drops an error of a free socket, not thrown.
      const err = errors.internalError(thrown);
      debug('releasing connection %d failed: %s', id, err.message);
      socket.destroy(socket.listenerCount('error') > 0 ? err : undefined);
      return;
    }
    this[kReleased](verdict, id, socket);
  }

  // What the pool answered the release of connection `id`, for the socket (or hook's link)
  // that held it: a waiter takes the connection, or its slot (the connection closed); it
  // closed; or it idles.
  [kReleased](verdict, id, holder) {
    if (verdict >= 0) {
      if (verdict % BASE === GRANT) holder._orphan();
      this[kServe](verdict, id);
    } else if (verdict === CLOSED || verdict === RETIRED) {
      holder._orphan();
    } else if (verdict === IDLE) {
      holder._parked();
    }
    this._settle();
  }

  // A hook's stream finished its request ('free'): back to the pool as a socket of Node's
  // agent goes, then 'free' for listeners (see _socketFreed).
  _foreignFreed(link) {
    try {
      hooks.releaseForeign(this, link);
    } finally {
      this.emit('free', link.stream, link.options);
    }
  }

  // A hook's stream closed: its connection (`id`, 0 when the pool let it go already) leaves
  // the pool; a waiter may take the slot.
  _foreignClosed(id) {
    if (id !== 0) this[kCloseConn](id, binding.close);
  }

  // An upgrade or a CONNECT took a hook's stream over: its slot may serve a waiter.
  _foreignRemoved(id) {
    const verdict = this[kPool].detach(id);
    if (verdict >= 0) this[kServe](verdict, 0);
  }

  // An upgraded (or CONNECT) socket left the pool: its slot may serve a waiter. True if the
  // agent still waits for the socket's 'close' (it was destroyed in use, see _socketClosed).
  _socketRemoved(socket) {
    const id = socket[kId];
    if (id !== 0) {
      const verdict = this[kPool].detach(id);
      if (verdict >= 0) this[kServe](verdict, 0);
    }
    return this[kClosing].has(socket);
  }

  _countError() {
    this[kPool].countError();
  }

  // A socket was destroyed: `failure` is 'connect' when by an error before it was
  // established, 'established' when by one after, null otherwise.
  _socketClosed(socket, id, failure, inUse) {
    // agentkeepalive counts an error of its socket, opening or open, in errorSocketCount.
    if (failure !== null) this[kPool].countError();
    if (id === 0) return;
    if (!inUse) {
      this[kCloseConn](id, binding.close);
      return;
    }
    // Its connection stops now, but as with Node's agent the socket stays listed in
    // `agent.sockets`, and holds its slot, until its 'close' (_socketGone): a waiter connects
    // only then, so no more than maxSockets connections are ever open.
    try {
      binding.halt(id);
    } catch (thrown) {
      // A fault of the addon: the connection closes at once instead, and frees its slot now.
      debug('stopping connection %d failed: %s', id, thrown && thrown.message);
      this[kCloseConn](id, binding.close);
      return;
    }
    this[kClosing].set(socket, id);
  }

  // A socket's 'close': a destroyed socket in use leaves `agent.sockets`, and its slot may
  // serve a waiter.
  _socketGone(socket) {
    const id = this[kClosing].get(socket);
    if (id === undefined) return;
    this[kClosing].delete(socket);
    this[kCloseConn](id, binding.close);
  }
}

module.exports = { Freed };
