/**
 * CI's short run of the crash harness (the long one is `npm run crash -- --kills 1000`): one
 * worker process at a time and one client process on one SQLite file, at least 50 SIGKILLs
 * (random moments 0-40 ms after ready, and the engine's named crash points), then every
 * invariant checked against the file and the acknowledgement logs. Then proof that the checks
 * are not vacuous: copies of the final file, each broken in one way, are each caught.
 *
 * Then the same with 4 worker processes running concurrently on the file, each killed and replaced
 * independently (at least 50 kills, < 60 s on 2 cores): the fencing audit (every job's history one
 * chain of revisions) and no two attempts of an effect running while both runners were alive.
 *
 * The workload seed is random per run and printed with any failure (SPOOL_CRASH_SEED=<n> fixes it).
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Resources } from '../helpers/resources.ts';
import { byKind, runCrashHarness, type CrashReport } from './harness.ts';
import { checkInvariants, type AckEntry, type WorkerLog } from './invariants.ts';
import { SECRET_MARK } from './workload.ts';

const KILLS = 50;
const WORKERS = 4;
const res = new Resources();
let report: CrashReport;
let concurrent: CrashReport;
const seed = process.env['SPOOL_CRASH_SEED'] ? Number(process.env['SPOOL_CRASH_SEED']) : Math.floor(Math.random() * 2 ** 31);

// No speed is asserted here (speed belongs to `npm run bench`); the hook's limit only stops a run
// that hangs, and is generous so a loaded machine does not fail a correct run.
beforeAll(async () => {
  report = await runCrashHarness({ kills: KILLS, minCrashPoints: 3, seed, dir: res.tempDir() });
  const t = report.tally;
  console.log(
    `crash harness (seed ${seed}): ${t.kills} kills (worker ${t.workerKills}, client ${t.clientKills}; crash points ${JSON.stringify(t.crashPoints)}), ` +
      `${t.eventsAcked} events acknowledged, ${t.db.jobs} jobs, ${t.db.transitions} transitions, timers ${JSON.stringify(t.db.timers)}, ` +
      `${t.db.attempts} attempts ${JSON.stringify(t.db.attemptOutcomes)}, ${report.violations.length} violations, ${(t.durationMs / 1000).toFixed(1)} s`,
  );
  // A worker killed after claiming an attempt (at least one): its attempt is recorded interrupted when another takes it over.
  concurrent = await runCrashHarness({ kills: KILLS, workers: WORKERS, needCrashPoints: ['after-claim'], seed, dir: res.tempDir() });
  const c = concurrent.tally;
  console.log(
    `crash harness, ${WORKERS} concurrent workers (seed ${seed}): ${c.kills} kills (worker ${c.workerKills}, client ${c.clientKills}; crash points ${JSON.stringify(c.crashPoints)}), ` +
      `at most ${c.maxConcurrentWorkers} running at once, >= 2 for ${(c.concurrentMs / 1000).toFixed(1)} s, ${c.eventsAcked} events acknowledged, ${c.db.jobs} jobs, ` +
      `${c.db.transitions} transitions, ${c.db.attempts} attempts ${JSON.stringify(c.db.attemptOutcomes)}, overlap pairs checked ${c.db.overlapPairsChecked}, ` +
      `${concurrent.violations.length} violations, ${(c.durationMs / 1000).toFixed(1)} s`,
  );
}, 600_000);
afterAll(() => res.dispose());

describe(`crash harness, ${KILLS} kills (seed ${seed})`, () => {
  it('holds every invariant: nothing acknowledged lost, nothing applied twice, revisions contiguous, timers once, attempts within policy, every job final', () => {
    const { tally, violations } = report;
    expect(violations, `seed ${seed}: ${JSON.stringify(byKind(violations))}`).toEqual([]);
    expect(tally.kills).toBeGreaterThanOrEqual(KILLS);
    expect(tally.workerKills).toBeGreaterThan(KILLS / 2);
    // The run did real work under fire, of every kind the invariants speak about.
    expect(tally.eventsAcked).toBeGreaterThan(100);
    expect(tally.db.jobs).toBeGreaterThan(50);
    expect(tally.db.outcomes['applied']).toBeGreaterThan(100);
    expect(tally.db.timers['delivered']).toBeGreaterThan(0);
    expect(tally.db.attempts).toBeGreaterThan(20);
    expect(tally.duplicatesAcked).toBeGreaterThan(0);
    expect(Object.values(tally.crashPoints).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3);
    // Poison events (crash-tally's POISON) were recorded failed, and did not stop their jobs ending.
    expect(tally.db.outcomes['failed']).toBeGreaterThan(0);
  });

  it(`holds every invariant with ${WORKERS} concurrent workers killed independently: the fencing chain, no attempt overlap while both runners lived`, () => {
    const { tally, violations } = concurrent;
    expect(violations, `seed ${seed} (${WORKERS} workers): ${JSON.stringify(byKind(violations))}`).toEqual([]);
    expect(tally.kills).toBeGreaterThanOrEqual(KILLS);
    // The workers really ran at the same time, and did work of every kind under fire.
    expect(tally.maxConcurrentWorkers).toBeGreaterThanOrEqual(2);
    expect(tally.concurrentMs).toBeGreaterThan(1000);
    expect(tally.eventsAcked).toBeGreaterThan(100);
    expect(tally.db.outcomes['applied']).toBeGreaterThan(100);
    expect(tally.db.timers['delivered']).toBeGreaterThan(0);
    expect(tally.crashPoints['worker:after-claim']).toBeGreaterThan(0);
    expect(tally.db.interruptedAttempts).toBeGreaterThan(0);
    expect(tally.db.overlapPairsChecked).toBeGreaterThan(0);
    expect(tally.db.overlapPairsSkipped).toBe(0);
  });

  it('catches a broken fencing chain and an attempt that overlapped a live runner', () => {
    const acks = concurrent.acks;
    const broken = (name: string, sql: (db: Database.Database) => void) => {
      const path = join(res.tempDir(), `${name}.db`);
      copyFileSync(concurrent.dbPath, path);
      const db = res.raw(path);
      sql(db);
      db.close();
      return Object.keys(byKind(checkInvariants(path, acks, concurrent.workers).violations)).sort();
    };
    expect(broken('intact', () => undefined)).toEqual([]);
    expect(
      broken('fork', (db) =>
        db.prepare("UPDATE transitions SET from_value = '\"forked\"' WHERE (job_id, revision) = (SELECT job_id, revision FROM transitions WHERE revision = 3 LIMIT 1)").run(),
      ),
    ).toContain('fencing-chain');
    expect(
      broken('two-owners', (db) => {
        // A commit under a fence another runner claimed: two owners at once.
        const r = db
          .prepare('SELECT t2.job_id, t2.fence FROM transitions t2 JOIN transitions t3 ON t3.job_id = t2.job_id AND t3.revision = 3 WHERE t2.revision = 2 LIMIT 1')
          .get() as { job_id: string; fence: number };
        db.prepare("UPDATE transitions SET runner = 'intruder', fence = ? WHERE job_id = ? AND revision = 3").run(r.fence, r.job_id);
      }),
    ).toContain('lease-fence');
    expect(
      broken('fence-back', (db) => {
        // A commit under an older fence after a newer one (every commit after the first holds fence >= 1).
        const r = db.prepare('SELECT job_id, revision FROM transitions WHERE revision = 3 LIMIT 1').get() as { job_id: string; revision: number };
        db.prepare('UPDATE transitions SET fence = 0 WHERE job_id = ? AND revision = ?').run(r.job_id, r.revision);
      }),
    ).toContain('lease-fence');
    expect(
      broken('overlap', (db) => {
        // Two attempts of one effect, the second started while the first's runner lived and ran.
        const a = db.prepare('SELECT effect_id, attempt, runner, started_at FROM effect_attempts WHERE attempt = 2 LIMIT 1').get() as { effect_id: string; started_at: number };
        db.prepare('UPDATE effect_attempts SET ended_at = NULL, started_at = ? WHERE effect_id = ? AND attempt = 1').run(a.started_at - 1, a.effect_id);
        db.prepare('UPDATE effect_attempts SET runner = (SELECT runner FROM effect_attempts WHERE effect_id = ? AND attempt = 2) WHERE effect_id = ? AND attempt = 1').run(a.effect_id, a.effect_id);
      }),
    ).toContain('attempt-overlap');
  });

  it('catches a database broken in each way it checks for (the checks are not vacuous)', () => {
    const acks = acksOf(report);
    const workers: WorkerLog = { fired: new Map(), attempts: new Map() };
    const broken = (name: string, sql: (db: Database.Database) => void, log: WorkerLog = workers) => {
      const path = join(res.tempDir(), `${name}.db`);
      copyFileSync(report.dbPath, path);
      const db = res.raw(path);
      sql(db);
      db.close();
      return Object.keys(byKind(checkInvariants(path, acks.entries, log).violations)).sort();
    };
    expect(broken('intact', () => undefined)).toEqual([]);

    const { jobId, eventId } = acks.applied;
    // The event's record is in the inbox, or (applied as it was accepted) in its history row alone.
    const forget = (db: Database.Database) => {
      db.prepare('DELETE FROM inbox WHERE job_id = ? AND event_id = ?').run(jobId, eventId);
      db.prepare('UPDATE transitions SET event_id = NULL, payload_hash = NULL WHERE job_id = ? AND event_id = ? AND payload_hash IS NOT NULL').run(jobId, eventId);
    };
    expect(broken('lost', forget)).toContain('lost-ack');
    expect(
      broken('pending', (db) => {
        db.prepare(`INSERT INTO inbox (job_id, event_id, type, payload, payload_hash, status, accepted_at)
          SELECT job_id, event_id, event_type, payload, payload_hash, 'pending', at FROM transitions WHERE job_id = ? AND event_id = ? AND payload_hash IS NOT NULL`).run(jobId, eventId);
        db.prepare('UPDATE transitions SET event_id = NULL, payload_hash = NULL WHERE job_id = ? AND event_id = ? AND payload_hash IS NOT NULL').run(jobId, eventId);
        db.prepare("UPDATE inbox SET status = 'pending', revision = NULL WHERE job_id = ? AND event_id = ?").run(jobId, eventId);
      }),
    ).toEqual(expect.arrayContaining(['ack-mismatch', 'pending-left']));
    expect(
      broken('twice', (db) => {
        const job = db.prepare('SELECT revision FROM jobs WHERE id = ?').get(jobId) as { revision: number };
        db.prepare(`INSERT INTO transitions (job_id, revision, event_id, event_type, payload, from_value, to_value, outcome, error, at)
          SELECT job_id, ?, event_id, event_type, payload, to_value, to_value, outcome, error, at FROM transitions WHERE job_id = ? AND event_id = ?`).run(job.revision + 1, jobId, eventId);
        db.prepare('UPDATE jobs SET revision = revision + 1 WHERE id = ?').run(jobId);
      }),
    ).toContain('double-apply');
    expect(broken('gap', (db) => db.prepare('DELETE FROM transitions WHERE job_id = ? AND revision = 2').run(acks.tally))).toContain('revision-gap');
    expect(broken('context', (db) => db.prepare("UPDATE jobs SET context = json_set(context, '$.ops', 999) WHERE id = ?").run(acks.tally))).toContain('replay-mismatch');
    expect(broken('active', (db) => db.prepare("UPDATE jobs SET status = 'active' WHERE id = ?").run(acks.tally))).toContain('not-final');
    expect(
      broken('leak', (db) => db.prepare(`UPDATE transitions SET error = json_object('message', 'card ${SECRET_MARK}-1-1') WHERE job_id = ? AND revision = 2`).run(acks.tally)),
    ).toContain('secret-leaked');
    expect(
      broken('attempts', (db) => {
        const e = db.prepare('SELECT id, attempt, max_attempts FROM effects ORDER BY id LIMIT 1').get() as { id: string; attempt: number; max_attempts: number };
        for (let n = e.attempt + 1; n <= e.max_attempts + 1; n += 1) {
          db.prepare("INSERT INTO effect_attempts (effect_id, attempt, runner, started_at, outcome) VALUES (?, ?, 'x', 0, 'interrupted')").run(e.id, n);
        }
        db.prepare('UPDATE effects SET attempt = ? WHERE id = ?').run(e.max_attempts + 1, e.id);
      }),
    ).toContain('attempts-exceeded');
    expect(broken('timer', (db) => db.prepare("UPDATE timers SET status = 'scheduled' WHERE id = (SELECT id FROM timers WHERE status = 'delivered' LIMIT 1)").run())).toContain('timer-state');
    const someTimer = (() => {
      const db = res.raw(report.dbPath, { readonly: true });
      const t = db.prepare("SELECT id FROM timers WHERE status = 'delivered' LIMIT 1").get() as { id: string };
      db.close();
      return t.id;
    })();
    expect(broken('fired-twice', () => undefined, { fired: new Map([[someTimer, 2]]), attempts: new Map() })).toEqual(['timer-twice']);
  });
});

/** The acknowledgement log of the run (kept on the report for this test) and a few handy picks. */
function acksOf(r: CrashReport): { entries: AckEntry[]; applied: { jobId: string; eventId: string }; tally: string } {
  const entries = r.acks;
  const applied = entries.find((a) => a.cmd.op === 'send' && a.answer.type === 'ack' && a.answer['status'] === 'applied' && a.cmd.jobId.includes('crash-tally'));
  if (!applied || applied.cmd.op !== 'send') throw new Error('the run acknowledged no applied tally event');
  return { entries, applied: { jobId: applied.cmd.jobId, eventId: applied.cmd.eventId }, tally: applied.cmd.jobId };
}
