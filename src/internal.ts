/**
 * Every name Spool's own parts (the CLI, the server, the views, path testing, stores, tests) import
 * from the runtime, in one place. Not an entry point of the package: applications import `spool`
 * (src/index.ts), store authors `spool/store` (src/store.ts).
 */
export { createRuntime } from './runtime/createRuntime.ts';
export { Runtime } from './runtime/runtime.ts';
export type { RuntimeOptions, Job, JobOf, JobDetails, JobDetailsOf, SendResult, SendResultOf, SendOptions, StartOptions, StartManyItem, StartOrSendOptions, StartOrSendResult, RedeliverOptions, ListFilter, RuntimeEvent, LogEntry, MachineEntries } from './runtime/createRuntime.ts';
export { redeliveryOf } from './runtime/redelivery.ts';
/** Typed definitions and activities (checked against the machine at compile time), and the types that flow from machines. */
export { defineJob, activity, type CheckedDefinition } from './runtime/defineJob.ts';
export type { CatalogOf, JobId, MachineCatalog, MachineTypes, UntypedCatalog, UntypedMachine, MachineIds, MachineIdOf, ActorNames, StatePaths, EventTypesOf } from './runtime/machineTypes.ts';
export { RetryableError, TerminalError, IndeterminateOutcomeError } from './base/retry.ts';
export { backoffDelay } from './step/attempts.ts';
export type { RetryPolicy, ActivityPolicy } from './base/retry.ts';
export type { ActivityArgs, AssetInput, DeferredCompletion } from './runtime/activities.ts';
export { MachineRegistry, isStateMachine, isJobDefinition, eventSchemaFor, collectDefinitions, type Definition } from './runtime/registry.ts';
export { rideOutFaults, runWorker, type RideOutOptions, type WorkerOptions } from './runtime/worker.ts';
export type { StorageFaultEvent } from './runtime/api.ts';
/** The Stately inspector: the `inspect` option's observer type, a job's sessionId, and the feed `spool inspect` relays with. */
export { InspectionFeed, sessionIdOf, type InspectionFeedDeps } from './runtime/inspection.ts';
export { type InspectionObserver } from './runtime/options.ts';
export type { RuntimeStats } from './runtime/operations.ts';
export { InvalidScheduleError, ScheduleNotFoundError, occurrenceJobId } from './runtime/schedules.ts';
export type { ScheduleSpec, Schedule, ScheduleResult, ScheduleEvent } from './runtime/schedules.ts';
export type { JobDefinition, RegisteredMachine, SnapshotMigration, PersistedSnapshotJson } from './base/definition.ts';
export * from './base/errors.ts';
export { systemClock, type Clock } from './ports/clock.ts';
export type * from './ports/store.ts';
export { JOB_STATUSES, CommitOutcomeUnknown, DAMAGED_RECORD } from './ports/store.ts';
/** Helpers clients print with: a state value as `a.b` / `{a.b, c}`, and a copy with sensitive properties redacted. */
export { formatStateValue, redact, REDACTED } from './base/json.ts';
