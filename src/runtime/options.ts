/**
 * `createRuntime`'s options, checked before anything opens: a wrong type or an unknown name (a
 * typo such as `maxBacklogg` would otherwise be ignored and its default used) is a
 * {@link ValidationError} naming the option. Ranges the engine would otherwise clamp or ignore
 * (a lease shorter than a second, no activity slot at all) are refused the same way.
 */
import { z } from 'zod';
import { ValidationError } from '../base/errors.ts';
import type { InspectionEvent, Observer } from 'xstate';

const fn = (what: string) => z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', `must be a function (${what})`);
const positiveInt = z.number().int().positive();

const runtimeOptions = z.strictObject({
  store: z.custom<object>(
    (v) => v !== null && typeof v === 'object' && typeof (v as { writeBatch?: unknown }).writeBatch === 'function' && typeof (v as { getJob?: unknown }).getJob === 'function',
    'must be a JobStore (e.g. await SqliteStore.open(path))',
  ),
  machines: z.custom<Iterable<unknown>>(
    (v) => v !== null && typeof v === 'object' && typeof (v as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function',
    'must be an array (or other iterable) of machine definitions or machines',
  ),
  clock: z.custom<object>((v) => v !== null && typeof v === 'object' && typeof (v as { now?: unknown }).now === 'function', 'must be a Clock: { now(): number }').optional(),
  owner: z.string().nullable().optional(),
  newId: fn('() => string').optional(),
  maxPayloadBytes: positiveInt.optional(),
  processEvents: z.boolean().optional(),
  recover: z.boolean().optional(),
  verifySnapshots: z.union([z.boolean(), z.literal('auto')]).optional(),
  runEffects: z.boolean().optional(),
  maxConcurrentActivities: positiveInt.optional(),
  commitDelayMs: z.number().min(0, 'must be at least 0 (ms)').max(1000, 'must be at most 1000 (ms)').optional(),
  // Checked in detail against the registered activities (limits.ts).
  activityConcurrency: z.unknown().optional(),
  // Infinity turns backpressure off (limits.ts).
  maxBacklog: z.union([positiveInt, z.literal(Number.POSITIVE_INFINITY)]).optional(),
  leaseMs: z.number().int().min(1000, 'must be at least 1000 (ms)').optional(),
  hostDriven: z.boolean().optional(),
  runnerHost: z.string().regex(/^[^/]+$/, 'must be a non-empty name without "/"').optional(),
  log: fn('(entry: LogEntry) => void').optional(),
  inspect: z.custom<object>(isInspectionObserver, 'must be an XState inspection observer: a function or { next(event) } (e.g. createWebSocketInspector(...).inspect)').optional(),
});

/**
 * The names in `value` that are not `known`, said for an error message (`unknown options a, b
 * (known: …)`), or undefined when there are none: a misspelt name would otherwise be ignored and
 * its default used.
 */
export function unknownNames(value: object, known: readonly string[], what = 'option'): { first: string; text: string } | undefined {
  const unknown = Object.keys(value).filter((k) => !known.includes(k));
  if (unknown.length === 0) return undefined;
  return { first: unknown[0]!, text: `unknown ${what}${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${known.join(', ')})` };
}

/** Throws a {@link ValidationError} naming the first options that are wrong. */
export function checkRuntimeOptions(options: unknown): void {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ValidationError('createRuntime needs an options object: { store, machines, ... }.');
  }
  // `undefined` values stand for "the default", as with any optional option.
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const result = runtimeOptions.safeParse(given);
  if (result.success) return;
  const problems = result.error.issues.slice(0, 5).map((issue) => {
    if (issue.code === 'unrecognized_keys') return `unknown option${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}`;
    const name = issue.path.map(String).join('.');
    return `${name}: ${issue.message}`;
  });
  const first = result.error.issues[0]!;
  const option = first.code === 'unrecognized_keys' ? first.keys[0] : first.path.map(String).join('.');
  throw new ValidationError(`createRuntime: ${problems.join('; ')}.`, { option });
}

/** Whether `value` can be given as the `inspect` option. */
export function isInspectionObserver(value: unknown): value is InspectionObserver {
  if (typeof value === 'function') return true;
  return value !== null && typeof value === 'object' && typeof (value as { next?: unknown }).next === 'function';
}

/** What the `inspect` option takes: a function or an observer of XState inspection events. */
export type InspectionObserver = ((event: InspectionEvent) => void) | Partial<Observer<InspectionEvent>>;
