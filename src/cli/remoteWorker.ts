/**
 * `spool worker --server URL --token T`: the activities of the machines module run against a
 * remote `spool serve` (src/client/worker.ts), with no database here. Prints one line per attempt
 * started and ended (JSON lines with --json); SIGINT/SIGTERM stops claiming, lets running
 * attempts finish for --grace-ms, gives back the rest and exits 0.
 */
import { MachineRegistry, TerminalError } from '../internal.ts';
import { runRemoteWorker, type RemoteActivity, type RemoteWorkerEvent } from '../client/index.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import { UsageError } from './errors.ts';
import { onShutdownSignals } from './signals.ts';
import type { CliIO, GlobalOptions } from './globals.ts';

/** What the remote mode takes from `spool worker`'s options. */
export interface RemoteWorkerFlags {
  server: string;
  token: string | undefined;
  concurrency: number;
  graceMs: number;
}

/** The activities of a machines module by name (an invoke's `src`), the first machine's where two share a name. */
export function activitiesOf(registry: MachineRegistry): Record<string, RemoteActivity> {
  const activities: Record<string, RemoteActivity> = {};
  for (const m of registry.all()) {
    for (const [name, logic] of Object.entries(m.machine.implementations.actors ?? {})) {
      const config = (logic as { config?: unknown }).config;
      if (typeof config !== 'function' || name in activities) continue;
      activities[name] = (args) =>
        (config as (a: unknown) => unknown)({
          ...args,
          defer: () => {
            throw new TerminalError('defer() is not available to remote workers: finish the activity, or run it in a local `spool worker`.');
          },
          self: undefined,
          system: undefined,
          emit: () => undefined,
        });
    }
  }
  return activities;
}

/** Run the remote worker until a signal (see the file's comment). */
export async function runRemoteWorkerCommand(g: GlobalOptions, io: CliIO, flags: RemoteWorkerFlags): Promise<void> {
  if (!/^https?:\/\/[^/]+/.test(flags.server)) throw new UsageError(`--server must be the http(s) address \`spool serve\` prints, e.g. http://127.0.0.1:7420; got "${flags.server}".`);
  const token = flags.token ?? io.env?.['SPOOL_TOKEN'];
  if (token === undefined || token === '') throw new UsageError('--server needs --token (a worker token of `spool serve --worker-token`, or its token; or SPOOL_TOKEN).');
  const { path, definitions } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
  const activities = activitiesOf(new MachineRegistry(definitions));
  const names = Object.keys(activities);
  if (names.length === 0) throw new UsageError(`${path} defines no activities for a remote worker to run.`);
  const controller = new AbortController();
  const release = onShutdownSignals({
    first: (signal) => {
      io.stderr(`spool worker: ${signal}: claiming no new work; running activities may finish for ${flags.graceMs} ms, then are given back (again to exit at once)\n`);
      controller.abort();
    },
    second: (signal, code) => io.stderr(`spool worker: second ${signal}: exiting now with code ${code}; the server gives its attempts to another worker once their claims expire\n`),
  });
  const line = (json: Record<string, unknown>, human: string) => io.stdout(g.json ? `${JSON.stringify({ at: Date.now(), ...json })}\n` : `${new Date().toISOString()} ${human}\n`);
  try {
    line({ type: 'worker.ready', server: flags.server, activities: names, concurrency: flags.concurrency, pid: process.pid }, `spool worker for ${flags.server} (activities ${names.join(', ')}; ${flags.concurrency} at once); Ctrl-C to stop`);
    await runRemoteWorker({
      url: flags.server,
      token,
      activities,
      concurrency: flags.concurrency,
      graceMs: flags.graceMs,
      signal: controller.signal,
      onEvent: (event) => line(event, describe(event)),
    });
    line({ type: 'worker.stopped' }, 'spool worker: stopped');
  } finally {
    release();
  }
}

function describe(e: RemoteWorkerEvent): string {
  switch (e.type) {
    case 'activity.started':
      return `${e.jobId} ${e.activity} attempt ${e.attempt} started`;
    case 'activity.finished':
      return `${e.jobId} ${e.activity} attempt ${e.attempt} ${e.outcome}${e.duplicate ? ' (already accepted)' : ''}`;
    case 'activity.refused':
      return `${e.jobId} ${e.activity} attempt ${e.attempt} refused (${e.code}): ${e.message}`;
    case 'activity.released':
      return `${e.jobId} ${e.activity} attempt ${e.attempt} ${e.released ? 'given back' : 'left to expire'}`;
    case 'server.unreachable':
      return `server unreachable (${e.message}); trying again in ${e.retryInMs} ms`;
    case 'server.reachable':
      return 'server reachable again';
  }
}
