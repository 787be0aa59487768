'use strict';

// NativeSocket: a stream.Duplex over one pooled Rust connection, shaped like net.Socket so
// that Node's http client (and the code around it) cannot tell the difference.
//
// The bytes never cross a thread: Rust reads and writes the socket on this thread's event
// loop (see src/binding/conn/plain.rs). Writes go down synchronously (`_writev` makes one sendmsg
// per corked flush); reads arrive as one callback per read(2). A NativeSocket serves one
// checkout: when its request frees it, the connection goes back to Rust's pool and this object
// is left inert, holding nothing.

const net = require('node:net');
const { Duplex } = require('node:stream');
const { EventEmitter } = require('node:events');
// Node's own timers, not the globals a fake-timer library (sinon, jest) replaces: as net.Socket's
// timers and close, ours run on real time whatever a test does to the clock.
const { setImmediate, setTimeout, clearTimeout } = require('node:timers');
const native = require('./native');
const errors = require('./errors');
const constants = require('./constants');
const { timerMs } = require('./options');

// What a write answers (declared in Rust: src/binding/protocol.rs): written, or pending (onWrite
// follows); a negative errno otherwise.
const { writeDone: WRITE_DONE, writePending: WRITE_PENDING } = native.protocol();
const { ECANCELED } = require('node:os').constants.errno;

const kId = Symbol('hyperagent.connectionId');
const kAgent = Symbol('hyperagent.agent');
const kName = Symbol('hyperagent.name');
const kWriteCb = Symbol('hyperagent.writeCallback');
const kQueued = Symbol('hyperagent.queuedWrites');
const kTimer = Symbol('hyperagent.timer');
const kReading = Symbol('hyperagent.reading');
const kInfo = Symbol('hyperagent.info');
const kRef = Symbol('hyperagent.ref');
const kConnectError = Symbol('hyperagent.connectError');
const kOptions = Symbol('hyperagent.options');
const kFree = Symbol('hyperagent.free');
const kTimerMs = Symbol('hyperagent.timerMs');
const kSelf = Symbol('hyperagent.self');
const kOpening = Symbol('hyperagent.opening');
// Emitted (an internal event) when Rust has reported the connect and the socket is open.
const kOpened = Symbol('hyperagent.opened');
// Its 'connect' was emitted when its TCP connection came up, before its TLS handshake.
const kTcpTold = Symbol('hyperagent.tcpTold');
// It carries no bytes yet: writes wait (until Rust has reported the connect and, over TLS, the
// server's name was found right). `connecting`, net's, turns false with the TCP connection.
const kConnecting = Symbol('hyperagent.connecting');
// An upgrade or a CONNECT took the socket over ('agentRemove'): it is the user's now.
const kLeft = Symbol('hyperagent.left');
// Its number among its agent's sockets (agentkeepalive's CURRENT_ID), for its name.
const kSocketNumber = Symbol('hyperagent.socketNumber');
// The byte counts of its connection once closed: { bytesRead, bytesWritten }, or null.
const kClosedCounts = Symbol('hyperagent.closedCounts');

// agentkeepalive's socket name (without a certificate's text, which a key may hold).
function socketName(socket) {
  return `sock[${socket[kSocketNumber]}#${socket[kName]}]`.split('-----BEGIN', 1)[0];
}

// A socket timeout as net's setTimeout takes it: a number, finite and not negative; one past
// the longest timer is cut to it, with Node's warning.
function timerDuration(msecs) {
  if (typeof msecs !== 'number') throw errors.invalidArgType('msecs', 'of type number', msecs);
  if (!(msecs >= 0) || !Number.isFinite(msecs)) throw errors.outOfRange('msecs', 'a non-negative finite number', msecs);
  return timerMs(msecs);
}

function emitClose(socket, hadError) {
  socket.emit('close', hadError);
}

class NativeSocket extends Duplex {
  constructor(agent, name, options) {
    // 'close' is emitted here, with net.Socket's `hadError` argument (see _destroy). The
    // buffer limits a request (or the agent) gives are the socket's, as a net.Socket takes
    // them, and so its response's (http reads them off the socket).
    super({
      allowHalfOpen: false,
      emitClose: false,
      highWaterMark: options.highWaterMark,
      readableHighWaterMark: options.readableHighWaterMark,
      writableHighWaterMark: options.writableHighWaterMark,
    });
    this[kAgent] = agent;
    this[kName] = name;
    this[kSocketNumber] = 0;
    this[kOptions] = options;
    this[kId] = 0;
    this[kWriteCb] = null;
    this[kQueued] = null;
    this[kTimer] = null;
    this[kTimerMs] = 0;
    this[kSelf] = null;
    this[kReading] = true;
    this[kInfo] = null;
    this[kClosedCounts] = null;
    this[kRef] = true;
    this[kConnectError] = false;
    // Its connection is being opened in Rust (until Rust reports the connect, which for TLS is
    // before the server's name is checked here).
    this[kOpening] = false;
    this[kTcpTold] = false;
    this[kConnecting] = false;
    this.connecting = false;
    this.timeout = 0;
    this._hadError = false;
    // What a net.Socket keeps of the host it connects to (programs read it off `res.socket`):
    // the name it looked up; none for an IP address or a pipe, which it does not look up.
    const host = options.host || 'localhost';
    this._host = options.socketPath || net.isIP(host) ? null : host;
    this._httpMessage = null;
    this.parser = null;
    this._handle = null;
    this.server = null;
    this[kFree] = false;
    this[constants.SOCKET_REQUEST_COUNT] = 0;
    this[constants.SOCKET_REQUEST_FINISHED_COUNT] = 0;
    // The listeners a net.Socket of Node's agent has, in its order: net.Socket's own 'end'
    // one, then the agent's. http's ClientRequest ends a request with socket.emit('free'), and
    // an upgrade with 'agentRemove'; the agent hears both, the socket's 'close' (first, before
    // http's own listeners) and its 'timeout', as Node's agent does.
    this.on('end', onReadableStreamEnd);
    this.on('free', onFree);
    this.on('close', onClose);
    this.on('timeout', onTimeout);
    this.on('agentRemove', onAgentRemove);
  }

  // Binds this socket to a connection (already open, or being opened).
  _attach(id, connecting) {
    this[kId] = id;
    this[kOpening] = connecting;
    this[kConnecting] = connecting;
    this.connecting = connecting;
  }

  // Called by the agent when the request frees the connection: it goes back to the pool, and
  // this socket with it (as with Node's agent, destroying a free socket closes its connection).
  _free() {
    // The timer stays armed (it fires harmlessly while free): the next checkout refreshes it
    // instead of making a new one.
    this[kFree] = true;
    this._httpMessage = null;
    this[kReading] = true;
    this[constants.SOCKET_REQUEST_FINISHED_COUNT]++;
  }

  // A checkout starts on this socket.
  _serve() {
    this[kFree] = false;
    this.removeListener('error', onFreeSocketError);
    this[constants.SOCKET_REQUEST_COUNT]++;
  }

  // The connection idles in the pool: an error of the socket meanwhile closes it and goes no
  // further, as Node's agent listens to its free sockets' errors.
  _parked() {
    this.once('error', onFreeSocketError);
  }

  // The connection is gone (closed by the pool): this socket ends without touching it.
  _orphan() {
    this[kId] = 0;
    this.destroy();
  }

  // Rust ended this idle connection: it expired (the free socket timeout, the server's
  // Keep-Alive hint, socketActiveTTL), the server closed it, or the agent was destroyed. A
  // program that still holds the socket sees what a net.Socket of Node's agent shows: 'timeout'
  // for an expiry, then 'close', and `destroyed`.
  _onIdleEnd(expired) {
    this[kId] = 0;
    // Closed before its 'timeout', as the agent's own first listener closes an expired free
    // socket in Node's agent and agentkeepalive's: the program's listener sees it destroyed.
    this.destroy();
    if (expired) this.emit('timeout');
  }

  get _connectionId() {
    return this[kId];
  }

  get pending() {
    return this[kId] === 0 || this.connecting;
  }

  get readyState() {
    if (this.connecting) return 'opening';
    if (this.readable && this.writable) return 'open';
    if (this.readable && !this.writable) return 'readOnly';
    if (!this.readable && this.writable) return 'writeOnly';
    return 'closed';
  }

  // ---- Rust -> JS ------------------------------------------------------------------------

  // The user's lookup failed: the connection was never opened (counted as a failed connect,
  // not as an error of an established one).
  _lookupFailed(err) {
    this[kConnectError] = true;
    this.destroy(err);
  }

  // Rust has reported the connect, whatever came of it.
  _opened() {
    this[kOpening] = false;
  }

  // A step of its connect, told as net tells it, before the connect's outcome: the addresses
  // Rust resolved the host name to ('lookup' for each, as net emits it with autoSelectFamily,
  // and once for the one it connects to without), or (`addresses` null) a TLS socket's TCP
  // connection, up before its handshake ('connect' and 'ready', which a TLSSocket emits then).
  _onStep(host, addresses) {
    if (!this[kOpening] || this.destroyed) return;
    if (addresses === null) {
      this[kTcpTold] = true;
      this.connecting = false;
      this.emit('connect');
      this.emit('ready');
      return;
    }
    for (const address of addresses) {
      this.emit('lookup', null, address, net.isIP(address), host);
      if (!this[kOpening] || this.destroyed) return;
    }
  }

  _onConnect(desc) {
    this._opened();
    if (desc !== null) {
      this[kConnectError] = true;
      this[kId] = 0;
      const err = errors.systemError(desc);
      // A name that did not resolve: its 'lookup' hears the error first, as net's does.
      if (err.syscall === 'getaddrinfo') this.emit('lookup', err, undefined, undefined, err.hostname);
      this.destroy(err);
      return;
    }
    this[kConnecting] = false;
    this.connecting = false;
    this._refreshTimer();
    if (!this[kRef]) native.setRef(this[kId], false);
    this.emit(kOpened);
    if (!this[kTcpTold]) {
      this.emit('connect');
      this.emit('ready');
    }
    const queued = this[kQueued];
    if (queued !== null) {
      this[kQueued] = null;
      this._writev(queued.chunks, queued.cb);
    }
    if (!this[kReading]) native.readStop(this[kId]);
  }

  _onRead(buf) {
    if (buf === null) {
      // The end, as net.Socket takes it: a read of nothing lets a stream nobody reads from
      // (paused, its buffer empty) emit 'end', and so close.
      this.push(null);
      this.read(0);
      return;
    }
    if (this.timeout !== 0 && this[kTimer] !== null) this[kTimer].refresh();
    if (!this.push(buf) && this[kId] !== 0) {
      this[kReading] = false;
      native.readStop(this[kId]);
    }
  }

  _onWrite(desc) {
    const cb = this[kWriteCb];
    this[kWriteCb] = null;
    if (cb !== null) cb(desc === null ? undefined : errors.systemError(desc));
  }

  _onError(desc) {
    const err = errors.systemError(desc);
    // Between requests (response done, 'free' not yet handled) nobody listens: as Node's agent
    // does for its free sockets, the connection just goes, without an uncaught 'error'.
    if (this.listenerCount('error') === 0) {
      this[kAgent]._countError();
      this.destroy();
      return;
    }
    this.destroy(err);
  }

  // ---- stream.Duplex ---------------------------------------------------------------------

  _read() {
    if (!this[kReading]) {
      this[kReading] = true;
      if (this[kId] !== 0 && !this[kConnecting]) native.readStart(this[kId]);
    }
  }

  _write(chunk, encoding, cb) {
    this._writev([{ chunk, encoding }], cb);
  }

  _writev(chunks, cb) {
    if (this[kConnecting]) {
      this[kQueued] = { chunks, cb };
      return;
    }
    const id = this[kId];
    if (id === 0) {
      cb(errors.connResetError('This socket has been ended by the other party'));
      return;
    }
    if (this.timeout !== 0 && this[kTimer] !== null) this[kTimer].refresh();
    let r;
    try {
      r = chunks.length === 1 ? native.write(id, toBuffer(chunks[0])) : native.writev(id, chunks.map(toBuffer));
    } catch (thrown) {
      // A fault of the addon (README, "Safety"): this socket fails, and its connection closes.
      cb(errors.internalError(thrown));
      return;
    }
    if (r === WRITE_DONE) cb();
    else if (r === WRITE_PENDING) this[kWriteCb] = cb;
    else cb(errors.errnoError(r, 'write'));
  }

  _final(cb) {
    if (this[kConnecting]) {
      this.once(kOpened, () => this._final(cb));
      return;
    }
    const id = this[kId];
    if (id !== 0) {
      const r = native.shutdown(id);
      if (r < 0) return cb(errors.errnoError(r, 'shutdown'));
    }
    cb();
  }

  _destroy(err, cb) {
    this._clearTimer();
    const id = this[kId];
    // As net.Socket keeps them: what it read and wrote stays readable once it is closed.
    if (id !== 0 && !this[kConnecting]) {
      const bytesRead = native.bytesRead(id);
      if (bytesRead != null) this[kClosedCounts] = { bytesRead, bytesWritten: native.bytesWritten(id) ?? 0 };
    }
    this[kId] = 0;
    // An error before the connection was opened (its connect timed out) is a failed connect,
    // as one Rust reports; an error after it, one of an established socket.
    // One an upgrade took over counts nowhere, as agentkeepalive stops watching it.
    const failure = !err || this[kConnectError] || this[kLeft] ? null : this[kOpening] ? 'connect' : 'established';
    this[kConnecting] = false;
    this.connecting = false;
    const pending = this[kWriteCb];
    this[kWriteCb] = null;
    this[kAgent]._socketClosed(this, id, failure, !this[kFree] && !this[kLeft]);
    cb(err);
    // A write still under way is cancelled with the connection, and hears so when net's
    // pending write does from Node 22 on: once its handle has closed, after 'error' (which cb
    // queued) and what it led to, before 'close'.
    if (pending !== null) setImmediate(pending, errors.errnoError(-ECANCELED, 'write'));
    // After 'error' (which cb queued) and after what the ticks of this turn do, as net.Socket
    // emits it once its handle has closed, in a later phase of the loop: a response destroyed
    // with its socket closes first, and its request after it.
    setImmediate(emitClose, this, Boolean(err));
  }

  // agentkeepalive's name: the socket's number in its agent, and its pool key. Another agent
  // may name it anew (one whose createConnection() hook passes on a socket of ours, a CONNECT
  // tunnel's, say): the name given is the socket's from then on.
  get [constants.SOCKET_NAME]() {
    return socketName(this);
  }

  set [constants.SOCKET_NAME](value) {
    Object.defineProperty(this, constants.SOCKET_NAME, { value, writable: true, enumerable: true, configurable: true });
  }

  // ---- net.Socket surface ------------------------------------------------------------------

  // net.Socket's idle timeout. http turns it off after every response and on again for the
  // next request; the Timeout object is kept (disarmed, it fires harmlessly once) so that
  // turning it back on with the same duration is a refresh, not a new timer.
  setTimeout(msecs, callback) {
    msecs = timerDuration(msecs);
    this.timeout = msecs;
    const timer = this[kTimer];
    if (msecs === 0) {
      // Disarmed: onTimer ignores it while this.timeout is 0.
    } else if (timer !== null && this[kTimerMs] === msecs) {
      timer.refresh();
    } else if (!this.destroyed) {
      if (timer !== null) clearTimeout(timer);
      // The timer holds the socket weakly: an idle connection's socket stays collectable
      // while its (disarmed) timer waits to fire.
      this[kTimer] = setTimeout(onTimer, msecs, (this[kSelf] ??= new WeakRef(this)));
      this[kTimer].unref();
      this[kTimerMs] = msecs;
    }
    if (callback !== undefined) {
      if (typeof callback !== 'function') throw errors.invalidArgType('callback', 'of type function', callback);
      if (msecs === 0) this.removeListener('timeout', callback);
      else this.once('timeout', callback);
    }
    return this;
  }

  _clearTimer() {
    if (this[kTimer] !== null) {
      clearTimeout(this[kTimer]);
      this[kTimer] = null;
      this[kTimerMs] = 0;
    }
  }

  _refreshTimer() {
    if (this[kTimer] !== null && this.timeout !== 0) this[kTimer].refresh();
  }

  // net.Socket's name for the same thing; http and some libraries call it.
  _unrefTimer() {
    this._refreshTimer();
  }

  // The socket options apply to the TCP socket under a TLS connection too. Rust keeps what
  // was set, and sets it on each connection the socket gets: the one it is opening (as
  // net.Socket applies what is set while it connects), and a replay's.
  setNoDelay(noDelay = true) {
    if (this[kId] !== 0) native.setNoDelay(this[kId], Boolean(noDelay));
    return this;
  }

  setKeepAlive(enable = false, initialDelay = 0) {
    if (this[kId] !== 0) {
      // Whole milliseconds as Rust takes them (u32; past the kernel's limit, Rust clamps it).
      const ms = Math.trunc(Number(initialDelay));
      native.setKeepAlive(this[kId], Boolean(enable), ms > 0 ? Math.min(ms, 0xffffffff) : 0);
    }
    return this;
  }

  // The IP header's TOS byte (the traffic class over IPv6), as net.Socket's of Node 24 on. A
  // socket without one (a Unix socket, or while it connects) keeps the value.
  setTypeOfService(tos) {
    if (typeof tos !== 'number' || Number.isNaN(tos)) throw errors.invalidArgType('tos', 'of type number', tos);
    if (!Number.isInteger(tos)) throw errors.outOfRange('tos', 'an integer', tos);
    if (tos < 0 || tos > 255) throw errors.outOfRange('tos', '>= 0 && <= 255', tos);
    if (this[kId] !== 0) {
      const r = native.setTypeOfService(this[kId], tos);
      if (r < 0) throw errors.errnoError(r, 'setTypeOfService');
    }
    return this;
  }

  getTypeOfService() {
    if (this[kId] === 0) return 0;
    const r = native.getTypeOfService(this[kId]);
    if (r < 0) throw errors.errnoError(r, 'getTypeOfService');
    return r;
  }

  ref() {
    if (!this[kRef]) {
      this[kRef] = true;
      if (this[kId] !== 0) native.setRef(this[kId], true);
    }
    return this;
  }

  // While it opens, its connect holds the process only while it is referenced (Rust's).
  unref() {
    if (this[kRef]) {
      this[kRef] = false;
      if (this[kId] !== 0) native.setRef(this[kId], false);
    }
    return this;
  }

  destroySoon() {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once('finish', this.destroy);
  }

  // net.Socket's: its connection closes with a reset (RST) rather than a FIN; one still
  // opening, once it is open. One closed already fails with Node's ERR_SOCKET_CLOSED.
  resetAndDestroy() {
    if (this[kId] === 0 && !this.connecting) this.destroy(errors.socketClosed());
    else if (this.connecting) this.once('connect', () => this._reset());
    else this._reset();
    return this;
  }

  _reset() {
    const r = this[kId] === 0 ? 0 : native.resetOnClose(this[kId]);
    this.destroy(r < 0 ? errors.errnoError(r, 'reset') : undefined);
  }

  // Its ends: known once its TCP connection is up.
  _info() {
    if (this[kInfo] === null && this[kId] !== 0 && !this.connecting) {
      this[kInfo] = native.info(this[kId]) || null;
    }
    return this[kInfo];
  }

  address() {
    const info = this._info();
    if (!info || info.localAddress == null) return {};
    return { address: info.localAddress, family: info.localFamily, port: info.localPort };
  }

  get remoteAddress() {
    return this._info()?.remoteAddress ?? undefined;
  }

  get remotePort() {
    return this._info()?.remotePort ?? undefined;
  }

  get remoteFamily() {
    return this._info()?.remoteFamily ?? undefined;
  }

  get localAddress() {
    return this._info()?.localAddress ?? undefined;
  }

  get localPort() {
    return this._info()?.localPort ?? undefined;
  }

  get localFamily() {
    return this._info()?.localFamily ?? undefined;
  }

  get bytesRead() {
    const id = this[kId];
    if (id !== 0 && !this[kConnecting]) return native.bytesRead(id) ?? 0;
    return this[kClosedCounts]?.bytesRead ?? 0;
  }

  get bytesWritten() {
    const id = this[kId];
    if (id !== 0 && !this[kConnecting]) return native.bytesWritten(id) ?? 0;
    return this[kClosedCounts]?.bytesWritten ?? 0;
  }

  get bufferSize() {
    return this.writableLength;
  }
}

function toBuffer(entry) {
  const chunk = entry.chunk;
  return typeof chunk === 'string' ? Buffer.from(chunk, entry.encoding) : chunk;
}

// As net.Socket's: the timer stays, so activity after a timeout (refresh) arms it again.
function onTimer(ref) {
  const socket = ref.deref();
  if (socket === undefined) return;
  if (socket.destroyed || socket[kFree] || socket.timeout === 0) return;
  // The agent's listener handles it (a socket an upgrade took over times out as a net.Socket
  // does: an event, no more, as the agent stopped listening at 'agentRemove').
  socket.emit('timeout');
}

function onTimeout() {
  // A free socket's expiry is the pool's (see _onIdleEnd), counted and closed there.
  if (this[kFree] || this[kId] === 0) return;
  this[kAgent]._socketTimedOut(this, onTimeout);
}

// net.Socket's own: once the peer ended, without half-open, a write fails with EPIPE.
function onReadableStreamEnd() {
  if (!this.allowHalfOpen) this.write = writeAfterFIN;
}

function writeAfterFIN(chunk, encoding, cb) {
  if (!this.writableEnded) return Duplex.prototype.write.call(this, chunk, encoding, cb);
  if (typeof encoding === 'function') cb = encoding;
  const err = errors.epipeAfterFIN();
  if (typeof cb === 'function') process.nextTick(cb, err);
  this.destroy(err);
  return false;
}

function onFreeSocketError() {
  this.destroy();
}

function onFree() {
  this[kAgent]._socketFreed(this);
}

function onClose() {
  this[kAgent]._socketGone(this);
}

// An upgrade or a CONNECT (or the program) took the socket out of the pool: as with Node's
// agent, it is the program's now, without the agent's listeners; but one destroyed in use keeps
// its 'close' listener, whose close frees its connection (see Freed#_socketGone).
function onAgentRemove() {
  this[kLeft] = true;
  this.removeListener('timeout', onTimeout);
  this.removeListener('free', onFree);
  this.removeListener('agentRemove', onAgentRemove);
  if (!this[kAgent]._socketRemoved(this)) this.removeListener('close', onClose);
}

// An idle connection of agent.request() as agent.freeSockets shows it. Those connections have
// no socket (HTTP is spoken in Rust), so a program that looks sees this stand-in, made when it
// looks: agentkeepalive's socket symbols, the free `timeout`, events, and destroy() to close
// the connection while it idles. It hears of the connection's end while idle ('timeout' if it
// expired, then 'close'); a connection that a request took again leaves freeSockets, and
// destroy() leaves it alone then.
class IdleConnection extends EventEmitter {
  constructor(agent, idle) {
    super();
    this[kAgent] = agent;
    this[kName] = idle.name;
    this[kId] = idle.id;
    this[kSocketNumber] = idle.number;
    this[constants.SOCKET_CREATED_TIME] = idle.created;
    this.destroyed = false;
    this._refresh(idle);
  }

  // The connection's counts and free timeout, as they are at this look.
  _refresh(idle) {
    this.timeout = idle.idleMs;
    this[constants.SOCKET_REQUEST_COUNT] = idle.finished;
    this[constants.SOCKET_REQUEST_FINISHED_COUNT] = idle.finished;
  }

  get [constants.SOCKET_NAME]() {
    return socketName(this);
  }

  destroy(err) {
    if (this.destroyed) return this;
    this.destroyed = true;
    const id = this[kId];
    this[kId] = 0;
    this[kAgent]._idleDestroyed(id);
    process.nextTick(() => {
      if (err) this.emit('error', err);
      this.emit('close', Boolean(err));
    });
    return this;
  }

  // Rust ended the idle connection: it expired, or the server closed it.
  _onIdleEnd(expired) {
    if (this.destroyed) return;
    this.destroyed = true;
    this[kId] = 0;
    if (expired) this.emit('timeout');
    process.nextTick(() => this.emit('close', false));
  }
}

module.exports = { NativeSocket, IdleConnection, kId, kName, kOptions, kAgent, kSocketNumber, kConnecting };
