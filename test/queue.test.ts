/**
 * A queue that keeps up (issue 32): a batch claim's cost does not depend on the backlog or on its
 * limit's value. SQLite re-prepares a statement whose plan depends on a bound LIMIT at every run
 * (the pick's compile was 0.6-1.8 ms of CPU per claim), so the pick is one statement per limit
 * with the limit written in; these tests hold the text to that and the claims to their limits.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { SQLITE } from '../persistence/sql/predicates.ts';
import { dueClaimPickSql } from '../persistence/sql/statements.ts';
import { claim, effectOf, T0 } from './helpers/dueClaims.ts';
import { newJob } from './store.contract.ts';

const TMP_ROOT = fileURLToPath(new URL('../.vitest-tmp/', import.meta.url));

describe('batch claim pick (SQLite)', () => {
  let dir: string;
  let store: SqliteStore;
  beforeEach(async () => {
    dir = join(TMP_ROOT, randomBytes(8).toString('hex'));
    mkdirSync(dir, { recursive: true });
    store = await SqliteStore.open(join(dir, 'queue.db'));
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes its limit into the statement: no LIMIT bound at run time, which SQLite would re-prepare at every claim', () => {
    const text = dueClaimPickSql(SQLITE, 16);
    expect(text).not.toMatch(/@limit/);
    expect(text).toMatch(/LIMIT 16\b/);
    expect(text).toMatch(/LIMIT 16 \+ 1\b/);
    expect(() => dueClaimPickSql(SQLITE, 1.5)).toThrow(RangeError);
    // Each arm of the due read stops at the limit: an index-ordered read, not the backlog.
    expect(text.match(/LIMIT 16 \+ 1/g)!.length).toBeGreaterThanOrEqual(4);
  });

  it('takes at most each call\'s limit, oldest first, whatever limits came before', async () => {
    for (let i = 0; i < 6; i += 1) {
      const id = `J${i}`;
      expect((await store.createJob({ ...newJob(id, { machineId: 'm', machineVersion: '1' }), effects: [effectOf(id, 'a', { at: T0 + i })] })).created).toBe(true);
    }
    const ids = async (limit: number) => (await store.claimDueEffects(claim({ limit }))).claimed.map((e) => e.jobId);
    expect(await ids(2)).toEqual(['J0', 'J1']);
    expect(await ids(1)).toEqual(['J2']);
    expect(await ids(2)).toEqual(['J3', 'J4']);
    const last = await store.claimDueEffects(claim({ limit: 5 }));
    expect(last.claimed.map((e) => e.jobId)).toEqual(['J5']);
    expect(last.more).toBe(false);
  });
});
