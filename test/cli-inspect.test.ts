/**
 * `spool inspect --url`: a child process relays the database's commits, by any process, to a
 * local WebSocket receiver that checks them as Stately's inspector reads them: the active jobs
 * announced first, then each commit's event (with its source) and snapshot, in commit order.
 * Every wait is on the receiver's frames or the child's output.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { jobLifecycle } from '../machines/index.ts';
import { startReceiver, statelyProblems, storyOf } from './helpers/inspectorReceiver.ts';
import { Resources } from './helpers/resources.ts';
import { runCli } from './helpers/inProcessCli.ts';
import { runSpool, SPOOL_BIN } from './helpers/spoolCli.ts';

const res = new Resources();
afterEach(() => res.dispose());

/** Start `spool --db <db> inspect --url <url>`; `ready()` resolves once it relays. */
function relay(db: string, cwd: string, url: string) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, [SPOOL_BIN, '--db', db, 'inspect', '--url', url], { cwd, env });
  let stderr = '';
  const waiting: (() => void)[] = [];
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
    for (const w of waiting.splice(0)) w();
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const ready = async () => {
    while (!stderr.includes('spool inspect: relaying')) {
      if (child.exitCode !== null) throw new Error(`inspect exited: ${stderr}`);
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
  };
  return { child, exited, ready, stderr: () => stderr };
}

describe('spool inspect', () => {
  it("announces the active jobs, then relays every process's commits with sources and snapshots, in order", async () => {
    const receiver = await startReceiver();
    res.track({ close: () => receiver.close() });
    const dir = res.tempDir();
    const db = `${dir}/spool.db`;
    const runtime = await res.runtime({ store: await res.sqlite(db), machines: [jobLifecycle] });
    await runtime.start('job-lifecycle', { name: 'before', items: 2 }, { jobId: 'before' });
    await runtime.send('before', { type: 'START' });
    await runtime.start('job-lifecycle', { name: 'ended' }, { jobId: 'ended' });
    await runtime.send('ended', { type: 'CANCEL' });
    expect((await runtime.get('ended')).final).toBe(true);

    const r = relay(db, dir, receiver.url);
    await r.ready();
    await receiver.until((f) => f.some((x) => x.sessionId === 'spool:before'));
    await runtime.send('before', { type: 'ITEM_DONE' });
    // Another process commits on the same file.
    const other = await runSpool(['--db', db, 'send', 'before', '{"type":"ITEM_DONE"}'], dir);
    expect(other.code).toBe(0);
    await runtime.start('job-lifecycle', { name: 'after' }, { jobId: 'after' });
    await runtime.send('after', { type: 'START' });
    const frames = await receiver.until(
      (f) => f.some((x) => x.sessionId === 'spool:before' && x.snapshot?.value === 'completed') && f.some((x) => x.sessionId === 'spool:after' && x.type === '@xstate.snapshot' && x.snapshot?.value === 'processing'),
    );
    r.child.kill('SIGINT');
    expect(await r.exited).toBe(0);

    expect(statelyProblems(frames)).toEqual([]);
    expect(storyOf(frames, 'spool:ended')).toEqual([]);
    expect(storyOf(frames, 'spool:before')).toEqual(['actor:before', 'event:ITEM_DONE<-outside', 'snapshot:"processing"', 'event:ITEM_DONE<-outside', 'snapshot:"completed"']);
    const announced = frames.find((f) => f.sessionId === 'spool:before')!;
    expect(announced).toMatchObject({ type: '@xstate.actor', rootId: 'spool:before', snapshot: { value: 'processing', status: 'active' } });
    expect(JSON.parse(announced.definition!)).toMatchObject({ id: 'job-lifecycle', initial: 'queued' });
    expect(storyOf(frames, 'spool:after')).toEqual(['actor:after', 'event:xstate.init<-outside', 'snapshot:"queued"', 'event:START<-outside', 'snapshot:"processing"']);
    expect(frames.filter((f) => f.sessionId === 'spool:before' && f.type === '@xstate.snapshot').at(-1)).toMatchObject({ snapshot: { status: 'done' } });
  });

  it('refuses a URL that is not a WebSocket URL, before opening anything', async () => {
    const dir = res.tempDir();
    const run = await runCli(['--db', `${dir}/none.db`, 'inspect', '--url', 'http://example.com'], dir);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/--url takes a WebSocket URL/);
  });
});
