/**
 * The `spool` program: its global options and help, and every command group registered in the
 * order `spool --help` lists them.
 */
import { Command, Option } from 'commander';
import { MachineRegistry } from '../internal.ts';
import { sensitiveKeys } from '../views/redacted.ts';
import { DEFAULT_MACHINES_MODULE, loadMachines } from './loadMachines.ts';
import { addScheduleCommands } from './schedule.ts';
import { addDoctorCommand } from './doctor.ts';
import { addGraphCommand } from './graph.ts';
import { addTailCommand } from './tail.ts';
import { addInspectCommand } from './inspect.ts';
import { addExportCommand } from './export.ts';
import { addServeCommand } from './serve.ts';
import { globals, write, type CliIO } from './globals.ts';
import { resolveConfig } from './config.ts';
import { paintHeading } from './style.ts';
import { withRuntime } from './withRuntime.ts';
import { ownPackageJson } from '../loader/ownFiles.ts';
import { addCancelCommand, addCompleteFailCommands, addPurgeCommand, addResumeCommand, addRetryCommand, addSendCommand, addStartCommand, addSuspendCommand } from './jobs.ts';
import { addRedeliverCommand, addStartOrSendCommand } from './delivery.ts';
import { addListCommand, addMachinesCommand, addShowCommand, addStatsCommand } from './reads.ts';
import { addDemoCommand, addWorkerCommand } from './worker.ts';
import { addTestCommand } from './pathTests.ts';
import { addMigrateStoreCommand } from './migrateStore.ts';

/**
 * `setExitCode`: a command that finished its output but failed (a test run with gaps) reports it here.
 * `packageVersion`: register the global `--version` (the package's); main() leaves it out when the
 * arguments name a command before any `--version`, so `graph M --version 1` is graph's own option.
 */
export function buildProgram(io: CliIO, setExitCode: (code: number) => void, { packageVersion = true }: { packageVersion?: boolean } = {}): Command {
  const program: Command = new Command('spool').description('Durable XState jobs on SQLite: start jobs, send them events, inspect their history.');
  if (packageVersion) program.version(readVersion(), '--version');
  program
    .option('--db <file|url>', 'SQLite database file, or a postgres:// URL (default: SPOOL_DB, else spool.config.json or package.json "spool", else ./spool.db)')
    .option('--machines <module>', 'a .ts or .js module exporting your machines (default: SPOOL_MACHINES, else the config file, else the bundled machines/index.ts)')
    .option('--json', 'print one JSON document on stdout (errors: one JSON object on stderr)')
    .option('--owner <id>', "tenant scope: see and start only this owner's jobs (another owner's job reads like a missing one)")
    .option('--max-backlog <n>', 'refuse start and send (SPOOL_BACKPRESSURE, nothing written) while n events wait to be applied (default 100000)')
    .addOption(
      new Option('--synchronous <mode>', 'FULL: an acknowledged write survives power loss; NORMAL: faster, survives a crash of the process but not of the machine')
        .choices(['FULL', 'NORMAL'])
        .default('FULL'),
    )
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      writeErr: (text) => io.stderr(text),
      // Commander's own error text is reported by main(), as one line in Spool's format.
      outputError: () => {},
      getOutHasColors: () => io.colour?.stdout === true,
      getErrHasColors: () => io.colour?.stderr === true,
    })
    .showSuggestionAfterError(true)
    // Every command's help lists --db, --machines, --json (inherited by the commands added below).
    .configureHelp({ showGlobalOptions: true, styleTitle: (title) => paintHeading(title) })
    // --db and --machines from the flag, SPOOL_DB/SPOOL_MACHINES, spool.config.json or package.json (config.ts).
    .hook('preAction', (root: Command) => applyConfig(root, io))
    .addHelpText(
      'after',
      `
Events are JSON ('{"type":"PROGRESS","percent":40}') or a bare event type (START).

Examples:
  spool demo
  spool start job-lifecycle --input '{"name":"resize","items":2}' --id resize-1
  spool send resize-1 START
  spool show resize-1 --watch
  spool list --state processing
  spool --machines ./my-machines.ts machines
  SPOOL_DB=./jobs.db spool list

--db and --machines come from the flag, else SPOOL_DB and SPOOL_MACHINES, else spool.config.json
({"db": ..., "machines": ...}) in this directory, else the "spool" field of the nearest package.json.`,
    );

  addStartCommand(program, io);
  addSendCommand(program, io);
  addStartOrSendCommand(program, io);
  addRedeliverCommand(program, io);
  addShowCommand(program, io);
  addListCommand(program, io);
  addMachinesCommand(program, io);
  addCancelCommand(program, io);
  addCompleteFailCommands(program, io);
  addRetryCommand(program, io);
  addSuspendCommand(program, io);
  addResumeCommand(program, io);
  addPurgeCommand(program, io);
  addStatsCommand(program, io);
  addWorkerCommand(program, io);
  addTestCommand(program, io, setExitCode);
  addDemoCommand(program, io);
  addMigrateStoreCommand(program, io, setExitCode);
  addModuleCommands(program, io, setExitCode);
  return program;
}

/** The command groups defined with their own wiring: graph, export, tail, inspect, serve, schedule, doctor. */
function addModuleCommands(program: Command, io: CliIO, setExitCode: (code: number) => void): void {
  addGraphCommand(program, {
    registry: async (command) => new MachineRegistry((await loadMachines(globals(command).machines ?? DEFAULT_MACHINES_MODULE, io.cwd)).definitions),
    withReadRuntime: (command, work) => withRuntime(globals(command), io, { create: false, mode: 'read' }, (runtime) => work(runtime)),
    json: (command) => globals(command).json === true,
    stdout: (text) => io.stdout(text),
  });

  addTailCommand(program, {
    withReadRuntime: (command, work) => withRuntime(globals(command), io, { create: false, mode: 'read' }, (runtime) => work(runtime)),
    json: (command) => globals(command).json === true,
    stdout: (text) => io.stdout(text),
    stderr: (text) => io.stderr(text),
  });

  addExportCommand(program, {
    registry: async (command) => new MachineRegistry((await loadMachines(globals(command).machines ?? DEFAULT_MACHINES_MODULE, io.cwd)).definitions),
    json: (command) => globals(command).json === true,
    stdout: (text) => io.stdout(text),
    stderr: (text) => io.stderr(text),
  });

  addInspectCommand(program, {
    withReadRuntime: (command, work) => withRuntime(globals(command), io, { create: false, mode: 'read' }, (runtime) => work(runtime)),
    owner: (command) => globals(command).owner ?? null,
    stderr: (text) => io.stderr(text),
  });

  addServeCommand(program, {
    withRuntime: (command, work, timers = false) => withRuntime(globals(command), io, { create: true, ...(timers ? { effects: true, activitiesElsewhere: true } : {}) }, (runtime) => work(runtime)),
    print: (command, json, human) => io.stdout(globals(command).json ? `${JSON.stringify(json)}\n` : `${human}\n`),
    stderr: (text) => io.stderr(text),
  });

  addScheduleCommands(program, {
    withRuntime: (command, create, work) => withRuntime(globals(command), io, { create }, (runtime) => work(runtime, globals(command).json === true)),
    write: (command, json, human) => write(io, globals(command), json, human),
    sensitiveKeys,
  });
  addDoctorCommand(program, { stdout: io.stdout, cwd: io.cwd, setExitCode });
}

/** The global options that take a value (their value is not a command name). */
const VALUE_OPTIONS = new Set(['--db', '--machines', '--owner', '--max-backlog', '--synchronous']);

/**
 * Whether `--version` in `args` asks for the package version: it comes before any command, or there
 * is no command. After a command it is that command's option (`spool export M --version 1`).
 *
 * @example
 * wantsPackageVersion(['--version']) // true
 * wantsPackageVersion(['graph', 'm', '--version', '1']) // false
 */
export function wantsPackageVersion(args: readonly string[]): boolean {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--version') return true;
    if (arg === '--') return false;
    if (VALUE_OPTIONS.has(arg)) i++;
    else if (!arg.startsWith('-')) return false; // the command
  }
  return true;
}

/** Set `--db` and `--machines` on `program` as {@link resolveConfig} resolves them, so every command's `globals()` sees them. */
function applyConfig(program: Command, io: CliIO): void {
  const given = program.opts<{ db?: string; machines?: string }>();
  const resolved = resolveConfig({ flags: { db: given.db, machines: given.machines }, env: io.env ?? {}, cwd: io.cwd });
  const commanderSource = { flag: 'cli', env: 'env', config: 'config', 'package.json': 'config', default: 'default' } as const;
  program.setOptionValueWithSource('db', resolved.db.value, commanderSource[resolved.db.source]);
  if (resolved.machines !== undefined) program.setOptionValueWithSource('machines', resolved.machines.value, commanderSource[resolved.machines.source]);
}

function readVersion(): string {
  try {
    const pkg = ownPackageJson();
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}
