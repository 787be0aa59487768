'use strict';

// An AbortSignal as agent.request() and its body's methods listen to it, and the error an
// abort gives.

const { addAbortListener } = require('node:events');
const errors = require('./errors');

// Calls `listener` once `signal` (not aborted yet) aborts; returns what stops that. Through
// events.addAbortListener where Node has it (20.5 on), as Node's own requests listen: the
// listener runs even when one registered before it stops the event's propagation, which would
// otherwise leave the request waiting for a response nobody wants (as undici's request() is).
function watchAbort(signal, listener) {
  if (addAbortListener !== undefined) {
    const watch = addAbortListener(signal, listener);
    return () => watch[Symbol.dispose]();
  }
  signal.addEventListener('abort', listener, { once: true });
  return () => signal.removeEventListener('abort', listener);
}

function abortError(signal) {
  if (signal && signal.reason !== undefined) return signal.reason;
  return new DOMException('This operation was aborted', 'AbortError');
}

// The error an abort gives a request of undici's API (a Dispatcher's request() and the like):
// the signal's reason or, when that is falsy (null, 0, '', or none: an EventEmitter's
// 'abort'), undici's RequestAbortedError, as undici's request() fails then.
function undiciAbortError(signal) {
  return signal.reason || errors.undiciError('ABORTED');
}

// undici's request() takes an EventEmitter for a signal too: its 'abort' event aborts. Returns
// what agent.request() takes (an AbortSignal following it) and what stops the following; an
// AbortSignal, or nothing, is given back as it is.
function followSignal(signal) {
  if (signal === undefined || signal === null || typeof signal.aborted === 'boolean' || typeof signal.once !== 'function') {
    return { signal: signal ?? undefined, unfollow: null };
  }
  const controller = new AbortController();
  const abort = () => controller.abort(errors.undiciError('ABORTED'));
  signal.once('abort', abort);
  return { signal: controller.signal, unfollow: () => signal.removeListener('abort', abort) };
}

module.exports = { watchAbort, abortError, undiciAbortError, followSignal };
