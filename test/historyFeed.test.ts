/**
 * `Runtime.historySince` over `JobStore.historySince` (both stores): every job's history rows in
 * one growing order, paged by a cursor, filtered by owner, machine, job and outcome; a seq is
 * never given twice (not even after the row holding the highest one is purged), and a
 * filter that matches little still moves the cursor on. The all-jobs event stream of
 * `spool serve` reads it (test/server.streams.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { setup } from 'xstate';
import { MemoryStore } from '../persistence/memory/index.ts';
import { ValidationError, type FeedRecord, type Runtime } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';
import { ON_POSTGRES } from './helpers/stores.ts';

const ping = setup({}).createMachine({
  id: 'ping',
  initial: 'on',
  states: { on: { on: { PING: { actions: () => undefined }, STOP: 'done' } }, done: { type: 'final' } },
});
const pong = setup({}).createMachine({ id: 'pong', initial: 'on', states: { on: { on: { PING: { actions: () => undefined } } } } });

const res = new Resources();
afterEach(() => res.dispose());

/** Read the whole feed page by page, `limit` at a time. */
async function readAll(runtime: Runtime, filter: Parameters<Runtime['historySince']>[1] = {}, after = 0): Promise<FeedRecord[]> {
  const out: FeedRecord[] = [];
  for (;;) {
    const page = await runtime.historySince(after, { limit: 2, ...filter });
    out.push(...page.records);
    if (page.next === after) return out;
    after = page.next;
  }
}

// On the postgres project the 'sqlite' store opened at a path is a PostgresStore (helpers/stores.ts).
describe.each(['sqlite', 'memory'] as const)(`historySince (%s${ON_POSTGRES ? ' path: postgres' : ''})`, (kind) => {
  async function open(path: string | undefined, owner: string | null = null): Promise<Runtime> {
    const store = kind === 'sqlite' ? await res.sqlite(path!) : new MemoryStore();
    return res.runtime({ store, machines: [ping, pong], owner });
  }

  it('gives every history row of every job a seq that grows in commit order, read page by page without gap or repeat', async () => {
    const runtime = await open(kind === 'sqlite' ? res.dbPath() : undefined);
    const a = await runtime.start('ping', {});
    const b = await runtime.start('pong', {});
    await runtime.send(a.id, { type: 'PING' });
    await runtime.send(b.id, { type: 'PING' });
    await runtime.send(a.id, { type: 'NOPE' }).catch(() => undefined); // refused: no row
    await runtime.send(a.id, { type: 'STOP' });
    const all = await readAll(runtime);
    expect(all.map((r) => [r.jobId, r.revision, r.outcome])).toEqual([
      [a.id, 1, 'started'],
      [b.id, 1, 'started'],
      [a.id, 2, 'applied'],
      [b.id, 2, 'applied'],
      [a.id, 3, 'applied'],
    ]);
    const seqs = all.map((r) => r.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).toBe(seqs.length);
    // Each row is the job's own history row, with its machine.
    expect(all.filter((r) => r.jobId === a.id).map(({ seq: _s, machineId: _m, ...rest }) => rest)).toEqual(await runtime.history(a.id));
    expect(new Set(all.map((r) => `${r.jobId}:${r.machineId}`))).toEqual(new Set([`${a.id}:ping`, `${b.id}:pong`]));
    // Resuming after any row gives exactly the rows after it.
    expect((await readAll(runtime, {}, seqs[2]!)).map((r) => r.seq)).toEqual(seqs.slice(3));
  });

  it('filters by machine, job and outcome, and moves the cursor past rows it left out', async () => {
    const runtime = await open(kind === 'sqlite' ? res.dbPath() : undefined);
    const a = await runtime.start('ping', {});
    const b = await runtime.start('pong', {});
    for (let i = 0; i < 3; i++) await runtime.send(b.id, { type: 'PING' });
    expect((await readAll(runtime, { machineId: 'ping' })).map((r) => r.jobId)).toEqual([a.id]);
    expect((await readAll(runtime, { jobId: b.id })).map((r) => r.revision)).toEqual([1, 2, 3, 4]);
    expect((await readAll(runtime, { outcomes: ['started'] })).map((r) => r.jobId)).toEqual([a.id, b.id]);
    // Nothing matches after a's start: the page is empty but `next` is past every row looked at.
    const first = (await runtime.historySince(0, { machineId: 'ping', limit: 1 })).records[0]!;
    const page = await runtime.historySince(first.seq, { machineId: 'ping', limit: 10 });
    expect(page.records).toEqual([]);
    expect(page.next).toBe((await readAll(runtime)).at(-1)!.seq);
  });

  it("shows only this owner's jobs", async () => {
    const path = kind === 'sqlite' ? res.dbPath() : undefined;
    const store = kind === 'sqlite' ? await res.sqlite(path!) : new MemoryStore();
    const acme = await res.runtime({ store, machines: [ping], owner: 'acme' });
    const other = await res.runtime({ store, machines: [ping], owner: 'other', recover: false });
    const mine = await acme.start('ping', {});
    await other.start('ping', {});
    expect((await readAll(acme)).map((r) => r.jobId)).toEqual([mine.id]);
  });

  it('never gives a seq twice, even after the job holding the highest one is purged', async () => {
    const runtime = await open(kind === 'sqlite' ? res.dbPath() : undefined);
    const a = await runtime.start('ping', {});
    await runtime.send(a.id, { type: 'STOP' });
    const before = (await readAll(runtime)).at(-1)!.seq;
    await runtime.purge(a.id);
    expect(await readAll(runtime)).toEqual([]);
    const b = await runtime.start('ping', {});
    const after = await readAll(runtime);
    expect(after.map((r) => r.jobId)).toEqual([b.id]);
    expect(after[0]!.seq).toBeGreaterThan(before);
  });

  it('refuses a bad cursor or limit', async () => {
    const runtime = await open(kind === 'sqlite' ? res.dbPath() : undefined);
    await expect(runtime.historySince(-1)).rejects.toBeInstanceOf(ValidationError);
    await expect(runtime.historySince(0, { limit: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(runtime.historySince(0, { bogus: 1 } as never)).rejects.toBeInstanceOf(ValidationError);
  });
});
