/**
 * Arguments of the project's own scripts (`npm run bench`, `npm run crash`): `--help` prints the
 * usage, and a mistyped option is one line and the usage (exit 2), not a stack trace.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

export function scriptArgs<const O extends Options>(name: string, usage: string, options: O) {
  const argv = process.argv.slice(2);
  const text = usage.endsWith('\n') ? usage : `${usage}\n`;
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(text);
    process.exit(0);
  }
  try {
    return parseArgs({ args: argv, options, strict: true }).values;
  } catch (error) {
    if (!(error instanceof TypeError && String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS'))) throw error;
    process.stderr.write(`${name}: ${error.message}\n\n${text}`);
    process.exit(2);
  }
}
