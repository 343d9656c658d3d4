/**
 * Which B-trees a commit writes (not part of `npm run bench`): drains `jobs` 3-step jobs at c
 * activities on a fresh SQLite file while a reader holds the WAL open (no checkpoint resets it),
 * then reads every commit's frames from the WAL and names each page's B-tree (dbstat).
 * `tsx bench/walPages.ts [steps=3] [c=1] [jobs=100]`
 */
import Database from 'better-sqlite3';
import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRuntime, runWorker } from '../src/index.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { JOB_SHAPES } from './jobsRun.ts';

const [steps = '3', c = '1', n = '100'] = process.argv.slice(2);
const shape = JOB_SHAPES.find((s) => s.steps === Number(steps))!;
const path = join(mkdtempSync(join(tmpdir(), 'walpages-')), 'db.sqlite');
const id = shape.def.machine.id;
const jobs = Number(n);

const enqueuer = await createRuntime({ store: await SqliteStore.open(path, { synchronous: 'NORMAL' }), machines: [shape.def], runEffects: false });
for (let i = 0; i < jobs; i++) await enqueuer.start(id, { n: i });
await enqueuer.close();

const hold = new Database(path);
hold.pragma('wal_checkpoint(TRUNCATE)');
hold.exec('BEGIN');
hold.prepare('SELECT count(*) FROM jobs').get(); // a read snapshot: no checkpoint passes it, the WAL keeps every frame
const runtime = await createRuntime({ store: await SqliteStore.open(path, { synchronous: 'NORMAL' }), machines: [shape.def], maxConcurrentActivities: Number(c) });
let finals = 0;
let done!: () => void;
const all = new Promise<void>((r) => (done = r));
runtime.subscribe((e) => {
  if (e.type === 'job.committed' && e.job.final && ++finals === jobs) done();
});
const controller = new AbortController();
const worker = runWorker(runtime, { signal: controller.signal });
await all;
controller.abort();
await worker;
const wal = readFileSync(`${path}-wal`);
await runtime.close().catch(() => undefined);
hold.exec('COMMIT');
const names = new Map<number, string>();
for (const row of hold.prepare('SELECT name, pageno FROM dbstat').all() as { name: string; pageno: number }[]) names.set(row.pageno, row.name);
hold.close();

const pageSize = wal.readUInt32BE(8);
const salt1 = wal.readUInt32BE(16);
const salt2 = wal.readUInt32BE(20);
const byTree = new Map<string, number>();
let commits = 0;
let frames = 0;
let pages = new Set<number>();
for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
  if (wal.readUInt32BE(off + 8) !== salt1 || wal.readUInt32BE(off + 12) !== salt2) break;
  frames += 1;
  pages.add(wal.readUInt32BE(off));
  if (wal.readUInt32BE(off + 4) !== 0) {
    commits += 1;
    for (const p of pages) byTree.set(names.get(p) ?? `?${p}`, (byTree.get(names.get(p) ?? `?${p}`) ?? 0) + 1);
    pages = new Set();
  }
}
console.log(`${jobs} jobs, ${steps}-step, c${c}: ${commits} commits (${(commits / jobs).toFixed(2)} per job), ${(frames / commits).toFixed(1)} frames per commit`);
for (const [tree, count] of [...byTree].sort((a, b) => b[1] - a[1])) console.log(`${(count / commits).toFixed(2)} pages per commit  ${tree}`);
