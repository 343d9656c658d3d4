#!/usr/bin/env node
// Serve a built directory (examples/browser/dist by default) on 127.0.0.1: a static server for
// the example, nothing more. `node examples/browser/serve.mjs [dir] [--port 8080]`; port 0 picks one.
// It prints the page's address on its first line.
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { port: { type: 'string', default: '8080' } } });
const root = resolve(positionals[0] ?? join(dirname(fileURLToPath(import.meta.url)), 'dist'));
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.wasm': 'application/wasm', '.map': 'application/json', '.svg': 'image/svg+xml' };

const server = createServer((req, res) => {
  const path = normalize(join(root, decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)));
  const file = path.endsWith(sep) ? join(path, 'index.html') : path;
  if (!file.startsWith(root + sep) || !statSync(file, { throwIfNoEntry: false })?.isFile()) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    return;
  }
  res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-cache' });
  createReadStream(file).pipe(res);
});
server.listen(Number(values.port), '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/`));
