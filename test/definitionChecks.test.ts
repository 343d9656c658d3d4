/**
 * Definitions checked at registration: a misspelt activity, policy key, cancel state or event,
 * event schema or sensitive name is a MachineDefinitionError naming the near name, and the
 * reference machines and test fixtures still register.
 */
import { describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { z } from 'zod';
import { MachineDefinitionError, MachineRegistry } from '../src/internal.ts';
import * as reference from '../machines/index.ts';
import * as fixtures from './fixtures/machines.ts';
import * as opsFixtures from './fixtures/opsMachines.ts';
import * as pathFixtures from './fixtures/pathMachines.ts';
import * as childPathFixtures from './fixtures/childPathMachines.ts';
import { isJobDefinition, isStateMachine } from '../src/runtime/registry.ts';
import { nearestName } from '../src/base/names.ts';

const child = setup({ actors: { stamp: fromPromise(async () => 'ok') } }).createMachine({
  id: 'child',
  initial: 'stamping',
  states: { stamping: { invoke: { id: 'stamp', src: 'stamp', onDone: 'done' } }, done: { type: 'final' } },
});

const render = setup({ actors: { render: fromPromise(async () => 'ok'), child } }).createMachine({
  id: 'render',
  initial: 'idle',
  states: {
    idle: { on: { START: 'rendering', CANCEL: 'cancelled', 'user.*': 'idle' } },
    rendering: { invoke: { id: 'render', src: 'render', onDone: 'checking' } },
    checking: { invoke: { id: 'child', src: 'child', onDone: 'done' } },
    cancelled: { type: 'final' },
    done: { type: 'final' },
  },
});

const input = z.object({ width: z.number(), owner: z.object({ card: z.string() }) });

/** The error `register` throws for this definition. */
function refusal(def: Record<string, unknown>): MachineDefinitionError {
  try {
    new MachineRegistry([{ machine: render, ...def } as never]);
  } catch (error) {
    expect(error).toBeInstanceOf(MachineDefinitionError);
    return error as MachineDefinitionError;
  }
  throw new Error('registered');
}

describe('definitions checked at registration', () => {
  it('refuses an activity name that is not an actor, suggesting the near one', () => {
    const e = refusal({ activities: { rendr: { maxAttempts: 2 } } });
    expect(e.code).toBe('SPOOL_BAD_MACHINE');
    expect(e.message).toContain('activities names "rendr", which is not one of the machine\'s actors (did you mean "render"?)');
    expect(e.details).toMatchObject({ activity: 'rendr' });
  });

  it("accepts the actors of child machines (they share the parent's policies)", () => {
    const registry = new MachineRegistry([{ machine: render, activities: { stamp: { maxAttempts: 1 }, render: { unsafeToRepeat: true } } }]);
    expect(registry.get('render.child', '1')?.activities['stamp']).toEqual({ maxAttempts: 1 });
  });

  it('refuses unknown policy, backoff, cancel and definition keys', () => {
    expect(refusal({ activities: { render: { maxAttempt: 2 } } }).message).toContain('unknown policy key "maxAttempt" (did you mean "maxAttempts"?)');
    expect(refusal({ activities: { render: { backoff: { initalMs: 5 } } } }).message).toContain('unknown backoff key "initalMs" (did you mean "initialMs"?)');
    expect(refusal({ cancel: { stat: 'cancelled' } }).message).toContain('unknown cancel key "stat" (did you mean "state"?)');
    expect(refusal({ sensitiv: ['card'] }).message).toContain('unknown definition key "sensitiv" (did you mean "sensitive"?)');
  });

  it('refuses a cancel state or event the machine lacks', () => {
    const state = refusal({ cancel: { state: 'canceled' } });
    expect(state.message).toContain('cancel.state "canceled" is not a state of the machine (did you mean "cancelled"?)');
    expect(state.details).toMatchObject({ state: 'canceled' });
    expect(refusal({ cancel: { event: 'CANCLE' } }).message).toContain('cancel.event "CANCLE" is not an event the machine handles (did you mean "CANCEL"?)');
    expect(() => new MachineRegistry([{ machine: render, cancel: { state: 'cancelled', event: 'CANCEL' } }])).not.toThrow();
  });

  it('refuses a schema for an event the machine never handles; wildcards count', () => {
    const e = refusal({ events: { STRAT: z.object({ type: z.literal('STRAT') }) } });
    expect(e.message).toContain('events has a schema for "STRAT", which the machine never handles (did you mean "START"?)');
    const ok = { START: z.object({ type: z.literal('START') }), 'user.login': z.object({ type: z.string() }), 'user.*': z.object({ type: z.string() }) };
    expect(() => new MachineRegistry([{ machine: render, events: ok }])).not.toThrow();
  });

  it('refuses a sensitive name no schema describes, at any depth', () => {
    const e = refusal({ input, sensitive: ['crad'] });
    expect(e.message).toContain('sensitive name "crad" matches no property of its input or event schemas (did you mean "card"?)');
    expect(() => new MachineRegistry([{ machine: render, input, sensitive: ['card'] }])).not.toThrow();
    // Without schemas there is nothing to check it against.
    expect(() => new MachineRegistry([{ machine: render, sensitive: ['anything'] }])).not.toThrow();
  });

  it('registers every reference machine and test fixture', () => {
    const modules = [reference, fixtures, opsFixtures, pathFixtures, childPathFixtures];
    const defs = modules.flatMap((m) => Object.values(m)).filter((v) => isStateMachine(v) || isJobDefinition(v));
    expect(defs.length).toBeGreaterThan(10);
    for (const def of defs) expect(() => new MachineRegistry([def as never])).not.toThrow();
  });

  it('suggests only near names', () => {
    expect(nearestName('maxAttempt', ['maxAttempts', 'backoff'])).toBe('maxAttempts');
    expect(nearestName('zzz', ['maxAttempts', 'backoff'])).toBeUndefined();
  });
});
