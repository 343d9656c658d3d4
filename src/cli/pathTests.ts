/**
 * `spool test`: walk each machine's graph and replay every path through the runtime.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { MachineRegistry } from '../internal.ts';
import { isPostgresUrl } from '../../persistence/openStore.ts';
import { UsageError } from './errors.ts';
import { oneLine, table } from './format.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import { examples, globals, write, type CliIO } from './globals.ts';
import type { collectPathTests, MachinePathResult, PathTestProgress } from '../testing/runPathTests.ts';
import type { MutationResult } from '../testing/mutate.ts';

/** `spool test`; `setExitCode(1)` when a machine fails. */
export function addTestCommand(program: Command, io: CliIO, setExitCode: (code: number) => void): void {
  program
    .command('test')
    .description("walk each machine's graph: cover every transition, replay every path through the runtime, with a restart between every two steps")
    .addHelpText('after', examples('spool test', 'spool --machines ./my-machines.ts test --machine checkout --no-crash', 'spool test --seed 1234   # the random walks of an earlier run again', 'spool test --update   # rewrite the golden files', 'spool test --mutate   # which mutants of each machine its checks let through', 'spool --db postgres://spool@db.internal/spool test   # each run in a new database there, dropped after'))
    .option('--machine <id>', 'only this machine')
    .option('--no-crash', 'skip the replay with a restart between every two steps')
    .option('--child-crash <n>', 'paths per machine also replayed in a child process SIGKILLed between steps', '1')
    .option('--update', "write each machine's golden file (pathTests `golden`) instead of comparing with it")
    .option('--seed <n>', 'seed of the random walks (replays the walks of an earlier run)')
    .option('--mutate', "mutation testing: mutate each machine (retarget, drop or negate a guard, drop an action, change a delay, swap onDone/onError, unfinal a state, switch history) and report the mutants its path tests do not kill")
    .action(async (options: { machine?: string; crash: boolean; childCrash: string; update?: boolean; seed?: string; mutate?: boolean }, command: Command) => {
      const g = globals(command);
      const seed = options.seed === undefined ? undefined : Number(options.seed);
      if (seed !== undefined && (!Number.isInteger(seed) || Math.abs(seed) > 0x7fffffff)) throw new UsageError('--seed must be an integer (a 32-bit one, as printed by an earlier run).');
      const childCrash = Number(options.childCrash);
      if (!Number.isInteger(childCrash) || childCrash < 0 || childCrash > 1000) throw new UsageError('--child-crash must be an integer from 0 to 1000.');
      const { path, namespace } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
      const { collectPathTests, isPathTestSubject, runPathTests } = await testing();
      let subjects = collectPathTests(namespace);
      if (options.machine !== undefined) {
        subjects = subjects.filter((s) => new MachineRegistry([isPathTestSubject(s) ? s.definition : s]).all()[0]?.id === options.machine);
        if (subjects.length === 0) throw new UsageError(`No machine "${options.machine}" in ${path}; see \`spool machines\`.`);
      }
      if (options.mutate) {
        const mutation = await runMutations(subjects, path, seed, g.json ? undefined : (line) => io.stderr(`${line}\n`));
        write(io, g, { ok: mutation.errors.length === 0, mutation }, () => formatMutation(mutation));
        if (mutation.errors.length > 0) setExitCode(1);
        return;
      }
      const dir = mkdtempSync(join(tmpdir(), 'spool-test-'));
      try {
        const result = await runPathTests({
          definitions: subjects,
          crash: options.crash,
          sampleChildCrash: childCrash,
          module: path,
          dir,
          update: options.update === true,
          ...(seed !== undefined ? { seed } : {}),
          // On Postgres, each run in a database of its own on the named server; otherwise a temporary SQLite file.
          ...(isPostgresUrl(g.db) ? { db: g.db } : {}),
          onProgress: (event) => {
            const line = g.json ? undefined : describeProgress(event);
            if (line !== undefined) io.stderr(`${line}\n`);
          },
        });
        write(io, g, result, () => formatPathResults(result.machines, result.durationMs));
        if (!result.ok) setExitCode(1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
}

type Subject = ReturnType<typeof collectPathTests>[number];

/** Path testing (fast-check, the walks), imported when `spool test` runs, not when any other command starts. */
function testing() {
  return import('../testing/runPathTests.ts');
}

/** `spool test --mutate`: every subject's mutants through its path tests; totals, survivors, and per machine. */
async function runMutations(subjects: Subject[], module: string, seed: number | undefined, progress?: (line: string) => void) {
  const [{ isPathTestSubject }, { mutationTest }, { goldenPath }] = await Promise.all([testing(), import('../testing/mutate.ts'), import('../testing/golden.ts')]);
  const machines: MutationResult[] = [];
  for (const s of subjects) {
    const subject = isPathTestSubject(s) ? s : { definition: s, options: {} };
    const golden = subject.options.golden;
    const file = golden === undefined || golden === false ? null : { file: goldenPath(golden, new MachineRegistry([subject.definition]).all()[0]!.id, subject.options.module ?? module) };
    const result = mutationTest(subject.definition, subject.options, file, seed);
    progress?.(`${result.machine}: ${result.killed}/${result.total} mutants killed (${result.durationMs} ms)${result.error ? `: ${result.error}` : ''}`);
    machines.push(result);
  }
  return {
    total: machines.reduce((n, m) => n + m.total, 0),
    killed: machines.reduce((n, m) => n + m.killed, 0),
    survived: machines.flatMap((m) => m.survived),
    errors: machines.filter((m) => m.error !== null).map((m) => ({ machine: m.machine, error: m.error })),
    machines: machines.map((m) => ({ machine: m.machine, total: m.total, killed: m.killed, kills: m.kills, durationMs: m.durationMs })),
  };
}

function formatMutation(m: Awaited<ReturnType<typeof runMutations>>): string {
  const rows = m.machines.map((r) => [r.machine, String(r.total), String(r.killed), String(r.total - r.killed), r.total ? `${Math.round((100 * r.killed) / r.total)}%` : '-', `${(r.durationMs / 1000).toFixed(1)} s`]);
  const lines = [table(['MACHINE', 'MUTANTS', 'KILLED', 'SURVIVED', 'SCORE', 'TIME'], rows)];
  for (const e of m.errors) lines.push(`${e.machine}: ${e.error}`);
  for (const s of m.survived) lines.push(`${s.machine}: survived: ${s.mutation} (at ${s.location})`);
  lines.push(`${m.killed} of ${m.total} mutants killed${m.survived.length ? `; the survivors show where the invariants are too weak` : ''}`);
  return lines.join('\n');
}

function describeProgress(event: PathTestProgress): string | undefined {
  switch (event.type) {
    case 'machine.started':
      return `${event.machineId}@${event.version}: generating paths`;
    case 'machine.generated':
      return `${event.machineId}: ${event.states} states, ${event.covered}/${event.transitions} transitions covered by ${event.paths} paths; replaying`;
    case 'path.finished':
      return `  ${event.ok ? 'ok  ' : 'FAIL'} ${event.machineId} path ${event.path} (${event.mode}, ${event.durationMs} ms)${event.ok ? '' : `: ${event.message}`}`;
    case 'machine.finished':
      return `${event.result.machineId}: ${event.result.ok ? 'passed' : 'FAILED'}`;
  }
}

function formatPathResults(machines: MachinePathResult[], durationMs: number): string {
  const rows = machines.flatMap((m) => [
    [
    `${m.machineId}@${m.version}`,
    String(m.states),
    String(m.transitions),
    `${m.covered}${m.waived ? ` (+${m.waived} waived)` : ''}`,
    // Its own: the child rows below count theirs (`gaps` lists both).
    String(m.gaps.length - m.children.reduce((n, c) => n + c.gaps.length, 0)),
    String(m.paths),
    `${m.runs.plain}/${m.runs.restart}/${m.runs.child}/${m.runs.walk}`,
    String(m.failures.length),
    m.ok ? 'ok' : 'FAILED',
    `${(m.durationMs / 1000).toFixed(1)} s`,
    ],
    ...m.children.map((c) => [
      `  ${c.machineId} (child)`,
      '-',
      String(c.transitions),
      `${c.covered}${c.waived ? ` (+${c.waived} waived)` : ''}`,
      String(c.gaps.length),
      '-',
      '(same paths)',
      '-',
      c.gaps.length === 0 && c.unusedWaivers.length === 0 ? 'ok' : 'FAILED',
      '-',
    ]),
  ]);
  const lines = [table(['MACHINE', 'STATES', 'TRANSITIONS', 'COVERED', 'GAPS', 'PATHS', 'RUNS plain/restart/child/walk', 'FAILURES', 'RESULT', 'TIME'], rows)];
  for (const m of machines) {
    if (m.error) lines.push(`${m.machineId}: ${m.error}`);
    for (const w of m.unusedWaivers) lines.push(`${m.machineId}: unused waiver (it excuses no uncovered transition: remove it): ${JSON.stringify(w)}, reason "${w.reason}"`);
    for (const gap of m.gaps) lines.push(`${m.machineId}: gap: state ${gap.source}, event ${gap.event}, guard ${gap.guard ?? '-'}, target ${gap.targets.join(', ') || '-'}${gap.note ? ` (${gap.note})` : ''}`);
    for (const f of m.failures) {
      if (f.mode === 'check' || f.mode === 'golden' || f.mode === 'walk') lines.push(`${m.machineId}: ${f.mode} failed: ${oneLine(f.message)}`);
      else lines.push(`${m.machineId}: path ${f.path} (${f.mode}) failed: ${oneLine(f.message)}`);
    }
    if (m.walks) lines.push(`${m.machineId}: ${m.walks.runs} random walks, ${m.walks.replayed} replayed with restarts, seed ${m.walks.seed} (\`--seed ${m.walks.seed}\` walks them again)`);
    if (m.golden?.written) lines.push(`${m.machineId}: golden file written: ${m.golden.file}`);
  }
  lines.push(`${machines.every((m) => m.ok) ? 'all machines passed' : 'some machines FAILED'} in ${(durationMs / 1000).toFixed(1)} s`);
  return lines.join('\n');
}
