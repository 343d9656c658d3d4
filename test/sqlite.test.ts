import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { loadMigrations, SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { DatabaseBusyError, NotASpoolDatabaseError } from '../persistence/drivers/better-sqlite3/SqliteStore.ts';
import { jobLifecycle } from '../machines/index.ts';
import { SchemaTooNewError, SpoolError, ValidationError, type RuntimeEvent } from '../src/index.ts';
import type { AttemptRecord } from '../src/ports/store.ts';
import { MemoryStore } from '../persistence/memory/index.ts';
import { Resources } from './helpers/resources.ts';
import { commitOf, newEvent, newJob } from './store.contract.ts';
import { claim, effectOf, NOW, UNTIL } from './helpers/dueClaims.ts';

const res = new Resources();
afterEach(() => res.dispose());

/**
 * Schema 15's attempts back in schema 13's layout: every attempt a row of effect_attempts (the
 * running one with outcome 'running'), none on its effect row; no `attempts` view.
 */
const BACK_TO_SCHEMA_13 = `INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, ended_at, outcome, error)
    SELECT id, attempt, attempt_runner, attempt_started_at, attempt_ended_at, coalesce(attempt_outcome, 'running'), attempt_error FROM effects
    WHERE attempt_started_at IS NOT NULL;
  DROP VIEW attempts;
  ${['attempt_runner', 'attempt_started_at', 'attempt_ended_at', 'attempt_outcome', 'attempt_error'].map((c) => `ALTER TABLE effects DROP COLUMN ${c};`).join(' ')}`;

/**
 * Schema 12's history table back in schema 11's shape (keyed by job and revision, seq a column
 * given by a trigger, with its own index), for the tests that rebuild older files from a new one.
 * Rows with a negative seq (schema 12's mark for rows older than schema 11) get NULL again.
 */
const BACK_TO_SCHEMA_11 = `${BACK_TO_SCHEMA_13} DROP VIEW events; DROP TRIGGER transitions_seq_keep_floor;
  CREATE TABLE transitions_11 (job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE, revision INTEGER NOT NULL,
    event_id TEXT, event_type TEXT NOT NULL, payload TEXT NOT NULL, from_value TEXT, to_value TEXT NOT NULL, outcome TEXT NOT NULL,
    error TEXT, at INTEGER NOT NULL, runner TEXT, fence INTEGER, payload_hash TEXT, event_keyed INTEGER, seq INTEGER,
    PRIMARY KEY (job_id, revision)) STRICT, WITHOUT ROWID;
  INSERT INTO transitions_11 SELECT job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at, runner,
    fence, payload_hash, event_keyed, CASE WHEN seq > 0 THEN seq END FROM transitions;
  DROP TABLE transitions; ALTER TABLE transitions_11 RENAME TO transitions;
  CREATE UNIQUE INDEX transitions_seq ON transitions (seq) WHERE seq IS NOT NULL;
  CREATE TRIGGER transitions_seq_assign AFTER INSERT ON transitions FOR EACH ROW BEGIN
    UPDATE transitions SET seq = max(coalesce((SELECT max(seq) FROM transitions WHERE seq IS NOT NULL), 0),
      coalesce((SELECT seq FROM history_seq_floor WHERE id = 1), 0)) + 1 WHERE job_id = NEW.job_id AND revision = NEW.revision; END;
  CREATE TRIGGER transitions_seq_keep_floor BEFORE DELETE ON transitions FOR EACH ROW
    WHEN OLD.seq IS NOT NULL AND OLD.seq = (SELECT max(seq) FROM transitions WHERE seq IS NOT NULL) BEGIN
    INSERT INTO history_seq_floor (id, seq) VALUES (1, OLD.seq) ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq); END;
  CREATE VIEW events AS SELECT seq, job_id, event_id, type, payload, payload_hash, status, source_kind, source_id, attempt,
    error, revision, accepted_at, processed_at FROM inbox
    UNION ALL SELECT NULL, job_id, event_id, event_type, payload, payload_hash, outcome, 'external', NULL, NULL,
    error, revision, at, at FROM transitions WHERE payload_hash IS NOT NULL;`;

const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('SqliteStore settings', () => {
  it('opens in WAL mode with synchronous=FULL by default', async () => {
    const store = await res.sqlite(res.dbPath());
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(store.synchronous).toBe('FULL');
    expect(store.db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(store.db.pragma('busy_timeout', { simple: true })).toBe(5000);
    await store.close();
    expect(store.db.open).toBe(false);
  });

  it('uses synchronous=NORMAL (still WAL) when asked, and the busy timeout given', async () => {
    const store = await res.sqlite(res.dbPath(), { synchronous: 'NORMAL', busyTimeoutMs: 1234 });
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(1); // NORMAL
    expect(store.synchronous).toBe('NORMAL');
    expect(store.db.pragma('busy_timeout', { simple: true })).toBe(1234);
    await store.close();
  });

  it("waits for another process's lock while opening, then refuses with DatabaseBusyError, changing nothing", async () => {
    const path = res.dbPath();
    const other = res.raw(path);
    other.exec('CREATE TABLE held (x)'); // another application's file, locked while we try
    other.exec('BEGIN EXCLUSIVE');
    const error = await SqliteStore.open(path, { busyTimeoutMs: 50 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseBusyError);
    expect((error as Error).message).toMatch(/another process held its lock for 50 ms/);
    other.exec('COMMIT');
    expect(other.pragma('journal_mode', { simple: true })).toBe('delete'); // untouched
  });

  it.each([
    [{ synchronous: 'OFF' }, /synchronous must be 'FULL' or 'NORMAL' \(got "OFF"\)/],
    [{ synchronous: 'normal' }, /synchronous must be 'FULL' or 'NORMAL' \(got "normal"\)/],
    [{ busyTimeoutMs: -1 }, /busyTimeoutMs must be a whole number/],
    [{ busyTimeoutMs: 1.5 }, /busyTimeoutMs must be a whole number/],
    [{ clock: {} }, /clock must be a Clock/],
    [{ synchronus: 'NORMAL' }, /unknown option synchronus \(known: synchronous, busyTimeoutMs, clock\)/],
  ])('refuses %j before touching the file (a typo must not fall back to a default)', async (options, message) => {
    const path = res.dbPath();
    const error = await SqliteStore.open(path, options as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(message);
    expect(existsSync(path)).toBe(false);
  });
});

describe('MemoryStore: the SQLite store on a private :memory: database', () => {
  it('opens synchronously at the latest schema, each instance its own database, and is closed like any SQLite store', async () => {
    const a = new MemoryStore();
    const b = new MemoryStore();
    expect(a).toBeInstanceOf(SqliteStore);
    expect(a.description).toBe('memory');
    expect(a.db.memory).toBe(true);
    expect(a.schemaVersion).toBe(loadMigrations().at(-1)!.version);
    expect(a.db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect((await a.createJob(newJob('j1'))).created).toBe(true);
    expect(await a.getJob('j1')).toMatchObject({ id: 'j1', revision: 1 });
    expect(await b.getJob('j1')).toBeUndefined();
    await a.close();
    await b.close();
    expect(a.db.open).toBe(false);
    await expect(a.getJob('j1')).rejects.toThrow(/not open/);
  });
});

describe('SqliteStore migrations', () => {
  it('upgrades a schema-6 file: events that release recorded in the inbox stay found, listed once and deduplicated', async () => {
    const path = res.dbPath();
    {
      const runtime = await res.runtime({ store: await res.sqlite(path), machines: [jobLifecycle] });
      await runtime.start('job-lifecycle', { name: 'old', items: 2 }, { jobId: 'old' });
      await runtime.send('old', { type: 'START' }, { eventId: 'ev-start' });
      await runtime.send('old', { type: 'ITEM_DONE' });
      await runtime.close();
    }
    // Back to what schema 6 wrote: every event in the inbox, no inline columns, index or view.
    const raw = res.raw(path);
    raw.exec(BACK_TO_SCHEMA_11);
    raw.exec(`INSERT INTO inbox (job_id, event_id, type, payload, payload_hash, status, revision, accepted_at, processed_at, source_kind)
        SELECT job_id, event_id, event_type, payload, payload_hash, outcome, revision, at, at, 'external' FROM transitions WHERE payload_hash IS NOT NULL;
      DROP TRIGGER transitions_seq_assign; DROP TRIGGER transitions_seq_keep_floor; DROP INDEX transitions_seq;
      DROP TABLE history_seq_floor; ALTER TABLE transitions DROP COLUMN seq;
      DROP VIEW events; DROP TABLE event_keys;
      ALTER TABLE transitions DROP COLUMN event_keyed; ALTER TABLE transitions DROP COLUMN payload_hash;
      DROP INDEX effects_pending; DROP INDEX jobs_active_children;
      DELETE FROM spool_migrations WHERE version >= 7;`);
    const madeUp = raw.prepare("SELECT event_id FROM inbox WHERE job_id = 'old' AND type = 'ITEM_DONE'").pluck().get() as string;
    raw.close();

    const store = await res.sqlite(path);
    expect(store.schemaVersion).toBe(loadMigrations().at(-1)!.version);
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    expect(await runtime.send('old', { type: 'START' }, { eventId: 'ev-start' })).toMatchObject({ duplicate: true, status: 'applied', revision: 2 });
    expect(await runtime.send('old', { type: 'ITEM_DONE' }, { eventId: madeUp })).toMatchObject({ duplicate: true, status: 'applied', revision: 3 });
    const next = await runtime.send('old', { type: 'ITEM_DONE' });
    expect(next).toMatchObject({ duplicate: false, status: 'applied', revision: 4 });
    expect((await runtime.events('old')).map((e) => [e.eventId, e.revision, e.seq === null ? 'history' : 'inbox'])).toEqual([
      ['ev-start', 2, 'inbox'],
      [madeUp, 3, 'inbox'],
      [next.eventId, 4, 'history'],
    ]);
    expect((await runtime.history('old')).map((h) => h.revision)).toEqual([1, 2, 3, 4]);
    // Schema 11's global order starts with the rows written after it: the older ones have no seq.
    expect((await runtime.historySince(0)).records.map((r) => r.revision)).toEqual([4]);
  });

  it('upgrades a schema-9 file: the ids it recorded (history key index, inbox) become keys, and are refused again', async () => {
    const path = res.dbPath();
    const go = (eventId: string, at: number) => newEvent('j', eventId, { type: 'GO' }, at);
    {
      const store = await res.sqlite(path);
      await store.createJob(newJob('j'));
      expect(await store.commit([commitOf('j', 1, { event: { accept: go('hook', 1), status: 'applied', error: null, payload: { type: 'GO' } } })])).toMatchObject([{ ok: true }]);
      const { event } = await store.acceptEvent(go('queued', 2));
      expect(await store.commit([commitOf('j', 2, { event: { seq: event.seq!, status: 'applied', error: null, payload: { type: 'GO' } } })])).toMatchObject([{ ok: true }]);
      await store.close();
    }
    // Back to schema 9: no key table, the history's event key index instead.
    const raw = res.raw(path);
    raw.exec(BACK_TO_SCHEMA_11);
    raw.exec(`DROP TRIGGER transitions_seq_assign; DROP TRIGGER transitions_seq_keep_floor; DROP INDEX transitions_seq;
      DROP TABLE history_seq_floor; ALTER TABLE transitions DROP COLUMN seq;
      DROP TABLE event_keys; UPDATE transitions SET event_keyed = 1 WHERE event_id = 'hook';
      CREATE UNIQUE INDEX transitions_event_key ON transitions (job_id, event_id) WHERE event_keyed = 1;
      DELETE FROM spool_migrations WHERE version >= 10;`);
    raw.close();
    const store = await res.sqlite(path);
    expect(store.db.prepare('SELECT job_id, event_id, revision FROM event_keys ORDER BY event_id').all()).toEqual([
      { job_id: 'j', event_id: 'hook', revision: 2 },
      { job_id: 'j', event_id: 'queued', revision: null },
    ]);
    for (const [eventId, revision] of [['hook', 2], ['queued', 3]] as const) {
      const accept = go(eventId, 3);
      expect(await store.commit([commitOf('j', 3, { event: { accept, status: 'applied', error: null, payload: { type: 'GO' } } })])).toEqual([
        { ok: false, reason: 'duplicate-event' },
      ]);
      expect(await store.acceptEvent(accept)).toMatchObject({ duplicate: true, event: { revision } });
    }
    // A second record of one (job, event id) is a primary key violation, whoever writes it.
    expect(() => store.db.prepare("INSERT INTO event_keys (job_id, event_id) VALUES ('j', 'hook')").run()).toThrow(/UNIQUE constraint failed/);
    await store.close();
  });

  it('upgrades a schema-11 file: its history keeps its seqs, older rows stay out of the feed, new rows follow without a repeat; effects and attempts survive, tokens stay unique', async () => {
    const path = res.dbPath();
    {
      const store = await res.sqlite(path);
      await store.createJob(newJob('a'));
      await store.createJob(newJob('b'));
      await store.close();
    }
    const raw = res.raw(path);
    raw.exec(BACK_TO_SCHEMA_11);
    // A row from before schema 11 (no seq), and the purge floor above every row left.
    raw.exec("UPDATE transitions SET seq = NULL WHERE job_id = 'a'; INSERT INTO history_seq_floor (id, seq) VALUES (1, 7);");
    // An effect waiting on a token, with its attempt: both survive the rebuild of their tables.
    raw.exec(`INSERT INTO effects (id, job_id, actor_id, src, input, status, active, attempt, max_attempts, token, created_revision, created_at, updated_at)
        VALUES ('e1', 'b', 'upload', 'upload', '{}', 'waiting', 1, 1, 3, 'tok', 1, 1, 1);
      INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, outcome) VALUES ('e1', 1, 'w1', 1, 'waiting');`);
    raw.exec('DELETE FROM spool_migrations WHERE version >= 12');
    const kept = raw.prepare("SELECT seq FROM transitions WHERE job_id = 'b'").pluck().get() as number;
    raw.close();
    const store = await res.sqlite(path);
    expect(store.schemaVersion).toBe(loadMigrations().at(-1)!.version);
    expect((await store.history('a')).map((h) => h.revision)).toEqual([1]);
    expect(store.db.prepare("SELECT seq FROM transitions WHERE job_id = 'b'").pluck().get()).toBe(kept);
    expect(store.db.prepare('SELECT effect_id, attempt, outcome FROM attempts').all()).toEqual([{ effect_id: 'e1', attempt: 1, outcome: 'waiting' }]);
    expect(await store.effectByToken('tok')).toMatchObject({ id: 'e1', status: 'waiting' });
    // A token is still unique; effects without one are not in its index at all.
    const second = "INSERT INTO effects (id, job_id, actor_id, src, input, status, active, max_attempts, token, created_revision, created_at, updated_at) VALUES ('e2', 'b', 'x', 'x', '{}', 'waiting', 1, 3, ?, 1, 1, 1)";
    expect(() => store.db.prepare(second).run('tok')).toThrow(/UNIQUE constraint failed/);
    store.db.prepare(second).run(null);
    store.db.prepare(second.replace("'e2'", "'e3'")).run(null);
    await store.createJob(newJob('c'));
    const feed = await store.historySince(0, 10, 100, {});
    expect(feed.records.map((r) => [r.jobId, r.seq])).toEqual([['b', kept], ['c', 8]]);
    await store.close();
  });

  it('upgrades a schema-13 file: its running and waiting attempts move onto their effect rows and read back the same, then end as new ones would', async () => {
    const path = res.dbPath();
    const effect = (actor: string) => ({ id: `a~${actor}~1`, jobId: 'a', actorId: actor, src: actor, input: {}, maxAttempts: 3, unsafe: false, createdRevision: 1, at: 1 });
    const [work, wait] = [effect('work'), effect('wait')];
    const summary = (list: AttemptRecord[]) => list.map((a) => [a.effectId, a.attempt, a.runner, a.startedAt, a.endedAt, a.outcome]);
    let before;
    {
      const store = await res.sqlite(path);
      await store.createJob({ ...newJob('a'), effects: [work, wait] });
      // work: attempt 1 failed with a retry due, attempt 2 claimed by w2, running. wait: waiting on a token.
      expect(await store.claimEffect(work.id, 'w1', 10, 60_000)).toMatchObject({ attempt: 1 });
      await store.finishAttempt(work.id, 1, { kind: 'failed', error: { name: 'Error', message: 'boom' }, retryAt: 20, event: null }, 15);
      expect(await store.claimEffect(wait.id, 'w1', 16, 60_000)).toMatchObject({ attempt: 1 });
      await store.finishAttempt(wait.id, 1, { kind: 'waiting', token: 'tok' }, 17);
      await store.releaseLeases('w1', 'all');
      expect(await store.claimEffect(work.id, 'w2', 25, 60_000)).toMatchObject({ attempt: 2 });
      before = await store.listAttempts('a');
      expect(summary(before)).toEqual([[wait.id, 1, 'w1', 16, 17, 'waiting'], [work.id, 1, 'w1', 10, 15, 'failed'], [work.id, 2, 'w2', 25, null, 'running']]);
      await store.close();
    }
    const raw = res.raw(path);
    raw.exec(`${BACK_TO_SCHEMA_13} DELETE FROM spool_migrations WHERE version >= 14;`);
    expect(raw.prepare('SELECT effect_id, attempt, outcome FROM effect_attempts ORDER BY effect_id, attempt').all()).toEqual([
      { effect_id: wait.id, attempt: 1, outcome: 'waiting' }, { effect_id: work.id, attempt: 1, outcome: 'failed' }, { effect_id: work.id, attempt: 2, outcome: 'running' },
    ]);
    raw.close();

    const store = await res.sqlite(path);
    expect(store.schemaVersion).toBe(loadMigrations().at(-1)!.version);
    expect(await store.listAttempts('a')).toEqual(before);
    // The attempts whose end may still change are on their effect rows; the failed one keeps its row.
    expect(store.db.prepare('SELECT effect_id, attempt, outcome FROM effect_attempts').all()).toEqual([{ effect_id: work.id, attempt: 1, outcome: 'failed' }]);
    expect(store.db.prepare('SELECT id, attempt, attempt_runner, attempt_started_at, attempt_outcome FROM effects ORDER BY id').all()).toEqual([
      { id: wait.id, attempt: 1, attempt_runner: 'w1', attempt_started_at: 16, attempt_outcome: 'waiting' },
      { id: work.id, attempt: 2, attempt_runner: 'w2', attempt_started_at: 25, attempt_outcome: null },
    ]);
    // They end as new ones would: on their effect rows, with the starts the old rows had.
    expect(await store.finishAttempt(work.id, 2, { kind: 'succeeded', output: 1, event: newEvent('a', 'done', { type: 'DONE' }, 30) }, 30)).toBe('current');
    expect(await store.completeByToken('tok', { kind: 'succeeded', output: 2 }, newEvent('a', 'approved', { type: 'APPROVED' }, 31), 31)).toBe(true);
    expect(summary(await store.listAttempts('a'))).toEqual([[wait.id, 1, 'w1', 16, 31, 'succeeded'], [work.id, 1, 'w1', 10, 15, 'failed'], [work.id, 2, 'w2', 25, 30, 'succeeded']]);
    expect(store.db.prepare('SELECT count(*) AS n FROM effect_attempts').get()).toEqual({ n: 1 });
    await store.close();
  });

  it('records the schema version it migrated to', async () => {
    const latest = loadMigrations().at(-1)!;
    const store = await res.sqlite(res.dbPath(), { clock: { now: () => 111 } });
    expect(store.schemaVersion).toBe(latest.version);
    const rows = store.db.prepare('SELECT version, name, applied_at FROM spool_migrations ORDER BY version').all();
    expect(rows).toEqual(loadMigrations().map((m) => ({ version: m.version, name: m.name, applied_at: 111 })));
    expect(rows.at(-1)).toMatchObject({ version: latest.version, name: latest.name });
    await store.close();
  });

  it('does not re-run migrations when an existing file is reopened, and keeps its data', async () => {
    const path = res.dbPath();
    const first = await res.sqlite(path, { clock: { now: () => 111 } });
    await first.createJob(newJob('kept'));
    await first.close();

    const again = await res.sqlite(path, { clock: { now: () => 222 } });
    expect(again.db.prepare('SELECT version, applied_at FROM spool_migrations').all()).toEqual(
      loadMigrations().map((m) => ({ version: m.version, applied_at: 111 })),
    );
    expect(await again.getJob('kept')).toMatchObject({ id: 'kept', revision: 1 });
    await again.close();
  });

  it('refuses a database whose schema is newer than the code with SchemaTooNewError, leaving the file unchanged', async () => {
    const path = res.dbPath();
    const store = await res.sqlite(path);
    await store.createJob(newJob('j1'));
    await store.close();
    const raw = res.raw(path);
    raw.prepare('INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(9999, '9999_future.sql', 1);
    raw.close(); // checkpoints the WAL into the main file
    expect(existsSync(`${path}-wal`)).toBe(false);
    const before = sha(path);

    const error = await refusal(path);
    expect(error).toBeInstanceOf(SchemaTooNewError);
    expect(error).toMatchObject({ code: 'SPOOL_SCHEMA_TOO_NEW', details: { schemaVersion: 9999, supported: loadMigrations().at(-1)!.version } });
    expect((error as Error).message).toMatch(/upgrade Spool/);

    expect(sha(path)).toBe(before);
    expect(existsSync(`${path}-wal`)).toBe(false);
    const check = res.raw(path, { readonly: true });
    expect(check.prepare('SELECT max(version) AS v FROM spool_migrations').get()).toEqual({ v: 9999 });
    expect(check.prepare('SELECT id FROM jobs').all()).toEqual([{ id: 'j1' }]);
    check.close();
  });

  it('refuses a newer database kept in rollback-journal mode without switching it to WAL', async () => {
    // A newer Spool (or an operator) may have left the file in rollback-journal mode. The refusal
    // says "nothing was changed", so opening it must not rewrite the header's journal mode either.
    const path = res.dbPath();
    const store = await res.sqlite(path);
    await store.close();
    const raw = res.raw(path);
    raw.pragma('journal_mode = DELETE');
    raw.prepare('INSERT INTO spool_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(9999, '9999_future.sql', 1);
    raw.close();
    const before = sha(path);

    await expect(SqliteStore.open(path)).rejects.toBeInstanceOf(SchemaTooNewError);

    const check = res.raw(path, { readonly: true });
    expect(check.pragma('journal_mode', { simple: true })).toBe('delete');
    check.close();
    expect(sha(path)).toBe(before);
  });
});

describe('SqliteStore with corrupted rows', () => {
  async function seed(path: string) {
    const store = await res.sqlite(path);
    const runtime = await res.runtime({ store, machines: [jobLifecycle] });
    for (const id of ['a-healthy', 'b-bad-context', 'c-bad-snapshot', 'd-healthy']) {
      await runtime.start('job-lifecycle', { name: id }, { jobId: id });
      await runtime.send(id, { type: 'START' });
    }
    await runtime.close();
    const raw = res.raw(path);
    raw.prepare("UPDATE jobs SET context = '{not json' WHERE id = 'b-bad-context'").run();
    raw.prepare("UPDATE jobs SET snapshot = ? WHERE id = 'c-bad-snapshot'").run('\u0000garbage{"value":');
    raw.close();
  }

  it('lists every job, reporting the corrupted column instead of throwing', async () => {
    const path = res.dbPath();
    await seed(path);
    const store = await res.sqlite(path);
    const jobs = await store.listJobs({});
    expect(jobs.map((j) => j.id)).toEqual(['a-healthy', 'b-bad-context', 'c-bad-snapshot', 'd-healthy']);
    const bad = jobs.find((j) => j.id === 'b-bad-context')!;
    expect(bad.corruption).toMatch(/context/);
    expect(bad.context).toBeNull();
    expect(bad.value).toBe('processing');
    expect(jobs.find((j) => j.id === 'a-healthy')).toMatchObject({ context: { name: 'a-healthy' }, quarantine: null });
    expect(jobs.find((j) => j.id === 'a-healthy')!.corruption).toBeUndefined();
    expect(await store.getJob('b-bad-context')).toMatchObject({ id: 'b-bad-context', revision: 2 });
    await store.close();
  });

  async function openRecovered(path: string) {
    const store = await res.sqlite(path);
    const runtime = await res.runtime({ store, machines: [jobLifecycle], recover: false });
    const seen: RuntimeEvent[] = [];
    runtime.subscribe((e) => seen.push(e));
    await runtime.recover();
    return { store, runtime, seen };
  }

  it('the runtime holds the corrupted jobs back with a clear reason while healthy jobs keep working', async () => {
    const path = res.dbPath();
    await seed(path);
    const { runtime } = await openRecovered(path);

    const badContext = await runtime.get('b-bad-context');
    expect(badContext.quarantine).toMatch(/context is not valid JSON/);
    const badSnapshot = await runtime.get('c-bad-snapshot');
    expect(badSnapshot.quarantine).toMatch(/snapshot is not valid JSON/);
    const listed = await runtime.list();
    expect(listed.map((j) => j.id)).toEqual(['a-healthy', 'b-bad-context', 'c-bad-snapshot', 'd-healthy']);

    // Sending to them is refused and changes nothing; healthy jobs keep working.
    await expect(runtime.send('c-bad-snapshot', { type: 'FINISH' })).rejects.toMatchObject({ code: 'SPOOL_QUARANTINED' });
    await expect(runtime.send('b-bad-context', { type: 'FINISH' })).rejects.toMatchObject({ code: 'SPOOL_QUARANTINED' });
    for (const id of ['a-healthy', 'd-healthy']) {
      const r = await runtime.send(id, { type: 'FINISH' });
      expect(r).toMatchObject({ status: 'applied', job: { value: 'completed', status: 'done', revision: 3 } });
    }
    expect(await runtime.get('c-bad-snapshot')).toMatchObject({ revision: 2, value: 'processing' });
    expect(await runtime.get('b-bad-context')).toMatchObject({ revision: 2, value: 'processing' });
    await runtime.close();
  });

  it('a job with an invalid snapshot is quarantined durably (stored reason, list filter, event)', async () => {
    const path = res.dbPath();
    await seed(path);
    const { runtime, store, seen } = await openRecovered(path);
    expect(store.db.prepare("SELECT quarantine FROM jobs WHERE id = 'c-bad-snapshot'").get()).toEqual({ quarantine: expect.stringMatching(/snapshot/) });
    expect((await runtime.list({ quarantined: true })).map((j) => j.id)).toContain('c-bad-snapshot');
    expect(seen).toContainEqual({ type: 'job.quarantined', jobId: 'c-bad-snapshot', reason: expect.stringMatching(/snapshot/) });
    await runtime.close();
  });

  it('a job with invalid context JSON is quarantined durably too (stored reason, list filter, event)', async () => {
    const path = res.dbPath();
    await seed(path);
    const { runtime, store, seen } = await openRecovered(path);
    // The reason must be in the stored column, so every reader (list filters, jobsWithPendingEvents, the CLI) sees it.
    expect(store.db.prepare("SELECT quarantine FROM jobs WHERE id = 'b-bad-context'").get()).toEqual({ quarantine: expect.stringMatching(/context/) });
    expect((await runtime.list({ quarantined: true })).map((j) => j.id)).toEqual(['b-bad-context', 'c-bad-snapshot']);
    expect((await runtime.list({ quarantined: false })).map((j) => j.id)).toEqual(['a-healthy', 'd-healthy']);
    expect(seen).toContainEqual({ type: 'job.quarantined', jobId: 'b-bad-context', reason: expect.stringMatching(/context/) });
    await runtime.close();
  });
});

/** The error `SqliteStore.open` refuses the file with (undefined if it opened). */
function refusal(path: string): Promise<unknown> {
  return SqliteStore.open(path).then(
    (s) => {
      void s.close();
      return undefined;
    },
    (e: unknown) => e,
  );
}

describe('SqliteStore on a file that is not a Spool database', () => {
  it('refuses it with a typed error and leaves it as it was', async () => {
    const path = res.dbPath('notes.db');
    writeFileSync(path, 'these are my notes, not a database '.repeat(200));
    const before = readFileSync(path);
    const error = await SqliteStore.open(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotASpoolDatabaseError);
    expect((error as Error).message).toBe(`${path} is not a SQLite database; nothing was changed. Point --db at a Spool database, or at a new file.`);
    expect(readFileSync(path).equals(before)).toBe(true);
  });
});

describe("SqliteStore on another application's SQLite file", () => {
  /** A foreign SQLite file in rollback-journal mode, with the given schema and a row. */
  function foreign(sql: string): { path: string; before: string } {
    const path = res.dbPath('app.db');
    const raw = res.raw(path);
    raw.exec(sql);
    expect(raw.pragma('journal_mode', { simple: true })).toBe('delete');
    raw.close();
    return { path, before: sha(path) };
  }

  async function expectRefusedUnchanged(path: string, before: string, names: RegExp) {
    const error = await refusal(path);
    expect(error).toBeInstanceOf(NotASpoolDatabaseError);
    expect(error).toBeInstanceOf(SpoolError);
    expect(error).toMatchObject({ code: 'SPOOL_NOT_A_SPOOL_DATABASE', category: 'bad-input', details: { path } });
    const message = (error as Error).message;
    expect(message).not.toContain('\n');
    expect(message).toContain(`${path} is not a Spool database`);
    expect(message).toMatch(names);
    expect(message).toMatch(/Point --db at a new file or at a Spool database/);

    expect(sha(path)).toBe(before);
    expect(existsSync(`${path}-wal`)).toBe(false);
    expect(existsSync(`${path}-journal`)).toBe(false);
    const check = res.raw(path, { readonly: true });
    expect(check.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(check.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'spool_migrations'").get()).toEqual({ n: 0 });
    check.close();
  }

  it('refuses a file with its own tables before changing anything (no schema, no WAL)', async () => {
    const { path, before } = foreign('CREATE TABLE customers (id INT); INSERT INTO customers VALUES (1); CREATE INDEX customers_id ON customers (id);');
    await expectRefusedUnchanged(path, before, /tables, indexes \(customers, customers_id\)/);
    const check = res.raw(path, { readonly: true });
    expect(check.prepare('SELECT id FROM customers').all()).toEqual([{ id: 1 }]);
    check.close();
  });

  it('refuses a file with its own jobs table with the same error, not a corrupt-record one', async () => {
    const { path, before } = foreign("CREATE TABLE jobs (id TEXT PRIMARY KEY, owner TEXT); INSERT INTO jobs VALUES ('cron-1', 'ops');");
    await expectRefusedUnchanged(path, before, /tables \(jobs\)/);
  });

  it('refuses a file holding only a view', async () => {
    const { path, before } = foreign('CREATE VIEW answer AS SELECT 42 AS n;');
    await expectRefusedUnchanged(path, before, /views \(answer\)/);
  });

  it('creates and migrates an empty 0-byte file as a new Spool database', async () => {
    const path = res.dbPath();
    writeFileSync(path, '');
    const store = await res.sqlite(path);
    expect(store.schemaVersion).toBe(loadMigrations().at(-1)!.version);
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    await store.createJob(newJob('first'));
    expect(await store.getJob('first')).toMatchObject({ id: 'first' });
    await store.close();
  });

  it('still opens an existing Spool database (WAL mode, with data)', async () => {
    const path = res.dbPath();
    const first = await res.sqlite(path);
    await first.createJob(newJob('kept'));
    await first.close();
    const again = await res.sqlite(path);
    expect(again.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(await again.getJob('kept')).toMatchObject({ id: 'kept' });
    await again.close();
  });
});

describe('SqliteStore: a write batch', () => {
  /** The statements better-sqlite3 runs (its transactions' SAVEPOINTs too), by text, while `fn` runs. */
  async function statementsOf<T>(store: SqliteStore, fn: () => Promise<T>): Promise<{ result: T; texts: string[] }> {
    const proto = Object.getPrototypeOf(store.db.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
    const originals = new Map(['run', 'get', 'all'].map((name) => [name, proto[name]!]));
    const texts: string[] = [];
    for (const [name, original] of originals) {
      proto[name] = function (this: { source: string }, ...a: unknown[]) {
        texts.push(this.source);
        return original.apply(this, a);
      };
    }
    try {
      return { result: await fn(), texts };
    } finally {
      for (const [name, original] of originals) proto[name] = original;
    }
  }
  const savepoints = (texts: string[]) => texts.filter((t) => t.startsWith('SAVEPOINT'));

  it('runs without savepoints while every write lands, or is refused before changing a row', async () => {
    const store = await res.sqlite(res.dbPath());
    for (const id of ['A', 'B']) await store.createJob(newJob(id));
    const landed = await statementsOf(store, () => store.writeBatch({ commits: [commitOf('A', 1), commitOf('B', 1)] }));
    expect(landed.result.commits.map((c) => c.ok)).toEqual([true, true]);
    expect(savepoints(landed.texts)).toEqual([]);
    // A stale revision is refused by the job's UPDATE, which changed nothing: no run again.
    const refused = await statementsOf(store, () => store.writeBatch({ commits: [commitOf('A', 2), commitOf('B', 1)] }));
    expect(refused.result.commits).toEqual([
      { ok: true, revision: 3, fence: null },
      { ok: false, reason: 'conflict', currentRevision: 2 },
    ]);
    expect(savepoints(refused.texts)).toEqual([]);
    expect((await store.getJob('A'))?.revision).toBe(3);
  });

  it('a new job is written without reading the jobs table first; an id or key taken already is found by its INSERT, then read', async () => {
    const store = await res.sqlite(res.dbPath());
    const created = await statementsOf(store, () => store.writeBatch({ creates: [newJob('A', { key: 'k' }), newJob('B')] }));
    expect(created.result.creates.map((c) => c.ok && c.result.created)).toEqual([true, true]);
    expect(created.texts.filter((t) => /^SELECT .* FROM jobs/.test(t))).toEqual([]);
    const again = await statementsOf(store, () => store.writeBatch({ creates: [newJob('A'), newJob('C', { key: 'k' }), newJob('D')] }));
    expect(again.result.creates.map((c) => c.ok && [c.result.job.id, c.result.created])).toEqual([
      ['A', false],
      ['A', false],
      ['D', true],
    ]);
    expect(savepoints(again.texts)).toEqual([]);
    expect((await store.history('A')).map((h) => h.revision)).toEqual([1]);
    expect(await store.getJob('C')).toBeUndefined();
  });

  it('a job that ends cancels its timers still to come, and one that never had any runs no timer statement', async () => {
    const store = await res.sqlite(res.dbPath());
    for (const id of ['A', 'B']) await store.createJob(newJob(id));
    const timer = { id: 'A~late', jobId: 'A', key: 'late', kind: 'raise' as const, event: { type: 'LATE' }, dueAt: Date.now() + 60_000, createdRevision: 2, createdAt: 0 };
    expect((await store.commit([{ ...commitOf('A', 1), timers: { schedule: [timer], cancel: [] } }]))[0]).toMatchObject({ ok: true });
    const ended = await statementsOf(store, () => store.commit([commitOf('A', 2, { status: 'done' }), commitOf('B', 1, { status: 'done' })]));
    expect(ended.result.map((r) => r.ok)).toEqual([true, true]);
    expect((await store.listTimers('A')).map((t) => [t.key, t.status])).toEqual([['late', 'cancelled']]);
    // One timer statement: A's (B never had a timer).
    expect(ended.texts.filter((t) => t.startsWith('UPDATE timers'))).toHaveLength(1);
    // Their version does not change: the UPDATE's SET names no machine_version (SQLite would rewrite each job's jobs_machine entry).
    const sets = ended.texts.filter((t) => t.startsWith('UPDATE jobs')).map((t) => t.slice(0, t.indexOf('WHERE')));
    expect(sets).toHaveLength(2);
    for (const set of sets) expect(set).not.toMatch(/machine_version/);
  });

  it('a claim round claims each picked effect from its pick, in two writes, without a savepoint; a lease held elsewhere claims nothing', async () => {
    const store = await res.sqlite(res.dbPath());
    for (const id of ['A', 'B', 'C']) await store.createJob({ ...newJob(id), effects: [effectOf(id, 'x')] });
    expect(await store.claimEffect('C~x', 'w2', NOW, UNTIL)).toBeDefined();
    const round = await statementsOf(store, () => store.claimDueEffects(claim()));
    expect(round.result.claimed.map((e) => [e.id, e.attempt, e.leaseFence])).toEqual([
      ['A~x', 1, 1],
      ['B~x', 1, 1],
    ]);
    expect(savepoints(round.texts)).toEqual([]);
    // The pick, then per claim: the effect (its first attempt lives on its row: no attempt row), the job's lease.
    expect(round.texts.slice(2, -1).map((t) => /^\w+ \w+ \w+/.exec(t)![0])).toEqual([
      'UPDATE effects SET', 'UPDATE jobs SET',
      'UPDATE effects SET', 'UPDATE jobs SET',
    ]);
    // C's lease is w2's (live): its effect is not claimed by w1, and nothing of it changes.
    await store.commit([{ ...commitOf('C', 1), effects: { create: [effectOf('C', 'y')], deactivate: [] } }]);
    expect(await store.claimEffect('C~y', 'w1', NOW, UNTIL, undefined, null)).toBeUndefined();
    expect(await store.getEffect('C~y')).toMatchObject({ status: 'pending', attempt: 0 });
    expect((await store.getJob('C'))?.lease).toMatchObject({ owner: 'w2' });
  });

  it('a write that fails after changing rows runs the batch again with a savepoint per write: it alone rolls back, the others land', async () => {
    const store = await res.sqlite(res.dbPath());
    for (const id of ['A', 'B', 'C']) await store.createJob(newJob(id));
    // B's commit updates B and writes its history, then its child's id collides with job A.
    const failing = { ...commitOf('B', 1), children: [newJob('A')] };
    const mixed = await statementsOf(store, () => store.writeBatch({ commits: [commitOf('A', 1), failing, commitOf('C', 1)] }));
    expect(mixed.result.commits[0]).toEqual({ ok: true, revision: 2, fence: null });
    expect(mixed.result.commits[1]).toMatchObject({ ok: false, reason: 'error' });
    expect(mixed.result.commits[2]).toEqual({ ok: true, revision: 2, fence: null });
    // The run again isolated each of the three commits.
    expect(savepoints(mixed.texts)).toHaveLength(3);
    expect((await store.history('A')).map((h) => h.revision)).toEqual([1, 2]);
    expect((await store.history('B')).map((h) => h.revision)).toEqual([1]);
    expect((await store.getJob('B'))?.revision).toBe(1);
    expect((await store.history('C')).map((h) => h.revision)).toEqual([1, 2]);
  });
});
