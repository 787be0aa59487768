'use strict';

// A handler of undici's older API (onConnect, onHeaders, onData, onComplete, onError) seen
// through the newer one (onRequestStart, onResponseStart ... with a controller), as undici's
// compose() hands it to interceptors: undici 7's interceptors (redirect, dump, cache,
// decompress ...) call the newer API only, and Node's fetch and undici's request() give the
// older one. Each call goes to the older callback that means the same; the older ones stay
// callable as they were.

const { headerLines, headerBytes } = require('./headers');

class LegacyHandler {
  // `handler` as an interceptor may take it: itself when it has the newer API.
  static wrap(handler) {
    if (handler === null || typeof handler !== 'object' && typeof handler !== 'function') return handler;
    if (typeof handler.onRequestStart === 'function' || typeof handler.onResponseStart === 'function') return handler;
    return new LegacyHandler(handler);
  }

  constructor(handler) {
    this.handler = handler;
  }

  // The older API, as it was.

  onConnect(abort, context) {
    return this.handler.onConnect?.(abort, context);
  }

  onResponseStarted() {
    return this.handler.onResponseStarted?.();
  }

  onHeaders(statusCode, rawHeaders, resume, statusMessage) {
    return this.handler.onHeaders?.(statusCode, rawHeaders, resume, statusMessage);
  }

  onUpgrade(statusCode, rawHeaders, socket) {
    return this.handler.onUpgrade?.(statusCode, rawHeaders, socket);
  }

  onData(chunk) {
    return this.handler.onData?.(chunk);
  }

  onComplete(trailers) {
    return this.handler.onComplete?.(trailers);
  }

  onError(err) {
    if (typeof this.handler.onError !== 'function') throw err;
    return this.handler.onError(err);
  }

  // The newer API, in terms of the older.

  onRequestStart(controller, context) {
    this.handler.onConnect?.((reason) => controller.abort(reason), context);
  }

  onRequestUpgrade(controller, statusCode, headers, socket) {
    this.handler.onUpgrade?.(statusCode, headerBytes(headerLines(headers)), socket);
  }

  onResponseStart(controller, statusCode, headers, statusMessage) {
    this.handler.onResponseStarted?.();
    const more = this.handler.onHeaders?.(statusCode, headerBytes(headerLines(headers)), () => controller.resume(), statusMessage);
    if (more === false) controller.pause();
  }

  onResponseData(controller, chunk) {
    if (this.handler.onData?.(chunk) === false) controller.pause();
  }

  onResponseEnd(controller, trailers) {
    this.handler.onComplete?.(headerBytes(headerLines(trailers)));
  }

  onResponseError(controller, err) {
    this.onError(err);
  }
}

module.exports = { LegacyHandler };
