/**
 * Wake-ups across processes: after its write transactions commit, a PostgresStore sends a NOTIFY
 * whose payload is its id, on one of two channels ({@link CHANNELS}): `spool_work` when the write
 * left work for other processes' workers ({@link wakesOthers}), `spool_changes` when it only
 * changed what waiters and streams read. It sends on its own ({@link Notifier}: one at a time, so
 * the commits that land while one is in flight share the next, and changes alone at most once per
 * {@link CHANGES_GAP_MS}; Postgres delivers it to connected listeners only). Not with the COMMIT:
 * a transaction that notifies holds the database's one notification-queue lock from its commit
 * until it ends, its WAL flush included, so commits that notified could never share a flush
 * (measured: docs/ARCHITECTURE.md, "Postgres"). A process that dies between a commit and its
 * notification leaves the wake-up to polling.
 *
 * One listening connection per store, opened on first use, LISTENs on `spool_work` for its
 * watchers of work (a worker), and on `spool_changes` as well only once something wants every
 * change (`externalChanges`, a watcher of `'all'`): a worker is not signalled, nor reads a
 * message, for the commits that give it nothing to do. It counts the notifications of other
 * stores (`externalChanges`) and calls the watchers (`watchChanges`): an idle worker wakes at once
 * instead of at its next poll. A listener that reconnects calls the watchers too (it may have
 * missed notifications); polling stays the fallback either way.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { WriteBatch } from '../../../src/ports/store.ts';

/** The channels every Spool store on a database notifies: work for workers, and every other change. */
export const CHANNELS = { work: 'spool_work', changed: 'spool_changes' } as const;

/** What a listener hears: the work channel only, or both. */
type Hearing = 'work' | 'all';

export class ChangeListener {
  readonly #config: pg.ClientConfig;
  /** The store's id: the payload of its own NOTIFYs ({@link Notifier}), which it does not hear. */
  readonly self = randomUUID();
  /** Each watcher, and whether it is told of every change or of work only. */
  readonly #watchers = new Map<() => void, Hearing>();
  #client: pg.Client | undefined;
  #starting: Promise<void> | undefined;
  /** Whether the listener LISTENs on `spool_changes` too (asked for once, kept). */
  #all = false;
  #listeningAll: Promise<void> | undefined;
  #closed = false;
  #everConnected = false;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** Notifications from other stores seen so far (and reconnections, which may have missed some). */
  changes = 0;

  constructor(config: pg.ClientConfig) {
    this.#config = config;
  }

  /**
   * Listen (once) on the channels `hearing` needs; resolves when the LISTENs are in place, or at
   * once when the server cannot be reached (polling covers it).
   */
  async start(hearing: Hearing): Promise<void> {
    if (hearing === 'all' && !this.#all) {
      this.#all = true;
      const client = this.#client;
      // Already connected on the work channel alone: add the other (a reconnection LISTENs on both).
      if (client) this.#listeningAll = client.query(`LISTEN ${CHANNELS.changed}`).then(() => undefined, () => this.#lost(client));
    }
    this.#starting ??= this.#connect();
    await this.#starting;
    await this.#listeningAll;
  }

  /** Call `onChange` after each commit of another store (`'work'`: each that woke workers) and after a reconnection; returns the unsubscribe. */
  watch(onChange: () => void, what: Hearing): () => void {
    this.#watchers.set(onChange, what);
    void this.start(what);
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
      if (n.payload !== this.self) this.#changed(n.channel !== CHANNELS.changed);
    });
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    try {
      await client.connect();
      await client.query(this.#all ? `LISTEN ${CHANNELS.work}; LISTEN ${CHANNELS.changed}` : `LISTEN ${CHANNELS.work}`);
      if (this.#closed) return void (await client.end());
      const reconnected = this.#everConnected;
      this.#client = client;
      this.#everConnected = true;
      if (reconnected) this.#changed(true);
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

  /** Another store committed (`wake`: work for workers), or the listener reconnected (it may have missed both). */
  #changed(wake: boolean): void {
    this.changes += 1;
    for (const [w, what] of this.#watchers) if (wake || what === 'all') w();
  }
}

/**
 * How long, at least, between two NOTIFYs on `spool_changes` alone: the commits of that window share
 * the next one. Each NOTIFY is a transaction of the server's (a commit record, the queue's lock, a
 * round trip): one per step of a job that runs alone cost the server about a fifth of its CPU in
 * the queue bench (3-step c1; docs/postgres.md, "Wake-ups"). Only waiters and streams of other
 * processes hear that channel, and a change reaches them this much later at most; work
 * (`spool_work`) goes at once, and carries the changes waiting with it.
 */
export const CHANGES_GAP_MS = 20;

/**
 * The NOTIFY a store sends after its commits: at once when none is in flight, else once more when
 * the one in flight is done (however many commits landed meanwhile), on `spool_work` if any of
 * them was work. Changes alone wait until {@link CHANGES_GAP_MS} after the last NOTIFY. A failed
 * one is dropped: polling covers it.
 */
export class Notifier {
  readonly #send: (wake: boolean) => Promise<unknown>;
  readonly #gapMs: number;
  #inFlight: Promise<void> | undefined;
  /** Commits since the last NOTIFY went out: none (undefined), changes only (false), or work (true). */
  #next: boolean | undefined;
  /** When the last NOTIFY went out (performance.now()), and the timer of a changes-only one waiting for its gap. */
  #lastSent = -Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** `send`: the NOTIFY (waking workers or not), on a connection of its own (outside any write transaction). */
  constructor(send: (wake: boolean) => Promise<unknown>, gapMs = CHANGES_GAP_MS) {
    this.#send = send;
    this.#gapMs = gapMs;
  }

  /** A write transaction committed; `wake`: it left work for other processes' workers. */
  committed(wake: boolean): void {
    this.#next = (this.#next ?? false) || wake;
    this.#pump(false);
  }

  /** Send what waits, unless one is in flight, or (not `now`) only changes wait and the gap since the last one is not over. */
  #pump(now: boolean): void {
    if (this.#inFlight || this.#next === undefined) return;
    const wait = now || this.#next ? 0 : this.#lastSent + this.#gapMs - performance.now();
    if (wait > 0) {
      this.#timer ??= setTimeout(() => {
        this.#timer = undefined;
        this.#pump(false);
      }, wait);
      this.#timer.unref?.();
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const next = this.#next;
    this.#next = undefined;
    this.#lastSent = performance.now();
    this.#inFlight = this.#send(next).then(
      () => undefined,
      () => undefined,
    );
    void this.#inFlight.then(() => {
      this.#inFlight = undefined;
      this.#pump(false);
    });
  }

  /** The notifications still to send, sent now, gap or not (before the pool closes). */
  async flush(): Promise<void> {
    while (this.#inFlight || this.#next !== undefined) {
      if (this.#inFlight) await this.#inFlight;
      else this.#pump(true);
    }
  }
}

/**
 * Whether a write batch leaves work another process may take, so that its notification wakes
 * other processes' workers (a wake-up costs each of them a round of reads; a write that leaves
 * them nothing notifies as `changed`, for waiters and streams alone; polling covers anything this
 * misses): a new job; an attempt's outcome recorded on its
 * own (its event waits in the inbox); a transition that creates effects it does not claim
 * itself, schedules timers, sends to other jobs, starts children, settles a parent, or gives back
 * the lease of a job still active. A claim, or an outcome applied with the transition that claims
 * the next step, leaves nothing.
 */
export function wakesOthers(batch: WriteBatch): boolean {
  if (batch.creates?.length || batch.finishes?.length || batch.releases?.length) return true;
  return (batch.commits ?? []).some(
    (c) =>
      (c.effects?.create.length ?? 0) > (c.claims?.length ?? 0) ||
      (c.timers?.schedule.length ?? 0) > 0 ||
      (c.deliveries?.length ?? 0) > 0 ||
      (c.children?.length ?? 0) > 0 ||
      c.settleParent !== undefined ||
      (c.job.status === 'active' && c.lease !== undefined && c.lease.until === null),
  );
}

/** The NOTIFY of a store (`store`: its id, the payload) after commits that left work for workers (`wake`) or only changed what others read. */
export function notifySql(store: string, wake: boolean): string {
  return `NOTIFY ${wake ? CHANNELS.work : CHANNELS.changed}, '${store}'`;
}
