/**
 * Event streams over SSE, read from the durable history: one per job (the id is the history's
 * revision) and one for every job (the id is the history row's global `seq`). A stream reads a
 * page after its cursor, writes it, and reads the next page only once that write has gone out,
 * so a client that reads slowly gets its events slowly and holds at most one message and the
 * socket's buffers on the server; one that takes nothing for `stallMs` is disconnected, and
 * resumes with `Last-Event-ID`. Nothing is buffered per client, and replay costs no memory
 * beyond a page. Streams at one cursor share each page read and its text, and a commit wakes
 * them after the write that made it has returned (changes.ts), so paused clients cost writers
 * nothing.
 */
import type { Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { ValidationError, type Runtime, type TransitionOutcome } from '../index.ts';
import type { ChangeSignal } from './changes.ts';
import { TooManyStreamsError } from './errors.ts';

/** How streams behave; every field has a default in `createServer`. */
export interface StreamOptions {
  /** A comment line this often on an idle stream, so proxies keep it open. */
  heartbeatMs: number;
  /** A write that has not gone out after this long disconnects the client. */
  stallMs: number;
  /** Records read (and written) at a time. */
  pageSize: number;
  /** Streams open at once; one more is refused (503). */
  maxStreams: number;
}

/** One open stream, as `StreamHub.open()` shows it (for operators and tests). */
export interface StreamState {
  kind: 'job' | 'all';
  /** The last id written (the revision, or the global seq). */
  cursor: number;
  /** Messages written so far. */
  sent: number;
  /** True while a write waits for the client to take what it was sent. */
  writing: boolean;
}

/** The outcomes a history row has: the `kind` filter of the all-jobs stream. */
export const OUTCOMES: readonly TransitionOutcome[] = ['started', 'applied', 'ignored', 'failed', 'migrated', 'stale'];

interface Message {
  id: number;
  event: string;
  data: unknown;
}

/** A page after a cursor. `more`: read again at once; `done`: nothing more will come, close. */
interface Page {
  messages: Message[];
  cursor: number;
  more: boolean;
  done: boolean;
}

type Source = (cursor: number) => Promise<Page>;

/** A page as text, ready to write: each message's SSE block with its id. */
interface Written {
  blocks: { id: number; text: string }[];
  cursor: number;
  more: boolean;
  done: boolean;
}

/** The open streams of one server. */
export class StreamHub {
  readonly #open = new Set<StreamState>();
  /** Each open stream's end: closeAll aborts them (one shared signal would take a listener per stream). */
  readonly #ends = new Set<AbortController>();
  #closed = false;
  /** Pages being read now, by source and cursor: streams at one cursor share one read and its text. */
  readonly #reads = new Map<string, Promise<Written>>();
  readonly #runtime: Runtime;
  readonly #changes: ChangeSignal;
  readonly #options: StreamOptions;

  constructor(runtime: Runtime, changes: ChangeSignal, options: StreamOptions) {
    this.#runtime = runtime;
    this.#changes = changes;
    this.#options = options;
  }

  /** The streams open now. */
  open(): StreamState[] {
    return [...this.#open].map((s) => ({ ...s }));
  }

  /** End every stream (the server is stopping). */
  closeAll(): void {
    this.#closed = true;
    for (const end of this.#ends) end.abort();
  }

  /**
   * `GET /api/jobs/:id/stream`: the job's history after the cursor, then each new commit; closes
   * after the job's final commit. A client whose cursor is already at a finished job's last
   * revision gets 204, which tells an `EventSource` to stop reconnecting.
   */
  async job(c: Context, jobId: string): Promise<Response> {
    const after = cursorOf(c);
    const job = await this.#runtime.get(jobId);
    if (job.final && after >= job.revision) return c.body(null, 204);
    const source: Source = async (cursor) => {
      const before = await this.#runtime.get(jobId);
      if (before.revision <= cursor) return { messages: [], cursor, more: false, done: before.final };
      const rows = (await this.#runtime.history(jobId)).filter((h) => h.revision > cursor).slice(0, this.#options.pageSize);
      // The job read again after its history: a commit between the two reads would otherwise mark
      // the row it added not final (`before` is older than that row), and end the stream after it.
      const now = await this.#runtime.get(jobId);
      const last = rows.at(-1)?.revision ?? cursor;
      const messages = rows.map((h) => {
        const final = now.final && h.revision === now.revision;
        return { id: h.revision, event: h.outcome, data: { ...h, final, ...(final ? { status: now.status } : {}) } };
      });
      return { messages, cursor: last, more: rows.length === this.#options.pageSize, done: now.final && last >= now.revision };
    };
    return this.#respond(c, 'job', after, source, `job ${jobId}`, jobId);
  }

  /** `GET /api/stream?machine=&job=&kind=`: every job's commits in commit order, filtered. */
  async all(c: Context): Promise<Response> {
    const after = cursorOf(c);
    const kinds = c.req.query('kind');
    const outcomes = kinds === undefined ? undefined : kinds.split(',').map((k) => k.trim());
    for (const k of outcomes ?? []) {
      if (!OUTCOMES.includes(k as TransitionOutcome)) throw new ValidationError(`kind must be a comma-separated list of ${OUTCOMES.join(', ')}; got "${k}".`);
    }
    const machineId = c.req.query('machine');
    const jobId = c.req.query('job');
    const filter = {
      limit: this.#options.pageSize,
      ...(machineId !== undefined ? { machineId } : {}),
      ...(jobId !== undefined ? { jobId } : {}),
      ...(outcomes !== undefined ? { outcomes: outcomes as TransitionOutcome[] } : {}),
    };
    // Refuse a store without a global order now, as JSON, not as a broken stream.
    await this.#runtime.historySince(after, { ...filter, limit: 1 });
    const source: Source = async (cursor) => {
      const page = await this.#runtime.historySince(cursor, filter);
      return { messages: page.records.map((r) => ({ id: r.seq, event: r.outcome, data: r })), cursor: page.next, more: page.next > cursor, done: false };
    };
    return this.#respond(c, 'all', after, source, `all ${JSON.stringify(filter)}`);
  }

  #respond(c: Context, kind: StreamState['kind'], after: number, source: Source, key: string, jobId?: string): Response {
    if (this.#open.size >= this.#options.maxStreams) {
      throw new TooManyStreamsError(`${this.#open.size} event streams are open, the most this server allows; reconnect later.`);
    }
    const state: StreamState = { kind, cursor: after, sent: 0, writing: false };
    this.#open.add(state);
    const disconnect = () => (c.env as { outgoing?: { destroy(): void } } | undefined)?.outgoing?.destroy();
    return streamSSE(c, async (stream) => {
      try {
        await this.#pump(stream, state, this.#shared(key, source), disconnect, jobId);
      } catch {
        // A read failed (the runtime is closing, or the job was purged): end the stream; the client reconnects.
      } finally {
        this.#open.delete(state);
      }
    });
  }

  /**
   * `source` read once for every stream of `key` at one cursor and change count, its text made
   * once: a thousand clients of one stream cost one read per commit, not a thousand.
   */
  #shared(key: string, source: Source): (cursor: number, seen: number) => Promise<Written> {
    return (cursor, seen) => {
      const id = `${seen} ${cursor} ${key}`;
      let read = this.#reads.get(id);
      if (read === undefined) {
        read = source(cursor).then((page) => ({
          blocks: page.messages.map((m) => ({ id: m.id, text: `id: ${m.id}\nevent: ${m.event}\ndata: ${JSON.stringify(m.data)}\n\n` })),
          cursor: page.cursor,
          more: page.more,
          done: page.done,
        }));
        this.#reads.set(id, read);
        // Kept while it is read; streams that come later read again (a commit may have landed).
        const forget = () => this.#reads.delete(id);
        read.then(forget, forget);
      }
      return read;
    };
  }

  async #pump(stream: SSEStreamingApi, state: StreamState, read: (cursor: number, seen: number) => Promise<Written>, disconnect: () => void, jobId?: string): Promise<void> {
    const ended = new AbortController();
    if (this.#closed) return;
    this.#ends.add(ended);
    stream.onAbort(() => ended.abort());
    try {
      if (!(await this.#write(stream, state, 'retry: 1000\n: spool event stream\n\n', disconnect))) return;
      while (!ended.signal.aborted) {
        const seen = this.#changes.version;
        const page = await read(state.cursor, seen);
        for (const m of page.blocks) {
          if (!(await this.#write(stream, state, m.text, disconnect))) return;
          state.cursor = m.id;
          state.sent += 1;
        }
        state.cursor = page.cursor;
        if (page.done) return;
        if (page.more) continue;
        const moved = await this.#changes.wait(seen, this.#options.heartbeatMs, ended.signal, jobId);
        if (!moved && !ended.signal.aborted && !(await this.#write(stream, state, ': heartbeat\n\n', disconnect))) return;
      }
    } finally {
      this.#ends.delete(ended);
    }
  }

  /** Write and wait until the text has gone out; false (and the client disconnected) after `stallMs`. */
  async #write(stream: SSEStreamingApi, state: StreamState, text: string, disconnect: () => void): Promise<boolean> {
    if (stream.aborted || stream.closed) return false;
    state.writing = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stalled = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.#options.stallMs)));
    const ok = await Promise.race([stream.write(text).then(() => true), stalled]);
    clearTimeout(timer);
    state.writing = false;
    if (!ok) {
      disconnect();
      stream.abort();
    }
    return ok && !stream.aborted;
  }
}

/** The cursor a stream starts after: `Last-Event-ID`, else `?after=`, else 0 (from the start). */
function cursorOf(c: Context): number {
  const text = c.req.header('last-event-id') ?? c.req.query('after') ?? '0';
  const n = Number(text);
  if (!/^\d{1,16}$/.test(text) || !Number.isSafeInteger(n)) throw new ValidationError(`Last-Event-ID (or ?after=) must be an event id this server sent (a whole number); got "${text.slice(0, 40)}".`);
  return n;
}
