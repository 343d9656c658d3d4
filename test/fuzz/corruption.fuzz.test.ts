/**
 * Fuzzing the stored data (fast-check): rows corrupted by hand through a raw better-sqlite3
 * connection, and database files damaged on disk (truncated, bytes overwritten).
 *
 * Corrupted rows: the runtime must still open (recovery holds the damaged job back, the others carry
 * on); reading, sending, cancelling, ticking and processing must each succeed or refuse with a typed
 * SpoolError (the job quarantined or held back with a visible reason), never throw untyped, and a
 * healthy job in the same file must keep working.
 *
 * Damaged files: `SqliteStore.open` and every call after it (the store's reads, `doctor`, the
 * runtime's API) must succeed or refuse with a typed SpoolError (never a driver's error), never
 * hang or crash the process, and a refused
 * open must leave the file's bytes as they were. These run in a child process (damagedFileChild.ts)
 * so that a hang or a native crash is seen and reported instead of taking the test runner down.
 *
 * The template file holds: `healthy` (crash-tally, never touched, one event pending), `healthy-timer`
 * (approval-flow, never touched, its timers due within 2 s), `tally` (crash-tally with applied events
 * and one accepted, still pending), `ticker` (crash-ticker with scheduled timers), `flaky`
 * (crash-flaky with a pending activity), `approval` (approval-flow with its two timers).
 */
import { copyFileSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalFlow } from '../../machines/index.ts';
import { SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import { createRuntime, type Runtime } from '../../src/index.ts';
import { VirtualClock } from '../../src/testing/index.ts';
import { flaky, tally, ticker } from '../crash/machines.ts';
import { T0 } from '../helpers/durable.ts';
import { ChildScript } from '../helpers/proc.ts';
import { Resources } from '../helpers/resources.ts';
import { describeThrown, isSpoolRefusal } from './refusal.ts';

const DAMAGE_CHILD = fileURLToPath(new URL('./damagedFileChild.ts', import.meta.url));

const MACHINES = [tally, ticker, flaky, approvalFlow];
const VICTIMS = ['tally', 'ticker', 'flaky', 'approval'] as const;
const EVENTS: Record<string, Record<string, unknown>> = {
  healthy: { type: 'INC' },
  tally: { type: 'ADD', n: 2 },
  ticker: { type: 'SNOOZE' },
  flaky: { type: 'CANCEL' },
  approval: { type: 'APPROVE', by: 'fuzz' },
};
const res = new Resources();
let template: string;

beforeAll(async () => {
  template = res.dbPath('template.db');
  const clock = new VirtualClock(T0);
  const rt = await createRuntime({ store: await SqliteStore.open(template, { clock }), machines: MACHINES, clock, runEffects: false });
  await rt.start('crash-tally', {}, { jobId: 'healthy' });
  await rt.send('healthy', { type: 'INC' }, { eventId: 'h1' });
  await rt.start('crash-tally', {}, { jobId: 'tally' });
  await rt.send('tally', { type: 'INC' }, { eventId: 'e1' });
  await rt.send('tally', { type: 'ADD', n: 5 }, { eventId: 'e2' });
  await rt.start('crash-ticker', { startMs: 1000, pingMs: 2000, pongMs: 3000, endMs: 4000 }, { jobId: 'ticker' });
  await rt.send('ticker', { type: 'SKIP' }, { eventId: 't1' });
  await rt.start('crash-flaky', { deadlineMs: 60_000 }, { jobId: 'flaky' });
  await rt.start('approval-flow', { subject: 'fuzz', remindAfterMs: 1000, deadlineMs: 5000 }, { jobId: 'approval' });
  await rt.start('approval-flow', { subject: 'healthy', remindAfterMs: 1000, deadlineMs: 2000 }, { jobId: 'healthy-timer' });
  await rt.close();
  // Accepted events left pending (a client-only runtime accepts, never applies): one for a victim, one for the healthy job.
  const client = await createRuntime({ store: await SqliteStore.open(template, { clock }), machines: MACHINES, clock, processEvents: false });
  await client.send('tally', { type: 'INC' }, { eventId: 'e3' });
  await client.send('healthy', { type: 'INC' }, { eventId: 'h2' });
  await client.close();
});
afterAll(() => res.dispose());

/** Call it; a throw must be a typed refusal. Returns what it resolved with, or undefined. */
async function clean<T>(what: string, call: () => Promise<T>): Promise<T | undefined> {
  try {
    return await call();
  } catch (error) {
    expect(isSpoolRefusal(error), `${what}: ${describeThrown(error)}`).toBe(true);
    return undefined;
  }
}

/** Open the corrupted copy and use every job through the API; the healthy job must keep working. */
async function exercise(path: string): Promise<void> {
  const clock = new VirtualClock(T0 + 1000);
  const store = res.track(await SqliteStore.open(path, { clock }));
  // One job's bad row must not stop the runtime from opening: that job is held back, the others carry on.
  let runtime: Runtime;
  try {
    runtime = res.track(await createRuntime({ store, machines: MACHINES, clock }));
  } catch (error) {
    await store.close();
    throw new Error(`createRuntime (recovery) refused the whole file: ${describeThrown(error)}`);
  }
  // Time first (due timers fire, due activities start), then every job through the API, then time again.
  clock.advance(3_600_000);
  await clean('tick', () => runtime.tick());
  await clean('idle', () => runtime.idle());
  for (const id of ['healthy', ...VICTIMS]) {
    await clean(`get ${id}`, () => runtime.get(id));
    await clean(`details ${id}`, () => runtime.details(id));
    await clean(`list`, () => runtime.list());
    await clean(`send to ${id}`, () => runtime.send(id, EVENTS[id], { eventId: `fuzz-${id}` }));
  }
  await clean('cancel flaky', () => runtime.cancel('flaky', 'fuzz'));
  clock.advance(3_600_000);
  await clean('tick again', () => runtime.tick());
  await clean('idle again', () => runtime.idle());
  await clean('processPending', () => runtime.processPending());
  // Whatever happened to the others, the healthy jobs carry on: their pending event applied, their timers fired.
  expect((await runtime.events('healthy')).find((e) => e.eventId === 'h2')?.status).toBe('applied');
  expect((await runtime.get('healthy-timer')).value).toBe('expired');
  expect(await runtime.send('healthy', { type: 'INC' }, { eventId: 'fuzz-healthy-2' })).toMatchObject({ status: 'applied' });
  await runtime.close();
}

const garbage = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', 'null', '[]', '{}', '42', '"text"', '{"value":', '{"value":"nowhere"}', '{"value":42,"status":"active"}', '{"type":null}', '{"type":42}', '\u0000'),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
);

type Db = Database.Database;
type Corruption = { describe: string; apply: (db: Db) => void };

/** A corruption that prints as its description in counterexamples. */
function corruption(describe: string, apply: (db: Db) => void): Corruption {
  return { describe, apply, [fc.toStringMethod]: () => describe } as Corruption;
}

function corruptCopy(corruptions: Corruption[]): string {
  const path = join(res.tempDir(), 'corrupt.db');
  copyFileSync(template, path);
  const db = res.raw(path);
  for (const c of corruptions) {
    try {
      c.apply(db);
    } catch {
      // A CHECK or type constraint refused this hand edit: the schema protects that column.
    }
  }
  db.close();
  return path;
}

const victim = fc.constantFrom(...VICTIMS);

const jobRow: fc.Arbitrary<Corruption> = fc.oneof(
  fc.record({ id: victim, column: fc.constantFrom('snapshot', 'state_value', 'context', 'input'), text: garbage }).map(({ id, column, text }) =>
    corruption(`jobs.${column} of ${id} := ${JSON.stringify(text)}`, (db) => db.prepare(`UPDATE jobs SET ${column} = ? WHERE id = ?`).run(text, id)),
  ),
  fc
    .record({ id: victim, path: fc.constantFrom('$.context', '$.value', '$.status', '$.children', '$.context.count', '$.historyValue'), value: fc.jsonValue({ maxDepth: 1 }) })
    .map(({ id, path, value }) =>
      corruption(`jobs.snapshot ${path} of ${id} := ${JSON.stringify(value)}`, (db) =>
        db.prepare('UPDATE jobs SET snapshot = json_set(snapshot, ?, json(?)) WHERE id = ?').run(path, JSON.stringify(value), id),
      ),
    ),
  fc.record({ id: victim, column: fc.constantFrom('machine_id', 'machine_version'), text: fc.string({ minLength: 1, maxLength: 10 }) }).map(({ id, column, text }) =>
    corruption(`jobs.${column} of ${id} := ${JSON.stringify(text)}`, (db) => db.prepare(`UPDATE jobs SET ${column} = ? WHERE id = ?`).run(text, id)),
  ),
  fc.record({ id: victim, status: fc.constantFrom('done', 'error', 'stopped') }).map(({ id, status }) =>
    corruption(`jobs.status of ${id} := ${status}`, (db) => db.prepare('UPDATE jobs SET status = ? WHERE id = ?').run(status, id)),
  ),
  fc.record({ id: victim, revision: fc.integer({ min: 1, max: 1000 }) }).map(({ id, revision }) =>
    corruption(`jobs.revision of ${id} := ${revision}`, (db) => db.prepare('UPDATE jobs SET revision = ? WHERE id = ?').run(revision, id)),
  ),
);

const historyRow: fc.Arbitrary<Corruption> = fc.record({ id: victim, column: fc.constantFrom('payload', 'from_value', 'to_value', 'error'), text: garbage }).map(({ id, column, text }) =>
  corruption(`transitions.${column} of ${id} := ${JSON.stringify(text)}`, (db) => db.prepare(`UPDATE transitions SET ${column} = ? WHERE job_id = ?`).run(text, id)),
);

const inboxRow: fc.Arbitrary<Corruption> = fc.record({ column: fc.constantFrom('payload', 'type', 'error'), text: garbage }).map(({ column, text }) =>
  corruption(`inbox.${column} of the pending event of tally := ${JSON.stringify(text)}`, (db) =>
    db.prepare(`UPDATE inbox SET ${column} = ? WHERE job_id = 'tally' AND event_id = 'e3'`).run(text),
  ),
);

const timerRow: fc.Arbitrary<Corruption> = fc.record({ id: fc.constantFrom('ticker', 'approval'), text: garbage }).map(({ id, text }) =>
  corruption(`timers.event of ${id} := ${JSON.stringify(text)}`, (db) => db.prepare('UPDATE timers SET event = ? WHERE job_id = ?').run(text, id)),
);

const effectRow: fc.Arbitrary<Corruption> = fc.oneof(
  garbage.map((text) => corruption(`effects.input of flaky := ${JSON.stringify(text)}`, (db) => db.prepare("UPDATE effects SET input = ? WHERE job_id = 'flaky'").run(text))),
  fc
    .record({ status: fc.constantFrom('pending', 'running', 'waiting', 'backoff', 'succeeded', 'failed', 'cancelled'), attempt: fc.integer({ min: 0, max: 10 }), max: fc.integer({ min: 0, max: 3 }) })
    .map(({ status, attempt, max }) =>
      corruption(`effects of flaky := status ${status}, attempt ${attempt}, max_attempts ${max}`, (db) =>
        db.prepare("UPDATE effects SET status = ?, attempt = ?, max_attempts = ?, claimed_by = 'elsewhere/1/x', claim_expires_at = 0 WHERE job_id = 'flaky'").run(status, attempt, max),
      ),
    ),
);

function property(arb: fc.Arbitrary<Corruption>, numRuns: number, examples: Corruption[][] = []) {
  return fc.assert(
    fc.asyncProperty(fc.array(arb, { minLength: 1, maxLength: 3 }), async (corruptions) => {
      await exercise(corruptCopy(corruptions));
    }),
    { numRuns, examples: examples.map((e) => [e] as [Corruption[]]) },
  );
}

/** Cases found by longer runs, always tried first. */
const snapshotStatusObject = corruption('jobs.snapshot $.status of tally := {"toString":null}', (db) =>
  db.prepare(`UPDATE jobs SET snapshot = json_set(snapshot, '$.status', json('{"toString":null}')) WHERE id = 'tally'`).run(),
);

/** The job's revision put back behind its history: the next commit's history row collides. */
const revisionBehindHistory = corruption('jobs.revision of tally := 1', (db) => db.prepare("UPDATE jobs SET revision = 1 WHERE id = 'tally'").run());

describe('corrupted rows (hand-edited through a raw connection)', () => {
  it('jobs rows (snapshot, state, context, input, machine, status, revision): typed refusals, the others carry on', async () => {
    await property(jobRow, 80, [[snapshotStatusObject], [revisionBehindHistory]]);
    // 80 cases, each a fresh file and runtime (and the store's quick_check before its first write):
    // about 35 s alone, more with three files at once on two cores.
  }, 180_000);

  it('history rows: typed refusals, the others carry on', async () => {
    await property(historyRow, 30);
  });

  it('a pending inbox row: typed refusals, the others carry on', async () => {
    await property(inboxRow, 40);
  });

  it('timer rows: typed refusals, the others carry on', async () => {
    await property(timerRow, 40);
  });

  it('effect rows: typed refusals, the others carry on', async () => {
    await property(effectRow, 40);
  });
});

function damaged(describe: string, apply: (path: string) => void): { describe: string; apply: (path: string) => void } {
  return { describe, apply, [fc.toStringMethod]: () => describe } as { describe: string; apply: (path: string) => void };
}

/**
 * The damaged-file cases run in a child process (damagedFileChild.ts): a damaged file can make the
 * engine spin in a loop that starves the event loop, or crash the process natively. Each case waits
 * for the child's result line, with a limit after which the child is killed and the case fails.
 */
class DamageChild {
  #child: ChildScript | undefined;

  async #ready(): Promise<ChildScript> {
    if (this.#child?.running) return this.#child;
    const child = new ChildScript(DAMAGE_CHILD, []);
    child.proc.stdin.on('error', () => undefined);
    await child.waitFor((l) => l.type === 'ready');
    this.#child = child;
    return child;
  }

  async run(path: string, limitMs = 15_000): Promise<{ opened: boolean | null; problems: string[] }> {
    const child = await this.#ready();
    child.proc.stdin.write(`${JSON.stringify({ path })}\n`);
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<'limit'>((resolve) => (timer = setTimeout(() => resolve('limit'), limitMs)));
    const result = await Promise.race([child.waitFor((l) => l.type === 'result' && l['path'] === path).catch((error: Error) => error), limit]);
    clearTimeout(timer);
    if (result === 'limit') {
      await child.kill('SIGKILL');
      return { opened: null, problems: [`no answer within ${limitMs} ms: the process was busy (a loop that never yields) and was killed`] };
    }
    if (result instanceof Error) return { opened: null, problems: [`the process died: ${result.message}`] };
    return { opened: result['opened'] as boolean | null, problems: result['problems'] as string[] };
  }

  async stop(): Promise<void> {
    if (this.#child) await this.#child.kill('SIGKILL');
  }
}

describe('damaged database files', () => {
  const child = new DamageChild();
  afterAll(() => child.stop());

  it('truncated or overwritten: opening and every call after it succeed or refuse cleanly (never hang, never crash); a refused open leaves the file as it was', async () => {
    const size = statSync(template).size;
    const damage = fc.oneof(
      fc.integer({ min: 0, max: size - 1 }).map((length) => damaged(`truncated to ${length} of ${size} bytes`, (p) => truncateSync(p, length))),
      fc.record({ at: fc.integer({ min: 0, max: size - 1 }), bytes: fc.uint8Array({ minLength: 1, maxLength: 64 }) }).map(({ at, bytes }) =>
        damaged(`${bytes.length} bytes overwritten at ${at}: ${Buffer.from(bytes).toString('hex')}`, (p) => {
          const buf = readFileSync(p);
          buf.set(bytes.subarray(0, Math.max(0, size - at)), at);
          writeFileSync(p, buf);
        }),
      ),
    );
    await fc.assert(
      fc.asyncProperty(damage, async (d) => {
        const path = join(res.tempDir(), 'damaged.db');
        copyFileSync(template, path);
        d.apply(path);
        const { problems } = await child.run(path);
        expect(problems.join('\n'), d.describe).toBe('');
      }),
      { numRuns: 200 },
    );
  });

  it('an index that lists rows its table no longer matches (timers_due names cancelled timers): tick refuses or skips them, never spins', async () => {
    const path = join(res.tempDir(), 'stale-index.db');
    copyFileSync(template, path);
    staleTimersIndex(path);
    // The damage: through the index the timers look due, the rows themselves say otherwise.
    const check = res.raw(path, { readonly: true });
    const count = (sql: string) => (check.prepare(sql).get() as { n: number }).n;
    expect(count("SELECT count(*) AS n FROM timers INDEXED BY timers_due WHERE status = 'scheduled' AND due_at < 9e15")).toBeGreaterThan(0);
    expect(count("SELECT count(*) AS n FROM timers NOT INDEXED WHERE status = 'scheduled'")).toBe(0);
    check.close();
    expect((await child.run(path, 10_000)).problems.join('\n')).toBe('');
  });
});

/**
 * Damage the `timers_due` index the way a torn write can: it still lists timers whose rows say
 * `cancelled`. (The index is taken out of the schema, the rows are changed without it being
 * maintained, and its schema entry is put back.)
 */
function staleTimersIndex(path: string): void {
  let db = res.raw(path);
  const entry = db.prepare("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master WHERE name = 'timers_due'").get() as Record<string, unknown>;
  db.unsafeMode(true); // better-sqlite3 runs SQLite in defensive mode, which forbids writing the schema
  db.pragma('writable_schema = ON');
  db.prepare("DELETE FROM sqlite_master WHERE name = 'timers_due'").run();
  db.close();
  db = res.raw(path);
  db.prepare("UPDATE timers SET status = 'cancelled' WHERE status = 'scheduled'").run();
  db.unsafeMode(true);
  db.pragma('writable_schema = ON');
  db.prepare('INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES (@type, @name, @tbl_name, @rootpage, @sql)').run(entry);
  db.close();
}
