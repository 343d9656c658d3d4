/**
 * A batch claim of due activities (`claimDueEffects`) as both SQL stores read it: its statement's
 * parameters, what it takes of its candidates, and what its counts mean. The SQL is `dueClaimParts`
 * (statements.ts); SQLite reads its candidates (`dueClaimPickSql`), takes them here (`pickDue`) and
 * claims each row (`claimPicked`), Postgres runs it all as one statement
 * (persistence/drivers/pg/claimDue.ts).
 */
import type { DueClaim, DueClaimResult } from '../../src/ports/store.ts';
import type { Row } from './records.ts';

/** The named parameters of a batch claim's statement: `srcs` the ones it may take, those out of slots (`budgets` 0) left out. */
export function dueClaimParams(c: DueClaim) {
  const budgets = c.budgets ?? {};
  return {
    runner: c.runner,
    now: c.now,
    until: c.claimUntil,
    limit: c.limit,
    machines: JSON.stringify(c.machines),
    srcs: JSON.stringify(c.srcs.filter((src) => !(Object.hasOwn(budgets, src) && budgets[src]! <= 0))),
    budgets: JSON.stringify(budgets),
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
export function dueClaimCounts(row: Row | DueCounts | undefined, claimed: number): Pick<DueClaimResult, 'more' | 'limited'> {
  const lockable = Number(row?.['lockable'] ?? 0);
  const firsts = Number(row?.['firsts'] ?? 0);
  const within = Number(row?.['within'] ?? 0);
  return { more: lockable > firsts || within > claimed, limited: firsts > within || Number(row?.['starved'] ?? 0) === 1 };
}

/** A batch claim's counts (`dueClaimParts`' `counts`), from which {@link dueClaimCounts} tells `more` and `limited`. */
export interface DueCounts {
  lockable: number;
  firsts: number;
  within: number;
  starved: number;
}

/**
 * What a batch claim of `limit` takes of its candidates (`dueClaimPickSql`'s rows, oldest first:
 * `lease_free` 0 is a job whose live lease the runner holds): `dueClaimParts`' `pick` rule on
 * SQLite, in JS. `held` the rows of such jobs; of the others (`lockable`), the oldest row of each
 * job (`firsts`: a second claim of a job needs the fence the first returns), those inside their
 * src's budget (`within`: the first `budgets[src]` of that src's firsts; a src without one: any),
 * and `picked` the oldest `limit` of them. `starved` is not read here (0).
 */
export function pickDue(rows: readonly Row[], limit: number, budgets: Readonly<Record<string, number>>): { picked: Row[]; held: Row[]; counts: DueCounts } {
  const picked: Row[] = [];
  const held: Row[] = [];
  const counts: DueCounts = { lockable: 0, firsts: 0, within: 0, starved: 0 };
  const jobs = new Set<unknown>();
  const ofSrc = new Map<string, number>();
  for (const row of rows) {
    if (Number(row['lease_free']) !== 1) {
      held.push(row);
      continue;
    }
    counts.lockable += 1;
    if (jobs.has(row['job_id'])) continue;
    jobs.add(row['job_id']);
    counts.firsts += 1;
    const src = row['src'] as string;
    const nth = (ofSrc.get(src) ?? 0) + 1;
    ofSrc.set(src, nth);
    if (Object.hasOwn(budgets, src) && nth > budgets[src]!) continue;
    counts.within += 1;
    if (picked.length < limit) picked.push(row);
  }
  return { picked, held, counts };
}

/** Whether any src is out of slots in `budgets`: only then may `starved` be 1 (`dueStarved`). */
export function anyStarved(budgets: Readonly<Record<string, number>>): boolean {
  for (const src in budgets) if (budgets[src]! <= 0) return true;
  return false;
}
