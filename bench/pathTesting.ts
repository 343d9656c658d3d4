/**
 * Section 4, path testing: generate and replay every path of the reference machines
 * (`collectPathTests(await import('../machines/index.ts'))` + `runPathTests`), three ways:
 *
 *   plain     every path replayed once on one runtime (no crash replay)
 *   restart   + every path replayed again with the runtime closed and reopened between every two steps
 *   child     + the one path per machine most worth it replayed in child processes SIGKILLed between steps
 *
 * Paths run on SQLite files (NORMAL, the path-test default) in a temp directory, after one
 * untimed plain run (module loading, JIT). Generation time is read from the progress events
 * (machine.started → machine.generated), replay time per mode from the `path.finished` events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { collectPathTests, generatePaths, isPathTestSubject, runPathTests, type RunMode } from '../src/testing/index.ts';
import { childSample } from '../src/testing/runPathTests.ts';

const MODULE = fileURLToPath(new URL('../machines/index.ts', import.meta.url));

export type PathConfig = 'plain' | 'restart' | 'child';

export interface PathTestingRun {
  config: PathConfig;
  ok: boolean;
  failures: string[];
  wallMs: number;
  generateMs: number;
  machines: number;
  paths: number;
  /** Steps over all paths (start excluded). */
  steps: number;
  runs: Record<RunMode, number>;
  /** Summed replay time per mode (ms). */
  replayMs: Record<RunMode, number>;
  /** Paths (counting every replay, whatever its mode) per second of wall clock. */
  pathRunsPerSec: number;
  perMachine: { machineId: string; paths: number; runs: Record<RunMode, number>; ms: number }[];
}

/**
 * Generated paths and their steps, counted once (generation is deterministic), and the child
 * processes a one-path-per-machine child-crash replay starts (one per step, start included).
 */
export async function pathInventory(): Promise<{ machines: number; paths: number; steps: number; childProcesses: number }> {
  const items = collectPathTests((await import('../machines/index.ts')) as Record<string, unknown>);
  let paths = 0;
  let steps = 0;
  let childProcesses = 0;
  for (const item of items) {
    const generated = isPathTestSubject(item) ? generatePaths(item.definition, item.options) : generatePaths(item, {});
    paths += generated.paths.length;
    steps += generated.paths.reduce((n, p) => n + p.steps.length, 0);
    childProcesses += childSample(generated.paths, 1).reduce((n, p) => n + p.steps.length + 1, 0);
  }
  return { machines: items.length, paths, steps, childProcesses };
}

/** `db`: a postgres:// URL runs every path there (a new database per path run), else SQLite files. */
export async function runPathTesting(config: PathConfig, steps: number, db?: string): Promise<PathTestingRun> {
  const items = collectPathTests((await import('../machines/index.ts')) as Record<string, unknown>);
  const dir = mkdtempSync(join(tmpdir(), 'spool-bench-paths-'));
  const replayMs: Record<RunMode, number> = { plain: 0, restart: 0, child: 0 };
  let generateMs = 0;
  let machineStart = 0;
  try {
    const t0 = performance.now();
    const result = await runPathTests({
      definitions: items,
      crash: config === 'restart',
      sampleChildCrash: config === 'child' ? 1 : 0,
      module: MODULE,
      dir,
      ...(db === undefined ? {} : { db }),
      onProgress: (e) => {
        if (e.type === 'machine.started') machineStart = performance.now();
        else if (e.type === 'machine.generated') generateMs += performance.now() - machineStart;
        else if (e.type === 'path.finished') replayMs[e.mode] += e.durationMs;
      },
    });
    const wallMs = performance.now() - t0;
    const runs: Record<RunMode, number> = { plain: 0, restart: 0, child: 0 };
    for (const m of result.machines) for (const mode of ['plain', 'restart', 'child'] as const) runs[mode] += m.runs[mode];
    const failures = result.machines.flatMap((m) => [
      ...(m.error ? [`${m.machineId}: ${m.error}`] : []),
      ...m.failures.map((f) => `${m.machineId} path ${f.path} (${f.mode}): ${f.message.slice(0, 300)}`),
      ...m.gaps.map((g) => `${m.machineId}: uncovered ${JSON.stringify(g).slice(0, 200)}`),
    ]);
    return {
      config,
      ok: result.ok,
      failures,
      wallMs,
      generateMs,
      machines: result.machines.length,
      paths: result.machines.reduce((n, m) => n + m.paths, 0),
      steps,
      runs,
      replayMs,
      pathRunsPerSec: (runs.plain + runs.restart + runs.child) / (wallMs / 1000),
      perMachine: result.machines.map((m) => ({ machineId: m.machineId, paths: m.paths, runs: m.runs, ms: m.durationMs })),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
