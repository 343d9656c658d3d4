/**
 * `spool`: what an application uses. The runtime, `defineJob` and `activity`, the worker loop, the
 * errors a caller catches, and the types of all of them. Stores live in their own entry points
 * (`spool/sqlite`, `spool/postgres`, `spool/memory`); the store port and its records are
 * `spool/store`, for store authors.
 *
 * @example
 * import { createRuntime } from 'spool';
 * import { SqliteStore } from 'spool/sqlite';
 */
export { createRuntime } from './runtime/createRuntime.ts';
export { Runtime } from './runtime/runtime.ts';
export type { RuntimeOptions, Job, JobOf, JobDetails, JobDetailsOf, SendResult, SendResultOf, SendOptions, StartOptions, StartManyItem, StartOrSendOptions, StartOrSendResult, RedeliverOptions, ListFilter, RuntimeEvent, LogEntry, MachineEntries } from './runtime/createRuntime.ts';
/** Typed definitions and activities (checked against the machine at compile time), and a job id typed by its machine. */
export { defineJob, activity, type CheckedDefinition } from './runtime/defineJob.ts';
export type { JobId } from './runtime/machineTypes.ts';
export type { JobDefinition, SnapshotMigration } from './base/definition.ts';
export { rideOutFaults, runWorker, type RideOutOptions, type WorkerOptions } from './runtime/worker.ts';
/** What an activity receives and throws. */
export { RetryableError, TerminalError, IndeterminateOutcomeError } from './base/retry.ts';
export type { RetryPolicy, ActivityPolicy } from './base/retry.ts';
export type { ActivityArgs, AssetInput, DeferredCompletion } from './runtime/activities.ts';
/** Schedules, stats, the inspector option, runtime events about no job. */
export { InvalidScheduleError, ScheduleNotFoundError } from './runtime/schedules.ts';
export type { ScheduleSpec, Schedule, ScheduleResult, ScheduleEvent } from './runtime/schedules.ts';
export type { RuntimeStats } from './runtime/operations.ts';
export type { StorageFaultEvent } from './runtime/api.ts';
export type { InspectionObserver } from './runtime/options.ts';
export type { Clock } from './ports/clock.ts';
/** The errors a caller catches: every one a `SpoolError` with a stable `code` and a `category`. */
export {
  SpoolError, type ErrorCategory, JobQuarantined, ValidationError, UnknownMachineError, UnknownEventError, PayloadTooLargeError, MachineDefinitionError,
  JobNotFoundError, JobTerminalError, IdempotencyConflictError, RevisionConflictError, SchemaTooNewError, CorruptRecordError,
  StorageFullError, StorageIoError, DatabaseBusyError, StorageAccessError, DatabaseDamagedError, ClosedError, WaitTimeoutError,
  BackpressureError, RetryRefusedError, TokenError, JobNotFinishedError, RedeliveryRefusedError, EventFailedError, AttemptTokenError, StaleAttemptError,
} from './base/errors.ts';
/** The records the runtime's reads return (`history`, `events`, `historySince`). */
export { JOB_STATUSES } from './ports/store.ts';
export type { JsonValue, JobStatus, EventStatus, ErrorInfo, TransitionOutcome, TransitionRecord, InboxRecord, FeedRecord, FeedPage } from './ports/store.ts';
