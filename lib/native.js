'use strict';

// The native addon's exports, loaded for this system by lib/loader.js (a prebuilt package, or
// an addon built from source); one clear ERR_HYPERAGENT_NO_BINARY error when there is none.

module.exports = require('./loader').load();
