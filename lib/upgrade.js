'use strict';

// A Dispatcher's upgrades (a WebSocket's handshake, say) and CONNECT tunnels, on its agents'
// own connections: they go through Node's http.request with the agent, whose socket is handed
// over once the server has switched protocols (101) or answered the CONNECT (with any status),
// as undici hands one to a handler's onUpgrade. The promise path has no socket to give; the
// drop-in path does.

const http = require('node:http');
const https = require('node:https');
const { pipeline, Readable } = require('node:stream');
const { headerList } = require('./headers');
const { bodyOf, dropBody } = require('./request-body');

// Opens the upgrade or tunnel undici's dispatch options `opts` ask for through `agent` (of
// `origin`). `on.upgraded(statusCode, rawHeaders, socket)` once it is open (the socket then
// belongs to the caller; bytes the server sent after its head are in it); `on.refused(statusCode,
// rawHeaders)` when the server answered an upgrade without switching protocols (the answer is
// dropped, its connection closed); `on.failed(err)` for an error. Exactly one of them is called.
// Returns a function that aborts it before then.
function openUpgrade(agent, origin, opts, on) {
  const url = new URL(origin);
  const tunnel = opts.method === 'CONNECT';
  const headers = opts.headers === undefined || opts.headers === null ? [] : headerList(opts.headers).flat.slice();
  if (!tunnel) {
    const protocol = typeof opts.upgrade === 'string' ? opts.upgrade : 'Websocket';
    if (!headers.some((v, i) => i % 2 === 0 && v.toLowerCase() === 'upgrade')) headers.push('upgrade', protocol);
    if (!headers.some((v, i) => i % 2 === 0 && v.toLowerCase() === 'connection')) headers.push('connection', 'upgrade');
  }
  let settled = false;
  const once = (fn) => (...args) => {
    if (settled) return;
    settled = true;
    fn(...args);
  };
  const upgraded = once(on.upgraded);
  const refused = once(on.refused);
  const failed = once(on.failed);
  let req;
  try {
    req = (url.protocol === 'https:' ? https : http).request({
      protocol: url.protocol,
      hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port || undefined,
      method: tunnel ? 'CONNECT' : opts.method,
      path: opts.path,
      headers,
      agent,
      servername: typeof opts.servername === 'string' && opts.servername !== '' ? opts.servername : undefined,
    });
  } catch (err) {
    failed(err);
    return () => {};
  }
  const open = (res, socket, head) => {
    if (head.length > 0) socket.unshift(head);
    upgraded(res.statusCode, res.rawHeaders, socket);
  };
  // A CONNECT's answer, whatever its status, comes with its socket (the body of a refusal, a
  // proxy's 407 say, to be read from it), as undici hands any answer to a CONNECT on.
  req.on(tunnel ? 'connect' : 'upgrade', open);
  req.on('response', (res) => {
    res.resume();
    res.destroy();
    refused(res.statusCode, res.rawHeaders);
  });
  req.on('error', failed);
  // A body that fails once the upgrade is open leaves the socket, now the caller's, alone.
  send(req, tunnel ? null : opts.body, (err) => {
    if (settled) return;
    req.destroy(err);
    failed(err);
  });
  return (reason) => {
    if (settled) return;
    req.destroy(reason);
    failed(reason);
  };
}

// Sends the request `req` with `body` (any body a dispatch takes: bytes, or a source streamed
// into it); `fail(err)` if the body cannot be read or is of no kind a body may be.
function send(req, body, fail) {
  let kind;
  try {
    kind = bodyOf(body);
  } catch (err) {
    dropBody(body, err);
    fail(err);
    return;
  }
  if (kind.source === null) {
    req.end(kind.bytes ?? undefined);
    return;
  }
  pipeline(Readable.from(kind.source, { objectMode: false }), req, (err) => {
    if (err) fail(err);
  });
}

module.exports = { openUpgrade };
