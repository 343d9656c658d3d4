/** Hand-built effects and batch claims for the `claimDueEffects` tests (store.claims.contract, claimDue.pg). */
import type { DueClaim, NewEffect } from '../../src/ports/store.ts';

export const T0 = 1_700_000_000_000;
export const NOW = T0 + 1_000;
export const UNTIL = NOW + 30_000;

export function effectOf(jobId: string, actorId: string, o: { at?: number; src?: string; unsafe?: boolean; maxAttempts?: number } = {}): NewEffect {
  return {
    id: `${jobId}~${actorId}`,
    jobId,
    actorId,
    src: o.src ?? 'work',
    input: { actorId },
    maxAttempts: o.maxAttempts ?? 3,
    unsafe: o.unsafe ?? false,
    createdRevision: 1,
    at: o.at ?? T0,
  };
}

/** The srcs the effects here use: a claim reads these unless it names others. */
export const SRCS = ['charge', 'work'];

export const claim = (o: Partial<DueClaim> = {}): DueClaim => ({ runner: 'w1', now: NOW, claimUntil: UNTIL, limit: 10, machines: ['m@1'], srcs: SRCS, ...o });

