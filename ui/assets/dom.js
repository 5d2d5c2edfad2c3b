// Small DOM helpers. Elements are built with createElement and text
// nodes only, never from HTML strings, so nothing the API returns can
// become markup.

// h builds an element: props sets attributes ('class', 'text', 'on<event>'
// handlers, booleans as present/absent); children are nodes or strings,
// nested arrays flattened, null and false skipped.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  add(el, children);
  return el;
}

function add(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

// fill replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  add(el, children);
  return el;
}

export const short = (rev) => (rev ? rev.slice(0, 8) : '');

export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  return h('time', { datetime: iso, title: d.toLocaleString() }, ago(d));
}

export function ago(d) {
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return s + 's ago';
  if (s < 3600) return Math.floor(s / 60) + 'm ago';
  if (s < 86400) return Math.floor(s / 3600) + 'h ago';
  return d.toLocaleDateString();
}

// tone maps a sync, health, outcome or event state to a colour class.
const tones = {
  synced: 'ok', healthy: 'ok', succeeded: 'ok', 'sync-succeeded': 'ok', 'drift-converged': 'ok', idle: 'muted',
  'out-of-sync': 'warn', progressing: 'info', running: 'info', reconciling: 'info', applying: 'info', 'sync-started': 'info',
  'drift-detected': 'warn', 'live-drift-detected': 'warn', 'resources-pruned': 'info', queued: 'info',
  degraded: 'bad', missing: 'bad', failed: 'bad', 'sync-failed': 'bad', 'prune-failed': 'bad', interrupted: 'warn',
  'release-rolled-back': 'bad', 'incident-opened': 'bad', 'incident-resolved': 'ok',
  'canary-step': 'info', 'canary-promoted': 'ok', 'canary-aborted': 'bad', promoted: 'ok', aborted: 'bad', paused: 'warn',
};

// badge shows a state as text with a colour; the text alone carries the
// meaning, so colour is never the only signal.
export function badge(state, label) {
  const s = state || 'unknown';
  return h('span', { class: 'badge ' + (tones[s] || 'muted') }, label || s);
}

export function revisionPair(deployed, compared) {
  if (!deployed && !compared) return h('span', { class: 'muted' }, '—');
  if (deployed === compared) return h('code', { title: deployed }, short(deployed));
  return h('span', { class: 'revs' },
    h('span', {}, 'deployed ', deployed ? h('code', { title: deployed }, short(deployed)) : h('span', { class: 'muted' }, 'none')),
    h('span', {}, ' compared ', compared ? h('code', { title: compared }, short(compared)) : h('span', { class: 'muted' }, '—')));
}

// errorBox shows a failed call; a 403 says plainly that the role or scope
// does not allow it.
export function errorBox(err, me) {
  if (err && err.status === 403) {
    return h('div', { class: 'alert bad', role: 'alert' },
      h('strong', {}, '403 Forbidden. '), err.message,
      me ? h('span', {}, ' (signed in as ', me.name, ', role ', me.role, ')') : null);
  }
  if (err && err.status === 404) return h('div', { class: 'alert warn', role: 'alert' }, h('strong', {}, 'Not found. '), err.message);
  const status = err && err.status ? err.status + ': ' : '';
  return h('div', { class: 'alert bad', role: 'alert' }, h('strong', {}, 'Error. '), status, err ? err.message : 'unknown');
}

const glyphs = {
  add: { glyph: '+', label: 'added' },
  remove: { glyph: '−', label: 'removed' },
  change: { glyph: '~', label: 'changed' },
  same: { glyph: ' ', label: '' },
};

// line is one diff line: a glyph and colour for sight, a word for screen
// readers.
function line(kind, ...text) {
  const g = glyphs[kind];
  return h('li', { class: 'line ' + kind },
    h('span', { class: 'glyph', 'aria-hidden': 'true' }, g.glyph),
    g.label ? h('span', { class: 'sr' }, g.label + ': ') : null,
    h('span', { class: 'text' }, ...text));
}

const opKind = { create: 'add', install: 'add', delete: 'remove', remove: 'remove', update: 'change', upgrade: 'change' };

// diffView renders a wire.Diff: per release its action, what no node can
// place, and every change, field by field.
export function diffView(diff) {
  const releases = (diff && diff.releases) || [];
  if (releases.length === 0) return h('p', { class: 'muted' }, 'No releases to compare.');
  return h('div', { class: 'diff' },
    diff.revision ? h('p', {}, 'At commit ', h('code', { title: diff.revision }, short(diff.revision))) : null,
    releases.map((rel) => h('section', { class: 'release-diff', 'aria-label': 'Release ' + rel.name },
      h('h3', {}, rel.name, ' ', badge(rel.action === 'none' ? 'synced' : 'out-of-sync', rel.action)),
      rel.reason ? h('p', { class: 'muted' }, rel.reason) : null,
      (rel.unplaceable || []).length === 0 ? null : h('div', { class: 'alert bad unplaceable', role: 'alert' },
        h('strong', {}, 'Cannot be placed. '), 'No node of the swarm satisfies what follows; a sync writes nothing unless the application allows it.',
        h('ul', {}, rel.unplaceable.map((l) => h('li', {}, h('code', {}, l))))),
      (rel.changes || []).length === 0
        ? h('p', { class: 'muted' }, 'No changes.')
        : h('ul', { class: 'lines' }, (rel.changes || []).map((c) => [
          line(opKind[c.op] || 'change', h('strong', {}, c.op, ' ', c.kind, ' ', c.name), c.reason ? h('span', { class: 'muted' }, ' (' + c.reason + ')') : null),
          (c.fields || []).map((f) => {
            if (f.added) return line('add', h('code', {}, f.path), ': ', f.new);
            if (f.removed) return line('remove', h('code', {}, f.path), ': ', f.old);
            return [line('remove', h('code', {}, f.path), ': ', f.old), line('add', h('code', {}, f.path), ': ', f.new)];
          }),
        ])))));
}
