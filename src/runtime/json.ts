import * as crypto from 'node:crypto';
import type { JsonValue } from '../ports/store.ts';

/** JSON text with object keys sorted, so equal values give equal text. */
export function stableStringify(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    // No prototype: a `__proto__` key stays a key (an own property) instead of setting one.
    const out: Record<string, unknown> = Object.create(null);
    for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

/** One-shot `crypto.hash` (Node 20.12+): the same digest as a Hash object, without building one per call. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;
const sha256Hex = oneShot
  ? (text: string) => oneShot('sha256', text, 'hex')
  : (text: string) => crypto.createHash('sha256').update(text).digest('hex');

/** A short, stable fingerprint of a JSON value (idempotency comparisons). */
export function hashJson(value: unknown): string {
  return sha256Hex(stableStringify(value) ?? 'undefined').slice(0, 32);
}

/** Round-trip through JSON: what would be stored. Throws on cycles and BigInt. */
export function toJson(value: unknown): JsonValue {
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

/** Every state path a state value is in: `{ a: { b: 'c' } }` → `['a', 'a.b', 'a.b.c']`. */
export function statePaths(value: unknown, prefix = ''): string[] {
  if (typeof value === 'string') return [prefix ? `${prefix}.${value}` : value];
  if (value === null || typeof value !== 'object') return [];
  const out: string[] = [];
  for (const [key, child] of Object.entries(value)) {
    const path = prefix ? `${prefix}.${key}` : key;
    out.push(path, ...statePaths(child, path));
  }
  return out;
}

/** A state value for people: `processing`, `a.b`, `{a.b, c.d}` for parallel states. */
export function formatStateValue(value: unknown): string {
  const leaves = leafPaths(value);
  return leaves.length === 1 ? leaves[0]! : `{${leaves.join(', ')}}`;
}

function leafPaths(value: unknown, prefix = ''): string[] {
  if (typeof value === 'string') return [prefix ? `${prefix}.${value}` : value];
  if (value === null || typeof value !== 'object') return [prefix || String(value)];
  const entries = Object.entries(value);
  if (entries.length === 0) return [prefix || '(none)'];
  return entries.flatMap(([key, child]) => leafPaths(child, prefix ? `${prefix}.${key}` : key));
}

export const REDACTED = '[redacted]';

/** A deep copy with every property named in `sensitive` replaced by `[redacted]`. */
export function redact(value: unknown, sensitive: ReadonlySet<string>): JsonValue {
  if (sensitive.size === 0) return toJson(value);
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = Object.create(null); // `__proto__` stays a key, as in sortKeys
      for (const [k, child] of Object.entries(v)) out[k] = sensitive.has(k) ? REDACTED : walk(child);
      return out;
    }
    return v;
  };
  return toJson(walk(value));
}
