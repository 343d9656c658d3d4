/**
 * Postgres's own raw limit, measured in the same run as Spool on Postgres: node-postgres directly,
 * no Spool, the same minimal writes per transition as the SQLite limits (bench/rawRun.ts,
 * bench/rawBatch.ts): a versioned `UPDATE jobs … WHERE id = $ AND revision = $` of the job's
 * snapshot plus one transition-log `INSERT`. `batch` = 1: one transaction per transition, each
 * statement its own round trip (BEGIN, UPDATE, INSERT, COMMIT); `batch` > 1: that many transitions in
 * one transaction sent as one multi-statement text (one round trip). `clients` connections run
 * at once, each on its own jobs (Postgres groups WAL flushes across clients).
 */
import pg from 'pg';
import { performance } from 'node:perf_hooks';
import { freshBenchDb } from './benchDb.ts';

/** What one raw run measured. */
export interface PgRawResult {
  /** Transitions (one UPDATE + one INSERT each) per second, over every client. */
  perSec: number;
  ops: number;
  seconds: number;
  /** This process's CPU (user + system) per transition: the client side. */
  cpuUsPerOp: number;
  /** The server's CPU per transition (null: the server is not on this host), bench/benchDb.ts's meter. */
  serverCpuUsPerOp: number | null;
  /** WAL bytes per transition. */
  walBytesPerOp: number | null;
  batch: number;
  clients: number;
}

const SCHEMA = `
  CREATE TABLE jobs (id TEXT PRIMARY KEY, revision BIGINT NOT NULL, snapshot TEXT NOT NULL, updated_at BIGINT NOT NULL);
  CREATE TABLE transitions (job_id TEXT NOT NULL, revision BIGINT NOT NULL, event_type TEXT NOT NULL, payload TEXT NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (job_id, revision));`;

/**
 * Run the raw limit for `durationMs` (or until `totalOps` transitions, whichever is given) on a
 * fresh database: `clients` connections, each owning `jobsPerClient` jobs handed out round-robin.
 */
export async function runPgRaw(options: { batch: number; clients?: number; durationMs?: number; totalOps?: number; snapshot: (i: number) => string; jobsPerClient?: number }): Promise<PgRawResult> {
  const clients = options.clients ?? 1;
  const db = await freshBenchDb('postgres', 'raw');
  const conns: pg.Client[] = [];
  try {
    for (let c = 0; c < clients; c += 1) {
      const conn = new pg.Client({ connectionString: db.target });
      await conn.connect();
      conns.push(conn);
    }
    await conns[0]!.query(SCHEMA);
    const perClient = options.jobsPerClient ?? Math.max(options.batch, 1);
    const ids = conns.map((_, c) => Array.from({ length: perClient }, (_, j) => `raw-${c}-${j}`));
    await conns[0]!.query(`INSERT INTO jobs SELECT id, 1, $1, $2 FROM unnest($3::text[]) AS id`, [options.snapshot(0), Date.now(), ids.flat()]);
    let ops = 0;
    const meter = await db.meter();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const deadline = options.durationMs === undefined ? Infinity : t0 + options.durationMs;
    const budget = options.totalOps ?? Infinity;
    await Promise.all(conns.map((conn, c) => clientLoop(conn, ids[c]!, options, () => performance.now() < deadline && ops < budget, (n) => (ops += n))));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const server = await meter.stop();
    return {
      perSec: ops / seconds,
      ops,
      seconds,
      cpuUsPerOp: (cpu.user + cpu.system) / ops,
      serverCpuUsPerOp: server.serverCpuUs === null ? null : server.serverCpuUs / ops,
      walBytesPerOp: server.walBytes === null ? null : server.walBytes / ops,
      batch: options.batch,
      clients,
    };
  } finally {
    await Promise.all(conns.map((c) => c.end().catch(() => {})));
    await db.dispose();
  }
}

async function clientLoop(conn: pg.Client, ids: string[], options: { batch: number; snapshot: (i: number) => string }, more: () => boolean, done: (n: number) => void): Promise<void> {
  const revisions = new Array<number>(ids.length).fill(1);
  let next = 0;
  let i = 0;
  while (more()) {
    const at = Date.now();
    if (options.batch === 1) {
      const j = next;
      next = (next + 1) % ids.length;
      const rev = revisions[j]!;
      await conn.query('BEGIN');
      const r = await conn.query('UPDATE jobs SET revision = revision + 1, snapshot = $1, updated_at = $2 WHERE id = $3 AND revision = $4', [options.snapshot(i), at, ids[j], rev]);
      if (r.rowCount !== 1) throw new Error(`pg raw: revision conflict on ${ids[j]}`);
      await conn.query('INSERT INTO transitions VALUES ($1, $2, $3, $4, $5)', [ids[j], rev + 1, 'PROGRESS', `{"type":"PROGRESS","percent":${i % 101}}`, at]);
      await conn.query('COMMIT');
      revisions[j] = rev + 1;
      i += 1;
      done(1);
      continue;
    }
    const parts: string[] = ['BEGIN;'];
    for (let k = 0; k < options.batch; k += 1) {
      const j = next;
      next = (next + 1) % ids.length;
      const rev = revisions[j]!;
      const id = conn.escapeLiteral(ids[j]!);
      parts.push(`UPDATE jobs SET revision = revision + 1, snapshot = ${conn.escapeLiteral(options.snapshot(i))}, updated_at = ${at} WHERE id = ${id} AND revision = ${rev};`);
      parts.push(`INSERT INTO transitions VALUES (${id}, ${rev + 1}, 'PROGRESS', '{"type":"PROGRESS","percent":${i % 101}}', ${at});`);
      revisions[j] = rev + 1;
      i += 1;
    }
    parts.push('COMMIT;');
    const results = (await conn.query(parts.join('\n'))) as unknown as pg.QueryResult[];
    for (let k = 1; k < results.length - 1; k += 2) if (results[k]!.rowCount !== 1) throw new Error('pg raw: revision conflict in a batch');
    done(options.batch);
  }
}
