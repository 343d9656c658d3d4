/**
 * Remote activity workers as separate processes against a real `spool serve` (the bin): a worker
 * SIGKILLed mid-activity loses its claim once it expires and another worker finishes the job,
 * while the killed attempt's completion, replayed with its token, is refused; a worker SIGSTOPped
 * past its claim, woken once another finished the job, lands nothing; 1,000 activities through
 * four worker processes are each claimed by one and applied once; a completion held
 * by a worker while the server restarts is resent and applied once; the Python example worker
 * (standard library only) runs a job to its end. The tests wait on the processes' output lines
 * and on the job's stream, never on the wall clock.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer as netServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../src/client/index.ts';
import { remoteOne } from './fixtures/remoteMachines.ts';
import { Resources } from './helpers/resources.ts';
import { spawnSpool } from './helpers/spoolCli.ts';

const MODULE = fileURLToPath(new URL('./fixtures/remoteMachines.ts', import.meta.url));
const PYTHON_WORKER = fileURLToPath(new URL('../examples/python-worker/worker.py', import.meta.url));
const TOKEN = 'admin-token-0123456789abcdef';
const WORKER = 'worker-token-0123456789abcdef';

const res = new Resources();
const children: { kill: (signal?: NodeJS.Signals) => boolean; exitCode: number | null; signalCode: string | null }[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await res.dispose();
});

type Proc = ReturnType<typeof spawnSpool>;

/** The first JSON line of `proc` that `match` accepts (waiting for it). */
async function line(proc: Pick<Proc, 'until'>, match: (l: Record<string, any>) => boolean): Promise<Record<string, any>> {
  let found: Record<string, any> | undefined;
  await proc.until({
    test: (text: string) => {
      for (const l of text.split('\n')) {
        if (!l.startsWith('{')) continue;
        const parsed = JSON.parse(l) as Record<string, any>;
        if (match(parsed)) return (found = parsed), true;
      }
      return false;
    },
  } as RegExp);
  return found!;
}

async function serve(db: string, args: string[] = [], port = '0'): Promise<{ proc: Proc; url: string }> {
  const proc = spawnSpool(['--db', db, '--machines', MODULE, 'serve', '--port', port, '--token', TOKEN, '--worker-token', WORKER, '--json', ...args], res.tempDir());
  children.push(proc.child);
  const ready = await line(proc, (l) => l['type'] === 'serve.ready');
  return { proc, url: ready['url'] as string };
}

async function worker(url: string, concurrency = 1): Promise<Proc> {
  const proc = spawnSpool(['--machines', MODULE, 'worker', '--server', url, '--token', WORKER, '--concurrency', String(concurrency), '--grace-ms', '2000', '--json'], res.tempDir());
  children.push(proc.child);
  await line(proc, (l) => l['type'] === 'worker.ready');
  return proc;
}

/** The JSON lines `proc` printed so far. */
function lines(proc: Proc): Record<string, any>[] {
  return proc.output().stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>);
}

/** Once `procs` printed `n` lines of `type` between them (read as they come; refused if one exits first). */
function countLines(procs: Proc[], type: string, n: number): Promise<void> {
  const read = procs.map(() => 0);
  let count = 0;
  return new Promise((resolve, reject) => {
    const check = (): boolean => {
      procs.forEach((p, i) => {
        const out = p.output().stdout;
        const end = out.lastIndexOf('\n') + 1;
        for (const l of out.slice(read[i], end).split('\n')) if (l.startsWith('{') && (JSON.parse(l) as { type?: string }).type === type) count += 1;
        read[i] = Math.max(read[i]!, end);
      });
      if (count >= n) return resolve(), true;
      const gone = procs.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
      if (gone) return reject(new Error(`a worker exited before ${n} ${type} lines: ${gone.output().stderr}`)), true;
      return false;
    };
    if (check()) return;
    const onData = () => check() && procs.forEach((p) => (p.child.stdout.off('data', onData), p.child.off('close', onData)));
    for (const p of procs) {
      p.child.stdout.on('data', onData);
      p.child.on('close', onData);
    }
  });
}

/** SIGTERM each process in turn; each exits 0. */
async function stopAll(...procs: Proc[]): Promise<void> {
  for (const p of procs) {
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }
}

/** What the server shows of a job: the job, its history, attempts and assets. */
async function shown(url: string, jobId: string): Promise<Record<string, unknown>> {
  const read = (part: string) => fetch(`${url}/api/jobs/${jobId}${part}`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json() as Promise<unknown>);
  return { job: await read(''), history: await read('/history'), attempts: await read('/attempts'), assets: await read('/assets') };
}

async function freePort(): Promise<string> {
  const server = netServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return String(port);
}

async function complete(url: string, token: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${url}/api/workers/complete`, { method: 'POST', headers: { authorization: `Bearer ${WORKER}` }, body: JSON.stringify({ token, output: { late: true } }) });
  return { status: response.status, body: await response.json() };
}

describe('remote workers, as processes', () => {
  it('SIGKILL mid-activity: the claim expires, another worker finishes the job, and the killed attempt\'s late completion is refused', async () => {
    const { proc: server, url } = await serve(res.dbPath(), ['--claim-ms', '3000']);
    const client = createClient({ url, token: TOKEN });
    const first = await worker(url);
    await client.start('remote-order', { amount: 7, hang: true }, { jobId: 'k1' });
    const started = await line(first, (l) => l['type'] === 'activity.started' && l['activity'] === 'charge');
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await worker(url);
    const done = await client.waitFor('k1', (j) => j.final, { timeoutMs: 90_000 });
    expect(done).toMatchObject({ value: 'done', context: { charged: { charged: 7, pid: second.child.pid } } });
    expect((done.context as { charged: { attempt: number } }).charged.attempt).toBeGreaterThanOrEqual(2);

    const late = await complete(url, started['token'] as string);
    expect(late).toMatchObject({ status: 409, body: { error: { code: 'SPOOL_STALE_ATTEMPT' } } });
    const history = await fetch(`${url}/api/jobs/k1/history`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json() as Promise<any>);
    expect(history.history.filter((h: { eventType: string }) => h.eventType === 'xstate.done.actor.charge')).toHaveLength(1);

    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    await line(second, (l) => l['type'] === 'worker.stopped');
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 180_000);

  it('SIGSTOP a worker past its claim, let another finish, then SIGCONT: nothing of the first worker lands', async () => {
    // The shortest claim: the stopped worker's expires by the server's clock within a second.
    const { proc: server, url } = await serve(res.dbPath(), ['--claim-ms', '1000']);
    const client = createClient({ url, token: TOKEN });
    const gate = join(res.tempDir(), 'gate');
    const first = await worker(url);
    await client.start('remote-order', { amount: 8, gate }, { jobId: 's1' });
    const started = await line(first, (l) => l['type'] === 'activity.started' && l['activity'] === 'charge');
    // Stopped in its attempt (the gate is shut), its claim live.
    first.child.kill('SIGSTOP');

    // The next worker's claim takes the activity over once the stopped one's claim expired.
    const second = await worker(url);
    const retaken = await line(second, (l) => l['type'] === 'activity.started' && l['activity'] === 'charge');
    expect(retaken).toMatchObject({ jobId: 's1', attempt: 2 });

    // Woken while the second worker's attempt still runs (its gate shut), the first ends its own
    // attempt (its gate opened): the server refuses whatever it sends, though the job has not moved on.
    first.child.kill('SIGCONT');
    writeFileSync(`${gate}.1`, 'open');
    const refused = await line(first, (l) => l['type'] === 'activity.refused');
    expect(refused).toMatchObject({ jobId: 's1', activity: 'charge', attempt: 1, code: 'SPOOL_STALE_ATTEMPT' });
    // Its token, sent again as a completion, is refused too, the second worker's attempt still running.
    expect(await complete(url, started['token'] as string)).toMatchObject({ status: 409, body: { error: { code: 'SPOOL_STALE_ATTEMPT' } } });
    const meanwhile = await shown(url, 's1');
    expect(meanwhile['job']).toMatchObject({ job: { value: 'charging' } });
    expect((meanwhile['attempts'] as { attempts: { attempt: number; outcome: string }[] }).attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'interrupted'],
      [2, 'running'],
    ]);

    // The second worker finishes: the job is its, and nothing of the first landed.
    writeFileSync(`${gate}.2`, 'open');
    const done = await client.waitFor('s1', (j) => j.final, { timeoutMs: 90_000 });
    expect(done).toMatchObject({ value: 'done', context: { charged: { charged: 8, attempt: 2, pid: second.child.pid } } });
    // (Free again, the first worker may have run the next activity, ship: a claim of its own.)
    expect(lines(first).filter((l) => l['type'] === 'activity.finished' && l['activity'] === 'charge')).toEqual([]);
    const before = await shown(url, 's1');
    expect(await complete(url, started['token'] as string)).toMatchObject({ status: 409, body: { error: { code: 'SPOOL_STALE_ATTEMPT' } } });
    expect(await shown(url, 's1')).toEqual(before);
    const history = (before['history'] as { history: { eventType: string }[] }).history;
    expect(history.filter((h) => h.eventType === 'xstate.done.actor.charge')).toHaveLength(1);

    await stopAll(first, second, server);
  }, 180_000);

  it('1,000 activities through 4 spool worker processes: each claimed by one worker and applied once', async () => {
    const db = res.dbPath();
    const N = 1000;
    const { proc: server, url } = await serve(db);
    const workers = await Promise.all(Array.from({ length: 4 }, () => worker(url, 8)));
    // Started in batches by a runtime of this process on the same database: the server sees its commits.
    const starter = await res.runtime({ store: await res.sqlite(db), machines: [remoteOne], processEvents: false, runEffects: false, recover: false });
    const finished = countLines(workers, 'activity.finished', N);
    const items = Array.from({ length: N }, (_, n) => ({ input: { n }, jobId: `b${n}` }));
    for (let i = 0; i < N; i += 250) await starter.startMany('remote-one', items.slice(i, i + 250));
    await finished;

    // Each job's activity started once and finished once, in one worker, accepted the first time.
    const all = workers.flatMap(lines);
    const ends = all.filter((l) => l['type'] === 'activity.finished');
    expect(ends).toHaveLength(N);
    expect(new Set(ends.map((l) => l['jobId'])).size).toBe(N);
    expect(ends.every((l) => l['outcome'] === 'succeeded' && l['duplicate'] === false && l['attempt'] === 1)).toBe(true);
    expect(all.filter((l) => l['type'] === 'activity.started')).toHaveLength(N);
    expect(all.filter((l) => l['type'] === 'activity.refused')).toEqual([]);
    // Every worker took part.
    for (const w of workers) expect(lines(w).some((l) => l['type'] === 'activity.finished')).toBe(true);

    // In the database: every job done with its own output, one attempt, its outcome applied once.
    const pids = new Set(workers.map((w) => w.child.pid));
    for (const { jobId, input } of items) {
      const d = await starter.details(jobId);
      expect(d.job).toMatchObject({ status: 'done', value: 'done', context: { stamped: { n: input.n } } });
      expect(pids.has((d.job.context as { stamped: { pid: number } }).stamped.pid)).toBe(true);
      expect(d.attempts.map((a) => [a.attempt, a.outcome])).toEqual([[1, 'succeeded']]);
      expect(d.history.filter((h) => h.eventType === 'xstate.done.actor.0.remote-one.stamping')).toHaveLength(1);
    }

    await stopAll(...workers, server);
  }, 180_000);

  it('a completion held while spool serve restarts is resent once it is back, and applied once', async () => {
    const db = res.dbPath();
    const port = await freePort();
    const gate = join(res.tempDir(), 'gate');
    // A claim that outlasts any restart on a loaded host: the held completion is still the attempt's.
    const claim = ['--claim-ms', '120000'];
    let { proc: server, url } = await serve(db, claim, port);
    const client = createClient({ url, token: TOKEN });
    const w = await worker(url);
    await client.start('remote-order', { amount: 3, gate }, { jobId: 'r1' });
    await line(w, (l) => l['type'] === 'activity.started' && l['activity'] === 'charge');
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);

    writeFileSync(gate, 'open'); // the activity ends while the server is down: its completion is held
    await line(w, (l) => l['type'] === 'server.unreachable');
    ({ proc: server, url } = await serve(db, claim, port));
    const finished = await line(w, (l) => l['type'] === 'activity.finished' && l['activity'] === 'charge');
    expect(finished).toMatchObject({ outcome: 'succeeded', duplicate: false });
    const done = await client.waitFor('r1', (j) => j.final, { timeoutMs: 90_000 });
    expect(done).toMatchObject({ value: 'done', context: { charged: { charged: 3, attempt: 1 } } });
    const details = await fetch(`${url}/api/jobs/r1/attempts`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json() as Promise<any>);
    expect(details.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['succeeded', 'succeeded']);

    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    server.child.kill('SIGTERM');
    await server.exited;
  }, 180_000);

  it('the Python example worker (standard library only) runs a job to its end, its timer fired by spool serve --run-timers', async () => {
    const { proc: server, url } = await serve(res.dbPath(), ['--run-timers']);
    const python = spawn('python3', [PYTHON_WORKER, '--server', url, '--token', WORKER, '--wait-ms', '2000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(python);
    let out = '';
    const waiting: (() => void)[] = [];
    python.stdout.setEncoding('utf8').on('data', (c: string) => ((out += c), waiting.splice(0).forEach((w) => w())));
    python.stderr.setEncoding('utf8').on('data', (c: string) => ((out += c), waiting.splice(0).forEach((w) => w())));
    const exited = new Promise<number | null>((resolve) => python.on('close', (code) => (resolve(code), waiting.splice(0).forEach((w) => w()))));
    const py = {
      until: async (pattern: RegExp) => {
        while (!pattern.test(out)) {
          if (python.exitCode !== null) throw new Error(`python exited ${python.exitCode}: ${out}`);
          await new Promise<void>((resolve) => waiting.push(resolve));
        }
        return out;
      },
    };
    await line(py, (l) => l['type'] === 'worker.ready');
    const client = createClient({ url, token: TOKEN });
    // Its timer is fired by spool serve --run-timers: nothing but the server and the Python worker runs.
    await client.start('remote-order', { amount: 9, failFirst: true, pauseMs: 100 }, { jobId: 'p1' });
    const done = await client.waitFor('p1', (j) => j.final, { timeoutMs: 90_000 });
    expect(done).toMatchObject({ value: 'done', context: { charged: { charged: 9, attempt: 2, by: 'python' }, shipped: { shipped: true, by: 'python' } } });
    const assets = await fetch(`${url}/api/jobs/p1/assets`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json() as Promise<any>);
    expect(assets.assets).toHaveLength(1);
    python.kill('SIGTERM');
    expect(await exited).toBe(0);
    server.child.kill('SIGTERM');
    await server.exited;
  }, 180_000);
});
