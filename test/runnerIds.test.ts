/**
 * Runner ids (a job's lease owner, an activity's claimant): `<host>/<pid>/<random>` on Node, the
 * host part named by `runnerHost` when given. A closed runtime of this process is known to be gone
 * whatever its host part; another process only when it is of this host and its pid is gone.
 */
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../src/index.ts';
import { newRunnerId, retireRunner, runnerIsGone } from '../src/runtime/activities.ts';
import { Resources } from './helpers/resources.ts';
import { openRuntime } from './helpers/durable.ts';
import { work } from './fixtures/workMachine.ts';

const res = new Resources();
afterEach(() => res.dispose());

describe('runner ids', () => {
  it('are the host name and pid on Node, or runnerHost and the pid', async () => {
    const plain = await openRuntime(res, [work]);
    expect(plain.runtime.runnerId).toMatch(new RegExp(`^${hostname().replace(/[.]/g, '\\.')}/${process.pid}/[0-9a-f]{8}$`));
    const named = await openRuntime(res, [work], { runnerHost: 'kiosk-7' });
    expect(named.runtime.runnerId).toMatch(new RegExp(`^kiosk-7/${process.pid}/[0-9a-f]{8}$`));
  });

  it('refuses a runnerHost that is empty or holds a "/" (the id would not parse), before anything opens', async () => {
    for (const runnerHost of ['', 'a/b']) {
      const error = await openRuntime(res, [work], { runnerHost }).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ details: { option: 'runnerHost' } });
    }
  });

  it('a runner of this process is gone once retired, whatever its host part; a runner of another process under a given name is never probed', () => {
    const named = newRunnerId('kiosk-7');
    const plain = newRunnerId();
    for (const id of [named, plain]) {
      expect(runnerIsGone(id)).toBe(false);
      retireRunner(id);
      expect(runnerIsGone(id)).toBe(true);
    }
    // Another process (pid) under a given host name, or another host: left to the lease's expiry.
    expect(runnerIsGone(`kiosk-7/${process.pid + 1_000_000}/0badc0de`)).toBe(false);
    expect(runnerIsGone(`not-${hostname()}/${process.pid}/0badc0de`)).toBe(false);
    // Another process of this host, gone: probed by its pid.
    const exited = spawnSync(process.execPath, ['-e', '']).pid;
    expect(runnerIsGone(`${hostname()}/${exited}/0badc0de`)).toBe(true);
    expect(runnerIsGone(`${hostname()}/${process.ppid}/0badc0de`)).toBe(false);
  });
});
