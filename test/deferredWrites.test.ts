/**
 * The Postgres store's deferred writes (persistence/drivers/pg/deferred.ts), on a client that records
 * what it is sent: a result-less write goes with the next statement as a CTE part only where
 * neither writes what the other names, two writes of one table never share a statement, and what
 * waits is sent when the program ends. (The store suites run every program through it on a real
 * server: test/store.*.contract.test.ts in the postgres project.)
 */
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { DeferredWrites, firstFailure, type Ahead } from '../persistence/drivers/pg/deferred.ts';
import type { StatementName } from '../persistence/sql/statements.ts';
import type { PgStatement } from '../persistence/drivers/pg/sql.ts';
import { THEN_COLUMN } from '../persistence/drivers/pg/pairs.ts';

const statements = {
  endAttempt: { key: 'endAttempt', text: 'UPDATE effect_attempts SET outcome = $1 WHERE effect_id = $2', names: null },
  updateJob: { key: 'updateJob', text: 'UPDATE jobs SET revision = revision + 1 WHERE id = $1 RETURNING lease_fence', names: null },
  insertTransition: { key: 'insertTransition', text: 'INSERT INTO transitions (job_id, revision) VALUES ($1, $2)', names: null },
  cancelAllTimers: { key: 'cancelAllTimers', text: "UPDATE timers SET status = 'cancelled' WHERE job_id = $1", names: null },
  cancelScheduledTimers: { key: 'cancelScheduledTimers', text: "UPDATE timers SET status = 'cancelled' WHERE job_id = $1 AND status = 'scheduled'", names: null },
  effectLeaseState: { key: 'effectLeaseState', text: 'SELECT 1 AS held FROM effect_attempts WHERE effect_id = $1', names: null },
  settle: { key: 'settle', text: 'UPDATE effects SET outcome = $1 WHERE id = $2 AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id) RETURNING outcome', names: null },
  insertEffect: { key: 'insertEffect', text: 'INSERT INTO effects (id, job_id) VALUES ($1, $2::text)', names: null },
  endEffect: { key: 'endEffect', text: 'UPDATE effects SET outcome = $1 WHERE id = $2::text AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id) RETURNING outcome', names: null },
  endEffects: { key: 'endEffects', text: 'UPDATE effects SET outcome = $1 WHERE id = $2 OR job_id = $2 RETURNING outcome', names: null },
  claimDue: { key: 'claimDue', text: 'WITH cand AS (SELECT id FROM effects WHERE status = $1) SELECT * FROM cand', names: null },
} satisfies Record<string, PgStatement>;

function recording() {
  const sent: { text: string; values: unknown[] }[] = [];
  const client = {
    query: async (q: { text: string; values: unknown[] }) => {
      sent.push({ text: q.text, values: q.values });
      return { rowCount: 1, rows: [{ lease_fence: 7 }] };
    },
  } as unknown as pg.PoolClient;
  const writes = new DeferredWrites(client, statements as unknown as Record<StatementName, PgStatement>);
  const call = (name: keyof typeof statements, method: 'run' | 'get' | 'write', ...args: unknown[]) => writes.call({ name: name as StatementName, method, args });
  return { sent, writes, call };
}

describe('deferred writes on Postgres', () => {
  it('go with the next statement that is read, as CTE parts, their parameters renumbered after each other', async () => {
    const { sent, call, writes } = recording();
    expect(await call('endAttempt', 'write', 'succeeded', 'e1')).toBeUndefined();
    expect(sent).toEqual([]); // waiting
    expect(await call('updateJob', 'get', 'j1')).toEqual({ lease_fence: 7 });
    expect(sent).toEqual([
      {
        text: 'WITH spool_w1 AS (UPDATE effect_attempts SET outcome = $1 WHERE effect_id = $2) UPDATE jobs SET revision = revision + 1 WHERE id = $3 RETURNING lease_fence',
        values: ['succeeded', 'e1', 'j1'],
      },
    ]);
    await call('insertTransition', 'write', 'j1', 2);
    await call('cancelAllTimers', 'write', 'j1');
    await writes.flush();
    expect(sent[1]).toEqual({
      text: "WITH spool_w1 AS (INSERT INTO transitions (job_id, revision) VALUES ($1, $2)) UPDATE timers SET status = 'cancelled' WHERE job_id = $3",
      values: ['j1', 2, 'j1'],
    });
    await writes.flush();
    expect(sent).toHaveLength(2); // nothing left to send
  });

  it('a read of a table a waiting write changes goes after it, on its own; so does a second write of one table', async () => {
    const { sent, call, writes } = recording();
    await call('endAttempt', 'write', 'stale', 'e1');
    await call('effectLeaseState', 'get', 'e1'); // names effect_attempts: the write is sent first
    expect(sent.map((s) => s.text)).toEqual([statements.endAttempt.text, statements.effectLeaseState.text]);
    await call('cancelAllTimers', 'write', 'j1');
    await call('cancelScheduledTimers', 'write', 'j1'); // the same table: never one statement
    await writes.flush();
    expect(sent.slice(2).map((s) => s.text)).toEqual([statements.cancelAllTimers.text, statements.cancelScheduledTimers.text]);
  });

  it('a statement with a WITH of its own takes the parts before its own CTEs', async () => {
    const { sent, call } = recording();
    await call('insertTransition', 'write', 'j1', 2);
    await call('claimDue', 'get', 'pending');
    expect(sent).toEqual([
      {
        text: 'WITH spool_w1 AS (INSERT INTO transitions (job_id, revision) VALUES ($1, $2)), cand AS (SELECT id FROM effects WHERE status = $3) SELECT * FROM cand',
        values: ['j1', 2, 'pending'],
      },
    ]);
  });

  it("a getThen of two writes is one statement: the second's WHERE also asks for the first's row, and each row is its own", async () => {
    const sent: { text: string; values: unknown[]; rowMode?: string }[] = [];
    let answer: { fields: { name: string }[]; rows: unknown[][] } = { fields: [], rows: [] };
    const client = {
      query: async (q: { text: string; values: unknown[]; rowMode?: string }) => (sent.push(q), { rowCount: answer.rows.length, ...answer }),
    } as unknown as pg.PoolClient;
    const writes = new DeferredWrites(client, statements as unknown as Record<StatementName, PgStatement>);
    const pair = (first: keyof typeof statements, second: keyof typeof statements) =>
      writes.call({ name: first as StatementName, method: 'getThen', args: ['succeeded', 'e1'], then: { name: second as StatementName, args: ['j1'] } });
    const fields = [{ name: 'outcome' }, { name: THEN_COLUMN }, { name: 'lease_fence' }];
    answer = { fields, rows: [['succeeded', 1, 7]] };
    expect(await pair('settle', 'updateJob')).toEqual([{ outcome: 'succeeded' }, { lease_fence: 7 }]);
    expect(sent).toEqual([
      {
        text: `WITH spool_a AS (${statements.settle.text}), spool_b AS (UPDATE jobs SET revision = revision + 1 WHERE (id = $3) AND EXISTS (SELECT 1 FROM spool_a)
      RETURNING lease_fence)
      SELECT spool_a.*, b.* FROM spool_a LEFT JOIN (SELECT 1 AS ${THEN_COLUMN}, * FROM spool_b) AS b ON true`,
        values: ['succeeded', 'e1', 'j1'],
        rowMode: 'array',
        name: 's_settle>updateJob',
      },
    ]);
    answer = { fields, rows: [['succeeded', null, null]] }; // the second changed no row
    expect(await pair('settle', 'updateJob')).toEqual([{ outcome: 'succeeded' }, undefined]);
    answer = { fields, rows: [] }; // the first found none
    expect(await pair('settle', 'updateJob')).toEqual([undefined, undefined]);
    // A second that names what the first writes would not see its write: two statements, in turn.
    sent.length = 0;
    answer = { fields: [{ name: 'lease_fence' }], rows: [] };
    expect(await pair('updateJob', 'settle')).toEqual([undefined, undefined]);
    expect(sent.map((q) => q.text)).toEqual([statements.updateJob.text]);
  });

  it('what waits goes as one text with its values as literals, to go with COMMIT; a value that is no scalar leaves it to a statement of its own', async () => {
    const { sent, call, writes } = recording();
    await call('insertTransition', 'write', "j'1\\", null);
    await call('cancelAllTimers', 'write', 7);
    expect(writes.inlined()).toBe(
      "WITH spool_w1 AS (INSERT INTO transitions (job_id, revision) VALUES (E'j''1\\\\', NULL)) UPDATE timers SET status = 'cancelled' WHERE job_id = '7'",
    );
    expect(writes.waiting).toBe(false);
    await call('insertTransition', 'write', 'j1', { not: 'a scalar' });
    expect(writes.inlined()).toBeUndefined();
    expect(writes.waiting).toBe(true);
    await writes.flush();
    expect(sent).toHaveLength(1);
  });

  it('a one-row INSERT waits in front of an UPDATE of another row of its table; not of its own row, of rows a WHERE may reach otherwise, nor of another INSERT', async () => {
    const { sent, call, writes } = recording();
    await call('insertTransition', 'write', 'j1', 2);
    await call('insertEffect', 'write', 'e2', 'j1');
    expect(await call('endEffect', 'get', 'succeeded', 'e1')).toEqual({ lease_fence: 7 }); // the row of e1 only
    expect(sent).toEqual([
      {
        text: 'WITH spool_w1 AS (INSERT INTO transitions (job_id, revision) VALUES ($1, $2)), spool_w2 AS (INSERT INTO effects (id, job_id) VALUES ($3, $4::text)) UPDATE effects SET outcome = $5 WHERE id = $6::text AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = effects.job_id) RETURNING outcome',
        values: ['j1', 2, 'e2', 'j1', 'succeeded', 'e1'],
      },
    ]);
    // The update of the row the INSERT writes would not see it; nor would one whose WHERE may reach other rows.
    for (const [name, args] of [
      ['endEffect', ['succeeded', 'e2']],
      ['endEffects', ['succeeded', 'j1']],
    ] as const) {
      sent.length = 0;
      await call('insertEffect', 'write', 'e2', 'j1');
      await call(name, 'get', ...args);
      expect(sent.map((q) => q.text)).toEqual([statements.insertEffect.text, statements[name].text]);
    }
    // Two INSERTs of one table: in turn, so their rows take sequence values in that order.
    sent.length = 0;
    await call('insertEffect', 'write', 'e4', 'j1');
    await call('insertEffect', 'write', 'e5', 'j1');
    await writes.flush();
    expect(sent.map((q) => q.text)).toEqual([statements.insertEffect.text, statements.insertEffect.text]);
  });

  it('a getThen the program expects goes ahead, in the form that fails unless it answers that, unanswered: the program goes on with what it expected, and a failure is read at the end', async () => {
    const sent: { text: string; values: unknown[] }[] = [];
    const answers: { resolve: (v: unknown) => void; reject: (e: unknown) => void }[] = [];
    const client = {
      query: (q: { text: string; values: unknown[] }) => {
        sent.push(q);
        return new Promise((resolve, reject) => answers.push({ resolve, reject }));
      },
    } as unknown as pg.PoolClient;
    const ahead: Ahead = { sent: [], expected: 0 };
    const writes = new DeferredWrites(client, statements as unknown as Record<StatementName, PgStatement>, ahead);
    const expected = { rows: [{ outcome: 'succeeded' }, { lease_fence: 7, timers: 1 }] as [Record<string, unknown>, Record<string, unknown>], unchecked: ['timers'] };
    const answered = await writes.call({ name: 'settle' as StatementName, method: 'getThen', args: ['succeeded', 'e1'], then: { name: 'updateJob' as StatementName, args: ['j1'] }, expect: expected });
    // Answered with what was expected before the server said anything.
    expect(answered).toEqual(expected.rows);
    expect(answers).toHaveLength(1);
    expect(sent).toEqual([
      {
        text: `WITH spool_a AS (${statements.settle.text}), spool_b AS (UPDATE jobs SET revision = revision + 1 WHERE (id = $3) AND EXISTS (SELECT 1 FROM spool_a)
      RETURNING lease_fence)
      SELECT spool_expect(EXISTS (SELECT 1 FROM spool_a WHERE outcome IS NOT DISTINCT FROM $4) AND EXISTS (SELECT 1 FROM spool_b WHERE lease_fence IS NOT DISTINCT FROM $5)) AS spool_expected`,
        values: ['succeeded', 'e1', 'j1', 'succeeded', 7],
        name: 's_expected1',
      },
    ]);
    expect(ahead.expected).toBe(1);
    // What the program writes next waits, as any write, for COMMIT's simple query.
    await writes.call({ name: 'insertTransition' as StatementName, method: 'write', args: ['j1', 3] });
    expect(sent).toHaveLength(1);
    expect(writes.inlined()).toBe("INSERT INTO transitions (job_id, revision) VALUES ('j1', '3')");
    // The pair's refusal is what the transaction reads when it ends.
    answers[0]!.reject(Object.assign(new Error('not as expected'), { code: 'SPX01' }));
    expect(await firstFailure(ahead)).toMatchObject({ code: 'SPX01' });
  });

  it('without somewhere to send ahead, or with writes waiting that may not join it, a pair expected is still awaited', async () => {
    const sent: string[] = [];
    const client = { query: async (q: { text: string }) => (sent.push(q.text), { rowCount: 0, rows: [], fields: [] }) } as unknown as pg.PoolClient;
    const expect_ = { rows: [{ outcome: 'succeeded' }, { lease_fence: 7 }] as [Record<string, unknown>, Record<string, unknown>] };
    const pair = (writes: DeferredWrites) =>
      writes.call({ name: 'settle' as StatementName, method: 'getThen', args: ['succeeded', 'e1'], then: { name: 'updateJob' as StatementName, args: ['j1'] }, expect: expect_ });
    expect(await pair(new DeferredWrites(client, statements as unknown as Record<StatementName, PgStatement>))).toEqual([undefined, undefined]);
    expect(sent).toEqual([expect.stringMatching(/SELECT spool_a\.\*, b\.\* FROM spool_a/)]); // the pair as it is, answered
    const ahead: Ahead = { sent: [], expected: 0 };
    const writes = new DeferredWrites(client, statements as unknown as Record<StatementName, PgStatement>, ahead);
    await writes.call({ name: 'insertEffect' as StatementName, method: 'write', args: ['e1', 'j1'] }); // the pair updates that row: may not join it
    sent.length = 0;
    expect(await pair(writes)).toEqual([undefined, undefined]);
    expect(sent).toEqual([statements.insertEffect.text, expect.stringMatching(/^WITH spool_a AS /)]);
    expect(ahead.expected).toBe(0);
  });
});
