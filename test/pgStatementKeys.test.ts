/**
 * The Postgres driver caches what it builds from statements across a process by their keys (the
 * prepared names, deferred.ts's combined texts, pairs.ts's pairs). Two stores with different lease
 * clocks in one process must never get each other's text from those caches.
 */
import { describe, expect, it } from 'vitest';
import { POSTGRES, POSTGRES_CALLER_LEASES } from '../persistence/sql/predicates.ts';
import { pgStatements, prepared } from '../persistence/drivers/pg/sql.ts';
import { pairOf } from '../persistence/drivers/pg/pairs.ts';

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
  it('a read goes under a new name after 100 and 1,000 runs (each connection plans it again, from the tables as they are then); a write keeps its name', () => {
    const stmt = pgStatements(POSTGRES).leaseHolders;
    const names = Array.from({ length: 1_001 }, () => prepared(stmt, [], true).name);
    expect(names[0]).toBe(`s_${stmt.key}`);
    expect(names[99]).toBe(`s_${stmt.key}`);
    expect(names[100]).toBe(`s_${stmt.key}_p1`);
    expect(names[999]).toBe(`s_${stmt.key}_p1`);
    expect(names[1_000]).toBe(`s_${stmt.key}_p2`);
    const write = pgStatements(POSTGRES).freeLease;
    for (let i = 0; i < 200; i++) expect(prepared(write, []).name).toBe(`s_${write.key}`);
  });
});
