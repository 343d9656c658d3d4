/**
 * A write transaction's connection with statements held back: a statement whose result nobody
 * reads (BEGIN with the row locks, a SAVEPOINT, writes waiting from a program) is not sent on its
 * own and waited for. It is held, and goes out in the same socket write as the next statement
 * whose result is read, ahead of it (node-postgres's pipeline mode, `pipeline: true` on the pool:
 * each query is sent as soon as it is made, and the server answers them in order). The server
 * runs them in turn, each in full before the next starts, so each statement after a held one sees
 * what it wrote and locked, exactly as when it waited for it; one round trip instead of two.
 *
 * A held statement that fails fails the call it went with, with its own error (the statements
 * after it in the transaction are refused by the server, 25P02, and that refusal is not the one
 * reported). `fails` maps the error (a write of a program already returned: `Isolate`).
 */
import type pg from 'pg';

/** A query node-postgres takes: simple text, or a prepared statement with its values. */
export type Sendable = string | pg.QueryConfig | pg.QueryArrayConfig;

interface Held {
  q: Sendable;
  fails: ((error: unknown) => unknown) | undefined;
}

/** The socket a client writes to (cork/uncork: the queries made between them go in one write). */
function socketOf(client: pg.PoolClient): { cork(): void; uncork(): void } | undefined {
  return (client as unknown as { connection?: { stream?: { cork(): void; uncork(): void } } }).connection?.stream;
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

  /** `q` after what is held, in one write: `q`'s result, or the first error (mapped by `fails`, whichever failed). */
  async query(q: Sendable, fails?: (error: unknown) => unknown): Promise<pg.QueryResult> {
    this.#held.push({ q, fails });
    return (await this.send())!;
  }

  /** What is held, now: the last one's result (undefined when nothing was held). */
  async send(): Promise<pg.QueryResult | undefined> {
    const held = this.#held;
    if (held.length === 0) return undefined;
    this.#held = [];
    if (held.length === 1) return this.#client.query(held[0]!.q).catch((error: unknown) => Promise.reject(held[0]!.fails ? held[0]!.fails(error) : error));
    const socket = socketOf(this.#client);
    socket?.cork();
    let sent: Promise<pg.QueryResult>[];
    try {
      sent = held.map((h) => this.#client.query(h.q));
    } finally {
      socket?.uncork();
    }
    // Every answer is read (none rejects unheard); the first error is the one reported.
    const settled = await Promise.allSettled(sent);
    for (const [i, s] of settled.entries()) {
      if (s.status === 'rejected') throw held[i]!.fails ? held[i]!.fails(s.reason) : s.reason;
    }
    return (settled.at(-1) as PromiseFulfilledResult<pg.QueryResult>).value;
  }

  /** What is held now belongs to a program that returned: its error, wherever it comes, is `fails(error)` (unless mapped already). */
  returned(fails: (error: unknown) => unknown): void {
    for (const h of this.#held) h.fails ??= fails;
  }
}
