/**
 * `spool graph`: a machine the project has never seen (nested and parallel states, a delayed
 * transition, an invoked activity, an eventless one) as Mermaid, dot and JSON, with a job's
 * current states highlighted and the transitions its history took marked; and the command (in
 * process through `main()`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { fromPromise, setup } from 'xstate';
import { MachineRegistry, createRuntime } from '../src/internal.ts';
import { SqliteStore } from '../persistence/drivers/better-sqlite3/index.ts';
import { highlightFor, renderGraph } from '../src/views/graph.ts';
import { describeMachine } from '../src/views/machineView.ts';
import { Resources } from './helpers/resources.ts';
import { runCli } from './helpers/inProcessCli.ts';

const kiosk = setup({ actors: { print: fromPromise(async () => 'printed') } }).createMachine({
  id: 'kiosk',
  initial: 'idle',
  states: {
    idle: { on: { COIN: 'serving' } },
    serving: {
      type: 'parallel',
      states: {
        screen: { initial: 'menu', states: { menu: { on: { PICK: 'confirm' } }, confirm: { after: { 5000: 'menu' }, on: { OK: 'printing' } }, printing: { invoke: { id: 'print', src: 'print', onDone: 'thanks' } }, thanks: { type: 'final' } } },
        light: { initial: 'on', states: { on: { on: { BLINK: 'off' } }, off: { always: 'on' } } },
      },
      onDone: 'idle',
    },
  },
});

const res = new Resources();
afterEach(() => res.dispose());

describe('spool graph', () => {
  const view = describeMachine(new MachineRegistry([kiosk]).all()[0]!);

  it('draws nested and parallel states inside their parents in Mermaid, with every kind of transition labelled', () => {
    const text = renderGraph(view, 'mermaid');
    expect(text.startsWith('stateDiagram-v2\n')).toBe(true);
    const lines = text.split('\n').map((l) => l.trim());
    for (const line of [
      '[*] --> s_kiosk_idle',
      'state s_kiosk_serving {',
      'state s_kiosk_serving_screen {',
      '[*] --> s_kiosk_serving_screen_menu',
      '--',
      's_kiosk_serving_screen_thanks --> [*]',
      's_kiosk_idle --> s_kiosk_serving : COIN',
      's_kiosk_serving_screen_confirm --> s_kiosk_serving_screen_menu : after 5000ms',
      's_kiosk_serving_screen_printing --> s_kiosk_serving_screen_thanks : done: print',
      's_kiosk_serving_light_off --> s_kiosk_serving_light_on : always',
    ]) {
      expect(lines).toContain(line);
    }
    // The parallel regions are separated inside serving, not at the top.
    expect(lines.indexOf('--')).toBeGreaterThan(lines.indexOf('state s_kiosk_serving {'));
  });

  it('marks a job: its current states and the transitions its history took', async () => {
    const store = await res.sqlite(res.dbPath());
    const runtime = await res.runtime({ store, machines: [kiosk] });
    const job = await runtime.start('kiosk', {});
    await runtime.send(job.id, { type: 'COIN' });
    await runtime.send(job.id, { type: 'PICK' });
    const now = await runtime.get(job.id);
    const highlight = highlightFor(view, now.value, await runtime.history(job.id));
    expect([...highlight.active].sort()).toEqual(['kiosk', 'kiosk.serving', 'kiosk.serving.light', 'kiosk.serving.light.on', 'kiosk.serving.screen', 'kiosk.serving.screen.confirm']);
    const mermaid = renderGraph(view, 'mermaid', highlight);
    expect(mermaid).toContain('s_kiosk_idle --> s_kiosk_serving : COIN ✓');
    expect(mermaid).toContain('s_kiosk_serving_screen_menu --> s_kiosk_serving_screen_confirm : PICK ✓');
    expect(mermaid).toContain('s_kiosk_serving_screen_confirm --> s_kiosk_serving_screen_printing : OK\n');
    expect(mermaid).toContain('class s_kiosk_serving_screen_confirm current');
    expect(mermaid).not.toContain('class s_kiosk_idle current');
    const dot = renderGraph(view, 'dot', highlight);
    expect(dot).toContain('subgraph cluster_s_kiosk_serving {');
    expect(dot).toMatch(/s_kiosk_idle -> s_kiosk_serving \[label="COIN", lhead=cluster_s_kiosk_serving, color="#b45309", penwidth=2\];/);
    expect(dot).toMatch(/s_kiosk_serving_screen_confirm \[label="confirm", fillcolor="#fde68a", penwidth=2\];/);
    const json = JSON.parse(renderGraph(view, 'json', highlight)) as { root: { states: { key: string; type: string }[] }; active: string[] };
    expect(json.root.states.map((s) => [s.key, s.type])).toEqual([['idle', 'atomic'], ['serving', 'parallel']]);
    expect(json.active).toContain('kiosk.serving.screen.confirm');
  });

  it('is a command: the newest version, or a job of it with --job', async () => {
    const dir = res.tempDir();
    const db = `${dir}/spool.db`;
    expect((await runCli(['--db', db, 'start', 'job-lifecycle', '--input', '{"name":"g"}', '--id', 'g1'], dir)).code).toBe(0);
    expect((await runCli(['--db', db, 'send', 'g1', 'START'], dir)).code).toBe(0);
    const plain = await runCli(['--db', db, 'graph', 'job-lifecycle'], dir);
    expect(plain).toMatchObject({ code: 0, stderr: '' });
    expect(plain.stdout).toContain('s_job_lifecycle_queued --> s_job_lifecycle_processing : START\n');
    const marked = await runCli(['--db', db, 'graph', 'job-lifecycle', '--job', 'g1', '--format', 'mermaid'], dir);
    expect(marked.stdout).toContain('s_job_lifecycle_queued --> s_job_lifecycle_processing : START ✓');
    expect(marked.stdout).toContain('class s_job_lifecycle_processing current');
    const unknown = await runCli(['--db', db, 'graph', 'no-such-machine'], dir);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/SPOOL_USAGE/);
    // A store opened here afterwards still reads the job unchanged: graph wrote nothing.
    const store = await SqliteStore.open(db);
    const runtime = await createRuntime({ store, machines: [], recover: false, processEvents: false });
    expect((await runtime.get('g1')).revision).toBe(2);
    await runtime.close();
    await store.close();
  });
});
