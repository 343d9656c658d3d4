import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { MemoryStore } from '../persistence/memory/index.ts';
import type { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { jobLifecycle } from '../machines/index.ts';
import {
  ClosedError,
  createRuntime,
  IdempotencyConflictError,
  JobNotFoundError,
  JobQuarantined,
  JobTerminalError,
  PayloadTooLargeError,
  UnknownEventError,
  UnknownMachineError,
  SpoolError,
  ValidationError,
  WaitTimeoutError,
  type LogEntry,
  type Runtime,
  type RuntimeEvent,
  type RuntimeOptions,
} from '../src/index.ts';
import type { JobStore } from '../src/ports/store.ts';
import { dumpDatabase, dumpStore, Resources } from './helpers/resources.ts';
import { docV1, docV1Broken, docV2, docV2Migrating, probe, probeHooks } from './fixtures/probe.ts';

const res = new Resources();
beforeEach(() => probeHooks.reset());
afterEach(() => res.dispose());

type Kind = 'sqlite' | 'memory';
type Opts = Omit<RuntimeOptions, 'store' | 'machines'> & { machines?: RuntimeOptions['machines'] };

const MACHINES = [probe, jobLifecycle];

/** A runtime on a fresh store of the given kind. */
async function fresh(kind: Kind, options: Opts = {}): Promise<{ runtime: Runtime; store: JobStore; path: string | undefined }> {
  const path = kind === 'sqlite' ? res.dbPath() : undefined;
  const store = path ? await res.sqlite(path) : new MemoryStore();
  const runtime = await res.runtime({ machines: MACHINES, ...options, store });
  return { runtime, store, path };
}

/** A runtime on an existing SQLite file. */
async function reopen(path: string, options: Opts = {}): Promise<Runtime> {
  return res.runtime({ machines: MACHINES, ...options, store: await res.sqlite(path) });
}

/** Everything stored: every table row for SQLite, every job/event/history record through the port otherwise. */
async function dump(store: JobStore): Promise<unknown> {
  return 'db' in store ? dumpDatabase((store as SqliteStore).db) : dumpStore(store);
}

function events(runtime: Runtime): RuntimeEvent[] {
  const seen: RuntimeEvent[] = [];
  runtime.subscribe((e) => seen.push(e));
  return seen;
}

const revisions = async (runtime: Runtime, id: string) => (await runtime.history(id)).map((h) => h.revision);
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe.each<Kind>(['sqlite', 'memory'])('runtime on %s', (kind) => {
  describe('start', () => {
    it('validates input with the machine’s schema and writes nothing for bad input', async () => {
      const { runtime, store } = await fresh(kind);
      const empty = await dump(store);
      for (const bad of [{ name: '' }, { name: 'x', extra: 1 }, { items: 3 }, 'resize', null, [1]]) {
        await expect(runtime.start('job-lifecycle', bad)).rejects.toBeInstanceOf(ValidationError);
      }
      await expect(runtime.start('no-such-machine', {})).rejects.toBeInstanceOf(UnknownMachineError);
      expect(await dump(store)).toEqual(empty);
      expect(await runtime.list()).toEqual([]);
    });

    it('stores the job at revision 1 with the parsed input (defaults applied) and a started record', async () => {
      const { runtime } = await fresh(kind);
      const seen = events(runtime);
      const job = await runtime.start('job-lifecycle', { name: 'resize' });
      expect(job).toMatchObject({
        machineId: 'job-lifecycle',
        machineVersion: '1',
        revision: 1,
        status: 'active',
        final: false,
        value: 'queued',
        input: { name: 'resize', items: 0 },
        context: { name: 'resize', items: 0, succeeded: 0, failed: 0, progress: 0 },
        quarantine: null,
      });
      expect(await runtime.get(job.id)).toEqual(job);
      expect(await runtime.history(job.id)).toEqual([
        expect.objectContaining({ revision: 1, eventType: 'xstate.init', outcome: 'started', from: null, to: 'queued', payload: { name: 'resize', items: 0 } }),
      ]);
      expect(seen).toEqual([{ type: 'job.started', jobId: job.id, job }]);
    });

    it('takes every timestamp from the injected clock', async () => {
      let now = 1_000;
      const { runtime } = await fresh(kind, { clock: { now: () => now } });
      const job = await runtime.start('probe', {});
      expect(job).toMatchObject({ createdAt: 1_000, updatedAt: 1_000 });
      now = 2_000;
      const r = await runtime.send(job.id, { type: 'GO' });
      expect(r.job).toMatchObject({ createdAt: 1_000, updatedAt: 2_000 });
      now = 3_000;
      await runtime.send(job.id, { type: 'PING' }, { wait: false });
      await runtime.waitFor(job.id, (j) => j.revision === 3);
      expect((await runtime.history(job.id)).map((h) => h.at)).toEqual([1_000, 2_000, 3_000]);
      expect((await runtime.events(job.id)).map((e) => [e.acceptedAt, e.processedAt])).toEqual([
        [2_000, 2_000],
        [3_000, 3_000],
      ]);
    });

    it('is idempotent by key: same key and input give the same job, other input is a conflict', async () => {
      const { runtime, store } = await fresh(kind);
      const a = await runtime.start('job-lifecycle', { name: 'x', items: 2 }, { idempotencyKey: 'upload-42' });
      const b = await runtime.start('job-lifecycle', { items: 2, name: 'x' }, { idempotencyKey: 'upload-42' });
      expect(b).toEqual(a);
      const before = await dump(store);
      await expect(runtime.start('job-lifecycle', { name: 'y', items: 2 }, { idempotencyKey: 'upload-42' })).rejects.toBeInstanceOf(
        IdempotencyConflictError,
      );
      // The same key with another job id asks for a different job: not the first one under another name.
      await expect(runtime.start('job-lifecycle', { name: 'x', items: 2 }, { idempotencyKey: 'upload-42', jobId: 'other' })).rejects.toThrow(
        `Idempotency key "upload-42" belongs to job ${a.id}, not "other"`,
      );
      expect(await dump(store)).toEqual(before);
      // A job id started without a key (or with another) is a conflict with a key: returned as it
      // is, the key would stay unrecorded and a later start with the key alone would make a second job.
      await runtime.start('job-lifecycle', { name: 'x', items: 2 }, { jobId: 'keyless' });
      const keyless = await dump(store);
      await expect(runtime.start('job-lifecycle', { name: 'x', items: 2 }, { jobId: 'keyless', idempotencyKey: 'k2' })).rejects.toThrow(
        'Job keyless already exists, started with no idempotency key, not "k2"',
      );
      await expect(runtime.start('job-lifecycle', { name: 'x', items: 2 }, { jobId: a.id, idempotencyKey: 'k3' })).rejects.toThrow(
        `started with idempotency key "upload-42", not "k3"`,
      );
      expect(await dump(store)).toEqual(keyless);
      // A misspelt option is refused, not ignored (a retry would otherwise start a second job).
      await expect(runtime.start('job-lifecycle', { name: 'x', items: 2 }, { idempotencykey: 'upload-42' } as never)).rejects.toThrow(
        'start: unknown option idempotencykey (known: jobId, idempotencyKey)',
      );
      expect(await dump(store)).toEqual(keyless);
      expect((await runtime.list()).map((j) => j.id).sort()).toEqual([a.id, 'keyless'].sort());
      expect(await revisions(runtime, a.id)).toEqual([1]);
    });

    it('is idempotent by job id likewise', async () => {
      const { runtime, store } = await fresh(kind);
      const a = await runtime.start('job-lifecycle', { name: 'x' }, { jobId: 'job-7' });
      expect(a.id).toBe('job-7');
      await runtime.send('job-7', { type: 'START' });
      const again = await runtime.start('job-lifecycle', { name: 'x' }, { jobId: 'job-7' });
      expect(again).toMatchObject({ id: 'job-7', revision: 2, value: 'processing' });
      const before = await dump(store);
      await expect(runtime.start('job-lifecycle', { name: 'other' }, { jobId: 'job-7' })).rejects.toBeInstanceOf(IdempotencyConflictError);
      await expect(runtime.start('probe', {}, { jobId: 'job-7' })).rejects.toThrow('already exists (job-7) and runs machine job-lifecycle, not probe');
      // "~" is how Spool derives child and scheduled job ids: a caller's id cannot take one.
      await expect(runtime.start('job-lifecycle', { name: 'x' }, { jobId: 'job-7~kid~r2' })).rejects.toThrow('A job id must not contain "~"');
      expect(await dump(store)).toEqual(before);
    });

    it('refuses numbers JSON cannot hold (NaN, Infinity) by name, not as the null JSON would write', async () => {
      const { runtime, store } = await fresh(kind);
      const before = await dump(store);
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
        await expect(runtime.start('job-lifecycle', { name: 'x', items: bad })).rejects.toThrow(`The input cannot be stored as JSON: input.items is ${bad}, not a JSON number.`);
      }
      expect(await dump(store)).toEqual(before);
    });
  });

  describe('send', () => {
    it('refuses misspelt and mistyped options and filters, writing nothing', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const before = await dump(store);
      await expect(runtime.send(job.id, { type: 'GO' }, { eventID: 'x' } as never)).rejects.toThrow('send: unknown option eventID (known: eventId, wait)');
      await expect(runtime.send(job.id, { type: 'GO' }, { wait: 'false' } as never)).rejects.toThrow('send: wait must be true or false.');
      await expect(runtime.list({ status: 'bogus' } as never)).rejects.toThrow('list: status must be one of active, done, error, stopped; got "bogus".');
      await expect(runtime.list({ machine: 'probe' } as never)).rejects.toThrow('list: unknown option machine');
      await expect(runtime.waitFor(job.id, () => true, { timeout: 5 } as never)).rejects.toThrow('waitFor: unknown option timeout');
      await expect(runtime.purgeFinished({ olderThanMs: 0, staus: 'done' } as never)).rejects.toThrow('purgeFinished: unknown option staus');
      expect(await dump(store)).toEqual(before);
    });

    it('applies an event, bumping the revision and recording history and the inbox', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const r = await runtime.send(job.id, { type: 'GO' }, { eventId: 'go-1' });
      expect(r).toMatchObject({ jobId: job.id, eventId: 'go-1', status: 'applied', revision: 2, error: null, duplicate: false });
      expect(r.job).toMatchObject({ value: 'running', revision: 2 });
      expect(await runtime.get(job.id)).toEqual(r.job);
      expect((await runtime.history(job.id))[1]).toMatchObject({ revision: 2, eventId: 'go-1', eventType: 'GO', from: 'idle', to: 'running', outcome: 'applied' });
      expect(await runtime.events(job.id)).toEqual([expect.objectContaining({ eventId: 'go-1', status: 'applied', revision: 2 })]);
    });

    it('records an event with no transition as ignored; the revision still bumps', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const r = await runtime.send(job.id, { type: 'PING' });
      expect(r).toMatchObject({ status: 'ignored', revision: 2, error: null, job: { value: 'idle', revision: 2, context: { n: 0 } } });
      expect((await runtime.history(job.id))[1]).toMatchObject({ revision: 2, eventType: 'PING', outcome: 'ignored', from: 'idle', to: 'idle' });
    });

    it.each([
      ['a guard', 'EXPLODE', /guard exploded/],
      ['an assign action', 'BAD', /assign exploded/],
    ])('records %s that throws as failed, leaves the state unchanged, and later events still apply', async (_what, type, message) => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      await runtime.send(job.id, { type: 'BUMP' });
      const r = await runtime.send(job.id, { type });
      expect(r.status).toBe('failed');
      expect(r.error?.message).toMatch(message);
      expect(r.job).toMatchObject({ value: 'idle', context: { n: 1 }, revision: 3, status: 'active' });
      expect((await runtime.history(job.id))[2]).toMatchObject({ revision: 3, eventType: type, outcome: 'failed', to: 'idle', error: { message: expect.stringMatching(message) } });
      expect((await runtime.events(job.id))[1]).toMatchObject({ status: 'failed', error: { message: expect.stringMatching(message) } });

      // Not a poison pill: the job keeps working.
      expect(await runtime.send(job.id, { type: 'BUMP' })).toMatchObject({ status: 'applied', job: { context: { n: 2 }, revision: 4 } });
      expect(await runtime.send(job.id, { type: 'GO' })).toMatchObject({ status: 'applied', job: { value: 'running', revision: 5 } });
      expect(await revisions(runtime, job.id)).toEqual(upTo(5));
    });

    it('returns the first outcome for a duplicate event id, with no new revision', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const first = await runtime.send(job.id, { type: 'BUMP', by: 5 }, { eventId: 'evt-1' });
      const failed = await runtime.send(job.id, { type: 'BAD' }, { eventId: 'evt-2' });
      const before = await dump(store);
      const again = await runtime.send(job.id, { type: 'BUMP', by: 5 }, { eventId: 'evt-1' });
      expect(again).toMatchObject({ eventId: 'evt-1', status: 'applied', revision: 2, duplicate: true, job: { revision: 3, context: { n: 5 } } });
      expect(first.duplicate).toBe(false);
      const failedAgain = await runtime.send(job.id, { type: 'BAD' }, { eventId: 'evt-2' });
      expect(failedAgain).toMatchObject({ status: 'failed', revision: 3, duplicate: true, error: failed.error });
      expect(await dump(store)).toEqual(before);
    });

    it('makes up an event id that names its revision when none is given; sending that id again returns the first outcome', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const first = await runtime.send(job.id, { type: 'BUMP', by: 2 });
      expect(first.eventId).toMatch(/^r2\.[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      await runtime.send(job.id, { type: 'BUMP', by: 1 });
      const before = await dump(store);
      expect(await runtime.send(job.id, { type: 'BUMP', by: 2 }, { eventId: first.eventId })).toMatchObject({ status: 'applied', revision: 2, duplicate: true, job: { revision: 3 } });
      await expect(runtime.send(job.id, { type: 'BUMP', by: 9 }, { eventId: first.eventId })).rejects.toBeInstanceOf(IdempotencyConflictError);
      expect(await dump(store)).toEqual(before);
      expect((await runtime.events(job.id)).map((e) => [e.eventId, e.revision])).toEqual([[first.eventId, 2], [expect.stringMatching(/^r3\./), 3]]);
    });

    it('refuses the same event id with a different event (IdempotencyConflictError), writing nothing', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      await runtime.send(job.id, { type: 'BUMP', by: 5 }, { eventId: 'evt-1' });
      const before = await dump(store);
      await expect(runtime.send(job.id, { type: 'BUMP', by: 6 }, { eventId: 'evt-1' })).rejects.toBeInstanceOf(IdempotencyConflictError);
      await expect(runtime.send(job.id, { type: 'GO' }, { eventId: 'evt-1' })).rejects.toBeInstanceOf(IdempotencyConflictError);
      expect(await dump(store)).toEqual(before);
    });

    it('refuses events to a final job with JobTerminalError and changes nothing', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('job-lifecycle', { name: 'x' });
      await runtime.send(job.id, { type: 'START' });
      const done = await runtime.send(job.id, { type: 'FINISH' });
      expect(done.job).toMatchObject({ value: 'completed', status: 'done', final: true, output: { outcome: 'completed' } });
      const before = await dump(store);
      const error = await runtime.send(job.id, { type: 'CANCEL' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(JobTerminalError);
      expect(error).toMatchObject({ code: 'SPOOL_TERMINAL', category: 'terminal' });
      await expect(runtime.send(job.id, { type: 'START' }, { eventId: 'late' })).rejects.toBeInstanceOf(JobTerminalError);
      expect(await dump(store)).toEqual(before);
    });

    it('refuses unknown and reserved event types with UnknownEventError', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const before = await dump(store);
      await expect(runtime.send(job.id, { type: 'NOPE' })).rejects.toBeInstanceOf(UnknownEventError);
      await expect(runtime.send(job.id, { type: 'START' })).rejects.toBeInstanceOf(UnknownEventError); // job-lifecycle's, not probe's
      await expect(runtime.send(job.id, { type: 'xstate.init' })).rejects.toBeInstanceOf(UnknownEventError);
      await expect(runtime.send(job.id, { type: 'xstate.after.1000.probe.idle' })).rejects.toBeInstanceOf(UnknownEventError);
      await expect(runtime.send(job.id, { type: 'xstate.done.actor.x', output: 1 })).rejects.toBeInstanceOf(UnknownEventError);
      expect(await dump(store)).toEqual(before);
    });

    it('takes the events a wildcard transition handles (`*`, `user.*`), as XState does', async () => {
      const wild = setup({ types: { context: {} as { got: string[] } } }).createMachine({
        id: 'wild',
        initial: 'idle',
        context: { got: [] },
        states: {
          idle: {
            on: {
              'user.*': { actions: assign({ got: ({ context, event }) => [...context.got, event.type] }) },
              STOP: 'end',
              '*': { actions: assign({ got: ({ context, event }) => [...context.got, `any:${event.type}`] }) },
            },
          },
          end: { type: 'final' },
        },
      });
      const { runtime, store } = await fresh(kind, { machines: [{ machine: wild, version: 1 }] });
      const job = await runtime.start('wild', {});
      expect(await runtime.send(job.id, { type: 'user.login' })).toMatchObject({ status: 'applied' });
      expect(await runtime.send(job.id, { type: 'other' })).toMatchObject({ status: 'applied' });
      // Reserved types stay refused, whatever a wildcard would match.
      const before = await dump(store);
      await expect(runtime.send(job.id, { type: 'xstate.init' })).rejects.toBeInstanceOf(UnknownEventError);
      expect(await dump(store)).toEqual(before);
      // XState's `user.*` takes `user` too; type names that are Object.prototype's own are plain types.
      expect(await runtime.send(job.id, { type: 'user' })).toMatchObject({ status: 'applied' });
      for (const type of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) expect(await runtime.send(job.id, { type })).toMatchObject({ status: 'applied' });
      expect((await runtime.send(job.id, { type: 'STOP' })).job).toMatchObject({
        value: 'end',
        context: { got: ['user.login', 'any:other', 'user', 'any:toString', 'any:constructor', 'any:__proto__', 'any:hasOwnProperty'] },
      });
    });

    it('validates an event with the schema of the most specific wildcard key that matches it', async () => {
      const wild = setup({ types: { context: {} as { n: number } } }).createMachine({
        id: 'wild2',
        initial: 'idle',
        context: { n: 0 },
        states: { idle: { on: { '*': { actions: assign({ n: ({ context }) => context.n + 1 }) } } } },
      });
      const events = {
        'user.*': z.strictObject({ type: z.string(), who: z.string() }),
        'user.admin.*': z.strictObject({ type: z.string(), who: z.string(), level: z.number() }),
        PING: z.strictObject({ type: z.literal('PING') }),
      };
      const { runtime, store } = await fresh(kind, { machines: [{ machine: wild, version: 1, events }] });
      const job = await runtime.start('wild2', {});
      expect(await runtime.send(job.id, { type: 'user.login', who: 'ann' })).toMatchObject({ status: 'applied' });
      expect(await runtime.send(job.id, { type: 'user.admin.grant', who: 'bo', level: 2 })).toMatchObject({ status: 'applied' });
      expect(await runtime.send(job.id, { type: 'other', anything: 1 })).toMatchObject({ status: 'applied' }); // `*` has no schema
      const before = await dump(store);
      await expect(runtime.send(job.id, { type: 'user.login', junk: 1 })).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.send(job.id, { type: 'user.admin.grant', who: 'bo' })).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.send(job.id, { type: 'PING', extra: true })).rejects.toBeInstanceOf(ValidationError);
      expect(await dump(store)).toEqual(before);
    });

    it('refuses wrong-typed and extra event fields with ValidationError', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const before = await dump(store);
      const error = await runtime.send(job.id, { type: 'BUMP', by: 'two' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toMatch(/by/);
      await expect(runtime.send(job.id, { type: 'BUMP', by: 1.5 })).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.send(job.id, { type: 'GO', extra: true })).rejects.toBeInstanceOf(ValidationError);
      expect(await dump(store)).toEqual(before);
    });

    it('refuses a payload over maxPayloadBytes with PayloadTooLargeError', async () => {
      const { runtime, store } = await fresh(kind, { maxPayloadBytes: 200 });
      const job = await runtime.start('probe', {});
      const before = await dump(store);
      const error = await runtime.send(job.id, { type: 'CHARGE', secret: 'x'.repeat(300) }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PayloadTooLargeError);
      expect(error).toMatchObject({ code: 'SPOOL_PAYLOAD_TOO_LARGE', details: { limit: 200 } });
      await expect(runtime.start('probe', { ref: 'y'.repeat(300) })).rejects.toBeInstanceOf(PayloadTooLargeError);
      expect(await dump(store)).toEqual(before);
      // Just under the limit is fine.
      expect(await runtime.send(job.id, { type: 'CHARGE', secret: 'x'.repeat(100) })).toMatchObject({ status: 'ignored' });
    });

    it('refuses malformed events and inputs with typed errors and writes nothing', async () => {
      const { runtime, store } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const before = await dump(store);
      const circular: Record<string, unknown> = { type: 'GO' };
      circular['self'] = circular;
      const bad: unknown[] = ['GO', 42, null, undefined, [], [{ type: 'GO' }], {}, { type: '' }, { type: 7 }, { kind: 'GO' }, circular, { type: 'GO', n: 10n }, () => 1];
      for (const event of bad) {
        const error = await runtime.send(job.id, event).catch((e: unknown) => e);
        expect(error, `send(${String(event)})`).toBeInstanceOf(ValidationError);
      }
      for (const input of [circular, { ref: 1n }, 'x', 7]) {
        await expect(runtime.start('probe', input)).rejects.toBeInstanceOf(ValidationError);
      }
      await expect(runtime.send(job.id, { type: 'GO' }, { eventId: 'has space' })).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.send(job.id, { type: 'GO' }, { eventId: '' })).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.start('probe', {}, { jobId: 'x'.repeat(201) })).rejects.toBeInstanceOf(ValidationError);
      await expect(runtime.send('no-such-job', { type: 'GO' })).rejects.toBeInstanceOf(JobNotFoundError);
      expect(await dump(store)).toEqual(before);
    });
  });

  describe('concurrency inside one runtime', () => {
    it('serialises concurrent sends to one job: every event applied once, revisions contiguous', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const results = await Promise.all(Array.from({ length: 25 }, (_, i) => runtime.send(job.id, { type: 'BUMP' }, { eventId: `bump-${i}` })));
      expect(results.every((r) => r.status === 'applied' && !r.duplicate)).toBe(true);
      expect(new Set(results.map((r) => r.revision)).size).toBe(25);
      expect(await runtime.get(job.id)).toMatchObject({ revision: 26, context: { n: 25 } });
      expect(await revisions(runtime, job.id)).toEqual(upTo(26));
    });

    it('applies the same event id sent twice at once only once', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const [a, b] = await Promise.all([
        runtime.send(job.id, { type: 'BUMP' }, { eventId: 'same' }),
        runtime.send(job.id, { type: 'BUMP' }, { eventId: 'same' }),
      ]);
      expect([a.duplicate, b.duplicate].sort()).toEqual([false, true]);
      expect(a).toMatchObject({ status: 'applied', revision: 2 });
      expect(b).toMatchObject({ status: 'applied', revision: 2 });
      expect(await runtime.get(job.id)).toMatchObject({ revision: 2, context: { n: 1 } });
    });

    it('creates one job for concurrent starts with the same idempotency key', async () => {
      const { runtime } = await fresh(kind);
      const jobs = await Promise.all(Array.from({ length: 5 }, () => runtime.start('probe', { ref: 'r' }, { idempotencyKey: 'once' })));
      expect(new Set(jobs.map((j) => j.id)).size).toBe(1);
      expect(await runtime.list()).toHaveLength(1);
    });

    it('send with wait:false resolves once accepted, and the runtime applies it in the background', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const applied = runtime.waitFor(job.id, (j) => j.value === 'running', { timeoutMs: 10_000 });
      const r = await runtime.send(job.id, { type: 'GO' }, { eventId: 'go', wait: false });
      expect(r).toMatchObject({ status: 'pending', revision: null, duplicate: false });
      expect(await applied).toMatchObject({ revision: 2 });
      expect(await runtime.send(job.id, { type: 'GO' }, { eventId: 'go' })).toMatchObject({ status: 'applied', revision: 2, duplicate: true });
    });
  });

  describe('owner scope', () => {
    it('a runtime with an empty-string owner can read back the jobs it starts', async () => {
      const { runtime } = await fresh(kind, { owner: '' });
      const job = await runtime.start('probe', {}, { idempotencyKey: 'k' });
      expect(await runtime.get(job.id)).toMatchObject({ id: job.id, revision: 1 });
      expect((await runtime.list()).map((j) => j.id)).toEqual([job.id]);
      expect(await runtime.send(job.id, { type: 'GO' })).toMatchObject({ status: 'applied' });
      expect((await runtime.start('probe', {}, { idempotencyKey: 'k' })).id).toBe(job.id);
    });

    it('a scoped runtime sees only its owner’s jobs; others read as not found', async () => {
      const store = kind === 'sqlite' ? await res.sqlite(res.dbPath()) : new MemoryStore();
      // Two tenants' runtimes on one store (closing either closes the store; both are closed at the end).
      const acme = await res.runtime({ store, machines: MACHINES, owner: 'acme' });
      const globex = await res.runtime({ store, machines: MACHINES, owner: 'globex' });
      const a = await acme.start('probe', {}, { idempotencyKey: 'k' });
      const g = await globex.start('probe', {}, { idempotencyKey: 'k' });
      expect(g.id).not.toBe(a.id);
      expect(a.owner).toBe('acme');
      expect((await acme.list()).map((j) => j.id)).toEqual([a.id]);
      expect((await globex.list()).map((j) => j.id)).toEqual([g.id]);
      await expect(globex.get(a.id)).rejects.toBeInstanceOf(JobNotFoundError);
      await expect(globex.send(a.id, { type: 'GO' })).rejects.toBeInstanceOf(JobNotFoundError);
      await expect(globex.history(a.id)).rejects.toBeInstanceOf(JobNotFoundError);
      await expect(globex.events(a.id)).rejects.toBeInstanceOf(JobNotFoundError);
      expect(await acme.get(a.id)).toMatchObject({ revision: 1, value: 'idle' });
    });
  });

  describe('waitFor, list, history', () => {
    it('waitFor resolves on a later commit, from the commit itself (no polling)', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const order: string[] = [];
      const waiting = runtime.waitFor(job.id, (j) => j.value === 'running').then((j) => {
        order.push('waiter');
        return j;
      });
      expect(await runtime.send(job.id, { type: 'BUMP' })).toMatchObject({ status: 'applied' });
      order.push('bump sent');
      await runtime.send(job.id, { type: 'GO' });
      order.push('go sent');
      const j = await waiting;
      expect(j).toMatchObject({ value: 'running', revision: 3 });
      // The waiter is resolved by the commit's event, before send() even returns.
      expect(order).toEqual(['bump sent', 'waiter', 'go sent']);
      // Already true: resolves at once.
      await expect(runtime.waitFor(job.id, (x) => x.revision >= 3)).resolves.toMatchObject({ revision: 3 });
    });

    it('waitFor rejects on timeout, and for unknown jobs', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      await expect(runtime.waitFor(job.id, (j) => j.final, { timeoutMs: 20 })).rejects.toBeInstanceOf(WaitTimeoutError);
      await expect(runtime.waitFor('nope', () => true, { timeoutMs: 1000 })).rejects.toBeInstanceOf(JobNotFoundError);
      const controller = new AbortController();
      const aborted = runtime.waitFor(job.id, (j) => j.final, { signal: controller.signal });
      controller.abort(new Error('stop waiting'));
      await expect(aborted).rejects.toThrow('stop waiting');
    });

    it('close() settles a waitFor still outstanding instead of leaving it pending forever', async () => {
      const { runtime } = await fresh(kind);
      const job = await runtime.start('probe', {});
      const waiting = runtime.waitFor(job.id, (j) => j.final).then(
        () => 'resolved',
        (e: unknown) => e,
      );
      await runtime.close();
      // One full turn of the event loop after close() is all a settled promise needs.
      const outcome = await Promise.race([waiting, new Promise((r) => setImmediate(() => r('still pending')))]);
      expect(outcome).toBeInstanceOf(ClosedError);
    });

    it('lists by machine, state and status, and keeps history contiguous', async () => {
      const { runtime } = await fresh(kind);
      const a = await runtime.start('job-lifecycle', { name: 'a' }, { jobId: 'a' });
      const b = await runtime.start('job-lifecycle', { name: 'b' }, { jobId: 'b' });
      const c = await runtime.start('job-lifecycle', { name: 'c' }, { jobId: 'c' });
      await runtime.start('probe', {}, { jobId: 'p' });
      await runtime.send(b.id, { type: 'START' });
      await runtime.send(c.id, { type: 'START' });
      await runtime.send(c.id, { type: 'PROGRESS', percent: 30 });
      await runtime.send(c.id, { type: 'START' }); // ignored
      await runtime.send(c.id, { type: 'FINISH' });
      const ids = (jobs: { id: string }[]) => jobs.map((j) => j.id);
      expect(ids(await runtime.list())).toEqual(['a', 'b', 'c', 'p']);
      expect(ids(await runtime.list({ machineId: 'job-lifecycle' }))).toEqual(['a', 'b', 'c']);
      expect(ids(await runtime.list({ machineId: 'probe' }))).toEqual(['p']);
      expect(ids(await runtime.list({ state: 'queued' }))).toEqual(['a']);
      expect(ids(await runtime.list({ state: 'processing' }))).toEqual(['b']);
      expect(ids(await runtime.list({ state: 'idle' }))).toEqual(['p']);
      expect(ids(await runtime.list({ status: 'done' }))).toEqual(['c']);
      expect(ids(await runtime.list({ status: 'active' }))).toEqual(['a', 'b', 'p']);
      expect(ids(await runtime.list({ machineId: 'job-lifecycle', status: 'active', limit: 1, afterId: 'a' }))).toEqual(['b']);
      const history = await runtime.history(c.id);
      expect(history.map((h) => h.revision)).toEqual(upTo(5));
      expect(history.map((h) => [h.eventType, h.outcome, h.to])).toEqual([
        ['xstate.init', 'started', 'queued'],
        ['START', 'applied', 'processing'],
        ['PROGRESS', 'applied', 'processing'],
        ['START', 'ignored', 'processing'],
        ['FINISH', 'applied', 'completed'],
      ]);
      expect(await runtime.get(c.id)).toMatchObject({ revision: 5, context: { progress: 100 } });
      expect(await revisions(runtime, a.id)).toEqual([1]);
    });
  });

  describe('actions', () => {
    it('runs custom actions only after the commit: the action already sees the new revision stored', async () => {
      const { runtime, store } = await fresh(kind);
      const seen: unknown[] = [];
      const reads: Promise<unknown>[] = [];
      probeHooks.observe = (ref) => {
        // Synchronous read of the store's own state from inside the action.
        if ('db' in store) {
          seen.push((store as SqliteStore).db.prepare('SELECT revision, state_value FROM jobs WHERE id = ?').get(ref));
        } else {
          // A read the action starts (what it sees is decided by when the read reaches the store).
          reads.push(store.getJob(ref).then((j) => seen.push({ revision: j?.revision, state_value: JSON.stringify(j?.value) })));
        }
      };
      const job = await runtime.start('probe', { ref: 'obs' }, { jobId: 'obs' });
      expect(probeHooks.idleEntered).toBe(1);
      await runtime.send(job.id, { type: 'GO' });
      await Promise.all(reads);
      expect(seen).toEqual([{ revision: 2, state_value: '"running"' }]);
      expect(probeHooks.runningEntered).toBe(1);
    });

    it('an action that throws after the commit does not undo the transition and emits action.failed', async () => {
      const { runtime } = await fresh(kind);
      const seen = events(runtime);
      const job = await runtime.start('probe', {});
      await runtime.send(job.id, { type: 'GO' });
      const r = await runtime.send(job.id, { type: 'CHARGE' });
      expect(r).toMatchObject({ status: 'applied', revision: 3, error: null, job: { value: 'charged', revision: 3 } });
      expect(await runtime.get(job.id)).toMatchObject({ value: 'charged', revision: 3 });
      expect(seen).toContainEqual({ type: 'action.failed', jobId: job.id, revision: 3, action: 'charge', error: expect.objectContaining({ message: 'gateway refused card none' }) });
      expect((await runtime.history(job.id)).at(-1)).toMatchObject({ revision: 3, outcome: 'applied', to: 'charged' });
      expect(await runtime.send(job.id, { type: 'FINISH' })).toMatchObject({ status: 'applied', job: { final: true } });
    });
  });
});

describe('sensitive fields', () => {
  const SECRET = 'tok_4242424242424242';
  const SECRET2 = 'tok_5555444433332222';

  it('never appear in history, processed inbox payloads, errors or logs', async () => {
    const logs: LogEntry[] = [];
    const { runtime, path } = await fresh('sqlite', { log: (e) => logs.push(e) });
    const thrown: unknown[] = [];
    const job = await runtime.start('probe', { ref: 'p', secret: SECRET }, { jobId: 'p' });

    // A guard that quotes the secret in its error.
    const failed = await runtime.send('p', { type: 'EXPLODE', secret: SECRET }, { eventId: 'explode-1' });
    expect(failed.status).toBe('failed');
    expect(failed.error?.message).toContain('[redacted]');

    // Errors for bad requests that carry the secret.
    thrown.push(await runtime.send('p', { type: 'EXPLODE', secret: SECRET2 }, { eventId: 'explode-1' }).catch((e: unknown) => e));
    thrown.push(await runtime.send('p', { type: 'CHARGE', secret: SECRET, amount: 'ten' }).catch((e: unknown) => e));
    thrown.push(await runtime.send('p', { type: 'CHARGE', secret: 4242424242424242 }).catch((e: unknown) => e));
    thrown.push(await runtime.start('probe', { secret: SECRET, extra: SECRET }).catch((e: unknown) => e));
    expect(thrown.every((e) => e instanceof Error)).toBe(true);

    // An event accepted by a client runtime, processed later by this one.
    const client = await reopen(path!, { processEvents: false, log: (e) => logs.push(e) });
    const pending = await client.send('p', { type: 'CHARGE', secret: SECRET2, amount: 5 }, { eventId: 'charge-later', wait: false });
    expect(pending.status).toBe('pending');
    await client.close();
    await runtime.recover();
    expect(await runtime.events('p')).toContainEqual(expect.objectContaining({ eventId: 'charge-later', status: 'ignored' }));

    const history = await runtime.history('p');
    expect(history[0]).toMatchObject({ payload: { ref: 'p', secret: '[redacted]' } });
    expect(history.find((h) => h.eventId === 'explode-1')).toMatchObject({ payload: { type: 'EXPLODE', secret: '[redacted]' } });
    const inbox = await runtime.events('p');
    expect(inbox.every((e) => e.status !== 'pending')).toBe(true);

    // (The job's own stored input is not in scope here: only records, errors and logs are.)
    expect(job.id).toBe('p');
    const everything = JSON.stringify({
      history,
      inbox,
      logs,
      failedError: failed.error,
      thrown: thrown.map((e) => [(e as Error).message, (e as { details?: unknown }).details]),
    });
    for (const s of [SECRET, SECRET2, '4242424242424242']) {
      expect(everything).not.toContain(s);
    }
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.some((l) => l.msg === 'event failed')).toBe(true);
  });

  it('never appear in a validation error whose schema message quotes the refused value', async () => {
    const quoting = {
      machine: setup({}).createMachine({ id: 'quoting', initial: 'open', states: { open: { on: { PAY: 'open' } } } }),
      sensitive: ['card', 'token'],
      input: z.object({ token: z.string().refine((v) => v.startsWith('tok_'), { error: (issue) => `token ${String(issue.input)} is not a token` }) }),
      events: { PAY: z.object({ type: z.literal('PAY'), card: z.string().length(16, { error: (issue) => `card ${String(issue.input)} must have 16 digits` }) }) },
    };
    const { runtime } = await fresh('memory', { machines: [quoting] });
    const badStart = await runtime.start('quoting', { token: 'SECRETTOKEN' }).catch((e: unknown) => e);
    expect(badStart).toBeInstanceOf(ValidationError);
    expect((badStart as Error).message).toBe('Invalid input for quoting: token: token [redacted] is not a token');
    const job = await runtime.start('quoting', { token: 'tok_1' });
    const badSend = await runtime.send(job.id, { type: 'PAY', card: '4111-SECRET' }).catch((e: unknown) => e);
    expect(badSend).toBeInstanceOf(ValidationError);
    expect((badSend as Error).message).toBe('Invalid PAY event for quoting: card: card [redacted] must have 16 digits');
    expect(JSON.stringify([(badStart as SpoolError).toJSON(), (badSend as SpoolError).toJSON()])).not.toMatch(/SECRET/);
  });

  it('never appear in action.failed or the log when an action throws after the commit', async () => {
    const logs: LogEntry[] = [];
    const { runtime } = await fresh('sqlite', { log: (e) => logs.push(e) });
    const seen = events(runtime);
    const job = await runtime.start('probe', {});
    await runtime.send(job.id, { type: 'GO' });
    const r = await runtime.send(job.id, { type: 'CHARGE', secret: SECRET, amount: 10 });
    expect(r.status).toBe('applied');
    const failures = seen.filter((e) => e.type === 'action.failed');
    expect(failures).toHaveLength(1);
    expect(logs.some((l) => l.msg === 'action failed after commit')).toBe(true);
    expect(JSON.stringify(failures)).not.toContain(SECRET);
    expect(JSON.stringify(logs)).not.toContain(SECRET);
  });
});

describe('sensitive fields holding objects', () => {
  it('are redacted from failure messages too, not only from payloads', async () => {
    const PAN = '4000056655665556';
    const logs: LogEntry[] = [];
    const { runtime } = await fresh('memory', { log: (e) => logs.push(e) });
    const job = await runtime.start('probe', {});
    const r = await runtime.send(job.id, { type: 'EXPLODE', secret: { pan: PAN } });
    expect(r.status).toBe('failed');
    const history = await runtime.history(job.id);
    expect(history[1]).toMatchObject({ payload: { type: 'EXPLODE', secret: '[redacted]' } });
    expect(JSON.stringify({ error: r.error, history, inbox: await runtime.events(job.id), logs })).not.toContain(PAN);
  });
});

describe('restore (SQLite file, new runtime)', () => {
  it('continues jobs where they stood without re-running entry actions', async () => {
    const { runtime, path } = await fresh('sqlite');
    const job = await runtime.start('probe', {}, { jobId: 'p' });
    await runtime.send('p', { type: 'BUMP', by: 2 });
    await runtime.send('p', { type: 'GO' });
    const lc = await runtime.start('job-lifecycle', { name: 'x', items: 2 }, { jobId: 'lc' });
    await runtime.send(lc.id, { type: 'START' });
    await runtime.send(lc.id, { type: 'ITEM_DONE' });
    const before = { p: await runtime.get('p'), lc: await runtime.get('lc') };
    expect(probeHooks).toMatchObject({ idleEntered: 1, runningEntered: 1 });
    await runtime.close();

    const next = await reopen(path!);
    expect(await next.get('p')).toEqual(before.p);
    expect(await next.get('lc')).toEqual(before.lc);
    expect(probeHooks).toMatchObject({ idleEntered: 1, runningEntered: 1 });

    expect(await next.send('p', { type: 'PING' })).toMatchObject({ status: 'applied', job: { value: 'running', context: { n: 3 }, revision: 4 } });
    expect(probeHooks).toMatchObject({ idleEntered: 1, runningEntered: 1 });
    expect(await next.send('lc', { type: 'ITEM_DONE' })).toMatchObject({ status: 'applied', job: { value: 'completed', final: true, revision: 4 } });
    expect(await revisions(next, job.id)).toEqual(upTo(4));
    await next.close();
  });

  it('an event accepted by a non-processing runtime is applied by the next runtime’s recovery', async () => {
    const { runtime, path } = await fresh('sqlite', { processEvents: false });
    await runtime.start('probe', {}, { jobId: 'p' });
    const r = await runtime.send('p', { type: 'GO' }, { eventId: 'go-later', wait: false });
    expect(r).toMatchObject({ status: 'pending', revision: null, duplicate: false, job: { value: 'idle', revision: 1 } });
    const r2 = await runtime.send('p', { type: 'BUMP' }, { eventId: 'bump-later', wait: false });
    expect(r2.status).toBe('pending');
    expect((await runtime.events('p')).map((e) => e.status)).toEqual(['pending', 'pending']);
    expect(await runtime.get('p')).toMatchObject({ revision: 1, value: 'idle' });
    await runtime.close();

    const next = await reopen(path!);
    expect(await next.get('p')).toMatchObject({ revision: 3, value: 'running', context: { n: 0 } }); // BUMP is ignored in running
    expect((await next.events('p')).map((e) => [e.eventId, e.status, e.revision])).toEqual([
      ['go-later', 'applied', 2],
      ['bump-later', 'ignored', 3],
    ]);
    expect(probeHooks.runningEntered).toBe(1);
    // And a duplicate of the recovered event is recognised.
    expect(await next.send('p', { type: 'GO' }, { eventId: 'go-later' })).toMatchObject({ duplicate: true, status: 'applied', revision: 2 });
    await next.close();
  });

  it('close() waits for background processing started by send(wait:false)', async () => {
    const { runtime, path } = await fresh('sqlite');
    await runtime.start('probe', {}, { jobId: 'p' });
    for (let i = 0; i < 5; i += 1) await runtime.send('p', { type: 'BUMP' }, { eventId: `b${i}`, wait: false });
    await runtime.close();
    const store = await res.sqlite(path!);
    expect(await store.getJob('p')).toMatchObject({ revision: 6, context: { n: 5, ref: '' } });
    expect((await store.listEvents('p')).map((e) => e.status)).toEqual(['applied', 'applied', 'applied', 'applied', 'applied']);
    await store.close();
  });

  it('a queued event that fails does not block the queued events behind it', async () => {
    const { runtime, path } = await fresh('sqlite', { processEvents: false });
    await runtime.start('probe', {}, { jobId: 'p' });
    for (const [eventId, type] of [['bad', 'BAD'], ['explode', 'EXPLODE'], ['bump', 'BUMP'], ['go', 'GO']] as const) {
      await runtime.send('p', { type }, { eventId, wait: false });
    }
    await runtime.close();
    const next = await reopen(path!);
    expect((await next.events('p')).map((e) => [e.eventId, e.status, e.revision])).toEqual([
      ['bad', 'failed', 2],
      ['explode', 'failed', 3],
      ['bump', 'applied', 4],
      ['go', 'applied', 5],
    ]);
    expect(await next.get('p')).toMatchObject({ value: 'running', context: { n: 1 }, revision: 5 });
    await next.close();
  });

  it('queued events run in accept order before a new inline event', async () => {
    const { runtime, path } = await fresh('sqlite');
    await runtime.start('probe', {}, { jobId: 'p' });
    const client = await reopen(path!, { processEvents: false });
    await client.send('p', { type: 'GO' }, { eventId: 'queued-go', wait: false });
    await client.close();
    // The processing runtime sees the queued event and applies it first.
    const finish = await runtime.send('p', { type: 'FINISH' });
    expect(finish).toMatchObject({ status: 'applied', revision: 3 });
    expect((await runtime.events('p')).map((e) => [e.eventId, e.status, e.revision])).toEqual([
      ['queued-go', 'applied', 2],
      [finish.eventId, 'applied', 3],
    ]);
    expect((await runtime.history('p')).map((h) => h.to)).toEqual(['idle', 'running', 'finished']);
  });

  it('an accepted event that arrives after the job ended is rejected as terminal on recovery, not applied', async () => {
    const { runtime, path } = await fresh('sqlite', { processEvents: false });
    await runtime.start('probe', {}, { jobId: 'p' });
    await runtime.send('p', { type: 'FINISH' }, { eventId: 'finish', wait: false });
    await runtime.send('p', { type: 'GO' }, { eventId: 'too-late', wait: false });
    await runtime.close();

    const next = await res.runtime({ store: await res.sqlite(path!), machines: MACHINES, recover: false });
    const seen = events(next);
    expect(await next.recover()).toMatchObject({ processed: 2 });
    expect(await next.get('p')).toMatchObject({ value: 'finished', final: true, revision: 2 });
    expect((await next.events('p')).map((e) => [e.eventId, e.status, e.revision, e.error?.code ?? null])).toEqual([
      ['finish', 'applied', 2, null],
      ['too-late', 'rejected', null, 'SPOOL_TERMINAL'],
    ]);
    expect(seen).toContainEqual({ type: 'event.rejected', jobId: 'p', eventId: 'too-late', error: expect.objectContaining({ code: 'SPOOL_TERMINAL' }) });
    expect(await revisions(next, 'p')).toEqual([1, 2]);
    // Its sender, asking again, gets the rejection.
    expect(await next.send('p', { type: 'GO' }, { eventId: 'too-late' })).toMatchObject({ status: 'rejected', duplicate: true });
    expect(probeHooks.runningEntered).toBe(0);
    await next.close();
  });
});

describe('quarantine and versions', () => {
  async function seedDocs(): Promise<string> {
    const { runtime, path } = await fresh('sqlite', { machines: [docV1, probe] });
    await runtime.start('doc', { title: 'in review' }, { jobId: 'doc-review' });
    await runtime.send('doc-review', { type: 'SUBMIT' });
    await runtime.start('doc', { title: 'draft' }, { jobId: 'doc-draft' });
    await runtime.start('probe', {}, { jobId: 'healthy' });
    await runtime.close();
    return path!;
  }

  it('quarantines a job whose machine version is no longer registered; a healthy job keeps working; re-registering releases it', async () => {
    const path = await seedDocs();
    const client = await reopen(path, { machines: [docV1, probe], processEvents: false });
    await client.send('doc-review', { type: 'APPROVE' }, { eventId: 'approve-1', wait: false });
    await client.close();

    const v2only = await reopen(path, { machines: [docV2, probe] });
    const held = await v2only.get('doc-review');
    expect(held.quarantine).toMatch(/doc version 1 is not registered/);
    expect(held).toMatchObject({ revision: 2, value: 'review', machineVersion: '1' });
    expect((await v2only.list({ quarantined: true })).map((j) => j.id)).toEqual(['doc-draft', 'doc-review']);
    expect((await v2only.list({ quarantined: false })).map((j) => j.id)).toEqual(['healthy']);
    // Its accepted event waits; new events are refused.
    expect((await v2only.events('doc-review')).map((e) => [e.type, e.status])).toEqual([
      ['SUBMIT', 'applied'],
      ['APPROVE', 'pending'],
    ]);
    await expect(v2only.send('doc-review', { type: 'APPROVE' })).rejects.toBeInstanceOf(JobQuarantined);
    // The healthy job, and new jobs on v2, work.
    expect(await v2only.send('healthy', { type: 'GO' })).toMatchObject({ status: 'applied', job: { value: 'running' } });
    const fresh2 = await v2only.start('doc', {});
    expect(fresh2.machineVersion).toBe('2');
    expect(await v2only.send(fresh2.id, { type: 'SUBMIT' })).toMatchObject({ status: 'applied' });
    await v2only.close();

    const back = await res.runtime({ store: await res.sqlite(path), machines: [docV1, docV2, probe], recover: false });
    const seen = events(back);
    await back.recover();
    expect(seen).toContainEqual({ type: 'job.released', jobId: 'doc-review' });
    expect(await back.get('doc-review')).toMatchObject({ quarantine: null, value: 'approved', status: 'done', revision: 3, machineVersion: '1' });
    expect((await back.events('doc-review')).at(-1)).toMatchObject({ eventId: 'approve-1', status: 'applied', revision: 3 });
    expect(await back.list({ quarantined: true })).toEqual([]);
    expect(await back.send('doc-draft', { type: 'SUBMIT' })).toMatchObject({ status: 'applied', job: { value: 'review', machineVersion: '1' } });
    await back.close();
  });

  it('quarantines a job whose stored state no longer exists in its machine; jobs that still fit keep working', async () => {
    const path = await seedDocs();
    const broken = await reopen(path, { machines: [docV1Broken, probe] });
    const held = await broken.get('doc-review');
    expect(held.quarantine).toMatch(/review/);
    expect(held.quarantine).toMatch(/does not exist/);
    expect((await broken.list({ quarantined: true })).map((j) => j.id)).toEqual(['doc-review']);
    await expect(broken.send('doc-review', { type: 'PUBLISH' })).rejects.toBeInstanceOf(JobQuarantined);
    expect(await broken.get('doc-review')).toMatchObject({ revision: 2, value: 'review' });
    // doc-draft still fits the changed machine, and the probe job is untouched.
    expect(await broken.send('doc-draft', { type: 'PUBLISH' })).toMatchObject({ status: 'applied', job: { value: 'published' } });
    expect(await broken.send('healthy', { type: 'BUMP' })).toMatchObject({ status: 'applied' });
    await broken.close();

    const fixed = await reopen(path, { machines: [docV1, probe] });
    expect(await fixed.get('doc-review')).toMatchObject({ quarantine: null, value: 'review' });
    expect(await fixed.send('doc-review', { type: 'APPROVE' })).toMatchObject({ status: 'applied', job: { value: 'approved', revision: 3 } });
    await fixed.close();
  });

  it('quarantines jobs of a machine that is not registered at all, and jobs whose migration throws', async () => {
    const path = await seedDocs();
    const none = await res.runtime({ store: await res.sqlite(path), machines: [probe], recover: false });
    expect(await none.recover()).toMatchObject({ checked: 3, quarantined: 2, migrated: 0 });
    expect((await none.get('doc-review')).quarantine).toMatch(/machine doc is not registered/);
    expect(await none.send('healthy', { type: 'GO' })).toMatchObject({ status: 'applied' });
    await none.close();

    const failing = {
      ...docV2Migrating,
      migrations: {
        '1': () => {
          throw new Error('cannot migrate this one');
        },
      },
    };
    // A migration that returns no context (XState would restore it, then fail every event) is refused too.
    const contextless = { ...docV2Migrating, migrations: { '1': (snap: Record<string, unknown>) => ({ ...snap, context: undefined, children: 42 }) as never } };
    const bad = await reopen(path, { machines: [contextless, probe] });
    expect((await bad.get('doc-review')).quarantine).toMatch(/snapshot does not fit machine doc@2: its context is not an object/);
    expect(await bad.get('doc-review')).toMatchObject({ machineVersion: '1', revision: 2 });
    await bad.close();

    const rt = await reopen(path, { machines: [failing, probe] });
    const held = await rt.get('doc-review');
    expect(held.quarantine).toMatch(/migration from 1 to 2 failed: cannot migrate this one/);
    expect(held).toMatchObject({ machineVersion: '1', revision: 2 });
    expect((await rt.history('doc-review')).map((h) => h.outcome)).toEqual(['started', 'applied']);
    await rt.close();

    // With a migration that works, the held job moves to v2 and is released in the same open.
    const mended = await res.runtime({ store: await res.sqlite(path), machines: [docV2Migrating, probe], recover: false });
    const seen = events(mended);
    expect(await mended.recover()).toMatchObject({ migrated: 2, quarantined: 0 });
    expect(await mended.get('doc-review')).toMatchObject({ machineVersion: '2', revision: 3, quarantine: null });
    expect(seen).toContainEqual({ type: 'job.released', jobId: 'doc-review' });
    expect(await mended.list({ quarantined: true })).toEqual([]);
    await mended.close();
  });

  it('a job whose own version is not registered here is not reported stuck: a migration, or a worker with its version, moves it', async () => {
    const path = await seedDocs();
    for (const machines of [
      [docV2Migrating, probe],
      [docV2, probe],
    ]) {
      const rt = await res.runtime({ store: await res.sqlite(path), machines, recover: false });
      const stuck = (await rt.list({ stuck: true })).map((j) => j.id);
      expect(stuck).not.toContain('doc-review');
      expect((await rt.details('doc-review')).stuck).toBe(false);
      expect((await rt.stats()).stuck).toBe(stuck.length);
      await rt.close();
    }
  });

  it('a job stays on v1 when v2 is registered without a migration', async () => {
    const path = await seedDocs();
    const rt = await reopen(path, { machines: [docV1, docV2, probe] });
    expect(await rt.get('doc-review')).toMatchObject({ machineVersion: '1', revision: 2, quarantine: null });
    expect(await rt.send('doc-review', { type: 'REJECT' }).catch((e: unknown) => e)).toBeInstanceOf(UnknownEventError); // v2's event
    expect(await rt.send('doc-review', { type: 'APPROVE' })).toMatchObject({ status: 'applied', job: { machineVersion: '1', value: 'approved' } });
    expect((await rt.history('doc-review')).map((h) => h.outcome)).toEqual(['started', 'applied', 'applied']);
    expect((await rt.start('doc', {})).machineVersion).toBe('2');
    await rt.close();
  });

  it('a job moves to v2 on open when v2 registers a migration from v1, with a migrated history record', async () => {
    const path = await seedDocs();
    const rt = await res.runtime({ store: await res.sqlite(path), machines: [docV2Migrating, probe], recover: false });
    expect(await rt.recover()).toMatchObject({ checked: 3, migrated: 2, quarantined: 0 });
    const moved = await rt.get('doc-review');
    expect(moved).toMatchObject({ machineVersion: '2', revision: 3, value: 'review', quarantine: null, context: { title: 'in review', rev2: true } });
    const history = await rt.history('doc-review');
    expect(history.map((h) => h.revision)).toEqual([1, 2, 3]);
    expect(history[2]).toMatchObject({ outcome: 'migrated', eventType: 'spool.migrate', from: 'review', to: 'review', payload: { from: '1', to: '2' } });
    expect(await rt.get('doc-draft')).toMatchObject({ machineVersion: '2', revision: 2, context: { rev2: true } });
    // v2 behaviour now applies.
    expect(await rt.send('doc-review', { type: 'REJECT' })).toMatchObject({ status: 'applied', job: { value: 'draft', revision: 4 } });
    await rt.close();

    // Reopening does not migrate again.
    const again = await reopen(path, { machines: [docV2Migrating, probe] });
    expect((await again.history('doc-review')).filter((h) => h.outcome === 'migrated')).toHaveLength(1);
    expect(await again.get('doc-review')).toMatchObject({ revision: 4, machineVersion: '2' });
    await again.close();
  });
});

describe('waitFor and other processes', () => {
  it('resolves on a commit another connection to the same file makes (SQLite counts them); a wait that commit does not satisfy still times out', async () => {
    const path = res.dbPath();
    const waiter = await res.runtime({ machines: MACHINES, store: await res.sqlite(path) });
    const other = await res.runtime({ machines: MACHINES, store: await res.sqlite(path) });
    const job = await waiter.start('probe', {});
    let checked!: () => void;
    const firstCheck = new Promise<void>((r) => (checked = r));
    const waiting = waiter.waitFor(job.id, (j) => {
      checked();
      return j.value === 'running';
    });
    await firstCheck; // the wait has read the job as it was: only a later look can see the commit
    // The other runtime has its own connection: no event of the waiter's runtime announces its commit.
    await other.send(job.id, { type: 'GO' });
    expect(await waiting).toMatchObject({ value: 'running', revision: 2 });
    // A wait that the other connection's commit does not satisfy keeps waiting until its timeout.
    await expect(waiter.waitFor(job.id, (j) => j.final, { timeoutMs: 120 })).rejects.toBeInstanceOf(WaitTimeoutError);
  });
});

describe('the snapshot each runtime keeps of the jobs it committed', () => {
  const counter = setup({ types: { context: {} as { n: number } } }).createMachine({
    id: 'counter',
    context: { n: 0 },
    initial: 'counting',
    states: { counting: { on: { INC: { actions: assign({ n: ({ context }) => context.n + 1 }) } } } },
  });
  it('is never used for a revision another runtime moved past: two runtimes on one file alternate commits to one job, and each step starts from the stored row', async () => {
    const path = res.dbPath();
    const one = await res.runtime({ machines: [counter], store: await res.sqlite(path) });
    const two = await res.runtime({ machines: [counter], store: await res.sqlite(path) });
    const job = await one.start('counter', {});
    for (let i = 1; i <= 6; i += 1) {
      // Each runtime keeps the snapshot of its own last commit, which the other's commit made stale.
      const r = await (i % 2 === 1 ? one : two).send(job.id, { type: 'INC' });
      expect(r.job).toMatchObject({ revision: i + 1, context: { n: i } });
    }
    expect((await one.history(job.id)).map((h) => h.revision)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });
});

describe('createRuntime options', () => {
  it('refuses wrong types, unknown names and out-of-range values with a ValidationError naming the option, before it opens', async () => {
    const store = new MemoryStore();
    const bad: [Record<string, unknown>, string, RegExp][] = [
      [{ owner: 5 }, 'owner', /owner: /],
      [{ owner: {} }, 'owner', /owner: /],
      [{ clock: {} }, 'clock', /clock: must be a Clock/],
      [{ machines: null }, 'machines', /machines: must be an array/],
      [{ store: null }, 'store', /store: must be a JobStore/],
      [{ log: 'json' }, 'log', /log: must be a function/],
      [{ newId: 5 }, 'newId', /newId: must be a function/],
      [{ maxPayloadBytes: Number.NaN }, 'maxPayloadBytes', /maxPayloadBytes/],
      [{ maxPayloadBytes: 0 }, 'maxPayloadBytes', /maxPayloadBytes/],
      [{ maxConcurrentActivities: 0 }, 'maxConcurrentActivities', /maxConcurrentActivities/],
      [{ maxConcurrentActivities: '8' }, 'maxConcurrentActivities', /maxConcurrentActivities/],
      [{ maxConcurrentActivities: 1.5 }, 'maxConcurrentActivities', /maxConcurrentActivities/],
      [{ leaseMs: 0 }, 'leaseMs', /leaseMs: must be at least 1000/],
      [{ maxBacklog: null }, 'maxBacklog', /maxBacklog/],
      [{ processEvents: 'no' }, 'processEvents', /processEvents/],
      [{ verifySnapshots: 'yes' }, 'verifySnapshots', /verifySnapshots/],
      [{ maxBacklogg: 10 }, 'maxBacklogg', /unknown option maxBacklogg/],
    ];
    for (const [patch, option, message] of bad) {
      const error = await createRuntime({ store, machines: MACHINES, ...patch } as RuntimeOptions).catch((e: unknown) => e);
      expect(error, JSON.stringify(patch)).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ details: { option } });
      expect((error as Error).message).toMatch(/^createRuntime: /);
      expect((error as Error).message).toMatch(message);
    }
    // Left out, or undefined: the defaults.
    const ok = await res.runtime({ store, machines: MACHINES, ...({ owner: undefined } as object), leaseMs: 1000, maxBacklog: Number.POSITIVE_INFINITY });
    expect((await ok.start('probe', {})).revision).toBe(1);
  });
});
