/**
 * A write transaction's connection with statements held back: a statement whose result nobody
 * reads (BEGIN, the row locks, a SAVEPOINT, writes waiting from a program) is not sent on its own
 * and waited for. It is held, and goes with the next statement whose result is read, in one
 * extended-protocol sequence ending in ONE Sync ({@link Batch}): one socket write from here, one
 * flush of the answers from the server, one query cycle in node-postgres. The server runs the
 * statements in turn, each in full before the next starts, so each sees what the ones before it
 * wrote and locked, exactly as when it waited for them; one round trip instead of several.
 *
 * A statement that fails ends the sequence there (the server skips the rest up to the Sync); the
 * call fails with that statement's error, mapped by its `fails` (a write of a program already
 * returned: `Isolate`). Named statements are prepared once per connection, in node-postgres's
 * own record of them (`parsedStatements`), so its queries and these share one set.
 */
import pg from 'pg';

/** A query: simple text (one statement, no parameters), or a statement with its values (named: prepared once per connection). */
export type Sendable = string | pg.QueryConfig | pg.QueryArrayConfig;

interface Held {
  q: Sendable;
  fails: ((error: unknown) => unknown) | undefined;
}

/** What node-postgres's Result is (pg/lib/result.js): one statement's rows, as a query's result. */
interface ResultLike extends pg.QueryResult {
  addFields(fields: unknown[]): void;
  parseRow(row: unknown[]): unknown;
  addRow(row: unknown): void;
  addCommandComplete(msg: unknown): void;
}

/** The parts of a node-postgres connection a {@link Batch} writes to. */
interface Connection {
  stream: { cork(): void; uncork(): void };
  parsedStatements: Record<string, string>;
  parse(q: { name: string; text: string }): void;
  bind(b: { statement: string; values: readonly unknown[]; valueMapper: (v: unknown) => unknown }): void;
  describe(d: { type: 'P'; name: string }): void;
  execute(e: { portal: string }): void;
  sync(): void;
  on(event: 'parseComplete', fn: () => void): void;
  off(event: 'parseComplete', fn: () => void): void;
}

const { Result, utils } = pg as unknown as {
  Result: new (rowMode: string | undefined, types: unknown) => ResultLike;
  utils: { prepareValue(v: unknown): unknown };
};

/**
 * Statements as one extended-protocol sequence (Parse when not prepared on the connection yet,
 * Bind, Execute each, the last described; one Sync at the end), as a node-postgres submittable:
 * its answers come to it in order, each statement's ending with its CommandComplete. Only the
 * last statement's rows are read (a held statement's result is nobody's).
 */
class Batch {
  readonly results: ResultLike[];
  /** The statement that failed (its index) and its error; or a value that could not be sent. */
  failed: { at: number; error: unknown } | undefined;
  readonly done: Promise<void>;
  #settle!: () => void;
  #at = 0;
  #connection: Connection | undefined;
  /** The statement names this batch sent a Parse for, in order ('' for the unnamed one), and their texts. */
  readonly #parses: { name: string; text: string }[] = [];
  #parsed = 0;

  constructor(
    readonly items: readonly Held[],
    types: unknown,
  ) {
    this.results = items.map((h) => new Result(typeof h.q === 'string' ? undefined : (h.q as { rowMode?: string }).rowMode, types));
    this.done = new Promise((resolve) => (this.#settle = resolve));
  }

  /** Its statements' texts, joined by ' ⟫ ' (for whoever records what a client is sent: node-postgres reads no `text` of a submittable). */
  get text(): string {
    return this.items.map((h) => (typeof h.q === 'string' ? h.q : h.q.text)).join(' ⟫ ');
  }

  submit(connection: Connection): void {
    this.#connection = connection;
    connection.on('parseComplete', this.#onParse);
    const sending = new Set<string>();
    connection.stream.cork();
    try {
      for (const [i, { q }] of this.items.entries()) {
        const { name = '', text, values = [] } = typeof q === 'string' ? { text: q } : q;
        try {
          if (name === '' || (connection.parsedStatements[name] === undefined && !sending.has(name))) {
            connection.parse({ name, text });
            this.#parses.push({ name, text });
            sending.add(name);
          }
          connection.bind({ statement: name, values, valueMapper: utils.prepareValue });
        } catch (error) {
          // A value that cannot be sent (node-postgres's serialiser threw): what went before runs, this fails.
          this.failed = { at: i, error };
          break;
        }
        // Only the last statement's rows are read: the others' are not described, and are passed by.
        if (i === this.items.length - 1) connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '' });
      }
      connection.sync();
    } finally {
      connection.stream.uncork();
    }
  }

  /** A Parse this batch sent succeeded: the statement is prepared on the connection. */
  readonly #onParse = () => {
    const p = this.#parses[this.#parsed++];
    if (p && p.name !== '') this.#connection!.parsedStatements[p.name] = p.text;
  };

  handleRowDescription(msg: { fields: unknown[] }): void {
    this.results[this.#at]?.addFields(msg.fields);
  }

  handleDataRow(msg: { fields: unknown[] }): void {
    if (this.#at !== this.items.length - 1) return;
    const r = this.results[this.#at]!;
    r.addRow(r.parseRow(msg.fields));
  }

  handleCommandComplete(msg: unknown): void {
    this.results[this.#at++]?.addCommandComplete(msg);
  }

  handleEmptyQuery(): void {
    this.#at++;
  }

  handlePortalSuspended(): void {
    this.handleError(new Error('a statement of a batch stopped part-way (portal suspended)'));
  }

  handleCopyInResponse(): void {
    this.handleError(new Error('a statement of a batch asked for COPY data'));
  }

  handleCopyData(): void {}

  /** The server's error (it skips the rest to the Sync; node-postgres frees the client at its ReadyForQuery), or the connection's. */
  handleError(error: unknown): void {
    if (this.failed === undefined || this.#at < this.failed.at) this.failed = { at: this.#at, error };
    this.#end();
  }

  handleReadyForQuery(): void {
    this.#end();
  }

  #end(): void {
    this.#connection?.off('parseComplete', this.#onParse);
    this.#settle();
  }
}

export class Pipeline {
  readonly #client: pg.PoolClient;
  #held: Held[] = [];

  constructor(client: pg.PoolClient) {
    this.#client = client;
  }

  /** Hold `q`: it goes with the next {@link query} or {@link send}; its error there is `fails(error)` when given. */
  hold(q: Sendable, fails?: (error: unknown) => unknown): void {
    this.#held.push({ q, fails });
  }

  /** `q` after what is held, in one round trip: `q`'s result, or the first error (mapped by the `fails` of the statement that failed). */
  async query(q: Sendable, fails?: (error: unknown) => unknown): Promise<pg.QueryResult> {
    this.#held.push({ q, fails });
    return (await this.send())!;
  }

  /** What is held, now: the last one's result (undefined when nothing was held). */
  async send(): Promise<pg.QueryResult | undefined> {
    const held = this.#held;
    if (held.length === 0) return undefined;
    this.#held = [];
    const batch = new Batch(held, (this.#client as unknown as { _types: unknown })._types);
    // A submittable: node-postgres queues it like a query and hands it the answers (its `query` returns it, not a promise).
    this.#client.query(batch as unknown as pg.Submittable);
    await batch.done;
    if (batch.failed) {
      const h = held[Math.min(batch.failed.at, held.length - 1)]!;
      throw h.fails ? h.fails(batch.failed.error) : batch.failed.error;
    }
    return batch.results.at(-1);
  }

  /** What is held now belongs to a program that returned: its error, wherever it comes, is `fails(error)` (unless mapped already). */
  returned(fails: (error: unknown) => unknown): void {
    for (const h of this.#held) h.fails ??= fails;
  }
}
