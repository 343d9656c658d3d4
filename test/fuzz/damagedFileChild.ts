/**
 * A child process for the damaged-file fuzz test: `damagedFileChild.ts`. It reads one JSON line per
 * case on stdin ({path}: a damaged copy of a Spool database), opens it and uses it through the API,
 * and prints one line per case: {type:'result', path, opened, problems}, where `problems` lists every
 * call that threw something other than a typed refusal (a SpoolError: no driver error reaches a
 * caller) and a refused open that changed the file. It also calls the store's reads directly and
 * runs `doctor` on the file.
 *
 * It runs in its own process because a damaged file can make the engine spin (a busy loop starves
 * the event loop, so no timeout inside the process can fire) or crash the process natively: the
 * test waits for each result line with a limit and kills this process if it does not come.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { approvalFlow } from '../../machines/index.ts';
import { doctor, SqliteStore } from '../../persistence/drivers/better-sqlite3/index.ts';
import { createRuntime, type Runtime } from '../../src/index.ts';
import { VirtualClock } from '../../src/testing/index.ts';
import { flaky, tally, ticker } from '../crash/machines.ts';
import { describeThrown, isSpoolRefusal } from './refusal.ts';

const DAMAGE_MACHINES = [tally, ticker, flaky, approvalFlow];
const DAMAGE_EVENTS: Record<string, Record<string, unknown>> = {
  healthy: { type: 'INC' },
  tally: { type: 'ADD', n: 2 },
  ticker: { type: 'SNOOZE' },
  flaky: { type: 'CANCEL' },
  approval: { type: 'APPROVE', by: 'fuzz' },
};
const T0 = Date.parse('2026-01-01T00:00:00Z');

const print = (msg: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(msg)}\n`);

async function exercise(path: string): Promise<{ opened: boolean; problems: string[] }> {
  const problems: string[] = [];
  const refused = (what: string) => (error: unknown): undefined => {
    if (!isSpoolRefusal(error)) problems.push(`${what}: ${describeThrown(error)}`);
    return undefined;
  };
  const before = readFileSync(path);
  const clock = new VirtualClock(T0);
  const store = await SqliteStore.open(path, { clock }).catch(refused('open'));
  if (!store) {
    if (!readFileSync(path).equals(before)) problems.push('a refused open changed the file');
    return { opened: false, problems };
  }
  // The store's own reads, each either working or typed.
  await store.stats({ now: T0 }).catch(refused('store.stats'));
  for (const job of (await store.listJobs({}).catch(refused('store.listJobs'))) ?? []) {
    await store.history(job.id).catch(refused(`store.history ${job.id}`));
    await store.listEvents(job.id).catch(refused(`store.listEvents ${job.id}`));
    await store.listEffects(job.id).catch(refused(`store.listEffects ${job.id}`));
    await store.listTimers(job.id).catch(refused(`store.listTimers ${job.id}`));
  }
  await store.listJobs({ stuck: true }).catch(refused('store.listJobs stuck'));
  try {
    doctor(path, { quick: true });
  } catch (error) {
    refused('doctor')(error);
  }
  // Untyped: the events come from a table of any machine's (a typed runtime would check each against its job's machine).
  const runtime: Runtime | undefined = await createRuntime({ store, machines: DAMAGE_MACHINES, clock }).catch(refused('createRuntime'));
  if (!runtime) {
    await store.close();
    return { opened: true, problems };
  }
  const jobs = (await runtime.list().catch(refused('list'))) ?? [];
  for (const job of jobs) {
    await runtime.details(job.id).catch(refused(`details ${job.id}`));
    const event = DAMAGE_EVENTS[job.id];
    if (event) await runtime.send(job.id, event).catch(refused(`send ${job.id}`));
  }
  clock.advance(3_600_000);
  await runtime.tick().catch(refused('tick'));
  await runtime.processPending().catch(refused('processPending'));
  await runtime.idle();
  await runtime.close().catch(refused('close'));
  return { opened: true, problems };
}

const rl = createInterface({ input: process.stdin });
const queue: string[] = [];
let busy = false;
rl.on('line', (line) => {
  queue.push(line);
  void next();
});
rl.on('close', () => {
  if (!busy) process.exit(0);
});
async function next(): Promise<void> {
  if (busy) return;
  busy = true;
  while (queue.length > 0) {
    const { path } = JSON.parse(queue.shift()!) as { path: string };
    try {
      print({ type: 'result', path, ...(await exercise(path)) });
    } catch (error) {
      print({ type: 'result', path, opened: null, problems: [`the exercise itself threw: ${describeThrown(error)}`] });
    }
  }
  busy = false;
}
print({ type: 'ready', pid: process.pid });
