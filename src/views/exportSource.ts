/**
 * A machine as source that Stately's editor imports ("Import from code"): `createMachine({...})`
 * with the machine's own config (id, initial, states nested and parallel, final and history
 * states, on/after/always/invoke, entry/exit, descriptions, meta, tags). Guards, actions and
 * actors named in `setup()` stay the string references they are. An inline function (an inline
 * guard, a custom or built-in action such as `assign(...)`, inline actor logic) cannot be carried
 * as source: it is dropped, a named reference takes its place (so a guarded transition stays
 * guarded and an invocation keeps its actor), and it is listed in {@link ExportedSource.dropped}
 * and in a comment at the top. Function-valued `context`, `input` and `output` are dropped the
 * same way, with nothing in their place.
 */
import type { AnyStateMachine } from 'xstate';

/** One inline function the export could not carry. */
export interface DroppedFunction {
  /** Where it was, e.g. `states.processing.on.ITEM_DONE[0].guard`. */
  path: string;
  kind: 'guard' | 'action' | 'actor' | 'value';
  /** The named reference written in its place (none for a value such as `context`). */
  replacedBy: string | null;
}

/** The source and what it had to drop. */
export interface ExportedSource {
  source: string;
  dropped: DroppedFunction[];
}

/** Options: a heading comment (e.g. which machine version and tool wrote it). */
export interface ExportOptions {
  heading?: string;
}

type Plain = string | number | boolean | null | Plain[] | { [key: string]: Plain };

/** A function's name when it says something (not '' and not the key of the slot it was written in). */
function nameOf(fn: { name?: unknown; type?: unknown }, slot: string): string | undefined {
  if (typeof fn.type === 'string' && fn.type.startsWith('xstate.')) return fn.type.slice('xstate.'.length);
  const name = typeof fn.name === 'string' ? fn.name : '';
  if (name === '' || name === slot || name === 'anonymous' || name.startsWith('bound ')) return undefined;
  return name;
}

class Exporter {
  readonly dropped: DroppedFunction[] = [];

  /** A named reference in place of an inline function (`assign@states.a.entry[0]`, or its own name). */
  #reference(value: unknown, path: string, kind: DroppedFunction['kind'], slot: string): string {
    const named = nameOf(value as { name?: unknown; type?: unknown }, slot);
    const isBuiltIn = typeof (value as { type?: unknown }).type === 'string';
    const replacedBy = named !== undefined && !isBuiltIn ? named : `${named ?? `inline.${kind}`}@${path}`;
    this.dropped.push({ path, kind, replacedBy });
    return replacedBy;
  }

  /** A guard, action or actor slot: strings and `{ type, params }` stay, functions become references. */
  #implementation(value: unknown, path: string, kind: DroppedFunction['kind'], slot: string): Plain | undefined {
    if (typeof value === 'string') return value;
    if (typeof value === 'function') return this.#reference(value, path, kind, slot);
    if (value !== null && typeof value === 'object') {
      const type = (value as { type?: unknown }).type;
      // Inline actor logic (a machine, fromPromise(...)): an object with a transition function.
      if (typeof (value as { transition?: unknown }).transition === 'function') return this.#reference({ name: (value as { config?: { id?: unknown } }).config?.id }, path, kind, slot);
      if (typeof type === 'string') return this.value({ ...value }, path);
    }
    return this.value(value, path);
  }

  #many(value: unknown, path: string, kind: DroppedFunction['kind'], slot: string): Plain | undefined {
    if (Array.isArray(value)) return value.map((v, i) => this.#implementation(v, `${path}[${i}]`, kind, slot) ?? null);
    return this.#implementation(value, path, kind, slot);
  }

  /** Plain data (meta, context, params): functions dropped, everything else as JSON has it. */
  value(value: unknown, path: string): Plain | undefined {
    if (value === undefined) return undefined;
    if (typeof value === 'function') {
      this.dropped.push({ path, kind: 'value', replacedBy: null });
      return undefined;
    }
    if (value === null || typeof value !== 'object') return typeof value === 'bigint' || typeof value === 'symbol' ? String(value) : (value as Plain);
    if (Array.isArray(value)) return value.map((v, i) => this.value(v, `${path}[${i}]`) ?? null);
    const out: Record<string, Plain> = {};
    for (const [k, v] of Object.entries(value)) {
      const plain = this.value(v, `${path}.${k}`);
      if (plain !== undefined) out[k] = plain;
    }
    return out;
  }

  /** One transition (a target string, or an object with target, guard, actions…). */
  #transition(value: unknown, path: string): Plain | undefined {
    if (typeof value === 'string' || value === undefined || value === null) return value ?? null;
    if (Array.isArray(value)) return value.map((t, i) => this.#transition(t, `${path}[${i}]`) ?? null);
    if (typeof value === 'function') return this.value(value, path);
    const out: Record<string, Plain> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const plain = k === 'guard' || k === 'cond' ? this.#implementation(v, `${path}.${k}`, 'guard', k) : k === 'actions' ? this.#many(v, `${path}.${k}`, 'action', k) : this.value(v, `${path}.${k}`);
      if (plain !== undefined) out[k] = plain;
    }
    return out;
  }

  #transitions(value: unknown, path: string): Plain | undefined {
    if (value === undefined) return undefined;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return this.#transition(value, path);
    const out: Record<string, Plain> = {};
    for (const [event, t] of Object.entries(value)) out[event] = this.#transition(t, `${path}.${event}`) ?? null;
    return out;
  }

  #invoke(value: unknown, path: string): Plain | undefined {
    if (Array.isArray(value)) return value.map((v, i) => this.#invoke(v, `${path}[${i}]`) ?? null);
    if (value === null || typeof value !== 'object') return this.value(value, path);
    const out: Record<string, Plain> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
      const plain = k === 'src' ? this.#implementation(v, `${path}.src`, 'actor', (value as { id?: string }).id ?? 'src') : k === 'onDone' || k === 'onError' || k === 'onSnapshot' ? this.#transition(v, `${path}.${k}`) : this.value(v, `${path}.${k}`);
      if (plain !== undefined) out[k] = plain;
    }
    return out;
  }

  /** A state node's config (the root is one too). */
  node(config: Record<string, unknown>, path: string): Record<string, Plain> {
    const out: Record<string, Plain> = {};
    const at = (k: string) => (path === '' ? k : `${path}.${k}`);
    for (const [k, v] of Object.entries(config)) {
      let plain: Plain | undefined;
      if (k === 'types' || k === 'schemas') continue; // TypeScript-only
      else if (k === 'states') plain = Object.fromEntries(Object.entries(v as Record<string, Record<string, unknown>>).map(([key, child]) => [key, this.node(child, at(`states.${key}`))]));
      else if (k === 'on' || k === 'after') plain = this.#transitions(v, at(k));
      else if (k === 'always' || k === 'onDone') plain = this.#transition(v, at(k));
      else if (k === 'entry' || k === 'exit') plain = this.#many(v, at(k), 'action', k);
      else if (k === 'invoke') plain = this.#invoke(v, at(k));
      else plain = this.value(v, at(k));
      if (plain !== undefined) out[k] = plain;
    }
    return out;
  }
}

/** Object-literal text with identifier keys unquoted (JSON.stringify escapes every quote in a string, so a key is always a line's first token). */
function literal(value: Plain): string {
  return JSON.stringify(value, null, 2).replace(/^(\s*)"([A-Za-z_$][\w$]*)": /gm, '$1$2: ');
}

/**
 * The source of `machine` for Stately's editor.
 *
 * @example
 * const { source, dropped } = exportSource(registry.get('job-lifecycle', '1')!.machine);
 */
export function exportSource(machine: AnyStateMachine, options: ExportOptions = {}): ExportedSource {
  const exporter = new Exporter();
  const config = exporter.node(machine.config as Record<string, unknown>, '');
  const lines: string[] = [];
  if (options.heading) lines.push(`// ${options.heading}`);
  lines.push(`// Paste into Stately's editor: "Import from code".`);
  if (exporter.dropped.length > 0) {
    lines.push(`// Inline functions dropped (not source; a named reference stands in where shown):`);
    for (const d of exporter.dropped) lines.push(`//   ${d.path} (${d.kind})${d.replacedBy ? ` -> "${d.replacedBy}"` : ''}`);
  }
  lines.push(`import { createMachine } from 'xstate';`, '', `export const machine = createMachine(${literal(config)});`, '');
  return { source: lines.join('\n'), dropped: exporter.dropped };
}
