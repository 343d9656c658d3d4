/**
 * The worker routes of `spool serve` (docs/remote-workers.md): remote workers claim due
 * activities by long-poll, heartbeat, report progress and assets, and complete, fail or give back
 * their attempts, each call naming its attempt by the token of its dispatch. The runtime's
 * `remote` part (src/runtime/remote.ts) does the claiming and recording; this is the HTTP of it.
 * A claim that finds nothing waits for a commit (this process's, or another's seen by the change
 * signal), for the next retry or claim expiry, or until `waitMs`, then answers.
 */
import type { Context, Hono } from 'hono';
import { ValidationError, type Runtime } from '../index.ts';
import type { RemoteFailure } from '../runtime/remote.ts';
import { activityScope } from './auth.ts';
import { readBody, text } from './body.ts';
import type { ChangeSignal } from './changes.ts';

/** The longest a claim waits for work (ms); `waitMs` defaults to it. */
export const MAX_CLAIM_WAIT_MS = 30_000;

/** Add the worker routes (their token is checked by auth.ts: the server token or a worker token). */
export function addWorkerRoutes(app: Hono, runtime: Runtime, changes: ChangeSignal): void {
  const remote = runtime.remote;
  app.post('/api/workers/claim', async (c) => {
    const body = await readBody(c, ['slots', 'activities', 'waitMs', 'worker']);
    const slots = wholeNumber(body['slots'] ?? 1, 'slots', 1, 1024);
    const waitMs = wholeNumber(body['waitMs'] ?? MAX_CLAIM_WAIT_MS, 'waitMs', 0, MAX_CLAIM_WAIT_MS);
    const activities = body['activities'] === undefined ? null : names(body['activities']);
    const scope = activityScope(c);
    const deadline = Date.now() + waitMs;
    const signal = c.req.raw.signal;
    for (;;) {
      // A worker that went away claims nothing more: what it was sent would wait out its claim.
      if (signal.aborted) return c.json({ dispatches: [] });
      const seen = changes.version;
      const dispatches = await remote.claim({ slots, activities }, scope);
      // Its worker went away while they were claimed: given back now rather than at their claims' expiry.
      if (signal.aborted) {
        for (const d of dispatches) await remote.release(d.token, scope).catch(() => undefined);
        return c.json({ dispatches: [] });
      }
      const left = deadline - Date.now();
      if (dispatches.length > 0 || left <= 0 || signal.aborted) return c.json({ dispatches });
      await changes.wait(seen, Math.min(left, await untilNextWake(runtime)), signal);
    }
  });
  app.post('/api/workers/heartbeat', async (c) => {
    const body = await readBody(c, ['token']);
    return c.json(await remote.heartbeat(text(body['token'], 'token'), activityScope(c)));
  });
  app.post('/api/workers/complete', async (c) => {
    const body = await readBody(c, ['token', 'output']);
    const done = await remote.finish(text(body['token'], 'token'), { ok: true, output: body['output'] ?? null }, activityScope(c));
    changes.notify();
    return c.json({ accepted: true, ...done });
  });
  app.post('/api/workers/fail', async (c) => {
    const body = await readBody(c, ['token', 'error']);
    const done = await remote.finish(text(body['token'], 'token'), { ok: false, error: failure(body['error']) }, activityScope(c));
    changes.notify();
    return c.json({ accepted: true, ...done });
  });
  app.post('/api/workers/release', async (c) => {
    const body = await readBody(c, ['token']);
    const released = await remote.release(text(body['token'], 'token'), activityScope(c));
    changes.notify();
    return c.json(released);
  });
  app.post('/api/workers/progress', async (c) => {
    const body = await readBody(c, ['token', 'percent']);
    await remote.progress(text(body['token'], 'token'), body['percent'], activityScope(c));
    return c.json({ ok: true });
  });
  app.post('/api/workers/assets', async (c) => {
    const body = await readBody(c, ['token', 'asset']);
    const asset = body['asset'];
    if (asset === null || typeof asset !== 'object' || Array.isArray(asset)) throw new ValidationError('asset must be an object: { type, uri, size?, key?, meta? }.');
    return c.json(await remote.attachAsset(text(body['token'], 'token'), asset as never, activityScope(c)));
  });
  app.get('/api/workers/activities', (c: Context) => {
    const scope = activityScope(c);
    return c.json({ activities: remote.activities().filter((a) => scope === null || scope.includes(a)), claimMs: remote.claimMs });
  });
}

/** How long until the store's next retry, timer, claim or lease expiry (at least 50 ms, at most the longest wait). */
async function untilNextWake(runtime: Runtime): Promise<number> {
  const at = await runtime.store.nextWakeAt(runtime.clock.now());
  if (at === null) return MAX_CLAIM_WAIT_MS;
  return Math.min(MAX_CLAIM_WAIT_MS, Math.max(50, at - runtime.clock.now()));
}

function wholeNumber(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new ValidationError(`${name} must be a whole number from ${min} to ${max}.`);
  return value;
}

function names(value: unknown): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string' || v === '')) throw new ValidationError('activities must be an array of activity names.');
  return value as string[];
}

/** A failure as sent: `{ message, name?, code?, terminal?, retryAfterMs? }` (a string is its message). */
function failure(value: unknown): RemoteFailure {
  if (typeof value === 'string') return { message: value };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ValidationError('error must be { message, name?, code?, terminal?, retryAfterMs? } or a string.');
  const e = value as Record<string, unknown>;
  const extra = Object.keys(e).filter((k) => !['message', 'name', 'code', 'terminal', 'retryAfterMs'].includes(k));
  if (extra.length > 0) throw new ValidationError(`Unknown error field(s) ${extra.join(', ')}; error takes message, name, code, terminal, retryAfterMs.`);
  if (typeof e['message'] !== 'string') throw new ValidationError('error.message must be a string.');
  const out: RemoteFailure = { message: e['message'] };
  if (e['name'] !== undefined) out.name = text(e['name'], 'error.name');
  if (e['code'] !== undefined) out.code = text(e['code'], 'error.code');
  if (e['terminal'] !== undefined) {
    if (typeof e['terminal'] !== 'boolean') throw new ValidationError('error.terminal must be true or false.');
    out.terminal = e['terminal'];
  }
  if (e['retryAfterMs'] !== undefined) out.retryAfterMs = wholeNumber(e['retryAfterMs'], 'error.retryAfterMs', 0, 86_400_000);
  return out;
}
