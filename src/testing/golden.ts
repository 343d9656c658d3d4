import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { JsonValue } from '../index.ts';
import { SampleError, toJson, type PathStep } from './model.ts';
import type { GeneratedPaths } from './paths.ts';

/**
 * Golden files: each path's final state, status and context, written by `spool test --update`
 * (or `update: true`) and compared afterwards, the way vitest snapshots work. Each recorded path
 * is replayed by its steps on the current machine, so a change of behaviour shows as a changed
 * final state, and a new or vanished path as one the file does not know.
 */
export interface GoldenFile {
  machine: string;
  version: string;
  paths: GoldenPath[];
}

export interface GoldenPath {
  name: string;
  input: JsonValue;
  steps: PathStep[];
  final: { value: JsonValue; context: JsonValue; status: string };
}

/** The directory golden files go in, next to the machines module: `<module dir>/__paths__/`. */
export const GOLDEN_DIR = '__paths__';

/**
 * Where a machine's golden file is: `golden` when it is a path (relative to the working
 * directory), else `<dir of module>/__paths__/<machine id>.json`.
 */
export function goldenPath(golden: string | true, machineId: string, module: string | undefined): string {
  if (typeof golden === 'string') return resolve(golden);
  if (module === undefined) throw new SampleError(`golden: true for ${machineId} needs \`module\` (the file is written next to it), or give the golden file's path as \`golden\`.`);
  return join(dirname(resolve(module)), GOLDEN_DIR, `${machineId.replace(/[^A-Za-z0-9._@-]/g, '_')}.json`);
}

/** What the paths record: every path's input, steps and final state. */
export function goldenOf(generated: GeneratedPaths): GoldenFile {
  return {
    machine: generated.machineId,
    version: generated.version,
    paths: generated.paths.map((p) => {
      const last = p.steps.at(-1)?.expect ?? p.start;
      return { name: p.name, input: p.input, steps: p.steps.map((s) => s.step), final: { value: last.value, context: last.context, status: last.status } };
    }),
  };
}

/**
 * Compare with the golden file, or write it: with `update`, and when it does not exist yet
 * (like vitest snapshots), except on CI (env `CI`), where a missing file is a difference.
 */
export function checkGolden(file: string, generated: GeneratedPaths, update: boolean): { written: boolean; diffs: Array<{ name: string; message: string }> } {
  if (update || (!existsSync(file) && !process.env['CI'])) {
    writeGolden(file, generated);
    return { written: true, diffs: [] };
  }
  return { written: false, diffs: compareGolden(file, generated) };
}

export function writeGolden(file: string, generated: GeneratedPaths): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(goldenOf(generated), null, 2)}\n`);
}

/** A golden file's content, or null when it does not exist or does not read. */
export function readGolden(file: string): GoldenFile | null {
  if (!existsSync(file)) return null;
  try {
    const golden = JSON.parse(readFileSync(file, 'utf8')) as GoldenFile;
    return Array.isArray(golden.paths) ? golden : null;
  } catch {
    return null;
  }
}

/** The differences between the golden file and the machine now: one message per path (empty when they agree). */
export function compareGolden(file: string, generated: GeneratedPaths): Array<{ name: string; message: string }> {
  if (!existsSync(file)) return [{ name: '(golden file)', message: `No golden file ${file}: run \`spool test --update\` (or set \`update: true\`) to write it.` }];
  const golden = readGolden(file);
  if (!golden) return [{ name: '(golden file)', message: `Golden file ${file} is not readable JSON with a "paths" array: run \`spool test --update\` to write it again.` }];
  return diffGolden(golden, file, generated);
}

/** The differences between recorded paths (of `file`) and the machine now. */
export function diffGolden(golden: GoldenFile, file: string, generated: GeneratedPaths): Array<{ name: string; message: string }> {
  const out: Array<{ name: string; message: string }> = [];
  const recorded = new Set<string>();
  for (const g of golden.paths) {
    recorded.add(JSON.stringify([g.input, g.steps]));
    const got = replayFinal(generated, g);
    if (typeof got === 'string') {
      out.push({ name: g.name, message: `golden path "${g.name}" (${file}): ${got}` });
      continue;
    }
    const diffs: string[] = [];
    if (JSON.stringify(got.value) !== JSON.stringify(g.final.value)) diffs.push(`state ${JSON.stringify(got.value)}, golden ${JSON.stringify(g.final.value)}`);
    if (got.status !== g.final.status) diffs.push(`status ${got.status}, golden ${g.final.status}`);
    if (JSON.stringify(got.context) !== JSON.stringify(g.final.context)) diffs.push(`context ${JSON.stringify(got.context)}, golden ${JSON.stringify(g.final.context)}`);
    if (diffs.length > 0) out.push({ name: g.name, message: `golden path "${g.name}" ends differently (${file}): ${diffs.join('; ')}. Run \`spool test --update\` if the change is intended.` });
  }
  for (const p of generated.paths) {
    if (recorded.has(JSON.stringify([p.input, p.steps.map((s) => s.step)]))) continue;
    out.push({ name: p.name, message: `path "${p.name}" is not in the golden file ${file}: run \`spool test --update\` if the change is intended.` });
  }
  return out;
}

/** A golden path's final state on the machine now, or why its steps no longer replay. */
function replayFinal(generated: GeneratedPaths, g: GoldenPath): { value: JsonValue; context: JsonValue; status: string } | string {
  const { model } = generated;
  let state;
  try {
    state = model.initial(g.input);
  } catch (error) {
    return `the start fails: ${(error as Error).message}`;
  }
  for (const [i, step] of g.steps.entries()) {
    try {
      state = model.step(state, step);
    } catch (error) {
      return `step ${i + 1} (${step.type}) is no longer possible: ${(error as Error).message}`;
    }
  }
  return { value: toJson(state.machine.value), context: toJson(state.machine.context), status: state.status };
}
