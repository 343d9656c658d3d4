/**
 * Text rendering for the `spool` command: aligned tables, key/value blocks, state values and
 * timestamps. State names, statuses and table headings are coloured through style.ts, which
 * leaves them plain unless main() decided the output is a terminal that wants colour; widths
 * are measured without the colour escapes.
 */
import { formatStateValue, type Job } from '../index.ts';
import { paintHeading, paintState, paintStatus, plain } from './style.ts';

/** A state value for people: `processing`, `checkout.paying`, `{upload.done, scan.running}` for parallel states. */
export function formatState(value: unknown): string {
  return value === null || value === undefined ? '-' : paintState(formatStateValue(value));
}

/** Epoch milliseconds as `2025-01-31 12:00:00.000Z` (UTC, sortable). */
export function formatTime(at: number | null | undefined): string {
  if (at === null || at === undefined || !Number.isFinite(at)) return '-';
  return new Date(at).toISOString().replace('T', ' ');
}

/** Keys whose values are the user's data (or stored payloads): printed exactly as stored. */
const USER_DATA = new Set(['context', 'input', 'output', 'payload', 'event', 'data', 'error', 'details', 'snapshot']);
const DECIMAL = /^(0|[1-9]\d{0,14})$/;

/**
 * The one JSON printer of `--json` output: machine versions, stored as text, as the numbers the
 * definitions give (`"machineVersion": 2`; a version like `v2` stays text), and the user's own
 * values (context, input, output, payloads) untouched. `indent` as JSON.stringify's.
 *
 * @example
 * jsonText({ id: 'a', machineId: 'm', machineVersion: '2' }) // '{"id":"a","machineId":"m","machineVersion":2}'
 */
export function jsonText(value: unknown, indent?: number): string {
  const untouched = new WeakSet<object>();
  return JSON.stringify(
    value,
    function (this: Record<string, unknown>, key: string, v: unknown) {
      if (untouched.has(this) || USER_DATA.has(key)) {
        if (v !== null && typeof v === 'object') untouched.add(v);
        return v;
      }
      const machineVersion = key === 'machineVersion' || (key === 'version' && (typeof this['id'] === 'string' || typeof this['machine'] === 'string'));
      return machineVersion && typeof v === 'string' && DECIMAL.test(v) ? Number(v) : v;
    },
    indent,
  );
}

/** Compact one-line JSON (`-` for undefined). */
export function formatJson(value: unknown): string {
  return value === undefined ? '-' : JSON.stringify(value);
}

/**
 * Columns padded to their widest cell, two spaces apart; the last column is not padded.
 *
 * @example
 * table(['ID', 'STATE'], [['a', 'queued']]) // "ID  STATE\na   queued"
 */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => plain(r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : padVisible(cell, widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [paintHeading(line(headers)), ...rows.map(line)].join('\n');
}

/** `text` padded with spaces to `width` columns as the terminal shows it (colour escapes take none). */
export function padVisible(text: string, width: number): string {
  return text + ' '.repeat(Math.max(0, width - plain(text).length));
}

/**
 * Key/value lines with the keys aligned. Multi-line values are indented under their key.
 *
 * @example
 * keyValues([['state', 'queued'], ['revision', '1']]) // "state     queued\nrevision  1"
 */
export function keyValues(pairs: readonly (readonly [string, string])[]): string {
  const width = Math.max(0, ...pairs.map(([k]) => k.length));
  const pad = ' '.repeat(width + 2);
  return pairs
    .map(([key, value]) => `${key.padEnd(width)}  ${value.split('\n').join(`\n${pad}`)}`)
    .join('\n');
}

/** Pretty JSON for a block value: one line when short, indented otherwise. */
export function formatBlock(value: unknown): string {
  if (value === undefined) return '-';
  const compact = JSON.stringify(value);
  return compact.length <= 72 ? compact : JSON.stringify(value, null, 2);
}

/** A message on one line; a stored message that is not text (written by an older Spool) as JSON. */
export function oneLine(text: unknown): string {
  return (typeof text === 'string' ? text : (JSON.stringify(text) ?? String(text))).replace(/\s*\n\s*/g, ' ').trim();
}

/** A job's status with its holds: `running, quarantined`, `done (final)`. */
export function describeStatus(job: Job): string {
  const base = paintStatus(job.final ? `${job.status} (final)` : job.status);
  const held = [job.quarantine !== null ? 'quarantined' : '', job.suspended !== null ? 'suspended' : ''].filter(Boolean);
  return held.length > 0 ? `${base}, ${held.join(', ')}` : base;
}
