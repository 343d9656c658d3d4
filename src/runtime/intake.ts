/**
 * Intake: what the runtime checks before anything is written. Inputs, events, outputs and asset
 * metadata as JSON within the size and depth limits and their machine's schemas; ids and
 * options by name; a repeated `start` against the job it repeats.
 */
import type { JobRecord, JobStore, JsonValue } from '../ports/store.ts';
import { JOB_STATUSES } from '../ports/store.ts';
import type { ListFilter, SendOptions } from './api.ts';
import { IdempotencyConflictError, PayloadTooLargeError, UnknownEventError, ValidationError } from '../base/errors.ts';
import { NotJsonError, plainJson } from '../base/json.ts';
import { utf8Length } from '../base/bytes.ts';
import { redactText } from '../base/redaction.ts';
import { eventSchemaFor, namesEventType } from './registry.ts';
import { type RegisteredMachine } from '../base/definition.ts';
import { unknownNames } from './options.ts';

/** Deepest JSON nesting accepted in inputs, events and outputs. */
export const MAX_DEPTH = 64;
/** Event ids the runtime gives its own events: a caller cannot take them. */
const RESERVED_EVENT_ID = /^(spool\.|timer~|effect~|self~|parent~|child~|redeliver~|retry-of:)/;
/** Largest accepted input or event by default, in bytes of JSON. */
export const DEFAULT_MAX_PAYLOAD = 256 * 1024;
const EVENT_ID_PATTERN = /^[\x21-\x7e]{1,200}$/;

/** The checks of values a caller hands the runtime, with this runtime's payload limit and owner. */
export class Intake {
  readonly #maxPayload: number;
  readonly #store: JobStore;
  readonly #owner: string | null;

  constructor(store: JobStore, owner: string | null, maxPayload: number) {
    this.#store = store;
    this.#owner = owner;
    this.#maxPayload = maxPayload;
  }

  /** A job's input: JSON, and what its machine's input schema makes of it. */
  validateInput(def: RegisteredMachine, input: unknown): JsonValue {
    const json = this.jsonPayload('input', input);
    if (!def.input) {
      if (json === null || typeof json !== 'object' || Array.isArray(json)) {
        throw new ValidationError(`Input for ${def.id} must be a JSON object.`, { machineId: def.id });
      }
      return json;
    }
    const result = def.input.safeParse(json);
    if (!result.success) {
      // A schema's message may quote the value it refused: sensitive ones are redacted like any error's.
      throw new ValidationError(`Invalid input for ${def.id}: ${redactText(formatIssues(result.error), json, def.sensitive)}`, { machineId: def.id });
    }
    return schemaOutput(`input (as ${def.id}'s input schema gave it)`, result.data, json);
  }

  /** An event: a JSON object with a type its machine names (none reserved), valid by the type's schema. */
  validateEvent(def: RegisteredMachine | undefined, event: unknown): JsonValue {
    const json = this.jsonPayload('event', event);
    if (json === null || typeof json !== 'object' || Array.isArray(json) || typeof json['type'] !== 'string' || json['type'] === '') {
      throw new ValidationError('An event must be a JSON object with a non-empty string "type", e.g. {"type":"START"}.');
    }
    const type = json['type'];
    if (type.startsWith('xstate.') || type.startsWith('spool.')) {
      throw new UnknownEventError(`Event type "${type}" is reserved for the runtime; send your machine's own events.`, { eventType: type });
    }
    if (!def) return json;
    if (!namesEventType(def, type)) {
      const known = [...def.eventTypes].filter((t) => !t.startsWith('xstate.')).sort().join(', ');
      throw new UnknownEventError(`Machine ${def.id}@${def.version} has no event "${type}" (known: ${known}).`, { eventType: type, machineId: def.id });
    }
    const result = eventThroughSchema(def, type, json);
    if (!result.ok) {
      throw new ValidationError(`Invalid ${type} event for ${def.id}: ${redactText(formatIssues(result.error), json, def.sensitive)}`, { eventType: type, machineId: def.id });
    }
    return result.event;
  }

  /**
   * Any value as a private plain JSON copy ({@link plainJson}: checked and copied in one walk, so a
   * `toJSON`, a getter or a nested `undefined` cannot make what is stored differ from what is
   * checked), refused when JSON cannot hold it, it is too deep, or over `maxPayloadBytes`.
   */
  jsonPayload(what: string, value: unknown): JsonValue {
    const json = storedJson(what, value, this.#maxPayload);
    // The text a store writes for this copy: its size is the payload's.
    const bytes = utf8Length(JSON.stringify(json));
    if (bytes > this.#maxPayload) {
      throw new PayloadTooLargeError(`The ${what} is ${bytes} bytes; the limit is ${this.#maxPayload} (maxPayloadBytes).`, { bytes, limit: this.#maxPayload });
    }
    return json;
  }

  /** The job a `start` repeats, by its id or else its idempotency key. */
  async findExisting(jobId: string, key: string | null): Promise<JobRecord | undefined> {
    const byId = await this.#store.getJob(jobId);
    if (byId) return byId;
    return key === null ? undefined : this.#store.findByIdempotencyKey(this.#owner, key);
  }

  /** Refuse a repeated `start` that is not the same request as the job it found (`record`). */
  checkSameStart(record: Pick<JobRecord, 'id' | 'owner' | 'idempotencyKey' | 'machineId' | 'inputHash'>, machineId: string, inputHash: string, jobId: string, key: string | null, requestedId: string | undefined): void {
    if (record.owner !== this.#owner) {
      throw new IdempotencyConflictError(`Job id "${jobId}" is taken; choose another id.`, { jobId });
    }
    const what = key !== null && record.idempotencyKey === key ? `idempotency key "${key}"` : `job id "${jobId}"`;
    if (requestedId !== undefined && record.id !== requestedId) {
      throw new IdempotencyConflictError(`Idempotency key "${key}" belongs to job ${record.id}, not "${requestedId}"; reuse a key only for the same request.`, { jobId: record.id });
    }
    // The job with this id was started under another key (or none): returning it would leave the
    // key unrecorded, and a later start with the key alone would make a second job.
    if (key !== null && record.idempotencyKey !== key) {
      const had = record.idempotencyKey === null ? 'no idempotency key' : `idempotency key "${record.idempotencyKey}"`;
      throw new IdempotencyConflictError(`Job ${record.id} already exists, started with ${had}, not "${key}"; reuse a job id only with the key it was started with.`, { jobId: record.id });
    }
    if (record.machineId !== machineId) {
      throw new IdempotencyConflictError(`A job with ${what} already exists (${record.id}) and runs machine ${record.machineId}, not ${machineId}.`, { jobId: record.id });
    }
    if (record.inputHash !== inputHash) {
      throw new IdempotencyConflictError(
        `A job with ${what} already exists (${record.id}) with different input; reuse the key only for the same request.`,
        { jobId: record.id },
      );
    }
  }
}

/**
 * An event (a JSON object of `type`) through its type's schema, as the runtime stores and applies
 * it and the path model (src/testing/model.ts) predicts it: the schema's output as JSON, still of
 * `type` ({@link withType}); `error` when the schema refuses it. No schema: the event as it is.
 */
export function eventThroughSchema(def: RegisteredMachine, type: string, json: JsonValue): { ok: true; event: JsonValue } | { ok: false; error: unknown } {
  const schema = eventSchemaFor(def, type);
  if (!schema) return { ok: true, event: json };
  const result = schema.safeParse(json);
  if (!result.success) return { ok: false, error: result.error };
  return { ok: true, event: withType(def, type, schemaOutput(`${type} event (as ${def.id}'s schema gave it)`, result.data, json)) };
}

/**
 * An event as its schema gave it, still of the type it was sent as: the type routes it (history,
 * the machine's transition), so a schema that leaves `type` out (`z.object({ by: z.string() })`
 * strips keys it does not name) keeps the sent one, and one that gives another type or no object
 * is refused as the definition's mistake.
 */
function withType(def: RegisteredMachine, type: string, event: JsonValue): JsonValue {
  if (event === null || typeof event !== 'object' || Array.isArray(event)) {
    throw new ValidationError(`${def.id}'s schema for ${type} events gave ${event === null ? 'null' : Array.isArray(event) ? 'an array' : `a ${typeof event}`}, not an event object; an event schema must give an object.`, { eventType: type, machineId: def.id });
  }
  if (event['type'] === type) return event;
  if (event['type'] !== undefined) {
    throw new ValidationError(`${def.id}'s schema for ${type} events changed the event's type to ${JSON.stringify(event['type'])}; an event schema must keep its type.`, { eventType: type, machineId: def.id });
  }
  return { type, ...event };
}

/**
 * What a schema made of a checked value, as stored: the same checks and copy (a schema's
 * `transform` may give a Date, stored as its ISO string, or something JSON cannot hold, refused).
 */
function schemaOutput(what: string, data: unknown, checked: JsonValue): JsonValue {
  return data === checked ? checked : storedJson(what, data);
}

/** A progress value: a number from 0 to 100. */
export function checkPercent(percent: unknown): void {
  if (typeof percent !== 'number' || !Number.isFinite(percent) || percent < 0 || percent > 100) throw new ValidationError('Progress must be a number from 0 to 100.');
}


/**
 * `value` as the plain JSON copy that is validated and stored ({@link plainJson}), named `what` in
 * a refusal: a ValidationError naming the path (`event.items[2].when is a function`), or a
 * PayloadTooLargeError when it holds more values than `maxPayload` bytes could write.
 */
export function storedJson(what: string, value: unknown, maxPayload = Number.POSITIVE_INFINITY): JsonValue {
  try {
    return plainJson(value, what, { maxDepth: MAX_DEPTH, maxValues: maxPayload });
  } catch (error) {
    if (error instanceof NotJsonError) {
      if (error.kind === 'size') throw new PayloadTooLargeError(`The ${what} holds more values than ${maxPayload} bytes of JSON can write (maxPayloadBytes).`, { bytes: maxPayload + 1, limit: maxPayload });
      if (error.kind === 'depth') throw new ValidationError(`The ${what} is nested deeper than ${MAX_DEPTH} levels (at ${error.path}).`);
      throw new ValidationError(`The ${what} cannot be stored as JSON: ${error.message}.`, { path: error.path });
    }
    // A getter or a proxy that throws, or a stack too deep to walk.
    throw new ValidationError(`The ${what} cannot be read as JSON: ${(error as Error)?.message ?? String(error)}`);
  }
}

/** A non-empty string, or a ValidationError naming `what`. */
export function requireText(what: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw new ValidationError(`A ${what} must be a non-empty string.`);
}

/**
 * An options object (or nothing), with only the `known` names: a misspelt option (`jobid`) would
 * otherwise be ignored and its default used, which for an id or a key makes a retry a duplicate.
 */
export function requireOptions<T>(options: T, call: string, known: readonly string[]): T {
  if (options === undefined) return {} as T;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new ValidationError(`${call}: options must be an object (or left out).`);
  const unknown = unknownNames(options, known);
  if (unknown) throw new ValidationError(`${call}: ${unknown.text}.`, { option: unknown.first });
  return options;
}

/** An id a caller chose (job id, event id, idempotency key): 1-200 printable ASCII characters. */
export function checkId(what: string, id: unknown): void {
  if (typeof id !== 'string' || !EVENT_ID_PATTERN.test(id)) {
    throw new ValidationError(`${/^[aeiou]/.test(what) ? 'An' : 'A'} ${what} must be 1-200 printable ASCII characters without spaces.`);
  }
}

/** A schema's issues (zod), the first five, as one line. */
export function formatIssues(error: unknown): string {
  const issues = (error as { issues?: { path: PropertyKey[]; message: string }[] }).issues ?? [];
  if (issues.length === 0) return String(error);
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}


/** `list`'s filter, each field by name and type. */
export function checkListFilter(filter: ListFilter): ListFilter {
  filter = requireOptions(filter, 'list', ['machineId', 'state', 'status', 'quarantined', 'exhausted', 'cancelRequested', 'suspended', 'stuck', 'afterId', 'limit']);
  for (const key of ['machineId', 'state', 'status', 'afterId'] as const) {
    if (filter[key] !== undefined && typeof filter[key] !== 'string') throw new ValidationError(`list: ${key} must be a string.`);
  }
  if (filter.status !== undefined && !JOB_STATUSES.includes(filter.status)) {
    throw new ValidationError(`list: status must be one of ${JOB_STATUSES.join(', ')}; got "${filter.status}".`);
  }
  for (const key of ['quarantined', 'exhausted', 'cancelRequested', 'stuck', 'suspended'] as const) {
    const v = (filter as Record<string, unknown>)[key];
    if (v !== undefined && typeof v !== 'boolean') throw new ValidationError(`list: ${key} must be true or false.`);
  }
  if (filter.limit !== undefined && !(Number.isSafeInteger(filter.limit) && filter.limit >= 0)) throw new ValidationError('list: limit must be a non-negative safe integer (at most 2^53 - 1).');
  return filter;
}

/** `send`'s options: `wait` a boolean, `eventId` a valid id that is not one of the runtime's own. */
export function checkSendOptions(options: SendOptions): SendOptions {
  options = requireOptions(options, 'send', ['eventId', 'wait']);
  if (options.wait !== undefined && typeof options.wait !== 'boolean') throw new ValidationError('send: wait must be true or false.');
  if (options.eventId !== undefined) {
    checkId('event id', options.eventId);
    if (RESERVED_EVENT_ID.test(options.eventId)) {
      throw new ValidationError(`Event id "${options.eventId}" is reserved for the runtime's own events (spool.*, timer~, effect~, self~, parent~, child~, redeliver~); choose another.`);
    }
  }
  return options;
}

/** `waitFor`'s arguments. */
export function checkWait(jobId: unknown, predicate: unknown, options: WaitOptions): WaitOptions {
  requireText('job id', jobId);
  if (typeof predicate !== 'function') throw new ValidationError('waitFor needs a predicate function: (job) => boolean.');
  options = requireOptions(options, 'waitFor', ['timeoutMs', 'signal']);
  if (options.timeoutMs !== undefined && !(typeof options.timeoutMs === 'number' && options.timeoutMs >= 0 && Number.isFinite(options.timeoutMs))) {
    throw new ValidationError('waitFor timeoutMs must be a non-negative number of milliseconds.');
  }
  return options;
}

/** Options of `waitFor`. */
export interface WaitOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Options of `close`. */
export interface CloseOptions {
  graceMs?: number;
  releaseAttempts?: boolean;
}

/** `close`'s options, checked before anything stops: a misspelt `grace` would otherwise abort every activity at once. */
export function checkClose(options: CloseOptions): CloseOptions {
  options = requireOptions(options, 'close', ['graceMs', 'releaseAttempts']);
  if (options.graceMs !== undefined && !(typeof options.graceMs === 'number' && options.graceMs >= 0)) throw new ValidationError('close: graceMs must be a number of ms, 0 or more.', { option: 'graceMs' });
  if (options.releaseAttempts !== undefined && typeof options.releaseAttempts !== 'boolean') throw new ValidationError('close: releaseAttempts must be a boolean.', { option: 'releaseAttempts' });
  return options;
}

/** An asset to attach: a string `type`, a non-empty string `uri`, an optional non-negative integer `size`. */
export function checkAsset(asset: { type?: unknown; uri?: unknown; size?: unknown } | null): void {
  if (asset === null || typeof asset !== 'object' || typeof asset.type !== 'string' || typeof asset.uri !== 'string' || asset.uri.length === 0) {
    throw new ValidationError('An asset needs a string `type` and a non-empty string `uri`.');
  }
  if (asset.size !== undefined && (!Number.isSafeInteger(asset.size) || (asset.size as number) < 0)) throw new ValidationError('An asset `size` must be a non-negative integer.');
}
