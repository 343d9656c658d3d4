/**
 * A request's JSON body and its fields, checked: every route reads its body through these, so a
 * body that is not a JSON object, or has fields the route does not take, is refused the same way.
 */
import type { Context } from 'hono';
import { ValidationError } from '../index.ts';
import { BadJsonError } from './errors.ts';

/** The body as a JSON object (an empty body is `{}`); with `keys`, no other property is allowed. */
export async function readBody(c: Context, keys?: readonly string[]): Promise<Record<string, unknown>> {
  const raw = await c.req.text();
  if (raw.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch (error) {
    throw new BadJsonError(`The request body is not valid JSON (${(error as Error).message}). Nothing was changed.`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new BadJsonError('The request body must be a JSON object. Nothing was changed.');
  const unknown = keys === undefined ? [] : Object.keys(body).filter((k) => !keys.includes(k));
  if (unknown.length > 0) throw new ValidationError(`Unknown field(s) ${unknown.join(', ')}; this route takes ${keys!.join(', ') || 'no fields'}.`);
  return body as Record<string, unknown>;
}

export function text(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new ValidationError(`${name} must be a string.`);
  return value;
}

export function optionalText(value: unknown, name: string): string | undefined {
  return value === undefined ? undefined : text(value, name);
}

