/**
 * The crash harness ("proof under fire"): real processes on one real SQLite file, killed at random
 * moments and at the engine's named crash points, then checked against what they acknowledged.
 *
 * Set-up: N worker processes at once (`workers`, default 1; `runWorker` on the real clock:
 * activities, retries, timers, recovery, takeover of a dead runner's attempts) plus ONE client
 * process that starts jobs, sends events (through a queue-only runtime and through an applying,
 * CLI-like runtime: a second writer of transitions), sends duplicates and conflicting resends, and
 * cancels. Each of the N worker slots runs its rounds independently of the others.
 *
 * Each round (of one slot): the slot's standby worker (spawned during the previous round, modules loaded, database not
 * yet opened) is told `go`; once it prints `ready` the round's commands go to the client, and the
 * worker is SIGKILLed 0-`maxKillDelayMs` ms later (sqlite-facts: "Crash harness technique"), or, when
 * it was armed with `SPOOL_CRASH_AT=<point>:<n>`, when it reaches that point (or is killed after
 * `armedKillDelayMs` if it does not). The client is killed now and then too, and is sometimes armed
 * itself; every command it had not answered is sent again, with the same ids, to its successor
 * (the sender retries what it is not sure of). Waits are on child output lines or on database
 * predicates checked on each line; the only timers are the kill schedule and safety limits.
 *
 * Final phase: every remaining scripted command is sent through an unarmed client, an unarmed
 * worker runs until every job is final and nothing is pending (checked on each of its lines), it
 * is stopped with SIGTERM, and the invariants (invariants.ts) are checked against the file, the
 * client's acknowledgement log and the workers' lines.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { ChildScript, type Line } from '../helpers/proc.ts';
import { checkInvariants, type AckEntry, type Answer, type DatabaseTally, type Violation, type WorkerLog } from './invariants.ts';
import { rng, Workload, type Command } from './workload.ts';
import { copyPostgresToSqlite, watchPostgres } from './postgres.ts';

const WORKER_CHILD = fileURLToPath(new URL('./workerChild.ts', import.meta.url));
const CLIENT_CHILD = fileURLToPath(new URL('./clientChild.ts', import.meta.url));

/** Crash points a worker passes (it applies events; it never accepts one through `send`). */
export const WORKER_CRASH_POINTS = ['before-commit', 'after-commit', 'after-claim', 'before-outcome', 'after-outcome', 'after-fire'] as const;
/** Crash points the client passes: `after-accept` on its queue path, the others on its applying path. */
export const CLIENT_CRASH_POINTS = ['after-accept', 'before-commit', 'after-commit'] as const;

export interface CrashOptions {
  /** SIGKILLs to deliver, worker and client together (crash points that fire count as kills). */
  kills: number;
  /**
   * Worker processes running concurrently on the file, each killed and replaced independently.
   * Default 1. With N > 1 the final phase also runs N workers.
   */
  workers?: number;
  /** Seed of the workload and of the harness's random choices (which also depend on timing). Default: random. */
  seed?: number;
  /** Directory for the database file (created if missing); on Postgres, for the copy the checks read. */
  dir: string;
  /** A `postgres://` URL: run on that (empty) Postgres database instead of a SQLite file in `dir`. */
  db?: string;
  /**
   * Restart the database server this many times, spread evenly over the kills (every connection
   * dropped mid-run), with `restartServer`. Default 0.
   */
  serverRestarts?: number;
  /** How to restart the server (e.g. {@link restartPostgres}); needed when `serverRestarts` > 0. */
  restartServer?: () => Promise<void>;
  /** Upper bound of the random delay between a worker's `ready` and its SIGKILL, in ms. Default 40 (800 with several workers). */
  maxKillDelayMs?: number;
  /** How long an armed worker gets to reach its crash point before it is killed anyway. Default 300 (1000 with several workers). */
  armedKillDelayMs?: number;
  /**
   * Go on past `kills` (arming every further worker) until at least this many deaths came from a
   * crash point, up to twice `kills` kills in all. Default 0. How soon an armed worker reaches its
   * point depends on the machine's speed; this keeps a short run from passing none.
   */
  minCrashPoints?: number;
  /**
   * Worker crash points that must each have caused a death: while one has not, every further worker
   * is armed at one of those still missing (up to twice `kills` kills in all). Default none. What a
   * run checks happened (an attempt interrupted: `after-claim`) then does not hang on when the
   * random kills land.
   */
  needCrashPoints?: readonly (typeof WORKER_CRASH_POINTS)[number][];
  /** Chance that a worker is armed at a crash point. Default 0.4. */
  armWorker?: number;
  /** Chance, per round, that the client is SIGKILLed too. Default 0.1. */
  killClient?: number;
  /** Chance that a (re)started client is armed at a crash point. Default 0.3. */
  armClient?: number;
  /** Client commands per round. Default 12. */
  commandsPerRound?: number;
  /** Worker poll interval. Default 10 ms. */
  pollMs?: number;
  /**
   * Each worker puts its SQLite store behind the asynchronous boundary of the `async-store` test
   * project (test/helpers/asyncStore.ts): every store call resolves macrotasks later, calls in
   * flight execute and resolve in either order. Its hops are seeded from `seed` and the worker's
   * number. Default false.
   */
  asyncStore?: boolean;
  /** Safety limit of the final phase (a run that does not settle is reported `stuck`). Default 60000. */
  settleLimitMs?: number;
  /** Called after every round. */
  onProgress?: (p: Progress) => void;
}

export interface Progress {
  round: number;
  kills: number;
  target: number;
  acked: number;
  jobs: number;
  elapsedMs: number;
}

export interface Tally {
  seed: number;
  workers: number;
  /** Whether the workers' stores were behind the asynchronous boundary. */
  asyncStore: boolean;
  /** Most workers past `ready` and not yet dead at one moment, and for how long >= 2 were. */
  maxConcurrentWorkers: number;
  concurrentMs: number;
  rounds: number;
  kills: number;
  workerKills: number;
  clientKills: number;
  /** Crash points that fired, by `where:name`. */
  crashPoints: Record<string, number>;
  commands: number;
  /** Commands answered with an acknowledgement (an event acknowledged is in the inbox). */
  acked: number;
  eventsAcked: number;
  duplicatesAcked: number;
  conflictsRefused: number;
  terminalRefusals: number;
  /** Commands sent again to a new client because the previous one died before answering. */
  resent: number;
  timersFiredLines: number;
  attemptsClaimedLines: number;
  db: DatabaseTally;
  /** Times the database server was restarted mid-run. */
  serverRestarts: number;
  durationMs: number;
}

export interface CrashReport {
  dbPath: string;
  tally: Tally;
  violations: Violation[];
  /** The client's acknowledgement log, in arrival order. */
  acks: AckEntry[];
  /** What the workers printed: timers fired, attempts claimed. */
  workers: WorkerLog;
}

/** Violations counted by kind. */
export function byKind(violations: readonly Violation[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of violations) out[v.kind] = (out[v.kind] ?? 0) + 1;
  return out;
}

const live = new Set<ChildScript>();

function spawn(script: string, args: string[], env: Record<string, string>): ChildScript {
  const child = new ChildScript(script, args, env);
  child.proc.stdin.on('error', () => undefined); // writing to a child that was just killed: EPIPE
  live.add(child);
  void child.exited.then(() => live.delete(child));
  return child;
}

/** SIGKILL every child process this harness started that is still running (by its own pid). */
async function killAll(): Promise<void> {
  await Promise.all([...live].map((c) => c.kill('SIGKILL')));
}

interface WorkerProc {
  child: ChildScript;
  arm: string | null;
  killedByUs: boolean;
}

/** The client process and what it owes: commands in order, re-sent to a new client after a crash. */
class Client {
  readonly #dbPath: string;
  readonly #random: () => number;
  readonly #onAnswer: (cmd: Command, answer: Answer) => void;
  readonly #onExit: (exit: { arm: string | null; signal: NodeJS.Signals | null; code: number | null; byUs: boolean; stderr: string }) => void;
  readonly #queue: Command[] = [];
  readonly #inflight: Command[] = [];
  readonly #idle = new Set<() => void>();
  #child: ChildScript | undefined;
  #arm: string | null = null;
  #ready = false;
  #killedByUs = false;
  #stopping = false;
  armChance: number;
  resent = 0;

  constructor(
    dbPath: string,
    random: () => number,
    armChance: number,
    onAnswer: (cmd: Command, answer: Answer) => void,
    onExit: (exit: { arm: string | null; signal: NodeJS.Signals | null; code: number | null; byUs: boolean; stderr: string }) => void,
  ) {
    this.#dbPath = dbPath;
    this.#random = random;
    this.armChance = armChance;
    this.#onAnswer = onAnswer;
    this.#onExit = onExit;
  }

  get armed(): boolean {
    return this.#arm !== null;
  }

  start(): void {
    this.#arm = this.#random() < this.armChance ? `${CLIENT_CRASH_POINTS[Math.floor(this.#random() * CLIENT_CRASH_POINTS.length)]}:${1 + Math.floor(this.#random() * 12)}` : null;
    this.#ready = false;
    this.#killedByUs = false;
    const child = spawn(CLIENT_CHILD, [this.#dbPath], this.#arm ? { SPOOL_CRASH_AT: this.#arm } : {});
    this.#child = child;
    child.onLine((line: Line) => {
      if (line.type === 'ready') {
        this.#ready = true;
        this.#pump();
      } else if (line.type === 'ack' || line.type === 'err') {
        const i = this.#inflight.findIndex((c) => c.id === line['id']);
        if (i < 0) return;
        const [cmd] = this.#inflight.splice(i, 1);
        this.#onAnswer(cmd!, line as Answer);
        this.#pump();
      } else if (line.type === '(exit)') {
        this.#ready = false;
        this.#child = undefined;
        this.resent += this.#inflight.length;
        this.#queue.unshift(...this.#inflight.splice(0));
        this.#onExit({ arm: this.#arm, signal: (line['signal'] as NodeJS.Signals | null) ?? null, code: (line['code'] as number | null) ?? null, byUs: this.#killedByUs, stderr: child.stderr });
        if (!this.#stopping) this.start();
      }
    });
  }

  submit(commands: readonly Command[]): void {
    this.#queue.push(...commands);
    this.#pump();
  }

  #pump(): void {
    const child = this.#child;
    if (child && this.#ready) {
      while (this.#queue.length > 0 && this.#inflight.length < 8) {
        const cmd = this.#queue.shift()!;
        this.#inflight.push(cmd);
        child.proc.stdin.write(`${JSON.stringify(cmd)}\n`);
      }
    }
    if (this.#queue.length === 0 && this.#inflight.length === 0 && this.#ready) for (const resolve of [...this.#idle]) resolve();
  }

  /** Resolves when every submitted command has been answered. */
  whenIdle(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.#idle.delete(done);
        resolve();
      };
      this.#idle.add(done);
      this.#pump();
    });
  }

  /** SIGKILL the current client (a new one is started and gets the unanswered commands). */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#killedByUs = true;
    await child.kill('SIGKILL');
  }

  /** Ask the client to close its runtimes and exit. */
  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.#stopping = true;
    const child = this.#child;
    if (!child) return { code: 0, signal: null };
    child.proc.stdin.write(`${JSON.stringify({ op: 'exit' })}\n`);
    return child.exited;
  }
}

/** Resolve when `predicate()` holds: checked now and on every line any of `children` prints; rejects at `limitMs` or if one exits. */
function until(children: readonly ChildScript[], predicate: () => boolean, limitMs: number, onChange?: (listener: () => void) => () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const safety = setTimeout(() => finish(new Error(`not settled within ${limitMs} ms`)), limitMs);
    // Also between lines: a probe that reads asynchronously (Postgres) tells when a new read lands.
    const offChange = onChange?.(() => predicate() && finish());
    let done = false;
    const finish = (error?: Error) => {
      if (done) return;
      done = true;
      for (const off of offs) off();
      offChange?.();
      clearTimeout(safety);
      if (error) reject(error);
      else resolve();
    };
    const offs = children.map((child) =>
      child.onLine((line) => {
        if (line.type === '(exit)') finish(new Error(`a final worker exited (code ${String(line['code'])}, signal ${String(line['signal'])}); stderr:\n${child.stderr}`));
        else if (predicate()) finish();
      }),
    );
    if (predicate()) finish();
  });
}

/**
 * Run the harness. Resolves with the tally and every violation found (an empty list is a pass).
 *
 * @example
 * const report = await runCrashHarness({ kills: 60, seed: 1, dir: '.vitest-tmp/crash' });
 * expect(report.violations).toEqual([]);
 */
export async function runCrashHarness(options: CrashOptions): Promise<CrashReport> {
  const began = performance.now();
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const random = rng(seed ^ 0x5eed);
  const workerCount = Math.max(1, Math.floor(options.workers ?? 1));
  // With several workers a life must last about as long as a standby takes to load, or they
  // would rarely overlap: 0-800 ms (still 0-40 ms in 5% of lives), armed ones up to 1 s.
  const maxKillDelayMs = options.maxKillDelayMs ?? (workerCount > 1 ? 800 : 40);
  const armedKillDelayMs = options.armedKillDelayMs ?? (workerCount > 1 ? 1000 : 300);
  const armWorker = options.armWorker ?? 0.4;
  const killClient = options.killClient ?? 0.1;
  const perRound = options.commandsPerRound ?? 12;
  const pollMs = String(options.pollMs ?? 10);
  mkdirSync(options.dir, { recursive: true });
  const dbPath = join(options.dir, 'crash.db');
  // What the children open: the SQLite file, or the Postgres database (copied to dbPath for the checks).
  const target = options.db ?? dbPath;
  const restarts = options.serverRestarts ?? 0;
  if (restarts > 0 && !options.restartServer) throw new Error('crash harness: serverRestarts needs restartServer');
  let serverRestarts = 0;

  const violations: Violation[] = [];
  const acks: AckEntry[] = [];
  const acked = new Set<string>();
  const workers: WorkerLog = { fired: new Map(), attempts: new Map(), lives: new Map() };
  const lives = workers.lives!;
  let runningWorkers = 0;
  let maxConcurrentWorkers = 0;
  let concurrentMs = 0;
  let concurrentSince = 0;
  const setRunning = (delta: number) => {
    const before = runningWorkers;
    runningWorkers += delta;
    maxConcurrentWorkers = Math.max(maxConcurrentWorkers, runningWorkers);
    if (before < 2 && runningWorkers >= 2) concurrentSince = performance.now();
    else if (before >= 2 && runningWorkers < 2) concurrentMs += performance.now() - concurrentSince;
  };
  const crashPoints: Record<string, number> = {};
  let workerKills = 0;
  let clientKills = 0;
  let commands = 0;
  let seq = 0;
  const workload = new Workload(seed, (id) => acked.has(id));

  const client = new Client(
    target,
    random,
    options.armClient ?? 0.3,
    (cmd, answer) => {
      acks.push({ seq: seq++, cmd, answer });
      if (answer.type === 'ack') acked.add(cmd.id);
    },
    (exit) => {
      if (exit.signal === 'SIGKILL') {
        clientKills += 1;
        if (!exit.byUs && exit.arm) crashPoints[`client:${exit.arm.split(':')[0]}`] = (crashPoints[`client:${exit.arm.split(':')[0]}`] ?? 0) + 1;
      } else if (exit.code !== 0) {
        violations.push({ kind: 'client-exit', detail: `client exited with code ${String(exit.code)}; stderr:\n${exit.stderr.slice(0, 2000)}` });
      }
      if (exit.signal !== 'SIGKILL' && exit.stderr.trim() !== '') violations.push({ kind: 'client-exit', detail: `client stderr:\n${exit.stderr.slice(0, 2000)}` });
    },
  );

  let spawned = 0;
  const spawnWorker = (arm: string | null): WorkerProc => {
    spawned += 1;
    const env: Record<string, string> = arm ? { SPOOL_CRASH_AT: arm } : {};
    if (options.asyncStore) env['SPOOL_CRASH_ASYNC_SEED'] = String((Math.imul(seed, 31) + spawned) >>> 0);
    const child = spawn(WORKER_CHILD, [target, pollMs], env);
    const life = { from: Date.now(), to: null as number | null };
    if (child.proc.pid !== undefined) lives.set(child.proc.pid, life);
    let ready = false;
    // Reaped -> 'exit' runs synchronously in this process, before any other worker can see the pid dead.
    child.proc.on('exit', () => {
      life.to = Date.now();
      if (ready) setRunning(-1);
    });
    child.onLine((line) => {
      if (line.type === 'ready') {
        ready = true;
        setRunning(+1);
      } else if (line.type === 'timer') count(workers.fired, line['timerId'] as string);
      else if (line.type === 'attempt') count(workers.attempts, `${line['effectId'] as string}#${String(line['attempt'])}`);
      else if (line.type === 'log') violations.push({ kind: 'worker-error', detail: `${String(line['msg'])}: ${JSON.stringify(line['error'])}` });
    });
    return { child, arm, killedByUs: false };
  };
  const missingPoints = () => (options.needCrashPoints ?? []).filter((p) => !crashPoints[`worker:${p}`]);
  const wantCrashPoints = (): boolean =>
    Object.values(crashPoints).reduce((a, b) => a + b, 0) < (options.minCrashPoints ?? 0) || missingPoints().length > 0;
  const workerArm = (): string | null => {
    const missing = missingPoints();
    const points: readonly string[] = missing.length > 0 ? missing : WORKER_CRASH_POINTS;
    return random() < (wantCrashPoints() ? 1 : armWorker) ? `${points[Math.floor(random() * points.length)]}:${1 + Math.floor(random() * 8)}` : null;
  };

  /** Account for a worker's death; a worker must die only by SIGKILL (ours or its crash point's). */
  const buried = (w: WorkerProc, exit: { code: number | null; signal: NodeJS.Signals | null }) => {
    if (exit.signal === 'SIGKILL') {
      workerKills += 1;
      if (!w.killedByUs && w.arm) crashPoints[`worker:${w.arm.split(':')[0]}`] = (crashPoints[`worker:${w.arm.split(':')[0]}`] ?? 0) + 1;
    } else {
      violations.push({ kind: 'worker-exit', detail: `worker exited with code ${String(exit.code)} signal ${String(exit.signal)}; stderr:\n${w.child.stderr.slice(0, 2000)}` });
    }
    if (exit.signal !== 'SIGKILL' && w.child.stderr.trim() !== '') violations.push({ kind: 'worker-exit', detail: `worker stderr:\n${w.child.stderr.slice(0, 2000)}` });
  };

  let round = 0;
  /** One worker life: `go`, `ready`, a batch of commands for the client, SIGKILL (or its crash point). */
  const life = async (w: WorkerProc): Promise<void> => {
    w.child.proc.stdin.write('go\n');
    await limit(w.child.waitFor((l) => l.type === 'ready'), 30_000).catch(() => undefined);
    round += 1;
    const batch = workload.take(perRound);
    commands += batch.length;
    client.submit(batch);
    // An armed worker gets all of armedKillDelayMs to reach its point; an unarmed one a random moment.
    const delay = w.arm ? armedKillDelayMs : random() * maxKillDelayMs;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([w.child.exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, delay)))]);
    clearTimeout(timer);
    if (w.child.running) {
      w.killedByUs = true;
      await w.child.kill('SIGKILL');
    }
    buried(w, await w.child.exited);
    if (random() < killClient) await client.kill();
    // The server restarts while other workers and the client are mid-commit.
    if (serverRestarts < restarts && workerKills + clientKills >= ((serverRestarts + 1) * options.kills) / (restarts + 1)) {
      serverRestarts += 1;
      await options.restartServer!();
    }
    options.onProgress?.({ round, kills: workerKills + clientKills, target: options.kills, acked: acked.size, jobs: workload.jobs, elapsedMs: performance.now() - began });
  };
  /** A worker slot: lives one after another (the next spawned as a standby while the current runs) until the kills are done. */
  const slot = async (): Promise<WorkerProc> => {
    let standby = spawnWorker(workerArm());
    while (workerKills + clientKills < options.kills || (wantCrashPoints() && workerKills + clientKills < 2 * options.kills)) {
      const w = standby;
      standby = spawnWorker(workerArm());
        await life(w);
    }
    return standby;
  };
  try {
    client.start();
    const finals = await Promise.all(Array.from({ length: workerCount }, () => slot()));

    // ---- final phase: no more arms; every scripted command answered; one worker finishes everything
    client.armChance = 0;
    if (client.armed) await client.kill();
    const rest = workload.drain();
    commands += rest.length;
    client.submit(rest);
    await limit(client.whenIdle(), options.settleLimitMs ?? 60_000).catch((error: Error) => {
      violations.push({ kind: 'stuck', detail: `the client did not answer every command: ${error.message}` });
    });
    const last: WorkerProc[] = [];
    for (const w of finals) {
      if (w.arm) {
        await w.child.kill('SIGKILL');
        last.push(spawnWorker(null));
      } else {
        last.push(w);
      }
    }
    for (const w of last) w.child.proc.stdin.write('go\n');
    const probe = await settleProbe(options.db, dbPath);
    try {
      await until(
        last.map((w) => w.child),
        () => {
          const r = probe.settled();
          if (r === undefined) return false;
          if (r.active === 0 && r.pending === 0) return true;
          const dead = probe.stuck();
          if (dead.length === 0) return false;
          for (const j of dead) violations.push({ kind: 'stuck', jobId: j.id, detail: `active in ${j.value} with nothing pending, scheduled or running${j.quarantine ? `; quarantined: ${j.quarantine}` : ''}` });
          return true;
        },
        options.settleLimitMs ?? 60_000,
        probe.onChange,
      );
    } catch (error) {
      violations.push({ kind: 'stuck', detail: (error as Error).message });
    } finally {
      await probe.close();
    }
    // A final worker may still be loading when the others finished the work: its SIGTERM handler
    // is installed before it prints `ready`, so wait for that line before stopping it.
    await Promise.all(last.map((w) => limit(w.child.waitFor((l) => l.type === 'ready'), 30_000).catch(() => undefined)));
    for (const w of last) w.child.proc.kill('SIGTERM');
    for (const w of last) {
      const exit = await limit(w.child.exited, 15_000).catch(async () => {
        violations.push({ kind: 'worker-exit', detail: 'a final worker did not stop within 15 s of SIGTERM (busy?); killed' });
        return w.child.kill('SIGKILL');
      });
      if (exit.code !== 0 || w.child.stderr.trim() !== '') {
        violations.push({ kind: 'worker-exit', detail: `final worker: code ${String(exit.code)} signal ${String(exit.signal)}; stderr:\n${w.child.stderr.slice(0, 2000)}` });
      }
    }
    const clientExit = await client.stop();
    if (clientExit.code !== 0) violations.push({ kind: 'client-exit', detail: `client did not exit cleanly: ${JSON.stringify(clientExit)}` });
  } finally {
    await killAll();
  }

  if (options.db) await copyPostgresToSqlite(options.db, dbPath);
  const checked = checkInvariants(dbPath, acks, workers);
  violations.push(...checked.violations);
  const sends = acks.filter((a) => a.answer.type === 'ack' && a.cmd.op === 'send');
  if (runningWorkers >= 2) concurrentMs += performance.now() - concurrentSince;
  const tally: Tally = {
    seed,
    workers: workerCount,
    asyncStore: options.asyncStore ?? false,
    maxConcurrentWorkers,
    concurrentMs: Math.round(concurrentMs),
    rounds: round,
    serverRestarts,
    kills: workerKills + clientKills,
    workerKills,
    clientKills,
    crashPoints,
    commands,
    acked: acked.size,
    eventsAcked: new Set(sends.map((a) => a.cmd.id)).size,
    duplicatesAcked: sends.filter((a) => a.answer['duplicate'] === true).length,
    conflictsRefused: acks.filter((a) => a.answer['code'] === 'SPOOL_IDEMPOTENCY_CONFLICT').length,
    terminalRefusals: acks.filter((a) => a.answer['code'] === 'SPOOL_TERMINAL').length,
    resent: client.resent,
    timersFiredLines: [...workers.fired.values()].reduce((a, b) => a + b, 0),
    attemptsClaimedLines: [...workers.attempts.values()].reduce((a, b) => a + b, 0),
    db: checked.tally,
    durationMs: Math.round(performance.now() - began),
  };
  return { dbPath, tally, violations, acks, workers };
}

const SETTLED = `SELECT
    (SELECT count(*) FROM jobs WHERE status = 'active') AS active,
    (SELECT count(*) FROM inbox WHERE status = 'pending') AS pending`;
// Every command is answered, so a live job that has nothing pending, nothing scheduled and no
// live activity can never move again: stuck. (Each commit moves a job from one of these to the
// next atomically, so a snapshot never shows a job "between" them.)
const STUCK = `SELECT j.id, j.state_value AS value, j.quarantine FROM jobs j WHERE j.status = 'active'
    AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.job_id = j.id AND i.status = 'pending')
    AND NOT EXISTS (SELECT 1 FROM timers t WHERE t.job_id = j.id AND t.status = 'scheduled')
    AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.job_id = j.id AND e.active = 1 AND e.status IN ('pending', 'running', 'backoff', 'waiting'))`;

type StuckRow = { id: string; value: string; quarantine: string | null };

/** The final phase's view of the database: the SQLite file read directly, or Postgres read again after each commit (postgres.ts). */
async function settleProbe(url: string | undefined, dbPath: string): Promise<{ settled: () => { active: number; pending: number } | undefined; stuck: () => StuckRow[]; onChange?: (listener: () => void) => () => void; close: () => Promise<void> }> {
  if (url) {
    const watch = await watchPostgres(url, async (q) => {
      const r = (await q(SETTLED))[0]!;
      return { active: Number(r['active']), pending: Number(r['pending']), stuck: (await q(STUCK)) as StuckRow[] };
    });
    return { settled: () => watch.latest(), stuck: () => watch.latest()?.stuck ?? [], onChange: watch.onRead, close: watch.close };
  }
  const probe = new Database(dbPath, { readonly: true, fileMustExist: true });
  const settled = probe.prepare(SETTLED);
  const stuck = probe.prepare(STUCK);
  return { settled: () => settled.get() as { active: number; pending: number }, stuck: () => stuck.all() as StuckRow[], close: async () => void probe.close() };
}

/** `promise`, or a rejection after `ms` (a safety limit, not a wait). */
function limit<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)));
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

function count<K>(map: Map<K, number>, key: K): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}
