/**
 * `npm run bench -- --profile`: where one Spool `send` spends its time beyond the raw limit.
 *
 * A. The real send loop with a timing proxy around the store: store calls per send and their
 *    cost, the rest being engine work (validation, hashing, hydration, transition, serialisation).
 * B. Each step of the send path timed on its own (µs/op, median of repeats), on the same
 *    machine, snapshot and event, to split the engine remainder.
 * C. WAL frames written per commit (Spool vs raw): what a FULL commit has to write and sync.
 *
 * The engine steps in B call the engine's own functions (hydrate.ts, json.ts and the pure step,
 * src/step), never copies of them, so the profile measures what a send runs.
 */
import Database from 'better-sqlite3';
import { hashJson, toJson } from '../src/base/json.ts';
import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createActor, transition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { hydrate, parseSnapshot } from '../src/base/hydrate.ts';
import { transitionInScope } from '../src/step/childScope.ts';
import { jobColumns, persistedJson } from '../src/step/columns.ts';
import { step, type StepInput } from '../src/step/step.ts';
import { createRuntime, type JobRecord, type RegisteredMachine, type TransitionCommit } from '../src/internal.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { jobLifecycle } from '../machines/index.ts';
import { runRaw, type Synchronous } from './rawRun.ts';
import { runSpool } from './spoolRun.ts';
import { median } from './stats.ts';
import { countingStore, StoreCounter } from './countingStore.ts';
import { freshDbPath } from './tempDb.ts';
import { JOB_INPUT, MACHINE_ID, persistedSnapshotTemplate, progressEvent } from './workload.ts';

interface ProfileOptions {
  durationMs: number;
  warmupOps: number;
  gc: () => void;
}

export async function runProfile(options: ProfileOptions): Promise<void> {
  console.log('Spool send profile (job-lifecycle PROGRESS, one event = one commit)\n');
  await inRunBreakdown(options);
  options.gc();
  await stepCosts();
  options.gc();
  await walFrames();
}

// ------------------------------------------------------------------ A. store calls inside real sends

async function inRunBreakdown(options: ProfileOptions): Promise<void> {
  console.log('A. Inside real sends (store wrapped in a timing proxy)');
  for (const synchronous of ['NORMAL', 'FULL'] as const) {
    options.gc();
    const rawRun = runRaw({ synchronous, durationMs: Math.min(options.durationMs, 1500), warmupOps: options.warmupOps });
    const counter = new StoreCounter();
    const result = await runSpool({
      synchronous,
      durationMs: options.durationMs,
      warmupOps: options.warmupOps,
      wrapStore: (store) => countingStore(store, counter),
      onMeasureStart: () => counter.reset(),
    });
    const perSendUs = 1e6 / result.perSec;
    const sends = result.ops;
    const rows = [...counter.calls.entries()].filter(([, t]) => t.calls / sends >= 0.01).sort((a, b) => b[1].ms - a[1].ms);
    const storeUs = rows.reduce((n, [, t]) => n + (t.ms * 1000) / sends, 0);
    console.log(
      `  ${synchronous}: ${fmt(result.perSec)} sends/s = ${perSendUs.toFixed(1)} µs/send; raw limit ${fmt(rawRun.perSec)}/s = ${(1e6 / rawRun.perSec).toFixed(1)} µs/commit`,
    );
    for (const [name, t] of rows) {
      console.log(`    store.${name.padEnd(14)} ${(t.calls / sends).toFixed(2)} calls/send  ${((t.ms * 1000) / sends).toFixed(1).padStart(6)} µs/send`);
    }
    console.log(`    ${'store total'.padEnd(20)} ${''.padEnd(15)} ${storeUs.toFixed(1).padStart(6)} µs/send`);
    console.log(`    ${'engine + awaits'.padEnd(20)} ${''.padEnd(15)} ${(perSendUs - storeUs).toFixed(1).padStart(6)} µs/send\n`);
  }
}

// ------------------------------------------------------------------ B. each step on its own

/** µs per call: `iterations` calls, repeated, median of the repeats (first repeat is warm-up). */
function usPerOp(iterations: number, fn: (i: number) => unknown, repeats = 6): number {
  const results: number[] = [];
  let sink: unknown;
  let i = 0;
  for (let r = 0; r < repeats; r += 1) {
    const t0 = performance.now();
    for (let k = 0; k < iterations; k += 1) sink = fn(i++);
    const us = ((performance.now() - t0) * 1000) / iterations;
    if (r > 0) results.push(us);
  }
  if (sink === Symbol.for('never')) console.log('');
  return median(results);
}

async function usPerOpAsync(iterations: number, fn: (i: number) => Promise<unknown>, repeats = 6): Promise<number> {
  const results: number[] = [];
  let i = 0;
  for (let r = 0; r < repeats; r += 1) {
    const t0 = performance.now();
    for (let k = 0; k < iterations; k += 1) await fn(i++);
    const us = ((performance.now() - t0) * 1000) / iterations;
    if (r > 0) results.push(us);
  }
  return median(results);
}


/** B: each step of a send timed on its own, on a job with ~2k events of history. */
async function stepCosts(): Promise<void> {
  console.log('B. Steps of one send, each timed alone (µs/op, NORMAL, job with ~2k events of history)');
  const tmp = freshDbPath('profile-steps');
  const store = await SqliteStore.open(tmp.path, { synchronous: 'NORMAL' });
  const runtime = await createRuntime({ store, machines: [jobLifecycle] });
  const add: AddStep = (name, us, note = '') => {
    console.log(`    ${name.padEnd(58)} ${us.toFixed(2).padStart(7)} µs  ${note}`);
  };
  try {
    const job = await runtime.start(MACHINE_ID, JOB_INPUT);
    await runtime.send(job.id, { type: 'START' });
    for (let i = 0; i < 2000; i += 1) await runtime.send(job.id, progressEvent(i));
    // Typed loosely, as the runtime holds it (RegisteredMachine.machine is an AnyStateMachine).
    const machine: AnyStateMachine = jobLifecycle.machine;
    const record = (await store.getJob(job.id))!;
    const snapshotText = record.snapshot;
    const event = progressEvent(42);

    await timeBeforeTransaction(add, store, job.id, event);

    console.log('  hydrate and transition:');
    const def = runtime.registry.latest(MACHINE_ID);
    add('parseSnapshot: JSON.parse(snapshot)', usPerOp(20000, () => parseSnapshot(snapshotText)));
    const hydrateOnce = () => {
      const json = parseSnapshot(snapshotText);
      if (typeof json === 'string') throw new Error(`profile: ${json}`);
      const h = hydrate(def, json, record.status);
      if (!h.ok) throw new Error(`profile: ${h.reason}`);
      return h;
    };
    add('hydrate(): createActor(machine, { snapshot }).getSnapshot()', usPerOp(5000, () => hydrateOnce()));
    const { snapshot: hydrated, actor } = hydrateOnce();
    add('toJson(event): the event copy XState gets', usPerOp(20000, () => toJson(event)));
    add('xstate transition(machine, snapshot, event)', usPerOp(5000, (i) => transition(machine, hydrated, progressEvent(i))));
    add('  of which createActor(machine) for the inert scope', usPerOp(5000, () => createActor(machine)), '← getInitialSnapshot(): context factory runs with input undefined and throws');
    add('transitionInScope(machine, actor, snapshot, event)', usPerOp(5000, (i) => transitionInScope(machine, actor, hydrated, progressEvent(i))), '← what the step runs: the job\'s own actor lends its scope');
    const stepInput = (i: number): StepInput => ({
      job: record,
      def,
      snapshot: hydrated,
      actor,
      event: progressEvent(i),
      source: { accept: { jobId: job.id, eventId: `bench-${i}`, type: 'PROGRESS', payload: progressEvent(i), payloadHash: 'x'.repeat(32), at: Date.now() } },
      now: Date.now(),
      machines: (id, version) => runtime.registry.get(id, version),
      runner: runtime.runnerId,
    });
    add('step(): transition + plan + snapshot JSON + commit draft', usPerOp(5000, (i) => step(stepInput(i))), '← the whole pure step');
    const next = transition(machine, hydrated, event)[0];

    timeCommitBuilding(add, def, record, next, snapshotText);

    await timeWriteTransaction(add, store, job.id, stepInput);
  } finally {
    await runtime.close();
    tmp.dispose();
  }
  console.log('');
}

/** Record and print one step's µs/op, with an optional note. */
type AddStep = (name: string, us: number, note?: string) => void;

/** The part of send() before the transaction: the event id, the payload copy, validation, hashing, the reads. */
async function timeBeforeTransaction(add: AddStep, store: SqliteStore, jobId: string, event: ReturnType<typeof progressEvent>): Promise<void> {
  const schema = jobLifecycle.events.PROGRESS;
  console.log('  send() before the transaction:');
  add('randomUUID() event id', usPerOp(20000, () => randomUUID()));
  add('#jsonPayload: JSON.stringify + byteLength + JSON.parse', usPerOp(20000, () => JSON.parse(JSON.stringify(event))));
  add('zod safeParse(PROGRESS) + toJson', usPerOp(20000, () => toJson(schema.safeParse(event).data)));
  add('hashJson(payload) (sortKeys + sha256)', usPerOp(20000, () => hashJson(event)));
  add('store.getJob (SELECT * + 3 JSON.parse) — ×3 per send', await usPerOpAsync(5000, () => store.getJob(jobId)));
  add('store.pendingEvents(jobId, 1) — empty', await usPerOpAsync(5000, () => store.pendingEvents(jobId, 1)));
  add('store.getEvent(jobId, eventId) — #outcome', await usPerOpAsync(5000, () => store.getEvent(jobId, 'missing')));
}

/** Building the commit and the result from the transition's next snapshot. */
function timeCommitBuilding(add: AddStep, def: RegisteredMachine, record: JobRecord, next: AnyMachineSnapshot, snapshotText: string): void {
  console.log('  building the commit and the result:');
  add('persistedJson: getPersistedSnapshot + JSON.stringify', usPerOp(20000, () => persistedJson(def, next)));
  add('jobColumns: toJson(value, context) + statePaths + progress', usPerOp(20000, () => jobColumns(record, def, next, snapshotText, 0)));
  add('toJob(): JSON.parse(snapshot) for `output` — ×2 per send', usPerOp(20000, () => JSON.parse(snapshotText)));
}

/** The write transaction: store.commit of the step's commit, its transaction wrappers and savepoint, beside the raw limit's step. */
async function timeWriteTransaction(add: AddStep, store: SqliteStore, jobId: string, stepInput: (i: number) => StepInput): Promise<void> {
  console.log('  the write transaction:');
  let revision = (await store.getJob(jobId))!.revision;
  // The commit the step builds, under a new event id and the current revision each time.
  const prepared = step(stepInput(0)).commit;
  const settled = prepared.event!;
  const commitFor = (i: number): TransitionCommit => {
    const eventId = `bench-${i}-${revision}`;
    const accept = { ...settled.accept!, eventId };
    return { ...prepared, expectedRevision: revision, transition: { ...prepared.transition, eventId }, event: { accept, status: settled.status, error: settled.error, payload: settled.payload } };
  };
  add('store.commit([one]) (UPDATE + transitions INSERT + inbox INSERT)', await usPerOpAsync(3000, async (i) => {
    const [r] = await store.commit([commitFor(i)]);
    if (!r?.ok) throw new Error(`profile: commit failed ${JSON.stringify(r)}`);
    revision = r.revision;
  }));
  const db = store.db;
  add('  of which db.transaction(fn) wrapper creation (2 per commit)', usPerOp(20000, () => db.transaction(() => 0)));
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const savepoint = db.prepare('SAVEPOINT s');
  const release = db.prepare('RELEASE s');
  add('  of which SAVEPOINT + RELEASE (nested transaction)', usPerOp(20000, () => {
    begin.run();
    savepoint.run();
    release.run();
    commit.run();
  }) - usPerOp(20000, () => {
    begin.run();
    commit.run();
  }));
  add('raw limit step (UPDATE + INSERT, one IMMEDIATE tx)', rawStepUs('NORMAL'));
}

function rawStepUs(synchronous: Synchronous): number {
  const r = runRaw({ synchronous, durationMs: 1000, warmupOps: 300 });
  return 1e6 / r.perSec;
}

// ------------------------------------------------------------------ C. WAL frames per commit

async function walFrames(): Promise<void> {
  console.log('C. WAL frames (4 KiB pages) written per commit, autocheckpoint off, 500 commits');
  const n = 500;
  const frameBytes = 4096 + 24;
  // Spool
  {
    const tmp = freshDbPath('profile-wal');
    const store = await SqliteStore.open(tmp.path, { synchronous: 'NORMAL' });
    const runtime = await createRuntime({ store, machines: [jobLifecycle] });
    try {
      const job = await runtime.start(MACHINE_ID, JOB_INPUT);
      await runtime.send(job.id, { type: 'START' });
      for (let i = 0; i < 200; i += 1) await runtime.send(job.id, progressEvent(i));
      store.db.pragma('wal_checkpoint(TRUNCATE)');
      store.db.pragma('wal_autocheckpoint = 0');
      for (let i = 0; i < n; i += 1) await runtime.send(job.id, progressEvent(i));
      const frames = (statSync(`${tmp.path}-wal`).size - 32) / frameBytes / n;
      console.log(`    Spool send: ${frames.toFixed(2)} frames/commit (default autocheckpoint 1000 → a checkpoint every ~${Math.round(1000 / frames)} commits)`);
    } finally {
      await runtime.close();
      tmp.dispose();
    }
  }
  // Raw
  {
    const tmp = freshDbPath('profile-wal-raw');
    const db = new Database(tmp.path);
    try {
      db.pragma('journal_mode = WAL');
      db.exec(`CREATE TABLE jobs (id TEXT PRIMARY KEY, revision INTEGER NOT NULL, snapshot TEXT NOT NULL, updated_at INTEGER NOT NULL) STRICT;
        CREATE TABLE transitions (job_id TEXT NOT NULL, revision INTEGER NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL,
          at INTEGER NOT NULL, PRIMARY KEY (job_id, revision)) STRICT, WITHOUT ROWID;`);
      const template = persistedSnapshotTemplate();
      db.prepare('INSERT INTO jobs VALUES (?, 1, ?, 0)').run('j', JSON.stringify(template));
      const update = db.prepare('UPDATE jobs SET revision = revision + 1, snapshot = ?, updated_at = ? WHERE id = ? AND revision = ?');
      const insert = db.prepare('INSERT INTO transitions VALUES (?, ?, ?, ?, ?)');
      let revision = 1;
      const step = db.transaction((i: number) => {
        update.run(JSON.stringify({ ...template, context: { ...template.context, progress: i % 101 } }), Date.now(), 'j', revision);
        revision += 1;
        insert.run('j', revision, 'PROGRESS', JSON.stringify(progressEvent(i)), Date.now());
      });
      for (let i = 0; i < 200; i += 1) step.immediate(i);
      db.pragma('wal_checkpoint(TRUNCATE)');
      db.pragma('wal_autocheckpoint = 0');
      for (let i = 0; i < n; i += 1) step.immediate(i);
      const frames = (statSync(`${tmp.path}-wal`).size - 32) / frameBytes / n;
      console.log(`    raw limit:  ${frames.toFixed(2)} frames/commit (a checkpoint every ~${Math.round(1000 / frames)} commits)`);
    } finally {
      db.close();
      tmp.dispose();
    }
  }
  console.log('');
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
