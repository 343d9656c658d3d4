/** How a path's steps and values are written for people: step labels, event names, durations, values. */
import type { PathStep, PredictedRecord } from './modelState.ts';

/**
 * `APPROVE`, `APPROVE{role:peer}` (one of several samples: the fields that differ), `time+1d[REMIND]`, `done.reserve`, `error.export`,
 * `crash.export`; a step on a child job says which: `NOTE@review`, `done.lint@review`, and
 * what a time step delivers to it: `time+1s[after.1000@review, REMINDER]`.
 */
export function stepLabel(step: PathStep, expect: { now: number; records: readonly Pick<PredictedRecord, 'eventType'>[] }, prevNow: number, trail?: ReadonlyArray<{ path: string; eventType: string }>, detail = ''): string {
  // The payload values that tell this sample from the others (`{role:manager}`), else its number.
  const n = (sample: number) => detail || (sample > 1 ? `#${sample}` : '');
  const at = (child: string | undefined) => (child ? `@${child}` : '');
  switch (step.via) {
    case 'send':
      return `${step.type}${n(step.sample)}${at(step.child)}`;
    case 'time': {
      const delivered = trail ? trail.map((r) => `${shortEvent(r.eventType)}${at(r.path)}`) : expect.records.map((r) => shortEvent(r.eventType));
      return `time+${formatMs(expect.now - prevNow)}[${delivered.length ? delivered.join(', ') : 'retry'}]`;
    }
    case 'done':
      return `done.${step.actorId}${n(step.sample)}${at(step.child)}`;
    case 'error':
      return `error.${step.actorId}${n(step.sample)}${at(step.child)}`;
    case 'interrupt':
      return `crash.${step.actorId}${at(step.child)}`;
  }
}

export function shortEvent(type: string): string {
  const after = /^xstate\.after\.([^.]+)\./.exec(type);
  if (after) return `after.${after[1]}`;
  return type.replace(/^xstate\.(done|error)\.actor\./, '$1.');
}

export function formatMs(ms: number): string {
  const units: Array<[number, string]> = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
  ];
  for (const [size, unit] of units) if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** `processing`, `a.b`, `{a.b, c.d}`. */
export function formatValue(value: unknown, prefix = ''): string {
  const leaves = (v: unknown, p: string): string[] => {
    if (typeof v === 'string') return [p ? `${p}.${v}` : v];
    if (v === null || typeof v !== 'object') return [p];
    const entries = Object.entries(v);
    return entries.length === 0 ? [p] : entries.flatMap(([k, c]) => leaves(c, p ? `${p}.${k}` : k));
  };
  const all = leaves(value, prefix);
  return all.length === 1 ? all[0]! : `{${all.join(', ')}}`;
}

/** `{role:manager}`: the fields of `mine` whose values differ among `all` (the whole value when it is not an object); '' for a lone sample. */
export function distinguishing(all: readonly unknown[], mine: unknown): string {
  if (all.length <= 1) return '';
  const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));
  const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!all.every(isObject) || !isObject(mine)) return `{${show(mine)}}`;
  const keys = [...new Set(all.flatMap((o) => Object.keys(o)))].filter((k) => k !== 'type' && new Set(all.map((o) => JSON.stringify(o[k]))).size > 1);
  const shown = keys.filter((k) => k in mine).map((k) => `${k}:${show(mine[k])}`).join(',');
  const text = `{${shown}}`;
  return text.length > 60 ? `${text.slice(0, 57)}…}` : text;
}
