import type { JsonValue } from '../../src/ports/store.ts';
import { utf8Compare } from '../../src/base/bytes.ts';

/** A stored JSON text parsed, or null with the text added to `damaged`. */
export function parsedOr(text: unknown, damaged: string[]): JsonValue {
  try {
    return JSON.parse(text as string) as JsonValue;
  } catch {
    damaged.push(String(text));
    return null;
  }
}

/** SQLite's BINARY collation (UTF-8 byte order), for what is sorted after it is read. */
export function byteOrder(a: string, b: string): number {
  return utf8Compare(a, b);
}
