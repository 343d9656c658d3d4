/**
 * What a statement in Postgres's form writes and reads, read off its text once: what decides
 * which waiting writes may go in one statement with it (deferred.ts, pairs.ts).
 */
import { pgMigrations } from './open.ts';
import type { PgStatement } from './sql.ts';

/** Spool's tables (the names statements may mention): those its migrations create. */
const TABLES = [...new Set(pgMigrations().flatMap((m) => [...m.sql.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+)/gi)].map((x) => x[1]!)))];

/** What a statement writes and names. */
export interface Shape {
  /** The table it changes, if it may be a CTE part: a single INSERT, UPDATE or DELETE, without a WITH of its own or a `$` in a literal. */
  writes: string | null;
  /** The tables its text names. */
  names: Set<string>;
  /** It may take CTE parts in front of it (not WITH RECURSIVE; no `$` in a literal, where its parameters are renumbered). */
  leads: boolean;
  /**
   * An INSERT of one VALUES row that reads no table (no subquery, ON CONFLICT or RETURNING): the
   * index of its `id` column's value among its parameters. Null for any other statement.
   */
  insertsId: number | null;
  /**
   * An UPDATE that reads and writes its table only at the row `WHERE id = $n` names (its table
   * named nowhere else but in `table.column`, the row being updated): the index of that parameter.
   */
  atRow: number | null;
}

const shapes = new WeakMap<PgStatement, Shape>();

export function shapeOf(stmt: PgStatement): Shape {
  let shape = shapes.get(stmt);
  if (!shape) {
    const text = stmt.text;
    const renumberable = !text.includes("'$");
    const writes = renumberable && !/^\s*WITH\s/i.test(text) ? (/^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)/i.exec(text)?.[1] ?? null) : null;
    const names = new Set(TABLES.filter((t) => new RegExp(`\\b${t}\\b`).test(text)));
    const only = writes !== null && names.size === 1;
    shape = {
      writes,
      names,
      leads: renumberable && !/^\s*WITH\s+RECURSIVE\s/i.test(text),
      insertsId: only ? insertedId(text) : null,
      atRow: writes !== null ? updatedRow(text, writes) : null,
    };
    shapes.set(stmt, shape);
  }
  return shape;
}

/** Where a keyword stands in a statement outside parentheses and quotes (-1: not there). */
export function topLevel(text: string, word: string, from = 0): number {
  let depth = 0;
  const re = new RegExp(`^${word}\\b`, 'i');
  for (let i = from; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      i = text.indexOf(c, i + 1);
      if (i < 0) return -1;
    } else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (depth === 0 && /\s/.test(text[i - 1] ?? ' ') && re.test(text.slice(i, i + word.length + 1))) return i;
  }
  return -1;
}

/** A parenthesised list's items, split at its top-level commas (`open`: where its `(` stands), and where it ends; undefined when it does not close. */
function list(text: string, open: number): { items: string[]; end: number } | undefined {
  const items: string[] = [];
  let depth = 0;
  let start = open + 1;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      i = text.indexOf(c, i + 1);
      if (i < 0) return undefined;
    } else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return { items: [...items, text.slice(start, i).trim()], end: i + 1 };
    else if (c === ',' && depth === 1) {
      items.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  return undefined;
}

/** A parameter standing alone (`$n`, or `$n::type`): its index among the values. */
function param(expr: string | undefined): number | null {
  const m = /^\$(\d+)(?:::\w+)?$/.exec(expr ?? '');
  return m ? Number(m[1]) - 1 : null;
}

/** `INSERT INTO t (…, id, …) VALUES (…, $n, …)` and nothing after: n's index. */
function insertedId(text: string): number | null {
  const head = /^\s*INSERT\s+INTO\s+\w+\s*\(/i.exec(text);
  if (!head) return null;
  const columns = list(text, head[0].length - 1);
  const values = columns && /^\s*VALUES\s*\(/i.exec(text.slice(columns.end));
  if (!columns || !values) return null;
  const row = list(text, columns.end + values[0].length - 1);
  if (!row || text.slice(row.end).trim() !== '' || row.items.length !== columns.items.length) return null;
  return param(row.items[columns.items.indexOf('id')]);
}

/** `UPDATE t SET … WHERE id = $n AND …` (no OR outside parentheses), t named only there and in `t.column`: n's index. */
function updatedRow(text: string, table: string): number | null {
  if (!/^\s*UPDATE\s/i.test(text) || [...text.matchAll(new RegExp(`\\b${table}\\b(?!\\.)`, 'g'))].length !== 1) return null;
  const where = topLevel(text, 'WHERE');
  if (where < 0 || topLevel(text, 'OR', where) >= 0) return null;
  const m = /^WHERE\s+id\s*=\s*(\$\d+(?:::\w+)?)(?:\s+AND\s|\s+RETURNING\s|\s*$)/i.exec(text.slice(where));
  return m ? param(m[1]) : null;
}
