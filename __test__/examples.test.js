'use strict';

// The runnable examples in examples/ run and exit cleanly.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { once } = require('node:events');

const dir = path.join(__dirname, '..', 'examples');

for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.js'))) {
  test(`examples/${file} runs`, async () => {
    const child = spawn(process.execPath, [path.join(dir, file)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const [code] = await once(child, 'exit');
    assert.strictEqual(code, 0, out);
    assert.ok(out.length > 0);
  });
}
