/**
 * Spool's public API. Stores live in their own subpaths: `spool/sqlite`, `spool/memory`.
 *
 * @example
 * import { createRuntime } from 'spool';
 * import { SqliteStore } from 'spool/sqlite';
 */
export { createRuntime, Runtime, JobQuarantined } from './runtime/runtime.ts';
export type { RuntimeOptions, Job, SendResult, SendOptions, StartOptions, ListFilter, RuntimeEvent, LogEntry } from './runtime/runtime.ts';
export { MachineRegistry, isStateMachine, isJobDefinition } from './runtime/registry.ts';
export type { JobDefinition, RegisteredMachine, SnapshotMigration, PersistedSnapshotJson } from './runtime/registry.ts';
export * from './runtime/errors.ts';
export { systemClock, type Clock } from './ports/clock.ts';
export type * from './ports/store.ts';
