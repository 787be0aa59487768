'use strict';

// Connections made by a hook of the program's: a `createConnection()` (an option, an own
// property or a subclass's method), or a `createSocket()` that passes on a stream of its own.
// The stream carries the request, as with Node's agent; Rust never sees its bytes. The pool in
// Rust still holds the connection: it counts in the agent's limits and statistics, is handed to
// a waiter, idles and expires as any other (see `Mode::Foreign` in src/binding/conn/mod.rs). Rust
// has no descriptor to watch, so the stream is watched here, through its own events, as Node's
// agent watches its sockets: its 'close' takes the connection out of the pool at once.
//
// A ForeignLink is what Rust holds for such a connection (its "socket" in the registry): Rust
// calls `_onIdleEnd` when it ends the connection while it idles (an expiry, agent.destroy()).

const binding = require('./native');
const constants = require('./constants');

const kLink = Symbol('hyperagent.foreignLink');

class ForeignLink {
  constructor(agent, id, stream, name, options) {
    this.agent = agent;
    // 0 once the pool has let the connection go (the stream is ended, or the user's).
    this.id = id;
    this.stream = stream;
    this.name = name;
    this.options = options;
    this.free = false;
    this.number = 0;
    this.listeners = null;
  }

  // Rust ended the idle connection: it expired ('timeout' first, as a socket of Node's agent
  // times out while free), or the agent was destroyed. The stream ends.
  _onIdleEnd(expired) {
    if (this.id === 0) return;
    this.id = 0;
    const stream = this.stream;
    if (expired) stream.emit('timeout');
    stream.destroy();
  }

  // agent.destroy() destroys the sockets in use; Rust lists this link among them.
  destroy(err) {
    this.stream.destroy(err);
  }

  // The pool closed the connection (it could not go back, or a request of agent.request()
  // took its slot): the stream ends without telling the pool again. (NativeSocket's name.)
  _orphan() {
    this.id = 0;
    this.stream.destroy();
  }

  // The connection idles in the pool, as a free socket of Node's agent does: kept alive by TCP,
  // not keeping the process. (NativeSocket's name.)
  _parked() {
    const { agent, stream } = this;
    stream._httpMessage = null;
    if (agent.keepAlive && typeof stream.setKeepAlive === 'function') stream.setKeepAlive(true, agent.keepAliveMsecs);
    if (typeof stream.unref === 'function') stream.unref();
  }
}

// Makes `stream` the connection the pool opened as `id`; null when the slot is gone. A stream
// that takes none of the marks throws before the pool holds it (the slot is the caller's).
function adopt(agent, id, stream, name, options) {
  const link = new ForeignLink(agent, id, stream, name, options);
  // agentkeepalive's marks on its sockets, and its name for them.
  const number = agent[constants.CREATE_ID]();
  stream[constants.SOCKET_CREATED_TIME] = Date.now();
  stream[constants.SOCKET_REQUEST_COUNT] = 1;
  stream[constants.SOCKET_REQUEST_FINISHED_COUNT] = 0;
  stream[constants.SOCKET_NAME] = `sock[${number}#${name}]`.split('-----BEGIN', 1)[0];
  if (!binding.foreign(id, link)) return null;
  stream[kLink] = link;
  link.number = number;
  binding.numberConn(id, number);
  listen(link);
  return link;
}

// The listeners Node's agent (and agentkeepalive) put on the sockets they make.
function listen(link) {
  const { agent, stream } = link;
  const onFree = () => agent._foreignFreed(link);
  const onClose = () => closed(link);
  const onTimeout = () => timedOut(link);
  // agentkeepalive counts every error of its sockets; Node's agent destroys a free socket
  // that errs (nobody else listens then).
  const onError = () => {
    agent._countError();
    if (link.free) stream.destroy();
  };
  const onRemove = () => removed(link);
  link.listeners = { onFree, onClose, onTimeout, onError, onRemove };
  stream.on('free', onFree);
  stream.on('close', onClose);
  stream.on('timeout', onTimeout);
  stream.on('error', onError);
  stream.on('agentRemove', onRemove);
}

function unlisten(link) {
  const l = link.listeners;
  if (l === null) return;
  link.listeners = null;
  const stream = link.stream;
  stream.removeListener('free', l.onFree);
  stream.removeListener('close', l.onClose);
  stream.removeListener('timeout', l.onTimeout);
  stream.removeListener('error', l.onError);
  stream.removeListener('agentRemove', l.onRemove);
}

// The stream closed (its peer, an error, a destroy(), an expiry): the pool forgets the
// connection, and a waiter may take its slot.
function closed(link) {
  unlisten(link);
  const id = link.id;
  link.id = 0;
  link.agent._foreignClosed(id);
}

function timedOut(link) {
  const { agent, stream } = link;
  if (link.id === 0) return;
  // A free stream's own timer (one the program or net set): Node's agent destroys it.
  if (link.free) {
    stream.destroy();
    return;
  }
  agent._socketTimedOut(stream, link.listeners.onTimeout);
}

// An upgrade or a CONNECT took the stream over: its slot goes to the next request, and the
// agent stops listening (Node's 'agentRemove').
function removed(link) {
  unlisten(link);
  const id = link.id;
  link.id = 0;
  if (id !== 0) link.agent._foreignRemoved(id);
}

function linkOf(stream) {
  return stream !== null && typeof stream === 'object' ? stream[kLink] : undefined;
}

module.exports = { ForeignLink, adopt, linkOf };
