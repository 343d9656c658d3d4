/** History states of a machine: the configurations each can restore, and which one a step restored (part of a model state's key). */
import type { AnyStateMachine } from 'xstate';
import type { ModelJob, ModelState } from './modelState.ts';

/**
 * The history states of a machine, each with the configurations it can restore: every leaf
 * state under its parent for deep history, every child state for shallow. Paths are chosen to
 * restore each one (leave the parent from there, come back through the history state), so the
 * golden file and the checks see deep history told from shallow.
 */
export function historiesOf(machine: AnyStateMachine): Array<{ id: string; configurations: string[] }> {
  type Node = { id: string; type: string; history?: string; states: Record<string, Node>; parent?: Node };
  const out: Array<{ id: string; configurations: string[] }> = [];
  const leaves = (node: Node): string[] => {
    const children = Object.values(node.states).filter((c) => c.type !== 'history');
    return children.length === 0 ? [node.id] : children.flatMap(leaves);
  };
  const visit = (node: Node): void => {
    for (const child of Object.values(node.states)) {
      if (child.type === 'history') {
        const siblings = Object.values(node.states).filter((c) => c.type !== 'history');
        out.push({ id: child.id, configurations: child.history === 'deep' ? siblings.flatMap(leaves) : siblings.map((c) => c.id) });
      } else visit(child);
    }
  };
  visit(machine.root as unknown as Node);
  return out;
}

/** `history <history id> <state id>` for each history state a step restored, with the state it restored. */
export function historyKeys(state: ModelState, histories: ReadonlyArray<{ id: string; configurations: string[] }>): string[] {
  if (histories.length === 0) return [];
  const targeted = new Set(state.taken.flatMap((t) => t.targets));
  const active = new Set(nodesOf(state));
  return histories.filter((h) => targeted.has(h.id)).flatMap((h) => h.configurations.filter((c) => active.has(c)).map((c) => `history ${h.id} ${c}`));
}

/** The ids of every state node of a job's machine. */
export function nodesOf(job: ModelJob): string[] {
  return ((job.machine as unknown as { _nodes: Array<{ id: string }> })._nodes ?? []).map((n) => n.id);
}
