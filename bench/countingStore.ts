/**
 * A store wrapper for the bench: counts and times every store call, and records how many
 * writes each `store.commit(batch)` or `store.writeBatch(batch)` call carried (the group-commit batch size).
 *
 * SqliteStore methods are async but do all their work (including the disk sync of a write)
 * synchronously before returning, so timing the call measures the database work itself.
 */
import { performance } from 'node:perf_hooks';
import type { JobStore, WriteBatch } from '../src/internal.ts';
import { percentileSorted } from './stats.ts';

export interface CallStats {
  calls: number;
  ms: number;
}

export class StoreCounter {
  readonly calls = new Map<string, CallStats>();
  /** Writes per `store.commit` or `store.writeBatch` call, in call order. */
  batches: number[] = [];

  reset(): void {
    this.calls.clear();
    this.batches = [];
  }

  count(name: string): number {
    return this.calls.get(name)?.calls ?? 0;
  }

  ms(name: string): number {
    return this.calls.get(name)?.ms ?? 0;
  }

  totalMs(): number {
    let ms = 0;
    for (const c of this.calls.values()) ms += c.ms;
    return ms;
  }

  /** Batch sizes observed: calls, commits, mean, p50, p90, max, and a histogram by size range. */
  batchSummary(): BatchSummary {
    const sorted = [...this.batches].sort((a, b) => a - b);
    const commits = sorted.reduce((a, b) => a + b, 0);
    const ranges: [string, number, number][] = [
      ['1', 1, 1],
      ['2-7', 2, 7],
      ['8-31', 8, 31],
      ['32-63', 32, 63],
      ['64-127', 64, 127],
      ['128+', 128, Number.POSITIVE_INFINITY],
    ];
    const histogram: Record<string, number> = {};
    for (const [label, lo, hi] of ranges) histogram[label] = sorted.filter((n) => n >= lo && n <= hi).length;
    return {
      commitCalls: sorted.length,
      commits,
      mean: sorted.length ? Math.round((commits / sorted.length) * 10) / 10 : 0,
      p50: sorted.length ? percentileSorted(sorted, 50) : 0,
      p90: sorted.length ? percentileSorted(sorted, 90) : 0,
      max: sorted.length ? sorted[sorted.length - 1]! : 0,
      histogram,
    };
  }

  /** Calls per unit of work (e.g. per send), for every method called at least `min` times per unit. */
  perUnit(units: number, min = 0): Record<string, { calls: number; us: number }> {
    const out: Record<string, { calls: number; us: number }> = {};
    for (const [name, c] of [...this.calls.entries()].sort((a, b) => b[1].ms - a[1].ms)) {
      if (units === 0 || c.calls / units < min) continue;
      out[name] = { calls: Math.round((c.calls / units) * 10_000) / 10_000, us: Math.round(((c.ms * 1000) / units) * 10) / 10 };
    }
    return out;
  }
}

export interface BatchSummary {
  commitCalls: number;
  commits: number;
  mean: number;
  p50: number;
  p90: number;
  max: number;
  histogram: Record<string, number>;
}

export function countingStore<S extends JobStore>(store: S, counter: StoreCounter): JobStore {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function' || typeof key !== 'string') return value;
      const fn = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        if (key === 'commit') counter.batches.push((args[0] as readonly unknown[]).length);
        if (key === 'writeBatch') counter.batches.push(Object.values(args[0] as WriteBatch).reduce((n, list) => n + (list?.length ?? 0), 0));
        const t0 = performance.now();
        const result = fn.apply(target, args);
        const entry = counter.calls.get(key) ?? { calls: 0, ms: 0 };
        entry.calls += 1;
        entry.ms += performance.now() - t0;
        counter.calls.set(key, entry);
        return result;
      };
    },
  }) as unknown as JobStore;
}

/**
 * Statements run, process-wide, while counting is on: better-sqlite3's `run/get/all/iterate` and
 * node-postgres's `Client.query` (a pool's queries go through its clients), patched once. The
 * queue section reads it per job; `db.transaction` BEGIN/COMMIT are not statements here.
 */
export const statementCounter = { count: 0, on: false };
let patched = false;
export async function countStatements(): Promise<void> {
  if (patched) return;
  patched = true;
  const { default: Database } = await import('better-sqlite3');
  const { default: pg } = await import('pg');
  const memory = new Database(':memory:');
  const proto = Object.getPrototypeOf(memory.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
  memory.close();
  const wrap = (target: Record<string, (...a: unknown[]) => unknown>, name: string) => {
    const original = target[name]!;
    target[name] = function (this: unknown, ...a: unknown[]) {
      if (statementCounter.on) statementCounter.count += 1;
      return original.apply(this, a);
    };
  };
  for (const name of ['run', 'get', 'all', 'iterate']) wrap(proto, name);
  wrap(pg.Client.prototype as unknown as Record<string, (...a: unknown[]) => unknown>, 'query');
}
