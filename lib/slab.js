'use strict';

// Small chunks from Rust (socket reads, response bodies under 4 KiB) are copied into a slab, an
// ArrayBuffer Rust allocates, and arrive as a number: `offset * 65536 + length`. A Buffer view
// of the slab costs far less than a Buffer made through Node-API; a chunk that is kept keeps
// its 8 KiB slab alive, as slices of Node's own Buffer pool do. Larger chunks arrive as
// Buffers.
//
// Rust writes later chunks into the same slab, so its memory must stay Rust's: the slab is
// marked untransferable, as Node marks its Buffer pool (a transfer list that names it copies
// it instead), and Rust checks before every write that the slab is not detached (by
// `arrayBuffer.transfer()`, which no mark stops), starting a new one when it is.

const { markAsUntransferable } = require('node:worker_threads');

let slab = null;

// Rust calls this (through binding.init) whenever it starts a new slab, before any chunk of it.
function setSlab(arrayBuffer) {
  markAsUntransferable(arrayBuffer);
  slab = arrayBuffer;
}

function chunk(value) {
  return typeof value === 'number' ? Buffer.from(slab, value >>> 16, value & 0xffff) : value;
}

module.exports = { setSlab, chunk };
