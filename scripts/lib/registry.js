'use strict';

// A minimal npm registry on loopback, in memory, for scripts/test-install.js: `npm publish`
// puts packages in, `npm install` reads their documents and tarballs back. It speaks just the
// part of the registry protocol those two commands use, and knows no other package (a name it
// does not hold is a 404, as on the public registry for an unpublished package).
//
// Written here rather than running verdaccio: verdaccio 6 brings hundreds of dependencies, its
// latest releases want Node 22 while CI's tests run on 20, and it proxies to the public
// registry unless configured otherwise. This server starts in milliseconds and can talk to
// nothing but the processes on this machine that ask it.

const crypto = require('node:crypto');
const http = require('node:http');

function startRegistry({ token }) {
  const docs = new Map(); // name -> packument
  const tarballs = new Map(); // "<name>/-/<file>" -> Buffer
  let base = '';

  function send(res, status, body) {
    const data = Buffer.from(JSON.stringify(body));
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': data.length });
    res.end(data);
  }

  function publish(name, body, res) {
    const doc = docs.get(name) || { _id: name, name, 'dist-tags': {}, versions: {}, time: {} };
    for (const [version, manifest] of Object.entries(body.versions || {})) {
      if (doc.versions[version]) return send(res, 403, { error: `cannot publish over ${name}@${version}` });
      const [file, attachment] = Object.entries(body._attachments || {})[0] || [];
      if (!attachment) return send(res, 400, { error: 'no tarball attached' });
      const data = Buffer.from(attachment.data, 'base64');
      const sri = `sha512-${crypto.createHash('sha512').update(data).digest('base64')}`;
      if (manifest.dist && manifest.dist.integrity && manifest.dist.integrity !== sri) {
        return send(res, 400, { error: 'integrity mismatch' });
      }
      const key = `${name}/-/${file.split('/').pop()}`;
      tarballs.set(key, data);
      manifest.dist = { ...manifest.dist, integrity: sri, tarball: `${base}/${key}` };
      doc.versions[version] = manifest;
      doc.time[version] = new Date().toISOString();
    }
    Object.assign(doc['dist-tags'], body['dist-tags'] || {});
    docs.set(name, doc);
    return send(res, 201, { ok: true, id: name });
  }

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url, base);
      // `@scope%2fname` and `@scope/name` both name a scoped package.
      const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
      if (parts[0] && parts[0].startsWith('@') && parts.length > 1 && !parts[0].includes('/')) {
        parts.splice(0, 2, `${parts[0]}/${parts[1]}`);
      }
      const name = parts[0];
      if (req.method === 'PUT' && parts.length === 1) {
        if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: 'unauthorized' });
        let body;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return send(res, 400, { error: 'bad JSON' });
        }
        return publish(name, body, res);
      }
      if (req.method === 'GET' && parts.length === 1 && docs.has(name)) return send(res, 200, docs.get(name));
      if (req.method === 'GET' && parts.length === 3 && parts[1] === '-') {
        const data = tarballs.get(`${name}/-/${parts[2]}`);
        if (data) {
          res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length });
          return res.end(data);
        }
      }
      return send(res, 404, { error: 'not found' });
    });
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      base = `http://127.0.0.1:${server.address().port}`;
      resolve({
        url: `${base}/`,
        docs,
        close: () => new Promise((done) => {
          server.closeAllConnections();
          server.close(() => done());
        }),
      });
    });
  });
}

module.exports = { startRegistry };
