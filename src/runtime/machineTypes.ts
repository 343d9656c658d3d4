/**
 * Types that flow from the machines a runtime is created with: each machine's id, the input
 * `start` takes, the events `send` takes, and the context, state value and output of its jobs.
 * They come from the XState machine's own types (`setup({ types })`) and, where a definition
 * gives them, from its zod schemas. Nothing here exists at run time.
 *
 * A runtime created with machines whose ids are all known to the compiler (`setup().createMachine({
 * id: 'invoice', ... })`, or `id` in the definition) is typed by them; otherwise (machines loaded
 * dynamically, a bare `createMachine` whose id TypeScript does not keep) it is the untyped
 * {@link UntypedCatalog}, as before: string ids, `unknown` inputs and events.
 */
import type { AnyStateMachine, ContextFrom, EventFromLogic, InputFrom, OutputFrom, StateMachine, StateSchemaFrom, StateValueFrom } from 'xstate';
import type { input as ZodInput, output as ZodOutput, ZodType } from 'zod';
import type { JsonValue } from '../ports/store.ts';

/** What Spool knows about one machine's types. */
export interface MachineTypes {
  /** The machine id jobs are started with. */
  id: string;
  /** What `start` accepts: the input schema's input type, else the machine's `types.input`. */
  input: unknown;
  /** A job's stored input: what the input schema outputs (defaults filled in), else as accepted. */
  storedInput: unknown;
  /** The events `send` accepts. */
  event: unknown;
  context: unknown;
  /** The state value (`'queued'`, `{ processing: 'upload' }`). */
  value: unknown;
  output: unknown;
}

/**
 * The types of a machine the compiler knows nothing about: the untyped API. A job's value,
 * context, input and output are JSON at run time ({@link JsonValue}); they are `any` here so that
 * a typed job is also a `Job` (code written against the untyped API takes typed jobs, runtimes
 * and events as they are).
 */
export interface UntypedMachine {
  id: string;
  input: unknown;
  storedInput: any;
  event: unknown;
  context: any;
  value: any;
  output: any;
}

/** The types of every machine a runtime knows, by machine id. */
export type MachineCatalog = Record<string, MachineTypes>;

/** The catalog of a runtime created without machine types (string ids, unknown payloads). */
export type UntypedCatalog = Record<string, UntypedMachine>;

declare const MACHINE: unique symbol;

/**
 * A job id, branded (at compile time only) with its machine id, so `send(job.id, event)` and
 * `get(job.id)` know the machine. Any string is one (the brand is optional): a job id read from
 * a request is accepted as a job of any machine.
 */
export type JobId<TMachineId extends string = string> = string & { readonly [MACHINE]?: TMachineId };

/** The machine of a definition or bare machine. */
export type MachineOf<TEntry> = TEntry extends { machine: infer M extends AnyStateMachine } ? M : TEntry extends AnyStateMachine ? TEntry : never;

/** True for a string literal type (or a union of them), false for `string` and `any`. */
type IsLiteral<T> = 0 extends 1 & T ? false : T extends string ? (string extends T ? false : true) : false;

/** The id a definition registers under: its `id`, else the machine's (when TypeScript kept it). */
export type MachineIdOf<TEntry> = TEntry extends AnyStateMachine
  ? SchemaId<TEntry>
  : TEntry extends { id: infer I extends string }
    ? I
    : SchemaId<MachineOf<TEntry>>;

/** The id in a machine's config, when TypeScript kept it (`setup().createMachine({ id })` does). */
type SchemaId<M extends AnyStateMachine> = StateSchemaFrom<M> extends { id: infer I extends string } ? (IsLiteral<I> extends true ? I : string) : string;

/** The actors a machine declares in `setup({ actors })`, as XState types them. */
type ActorsOf<M> = M extends StateMachine<any, any, any, infer A, any, any, any, any, any, any, any, any, any, any, any> ? A : never;

/** The names of a machine's actors (`setup({ actors })`): what `activities` is keyed by. */
export type ActorNames<M> = [ActorsOf<M>] extends [never] ? never : ActorsOf<M> extends { src: infer S extends string } ? (IsLiteral<S> extends true ? S : string) : string;

/** Every state path of a state value type, `a` and `a.b` (what `cancel.state` names). */
export type StatePaths<V> = V extends string
  ? V
  : V extends object
    ? { [K in keyof V & string]: K | `${K}.${StatePaths<V[K]>}` }[keyof V & string]
    : never;

/** The event types a machine declares (`types.events`), `string` when it declares none. */
export type EventTypesOf<M extends AnyStateMachine> = EventFromLogic<M> extends { type: infer T extends string } ? (IsLiteral<T> extends true ? T : string) : string;

/** The events a definition's schemas describe (keys without a wildcard), as `send` accepts them. */
type SchemaEvents<TEntry> = TEntry extends { events: infer E extends Record<string, ZodType> }
  ? { [K in keyof E & string]: K extends `${string}*` ? never : ZodInput<E[K]> }[keyof E & string]
  : never;

/** The events `send` accepts for a definition: the machine's declared events, else its schemas', else any event. */
type EventOf<TEntry> =
  IsLiteral<EventTypesOf<MachineOf<TEntry>>> extends true
    ? EventFromLogic<MachineOf<TEntry>>
    : [SchemaEvents<TEntry>] extends [never]
      ? { type: string; [key: string]: unknown }
      : SchemaEvents<TEntry>;

/** A machine's declared input, or `unknown` when it declares none. */
type MachineInput<M extends AnyStateMachine> = InputFrom<M> extends infer I ? (0 extends 1 & I ? unknown : I) : unknown;

/** The types of one definition or bare machine. */
export type TypesOf<TEntry> = {
  id: MachineIdOf<TEntry>;
  input: TEntry extends { input: infer S extends ZodType } ? ZodInput<S> : MachineInput<MachineOf<TEntry>>;
  storedInput: TEntry extends { input: infer S extends ZodType } ? ZodOutput<S> : MachineInput<MachineOf<TEntry>>;
  event: EventOf<TEntry>;
  context: ContextFrom<MachineOf<TEntry>>;
  value: StateValueFrom<MachineOf<TEntry>>;
  output: OutputFrom<MachineOf<TEntry>>;
};

/** The child machines a machine invokes run as jobs `<parent id>.<src>`: their entries. */
type ChildEntries<TId extends string, M> = ActorsOf<M> extends infer A
  ? A extends { src: infer S extends string; logic: infer L extends AnyStateMachine }
    ? { id: `${TId}.${S}`; machine: L }
    : never
  : never;

/** The entries a machines option holds (an array, a tuple or any iterable). */
type EntriesOf<TMachines> = TMachines extends Iterable<infer E> ? E : never;

/** Every entry, with the child machines its machine invokes (one level). */
type AllEntries<TMachines> = EntriesOf<TMachines> | ChildEntries<MachineIdOf<EntriesOf<TMachines>>, MachineOf<EntriesOf<TMachines>>>;

/** The typed catalog of machine entries whose ids are all literal. */
type TypedCatalog<E> = { [Entry in E as MachineIdOf<Entry>]: TypesOf<Entry> };

/**
 * The catalog of a `machines` option: typed by machine id when every id is known to the
 * compiler, else {@link UntypedCatalog}.
 *
 * @example
 * type Machines = CatalogOf<[typeof jobLifecycle, typeof exportJob]>;
 * type Input = Machines['export-job']['input']; // { dataset: string; rows?: number; ... }
 */
export type CatalogOf<TMachines> = [EntriesOf<TMachines>] extends [never]
  ? UntypedCatalog
  : IsLiteral<MachineIdOf<EntriesOf<TMachines>>> extends true
    ? TypedCatalog<AllEntries<TMachines>>
    : UntypedCatalog;

/** The machine ids of a catalog. */
export type MachineIds<C extends MachineCatalog> = keyof C & string;

/** True when a machine needs no input (its input type takes `undefined` or `{}`). */
export type InputOptional<TInput> = undefined extends TInput ? true : {} extends TInput ? true : false;

/** What `start` takes after the machine id: the input (optional when the machine needs none) and options. */
export type StartArgs<TInput, TOptions> = InputOptional<TInput> extends true ? [input?: TInput, options?: TOptions] : [input: TInput, options?: TOptions];
