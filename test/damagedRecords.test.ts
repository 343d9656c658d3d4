/**
 * A damaged row is one job's problem: a single JSON column set to invalid JSON, in each table that
 * holds JSON. `stats` and `list` keep working, the read that meets the row says which table and
 * column, the job is quarantined with "damaged record: <table>.<column>" (listed with the
 * quarantined jobs, never as stuck), the other jobs go on, and `spool doctor` finds it and repairs
 * it (quarantine, REINDEX) without deleting history.
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalFlow } from '../machines/index.ts';
import { doctor } from '../persistence/drivers/better-sqlite3/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { createRuntime, type JobStore } from '../src/internal.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { VirtualClock } from '../src/testing/index.ts';
import { flaky, tally } from './crash/machines.ts';
import { T0 } from './helpers/durable.ts';
import { Resources } from './helpers/resources.ts';

const MACHINES = [tally, flaky, approvalFlow];
const res = new Resources();
let template: string;

beforeAll(async () => {
  template = res.dbPath('template.db');
  const clock = new VirtualClock(T0);
  const store = await SqliteStore.open(template, { clock });
  const rt = await createRuntime({ store, machines: MACHINES, clock, runEffects: false });
  for (const id of ['healthy', 'tally']) {
    await rt.start('crash-tally', {}, { jobId: id });
    await rt.send(id, { type: 'INC' }, { eventId: `${id}-1` });
  }
  await rt.start('crash-flaky', { deadlineMs: 60_000 }, { jobId: 'flaky' });
  await rt.start('approval-flow', { subject: 'x', remindAfterMs: 1000, deadlineMs: 5000 }, { jobId: 'approval' });
  // Attempts that failed with a retry due: the first archived (effect_attempts.error) by the claim
  // of the second, which is on its effect row; and an asset (assets.meta).
  const [effect] = await store.listEffects('flaky');
  for (const [attempt, at] of [[1, T0], [2, T0 + 1_000]] as const) {
    expect(await store.claimEffect(effect!.id, 'r1', at, at + 60_000)).toMatchObject({ attempt });
    await store.finishAttempt(effect!.id, attempt, { kind: 'failed', error: { name: 'Error', message: 'boom' }, retryAt: attempt === 1 ? at : T0 + 3_600_000, event: null }, at);
  }
  await store.releaseLeases('r1', 'all');
  await store.attachAsset({ jobId: 'tally', key: 'k', type: 'text/plain', uri: 'file:///x', size: 1, meta: { a: 1 }, effectId: null, attempt: null, createdAt: T0 });
  await rt.close();
  // An accepted event left pending (inbox.payload): a client-only runtime accepts, never applies.
  const client = await createRuntime({ store: await SqliteStore.open(template, { clock }), machines: MACHINES, clock, processEvents: false });
  await client.send('tally', { type: 'INC' }, { eventId: 'tally-2' });
  await client.close();
});
afterAll(() => res.dispose());

/** Each JSON column, the job whose row is damaged, and the store read that meets it. */
const CASES: { table: string; column: string; job: string; where: string; read: (s: JobStore, job: string) => Promise<unknown> }[] = [
  { table: 'jobs', column: 'state_value', job: 'tally', where: 'id', read: (s, j) => s.getJob(j) },
  { table: 'jobs', column: 'context', job: 'tally', where: 'id', read: (s, j) => s.getJob(j) },
  { table: 'jobs', column: 'input', job: 'tally', where: 'id', read: (s, j) => s.listJobs({}).then((l) => l.find((x) => x.id === j)) },
  { table: 'transitions', column: 'payload', job: 'tally', where: 'job_id', read: (s, j) => s.history(j) },
  { table: 'transitions', column: 'to_value', job: 'tally', where: 'job_id', read: (s, j) => s.history(j) },
  { table: 'inbox', column: 'payload', job: 'tally', where: 'job_id', read: (s, j) => s.listEvents(j) },
  { table: 'effects', column: 'input', job: 'flaky', where: 'job_id', read: (s, j) => s.listEffects(j) },
  { table: 'effect_attempts', column: 'error', job: 'flaky', where: "effect_id IN (SELECT id FROM effects WHERE job_id = @job) AND 1", read: (s, j) => s.listAttempts(j) },
  { table: 'timers', column: 'event', job: 'approval', where: 'job_id', read: (s, j) => s.listTimers(j) },
  { table: 'assets', column: 'meta', job: 'tally', where: 'job_id', read: (s, j) => s.listAssets(j) },
];

/** A copy of the template with one column of one job's rows set to text that is not JSON. */
function damagedCopy(c: (typeof CASES)[number]): string {
  const path = join(res.tempDir(), 'damaged.db');
  copyFileSync(template, path);
  const db = res.raw(path);
  const where = c.where.includes('@job') ? c.where.replace(/ AND 1$/, '') : `${c.where} = @job`;
  const changed = db.prepare(`UPDATE ${c.table} SET ${c.column} = '{"not json' WHERE ${where}`).run({ job: c.job }).changes;
  expect(changed, `${c.table}.${c.column} rows of ${c.job}`).toBeGreaterThan(0);
  db.close();
  return path;
}

describe.each(CASES)('$table.$column set to invalid JSON for job $job', (c) => {
  const reason = `damaged record: ${c.table}.${c.column}`;

  it('stats and list keep working; the read names the table and column; the job alone is quarantined, never stuck', async () => {
    const path = damagedCopy(c);
    const store = await res.sqlite(path);
    const stats = await store.stats({ now: T0 });
    expect(stats.jobs.reduce((n, j) => n + j.count, 0)).toBe(4);
    expect((await store.listJobs({})).map((j) => j.id)).toEqual(['approval', 'flaky', 'healthy', 'tally']);
    const read = await c.read(store, c.job);
    expect(JSON.stringify(read)).toContain(reason);
    const quarantined = await store.listJobs({ quarantined: true });
    expect(quarantined.map((j) => j.id)).toEqual([c.job]);
    expect(quarantined[0]!.quarantine).toContain(reason);
    expect((await store.listJobs({ stuck: true })).map((j) => j.id)).not.toContain(c.job);
    expect((await store.stats({ now: T0 })).quarantined).toBe(1);
    // The other jobs go on.
    const clock = new VirtualClock(T0 + 1000);
    const runtime = await res.runtime({ store, machines: MACHINES, clock, runEffects: false });
    expect(await runtime.send('healthy', { type: 'INC' }, { eventId: 'after' })).toMatchObject({ status: 'applied' });
  });

  it('doctor finds it (exit 1), --repair quarantines the job and rebuilds the indexes, and history is kept', async () => {
    const path = damagedCopy(c);
    const history = (res.raw(path).prepare('SELECT count(*) FROM transitions').pluck().get() as number);
    const found = doctor(path);
    expect(found.ok).toBe(false);
    expect(found.findings).toContainEqual(expect.objectContaining({ kind: 'record', table: c.table, column: c.column, jobId: c.job }));
    expect(found.findings.every((f) => f.jobId === c.job)).toBe(true);
    expect(found.repaired).toBeNull();
    const repaired = doctor(path, { repair: true });
    expect(repaired.repaired).toEqual({ quarantined: [c.job], reindexed: true });
    const db = res.raw(path, { readonly: true });
    expect(db.prepare('SELECT quarantine FROM jobs WHERE id = ?').pluck().get(c.job)).toContain(reason);
    expect(db.prepare("SELECT count(*) FROM jobs WHERE quarantine IS NOT NULL").pluck().get()).toBe(1);
    expect(db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBe(history);
    db.close();
    // Repaired once: a second repair finds the same damage (doctor deletes nothing) and quarantines no one new.
    expect(doctor(path, { repair: true }).repaired).toEqual({ quarantined: [], reindexed: true });
  });
});

// The runtime holds a job back while its record is damaged (`JobRecord.corruption`: the jobs
// table's own columns). A damaged row of another table is recorded as the job's quarantine by the
// store that read it, and recovery keeps it (below).
describe.each(CASES.filter((c) => c.table === 'jobs'))('the runtime and jobs.$column damaged', (c) => {
  it('refuses a send to that job as quarantined, lists it so, and the others go on', async () => {
    const store = await res.sqlite(damagedCopy(c));
    const runtime = await res.runtime({ store, machines: MACHINES, clock: new VirtualClock(T0 + 1000), runEffects: false });
    // The words say what happened: damaged rows mean doctor or restore, not "register the version".
    await expect(runtime.send(c.job, { type: 'INC' })).rejects.toMatchObject({ code: 'SPOOL_QUARANTINED', message: expect.stringContaining('spool doctor') });
    expect((await runtime.list({ quarantined: true })).map((j) => j.id)).toEqual([c.job]);
    expect((await runtime.get(c.job)).quarantine).toContain(`damaged record: jobs.${c.column}`);
    expect(await runtime.send('healthy', { type: 'INC' }, { eventId: 'after' })).toMatchObject({ status: 'applied' });
  });
});

describe.each(CASES.filter((c) => c.table !== 'jobs'))('recovery and $table.$column damaged', (c) => {
  it('keeps the quarantine a read recorded: the job stays held, the others go on', async () => {
    const path = damagedCopy(c);
    const reader = await res.sqlite(path);
    await c.read(reader, c.job); // the read that meets the row records the job's quarantine
    await reader.close();
    const runtime = await res.runtime({ store: await res.sqlite(path), machines: MACHINES, clock: new VirtualClock(T0 + 1000), runEffects: false });
    expect((await runtime.get(c.job)).quarantine).toContain(`damaged record: ${c.table}.${c.column}`);
    expect((await runtime.list({ quarantined: true })).map((j) => j.id)).toEqual([c.job]);
    expect(await runtime.send('healthy', { type: 'INC' }, { eventId: 'after' })).toMatchObject({ status: 'applied' });
  });
});

describe('spool doctor (the CLI)', () => {
  const run = (args: string[]) => runCli(args, process.cwd());

  it('a healthy file: exit 0, "nothing"; JSON with --json', async () => {
    const path = join(res.tempDir(), 'ok.db');
    copyFileSync(template, path);
    const human = await run(['--db', path, 'doctor']);
    expect(human).toMatchObject({ code: 0, stderr: '' });
    expect(human.stdout).toMatch(/found\s+nothing: the file is healthy/);
    const json = await run(['--db', path, 'doctor', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, check: 'integrity_check', jobs: 4, findings: [] });
  });

  it('a damaged row: exit 1 with the table, column and job; --repair says what it did', async () => {
    const path = damagedCopy(CASES[3]!);
    const human = await run(['--db', path, 'doctor']);
    expect(human.code).toBe(1);
    expect(human.stdout).toContain('transitions.payload');
    expect(human.stdout).toContain('doctor --repair');
    const repaired = await run(['--db', path, 'doctor', '--repair', '--json']);
    // Every problem left belongs to a job held back for damage: nothing more to do but purge it.
    expect(repaired.code).toBe(0);
    expect(JSON.parse(repaired.stdout)).toMatchObject({ ok: false, held: ['tally'], unheld: 0, repaired: { quarantined: ['tally'], reindexed: true } });
    const again = await run(['--db', path, 'doctor']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('every problem found belongs to a job held back for damage (quarantined): tally');
    expect(again.stdout).toContain('purge <job>');
    expect(again.stdout).not.toContain('doctor --repair');
  });

  it('a damaged snapshot: a send holds the job back naming purge, --repair holds it for damage and exits 0, purge ends it', async () => {
    const path = join(res.tempDir(), 'snapshot.db');
    copyFileSync(template, path);
    const db = res.raw(path);
    db.prepare(`UPDATE jobs SET snapshot = '{"value": broken' WHERE id = 'approval'`).run();
    db.close();
    const show = await run(['--machines', 'machines/index.ts', '--db', path, 'show', 'approval']);
    expect(show.stdout).toMatch(/^held +back: damaged \(damaged record: jobs\.snapshot/m);
    const sent = await run(['--machines', 'machines/index.ts', '--db', path, 'send', 'approval', '{"type":"APPROVE","by":"ann"}']);
    expect(sent.code).toBe(1);
    expect(sent.stderr).toMatch(/^spool: SPOOL_QUARANTINED: .*`spool purge approval`/);
    expect((await run(['--db', path, 'doctor', '--repair'])).code).toBe(0);
    expect((await run(['--db', path, 'doctor'])).code).toBe(0);
    const purged = await run(['--machines', 'machines/index.ts', '--db', path, 'purge', 'approval']);
    expect(purged).toMatchObject({ code: 0, stderr: '' });
    expect((await run(['--db', path, 'doctor'])).stdout).toMatch(/found\s+nothing: the file is healthy/);
  });

  it('a figure that disagrees with its records (a revision ahead of its history) is found', async () => {
    const path = join(res.tempDir(), 'derived.db');
    copyFileSync(template, path);
    const db = res.raw(path);
    db.prepare("UPDATE jobs SET revision = revision + 5 WHERE id = 'healthy'").run();
    db.close();
    const report = doctor(path);
    expect(report.findings).toEqual([expect.objectContaining({ kind: 'derived', table: 'jobs', column: 'revision', jobId: 'healthy' })]);
  });

  it('a file that is not SQLite is a typed refusal, not a damaged database; it is left as it was', async () => {
    const path = join(res.tempDir(), 'notes.txt');
    writeFileSync(path, 'these are my notes\n'.repeat(50));
    const before = readFileSync(path);
    for (const args of [['doctor'], ['doctor', '--repair'], ['list']]) {
      const r = await run(['--db', path, ...args]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^spool: SPOOL_NOT_A_SPOOL_DATABASE: .*notes\.txt is not a SQLite database; nothing was changed/);
      expect(r.stdout + r.stderr).not.toMatch(/integrity|--repair|DAMAGED/);
    }
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('a missing file is a typed refusal, not a new database', async () => {
    const r = await run(['--db', join(res.tempDir(), 'missing.db'), 'doctor']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^spool: SPOOL_DATABASE: No Spool database/);
  });
});
