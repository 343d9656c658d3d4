/**
 * Server-sent events over fetch, for Node and browsers alike (no EventSource: it cannot send a
 * bearer header, and no Node built-ins): a parser of the SSE text format, and a stream that reads
 * a response's body only when asked, reconnects with backoff when the connection ends, and resumes
 * after the last event it parsed (`Last-Event-ID`), so the events it yields have no gap and no
 * repeat. Spool's event ids are whole numbers that grow, so a repeat is also dropped by id.
 */
import { errorFromResponse } from './errors.ts';

/** One dispatched event of the SSE format. */
export interface SseMessage {
  id: string;
  event: string;
  data: string;
}

/**
 * The SSE format (the HTML spec's "event stream interpretation"): lines ending in CR, LF or CRLF;
 * `field: value` lines; a blank line dispatches; `:` lines are comments. Feed it text as it comes.
 */
export class SseParser {
  #buffer = '';
  #data: string[] = [];
  #event = '';
  #lastId = '';
  #sawCr = false;

  /** The events completed by `text`. */
  push(text: string): SseMessage[] {
    if (this.#sawCr && text.startsWith('\n')) text = text.slice(1);
    this.#sawCr = false;
    this.#buffer += text;
    const out: SseMessage[] = [];
    for (;;) {
      const end = this.#buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      const crAtEnd = this.#buffer[end] === '\r' && end === this.#buffer.length - 1;
      const width = this.#buffer.startsWith('\r\n', end) ? 2 : 1;
      const line = this.#buffer.slice(0, end);
      this.#buffer = this.#buffer.slice(end + width);
      // A CR at the end of a chunk may be the first half of a CRLF split across chunks.
      if (crAtEnd) this.#sawCr = true;
      const message = this.#line(line);
      if (message) out.push(message);
    }
    return out;
  }

  #line(line: string): SseMessage | null {
    if (line === '') {
      const data = this.#data;
      const event = this.#event || 'message';
      this.#data = [];
      this.#event = '';
      return data.length === 0 ? null : { id: this.#lastId, event, data: data.join('\n') };
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.#data.push(value);
    else if (field === 'event') this.#event = value;
    else if (field === 'id' && !value.includes('\0')) this.#lastId = value;
    return null;
  }
}

/** How a stream reconnects. */
export interface ReconnectOptions {
  /** The first wait before reconnecting, in ms; it doubles up to `maxDelayMs`. Default 100. */
  initialDelayMs?: number;
  /** The longest wait between reconnects. Default 5000. */
  maxDelayMs?: number;
  /**
   * A connection that brings nothing (not even the server's heartbeat, every 15 s by default)
   * for this long is dropped and reconnected. Default 45000.
   */
  idleTimeoutMs?: number;
}

/** What a stream needs to (re)connect: the request, given the cursor to resume after. */
export interface StreamSource {
  url: string;
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  headers: Record<string, string>;
  /** The id to resume after at the first connection (0: from the start). */
  after: number;
}

/**
 * An open event stream: an async iterable of the messages' parsed data, resumed across
 * reconnects. It connects at once (so {@link EventStream.whenConnected} can be awaited before
 * iterating) and reads only as it is iterated. Closing it (`break`, `return()`, `close()`) aborts
 * the request. It ends when the server says there is nothing more (204: a finished job's stream);
 * a refusal that retrying cannot mend (a wrong token, an unknown job) is thrown to the iteration.
 */
export class EventStream<T> implements AsyncIterableIterator<T> {
  readonly #source: StreamSource;
  readonly #options: Required<ReconnectOptions>;
  readonly #abort = new AbortController();
  readonly #decoder = new TextDecoder();
  #parser = new SseParser();
  #cursor: number;
  #queue: T[] = [];
  #reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  #connecting: Promise<void> | null = null;
  #ended = false;
  #failure: unknown = null;
  #delay: number;
  #live = false;
  #onLive: (() => void)[] = [];

  constructor(source: StreamSource, options: ReconnectOptions = {}) {
    this.#source = source;
    this.#options = { initialDelayMs: options.initialDelayMs ?? 100, maxDelayMs: options.maxDelayMs ?? 5000, idleTimeoutMs: options.idleTimeoutMs ?? 45_000 };
    this.#cursor = source.after;
    this.#delay = this.#options.initialDelayMs;
    this.#connecting = this.#connect(false);
  }

  /** The id of the last event received (what a reconnect resumes after). */
  get lastEventId(): number {
    return this.#cursor;
  }

  /** Resolves once the stream is connected (at once while it is); rejects if it fails for good. */
  whenConnected(): Promise<void> {
    if (this.#live) return Promise.resolve();
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#ended) return Promise.resolve();
    return new Promise((resolve, reject) => this.#onLive.push(() => (this.#failure !== null ? reject(this.#failure) : resolve())));
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      const queued = this.#queue.shift();
      if (queued !== undefined) return { done: false, value: queued };
      if (this.#failure !== null) {
        const failure = this.#failure;
        this.close();
        throw failure;
      }
      if (this.#ended) return { done: true, value: undefined };
      if (this.#reader === null) {
        await (this.#connecting ??= this.#connect(true));
        continue;
      }
      await this.#read(this.#reader);
    }
  }

  async return(): Promise<IteratorResult<T>> {
    this.close();
    return { done: true, value: undefined };
  }

  /** Stop: abort the request; iteration ends. */
  close(): void {
    this.#ended = true;
    this.#queue = [];
    this.#abort.abort();
    this.#setLive(false);
  }

  /** Read one chunk (or its end) from the connection and queue the events it completes. */
  async #read(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    const idle = setTimeout(() => void reader.cancel().catch(() => undefined), this.#options.idleTimeoutMs);
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch {
      chunk = { done: true, value: undefined };
    } finally {
      clearTimeout(idle);
    }
    if (chunk.done) {
      this.#dropConnection();
      return;
    }
    this.#delay = this.#options.initialDelayMs;
    for (const message of this.#parser.push(this.#decoder.decode(chunk.value, { stream: true }))) {
      const id = Number(message.id);
      // No repeat: an event at or before the cursor was yielded already.
      if (!Number.isSafeInteger(id) || id <= this.#cursor) continue;
      this.#cursor = id;
      this.#queue.push(JSON.parse(message.data) as T);
    }
  }

  /** The connection ended (the server stopped, or it idled out): reconnect at once, resuming after the cursor. */
  #dropConnection(): void {
    this.#reader = null;
    this.#parser = new SseParser();
    this.#setLive(false);
    if (!this.#ended) this.#connecting = this.#connect(true);
  }

  /**
   * Connect (after a backoff when `again`: the delay grows until a connection brings data), until
   * connected, ended, or refused for good. An unreachable server is tried again, without end.
   */
  async #connect(again: boolean): Promise<void> {
    try {
      for (let retry = again; !this.#ended; retry = true) {
        if (retry) await this.#backoff();
        if (this.#ended) return;
        let response: Response;
        try {
          const headers = { ...this.#source.headers, accept: 'text/event-stream', ...(this.#cursor > 0 ? { 'last-event-id': String(this.#cursor) } : {}) };
          response = await this.#source.fetch(this.#source.url, { headers, signal: this.#abort.signal });
        } catch {
          continue;
        }
        if (response.status === 204) {
          this.#ended = true;
          this.#setLive(false);
          return;
        }
        if (response.ok && response.body) {
          this.#reader = response.body.getReader();
          this.#setLive(true);
          return;
        }
        const error = errorFromResponse(response.status, await response.text().catch(() => ''));
        if (error.category !== 'retryable' && error.category !== 'internal') {
          this.#failure = error;
          this.#setLive(false);
          return;
        }
      }
    } finally {
      this.#connecting = null;
    }
  }

  /** Wait the current backoff (with jitter, so clients of a restarted server do not come back at once), then double it. */
  #backoff(): Promise<void> {
    const wait = this.#delay / 2 + Math.random() * (this.#delay / 2);
    this.#delay = Math.min(this.#delay * 2, this.#options.maxDelayMs);
    return new Promise((resolve) => {
      const timer = setTimeout(done, wait);
      const signal = this.#abort.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }

  #setLive(live: boolean): void {
    this.#live = live;
    if (!live && !this.#ended && this.#failure === null) return;
    for (const notify of this.#onLive.splice(0)) notify();
  }
}
