/**
 * Start-or-send: create a job if it does not exist and deliver an event to it in one durable step;
 * concurrent callers (in one process, and in several real processes on one SQLite file) converge
 * on one job and one application of each event id.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { IdempotencyConflictError, JobTerminalError, ValidationError } from '../src/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { ChildScript } from './helpers/proc.ts';
import { Resources } from './helpers/resources.ts';
import { openRuntime } from './helpers/durable.ts';
import { tally, till } from './fixtures/deliveryMachines.ts';

const CHILD = fileURLToPath(new URL('./fixtures/startOrSendChild.ts', import.meta.url));
const res = new Resources();
const children: ChildScript[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await res.dispose();
});

describe('startOrSend', () => {
  it('creates the job with the event in one commit, then sends to the job it finds', async () => {
    const { runtime, store } = await openRuntime(res, [tally, till]);
    const first = await runtime.startOrSend('tally', 'cart-1', { label: 'a' }, { type: 'ADD', n: 2 }, { eventId: 'e1' });
    expect(first).toMatchObject({ created: true, status: 'applied', duplicate: false, job: { id: 'cart-1', context: { label: 'a', total: 2 } } });
    // The start and its event were one write: the event is in the job's inbox from revision 1.
    const history = await runtime.history('cart-1');
    expect(history.map((h) => [h.revision, h.eventId, h.outcome])).toEqual([[1, null, 'started'], [2, 'e1', 'applied']]);
    const second = await runtime.startOrSend('tally', 'cart-1', { label: 'ignored' }, { type: 'ADD', n: 3 }, { eventId: 'e2' });
    expect(second).toMatchObject({ created: false, status: 'applied', job: { context: { label: 'a', total: 5 } } });
    const repeat = await runtime.startOrSend('tally', 'cart-1', { label: 'a' }, { type: 'ADD', n: 2 }, { eventId: 'e1' });
    expect(repeat).toMatchObject({ created: false, duplicate: true, revision: 2 });
    await expect(runtime.startOrSend('tally', 'cart-1', { label: 'a' }, { type: 'ADD', n: 9 }, { eventId: 'e1' })).rejects.toThrow(IdempotencyConflictError);
    await expect(runtime.startOrSend('till', 'cart-1', {}, { type: 'BUMP' })).rejects.toThrow(/a job of machine tally, not till/);
    expect((await store.getJob('cart-1'))?.revision).toBe(3);
  });

  it('refuses bad input, a bad event or a bad id before writing anything', async () => {
    const { runtime } = await openRuntime(res, [tally]);
    await expect(runtime.startOrSend('tally', 'c2', { label: 1 }, { type: 'ADD', n: 1 })).rejects.toThrow(ValidationError);
    await expect(runtime.startOrSend('tally', 'c2', { label: 'x' }, { type: 'ADD', n: 'one' })).rejects.toThrow(ValidationError);
    await expect(runtime.startOrSend('tally', 'c~2', { label: 'x' }, { type: 'ADD', n: 1 })).rejects.toThrow(/must not contain "~"/);
    await expect(runtime.startOrSend('tally', 'c2', { label: 'x' }, { type: 'ADD', n: 1 }, { eventID: 'x' } as never)).rejects.toThrow('startOrSend: unknown option eventID');
    expect(await runtime.list({})).toEqual([]);
  });

  it('checks the input only when it creates the job: an existing job keeps its own, whatever input comes', async () => {
    const { runtime } = await openRuntime(res, [tally]);
    await runtime.startOrSend('tally', 'c5', { label: 'first' }, { type: 'ADD', n: 1 });
    // As the CLI sends it without --input ({}), and as a caller that has no input at hand.
    for (const input of [{}, undefined]) {
      await expect(runtime.startOrSend('tally', 'c5', input as never, { type: 'ADD', n: 1 })).resolves.toMatchObject({ created: false, status: 'applied' });
    }
    expect((await runtime.get('c5')).context).toMatchObject({ label: 'first', total: 3 });
    // A job it would create still needs valid input, and nothing is written without it.
    await expect(runtime.startOrSend('tally', 'c6', {}, { type: 'ADD', n: 1 })).rejects.toThrow(ValidationError);
    await expect(runtime.get('c6')).rejects.toThrow(/No job/);
  });

  it('a finished job refuses a new event but returns a repeated one', async () => {
    const { runtime } = await openRuntime(res, [tally]);
    await runtime.startOrSend('tally', 'c3', { label: 'x' }, { type: 'CLOSE' }, { eventId: 'close' });
    await expect(runtime.startOrSend('tally', 'c3', { label: 'x' }, { type: 'ADD', n: 1 })).rejects.toThrow(JobTerminalError);
    await expect(runtime.startOrSend('tally', 'c3', { label: 'x' }, { type: 'CLOSE' }, { eventId: 'close' })).resolves.toMatchObject({ duplicate: true, status: 'applied' });
  });

  it('concurrent callers in one process converge', async () => {
    const { runtime } = await openRuntime(res, [tally]);
    const calls = Array.from({ length: 12 }, (_, i) => runtime.startOrSend('tally', 'c4', { label: 'x' }, { type: 'ADD', n: (i % 4) + 1 }, { eventId: `e${i % 4}` }));
    const results = await Promise.all(calls);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect((await runtime.get('c4')).context).toMatchObject({ total: 10, adds: 4 });
  });

  it('raced from several real processes on one SQLite file: one job, each event id applied once', async () => {
    const path = res.dbPath();
    (await SqliteStore.open(path)).close(); // the schema, once, before the race
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const procs = ['p1', 'p2', 'p3', 'p4'].map((name) => new ChildScript(CHILD, [path, name, 'raced', ids.join(',')]));
    children.push(...procs);
    await Promise.all(procs.map((p) => p.waitFor((l) => l.type === 'ready')));
    for (const p of procs) p.proc.stdin.write('go\n');
    await Promise.all(procs.map((p) => p.waitFor((l) => l.type === 'done')));
    const sent = procs.flatMap((p) => p.lines.filter((l) => l.type === 'sent'));
    expect(sent).toHaveLength(20);
    expect(sent.filter((l) => l['created'] === true)).toHaveLength(1);
    expect(sent.every((l) => l['status'] === 'applied' || l['status'] === 'pending')).toBe(true);
    const { runtime } = await openRuntime(res, [tally], { path });
    const job = await runtime.get('raced');
    expect(job.context).toMatchObject({ total: 1 + 2 + 3 + 4 + 5, adds: 5 });
    const applied = (await runtime.history('raced')).filter((h) => h.outcome === 'applied').map((h) => h.eventId);
    expect(applied.sort()).toEqual(ids);
    expect(await runtime.list({ machineId: 'tally' })).toHaveLength(1);
  });
});
