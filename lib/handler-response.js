'use strict';

// undici's dispatcher.request() over a dispatch(): what a composed Dispatcher's request() (and
// so its stream() and pipeline()) uses, so that its interceptors see the request, as undici's
// request() goes through dispatch(). The handler (newer API) makes agent.request()'s response
// and body: a ResponseBody whose back-pressure is the controller's pause() and resume().

const errors = require('./errors');
const { ResponseBody, Response, withExtras } = require('./response');
const { watchAbort, abortError } = require('./signal');
const { headerLines, rawHeaderObject } = require('./headers');
const { dropBody } = require('./request-body');

class ResponseHandler {
  // `extras`: { opaque, raw, highWaterMark, onInfo, body } of the request's options; `signal`: an
  // AbortSignal or undefined; `over()` is called once, when the request is over.
  constructor(extras, signal, over, resolve, reject) {
    this.extras = extras;
    this.signal = signal;
    this.over = over;
    this.resolve = resolve;
    this.reject = reject;
    this.controller = null;
    this.response = null;
    this.paused = false;
    this.ended = false;
    this.finished = false;
    this.unwatch = null;
    this.context = null;
  }

  // `context`: what the interceptors share of the request (a redirect's `history` ...), which
  // undici's request() gives its response; the last one given, as a retry starts anew.
  onRequestStart(controller, context) {
    this.controller = controller;
    if (context !== null && typeof context === 'object') this.context = context;
    const signal = this.signal;
    if (signal === undefined) return;
    if (signal.aborted) controller.abort(abortError(signal));
    else if (this.unwatch === null) this.unwatch = watchAbort(signal, () => this.controller.abort(abortError(signal)));
  }

  onResponseStart(controller, statusCode, headers, statusMessage) {
    if (this.finished) return;
    this.controller = controller;
    // An informational (1xx) response: to onInfo, as undici's request() hands it.
    if (statusCode < 200) {
      const onInfo = this.extras.onInfo;
      if (typeof onInfo === 'function') onInfo({ statusCode, headers });
      return;
    }
    if (this.response !== null) return;
    const body = new ResponseBody(this, this.extras.highWaterMark);
    this.response = new Response(statusCode, statusMessage ?? '', headerLines(headers).join('\n'), body);
    withExtras(this.response, this.extras);
    if (this.context !== null) {
      Object.defineProperty(this.response, 'context', { value: this.context, writable: true, enumerable: true, configurable: true });
    }
    this.resolve(this.response);
  }

  onResponseData(controller, chunk) {
    const body = this.response?.body;
    if (this.finished || body === undefined || body.destroyed) return;
    if (body._sink !== null) {
      body._sink.chunks.push(chunk);
    } else {
      body._entered = true;
      if (!body.push(chunk)) this.pause();
    }
  }

  onResponseEnd(controller, trailers) {
    if (this.finished) return;
    this.ended = true;
    this.end();
    const response = this.response;
    if (response === null) {
      this.reject(errors.undiciError('SOCKET', 'the response ended before its head'));
      return;
    }
    if (trailers) Object.assign(response.trailers, trailers);
    if (response.body._sink !== null) this.finishSink();
    else response.body.push(null);
  }

  onResponseError(controller, err) {
    if (this.finished) return;
    this.end();
    // A stream body not all sent goes with its request, as undici's request() drops it.
    dropBody(this.extras.body, err);
    const response = this.response;
    if (response === null) {
      this.reject(err);
      return;
    }
    response.body._fail(err);
  }

  // The older API (onConnect, onHeaders, onData, onComplete, onError), which an interceptor
  // written for it calls on the handler it is given (as does undici 7's cache interceptor when
  // it answers `only-if-cached` itself), as undici's request() handler takes it: each is the
  // newer callback of the same meaning, with a controller made of the abort and the resume given.
  onConnect(abort, context) {
    this.onRequestStart(new LegacyController(abort), context);
  }

  onHeaders(statusCode, rawHeaders, resume, statusMessage) {
    if (this.controller === null) this.controller = new LegacyController(null);
    if (this.controller instanceof LegacyController) this.controller.resumer = resume;
    this.onResponseStart(this.controller, statusCode, rawHeaderObject(rawHeaders ?? []), statusMessage);
    return !this.paused;
  }

  onData(chunk) {
    this.onResponseData(this.controller, chunk);
    return !this.paused;
  }

  onComplete(trailers) {
    this.onResponseEnd(this.controller, rawHeaderObject(trailers ?? []));
  }

  onError(err) {
    this.onResponseError(this.controller, err);
  }

  // The request is over, once.
  end() {
    this.finished = true;
    if (this.unwatch !== null) this.unwatch();
    this.unwatch = null;
    const over = this.over;
    this.over = null;
    if (over !== null) over();
  }

  pause() {
    if (this.paused) return;
    this.paused = true;
    this.controller.pause();
  }

  // ResponseBody's side: it wants more.
  pull() {
    if (!this.paused || this.finished) return;
    this.paused = false;
    this.controller.resume();
  }

  // text()/json()/... took the body over: finish now if it is all here, or have the rest.
  sinkAttached() {
    if (this.ended) this.finishSink();
    else this.pull();
  }

  finishSink() {
    this.response.body._finishSink();
  }

  // The body's consumer destroyed it before its end: the request stops.
  bodyDestroyed() {
    if (this.finished) return;
    this.end();
    this.controller.abort(errors.undiciError('ABORTED'));
  }
}

// The newer API's controller of a request driven through the older one: `abort(reason)` as
// onConnect gave it, resume() the `resume` onHeaders gave (a pause is onData's false).
class LegacyController {
  constructor(abort) {
    this.abortRequest = abort;
    this.resumer = null;
    this.paused = false;
    this.aborted = false;
    this.reason = null;
  }

  abort(reason) {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    if (typeof this.abortRequest === 'function') this.abortRequest(reason);
  }

  pause() {
    this.paused = true;
  }

  resume() {
    if (!this.paused) return;
    this.paused = false;
    if (typeof this.resumer === 'function') this.resumer();
  }
}

module.exports = { ResponseHandler };
