'use strict';

// agent.request()'s response: the object the promise resolves with, and its body, a Readable
// with undici's body methods (text(), json(), arrayBuffer(), blob(), dump()).

const { Readable, finished, isDisturbed } = require('node:stream');
const { setImmediate } = require('node:timers');
const errors = require('./errors');
const { numberOption } = require('./options');
const { headerObject, rawHeader } = require('./headers');
const { watchAbort, abortError } = require('./signal');

const noop = () => {};

// What body.dump() reads at most before it closes the connection instead (undici's default).
const DUMP_LIMIT = 128 * 1024;
// Body bytes from Rust: a Buffer, or an array of them (large reads, each shared as it was read).
function pushChunk(body, chunk) {
  body._entered = true;
  body._head = null;
  pushInto(body, chunk);
}

// The same for the bytes that came with the head, which are kept as they came: an encoding set
// on the body before it is read decodes them in the stream, and text()/arrayBuffer()/... take
// them from here instead.
function pushHead(body, chunk) {
  body._head = chunk;
  pushInto(body, chunk);
}

function pushInto(body, chunk) {
  if (Array.isArray(chunk)) for (const c of chunk) body.push(c);
  else body.push(chunk);
}

// The same as a list of Buffers (none for null).
function chunkList(chunk) {
  return chunk === null ? [] : Array.isArray(chunk) ? chunk : [chunk];
}

// The response body: a Readable that asks Rust for one chunk whenever it wants more, so a
// paused consumer stops the socket.
class ResponseBody extends Readable {
  constructor(pending, highWaterMark) {
    super(highWaterMark === undefined ? undefined : { highWaterMark });
    this._pending = pending;
    // When text()/json()/arrayBuffer() consume an untouched body, chunks bypass the stream.
    this._sink = null;
    this._used = false;
    // Its chunks were handed to a `for await` loop without passing through the stream.
    this._iterated = false;
    // A body that came whole with its head waits here, out of the stream, until something
    // reads it: a Buffer, an array of them, or null (no bytes). Undefined otherwise.
    this._whole = undefined;
    // `body.body`, once asked for.
    this._web = null;
    // The bytes pushed with the head (see pushHead), and whether any others have gone into the
    // stream since (through its decoder, if it has an encoding).
    this._head = null;
    this._entered = false;
  }

  // As undici's body: the bytes as a web ReadableStream, made when first asked for; it reads
  // the body only as it is itself read (see webStreamOf).
  get body() {
    if (this._web === null) this._web = webStreamOf(this);
    return this._web;
  }

  // As undici's body: whether anything has read from it (or destroyed it), after which the
  // body mixins refuse it.
  get bodyUsed() {
    return this._used || this._iterated || isDisturbed(this);
  }

  _read() {
    const whole = this._whole;
    if (whole === undefined) {
      this._pending.pull();
      return;
    }
    this._whole = undefined;
    if (whole !== null) pushChunk(this, whole);
    this.push(null);
  }

  // `for await`: a body that has arrived whole (a small response comes with its head) is
  // handed out without the general iterator's machinery (an async generator and listeners for
  // every way a stream can end); anything else gets the general one, as does a body with an
  // encoding set (setEncoding: the stream's decoder makes its chunks strings).
  [Symbol.asyncIterator]() {
    if (
      this._whole !== undefined && !this.destroyed && this.readableFlowing === null
      && !this.readableDidRead && this.readableEncoding === null
    ) {
      return new WholeBodyIterator(this);
    }
    return super[Symbol.asyncIterator]();
  }

  // The chunks of a body that came whole; the stream, if read after all, then ends at once.
  _takeWhole() {
    const whole = this._whole;
    this._whole = null;
    return chunkList(whole);
  }

  // A text()/json()/... still collecting fails with the error, or as aborted (a sink that
  // has its bytes already is settled, and ignores this). As Node's IncomingMessage, an error
  // is emitted only if something listens by then: a body that fails before its reader comes
  // (the response awaited, its body read later) does not throw from the event loop; the error
  // stays (`body.errored`) for text(), for await or stream.finished to report. The error (and
  // 'close') wait for the loop's next turn, as undici's body has them: a response that failed
  // as it came (an HTTP/2 stream reset right after its head) is awaited first, and the
  // listeners put on its body after the await hear of the failure.
  _destroy(err, cb) {
    if (this._sink !== null) this._sink.reject(err || errors.abortError());
    this._pending.bodyDestroyed();
    if (err) setImmediate(() => cb(this.listenerCount('error') > 0 ? err : undefined));
    else cb();
  }

  // text()/json()/... have all the bytes: they are given them, and the stream ends as if it had
  // been read ('end', then 'close'), so that code waiting on it (stream.finished, a later loop)
  // sees it end. Settled, the stream's destroy at its end has no consumer left to fail.
  _finishSink() {
    const sink = this._sink;
    this._sink = null;
    sink.resolve(sink.chunks.length === 1 ? sink.chunks[0] : Buffer.concat(sink.chunks));
    this.push(null);
    this.read();
  }

  // The response failed before its end: text()/json()/... hear of it through their promise,
  // not as 'error'; a stream being read fails with it.
  _fail(err) {
    const sink = this._sink;
    if (sink !== null) {
      sink.reject(err);
      this.destroy();
    } else {
      this.destroy(err);
    }
  }

  // Takes what the stream holds, into `into` if given. One read() at a time: on Node 26, a
  // read() with no size gives the first chunk held, not all of them (as Node 20 to 24 do).
  _drain(into) {
    while (this.readableLength > 0) {
      const chunk = this.read();
      if (chunk === null) break;
      if (into !== undefined) into.push(chunk);
    }
  }

  // The whole body as one Buffer.
  _consume() {
    if (this._used) return Promise.reject(new TypeError('Body is unusable: it has already been read'));
    // As undici's: a reader of `body.body` has it.
    if (this._web !== null && this._web.locked) return Promise.reject(new TypeError('Body is unusable: body.body is locked'));
    // Destroyed (read to its end, destroyed by its consumer, or failed): nothing is left.
    if (this.destroyed) {
      const why = this.readableEnded ? 'it has already been read' : 'it was destroyed';
      return Promise.reject(this.errored ?? new TypeError(`Body is unusable: ${why}`));
    }
    this._used = true;
    // Chunks bypass the stream while it has handed none out and flows to no 'data' listener
    // (paused or not). With an encoding set, only while the bytes in it are those that came
    // with the head: what a decoder made of bytes, strings, may not give them back (invalid
    // UTF-8, an odd length in UTF-16), so those are taken as they came.
    const encoded = this.readableEncoding !== null;
    if (this.readableFlowing !== true && !this.readableDidRead && !(encoded && this._entered)) {
      return new Promise((resolve, reject) => {
        const chunks = [];
        if (this._whole !== undefined) {
          chunks.push(...this._takeWhole());
        } else if (encoded) {
          chunks.push(...chunkList(this._head));
          // The same bytes, decoded: dropped.
          this._drain();
        } else {
          this._drain(chunks);
        }
        this._sink = { chunks, resolve, reject };
        this._pending.sinkAttached();
      });
    }
    // Something already read from the stream, or bytes decoded by its encoding: collect the
    // rest of it (nothing, if it ended), failing if it errors or is destroyed before its end.
    // A chunk the encoding made a string is made bytes again. A stream paused (or unpiped) is
    // resumed, as undici's body methods resume it: a 'data' listener alone would not.
    return new Promise((resolve, reject) => {
      const chunks = [];
      const encoding = this.readableEncoding;
      this.on('data', (chunk) => chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk));
      finished(this, (err) => (err ? reject(err) : resolve(Buffer.concat(chunks))));
      this.resume();
    });
  }

  // UTF-8, without a leading byte order mark (as undici and fetch decode a body).
  async text() {
    const buf = await this._consume();
    const bom = buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf;
    return buf.toString('utf8', bom ? 3 : 0);
  }

  async json() {
    return JSON.parse(await this.text());
  }

  async arrayBuffer() {
    const buf = await this._consume();
    return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  }

  // Typed as undici's is: by the response's content-type.
  async blob() {
    const buf = await this._consume();
    return new Blob([buf], { type: rawHeader(this._pending.response.rawHeaders, 'content-type') ?? '' });
  }

  // The whole body in a Uint8Array of its own.
  async bytes() {
    return new Uint8Array(await this.arrayBuffer());
  }

  // As undici's: a response body is not parsed as a form here (fetch's Response does that).
  async formData() {
    throw errors.hyperagentError('UNSUPPORTED', 'formData() is not supported: use fetch() and its Response for forms');
  }

  // Reads the body to its end and drops it, as undici's dump(): so that its connection goes
  // back to the pool. A body longer than `limit` bytes (128 KiB by default) is destroyed
  // instead, which closes its connection. Resolves null once the body has closed, whatever
  // ended it; rejects when `signal` aborts it, or when the options are bad (as undici's, never
  // a throw).
  async dump(options) {
    if (options !== undefined && (options === null || typeof options !== 'object')) {
      throw errors.invalidArgType('options', 'of type object', options);
    }
    const limit = options === undefined || options.limit === undefined
      ? DUMP_LIMIT
      : numberOption(options.limit, 'options.limit', 0, '>= 0');
    const signal = options === undefined ? undefined : options.signal;
    if (signal !== undefined && signal !== null && (typeof signal !== 'object' || typeof signal.aborted !== 'boolean')) {
      throw errors.invalidArgType('options.signal', 'an instance of AbortSignal', signal);
    }
    if (signal && signal.aborted) return Promise.reject(abortError(signal));
    // Already read whole (text() and the like), or closed: nothing is left to drop.
    if (this._used || this.closed) return Promise.resolve(null);
    this._used = true;
    return new Promise((resolve, reject) => {
      const unwatch = signal ? watchAbort(signal, () => this.destroy(abortError(signal))) : noop;
      this.once('close', () => {
        if (!signal) return resolve(null);
        if (signal.aborted) return reject(abortError(signal));
        unwatch();
        return resolve(null);
      });
      // Any error ends it through 'close'.
      this.on('error', noop);
      // Longer than the limit by its length: closed at once, as undici's, with nothing read
      // (paused first: a flow already scheduled would hand out what the stream holds).
      if (this._whole === undefined && Number(rawHeader(this._pending.response.rawHeaders, 'content-length')) > limit) {
        this.pause();
        this.destroy();
        return;
      }
      let read = 0;
      this.on('data', (chunk) => {
        read += chunk.length;
        if (read > limit) this.destroy();
      });
      this.resume();
    });
  }
}

// A body as a web byte stream, as undici makes its `body.body`: each pull takes the next chunk
// of the body's own iterator (nothing is read before the first), copied into a Uint8Array of
// its own: a byte stream takes over the ArrayBuffer of what it is given, and a chunk from Rust
// may share its ArrayBuffer with others. Cancelling it destroys the body.
function webStreamOf(body) {
  let iterator = null;
  return new ReadableStream({
    type: 'bytes',
    async pull(controller) {
      if (iterator === null) iterator = body[Symbol.asyncIterator]();
      for (;;) {
        const { done, value } = await iterator.next();
        if (done) {
          controller.close();
          controller.byobRequest?.respond(0);
          return;
        }
        if (value.length > 0) {
          controller.enqueue(typeof value === 'string' ? new Uint8Array(Buffer.from(value)) : new Uint8Array(value));
          return;
        }
      }
    },
    async cancel() {
      if (iterator === null) body.destroy();
      else await iterator.return();
    },
  });
}

// Iterates a body that came whole, as Node's stream iterator would iterate it once buffered:
// the chunks one by one; taking the last ends the stream ('end' is due on the next tick, as
// after a read of a stream's last buffered chunk); the iteration ends after that, and the body
// is destroyed when the iteration ends, whether it ran to the end, was left early or was
// thrown into. A body destroyed meanwhile ends it with the body's error, or as a premature
// close. The chunks go straight from the iterator, not through the stream's buffer.
class WholeBodyIterator {
  constructor(body) {
    this.body = body;
    body._iterated = true;
    this.chunks = body._takeWhole();
    this.index = 0;
    this.finished = false;
    this.streamEnded = false;
  }

  endStream() {
    if (this.streamEnded) return;
    this.streamEnded = true;
    const body = this.body;
    // Nothing is left out of the stream; a read of nothing first ends the stream's first
    // synchronous read (its _read has nothing to ask for), so that the end is taken at once
    // instead of on a tick of its own. Then the read that finds the end: 'end' is due.
    body._whole = undefined;
    body.read(0);
    body.push(null);
    body.read();
  }

  next() {
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    const body = this.body;
    if (body.destroyed) {
      // Destroyed by the loop: it ends once the body has closed.
      this.finished = true;
      return new Promise((resolve, reject) => {
        const settle = () => {
          if (body.errored) reject(body.errored);
          else if (!body.readableEnded) reject(errors.prematureClose());
          else resolve({ value: undefined, done: true });
        };
        if (body._readableState.closeEmitted) settle();
        else body.once('close', settle);
      });
    }
    const chunks = this.chunks;
    if (this.index < chunks.length) {
      const value = chunks[this.index++];
      if (this.index === chunks.length) this.endStream();
      return Promise.resolve({ value, done: false });
    }
    this.endStream();
    this.finished = true;
    return new Promise((resolve) => {
      process.nextTick(() => {
        body.destroy();
        resolve({ value: undefined, done: true });
      });
    });
  }

  return(value) {
    this.finish();
    return Promise.resolve({ value, done: true });
  }

  throw(err) {
    this.finish();
    return Promise.reject(err);
  }

  finish() {
    if (this.finished) return;
    this.finished = true;
    const body = this.body;
    body.destroy(body.readableEnded ? undefined : errors.abortError());
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

// undici's request options of a response: `opaque` as given, the headers as the raw list.
function withExtras(response, { opaque, raw }) {
  if (opaque !== undefined) response.opaque = opaque;
  if (raw) Object.defineProperty(response, 'headers', { value: response.rawHeaders, enumerable: true, writable: true, configurable: true });
}

class Response {
  // `statusMessage` is null for a response that came over HTTP/2, which has no reason phrase.
  constructor(statusCode, statusMessage, raw, body) {
    this.statusCode = statusCode;
    this.statusMessage = statusMessage === null ? '' : statusMessage;
    this.httpVersion = statusMessage === null ? '2.0' : '1.1';
    this._raw = raw;
    this._rawHeaders = null;
    this._headers = null;
    this.trailers = {};
    this.body = body;
  }

  // The head's lines as undici's older handler API takes them: Buffers (latin1, as on the
  // wire), views of one Buffer made for them all.
  rawHeaderBuffers() {
    const raw = this._raw;
    const out = [];
    if (raw === '') return out;
    const all = Buffer.from(raw, 'latin1');
    let start = 0;
    for (;;) {
      const end = raw.indexOf('\n', start);
      if (end === -1) {
        out.push(all.subarray(start));
        return out;
      }
      out.push(all.subarray(start, end));
      start = end + 1;
    }
  }

  // Rust sends the head as one string, `name\nvalue\n...`: split and joined on first use only.
  get rawHeaders() {
    if (this._rawHeaders === null) this._rawHeaders = this._raw === '' ? [] : this._raw.split('\n');
    return this._rawHeaders;
  }

  get headers() {
    if (this._headers === null) this._headers = headerObject(this.rawHeaders);
    return this._headers;
  }

  // undici's name for it.
  get statusText() {
    return this.statusMessage;
  }
}

module.exports = { pushChunk, pushHead, chunkList, ResponseBody, withExtras, Response };
