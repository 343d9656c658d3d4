/**
 * sqlite-wasm's prepared statements in the shape the SQL core runs (persistence/sql/program.ts,
 * SyncStatement: better-sqlite3's): `run` (changes), `get` (the first row), `all` (every row), a
 * statement's parameters given as better-sqlite3 takes them (an object for the named `@x`, values
 * for the `?` in order), rows as objects named by their columns (or arrays: `raw`). Every SQLite
 * error comes out as a {@link SqliteWasmError} with its extended code (`SQLITE_CONSTRAINT_UNIQUE`),
 * the `code` the fault mapping reads (persistence/sql/sqliteFaults.ts).
 */
import type { Database, PreparedStatement, Sqlite3Static } from '@sqlite.org/sqlite-wasm';
import type { SyncStatement } from '../../sql/program.ts';
import type { Row } from '../../sql/records.ts';

/** A SQLite error from the sqlite-wasm driver: `code` its extended result code's name. */
export class SqliteWasmError extends Error {
  override readonly name = 'SqliteWasmError';
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** `error` (sqlite-wasm's SQLite3Error, with its `resultCode`) as a {@link SqliteWasmError}; anything else as it is. */
export function asSqliteError(sqlite3: Sqlite3Static, error: unknown): unknown {
  const rc = (error as { resultCode?: unknown } | null)?.resultCode;
  if (!(error instanceof sqlite3.SQLite3Error) || typeof rc !== 'number') return error;
  return new SqliteWasmError(error.message, sqlite3.capi.sqlite3_js_rc_str(rc) ?? `SQLITE_UNKNOWN_${rc}`);
}

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A statement's parameter: the named one's key in the arguments' object, or null for a `?`. */
type Param = string | null;

/** One prepared statement (see the module's comment). */
export class WasmStatement implements SyncStatement {
  readonly readonly: boolean;
  readonly #sqlite3: Sqlite3Static;
  readonly #db: Database;
  readonly #stmt: PreparedStatement;
  readonly #params: Param[];
  readonly #raw: boolean;
  readonly #ptr: number;
  readonly #columns: number;
  /** The row's values as an object, by a function built once for the statement's columns. */
  readonly #named: (values: unknown[]) => Row;

  constructor(sqlite3: Sqlite3Static, db: Database, sql: string, raw = false) {
    this.#sqlite3 = sqlite3;
    this.#db = db;
    this.#raw = raw;
    try {
      this.#stmt = db.prepare(sql);
    } catch (error) {
      throw asSqliteError(sqlite3, error);
    }
    const capi = sqlite3.capi;
    const ptr = (this.#ptr = this.#stmt.pointer as number);
    this.#columns = this.#stmt.columnCount;
    this.readonly = capi.sqlite3_stmt_readonly(ptr) !== 0;
    this.#params = Array.from({ length: this.#stmt.parameterCount }, (_, i) => capi.sqlite3_bind_parameter_name(ptr, i + 1)?.slice(1) ?? null);
    const names = this.#stmt.columnCount === 0 ? [] : this.#stmt.getColumnNames(); // (it throws for none)
    const body = `return { ${names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(', ')} };`;
    this.#named = new Function('v', body) as (values: unknown[]) => Row;
  }

  run(...args: unknown[]): { changes: number } {
    this.#exec(args, () => {
      while (this.#step());
    });
    return { changes: this.#db.changes() };
  }

  get(...args: unknown[]): unknown {
    return this.#exec(args, () => (this.#step() ? this.#row() : undefined));
  }

  all(...args: unknown[]): unknown[] {
    return this.#exec(args, () => {
      const rows: unknown[] = [];
      while (this.#step()) rows.push(this.#row());
      return rows;
    });
  }

  finalize(): void {
    this.#stmt.finalize();
  }

  /**
   * One step: true on a row. By the C API, not the oo1 `step()`, which writes every failed step
   * (a constraint a batch write meets, as expected) to the console.
   */
  #step(): boolean {
    const capi = this.#sqlite3.capi;
    const rc = capi.sqlite3_step(this.#ptr);
    if (rc === capi.SQLITE_ROW) return true;
    if (rc === capi.SQLITE_DONE) return false;
    throw new SqliteWasmError(capi.sqlite3_errmsg(this.#db.pointer as number), capi.sqlite3_js_rc_str(rc) ?? `SQLITE_UNKNOWN_${rc}`);
  }

  /** The current row's values (integers as numbers while they are safe ones, as sqlite-wasm reads them), or named. */
  #row(): unknown {
    const capi = this.#sqlite3.capi;
    const p = this.#ptr;
    const values: unknown[] = new Array(this.#columns);
    for (let i = 0; i < this.#columns; i++) {
      switch (capi.sqlite3_column_type(p, i)) {
        case capi.SQLITE_NULL:
          values[i] = null;
          break;
        case capi.SQLITE_INTEGER: {
          const n = capi.sqlite3_column_int64(p, i);
          values[i] = n >= MIN_SAFE && n <= MAX_SAFE ? Number(n) : n;
          break;
        }
        case capi.SQLITE_FLOAT:
          values[i] = capi.sqlite3_column_double(p, i);
          break;
        case capi.SQLITE_TEXT:
          values[i] = capi.sqlite3_column_text(p, i);
          break;
        default:
          values[i] = this.#stmt.get(i); // a blob: the store writes none
      }
    }
    return this.#raw ? values : this.#named(values);
  }

  /** Bind `args`, run `fn`, and reset the statement whatever happened. */
  #exec<T>(args: unknown[], fn: () => T): T {
    try {
      this.#bind(args);
      return fn();
    } catch (error) {
      throw asSqliteError(this.#sqlite3, error);
    } finally {
      this.#sqlite3.capi.sqlite3_reset(this.#ptr); // its code is the failed step's, thrown above
      this.#sqlite3.capi.sqlite3_clear_bindings(this.#ptr);
    }
  }

  /** better-sqlite3's binding: an object's keys for the named parameters, the other values in order for the `?`. */
  #bind(args: unknown[]): void {
    if (this.#params.length === 0) return;
    const named = args.find((a): a is Record<string, unknown> => a !== null && typeof a === 'object' && !(a instanceof Uint8Array));
    let next = 0;
    const positional = named === undefined ? args : args.filter((a) => a !== named);
    this.#params.forEach((key, i) => {
      let value: unknown;
      if (key === null) {
        if (next >= positional.length) throw new RangeError(`Too few parameter values were provided (${positional.length})`);
        value = positional[next++];
      } else {
        if (named === undefined || !(key in named)) throw new RangeError(`Missing named parameter "${key}"`);
        value = named[key];
      }
      this.#stmt.bind(i + 1, (value ?? null) as never);
    });
  }
}
