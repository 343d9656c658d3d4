import type { AnyStateMachine } from 'xstate';
import type { ZodType } from 'zod';
import type { ActivityPolicy } from './retry.ts';

/**
 * What a job definition is, as types: what a `machines/` module exports and what the runtime holds
 * once it is registered. Below step/ and runtime/, which both read definitions.
 */

/** A persisted snapshot as plain JSON, the unit a migration rewrites. */
export type PersistedSnapshotJson = Record<string, unknown> & { value: unknown; context?: unknown };

/** Rewrites a snapshot of the version it is keyed by into one that fits this definition's machine. */
export type SnapshotMigration = (snapshot: PersistedSnapshotJson) => PersistedSnapshotJson;

/**
 * A machine Spool can run as a job. A module of `machines/` exports these as plain objects
 * (they need nothing from Spool), or exports bare XState machines (version 1, no schemas).
 *
 * @example
 * export const invoice = {
 *   machine: invoiceMachine,          // id defaults to machine.id
 *   version: 2,                       // default: machine.version ?? 1
 *   input: z.object({ amount: z.number() }),
 *   events: { PAY: z.object({ type: z.literal('PAY'), card: z.string() }) },
 *   sensitive: ['card'],              // redacted from history, logs and errors
 *   migrations: { 1: (s) => ({ ...s, context: { ...s.context, currency: 'EUR' } }) },
 * };
 */
export interface JobDefinition {
  machine: AnyStateMachine;
  /** Stable machine id; default `machine.id`. */
  id?: string;
  /** Default `machine.version`, else `1`. Jobs stay on the version they started on. */
  version?: string | number;
  /** Validates `start` input; default: any JSON object. */
  input?: ZodType;
  /** Per event type, a schema for the whole event object. */
  events?: Record<string, ZodType>;
  /** Keyed by the version migrated from: moves jobs of that version onto this one. */
  migrations?: Record<string, SnapshotMigration>;
  /** Property names redacted wherever Spool records or prints a payload. */
  sensitive?: readonly string[];
  /** Per invoked actor src: retry policy and crash behaviour. Default: 3 attempts, safe to repeat. */
  activities?: Record<string, ActivityPolicy>;
  /**
   * How `cancel()` reaches the machine: the event it sends (default `CANCEL`) and the state
   * that means "cancelled" (default `cancelled`).
   */
  cancel?: { event?: string; state?: string };
  description?: string;
}

/** A definition as the runtime holds it: defaults resolved. */
export interface RegisteredMachine {
  id: string;
  version: string;
  machine: AnyStateMachine;
  input: ZodType | undefined;
  events: Record<string, ZodType>;
  /** Every event type the machine or its schemas name. */
  eventTypes: ReadonlySet<string>;
  migrations: Record<string, SnapshotMigration>;
  sensitive: ReadonlySet<string>;
  activities: Record<string, ActivityPolicy>;
  cancel: { event: string; state: string };
  description: string | undefined;
  /** Registered as a bare machine, without a definition's options. */
  bare: boolean;
  /**
   * Whether a job's restored actor can lend its scope to later transitions: false when an invoke
   * registers a `systemId` (registrations would outlive their child in the reused system).
   */
  scopeReusable: boolean;
  /** Whether `setup({ actors })` holds a machine: only then can a job of it have child jobs. */
  hasChildMachines: boolean;
  /** What was passed to `register`. */
  source: JobDefinition | AnyStateMachine;
}
