'use strict';

// What the seeded storms (storm.test.js, storm-h2.test.js) share: their generator, and one
// request on each path that carries an agent's pool, each resolving with its outcome
// (`{ status, text }`, 'destroyed', or `{ error }`), never rejecting.

const assert = require('node:assert');
const http = require('node:http');
const https = require('node:https');
const { finished } = require('node:stream');
const undici = require('./undici');
const { HttpsAgent, Dispatcher } = require('..');

// A small seeded generator (mulberry32): the same storm every run.
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// One of `weighted`'s `[value, weight]` pairs' values, by weight.
const pick = (rand, weighted) => {
  let r = rand() * weighted.reduce((s, [, w]) => s + w, 0);
  for (const [value, w] of weighted) {
    r -= w;
    if (r < 0) return value;
  }
  return weighted[weighted.length - 1][0];
};

// The Dispatcher over an agent: one per agent, made when first asked for.
const dispatchers = new WeakMap();
function dispatcherOf(agent) {
  let d = dispatchers.get(agent);
  if (d === undefined) {
    d = new Dispatcher(agent instanceof HttpsAgent ? { https: agent } : { http: agent });
    dispatchers.set(agent, d);
  }
  return d;
}

// A body destroyed by its reader, once it has closed. finished(), not once('close'): the body
// may have failed and closed already.
async function destroyed(body) {
  body.on('error', () => {});
  body.destroy();
  await new Promise((resolve) => finished(body, () => resolve()));
  return 'destroyed';
}

const paths = {
  'agent.request()': async (agent, url, { method, id, body, signal, destroyBody }) => {
    try {
      const res = await agent.request(url, { method, headers: { 'x-id': id }, body, signal });
      if (destroyBody) return await destroyed(res.body);
      return { status: res.statusCode, text: await res.body.text() };
    } catch (error) {
      return { error };
    }
  },
  'http.request': (agent, url, { method, id, body, signal, destroyBody }) => new Promise((resolve) => {
    const { request } = url.startsWith('https:') ? https : http;
    let settled = false;
    const settle = (outcome) => {
      if (!settled) resolve(outcome);
      settled = true;
    };
    const req = request(url, { agent, method, headers: { 'x-id': id }, signal }, (res) => {
      if (destroyBody) {
        res.on('error', () => {});
        res.on('close', () => settle('destroyed'));
        res.destroy();
        return;
      }
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => settle({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
      res.on('error', (error) => settle({ error }));
    });
    req.on('error', (error) => settle({ error }));
    req.end(body);
  }),
  // Node's built-in fetch with a Dispatcher riding the agent's pool. fetch fails with a
  // TypeError whose cause is the fault's error (an abort, with the AbortError itself).
  'fetch (Dispatcher)': async (agent, url, { method, id, body, signal, destroyBody }) => {
    try {
      const res = await fetch(url, { dispatcher: dispatcherOf(agent), method, headers: { 'x-id': id }, body, signal });
      if (destroyBody) {
        await res.body.cancel();
        return 'destroyed';
      }
      return { status: res.status, text: await res.text() };
    } catch (error) {
      return { error: error.name === 'AbortError' || error.cause === undefined ? error : error.cause };
    }
  },
  // undici's request() with a Dispatcher riding the agent's pool. Its body, destroyed before
  // its end, emits undici's RequestAbortedError.
  'undici request() (Dispatcher)': async (agent, url, { method, id, body, signal, destroyBody }) => {
    try {
      const res = await undici.request(url, { dispatcher: dispatcherOf(agent), method, headers: { 'x-id': id }, body, signal });
      if (destroyBody) return await destroyed(res.body);
      return { status: res.statusCode, text: await res.body.text() };
    } catch (error) {
      return { error };
    }
  },
};

// Sends every plan (`{ what, method, abort, id }`) to `${origin}/${what}/${id}` by `send`, with
// `workers` requests in flight. Its outcomes, and when each request started and settled on one
// clock (`spans`, `[start, end]`), by the plans' order.
async function runStorm(plans, send, agent, origin, workers) {
  let clock = 0;
  let next = 0;
  const outcomes = new Array(plans.length);
  const spans = new Array(plans.length);
  const worker = async () => {
    while (next < plans.length) {
      const i = next++;
      const plan = plans[i];
      const ac = new AbortController();
      // A stalled answer is given up after a while; the rest wait as long as they need. (Not
      // AbortSignal.any() with AbortSignal.timeout(): on Node 20 the timeout's signal can be
      // collected before it fires, and the request then waits for ever, on Node's agent too.)
      const giveUp = plan.what === 'stall' ? setTimeout(() => ac.abort(), 100) : undefined;
      const start = clock++;
      const pending = send(agent, `${origin}/${plan.what}/${plan.id}`, {
        method: plan.method,
        id: plan.id,
        body: plan.method === 'POST' ? `body of ${plan.id}` : undefined,
        signal: ac.signal,
        destroyBody: plan.abort === 'destroy-body',
      });
      if (plan.abort === 'at-once') ac.abort();
      outcomes[i] = await pending;
      spans[i] = [start, clock++];
      clearTimeout(giveUp);
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  return { outcomes, spans };
}

// A plan's name in assertions.
const nameOf = (plan) => `${plan.method} /${plan.what}/${plan.id}${plan.abort ? ` (abort: ${plan.abort})` : ''}`;

// What the client did to a request settled it: its body destroyed, or an abort (asked for, or
// given up on a stalled answer). True when so (checked); false when the server's part decides.
function settledByClient(plan, outcome) {
  if (outcome === 'destroyed') {
    assert.strictEqual(plan.abort, 'destroy-body', `${nameOf(plan)}: destroyed without being asked`);
    return true;
  }
  if (outcome.error && outcome.error.name === 'AbortError') {
    assert.ok(plan.abort === 'at-once' || plan.what === 'stall', `${nameOf(plan)}: aborted unasked: ${outcome.error.stack}`);
    return true;
  }
  return false;
}

module.exports = { random, pick, paths, runStorm, nameOf, settledByClient };
