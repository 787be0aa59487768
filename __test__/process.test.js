'use strict';

// A good process citizen: worker threads, termination and exit with requests in flight, and
// domains (each check runs in a child process, so a crash cannot take the test runner down).

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { once } = require('node:events');
const { httpServer, runChild } = require('./helpers');

const ROOT = JSON.stringify(path.resolve(__dirname, '..'));

test('the addon works in several worker threads at once, and a worker terminated mid-request ends cleanly', async (t) => {
  const server = await httpServer(t, (req, res) => {
    if (req.url !== '/hang') res.end(`hi ${req.url}`);
  });
  const script = `
    const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
    const http = require('node:http');
    const { Agent } = require(${ROOT});
    if (isMainThread) {
      (async () => {
        const run = (data) => new Promise((resolve, reject) => {
          // Workers run this same script, which the parent passes in the environment.
          const w = new Worker(process.env.HYPERAGENT_WORKER_SCRIPT, { eval: true, workerData: data });
          w.on('message', (m) => resolve({ w, m }));
          w.on('error', reject);
        });
        const results = await Promise.all([1, 2, 3, 4].map((i) => run({ i, mode: 'ok' })));
        console.log(JSON.stringify(results.map((r) => r.m)));
        const { w } = await run({ i: 9, mode: 'hang' });
        console.log('terminated', await w.terminate());
        // The main thread's own agent still works after workers came and went.
        const agent = new Agent();
        const res = await agent.request('${server.url}/main');
        console.log(await res.body.text());
      })();
    } else {
      const agent = new Agent();
      const { i, mode } = workerData;
      const url = '${server.url}';
      if (mode === 'ok') {
        Promise.all([
          agent.request(url + '/w' + i).then((r) => r.body.text()),
          new Promise((resolve) => http.get(url + '/d' + i, { agent }, (r) => {
            let b = '';
            r.on('data', (d) => (b += d));
            r.on('end', () => resolve(b));
          })),
        ]).then((r) => parentPort.postMessage(r));
      } else {
        http.get(url + '/hang', { agent }, () => {});
        agent.request(url + '/hang').catch(() => {});
        setTimeout(() => parentPort.postMessage('in flight'), 20);
      }
    }
  `;
  const { code, out, err } = await runChild(script, { HYPERAGENT_WORKER_SCRIPT: script });
  assert.strictEqual(code, 0, err);
  const lines = out.trim().split('\n');
  assert.deepStrictEqual(JSON.parse(lines[0]), [1, 2, 3, 4].map((i) => [`hi /w${i}`, `hi /d${i}`]));
  assert.strictEqual(lines[1], 'terminated 1');
  assert.strictEqual(lines[2], 'hi /main');
});

test('a worker terminated while large bodies go out from its Buffers (HTTP and HTTPS) ends cleanly', async (t) => {
  // The Buffers' bytes are read by tokio as they go (no copy): the worker's teardown, which
  // frees them, waits until tokio has let go.
  const tlsDir = path.join(__dirname, 'fixtures', 'tls');
  const script = `
    const { Worker, isMainThread, workerData } = require('node:worker_threads');
    const { once } = require('node:events');
    const fs = require('node:fs');
    const path = require('node:path');
    const net = require('node:net');
    const tls = require('node:tls');
    const http = require('node:http');
    const { Agent, HttpsAgent } = require(${ROOT});
    const dir = ${JSON.stringify(tlsDir)};
    if (isMainThread) {
      (async () => {
        // Servers that take the start of an upload and then read no more.
        let started = 0;
        let allStarted;
        const uploading = new Promise((resolve) => (allStarted = resolve));
        const take = (socket) => {
          socket.on('error', () => {});
          socket.once('data', () => {
            socket.pause();
            if (++started === 4) allStarted();
          });
        };
        const plain = net.createServer(take).listen(0, '127.0.0.1');
        const secure = tls.createServer({
          key: fs.readFileSync(path.join(dir, 'localhost-key.pem')),
          cert: fs.readFileSync(path.join(dir, 'localhost-chain.pem')),
        }, take).listen(0, '127.0.0.1');
        await Promise.all([once(plain, 'listening'), once(secure, 'listening')]);
        const w = new Worker(process.env.HYPERAGENT_WORKER_SCRIPT, {
          eval: true,
          workerData: { plain: plain.address().port, secure: secure.address().port },
        });
        w.on('error', (e) => console.log('worker error', e));
        await uploading;
        console.log('terminated', await w.terminate());
        const ok = http.createServer((req, res) => res.end('still here')).listen(0, '127.0.0.1');
        await once(ok, 'listening');
        const res = await new Agent().request('http://127.0.0.1:' + ok.address().port + '/');
        console.log(await res.body.text());
        process.exit(0);
      })();
    } else {
      const body = Buffer.alloc(16 * 1024 * 1024, 'w');
      const agent = new Agent();
      const secure = new HttpsAgent({ ca: fs.readFileSync(path.join(dir, 'ca.pem')) });
      for (let i = 0; i < 2; i++) {
        agent.request('http://127.0.0.1:' + workerData.plain + '/', { method: 'POST', body }).catch(() => {});
        secure.request('https://localhost:' + workerData.secure + '/', { method: 'POST', body }).catch(() => {});
      }
    }
  `;
  const { code, signal, out, err } = await runChild(script, { HYPERAGENT_WORKER_SCRIPT: script });
  assert.strictEqual(signal, null, err);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(out.trim().split('\n'), ['terminated 1', 'still here']);
});

test('process.exit() with requests in flight on both paths exits cleanly', async (t) => {
  const server = await httpServer(t, () => {});
  const { code, signal, err } = await runChild(`
    const http = require('node:http');
    const { Agent } = require(${ROOT});
    const agent = new Agent();
    for (let i = 0; i < 10; i++) {
      http.get('${server.url}/' + i, { agent }, () => {}).on('error', () => {});
      agent.request('${server.url}/p' + i).catch(() => {});
    }
    setTimeout(() => process.exit(7), 50);
  `);
  assert.strictEqual(signal, null, err);
  assert.strictEqual(code, 7, err);
});

test('agent.request() on a reused connection goes out from every phase of the loop, and the process exits when done', async (t) => {
  // The exchange on a reused connection starts when the loop's turn ends: made from a timer,
  // an immediate, a tick, a microtask, an I/O callback or a response's own end, it must still
  // go out, and a process with nothing else to do must neither hang nor exit early.
  const server = await httpServer(t, (req, res) => res.end(req.url));
  const { code, signal, out, err } = await runChild(`
    const { Agent } = require(${ROOT});
    const agent = new Agent({ maxSockets: 1 });
    const get = async (path) => (await (await agent.request('${server.url}' + path)).body.text());
    const phases = {
      timer: (go) => setTimeout(go, 0),
      immediate: (go) => setImmediate(go),
      tick: (go) => process.nextTick(go),
      microtask: (go) => queueMicrotask(go),
      io: (go) => require('node:fs').stat(__filename, go),
    };
    (async () => {
      const seen = [await get('/warm')];
      for (const [name, schedule] of Object.entries(phases)) {
        seen.push(await new Promise((resolve, reject) => schedule(() => get('/' + name).then(resolve, reject))));
      }
      // From inside the body's end of the previous response, on the connection it frees.
      const res = await agent.request('${server.url}/first');
      const next = new Promise((resolve, reject) => res.body.on('end', () => get('/from-end').then(resolve, reject)));
      res.body.resume();
      seen.push(await next);
      console.log(seen.join(' '));
      console.log('sockets', agent.getCurrentStatus().createSocketCount);
    })().catch((e) => { console.error(e); process.exit(1); });
  `);
  assert.strictEqual(signal, null, err);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(out.trim().split('\n'), [
    '/warm /timer /immediate /tick /microtask /io /from-end',
    'sockets 1',
  ]);
});

test('a domain active when a request starts receives the exceptions thrown in its handlers', async (t) => {
  const server = await httpServer(t);
  const { code, out, err } = await runChild(`
    const domain = require('node:domain');
    const http = require('node:http');
    const { Agent } = require(${ROOT});
    const agent = new Agent({ maxSockets: 1 });
    const caught = [];
    const done = () => {
      if (caught.length === 3) {
        console.log(JSON.stringify(caught.sort()));
        agent.destroy();
      }
    };
    for (const name of ['a', 'b', 'c']) {
      const d = domain.create();
      d.on('error', (e) => {
        caught.push(name + ':' + e.message);
        done();
      });
      d.run(() => {
        http.get('${server.url}/' + name, { agent }, (res) => {
          res.resume();
          res.on('end', () => { throw new Error('thrown in ' + name); });
        });
      });
    }
  `);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), ['a:thrown in a', 'b:thrown in b', 'c:thrown in c']);
});

test('a domain active when agent.request() starts receives the exceptions thrown in its body handlers', async (t) => {
  const big = Buffer.alloc(1024 * 1024, 'x');
  const server = await httpServer(t, (req, res) => {
    // A long body arrives in many chunks, after its head; a cut one fails after its head.
    if (req.url.startsWith('/big')) {
      res.end(big);
    } else {
      res.writeHead(200, { 'content-length': 100 });
      res.write('partial', () => res.destroy());
    }
  });
  const { code, out, err } = await runChild(`
    const domain = require('node:domain');
    const { Agent } = require(${ROOT});
    const agent = new Agent({ maxSockets: 1 });
    const caught = [];
    const ends = [];
    const done = () => {
      if (caught.length === 6 && ends.length === 3) {
        console.log(JSON.stringify({ caught: caught.sort(), ends: ends.sort() }));
        agent.destroy();
      }
    };
    for (const name of ['a', 'b', 'c']) {
      const d = domain.create();
      d.on('error', (e) => {
        caught.push(name + ':' + e.message);
        done();
      });
      d.run(() => {
        // Both events come from Rust: body chunks read after the head, and the body's failure.
        // The body whose listener threw fails, as Node's http fails such a response, and the
        // connection it held goes to the next request.
        agent.request('${server.url}/big/' + name).then((res) => {
          let chunks = 0;
          res.body.on('data', () => {
            if (++chunks === 3) throw new Error('data in ' + name);
          });
          res.body.on('end', () => ends.push(name + ': end'));
          res.body.on('error', (e) => ends.push(name + ': ' + e.code + ' ' + e.message));
          res.body.on('close', done);
        });
        agent.request('${server.url}/cut/' + name).then((res) => {
          res.body.on('error', () => { throw new Error('error in ' + name); });
          res.body.resume();
        });
      });
    }
  `);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), {
    caught: ['a:data in a', 'a:error in a', 'b:data in b', 'b:error in b', 'c:data in c', 'c:error in c'],
    ends: ['a: ECONNRESET aborted', 'b: ECONNRESET aborted', 'c: ECONNRESET aborted'],
  });
});

test("a 'free' listener that throws does not keep the connection from the next request", async (t) => {
  const server = await httpServer(t, (req, res) => res.end(`ok ${req.url}`));
  const { code, out, err } = await runChild(`
    const http = require('node:http');
    const { Agent } = require(${ROOT});
    const agent = new Agent({ maxSockets: 1 });
    const seen = [];
    process.on('uncaughtException', (e) => seen.push('uncaught: ' + e.message));
    let thrown = false;
    agent.on('free', () => {
      if (!thrown) {
        thrown = true;
        throw new Error('in free');
      }
    });
    // One connection for all: each request waits for the one before it to free it.
    let left = 3;
    for (let i = 0; i < 3; i++) {
      http.get('${server.url}/' + i, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => {
          seen.push(body);
          if (--left === 0) {
            console.log(JSON.stringify({ seen, created: agent.createSocketCount }));
            agent.destroy();
          }
        });
      });
    }
  `);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), { seen: ['ok /0', 'uncaught: in free', 'ok /1', 'ok /2'], created: 1 });
});

test('a callback of the Dispatcher or the agent that throws raises an uncaught exception, not an unhandled rejection', async (t) => {
  const server = await httpServer(t, (req, res) => res.end('ok'));
  const { code, out, err } = await runChild(`
    const { Agent, Dispatcher } = require(${ROOT});
    const seen = [];
    process.on('unhandledRejection', (e) => seen.push('unhandled: ' + e.message));
    const d = new Dispatcher();
    const origin = '${server.url}';
    const expected = 5;
    process.on('uncaughtException', (e) => {
      seen.push('uncaught: ' + e.message);
      if (seen.length === expected) {
        console.log(JSON.stringify(seen.sort()));
        d.destroy();
      }
    });
    // Each callback is called once, its throw not taken for the request's failure.
    d.request({ origin, path: '/', method: 'GET' }, (e, data) => {
      data.body.resume();
      throw new Error('request ' + (e === null));
    });
    d.request({ origin: 'http://127.0.0.1:1', path: '/', method: 'GET' }, (e) => {
      throw new Error('refused ' + e.code);
    });
    const { Writable } = require('node:stream');
    d.stream({ origin, path: '/', method: 'GET' }, () => new Writable({ write(c, enc, cb) { cb(); } }), (e) => {
      throw new Error('stream ' + (e === null));
    });
    new Dispatcher().close(() => { throw new Error('dispatcher close'); });
    new Agent().close(() => { throw new Error('agent close'); });
  `);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), [
    'uncaught: agent close',
    'uncaught: dispatcher close',
    'uncaught: refused ECONNREFUSED',
    'uncaught: request true',
    'uncaught: stream true',
  ]);
});

test("Node's --max-http-header-size is agent.request()'s and the Dispatcher's largest response head, as Node's parser and undici take it", async (t) => {
  // A response head of some 300 bytes.
  const server = await httpServer(t, (req, res) => {
    res.setHeader('x-long', 'v'.repeat(200));
    res.end('ok');
  });
  const script = `
    const { Agent, Dispatcher } = require(${ROOT});
    const agent = new Agent();
    const d = new Dispatcher();
    const url = '${server.url}/';
    (async () => {
      const seen = [];
      seen.push(await agent.request(url).then((r) => r.statusCode, (e) => e.code));
      seen.push(await fetch(url, { dispatcher: d }).then((r) => r.status, (e) => e.cause.code));
      // A request's own limit still wins.
      seen.push(await agent.request(url, { maxResponseHeaderSize: 4096 }).then((r) => r.statusCode, (e) => e.code));
      console.log(JSON.stringify(seen));
      agent.destroy();
      d.destroy();
    })();
  `;
  const limited = await runChild(script, {}, ['--max-http-header-size=100']);
  assert.strictEqual(limited.code, 0, limited.err);
  assert.deepStrictEqual(JSON.parse(limited.out), ['HPE_HEADER_OVERFLOW', 'HPE_HEADER_OVERFLOW', 200]);
  const plain = await runChild(script);
  assert.strictEqual(plain.code, 0, plain.err);
  assert.deepStrictEqual(JSON.parse(plain.out), [200, 200, 200]);
});

test('an unread response body lets the process exit, as a paused Node response does; bodies being read are read whole first', { timeout: 60_000 }, async (t) => {
  // 4 MiB, written in 64 KiB pieces as the socket takes them: far more than Rust reads ahead.
  const SIZE = 4 << 20;
  const server = await httpServer(t, async (req, res) => {
    res.setHeader('content-length', SIZE);
    const piece = Buffer.alloc(64 << 10, 'a');
    for (let sent = 0; sent < SIZE; sent += piece.length) {
      if (!res.write(piece)) await once(res, 'drain');
    }
    res.end();
  });
  // In a child process whose loop only the agent's requests can hold: each way of reading
  // gets the whole body; the process then exits although a last body is never read.
  const { code, out, err } = await runChild(`
    const { Agent, Dispatcher } = require(${ROOT});
    const { Writable } = require('node:stream');
    const agent = new Agent();
    const d = new Dispatcher();
    const url = '${server.url}/';
    const seen = {};
    (async () => {
      seen.text = (await (await agent.request(url)).body.text()).length;
      let n = 0;
      for await (const chunk of (await agent.request(url)).body) {
        n += chunk.length;
        await null;
      }
      seen.iterated = n;
      const res = await agent.request(url);
      seen.piped = await new Promise((resolve) => {
        let m = 0;
        res.body.pipe(new Writable({
          highWaterMark: 1024,
          write(chunk, enc, cb) { m += chunk.length; setImmediate(cb); },
        })).on('finish', () => resolve(m));
      });
      // Paused, then read on once a timer (which holds the loop) fires.
      const paused = await agent.request(url);
      paused.body.pause();
      await new Promise((resolve) => setTimeout(resolve, 200));
      let p = 0;
      for await (const chunk of paused.body) p += chunk.length;
      seen.resumed = p;
      seen.fetched = (await (await fetch(url, { dispatcher: d })).arrayBuffer()).byteLength;
      // Never read: the process is free to exit with it pending.
      await agent.request(url);
      await fetch(url, { dispatcher: d });
      console.log(JSON.stringify(seen));
    })();
  `);
  assert.strictEqual(code, 0, err);
  assert.deepStrictEqual(JSON.parse(out), { text: SIZE, iterated: SIZE, piped: SIZE, resumed: SIZE, fetched: SIZE });
});
