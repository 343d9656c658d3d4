/**
 * Wake-ups across processes: after its write transactions commit, a PostgresStore sends `NOTIFY
 * spool_changes, '<store id>'` on its own ({@link Notifier}: one at a time, so the commits that
 * land while one is in flight share the next; Postgres delivers it to connected listeners only).
 * Not with the COMMIT: a transaction that notifies holds the database's one notification-queue
 * lock from its commit until it ends, its WAL flush included, so commits that notified could
 * never share a flush (measured: docs/ARCHITECTURE.md, "Postgres"). A process that dies between
 * a commit and its notification leaves the wake-up to polling. One listening connection per store, opened on first use, counts the
 * notifications of other stores (`externalChanges`) and calls the watchers (`watchChanges`): an
 * idle worker wakes at once instead of at its next poll. A listener that reconnects calls the
 * watchers too (it may have missed notifications); polling stays the fallback either way.
 */
import pg from 'pg';

/** The channel every Spool store on a database notifies. */
export const CHANNEL = 'spool_changes';

export class ChangeListener {
  readonly #config: pg.ClientConfig;
  readonly #self: string;
  readonly #watchers = new Set<() => void>();
  #client: pg.Client | undefined;
  #starting: Promise<void> | undefined;
  #closed = false;
  #everConnected = false;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** Notifications from other stores seen so far (and reconnections, which may have missed some). */
  changes = 0;

  constructor(config: pg.ClientConfig, self: string) {
    this.#config = config;
    this.#self = self;
  }

  /** Listen (once); resolves when the LISTEN is in place, or at once when the server cannot be reached (polling covers it). */
  start(): Promise<void> {
    this.#starting ??= this.#connect();
    return this.#starting;
  }

  /** Call `onChange` after each commit of another store (and after a reconnection); returns the unsubscribe. */
  watch(onChange: () => void): () => void {
    this.#watchers.add(onChange);
    void this.start();
    return () => this.#watchers.delete(onChange);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    const client = new pg.Client(this.#config);
    client.on('notification', (n) => {
      if (n.payload !== this.#self) this.#changed();
    });
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.#closed) return void (await client.end());
      const reconnected = this.#everConnected;
      this.#client = client;
      this.#everConnected = true;
      if (reconnected) this.#changed();
    } catch {
      this.#lost(client);
    }
  }

  #lost(client: pg.Client): void {
    if (this.#client === client) this.#client = undefined;
    client.end().catch(() => undefined);
    if (this.#closed || this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      void this.#connect();
    }, 500);
    this.#retry.unref?.();
  }

  #changed(): void {
    this.changes += 1;
    for (const w of this.#watchers) w();
  }
}

/**
 * The NOTIFY a store sends after its commits: at once when none is in flight, else once more when
 * the one in flight is done (however many commits landed meanwhile). A failed one is dropped:
 * polling covers it.
 */
export class Notifier {
  readonly #send: () => Promise<unknown>;
  #inFlight: Promise<void> | undefined;
  #again = false;

  /** `send`: the NOTIFY, on a connection of its own (outside any write transaction). */
  constructor(send: () => Promise<unknown>) {
    this.#send = send;
  }

  /** A write transaction committed. */
  committed(): void {
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    this.#inFlight = (async () => {
      do {
        this.#again = false;
        await this.#send().catch(() => undefined);
      } while (this.#again);
      this.#inFlight = undefined;
    })();
  }

  /** The notifications still to send, sent (before the pool closes). */
  async flush(): Promise<void> {
    await this.#inFlight;
  }
}
