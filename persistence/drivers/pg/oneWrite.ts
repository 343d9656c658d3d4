/**
 * What a connection sends within one turn of the event loop goes out in one write. With pipeline
 * mode, node-postgres writes each query to the socket as it is made, one write each; on loopback
 * TCP a write costs the sender about as much as the server spends running a small statement, and
 * wakes the server once per write. So the socket is corked at the turn's first query and uncorked
 * once the turn's promise jobs have run (setImmediate): a transaction whose statements are sent
 * ahead of their answers (deferred.ts) is then one write, its opening, step and COMMIT together.
 * A query the caller awaits is sent at the end of the turn it was made in, as soon as before.
 */
import type pg from 'pg';

interface Corkable {
  cork(): void;
  uncork(): void;
}

/** Make `client`'s queries of one turn go out in one write (see the file's comment). */
export function oneWritePerTurn(client: pg.Client): void {
  const connection = (client as unknown as { connection?: { stream?: Partial<Corkable> } }).connection;
  // The class's own query, looked up at each call (not kept: whatever wraps it later still runs).
  const proto = Object.getPrototypeOf(client) as { query: (...a: unknown[]) => unknown };
  let corked: Corkable | undefined;
  const uncork = () => {
    const stream = corked;
    corked = undefined;
    stream?.uncork();
  };
  client.query = function (this: pg.Client, ...args: unknown[]) {
    // The stream as it is now (a TLS connection replaces the socket it started on).
    const stream = connection?.stream;
    if (corked === undefined && typeof stream?.cork === 'function' && typeof stream.uncork === 'function') {
      corked = stream as Corkable;
      corked.cork();
      setImmediate(uncork);
    }
    return proto.query.apply(this, args);
  } as typeof client.query;
}
