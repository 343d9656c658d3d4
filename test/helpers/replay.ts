/**
 * The pure model of a job: XState's own `initialTransition`/`transition`, run directly (no Spool)
 * on a sequence of events. The crash harness replays each job's stored history through it and the
 * fuzz tests compare the runtime with it.
 */
import { initialTransition, transition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';

export type PureOutcome = 'applied' | 'ignored' | 'failed';

/** One pure step, decided the way the runtime decides it: same snapshot and no actions = ignored. */
export function pureStep(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: unknown): { outcome: PureOutcome; next: AnyMachineSnapshot } {
  let next: AnyMachineSnapshot;
  let actions: unknown[];
  try {
    [next, actions] = transition(machine, snapshot, structuredClone(event) as never) as [AnyMachineSnapshot, unknown[]];
  } catch {
    return { outcome: 'failed', next: snapshot };
  }
  if (next === snapshot && actions.length === 0) return { outcome: 'ignored', next: snapshot };
  if (next.status === 'error') return { outcome: 'failed', next: snapshot };
  return { outcome: 'applied', next };
}

/** The machine's initial snapshot for `input`. */
export function pureStart(machine: AnyStateMachine, input: unknown): AnyMachineSnapshot {
  return initialTransition(machine, structuredClone(input) as never)[0] as AnyMachineSnapshot;
}

/** Plain JSON of a snapshot's observable parts. */
export function view(snapshot: AnyMachineSnapshot): { value: unknown; context: unknown; status: string } {
  return JSON.parse(JSON.stringify({ value: snapshot.value, context: snapshot.context, status: snapshot.status })) as { value: unknown; context: unknown; status: string };
}

export interface HistoryRow {
  revision: number;
  eventType: string;
  payload: unknown;
  outcome: string;
  to: unknown;
}

/**
 * Replay a stored history (revision order) through the pure machine: `applied` rows must apply,
 * `ignored` and `failed` rows must be ignored/failed by the pure machine too, `stale` rows are
 * skipped (the runtime records them without a transition), and every row's `to` must be the pure
 * state value. Returns the final pure view and every disagreement found.
 */
export function replayHistory(machine: AnyStateMachine, input: unknown, history: readonly HistoryRow[]): { final: ReturnType<typeof view>; problems: string[] } {
  const problems: string[] = [];
  let snapshot = pureStart(machine, input);
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if (history[0] && !same(history[0].to, view(snapshot).value)) problems.push(`r1: started in ${JSON.stringify(history[0].to)}, pure ${JSON.stringify(view(snapshot).value)}`);
  for (const row of history.slice(1)) {
    if (row.outcome === 'stale') {
      if (!same(row.to, view(snapshot).value)) problems.push(`r${row.revision} (stale ${row.eventType}): recorded in ${JSON.stringify(row.to)}, pure ${JSON.stringify(view(snapshot).value)}`);
      continue;
    }
    const step = pureStep(machine, snapshot, row.payload);
    if (step.outcome !== row.outcome) problems.push(`r${row.revision} ${row.eventType}: recorded ${row.outcome}, pure ${step.outcome}`);
    if (row.outcome === 'applied') snapshot = step.next;
    if (!same(row.to, view(snapshot).value)) problems.push(`r${row.revision} ${row.eventType}: recorded to ${JSON.stringify(row.to)}, pure ${JSON.stringify(view(snapshot).value)}`);
  }
  return { final: view(snapshot), problems };
}
