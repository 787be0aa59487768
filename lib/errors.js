'use strict';

// Every Error that hyperagent hands to users is built here: Node's argument errors
// (ERR_INVALID_ARG_TYPE, ...), system errors from the Rust core (ECONNREFUSED, ...) in the shape
// net and dns give them, and hyperagent's own states (ERR_HYPERAGENT_*).

const { format, inspect } = require('node:util');

// Node prints its own errors as `TypeError [ERR_X]: message`; do the same so that stack traces
// read alike. The name is set while V8 captures the stack header, then removed again.
function withCode(err, code) {
  err.code = code;
  const name = err.name;
  err.name = `${name} [${code}]`;
  // eslint-disable-next-line no-unused-expressions
  err.stack;
  delete err.name;
  return err;
}

function describeReceived(value) {
  if (value == null) return ` Received ${value}`;
  if (typeof value === 'function') return ` Received function ${value.name || '<anonymous>'}`;
  if (typeof value === 'object') {
    if (value.constructor && value.constructor.name) {
      return ` Received an instance of ${value.constructor.name}`;
    }
    return ` Received ${inspect(value, { depth: -1 })}`;
  }
  let shown = inspect(value, { colors: false });
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`;
  return ` Received type ${typeof value} (${shown})`;
}

function invalidArgType(name, expected, actual) {
  const kind = name.includes('.') ? 'property' : 'argument';
  const msg = `The "${name}" ${kind} must be ${expected}.${describeReceived(actual)}`;
  return withCode(new TypeError(msg), 'ERR_INVALID_ARG_TYPE');
}

function invalidArgValue(name, value, reason = 'is invalid') {
  const kind = name.includes('.') ? 'property' : 'argument';
  const msg = `The ${kind} '${name}' ${reason}. Received ${inspect(value)}`;
  return withCode(new TypeError(msg), 'ERR_INVALID_ARG_VALUE');
}

function outOfRange(name, range, value) {
  const msg = `The value of "${name}" is out of range. It must be ${range}. Received ${inspect(value)}`;
  return withCode(new RangeError(msg), 'ERR_OUT_OF_RANGE');
}

// Node 24 on ends the message of three verification failures with a hint (its TLS code
// appends it, whatever the trust in use); earlier versions give OpenSSL's message alone.
const SYSTEM_CA_HINT = Number(process.versions.node.split('.')[0]) >= 24
  ? '; if the root CA is installed locally, try running Node.js with --use-system-ca'
  : '';
const HINTED = new Set(['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_GET_ISSUER_CERT']);

// A system error from the core's descriptor ({ code, errno, syscall, message, address, port,
// hostname }), with the properties in the order Node's own have them.
function systemError(desc) {
  // A server name found wrong in Rust (within the handshake, or a proxy's): Node's own check
  // words the error, from the certificates (its reason, host and cert), as tls.connect reports it.
  if (desc.peerChain !== undefined) {
    const named = nameCheckError(desc);
    if (named !== null) return named;
  }
  const err = new Error(SYSTEM_CA_HINT !== '' && HINTED.has(desc.code) ? desc.message + SYSTEM_CA_HINT : desc.message);
  if (desc.errno !== undefined) err.errno = desc.errno;
  err.code = desc.code;
  if (desc.syscall !== undefined) err.syscall = desc.syscall;
  if (desc.hostname !== undefined) err.hostname = desc.hostname;
  if (desc.address !== undefined) err.address = desc.address;
  if (desc.port !== undefined) err.port = desc.port;
  if (desc.requestSent !== undefined) err.requestSent = desc.requestSent;
  // A tunnel that did not open in time names its limit as Node's does.
  if (desc.timeout !== undefined) err[desc.code === 'ERR_PROXY_TUNNEL' ? 'proxyTunnelTimeout' : 'timeout'] = desc.timeout;
  if (desc.statusCode !== undefined) err.statusCode = desc.statusCode;
  if (desc.localAddress !== undefined) err.localAddress = desc.localAddress;
  if (desc.localPort !== undefined) err.localPort = desc.localPort;
  return err;
}

// Node's error for a name `checkServerIdentity` refuses, from the descriptor's certificates
// (the server's, then its issuers: its `cert` is getPeerCertificate(true)'s, as in Node); null
// if it takes the name (rustls is stricter) or the certificates cannot be read.
function nameCheckError(desc) {
  try {
    const { X509Certificate } = require('node:crypto');
    const { legacyCertificate } = require('./tls');
    const cert = legacyCertificate(desc.peerChain.map((der) => new X509Certificate(der)), true);
    return require('node:tls').checkServerIdentity(desc.checkedHost, cert) || null;
  } catch {
    return null;
  }
}

// A failed syscall made from JavaScript's side of a socket (write, shutdown): errno is negative.
function errnoError(errno, syscall) {
  const { getSystemErrorName } = require('node:util');
  let code;
  try {
    code = getSystemErrorName(errno);
  } catch {
    code = 'EIO';
  }
  return systemError({ code, errno, syscall, message: `${syscall} ${code}` });
}

// Node's "socket hang up" / "aborted" family.
function connResetError(message) {
  const err = new Error(message);
  err.code = 'ECONNRESET';
  return err;
}

// net.Socket's error for a write after the peer ended the connection.
function epipeAfterFIN() {
  const err = new Error('This socket has been ended by the other party');
  err.code = 'EPIPE';
  return err;
}

// agentkeepalive's error for an active socket that timed out with nobody listening.
function socketTimeoutError(timeout) {
  const err = new Error('Socket timeout');
  err.code = 'ERR_SOCKET_TIMEOUT';
  err.timeout = timeout;
  return err;
}

// Node's error for a tunnel through a proxy that has not opened within `timeout` ms.
function proxyTunnelTimeout(timeout) {
  const err = new Error(`Connection to establish proxy tunnel timed out after ${timeout}ms`);
  err.code = 'ERR_PROXY_TUNNEL';
  err.proxyTunnelTimeout = timeout;
  return err;
}

// A stream left before its end, as Node's stream utilities destroy it.
function abortError() {
  const err = new Error('The operation was aborted');
  err.code = 'ABORT_ERR';
  err.name = 'AbortError';
  return err;
}

// A stream that closed before its end, as Node's stream utilities report it.
function prematureClose() {
  return withCode(new Error('Premature close'), 'ERR_STREAM_PREMATURE_CLOSE');
}

// undici's errors of a dispatcher, by the names and codes code written against undici checks:
// ClientClosedError (UND_ERR_CLOSED), ClientDestroyedError (UND_ERR_DESTROYED), RequestAbortedError
// (UND_ERR_ABORTED, which undici names 'AbortError'), and the others below. Each kind's third
// field: the codes of the undici classes it also belongs to (a RequestAbortedError is an
// AbortError, UND_ERR_ABORT); every kind is an UndiciError (UND_ERR). The fourth: its class's
// name, where it is not the error's.
const UNDICI_ERRORS = {
  CLOSED: ['ClientClosedError', 'The client is closed', []],
  DESTROYED: ['ClientDestroyedError', 'The client is destroyed', []],
  ABORTED: ['AbortError', 'Request aborted', ['ABORT'], 'RequestAbortedError'],
  SOCKET: ['SocketError', 'closed', []],
  INFO: ['InformationalError', 'Request information', []],
  RES_EXCEEDED_MAX_SIZE: ['ResponseExceededMaxSizeError', 'Response content exceeded max size', []],
  MAX_ORIGINS_REACHED: ['MaxOriginsReachedError', 'Maximum allowed origins reached', []],
};

// A class for each kind, named as undici's (what `err.constructor.name` and a logger read), made
// on first use. Not undici's own classes, which this package does not load: `instanceof` holds
// by their markers (see markUndici).
const undiciClasses = new Map();

function undiciClass(kind) {
  let Class = undiciClasses.get(kind);
  if (Class === undefined) {
    const [name, , , className = name] = UNDICI_ERRORS[kind];
    Class = { [className]: class extends Error {} }[className];
    undiciClasses.set(kind, Class);
  }
  return Class;
}

// undici's error classes know their instances by a marker of each class, under a global symbol
// (`Symbol.hasInstance`), so that `err instanceof errors.SocketError` holds across copies of
// undici: an error of ours carries the markers of the classes its kind is.
function markUndici(err, kind) {
  const marks = ['', `_${kind}`, ...UNDICI_ERRORS[kind][2].map((other) => `_${other}`)];
  for (const mark of marks) {
    Object.defineProperty(err, Symbol.for(`undici.error.UND_ERR${mark}`), { value: true });
  }
  return err;
}

function undiciError(kind, message = UNDICI_ERRORS[kind][1]) {
  const Class = undiciClass(kind);
  const err = new Class(message);
  // As undici's constructors set them: its stack's header reads `name: message`, as undici's.
  err.name = UNDICI_ERRORS[kind][0];
  err.code = `UND_ERR_${kind}`;
  return markUndici(err, kind);
}

function hyperagentError(code, message, Ctor = Error) {
  return withCode(new Ctor(message), `ERR_HYPERAGENT_${code}`);
}

// A request to an agent that close() was called on.
function agentClosed() {
  return hyperagentError('AGENT_CLOSED', 'The agent is closed: close() was called, and it takes no new requests');
}

// What a call into the addon threw. A panic in Rust is caught at the boundary and thrown as an
// Error of Node-API's `GenericFailure` status; it becomes ERR_HYPERAGENT_INTERNAL, with the
// panic's message, for the request or socket it happened for. An input the addon refused
// (Node-API's `InvalidArg` status: one that JavaScript's checks let through) becomes Node's
// ERR_INVALID_ARG_VALUE with the addon's message. Anything else is returned as it is.
function internalError(thrown) {
  if (thrown === null || typeof thrown !== 'object') return thrown;
  if (thrown.code === 'GenericFailure' || thrown.code === 'ERR_HYPERAGENT_INTERNAL') {
    const message = String(thrown.message).startsWith('hyperagent: internal error: ') ? thrown.message : `hyperagent: internal error: ${thrown.message}`;
    const err = hyperagentError('INTERNAL', message);
    err.cause = thrown;
    return err;
  }
  if (thrown.code === 'InvalidArg') {
    const err = withCode(new TypeError(String(thrown.message)), 'ERR_INVALID_ARG_VALUE');
    err.cause = thrown;
    return err;
  }
  return thrown;
}

// A throw of the program's own (a callback, a hook) that nothing of ours can take: its uncaught
// exception on the next tick, out of whatever code of ours was running.
function throwLater(thrown) {
  process.nextTick(rethrow, thrown);
}

function rethrow(thrown) {
  throw thrown;
}

// A port net.connect would refuse, in its words.
function badPort(port) {
  return withCode(new RangeError(`Port should be >= 0 and < 65536.${describeReceived(port)}.`), 'ERR_SOCKET_BAD_PORT');
}

// net.connect's check of `localPort` (a number when given), and a range it leaves to bind.
function checkLocalPort(port) {
  if (!port) return;
  if (typeof port !== 'number') throw invalidArgType('options.localPort', 'of type number', port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw badPort(port);
}

// net.connect's refusal of an address its `blockList` blocks.
function ipBlocked(address) {
  return withCode(new Error(`IP(${address}) is blocked by net.BlockList`), 'ERR_IP_BLOCKED');
}

// A `lookup` that gave something other than an IP address, as net reports it.
function invalidIpAddress(address) {
  return withCode(new TypeError(`Invalid IP address: ${address}`), 'ERR_INVALID_IP_ADDRESS');
}

// A TLS version option that is no version's name, as tls.createSecureContext refuses it.
function invalidTlsVersion(value, which) {
  return withCode(new TypeError(`${inspect(value)} is not a valid ${which} TLS protocol version`), 'ERR_TLS_INVALID_PROTOCOL_VERSION');
}

// A secureProtocol that names no method OpenSSL offers (`message` says which), as
// tls.createSecureContext refuses it.
function invalidProtocolMethod(message) {
  return withCode(new TypeError(message), 'ERR_TLS_INVALID_PROTOCOL_METHOD');
}

// A TLS version given with a secureProtocol (which names its versions), as
// tls.createSecureContext refuses it.
function protocolVersionConflict(version, secureProtocol) {
  return withCode(new TypeError(format('TLS protocol version %j conflicts with secureProtocol %j', version, secureProtocol)), 'ERR_TLS_PROTOCOL_VERSION_CONFLICT');
}

// net.Socket's resetAndDestroy() on a socket closed already.
function socketClosed() {
  return withCode(new Error('Socket is closed'), 'ERR_SOCKET_CLOSED');
}

// net.Socket's resetAndDestroy() on a socket whose handle is not TCP's (a TLS socket's).
function invalidHandleType() {
  return withCode(new TypeError('This handle type cannot be sent'), 'ERR_INVALID_HANDLE_TYPE');
}

// What a TLS socket of rustls cannot do that an OpenSSL one of Node can (`what` names it).
function tlsUnsupported(what) {
  return hyperagentError('UNSUPPORTED', `${what} is not available on hyperagent's TLS sockets (rustls)`);
}

// OpenSSL's refusal to renegotiate TLS 1.3, as Node reports it.
function noRenegotiation() {
  return withCode(new Error('error:0A00010A:SSL routines::wrong ssl version'), 'ERR_SSL_WRONG_SSL_VERSION');
}

module.exports = {
  tlsUnsupported,
  noRenegotiation,
  badPort,
  checkLocalPort,
  ipBlocked,
  invalidIpAddress,
  invalidTlsVersion,
  invalidProtocolMethod,
  protocolVersionConflict,
  socketClosed,
  invalidHandleType,
  invalidArgType,
  invalidArgValue,
  outOfRange,
  systemError,
  errnoError,
  connResetError,
  epipeAfterFIN,
  socketTimeoutError,
  proxyTunnelTimeout,
  prematureClose,
  abortError,
  hyperagentError,
  agentClosed,
  undiciError,
  internalError,
  throwLater,
};
