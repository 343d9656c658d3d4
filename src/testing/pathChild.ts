/**
 * The child-process fixture of crash replays (`runPath(…, { mode: 'child' })`). It reads a
 * {@link ChildConfig} line and one {@link ChildCommand} line on stdin, opens the SQLite file
 * with a runtime running the definition from `module` (activities scripted), takes that one
 * step, and prints one JSON line: `ack` (with what the parent checks), `inflight` (the attempt
 * the next step interrupts is running: the parent SIGKILLs this process now), or `error`.
 * It then waits on stdin: the parent always ends it with SIGKILL.
 */
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { MachineRegistry, isStateMachine, type JobDefinition } from '../internal.ts';
import { driveStep, openRuntime, scriptedDefinition, type ActivityScript, type DriverContext } from './driver.ts';
import { observe, recordOf, type ChildCommand, type ChildConfig, type ChildMessage } from './runner.ts';
import { collectPathTests, isPathTestSubject } from './runPathTests.ts';
import { VirtualClock } from './VirtualClock.ts';

const print = (msg: ChildMessage) => process.stdout.write(`${JSON.stringify(msg)}\n`);

const lines = createInterface({ input: process.stdin });
const queue: string[] = [];
let wake: (() => void) | undefined;
lines.on('line', (line) => {
  queue.push(line);
  wake?.();
});
async function nextLine(): Promise<string> {
  while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
  return queue.shift()!;
}

/** Find the definition among the module's exports, as `collectPathTests` sees them. */
function findDefinition(mod: Record<string, unknown>, machineId: string, version: string): JobDefinition {
  for (const item of collectPathTests(mod)) {
    const candidate = isPathTestSubject(item) ? item.definition : item;
    const def: JobDefinition = isStateMachine(candidate) ? { machine: candidate } : candidate;
    try {
      if (new MachineRegistry([def]).get(machineId, version)?.source === def) return def;
    } catch {
      // not registrable: not the one
    }
  }
  throw new Error(`No export of the module is machine ${machineId}@${version}.`);
}

let index = -1;
try {
  const config = JSON.parse(await nextLine()) as ChildConfig;
  const command = JSON.parse(await nextLine()) as ChildCommand;
  index = command.index;
  const mod = (await import(pathToFileURL(config.module).href)) as Record<string, unknown>;
  const script: ActivityScript = { failAttempts: config.failAttempts, childFailAttempts: config.childFailAttempts, hang: null, onHang: () => undefined };
  const clock = new VirtualClock(config.now);
  const ctx: DriverContext = {
    file: config.file,
    clock,
    t0: config.t0,
    jobId: config.jobId,
    machineId: config.machineId,
    definition: scriptedDefinition(findDefinition(mod, config.machineId, config.version), config.jobId, script),
    script,
    synchronous: config.synchronous,
    runtime: null,
    die: async () => {
      print({ type: 'inflight', index, now: clock.now() });
      await new Promise<never>(() => undefined); // the parent SIGKILLs this process now
    },
  };
  await openRuntime(ctx);
  await driveStep(ctx, command.step, command.index, command.hang);
  const observation = await observe(ctx.runtime!, config.jobId, clock.now() - config.t0);
  print({ type: 'ack', index, now: clock.now(), observation, record: await recordOf(ctx.runtime!, config.jobId) });
  await nextLine(); // wait for the SIGKILL
} catch (error) {
  print({ type: 'error', index, message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  process.exitCode = 1;
  lines.close();
}
