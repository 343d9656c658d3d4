// What every page may ask of the shell: going to another page, and the server token.

import { setToken, token } from './api.js';
import { fill, h } from './dom.js';

/** Dispatched on `window` when a page asks to go elsewhere (app.js routes on it). */
export const ROUTE_EVENT = 'spool:route';

/** Go to a page of the dashboard without reloading. */
export function navigate(href) {
  history.pushState(null, '', href);
  dispatchEvent(new Event(ROUTE_EVENT));
}

/** Draw the sidebar's token button: whether this tab can write. */
export function tokenButton() {
  const button = document.getElementById('token-button');
  const has = token() !== null;
  button.className = `token-button ${has ? 'unlocked' : 'locked'}`;
  fill(button, h('span', { class: 'dot' }), has ? 'Writes enabled' : 'Read-only: set token');
  button.title = has ? 'This tab holds the server token. Click to forget it.' : 'Actions need the server token.';
}

/** Ask for the token (resolves true once one is kept). */
export function askToken() {
  const dialog = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  input.value = '';
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      if (dialog.returnValue === 'ok' && input.value.trim() !== '') setToken(input.value.trim());
      tokenButton();
      resolve(token() !== null);
    }, { once: true });
  });
}

