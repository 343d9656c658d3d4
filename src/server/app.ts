/**
 * The HTTP API of `spool serve`, as a Hono app over a runtime's public API: machines, jobs and
 * their records, the writes (start, start many, send, start-or-send, redeliver, cancel, retry, suspend,
 * resume, settling a token), stats, the event streams (sse.ts), the diagrams (diagrams.ts) and the
 * dashboard at `/` (dashboard.ts). Every refusal is `{ error: { code, ... } }` (errors.ts), decided
 * before anything is written: the Host, Origin and token first (auth.ts), then the body (size, JSON, shape), then
 * the runtime's own checks.
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { methodNotAllowed } from 'hono/method-not-allowed';
import { JOB_STATUSES, ValidationError, eventFailure, type Job, type JobStatus, type ListFilter, type Runtime, type SendResult } from '../internal.ts';
import { redactDetails, redactJob, redactKeys, sensitiveKeys } from '../views/redacted.ts';
import { guardHost, requireToken, type ListenAddress, type WorkerToken } from './auth.ts';
import { BodyTooLargeError, MachineUnavailableError, MethodNotAllowedError, RouteNotFoundError, errorResponse } from './errors.ts';
import { describeMachine } from '../views/machineView.ts';
import type { StreamHub } from './sse.ts';
import { unknownMachine } from './machines.ts';
import { addDiagramRoutes } from './diagrams.ts';
import { addDashboardRoutes } from './dashboard.ts';
import { optionalText, readBody, text } from './body.ts';
import { addWorkerRoutes } from './workers.ts';
import type { ChangeSignal } from './changes.ts';

/** What the app needs: the runtime it drives, the write token, the body limit, the streams. */
export interface AppOptions {
  runtime: Runtime;
  token: string;
  /** Largest request body, in bytes. */
  bodyLimitBytes: number;
  streams: StreamHub;
  /** Wakes claims that wait for work (the worker routes). */
  changes: ChangeSignal;
  /** Tokens for remote workers: the worker routes only (auth.ts). */
  workerTokens?: readonly WorkerToken[];
  /** Host names (`name`, or `name:port`) a request may use besides the server's own address. */
  allowedHosts?: readonly string[];
  /** Where the server listens (the Host check); without it, the loopback names on any port. */
  address?: () => ListenAddress | undefined;
  /** Reads of the API need the token too. */
  readsNeedToken?: boolean;
  /** Where unexpected errors go (their message is not sent to the client). */
  onInternalError?: (error: unknown) => void;
}

/** Build the app; `createServer` (server.ts) listens with it on Node, any fetch host can too. */
export function createApp(options: AppOptions): Hono {
  const { runtime, streams } = options;
  const app = new Hono();
  app.onError((error) => {
    const response = errorResponse(error);
    if (response.status === 500) options.onInternalError?.(error);
    return response;
  });
  app.notFound((c) => errorResponse(new RouteNotFoundError(`No route ${c.req.method} ${c.req.path}. The API is under /api: see the README, "Seeing jobs".`)));
  app.use(methodNotAllowed({ app, onMethodNotAllowed: (c, allow) => errorResponse(new MethodNotAllowedError(c.req.method, c.req.path, allow)) }));
  app.use(guardHost(options.allowedHosts ?? [], options.address ?? (() => undefined)));
  app.use(requireToken(options.token, options.readsNeedToken ?? false, options.workerTokens ?? []));
  app.use(bodyLimit({ maxSize: options.bodyLimitBytes, onError: () => errorResponse(new BodyTooLargeError(`The request body is larger than ${options.bodyLimitBytes} bytes, this server's limit. Nothing was changed.`, { limit: options.bodyLimitBytes })) }));

  addMachineRoutes(app, runtime);
  addJobReadRoutes(app, runtime, streams);
  addJobWriteRoutes(app, runtime);
  addTokenRoutes(app, runtime);
  addWorkerRoutes(app, runtime, options.changes);
  app.get('/api/stats', async (c) => c.json(await runtime.stats()));
  addDiagramRoutes(app, runtime);
  addDashboardRoutes(app);
  return app;
}

/** The machines (`GET /api/machines`, `/api/machines/:machine`) and the writes named by machine: start, start many (`/jobs/batch`), start-or-send. */
function addMachineRoutes(app: Hono, runtime: Runtime): void {
  app.get('/api/machines', (c) => c.json({ machines: runtime.registry.all().map(describeMachine) }));
  app.get('/api/machines/:machine', (c) => {
    const versions = runtime.registry.all().filter((m) => m.id === c.req.param('machine'));
    if (versions.length === 0) throw unknownMachine(runtime, c.req.param('machine'));
    return c.json({ id: c.req.param('machine'), versions: versions.map(describeMachine) });
  });
  app.post('/api/machines/:machine/jobs', async (c) => {
    const body = await readBody(c, ['input', 'jobId', 'idempotencyKey']);
    const machineId = registeredMachine(runtime, c.req.param('machine'));
    const { jobs: [job], created: [created] } = await startedBy(runtime, () => runtime.start(machineId, body['input'] ?? {}, {
      ...(body['jobId'] !== undefined ? { jobId: text(body['jobId'], 'jobId') } : {}),
      ...(body['idempotencyKey'] !== undefined ? { idempotencyKey: text(body['idempotencyKey'], 'idempotencyKey') } : {}),
    }).then((j) => [j]));
    return c.json({ created, job: redactJob(runtime, job!) }, created ? 201 : 200);
  });
  // startMany: every item checked before anything is written (all or nothing), the new jobs in one commit.
  app.post('/api/machines/:machine/jobs/batch', async (c) => {
    const body = await readBody(c, ['items']);
    const machineId = registeredMachine(runtime, c.req.param('machine'));
    const { jobs, created } = await startedBy(runtime, () => runtime.startMany(machineId, body['items'] as never));
    const items = jobs.map((job, i) => ({ created: created[i]!, job: redactJob(runtime, job) }));
    return c.json({ items }, created.includes(true) ? 201 : 200);
  });

  app.post('/api/machines/:machine/jobs/:id/events', async (c) => {
    const body = await readBody(c, ['input', 'event', 'eventId']);
    const machineId = registeredMachine(runtime, c.req.param('machine'));
    const eventId = optionalText(body['eventId'], 'eventId') ?? c.req.header('idempotency-key');
    const sent = await runtime.startOrSend(machineId, c.req.param('id'), body['input'] ?? {}, body['event'], eventId !== undefined ? { eventId } : {});
    return sendResponse(c, runtime, sent, sent.created ? 201 : undefined);
  });
}

/** `machineId` if this server registers it, else its refusal naming those it does. */
function registeredMachine(runtime: Runtime, machineId: string): string {
  if (!runtime.registry.all().some((m) => m.id === machineId)) throw unknownMachine(runtime, machineId);
  return machineId;
}

/**
 * The jobs `start` returns, and whether each was created by it (`created`: a repeat, of a job in
 * the store or of an earlier item of the same call, is not): what the start routes answer.
 */
async function startedBy(runtime: Runtime, start: () => Promise<Job[]>): Promise<{ jobs: Job[]; created: boolean[] }> {
  const started = new Set<string>();
  const unsubscribe = runtime.subscribe((e) => e.type === 'job.started' && started.add(e.job.id));
  try {
    const jobs = await start();
    // Each created job once: the first item that names it.
    return { jobs, created: jobs.map((job) => started.delete(job.id)) };
  } finally {
    unsubscribe();
  }
}

/** The reads of jobs: the list, a job and each part of its record, and the event streams. */
function addJobReadRoutes(app: Hono, runtime: Runtime, streams: StreamHub): void {
  app.get('/api/jobs', async (c) => {
    const filter = listFilter(c);
    const jobs = await runtime.list(filter);
    const next = jobs.length === filter.limit ? (jobs.at(-1)?.id ?? null) : null;
    return c.json({ jobs: jobs.map((j) => redactJob(runtime, j)), next });
  });
  app.get('/api/jobs/:id', async (c) => {
    const d = redactDetails(runtime, await runtime.details(c.req.param('id')));
    return c.json({ job: d.job, waitingFor: d.waitingFor, stuck: d.stuck, ...(d.held ? { held: d.held } : {}) });
  });
  for (const part of ['history', 'events', 'effects', 'attempts', 'timers', 'assets', 'notes'] as const) {
    app.get(`/api/jobs/:id/${part}`, async (c) => c.json({ [part]: redactDetails(runtime, await runtime.details(c.req.param('id')))[part] }));
  }
  app.get('/api/jobs/:id/stream', (c) => streams.job(c, c.req.param('id')));
  app.get('/api/stream', (c) => streams.all(c));
}

/**
 * The response of a send-like route (send, start-or-send, redeliver): the outcome, its job redacted;
 * 202 while pending, `created` (201) when given, else 200; a `failed` outcome is refused as
 * SPOOL_EVENT_FAILED (422) carrying that outcome, so a client that checks the status sees it.
 */
function sendResponse(c: Context, runtime: Runtime, sent: SendResult & { created?: boolean }, created?: 201): Response {
  const result = { ...sent, job: redactJob(runtime, sent.job) };
  const failed = eventFailure(result);
  if (failed) return errorResponse(failed);
  return c.json(result, created ?? (sent.status === 'pending' ? 202 : 200));
}

/** The writes to a job: send, redeliver, cancel, retry, retry as new, suspend, resume. */
function addJobWriteRoutes(app: Hono, runtime: Runtime): void {
  app.post('/api/jobs/:id/events', async (c) => {
    const event = await readBody(c);
    const jobId = c.req.param('id');
    await requireMachineOf(runtime, jobId);
    const eventId = c.req.header('idempotency-key');
    const wait = c.req.query('wait');
    if (wait !== undefined && wait !== 'true' && wait !== 'false') throw new ValidationError('wait must be true or false.');
    const sent = await runtime.send(jobId, event, { ...(eventId !== undefined ? { eventId } : {}), ...(wait === 'false' ? { wait: false } : {}) });
    return sendResponse(c, runtime, sent);
  });
  app.post('/api/jobs/:id/events/:eventId/redeliver', async (c) => {
    const body = await readBody(c, ['force']);
    const jobId = c.req.param('id');
    await requireMachineOf(runtime, jobId);
    if (body['force'] !== undefined && typeof body['force'] !== 'boolean') throw new ValidationError('force must be true or false.');
    const sent = await runtime.redeliver(jobId, c.req.param('eventId'), body['force'] === true ? { force: true } : {});
    return sendResponse(c, runtime, sent);
  });
  app.post('/api/jobs/:id/cancel', async (c) => {
    const body = await readBody(c, ['reason']);
    await requireMachineOf(runtime, c.req.param('id'));
    return c.json({ job: redactJob(runtime, await runtime.cancel(c.req.param('id'), optionalText(body['reason'], 'reason') ?? 'cancelled over HTTP')) });
  });
  app.post('/api/jobs/:id/retry', async (c) => {
    const body = await readBody(c, ['allowUnsafe']);
    await requireMachineOf(runtime, c.req.param('id'));
    const { job, effects } = await runtime.retry(c.req.param('id'), body['allowUnsafe'] === true ? { allowUnsafe: true } : {});
    const keys = sensitiveKeys(runtime, job.machineId);
    return c.json({ job: redactJob(runtime, job), effects: effects.map((e) => ({ ...e, input: redactKeys(e.input, keys), output: redactKeys(e.output, keys) })) });
  });
  app.post('/api/jobs/:id/retry-as-new', async (c) => {
    const body = await readBody(c, ['jobId']);
    const { job, created } = await runtime.retryAsNew(c.req.param('id'), body['jobId'] !== undefined ? { jobId: text(body['jobId'], 'jobId') } : {});
    return c.json({ retryOf: c.req.param('id'), created, job: redactJob(runtime, job) }, created ? 201 : 200);
  });
  app.post('/api/jobs/:id/purge', async (c) => {
    await readBody(c, []);
    await runtime.purge(c.req.param('id'));
    return c.json({ purged: 1, jobId: c.req.param('id') });
  });
  app.post('/api/jobs/:id/suspend', async (c) => {
    const body = await readBody(c, ['reason']);
    return c.json({ job: redactJob(runtime, await runtime.suspend(c.req.param('id'), optionalText(body['reason'], 'reason') ?? 'suspended over HTTP')) });
  });
  app.post('/api/jobs/:id/resume', async (c) => {
    await readBody(c, []);
    await requireMachineOf(runtime, c.req.param('id'));
    return c.json({ job: redactJob(runtime, await runtime.resume(c.req.param('id'))) });
  });
}

/** Settling a token: complete or fail the activity waiting on it. */
function addTokenRoutes(app: Hono, runtime: Runtime): void {
  app.post('/api/tokens/:token/complete', async (c) => {
    const body = await readBody(c, ['output']);
    return c.json({ job: redactJob(runtime, await runtime.complete(c.req.param('token'), body['output'] ?? null)) });
  });
  app.post('/api/tokens/:token/fail', async (c) => {
    const body = await readBody(c, ['error']);
    return c.json({ job: redactJob(runtime, await runtime.fail(c.req.param('token'), body['error'] ?? { message: 'failed' })) });
  });
}

const LIST_BOOLEANS = ['quarantined', 'exhausted', 'cancelRequested', 'suspended'] as const;
const LIST_PARAMS = ['machine', 'state', 'status', 'stuck', 'limit', 'after', ...LIST_BOOLEANS];

/** `GET /api/jobs?machine=&state=&status=&quarantined=&...&limit=&after=`: a page of at most 1000 (default 100). */
function listFilter(c: Context): ListFilter & { limit: number } {
  const q = c.req.query();
  const unknown = Object.keys(q).filter((k) => !LIST_PARAMS.includes(k));
  if (unknown.length > 0) throw new ValidationError(`Unknown query parameter(s) ${unknown.join(', ')}; /api/jobs takes ${LIST_PARAMS.join(', ')}.`);
  const limit = q['limit'] === undefined ? 100 : Number(q['limit']);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError('limit must be a whole number from 1 to 1000.');
  if (q['status'] !== undefined && !JOB_STATUSES.includes(q['status'] as JobStatus)) throw new ValidationError(`status must be one of ${JOB_STATUSES.join(', ')}.`);
  const filter: ListFilter & { limit: number } = {
    limit,
    ...(q['machine'] !== undefined ? { machineId: q['machine'] } : {}),
    ...(q['state'] !== undefined ? { state: q['state'] } : {}),
    ...(q['status'] !== undefined ? { status: q['status'] as JobStatus } : {}),
    ...(q['after'] !== undefined ? { afterId: q['after'] } : {}),
    ...(booleanParam(q, 'stuck') ? { stuck: true as const } : {}),
  };
  for (const key of LIST_BOOLEANS) {
    const value = booleanParam(q, key);
    if (value !== undefined) filter[key] = value;
  }
  return filter;
}

function booleanParam(q: Record<string, string>, key: string): boolean | undefined {
  const v = q[key];
  if (v === undefined) return undefined;
  if (v !== 'true' && v !== 'false') throw new ValidationError(`${key} must be true or false.`);
  return v === 'true';
}

/**
 * Refuse a write to a job whose machine version this server cannot run (another `--machines`
 * module): it would otherwise be quarantined. A finished job is left to the runtime's own answer.
 */
async function requireMachineOf(runtime: Runtime, jobId: string): Promise<void> {
  const job = await runtime.get(jobId);
  if (job.final || runtime.registry.route(job.machineId, job.machineVersion)) return;
  throw new MachineUnavailableError(`Job ${jobId} runs ${job.machineId}@${job.machineVersion}, which this server's machines module does not register (nor a migration from it). Nothing was changed.`, { jobId });
}
