/** A focused run for profiling (not part of `npm run bench`): one queue case, while-draining. argv: steps c backlog sync */
import { runSpoolQueue } from './queueRun.ts';
import { JOB_SHAPES } from './jobsRun.ts';

const [steps = '3', c = '16', backlog = '2000', sync = 'NORMAL'] = process.argv.slice(2);
const shape = JOB_SHAPES.find((s) => s.steps === Number(steps))!;
const r = await runSpoolQueue({ store: 'sqlite', synchronous: sync as 'NORMAL', shape, concurrency: Number(c), backlog: Number(backlog), mode: 'while-draining' });
console.log(JSON.stringify(r));
