/** Formatting helpers shared by the bench sections: rates, durations, bytes and plain-text tables. */
import os from 'node:os';

export function fmtRate(n: number): string {
  if (!Number.isFinite(n)) return '—';
  return n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : Math.round(n).toLocaleString('en-US');
}

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '—';
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms >= 10_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${ms.toFixed(2)} ms`;
}

export function fmtMiB(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

export function fmtRatio(r: number): string {
  return Number.isFinite(r) ? r.toFixed(2) : '—';
}

export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/** Host load over one section: 1-minute load average before and after, against the CPU count. */
export interface HostLoad {
  before: number;
  after: number;
  cpus: number;
  busy: boolean;
}

export function loadNow(): number {
  return Math.round(os.loadavg()[0]! * 100) / 100;
}

export function hostLoad(before: number): HostLoad {
  const after = loadNow();
  const cpus = os.cpus().length;
  return { before, after, cpus, busy: Math.max(before, after) > cpus };
}

/** The one-line note printed under every section's table. */
export function printLoadNote(load: HostLoad, what = 'figures'): void {
  const text = `host load (1-min) ${load.before.toFixed(2)} → ${load.after.toFixed(2)} on ${load.cpus} CPUs`;
  if (load.busy) console.log(`  NOTE: ${text}: the host was busy, ${what} swing with other work (FULL most); re-run when quiet before quoting them.`);
  else console.log(`  ${text}: quiet enough.`);
}
