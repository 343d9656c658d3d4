/**
 * Who may ask the server (issue 27, item 15): a real HTTP client (node:http, since fetch will not
 * set Host) against a real server. A request naming another host (a DNS-rebinding page) is
 * refused, so is a write from another origin; reads need the token beyond loopback; the bearer
 * scheme is read in any case.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { createServer, type ServerOptions, type SpoolServer } from '../src/server/index.ts';
import { startServer } from '../src/cli/serve.ts';
import { Resources } from './helpers/resources.ts';

const TOKEN = 'test-token-0123456789abcdef';
const res = new Resources();
afterEach(() => res.dispose());

async function open(options: Partial<ServerOptions> = {}): Promise<SpoolServer> {
  const runtime = await res.runtime({ store: await res.sqlite(res.dbPath()), machines: [jobLifecycle] });
  return res.track(await createServer({ runtime, port: 0, token: TOKEN, ...options }));
}

/** One request to 127.0.0.1 at the server's port, with the headers given (Host among them). */
function call(server: SpoolServer, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any }> {
  const port = Number(new URL(server.url).port);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { 'content-type': 'application/json', ...headers } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }));
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const start = { input: { name: 'resize', items: 2 } };

describe('spool serve: Host, Origin and the token', () => {
  it('answers only to its own address (or an allowed name) in Host', async () => {
    const server = await open({ allowedHosts: ['spool.internal'] });
    const port = new URL(server.url).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LocalHost:${port}`, `spool.internal:${port}`]) {
      expect((await call(server, 'GET', '/api/jobs', { host })).status, host).toBe(200);
    }
    for (const host of [`evil.example:${port}`, 'evil.example', `127.0.0.1:${Number(port) + 1}`, `127.0.0.1.nip.io:${port}`]) {
      const { status, body } = await call(server, 'GET', '/api/jobs', { host });
      expect(status, host).toBe(403);
      expect(body.error.code).toBe('SPOOL_HOST_NOT_ALLOWED');
      expect(body.error.message).toContain('--allowed-host');
    }
    // A write under a rebound name is refused before anything is written.
    const { status } = await call(server, 'POST', '/api/machines/job-lifecycle/jobs', { host: `evil.example:${port}`, authorization: `Bearer ${TOKEN}` }, start);
    expect(status).toBe(403);
    expect((await call(server, 'GET', '/api/jobs', { host: `127.0.0.1:${port}` })).body.jobs).toEqual([]);
  });

  it('refuses a write from another origin, takes one from its own, and reads the bearer scheme in any case', async () => {
    const server = await open();
    const host = new URL(server.url).host;
    const crossed = await call(server, 'POST', '/api/machines/job-lifecycle/jobs', { host, origin: 'http://evil.example', authorization: `Bearer ${TOKEN}` }, start);
    expect(crossed.status).toBe(403);
    expect(crossed.body.error.code).toBe('SPOOL_CROSS_ORIGIN');
    expect((await call(server, 'GET', '/api/jobs', { host, origin: 'http://evil.example' })).body.jobs).toEqual([]);
    const own = await call(server, 'POST', '/api/machines/job-lifecycle/jobs', { host, origin: `http://${host}`, authorization: `bearer ${TOKEN}` }, start);
    expect(own.status).toBe(201);
    expect((await call(server, 'POST', '/api/machines/job-lifecycle/jobs', { host, authorization: `BEARER   ${TOKEN}` }, start)).status).toBe(201);
  });

  it('beyond loopback: reads need the token, the dashboard address carries none, and serve warns', async () => {
    const runtime = await res.runtime({ store: await res.sqlite(res.dbPath()), machines: [jobLifecycle] });
    await expect(createServer({ runtime, host: '0.0.0.0', port: 0, readsNeedToken: false })).rejects.toMatchObject({ code: 'SPOOL_INVALID' });
    const printed: string[] = [];
    const warned: string[] = [];
    const server = res.track(await startServer(runtime, { host: '0.0.0.0', port: '0' }, (_json, human) => printed.push(human), (t) => warned.push(t)));
    expect(server.tokenGenerated).toBe(true);
    expect(server.readsNeedToken).toBe(true);
    expect(server.dashboardUrl).not.toContain(server.token);
    expect(printed.join('\n')).not.toContain('#token=');
    expect(warned.join('')).toMatch(/warning: listening on http:\/\/0\.0\.0\.0:\d+, reachable from other machines/);
    const host = `127.0.0.1:${new URL(server.url).port}`;
    const refused = await call(server, 'GET', '/api/jobs', { host });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('SPOOL_UNAUTHORIZED');
    expect((await call(server, 'GET', '/api/jobs', { host, authorization: `Bearer ${server.token}` })).status).toBe(200);
    expect((await call(server, 'GET', `/api/stats?access_token=${server.token}`, { host })).status).toBe(200);
    // The page itself holds no data: it loads, then asks for the token.
    expect((await call(server, 'GET', '/', { host })).status).toBe(200);
    // Any IP literal is this server's on a wildcard address; a name is not.
    expect((await call(server, 'GET', '/', { host: `10.1.2.3:${new URL(server.url).port}` })).status).toBe(200);
    expect((await call(server, 'GET', '/', { host: `evil.example:${new URL(server.url).port}` })).status).toBe(403);
  });

  it('on loopback, reads need the token when asked to', async () => {
    const server = await open({ readsNeedToken: true });
    const host = new URL(server.url).host;
    expect((await call(server, 'GET', '/api/jobs', { host })).status).toBe(401);
    expect((await call(server, 'GET', '/api/jobs', { host, authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expect((await call(server, 'GET', '/api/jobs', { host, authorization: 'Bearer wrong-token-0123456789' })).status).toBe(401);
  });
});
