'use strict';

// The undici package the tests drive: the devDependency `undici` (7), or the one
// HYPERAGENT_TEST_UNDICI names: `npm run test:node-matrix` runs Node 26, whose own fetch is
// undici 8, with `undici-8` (undici 8, which needs Node 22.19 or later).
module.exports = require(process.env.HYPERAGENT_TEST_UNDICI || 'undici');
