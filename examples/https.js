// HttpsAgent: TLS in Rust (rustls), verified against your own CA.
// Run: node examples/https.js
'use strict';

const https = require('node:https');
const fs = require('node:fs');
const path = require('node:path');
const { HttpsAgent } = require('..');

const tls = (name) => fs.readFileSync(path.join(__dirname, '..', '__test__', 'fixtures', 'tls', name));
const server = https.createServer({ cert: tls('localhost-chain.pem'), key: tls('localhost-key.pem') }, (req, res) => {
  res.end(`secure hello, session reused: ${req.socket.isSessionReused()}`);
});

server.listen(0, '127.0.0.1', () => {
  const agent = new HttpsAgent({ ca: tls('ca.pem'), maxSockets: 10 });
  https.get({ host: 'localhost', port: server.address().port, agent }, (res) => {
    const socket = res.socket;
    console.log(socket.getProtocol(), socket.getCipher().name, socket.getPeerCertificate().subject.CN);
    res.setEncoding('utf8');
    res.on('data', console.log);
    res.on('end', () => {
      agent.destroy();
      server.close();
    });
  });
});
