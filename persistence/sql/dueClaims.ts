/**
 * A batch claim of due activities (`claimDueEffects`) as both SQL stores read it: its statement's
 * parameters, and what its counts mean. The SQL is `dueClaimParts` (statements.ts); SQLite runs
 * its pick and claims each row as `claimEffect` does, Postgres runs it all as one statement
 * (persistence/drivers/pg/claimDue.ts).
 */
import type { DueClaim, DueClaimResult } from '../../src/ports/store.ts';
import type { Row } from './records.ts';

/** The named parameters of a batch claim's statement. */
export function dueClaimParams(c: DueClaim) {
  return {
    runner: c.runner,
    now: c.now,
    until: c.claimUntil,
    limit: c.limit,
    machines: JSON.stringify(c.machines),
    srcs: JSON.stringify(c.srcs),
    budgets: JSON.stringify(c.budgets ?? {}),
  };
}

/** `dueEffects`' statement and parameters: every due row, or (`unclaimableBy`) only those no batch claim with these machine versions takes, whatever its srcs and budgets. */
export function dueRead(now: number, limit: number, runner: string | undefined, unclaimableBy: readonly string[] | undefined) {
  const params = { now, limit, runner: runner ?? null };
  return unclaimableBy
    ? { name: 'dueUnclaimable' as const, params: { ...params, machines: JSON.stringify(unclaimableBy) } }
    : { name: 'dueEffects' as const, params };
}

/**
 * `more` and `limited` from a batch claim's counts (on each of its rows; no row: nothing was
 * claimable): a job had a second claimable row, or rows inside their budgets were not claimed
 * (past the limit: the pick reads one row more than it may claim; or a claim refused); rows were
 * left over their budgets, or a src out of slots has rows due.
 */
export function dueClaimCounts(row: Row | undefined, claimed: number): Pick<DueClaimResult, 'more' | 'limited'> {
  const lockable = Number(row?.['lockable'] ?? 0);
  const firsts = Number(row?.['firsts'] ?? 0);
  const within = Number(row?.['within'] ?? 0);
  return { more: lockable > firsts || within > claimed, limited: firsts > within || Number(row?.['starved'] ?? 0) === 1 };
}
