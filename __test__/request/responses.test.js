'use strict';

// agent.request(): response bodies and how they are read; trailers, empty bodies, informational responses.
// Real servers on port 0 and scripted raw servers.

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const { Readable, Writable } = require('node:stream');
const { finished } = require('node:stream/promises');
const { AsyncLocalStorage } = require('node:async_hooks');
const { once } = require('node:events');
const hyperagent = require('../..');
const { Agent } = hyperagent;
const { httpServer, rawServer, until } = require('../helpers');
const { chunks, continueServer, continueAndEcho } = require('./helpers');

test('chunked responses stream, and trailers arrive at the end', async (t) => {
  // The rest of the body is written once the client has looked at the head.
  let rest;
  const headSeen = new Promise((resolve) => { rest = resolve; });
  const server = await httpServer(t, (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
    res.write('one ');
    headSeen.then(() => {
      res.write('two');
      res.addTrailers({ 'x-checksum': 'abc' });
      res.end();
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(server.url);
  assert.strictEqual(res.headers['transfer-encoding'], 'chunked');
  assert.deepStrictEqual(res.trailers, {});
  rest();
  assert.strictEqual(await res.body.text(), 'one two');
  assert.deepStrictEqual(res.trailers, { 'x-checksum': 'abc' });
});

test('HEAD, 204 and 304 have no body; redirects are returned as they are', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.method === 'HEAD') res.writeHead(200, { 'content-length': 14 }).end();
    else if (req.url === '/204') res.writeHead(204).end();
    else if (req.url === '/304') res.writeHead(304).end();
    else if (req.url === '/redirect') res.writeHead(302, { location: '/elsewhere' }).end('moved');
    else res.end('a body for GET');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const head = await agent.request(server.url, { method: 'HEAD' });
  assert.strictEqual(head.headers['content-length'], String('a body for GET'.length));
  assert.strictEqual(await head.body.text(), '');
  for (const code of [204, 304]) {
    const res = await agent.request(`${server.url}/${code}`);
    assert.strictEqual(res.statusCode, code);
    assert.strictEqual(await res.body.text(), '');
  }
  const moved = await agent.request(`${server.url}/redirect`);
  assert.strictEqual(moved.statusCode, 302);
  assert.strictEqual(moved.headers.location, '/elsewhere');
  assert.strictEqual(await moved.body.text(), 'moved');
  // All on one connection.
  assert.strictEqual(server.connections.length, 1);
});

test('a body that came whole reads the same whatever reads it', async (t) => {
  // 40 KiB (a read large enough to cross without a copy), as text.
  const big = Buffer.from(crypto.randomBytes(20 * 1024).toString('hex'));
  const server = await httpServer(t, (req, res) => res.end(req.url === '/big' ? big : 'hello'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const readers = {
    data: (body) => new Promise((resolve, reject) => {
      const chunks = [];
      body.on('data', (c) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks))).on('error', reject);
    }),
    readable: (body) => new Promise((resolve) => {
      const chunks = [];
      body.on('readable', () => {
        for (let c = body.read(); c !== null; c = body.read()) chunks.push(c);
      });
      body.on('end', () => resolve(Buffer.concat(chunks)));
    }),
    pipeline: async (body) => {
      const chunks = [];
      await require('node:stream/promises').pipeline(body, async function* (source) {
        for await (const c of source) chunks.push(c);
      });
      return Buffer.concat(chunks);
    },
    iterator: async (body) => {
      const chunks = [];
      for await (const c of body) chunks.push(c);
      return Buffer.concat(chunks);
    },
    text: async (body) => Buffer.from(await body.text()),
    arrayBuffer: async (body) => Buffer.from(await body.arrayBuffer()),
    bytes: async (body) => {
      const bytes = await body.bytes();
      assert.ok(bytes instanceof Uint8Array && !Buffer.isBuffer(bytes));
      return Buffer.from(bytes);
    },
    blob: async (body) => Buffer.from(await (await body.blob()).arrayBuffer()),
    // undici's body.body: a web ReadableStream of the bytes.
    'body.body': async (body) => {
      const chunks = [];
      for await (const c of body.body) {
        assert.ok(c instanceof Uint8Array && !Buffer.isBuffer(c));
        chunks.push(c);
      }
      return Buffer.concat(chunks);
    },
    'read after text': async (body) => {
      const text = await body.text();
      const rest = [];
      for await (const c of body) rest.push(c);
      assert.strictEqual(rest.length, 0);
      return Buffer.from(text);
    },
  };
  for (const [name, read] of Object.entries(readers)) {
    for (const [path, expected] of [['/', Buffer.from('hello')], ['/big', big]]) {
      const { body } = await agent.request(server.url + path);
      const closed = once(body, 'close');
      const bytes = await read(body);
      assert.ok(bytes.equals(expected), `${name} ${path}`);
      // Whatever read it, the stream ends and closes (text() and the like too).
      await closed;
      assert.strictEqual(body.readableEnded, true, `${name} ${path}`);
    }
  }
});

test("body.body and blob() as undici's: a lazy web stream that a reader locks, a Blob typed by the response", async (t) => {
  const big = crypto.randomBytes(1024 * 1024);
  const server = await httpServer(t, (req, res) => {
    res.setHeader('content-type', 'Application/JSON; charset=utf-8');
    res.end(req.url === '/big' ? big : '{"a":1}');
  });
  const agent = new Agent();
  const d = new hyperagent.Dispatcher();
  t.after(() => { agent.destroy(); d.destroy(); });
  const requests = {
    'agent.request()': (path) => agent.request(server.url + path),
    'd.request()': (path) => d.request({ origin: server.url, path, method: 'GET' }),
    'a composed d.request()': (path) => d.compose((dispatch) => dispatch).request({ origin: server.url, path, method: 'GET' }),
  };
  for (const [how, request] of Object.entries(requests)) {
    const blob = await (await request('/')).body.blob();
    assert.strictEqual(blob.type, 'application/json; charset=utf-8', how);
    assert.strictEqual(await blob.text(), '{"a":1}', how);
    // Made and left unread, the stream reads nothing: text() still has the body.
    let res = await request('/');
    assert.ok(res.body.body instanceof ReadableStream, how);
    assert.strictEqual(res.body.body, res.body.body, `${how}: one stream`);
    assert.strictEqual(res.body.bodyUsed, false, how);
    assert.strictEqual(await res.body.text(), '{"a":1}', how);
    // A reader of it locks the body for the others.
    res = await request('/');
    const reader = res.body.body.getReader();
    await assert.rejects(res.body.json(), { name: 'TypeError', message: /locked/ }, how);
    assert.deepStrictEqual(Buffer.from((await reader.read()).value), Buffer.from('{"a":1}'), how);
    assert.strictEqual((await reader.read()).done, true, how);
    // A large body streams through it whole; a cancel destroys the body.
    res = await request('/big');
    const chunks = [];
    for await (const c of res.body.body) chunks.push(c);
    assert.ok(Buffer.concat(chunks).equals(big), how);
    res = await request('/big');
    const closed = once(res.body, 'close');
    await res.body.body.cancel();
    await closed;
    assert.strictEqual(res.body.readableEnded, false, how);
  }
});

test('body.bodyUsed says whether the body was read or destroyed, as undici\'s does', async (t) => {
  const undici = require('../undici');
  const server = await httpServer(t, (req, res) => res.end(req.url === '/big' ? 'x'.repeat(256 * 1024) : 'hello'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  const pool = new undici.Pool(server.url);
  t.after(() => pool.close());
  const ways = {
    text: (body) => body.text(),
    'for await': async (body) => {
      for await (const chunk of body) void chunk;
    },
    'one data event': (body) => new Promise((resolve) => body.once('data', () => {
      body.pause();
      resolve();
    })),
    destroy: async (body) => {
      body.destroy();
      await finished(body).catch(() => {});
    },
    dump: (body) => body.dump(),
  };
  for (const path of ['/', '/big']) {
    for (const [way, use] of Object.entries(ways)) {
      const seen = [];
      for (const res of [await agent.request(`${server.url}${path}`), await pool.request({ path, method: 'GET' })]) {
        // undici's body emits its abort as an error when destroyed before its end.
        res.body.on('error', () => {});
        const before = res.body.bodyUsed;
        await use(res.body);
        seen.push([before, res.body.bodyUsed]);
        res.body.destroy();
      }
      assert.deepStrictEqual(seen[0], seen[1], `${way} ${path}: ours against undici's`);
      assert.deepStrictEqual(seen[0], [false, true], `${way} ${path}`);
    }
  }
});

test('text() and json() drop a leading byte order mark, as undici and fetch do', async (t) => {
  const bom = Buffer.from([0xef, 0xbb, 0xbf]);
  const server = await httpServer(t, (req, res) => res.end(Buffer.concat([bom, Buffer.from('{"a":"é"}')])));
  const agent = new Agent();
  t.after(() => agent.destroy());
  assert.strictEqual(await (await agent.request(server.url)).body.text(), '{"a":"é"}');
  assert.deepStrictEqual(await (await agent.request(server.url)).body.json(), { a: 'é' });
  // The bytes keep it.
  const bytes = Buffer.from(await (await agent.request(server.url)).body.arrayBuffer());
  assert.ok(bytes.subarray(0, 3).equals(bom));
});

test('a streamed body read by text() and the like ends and closes as a read stream', { timeout: 20000 }, async (t) => {
  const string = 'x'.repeat(1024 * 1024);
  const big = Buffer.from(JSON.stringify(string));
  const server = await httpServer(t, (req, res) => res.end(big));
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const read of ['text', 'json', 'arrayBuffer', 'bytes']) {
    const { body } = await agent.request(server.url);
    const value = await body[read]();
    if (read === 'json') assert.strictEqual(value, string);
    else assert.ok(Buffer.from(value).equals(big), read);
    await finished(body);
    assert.strictEqual(body.readableEnded, true, read);
    assert.strictEqual(body.destroyed, true, read);
    const rest = [];
    for await (const c of body) rest.push(c);
    assert.deepStrictEqual(rest, [], read);
  }
});

test('text() and the like make no error for a body they read to its end; a body destroyed mid-read still fails', { timeout: 20000 }, async (t) => {
  // An error's stack trace costs about what a small request does: the stream's destroy at its
  // end must not make the AbortError a consumer still collecting would get.
  const errors = require('../../lib/errors');
  const original = errors.abortError;
  let made = 0;
  errors.abortError = (...args) => {
    made++;
    return original(...args);
  };
  t.after(() => {
    errors.abortError = original;
  });
  const big = Buffer.from(JSON.stringify('y'.repeat(1024 * 1024)));
  const small = Buffer.from('"small"');
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/big') res.end(big);
    else if (req.url === '/stall') res.write('part'); // and never ends
    else res.end(small);
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const read of ['text', 'json', 'arrayBuffer', 'bytes']) {
    for (const p of ['/small', '/big']) {
      const { body } = await agent.request(server.url + p);
      const value = await body[read]();
      const sent = p === '/big' ? big : small;
      if (read === 'json') assert.strictEqual(value, JSON.parse(sent));
      else assert.ok(Buffer.from(value).equals(sent), `${read} ${p}`);
      await finished(body);
      assert.strictEqual(body.destroyed, true);
    }
  }
  assert.strictEqual(made, 0, 'no AbortError made for bodies read to their end');
  const { body } = await agent.request(server.url + '/stall');
  const reading = body.text();
  body.destroy();
  await assert.rejects(reading, { name: 'AbortError' });
  assert.strictEqual(made, 1);
});

test('text() on a body already read, ended or destroyed, or destroyed while it reads, settles', { timeout: 20000 }, async (t) => {
  const big = Buffer.alloc(1024 * 1024, 'r');
  const server = await httpServer(t, (req, res) => {
    if (req.url !== '/part') return res.end(big);
    // Part of a body, then nothing more.
    res.writeHead(200);
    res.write('part');
    return undefined;
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const unusable = (why) => (err) => err instanceof TypeError && err.message === `Body is unusable: ${why}`;

  let res = await agent.request(server.url);
  res.body.destroy();
  await assert.rejects(res.body.text(), unusable('it was destroyed'));

  res = await agent.request(server.url);
  const boom = new Error('boom');
  res.body.on('error', () => {});
  res.body.destroy(boom);
  await assert.rejects(res.body.text(), (err) => err === boom);

  res = await agent.request(server.url);
  res.body.resume();
  await once(res.body, 'end');
  await assert.rejects(res.body.text(), unusable('it has already been read'));

  // Part read: text() has the rest.
  res = await agent.request(server.url);
  await once(res.body, 'readable');
  const first = res.body.read();
  assert.strictEqual(first.length + (await res.body.text()).length, big.length);

  // Destroyed while text() collects the rest: a premature close.
  res = await agent.request(server.url);
  res.body.once('data', () => res.body.destroy());
  await assert.rejects(res.body.text(), { code: 'ERR_STREAM_PREMATURE_CLOSE' });

  // Destroyed while text() has the body to itself: aborted, or the error it was destroyed with.
  for (const error of [undefined, new Error('enough')]) {
    res = await agent.request(`${server.url}/part`);
    const text = res.body.text();
    res.body.on('error', () => {});
    res.body.destroy(error);
    await assert.rejects(text, error ? (err) => err === error : { code: 'ABORT_ERR', name: 'AbortError' });
  }
});

test('body.dump() drops a body: within its limit the connection is reused, past it closed', async (t) => {
  const big = Buffer.alloc(1024 * 1024, 'b');
  let stall = null;
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/big') return res.end(big);
    if (req.url === '/big-chunked') {
      res.write(big);
      return res.end();
    }
    if (req.url === '/stall') {
      res.writeHead(200, { 'content-length': '10' });
      res.write('12345');
      stall = res;
      return undefined;
    }
    return res.end('hello');
  });
  const agent = new Agent({ maxSockets: 1 });
  t.after(() => agent.destroy());
  const port = () => server.requestPorts[server.requestPorts.length - 1];

  // A small body, and a large one with a limit above its size: read, the connection kept.
  assert.strictEqual(await (await agent.request(server.url)).body.dump(), null);
  const first = port();
  assert.strictEqual(await (await agent.request(`${server.url}/big`)).body.dump({ limit: 2 * big.length }), null);
  assert.strictEqual(port(), first);
  // Past the default limit (128 KiB): destroyed, so the next request needs a new connection;
  // by its length at once, with nothing read (as undici's), or once it has read past it.
  let previous = first;
  for (const [path, read] of [['/big', (n) => n === 0], ['/big-chunked', (n) => n > 128 * 1024 && n < big.length]]) {
    const res = await agent.request(server.url + path);
    let seen = 0;
    res.body.on('data', (chunk) => { seen += chunk.length; });
    assert.strictEqual(await res.body.dump(), null);
    assert.ok(read(seen), `${path}: ${seen} bytes read`);
    assert.strictEqual(res.body.destroyed, true);
    assert.strictEqual(res.body.readableEnded, false);
    assert.strictEqual(await (await agent.request(server.url)).body.text(), 'hello');
    assert.notStrictEqual(port(), previous);
    previous = port();
  }
  // A body already read (whole, or streamed) has nothing left to drop.
  for (const path of ['/', '/big']) {
    const read = await agent.request(server.url + path);
    await read.body.text();
    assert.strictEqual(await read.body.dump(), null);
  }

  // A signal: rejects with its reason when it aborts during the dump, or had aborted before.
  const stalled = await agent.request(`${server.url}/stall`);
  const controller = new AbortController();
  const dumped = stalled.body.dump({ signal: controller.signal });
  const reason = new Error('enough');
  controller.abort(reason);
  await assert.rejects(dumped, (err) => err === reason);
  stall.destroy();
  const aborted = await agent.request(server.url);
  await assert.rejects(aborted.body.dump({ signal: AbortSignal.abort(reason) }), (err) => err === reason);
  aborted.body.destroy();

  // Bad options reject, as undici's dump() does (it never throws), and leave the body as it was.
  const bad = await agent.request(server.url);
  const refused = [[5, 'ERR_INVALID_ARG_TYPE'], [{ limit: -1 }, 'ERR_OUT_OF_RANGE'], [{ limit: '1' }, 'ERR_INVALID_ARG_TYPE'], [{ signal: {} }, 'ERR_INVALID_ARG_TYPE']];
  for (const [options, code] of refused) {
    let promise;
    assert.doesNotThrow(() => { promise = bad.body.dump(options); });
    await assert.rejects(promise, { code });
  }
  assert.strictEqual(bad.body.bodyUsed, false);
  assert.strictEqual(await bad.body.dump(), null);
});

test('for await over a body that came whole acts as the stream iterator', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('hello'));
  const agent = new Agent();
  t.after(() => agent.destroy());
  // What a loop over a fresh response's body sees, with the body's events, when the loop runs
  // to the end, breaks, or destroys the body (with and without an error).
  async function run(iterator, scenario) {
    const { body } = await agent.request(server.url);
    const closed = new Promise((resolve) => body.once('close', resolve));
    const log = [];
    body.on('error', (err) => log.push(`error ${err.code ?? err.message}`));
    body.on('end', () => log.push('end'));
    body.on('close', () => log.push('close'));
    const it = iterator(body);
    log.push(Object.prototype.toString.call(it) === '[object AsyncGenerator]' ? 'general' : 'whole');
    try {
      for await (const chunk of { [Symbol.asyncIterator]: () => it }) {
        log.push(`chunk ${chunk}`);
        if (scenario === 'break') break;
        if (scenario === 'error') body.destroy(new Error('boom'));
        if (scenario === 'destroy') body.destroy();
      }
      log.push(`after: ended ${body.readableEnded}, destroyed ${body.destroyed}`);
    } catch (err) {
      log.push(`threw ${err.code ?? err.message}`);
    }
    await closed;
    return log.slice(1).concat(log[0]);
  }
  const general = (body) => Readable.prototype[Symbol.asyncIterator].call(body);
  const own = (body) => body[Symbol.asyncIterator]();
  for (const scenario of ['end', 'break', 'error', 'destroy']) {
    const expected = (await run(general, scenario)).slice(0, -1);
    assert.deepStrictEqual(await run(own, scenario), expected.concat('whole'), scenario);
  }
  // With an encoding set, the chunks are strings, as the stream's decoder makes them.
  const { body } = await agent.request(server.url);
  body.setEncoding('utf8');
  const chunks = [];
  for await (const chunk of body) chunks.push(chunk);
  assert.deepStrictEqual(chunks, ['hello']);
  // The connection is back in the pool after each.
  assert.strictEqual(await (await agent.request(server.url)).body.text(), 'hello');
});

test('text() and arrayBuffer() of a body given an encoding read every byte of it', async (t) => {
  // Two-byte characters, written in pieces of an odd size: characters split between chunks.
  const whole = Buffer.from('é'.repeat(300_000));
  const server = await httpServer(t, (req, res) => {
    let at = 0;
    const more = () => {
      while (at < whole.length) {
        const piece = whole.subarray(at, at + 32_769);
        at += piece.length;
        if (!res.write(piece)) return res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const res = await agent.request(server.url);
  res.body.setEncoding('utf8');
  assert.strictEqual(await res.body.text(), whole.toString());
  const hex = await agent.request(server.url);
  hex.body.setEncoding('hex');
  assert.deepStrictEqual(Buffer.from(await hex.body.arrayBuffer()), whole);
  // Read in part first, then the rest whole.
  const read = await agent.request(server.url);
  read.body.setEncoding('latin1');
  const first = await new Promise((resolve) => read.body.once('readable', () => resolve(read.body.read())));
  const rest = Buffer.from(await read.body.arrayBuffer());
  assert.deepStrictEqual(Buffer.concat([Buffer.from(first, 'latin1'), rest]), whole);
});

test('text() and the like take every chunk the body holds already (Node 26 reads them one at a time)', async (t) => {
  // Three pieces, the last two once the client has the head (a body that comes whole with
  // its head is held out of the stream): they wait in the stream, read ahead.
  const pieces = ['a', 'b', 'c'].map((c) => c.repeat(4000));
  let rest = null;
  const server = await httpServer(t, (req, res) => {
    res.write(pieces[0]);
    rest = () => {
      res.write(pieces[1]);
      setImmediate(() => res.end(pieces[2]));
    };
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const method of ['text', 'arrayBuffer']) {
    const { body } = await agent.request(server.url);
    rest();
    await until(() => body.readableLength >= 12000, 5000, 'the pieces to be read ahead');
    const got = await body[method]();
    assert.strictEqual(Buffer.from(got).toString(), pieces.join(''), method);
  }
});

test('arrayBuffer(), bytes() and blob() of a body given an encoding are its bytes, whatever the encoding made of them', async (t) => {
  // Not UTF-8, and of an odd length: a decoder replaces the bytes it cannot read, and UTF-16
  // drops a last lone byte. A small body (with its head) and one of many chunks.
  const small = Buffer.from([0x61, 0xff, 0xfe, 0x80, 0x62]);
  const large = crypto.randomBytes(300_001);
  const server = await httpServer(t, (req, res) => {
    if (req.url === '/small') return res.end(small);
    res.write(large.subarray(0, 1000));
    return res.end(large.subarray(1000));
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  for (const [path, whole] of [['/small', small], ['/large', large]]) {
    for (const encoding of ['utf8', 'utf16le', 'ascii']) {
      for (const method of ['arrayBuffer', 'bytes', 'blob']) {
        const { body } = await agent.request(`${server.url}${path}`);
        body.setEncoding(encoding);
        let got = await body[method]();
        if (method === 'blob') got = await got.arrayBuffer();
        assert.ok(Buffer.from(got).equals(whole), `${path} ${encoding} ${method}`);
      }
    }
  }
});

test('text() and the like read a body that was paused or unpiped, as undici\'s resume it', { timeout: 20000 }, async (t) => {
  const whole = 'p'.repeat(200_000);
  const server = await httpServer(t, (req, res) => res.end(whole));
  const agent = new Agent();
  t.after(() => agent.destroy());
  // Paused before anything was read.
  let res = await agent.request(server.url);
  res.body.pause();
  assert.strictEqual(await res.body.text(), whole);
  // Paused after a chunk.
  res = await agent.request(server.url);
  const [first] = await once(res.body, 'data');
  res.body.pause();
  assert.strictEqual(first.toString() + (await res.body.text()), whole);
  // Piped, then unpiped: text() has what the pipe did not take.
  res = await agent.request(server.url);
  let piped = '';
  const sink = new Writable({
    write(chunk, encoding, cb) {
      piped += chunk;
      cb();
    },
  });
  res.body.pipe(sink);
  await new Promise((resolve) => setImmediate(resolve));
  res.body.unpipe(sink);
  assert.strictEqual(piped + (await res.body.text()), whole);
  // Each connection went back to the pool.
  assert.strictEqual(await (await agent.request(server.url)).body.text(), whole);
});

test("undici's onInfo hears each informational response before the promise resolves, as undici's does", async (t) => {
  const undici = require('../undici');
  const server = await httpServer(t, (req, res) => {
    res.writeProcessing();
    res.writeEarlyHints({ link: ['</a.css>; rel=preload', '</b.js>; rel=preload'], 'x-hint': '1' });
    res.end('ok');
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const pool = new undici.Pool(server.url);
  t.after(() => pool.close());
  const store = new AsyncLocalStorage();
  const heard = async (send, responseHeaders) => {
    const infos = [];
    let resolved = false;
    const res = await store.run('mine', () => send({
      responseHeaders,
      onInfo: (info) => infos.push({ ...info, resolved, store: store.getStore() }),
    }));
    resolved = true;
    assert.strictEqual(await res.body.text(), 'ok');
    return infos;
  };
  for (const raw of [undefined, 'raw']) {
    const ours = await heard((o) => agent.request(`${server.url}/`, o), raw);
    const theirs = await heard((o) => pool.request({ path: '/', method: 'GET', ...o }), raw);
    // Raw lists: names lower-case on ours, as the README says of rawHeaders.
    const lower = (infos) => infos.map((i) => (Array.isArray(i.headers)
      ? { ...i, headers: i.headers.map((v, n) => (n % 2 === 0 ? v.toLowerCase() : v)) }
      : i));
    assert.deepStrictEqual(ours, lower(theirs));
    assert.deepStrictEqual(ours.map((i) => [i.statusCode, i.resolved, i.store]), [[102, false, 'mine'], [103, false, 'mine']]);
  }
  const [, hints] = await heard((o) => agent.request(`${server.url}/`, o));
  assert.deepStrictEqual(hints.headers, { link: '</a.css>; rel=preload, </b.js>; rel=preload', 'x-hint': '1' });
});

test('onInfo hears 100 Continue too; a throw from it fails the request; bad values are refused', async (t) => {
  const url = await continueServer(t, continueAndEcho);
  const agent = new Agent();
  t.after(() => agent.destroy());
  const infos = [];
  const res = await agent.request(url, {
    method: 'POST',
    headers: { expect: '100-continue' },
    body: 'payload',
    onInfo: (info) => infos.push(info),
  });
  assert.strictEqual(await res.body.text(), 'got payload');
  assert.deepStrictEqual(infos, [{ statusCode: 100, headers: {} }]);
  // What onInfo throws is the request's error, as undici's.
  const boom = new Error('boom');
  await assert.rejects(agent.request(url, {
    method: 'POST',
    headers: { expect: '100-continue' },
    body: 'again',
    onInfo: () => { throw boom; },
  }), (err) => err === boom);
  assert.throws(() => agent.request(url, { onInfo: 'no' }), { code: 'ERR_INVALID_ARG_TYPE', message: /options\.onInfo/ });
  for (const onInfo of [undefined, null]) await (await agent.request(url, { onInfo })).body.dump();
});

test('onInfo hears a 103 whose reused connection then closes; the request fails as a hang-up, sent once', async (t) => {
  const paths = [];
  const server = await rawServer(t, (socket) => {
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      let end;
      while ((end = buffered.indexOf('\r\n\r\n')) >= 0) {
        const path = buffered.split(' ')[1];
        buffered = buffered.slice(end + 4);
        paths.push(path);
        if (path === '/hinted') {
          socket.end('HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n');
        } else {
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        }
      }
    });
  });
  const agent = new Agent();
  t.after(() => agent.destroy());
  const url = `http://127.0.0.1:${server.port}`;
  assert.strictEqual(await (await agent.request(`${url}/first`)).body.text(), 'ok');
  const infos = [];
  await assert.rejects(
    agent.request(`${url}/hinted`, { onInfo: (info) => infos.push(info.statusCode) }),
    { code: 'ECONNRESET', message: 'socket hang up' },
  );
  assert.deepStrictEqual(infos, [103]);
  assert.deepStrictEqual(paths, ['/first', '/hinted'], 'sent once');
  assert.strictEqual(agent.replayCount, 0);
});
