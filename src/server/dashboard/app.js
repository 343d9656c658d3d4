// The dashboard's shell: the token handed over in the address, the sidebar, and a router over
// three pages (jobs at `/`, a job at `/jobs/:id`, a machine at `/machines/:id`). Each page returns
// its cleanup (streams closed, timers stopped) for when another page replaces it.

import { adoptTokenFromLocation, enc, get, setToken, token } from './api.js';
import { fill, h } from './dom.js';
import { ROUTE_EVENT, askToken, navigate, tokenButton } from './shell.js';
import { renderJobs } from './jobsView.js';
import { renderJob } from './jobView.js';
import { renderMachine } from './machinePage.js';

let cleanup = () => {};

function route() {
  cleanup();
  const main = document.getElementById('main');
  const path = location.pathname;
  const job = /^\/jobs\/(.+)$/.exec(path);
  const machine = /^\/machines\/(.+)$/.exec(path);
  markNav();
  main.replaceChildren();
  if (job) cleanup = renderJob(main, decodeURIComponent(job[1]));
  else if (machine) cleanup = renderMachine(main, decodeURIComponent(machine[1]));
  else cleanup = renderJobs(main, new URLSearchParams(location.search));
}

function markNav() {
  const path = location.pathname;
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.getAttribute('href') === path || (a.dataset.nav === 'jobs' && (path === '/' || path.startsWith('/jobs/'))));
}

async function sidebar() {
  const box = document.getElementById('nav-machines');
  try {
    const { machines } = await get('/api/machines');
    const ids = [...new Set(machines.map((m) => m.id))];
    fill(box, ids.map((id) => h('a', { href: `/machines/${enc(id)}`, 'data-link': true }, id)));
    markNav();
  } catch (error) {
    fill(box, h('span', { class: 'muted' }, String(error.message)));
    // A server that needs its token for reads (beyond loopback): ask once, then read again.
    if (error.code === 'SPOOL_UNAUTHORIZED' && token() === null && (await askToken())) {
      route();
      void sidebar();
    }
  }
}

adoptTokenFromLocation();
tokenButton();
document.getElementById('token-button').addEventListener('click', () => {
  if (token() !== null) {
    setToken(null);
    tokenButton();
  } else void askToken();
});
document.getElementById('token-cancel').addEventListener('click', () => document.getElementById('token-dialog').close('cancel'));
document.addEventListener('click', (event) => {
  const a = event.target.closest('a[data-link]');
  if (!a || event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(a.getAttribute('href'));
});
addEventListener('popstate', route);
addEventListener(ROUTE_EVENT, route);
route();
void sidebar();
