/**
 * The Postgres driver caches what it builds from statements across a process by their keys (the
 * prepared names, deferred.ts's combined texts, pairs.ts's pairs). Two stores with different lease
 * clocks in one process must never get each other's text from those caches.
 */
import { describe, expect, it } from 'vitest';
import { POSTGRES, POSTGRES_CALLER_LEASES } from '../persistence/sql/predicates.ts';
import { pgStatements, prepared } from '../persistence/drivers/pg/sql.ts';
import { pairOf } from '../persistence/drivers/pg/pairs.ts';
import { DeferredWrites } from '../persistence/drivers/pg/deferred.ts';

describe('Postgres statement keys', () => {
  it("differ between the two lease clocks' dialects, so a pair made for one store is never another's", () => {
    const server = pgStatements(POSTGRES);
    const caller = pgStatements(POSTGRES_CALLER_LEASES);
    const differing = (Object.keys(server) as (keyof typeof server)[]).filter((n) => server[n].text !== caller[n].text);
    expect(differing).toContain('updateState');
    for (const n of Object.keys(server) as (keyof typeof server)[]) expect(server[n].key).not.toBe(caller[n].key);
    const serverPair = pairOf(server.settleEffect, server.updateState)!;
    const callerPair = pairOf(caller.settleEffect, caller.updateState)!;
    // The job update (the pair's second statement) reads the lease by each store's own clock.
    expect(callerPair.text).not.toBe(serverPair.text);
  });
});

describe('prepared statement names', () => {
  it('a statement goes under a new name after 100 and 1,000 runs (each connection plans it again, from the tables as they are then), reads and writes alike', () => {
    for (const stmt of [pgStatements(POSTGRES).leaseHolders, pgStatements(POSTGRES).freeLease]) {
      const names = Array.from({ length: 1_001 }, () => prepared(stmt, []).name);
      expect(names[0]).toBe(`s_${stmt.key}`);
      expect(names[99]).toBe(`s_${stmt.key}`);
      expect(names[100]).toBe(`s_${stmt.key}_p1`);
      expect(names[999]).toBe(`s_${stmt.key}_p1`);
      expect(names[1_000]).toBe(`s_${stmt.key}_p2`);
    }
  });

  it("writes sent together as one statement (deferred.ts) go under a new name too: a plan made on empty tables chose jobs_lease over jobs' primary key", async () => {
    const sent: { name?: string; text: string }[] = [];
    const client = { query: async (q: { name?: string; text: string }) => (sent.push(q), { rows: [], rowCount: 1, fields: [] }) };
    const writes = new DeferredWrites(client as never, pgStatements(POSTGRES));
    for (let i = 0; i < 101; i++) {
      await writes.call({ name: 'addNote', method: 'write', args: [`j${i}`, 'info', 'm', i] });
      await writes.call({ name: 'insertKey', method: 'write', args: [`j${i}`, 'e', 1] });
      await writes.flush();
    }
    const combinedNames = sent.filter((q) => q.text.startsWith('WITH spool_w1')).map((q) => q.name!);
    expect(combinedNames).toHaveLength(101);
    expect(combinedNames[99]).toMatch(/^c_\d+$/);
    expect(combinedNames[100]).toBe(`${combinedNames[0]}_p1`);
  });
});
