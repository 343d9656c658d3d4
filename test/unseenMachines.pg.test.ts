/**
 * A new user on Postgres: a machines module the project has never seen (written here, into a
 * temporary directory), run by two `spool worker --db postgres://… --machines <file>` processes (the
 * real bin), jobs started with `spool start`, and each worker SIGKILLed in turn while it holds
 * activities mid-run, then started again. Then every job has reached its final state, each
 * activity's side effect ran under one idempotency key per invocation (however many processes
 * attempted it), every job's history revisions are consecutive (no transition doubled or lost), and
 * `spool list --stuck --json` is empty.
 *
 * The order flow: a parallel state (`reserve`, which fails its first attempt and is retried, beside
 * `charge`), a durable `after` timer, then a child job (`label`, with an activity of its own).
 * A worker started with SHOP_HANG=1 starts `charge` (it records the call with its key, as a
 * provider would) and never finishes it: that is what the kills interrupt. Waits are on the
 * workers' `--json` lines and the CLI's output, never on the clock.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../persistence/drivers/pg/index.ts';
import type { Job } from '../src/index.ts';
import { freshDatabase } from './helpers/postgres.ts';
import { TMP_ROOT } from './helpers/resources.ts';
import { runSpool, spawnSpool } from './helpers/spoolCli.ts';

const TMP = join(TMP_ROOT, `unseen-pg-${randomBytes(4).toString('hex')}`);
const MODULE = join(TMP, 'shop.ts');
const LEDGER = join(TMP, 'provider.log');
const ORDERS = Array.from({ length: 6 }, (_, i) => `order-${i + 1}`);

/** What the "provider" was asked, one line per call: the activity, its job, key, attempt and the calling process. */
interface Call {
  kind: 'reserve' | 'charge' | 'label';
  jobId: string;
  key: string;
  attempt: number;
  pid: number;
}

const SHOP = `import { appendFileSync } from 'node:fs';
import { assign, fromPromise, setup } from 'xstate';

// The outside world: every call is appended with the idempotency key it was made under.
function call(kind, spool) {
  appendFileSync(${JSON.stringify(LEDGER)}, JSON.stringify({ kind, jobId: spool.jobId, key: spool.idempotencyKey, attempt: spool.attempt, pid: process.pid }) + '\\n');
}

const reserve = fromPromise(async ({ input, ...spool }) => {
  call('reserve', spool);
  if (spool.attempt === 1) throw new Error('warehouse busy');
  return { sku: input.sku };
});

const charge = fromPromise(async ({ input, signal, ...spool }) => {
  call('charge', spool);
  // A payment gateway that never answers: only a kill (or an abort) ends this attempt.
  if (process.env.SHOP_HANG === '1') await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
  return { receipt: 'r-' + input.amount };
});

const printLabel = fromPromise(async ({ input, ...spool }) => {
  call('label', spool);
  return { tracking: 'T-' + input.orderId };
});

const label = setup({ actors: { printLabel } }).createMachine({
  id: 'label',
  context: ({ input }) => ({ orderId: input.orderId, tracking: null }),
  initial: 'printing',
  states: {
    printing: {
      invoke: { id: 'print', src: 'printLabel', input: ({ context }) => ({ orderId: context.orderId }), onDone: { target: 'printed', actions: assign({ tracking: ({ event }) => event.output.tracking }) } },
    },
    printed: { type: 'final' },
  },
  output: ({ context }) => ({ tracking: context.tracking }),
});

export const shopOrder = setup({ actors: { reserve, charge, label } }).createMachine({
  id: 'shop-order',
  context: ({ input }) => ({ orderId: input.orderId, amount: input.amount, sku: null, receipt: null, tracking: null }),
  initial: 'placing',
  states: {
    placing: {
      type: 'parallel',
      states: {
        stock: {
          initial: 'reserving',
          states: {
            reserving: { invoke: { id: 'reserve', src: 'reserve', input: ({ context }) => ({ sku: 'sku-' + context.orderId }), onDone: { target: 'reserved', actions: assign({ sku: ({ event }) => event.output.sku }) } } },
            reserved: { type: 'final' },
          },
        },
        payment: {
          initial: 'charging',
          states: {
            charging: { invoke: { id: 'charge', src: 'charge', input: ({ context }) => ({ amount: context.amount }), onDone: { target: 'paid', actions: assign({ receipt: ({ event }) => event.output.receipt }) } } },
            paid: { type: 'final' },
          },
        },
      },
      onDone: 'settling',
    },
    settling: { after: { 150: 'shipping' } },
    shipping: {
      invoke: { id: 'ship', src: 'label', input: ({ context }) => ({ orderId: context.orderId }), onDone: { target: 'delivered', actions: assign({ tracking: ({ event }) => event.output.tracking }) } },
    },
    delivered: { type: 'final' },
  },
});

export const shopOrderDefinition = {
  machine: shopOrder,
  version: 1,
  activities: { reserve: { maxAttempts: 3, backoff: { initialMs: 20, maxMs: 50 } }, charge: { maxAttempts: 5, backoff: { initialMs: 20, maxMs: 50 } } },
};
`;

type Line = Record<string, unknown>;

/** A `spool worker --json` on the database (SHOP_HANG set when `hang`): its lines parsed; `until(p)` waits on its output, never on time. */
function startWorker(db: string, hang: boolean) {
  const proc = spawnSpool(['--db', db, '--machines', MODULE, 'worker', '--poll-ms', '50', '--lease-ms', '2000', '--concurrency', '16', '--json'], TMP, { SHOP_HANG: hang ? '1' : '0' });
  /** The complete lines printed so far (a chunk may end inside one). */
  const lines = (): Line[] => {
    const { stdout } = proc.output();
    return stdout
      .slice(0, stdout.lastIndexOf('\n') + 1)
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Line);
  };
  let closed = false;
  const waiting: (() => void)[] = [];
  const wake = () => {
    for (const w of waiting.splice(0)) w();
  };
  proc.child.stdout.on('data', wake);
  proc.child.once('close', () => ((closed = true), wake()));
  /** Resolves once the lines printed so far satisfy `p` (checked again on each chunk of output); rejects if the worker exits first. */
  const until = async (p: (lines: Line[]) => boolean): Promise<void> => {
    while (!p(lines())) {
      if (closed) throw new Error(`worker exited before the awaited output:\n${proc.output().stdout}\n${proc.output().stderr}`);
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
  };
  return { ...proc, pid: proc.child.pid!, lines, until };
}
type Worker = ReturnType<typeof startWorker>;

/** The orders whose `charge` attempt this worker has started (and not seen finish). */
function chargesHeld(worker: Worker): Set<string> {
  const held = new Set<string>();
  for (const l of worker.lines()) {
    if (l['type'] === 'activity.started' && l['src'] === 'charge') held.add(l['jobId'] as string);
    if (l['type'] === 'activity.finished' && String(l['effectId']).includes('~charge~')) held.delete(l['jobId'] as string);
  }
  return held;
}

/** The orders whose `reserve` this worker saw succeed (effect ids are `<job>~<invoke id>~r<revision>`). */
function reserved(worker: Worker): Set<string> {
  return new Set(worker.lines().filter((l) => l['type'] === 'activity.finished' && l['outcome'] === 'succeeded' && String(l['effectId']).includes('~reserve~')).map((l) => l['jobId'] as string));
}

async function sigkill(worker: Worker): Promise<void> {
  worker.child.kill('SIGKILL');
  await worker.exited;
}

async function json<T>(db: string, args: readonly string[]): Promise<T> {
  const run = await runSpool(['--db', db, '--machines', MODULE, ...args, '--json'], TMP);
  expect(run.stderr, run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as T;
}

let db: { url: string; drop: () => Promise<void> };
beforeAll(async () => {
  mkdirSync(TMP, { recursive: true });
  writeFileSync(MODULE, SHOP);
  writeFileSync(LEDGER, '');
  db = await freshDatabase();
});
afterAll(async () => {
  await db?.drop();
  rmSync(TMP, { recursive: true, force: true });
});

describe('machines never seen before, on Postgres, with two worker processes SIGKILLed in turn', () => {
  it('every order is delivered, each side effect ran under one idempotency key, no transition doubled, nothing stuck', async () => {
    const workers: Worker[] = [];
    try {
      // A runs alone at first: every charge hangs in it.
      const a = startWorker(db.url, true);
      workers.push(a);
      await a.until((ls) => ls.some((l) => l['type'] === 'worker.ready'));
      const started = await Promise.all(ORDERS.map((id, i) => json<{ created: boolean; job: Job }>(db.url, ['start', 'shop-order', '--id', id, '--input', JSON.stringify({ orderId: id, amount: 10 * (i + 1) })])));
      expect(started.map((s) => [s.created, s.job.value])).toEqual(ORDERS.map(() => [true, { placing: { stock: 'reserving', payment: 'charging' } }]));
      // Every reserve done (its retry included) and every charge hanging, before A is killed.
      await a.until(() => chargesHeld(a).size === ORDERS.length && reserved(a).size === ORDERS.length);

      // B joins (hanging too), A is killed mid-run: B takes every charge over.
      const b = startWorker(db.url, true);
      workers.push(b);
      await b.until((ls) => ls.some((l) => l['type'] === 'worker.ready'));
      await sigkill(a);
      await b.until(() => chargesHeld(b).size === ORDERS.length);

      // A comes back (answering now), then B is killed mid-run and comes back: they finish everything.
      const a2 = startWorker(db.url, false);
      workers.push(a2);
      await a2.until((ls) => ls.some((l) => l['type'] === 'worker.ready'));
      await sigkill(b);
      const b2 = startWorker(db.url, false);
      workers.push(b2);
      await b2.until((ls) => ls.some((l) => l['type'] === 'worker.ready'));
      const delivered = () => new Set([...a2.lines(), ...b2.lines()].filter((l) => l['type'] === 'job.committed' && l['final'] === true && ORDERS.includes(l['jobId'] as string)).map((l) => l['jobId']));
      await Promise.race([a2.until(() => delivered().size === ORDERS.length), b2.until(() => delivered().size === ORDERS.length)]);
      for (const w of [a2, b2]) {
        w.child.kill('SIGTERM');
        expect(await w.exited, w.output().stderr).toBe(0);
      }

      // Every job (orders and their label child jobs) ended well.
      const jobs = await json<Job[]>(db.url, ['list']);
      expect(jobs).toHaveLength(2 * ORDERS.length);
      for (const job of jobs) expect({ id: job.id, status: job.status, final: job.final }).toEqual({ id: job.id, status: 'done', final: true });
      for (const [i, id] of ORDERS.entries()) {
        expect(jobs.find((j) => j.id === id)).toMatchObject({ value: 'delivered', context: { sku: `sku-${id}`, receipt: `r-${10 * (i + 1)}`, tracking: `T-${id}` } });
      }
      expect(await json<Job[]>(db.url, ['list', '--stuck'])).toEqual([]);

      // The provider's view: per invocation one key across all its attempts and processes.
      const calls = readFileSync(LEDGER, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Call);
      const byInvocation = new Map<string, Call[]>();
      for (const c of calls) byInvocation.set(`${c.kind} ${c.jobId}`, [...(byInvocation.get(`${c.kind} ${c.jobId}`) ?? []), c]);
      expect(byInvocation.size).toBe(3 * ORDERS.length);
      const keys = new Set<string>();
      for (const [name, list] of byInvocation) {
        expect(new Set(list.map((c) => c.key)).size, name).toBe(1);
        keys.add(list[0]!.key);
        expect(list.map((c) => c.attempt), name).toEqual(list.map((_, n) => n + 1));
      }
      expect(keys.size).toBe(3 * ORDERS.length);
      for (const id of ORDERS) {
        // reserve: its first attempt failed and was retried; charge: attempted by A, by B (both killed), then by a restarted worker.
        expect(byInvocation.get(`reserve ${id}`)!.length, id).toBe(2);
        const charges = byInvocation.get(`charge ${id}`)!;
        expect(charges.slice(0, 2).map((c) => c.pid), id).toEqual([a.pid, b.pid]);
        expect([a2.pid, b2.pid], id).toContain(charges.at(-1)!.pid);
      }

      // The store's view: every history consecutive from revision 1, each outcome applied once.
      const store = await PostgresStore.open(db.url);
      try {
        for (const job of jobs) {
          const history = await store.history(job.id);
          expect(history.map((h) => h.revision), job.id).toEqual(history.map((_, n) => n + 1));
          expect(history.at(-1)!.revision, job.id).toBe(job.revision);
          const applied = history.filter((h) => h.outcome === 'applied' && h.eventType.startsWith('xstate.done.actor.')).map((h) => h.eventType).sort();
          expect(applied, job.id).toEqual(ORDERS.includes(job.id) ? ['xstate.done.actor.charge', 'xstate.done.actor.reserve', 'xstate.done.actor.ship'] : ['xstate.done.actor.print']);
        }
      } finally {
        await store.close();
      }
    } finally {
      for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) await sigkill(w);
    }
  }, 400_000);
});
