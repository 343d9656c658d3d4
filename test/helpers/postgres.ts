/**
 * A PostgreSQL server for tests. `SPOOL_TEST_PG_URL` (set by `.ci/run`, or by the vitest
 * globalSetup `test/helpers/postgresSetup.ts`) names a server the run may create databases on;
 * without it, {@link startPostgres} makes a throwaway cluster: `initdb` on a temp directory as the
 * `postgres` user (initdb refuses root), the server on 127.0.0.1 only, on a free port, stopped by
 * its data directory (`pg_ctl stop`) at the end. Each test gets its own database ({@link freshDatabase}).
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scratchDatabase } from '../../persistence/drivers/pg/scratch.ts';

/** Where Debian's `postgresql` package puts the server binaries. */
export const PG_BIN = process.env['SPOOL_PG_BIN'] ?? '/usr/lib/postgresql/15/bin';

/** A running throwaway server. */
export interface TestPostgres {
  /** `postgres://spool@127.0.0.1:<port>/postgres` */
  url: string;
  /** Stop it (by its data directory) and delete its files. */
  stop(): void;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** Run a server binary as the `postgres` user when this process is root (initdb refuses root). */
function asPostgres(bin: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const [cmd, argv] = root ? ['runuser', ['-u', 'postgres', '--', join(PG_BIN, bin), ...args]] : [join(PG_BIN, bin), args];
  execFileSync(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Make a throwaway cluster and start it on 127.0.0.1 (see the file's comment). */
export async function startPostgres(): Promise<TestPostgres> {
  if (!existsSync(join(PG_BIN, 'initdb'))) throw new Error(`PostgreSQL server binaries are missing in ${PG_BIN}: apt-get install -y postgresql (or set SPOOL_TEST_PG_URL)`);
  const dir = mkdtempSync(join(tmpdir(), 'spool-pg-'));
  const data = join(dir, 'data');
  const root = process.getuid?.() === 0;
  if (root) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  asPostgres('initdb', ['-D', data, '-U', 'spool', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  // Tests need no durability across a power cut; many databases are made and dropped.
  writeFileSync(join(data, 'postgresql.auto.conf'), 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 300\n');
  const port = await freePort();
  asPostgres('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-o', `-c listen_addresses=127.0.0.1 -p ${port} -k ${dir}`, 'start']);
  let stopped = false;
  return {
    url: `postgres://spool@127.0.0.1:${port}/postgres`,
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The server this test run uses: `SPOOL_TEST_PG_URL`. */
export function testPostgresUrl(): string {
  const url = process.env['SPOOL_TEST_PG_URL'];
  if (!url) throw new Error('SPOOL_TEST_PG_URL is not set: run the tests through vitest (its globalSetup starts a server) or .ci/run');
  return url;
}

/**
 * A new, empty database on the test server, and its URL: each test (or each store a test opens)
 * gets its own, so tests never see each other's rows. `drop()` removes it.
 */
export async function freshDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  return scratchDatabase(testPostgresUrl(), `t_${process.pid}`);
}
