'use strict';

// undici's diagnostics_channel events, published for the requests a Dispatcher sends as
// undici's own clients publish them, so that what instruments fetch and undici through them
// (OpenTelemetry's undici instrumentation, APM agents) sees the requests that go through ours:
// `undici:request:create` (whose subscriber may add headers with `request.addHeader()`, to
// propagate a trace), `undici:client:sendHeaders` (with the connection the request goes out
// on), `:bodyChunkSent`, `:bodySent`, `:headers`, `:bodyChunkReceived`, `:trailers` and
// `:error`, each with the same `request` object. Nothing is made while no one listens.

const diagnostics = require('node:diagnostics_channel');
const querystring = require('node:querystring');
const binding = require('./native');
const { headerList, headerLines, headerBytes } = require('./headers');

const create = diagnostics.channel('undici:request:create');
const sendHeaders = diagnostics.channel('undici:client:sendHeaders');
const bodyChunkSent = diagnostics.channel('undici:request:bodyChunkSent');
const bodySent = diagnostics.channel('undici:request:bodySent');
const headers = diagnostics.channel('undici:request:headers');
const bodyChunkReceived = diagnostics.channel('undici:request:bodyChunkReceived');
const trailers = diagnostics.channel('undici:request:trailers');
const error = diagnostics.channel('undici:request:error');

// Where a Dispatcher's agent.request() options carry the request as undici describes it.
const kAnnounced = Symbol('hyperagent.undiciRequest');

// A request as undici's channels describe it: `headers` is the flat list of the lines it sends
// (names and values, strings), to which `addHeader()` adds one while the create event is
// published (the lines are checked, as the request's own, when it goes); `body` as given.
class UndiciRequest {
  constructor(origin, method, path, lines, body) {
    this.origin = origin;
    this.method = method;
    this.path = path;
    this.headers = lines;
    this.body = body;
    this.completed = false;
    this.aborted = false;
  }

  addHeader(name, value) {
    this.headers.push(String(name), String(value));
    return this;
  }
}

function listened() {
  return create.hasSubscribers || headers.hasSubscribers || trailers.hasSubscribers || error.hasSubscribers
    || bodySent.hasSubscribers || bodyChunkSent.hasSubscribers || bodyChunkReceived.hasSubscribers
    || sendHeaders.hasSubscribers;
}

// Whether a request announced now is to hear which connection it goes out on.
function wantsSending() {
  return sendHeaders.hasSubscribers;
}

// The connection a request goes out on, as `undici:client:sendHeaders` hands undici's socket
// to its subscribers: what they read of it (its addresses and ports; over TLS, the protocol
// ALPN agreed on, false for none, as a TLSSocket has it). The connection itself stays in Rust.
class SentOn {
  constructor(info, secure) {
    this.remoteAddress = info.remoteAddress ?? undefined;
    this.remotePort = info.remotePort ?? undefined;
    this.remoteFamily = info.remoteFamily ?? undefined;
    this.localAddress = info.localAddress ?? undefined;
    this.localPort = info.localPort ?? undefined;
    this.localFamily = info.localFamily ?? undefined;
    this.encrypted = secure ? true : undefined;
    this.alpnProtocol = secure ? info.alpnProtocol ?? false : undefined;
  }
}

// `request` goes out on connection `connId` (Rust tells it as its head is handed to the
// connection, a replay's new connection too): published with the connection, and the head's
// lines as the request has them, each ended by CRLF as undici gives them (its request line, its
// host, the lines it was given and those subscribers added; not the framing lines the
// connection adds).
function sending(request, connId) {
  if (!sendHeaders.hasSubscribers) return;
  const info = binding.info(connId);
  if (info === null || info === undefined) return;
  const url = new URL(request.origin);
  const lines = request.headers;
  let given = '';
  let host = true;
  for (let i = 0; i + 1 < lines.length; i += 2) {
    if (lines[i].length === 4 && lines[i].toLowerCase() === 'host') host = false;
    given += `${lines[i]}: ${lines[i + 1]}\r\n`;
  }
  // The origin's host, unless the request gives its own.
  const head = `${request.method} ${request.path} HTTP/1.1\r\n${host ? `host: ${url.host}\r\n` : ''}${given}`;
  sendHeaders.publish({ request, headers: head, socket: new SentOn(info, url.protocol === 'https:') });
}

// A Dispatcher's request to `origin` for `path`, before it goes with agent.request() options
// `options`: when undici's channels are listened to, announced on `undici:request:create`, and
// its headers then given as the list a subscriber may have added to.
function announce(origin, path, options) {
  if (!listened()) return;
  const given = options.headers;
  const lines = given === undefined || given === null ? [] : headerList(given).flat;
  // The body as undici's request has it: a string as its bytes.
  const body = typeof options.body === 'string' ? Buffer.from(options.body) : options.body ?? null;
  // The path with its `query` (an object), as undici's request has it (a bad one fails the
  // request afterwards, as agent.request() reads it).
  const query = options.query !== null && typeof options.query === 'object' ? querystring.stringify(options.query) : '';
  const request = new UndiciRequest(origin, options.method ?? 'GET', query === '' ? path : `${path}?${query}`, lines, body);
  if (create.hasSubscribers) create.publish({ request });
  options.headers = request.headers;
  options[kAnnounced] = request;
}

// The request `options` announced, or null.
function announced(options) {
  return options[kAnnounced] ?? null;
}

function chunkSent(request, chunk) {
  if (bodyChunkSent.hasSubscribers) bodyChunkSent.publish({ request, chunk });
}

function requestSent(request) {
  if (bodySent.hasSubscribers) bodySent.publish({ request });
}

// The response head (a lib/response.js Response): its lines as Buffers, as undici gives them.
function headed(request, response) {
  if (!headers.hasSubscribers) return;
  const given = { statusCode: response.statusCode, headers: response.rawHeaderBuffers(), statusText: response.statusMessage };
  headers.publish({ request, response: given });
}

// Chunks of the response body (a list of Buffers) as they arrive from the connection.
function received(request, chunks) {
  if (!bodyChunkReceived.hasSubscribers) return;
  for (const chunk of chunks) bodyChunkReceived.publish({ request, chunk });
}

// The response is complete, with its trailers (an object).
function completed(request, response) {
  request.completed = true;
  if (trailers.hasSubscribers) trailers.publish({ request, trailers: headerBytes(headerLines(response.trailers)) });
}

function failed(request, err) {
  if (request.completed || request.aborted) return;
  request.aborted = true;
  if (error.hasSubscribers) error.publish({ request, error: err });
}

module.exports = { announce, announced, wantsSending, sending, chunkSent, requestSent, headed, received, completed, failed };
