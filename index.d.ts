// Type definitions for hyperagent.

import * as http from 'node:http';
import * as https from 'node:https';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { Duplex, Readable } from 'node:stream';
import { EventEmitter } from 'node:events';

/**
 * A keep-alive `http.Agent` whose pool, sockets and DNS live in Rust. Pass it as the `agent`
 * option of `http.request`, or to any client that takes an agent.
 */
declare class Agent extends http.Agent {
  constructor(options?: Agent.AgentOptions);
  readonly options: Agent.AgentOptions & { keepAlive: boolean; freeSocketTimeout: number; timeout: number; socketActiveTTL: number };
  /** How much sooner (ms) than a server's `Keep-Alive: timeout=N` hint a connection stops idling. */
  agentKeepAliveTimeoutBuffer: number;
  readonly sockets: NodeJS.ReadOnlyDict<net.Socket[]>;
  /**
   * Idle connections: `net.Socket`s, or for `agent.request()`'s, an `Agent.IdleConnection` (typed
   * `any` because `http.Agent` declares sockets only).
   */
  readonly freeSockets: NodeJS.ReadOnlyDict<any[]>;
}
interface Agent extends Agent.Members {}

/**
 * A keep-alive `https.Agent` whose pool, sockets, DNS and TLS (rustls) live in Rust: the
 * handshake and every record's encryption run off the JavaScript thread.
 */
declare class HttpsAgent extends https.Agent {
  constructor(options?: Agent.HttpsAgentOptions);
  readonly options: Agent.HttpsAgentOptions & { keepAlive: boolean; freeSocketTimeout: number; timeout: number; socketActiveTTL: number };
  /** How much sooner (ms) than a server's `Keep-Alive: timeout=N` hint a connection stops idling. */
  agentKeepAliveTimeoutBuffer: number;
  readonly sockets: NodeJS.ReadOnlyDict<tls.TLSSocket[]>;
  /**
   * Idle connections: `tls.TLSSocket`s, or for `agent.request()`'s, an `Agent.IdleConnection` (typed
   * `any` because `http.Agent` declares sockets only).
   */
  readonly freeSockets: NodeJS.ReadOnlyDict<any[]>;
  /**
   * `'keylog'`: a TLS handshake's key material, one line (NSS key log format, its line feed
   * included) per event, as Node's `https.Agent` emits it; `socket` is `null` for a connection
   * of `agent.request()`. Keys are kept once a listener is added, for later handshakes.
   */
  on(event: 'keylog', listener: (line: Buffer, socket: tls.TLSSocket | null) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once(event: 'keylog', listener: (line: Buffer, socket: tls.TLSSocket | null) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
}
/** `request()` speaks TLS (rustls) here. */
interface HttpsAgent extends Agent.Members {}

declare const AgentClass: typeof Agent;
declare const HttpsAgentClass: typeof HttpsAgent;
type AgentClass = Agent;

declare namespace Agent {
  /** What both agents add to Node's: agentkeepalive's statistics and the promise API. */
  /**
   * The counters. On an agent each may be assigned, as agentkeepalive's fields are: what is
   * assigned is the count from then on (`agent.requestCount = 0` resets it).
   */
  interface Counters {
    createSocketCount: number;
    createSocketErrorCount: number;
    closeSocketCount: number;
    errorSocketCount: number;
    timeoutSocketCount: number;
    requestCount: number;
  }

  interface Members extends Counters {
    /** Requests sent again after the keep-alive race (hyperagent's own counter). */
    replayCount: number;
    /** True when a counter changed since the last read of this property. */
    readonly statusChanged: boolean;
    readonly totalSocketCount: number;
    getCurrentStatus(): AgentStatus;
    /**
     * Graceful: requests from now on fail (`ERR_HYPERAGENT_AGENT_CLOSED`), those in flight or
     * waiting for a connection finish, then the agent is destroyed (its idle connections close).
     */
    close(): Promise<void>;
    close(callback: (err: null) => void): void;
    /**
     * Sends a request with HTTP spoken by hyper in Rust, on this agent's pool (limits and
     * statistics shared with `http.request`). Resolves when the response head arrives.
     */
    request(url: RequestUrl, options: RequestOptions & { responseHeaders: 'raw' }): Promise<RawHeadersResponse>;
    request(url: RequestUrl, options?: RequestOptions): Promise<Response>;
    /** The options in the object of the origin and path, as undici's `dispatcher.request()` takes them. */
    request(options: RequestOptions & UrlParts & { responseHeaders: 'raw' }): Promise<RawHeadersResponse>;
    request(options: RequestOptions & UrlParts): Promise<Response>;
  }

  /** A duration in milliseconds, or a string such as `'4s'`, `'1.5m'`, `'500ms'`. */
  type Duration = number | string;

  interface AgentOptions extends Omit<http.AgentOptions, 'timeout'> {
    /** Keep connections alive between requests. Default: `true` (agentkeepalive's default). */
    keepAlive?: boolean | undefined;
    /** Initial delay of TCP keep-alive probes on pooled connections. Default: `1000`. */
    keepAliveMsecs?: number | undefined;
    /** Connections per origin (busy or idle). Default: `Infinity`. */
    maxSockets?: number | undefined;
    /** Connections across all origins. Default: `Infinity`. */
    maxTotalSockets?: number | undefined;
    /** Idle connections kept per origin. Default: `256`. */
    maxFreeSockets?: number | undefined;
    /** Which idle connection a request takes: the most (`'lifo'`) or least (`'fifo'`) recently used. Default: `'lifo'`. */
    scheduling?: 'fifo' | 'lifo' | undefined;
    /** How long a connection may stay idle in the pool. Default: `4000` ms. */
    freeSocketTimeout?: Duration | undefined;
    /** Inactivity timeout of a connection in use; for `agent.request()`, the time a new connection may take to open (10 s when `0`). Default: `max(2 × freeSocketTimeout, 8000)` ms. */
    timeout?: Duration | undefined;
    /** Maximum lifetime of a connection; it is closed at the first release after this. Default: none. */
    socketActiveTTL?: Duration | undefined;
    /** Most requests an HTTP/1.1 connection carries: it is closed once that many are done, not reused (an HTTP/2 session is not limited by it). Default: `0`, no limit. */
    maxRequestsPerSocket?: number | undefined;
    /**
     * Environment variables that name an HTTP proxy (`HTTP_PROXY` / `http_proxy` for `Agent`,
     * `HTTPS_PROXY` / `https_proxy` for `HttpsAgent`; `NO_PROXY` / `no_proxy` for the hosts
     * that bypass it), as Node's agents take them (Node 24.5 on, later 22.x releases; where Node ignores it, so does the agent).
     * A proxy with an `https:` URL is reached over TLS, checked against the default trust.
     */
    proxyEnv?: { [name: string]: string | undefined } | undefined;
    /** Addresses not to connect to, as `net.connect` takes it (`ERR_IP_BLOCKED`). */
    blockList?: net.BlockList | undefined;
    /** Happy Eyeballs over a name's addresses, as `net.connect`; `false`: the first address only. Default: `net.getDefaultAutoSelectFamily()`. */
    autoSelectFamily?: boolean | undefined;
    /** How long (ms, at least 10) each address is tried alone before the next. Default: `net.getDefaultAutoSelectFamilyAttemptTimeout()`. */
    autoSelectFamilyAttemptTimeout?: number | undefined;
    /** How much sooner (ms) than a server's `Keep-Alive: timeout=N` a connection stops idling; with nothing left, it is not kept. Default: `1000`. */
    agentKeepAliveTimeoutBuffer?: number | undefined;
    /** Disable Nagle's algorithm on new connections. Default: `true`. */
    noDelay?: boolean | undefined;
    /** Send an idempotent request again when a reused connection dies before answering. Default: `true`. */
    replay?: boolean | undefined;
    /** Largest request, in bytes, kept for a replay. Default: `65536`. */
    replayLimit?: number | undefined;
    /**
     * `agent.request()` (and a `Dispatcher` over this agent) speaks HTTP/2 without TLS, by prior
     * knowledge (h2c), to every origin of this agent. `http.request` stays on HTTP/1.1. Default: `false`.
     */
    h2c?: boolean | undefined;
    /** @deprecated use `freeSocketTimeout`. */
    freeSocketKeepAliveTimeout?: Duration | undefined;
    /** @deprecated use `freeSocketTimeout`. */
    keepAliveTimeout?: Duration | undefined;
  }

  /**
   * `https.Agent` options plus the agent options above. TLS options follow `tls.connect`:
   * `ca` replaces the default roots (what Node trusts by default: see the README); `cert`/`key`
   * (PEM, several pairs allowed; `passphrase` for encrypted keys) or `pfx` (PKCS#12, with
   * `passphrase`) for mutual TLS; `crl` for revocation checks; TLS 1.2 and 1.3 only;
   * `secureContext` is not supported (`ERR_HYPERAGENT_UNSUPPORTED`).
   */
  interface HttpsAgentOptions extends Omit<https.AgentOptions, 'timeout'>, Omit<AgentOptions, keyof http.AgentOptions | 'timeout'> {
    timeout?: Duration | undefined;
    /** TLS sessions kept for resumption. Default: `100`; `0` turns resumption off. */
    maxCachedSessions?: number | undefined;
    /**
     * `agent.request()` (and a `Dispatcher` over this agent) offers HTTP/2 in ALPN, ahead of
     * HTTP/1.1: a server that chooses it gets one connection per origin carrying many requests
     * at once. `http.request` stays on HTTP/1.1. Default: `false`.
     */
    allowH2?: boolean | undefined;
  }

  /**
   * A URL as a string, a `URL`, or an origin and a path: the path (starting with `/`) goes to
   * that origin as given, whatever it looks like.
   */
  type RequestUrl = string | URL | UrlParts;

  /** An origin (`'https://host:port'`) and a path of it. */
  interface UrlParts {
    origin: string;
    path?: string | undefined;
  }

  /** Request bodies `agent.request()` takes. */
  type RequestBody =
    | string
    | Buffer
    | Uint8Array
    | ArrayBuffer
    | Blob
    | FormData
    | URLSearchParams
    | NodeJS.ReadableStream
    | AsyncIterable<Uint8Array | ArrayBuffer | string>
    | Iterable<Uint8Array | ArrayBuffer | string>
    | null;

  interface RequestOptions {
    /** Default: `'GET'`. A valid HTTP token, upper-cased as Node's http does; not `CONNECT` (use `http.request()` with the agent to tunnel). */
    method?: string;
    /** An object (array values repeat the header), a flat `[name, value, ...]` array, or an iterable of `[name, value]` pairs (a `Headers`, a `Map`). No `upgrade` header (use `http.request()` with the agent to upgrade); no `transfer-encoding` or `keep-alive` header, and a `connection` header must be one comma-separated list of tokens (as undici requires). */
    headers?:
      | Record<string, string | number | readonly string[] | undefined>
      | readonly string[]
      | Iterable<readonly [string, string | number | readonly string[] | undefined]>;
    /** Added to the path as undici adds it (`querystring.stringify`); the URL must then have no query of its own. */
    query?: Record<string, string | number | boolean | bigint | readonly (string | number | boolean | bigint)[] | null | undefined>;
    /** Sent with `content-length` when its length is known (a Blob's too, with its type as `content-type`; a `FormData` or `URLSearchParams` as fetch sends it), chunked otherwise. Bytes (a Buffer, typed array or ArrayBuffer) are copied when `request()` is called: they are yours again at once, to change, transfer or detach. */
    body?: RequestBody;
    /** `HttpsAgent`: this request's server name (SNI, and the name its certificate is checked for). */
    servername?: string;
    /**
     * Trailers after the body (the body then goes chunked, without a `content-length`): given as
     * headers are, or a function giving them (or a promise of them) once a streamed body has
     * been read to its end. Over HTTP/1.1 a `trailer` header names them (made for you from an
     * object; give it yourself with a function).
     */
    trailers?: Record<string, string | string[]> | Iterable<[string, string]> | (() => Record<string, string | string[]> | Promise<Record<string, string | string[]>>) | null;
    /** Aborts at any stage; the promise rejects (or the body errors) with the signal's reason. */
    signal?: AbortSignal;
    /** Time allowed for the response head once the request is on its connection, in ms (over 1000, checked every 500 ms); with a streamed body, from its last progress, never counting a wait on a slow source (as undici). Default: `300000` (as undici). */
    headersTimeout?: number;
    /**
     * Time allowed between body chunks, in ms; also how long the rest of a request body may take
     * to go out once the response is complete (the connection is closed after it). Default:
     * `300000` (as undici).
     */
    bodyTimeout?: number;
    /** Largest response head accepted, in bytes; the agent keeps it for its later requests. Default: Node's `http.maxHeaderSize` (`16384`, or `--max-http-header-size`). */
    maxResponseHeaderSize?: number;
    /** As undici's: handed back as `res.opaque`. */
    opaque?: unknown;
    /** As undici's: `true` sends `connection: close` (unless a connection header is given), and the connection is not used again. */
    reset?: boolean | null;
    /** As undici's: `'raw'` makes `res.headers` the `[name, value, ...]` list (`res.rawHeaders`). */
    responseHeaders?: 'raw' | null;
    /**
     * As undici's: called with each informational (1xx) response that comes before the final one
     * (a `103 Early Hints`, `102 Processing`, a `100 Continue`), in the request's async context,
     * before the promise resolves; its headers are a list with `responseHeaders: 'raw'`. What it
     * throws rejects the request.
     */
    onInfo?: ((info: InformationalResponse) => void) | null;
    /** The body stream's `highWaterMark` (an integer >= 0). Default: a `Readable`'s. */
    highWaterMark?: number | null;
  }

  /** An informational (1xx) response, as `onInfo` gets it. */
  interface InformationalResponse {
    statusCode: number;
    headers: http.IncomingHttpHeaders | string[];
  }

  /** What the bodies of both request APIs have: a Node Readable with back-pressure, plus body mixins. */
  interface BodyMixins extends Readable {
    /** Whether anything has read from the body (or destroyed it), as undici's `bodyUsed`. */
    readonly bodyUsed: boolean;
    text(): Promise<string>;
    json(): Promise<unknown>;
    arrayBuffer(): Promise<ArrayBuffer>;
    blob(): Promise<import('node:buffer').Blob>;
    /** The whole body in a Uint8Array of its own. */
    bytes(): Promise<Uint8Array>;
    /** As undici's: not supported (`ERR_HYPERAGENT_UNSUPPORTED`); fetch's Response parses forms. */
    formData(): Promise<never>;
    /**
     * As undici's body: the bytes as a web ReadableStream, made when first asked for. It reads
     * the body only as it is read; once a reader has it, `text()` and the like refuse the body.
     * Typed as undici's types have it (`undefined`), so that a `Dispatcher` stays one of
     * undici's: `body.body as unknown as ReadableStream<Uint8Array>`.
     */
    readonly body: undefined;
    destroy(error?: Error): this;
  }

  /** The response body of `agent.request()`. */
  interface ResponseBody extends BodyMixins {
    /**
     * Reads the body to its end and drops it, so that its connection goes back to the pool; a
     * body longer than `limit` bytes (default 131072) is destroyed instead, closing its
     * connection. Resolves `null` once the body has closed; rejects only when `signal` aborts.
     */
    dump(options?: { limit?: number; signal?: AbortSignal }): Promise<null>;
  }

  /** The response body of `dispatcher.request()`: the same, its `dump()` typed as undici's. */
  interface DispatcherResponseBody extends BodyMixins {
    /** As `agent.request()`'s body's (it resolves `null`). */
    dump(options?: { limit?: number; signal?: AbortSignal }): Promise<void>;
  }

  interface Response {
    statusCode: number;
    /** The reason phrase; `''` over HTTP/2, which has none. */
    statusMessage: string;
    /** `'2.0'` when the response came over HTTP/2, `'1.1'` otherwise. */
    httpVersion: '1.1' | '2.0';
    /** The same, by undici's name. */
    readonly statusText: string;
    /** The request's `opaque` option; `null` without one. */
    opaque: unknown;
    /** Lower-case names; duplicates joined as Node joins them, `set-cookie` an array. */
    headers: http.IncomingHttpHeaders;
    /** `[name, value, ...]`, names lower-case; a repeated name's values together, in the order each name first came. */
    rawHeaders: string[];
    /** Filled when the body ends. */
    trailers: NodeJS.Dict<string>;
    body: ResponseBody;
  }

  /** A response to a request made with `responseHeaders: 'raw'`. */
  interface RawHeadersResponse extends Omit<Response, 'headers'> {
    headers: string[];
  }

  /** agentkeepalive's statistics, with the same keys in the same order. */
  interface AgentStatus extends Counters {
    /** Idle connections per origin name. */
    freeSockets: Record<string, number>;
    /** Connections in use (or connecting) per origin name. */
    sockets: Record<string, number>;
    /** Requests waiting for a connection (or an HTTP/2 stream) per origin name. */
    requests: Record<string, number>;
    /**
     * HTTP/2 connections (counted in `sockets` too) and their streams in use, per origin name;
     * only for an agent with `allowH2` or `h2c` (the others have agentkeepalive's keys alone).
     */
    http2?: Record<string, { sessions: number; streams: number }>;
  }

  /** The error codes hyperagent's own states carry. */
  type HyperagentErrorCode =
    | 'ERR_HYPERAGENT_AGENT_DESTROYED'
    | 'ERR_HYPERAGENT_AGENT_CLOSED'
    | 'ERR_HYPERAGENT_UNSUPPORTED'
    | 'ERR_HYPERAGENT_HEADERS_TIMEOUT'
    | 'ERR_HYPERAGENT_BODY_TIMEOUT'
    | 'ERR_HYPERAGENT_CONTENT_LENGTH_MISMATCH'
    | 'ERR_HYPERAGENT_HTTP'
    | 'ERR_HYPERAGENT_INTERNAL';

  /** A malformed response, named as Node's parser (llhttp) names it. */
  type ParseErrorCode =
    | 'HPE_HEADER_OVERFLOW'
    | 'HPE_INVALID_STATUS'
    | 'HPE_INVALID_VERSION'
    | 'HPE_INVALID_HEADER_TOKEN'
    | 'HPE_INVALID_CONTENT_LENGTH'
    | 'HPE_INVALID_TRANSFER_ENCODING'
    | 'HPE_INVALID_CHUNK_SIZE'
    | 'HPE_STRICT'
    | 'HPE_INVALID_CONSTANT';

  /** Certificate verification failures, with OpenSSL's names as Node reports them. */
  type TlsErrorCode =
    | 'DEPTH_ZERO_SELF_SIGNED_CERT'
    | 'SELF_SIGNED_CERT_IN_CHAIN'
    | 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'
    | 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'
    | 'CERT_HAS_EXPIRED'
    | 'CERT_NOT_YET_VALID'
    | 'CERT_SIGNATURE_FAILURE'
    | 'CERT_REJECTED'
    | 'CERT_REVOKED'
    | 'UNABLE_TO_GET_CRL'
    | 'CRL_HAS_EXPIRED'
    | 'CRL_SIGNATURE_FAILURE'
    | 'ERR_TLS_CERT_ALTNAME_INVALID'
    | 'ERR_TLS_INVALID_PROTOCOL_VERSION'
    | 'ERR_TLS_PROTOCOL_VERSION_CONFLICT'
    | `ERR_SSL_${string}`;

  /**
   * TLS options that cannot be used (a `ca`, `cert`, `key`, `pfx` or `crl` that cannot be
   * read, a key that does not match its certificate): thrown when a request first needs them.
   */
  type TlsOptionsErrorCode =
    | 'ERR_CRYPTO_OPERATION_FAILED'
    | 'ERR_CRYPTO_UNSUPPORTED_OPERATION'
    | `ERR_OSSL_${string}`;

  /** Error codes a request through a hyperagent agent can fail with. */
  type ErrorCode =
    | HyperagentErrorCode
    | TlsErrorCode
    | TlsOptionsErrorCode
    | ParseErrorCode
    | 'ERR_INVALID_HTTP_TOKEN'
    | 'ERR_INVALID_CHAR'
    | 'ERR_UNESCAPED_CHARACTERS'
    | 'ERR_INVALID_PROTOCOL'
    | 'ERR_INVALID_URL'
    | 'ERR_INVALID_IP_ADDRESS'
    | 'ERR_IP_BLOCKED'
    | 'EPROTO'
    | 'ERR_SOCKET_TIMEOUT'
    | 'ERR_PROXY_TUNNEL'
    | 'ECONNREFUSED'
    | 'ECONNRESET'
    | 'ETIMEDOUT'
    | 'ENOTFOUND'
    | 'EAI_AGAIN'
    | 'EHOSTUNREACH'
    | 'ENETUNREACH'
    | 'EADDRNOTAVAIL'
    | 'EPIPE'
    | 'ENOENT';

  interface HyperagentError extends Error {
    code: ErrorCode;
    errno?: number;
    syscall?: string;
    address?: string;
    port?: number;
    hostname?: string;
    /** For `ERR_SOCKET_TIMEOUT` and `ERR_HYPERAGENT_HEADERS_TIMEOUT`/`_BODY_TIMEOUT`: the timeout that expired, in ms. */
    timeout?: number;
    /** A request that failed before any response: whether any of it was sent. */
    requestSent?: boolean;
    /** For `ERR_PROXY_TUNNEL`: the status the proxy refused the tunnel with. */
    statusCode?: number;
    /** For `ERR_PROXY_TUNNEL`: the timeout the tunnel did not open within, in ms. */
    proxyTunnelTimeout?: number;
    /** For `ERR_TLS_CERT_ALTNAME_INVALID`: why, for which host, and the peer's certificate. */
    reason?: string;
    host?: string;
    cert?: tls.PeerCertificate;
  }

  /**
   * An idle connection of `agent.request()` in `agent.freeSockets` (it has no socket): an
   * `EventEmitter` with agentkeepalive's socket symbols, emitting `'timeout'` (when it
   * expires) and `'close'`.
   */
  interface IdleConnection extends NodeJS.EventEmitter {
    /** How long (ms) it may idle. */
    readonly timeout: number;
    readonly destroyed: boolean;
    /** Closes the connection if it still idles. */
    destroy(error?: Error): this;
    readonly [key: symbol]: unknown;
  }

  /** agentkeepalive's `constants` symbols. */
  interface Constants {
    readonly CURRENT_ID: symbol;
    readonly CREATE_ID: symbol;
    readonly INIT_SOCKET: symbol;
    readonly CREATE_HTTPS_CONNECTION: symbol;
    readonly SOCKET_CREATED_TIME: symbol;
    readonly SOCKET_NAME: symbol;
    readonly SOCKET_REQUEST_COUNT: symbol;
    readonly SOCKET_REQUEST_FINISHED_COUNT: symbol;
  }

  type HttpOptions = AgentOptions;
  type HttpAgent = AgentClass;
  /** The class itself, under the names agentkeepalive users import. */
  const Agent: typeof AgentClass;
  type Agent = AgentClass;
  const HttpAgent: typeof AgentClass;
  const HttpsAgent: typeof HttpsAgentClass;
  type HttpsAgent = InstanceType<typeof HttpsAgentClass>;
  type HttpsOptions = HttpsAgentOptions;
  const constants: Constants;
  /**
   * undici's Dispatcher contract over the agents' pools: Node's built-in `fetch` and undici's
   * `request`/`stream`/`pipeline`/`fetch` take it as their `dispatcher`. Options are the
   * agents' (with the TLS options of `HttpsAgent` for `https:` origins), or `http`/`https`: the
   * agents to share.
   */
  class Dispatcher extends EventEmitter {
    constructor(options?: DispatcherOptions);
    /** The agents carrying its requests (made on first use unless given). */
    readonly http: AgentClass;
    readonly https: InstanceType<typeof HttpsAgentClass>;
    /** undici Agent's `stats`: by origin, the agents' connections and requests to it. */
    readonly stats: Record<string, DispatcherStats>;
    /** `close()` or `destroy()` was called. */
    readonly closed: boolean;
    readonly destroyed: boolean;
    /** What undici's WebSocket and EventSource read of the options (undici's defaults filled in). */
    readonly webSocketOptions: { maxFragments: number; maxPayloadSize: number };
    readonly eventSourceOptions: { maxEventSize: number };
    /** Starts the request `options` describes; `handler` (either of undici's handler APIs) hears of it. */
    dispatch(options: DispatchOptions, handler: DispatchHandler): boolean;
    /**
     * undici's `dispatcher.request()`: the request `options` describes (its `origin` an `http:` or
     * `https:` origin), answered as `agent.request()` answers (`statusCode`, `headers`,
     * `trailers`, `opaque`, `body`). Not an upgrade or a `CONNECT` (use `http.request()` with the
     * agent).
     */
    request<TOpaque = null>(options: DispatcherRequestOptions<TOpaque> & { responseHeaders: 'raw' }): Promise<DispatcherRawHeadersResponse<TOpaque>>;
    request<TOpaque = null>(options: DispatcherRequestOptions<TOpaque>): Promise<DispatcherResponse<TOpaque>>;
    request<TOpaque = null>(options: DispatcherRequestOptions<TOpaque>, callback: (err: Error | null, data: DispatcherResponse<TOpaque>) => void): void;
    /**
     * undici's `dispatcher.stream()`: the response body written into the Writable `factory` gives;
     * resolves once it is all written.
     */
    stream<TOpaque = null>(options: DispatcherRequestOptions<TOpaque>, factory: StreamFactory<TOpaque>): Promise<StreamData<TOpaque>>;
    stream<TOpaque = null>(options: DispatcherRequestOptions<TOpaque>, factory: StreamFactory<TOpaque>, callback: (err: Error | null, data: StreamData<TOpaque>) => void): void;
    /**
     * undici's `dispatcher.pipeline()`: a Duplex whose writes are the request body and whose
     * reads are what `handler` makes of the response (its `body`, transformed, say).
     */
    pipeline<TOpaque = null>(options: DispatcherRequestOptions<TOpaque>, handler: (data: PipelineHandlerData<TOpaque>) => NodeJS.ReadableStream): Duplex;
    /**
     * undici's `dispatcher.upgrade()`: the socket once the server switched protocols (101), on
     * an agent's own connection. `protocol` is the `upgrade` header (default `'Websocket'`).
     */
    upgrade<TOpaque = null>(options: UpgradeOptions<TOpaque>): Promise<UpgradeData<TOpaque>>;
    upgrade<TOpaque = null>(options: UpgradeOptions<TOpaque>, callback: (err: Error | null, data: UpgradeData<TOpaque>) => void): void;
    /** undici's `dispatcher.connect()`: a `CONNECT`'s socket once the server answered, with its status (2xx: the tunnel is open; a refusal's body is read from the socket); `path` is `host:port`. */
    connect<TOpaque = null>(options: ConnectOptions<TOpaque>): Promise<ConnectData<TOpaque>>;
    connect<TOpaque = null>(options: ConnectOptions<TOpaque>, callback: (err: Error | null, data: ConnectData<TOpaque>) => void): void;
    /** Graceful: refuses new requests, lets those in flight finish, then closes its own agents. */
    close(): Promise<void>;
    close(callback: (err: Error | null) => void): void;
    /** At once: requests in flight fail with `err` (`UND_ERR_DESTROYED` when none). */
    destroy(err?: Error | null): Promise<void>;
    destroy(callback: (err: Error | null) => void): void;
    destroy(err: Error | null, callback: (err: Error | null) => void): void;
    /** undici's interceptors (`(dispatch) => (options, handler) => boolean`), as undici composes them:
     * each wraps those before it, so the last is called first; each is given a handler of the newer
     * API (`onRequestStart` ...), whichever API the caller's has. */
    compose(interceptors: DispatchInterceptor[]): this;
    compose(...interceptors: DispatchInterceptor[]): this;
    /** undici's connection events, for its agents' `agent.request()` connections; `targets` is
     * `[dispatcher]`. */
    on(event: 'connect', listener: (origin: URL, targets: readonly Dispatcher[]) => void): this;
    on(event: 'disconnect' | 'connectionError', listener: (origin: URL, targets: readonly Dispatcher[], error: Error & { code: string }) => void): this;
    on(event: 'drain', listener: (origin: URL) => void): this;
    on(event: string | symbol, listener: (...args: any[]) => void): this;
    once(event: 'connect', listener: (origin: URL, targets: readonly Dispatcher[]) => void): this;
    once(event: 'disconnect' | 'connectionError', listener: (origin: URL, targets: readonly Dispatcher[], error: Error & { code: string }) => void): this;
    once(event: 'drain', listener: (origin: URL) => void): this;
    once(event: string | symbol, listener: (...args: any[]) => void): this;
    listeners(event: 'connect'): ((origin: URL, targets: readonly DispatcherLike[]) => void)[];
    listeners(event: 'disconnect' | 'connectionError'): ((origin: URL, targets: readonly DispatcherLike[], error: Error & { code: string }) => void)[];
    listeners(event: 'drain'): ((origin: URL) => void)[];
    listeners(event: string | symbol): Function[];
    rawListeners(event: 'connect'): ((origin: URL, targets: readonly DispatcherLike[]) => void)[];
    rawListeners(event: 'disconnect' | 'connectionError'): ((origin: URL, targets: readonly DispatcherLike[], error: Error & { code: string }) => void)[];
    rawListeners(event: 'drain'): ((origin: URL) => void)[];
    rawListeners(event: string | symbol): Function[];
  }

  interface DispatcherOptions extends HttpsAgentOptions {
    /** An `Agent` to carry `http:` requests (shared: `close()` leaves it open). */
    http?: AgentClass | undefined;
    /** An `HttpsAgent` to carry `https:` requests. */
    https?: InstanceType<typeof HttpsAgentClass> | undefined;
    /** Each request's headers and body timeouts (ms) unless it gives its own, as undici's `Agent` takes them. Default: 300000. */
    headersTimeout?: number | undefined;
    bodyTimeout?: number | undefined;
    // undici Agent's options, meaning here what they mean there (see the README).
    /** undici's: `maxSockets` (`null` or `0`: no limit). */
    connections?: number | null | undefined;
    /** undici's: how long a connection may stay idle, `freeSocketTimeout`. */
    keepAliveTimeout?: Duration | undefined;
    /** undici's: `agentKeepAliveTimeoutBuffer`. */
    keepAliveTimeoutThreshold?: number | undefined;
    /** undici's: `socketActiveTTL`. */
    clientTtl?: number | null | undefined;
    /** undici's: `maxRequestsPerSocket` (`null`: no limit). */
    maxRequestsPerClient?: number | null | undefined;
    /** undici's: the largest response head (bytes); a longer one fails with `HPE_HEADER_OVERFLOW`. */
    maxHeaderSize?: number | undefined;
    /** undici's: TLS and socket options of the agents (`keepAliveInitialDelay` is `keepAliveMsecs`);
     * `keepAlive` and `timeout` change nothing. A connector function is refused. */
    connect?: DispatcherConnectOptions | undefined;
    /** undici's: `0` turns keep-alive off (the agents' `keepAlive: false`); other values are
     * taken and change nothing here (see the README). */
    pipelining?: number | undefined;
    /** undici's tuning, taken and changing nothing here (see the README). */
    keepAliveMaxTimeout?: number | undefined;
    maxConcurrentStreams?: number | undefined;
    strictContentLength?: boolean | undefined;
    /** Taken and changing nothing, as undici 7's and 8's `Agent` take it: no redirect is
     * followed (compose undici's `redirect` interceptor). */
    maxRedirections?: number | undefined;
    /** undici's: the most body bytes a response may have; a longer one fails with undici's
     * `UND_ERR_RES_EXCEEDED_MAX_SIZE`. Default: `-1` (no limit). */
    maxResponseSize?: number | null | undefined;
    /** undici's: the most origins the agents hold connections or requests of; a request to
     * another fails with `UND_ERR_MAX_ORIGINS_REACHED`. Default: `Infinity`. */
    maxOrigins?: number | undefined;
    /** undici's limits of a WebSocket opened through it (`0`: no limit). Defaults: 131072
     * fragments, 128 MiB. */
    webSocket?: { maxFragments?: number | undefined; maxPayloadSize?: number | undefined } | undefined;
    /** undici's limit of an EventSource's event (bytes). */
    eventSource?: { maxEventSize?: number | undefined } | undefined;
  }

  /** An origin's connections and requests, as undici's `PoolStats` counts them. */
  interface DispatcherStats {
    /** Open connections (an HTTP/2 session is one). */
    connected: number;
    /** Connections that take a request now: idle ones, and HTTP/2 sessions. */
    free: number;
    /** Requests waiting for a connection (`queued` too: none waits on a connection). */
    pending: number;
    queued: number;
    /** Requests on connections. */
    running: number;
    /** `pending` and `running`. */
    size: number;
  }

  /** undici's `connect` options as a `Dispatcher` takes them. */
  interface DispatcherConnectOptions extends Omit<HttpsAgentOptions, 'keepAlive' | 'timeout'> {
    keepAliveInitialDelay?: number | undefined;
    keepAlive?: boolean | null | undefined;
    timeout?: number | null | undefined;
  }

  /** A FormData of any copy of undici's (the global one, or the undici package's): its entries
   * are sent multipart/form-data encoded. */
  interface FormDataLike {
    readonly [Symbol.toStringTag]: string;
    [Symbol.iterator](): Iterator<[string, unknown]>;
  }

  /** What undici's `dispatch()` is given: the request. */
  interface DispatchOptions {
    /** Required (an `http:` or `https:` origin); optional in the type, as undici's has it. */
    origin?: string | URL | undefined;
    path: string;
    method: string;
    headers?: Record<string, string | string[] | undefined> | string[] | Iterable<[string, string | string[] | undefined]> | null | undefined;
    body?: string | Buffer | Uint8Array | NodeJS.ReadableStream | AsyncIterable<Uint8Array | string> | Blob | FormData | FormDataLike | null | undefined;
    query?: Record<string, unknown> | undefined;
    headersTimeout?: number | null | undefined;
    bodyTimeout?: number | null | undefined;
    reset?: boolean | undefined;
    upgrade?: string | boolean | null | undefined;
    /** undici's, taken and not acted on: the agents' own rules decide what is sent again
     * (`idempotent`), requests are never held behind one another (`blocking`), and
     * `expect: 100-continue` goes as a header (`expectContinue`). No status is an error:
     * `dispatch()` ignores `throwOnError`, `request()` refuses it `true` (check `statusCode`). */
    idempotent?: boolean | undefined;
    blocking?: boolean | undefined;
    typeOfService?: number | null | undefined;
    throwOnError?: boolean | undefined;
    expectContinue?: boolean | undefined;
  }

  /** What `dispatcher.request()`, `stream()` and `pipeline()` take: the request, and `agent.request()`'s options of undici's. */
  interface DispatcherRequestOptions<TOpaque = null> extends DispatchOptions, Pick<RequestOptions, 'highWaterMark' | 'servername'> {
    /** Each informational (1xx) response before the final one. */
    onInfo?(info: InformationalResponse): void;
    /**
     * An AbortSignal or, as undici takes it, an EventEmitter whose 'abort' event aborts; anything
     * else fails with `ERR_INVALID_ARG_TYPE`. Typed `unknown`, as undici's own types have it.
     */
    signal?: unknown;
    /** Given back with the response. */
    opaque?: TOpaque | undefined;
    responseHeaders?: 'raw' | null | undefined;
  }

  /** A response of `dispatcher.request()`: `agent.request()`'s, with undici's `context`. */
  interface DispatcherResponse<TOpaque = null> extends Omit<Response, 'opaque' | 'trailers' | 'body'> {
    opaque: TOpaque;
    body: DispatcherResponseBody;
    /** Filled when the body ends. */
    trailers: Record<string, string>;
    /** undici's: what the interceptors of a composed dispatcher share of the request (a
     * redirect's `history`). null when none gave one, as undici 8's; typed as undici types it. */
    context: object;
  }

  /** A response of `dispatcher.request()` with `responseHeaders: 'raw'`. */
  interface DispatcherRawHeadersResponse<TOpaque = null> extends Omit<DispatcherResponse<TOpaque>, 'headers'> {
    headers: string[];
  }

  /** Gives the Writable that `dispatcher.stream()` writes a response body into. */
  type StreamFactory<TOpaque = null> = (data: { statusCode: number; headers: http.IncomingHttpHeaders; opaque: TOpaque; context: object }) => NodeJS.WritableStream;

  interface StreamData<TOpaque = null> {
    opaque: TOpaque;
    trailers: Record<string, string>;
  }

  interface PipelineHandlerData<TOpaque = null> {
    statusCode: number;
    headers: http.IncomingHttpHeaders;
    opaque: TOpaque;
    body: DispatcherResponseBody;
    context: object;
  }

  interface UpgradeOptions<TOpaque = null> {
    /** Required: without it the call fails with `ERR_INVALID_ARG_TYPE`. Typed optional because
     * undici 6's types (those `@types/node` 20 carries) have no `origin` here. */
    origin?: string | URL;
    path: string;
    /** Default: `'GET'`. */
    method?: string;
    headers?: DispatchOptions['headers'];
    /** The `upgrade` header. Default: `'Websocket'`. */
    protocol?: string;
    /** An AbortSignal or, as undici takes it, an EventEmitter whose 'abort' event aborts (typed
     * `unknown`, as undici's own types have it). */
    signal?: unknown;
    opaque?: TOpaque;
    servername?: string;
  }

  interface UpgradeData<TOpaque = null> {
    headers: http.IncomingHttpHeaders;
    socket: Duplex;
    opaque: TOpaque;
  }

  type ConnectOptions<TOpaque = null> = Omit<UpgradeOptions<TOpaque>, 'method' | 'protocol'>;

  interface ConnectData<TOpaque = null> extends UpgradeData<TOpaque> {
    statusCode: number;
  }

  /** What dispatches requests (a `Dispatcher`, or undici's own): the `targets` of connection events. */
  interface DispatcherLike {
    dispatch(options: DispatchOptions, handler: DispatchHandler): boolean;
  }

  /** A `dispatch` as interceptors take and give it. Its parameters are compared both ways (a
   * method's, not a function's), so that undici's own interceptors, whose options are typed
   * narrower than these, compose on a `Dispatcher`. */
  type DispatchFunction = { dispatch(options: DispatchOptions, handler: DispatchHandler): boolean }['dispatch'];
  type DispatchInterceptor = (dispatch: DispatchFunction) => DispatchFunction;

  /** The newer handler API's controller of one request. */
  interface DispatchController {
    readonly paused: boolean;
    readonly aborted: boolean;
    readonly reason: Error | null;
    readonly rawHeaders: Buffer[] | null;
    readonly rawTrailers: Buffer[] | null;
    pause(): void;
    resume(): void;
    abort(reason?: Error): void;
  }

  /** Either of undici's handler APIs: the older one Node 20 to 24's fetch calls, or the newer one with a controller (Node 26's). */
  interface DispatchHandler {
    onConnect?(abort: (reason?: Error) => void): void;
    onResponseStarted?(): void;
    onHeaders?(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean;
    onData?(chunk: Buffer): boolean;
    /** `trailers`: Buffers, as undici's own clients give them (undici 7's types say strings). */
    onComplete?(trailers: Buffer[] | string[] | null): void;
    onError?(err: Error): void;
    /** The older API's upload progress: the request body all handed to the connection. Each
     * piece of it goes to `onBodySent(chunk)` before (a Buffer, as undici's clients pass it;
     * undici's types declare other arguments, so it is not typed here). */
    onRequestSent?(): void;
    /** An upgrade's (or a `CONNECT`'s) socket, on an agent's own connection. */
    onUpgrade?(statusCode: number, rawHeaders: Buffer[], socket: Duplex): void;
    onRequestUpgrade?(controller: DispatchController, statusCode: number, headers: http.IncomingHttpHeaders, socket: Duplex): void;
    onRequestStart?(controller: DispatchController, context: object): void;
    onResponseStart?(controller: DispatchController, statusCode: number, headers: Record<string, string | string[]>, statusMessage: string): void;
    onResponseData?(controller: DispatchController, chunk: Buffer): void;
    onResponseEnd?(controller: DispatchController, trailers: Record<string, string | string[]>): void;
    onResponseError?(controller: DispatchController, err: Error): void;
  }

  /** Makes `dispatcher` the one Node's built-in fetch (and undici's `getGlobalDispatcher()`) uses. */
  function setGlobalDispatcher(dispatcher: { dispatch: DispatchFunction }): void;
  /** The dispatcher Node's built-in fetch uses now. */
  function getGlobalDispatcher(): { dispatch: DispatchFunction };

  /** `agent.request()` on a default `Agent` or `HttpsAgent`, by the URL's protocol. */
  function request(url: RequestUrl, options: RequestOptions & { responseHeaders: 'raw' }): Promise<RawHeadersResponse>;
  function request(url: RequestUrl, options?: RequestOptions): Promise<Response>;
  function request(options: RequestOptions & UrlParts & { responseHeaders: 'raw' }): Promise<RawHeadersResponse>;
  function request(options: RequestOptions & UrlParts): Promise<Response>;
}

/** `require('hyperagent-rs')` is the `Agent` class, as agentkeepalive's default export is. */
export = Agent;
