/**
 * A job as the machine alone says it should go: XState's pure `initialTransition`/`transition`
 * (no Spool code), plus the smallest scheduler that the documented timer guarantees describe:
 *
 * - a delayed `raise`/`sendTo` self (and so every `after`) becomes a timer with an absolute deadline
 *   (`now + delay`), keyed by its send id; `cancel(id)` cancels the job's timers with that key;
 *   within one transition cancellations come before new timers;
 * - `tick()` fires every timer due at `now` in (deadline, id) order, then applies their events in
 *   that order; a timer cancelled in between is recorded `stale` (a commit, no transition);
 * - every processed event is one revision (applied, ignored, failed or stale);
 * - a final job processes nothing more.
 *
 * The fuzz tests run the same steps through the runtime and compare.
 */
import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';

export type Outcome = 'started' | 'applied' | 'ignored' | 'failed' | 'stale';

interface PureTimer {
  id: string;
  key: string;
  dueAt: number;
  event: { type: string };
  status: 'scheduled' | 'fired' | 'delivered' | 'cancelled';
}

export class PureJob {
  snapshot: AnyMachineSnapshot;
  revision = 1;
  now: number;
  readonly history: Array<[string, Outcome]> = [['xstate.init', 'started']];
  readonly #machine: AnyStateMachine;
  readonly #jobId: string;
  readonly #timers: PureTimer[] = [];

  constructor(machine: AnyStateMachine, jobId: string, input: unknown, now: number) {
    this.#machine = machine;
    this.#jobId = jobId;
    this.now = now;
    const [snapshot, actions] = initialTransition(machine, structuredClone(input) as never) as [AnyMachineSnapshot, unknown[]];
    this.snapshot = snapshot;
    this.#plan(actions);
  }

  get final(): boolean {
    return this.snapshot.status !== 'active';
  }

  /** Apply an event sent from outside (the caller checks `final` first: a final job refuses it). */
  send(event: { type: string }): Outcome {
    return this.#process(event, null);
  }

  /** Move time forward and fire what is due, like `clock.advance(ms); runtime.tick()`. */
  advance(ms: number): void {
    this.now += ms;
    const fired: PureTimer[] = [];
    const due = this.#timers
      .filter((t) => t.status === 'scheduled' && t.dueAt <= this.now)
      .sort((a, b) => a.dueAt - b.dueAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const t of due) {
      t.status = 'fired';
      fired.push(t);
    }
    for (const t of fired) {
      if (this.final) continue; // rejected: a final job records nothing more
      if (t.status !== 'fired') {
        this.revision += 1;
        this.history.push([t.event.type, 'stale']);
        continue;
      }
      this.#process(t.event, t);
    }
  }

  #process(event: { type: string }, timer: PureTimer | null): Outcome {
    this.revision += 1;
    let outcome: Outcome;
    let next: AnyMachineSnapshot = this.snapshot;
    let actions: unknown[] = [];
    try {
      [next, actions] = transition(this.#machine, this.snapshot, structuredClone(event) as never) as [AnyMachineSnapshot, unknown[]];
      outcome = next === this.snapshot && actions.length === 0 ? 'ignored' : next.status === 'error' ? 'failed' : 'applied';
    } catch {
      outcome = 'failed';
    }
    if (outcome === 'applied') {
      this.snapshot = next;
      if (timer) timer.status = 'delivered';
      this.#plan(actions);
    }
    this.history.push([event.type, outcome]);
    return outcome;
  }

  #plan(actions: readonly unknown[]): void {
    const list = actions as Array<{ type: string; params?: Record<string, unknown> }>;
    for (const a of list) {
      if (a.type !== 'xstate.cancel') continue;
      for (const t of this.#timers) if (t.key === a.params?.['sendId'] && (t.status === 'scheduled' || t.status === 'fired')) t.status = 'cancelled';
    }
    list.forEach((a, index) => {
      if (a.type !== 'xstate.raise' && a.type !== 'xstate.sendTo') return;
      const delay = a.params?.['delay'];
      if (typeof delay !== 'number') return;
      const key = typeof a.params?.['id'] === 'string' ? (a.params['id'] as string) : `anon~r${this.revision}~${index}`;
      const event = JSON.parse(JSON.stringify(a.params?.['event'])) as { type: string };
      this.#timers.push({ id: `${this.#jobId}~${key}~r${this.revision}`, key, dueAt: this.now + delay, event, status: 'scheduled' });
    });
  }

  /** The observable parts, as plain JSON. */
  view(): { value: unknown; context: unknown; status: string; revision: number } {
    return JSON.parse(JSON.stringify({ value: this.snapshot.value, context: this.snapshot.context, status: this.snapshot.status, revision: this.revision })) as {
      value: unknown;
      context: unknown;
      status: string;
      revision: number;
    };
  }
}
