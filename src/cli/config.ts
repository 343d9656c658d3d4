/**
 * Where `--db` and `--machines` come from when they are not on the command line. One function,
 * {@link resolveConfig}, decides it for every command, in this order (the first that says wins):
 *
 * 1. the flag (`--db`, `--machines`);
 * 2. the environment (`SPOOL_DB`, `SPOOL_MACHINES`);
 * 3. `spool.config.json` in the working directory (`{ "db": ..., "machines": ... }`);
 * 4. the `"spool"` field of the nearest `package.json` (the same two keys);
 * 5. the default (`./spool.db`; Spool's own reference machines).
 *
 * Each setting is resolved on its own (`--db` from the flag, `machines` from the config file is
 * fine). A relative path from a file is relative to that file's directory; from a flag or the
 * environment, to the working directory. A URL (`postgres://...`) is passed through unchanged:
 * this produces the db string, and the store-opening function decides what it names.
 *
 * @example
 * resolveConfig({ flags: {}, env: { SPOOL_DB: 'jobs.db' }, cwd: '/app' }).db // { value: 'jobs.db', source: 'env' }
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { SpoolError } from '../index.ts';

/** The config file read from the working directory. */
export const CONFIG_FILE = 'spool.config.json';

/** `--db` when nothing names one. */
export const DEFAULT_DB = './spool.db';

/** A config file (or package.json's `"spool"` field) that cannot be used as written. */
export class ConfigFileError extends SpoolError {
  readonly code = 'SPOOL_BAD_CONFIG';
  readonly category = 'bad-input';
}

/** Where a setting came from. */
export type ConfigSource = 'flag' | 'env' | 'config' | 'package.json' | 'default';

/** One resolved setting: its value and where it came from (`file`: the file, for `config` and `package.json`). */
export interface ResolvedSetting {
  value: string;
  source: ConfigSource;
  file?: string;
}

/** The resolved `--db` and `--machines` (`machines` undefined: Spool's reference machines). */
export interface ResolvedConfig {
  db: ResolvedSetting;
  machines: ResolvedSetting | undefined;
}

/** What {@link resolveConfig} reads: the flags as given (undefined when absent), the environment, the working directory. */
export interface ConfigInputs {
  flags: { db?: string | undefined; machines?: string | undefined };
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
}

const Settings = z.strictObject({
  db: z.string().min(1, 'must be a non-empty string').optional(),
  machines: z.string().min(1, 'must be a non-empty string').optional(),
});
type Settings = z.infer<typeof Settings>;

interface FileSettings {
  settings: Settings;
  file: string;
  source: 'config' | 'package.json';
}

/** Resolve `--db` and `--machines` by the precedence above. Throws {@link ConfigFileError} for a bad file, naming it. */
export function resolveConfig({ flags, env, cwd }: ConfigInputs): ResolvedConfig {
  const files = [readConfigFile(cwd), readPackageField(cwd)].filter((f): f is FileSettings => f !== undefined);
  const pick = (key: 'db' | 'machines', flag: string | undefined, envName: string): ResolvedSetting | undefined => {
    if (flag !== undefined) return { value: flag, source: 'flag' };
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== '') return { value: fromEnv, source: 'env' };
    for (const f of files) {
      const value = f.settings[key];
      if (value !== undefined) return { value: relativeTo(dirname(f.file), cwd, value), source: f.source, file: f.file };
    }
    return undefined;
  };
  return {
    db: pick('db', flags.db, 'SPOOL_DB') ?? { value: DEFAULT_DB, source: 'default' },
    machines: pick('machines', flags.machines, 'SPOOL_MACHINES'),
  };
}

/** A path written in a file in `dir`, as the working directory `cwd` would name it; a URL or `:memory:` unchanged. */
function relativeTo(dir: string, cwd: string, value: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(value) || isAbsolute(value)) return value;
  return resolve(dir) === resolve(cwd) ? value : resolve(dir, value);
}

function readConfigFile(cwd: string): FileSettings | undefined {
  const file = join(resolve(cwd), CONFIG_FILE);
  if (!existsSync(file)) return undefined;
  const parsed = parseJsonFile(file);
  return { settings: check(parsed, file, CONFIG_FILE), file, source: 'config' };
}

/** The nearest package.json (this directory, then its parents): its `"spool"` field, if it has one. */
function readPackageField(cwd: string): FileSettings | undefined {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = parseJsonFile(file);
      const field = pkg !== null && typeof pkg === 'object' && !Array.isArray(pkg) ? (pkg as Record<string, unknown>)['spool'] : undefined;
      return field === undefined ? undefined : { settings: check(field, file, 'its "spool" field'), file, source: 'package.json' };
    }
    if (dirname(dir) === dir) return undefined;
  }
}

function parseJsonFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigFileError(`Cannot read ${file}: ${(error as Error).message}.`, { file });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ConfigFileError(`${file} is not valid JSON (${(error as Error).message}); fix or remove it.`, { file });
  }
}

function check(value: unknown, file: string, what: string): Settings {
  const result = Settings.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    if (issue.code === 'unrecognized_keys') return `unknown setting${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    return issue.path.length > 0 ? `"${issue.path.join('.')}" ${issue.message}` : `it ${issue.message}`;
  });
  throw new ConfigFileError(
    `${file}: ${what} is not usable: ${problems.join('; ')}. Expected an object like {"db": "./spool.db", "machines": "./machines.ts"}.`,
    { file },
  );
}
