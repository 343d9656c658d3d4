/**
 * `spool test`: walk each machine's graph and replay every path through the runtime.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { MachineRegistry } from '../index.ts';
import { isPostgresUrl } from '../../persistence/openStore.ts';
import { UsageError } from './errors.ts';
import { oneLine, table } from './format.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import { examples, globals, write, type CliIO } from './globals.ts';
import { collectPathTests, isPathTestSubject, runPathTests, type MachinePathResult, type PathTestProgress } from '../testing/runPathTests.ts';

/** `spool test`; `setExitCode(1)` when a machine fails. */
export function addTestCommand(program: Command, io: CliIO, setExitCode: (code: number) => void): void {
  program
    .command('test')
    .description("walk each machine's graph: cover every transition, replay every path through the runtime, with a restart between every two steps")
    .addHelpText('after', examples('spool test', 'spool --machines ./my-machines.ts test --machine checkout --no-crash', 'spool --db postgres://spool@db.internal/spool test   # each run in a new database there, dropped after'))
    .option('--machine <id>', 'only this machine')
    .option('--no-crash', 'skip the replay with a restart between every two steps')
    .option('--child-crash <n>', 'paths per machine also replayed in a child process SIGKILLed between steps', '1')
    .option('--update', "write each machine's golden file (pathTests `golden`) instead of comparing with it")
    .action(async (options: { machine?: string; crash: boolean; childCrash: string; update?: boolean }, command: Command) => {
      const g = globals(command);
      const childCrash = Number(options.childCrash);
      if (!Number.isInteger(childCrash) || childCrash < 0 || childCrash > 1000) throw new UsageError('--child-crash must be an integer from 0 to 1000.');
      const { path, namespace } = await loadMachines(g.machines ?? DEFAULT_MACHINES_MODULE, io.cwd);
      let subjects = collectPathTests(namespace);
      if (options.machine !== undefined) {
        subjects = subjects.filter((s) => new MachineRegistry([isPathTestSubject(s) ? s.definition : s]).all()[0]?.id === options.machine);
        if (subjects.length === 0) throw new UsageError(`No machine "${options.machine}" in ${path}; see \`spool machines\`.`);
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
    `${m.runs.plain}/${m.runs.restart}/${m.runs.child}`,
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
  const lines = [table(['MACHINE', 'STATES', 'TRANSITIONS', 'COVERED', 'GAPS', 'PATHS', 'RUNS plain/restart/child', 'FAILURES', 'RESULT', 'TIME'], rows)];
  for (const m of machines) {
    if (m.error) lines.push(`${m.machineId}: ${m.error}`);
    for (const gap of m.gaps) lines.push(`${m.machineId}: gap: state ${gap.source}, event ${gap.event}, guard ${gap.guard ?? '-'}, target ${gap.targets.join(', ') || '-'}${gap.note ? ` (${gap.note})` : ''}`);
    for (const f of m.failures) {
      if (f.mode === 'check' || f.mode === 'golden') lines.push(`${m.machineId}: ${f.mode} failed: ${oneLine(f.message)}`);
      else lines.push(`${m.machineId}: path ${f.path} (${f.mode}) failed: ${oneLine(f.message)}`);
    }
    if (m.golden?.written) lines.push(`${m.machineId}: golden file written: ${m.golden.file}`);
  }
  lines.push(`${machines.every((m) => m.ok) ? 'all machines passed' : 'some machines FAILED'} in ${(durationMs / 1000).toFixed(1)} s`);
  return lines.join('\n');
}
