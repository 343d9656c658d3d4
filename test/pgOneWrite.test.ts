/**
 * The Postgres store's connections send what one turn of the event loop queries in one write
 * (persistence/drivers/pg/oneWrite.ts): the socket is corked at the turn's first query and
 * uncorked once the turn's promise jobs ran, and each query still goes through the client's own
 * `query` (the one looked up at the call: a wrapper installed later still runs).
 */
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { oneWritePerTurn } from '../persistence/drivers/pg/oneWrite.ts';

class FakeClient {
  readonly log: string[] = [];
  readonly connection = {
    stream: {
      corks: 0,
      cork: () => {
        this.connection.stream.corks += 1;
        this.log.push('cork');
      },
      uncork: () => {
        this.connection.stream.corks -= 1;
        this.log.push('uncork');
      },
    },
  };
  query(text: string): Promise<string> {
    this.log.push(`query ${text}${this.connection.stream.corks > 0 ? ' (corked)' : ''}`);
    return Promise.resolve(text);
  }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('one write per turn on a Postgres connection', () => {
  it('corks at the turn’s first query, keeps every query of the turn (promise jobs included) corked, and uncorks after them', async () => {
    const client = new FakeClient();
    oneWritePerTurn(client as unknown as pg.Client);
    const c = client as unknown as { query: (t: string) => Promise<string> };
    const first = c.query('BEGIN');
    // Queries made from promise jobs of the same turn, as a program's do once its answer is taken as expected.
    const later = first.then(() => c.query('UPDATE')).then(() => c.query('COMMIT'));
    expect(await later).toBe('COMMIT');
    await nextTurn();
    expect(client.log).toEqual(['cork', 'query BEGIN (corked)', 'query UPDATE (corked)', 'query COMMIT (corked)', 'uncork']);
    // The next turn corks again.
    client.log.length = 0;
    await c.query('SELECT 1');
    await nextTurn();
    expect(client.log).toEqual(['cork', 'query SELECT 1 (corked)', 'uncork']);
  });

  it('runs the class’s query as it is at each call', async () => {
    const client = new FakeClient();
    oneWritePerTurn(client as unknown as pg.Client);
    const original = FakeClient.prototype.query;
    let wrapped = 0;
    FakeClient.prototype.query = function (this: FakeClient, text: string) {
      wrapped += 1;
      return original.call(this, text);
    };
    try {
      await (client as unknown as { query: (t: string) => Promise<string> }).query('SELECT 1');
      expect(wrapped).toBe(1);
    } finally {
      FakeClient.prototype.query = original;
    }
    await nextTurn();
  });
});
