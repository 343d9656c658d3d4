/**
 * Helpers a machines module may use to have its definitions checked by the compiler:
 * `defineJob` (a definition's activities, cancel event and state, and event schemas checked
 * against the machine) and `activity` (an activity with Spool's arguments typed). Both return
 * what they are given: the runtime registers the result like any plain definition.
 */
import { fromPromise, type AnyStateMachine, type NonReducibleUnknown, type PromiseActorLogic, type StateValueFrom } from 'xstate';
import type { ZodType } from 'zod';
import type { ActivityArgs, DeferredCompletion } from './activities.ts';
import type { ActorNames, EventTypesOf, StatePaths } from './machineTypes.ts';
import type { JobDefinition } from '../base/definition.ts';
import type { ActivityPolicy, RetryPolicy } from '../base/retry.ts';

/** Keys of `T` that are not in `Allowed`: each mapped to `never`, so a value there fails to compile. */
type OnlyKeys<T, Allowed extends PropertyKey> = T & { [K in Exclude<keyof T, Allowed>]: never };

/** A definition's event schema keys: the machine's event types, or wildcards (`user.*`, `*`). */
type EventSchemaKey<M extends AnyStateMachine> = EventTypesOf<M> | `${string}*`;

/** A policy with no keys but {@link ActivityPolicy}'s (and its `backoff`'s). */
type ExactPolicy<P> = OnlyKeys<P, keyof ActivityPolicy> & (P extends { backoff: infer B } ? { backoff: OnlyKeys<B, keyof NonNullable<RetryPolicy['backoff']>> } : unknown);

/** Activity policies keyed by the machine's actors only, each an exact {@link ActivityPolicy}. */
type CheckedActivities<M extends AnyStateMachine, TActivities> = { [K in keyof TActivities]: K extends ActorNames<M> ? ExactPolicy<TActivities[K]> : never };

/**
 * A {@link JobDefinition} checked against its machine: `activities` keyed by the machine's
 * actors with {@link ActivityPolicy} values (no other keys), `cancel.event` one of its event
 * types and `cancel.state` one of its state paths (`'cancelled'`, `'work.cancelled'`), event
 * schemas keyed by its event types (or wildcards).
 */
export type CheckedDefinition<M extends AnyStateMachine, TActivities = {}, TEvents = {}> = Omit<JobDefinition, 'machine' | 'activities' | 'cancel' | 'events'> & {
  machine: M;
  activities?: TActivities & CheckedActivities<M, TActivities>;
  cancel?: { event?: EventTypesOf<M>; state?: StatePaths<StateValueFrom<M>> };
  events?: OnlyKeys<TEvents, EventSchemaKey<M>>;
};

/**
 * A job definition, checked at compile time against its machine (see {@link CheckedDefinition}):
 * a misspelt activity name, policy key, cancel event or state, or an event schema for an event the
 * machine does not declare fails to compile. Returns the definition unchanged, typed precisely
 * so that `createRuntime({ machines: [it] })` knows its id, input and events.
 *
 * @example
 * export const invoice = defineJob({
 *   machine: invoiceMachine,
 *   input: z.object({ amount: z.number() }),
 *   activities: { charge: { maxAttempts: 5, unsafeToRepeat: true } },
 *   cancel: { state: 'cancelled' },
 * });
 */
export function defineJob<
  const M extends AnyStateMachine,
  const TId extends string = never,
  TInput extends ZodType | undefined = undefined,
  TActivities extends Record<string, ActivityPolicy> = {},
  const TEvents extends Record<string, ZodType> = {},
>(definition: CheckedDefinition<M, TActivities, TEvents> & { id?: TId; input?: TInput }): DefinedJob<M, TId, TInput, TActivities, TEvents> {
  return definition as DefinedJob<M, TId, TInput, TActivities, TEvents>;
}

/** What {@link defineJob} returns: the definition, with its id, input schema, policies and event schemas as given. */
export type DefinedJob<M extends AnyStateMachine, TId extends string, TInput extends ZodType | undefined, TActivities, TEvents> = CheckedDefinition<M, TActivities, TEvents> &
  ([TId] extends [never] ? {} : { id: TId }) &
  (undefined extends TInput ? {} : { input: TInput }) &
  ({} extends TActivities ? {} : { activities: TActivities }) &
  ({} extends TEvents ? {} : { events: TEvents });

/**
 * An activity (in place of XState's `fromPromise`) whose argument has Spool's fields typed:
 * `idempotencyKey`, `attempt`, `jobId`, `signal`, `defer`, `progress` and `attachAsset`. It
 * returns its output, or `defer(...)` to finish out of band (`complete(token, output)` later).
 *
 * @example
 * actors: {
 *   askManager: activity<{ approved: boolean }, { manager: string }>(async ({ input, defer }) =>
 *     defer((token) => mailer.send(input.manager, `https://example.com/approve?token=${token}`))),
 * }
 */
export function activity<TOutput, TInput = NonReducibleUnknown>(
  run: (args: ActivityArgs<TInput, TOutput>) => PromiseLike<TOutput | DeferredCompletion<TOutput>>,
): PromiseActorLogic<TOutput, TInput> {
  // XState types the creator's argument as its own ({ input, system, self, signal, emit }) and
  // its result as the output; Spool calls it with ActivityArgs and reads a deferred completion
  // from the result (executor.ts). The one cast of that difference is here.
  return fromPromise<TOutput, TInput>(run as unknown as Parameters<typeof fromPromise<TOutput, TInput>>[0]);
}
