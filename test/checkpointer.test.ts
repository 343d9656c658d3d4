/**
 * WAL checkpoints off the event loop (persistence/drivers/better-sqlite3/checkpointer.ts): a
 * writer whose WAL grows has it copied into the database by another thread, without checkpointing
 * itself; a WAL that stays small starts no thread; closing leaves no connection behind.
 */
import { existsSync, statSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { Checkpointer, WAKE_EVERY } from '../persistence/drivers/better-sqlite3/checkpointer.ts';
import { Resources } from './helpers/resources.ts';

const res = new Resources();
afterAll(() => res.dispose());

const PAGE = 4096;
/** The writer's `wal_autocheckpoint` as the checkpointer is told it: the worker copies at a quarter (64 pages). */
const PAGES = 256;

function writer(path: string) {
  const db = res.raw(path);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0'); // the writer never checkpoints: what is copied, the worker copied
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
  const commit = db.transaction(() => insert.run('x'.repeat(2000)));
  return { db, commit };
}

describe('checkpoints off the event loop', () => {
  it("copies a growing WAL into the database from another thread while the writer goes on, and closes its connection before the writer's", () => {
    const path = res.dbPath('grows.db');
    const { db, commit } = writer(path);
    const dbBytes = () => statSync(path).size;
    const before = dbBytes();
    const checkpointer = new Checkpointer(path, PAGE, PAGES);
    // Commit until the database file itself has grown: only a checkpoint writes it.
    let commits = 0;
    while (dbBytes() < before + 64 * PAGE && commits < 50_000) {
      commit();
      checkpointer.committed();
      commits += 1;
    }
    expect(checkpointer.running).toBe(true);
    expect(dbBytes(), `after ${commits} commits`).toBeGreaterThanOrEqual(before + 64 * PAGE);
    checkpointer.close();
    expect(checkpointer.running).toBe(false);
    db.close();
    // The writer's connection was the last one: its close checkpointed the rest and removed the WAL.
    expect(existsSync(`${path}-wal`)).toBe(false);
    expect((res.raw(path).prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBe(commits);
  });

  it('starts no thread for a WAL that stays under a quarter of the checkpoint interval', () => {
    const path = res.dbPath('small.db');
    const { db, commit } = writer(path);
    const checkpointer = new Checkpointer(path, PAGE, 1_000_000);
    for (let i = 0; i < 4 * WAKE_EVERY; i++) {
      commit();
      checkpointer.committed();
    }
    expect(checkpointer.running).toBe(false);
    checkpointer.close();
    db.close();
  });

});
