/**
 * Bytes on web-standard APIs (no `Buffer`): random ids, base64url, UTF-8 sizes and order.
 */
import { nodeBuiltin } from './node.ts';

/** `n` random bytes (`crypto.getRandomValues`) in base64url, no padding. */
export function randomBase64url(n: number): string {
  return bytesToBase64url(crypto.getRandomValues(new Uint8Array(n)));
}

/** Bytes as base64url, no padding. */
export function bytesToBase64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Text as the base64url of its UTF-8, no padding. */
export function textToBase64url(text: string): string {
  return bytesToBase64url(new TextEncoder().encode(text));
}

/** The text whose UTF-8 `encoded` is in base64url (padded or not); throws on anything else, or on bytes that are not UTF-8. */
export function base64urlToText(encoded: string): string {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(encoded)) throw new SyntaxError('Not base64url');
  const binary = atob(encoded.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, ''));
  return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

const nodeBuffer = nodeBuiltin('node:buffer')?.Buffer;

/** The length of `text` in UTF-8, in bytes (a lone surrogate counts as the 3 of U+FFFD): Node's `Buffer.byteLength` when there (a tenth of the time on a large text), else {@link countUtf8}. */
export const utf8Length: (text: string) => number = nodeBuffer ? (text) => nodeBuffer.byteLength(text) : countUtf8;

/** The length of `text` in UTF-8, counted without encoding it. */
export function countUtf8(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) (bytes += 4), i++;
    else bytes += 3;
  }
  return bytes;
}

/** A code point as UTF-8 orders it: a lone surrogate is written as U+FFFD. */
function codePoint(char: string): number {
  const cp = char.codePointAt(0)!;
  return cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp;
}

/** Order of the UTF-8 bytes of two texts (SQLite's BINARY collation): code point order. */
export function utf8Compare(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1;
    const d = codePoint(x.value) - codePoint(y.value);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
}
