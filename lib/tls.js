'use strict';

// HTTPS: the options of https.Agent and tls.connect turned into what the Rust TLS stack takes,
// and NativeTlsSocket, the TLSSocket-shaped face of a connection whose TLS runs in Rust.

const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const tls = require('node:tls');
const debug = require('node:util').debuglog('hyperagent');
const native = require('./native');
const { NativeSocket, kOptions, kAgent, kConnecting } = require('./socket');
const errors = require('./errors');

const kInfo = Symbol('hyperagent.tlsInfo');
const kPeerCerts = Symbol('hyperagent.peerCertificates');

function toBuffers(value, name) {
  if (value === undefined || value === null) return undefined;
  const list = Array.isArray(value) ? value : [value];
  return list.map((v, i) => {
    if (typeof v === 'string') return Buffer.from(v);
    if (Buffer.isBuffer(v)) return v;
    if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    throw errors.invalidArgType(Array.isArray(value) ? `${name}[${i}]` : name, 'of type string or an instance of Buffer', v);
  });
}

// Private keys in any form Node reads (PKCS#1, SEC1, PKCS#8, encrypted with `passphrase`),
// handed to Rust as unencrypted PKCS#8 PEM. Node's own crypto reads them, with its errors.
function privateKeys(keyOption, passphrase) {
  if (keyOption === undefined || keyOption === null) return [];
  const list = Array.isArray(keyOption) ? keyOption : [keyOption];
  return list.map((entry) => {
    const pem = entry && typeof entry === 'object' && !Buffer.isBuffer(entry) && !(entry instanceof Uint8Array)
      ? entry.pem
      : entry;
    const pass = entry && typeof entry === 'object' && entry.passphrase !== undefined ? entry.passphrase : passphrase;
    // A key's passphrase is a string, as Node's secure context checks it. None is an empty one,
    // which an encrypted key refuses with Node's `ERR_OSSL_BAD_DECRYPT`.
    if (pass !== undefined && pass !== null && typeof pass !== 'string') {
      throw errors.invalidArgType('options.passphrase', 'of type string', pass);
    }
    const key = crypto.createPrivateKey({ key: pem, format: 'pem', passphrase: pass ?? '' });
    return Buffer.from(key.export({ type: 'pkcs8', format: 'pem' }));
  });
}

// ALPNProtocols as tls.connect takes it: strings, Buffers, or one Buffer in wire format.
function alpn(value) {
  if (value === undefined || value === null) return undefined;
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
    const out = [];
    for (let i = 0; i < value.length;) {
      const n = value[i];
      out.push(Buffer.from(value.subarray(i + 1, i + 1 + n)));
      i += n + 1;
    }
    return out;
  }
  if (!Array.isArray(value)) throw errors.invalidArgType('options.ALPNProtocols', 'an Array or a Buffer', value);
  return value.map((p) => Buffer.from(p));
}

// `pfx` as tls.createSecureContext takes it: one file (a Buffer or a string) with the top-level
// `passphrase`, or an array of files or `{ buf, passphrase }` entries. Rust reads the files.
function pfxList(pfx, passphrase) {
  if (pfx === undefined || pfx === null) return undefined;
  const entries = Array.isArray(pfx)
    ? pfx.map((v) => (v !== null && typeof v === 'object' && v.buf ? [v.buf, v.passphrase || passphrase] : [v, passphrase]))
    : [[pfx, passphrase]];
  return entries.map(([buf, pass]) => {
    let data = buf;
    if (typeof data === 'string') data = Buffer.from(data);
    else if (data instanceof Uint8Array && !Buffer.isBuffer(data)) data = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (!Buffer.isBuffer(data)) {
      // As Node words it, and as the errors Rust gives for the file's contents are made.
      throw errors.systemError({ code: 'ERR_CRYPTO_OPERATION_FAILED', message: 'Unable to load PFX certificate' });
    }
    let text = pass === undefined || pass === null ? '' : pass;
    if (Buffer.isBuffer(text) || text instanceof Uint8Array) text = Buffer.from(text).toString('utf8');
    if (typeof text !== 'string') throw errors.invalidArgType('options.passphrase', 'of type string', pass);
    return { buf: data, passphrase: text };
  });
}

// The most sessions a cache counts (Rust's u32).
const MAX_SESSIONS = 2 ** 32 - 1;
const UNSUPPORTED = ['secureContext', 'clientCertEngine', 'privateKeyEngine', 'privateKeyIdentifier'];
// `secureProtocol`: OpenSSL's methods by the names Node takes, as the versions they leave
// (lowest, highest; undefined: the default's). Those of TLS before 1.2 leave no version rustls
// speaks: their connections fail at the handshake, as Node's do with a server of today. A
// server's method, which Node knows but a client cannot use, is null.
const PROTOCOL_METHODS = {
  __proto__: null,
  // Every version, whatever tls.DEFAULT_MIN_VERSION and DEFAULT_MAX_VERSION say.
  TLS_method: ['TLSv1.2', 'TLSv1.3'],
  TLS_client_method: ['TLSv1.2', 'TLSv1.3'],
  // Node's own rule: these stop at TLS 1.2.
  SSLv23_method: [undefined, 'TLSv1.2'],
  SSLv23_client_method: [undefined, 'TLSv1.2'],
  TLSv1_2_method: ['TLSv1.2', 'TLSv1.2'],
  TLSv1_2_client_method: ['TLSv1.2', 'TLSv1.2'],
  TLS_server_method: null,
  SSLv23_server_method: null,
  TLSv1_2_server_method: null,
  TLSv1_1_method: ['TLSv1.1', 'TLSv1.1'],
  TLSv1_1_client_method: ['TLSv1.1', 'TLSv1.1'],
  TLSv1_1_server_method: null,
  TLSv1_method: ['TLSv1', 'TLSv1'],
  TLSv1_client_method: ['TLSv1', 'TLSv1'],
  TLSv1_server_method: null,
};

// The versions `secureProtocol` leaves, or undefined (none named). As tls.createSecureContext
// takes it: a value that is not a string is not read, SSL 2 and 3 are refused, and a name of no
// method is refused with Node's code and words.
function protocolMethod(name) {
  if (typeof name !== 'string') return undefined;
  const versions = PROTOCOL_METHODS[name];
  if (versions) return versions;
  if (versions === null) {
    throw errors.hyperagentError('UNSUPPORTED', `secureProtocol '${name}' is a server's method, which a client cannot use`);
  }
  const ssl = /^(SSLv[23])_(?:server_|client_)?method$/.exec(name);
  throw errors.invalidProtocolMethod(ssl !== null ? `${ssl[1]} methods disabled` : `Unknown method: ${name}`);
}

// Node's default trust, as PEM strings, as Node tells it (22.15 and 23.10 on): its bundled
// roots (with the system's under --use-system-ca or NODE_USE_SYSTEM_CA=1) plus
// NODE_EXTRA_CA_CERTS, or what tls.setDefaultCACertificates() set last. Node hands out the same
// array until the set changes; Rust gets it anew then, for the keys made afterwards without
// `ca` (and to complete their servers' chains: see verifiedChain).
const defaultCaOf = typeof tls.getCACertificates === 'function' ? () => tls.getCACertificates('default') : olderDefaultCa;
let firstDefaultCa = null;
let givenDefaultCa = null;
let olderSet;

// Before Node 22.15 and 23.10: Node's bundled roots (tls.rootCertificates) and the certificates
// of NODE_EXTRA_CA_CERTS, which Node read from the same file; none (Rust's own default stands in)
// where Node trusts OpenSSL's store instead, which it cannot list.
function olderDefaultCa() {
  if (olderSet === undefined) olderSet = opensslStore() ? null : tls.rootCertificates.concat(extraCaCertificates());
  return olderSet;
}

function extraCaCertificates() {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  if (!file) return [];
  try {
    return fs.readFileSync(file, 'latin1').match(PEM_CERT) || [];
  } catch {
    // As Node, which warns once and goes on without them.
    return [];
  }
}

// Whether Node trusts OpenSSL's store in place of its bundled roots: with --use-openssl-ca, or
// built to (as some distributions build it), unless --use-bundled-ca says otherwise. Node's
// first default list leaves that store out (it holds NODE_EXTRA_CA_CERTS alone); the store is
// what Node lists as the system's.
function opensslStore() {
  const flags = (process.env.NODE_OPTIONS || '').split(/\s+/).concat(process.execArgv);
  if (flags.includes('--use-openssl-ca')) return true;
  return Boolean(process.config.variables.node_use_openssl_ca) && !flags.includes('--use-bundled-ca');
}

function syncDefaultCa() {
  const set = defaultCaOf();
  if (set === null || set === givenDefaultCa) return;
  firstDefaultCa ??= set;
  const trusted = set === firstDefaultCa && opensslStore() ? tls.getCACertificates('system').concat(set) : set;
  const count = native.setDefaultCa(trusted);
  debug('default trust: %d certificates, as Node trusts them', count);
  givenDefaultCa = set;
}

// Whether a server that fails verification is refused, as tls.connect decides: by
// `rejectUnauthorized` where the options have it (an explicit undefined refuses), else unless
// NODE_TLS_REJECT_UNAUTHORIZED is '0' (which Node warns about, once).
let warnedUnauthorized = false;

function rejectsUnauthorized(options) {
  if ('rejectUnauthorized' in options) return options.rejectUnauthorized !== false;
  if (process.env.NODE_TLS_REJECT_UNAUTHORIZED !== '0') return true;
  if (!warnedUnauthorized) {
    warnedUnauthorized = true;
    process.emitWarning("Setting the NODE_TLS_REJECT_UNAUTHORIZED environment variable to '0' makes TLS connections and HTTPS requests insecure by disabling certificate verification.");
  }
  return false;
}

// The TLS configuration of one pool key, from the merged request and agent options.
function tlsOptions(agent, options) {
  for (const name of UNSUPPORTED) {
    if (options[name] !== undefined && options[name] !== null) {
      throw errors.hyperagentError(
        'UNSUPPORTED',
        `The TLS option '${name}' is not supported by hyperagent (TLS runs in Rust, with rustls); use 'ca', 'crl', 'cert' and 'key' or 'pfx' instead`,
      );
    }
  }
  // A method names its versions: a version given as well is refused, as Node refuses it.
  const { secureProtocol } = options;
  if (secureProtocol) {
    for (const version of [options.minVersion, options.maxVersion]) {
      if (version !== undefined && version !== null) throw errors.protocolVersionConflict(version, secureProtocol);
    }
  }
  let minVersion = versionOption(options.minVersion, 'minimum');
  let maxVersion = versionOption(options.maxVersion, 'maximum');
  const versions = protocolMethod(secureProtocol);
  if (versions !== undefined) [minVersion, maxVersion] = versions;
  // Of OpenSSL's flags, those that turn TLS 1.2 or 1.3 off narrow the versions (no TLS before
  // 1.2 is spoken, so the flags for those have nothing to do; the others have no effect here).
  const { secureOptions } = options;
  if (secureOptions !== undefined && secureOptions !== null) {
    if (typeof secureOptions !== 'number') throw errors.invalidArgType('options.secureOptions', 'of type number', secureOptions);
    const { SSL_OP_NO_TLSv1_2: NO_TLS12, SSL_OP_NO_TLSv1_3: NO_TLS13 } = crypto.constants;
    // Both off: what is left is before TLS 1.2, and its connections fail at the handshake, as
    // OpenSSL's do in Node.
    if ((secureOptions & NO_TLS12) && (secureOptions & NO_TLS13)) {
      [minVersion, maxVersion] = [undefined, 'TLSv1.1'];
    } else {
      if (secureOptions & NO_TLS12) minVersion = 'TLSv1.3';
      if (secureOptions & NO_TLS13) maxVersion = 'TLSv1.2';
    }
  }
  // Without the option, tls.DEFAULT_CIPHERS and tls.DEFAULT_ECDH_CURVE, as a program (or
  // --tls-cipher-list) may have set them: read when the pool key is made. Node's own defaults
  // leave rustls's.
  let ciphers = options.ciphers ?? tls.DEFAULT_CIPHERS;
  if (ciphers === crypto.constants.defaultCipherList) ciphers = undefined;
  if (ciphers !== undefined && typeof ciphers !== 'string') throw errors.invalidArgType('options.ciphers', 'of type string', ciphers);
  // Key exchange groups in order of preference.
  let ecdhCurve = options.ecdhCurve ?? tls.DEFAULT_ECDH_CURVE;
  if (ecdhCurve === 'auto') ecdhCurve = undefined;
  if (ecdhCurve !== undefined && typeof ecdhCurve !== 'string') throw errors.invalidArgType('options.ecdhCurve', 'of type string', ecdhCurve);
  const { sigalgs } = options;
  if (sigalgs !== undefined && sigalgs !== null) {
    if (typeof sigalgs !== 'string') throw errors.invalidArgType('options.sigalgs', 'of type string', sigalgs);
    if (sigalgs === '') throw errors.invalidArgValue('options.sigalgs', sigalgs);
  }
  const certs = toBuffers(options.cert, 'options.cert');
  const keys = privateKeys(options.key, options.passphrase);
  if ((certs ? certs.length : 0) !== keys.length) {
    throw errors.invalidArgValue('options.key', '<redacted>', 'must hold one key for each certificate in options.cert');
  }
  const ca = toBuffers(options.ca, 'options.ca');
  if (ca === undefined) syncDefaultCa();
  return {
    ca,
    certs,
    keys: keys.length ? keys : undefined,
    pfx: pfxList(options.pfx, options.passphrase),
    crl: toBuffers(options.crl, 'options.crl'),
    rejectUnauthorized: rejectsUnauthorized(options),
    minVersion: minVersion ?? tls.DEFAULT_MIN_VERSION,
    maxVersion: maxVersion ?? tls.DEFAULT_MAX_VERSION,
    ciphers,
    ecdhCurve,
    sigalgs: sigalgs ?? undefined,
    alpn: alpn(options.ALPNProtocols),
    maxCachedSessions: sessionCount(agent.maxCachedSessions),
  };
}

// A TLS version option: a string (Rust names the one it does not know), or none; anything
// else is refused as tls.createSecureContext refuses it.
function versionOption(value, which) {
  if (value === undefined || value === null || typeof value === 'string') return value ?? undefined;
  throw errors.invalidTlsVersion(value, which);
}

// https.Agent's maxCachedSessions, which it compares with its cache's size: a number as
// comparisons read it, 100 when not set; what is no number (NaN, never reached) or beyond
// what the cache counts is no limit.
function sessionCount(value) {
  if (value === undefined) return 100;
  const n = Number(value);
  if (!(n <= MAX_SESSIONS)) return MAX_SESSIONS;
  return n > 0 ? Math.floor(n) : 0;
}

// The request's Host header, as Node's agent reads it for the server's name (over HTTP too): a
// string, or none; any other value is refused as Node's agent refuses it, out of http.request().
function hostHeaderOf(req) {
  const value = req.getHeader('host');
  if (value && typeof value !== 'string') throw errors.invalidArgType('options.headers.host', 'of type string', value);
  return value;
}

// A `servername` given: a string, as tls.connect takes it. An IP address is refused where this
// Node's tls.connect refuses it (Node 26 on), and warned about once (DEP0123) where it warns.
function checkServerName(value) {
  if (value !== undefined && value !== null && typeof value !== 'string') {
    throw errors.invalidArgType('options.servername', 'of type string', value);
  }
  if (value && net.isIP(value) !== 0) ipServerName(value);
}

const IP_SERVERNAME = 'Setting the TLS ServerName to an IP address is not permitted';
let ipServerNameRefused;
let ipServerNameWarned = false;

function ipServerName(value) {
  // Read from tls.connect itself: whether it refuses one, or warns.
  ipServerNameRefused ??= Function.prototype.toString.call(tls.connect).includes(`'${IP_SERVERNAME}.'`);
  if (ipServerNameRefused) throw errors.invalidArgValue('options.servername', value, `${IP_SERVERNAME}.`);
  if (!ipServerNameWarned) {
    ipServerNameWarned = true;
    process.emitWarning(`${IP_SERVERNAME} by RFC 6066. This will be ignored in a future version.`, 'DeprecationWarning', 'DEP0123');
  }
}

// Node's: the SNI name from the Host header or the host, none for IP addresses.
function normalizeServerName(options, req) {
  checkServerName(options.servername);
  if (options.servername || options.servername === '') return;
  const hostHeader = hostHeaderOf(req);
  let servername = options.host;
  if (hostHeader) {
    if (hostHeader.startsWith('[')) {
      const end = hostHeader.indexOf(']');
      servername = end === -1 ? hostHeader : hostHeader.slice(1, end);
    } else {
      servername = hostHeader.split(':', 1)[0];
    }
  }
  options.servername = net.isIP(servername) ? '' : servername;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;

// The certificates of a `ca` option, parsed by Node once per value: a new connection's name
// check looks for its chain's root among them, and parsing a bundle each time (Node's 140 root
// certificates take ~50 ms) would cost more than the handshake. Kept per object (an array, a
// Buffer) while it lives, and for the last few strings.
const parsedCas = new WeakMap();
const parsedCaStrings = new Map();

function trustedCertificates(ca) {
  if (ca === undefined || ca === null) return [];
  const object = typeof ca === 'object';
  let certs = object ? parsedCas.get(ca) : parsedCaStrings.get(ca);
  if (certs === undefined) {
    certs = parseCertificates(ca);
    if (object) {
      parsedCas.set(ca, certs);
    } else {
      if (parsedCaStrings.size >= 4) parsedCaStrings.clear();
      parsedCaStrings.set(ca, certs);
    }
  }
  return certs;
}

function parseCertificates(ca) {
  const out = [];
  for (const entry of Array.isArray(ca) ? ca : [ca]) {
    const text = Buffer.isBuffer(entry) || entry instanceof Uint8Array ? Buffer.from(entry).toString('latin1') : String(entry);
    for (const pem of text.match(PEM_CERT) || []) {
      try {
        out.push(new crypto.X509Certificate(pem));
      } catch {
        // Not a certificate Node can read: it cannot be the issuer either.
      }
    }
  }
  return out;
}

// Roots of the default trust, parsed once each (a server's chain ends at one of a few).
const parsedRoots = new Map();

function parsedRoot(der) {
  const id = der.toString('base64');
  let cert = parsedRoots.get(id);
  if (cert === undefined) {
    if (parsedRoots.size >= 64) parsedRoots.clear();
    cert = new crypto.X509Certificate(der);
    parsedRoots.set(id, cert);
  }
  return cert;
}

// A peer's chain (DER, leaf first) as OpenSSL's verified chain: up to the trusted root, when
// the root is one of `ca`; without `ca`, when `complete` asks for it (a user's
// checkServerIdentity or getPeerCertificate(true) may walk to the root, as Node's documentation
// does to pin it; Node's own check reads the leaf alone, and the lookup costs a parse), from the
// default trust.
function verifiedChain(ders, ca, complete) {
  const chain = ders.map((der) => new crypto.X509Certificate(der));
  const top = chain[chain.length - 1];
  if (!top.checkIssued(top)) {
    let root;
    if (ca !== undefined && ca !== null) {
      const trusted = trustedCertificates(ca);
      // The subject names the likely issuer at once; the check decides.
      root = trusted.find((c) => c.subject === top.issuer && top.checkIssued(c)) ?? trusted.find((c) => top.checkIssued(c));
    } else if (complete) {
      // Rust finds the default trust's certificates named as the issuer.
      root = native.trustedIssuers(ders[ders.length - 1]).map(parsedRoot).find((c) => top.checkIssued(c));
    }
    if (root) chain.push(root);
  }
  return chain;
}

// The leaf of a chain of X509Certificates in Node's shape (toLegacyObject); with `detailed`,
// each certificate carries its issuer as `issuerCertificate`.
function legacyCertificate(chain, detailed) {
  const certs = chain.map((x) => x.toLegacyObject());
  if (!detailed) return certs[0];
  for (let i = 0; i < certs.length; i++) {
    const issuer = certs[i + 1];
    if (issuer) certs[i].issuerCertificate = issuer;
    else if (chain[i].checkIssued(chain[i])) certs[i].issuerCertificate = certs[i];
  }
  return certs[0];
}

// `checkServerIdentity` is a function of the user's (called on every new session, as Node
// calls it), not Node's own (whose verdict depends only on the certificate and the name).
function customIdentityCheck(options) {
  return typeof options.checkServerIdentity === 'function' && options.checkServerIdentity !== tls.checkServerIdentity;
}

// The server's name checked as Node's tls.connect checks it after a new handshake:
// `checkServerIdentity` (Node's own unless one is given) on the servername, or the host. The
// error, or null.
function identityError(options, peerCertificate) {
  const hostname = options.servername || options.host || 'localhost';
  const check = typeof options.checkServerIdentity === 'function' ? options.checkServerIdentity : tls.checkServerIdentity;
  return check(hostname, peerCertificate) || null;
}

// agent.request()'s new TLS connection (its session's `info`, as a socket's): the error of its
// server's name check, or null. A certificate Node's own check found right before is taken
// unchecked when the check is Node's own, as on the drop-in path.
function serverNameError(options, info) {
  if (info.nameKnownByNode && !customIdentityCheck(options)) return null;
  const cert = info.peerChain.length === 0 ? {} : legacyCertificate(verifiedChain(info.peerChain, options.ca, customIdentityCheck(options)), true);
  return identityError(options, cert);
}

// The lines of a key log as Rust reports them (NSS key log format, each ending in a line
// feed): one Buffer each, its line feed included, as Node's 'keylog' events carry them.
function keylogLines(lines) {
  const out = [];
  let start = 0;
  while (start < lines.length) {
    const end = lines.indexOf(0x0a, start);
    const stop = end === -1 ? lines.length : end + 1;
    out.push(lines.subarray(start, stop));
    start = stop;
  }
  return out;
}

// The face of a TLS connection: a NativeSocket with TLSSocket's properties and methods.
class NativeTlsSocket extends NativeSocket {
  constructor(agent, name, options) {
    super(agent, name, options);
    this.encrypted = true;
    this.authorized = false;
    this.authorizationError = null;
    this.alpnProtocol = null;
    this.servername = null;
    this[kInfo] = null;
    this[kPeerCerts] = null;
  }

  // Refused while it has a connection, as Node's TLSSocket refuses it (its handle is not TCP's).
  resetAndDestroy() {
    if (this.connecting || !this.destroyed) throw errors.invalidHandleType();
    return super.resetAndDestroy();
  }

  _onConnect(desc, info) {
    this._opened();
    if (desc !== null || !info) {
      super._onConnect(desc);
      return;
    }
    this[kInfo] = info;
    this.alpnProtocol = info.alpnProtocol;
    this.servername = info.servername;
    const options = this[kOptions];
    let verifyError = info.authorizationError ? errors.systemError(info.authorizationError) : null;
    // As Node: the name is checked after the handshake, unless the chain already failed or the
    // session was resumed. Only a certificate whose name was found right before is taken
    // unchecked, and, when the check is Node's own and found it so, on a new session too
    // (TlsConfig's `named` in Rust).
    const known = info.resumed ? info.nameKnown : info.nameKnownByNode && !customIdentityCheck(options);
    if (!verifyError && !known) {
      try {
        verifyError = identityError(options, legacyCertificate(this._peerChain(customIdentityCheck(options)), true));
      } catch (thrown) {
        // What a check of the program's threw fails the request (a null too: a reason is
        // needed), whatever `rejectUnauthorized` says, as on agent.request()'s connections;
        // thrown from here, it would reach no one and leave the request waiting.
        native.forgetTlsSessions(this._connectionId);
        this._failHandshake(thrown ?? new Error(`checkServerIdentity threw ${thrown}`));
        return;
      }
      // A check of the program's that let the name pass is remembered as such: it stands for a
      // session resumed later (Node checks none), not for Node's own check on a new one.
      if (verifyError === null) native.tlsNameVerified(this._connectionId, !customIdentityCheck(options));
    }
    if (verifyError) {
      this.authorizationError = verifyError.code || verifyError.message;
      if (rejectsUnauthorized(options)) {
        // As Node's https.Agent evicts the session of a socket that failed: the next
        // connection makes a new one, and is checked again (a resumed one is not).
        native.forgetTlsSessions(this._connectionId);
        this._failHandshake(verifyError);
        return;
      }
      // Kept with the connection, for a socket made for it after this one is collected.
      if (!info.authorizationError) native.tlsNameRejected(this._connectionId, this.authorizationError);
    } else {
      this.authorized = true;
    }
    super._onConnect(null);
    this.emit('secureConnect');
  }

  // A socket made for a pooled connection whose old socket was collected while it idled:
  // the session's details and verdict, as the old socket had them after its connect.
  _restoreSession(info) {
    if (!info) return;
    this[kInfo] = info;
    this.alpnProtocol = info.alpnProtocol;
    this.servername = info.servername;
    const failure = info.authorizationError ? info.authorizationError.code || info.authorizationError.message : info.nameError;
    if (failure) this.authorizationError = failure;
    else this.authorized = true;
  }

  // Key material of this connection's handshake (Rust reports it when the agent logs keys,
  // as the handshake ends and before its outcome, a failed one's too): one 'keylog' event per
  // line, and on the agent with this socket, as Node's TLSSocket and https.Agent emit them.
  _onKeylog(lines) {
    const agent = this[kAgent];
    for (const line of keylogLines(lines)) {
      this.emit('keylog', line);
      agent.emit('keylog', line, this);
    }
  }

  // A 'keylog' listener on the socket has the agent log keys, as one on a Node TLSSocket turns
  // key logging on for it (added before the handshake, as in Node's 'socket' event, it sees
  // every line of it).
  on(event, listener) {
    if (event === 'keylog') this[kAgent]._logKeys();
    return super.on(event, listener);
  }

  addListener(event, listener) {
    return this.on(event, listener);
  }

  prependListener(event, listener) {
    if (event === 'keylog') this[kAgent]._logKeys();
    return super.prependListener(event, listener);
  }

  _failHandshake(err) {
    this[kInfo] = null;
    this.destroy(err);
  }

  // TLSSocket's: true until its handshake is done (and, here, the server's name checked).
  get secureConnecting() {
    return this[kConnecting];
  }

  getProtocol() {
    return this[kInfo] ? this[kInfo].protocol : null;
  }

  getCipher() {
    const info = this[kInfo];
    if (!info) return undefined;
    return { name: info.cipherName, standardName: info.cipherStandardName, version: info.protocol };
  }

  isSessionReused() {
    return Boolean(this[kInfo] && this[kInfo].resumed);
  }

  // In Node's shape (crypto.X509Certificate#toLegacyObject); with `detailed`, each carries its
  // issuer as `issuerCertificate`, as far as the server sent the chain and on to a trusted root
  // that issued its last, as OpenSSL links it whether or not the chain was verified (a pinning
  // check on a connection left unverified, `rejectUnauthorized: false`, walks it).
  getPeerCertificate(detailed) {
    const info = this[kInfo];
    if (!info || info.peerChain.length === 0) return {};
    return legacyCertificate(this._peerChain(Boolean(detailed)), Boolean(detailed));
  }

  getPeerX509Certificate() {
    const info = this[kInfo];
    if (!info || info.peerChain.length === 0) return undefined;
    return this._peerChain(false)[0];
  }

  // The peer's chain, parsed once; completed from the default trust once something asks for
  // its root (see verifiedChain).
  _peerChain(complete) {
    const kept = this[kPeerCerts];
    if (kept !== null && (kept.complete || !complete)) return kept.chain;
    const chain = verifiedChain(this[kInfo].peerChain, this[kOptions].ca, complete);
    this[kPeerCerts] = { chain, complete };
    return chain;
  }

  // The client certificate configured for the connection (sent or not, as OpenSSL keeps it),
  // in Node's legacy shape; {} without one, null once destroyed.
  getCertificate() {
    if (this.destroyed) return null;
    const info = this[kInfo];
    return info && info.localCert ? legacyCertificate([new crypto.X509Certificate(info.localCert)], false) : {};
  }

  getX509Certificate() {
    const info = this[kInfo];
    return info && info.localCert ? new crypto.X509Certificate(info.localCert) : undefined;
  }

  getSession() {
    return undefined;
  }

  getTLSTicket() {
    return undefined;
  }

  // The handshake's key exchange, as Node words it ({ type, name, size }); {} when there was
  // none (a TLS 1.2 resumption), null once destroyed.
  getEphemeralKeyInfo() {
    if (this.destroyed) return null;
    const info = this[kInfo];
    return info ? { ...info.ephemeral } : {};
  }

  getSharedSigalgs() {
    throw errors.tlsUnsupported('getSharedSigalgs()');
  }

  // rustls never renegotiates: there is nothing to turn off.
  disableRenegotiation() {}

  // rustls does not renegotiate: false, and the callback hears why (over TLS 1.3, OpenSSL's
  // error, as Node's socket gives it there).
  renegotiate(options, callback) {
    if (options === null || typeof options !== 'object') throw errors.invalidArgType('options', 'of type object', options);
    if (callback !== undefined && typeof callback !== 'function') throw errors.invalidArgType('callback', 'of type function', callback);
    if (this.destroyed) return false;
    if (callback) {
      const err = this.getProtocol() === 'TLSv1.3' ? errors.noRenegotiation() : errors.tlsUnsupported('renegotiate()');
      process.nextTick(callback, err);
    }
    return false;
  }

  // rustls's record size is its configuration's: false, as Node's answer to a size it cannot
  // set.
  setMaxSendFragment(size) {
    if (typeof size !== 'number') throw errors.invalidArgType('size', 'of type number', size);
    return false;
  }

  exportKeyingMaterial() {
    throw errors.tlsUnsupported('exportKeyingMaterial()');
  }

  getFinished() {
    throw errors.tlsUnsupported('getFinished()');
  }

  getPeerFinished() {
    throw errors.tlsUnsupported('getPeerFinished()');
  }

  // OpenSSL's trace of the handshake: rustls has none to print.
  enableTrace() {}
}

module.exports = {
  tlsOptions, hostHeaderOf, normalizeServerName, checkServerName, serverNameError, customIdentityCheck, rejectsUnauthorized,
  syncDefaultCa, NativeTlsSocket, keylogLines, legacyCertificate,
};
