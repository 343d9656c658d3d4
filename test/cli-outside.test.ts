/**
 * A machines module written where a new user might write one: in a folder of its own, outside
 * any project (no package.json, no node_modules), importing xstate and zod. `spool` loads it as
 * ESM (a .js file too, when it is written as one) and resolves those imports to Spool's own
 * install, in the command's process and in the child processes of `spool test`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from '../src/index.ts';
import { runSpool } from './helpers/spoolCli.ts';

const DIR = mkdtempSync(join(tmpdir(), 'spool-outside-'));
const MODULE = join(DIR, 'tickets.ts');

beforeAll(() => {
  writeFileSync(
    MODULE,
    `import { assign, setup } from 'xstate';
import { z } from 'zod';

const ticket = setup({ types: { context: {} as { title: string; replied: boolean } } }).createMachine({
  id: 'ticket',
  context: ({ input }: { input: { title: string } }) => ({ title: input.title, replied: false }),
  initial: 'open',
  states: {
    open: { on: { REPLY: { actions: assign({ replied: true }) }, CLOSE: 'closed' } },
    closed: { type: 'final' },
  },
});

export default [{ machine: ticket, version: '1', input: z.object({ title: z.string().min(1) }) }];
export const pathTests = { ticket: { input: { title: 'printer' } } };
`,
  );
});
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

const spool = (...args: string[]) => runSpool(['--db', join(DIR, 'tickets.db'), '--machines', MODULE, ...args], DIR);

describe('a machines module outside any project', () => {
  it('a .js module written as ESM loads too; one with a syntax error is one line naming where', async () => {
    const js = join(DIR, 'light.js');
    writeFileSync(js, `import { createMachine } from 'xstate';\nexport const light = createMachine({ id: 'light', initial: 'green', states: { green: { on: { NEXT: 'red' } }, red: { type: 'final' } } });\n`);
    const listed = await runSpool(['--machines', js, 'machines', '--json'], DIR);
    expect(listed.stderr).toBe('');
    expect(JSON.parse(listed.stdout)).toMatchObject({ machines: [{ id: 'light', version: 1, events: ['NEXT'] }] });
    const broken = join(DIR, 'broken.ts');
    writeFileSync(broken, `import { createMachine } from 'xstate';\nexport const x = createMachine({ id: 'x' ;\n`);
    const run = await runSpool(['--machines', broken, 'machines'], DIR);
    expect(run.code).toBe(1);
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(run.stderr).toContain(`spool: SPOOL_BAD_MACHINES_MODULE: Could not load machines module ${broken}: Transform failed with 1 error: ${broken}:2:`);
  });

  it("a module importing spool's defineJob and activity resolves them to Spool's own install, and records its activity", async () => {
    const typed = join(DIR, 'typed.ts');
    writeFileSync(
      typed,
      `import { setup, assign } from 'xstate';
import { activity, defineJob } from 'spool';

const machine = setup({ actors: { shout: activity<string, { word: string }>(async ({ input, attempt }) => input.word.toUpperCase() + attempt) } }).createMachine({
  id: 'shout',
  context: { said: '' },
  initial: 'saying',
  states: {
    saying: { invoke: { id: 'shout', src: 'shout', input: { word: 'hi' }, onDone: { target: 'said', actions: assign({ said: ({ event }) => event.output }) } } },
    said: { type: 'final' },
  },
});
export const shout = defineJob({ machine, activities: { shout: { maxAttempts: 2 } } });
`,
    );
    const listed = await runSpool(['--machines', typed, 'machines', '--json'], DIR);
    expect(listed.stderr).toBe('');
    expect(JSON.parse(listed.stdout)).toMatchObject({ machines: [{ id: 'shout', version: 1 }] });
    const db = join(DIR, 'typed.db');
    expect((await runSpool(['--db', db, '--machines', typed, 'start', 'shout', '--id', 's1'], DIR)).code).toBe(0);
    const shown = JSON.parse((await runSpool(['--db', db, '--machines', typed, 'show', 's1', '--json'], DIR)).stdout) as { job: Job; effects: { src: string; status: string }[] };
    expect(shown.job).toMatchObject({ value: 'saying' });
    expect(shown.effects).toMatchObject([{ src: 'shout', status: 'pending' }]);
  });

  it('loads, validates its input with its own zod schema, and runs its jobs', async () => {
    const machines = await spool('machines', '--json');
    expect(machines.stderr).toBe('');
    expect(JSON.parse(machines.stdout)).toMatchObject({ module: MODULE, machines: [{ id: 'ticket', version: 1, events: ['CLOSE', 'REPLY'] }] });
    const bad = await spool('start', 'ticket', '--input', '{"title":""}');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^spool: SPOOL_INVALID: Invalid input for ticket: title/);
    const started = await spool('start', 'ticket', '--id', 't1', '--input', '{"title":"printer"}', '--json');
    expect(started.code).toBe(0);
    for (const event of ['REPLY', 'REPLY', 'CLOSE']) expect((await spool('send', 't1', event)).code).toBe(0);
    const shown = JSON.parse((await spool('show', 't1', '--json')).stdout) as { job: Job };
    expect(shown.job).toMatchObject({ value: 'closed', status: 'done', context: { title: 'printer', replied: true } });
  });

  it('spool test walks it, with a child process SIGKILLed between steps loading it the same way', async () => {
    const run = await spool('test', '--child-crash', '1', '--json');
    expect(run.stderr).toBe('');
    const result = JSON.parse(run.stdout) as { ok: boolean; machines: { machineId: string; gaps: unknown[]; runs: Record<string, number> }[] };
    expect(result.ok).toBe(true);
    expect(result.machines).toMatchObject([{ machineId: 'ticket', gaps: [] }]);
    expect(result.machines[0]!.runs['child']).toBeGreaterThan(0);
  });
});

/**
 * A machines module split into files, as a TypeScript project writes it: the entry imports local
 * helpers (extensionless and with `.ts`) that import zod themselves, in a folder with no
 * node_modules. The helpers load as ESM like the entry, and their zod resolves to Spool's.
 */
function writeProject(packageJson: string | undefined): { dir: string; module: string } {
  const dir = mkdtempSync(join(tmpdir(), 'spool-helpers-'));
  mkdirSync(join(dir, 'src'));
  if (packageJson !== undefined) writeFileSync(join(dir, 'package.json'), packageJson);
  writeFileSync(join(dir, 'src', 'schemas.ts'), `import { z } from 'zod';\nexport const orderInput = z.object({ item: z.string().min(1) });\n`);
  writeFileSync(
    join(dir, 'src', 'events.ts'),
    `import { z } from 'zod';\nexport const events = { PAY: z.object({ type: z.literal('PAY'), card: z.string().min(4) }) };\n`,
  );
  const module = join(dir, 'src', 'machines.ts');
  writeFileSync(
    module,
    `import { setup } from 'xstate';
import { orderInput } from './schemas';
import { events } from './events.ts';

const order = setup({}).createMachine({
  id: 'order',
  initial: 'open',
  states: { open: { on: { PAY: 'paid' } }, paid: { type: 'final' } },
});

export const definition = { machine: order, version: '1', input: orderInput, events };
`,
  );
  return { dir, module };
}

describe('a machines module importing local helpers that import zod', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const runsWithHelpers = async (packageJson: string | undefined): Promise<void> => {
    const { dir, module } = writeProject(packageJson);
    dirs.push(dir);
    const spool = (...args: string[]) => runSpool(['--db', join(dir, 'orders.db'), '--machines', module, ...args], dir);
    const machines = await spool('machines', '--json');
    expect(machines.stderr).toBe('');
    expect(JSON.parse(machines.stdout)).toMatchObject({ module, machines: [{ id: 'order', version: 1, events: ['PAY'] }] });
    const bad = await spool('start', 'order', '--input', '{"item":""}');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^spool: SPOOL_INVALID: Invalid input for order: item/);
    expect((await spool('start', 'order', '--id', 'o1', '--input', '{"item":"lamp"}')).code).toBe(0);
    const badEvent = await spool('send', 'o1', '{"type":"PAY","card":"1"}');
    expect(badEvent.code).toBe(1);
    expect(badEvent.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(badEvent.stderr).toMatch(/^spool: SPOOL_INVALID: Invalid PAY event for order: card/);
    const paid = await spool('send', 'o1', '{"type":"PAY","card":"4242"}');
    expect(paid.stderr).toBe('');
    expect(paid.code).toBe(0);
    const shown = JSON.parse((await spool('show', 'o1', '--json')).stdout) as { job: Job };
    expect(shown.job).toMatchObject({ value: 'paid', status: 'done', input: { item: 'lamp' } });
  };

  it('in a folder whose package.json has no "type": machines, start and send work', async () => {
    await runsWithHelpers('{ "name": "orders" }\n');
  });

  it('in a folder with no package.json at all: machines, start and send work', async () => {
    await runsWithHelpers(undefined);
  });
});
