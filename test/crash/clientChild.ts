/**
 * The client process of the crash harness: `clientChild.ts <db>`.
 *
 * It opens two runtimes on the database, like the two kinds of client Spool has:
 *   - `queue`: `processEvents: false`: `send` resolves once the event is durably accepted (pending);
 *   - `apply`: `processEvents: true, runEffects: false` (what a CLI command is): `send` applies the
 *     event itself (inline, or draining what is queued before it) and leaves activities and timers
 *     to the worker. It is a second writer of transitions, fenced by revisions.
 * It prints {type:'ready'}, then executes one JSON command per stdin line, strictly in order, and
 * prints one answer per command only after the call resolved (an `ack` is a promise kept):
 *   {id, op:'start', machine, input, jobId, via}      -> {type:'ack', id, jobId, revision}
 *   {id, op:'send', jobId, event, eventId, via}       -> {type:'ack', id, status, revision, duplicate}
 *   {id, op:'cancel', jobId, reason, via}             -> {type:'ack', id, requested}
 *   any failure                                       -> {type:'err', id, code, name, message}
 *   {op:'exit'}                                       -> closes both runtimes and exits 0
 * Crash points are armed by the harness through SPOOL_CRASH_AT.
 */
import { createInterface } from 'node:readline';
import { createRuntime, type Runtime } from '../../src/index.ts';
import { openStore } from '../../persistence/openStore.ts';
import { ridingOutFaults } from './postgres.ts';
import { CRASH_MACHINES } from './machines.ts';
import type { ClientCommand, Via } from './workload.ts';

const [dbPath] = process.argv.slice(2);
if (!dbPath) throw new Error('usage: clientChild.ts <db file or postgres:// URL>');

const print = (msg: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const runtimes: Record<Via, Runtime> = {
  queue: await ridingOutFaults(async () => createRuntime({ store: await openStore(dbPath), machines: CRASH_MACHINES, processEvents: false })),
  apply: await ridingOutFaults(async () => createRuntime({ store: await openStore(dbPath), machines: CRASH_MACHINES, processEvents: true, runEffects: false })),
};

async function execute(cmd: ClientCommand): Promise<Record<string, unknown>> {
  const rt = runtimes[cmd.via];
  switch (cmd.op) {
    case 'start': {
      const job = await rt.start(cmd.machine, cmd.input, { jobId: cmd.jobId });
      return { jobId: job.id, revision: job.revision };
    }
    case 'send': {
      const r = await rt.send(cmd.jobId, cmd.event, { eventId: cmd.eventId });
      return { status: r.status, revision: r.revision, duplicate: r.duplicate };
    }
    case 'cancel': {
      const job = await rt.cancel(cmd.jobId, cmd.reason);
      return { requested: job.cancel !== null };
    }
  }
}

const queue: string[] = [];
let busy = false;
let exiting = false;

async function run(): Promise<void> {
  if (busy) return;
  busy = true;
  while (queue.length > 0) {
    const text = queue.shift()!;
    const cmd = JSON.parse(text) as ClientCommand | { op: 'exit' };
    if (cmd.op === 'exit') {
      exiting = true;
      await runtimes.queue.close();
      await runtimes.apply.close();
      process.exit(0);
    }
    try {
      print({ type: 'ack', id: cmd.id, ...(await ridingOutFaults(() => execute(cmd))) });
    } catch (error) {
      const e = error as { code?: unknown; name?: unknown; message?: unknown };
      print({ type: 'err', id: cmd.id, code: typeof e?.code === 'string' ? e.code : null, name: String(e?.name ?? 'Error'), message: String(e?.message ?? error) });
    }
  }
  busy = false;
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.trim() === '') return;
  queue.push(line);
  void run();
});
rl.on('close', () => {
  // The harness is gone: stop without waiting for anything.
  if (!exiting) process.exit(0);
});
print({ type: 'ready', pid: process.pid });
