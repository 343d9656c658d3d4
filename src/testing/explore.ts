/** Exploring a job's model: the state graph from `xstate/graph`'s adjacency map, its shortest prefixes, and replays along a path. */
import { getAdjacencyMap } from 'xstate/graph';
import type { JobModel } from './model.ts';
import type { ModelState, PathStep } from './modelState.ts';

/** Path generation could not finish: the message says why and what to change. */
export class PathGenerationError extends Error {
  override name = 'PathGenerationError';
  readonly code = 'SPOOL_PATH_GENERATION';
}

export type Edge = { from: string; step: PathStep; to: string; result: ModelState; order: number };

export interface Graph {
  keys: string[];
  edges: Edge[];
  stateOf: Map<string, ModelState>;
  depth: Map<string, number>;
  prefix: (key: string) => PathStep[];
}

/** Explore the model with `xstate/graph`'s adjacency map, then index shortest prefixes (BFS). */
export function explore(model: JobModel, start: ModelState, limit: number, machineId: string, inputIndex: number, inputCount: number, childPaths: readonly string[] = []): Graph {
  type GraphEvent = { type: string; step: PathStep };
  const logic = {
    transition: (state: ModelState, event: GraphEvent) => model.step(state, event.step),
    getInitialSnapshot: () => start,
    getPersistedSnapshot: (state: ModelState) => state,
  };
  // ModelState is a snapshot in the graph's sense ({status, output, error}); XState's Snapshot type is a union it cannot name.
  type Adjacency = Record<string, { state: ModelState; transitions: Record<string, { event: GraphEvent; state: ModelState }> }>;
  const traverse = getAdjacencyMap as unknown as (logic: unknown, options: Record<string, unknown>) => Adjacency;
  let adjacency: Adjacency;
  try {
    adjacency = traverse(logic, {
      fromState: start,
      events: (state: ModelState) => model.steps(state).map((step) => ({ type: step.type, step })),
      serializeState: (state: ModelState) => model.key(state),
      serializeEvent: (event: GraphEvent) => JSON.stringify(event.step),
      limit,
    });
  } catch (error) {
    if (error instanceof Error && /Traversal limit exceeded/.test(error.message)) {
      throw new PathGenerationError(
        `Path generation for ${machineId}${inputCount > 1 ? ` (input ${inputIndex + 1})` : ''} explored more than ${limit} (state, step) pairs without finishing. ` +
          `The graph key includes the whole context${childPaths.length > 0 ? ' of the job and of each running child job' : ''}, so a counter or other unbounded context makes the graph infinite. ` +
          `Pass \`stateKey\`${childPaths.length > 0 ? ` (for child jobs: ${childPaths.map((p) => `\`${p}stateKey\``).join(', ')})` : ''} to abstract it (e.g. ({ value, context }) => ({ value, count: Math.min(context.count, 3) })), give fewer event samples, or raise \`limit\`.`,
      );
    }
    throw error;
  }
  const keys = Object.keys(adjacency);
  const edges: Edge[] = [];
  let order = 0;
  for (const key of keys) {
    for (const { event, state } of Object.values(adjacency[key]!.transitions)) {
      edges.push({ from: key, step: event.step, to: model.key(state), result: state, order: order++ });
    }
  }
  const out = new Map<string, Edge[]>();
  for (const e of edges) out.set(e.from, [...(out.get(e.from) ?? []), e]);
  const startKey = model.key(start);
  const depth = new Map<string, number>([[startKey, 0]]);
  const parent = new Map<string, Edge>();
  const queue = [startKey];
  while (queue.length > 0) {
    const key = queue.shift()!;
    for (const e of out.get(key) ?? []) {
      if (depth.has(e.to)) continue;
      depth.set(e.to, depth.get(key)! + 1);
      parent.set(e.to, e);
      queue.push(e.to);
    }
  }
  const prefix = (key: string): PathStep[] => {
    const steps: PathStep[] = [];
    for (let k = key, e = parent.get(k); e; k = e.from, e = parent.get(k)) steps.unshift(e.step);
    return steps;
  };
  const stateOf = new Map(keys.map((k) => [k, adjacency[k]!.state] as const));
  return { keys, edges, stateOf, depth, prefix };
}

export function tryReplay(model: JobModel, input: unknown, steps: PathStep[]): { start: ModelState; states: ModelState[] } | undefined {
  try {
    return replay(model, input, steps);
  } catch {
    return undefined;
  }
}

/** The concrete states along a path: the graph may have stored another state under the same (abstract) key. */
export function replay(model: JobModel, input: unknown, steps: readonly PathStep[]): { start: ModelState; states: ModelState[] } {
  const start = model.initial(input);
  const states: ModelState[] = [];
  let state = start;
  for (const step of steps) {
    state = model.step(state, step);
    states.push(state);
  }
  return { start, states };
}
