// Compiled with `tsc --noEmit` by `npm run test:types`: the public API as a CommonJS user sees it.
import http = require('node:http');
import net = require('node:net');
import fs = require('node:fs');
import hyperagent = require('../..');
import undici = require('undici');
import type * as UndiciTypes6 from 'undici-types';
import events = require('node:events');

const agent = new hyperagent.Agent({
  keepAlive: true,
  keepAliveMsecs: 1000,
  maxSockets: 50,
  maxTotalSockets: 100,
  maxFreeSockets: 10,
  scheduling: 'fifo',
  freeSocketTimeout: '4s',
  timeout: 8000,
  socketActiveTTL: '10m',
  maxRequestsPerSocket: 1000,
  agentKeepAliveTimeoutBuffer: 500,
  proxyEnv: process.env,
});
const hintBuffer: number = agent.agentKeepAliveTimeoutBuffer;
const asDefault: hyperagent.Agent = new hyperagent({ keepAlive: false });
const asHttpAgent: http.Agent = new hyperagent.HttpAgent();

http.get('http://127.0.0.1/', { agent }, (res: http.IncomingMessage) => {
  res.resume();
});

const status: hyperagent.AgentStatus = agent.getCurrentStatus();
const counts: number[] = [
  status.createSocketCount,
  status.createSocketErrorCount,
  status.closeSocketCount,
  status.errorSocketCount,
  status.timeoutSocketCount,
  status.requestCount,
  agent.createSocketCount,
  agent.requestCount,
  agent.totalSocketCount,
  agent.replayCount,
];
const free: Record<string, number> = status.freeSockets;
for (const idle of (agent.freeSockets['localhost:80:'] ?? []) as Array<net.Socket | hyperagent.IdleConnection>) {
  const ms: number | undefined = idle.timeout;
  idle.once('close', () => {});
  idle.destroy();
  void ms;
}
const changed: boolean = agent.statusChanged;
const name: symbol = hyperagent.constants.SOCKET_NAME;
const timeoutMs: number = agent.options.timeout;

function onError(err: hyperagent.HyperagentError) {
  if (err.code === 'ERR_SOCKET_TIMEOUT' || err.code === 'ECONNREFUSED') return err.syscall;
  if (err.code === 'ERR_PROXY_TUNNEL') return [err.statusCode, err.proxyTunnelTimeout];
  // A lookup's answer that is not an IP address, and the agent's own fallbacks.
  if (err.code === 'ERR_INVALID_IP_ADDRESS' || err.code === 'ERR_HYPERAGENT_INTERNAL') return err.message;
  // A malformed chunked body.
  if (err.code === 'HPE_INVALID_CHUNK_SIZE' || err.code === 'HPE_STRICT') return err.message;
  // @ts-expect-error not a code hyperagent gives
  if (err.code === 'ERR_NOT_A_CODE') return undefined;
  return undefined;
}

// @ts-expect-error scheduling is 'fifo' or 'lifo'
new hyperagent.Agent({ scheduling: 'random' });
// @ts-expect-error maxSockets is a number
new hyperagent.Agent({ maxSockets: '5' });

import https = require('node:https');
const secure = new hyperagent.HttpsAgent({ ca: 'PEM', rejectUnauthorized: true, maxCachedSessions: 10, freeSocketTimeout: '4s' });
new hyperagent.HttpsAgent({ pfx: [{ buf: Buffer.from(''), passphrase: 'secret' }], crl: ['PEM'] });
new hyperagent.HttpsAgent({ allowH2: true });
new hyperagent.Agent({ h2c: true });
// @ts-expect-error allowH2 is a boolean
new hyperagent.HttpsAgent({ allowH2: 'yes' });
const asHttps: https.Agent = secure;
https.get('https://127.0.0.1/', { agent: secure });
secure.on('keylog', (line, socket) => {
  const from: string | undefined = socket?.remoteAddress;
  // @ts-expect-error a key log line is a Buffer
  const n: number = line;
  return [line.length, from, n];
});
secure.on('free', (socket: unknown) => socket);
function onTlsError(err: hyperagent.HyperagentError) {
  if (err.code === 'ERR_TLS_CERT_ALTNAME_INVALID') return [err.reason, err.host, err.cert?.subject];
  if (err.code === 'DEPTH_ZERO_SELF_SIGNED_CERT' || err.code === 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE') return [];
  if (err.code === 'CERT_REVOKED' || err.code === 'UNABLE_TO_GET_CRL' || err.code === 'CRL_HAS_EXPIRED') return [];
  if (err.code === 'ERR_OSSL_PKCS12_MAC_ABSENT' || err.code === 'ERR_CRYPTO_OPERATION_FAILED') return [err.message];
  // @ts-expect-error not a code a TLS failure gives
  if (err.code === 'CERT_NOT_A_CODE') return undefined;
  return undefined;
}
const secureStatus: hyperagent.AgentStatus = secure.getCurrentStatus();
const secureCounts: number[] = [secure.replayCount, secure.timeoutSocketCount, secureStatus.requestCount];
const secureChanged: boolean = secure.statusChanged;
// The counters may be assigned (agentkeepalive's are fields); statusChanged may not.
secure.requestCount = 0;
// @ts-expect-error: statusChanged is read-only
secure.statusChanged = false;
secure.destroy();

async function promisePath(): Promise<unknown> {
  const res: hyperagent.Response = await agent.request('http://127.0.0.1/', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    query: { page: 2, tags: ['a', 'b'], draft: false },
    body: JSON.stringify({ a: 1 }),
    signal: AbortSignal.timeout(5000),
    headersTimeout: 1000,
    bodyTimeout: 1000,
    trailers: async () => ({ 'x-sum': 'abc' }),
  });
  const code: number = res.statusCode;
  const version: '1.1' | '2.0' = res.httpVersion;
  const cookies: string[] | undefined = res.headers['set-cookie'];
  for await (const chunk of res.body) void (chunk as Buffer);
  const other = await hyperagent.request({ origin: 'http://127.0.0.1', path: '/x' });
  const unread: boolean = other.body.bodyUsed;
  // The options in the object of the origin and path, as undici's dispatcher.request() takes them.
  const together: hyperagent.Response = await agent.request({ origin: 'http://127.0.0.1', path: '/y', method: 'POST', body: 'x' });
  const togetherRaw: string[] = (await hyperagent.request({ origin: 'http://127.0.0.1', responseHeaders: 'raw' })).headers;
  // @ts-expect-error the origin is a string
  void agent.request({ origin: new URL('http://127.0.0.1'), method: 'POST' });
  void [together, togetherRaw];
  const web = other.body.body as unknown as import('node:stream/web').ReadableStream<Uint8Array>;
  void web;
  const raw = await agent.request('http://127.0.0.1/', { responseHeaders: 'raw', opaque: { id: 1 }, reset: true });
  const rawHeaders: string[] = raw.headers;
  const hinted = await agent.request('http://127.0.0.1/', {
    highWaterMark: 1024,
    onInfo: (info: hyperagent.InformationalResponse) => void [info.statusCode as number, info.headers],
  });
  // @ts-expect-error onInfo is a function
  void agent.request('http://127.0.0.1/', { onInfo: 'x' });
  void hinted;
  const [opaque, statusText]: [unknown, string] = [raw.opaque, other.statusText];
  const text: string = await other.body.text();
  const streamed = await secure.request(new URL('https://127.0.0.1/'), { body: (async function* g() { yield 'x'; })() });
  const bytes: Uint8Array = await streamed.body.bytes();
  await agent.request('http://127.0.0.1/', { method: 'POST', body: new Blob(['x'], { type: 'text/plain' }), headers: new Headers({ a: '1' }) });
  await agent.request('http://127.0.0.1/', { method: 'POST', body: new FormData() });
  await agent.request('http://127.0.0.1/', { method: 'POST', body: new URLSearchParams({ a: '1' }) });
  await agent.request('http://127.0.0.1/', { headers: new Map([['a', ['1', '2']]]) });
  const dumped: null = await other.body.dump({ limit: 1024, signal: AbortSignal.timeout(1000) });
  // @ts-expect-error bodyUsed is read-only
  other.body.bodyUsed = false;
  // @ts-expect-error dump's limit is a number
  await other.body.dump({ limit: '1k' });
  void [code, cookies, unread, text, streamed.trailers, bytes, dumped];
  // @ts-expect-error body must be bytes, a string or a stream
  await agent.request('http://127.0.0.1/', { body: 42 });
  return res.body.json();
}

agent.destroy();
void [promisePath, asHttps, onTlsError, asDefault, asHttpAgent, counts, free, changed, name, timeoutMs, onError];
new hyperagent.Agent({ autoSelectFamily: false, autoSelectFamilyAttemptTimeout: 500 });
// @ts-expect-error autoSelectFamily is a boolean
new hyperagent.Agent({ autoSelectFamily: 'yes' });

// The Dispatcher: fetch and undici over the agents' pools.
const dispatcher = new hyperagent.Dispatcher({ maxSockets: 10, ca: 'pem', http: agent });
const originStats: hyperagent.DispatcherStats | undefined = dispatcher.stats['http://127.0.0.1'];
void originStats?.running;
void new hyperagent.Dispatcher({ connections: 10, keepAliveTimeout: 4e3, maxHeaderSize: 16384, connect: { ca: 'pem', rejectUnauthorized: true, timeout: 10e3 }, pipelining: 1 });
void new hyperagent.Dispatcher({ maxResponseSize: 1024 });
void new hyperagent.Dispatcher({ maxRequestsPerClient: 100 });
void new hyperagent.Dispatcher({ maxRequestsPerClient: null });
// @ts-expect-error: a number of bytes.
void new hyperagent.Dispatcher({ maxResponseSize: '1k' });
const viaAgent: hyperagent.Agent = dispatcher.http;
const composed: hyperagent.Dispatcher = dispatcher.compose((dispatch) => (opts, handler) => dispatch(opts, handler));
dispatcher.on('connect', (origin: URL, targets: hyperagent.Dispatcher[]) => void [origin.host, targets.length]);
dispatcher.on('disconnect', (origin, targets, err: Error) => void [origin, targets, err.message]);
const started: boolean = dispatcher.dispatch({ origin: 'http://127.0.0.1', path: '/', method: 'GET' }, {
  onConnect(abort) { abort(); },
  onHeaders(statusCode, rawHeaders, resume) { resume(); return statusCode < 400 && rawHeaders.length >= 0; },
  onData(chunk) { return chunk.length > 0; },
  onComplete() {},
  onError(err) { void err.message; },
});
dispatcher.dispatch({ origin: new URL('https://x'), path: '/', method: 'POST', body: 'x' }, {
  onResponseStart(controller, statusCode, headers) { controller.pause(); void headers[statusCode]; },
  onResponseData(controller) { controller.resume(); },
  onResponseEnd() {},
  onResponseError(controller, err) { void controller.reason; void err; },
});
// Its own request() and stream(), as undici's dispatchers have them.
void dispatcher.request({ origin: 'http://127.0.0.1', path: '/', method: 'GET', opaque: 1 }).then(async (res: hyperagent.DispatcherResponse<number>) => {
  const text: string = await res.body.text();
  void [res.statusCode, res.headers['content-type'], res.trailers, res.opaque, text];
});
void dispatcher.request({ origin: new URL('http://127.0.0.1'), path: '/', method: 'GET', responseHeaders: 'raw' }).then((res) => {
  const raw: string[] = res.headers;
  void raw;
});
dispatcher.request({ origin: 'http://127.0.0.1', path: '/', method: 'POST', body: 'x' }, (err: Error | null, data: hyperagent.DispatcherResponse) => void [err, data.statusCode, data.context]);
void dispatcher.stream({ origin: 'http://127.0.0.1', path: '/', method: 'GET' }, ({ statusCode }) => {
  void statusCode;
  return fs.createWriteStream('/dev/null');
}).then((done: hyperagent.StreamData) => void [done.opaque, done.trailers]);
// pipeline(), upgrade() and connect().
const piped: import('node:stream').Duplex = dispatcher.pipeline({ origin: 'http://127.0.0.1', path: '/', method: 'POST' }, ({ body }) => body);
piped.end('x');
void dispatcher.upgrade({ origin: 'http://127.0.0.1', path: '/', protocol: 'websocket' }).then(({ headers, socket }) => {
  void headers.upgrade;
  socket.write('x');
});
void dispatcher.connect({ origin: 'http://127.0.0.1', path: 'example.com:443' }).then(({ statusCode, socket }) => void [statusCode, socket.end()]);
hyperagent.setGlobalDispatcher(dispatcher);
const current: { dispatch: hyperagent.DispatchFunction } = hyperagent.getGlobalDispatcher();
// @types/node's RequestInit has no `dispatcher` (Node's fetch takes it all the same).
void fetch('http://127.0.0.1/', { dispatcher } as RequestInit);
// Where undici's types are installed, a Dispatcher is one of undici's: its request(), stream(),
// fetch(), setGlobalDispatcher() and interceptors take it as it is.
const asUndici: undici.Dispatcher = dispatcher;
void undici.request('http://127.0.0.1/', { dispatcher });
void undici.stream('http://127.0.0.1/', { dispatcher, method: 'GET' }, () => fs.createWriteStream('/dev/null'));
void undici.fetch('http://127.0.0.1/', { dispatcher });
undici.setGlobalDispatcher(dispatcher);
const retrying: undici.Dispatcher = dispatcher.compose(undici.interceptors.retry());
void dispatcher.request({ origin: 'http://127.0.0.1', path: '/', method: 'GET', signal: new events.EventEmitter() });
// And one of the older undici's, whose types @types/node 20 carries (undici-types 6).
const asUndici6: UndiciTypes6.Dispatcher = dispatcher;
const composed6: UndiciTypes6.Dispatcher = dispatcher.compose((dispatch) => dispatch);
dispatcher.once('connect', (origin, targets) => void [origin.host, targets[0].http]);
void [asUndici, retrying, asUndici6, composed6];
const closing: Promise<void> = dispatcher.close();
const agentClosing: Promise<void> = agent.close();
agent.close((err) => { void err; });
void agentClosing;
dispatcher.destroy(null, (err) => { void err; });
void [viaAgent, composed, started, current, closing];
