/**
 * The performance targets the bench reports against, in one place: issue #14's Targets table
 * (and the sequential FULL and group-commit targets of the issue before it). Every section that
 * checks one returns its checks as `targets`; bench/index.ts prints them all at the end of the run. A figure below its
 * target is reported as BELOW (or ABOVE for a ceiling), never as an exit code.
 */
import { printTable } from './format.ts';
import type { Synchronous } from './rawRun.ts';

export const TARGETS = {
  /** Sequential `send`: Spool / raw SQLite, per setting (NORMAL: issue #14; FULL: the earlier 0.7). */
  sequentialVsRaw: { FULL: 0.7, NORMAL: 0.5 } satisfies Record<Synchronous, number>,
  /** Group commit, FULL: Spool / raw SQLite 100 transitions to a transaction (the issue before #14). */
  groupCommitFullVsRaw: 0.6,
  /** Restart with 1M jobs waiting on timers: peak RSS, bytes (decimal MB, the stricter reading), at most. */
  restartRssBytesAt1M: 200_000_000,
  /** 3-step jobs, FULL, 64 at once: Spool / raw SQLite doing the same writes 100 to a transaction (aim 0.3). */
  threeStepFull64VsRaw: 0.2,
  threeStepFull64VsRawAim: 0.3,
  /** Every case at NORMAL: Spool / the afternoon baseline. */
  normalVsBaseline: 1.5,
  /** One job at a time (1 activity at once), NORMAL: Spool / the afternoon baseline. */
  oneAtOnceNormalVsBaseline: 1.0,
  /** CPU µs per 3-step job at NORMAL, at most. */
  cpuUsPerThreeStepJobNormal: 300,
  /** `start`, 64 in flight, no worker, NORMAL: CPU µs per start, at most (issue 32). */
  cpuUsPerStartNormal: 150,
  /** Light load (100 jobs/s), FULL: p99 start → final, ms, at most. */
  lightLoadP99MsFull: 5,
} as const;

/** One figure against one target. */
export interface TargetCheck {
  target: string;
  value: number | null;
  bound: { min: number } | { max: number };
  verdict: 'PASS' | 'BELOW' | 'ABOVE' | 'unknown';
}

/** Check `value` against a floor (`min`) or a ceiling (`max`). */
export function check(target: string, value: number | null, bound: { min: number } | { max: number }): TargetCheck {
  const verdict = value === null || !Number.isFinite(value) ? 'unknown' : 'min' in bound ? (value >= bound.min ? 'PASS' : 'BELOW') : value <= bound.max ? 'PASS' : 'ABOVE';
  return { target, value: value === null ? null : Math.round(value * 1000) / 1000, bound, verdict };
}

/** The targets' table: what, measured, target, verdict. */
export function printTargets(checks: readonly TargetCheck[]): void {
  printTable(
    ['target', 'measured', 'target', 'verdict'],
    checks.map((c) => [
      c.target,
      c.value === null ? '—' : c.value >= 100 ? c.value.toFixed(0) : c.value.toFixed(2),
      'min' in c.bound ? `≥ ${c.bound.min}` : `≤ ${c.bound.max}`,
      c.verdict,
    ]),
  );
}
