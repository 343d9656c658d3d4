/** Small statistics helpers for the bench: medians and latency percentiles. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100) of an already sorted array. */
export function percentileSorted(sorted: Float64Array | readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/** A growable buffer of latency samples (ms) that avoids boxing numbers in an array. */
export class Samples {
  #data = new Float64Array(1 << 14);
  #length = 0;

  push(value: number): void {
    if (this.#length === this.#data.length) {
      const bigger = new Float64Array(this.#data.length * 2);
      bigger.set(this.#data);
      this.#data = bigger;
    }
    this.#data[this.#length++] = value;
  }

  get length(): number {
    return this.#length;
  }

  values(): Float64Array {
    return this.#data.subarray(0, this.#length);
  }

  /** Pool several sample sets and return p50/p99/max in ms. */
  static summarize(sets: readonly Samples[]): { p50Ms: number; p99Ms: number; maxMs: number; samples: number } {
    const total = sets.reduce((n, s) => n + s.length, 0);
    const all = new Float64Array(total);
    let at = 0;
    for (const s of sets) {
      all.set(s.values(), at);
      at += s.length;
    }
    all.sort();
    return {
      p50Ms: percentileSorted(all, 50),
      p99Ms: percentileSorted(all, 99),
      maxMs: total ? all[total - 1]! : Number.NaN,
      samples: total,
    };
  }
}

/** Pooled p50/p99/max of several sample sets, in ms rounded to the µs: the form every section reports. */
export function latencySummary(sets: readonly Samples[]): { p50Ms: number; p99Ms: number; maxMs: number; samples: number } {
  const l = Samples.summarize(sets);
  const r = (ms: number) => Math.round(ms * 1000) / 1000;
  return { p50Ms: r(l.p50Ms), p99Ms: r(l.p99Ms), maxMs: r(l.maxMs), samples: l.samples };
}

/**
 * Await `step` one call after another for `durationMs`, timing each call: the timed part of the
 * Spool-side runs (the raw limit keeps its own synchronous loop, with no await in it).
 */
export async function timedSteps(durationMs: number, step: () => Promise<void>): Promise<{ ops: number; seconds: number; perSec: number; latencies: Samples }> {
  const latencies = new Samples();
  const start = performance.now();
  const end = start + durationMs;
  let ops = 0;
  let now = start;
  while (now < end) {
    await step();
    const after = performance.now();
    latencies.push(after - now);
    now = after;
    ops += 1;
  }
  const seconds = (now - start) / 1000;
  return { ops, seconds, perSec: ops / seconds, latencies };
}

/**
 * The synchronous twin of {@link timedSteps}, for loops that hold no promise (raw SQLite): call
 * `step` until `durationMs` has passed; each call does `opsPerStep` operations. Returns the step
 * latencies and this process's CPU time per operation.
 */
export function timedSyncSteps(durationMs: number, opsPerStep: number, step: () => void): { ops: number; seconds: number; perSec: number; latencies: Samples; cpuUsPerOp: number } {
  const latencies = new Samples();
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + durationMs;
  let ops = 0;
  let now = start;
  while (now < end) {
    step();
    const after = performance.now();
    latencies.push(after - now);
    now = after;
    ops += opsPerStep;
  }
  const seconds = (now - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { ops, seconds, perSec: ops / seconds, latencies, cpuUsPerOp: (cpu.user + cpu.system) / ops };
}

/**
 * `loops` async loops, each running `job` one after another (the next when the last resolves)
 * until `durationMs` has passed; every job resolves with its own latency (ms). Timed from the first
 * start to the last job's end, so jobs in flight at the deadline finish and count.
 */
export async function timedLoops(loops: number, durationMs: number, job: () => Promise<number>): Promise<{ jobs: number; seconds: number; latencies: Samples }> {
  const latencies = new Samples();
  const start = performance.now();
  const end = start + durationMs;
  let last = start;
  const loop = async () => {
    while (performance.now() < end) {
      latencies.push(await job());
      const now = performance.now();
      if (now > last) last = now;
    }
  };
  await Promise.all(Array.from({ length: loops }, loop));
  return { jobs: latencies.length, seconds: (last - start) / 1000, latencies };
}
