/**
 * The worker loop in real processes: a `runWorker` child is SIGKILLed while its jobs wait on short
 * real timers and on activity retries; a second worker finishes them. Waits are on the children's
 * output (a database predicate checked on every line they print), never on a fixed sleep. Then:
 * every job final as expected, no timer fired twice, no accepted event lost.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { approvalFlow, exportJob, jobLifecycle, retryingJob } from '../machines/index.ts';
import type { Job, Runtime } from '../src/index.ts';
import { Resources } from './helpers/resources.ts';
import { ChildScript, type Line } from './helpers/proc.ts';

const WORKER = fileURLToPath(new URL('./fixtures/spoolWorker.ts', import.meta.url));
const res = new Resources();
const children: ChildScript[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await res.dispose();
});

function worker(path: string): ChildScript {
  const child = new ChildScript(WORKER, [path, '20']);
  children.push(child);
  return child;
}

/**
 * Resolve when `done()` holds: checked now and again on every line the child prints (each line
 * follows a commit). Rejects if the child exits first or after `limitMs` (a safety net, not a wait).
 */
function until(child: ChildScript, done: () => Promise<boolean>, limitMs = 20_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let checking = false;
    let again = false;
    const safety = setTimeout(() => finish(new Error(`condition not reached within ${limitMs} ms; stderr:\n${child.stderr}`)), limitMs);
    const finish = (error?: Error) => {
      off();
      clearTimeout(safety);
      if (error) reject(error);
      else resolve();
    };
    const check = async () => {
      if (checking) {
        again = true;
        return;
      }
      checking = true;
      try {
        do {
          again = false;
          if (await done()) return finish();
        } while (again);
      } catch (error) {
        finish(error as Error);
      } finally {
        checking = false;
      }
    };
    const off = child.onLine((line: Line) => {
      if (line.type === '(exit)') finish(new Error(`worker exited (code ${String(line['code'])}) before the condition held; stderr:\n${child.stderr}`));
      else void check();
    });
    void check();
  });
}

const firedTimers = (lines: Line[]) => lines.filter((l) => l.type === 'timer.fired').map((l) => l['timerId'] as string);

describe('runWorker in child processes', () => {
  it('a second worker finishes what a SIGKILLed worker left waiting: every timer once, every accepted event applied', async () => {
    const path = res.dbPath();
    // The test's own handle: a client-only runtime (accepts, never processes) on the real clock.
    const client: Runtime = await res.runtime({ store: await res.sqlite(path), machines: [jobLifecycle, retryingJob, exportJob, approvalFlow], processEvents: false });

    const first = worker(path);
    await first.waitFor((l) => l.type === 'ready');

    const expiring: string[] = [];
    for (let i = 0; i < 3; i += 1) expiring.push((await client.start('approval-flow', { subject: `expiring ${i}`, remindAfterMs: 100, deadlineMs: 400 })).id);
    const approving: string[] = [];
    for (let i = 0; i < 2; i += 1) approving.push((await client.start('approval-flow', { subject: `approving ${i}`, remindAfterMs: 60_000, deadlineMs: 120_000 })).id);
    const retrying: string[] = [];
    for (let i = 0; i < 2; i += 1) retrying.push((await client.start('retrying-job', { name: `retry ${i}`, items: 4, flakyAttempts: 1, autoStart: true })).id);
    const exporting = (await client.start('export-job', { dataset: 'sales', rows: 5, flakyAttempts: 1 })).id;
    const lifecycle = (await client.start('job-lifecycle', { name: 'manual' })).id;
    const all = [...expiring, ...approving, ...retrying, exporting, lifecycle];

    // Kill the first worker once it has fired a reminder: the deadlines (400 ms) and retries still wait.
    await first.waitFor((l) => l.type === 'timer.fired' && l['eventType'] === 'REMIND');
    const sent: Array<[string, string]> = [];
    for (const [i, id] of approving.entries()) {
      const r = await client.send(id, { type: 'APPROVE', by: `reviewer ${i}` }, { eventId: `approve-${i}` });
      expect(r.status).toBe('pending'); // durably accepted; a worker applies it
      sent.push([id, `approve-${i}`]);
    }
    for (const [type, eventId] of [['START', 'start-1'], ['FINISH', 'finish-1']] as const) {
      await client.send(lifecycle, { type }, { eventId });
      sent.push([lifecycle, eventId]);
    }
    expect((await first.kill('SIGKILL')).signal).toBe('SIGKILL');

    const active = async () => (await client.list({ status: 'active' })).map((j) => j.id);
    const waiting = await active();
    expect(waiting.length).toBeGreaterThan(0); // the kill did land while jobs were waiting

    const second = worker(path);
    await until(second, async () => (await active()).length === 0);
    second.proc.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(second.stderr).toBe('');

    const jobs = new Map<string, Job>();
    for (const id of all) jobs.set(id, await client.get(id));
    for (const id of expiring) expect(jobs.get(id)).toMatchObject({ value: 'expired', context: { reminders: 1 } });
    for (const [i, id] of approving.entries()) expect(jobs.get(id)).toMatchObject({ value: 'approved', context: { decidedBy: `reviewer ${i}`, reminders: 0 } });
    for (const id of retrying) expect(jobs.get(id)).toMatchObject({ value: 'completed', context: { succeeded: 4 } });
    expect(jobs.get(exporting)).toMatchObject({ value: 'completed', progress: 100 });
    expect(jobs.get(lifecycle)).toMatchObject({ value: 'completed' });

    // No timer fired twice: one `timer.fired` per timer across both workers, one inbox event per
    // fired timer, and nothing left scheduled or fired-but-undelivered.
    const fired = [...firedTimers(first.lines), ...firedTimers(second.lines)];
    expect(new Set(fired).size).toBe(fired.length);
    for (const id of all) {
      const d = await client.details(id);
      for (const timer of d.timers) {
        expect(['delivered', 'cancelled'], `${timer.key} of ${id}`).toContain(timer.status);
        const events = d.events.filter((e) => e.source === 'timer' && e.sourceId === timer.id);
        expect(events.length, `inbox events of timer ${timer.id}`).toBeLessThanOrEqual(1);
        if (timer.status === 'delivered') expect(events.map((e) => e.status)).toEqual(['applied']);
      }
      // Each timer event appears once in the history; no event id is applied twice.
      const ids = d.history.map((h) => h.eventId).filter((e): e is string => e !== null);
      expect(new Set(ids).size, `history event ids of ${id}`).toBe(ids.length);
      // No accepted event lost: nothing pending, and every event reached an outcome recorded in the history.
      expect(d.events.filter((e) => e.status === 'pending'), `pending events of ${id}`).toEqual([]);
      for (const e of d.events.filter((x) => x.status === 'applied')) expect(ids, `history of ${id}`).toContain(e.eventId);
    }
    for (const id of expiring) {
      const history = await client.history(id);
      expect(history.filter((h) => h.eventType === 'REMIND')).toHaveLength(1);
      expect(history.filter((h) => h.eventType === 'xstate.after.deadline.approval-flow.pending')).toHaveLength(1);
    }
    for (const [jobId, eventId] of sent) expect((await client.events(jobId)).find((e) => e.eventId === eventId)?.status, eventId).toBe('applied');
  });
});
