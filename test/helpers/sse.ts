/**
 * A server-sent events client for tests, over Node's fetch: it parses the stream as the SSE
 * spec does (id, event, data lines; comments), and reads only when asked, so a test can play a
 * client that stops reading.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { SPOOL_BIN } from './spoolCli.ts';

/** One dispatched event. */
export interface SseEvent {
  id: string;
  event: string;
  data: string;
}

/** An open stream. `next()` resolves with the next event, or null once the server closed it. */
export class SseClient {
  readonly response: Response;
  readonly comments: string[] = [];
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #buffer = '';
  readonly #decoder = new TextDecoder();

  private constructor(response: Response) {
    this.response = response;
    this.#reader = response.body!.getReader();
  }

  /** Open `url` with `Last-Event-ID` when given. */
  static async open(url: string, lastEventId?: string): Promise<SseClient> {
    const response = await fetch(url, { headers: { accept: 'text/event-stream', ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}) } });
    return new SseClient(response);
  }

  /** The next event (comments are collected in `comments`), or null at the end of the stream. */
  async next(): Promise<SseEvent | null> {
    for (;;) {
      const end = this.#buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        const event = this.#parse(block);
        if (event) return event;
        continue;
      }
      const { done, value } = await this.#reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (done) return null;
      this.#buffer += this.#decoder.decode(value, { stream: true });
    }
  }

  /** Read until a comment line `text` arrives; the events read meanwhile are returned. */
  async untilComment(text: string): Promise<SseEvent[]> {
    const events: SseEvent[] = [];
    while (!this.comments.includes(text)) {
      const end = this.#buffer.indexOf('\n\n');
      if (end < 0) {
        const { done, value } = await this.#reader.read();
        if (done) throw new Error(`the stream ended before the comment "${text}"`);
        this.#buffer += this.#decoder.decode(value, { stream: true });
        continue;
      }
      const event = this.#parse(this.#buffer.slice(0, end));
      this.#buffer = this.#buffer.slice(end + 2);
      if (event) events.push(event);
    }
    return events;
  }

  /** Every event until the stream ends. */
  async rest(): Promise<SseEvent[]> {
    const out: SseEvent[] = [];
    for (let e = await this.next(); e; e = await this.next()) out.push(e);
    return out;
  }

  /** Stop reading and close the connection. */
  async close(): Promise<void> {
    await this.#reader.cancel().catch(() => undefined);
  }

  #parse(block: string): SseEvent | null {
    let id: string | undefined;
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) this.comments.push(line.slice(1).trim());
      else if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    return id === undefined && data.length === 0 ? null : { id: id ?? '', event, data: data.join('\n') };
  }
}

/** A `spool serve` child process and the URL it printed. */
export interface ServeChild {
  child: ChildProcessWithoutNullStreams;
  url: string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/**
 * Start `spool --db <db> --json <command>` (default `serve --port 0`) with `SPOOL_TOKEN`, and wait
 * for its `serve.ready` line.
 */
export function spawnServe(db: string, cwd: string, token: string, command: readonly string[] = ['serve', '--port', '0']): Promise<ServeChild> {
  const env: NodeJS.ProcessEnv = { ...process.env, SPOOL_TOKEN: token };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, [SPOOL_BIN, '--db', db, '--json', ...command], { cwd, env });
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      const line = out.split('\n').find((l) => l.includes('"serve.ready"'));
      if (line) resolve({ child, url: (JSON.parse(line) as { url: string }).url, exited });
    });
    void exited.then((code) => reject(new Error(`spool serve exited with ${code} before it was ready: ${err}`)));
  });
}
