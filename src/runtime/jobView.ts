/** What a caller sees of a job: the API's view of a stored record, and reads limited to this runtime's owner. */
import type { JobRecord, JobStatus, JobStore, JsonValue } from '../ports/store.ts';
import type { Job } from './api.ts';
import { JobNotFoundError, ValidationError } from '../base/errors.ts';
import { parseSnapshot } from '../base/hydrate.ts';
import { statePaths } from '../base/json.ts';
import type { MachineRegistry } from './registry.ts';
import type { RegisteredMachine } from '../base/definition.ts';

/** The statuses of a job that has ended: it accepts no more events. */
export const TERMINAL: ReadonlySet<JobStatus> = new Set(['done', 'error', 'stopped']);

/** A job as the API returns it, from its stored record (and its machine, for the cancel state). */
export function toJob(record: JobRecord, def?: RegisteredMachine): Job {
  const parsed = record.status === 'active' ? 'no output while active' : parseSnapshot(record.snapshot);
  const cancelState = def?.cancel.state ?? 'cancelled';
  const output = typeof parsed === 'string' ? undefined : (parsed['output'] as JsonValue | undefined);
  return {
    id: record.id,
    machineId: record.machineId,
    machineVersion: record.machineVersion,
    revision: record.revision,
    status: record.status,
    final: TERMINAL.has(record.status),
    value: record.value,
    context: record.context,
    input: record.input,
    output,
    progress: record.progress,
    cancel:
      record.cancelRequestedAt === null
        ? null
        : { requestedAt: record.cancelRequestedAt, reason: record.cancelReason, completed: statePaths(record.value).includes(cancelState) },
    quarantine: record.quarantine,
    suspended: record.suspendedAt === null ? null : { at: record.suspendedAt, reason: record.suspendReason },
    lease: record.lease,
    idempotencyKey: record.idempotencyKey,
    owner: record.owner,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}


/** How a finished job ended, for error messages. */
export function describeEnd(record: JobRecord): string {
  return record.status === 'done' ? `finished (final state ${JSON.stringify(record.value)})` : `ended with status "${record.status}"`;
}

/** Reads of jobs as one owner sees them: another owner's job is not found. */
export class JobReader {
  readonly #store: JobStore;
  readonly #registry: MachineRegistry;
  readonly #owner: string | null;
  readonly #known: ReadonlyMap<string, { record: JobRecord }>;

  /** `known`: the records this runtime last committed or read, by job id (the snapshot cache). */
  constructor(store: JobStore, registry: MachineRegistry, owner: string | null, known: ReadonlyMap<string, { record: JobRecord }>) {
    this.#store = store;
    this.#registry = registry;
    this.#owner = owner;
    this.#known = known;
  }

  /** The API's view of a record, with its registered machine. */
  view(record: JobRecord): Job {
    return toJob(record, this.#registry.get(record.machineId, record.machineVersion));
  }

  /** A job read from the record this runtime last committed or read of it, if any: only what moves without a commit is read then (see JobStore.getJob). */
  readKnown(jobId: string): Promise<JobRecord | undefined> {
    return this.#store.getJob(jobId, this.#known.get(jobId)?.record);
  }

  /** A job of this runtime's owner; `cached`: read it with {@link readKnown}. */
  async visible(jobId: string, cached = false): Promise<JobRecord> {
    if (typeof jobId !== 'string' || jobId.length === 0) throw new ValidationError('A job id must be a non-empty string.');
    const record = await (cached ? this.readKnown(jobId) : this.#store.getJob(jobId));
    if (!record || record.owner !== this.#owner) throw new JobNotFoundError(jobId);
    return record;
  }
}
