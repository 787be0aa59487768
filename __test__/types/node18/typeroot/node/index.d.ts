// Node's types for this compilation: @types/node 18 (installed as `types-node-18`), which a
// `/// <reference types="node" />` (undici-types has one) finds here before the newer ones.
/// <reference path="../../../../../node_modules/types-node-18/index.d.ts" />
