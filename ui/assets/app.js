// The UI's shell: sign-in (a token, or the identity provider), the hash
// router, one event stream per tab and the slow fallback refresh. Screens
// live in views.js.

import * as api from './api.js';
import { h, fill, errorBox } from './dom.js';
import { listView, appView, eventsView, controllerView } from './views.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const live = document.getElementById('live');
const who = document.getElementById('who');
const signout = document.getElementById('signout');

const roleRank = { viewer: 1, deployer: 2, admin: 3 };

// FALLBACK_MS re-reads the open screen in case the stream missed something.
const FALLBACK_MS = 30000;

const ctx = {
  me: null,
  // memory keeps filters across screens for this page's life.
  memory: {},
  can: (role) => !!ctx.me && (roleRank[ctx.me.role] || 0) >= roleRank[role],
  reload: () => schedule(0),
};

let view = null;
let stream = null;
let fallback = 0;
let timer = 0;
let loading = null;
let again = false;

// route parses location.hash: #/, #/events, #/controller, #/app/NAME[/TAB].
function route() {
  const parts = location.hash.slice(2).split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'events') return { nav: 'events', make: () => eventsView(ctx, null) };
  if (parts[0] === 'controller') return { nav: 'controller', make: () => controllerView(ctx) };
  if (parts[0] === 'app' && parts[1]) return { nav: 'apps', make: () => appView(ctx, parts[1], parts[2] || '') };
  return { nav: 'apps', make: () => listView(ctx) };
}

function open() {
  if (!ctx.me) return;
  if (view && view.dispose) view.dispose();
  const r = route();
  view = r.make();
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.nav === r.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = view.title + ' · Skep';
  fill(main, view.el);
  schedule(0);
}

// schedule loads the open screen after ms, once however many events ask.
function schedule(ms) {
  clearTimeout(timer);
  timer = setTimeout(load, ms);
}

async function load() {
  if (loading) {
    again = true;
    return;
  }
  const v = view;
  loading = v.load().catch((err) => {
    if (err.status === 401) signIn(refused);
  });
  await loading;
  loading = null;
  if (again) {
    again = false;
    schedule(0);
  }
}

const liveText = { connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', stopped: 'Offline' };

function setLive(state, resumed) {
  live.hidden = false;
  live.dataset.state = state;
  live.textContent = liveText[state] || state;
  live.title = state === 'live' ? 'Updates arrive as they happen' : 'Updates paused; the page re-reads every 30 s';
  if (state === 'live' && resumed) schedule(0);
  if (state === 'unauthorized') signIn(refused);
}

const refused = 'The controller refused the token, or the session ended (401). Sign in again.';

async function start() {
  ctx.me = await api.get('/api/v1/whoami');
  api.setSession(ctx.me.session);
  nav.hidden = false;
  signout.hidden = false;
  fill(who, ctx.me.name, ' · ', ctx.me.role, ctx.me.apps.length ? ' · ' + ctx.me.apps.join(', ') : '');
  stream = new api.EventStream({
    onEvent: (frame) => { if (view && view.onEvent(frame)) schedule(300); },
    onState: setLive,
  });
  stream.start();
  fallback = setInterval(() => schedule(0), FALLBACK_MS);
  open();
}

function stop() {
  if (stream) stream.stop();
  stream = null;
  clearInterval(fallback);
  clearTimeout(timer);
  if (view && view.dispose) view.dispose();
  view = null;
  ctx.me = null;
  nav.hidden = true;
  signout.hidden = true;
  live.hidden = true;
  fill(who);
}

// signedOut says, by the ?signin= the controller sends a browser back
// with, why a sign-in at the identity provider did not open a session.
const signedOut = {
  denied: 'The identity provider signed you in, but no rule of this controller gives you a role. Ask its administrators to map one of your groups.',
  failed: 'The sign-in did not check out. Try again; the controller\'s log says why.',
  expired: 'The sign-in took too long, or was started in another tab. Try again.',
  provider: 'The identity provider refused the sign-in.',
};

// provider adds the identity provider's sign-in to the form, when the
// controller offers one.
async function provider(into) {
  let methods;
  try {
    methods = await api.get('/api/v1/auth');
  } catch {
    return;
  }
  if (!methods.oidc) return;
  const next = location.hash.startsWith('#/') ? '?next=' + encodeURIComponent(location.hash) : '';
  fill(into, h('a', { id: 'sso', class: 'button primary', href: methods.oidc.loginPath + next }, 'Sign in with ' + methods.oidc.label),
    h('p', { class: 'muted' }, 'Or use an API token:'));
}

function signIn(message) {
  stop();
  api.setToken('');
  api.setSession(null);
  const sso = h('div', { class: 'sso' });
  provider(sso);
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const problem = h('div', { 'aria-live': 'assertive' });
  const form = h('form', { class: 'signin', 'aria-labelledby': 'h-signin', onsubmit: async (e) => {
    e.preventDefault();
    api.setToken(input.value.trim());
    try {
      await start();
    } catch (err) {
      stop();
      api.setToken('');
      fill(problem, err.status === 401
        ? h('div', { class: 'alert bad', role: 'alert' }, 'The controller does not know that token (401).')
        : errorBox(err));
    }
  } },
  h('h1', { id: 'h-signin' }, 'Sign in'),
  message ? h('div', { class: 'alert warn', role: 'alert' }, message) : null,
  sso,
  h('p', {}, 'Paste an API token. It is kept in this tab only and sent to this controller\'s API.'),
  h('label', { for: 'token' }, 'API token'), input,
  h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  problem);
  document.title = 'Sign in · Skep';
  fill(main, form);
  input.focus();
}

// Signing out of a session ends it at the controller, and at the
// identity provider too when it offers that: the browser goes there and
// comes back.
signout.addEventListener('click', async () => {
  if (ctx.me && ctx.me.session) {
    try {
      const out = await api.post('/api/v1/auth/signout');
      if (out && out.endSessionURL) {
        stop();
        location.assign(out.endSessionURL);
        return;
      }
    } catch (err) {
      if (err.status !== 401) {
        fill(main, errorBox(err));
        return;
      }
    }
  }
  signIn('');
});
window.addEventListener('hashchange', () => {
  // The skip link's #main is not a route.
  if (location.hash.startsWith('#/') || location.hash === '') {
    open();
    main.focus({ preventScroll: true });
  }
});

// A browser the controller sent back from a sign-in that failed says
// why; the reason is dropped from the address, so a reload does not
// repeat it.
const problem = signedOut[new URLSearchParams(location.search).get('signin')] || '';
if (location.search) history.replaceState(null, '', location.pathname + location.hash);

// With a saved token, use it; without, a session cookie may sign the
// page in, and a 401 shows the sign-in.
start().catch((err) => {
  if (err.status !== 401) signIn('Could not reach the controller: ' + err.message);
  else signIn(api.token() ? 'The controller refused the saved token (401).' : problem);
});
