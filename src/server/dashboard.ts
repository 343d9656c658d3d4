/**
 * The dashboard at `/`: plain ES modules and one stylesheet under `./dashboard/`, served by Spool
 * itself (no build step, no CDN: it works with no internet). The page is a client of the JSON API
 * and its event streams like any other; `/`, `/jobs/...` and `/machines/...` all answer with the
 * one page, which routes in the browser. The files are read once, when the app is built.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { Context, Hono } from 'hono';
import { RouteNotFoundError, errorResponse } from './errors.ts';

const DIRECTORY = new URL('./dashboard/', import.meta.url);

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml; charset=utf-8',
};

/**
 * Scripts and styles only from this server; inline styles for the diagrams' own stylesheet;
 * nothing may frame the page.
 */
const POLICY = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** Add the dashboard's routes (the page and its files) to `app`. */
export function addDashboardRoutes(app: Hono): void {
  const files = new Map<string, { body: string; type: string }>();
  for (const name of readdirSync(DIRECTORY)) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (type) files.set(name, { body: readFileSync(new URL(name, DIRECTORY), 'utf8'), type });
  }
  const page = (c: Context) => send(c, files.get('index.html')!);
  app.get('/', page);
  app.get('/jobs/*', page);
  app.get('/machines/*', page);
  app.get('/dashboard/:file', (c) => {
    const file = files.get(c.req.param('file'));
    if (!file || c.req.param('file') === 'index.html') return errorResponse(new RouteNotFoundError(`No dashboard file ${c.req.param('file')}.`));
    return send(c, file);
  });
}

function send(c: Context, file: { body: string; type: string }): Response {
  return c.body(file.body, 200, { 'content-type': file.type, 'cache-control': 'no-cache', 'content-security-policy': POLICY, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' });
}
