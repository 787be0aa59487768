// Named and default imports from an ES module.
import test from 'node:test';
import assert from 'node:assert';
import http from 'node:http';
import hyperagent, { Agent, HttpAgent, constants, Dispatcher, setGlobalDispatcher, getGlobalDispatcher } from 'hyperagent-rs';

test('ES module imports: default and named exports', () => {
  assert.strictEqual(hyperagent, Agent);
  assert.strictEqual(HttpAgent, Agent);
  assert.strictEqual(typeof constants.SOCKET_NAME, 'symbol');
  const agent = new Agent({ maxSockets: 2 });
  assert.ok(agent instanceof http.Agent);
  agent.destroy();
  assert.strictEqual(Dispatcher, hyperagent.Dispatcher);
  assert.strictEqual(typeof setGlobalDispatcher, 'function');
  assert.strictEqual(typeof getGlobalDispatcher, 'function');
});
