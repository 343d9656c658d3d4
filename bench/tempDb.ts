import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory in os.tmpdir() holding one database file; `dispose` removes it (db, -wal, -shm). */
export function freshDbPath(label: string): { path: string; dispose: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `spool-bench-${label}-`));
  return { path: join(dir, 'bench.db'), dispose: () => rmSync(dir, { recursive: true, force: true }) };
}
