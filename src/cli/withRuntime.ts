/**
 * How a `spool` command opens its runtime: machines loaded and checked first, then the database (`--db`),
 * then the runtime in the mode the command needs; and the guard against running a job whose
 * machine this process lacks.
 */
import { MachineRegistry, SpoolError, createRuntime, rideOutFaults, type LogEntry, type RideOutOptions, type Runtime } from '../internal.ts';
import { openStore as openDbStore, storeExists, type OpenedStore } from '../../persistence/openStore.ts';
import { DatabaseError, UsageError, firstLine } from './errors.ts';
import { knowsMachine } from '../views/redacted.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import type { CliIO, GlobalOptions } from './globals.ts';

/** `--owner`: a tenant id, or null (unscoped) when not given. */
function ownerOf(g: GlobalOptions): string | null {
  if (g.owner === undefined) return null;
  if (!/^[\x21-\x7e]{1,200}$/.test(g.owner)) throw new UsageError('--owner must be 1-200 printable ASCII characters without spaces.');
  return g.owner;
}

/** `--max-backlog`: a positive integer. */
function maxBacklogOf(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError('--max-backlog must be a positive integer (events waiting to be applied).');
  return n;
}

/**
 * Load the machines, open the database, open a runtime, run `work`, close everything. Machines
 * are checked before the database is touched, so a bad module changes nothing.
 *
 * `mode` says what the command may change: `read` (show, list, stats) writes nothing and applies
 * nothing; `write` (start, send, cancel, ...) changes only the jobs it names; `run` (worker, demo)
 * recovers the whole store on open (quarantines jobs whose machine this process does not have,
 * migrates, applies pending events). A one-off command run without the right `--machines` must
 * not quarantine every job of the machines it lacks.
 */
export async function withRuntime(
  g: GlobalOptions,
  io: CliIO,
  options: {
    create: boolean;
    mode?: 'read' | 'write' | 'run';
    needs?: string;
    effects?: boolean;
    graceMs?: number;
    leaseMs?: number;
    concurrency?: number;
    activityConcurrency?: Record<string, number>;
    log?: (entry: LogEntry, sensitive: ReadonlySet<string>) => void;
    /** Run on the opened store before the runtime opens (the worker's cheap doctor check); what it throws closes the store. */
    atOpen?: (store: OpenedStore) => void;
    /** With `effects`: run no activity here (each one's concurrency 0: remote workers run them, `spool serve --run-timers`). */
    activitiesElsewhere?: boolean;
    /** Ride out a retryable storage fault while opening (the worker: a full disk, a server restarting) instead of failing. */
    rideOut?: RideOutOptions;
  },
  work: (runtime: Runtime, module: string, store: OpenedStore) => Promise<void>,
): Promise<void> {
  const { path, definitions } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
  const registry = new MachineRegistry(definitions); // throws MachineDefinitionError for an unusable definition
  if (options.needs !== undefined && !registry.all().some((m) => m.id === options.needs)) {
    throw new UsageError(`This command runs the machine ${options.needs}, which ${path} does not export; run it without --machines.`);
  }
  const maxBacklog = g.maxBacklog === undefined ? undefined : maxBacklogOf(g.maxBacklog); // checked before the file is touched
  const open = async (): Promise<{ runtime: Runtime; store: OpenedStore }> => {
    const store = await openStore(io.cwd, g.db, options.create, g.synchronous);
    let runtime: Runtime | undefined;
    try {
      // runEffects false: a command records transitions, effects and timers, and leaves running
      // activities to a worker; closing a runtime mid-activity would abort it.
      const log = options.log;
      const sensitive = new Set(registry.all().flatMap((m) => [...m.sensitive]));
      const mode = options.mode ?? 'write';
      options.atOpen?.(store);
      runtime = await createRuntime({
        store,
        machines: definitions,
        recover: false,
        ...(mode === 'read' ? { processEvents: false } : {}),
        runEffects: options.effects ?? false,
        owner: ownerOf(g),
        ...(maxBacklog !== undefined ? { maxBacklog } : {}),
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
        ...(options.concurrency !== undefined ? { maxConcurrentActivities: options.concurrency } : {}),
        ...(options.activityConcurrency ? { activityConcurrency: options.activityConcurrency } : {}),
        ...(options.activitiesElsewhere ? { activityConcurrency: noActivities(registry) } : {}),
        ...(log ? { log: (entry: LogEntry) => log(entry, sensitive) } : {}),
      });
      // Recovery after the runtime opened, so that a failed one closes it (its heartbeat, then the store).
      if (mode === 'run') await runtime.recover();
      return { runtime, store };
    } catch (error) {
      await (runtime ? runtime.close() : store.close());
      throw error;
    }
  };
  const { runtime, store } = options.rideOut ? await rideOutFaults(open, options.rideOut) : await open();
  try {
    await work(runtime, path, store);
  } finally {
    await runtime.close(options.graceMs !== undefined ? { graceMs: options.graceMs } : {});
  }
}

/** The store `--db` names (a SQLite file, or a postgres:// URL: see persistence/openStore.ts). */
async function openStore(cwd: string, label: string, create: boolean, synchronous: 'FULL' | 'NORMAL'): Promise<OpenedStore> {
  if (!create && !storeExists(label, cwd)) {
    throw new DatabaseError(`No Spool database at ${label}. Start a job first (\`spool start <machine>\` or \`spool demo\`), or pass --db <file>.`, {
      db: label,
    });
  }
  try {
    return await openDbStore(label, { cwd, synchronous });
  } catch (error) {
    if (error instanceof SpoolError) throw error;
    throw new DatabaseError(`Could not open the database ${label}: ${firstLine((error as Error).message)}`, { db: label });
  }
}

/**
 * Refuse a command that would run a job whose machine this process does not have (a missing or
 * wrong `--machines`): it would otherwise quarantine the job. The job itself is left unchanged.
 */
export async function requireMachineOf(runtime: Runtime, jobId: string, module: string): Promise<void> {
  const job = await runtime.get(jobId);
  if (job.final) return;
  if (!knowsMachine(runtime, job.machineId)) {
    throw new UsageError(`Job ${jobId} runs machine ${job.machineId}, which ${module} does not export; pass --machines <the module that defines it>.`);
  }
  if (!runtime.registry.route(job.machineId, job.machineVersion)) {
    const has = runtime.registry.all().filter((m) => m.id === job.machineId).map((m) => m.version);
    throw new UsageError(
      `Job ${jobId} runs ${job.machineId} version ${job.machineVersion}; ${module} registers version ${has.join(', ')} and no migration from ${job.machineVersion}. ` +
        `Pass --machines <a module that registers version ${job.machineVersion}>, or register a migration from it. Nothing was changed.`,
    );
  }
}

/** Every activity of the registered machines at concurrency 0: none is claimed here. */
function noActivities(registry: MachineRegistry): Record<string, number> {
  return Object.fromEntries(registry.all().flatMap((m) => Object.keys(m.machine.implementations.actors ?? {})).map((src) => [src, 0]));
}
