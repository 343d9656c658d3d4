/**
 * A registered machine as clients show it (the HTTP API, `spool graph`): its states as a tree
 * (nested and parallel states as children), the transitions of each, and its external events
 * with their zod schemas as JSON Schema (`z.toJSONSchema`).
 */
import { z } from 'zod';
import type { RegisteredMachine } from '../internal.ts';

/** One state node: its children, and the events it handles with their targets. */
export interface StateView {
  id: string;
  key: string;
  type: string;
  /** The initial child's key, for compound states. */
  initial: string | null;
  /** Each event the state handles (`''`: its eventless `always` transitions) and the states it may go to (none: it stays). */
  on: { event: string; targets: string[] }[];
  states: StateView[];
}

/** A machine version: states, events (schema or null when a schema has no JSON Schema form), input schema. */
export interface MachineView {
  id: string;
  version: string;
  description: string | null;
  cancel: { event: string; state: string };
  root: StateView;
  events: { type: string; schema: unknown }[];
  input: unknown;
}

/** Describe a registered machine version. */
export function describeMachine(m: RegisteredMachine): MachineView {
  const types = [...m.eventTypes].filter((t) => !t.startsWith('xstate.')).sort();
  return {
    id: m.id,
    version: m.version,
    description: m.description ?? null,
    cancel: m.cancel,
    root: describeState(m.machine.root as unknown as StateNodeLike),
    events: types.map((type) => ({ type, schema: jsonSchemaOf(m.events[type]) })),
    input: jsonSchemaOf(m.input),
  };
}

/** The parts of XState's `StateNode` read here. */
interface StateNodeLike {
  id: string;
  key: string;
  type: string;
  initial?: { target?: readonly { key: string }[] };
  states: Record<string, StateNodeLike>;
  transitions: Map<string, readonly { target?: readonly { id: string }[] | undefined }[]>;
  always?: readonly { target?: readonly { id: string }[] | undefined }[];
}

function describeState(node: StateNodeLike): StateView {
  return {
    id: node.id,
    key: node.key,
    type: node.type,
    initial: node.initial?.target?.[0]?.key ?? null,
    on: [...node.transitions, ...(node.always?.length ? [['', node.always] as const] : [])].map(([event, ts]) => ({ event, targets: ts.flatMap((t) => (t.target ?? []).map((n) => n.id)) })),
    states: Object.values(node.states).map(describeState),
  };
}

function jsonSchemaOf(schema: unknown): unknown {
  if (schema === undefined) return null;
  try {
    return z.toJSONSchema(schema as z.ZodType, { unrepresentable: 'any' });
  } catch {
    return null;
  }
}
