import { type CommitResult, type Outcome, CommitOutcomeUnknown } from '../../src/ports/store.ts';

/** Rolls back one commit of a batch with the result it reports (its own checks refused it). */
export class Abort {
  constructor(readonly result: CommitResult) {}
}

/**
 * A write of a batch run without a savepoint failed after it changed rows: the whole transaction
 * rolls back and runs again with a savepoint per write, where that write fails alone.
 */
export class RunIsolated {
  constructor(readonly cause: unknown) {}
}

/** Rolls back an effect claim whose job another live runner holds. */
export class LeaseHeld {}

/**
 * One commit of a batch refused by its own checks; a storage fault (`isFault`: the driver's) fails the whole transaction instead.
 */
export function failure(error: unknown, isFault: (error: unknown) => boolean): CommitResult {
  if (error instanceof Abort) return error.result;
  if (isFault(error) || error instanceof CommitOutcomeUnknown) throw error;
  return { ok: false, reason: 'error', error: { name: (error as Error).name, message: (error as Error).message } };
}

/** One write of a batch, run (as the port's `outcomeOf`), except that a storage fault (or an unknown outcome) fails the whole call. */
export function outcomeOf<T>(write: () => T, isFault: (error: unknown) => boolean): Outcome<T> {
  try {
    return { ok: true, result: write() };
  } catch (error) {
    if (isFault(error) || error instanceof CommitOutcomeUnknown) throw error;
    return { ok: false, error };
  }
}

/** A claim while another live runner holds the job's lease claims nothing (its writes rolled back). */
export function unlessLeaseHeld<T>(claim: () => T): T | undefined {
  try {
    return claim();
  } catch (error) {
    if (error instanceof LeaseHeld) return undefined;
    throw error;
  }
}
