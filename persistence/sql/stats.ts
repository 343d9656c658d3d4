import type { StoreStats } from '../../src/ports/store.ts';
import { exhausted } from './predicates.ts';
import { all, get, type Program } from './program.ts';
import { byteOrder, parsedOr } from './values.ts';

/** The figures of `stats` (run it in one read transaction: every figure from the same snapshot); state values that do not parse are added to `damaged` (and count as null). */
export function* statsIn(p: { all: number; owner: string; now: number }, damaged: string[]): Program<StoreStats> {
    const counts = (yield* get('statsCounts', p))!;
    const backlog = (yield* get('statsBacklog', p))!;
    const timers = (yield* get('statsTimers', p))!;
    const activities = new Map<string, StoreStats['activities'][number]>();
    const activity = (src: string) => {
      let a = activities.get(src);
      if (!a) {
        a = { src, effects: 0, effectsFailed: 0, attempts: 0, succeeded: 0, failed: 0, interrupted: 0, stale: 0, running: 0, waiting: 0 };
        activities.set(src, a);
      }
      return a;
    };
    for (const r of yield* all('statsEffects', p)) {
      const a = activity(r['src'] as string);
      a.effects = r['effects'] as number;
      a.effectsFailed = r['failed'] as number;
    }
    for (const r of yield* all('statsAttempts', p)) {
      const a = activity(r['src'] as string);
      const n = r['n'] as number;
      a.attempts += n;
      a[r['outcome'] as 'succeeded' | 'failed' | 'interrupted' | 'stale' | 'running' | 'waiting'] += n;
    }
    const jobs = yield* all('statsJobs', p);
    const running = yield* all('statsRunning', p);
    const leases = yield* all('statsLeases', p);
    return {
      jobs: jobs.map((r) => ({
        machineId: r['machine_id'] as string,
        machineVersion: r['machine_version'] as string,
        status: r['status'] as StoreStats['jobs'][number]['status'],
        value: parsedOr(r['state_value'], damaged),
        count: r['n'] as number,
      })),
      quarantined: counts['quarantined'] as number,
      suspended: counts['suspended'] as number,
      cancelRequested: counts['cancel_requested'] as number,
      exhausted: counts['exhausted'] as number,
      idle: counts['idle'] as number,
      backlog: {
        events: backlog['events'] as number,
        jobs: backlog['jobs'] as number,
        held: backlog['held'] as number,
        oldestAcceptedAt: (backlog['oldest'] as number | null) ?? null,
      },
      timers: {
        scheduled: timers['scheduled'] as number,
        due: timers['due'] as number,
        held: timers['held'] as number,
        oldestDueAt: (timers['oldest'] as number | null) ?? null,
      },
      activities: [...activities.values()].sort((a, b) => byteOrder(a.src, b.src)),
      running: running.map((r) => ({
        effectId: r['id'] as string,
        jobId: r['job_id'] as string,
        src: r['src'] as string,
        attempt: r['attempt'] as number,
        runner: (r['claimed_by'] as string | null) ?? null,
        claimExpiresAt: (r['claim_expires_at'] as number | null) ?? null,
        expired: Number(r['expired']) === 1,
      })),
      leases: leases.map((r) => ({ runner: r['lease_owner'] as string, jobs: r['n'] as number, earliestUntil: r['until'] as number })),
    };
}
