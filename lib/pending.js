'use strict';

// A request of agent.request() in flight: Rust's events (src/binding/request/) turned into the
// promise and the response's body stream (PendingRequest), or handed to a Dispatcher's exchange
// for an undici handler (HandlerRequest). lib/request.js makes them.

const diagnostics = require('node:diagnostics_channel');
const binding = require('./native');
const errors = require('./errors');
const { headerObject, trailerLines } = require('./headers');
const { chunkBytes, lengthMismatch, dropBody } = require('./request-body');
const undiciChannels = require('./undici-channels');
const { pushChunk, pushHead, chunkList, ResponseBody, withExtras, Response } = require('./response');

// Event kinds from Rust (declared in src/binding/protocol.rs `kind`).
const PROTOCOL = binding.protocol();
const EVENT = Object.fromEntries(PROTOCOL.events.map((name, kind) => [name, kind]));
const { HEAD, DATA, END, ERROR, DRAIN, DONE, VERIFY, LOOKUP, ANSWERED, INFO, SENDING } = EVENT;
// Answers to VERIFY: the server's name is right, `rejectUnauthorized: false` lets it pass, or a
// `checkServerIdentity` of the program's lets it pass.
const { nameRight: NAME_RIGHT, nameLetPass: NAME_LET_PASS, namePassed: NAME_PASSED } = PROTOCOL;

// diagnostics_channel events of agent.request(), as undici publishes its own.
const channels = {
  created: diagnostics.channel('hyperagent:request:created'),
  headers: diagnostics.channel('hyperagent:request:headers'),
  completed: diagnostics.channel('hyperagent:request:completed'),
  error: diagnostics.channel('hyperagent:request:error'),
};

// One request in flight: receives Rust's events (its `_onEvent`) in the context of the
// request() call.
class PendingRequest {
  constructor(agent, resolve, reject, signal, info) {
    this.info = info;
    // A Dispatcher's request as undici's diagnostics channels describe it, while they are
    // listened to (see lib/undici-channels.js); else null.
    this.undici = null;
    // A body given whole (or none), to tell as sent once the response head has come.
    this.sentWhole = null;
    // A streamed body's source until it is all sent, its declared length (undefined: chunked),
    // and what made it fail.
    this.source = null;
    // A function giving the trailers once a streamed body has ended (see pump).
    this.trailers = null;
    this.declaredLength = undefined;
    this.bodyError = undefined;
    this.agent = agent;
    this.resolve = resolve;
    this.reject = reject;
    this.signal = signal;
    this.id = 0;
    this.response = null;
    this.done = false;
    this.ended = false;
    // The response was complete while the request was still going out: its body has ended,
    // and the exchange goes on until the rest is sent (Done).
    this.answered = false;
    this.aborted = false;
    this.drain = null;
    // Stops listening to the signal.
    this.unwatch = null;
    // undici's `opaque`, `responseHeaders`, `onInfo` and `highWaterMark`, when one is given:
    // { opaque, raw, onInfo, highWaterMark }.
    this.extras = null;
    // Told when the exchange is over (a Dispatcher's request(), see lib/request.js).
    this.tracker = null;
  }

  // `chunk` makes a Buffer of a chunk as Rust sent it (lib/slab.js). A listener that throws
  // in here (the body's 'data', emitted as a chunk arrives) fails its request, as Node's http
  // fails one whose listener throws while its parser runs: the rest of the response is not
  // read (its connection closes), the body fails with ECONNRESET, and the exception goes on to
  // the domain or 'uncaughtException' like any thrown in an I/O callback. Otherwise the body
  // would lose the chunks after the throw, or wait forever for a read the throw skipped.
  _onEvent(chunk, kind, a, b, c, d, e, f, g) {
    try {
      switch (kind) {
        case HEAD: return this.onHead(a, b, c, d === null ? null : chunk(d), e, f, g);
        case DATA: return this.onData(chunk(a));
        case END:
          this.onEnd(a);
          return this.completeIfEarly();
        // A body source that failed is the cause, whatever the connection made of it.
        case ERROR: return this.fail(this.bodyError !== undefined ? this.bodyError : errors.systemError(a));
        case DRAIN: return this.onDrain();
        case DONE: return this.onDone(a, b);
        case VERIFY: return this.onVerify(a, b);
        case LOOKUP: return this.onLookup(a, b);
        case ANSWERED: return this.onAnswered();
        case INFO: return this.onInfo(a, b);
        case SENDING: return this.onSending(a);
        default: return undefined;
      }
    } catch (thrown) {
      this.abort(errors.connResetError('aborted'));
      throw thrown;
    }
  }

  // A new connection (`connId`, of pool key `key`) has its host resolved by the agent's
  // `lookup`: the addresses go to Rust, which connects to them; an error (or something that is
  // not an IP address) fails the request, as it fails a socket.
  onLookup(connId, key) {
    const fail = (err) => {
      binding.lookupDone(connId, null);
      this.abort(err);
    };
    try {
      this.agent._lookup(key, (err, addresses) => {
        if (this.done) return;
        if (err) fail(err);
        else if (!binding.lookupDone(connId, addresses)) fail(errors.invalidIpAddress(addresses.join(', ')));
      });
    } catch (thrown) {
      // Whatever the lookup threw fails the request (a null too: a reason is needed).
      if (!this.done) fail(thrown ?? new Error(`lookup threw ${thrown}`));
    }
  }

  // A new TLS connection (`info`, of pool key `key`): the exchange starts only if the server's
  // name passes (1, 2 or 3, see Agent#_checkServerName); otherwise the request fails with the
  // check's error, and its connection closes without a byte of the request sent.
  onVerify(info, key) {
    let verdict;
    try {
      verdict = this.agent._checkServerName(key, info);
    } catch (thrown) {
      // What the check threw is the request's error (a null one too: the request must fail).
      this.abort(thrown ?? new Error(`checkServerIdentity threw ${thrown}`));
      return 0;
    }
    if (verdict === NAME_RIGHT || verdict === NAME_LET_PASS || verdict === NAME_PASSED) return verdict;
    this.abort(verdict);
    return 0;
  }

  // An informational (1xx) response, to undici's `onInfo` (asked for only when it is given):
  // what it throws fails the request, as undici's does.
  onInfo(statusCode, raw) {
    if (this.done) return;
    const { onInfo, raw: rawWanted } = this.extras;
    const list = raw === '' ? [] : raw.split('\n');
    try {
      onInfo({ statusCode, headers: rawWanted ? list : headerObject(list) });
    } catch (thrown) {
      this.abort(thrown ?? new Error(`onInfo threw ${thrown}`));
    }
  }

  // `verdict` and `connId` come when the exchange ended with its head (the whole body came
  // with it and the connection is settled): then no Done follows.
  onHead(status, reason, raw, chunk, trailers, verdict, connId) {
    if (this.sentWhole !== null) this.wholeSent();
    const body = new ResponseBody(this, this.extras === null ? undefined : this.extras.highWaterMark);
    this.response = new Response(status, reason, raw, body);
    if (this.extras !== null) withExtras(this.response, this.extras);
    // All of it is here: it enters the stream only if the stream is read.
    if (trailers !== null && verdict !== undefined) body._whole = chunk;
    else if (chunk !== null) pushHead(body, chunk);
    if (trailers !== null) this.onEnd(trailers);
    this.tellHead(chunk);
    this.resolve(this.response);
    if (verdict !== undefined) this.onDone(verdict, connId);
    else if (this.ended) this.completeIfEarly();
  }

  // The body's end is held until the connection is back in the pool (Done follows at once):
  // code that sends its next request when a body ends then finds the connection free.
  onData(chunk) {
    if (this.undici !== null) undiciChannels.received(this.undici, chunkList(chunk));
    const body = this.response.body;
    if (body._sink !== null) {
      body._sink.chunks.push(...chunkList(chunk));
      this.pull();
    } else {
      pushChunk(body, chunk);
    }
  }

  // text()/json()/arrayBuffer() took the body over: finish now if it is all here.
  sinkAttached() {
    if (this.ended && (this.done || this.answered)) this.finishSink();
    else this.pull();
  }

  // The body's bytes go to text()/json()/... (see ResponseBody._finishSink).
  finishSink() {
    // (An exchange still sending keeps it: an abort stops the sending.)
    if (this.done) this.unwatchSignal();
    this.response.body._finishSink();
  }

  onEnd(trailers) {
    this.ended = true;
    if (trailers !== '') Object.assign(this.response.trailers, headerObject(trailers.split('\n')));
  }

  onDrain() {
    const drain = this.drain;
    this.drain = null;
    if (drain) drain();
  }

  // The exchange is over and Rust has settled its connection (back in the pool, or closed);
  // a non-negative verdict is a waiter to serve.
  onDone(verdict, connId) {
    this.done = true;
    this.cleanup();
    this.onDrain();
    if (verdict >= 0) this.agent._serveVerdict(verdict, connId);
    this.agent._settle();
    if (this.ended && !this.answered) this.complete();
  }

  // The server answered before reading all of a body given whole, and may read no more: the
  // response is complete now, as Node's and undici's are; the connection goes back only once
  // the rest is sent.
  onAnswered() {
    if (this.done || this.answered) return;
    this.answered = true;
    this.complete();
  }

  // The response has ended while the request's streamed body is still going out: the server
  // answered early (a 413, say) and may not read the rest. As undici and Node's client take
  // it, the response is complete now: the sending stops and the connection closes (it is
  // mid-request, so it cannot carry another), instead of the body's end waiting for a Done
  // that waits for the upload.
  completeIfEarly() {
    if (this.done || this.source === null) return;
    this.stop();
    this.complete();
  }

  // The exchange is over with the whole response: its held end goes to the stream, or its
  // bytes to text()/json()/... (a body that came whole waits for its reader as it is).
  complete() {
    this.tellCompleted();
    const body = this.response.body;
    if (body._sink !== null) this.finishSink();
    else if (body._whole === undefined) body.push(null);
  }

  fail(err) {
    this.dropSource(err);
    this.tellError(err);
    if (this.response === null) this.reject(err);
    // A body that has all come fails too when the request is aborted before its exchange is
    // over, unless the response is already complete (Answered: what is left is the request's
    // sending, which the abort stops). A connection's error at that point is not the
    // response's: Done follows, and the body ends.
    else if (!this.answered && (!this.ended || this.aborted)) {
      this.response.body._fail(err);
    }
  }

  pull() {
    if (!this.done && !this.ended && this.id !== 0) binding.bodyRead(this.id);
  }

  // The consumer destroyed the body before its end: the exchange stops, and its connection
  // (mid-response) is closed. Nothing fails: the consumer has let go of the response.
  bodyDestroyed() {
    if (this.done) this.unwatchSignal();
    if (this.ended || this.done || this.aborted) return;
    this.aborted = true;
    this.dropSource(undefined);
    this.stop();
  }

  // Stops the request and fails it with `reason`, whatever that is: a signal's reason may be
  // null, and still fails the request (its promise, or its body). Once the exchange is over,
  // a body not yet read to its end fails, as undici's and fetch's do: what came is dropped.
  abort(reason) {
    if (this.aborted) return;
    if (this.done) {
      const body = this.response === null ? null : this.response.body;
      if (body !== null && !body.readableEnded && !body.destroyed) {
        this.aborted = true;
        body._fail(reason);
      }
      return;
    }
    this.aborted = true;
    this.dropSource(reason);
    this.stop();
    this.fail(reason);
  }

  // Ends the request here: its place in the queue or its exchange in Rust (a connection in the
  // middle of one closes), a waiting writer, and a slot freed for a waiter.
  stop() {
    this.cleanup();
    // Its place in the queue, if it waits, goes with it (in Rust).
    const verdict = binding.requestAbort(this.id);
    this.done = true;
    this.onDrain();
    if (verdict >= 0) this.agent._serveVerdict(verdict);
    this.agent._settle();
  }

  // The response head came (with `chunk`, the body bytes that came with it), the response is
  // complete, or the request failed: told on the diagnostics channels (undici's too, for a
  // Dispatcher's request).
  tellHead(chunk) {
    if (channels.headers.hasSubscribers) channels.headers.publish({ request: this.info, response: this.response });
    if (this.undici !== null) {
      undiciChannels.headed(this.undici, this.response);
      undiciChannels.received(this.undici, chunkList(chunk));
    }
  }

  tellCompleted() {
    if (channels.completed.hasSubscribers) channels.completed.publish({ request: this.info, response: this.response });
    if (this.undici !== null) undiciChannels.completed(this.undici, this.response);
  }

  tellError(err) {
    if (channels.error.hasSubscribers) channels.error.publish({ request: this.info, error: err });
    if (this.undici !== null) undiciChannels.failed(this.undici, err);
  }

  // The request goes out on connection `connId` (told only when it asked: see lib/request.js).
  onSending(connId) {
    if (this.undici !== null) undiciChannels.sending(this.undici, connId);
  }

  // A piece of the body handed to the connection, and the body's end (all of it handed):
  // told on undici's channels for a Dispatcher's request (and to a dispatched request's
  // handler; see HandlerRequest).
  bodySent(chunk) {
    if (this.undici !== null) undiciChannels.chunkSent(this.undici, chunk);
  }

  requestSent() {
    if (this.undici !== null) undiciChannels.requestSent(this.undici);
  }

  wholeSent() {
    const bytes = this.sentWhole;
    this.sentWhole = null;
    if (bytes.length > 0) this.bodySent(bytes);
    this.requestSent();
  }

  // The exchange ended before its body was all sent (it failed, was aborted, or the response
  // came whole first): its source goes (see dropBody).
  dropSource(err) {
    const source = this.source;
    if (source === null) return;
    this.source = null;
    dropBody(source, err);
  }

  cleanup() {
    this.dropSource();
    if (this.tracker !== null) {
      const tracker = this.tracker;
      this.tracker = null;
      tracker.over();
    }
    if (this.unwatch === null) return;
    // A body still to be read keeps the signal's watch (see abort) until text() and the like
    // have it whole (finishSink) or it is destroyed (bodyDestroyed; a stream read to its end
    // is destroyed then too).
    const body = this.response === null ? null : this.response.body;
    if (body === null || this.aborted || body.destroyed) this.unwatchSignal();
  }

  unwatchSignal() {
    if (this.unwatch === null) return;
    // An aborted signal has let go of its listeners as it called them (they are `once`):
    // removing one again would walk its list for each request it ends, a time that grows
    // with the square of the requests sharing it.
    if (!this.signal.aborted) this.unwatch();
    this.unwatch = null;
  }

  // Streams a body source into Rust, as fast as the connection takes it. A declared length
  // is held to: a source that runs past it or ends short fails the request.
  async pump(source) {
    let sent = 0;
    try {
      for await (const chunk of source) {
        // A length of 0 sends the request whole with its head, before the source is read: a
        // source with bytes in it can only stop the request (even one answered meanwhile),
        // which fails with the mismatch, as undici's does; its bytes are not silently dropped.
        if (this.declaredLength === 0) {
          const size = chunkBytes(chunk).length;
          if (size > 0) {
            this.abort(lengthMismatch(0, size, true));
            return;
          }
          if (this.done) return;
          continue;
        }
        if (this.done) return;
        const buf = chunkBytes(chunk);
        sent += buf.length;
        if (this.declaredLength !== undefined && sent > this.declaredLength) throw lengthMismatch(this.declaredLength, sent, true);
        const r = binding.bodyWrite(this.id, buf);
        if (r === 2) return;
        this.bodySent(buf);
        if (r === 1 && !this.done) {
          await new Promise((resolve) => { this.drain = resolve; });
          // Stopped while it waited: the source is let go of without another chunk asked
          // for. (fetch's own source, once its request is aborted, would read all its stream
          // in one call for more, an endless one for ever.)
          if (this.done) return;
        }
      }
      if (this.declaredLength !== undefined && sent !== this.declaredLength) throw lengthMismatch(this.declaredLength, sent);
      this.source = null;
      // Read whole: a stream made with autoDestroy off is not destroyed by its end, and would
      // keep what it holds; it goes now, as undici's request() and stream.pipeline end it.
      if (typeof source.destroy === 'function' && source.destroyed === false) source.destroy();
      // Trailers made when the body has ended (a checksum of it, say): their function's
      // error, or a wrong value, fails the request as a source's error does.
      let trailers;
      if (this.trailers !== null) trailers = trailerLines(await this.trailers(), 'the trailers function\'s result').lines;
      if (!this.done) {
        binding.bodyEnd(this.id, trailers);
        this.requestSent();
      }
    } catch (err) {
      if (!this.done) {
        // A source's own error, or a fault of the addon in bodyWrite (README, "Safety"). A
        // falsy one (null, 0, '') becomes an Error saying so: undici's request() above a
        // dispatch takes a falsy error for none, and resolved with no response.
        this.bodyError = err
          ? errors.internalError(err)
          : new Error(`the request body's source threw ${typeof err === 'string' ? JSON.stringify(err) : String(err)}`);
        binding.bodyFail(this.id, err && err.message ? err.message : String(err));
      }
    }
  }
}

// A request whose events go to a Dispatcher's exchange (lib/exchange.js), which hands them to
// an undici handler: no promise and no body stream. The exchange has onHead(response),
// onChunk(buffer) (each false when it paused), complete(response) and failed(err); more of
// the body is asked for after the head and each chunk, unless it paused (then at its resume).
class HandlerRequest extends PendingRequest {
  constructor(agent, exchange, signal, info) {
    super(agent, null, null, signal, info);
    this.exchange = exchange;
    // While the exchange is paused: the chunks it has not taken yet (null: not paused), and
    // whether the response's end waits behind them.
    this.held = null;
    this.endHeld = false;
  }

  onHead(status, reason, raw, chunk, trailers, verdict, connId) {
    if (this.sentWhole !== null) this.wholeSent();
    this.response = new Response(status, reason, raw, null);
    this.tellHead(chunk);
    const list = chunkList(chunk);
    if (this.exchange.onHead(this.response)) this.deliver(list);
    else this.held = list.slice();
    if (trailers !== null) this.onEnd(trailers);
    if (verdict !== undefined) this.onDone(verdict, connId);
    else if (this.ended) this.completeIfEarly();
    else if (this.held === null) this.pull();
  }

  // Hands chunks to the exchange until it pauses (then keeps the rest); true if it wants more.
  deliver(list) {
    for (let i = 0; i < list.length; i++) {
      if (this.exchange.finished) return false;
      if (!this.exchange.onChunk(list[i])) {
        this.held = list.slice(i + 1);
        return false;
      }
    }
    return true;
  }

  onData(chunk) {
    if (this.undici !== null) undiciChannels.received(this.undici, chunkList(chunk));
    if (this.held !== null) {
      for (const c of chunkList(chunk)) this.held.push(c);
      return;
    }
    if (this.deliver(chunkList(chunk)) && !this.ended) this.pull();
  }

  bodySent(chunk) {
    super.bodySent(chunk);
    this.exchange.bodySent(chunk);
  }

  requestSent() {
    super.requestSent();
    this.exchange.requestSent();
  }

  // The exchange paused outside a chunk's delivery (in its head's callback, say).
  pause() {
    if (this.held === null) this.held = [];
  }

  // The exchange resumed: chunks held by its pause go first, then the end, or more is asked for.
  resume() {
    const held = this.held;
    if (held === null) return;
    this.held = null;
    if (!this.deliver(held)) return;
    if (this.endHeld) {
      this.endHeld = false;
      this.exchange.complete(this.response);
    } else if (!this.ended) {
      this.pull();
    }
  }

  complete() {
    this.tellCompleted();
    if (this.held !== null) this.endHeld = true;
    else this.exchange.complete(this.response);
  }

  fail(err) {
    this.dropSource(err);
    this.tellError(err);
    // As a body stream's: an error after the response is complete is not the response's.
    if (this.response === null || (!this.answered && (!this.ended || this.aborted))) this.exchange.failed(err);
  }
}

module.exports = { PendingRequest, HandlerRequest, channels };
