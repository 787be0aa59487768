'use strict';

// agent.request(): what it sends and resolves with: methods, URLs, headers, options, bad input.
// Real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { Readable } = require('node:stream');
const { once } = require('node:events');
const hyperagent = require('../..');
const { Agent } = hyperagent;
const { httpServer, rawServer, readRequest, eachRequest, request: httpGet } = require('../helpers');
const { echoServer, chunks } = require('./helpers');

test('a GET resolves with status, headers and a body stream', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.setHeader('x-many', ['1', '2']);
    res.end('hello');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(`${server.url}/path?q=1`);
  assert.strictEqual(res.statusCode, 200);
  assert.strictEqual(res.statusMessage, 'OK');
  assert.deepStrictEqual(res.headers['set-cookie'], ['a=1', 'b=2']);
  assert.strictEqual(res.headers['x-many'], '1, 2');
  assert.strictEqual(res.headers['content-length'], '5');
  assert.ok(res.rawHeaders.includes('set-cookie'));
  assert.ok(res.body instanceof Readable);
  assert.strictEqual(await res.body.text(), 'hello');
});

test('rawHeaders: lower-case names, a repeated name\'s values together, as the README says; headers of any name', async (t) => {
  const server = await httpServer(t, (req, res) => {
    res.writeHead(200, ['X-A', '1', 'X-B', '2', 'x-a', '3', 'content-length', '2', 'Constructor', 'c']);
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(server.url);
  assert.deepStrictEqual(res.rawHeaders.slice(0, 6), ['x-a', '1', 'x-a', '3', 'x-b', '2']);
  assert.strictEqual(res.headers['x-a'], '1, 3');
  // A name Object.prototype also has is the header's own, as in Node's res.headers.
  assert.strictEqual(res.headers.constructor, 'c');
  assert.strictEqual(await res.body.text(), 'ok');
});

test('a response head with many header lines is taken as Node takes it', async (t) => {
  const server = await httpServer(t, (req, res) => {
    const count = Number(req.url.slice(1));
    const lines = [];
    for (let i = 0; i < count; i++) lines.push(`x-h${i}`, 'v');
    res.writeHead(200, lines);
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const count of [99, 150, 1000]) {
    const res = await agent.request(`${server.url}/${count}`);
    assert.strictEqual(res.headers[`x-h${count - 1}`], 'v', String(count));
    assert.strictEqual(await res.body.text(), 'ok');
  }
});

test('methods, URL forms and headers reach the server', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND']) {
    const res = await agent.request(`${server.url}/m`, { method, headers: { 'x-test': method } });
    const echo = await res.body.json();
    assert.strictEqual(echo.method, method);
    assert.strictEqual(echo.headers['x-test'], method);
    assert.strictEqual(echo.headers.host, `127.0.0.1:${server.port}`);
  }
  const viaUrl = await (await agent.request(new URL(`${server.url}/u?x=1`))).body.json();
  assert.strictEqual(viaUrl.url, '/u?x=1');
  const viaParts = await (await agent.request({ origin: server.url, path: '/parts' })).body.json();
  assert.strictEqual(viaParts.url, '/parts');
  const flat = await (await agent.request(server.url, { headers: ['x-a', '1', 'x-a', '2'] })).body.json();
  assert.strictEqual(flat.headers['x-a'], '1, 2');
});

test('the options may come in the { origin, path } object, as undici takes them; never in both places', async (t) => {
  const seen = [];
  const server = await httpServer(t, (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      seen.push(`${req.method} ${req.url} ${req.headers['x-a']} ${body}`);
      res.end('done');
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const origin = server.url;
  const res = await agent.request({ origin, path: '/one', method: 'POST', headers: { 'x-a': '1' }, body: 'payload', query: { q: 2 } });
  assert.strictEqual(await res.body.text(), 'done');
  const viaDefault = await hyperagent.request({ origin, path: '/two', method: 'PUT', body: Readable.from(['streamed']) });
  assert.strictEqual(await viaDefault.body.text(), 'done');
  assert.deepStrictEqual(seen, ['POST /one?q=2 1 payload', 'PUT /two undefined streamed']);
  // An aborted signal in the object fails the request as it would as an option.
  await assert.rejects(agent.request({ origin, path: '/three', signal: AbortSignal.abort() }), { name: 'AbortError' });
  // With options given too, an option in the object would be dropped: refused, nothing sent.
  for (const name of ['method', 'body', 'headers', 'signal', 'headersTimeout']) {
    const input = { origin, path: '/four', [name]: name === 'signal' ? new AbortController().signal : name === 'headers' ? {} : name === 'headersTimeout' ? 5 : 'POST' };
    assert.throws(() => agent.request(input, { method: 'PATCH' }), { code: 'ERR_INVALID_ARG_VALUE', message: new RegExp(`holds the option ${name} `) }, name);
  }
  // The origin and path alone, with options beside them, are as before.
  const plain = await agent.request({ origin, path: '/five' }, { method: 'DELETE' });
  assert.strictEqual(await plain.body.text(), 'done');
  assert.deepStrictEqual(seen.slice(2), ['DELETE /five undefined ']);
});

test('{ origin, path } sends the path to that origin as given, never to another host', async (t) => {
  const seen = [];
  const server = await httpServer(t, (req, res) => {
    seen.push(req.url);
    res.end('origin');
  });
  const other = await httpServer(t, (req, res) => res.end('another host'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const origin = server.url;
  const otherHost = `127.0.0.1:${other.port}`;
  // A path that resolves to another host as a relative URL is a path of the origin.
  for (const path of [`//${otherHost}/x`, '/../../z', '/a"b<c>`|d']) {
    const res = await agent.request({ origin, path });
    assert.strictEqual(await res.body.text(), 'origin', path);
  }
  assert.deepStrictEqual(seen, [`//${otherHost}/x`, '/../../z', '/a%22b%3Cc%3E%60%7Cd']);
  assert.strictEqual(other.connections.length, 0);
  // Refused at once, as Node's http.request and undici refuse such paths.
  const refused = [
    [{ origin, path: `http://${otherHost}/y` }, 'ERR_INVALID_ARG_VALUE'],
    [{ origin, path: 'relative' }, 'ERR_INVALID_ARG_VALUE'],
    [{ origin, path: '/a b' }, 'ERR_UNESCAPED_CHARACTERS'],
    [{ origin, path: '/x\r\nInjected: 1' }, 'ERR_UNESCAPED_CHARACTERS'],
    [{ origin, path: 5 }, 'ERR_INVALID_ARG_TYPE'],
    [{ origin: `${origin}/base`, path: '/x' }, 'ERR_INVALID_ARG_VALUE'],
  ];
  for (const [input, code] of refused) {
    assert.throws(() => agent.request(input), { code }, JSON.stringify(input));
  }
  assert.strictEqual(seen.length, 3);
});

test('a URL given again goes where it names now: the same path of another origin, a URL object changed', async (t) => {
  const seen = [];
  const serve = (name) => (req, res) => {
    seen.push(`${name} ${req.url}`);
    res.end(name);
  };
  const a = await httpServer(t, serve('a'));
  const b = await httpServer(t, serve('b'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const send = async (input) => (await agent.request(input)).body.text();
  // { origin, path }: each pair, again and again, alternating.
  for (let i = 0; i < 2; i++) {
    assert.strictEqual(await send({ origin: a.url, path: '/p' }), 'a');
    assert.strictEqual(await send({ origin: b.url, path: '/p' }), 'b');
    assert.strictEqual(await send({ origin: a.url, path: '/q?x=1' }), 'a');
    assert.strictEqual(await send({ origin: b.url }), 'b');
  }
  // A URL object, then the same object changed.
  const url = new URL(`${a.url}/one`);
  assert.strictEqual(await send(url), 'a');
  url.pathname = '/two';
  assert.strictEqual(await send(url), 'a');
  url.port = String(b.port);
  assert.strictEqual(await send(url), 'b');
  // A string after all of them.
  assert.strictEqual(await send(`${a.url}/p`), 'a');
  assert.deepStrictEqual(seen, [
    'a /p', 'b /p', 'a /q?x=1', 'b /',
    'a /p', 'b /p', 'a /q?x=1', 'b /',
    'a /one', 'a /two', 'b /two', 'a /p',
  ]);
});

test('credentials in the URL go as basic authorization, as Node\'s http sends them', async (t) => {
  const server = await echoServer(t);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const withAuth = `http://us%20er:p%40ss:w@127.0.0.1:${server.port}/a`;
  // What Node's http.request sends for the same URL.
  const node = await new Promise((resolve, reject) => {
    http.get(withAuth, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c)).on('end', () => resolve(JSON.parse(Buffer.concat(chunks))));
    }).on('error', reject);
  });
  const expected = `Basic ${Buffer.from('us er:p@ss:w').toString('base64')}`;
  assert.strictEqual(node.headers.authorization, expected);
  const forms = [
    [withAuth, undefined],
    [new URL(withAuth), undefined],
    [withAuth, { 'x-own': '1' }],
    [withAuth, undefined, 'POST'],
  ];
  for (const [url, headers, method] of forms) {
    // Twice: the second goes through the agent's URL cache.
    for (let i = 0; i < 2; i++) {
      const echo = await (await agent.request(url, { headers, method })).body.json();
      assert.strictEqual(echo.headers.authorization, expected, String(url));
      assert.strictEqual(echo.headers.host, `127.0.0.1:${server.port}`);
    }
  }
  // A header of one's own wins; a URL without credentials sends none.
  const own = await (await agent.request(withAuth, { headers: { Authorization: 'Bearer x' } })).body.json();
  assert.strictEqual(own.headers.authorization, 'Bearer x');
  const none = await (await agent.request(`${server.url}/a`)).body.json();
  assert.strictEqual(none.headers.authorization, undefined);
});

test('a reason phrase that is not the status code\'s usual one arrives as Node\'s parser gives it', async (t) => {
  const phrases = { '/custom': 'Alright then', '/other': 'Not Found' };
  const server = await rawServer(t, async (socket) => {
    for await (const { head } of eachRequest(socket)) {
      const phrase = phrases[head.split(' ')[1]] ?? 'OK';
      socket.write(`HTTP/1.1 200 ${phrase}\r\nContent-Length: 2\r\n\r\nok`);
    }
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  for (const path of ['/custom', '/other', '/usual']) {
    const url = `http://127.0.0.1:${server.port}${path}`;
    const viaNode = (await httpGet(url, { agent: new http.Agent() })).res.statusMessage;
    const res = await agent.request(url);
    await res.body.dump();
    assert.strictEqual(res.statusMessage, viaNode, path);
    assert.strictEqual(res.statusMessage, phrases[path] ?? 'OK', path);
  }
});

test('every URL gets its own request head, through the agent\'s URL cache and its clearing', async (t) => {
  const a = await echoServer(t);
  const b = await echoServer(t);
  const agent = new Agent({ maxSockets: 4 });
  t.after(() => agent.destroy());
  // More distinct URLs than the cache keeps (1,024), each asked for in every form: without
  // headers (a head made once per URL), with headers, with a body, and as a URL object.
  for (let i = 0; i < 1100; i++) {
    const server = i % 2 === 0 ? a : b;
    const url = `${server.url}/u/${i}?q=${i}`;
    const host = `127.0.0.1:${server.port}`;
    const plain = await (await agent.request(url)).body.json();
    assert.deepStrictEqual([plain.method, plain.url, plain.headers.host], ['GET', `/u/${i}?q=${i}`, host]);
    if (i % 50 !== 0) continue;
    const again = await (await agent.request(url)).body.json();
    assert.strictEqual(again.url, `/u/${i}?q=${i}`);
    const own = await (await agent.request(url, { headers: { 'x-i': String(i) } })).body.json();
    assert.deepStrictEqual([own.url, own.headers['x-i'], own.headers.host], [`/u/${i}?q=${i}`, String(i), host]);
    const post = await (await agent.request(url, { method: 'POST', body: 'abc' })).body.json();
    assert.deepStrictEqual([post.method, post.url, post.length], ['POST', `/u/${i}?q=${i}`, 3]);
    const viaUrl = await (await agent.request(new URL(url))).body.json();
    assert.strictEqual(viaUrl.url, `/u/${i}?q=${i}`);
  }
});

test('long methods, paths and header lines cross whole; header values go as latin1, as Node sends them', async (t) => {
  const heads = [];
  const server = await rawServer(t, async (socket) => {
    try {
      for (;;) {
        const { head } = await readRequest(socket);
        heads.push(head);
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n');
      }
    } catch {
      // The connection ended.
    }
  });
  const origin = `http://127.0.0.1:${server.port}`;
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  // Lengths on both sides of what fits the binding's fixed buffers, far past them, and a path
  // of 65534 characters, the longest a request line takes.
  const sent = [];
  // (The header lines are `host\n127.0.0.1:<port>\nx-latin1\n<value>`: about n + 37 bytes.)
  for (const n of [...Array.from({ length: 26 }, (_, i) => 975 + i), 5000, 65534 + 479]) {
    const req = {
      method: 'X'.repeat(24 + (n % 8)),
      path: `/${'p'.repeat(n - 480)}`,
      value: `caf\u00e9 \u00f1 ${'v'.repeat(n)}`,
    };
    sent.push(req);
    const res = await agent.request(origin + req.path, { method: req.method, headers: { 'x-latin1': req.value } });
    assert.strictEqual(res.statusCode, 200);
    await res.body.text();
  }
  // One character more is refused at once, not sent cut or failed on the way.
  assert.throws(() => agent.request(`${origin}/${'p'.repeat(65534)}`), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /path and query of 65535 characters; agent.request\(\) sends at most 65534/,
  });
  // What Node itself sends for the same header value: the same bytes.
  await new Promise((resolve, reject) => {
    http.get(`${origin}/node`, { agent: false, headers: { 'x-latin1': sent[0].value } }, (res) => {
      res.resume();
      res.on('end', resolve);
    }).on('error', reject);
  });
  assert.strictEqual(heads.length, sent.length + 1);
  const headerOf = (head) => head.split('\r\n').find((l) => l.toLowerCase().startsWith('x-latin1:'));
  assert.strictEqual(headerOf(heads[0]), headerOf(heads[sent.length]));
  sent.forEach((req, i) => {
    assert.strictEqual(heads[i].split('\r\n')[0], `${req.method} ${req.path} HTTP/1.1`);
    assert.strictEqual(headerOf(heads[i]), `x-latin1: ${req.value}`);
  });
});

test('header lines go as undici sends them: the host first, a null value empty, an undefined one left out', async (t) => {
  const undici = require('../undici');
  // The request's header lines as the server read them, but those of the body's framing.
  const server = await httpServer(t, (req, res) => {
    const lines = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i].toLowerCase()}: ${req.rawHeaders[i + 1]}`);
    res.end(JSON.stringify(lines.filter((l) => !/^(connection|content-length|transfer-encoding):/.test(l))));
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const cases = [
    { 'x-a': undefined, 'x-b': null, 'x-c': '', 'x-d': 0, 'x-e': true },
    { host: 'other.test', 'x-f': ['1', '2'], 'x-g': [] },
    { 'X-H': '1', 'x-h': '2' },
    ['x-i', 'a', 'x-i', 'b'],
  ];
  for (const headers of cases) {
    const theirs = await (await undici.request(`${server.url}/`, { headers })).body.text();
    const ours = await (await agent.request(`${server.url}/`, { headers })).body.text();
    assert.deepStrictEqual(JSON.parse(ours), JSON.parse(theirs), JSON.stringify(headers));
  }
});

test("undici's opaque, reset and responseHeaders options do as in undici; maxRedirections and throwOnError are refused, not ignored", async (t) => {
  const sockets = new Set();
  const seen = [];
  const server = await httpServer(t, (req, res) => {
    sockets.add(req.socket);
    seen.push(req.headers.connection);
    res.setHeader('x-a', ['1', '2']);
    res.end(req.url === '/moved' ? '' : 'ok');
  });
  const agent = new Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  // opaque comes back on the response (null without it); statusText is statusMessage.
  let res = await agent.request(`${server.url}/`, { opaque: { id: 7 } });
  assert.deepStrictEqual([res.opaque, res.statusText, await res.body.text()], [{ id: 7 }, 'OK', 'ok']);
  res = await agent.request(`${server.url}/`);
  assert.deepStrictEqual([res.opaque, res.headers['x-a']], [null, '1, 2']);
  await res.body.dump();
  // responseHeaders: 'raw' gives the list.
  res = await agent.request(`${server.url}/`, { responseHeaders: 'raw' });
  assert.ok(Array.isArray(res.headers));
  assert.deepStrictEqual(res.headers, res.rawHeaders);
  assert.deepStrictEqual(res.headers.slice(0, 4), ['x-a', '1', 'x-a', '2']);
  await res.body.dump();
  assert.strictEqual(sockets.size, 1, 'one kept connection so far');
  // reset: the request says connection: close and its connection is not used again (the first
  // takes the kept one, which then closes; the second needs a new one).
  for (let i = 0; i < 2; i++) await (await agent.request(`${server.url}/`, { reset: true })).body.dump();
  assert.deepStrictEqual(seen.slice(-2), ['close', 'close']);
  assert.strictEqual(sockets.size, 2);
  await (await agent.request(`${server.url}/`, { reset: false })).body.dump();
  assert.strictEqual(sockets.size, 3, 'the last reset connection was not kept');
  await (await agent.request(`${server.url}/`)).body.dump();
  assert.strictEqual(sockets.size, 3);
  assert.deepStrictEqual([agent.createSocketCount, agent.closeSocketCount], [3, 2]);
  // What undici no longer does (it follows no redirect, throws on no status) is refused.
  assert.throws(() => agent.request(`${server.url}/moved`, { maxRedirections: 2 }), { code: 'ERR_INVALID_ARG_VALUE', message: /maxRedirections/ });
  assert.throws(() => agent.request(`${server.url}/`, { throwOnError: true }), { code: 'ERR_INVALID_ARG_VALUE', message: /throwOnError/ });
  assert.throws(() => agent.request(`${server.url}/`, { reset: 'yes' }), { code: 'ERR_INVALID_ARG_TYPE', message: /reset/ });
  for (const options of [{ maxRedirections: 0 }, { throwOnError: false }, { reset: null }]) {
    await (await agent.request(`${server.url}/`, options)).body.dump();
  }
});

test("undici's query option: serialised as undici serialises it, after a path without a query", async (t) => {
  const undici = require('../undici');
  const server = await httpServer(t, (req, res) => res.end(req.url));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const queries = [
    { a: 1, b: ['2', '3'], c: 'ä &=/?', d: undefined, e: null, f: true },
    {},
    { 'key with space': '' },
  ];
  for (const query of queries) {
    const theirs = await (await undici.request(`${server.url}/x`, { query })).body.text();
    const ours = await (await agent.request(`${server.url}/x`, { query })).body.text();
    assert.strictEqual(ours, theirs, JSON.stringify(query));
    // With the origin and path given apart, and with header lines of its own.
    const parts = await agent.request({ origin: server.url, path: '/x' }, { query, headers: { 'x-a': '1' } });
    assert.strictEqual(await parts.body.text(), theirs);
  }
  assert.throws(() => agent.request(`${server.url}/x?y=1`, { query: { a: 1 } }), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => agent.request(`${server.url}/x`, { query: 'a=1' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(`${server.url}/x`, { query: { a: 'q'.repeat(70000) } }), { code: 'ERR_INVALID_ARG_VALUE' });
  // A URL with a query and an empty one: nothing to add.
  assert.strictEqual(await (await agent.request(`${server.url}/x?y=1`, { query: {} })).body.text(), '/x?y=1');
});

test('bad input is refused at once with Node\'s codes', async (t) => {
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = 'http://127.0.0.1:1/';
  assert.throws(() => agent.request(url, { method: 'GE T' }), { code: 'ERR_INVALID_HTTP_TOKEN' });
  assert.throws(() => agent.request(url, { headers: { 'bad name': 'x' } }), { code: 'ERR_INVALID_HTTP_TOKEN' });
  assert.throws(() => agent.request(url, { headers: { 'x-a': 'line\r\nbreak' } }), { code: 'ERR_INVALID_CHAR' });
  // A value with no string form: Node's code for a header value it cannot send.
  for (const value of [Symbol('s'), Object.create(null), ['ok', Object.create(null)]]) {
    assert.throws(() => agent.request(url, { headers: { 'x-a': value } }), { code: 'ERR_HTTP_INVALID_HEADER_VALUE' });
  }
  assert.throws(() => agent.request(url, { headers: [Object.create(null), 'x'] }), { code: 'ERR_INVALID_HTTP_TOKEN' });
  // A request has one target and one length: a second host or content-length line, in any
  // case or form, is refused (a server would refuse the request, or read another length).
  for (const headers of [
    ['Content-Length', '5', 'content-length', '0'],
    ['content-length', '5', 'content-length', '5'],
    { 'content-length': ['5', '5'] },
    ['host', 'a.test', 'Host', 'b.test'],
    new Map([['host', 'a.test'], ['HOST', 'a.test']]),
  ]) {
    assert.throws(() => agent.request(url, { method: 'POST', headers, body: 'hello' }), { code: 'ERR_INVALID_ARG_VALUE', message: /more than one (content-length|host) header/ });
  }
  // A URL that does not parse: URL's own error, as Node's http.request and undici's request().
  const invalidUrl = { name: 'TypeError', code: 'ERR_INVALID_URL', input: 'not a url' };
  assert.throws(() => http.get('not a url'), invalidUrl);
  assert.throws(() => agent.request('not a url'), invalidUrl);
  assert.throws(() => agent.request({ origin: 'not a url', path: '/' }), invalidUrl);
  assert.throws(() => agent.request(42), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request('https://127.0.0.1/'), { code: 'ERR_INVALID_PROTOCOL' });
  assert.throws(() => agent.request(url, { body: 42 }), { code: 'ERR_INVALID_ARG_TYPE' });
  // Numbers as Node validates them: another type, or a number out of range.
  assert.throws(() => agent.request(url, { headersTimeout: '5' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { headersTimeout: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => agent.request(url, { bodyTimeout: NaN }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => agent.request(url, { maxResponseHeaderSize: '1024' }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { maxResponseHeaderSize: 1.5 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => agent.request(url, { method: 42 }), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => agent.request(url, { signal: 'abort' }), { code: 'ERR_INVALID_ARG_TYPE' });
  // Tunnels and upgrades take the connection over: http.request() with the agent does them.
  for (const method of ['CONNECT', 'connect']) {
    assert.throws(() => agent.request(url, { method }), { code: 'ERR_INVALID_ARG_VALUE', message: /use http\.request\(\) with the agent/ });
  }
  assert.throws(() => agent.request(url, { headers: { Upgrade: 'websocket', connection: 'upgrade' } }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /upgrade header/,
  });
});

test('header lines undici refuses are refused before anything is sent: framing, keep-alive, a connection that is no token list, objects', async (t) => {
  const undici = require('../undici');
  const { Dispatcher } = hyperagent;
  const seen = [];
  const server = await httpServer(t, (req, res) => {
    seen.push(req.rawHeaders);
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  const agent = new Agent();
  const ours = new Dispatcher();
  const theirs = new undici.Agent();
  t.after(() => Promise.all([agent.destroy(), ours.destroy(), theirs.destroy()]));
  const url = `${server.url}/`;
  const refused = [
    [{ 'transfer-encoding': 'chunked' }, 'ERR_INVALID_ARG_VALUE', /has a transfer-encoding header, which the client sets itself/],
    [{ 'Keep-Alive': 'timeout=5' }, 'ERR_INVALID_ARG_VALUE', /has a keep-alive header, which the client sets itself/],
    [{ connection: 'invalid header with spaces' }, 'ERR_INVALID_ARG_VALUE', /has a connection header that is not a list of tokens/],
    [{ connection: 'close,,x' }, 'ERR_INVALID_ARG_VALUE', /not a list of tokens/],
    [{ connection: ['close', 'x'] }, 'ERR_INVALID_ARG_VALUE', /has a connection header with more than one value/],
    [{ 'x-a': { a: 1 } }, 'ERR_HTTP_INVALID_HEADER_VALUE', /Invalid value "\{ a: 1 \}" for header "x-a"/],
    [{ 'x-a': ['1', new Date(0)] }, 'ERR_HTTP_INVALID_HEADER_VALUE', /for header "x-a"/],
    [{ 'x-a': Buffer.from('b') }, 'ERR_HTTP_INVALID_HEADER_VALUE', /for header "x-a"/],
  ];
  for (const [headers, code, message] of refused) {
    const options = { method: 'POST', body: 'hello', headers };
    assert.throws(() => agent.request(url, options), { code, message }, JSON.stringify(headers));
    // Through a Dispatcher, as undici's own Agent: the request fails, and fetch with it.
    await assert.rejects(undici.request(url, { ...options, dispatcher: ours }), { code, message });
    await assert.rejects(undici.request(url, { ...options, dispatcher: theirs }), { code: 'UND_ERR_INVALID_ARG' });
    // (fetch's Headers makes every value a string, and joins an array's.)
    if (Object.values(headers).every((v) => typeof v === 'string')) {
      await assert.rejects(fetch(url, { ...options, dispatcher: ours }), (err) => err.message === 'fetch failed' && err.cause.code === code);
    }
  }
  // In a trailer, named as the trailers.
  await assert.rejects(async () => agent.request(url, { method: 'POST', body: 'x', trailers: { 'transfer-encoding': 'x' } }), {
    code: 'ERR_INVALID_ARG_VALUE',
    message: /^The property 'options\.trailers' has a transfer-encoding header/,
  });
  assert.deepStrictEqual(seen, []);
  // A list of tokens goes as given; with `close` in it, the connection is not used again.
  const res = await agent.request(url, { headers: { connection: ' close , x-hop' } });
  assert.strictEqual(await res.body.text(), 'ok');
  assert.deepStrictEqual(seen, [['host', url.slice(7, -1), 'connection', 'close , x-hop']]);
  assert.deepStrictEqual(Object.keys(agent.freeSockets), []);
});

test('plain-object headers are read by their keys even where Object.prototype was given an iterator', async (t) => {
  const server = await httpServer(t, (req, res) => res.end(`${req.headers.hello}`));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const had = Object.getOwnPropertyDescriptor(Object.prototype, Symbol.iterator);
  // eslint-disable-next-line no-extend-native
  Object.prototype[Symbol.iterator] = function* polluted() {};
  try {
    const res = await agent.request(`${server.url}/`, { headers: { hello: 'world' } });
    assert.strictEqual(await res.body.text(), 'world');
    // Iterables keep their pairs; an object with an iterator of its own is iterated.
    const mapped = await agent.request(`${server.url}/`, { headers: new Map([['hello', 'map']]) });
    assert.strictEqual(await mapped.body.text(), 'map');
    const own = { *[Symbol.iterator]() { yield ['hello', 'own']; } };
    assert.strictEqual(await (await agent.request(`${server.url}/`, { headers: own })).body.text(), 'own');
  } finally {
    if (had === undefined) delete Object.prototype[Symbol.iterator];
    else Object.defineProperty(Object.prototype, Symbol.iterator, had);
  }
});

test('the module-level request() uses a default agent per protocol', async (t) => {
  const server = await httpServer(t);
  const res = await hyperagent.request(`${server.url}/default`);
  assert.strictEqual(await res.body.text(), 'hello /default');
});

test("undici's highWaterMark sets the body stream's, and is checked", async (t) => {
  const server = await httpServer(t, (req, res) => res.end('x'.repeat(100)));
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const highWaterMark of [0, 1, 1024 * 1024]) {
    const res = await agent.request(`${server.url}/`, { highWaterMark });
    assert.strictEqual(res.body.readableHighWaterMark, highWaterMark);
    assert.strictEqual(await res.body.text(), 'x'.repeat(100));
  }
  const res = await agent.request(`${server.url}/`);
  assert.strictEqual(res.body.readableHighWaterMark, new Readable().readableHighWaterMark);
  await res.body.dump();
  assert.throws(() => agent.request(`${server.url}/`, { highWaterMark: '1' }), { code: 'ERR_INVALID_ARG_TYPE', message: /options\.highWaterMark/ });
  for (const bad of [-1, 1.5, NaN, Infinity]) {
    assert.throws(() => agent.request(`${server.url}/`, { highWaterMark: bad }), { code: 'ERR_OUT_OF_RANGE', message: /options\.highWaterMark/ });
  }
});
