import type { JsonValue } from '../ports/store.ts';
import { sha256Hex } from './sha256.ts';

/**
 * JSON text with object keys sorted, so equal values give equal text: what `JSON.stringify`
 * writes of a copy of `value` with its own keys sorted (an object's own enumerable keys, in
 * `sort()` order; a `__proto__` key is a key like any), written in one walk without the copy.
 */
export function stableStringify(value: unknown): string {
  return stable(value)!;
}

function stable(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i += 1) out += `${i === 0 ? '' : ','}${stable(value[i]) ?? 'null'}`;
    return `${out}]`;
  }
  let out = '';
  for (const key of Object.keys(value).sort()) {
    const text = stable((value as Record<string, unknown>)[key]);
    if (text !== undefined) out += `${out === '' ? '' : ','}${JSON.stringify(key)}:${text}`;
  }
  return `{${out}}`;
}

/** A short, stable fingerprint of a JSON value (idempotency comparisons). */
export function hashJson(value: unknown): string {
  return sha256Hex(stableStringify(value) ?? 'undefined').slice(0, 32);
}

/** A job's input hash (a repeated start's is compared with it): `hashJson({ machine, input })`. */
export function inputHash(machineId: string, input: JsonValue): string {
  return hashJson({ machine: machineId, input });
}

/** Round-trip through JSON: what would be stored. Throws on cycles and BigInt. */
export function toJson(value: unknown): JsonValue {
  // A string, boolean or null is its own copy (a state value is usually a string): no text made.
  if (typeof value === 'string' || typeof value === 'boolean' || value === null) return value;
  const text = JSON.stringify(value);
  return text === undefined ? null : (JSON.parse(text) as JsonValue);
}

/**
 * {@link toJson} and the text it went through: the copy, and `JSON.stringify` of the copy (the
 * text a store writes for it), made once. Throws on cycles and BigInt.
 */
export function toJsonText(value: unknown): { value: JsonValue; text: string } {
  const text = JSON.stringify(value) ?? 'null';
  return { value: typeof value === 'string' || typeof value === 'boolean' || value === null ? value : (JSON.parse(text) as JsonValue), text };
}

/** Why a value cannot be stored as JSON: `path` names the part (`event.items[2].when`), `reason` what it is. */
export class NotJsonError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
    /** `value`: JSON cannot hold it; `depth`: nested deeper than allowed; `size`: more values than allowed. */
    readonly kind: 'value' | 'depth' | 'size' = 'value',
  ) {
    super(`${path} ${reason}`);
    this.name = 'NotJsonError';
  }
}

/** Limits of {@link plainJson}: objects and arrays nested at most `maxDepth`, at most `maxValues` values in all. */
export interface PlainJsonLimits {
  maxDepth: number;
  maxValues: number;
}

const dateToJSON = Date.prototype.toJSON;
const dateToISOString = Date.prototype.toISOString;
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const wellFormed: (s: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (s) => (s as string & { isWellFormed(): boolean }).isWellFormed()
    : (s) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/**
 * The plain JSON copy of `value`, made in one walk that also checks it, or a {@link NotJsonError}
 * naming the first part JSON cannot hold: `undefined` (in an object or an array), a function, a
 * symbol (as a value or a key), a BigInt, a cycle, a non-finite number, a hole in an array, a
 * string with a lone surrogate (UTF-8 cannot encode it: a text column reads back U+FFFD, and
 * Postgres `jsonb` refuses its `\ud800` escape), an object
 * with a `toJSON` method (what it writes is not what a schema sees), and any object that is not a
 * plain object or array (a class instance, a Map, a Set, a boxed primitive).
 *
 * Two values are taken as JSON.stringify would write them, so the copy is what is stored: a valid
 * `Date` (unmodified, of Date itself) becomes its ISO string, and `-0` becomes `0`. An own
 * `__proto__` key stays an own data property of the copy (as `JSON.parse` makes it), never a
 * prototype; a `constructor` key is an ordinary key. Each property is read once (a getter runs
 * once), so the copy cannot differ from what was checked. `JSON.stringify` of the copy is the
 * text a store writes, and `JSON.parse` of that text equals the copy.
 */
export function plainJson(value: unknown, root: string, limits: PlainJsonLimits): JsonValue {
  const walk = new PlainWalk(root, limits);
  return walk.copy(value, 0);
}

/** One {@link plainJson} walk: the path to where it is (formatted only for an error), what encloses it. */
class PlainWalk {
  readonly #path: (string | number)[] = [];
  readonly #ancestors = new Set<object>();
  readonly #root: string;
  readonly #limits: PlainJsonLimits;
  #values = 0;

  constructor(root: string, limits: PlainJsonLimits) {
    this.#root = root;
    this.#limits = limits;
  }

  copy(v: unknown, depth: number): JsonValue {
    if (++this.#values > this.#limits.maxValues) this.#fail(`holds more than ${this.#limits.maxValues} values`, 'size');
    switch (typeof v) {
      case 'string':
        if (!wellFormed(v)) this.#fail('is a string with a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot hold');
        return v;
      case 'number':
        if (!Number.isFinite(v)) this.#fail(`is ${v}, not a JSON number`);
        return v === 0 ? 0 : v; // -0 is written as 0
      case 'boolean':
        return v;
      case 'undefined':
        return this.#fail('is undefined');
      case 'function':
        return this.#fail('is a function');
      case 'symbol':
        return this.#fail('is a symbol');
      case 'bigint':
        return this.#fail('is a BigInt');
    }
    if (v === null) return null;
    const o = v as object;
    if (depth + 1 > this.#limits.maxDepth) this.#fail(`is nested deeper than ${this.#limits.maxDepth} levels`, 'depth');
    if (this.#ancestors.has(o)) this.#fail('is a cycle: it contains itself');
    const proto: unknown = Object.getPrototypeOf(o);
    if (proto === Date.prototype) return this.#date(o as Date);
    if (Array.isArray(o) ? proto !== Array.prototype : proto !== Object.prototype && proto !== null) this.#fail(`is ${describeObject(proto)}, not a plain object or array`);
    if (typeof (o as { toJSON?: unknown }).toJSON === 'function') this.#fail('has a toJSON method: what it writes is not what is checked');
    if (Object.getOwnPropertySymbols(o).length > 0) this.#fail('has a symbol key');
    this.#ancestors.add(o);
    const out = Array.isArray(o) ? this.#array(o as unknown[], depth + 1) : this.#object(o as Record<string, unknown>, depth + 1);
    this.#ancestors.delete(o);
    return out;
  }

  #array(a: unknown[], depth: number): JsonValue[] {
    const out: JsonValue[] = new Array<JsonValue>(a.length);
    for (let i = 0; i < a.length; i += 1) {
      this.#path.push(i);
      const item = a[i];
      if (item === undefined && !(i in a)) this.#fail('is a hole in a sparse array');
      out[i] = this.copy(item, depth);
      this.#path.pop();
    }
    return out;
  }

  #object(o: Record<string, unknown>, depth: number): { [key: string]: JsonValue } {
    const out: { [key: string]: JsonValue } = {};
    for (const key of Object.keys(o)) {
      this.#path.push(key);
      if (!wellFormed(key)) this.#fail('is a key with a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot hold');
      const child = this.copy(o[key], depth);
      // `out.__proto__ = x` would set the copy's prototype: define it as the own key it is.
      if (key === '__proto__') Object.defineProperty(out, key, { value: child, writable: true, enumerable: true, configurable: true });
      else out[key] = child;
      this.#path.pop();
    }
    return out;
  }

  #date(d: Date): string {
    if (Reflect.ownKeys(d).length > 0) this.#fail('is a Date with properties of its own');
    if (Date.prototype.toJSON !== dateToJSON) this.#fail('is a Date, and Date.prototype.toJSON was replaced');
    if (Number.isNaN(d.getTime())) this.#fail('is an invalid Date');
    return dateToISOString.call(d);
  }

  #fail(reason: string, kind: NotJsonError['kind'] = 'value'): never {
    let path = this.#root;
    for (const part of this.#path) path += typeof part === 'number' ? `[${part}]` : IDENTIFIER.test(part) ? `.${part}` : `[${JSON.stringify(part)}]`;
    throw new NotJsonError(path, reason, kind);
  }
}

/** `a Map`, `a Foo instance`, for a message. */
function describeObject(proto: unknown): string {
  let name: unknown;
  try {
    name = (proto as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  } catch {
    name = undefined;
  }
  if (typeof name !== 'string' || name === '') return 'an object of another kind';
  return ['Map', 'Set', 'WeakMap', 'WeakSet', 'Date', 'RegExp', 'Promise', 'Error', 'String', 'Number', 'Boolean'].includes(name) || /Array$/.test(name)
    ? `a${/^[AEIOU]/.test(name) ? 'n' : ''} ${name}`
    : `a${/^[AEIOU]/.test(name) ? 'n' : ''} ${name} instance`;
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
