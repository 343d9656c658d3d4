/**
 * The way to a runtime (`createRuntime`): the options checked, the runtime built (runtime.ts), its
 * store's jobs recovered; and the types of the runtime's API, exported beside it.
 */
import { checkRuntimeOptions } from './options.ts';
import { Runtime } from './runtime.ts';
import type { MachineEntries, RuntimeOptions } from './api.ts';
import type { CatalogOf } from './machineTypes.ts';

export type { RuntimeOptions, LogEntry, Job, JobOf, SendResult, SendResultOf, StartOptions, StartManyItem, SendOptions, StartOrSendOptions, StartOrSendResult, ListFilter, RuntimeEvent, JobDetails, JobDetailsOf, MachineEntries } from './api.ts';
export type { RedeliverOptions } from './redelivery.ts';

/**
 * Open a runtime: register the machines, recover the store's jobs, and return the API. Given a
 * literal list of definitions (`machines: [jobLifecycle, exportJob]`), the runtime is typed by
 * them: `start` takes their machine ids and inputs, `send` their events, and jobs come back with
 * their contexts (see machineTypes.ts); machines loaded dynamically give the untyped `Runtime`.
 *
 * @example
 * const store = await SqliteStore.open('./spool.db');
 * const runtime = await createRuntime({ store, machines: [jobLifecycle] });
 * const job = await runtime.start('job-lifecycle', { name: 'resize', items: 3 });
 * await runtime.send(job.id, { type: 'START' });
 * await runtime.close();
 */
export async function createRuntime<const TMachines extends MachineEntries>(options: RuntimeOptions<TMachines>): Promise<Runtime<CatalogOf<TMachines>>> {
  checkRuntimeOptions(options);
  const runtime = new Runtime<CatalogOf<TMachines>>(options);
  if (options.recover ?? true) await runtime.recover();
  return runtime;
}
