/**
 * The browser the dashboard's tests drive: Debian's chromium (never a downloaded one), at
 * `SPOOL_TEST_BROWSER_PATH` or /usr/bin/chromium. Without one the tests are skipped with a printed
 * reason, so `npm test` passes on a fresh machine; `SPOOL_TEST_BROWSER=required` (set by .ci/run)
 * makes a missing browser a failure instead.
 */
import { accessSync, constants } from 'node:fs';

/** The browser's path, or null (and the reason printed) when there is none and it is not required. */
export function browserForTests(env: NodeJS.ProcessEnv = process.env, print: (line: string) => void = (l) => console.warn(l)): string | null {
  const path = env['SPOOL_TEST_BROWSER_PATH'] ?? '/usr/bin/chromium';
  try {
    accessSync(path, constants.X_OK);
    return path;
  } catch {
    const reason = `no browser at ${path} (install Debian's chromium: apt-get install chromium, or set SPOOL_TEST_BROWSER_PATH)`;
    if (env['SPOOL_TEST_BROWSER'] === 'required') throw new Error(`SPOOL_TEST_BROWSER=required, but ${reason}.`);
    print(`skipping the dashboard's browser tests: ${reason}; SPOOL_TEST_BROWSER=required makes this a failure.`);
    return null;
  }
}
