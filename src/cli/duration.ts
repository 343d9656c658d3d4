import { UsageError } from './errors.ts';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A duration argument in milliseconds: a number with a unit (`500ms`, `45s`, `15m`, `12h`, `30d`,
 * `2w`), several in a row (`1d12h`), or a bare number of milliseconds.
 *
 * @example
 * parseDuration('30d', '--older-than') // 2592000000
 */
export function parseDuration(text: string, what: string): number {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== trimmed) {
    throw new UsageError(`${what} must be a duration like 30d, 12h, 15m, 45s, 500ms or 1d12h (got "${text}").`);
  }
  return Math.round(parts.reduce((total, p) => total + Number(p[1]) * UNITS[p[2]!]!, 0));
}
