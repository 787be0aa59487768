'use strict';

// A seeded storm on HTTP/2, where requests share connections: a Node http2 server that answers,
// resets streams (before and after the head), refuses streams, ends sessions gracefully with a
// GOAWAY, stalls, or destroys a whole session with streams in flight, while the client aborts,
// destroys bodies and keeps more streams in flight than the server allows at once. Through
// agent.request() and through fetch with the Dispatcher. What must hold whatever the mix: every
// request settles, with its response or an error with a code; a refused stream goes again and
// is answered; a POST is never processed twice; the pool ends empty and its counters add up.
// The single faults have their own tests (http2.test.js). STORM_SEED and STORM_N (requests per
// test, 300) run another storm.

const test = require('node:test');
const assert = require('node:assert');
const http2 = require('node:http2');
const fs = require('node:fs');
const path = require('node:path');
const { once } = require('node:events');
const { HttpsAgent } = require('..');
const binding = require('../lib/native');
const { until } = require('./helpers');
const { random, pick, paths: shared, runStorm, nameOf, settledByClient } = require('./storm-paths');

const fixture = (name) => fs.readFileSync(path.join(__dirname, 'fixtures', 'tls', name));
const { NGHTTP2_REFUSED_STREAM, NGHTTP2_INTERNAL_ERROR } = http2.constants;

const BIG = 256 * 1024;

// What the server does with a request, by its path's first segment. `processed` counts the
// requests whose handler acted (answered, or began to); a refused stream is not processed.
async function stormServer(t) {
  const processed = new Map();
  const refused = new Set();
  const sessions = new Set();
  const server = http2.createSecureServer({
    cert: fixture('localhost-chain.pem'),
    key: fixture('localhost-key.pem'),
    settings: { maxConcurrentStreams: 20 },
  });
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
    s.on('error', () => {});
  });
  server.on('request', (req, res) => {
    req.on('error', () => {});
    res.on('error', () => {});
    const [, what, id] = /^\/(\w[\w-]*)\/(\S+)$/.exec(req.url);
    const stream = req.stream;
    // A refused stream is refused once: it goes again, and is answered then.
    if (what === 'refuse' && !refused.has(id)) {
      refused.add(id);
      stream.close(NGHTTP2_REFUSED_STREAM);
      return;
    }
    // The body is read whole before anything is answered: a POST is processed with its body.
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (stream.destroyed) return;
      processed.set(id, (processed.get(id) || 0) + 1);
      switch (what) {
        case 'ok':
        case 'refuse':
          res.end(id);
          break;
        case 'big':
          res.end(Buffer.alloc(BIG, 'x'));
          break;
        case 'goaway':
          // A graceful end of the session: what is in flight is still answered, new requests
          // go to a new session.
          res.end(id);
          if (!stream.session.closed) stream.session.close();
          break;
        case 'reset-head':
          stream.close(NGHTTP2_INTERNAL_ERROR);
          break;
        case 'reset-body':
          res.write('partial');
          setImmediate(() => stream.close(NGHTTP2_INTERNAL_ERROR));
          break;
        case 'destroy':
          // The whole session ends at once, with every stream in flight on it.
          stream.session.destroy();
          break;
        case 'stall':
          // Never answers: the client's signal ends it.
          break;
        default:
          throw new Error(`unknown path ${what}`);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const s of sessions) s.destroy();
    server.close();
  });
  return { origin: `https://localhost:${server.address().port}`, processed, sessions };
}

// The paths of the promise API: agent.request(), and fetch through the Dispatcher.
const paths = { 'agent.request()': shared['agent.request()'], 'fetch (Dispatcher)': shared['fetch (Dispatcher)'] };

// Node's server counts a stream until its stream object is torn down, some time after the
// stream closed, and resets a stream opened over its limit by that count with ENHANCE_YOUR_CALM
// before any handler sees it (node_http2.cc: OnBeginHeadersCallback, ~Http2Stream): a client
// that aborts streams at the limit meets that. Only REFUSED_STREAM says a request was not
// processed, so the client fails it, as Node's client does; the storm checks that no POST so
// reset was processed.
function calmed(err) {
  return err.code === 'ERR_HTTP2_STREAM_ERROR' && /ENHANCE_YOUR_CALM/.test(err.message);
}

// The outcomes a request may have, by what the server does, what the client did, and what
// ended sessions while it was in flight: `destroyed`, a session was destroyed (which may fail
// any request on it); `endings`, how many sessions a GOAWAY or a destroy ended (each of which
// may leave it unprocessed, to go again, up to three times).
function check(plan, outcome, { destroyed, endings }) {
  if (settledByClient(plan, outcome)) return;
  const where = nameOf(plan);
  if (outcome.error) {
    const err = outcome.error;
    assert.strictEqual(typeof err.code, 'string', `${where}: an error without a code: ${err.stack}`);
    const own = {
      'reset-head': /^ERR_HTTP2_STREAM_ERROR$/,
      'reset-body': /^ERR_HTTP2_STREAM_ERROR$/,
      destroy: /^(ERR_HTTP2_\w+|ECONNRESET|EPIPE)$/,
    }[plan.what];
    const bySibling = destroyed && /^(ERR_HTTP2_\w+|ECONNRESET|EPIPE)$/.test(err.code);
    // Left unprocessed more times than it goes again (its own refusal counts): its last attempt
    // met a GOAWAY, a refusal, or a connection that a GOAWAY ended before the request went out
    // ('socket hang up').
    const unprocessed = err.code === 'ERR_HTTP2_GOAWAY_SESSION' || /REFUSED_STREAM/.test(err.message)
      || (err.code === 'ECONNRESET' && err.message === 'socket hang up');
    const spent = unprocessed && endings + (plan.what === 'refuse' ? 1 : 0) > 3;
    assert.ok((own && own.test(err.code)) || bySibling || spent || calmed(err), `${where}: failed with ${err.code}: ${err.message}`);
    return;
  }
  assert.notStrictEqual(plan.abort, 'at-once', `${where}: answered after an abort at once`);
  // Node's server ends a stream's writable side before it sends the RST_STREAM of
  // stream.close(code): when the end goes out first, the response is whole as sent.
  if (plan.what === 'reset-body' && outcome.status === 200 && outcome.text === 'partial') return;
  assert.ok(!['reset-head', 'reset-body', 'destroy', 'stall'].includes(plan.what), `${where}: answered ${outcome.status}`);
  assert.strictEqual(outcome.status, 200, where);
  if (plan.what === 'big') assert.strictEqual(outcome.text.length, BIG, where);
  else assert.strictEqual(outcome.text, plan.id, where);
}

// Node 20's http2 server corrupts its own heap under this storm now and then (glibc aborts
// with "corrupted size vs. prev_size" in Http2Session::HandleHeadersFrame), with Node's own
// http2 client as well as with ours: it runs on Node 22 and later.
const skip = Number(process.versions.node.split('.')[0]) < 22 && 'Node 20\'s http2 server aborts under this storm';

for (const [name, send] of Object.entries(paths)) {
  test(`${name}, HTTP/2: a storm of stream and session faults, aborts and queueing settles every request as it should`, { timeout: 60_000, skip }, async (t) => {
    const seed = Number(process.env.STORM_SEED || name.length * 104729);
    const [, extraBefore] = binding.heldOperations();
    const server = await stormServer(t);
    const agent = new HttpsAgent({ allowH2: true, ca: fixture('ca.pem'), freeSocketTimeout: 10_000 });
    t.after(() => agent.destroy());
    const rand = random(seed);
    const plans = Array.from({ length: Number(process.env.STORM_N || 300) }, (_, i) => {
      const what = pick(rand, [['ok', 60], ['big', 6], ['refuse', 6], ['goaway', 2], ['reset-head', 5], ['reset-body', 5], ['destroy', 2], ['stall', 4]]);
      const method = what === 'big' ? 'GET' : pick(rand, [['GET', 70], ['POST', 30]]);
      const abort = pick(rand, [[null, 88], ['at-once', 6], ['destroy-body', what === 'big' ? 30 : 6]]);
      return { what, method, abort, id: `${name[0]}${i}` };
    });

    // A request that overlaps a 'destroy' or a 'goaway' request may have been on the session
    // it ended.
    const { outcomes, spans } = await runStorm(plans, send, agent, server.origin, 40);

    const overlapping = (what, [a, b]) => spans.filter(([c, d], j) => what.includes(plans[j].what) && c < b && a < d).length;
    const during = (span) => ({ destroyed: overlapping(['destroy'], span) > 0, endings: overlapping(['destroy', 'goaway'], span) });

    plans.forEach((plan, i) => check(plan, outcomes[i], during(spans[i])));
    plans.forEach((plan, i) => {
      const count = server.processed.get(plan.id) || 0;
      const { error } = outcomes[i];
      if (plan.method === 'POST') assert.ok(count <= 1, `POST ${plan.id} was processed ${count} times`);
      if (plan.method === 'POST' && error && calmed(error)) assert.strictEqual(count, 0, `POST ${plan.id}, reset before its handler, was processed`);
      // A refused stream was answered when it went again (a GET perhaps twice: one whose
      // answer a session's end overtook goes again after the race).
      if (plan.what === 'refuse' && !plan.abort && !error) assert.ok(count >= 1, plan.id);
    });
    // ENHANCE_YOUR_CALM is rare (a stream opened as a reset one is still counted): a client
    // that opened streams past the server's limit would meet it at every turn.
    const calm = outcomes.filter((o) => o.error && calmed(o.error)).length;
    assert.ok(calm <= plans.length / 50, `${calm} streams reset with ENHANCE_YOUR_CALM`);
    for (const what of ['ok', 'big', 'refuse', 'goaway', 'reset-head', 'reset-body', 'destroy', 'stall']) {
      assert.ok(plans.some((p) => p.what === what), what);
    }
    // Enough healthy requests were answered for the storm to say something. Each destroyed
    // session fails the requests in flight on it, and a storm has about six: in some, fewer
    // than a third of the healthy requests are answered.
    const answered = plans.filter((p, i) => p.what === 'ok' && !p.abort && !outcomes[i].error);
    assert.ok(answered.length > 20, `${answered.length} healthy requests answered`);

    // The pool ends with no stream in use and nothing waiting; the sessions that ended closed
    // (one that a GOAWAY ended, once its last stream is done), and at most two are left open
    // (40 requests in flight, 20 streams a session). An HTTP/2 session counts as a socket in
    // use while it is open, streams or not.
    let status;
    let open;
    await until(() => {
      status = agent.getCurrentStatus();
      open = Object.values(status.http2).reduce((s, o) => s + o.sessions, 0);
      return Object.values(status.http2).every((o) => o.streams === 0) && open <= 2
        && status.createSocketCount === status.closeSocketCount + open;
    }, 5000, 'the streams to end and the sessions to close').catch((err) => {
      throw new Error(`${err.message}: ${JSON.stringify({ ...status, sockets: undefined, http2: Object.values(status.http2) })}`);
    });
    assert.deepStrictEqual(status.requests, {});
    assert.deepStrictEqual(status.freeSockets, {});
    assert.deepStrictEqual(binding.heldOperations(), [0, extraBefore]);

    agent.destroy();
    await until(() => server.sessions.size === 0, 5000, 'the server to see every session closed');
  });
}
