/**
 * Redaction of sensitive values in messages: an error message may quote a sensitive field of
 * the event, the input or the job's context, and none may reach history, logs or error payloads.
 * (`redact` in json.ts removes sensitive fields from JSON values; this removes their values from text.)
 */
import { REDACTED } from './json.ts';

/** Where `value` holds something under a sensitive key: `card`, `payer.card`, `items.0.card`. */
export function sensitivePaths(value: unknown, sensitive: ReadonlySet<string>, prefix = ''): string[] {
  if (sensitive.size === 0 || value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, child]) => {
    const path = prefix ? `${prefix}.${key}` : key;
    return sensitive.has(key) ? [path] : sensitivePaths(child, sensitive, path);
  });
}

/** Whether a stored value had a sensitive field redacted (holds `[redacted]` anywhere). */
export function holdsRedacted(value: unknown): boolean {
  if (value === REDACTED) return true;
  return value !== null && typeof value === 'object' && Object.values(value).some(holdsRedacted);
}

/** `redactText` over `values`, for messages still to come (a step's after-commit failures): no closure when nothing is sensitive. */
export function textCleaner(values: unknown, sensitive: ReadonlySet<string>): (message: string) => string {
  return sensitive.size === 0 ? unchanged : (message) => redactText(message, values, sensitive);
}

const unchanged = (message: string): string => message;

/**
 * Remove sensitive values that an error message may quote: every leaf under a sensitive key of
 * `values` (JSON: an event, an input, a stored context, or an array of them).
 */
export function redactText(message: string, values: unknown, sensitive: ReadonlySet<string>): string {
  if (sensitive.size === 0) return message;
  const secrets: string[] = [];
  const collect = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(collect);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(collect);
    else if ((typeof v === 'string' || typeof v === 'number') && String(v).length > 0) secrets.push(String(v));
  };
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) (sensitive.has(k) ? collect : walk)(child);
    }
  };
  walk(values);
  // As it is, and as JSON writes it inside a string once or twice (a thrown object's message is
  // its JSON, and may quote a message that quoted the secret).
  const forms = new Set<string>();
  for (const secret of secrets) {
    const once = JSON.stringify(secret).slice(1, -1);
    forms.add(secret).add(once).add(JSON.stringify(once).slice(1, -1));
  }
  let out = message;
  for (const form of [...forms].sort((a, b) => b.length - a.length)) out = out.split(form).join('[redacted]');
  return out;
}
