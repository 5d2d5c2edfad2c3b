// The screens. Each view is built once when its route is opened and
// re-reads what it shows on load(); onEvent(frame) says whether an event
// concerns it, so a live event refreshes only the screen it touches.

import * as api from './api.js';
import { h, fill, short, time, badge, revisionPair, errorBox, diffView } from './dom.js';

const healthRank = { degraded: 4, missing: 4, unknown: 1, progressing: 2, healthy: 0 };

// problem scores how much an application needs attention; higher first.
export function problem(a) {
  let score = healthRank[a.health] || 0;
  if (a.lastError || (a.lastSync && a.lastSync.outcome === 'failed')) score = Math.max(score, 4);
  if (a.sync === 'out-of-sync' || (a.drift && a.drift.length)) score = Math.max(score, 3);
  return score;
}

const driftText = {
  git: 'Git moved past the deployed revision.',
  live: 'The swarm moved behind the controller\'s back.',
  artifact: 'Git asks for an artifact version whose image is not in the registry yet; the deploy waits for it (see Artifacts).',
};

const appLink = (name, rest = '') => '#/app/' + encodeURIComponent(name) + rest;

// What made the controller sync on its own; `skep app get` uses the same words.
const triggerText = { webhook: 'push webhook', git: 'new commit in git', interval: 'interval', 'drift-correction': 'drift correction' };

function startedBy(s) {
  // No trigger: a sync an earlier run recorded, whose actor is all the
  // history keeps.
  if (s.trigger === 'sync' || !s.trigger) return 'by ' + (s.actor || 'the controller');
  return 'by the controller: ' + (triggerText[s.trigger] || s.trigger);
}

// lastSync shows the application's last sync of any kind (lastApplied),
// unless a requested sync (lastSync) that has not succeeded is newer: one
// running or failed is what the reader needs to see.
function lastSync(a) {
  const asked = a.lastSync;
  const done = a.lastApplied;
  if (asked && (!done || (asked.outcome !== 'succeeded' && Date.parse(asked.startedAt) >= Date.parse(done.at)))) {
    return h('span', {}, badge(asked.outcome), ' by ', asked.actor || 'the controller', ' ', time(asked.finishedAt || asked.startedAt));
  }
  if (!done) return h('span', { class: 'muted' }, 'never');
  return h('span', {}, badge('succeeded'), ' ', startedBy(done), ' ',
    done.revision ? [h('code', { title: done.revision }, short(done.revision)), ' '] : null, time(done.at));
}

function drift(a) {
  const n = (a.drift || []).length;
  if (n) return badge('drift-detected', n + (n === 1 ? ' finding' : ' findings'));
  if (a.driftReason === 'artifact') return h('span', { class: 'badge warn', title: 'Git asks for an artifact version whose image is not pushed yet' }, 'artifact waiting');
  if (a.driftReason) return badge('out-of-sync', a.driftReason + ' moved');
  return h('span', { class: 'muted' }, 'none');
}

// Applications: one row each, problems first, with filters.
export function listView(ctx) {
  const filter = ctx.memory.list || (ctx.memory.list = { q: '', sync: '', health: '', problems: false });
  const body = h('tbody');
  const caption = h('p', { class: 'summary', role: 'status' });
  const errors = h('div');
  const control = (label, el) => h('label', { class: 'control' }, h('span', {}, label), el);
  const select = (key, options) => {
    const el = h('select', { onchange: () => { filter[key] = el.value; render(); } },
      options.map(([v, t]) => h('option', { value: v }, t)));
    el.value = filter[key];
    return el;
  };
  const search = h('input', { type: 'search', value: filter.q, placeholder: 'name, repo, release', oninput: () => { filter.q = search.value; render(); } });
  const problems = h('input', { type: 'checkbox', onchange: () => { filter.problems = problems.checked; render(); } });
  problems.checked = filter.problems;
  let data = { applications: [] };

  const el = h('section', { 'aria-labelledby': 'h-apps' },
    h('h1', { id: 'h-apps' }, 'Applications'),
    h('div', { class: 'filters' },
      control('Search', search),
      control('Sync', select('sync', [['', 'any'], ['synced', 'synced'], ['out-of-sync', 'out of sync'], ['unknown', 'unknown']])),
      control('Health', select('health', [['', 'any'], ['healthy', 'healthy'], ['progressing', 'progressing'], ['degraded', 'degraded'], ['missing', 'missing'], ['unknown', 'unknown']])),
      h('label', { class: 'control check' }, problems, h('span', {}, 'Problems only'))),
    caption, errors,
    h('div', { class: 'table-wrap' }, h('table', { class: 'apps stack' },
      h('thead', {}, h('tr', {}, ['Application', 'Swarm', 'Sync', 'Health', 'Drift', 'Services', 'Revision', 'Last sync'].map((c) => h('th', { scope: 'col' }, c)))),
      body)));

  function render() {
    const q = filter.q.trim().toLowerCase();
    const all = data.applications || [];
    const rows = all
      .filter((a) => !filter.sync || a.sync === filter.sync)
      .filter((a) => !filter.health || a.health === filter.health)
      .filter((a) => !filter.problems || problem(a) >= 3)
      .filter((a) => !q || [a.name, a.repo, a.path, a.swarm, ...(a.releases || [])].some((s) => (s || '').toLowerCase().includes(q)))
      .sort((x, y) => problem(y) - problem(x) || x.name.localeCompare(y.name));
    const attention = all.filter((a) => problem(a) >= 3).length;
    fill(caption, `${all.length} application${all.length === 1 ? '' : 's'}, ${attention} need${attention === 1 ? 's' : ''} attention`,
      rows.length < all.length ? `; ${rows.length} shown` : '');
    fill(body, rows.length === 0
      ? h('tr', {}, h('td', { colspan: 8, class: 'muted' }, all.length ? 'No application matches the filters.' : 'No applications.'))
      : rows.map((a) => h('tr', { class: problem(a) >= 3 ? 'problem' : '', 'data-app': a.name },
        h('th', { scope: 'row', 'data-label': 'Application' }, h('a', { href: appLink(a.name) }, a.name),
          a.held ? h('span', { class: 'badge warn' }, 'held') : null,
          a.phase && a.phase !== 'idle' ? h('span', { class: 'badge info' }, a.phase) : null),
        h('td', { 'data-label': 'Swarm' }, a.swarm ? h('code', {}, a.swarm) : h('span', { class: 'muted' }, 'local')),
        h('td', { 'data-label': 'Sync' }, badge(a.sync)),
        h('td', { 'data-label': 'Health', title: a.healthMessage || '' }, badge(a.health)),
        h('td', { 'data-label': 'Drift' }, drift(a)),
        h('td', { 'data-label': 'Services' }, `${a.services.running}/${a.services.desired}`, h('span', { class: 'muted' }, ` in ${a.services.services}`)),
        h('td', { 'data-label': 'Revision' }, revisionPair(a.deployedRevision, a.revision)),
        h('td', { 'data-label': 'Last sync' }, lastSync(a)))));
  }

  return {
    el,
    title: 'Applications',
    async load() {
      try {
        data = await api.get('/api/v1/applications');
        fill(errors, data.liveError ? h('div', { class: 'alert warn', role: 'alert' }, 'Live counts are missing: ', data.liveError) : null);
      } catch (err) {
        fill(errors, errorBox(err, ctx.me));
        if (err.status === 401) throw err;
      }
      render();
    },
    onEvent: () => true,
  };
}

// Application: header with state and actions, then one of its tabs.
export function appView(ctx, name, tab) {
  const head = h('div', { class: 'app-head' });
  const actions = h('div', { class: 'actions' });
  const panel = h('div', { class: 'panel-slot', 'aria-live': 'polite' });
  const content = h('div', { class: 'tab-body' });
  const tabs = [['', 'Overview'], ['/diff', 'Diff'], ['/pulls', 'Pull requests'], ['/history', 'History'], ['/events', 'Events']];
  const inner = tab === 'events' ? eventsView(ctx, name) : null;
  let current = null;
  let polling = 0;

  const el = h('section', { 'aria-labelledby': 'h-app' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, 'Applications'), ' / '),
    head, actions, panel,
    h('nav', { class: 'tabs', 'aria-label': 'Application' }, tabs.map(([path, label]) =>
      h('a', { href: appLink(name, path), 'aria-current': (tab || '') === path.slice(1) ? 'page' : null }, label))),
    content);

  const say = (node) => fill(panel, node);
  const done = (text) => say(h('div', { class: 'alert ok', role: 'status' }, text));

  async function act(label, fn) {
    say(h('p', { class: 'muted', role: 'status' }, label, '…'));
    try {
      await fn();
    } catch (err) {
      say(errorBox(err, ctx.me));
    }
  }

  // Sync shows the dry run first; only its confirmation syncs.
  const syncFirst = () => act('Planning the sync', async () => {
    const plan = await api.post(api.app(name, '/sync'), { dryRun: true });
    const confirm = h('button', { type: 'button', class: 'primary', onclick: () => act('Queueing the sync', async () => {
      const r = await api.post(api.app(name, '/sync'), {});
      done(`Sync ${r.status} (id ${r.id}).`);
      ctx.reload();
    }) }, 'Sync now');
    say(h('div', { class: 'panel', role: 'region', 'aria-label': 'Sync preview' },
      h('h2', {}, 'What a sync would change'),
      diffView(plan.diff),
      h('div', { class: 'actions' }, confirm, h('button', { type: 'button', onclick: () => say(null) }, 'Cancel'))));
    confirm.focus();
  });

  const simple = (path, label) => () => act(label, async () => {
    const r = await api.post(api.app(name, path));
    done(`${label}: ${r.status}.`);
    ctx.reload();
  });

  // rollback asks first, then syncs the release back to revision n.
  const rollback = (release, rev) => {
    const go = h('button', { type: 'button', class: 'primary', onclick: () => act('Queueing the rollback', async () => {
      const r = await api.post(api.app(name, '/rollback'), { revision: rev.number, release });
      done(`Rollback ${r.status} (id ${r.id}) to ${short(r.revision)}.`);
      ctx.reload();
    }) }, 'Roll back');
    say(h('div', { class: 'panel', role: 'region', 'aria-label': 'Rollback' },
      h('p', {}, `Roll release ${release} back to revision ${rev.number} (`, h('code', {}, short(rev.commit)), ')? The application is then held there until a sync or unhold.'),
      h('div', { class: 'actions' }, go, h('button', { type: 'button', onclick: () => say(null) }, 'Cancel'))));
    go.focus();
    window.scrollTo(0, 0);
  };

  function renderHead(a) {
    fill(head,
      h('h1', { id: 'h-app' }, a.name),
      h('div', { class: 'states' }, badge(a.sync), badge(a.health), a.phase !== 'idle' ? badge(a.phase) : null,
        a.held ? h('span', { class: 'badge warn' }, 'held at ', short(a.held.revision)) : null,
        a.rolledBack ? h('span', { class: 'badge bad' }, 'rolled back') : null,
        a.automated ? h('span', { class: 'badge muted' }, 'automated') : h('span', { class: 'badge muted' }, 'manual')),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Source'), h('dd', {}, h('code', {}, a.repo), ' @ ', a.targetRevision, a.path ? [' / ', h('code', {}, a.path)] : null),
        h('dt', {}, 'Swarm'), h('dd', {}, a.swarm || 'local'),
        h('dt', {}, 'Revision'), h('dd', {}, revisionPair(a.deployedRevision, a.revision)),
        h('dt', {}, 'Services'), h('dd', {}, `${a.services.running}/${a.services.desired} tasks running in ${a.services.services} services`),
        h('dt', {}, 'Last sync'), h('dd', {}, lastSync(a)),
        h('dt', {}, 'Last reconcile'), h('dd', {}, time(a.lastReconcile))),
      a.healthMessage ? h('p', { class: 'muted' }, a.healthMessage) : null,
      a.rolledBack ? h('div', { class: 'alert warn', role: 'status' }, h('strong', {}, 'Held off '), h('code', { title: a.rolledBack.revision }, short(a.rolledBack.revision)),
        ` since ${a.rolledBack.since}: its rollout failed and `, h('code', { title: a.rolledBack.restored }, short(a.rolledBack.restored)),
        ` (revision ${a.rolledBack.restoredRevision}) was written back. A new commit, a sync or a rollback lifts the hold.`) : null,
      a.cause ? h('section', { class: 'cause', 'aria-labelledby': 'h-cause' }, h('h2', { id: 'h-cause' }, 'Why the last rollout failed'),
        h('p', {}, a.cause.line),
        a.cause.logs ? h('pre', { class: 'logs', 'aria-label': 'Log tail of ' + a.cause.service }, a.cause.logs) : null) : null,
      canarySection(a.canary),
      a.lastError ? h('div', { class: 'alert bad last-error', role: 'alert' }, h('strong', {}, (a.lastErrorClass || 'error') + ': '), a.lastError) : null);
    if (!ctx.can('deployer')) {
      fill(actions, h('p', { class: 'muted' }, `Role ${ctx.me.role}: read only.`));
      return;
    }
    fill(actions,
      h('button', { type: 'button', class: 'primary', onclick: syncFirst }, 'Sync…'),
      h('button', { type: 'button', onclick: simple('/refresh', 'Refresh') }, 'Refresh'),
      a.held ? h('button', { type: 'button', onclick: simple('/unhold', 'Unhold') }, 'Unhold') : null,
      canaryRuns(a.canary) ? [h('button', { type: 'button', onclick: simple('/promote', 'Promote canary') }, 'Promote canary'),
        h('button', { type: 'button', class: 'danger', onclick: simple('/abort', 'Abort canary') }, 'Abort canary')] : null,
      h('a', { class: 'button', href: appLink(name, '/history') }, 'Roll back…'));
  }

  function overview(d) {
    const a = d.application;
    return [
      d.liveError ? h('div', { class: 'alert warn', role: 'alert' }, 'The swarm did not answer: ', d.liveError) : null,
      (a.warnings || []).length ? h('section', { 'aria-labelledby': 'h-warn' }, h('h2', { id: 'h-warn' }, 'Warnings'),
        h('div', { class: 'alert warn', role: 'status' }, h('p', {}, 'The last reconcile of this commit went on despite:'),
          h('ul', {}, a.warnings.map((w) => h('li', {}, w))))) : null,
      (a.plan || []).length ? h('section', {}, h('h2', {}, 'Plan'), h('ul', {}, a.plan.map((p) => h('li', {}, p)))) : null,
      h('section', { 'aria-labelledby': 'h-drift' }, h('h2', { id: 'h-drift' }, 'Drift'),
        (a.drift || []).length === 0
          ? h('p', { class: 'muted' }, driftText[a.driftReason] || (a.driftReason ? `Out of sync (${a.driftReason}).` : 'No live drift found.'))
          : h('div', { class: 'table-wrap' }, h('table', { class: 'drift stack' },
            h('thead', {}, h('tr', {}, ['Service', 'Kind', 'Field', 'Desired', 'Live'].map((c) => h('th', { scope: 'col' }, c)))),
            h('tbody', {}, a.drift.map((f) => h('tr', {},
              h('td', { 'data-label': 'Service' }, f.service),
              h('td', { 'data-label': 'Kind' }, badge('drift-detected', f.kind)),
              h('td', { 'data-label': 'Field' }, h('code', {}, f.field || f.path)),
              h('td', { 'data-label': 'Desired' }, h('code', {}, f.desired || '—')),
              h('td', { 'data-label': 'Live' }, h('code', {}, f.live || '—'), f.message ? h('div', { class: 'muted' }, f.message) : null))))))),
      h('section', { 'aria-labelledby': 'h-rel' }, h('h2', { id: 'h-rel' }, 'Releases'),
        (d.releases || []).length === 0 ? h('p', { class: 'muted' }, 'Nothing deployed yet.') : null,
        (d.releases || []).map((r) => h('article', { class: 'release' },
          h('h3', {}, r.name, ' ', r.revision ? h('span', { class: 'muted' }, `revision ${r.revision} · `, h('code', {}, short(r.commit)), ' · ', time(r.appliedAt)) : h('span', { class: 'muted' }, 'no revision')),
          (r.services || []).length === 0 ? h('p', { class: 'muted' }, 'No live services.') : null,
          (r.services || []).map((s) => h('div', { class: 'service' },
            h('h4', {}, s.name, ' ', badge(s.running >= s.desired && s.desired > 0 ? 'healthy' : s.running > 0 ? 'progressing' : 'missing', `${s.running}/${s.desired} running`),
              s.updateState ? [' ', badge(s.updateState === 'completed' ? 'healthy' : s.updateState.includes('rollback') ? 'degraded' : 'progressing', 'update ' + s.updateState)] : null),
            h('p', { class: 'muted' }, h('code', {}, s.image), ' · ', s.mode),
            h('ul', { class: 'tasks' }, (s.tasks || []).map((t) => h('li', {},
              badge(t.state === 'running' ? 'healthy' : ['failed', 'rejected'].includes(t.state) ? 'failed' : 'progressing', t.state),
              ` desired ${t.desiredState}`, t.slot ? ` · slot ${t.slot}` : '', t.node ? [' · ', h('span', { title: t.nodeId ? 'node ' + t.nodeId : '' }, t.node)] : '', ' · ', time(t.updatedAt),
              t.error || t.message ? h('span', { class: 'muted' }, ' — ', t.error || t.message) : null)))))))),
      artifactsSection(a),
      previewsSection(a),
    ];
  }

  async function history() {
    const hist = await api.get(api.app(name, '/history'));
    return [
      (hist.releases || []).map((r) => h('section', {}, h('h2', {}, 'Revisions of ', r.name),
        h('div', { class: 'table-wrap' }, h('table', { class: 'stack' },
          h('thead', {}, h('tr', {}, ['Revision', 'Commit', 'Applied', 'Actor', 'Images', ''].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, [...(r.revisions || [])].reverse().map((v, i) => h('tr', {},
            h('td', { 'data-label': 'Revision' }, '#', v.number, i === 0 ? h('span', { class: 'badge ok' }, 'current') : null),
            h('td', { 'data-label': 'Commit' }, h('code', { title: v.commit }, short(v.commit))),
            h('td', { 'data-label': 'Applied' }, time(v.appliedAt)),
            h('td', { 'data-label': 'Actor' }, v.actor || 'the controller'),
            h('td', { 'data-label': 'Images' }, Object.entries(v.images || {}).map(([svc, img]) => h('div', {}, svc, ': ', h('code', {}, img)))),
            h('td', {}, i > 0 && ctx.can('deployer') ? h('button', { type: 'button', onclick: () => rollback(r.name, v) }, `Roll back to #${v.number}`) : null)))))))),
      h('section', {}, h('h2', {}, 'Syncs'),
        hist.syncsError ? h('div', { class: 'alert warn' }, 'Sync history unavailable: ', hist.syncsError) : null,
        (hist.syncs || []).length === 0 ? h('p', { class: 'muted' }, 'No syncs recorded.') : h('div', { class: 'table-wrap' }, h('table', { class: 'stack' },
          h('thead', {}, h('tr', {}, ['Sync', 'Outcome', 'Revision', 'Actor', 'Started', 'Finished', 'Result'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, hist.syncs.map((s) => h('tr', {},
            h('td', { 'data-label': 'Sync' }, '#', s.id),
            h('td', { 'data-label': 'Outcome' }, badge(s.outcome)),
            h('td', { 'data-label': 'Revision' }, h('code', { title: s.revision || '' }, short(s.revision))),
            h('td', { 'data-label': 'Actor' }, s.actor || 'the controller'),
            h('td', { 'data-label': 'Started' }, time(s.startedAt)),
            h('td', { 'data-label': 'Finished' }, time(s.finishedAt)),
            h('td', { 'data-label': 'Result' }, s.error ? h('span', { class: 'bad-text' }, s.error) : s.summary || s.result || ''))))))),
    ];
  }

  return {
    el,
    title: name,
    async load() {
      try {
        const d = await api.get(api.app(name));
        current = d.application;
        renderHead(current);
        if (tab === 'events') {
          if (inner.el.parentNode !== content) fill(content, inner.el);
          await inner.load();
        } else if (tab === 'diff') {
          fill(content, diffView(await api.get(api.app(name, '/diff'))));
        } else if (tab === 'pulls') {
          fill(content, pullsView(await api.get(api.app(name, '/pulls'))));
        } else if (tab === 'history') {
          fill(content, await history());
        } else {
          fill(content, overview(d));
        }
      } catch (err) {
        if (err.status === 401) throw err;
        fill(content, errorBox(err, ctx.me));
        if (!current) fill(head, h('h1', { id: 'h-app' }, name));
      }
      // While a sync runs, look again soon: its events say when it starts
      // and ends, the state in between has no event of its own.
      clearTimeout(polling);
      if (current && (current.phase !== 'idle' || current.pendingSync || (current.lastSync && current.lastSync.outcome === 'running'))) {
        polling = setTimeout(() => ctx.reload(), 2000);
      }
    },
    onEvent(frame) {
      if (frame.event.application !== name) return false;
      if (inner) inner.onEvent(frame);
      return true;
    },
    dispose() { clearTimeout(polling); },
  };
}

// webLink is a link to url when it is a web page, else its text: a URL a
// webhook named is never followed by another scheme.
function webLink(url, ...children) {
  return /^https?:\/\//.test(url || '') ? h('a', { href: url, rel: 'noreferrer' }, ...children) : h('span', {}, ...children);
}

// planSummary says what a pull request's plan found, as its commit
// status does.
function planSummary(p) {
  if (!p) return badge('progressing', 'not planned yet');
  if (p.error) return badge('failed', 'does not plan');
  if (p.changes === 0) return badge('synced', 'no change');
  return badge('out-of-sync', p.changes === 1 ? '1 change' : `${p.changes} changes`);
}

// pullsView lists the open pull requests that change the application,
// each with its plan: what merging it would change in the swarm.
function pullsView(list) {
  const pulls = (list && list.pullRequests) || [];
  if (pulls.length === 0) {
    return h('p', { class: 'muted' }, 'No open pull request changes this application. Pull requests are planned from their forge\'s webhook events.');
  }
  return h('div', { class: 'pulls' }, pulls.map((p) => h('article', { class: 'pull', 'data-pull': String(p.number) },
    h('h2', {}, webLink(p.url, `#${p.number}`), ' ', p.title || '', ' ', planSummary(p.plan),
      p.state === 'queued' ? [' ', badge('progressing', 'new head queued')] : null,
      p.fork ? [' ', h('span', { class: 'badge warn', title: 'From a fork: planned without decrypting anything.' }, 'fork')] : null),
    h('p', { class: 'muted' }, p.repository, ': ', h('code', {}, p.branch || '?'), ' into ', h('code', {}, p.base),
      ' · head ', h('code', { title: p.head }, short(p.head)), p.plannedAt ? [' · planned ', time(p.plannedAt)] : null),
    p.plan && p.plan.sealed ? h('p', { class: 'muted' }, 'Encrypted values were not decrypted: each shows as changed where its ciphertext changed.') : null,
    p.plan ? (p.plan.releases || []).filter((r) => r.error).map((r) => h('div', { class: 'alert bad', role: 'alert' },
      h('strong', {}, 'Release ', r.name, ': '), r.error)) : null,
    p.plan && (p.plan.releases || []).some((r) => !r.error)
      ? diffView({ revision: p.plan.revision, releases: p.plan.releases.filter((r) => !r.error) }) : null)));
}

const shortDigest = (d) => (d ? d.replace(/^sha256:/, '').slice(0, 12) : '');
const version = (v) => (v ? h('code', {}, v) : h('span', { class: 'muted' }, '—'));

// artifactCondition is the registry's answer about the desired image,
// with its reason; "waiting" means the tag is not pushed yet.
function artifactCondition(x) {
  const tone = { pushed: 'ok', waiting: 'warn', error: 'bad' }[x.condition];
  return [
    x.condition ? h('span', { class: 'badge ' + (tone || 'muted') }, x.condition) : h('span', { class: 'muted' }, '—'),
    x.reason ? h('div', { class: 'reason' }, x.reason) : null,
    x.digest ? h('div', { class: 'muted' }, h('code', { title: x.digest }, shortDigest(x.digest))) : null,
  ];
}

// artifactDrift says whether git asks for another version than runs, and
// whether that version can deploy.
function artifactDrift(x) {
  if (x.drift === 'waiting') return h('span', { class: 'badge warn' }, 'waiting for image');
  if (x.drift === 'ready') return h('span', { class: 'badge info' }, 'ready to deploy');
  if (x.suspended) return h('span', { class: 'badge muted' }, 'suspended');
  return h('span', { class: 'badge ok' }, 'in sync');
}

// artifactsSection lists the release artifacts: none, no section.
function artifactsSection(a) {
  const items = a.artifacts || [];
  if (items.length === 0) return null;
  return h('section', { 'aria-labelledby': 'h-art' }, h('h2', { id: 'h-art' }, 'Artifacts'),
    h('div', { class: 'table-wrap' }, h('table', { class: 'artifacts stack' },
      h('thead', {}, h('tr', {}, ['Artifact', 'Kind', 'Strategy', 'Desired', 'Current', 'Used version', 'Image', 'Drift'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, items.map((x) => h('tr', { 'data-artifact': x.name, class: x.drift === 'waiting' ? 'waiting' : x.suspended ? 'suspended' : '' },
        h('th', { scope: 'row', 'data-label': 'Artifact' }, x.name,
          x.suspended ? h('span', { class: 'badge warn', title: 'Deploys of this artifact are suspended: it stays at its current version.' }, 'suspended') : null,
          x.preview ? h('span', { class: 'badge info' }, 'preview') : null,
          x.image ? h('div', { class: 'muted' }, h('code', {}, x.image)) : null),
        h('td', { 'data-label': 'Kind' }, x.kind),
        h('td', { 'data-label': 'Strategy' }, x.strategy),
        h('td', { 'data-label': 'Desired' }, version(x.desired)),
        h('td', { 'data-label': 'Current' }, version(x.current)),
        h('td', { 'data-label': 'Used version' }, x.version ? h('code', {}, x.version) : h('span', { class: 'muted' }, 'nothing to deploy yet')),
        h('td', { 'data-label': 'Image' }, artifactCondition(x)),
        h('td', { 'data-label': 'Drift' }, artifactDrift(x))))))));
}

// canaryRuns says whether someone may promote or abort the canary now.
function canaryRuns(c) {
  return c && (c.phase === 'progressing' || c.phase === 'paused');
}

// canarySection shows the release's canary: its phase, step and weight,
// the two services' tasks, and each metric of its analysis with the
// values measured.
function canarySection(c) {
  if (!c) return null;
  const phase = { progressing: 'progressing', paused: 'out-of-sync', promoted: 'healthy', aborted: 'failed' }[c.phase] || 'muted';
  return h('section', { class: 'canary', 'aria-labelledby': 'h-canary' }, h('h2', { id: 'h-canary' }, 'Canary'),
    h('div', { class: 'states' }, badge(phase, c.phase), h('span', { class: 'badge info' }, `weight ${c.weight}%`)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Service'), h('dd', {}, h('code', {}, c.service), ' beside ', h('code', {}, c.canaryService), ' at ', h('code', { title: c.revision }, short(c.revision))),
      h('dt', {}, 'Step'), h('dd', {}, `${Math.min(c.step, c.steps)} of ${c.steps}`, c.stepName ? [': ', h('code', {}, c.stepName)] : null, ' since ', time(c.since)),
      h('dt', {}, 'Tasks'), h('dd', {}, `${c.replicas} canary and ${c.stableReplicas} stable of ${c.totalReplicas}`),
      c.next ? [h('dt', {}, 'Next look'), h('dd', {}, time(c.next))] : null),
    c.message ? h('p', { class: c.phase === 'aborted' ? 'bad-text' : 'muted' }, c.message) : null,
    (c.analysis || []).length === 0 ? null : h('div', { class: 'table-wrap' }, h('table', { class: 'analysis stack' },
      h('thead', {}, h('tr', {}, ['Metric', 'Phase', 'Measured', 'Failed', 'Values'].map((col) => h('th', { scope: 'col' }, col)))),
      h('tbody', {}, c.analysis.map((m) => h('tr', { 'data-metric': m.metric },
        h('th', { scope: 'row', 'data-label': 'Metric' }, m.metric, m.message ? h('div', { class: 'muted' }, m.message) : null),
        h('td', { 'data-label': 'Phase' }, badge({ running: 'progressing', successful: 'healthy', failed: 'failed', error: 'failed', inconclusive: 'out-of-sync' }[m.phase] || 'muted', m.phase)),
        h('td', { 'data-label': 'Measured' }, `${m.count} (${m.successful} ok, ${m.inconclusive} inconclusive, ${m.errors} errors)`),
        h('td', { 'data-label': 'Failed' }, String(m.failed)),
        h('td', { 'data-label': 'Values' }, (m.measurements || []).map((x) => h('code', { class: x.phase === 'successful' ? '' : 'bad-text', title: `${x.at} ${x.phase}${x.error ? ': ' + x.error : ''}` },
          x.error ? 'error' : x.value, ' ')))))))));
}

// previewsSection lists the preview releases, one per branch, and why a
// branch has none. The domain is text: the UI does not guess its scheme,
// and the page makes no request to it.
function previewsSection(a) {
  const previews = a.previews || [];
  const problems = a.previewProblems || [];
  if (previews.length === 0 && problems.length === 0) return null;
  return h('section', { 'aria-labelledby': 'h-prev' }, h('h2', { id: 'h-prev' }, 'Previews'),
    previews.length === 0 ? h('p', { class: 'muted' }, 'No preview runs.') : h('div', { class: 'table-wrap' }, h('table', { class: 'previews stack' },
      h('thead', {}, h('tr', {}, ['Branch', 'Commit', 'Domain', 'Health', 'Deployed', 'Versions'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, previews.map((p) => h('tr', { 'data-branch': p.branch },
        h('th', { scope: 'row', 'data-label': 'Branch' }, h('code', {}, p.branch), h('div', { class: 'muted' }, 'release ', p.release)),
        h('td', { 'data-label': 'Commit' }, p.commit ? h('code', { title: p.commit }, short(p.commit)) : h('span', { class: 'muted' }, '—')),
        h('td', { 'data-label': 'Domain' }, p.domain ? h('code', {}, p.domain) : h('span', { class: 'muted' }, 'none')),
        h('td', { 'data-label': 'Health' }, badge(p.health)),
        h('td', { 'data-label': 'Deployed' }, p.deployed ? badge('healthy', 'deployed') : badge('missing', 'not deployed'),
          p.error ? h('div', { class: 'bad-text' }, p.error) : null),
        h('td', { 'data-label': 'Versions' }, (p.artifacts || []).length === 0 ? h('span', { class: 'muted' }, '—')
          : (p.artifacts || []).map((x) => h('div', {}, x.name, ' ', version(x.version || x.current),
            x.drift === 'waiting' ? [' ', h('span', { class: 'badge warn' }, 'waiting for ', x.desired || 'image')] : null)))))))),
    problems.length ? h('div', { class: 'alert warn', role: 'status' }, h('strong', {}, 'Branches without a preview'),
      h('ul', { class: 'problems' }, problems.map((s) => h('li', {}, s)))) : null);
}

export const eventTypes = ['sync-started', 'sync-succeeded', 'sync-failed', 'drift-detected', 'live-drift-detected', 'drift-converged', 'resources-pruned', 'prune-failed', 'swarm-unreachable', 'swarm-reachable', 'self-update-issued', 'release-rolled-back', 'incident-opened', 'incident-resolved', 'tasks-rebalanced', 'canary-step', 'canary-promoted', 'canary-aborted'];

// Events: the newest kept events, then live ones as they arrive.
export function eventsView(ctx, app) {
  const state = ctx.memory.events || (ctx.memory.events = { type: '' });
  const list = h('ol', { class: 'timeline', 'aria-live': 'polite', 'aria-relevant': 'additions' });
  const errors = h('div');
  const type = h('select', { onchange: () => { state.type = type.value; load(); } },
    h('option', { value: '' }, 'all types'), eventTypes.map((t) => h('option', { value: t }, t)));
  type.value = state.type;
  const seen = new Set();

  const item = (id, e) => h('li', { class: 'event', 'data-type': e.type },
    h('span', { class: 'when' }, time(e.at)),
    badge(e.type),
    app || !e.application ? null : h('a', { href: appLink(e.application) }, e.application),
    e.swarm ? h('span', { class: 'badge muted', title: 'swarm' }, e.swarm) : null,
    e.revision ? h('code', { title: e.revision }, short(e.revision)) : null,
    h('span', { class: 'actor' }, e.actor ? 'by ' + e.actor : 'by the controller'),
    e.message ? h('span', { class: 'msg' }, e.message) : null,
    e.cause ? h('span', { class: 'cause' }, 'cause: ', e.cause) : null);

  async function load() {
    const q = new URLSearchParams({ limit: '100' });
    if (app) q.set('app', app);
    if (state.type) q.set('type', state.type);
    try {
      const data = await api.get('/api/v1/events?' + q);
      seen.clear();
      fill(errors);
      fill(list, data.events.length === 0 ? h('li', { class: 'muted empty' }, 'No events yet.') : [...data.events].sort((x, y) => y.id - x.id).map((ev) => { seen.add(String(ev.id)); return item(ev.id, ev); }));
    } catch (err) {
      if (err.status === 401) throw err;
      fill(errors, errorBox(err, ctx.me));
    }
  }

  const el = h('section', { 'aria-labelledby': 'h-events' },
    h(app ? 'h2' : 'h1', { id: 'h-events' }, app ? 'Events' : 'Events of every application'),
    h('div', { class: 'filters' }, h('label', { class: 'control' }, h('span', {}, 'Type'), type)),
    errors, list);
  return {
    el,
    title: 'Events',
    load,
    onEvent(frame) {
      const e = frame.event;
      if ((app && e.application !== app) || (state.type && e.type !== state.type) || seen.has(frame.id)) return false;
      if (frame.id) seen.add(frame.id);
      const empty = list.querySelector('.empty');
      if (empty) empty.remove();
      list.prepend(item(frame.id, e));
      return false;
    },
  };
}

// Controller: the app set's source and state, orphaned releases (with why
// each stays) and pruned applications, and for admins the controller's
// details.
export function controllerView(ctx) {
  const body = h('div');
  const el = h('section', { 'aria-labelledby': 'h-ctl' }, h('h1', { id: 'h-ctl' }, 'Controller'), body);
  const names = (list, none) => (list || []).length === 0 ? h('p', { class: 'muted' }, none)
    : h('ul', {}, list.map((n) => h('li', {}, h('code', {}, n))));
  return {
    el,
    title: 'Controller',
    async load() {
      try {
        const [st, v] = await Promise.all([api.get('/api/v1/status'), api.get('/api/v1/version')]);
        const set = st.appSet;
        fill(body,
          set.error ? h('div', { class: 'alert bad', role: 'alert' }, h('strong', {}, 'The last app-set load failed; the running set is kept. '), set.error) : null,
          set.stale ? h('div', { class: 'alert warn', role: 'alert' }, 'The app set is stale: the source could not be read again.') : null,
          h('section', {}, h('h2', {}, 'App set'), h('dl', { class: 'facts' },
            h('dt', {}, 'Source'), h('dd', {}, set.source ? h('code', {}, set.source) : h('span', { class: 'muted' }, 'not named')),
            h('dt', {}, 'Revision'), h('dd', {}, set.revision ? h('code', { title: set.revision }, short(set.revision.replace(/^sha256:/, ''))) : '—'),
            h('dt', {}, 'State'), h('dd', {}, badge(set.loaded ? (set.stale ? 'out-of-sync' : 'synced') : 'failed', set.loaded ? (set.stale ? 'loaded, stale' : 'loaded') : 'not loaded')),
            h('dt', {}, 'Loaded'), h('dd', {}, time(set.loadedAt)),
            h('dt', {}, 'Applications'), h('dd', {}, String(st.applications)),
            h('dt', {}, 'Controller'), h('dd', {}, h('code', {}, st.controllerId), ' ', badge(st.ready ? 'healthy' : 'progressing', st.ready ? 'ready' : 'not ready')))),
          h('section', {}, h('h2', {}, 'Swarms'), h('p', { class: 'muted' }, 'The destinations this controller deploys to; "local" is the swarm it runs in.'),
            h('div', { class: 'table-wrap' }, h('table', { class: 'swarms stack' },
              h('thead', {}, h('tr', {}, ['Swarm', 'State', 'Engine', 'API', 'Nodes', 'Applications'].map((c) => h('th', { scope: 'col' }, c)))),
              h('tbody', {}, (st.swarms || []).map((w) => h('tr', { 'data-swarm': w.name },
                h('th', { scope: 'row', 'data-label': 'Swarm' }, w.name ? h('code', {}, w.name) : 'local'),
                h('td', { 'data-label': 'State', title: w.error || '' }, badge(w.reachable ? 'healthy' : 'degraded', w.reachable ? 'reachable' : 'unreachable'),
                  w.error ? h('div', { class: 'muted' }, w.error) : null),
                h('td', { 'data-label': 'Engine' }, w.engineVersion || '—'),
                h('td', { 'data-label': 'API' }, w.apiVersion || '—'),
                h('td', { 'data-label': 'Nodes' }, w.nodes ? String(w.nodes) : '—'),
                h('td', { 'data-label': 'Applications' }, String(w.applications)))))))),
          h('section', {}, h('h2', {}, 'Orphaned releases'), h('p', { class: 'muted' }, 'Deployed by this controller, declared by no loaded application, and why each was not pruned.'),
            (st.orphanedReleases || []).length === 0 ? h('p', { class: 'muted' }, 'None.')
              : h('ul', {}, st.orphanedReleases.map((r) => h('li', {}, h('code', {}, r.release), ' (', r.application, r.swarm ? ` on ${r.swarm}` : '', '): ', r.reason)))),
          h('section', {}, h('h2', {}, 'Pruned applications'), names(st.pruned, 'None.')),
          h('section', {}, h('h2', {}, 'Notifiers'), h('p', { class: 'muted' }, 'Where every event goes, in the order they were registered.'), names(st.notifiers || [], 'Not reported by this controller.')),
          h('section', {}, h('h2', {}, 'Details'), st.details ? h('dl', { class: 'facts' },
            h('dt', {}, 'Swarm node'), h('dd', {}, h('code', {}, st.details.swarm.nodeId || '—')),
            h('dt', {}, 'Cluster'), h('dd', {}, h('code', {}, st.details.swarm.clusterId || '—')),
            h('dt', {}, 'Engine'), h('dd', {}, st.details.swarm.engineVersion || '—'),
            h('dt', {}, 'Workers'), h('dd', {}, String(st.details.workers)),
            h('dt', {}, 'Git'), h('dd', {}, `${st.details.git.listRefs} ls-remote, ${st.details.git.fetches} fetches, ${st.details.git.exports} exports`))
            : h('p', { class: 'muted' }, 'Shown to admins only.')),
          h('section', {}, h('h2', {}, 'Build'), h('dl', { class: 'facts' },
            h('dt', {}, 'Version'), h('dd', {}, v.version, ' ', h('code', {}, short(v.commit))),
            h('dt', {}, 'API'), h('dd', {}, v.apiVersion, ' · ', v.capabilities.join(', ')))));
      } catch (err) {
        if (err.status === 401) throw err;
        fill(body, errorBox(err, ctx.me));
      }
    },
    onEvent: (frame) => ['resources-pruned', 'prune-failed', 'swarm-unreachable', 'swarm-reachable'].includes(frame.event.type),
  };
}
