import type { AnyStateMachine } from 'xstate';

/**
 * One static transition of a machine: a candidate of `on`, `after`, `invoke.onDone/onError` or
 * `always` on one state node. A guarded event with an unguarded fallback is two transitions.
 *
 * @example
 * // exporting: { invoke: { onError: [{ guard: 'indeterminate', target: 'reconciling' }, { target: 'failed' }] } }
 * // gives two transitions:
 * //   export-job.exporting  xstate.error.actor.export [indeterminate] → export-job.reconciling
 * //   export-job.exporting  xstate.error.actor.export (fallback #2)   → export-job.failed
 */
export interface StaticTransition {
  /** Stable id: `<source> <event> #<index>` (event `always` for eventless transitions). */
  id: string;
  /** Id of the state node that declares it, e.g. `approval-flow.pending`. */
  source: string;
  /** Event type (`xstate.after.<delay>.<stateId>`, `xstate.done.actor.<id>`…), or `always`. */
  event: string;
  eventless: boolean;
  /** Guard name (`not(isLate)`, `and(a, b)`, `inline guard`…), or null when unguarded. */
  guard: string | null;
  /** 1-based position among the candidates for (source, event): the order XState tries them in. */
  index: number;
  /** Ids of the target state nodes; empty for a targetless transition (actions only). */
  targets: string[];
  /** For people: `pending --APPROVE--> approved`, `processing --FINISH [noneFailed]--> completed`. */
  label: string;
}

/** The shape of XState transition definitions this module reads. */
export interface TransitionDefinitionLike {
  source: { id: string };
  target?: ReadonlyArray<{ id: string }> | undefined;
  eventType: string;
  guard?: unknown;
}

interface StateNodeLike {
  id: string;
  states: Record<string, StateNodeLike>;
  transitions: Map<string, TransitionDefinitionLike[]>;
  always?: TransitionDefinitionLike[] | undefined;
}

/**
 * Every static transition of a machine, in document order (state nodes depth first, then events
 * in declaration order, then candidates in the order XState tries them).
 *
 * @example
 * listTransitions(approvalFlowMachine).map((t) => t.label);
 * // ['pending --REMIND--> (actions only)', 'pending --APPROVE--> approved', …]
 */
export function listTransitions(machine: AnyStateMachine): StaticTransition[] {
  return [...indexTransitions(machine).values()];
}

/** Static transitions keyed by XState's own transition definition objects (stable per machine). */
export function indexTransitions(machine: AnyStateMachine): Map<TransitionDefinitionLike, StaticTransition> {
  const cached = cache.get(machine);
  if (cached) return cached;
  const out = new Map<TransitionDefinitionLike, StaticTransition>();
  const rootId = (machine.root as unknown as StateNodeLike).id;
  const short = (id: string) => (id === rootId ? id : id.startsWith(`${rootId}.`) ? id.slice(rootId.length + 1) : id);
  const visit = (node: StateNodeLike): void => {
    const add = (event: string, candidates: readonly TransitionDefinitionLike[], eventless: boolean) => {
      candidates.forEach((t, i) => {
        const guard = guardName(t.guard);
        const targets = (t.target ?? []).map((n) => n.id);
        const shownEvent = eventless ? 'always' : event;
        const fallback = guard === null && i > 0 ? ` (fallback #${i + 1})` : '';
        const label = `${short(node.id)} --${shownEvent}${guard === null ? '' : ` [${guard}]`}${fallback}--> ${
          targets.length === 0 ? '(actions only)' : targets.map(short).join(', ')
        }`;
        out.set(t, { id: `${node.id} ${shownEvent} #${i + 1}`, source: node.id, event: shownEvent, eventless, guard, index: i + 1, targets, label });
      });
    };
    for (const [event, candidates] of node.transitions) add(event, candidates, false);
    if (node.always && node.always.length > 0) add('always', node.always, true);
    for (const child of Object.values(node.states)) visit(child);
  };
  visit(machine.root as unknown as StateNodeLike);
  cache.set(machine, out);
  return out;
}

const cache = new WeakMap<AnyStateMachine, Map<TransitionDefinitionLike, StaticTransition>>();

/** A readable name for a guard: its type, `not(x)`, `and(a, b)`, `or(a, b)`, or `inline guard`. */
export function guardName(guard: unknown): string | null {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object') {
    const g = guard as { type?: unknown; params?: unknown };
    if (typeof g.type === 'string') return g.params === undefined ? g.type : `${g.type}(${JSON.stringify(g.params)})`;
    return 'inline guard';
  }
  if (typeof guard === 'function') {
    const fn = guard as { name?: string; guards?: unknown[] };
    if (Array.isArray(fn.guards) && (fn.name === 'and' || fn.name === 'or' || fn.name === 'not')) {
      return `${fn.name}(${fn.guards.map((g) => guardName(g) ?? '?').join(', ')})`;
    }
    return fn.name && fn.name !== 'guard' ? `inline ${fn.name}` : 'inline guard';
  }
  return 'inline guard';
}
