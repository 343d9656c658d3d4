/**
 * A program's `getThen` (program.ts: a statement, and only when it returns a row, a second one) as
 * one Postgres statement: both as data-modifying CTEs, the second's WHERE also asking that the
 * first returned a row, so it writes nothing when the first found none, exactly as when it is not
 * run. One statement's parts all see the snapshot from before it, so the second must not name the
 * table the first writes (it would not see that write); the first may read the table the second
 * writes, since it runs first in turn too (an attempt's end reads its job's lease before the job's
 * update). An attempt's end and its commit's job update (commit.ts) are thereby one round trip.
 */
import { topLevel } from './shapes.ts';
import type { PgStatement } from './sql.ts';

/** The highest `$n` a text uses (its parameter count). */
function paramCount(text: string): number {
  return Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
}

/** Shift a statement's `$n` parameters by `by` (no `$` stands in its literals: see deferred.ts's shapes). */
export const shifted = (text: string, by: number) => (by === 0 ? text : text.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + by}`));

/** The marker column between the first statement's columns and the second's (NULL: the second changed no row). */
export const THEN_COLUMN = 'spool_then';

const made = new Map<string, PgStatement | null>();

/**
 * The two statements as one (its values: the first's, then the second's), or null when they may
 * not be: the second is not an UPDATE or DELETE with a WHERE and a RETURNING. Rows: none when the
 * first returned none; else the first's columns, {@link THEN_COLUMN}, and the second's (NULL when
 * it changed no row).
 */
export function pairOf(first: PgStatement, second: PgStatement): PgStatement | null {
  return pairWith(`${first.key}>${second.key}`, first, second, () => `SELECT spool_a.*, b.* FROM spool_a LEFT JOIN (SELECT 1 AS ${THEN_COLUMN}, * FROM spool_b) AS b ON true`);
}

/**
 * The pair as {@link pairOf} makes it, answering nothing but failing unless it did what was
 * expected: `spool_expect` (Postgres schema 8: SQLSTATE SPX01 unless given true) of the first
 * having returned a row whose `firstColumns` equal the values given after both statements' own,
 * and the second one whose `secondColumns` equal those after them (NULL equal to NULL). A lone
 * SELECT without FROM, so the check runs whatever the CTEs return (deferred.ts, "Sent ahead").
 */
export function expectedPairOf(first: PgStatement, second: PgStatement, firstColumns: readonly string[], secondColumns: readonly string[]): PgStatement | null {
  const key = `${first.key}>${second.key}?${firstColumns.join(',')}|${secondColumns.join(',')}`;
  return pairWith(key, first, second, (params) => {
    let n = params;
    const match = (cte: string, columns: readonly string[]) =>
      `EXISTS (SELECT 1 FROM ${cte} WHERE ${columns.length === 0 ? 'true' : columns.map((c) => `${c} IS NOT DISTINCT FROM $${++n}`).join(' AND ')})`;
    return `SELECT spool_expect(${match('spool_a', firstColumns)} AND ${match('spool_b', secondColumns)}) AS spool_expected`;
  }, () => `expected${++expectedPairs}`);
}

/** Expected pairs made so far (the number in each one's prepared name). */
let expectedPairs = 0;

/**
 * The pair with `tail` (given the parameter count of both statements) as its main query, made once
 * under `key`; its statement's key (its prepared name) `name()`, asked once it is made (an expected
 * pair's is numbered: its `key` would pass Postgres's 63 bytes for a name, truncated into another's).
 */
function pairWith(key: string, first: PgStatement, second: PgStatement, tail: (params: number) => string, name = () => key): PgStatement | null {
  if (made.has(key)) return made.get(key)!;
  const where = /^\s*(UPDATE|DELETE)\s/i.test(second.text) ? topLevel(second.text, 'WHERE') : -1;
  const returning = where < 0 ? -1 : topLevel(second.text, 'RETURNING');
  let pair: PgStatement | null = null;
  if (returning > where) {
    const t = second.text;
    const guarded = `${t.slice(0, where)}WHERE (${t.slice(where + 5, returning).trim()}) AND EXISTS (SELECT 1 FROM spool_a)\n      ${t.slice(returning)}`;
    const shift = paramCount(first.text);
    const text = `WITH spool_a AS (${first.text}), spool_b AS (${shifted(guarded, shift)})
      ${tail(shift + paramCount(second.text))}`;
    pair = { key: name(), text, names: null };
  }
  made.set(key, pair);
  return pair;
}
