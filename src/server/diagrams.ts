/**
 * The diagram routes of `spool serve`, drawn by the same modules as `spool graph --format svg`
 * (views/layout.ts, views/svg.ts); layouts are cached per machine version (they depend on
 * nothing else), marks are computed per request from the durable records:
 *
 * - `GET /api/machines/:machine/diagram?version=&counts=true`: SVG; `counts=true` draws the jobs in each state;
 * - `GET /api/machines/:machine/layout?version=`: the layout as JSON (boxes and routes);
 * - `GET /api/jobs/:id/diagram`: SVG with the job's states and taken transitions marked;
 * - `GET /api/jobs/:id/marks`: `{ machineId, version, active, taken }`, what the dashboard moves live.
 */
import type { Context, Hono } from 'hono';
import { ValidationError, type Runtime } from '../index.ts';
import { describeMachine, type MachineView } from '../views/machineView.ts';
import { layoutMachine, type DiagramLayout } from '../views/layout.ts';
import { markLists, renderSvg, svgMarks } from '../views/svg.ts';
import { pickVersion } from './machines.ts';

/** Add the diagram routes to `app`. */
export function addDiagramRoutes(app: Hono, runtime: Runtime): void {
  const layouts = new Map<string, Promise<DiagramLayout>>();
  const layoutOf = (view: MachineView): Promise<DiagramLayout> => {
    const key = `${view.id}@${view.version}`;
    let layout = layouts.get(key);
    if (!layout) {
      layout = layoutMachine(view);
      layout.catch(() => layouts.delete(key));
      layouts.set(key, layout);
    }
    return layout;
  };

  app.get('/api/machines/:machine/diagram', async (c) => {
    const counts = c.req.query('counts');
    if (counts !== undefined && counts !== 'true' && counts !== 'false') throw new ValidationError('counts must be true or false.');
    const view = describeMachine(pickVersion(runtime, c.req.param('machine'), c.req.query('version')));
    const marks = counts === 'true' ? svgMarks(view, { stats: (await runtime.stats()).jobs }) : {};
    return svg(c, renderSvg(await layoutOf(view), marks));
  });
  app.get('/api/machines/:machine/layout', async (c) => c.json(await layoutOf(describeMachine(pickVersion(runtime, c.req.param('machine'), c.req.query('version'))))));
  app.get('/api/jobs/:id/diagram', async (c) => {
    const { view, marks } = await jobMarks(runtime, c.req.param('id'));
    return svg(c, renderSvg(await layoutOf(view), marks));
  });
  app.get('/api/jobs/:id/marks', async (c) => {
    const { view, marks } = await jobMarks(runtime, c.req.param('id'));
    return c.json({ machineId: view.id, version: view.version, ...markLists(marks) });
  });
}

async function jobMarks(runtime: Runtime, jobId: string) {
  const job = await runtime.get(jobId);
  const view = describeMachine(pickVersion(runtime, job.machineId, job.machineVersion));
  return { view, marks: svgMarks(view, { job: { value: job.value, history: await runtime.history(jobId) } }) };
}

function svg(c: Context, text: string): Response {
  return c.body(text, 200, { 'content-type': 'image/svg+xml; charset=utf-8', 'cache-control': 'no-cache' });
}
