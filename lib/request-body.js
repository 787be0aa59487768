'use strict';

// agent.request()'s request body: every kind undici and fetch take (a string, bytes, a Blob,
// FormData, URLSearchParams, a Readable or an async iterable, a web stream), read into bytes or
// a source that streams, with its length and type.

const { Readable } = require('node:stream');
const crypto = require('node:crypto');
const errors = require('./errors');

// A chunk of a streamed request body as bytes: strings, Buffers, typed arrays and ArrayBuffers
// are; anything else (numbers, objects, the pairs of a URLSearchParams) fails the request.
function chunkBytes(chunk) {
  if (typeof chunk === 'string') return Buffer.from(chunk);
  if (Buffer.isBuffer(chunk)) return chunk;
  if (ArrayBuffer.isView(chunk)) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return Buffer.from(chunk);
  throw errors.invalidArgType('options.body', 'an iterable of strings, Buffers, Uint8Arrays or ArrayBuffers', chunk);
}

// A body whose length differs from the content-length given with it.
function lengthMismatch(declared, actual, atLeast = false) {
  return errors.hyperagentError(
    'CONTENT_LENGTH_MISMATCH',
    `content-length is ${declared} but the body is ${atLeast ? 'at least ' : ''}${actual} bytes`,
  );
}

// What goes to Rust for a body: bytes of a known count (`size`): a Buffer, or a short string,
// which Rust encodes as UTF-8 itself (as Buffer.from would, without a Buffer made and copied
// once more; a longer one costs less through Buffer.from, whose encoder is faster than the one
// Node-API uses); or a source to stream, with its length and content type when it has them (a
// Blob's). One shape for all, and one object for none.
const SHORT_STRING_BODY = 512;
const ABSENT_BODY = Object.freeze({ bytes: null, size: 0, source: null, length: undefined, type: undefined });
const bytesBody = (bytes, size) => ({ bytes, size, source: null, length: undefined, type: undefined });
const sourceBody = (source, length, type) => ({ bytes: null, size: 0, source, length, type });

// Rust copies the bytes during the call that starts the request (README, "Safety"): the
// Buffer is the caller's again as soon as request() returns.
function bufferBody(buf) {
  return bytesBody(buf, buf.length);
}

function bodyOf(body) {
  if (body === undefined || body === null) return ABSENT_BODY;
  if (typeof body === 'string') {
    return body.length <= SHORT_STRING_BODY ? bytesBody(body, Buffer.byteLength(body)) : bufferBody(Buffer.from(body));
  }
  if (Buffer.isBuffer(body)) return bufferBody(body);
  if (ArrayBuffer.isView(body)) return bufferBody(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
  if (body instanceof ArrayBuffer) return bufferBody(Buffer.from(body));
  if (body instanceof Blob) return blobBody(body);
  // Forms, as fetch sends them (a FormData of undici's own too).
  if (body instanceof URLSearchParams) {
    const bytes = Buffer.from(body.toString());
    return { bytes, size: bytes.length, source: null, length: undefined, type: URLENCODED };
  }
  if (body[Symbol.toStringTag] === 'FormData') return blobBody(multipart(body));
  if (typeof body[Symbol.asyncIterator] === 'function' || typeof body[Symbol.iterator] === 'function') {
    return sourceBody(body, undefined, undefined);
  }
  throw errors.invalidArgType(
    'options.body',
    'a string, Buffer, Uint8Array, ArrayBuffer, Blob, FormData, URLSearchParams, Readable or async iterable',
    body,
  );
}

// Streamed, with its size as the length and its type as the content type.
function blobBody(blob) {
  return sourceBody(blob.stream(), blob.size, blob.type);
}

const URLENCODED = 'application/x-www-form-urlencoded;charset=UTF-8';

// A FormData in the multipart/form-data encoding (the HTML standard's algorithm, as fetch
// sends it), as a Blob of its parts: a file's bytes are read only as they are sent, and the
// length is known before. Line breaks in names and text values become CRLF; in names and file
// names, CR, LF and the double quote are percent-escaped.
function multipart(form) {
  const boundary = `----hyperagent-${crypto.randomBytes(12).toString('hex')}`;
  const escape = (text) => text.replace(/[\r\n"]/g, (c) => (c === '\r' ? '%0D' : c === '\n' ? '%0A' : '%22'));
  const crlf = (text) => text.replace(/\r\n|\r|\n/g, '\r\n');
  const parts = [];
  for (const [name, value] of form) {
    const disposition = `--${boundary}\r\nContent-Disposition: form-data; name="${escape(crlf(name))}"`;
    if (typeof value === 'string') {
      parts.push(`${disposition}\r\n\r\n${crlf(value)}\r\n`);
    } else {
      const type = value.type || 'application/octet-stream';
      parts.push(`${disposition}; filename="${escape(value.name ?? 'blob')}"\r\nContent-Type: ${type}\r\n\r\n`, value, '\r\n');
    }
  }
  parts.push(`--${boundary}--\r\n`);
  return new Blob(parts, { type: `multipart/form-data; boundary=${boundary}` });
}

// A request body that will not be sent, or not all of it (its request was refused before it
// started, or failed, or its response came first): when a stream, destroyed (with the error,
// if any), as undici's request() and stream.pipeline do, so that nothing waits forever on what
// it holds (a file, a socket). Its own 'error' goes nowhere; one already destroyed is left as
// it is. Other sources (iterables) stop at their next chunk.
function dropBody(body, err) {
  if (body === null || typeof body !== 'object' || typeof body.destroy !== 'function' || body.destroyed) return;
  if (typeof body.on === 'function') body.on('error', noop);
  body.destroy(err);
}

function noop() {}

module.exports = { chunkBytes, lengthMismatch, bodyOf, dropBody };
