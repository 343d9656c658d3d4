/**
 * `createRuntime`'s options, checked before anything opens: a wrong type or an unknown name (a
 * typo such as `maxBacklogg` would otherwise be ignored and its default used) is a
 * {@link ValidationError} naming the option. Ranges the engine would otherwise clamp or ignore
 * (a lease shorter than a second, no activity slot at all) are refused the same way.
 */
import { z } from 'zod';
import { ValidationError } from './errors.ts';
import { isInspectionObserver } from './inspection.ts';

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
  // Checked in detail against the registered activities (limits.ts).
  activityConcurrency: z.unknown().optional(),
  // Infinity turns backpressure off (limits.ts).
  maxBacklog: z.union([positiveInt, z.literal(Number.POSITIVE_INFINITY)]).optional(),
  leaseMs: z.number().int().min(1000, 'must be at least 1000 (ms)').optional(),
  hostDriven: z.boolean().optional(),
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

/**
 * The name in `known` nearest to `name` (a misspelling: at most a third of its letters off, case
 * aside), or undefined: what a "did you mean" in an error message suggests.
 *
 * @example
 * nearestName('maxAttempt', ['maxAttempts', 'backoff']) // 'maxAttempts'
 */
export function nearestName(name: string, known: Iterable<string>): string | undefined {
  const limit = Math.max(2, Math.floor(name.length / 3));
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name;
}

/** " (did you mean X?)" for the name in `known` nearest to `name`, else "". */
export function didYouMean(name: string, known: Iterable<string>): string {
  const near = nearestName(name, known);
  return near === undefined ? '' : ` (did you mean "${near}"?)`;
}

/** Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j += 1) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
