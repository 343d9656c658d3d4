/**
 * The crash harness's workload: a seeded, reproducible stream of client commands over the harness
 * machines and the reference machines. Each job gets a script (start, events, maybe a cancel) that
 * always lets it end; scripts are interleaved at random. On top of the scripts it sends duplicates
 * (an acknowledged event again, same id and payload) and conflicts (an acknowledged event id with
 * another payload, which must be refused).
 */

export type Via = 'queue' | 'apply';

/** Every sensitive `secret` the workload sends (crash-tally's POISON) starts with this: none may reach a stored record. */
export const SECRET_MARK = 'SPOOLSECRET';

/** What the client process executes (see clientChild.ts). */
export type ClientCommand =
  | { id: string; op: 'start'; machine: string; input: unknown; jobId: string; via: Via }
  | { id: string; op: 'send'; jobId: string; event: { type: string; [k: string]: unknown }; eventId: string; via: Via }
  | { id: string; op: 'cancel'; jobId: string; reason: string; via: Via };

/** A command as the harness tracks it: `dup` and `conflict` name the command they repeat. */
export type Command = ClientCommand & { kind: 'script' | 'dup' | 'conflict'; of?: string };

type Draft =
  | { op: 'start'; machine: string; input: unknown }
  | { op: 'send'; event: { type: string; [k: string]: unknown } }
  | { op: 'cancel'; reason: string };

interface Script {
  jobId: string;
  machine: string;
  steps: Draft[];
  events: number;
}

/** mulberry32: a small seeded PRNG, so a seed reproduces the workload. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Workload {
  readonly #random: () => number;
  readonly #isAcked: (commandId: string) => boolean;
  readonly #active: Script[] = [];
  readonly #sends = new Map<string, Command[]>();
  #commands = 0;
  #jobs = 0;

  /** `isAcked(commandId)`: whether the client acknowledged a command (only those are repeated). */
  constructor(seed: number, isAcked: (commandId: string) => boolean) {
    this.#random = rng(seed);
    this.#isAcked = isAcked;
  }

  get jobs(): number {
    return this.#jobs;
  }

  /** Start `n` new job scripts. */
  addJobs(n: number): void {
    for (let i = 0; i < n; i += 1) this.#active.push(this.#script());
  }

  /** The next `n` commands, from the scripts in flight (new scripts start when none is left). */
  take(n: number): Command[] {
    const out: Command[] = [];
    while (out.length < n) {
      if (this.#active.length === 0) this.addJobs(1);
      const script = this.#active[Math.floor(this.#random() * this.#active.length)]!;
      const extra = this.#extra(script);
      if (extra) {
        out.push(extra);
        continue;
      }
      out.push(this.#next(script));
    }
    return out;
  }

  /** Every command left in every script, interleaved at random: after this each job can end. */
  drain(): Command[] {
    const out: Command[] = [];
    while (this.#active.length > 0) out.push(this.#next(this.#active[Math.floor(this.#random() * this.#active.length)]!));
    return out;
  }

  #next(script: Script): Command {
    const draft = script.steps.shift()!;
    if (script.steps.length === 0) this.#active.splice(this.#active.indexOf(script), 1);
    const id = `c${++this.#commands}`;
    const via: Via = this.#random() < 0.5 ? 'queue' : 'apply';
    if (draft.op === 'start') return { id, op: 'start', machine: draft.machine, input: draft.input, jobId: script.jobId, via, kind: 'script' };
    if (draft.op === 'cancel') return { id, op: 'cancel', jobId: script.jobId, reason: draft.reason, via, kind: 'script' };
    const cmd: Command = { id, op: 'send', jobId: script.jobId, event: draft.event, eventId: `${script.jobId}.e${++script.events}`, via, kind: 'script' };
    const sends = this.#sends.get(script.jobId) ?? [];
    sends.push(cmd);
    this.#sends.set(script.jobId, sends);
    return cmd;
  }

  /** Sometimes: an acknowledged send again (a duplicate), or its id with another payload (a conflict). */
  #extra(script: Script): Command | undefined {
    const r = this.#random();
    if (r >= 0.12) return undefined;
    const acked = (this.#sends.get(script.jobId) ?? []).filter((c) => this.#isAcked(c.id));
    if (acked.length === 0) return undefined;
    const original = acked[Math.floor(this.#random() * acked.length)]! as Extract<Command, { op: 'send' }>;
    const id = `c${++this.#commands}`;
    const via: Via = this.#random() < 0.5 ? 'queue' : 'apply';
    if (r < 0.09) return { ...original, id, via, kind: 'dup', of: original.id };
    // Conflicts on tally jobs only: another valid event of the same machine under the same id.
    if (script.machine !== 'crash-tally') return { ...original, id, via, kind: 'dup', of: original.id };
    const t = original.event.type;
    const event = t === 'ADD' ? { type: 'ADD', n: Number(original.event['n']) + 1 } : t === 'INC' ? { type: 'ADD', n: 1 } : { type: 'INC' };
    return { ...original, id, via, event, kind: 'conflict', of: original.id };
  }

  #int(min: number, max: number): number {
    return min + Math.floor(this.#random() * (max - min + 1));
  }

  #chance(p: number): boolean {
    return this.#random() < p;
  }

  #pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#random() * items.length)]!;
  }

  /** A cancel somewhere in `steps` (after the start), as a cancel call or a plain CANCEL event. */
  #maybeCancel(steps: Draft[], p: number): void {
    if (!this.#chance(p)) return;
    const at = this.#int(1, steps.length);
    steps.splice(at, 0, this.#chance(0.7) ? { op: 'cancel', reason: 'harness' } : { op: 'send', event: { type: 'CANCEL', reason: 'harness' } });
  }

  #script(): Script {
    const n = ++this.#jobs;
    const machine = this.#pick(['crash-tally', 'crash-tally', 'crash-flaky', 'crash-flaky', 'crash-ticker', 'job-lifecycle', 'retrying-job', 'export-job', 'approval-flow']);
    const jobId = `j${n}-${machine}`;
    const steps: Draft[] = [];
    const start = (input: unknown) => steps.push({ op: 'start', machine, input });
    const send = (event: { type: string; [k: string]: unknown }) => steps.push({ op: 'send', event });
    switch (machine) {
      case 'crash-tally': {
        start({});
        for (let i = this.#int(2, 8); i > 0; i -= 1) {
          if (this.#chance(0.1)) send({ type: 'POISON', secret: `${SECRET_MARK}-${n}-"${i}\\` }); // a quote and a backslash: JSON escapes them
          send(this.#chance(0.5) ? { type: 'INC' } : { type: 'ADD', n: this.#int(-5, 5) });
        }
        this.#maybeCancel(steps, 0.15);
        send({ type: 'STOP' });
        if (this.#chance(0.3)) send({ type: 'INC' }); // after the end: refused or rejected
        break;
      }
      case 'crash-flaky': {
        // Half the activities are quick; the others last long enough that kills often land mid-attempt
        // (a safe attempt is taken over and re-run, an unsafe one ends `unknown`).
        const workMs = this.#chance(0.5) ? this.#int(0, 10) : this.#int(20, 150);
        start({ failFirst: this.#int(0, 4), workMs, deadlineMs: this.#chance(0.5) ? this.#int(200, 1500) : 60_000 });
        this.#maybeCancel(steps, 0.2);
        break;
      }
      case 'crash-ticker': {
        start({ startMs: this.#int(20, 200), pingMs: this.#int(20, 200), pongMs: this.#int(20, 200), endMs: this.#int(20, 200) });
        for (let i = this.#int(0, 3); i > 0; i -= 1) send(this.#chance(0.7) ? { type: 'SNOOZE' } : { type: 'SKIP' });
        this.#maybeCancel(steps, 0.15);
        break;
      }
      case 'job-lifecycle': {
        const items = this.#int(0, 3);
        start({ name: jobId, items });
        if (this.#chance(0.3)) send({ type: 'ITEM_DONE' }); // before START: ignored
        send({ type: 'START' });
        for (let i = 0; i < items; i += 1) {
          if (this.#chance(0.3)) send({ type: 'PROGRESS', percent: this.#int(0, 100) });
          send(this.#chance(0.7) ? { type: 'ITEM_DONE' } : { type: 'ITEM_FAILED', reason: 'harness' });
        }
        this.#maybeCancel(steps, 0.15);
        send(this.#chance(0.8) ? { type: 'FINISH' } : { type: 'FAIL', reason: 'harness' });
        break;
      }
      case 'retrying-job': {
        const autoStart = this.#chance(0.5);
        start({ name: jobId, items: this.#int(1, 5), failItems: this.#int(0, 2), flakyAttempts: this.#int(0, 3), autoStart });
        send({ type: 'START' });
        this.#maybeCancel(steps, 0.2);
        break;
      }
      case 'export-job': {
        start({ dataset: jobId, rows: this.#int(1, 100), flakyAttempts: this.#int(0, 2) });
        this.#maybeCancel(steps, 0.15);
        break;
      }
      case 'approval-flow': {
        const long = this.#chance(0.4);
        start({ subject: jobId, remindAfterMs: this.#int(20, 200), deadlineMs: long ? 600_000 : this.#int(20, 200) });
        if (long || this.#chance(0.5)) send(this.#chance(0.6) ? { type: 'APPROVE', by: 'harness' } : { type: 'REJECT', by: 'harness', reason: 'no' });
        this.#maybeCancel(steps, 0.15);
        break;
      }
    }
    return { jobId, machine, steps, events: 0 };
  }
}
