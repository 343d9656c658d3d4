/**
 * Two real child processes on one SQLite file, each with a runtime and the same schedule, ticking
 * at the same virtual moments: every occurrence fires exactly once between them (one occurrence
 * row, one job, one `schedule.fired` report), whoever wins each race.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { occurrenceJobId } from '../src/internal.ts';
import { ChildScript, type Line } from './helpers/proc.ts';
import { Resources } from './helpers/resources.ts';

const CHILD = fileURLToPath(new URL('./fixtures/scheduleChild.ts', import.meta.url));
const T0 = Date.parse('2026-01-01T00:00:00Z');
const MIN = 60_000;

const res = new Resources();
const children: ChildScript[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.kill()));
  await res.dispose();
});

describe('two processes, one schedule', () => {
  it('ticking at the same moments, no occurrence fires twice', async () => {
    const path = res.dbPath();
    const a = new ChildScript(CHILD, [path, 'a']);
    const b = new ChildScript(CHILD, [path, 'b']);
    children.push(a, b);
    const ready = await Promise.all([a.waitFor((l) => l.type === 'ready'), b.waitFor((l) => l.type === 'ready')]);
    expect(ready.map((l) => l['status']).sort()).toEqual(['created', 'unchanged']);

    const moments: number[] = [];
    for (let m = 1; m <= 40; m += 1) moments.push(T0 + m * MIN + (m % 10 === 0 ? 90_000 : 0)); // now and then a jump past one more
    for (const at of moments) {
      const done = Promise.all([a.waitFor((l) => l.type === 'ticked' && l['at'] === at), b.waitFor((l) => l.type === 'ticked' && l['at'] === at)]);
      a.proc.stdin.write(`tick ${at}\n`);
      b.proc.stdin.write(`tick ${at}\n`);
      await done;
    }
    a.proc.stdin.end('exit\n');
    b.proc.stdin.end('exit\n');
    const exits = await Promise.all([a.exited, b.exited]);
    expect(exits).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
    expect(a.stderr + b.stderr).toBe('');

    const fired: Line[] = [...a.lines, ...b.lines].filter((l) => l.type === 'fired');
    const dues = fired.map((l) => l['dueAt'] as number);
    expect(new Set(dues).size).toBe(dues.length); // each occurrence reported by exactly one process

    const store = await res.sqlite(path);
    const rows = await store.listOccurrences('every-minute', 1000);
    expect(rows.map((r) => r.dueAt).sort((x, y) => x - y)).toEqual([...dues].sort((x, y) => x - y));
    expect(rows.every((r) => r.outcome === 'started' && r.jobId === occurrenceJobId('every-minute', r.dueAt))).toBe(true);
    const jobs = await store.listJobs({ machineId: 'report' });
    expect(jobs.map((j) => j.id).sort()).toEqual(rows.map((r) => r.jobId).sort());
    expect(jobs.every((j) => j.revision === 1 && j.status === 'active')).toBe(true);
    const schedule = await store.getSchedule('every-minute');
    // 41 occurrences fell due (1..41 min, the last jump reaches 41.5); each jump of 90 s skips none with runEach: 2.
    expect({ fired: rows.length, missed: schedule?.missed, next: schedule?.nextDueAt }).toEqual({ fired: 41, missed: 0, next: T0 + 42 * MIN });
  });
});
