// The cockpit's page: plain JavaScript, no build step, no dependency
// (docs/cockpit.md). It loads one snapshot (/api/snapshot), then applies
// the deltas of /api/live. Every render builds the view as fresh elements
// and morphs the page into it: existing nodes are kept (keyed by
// data-key), so typing, focus, open details and scroll survive. Clicks are
// handled by one delegated listener (data-action), so no handler is lost
// to a morph. Authentication is the HttpOnly cookie the first load set;
// no URL carries the token. Text from files is always set as text.
'use strict';

const $ = (id) => document.getElementById(id);
const S = {
  header: {}, roles: new Map(), attention: { attention: [], held: [] }, messages: new Map(),
  total: 0, more: false, sessions: [], journal: [], usage: null, depth: {}, stages: [],
  receipts: new Map(), violations: [], seq: 0,
};
const COLORS = ['#1f5fbf', '#11804a', '#b3261e', '#7a5c00', '#6a35a8', '#00707a', '#b35300', '#4e342e'];

// ---------------------------------------------------------------- elements

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'style') setStyle(e, v);
    else if (v === true) e.setAttribute(k, '');
    else if (v !== false && v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k !== null && k !== undefined && k !== false) e.append(k.nodeType ? k : String(k));
  }
  return e;
}

// Styles through the CSSOM: the page's Content-Security-Policy refuses
// style attributes written as text.
function setStyle(e, text) {
  e.removeAttribute('style');
  for (const decl of String(text).split(';')) {
    const i = decl.indexOf(':');
    if (i > 0) e.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
  }
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k.nodeType ? k : String(k));
  return e;
}

// ---------------------------------------------------------------- morphing

// Attributes and properties that belong to the person, not the view.
const USER_STATE = new Set(['open', 'value', 'checked']);

function morph(a, b) {
  if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) { a.replaceWith(b); return b; }
  if (a.nodeType === 3) { if (a.data !== b.data) a.data = b.data; return a; }
  if (a.nodeType !== 1) return a;
  for (const { name } of [...a.attributes]) {
    if (!b.hasAttribute(name) && !USER_STATE.has(name)) a.removeAttribute(name);
  }
  for (const { name, value } of [...b.attributes]) {
    if (USER_STATE.has(name) && a.hasAttribute('data-init')) continue;
    if (name === 'style') { if (a.style.cssText !== b.style.cssText) setStyle(a, b.style.cssText); continue; }
    if (a.getAttribute(name) !== value) a.setAttribute(name, value);
  }
  morphChildren(a, b);
  return a;
}

function keyOf(n) { return n.nodeType === 1 ? n.getAttribute('data-key') : null; }

function morphChildren(a, b) {
  const keyed = new Map();
  for (const c of a.childNodes) { const k = keyOf(c); if (k !== null) keyed.set(k, c); }
  let cur = a.firstChild;
  for (const nb of [...b.childNodes]) {
    const k = keyOf(nb);
    let match = null;
    if (k !== null) {
      match = keyed.get(k) || null;
      keyed.delete(k);
    } else if (cur && keyOf(cur) === null) {
      match = cur;
    }
    if (!match) { a.insertBefore(nb, cur); continue; }
    if (match !== cur) a.insertBefore(match, cur);
    cur = morph(match, nb).nextSibling;
  }
  while (cur) { const next = cur.nextSibling; cur.remove(); cur = next; }
}

function patch(id, ...kids) {
  const target = $(id);
  const fresh = target.cloneNode(false);
  for (const k of kids.flat(Infinity)) if (k) fresh.append(k);
  morphChildren(target, fresh);
}

// ---------------------------------------------------------------- formats

function ageOf(stamp) {
  const t = Date.parse(stamp);
  if (!stamp || Number.isNaN(t)) return '-';
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 120) return s + 's';
  if (s < 7200) return Math.floor(s / 60) + 'm';
  if (s < 172800) return Math.floor(s / 3600) + 'h';
  return Math.floor(s / 86400) + 'd';
}

// An age, with the exact stamp on hover and for screen readers.
function when(stamp, prefix) {
  if (!stamp) return null;
  return el('time', { datetime: stamp, title: stamp }, (prefix || '') + ageOf(stamp) + ' ago');
}

function money(x) { return '$' + (x || 0).toFixed(x >= 100 ? 0 : 2); }
function tokens(n) {
  n = n || 0;
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e4) return Math.round(n / 1e3) + 'k';
  return String(n);
}

// Bidi controls and line separators shown as what they are.
function visible(t) {
  return String(t || '').replace(/[\u202a-\u202e\u2066-\u2069\u2028\u2029]/g, (c) => '\\u{' + c.charCodeAt(0).toString(16) + '}');
}

function idChip(id) {
  return el('span', { class: 'id' }, el('code', {}, id),
    el('button', { type: 'button', class: 'copy', 'data-action': 'copy', 'data-copy': id, 'aria-label': 'copy id ' + id, title: 'copy id' }, 'copy'));
}

// ---------------------------------------------------------------- requests

function showError(text) { const e = $('error'); e.textContent = text; e.hidden = !text; }

async function api(path) {
  const r = await fetch(path, { credentials: 'same-origin' });
  const j = await r.json().catch(() => ({ message: r.status + ' ' + r.statusText }));
  if (!r.ok) throw new Error(j.message || r.statusText);
  return j;
}

async function act(path, body) {
  const r = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body || {}),
  });
  const j = await r.json().catch(() => ({ message: r.status + ' ' + r.statusText }));
  if (!r.ok) {
    showError((j.message || 'refused') + (j.errors ? '\n' + j.errors.join('\n') : ''));
    return { error: j };
  }
  showError('');
  return j;
}

// ---------------------------------------------------------------- state

function setMessages(list) {
  for (const m of list) S.messages.set(m.id, m);
}

function load(snap) {
  S.seq = snap.seq; S.header = snap.header; S.attention = snap.attention;
  S.roles = new Map(snap.roles.map((r) => [r.role, r]));
  S.messages = new Map(); setMessages(snap.messages);
  S.total = snap.total; S.more = snap.total > snap.messages.length;
  S.sessions = snap.sessions || []; S.journal = (snap.journal || []).slice().reverse();
  S.usage = snap.usage; S.stages = snap.stages || [];
  S.depth = {};
  for (const [role, pts] of Object.entries(snap.depth || {})) S.depth[role] = pts.map(([t, n]) => ({ t, n }));
}

function applyDelta(kind, data) {
  if (kind === 'message') {
    const m = data.message;
    if (S.messages.has(m.id)) S.messages.set(m.id, m);
    else { S.messages.set(m.id, m); }
    S.total = data.total;
  } else if (kind === 'role') {
    S.roles.set(data.role, data);
    const d = S.depth[data.role] || (S.depth[data.role] = []);
    const n = data.new || 0;
    if (!d.length || d[d.length - 1].n !== n) d.push({ t: Date.now(), n });
    if (d.length > 400) d.shift();
  } else if (kind === 'attention') {
    S.attention = data;
  } else if (kind === 'header') {
    S.header = data;
  } else if (kind === 'usage') {
    S.usage = data;
  } else if (kind === 'journal') {
    if (data.kind === 'expectation_violated') S.violations.push(data);
    S.journal.unshift(data);
    S.journal.length = Math.min(S.journal.length, 50);
  }
}

let frame = null;
function soon() { if (!frame) frame = requestAnimationFrame(() => { frame = null; render(); }); }

// ---------------------------------------------------------------- views

function spendOf(role) {
  return (S.usage && S.usage.roles && S.usage.roles[role]) || { tokens: 0, cost_usd: 0, turns: 0 };
}

// The header counts what "Needs a person" lists, one for each entry.
function renderHeader(need) {
  const h = S.header;
  $('root').textContent = (h.root || '') + (h.daemon_running ? '  ·  handoffd pid ' + h.daemon_pid : '  ·  handoffd not running');
  const roles = [...S.roles.values()];
  const count = (st) => roles.filter((r) => r.state === st).length;
  const total = (S.usage && S.usage.total) || { tokens: 0, cost_usd: 0 };
  const item = (k, label, v, cls, title) => el('div', { class: 'total ' + (cls || ''), 'data-key': k }, el('dt', {}, label), el('dd', { 'data-total': k, title }, v));
  patch('totals',
    item('roles', 'roles', roles.length),
    item('busy', 'busy', count('busy')),
    item('need_you', 'need you', need.length, need.length ? 'alert' : '', need.length ? need.map((n) => n.label).join(' · ') : 'nothing waits for a person'),
    item('waiting', 'waiting', roles.reduce((a, r) => a + (r.new || 0), 0)),
    item('in_process', 'in process', roles.filter((r) => r.in_process).length),
    item('tokens', 'tokens today', tokens(total.tokens)),
    item('cost', 'cost today', money(total.cost_usd), '', '$' + (total.cost_usd || 0)));
  const b = $('banner');
  if (h.paused) {
    b.hidden = false;
    b.textContent = 'PAUSED: ' + (h.paused.types && h.paused.types.length ? 'delivery of ' + h.paused.types.join(', ') : 'all delivery') +
      ' since ' + h.paused.since + ' (agents keep working; files wait in their outboxes)';
  } else { b.hidden = true; b.textContent = ''; }
}

function kv(label, ...v) { return el('div', { class: 'kv' }, el('span', { class: 'k' }, label), ' ', el('span', { class: 'v' }, v)); }

function promptBox(r) {
  return el('div', { class: 'prompt' },
    el('div', { class: 'prompt-text' }, visible(r.prompt)),
    (r.options || []).map((label, i) => el('button', {
      type: 'button', 'data-key': 'o' + i, 'data-action': 'choose', 'data-agent': r.role,
      'data-option': String(i + 1), 'data-label': label, 'data-prompt': r.prompt,
    }, label)));
}

function card(r) {
  const state = r.state || (r.human ? 'person' : 'unknown');
  const sp = spendOf(r.role);
  const ip = r.in_process;
  const a = r.activity;
  return el('article', { class: 'card state-' + state, 'data-key': r.role, 'data-role': r.role, 'aria-label': 'role ' + r.role },
    el('h3', {}, el('span', { class: 'name' }, r.role), el('span', { class: 'badge', 'data-state': state }, state.replace('_', ' '))),
    (r.state === 'needs_input' || r.state === 'blocked') && r.prompt ? promptBox(r) : null,
    r.state === 'waiting' ? el('div', { class: 'kv', 'data-waiting-for': r.role }, 'waiting for ', el('b', {}, (r.waiting_for || []).join(', ')), '\u2019s answer') : null,
    r.acp && (r.state === 'busy' || r.state === 'waiting') ? el('button', { type: 'button', 'data-key': 'cancel', 'data-action': 'cancel', 'data-agent': r.role, title: 'swarm cancel ' + r.role }, 'Cancel turn') : null,
    ip ? kv('working on', el('span', { class: 'summary', title: ip.name || '' }, (ip.type ? ip.type + ': ' : '') + visible(ip.summary || ip.name || '')), ' ', when(ip.since))
      : kv('working on', el('span', { class: 'mute' }, 'nothing')),
    a ? kv('activity', el('span', { class: 'activity', title: a.time }, a.kind + (a.name ? ' ' + a.name : '') + (a.text ? ': ' + visible(a.text) : '')), ' ', when(a.time)) : null,
    kv('waiting', el('b', {}, r.new), r.new ? [' (oldest ', when(r.oldest_since), ')'] : ''),
    kv('today', el('b', { 'data-tokens': r.role }, tokens(sp.tokens)), ' tokens · ', el('b', { 'data-cost': r.role, title: '$' + sp.cost_usd }, money(sp.cost_usd))),
    r.failed || r.outbox || r.held ? kv('files', 'failed ', el('b', {}, r.failed), ' · outbox ', el('b', {}, r.outbox), ' · held ', el('b', {}, r.held)) : null,
    r.not_moving ? el('div', { class: 'warn' }, 'not moving: ' + visible(r.not_moving)) : null,
    r.problem ? el('div', { class: 'warn' }, visible(r.problem)) : null);
}

function renderBoard() {
  patch('board', [...S.roles.values()].map(card));
}

function message(id) { return S.messages.get(id); }

// An open question. Free text is offered wherever the protocol allows it:
// `allow_custom` is yes unless the clarify says no (docs/protocol.md), so a
// question without options is answered with text alone. The server sends
// both flags with their defaults applied; the message's own headers are the
// fallback.
function clarifyItem(a) {
  const m = message(a.id);
  const h = (m && m.headers) || {};
  const multiple = typeof a.allow_multiple === 'boolean' ? a.allow_multiple : h.allow_multiple === 'yes';
  const custom = typeof a.allow_custom === 'boolean' ? a.allow_custom : h.allow_custom !== 'no';
  const options = a.options || [];
  const name = 'c-' + a.id;
  const textLabel = options.length ? 'or your own answer' : 'your answer';
  return el('div', { class: 'item', 'data-key': 'c:' + a.id, 'data-clarify': a.id },
    el('div', { class: 'what' }, a.from + ' asks ' + a.role + ': ' + visible(a.text)),
    el('div', { class: 'kv' }, 'open ', when(a.since), multiple ? ' · several choices' : '', custom && options.length ? ' · own answer allowed' : ''),
    options.map((o, i) => el('label', { class: 'choice', 'data-key': 'opt' + i }, el('input', { type: multiple ? 'checkbox' : 'radio', name, value: String(i + 1), 'data-option': o, 'data-init': true }), ' ', el('span', {}, o))),
    custom ? el('textarea', { rows: '2', placeholder: textLabel, 'data-key': 'custom', 'data-custom': a.id, 'data-init': true, 'aria-label': textLabel + ' to ' + a.from }) : null,
    el('div', { class: 'actions' },
      el('button', { type: 'button', 'data-action': 'answer', 'data-id': a.id }, 'Answer'),
      el('span', { class: 'mute' }, 'or: ', el('code', {}, a.handle))));
}

function heldItem(h) {
  return el('div', { class: 'item', 'data-key': 'h:' + h.id, 'data-held': h.id },
    el('div', { class: 'what' }, 'held ' + h.type + ': ' + h.from + ' → ' + h.to),
    el('div', { class: 'kv' }, idChip(h.id), ' · sha256 ' + h.sha256.slice(0, 12)),
    el('pre', { class: 'held-text', 'data-held-text': h.id }, visible(h.text) + (h.truncated ? '\n… (longer; `swarm approve ' + h.id + '` shows it all)' : '')),
    el('div', { class: 'actions' },
      h.truncated ? null : el('button', { type: 'button', 'data-approve': h.id, 'data-action': 'approve', 'data-id': h.id, 'data-sha': h.sha256 }, 'Approve'),
      el('input', { type: 'text', placeholder: 'reason to deny', 'data-key': 'reason', 'data-reason': h.id, 'data-init': true, 'aria-label': 'reason to deny' }),
      el('button', { type: 'button', 'data-action': 'deny', 'data-id': h.id }, 'Deny')));
}

// What needs a person, in the order the page lists it: each entry has
// the element shown under "Needs a person" and a short label for the
// header's count.
function needsPerson() {
  const items = [];
  const add = (label, e) => items.push({ label, e });
  // A role `waiting` on a person's answer counts once: with its open
  // question (named as what it waits on), or alone should the question not
  // be listed (yet).
  const waits = [...S.roles.values()].filter((r) => r.state === 'waiting');
  const asking = new Set();
  for (const a of S.attention.attention || []) {
    if (a.kind === 'clarify') {
      const w = waits.find((r) => r.role === a.from && (r.waiting_for || []).includes(a.role));
      if (w) asking.add(w.role);
      add('question from ' + a.from + (w ? ' (' + w.role + ' waits)' : ''), clarifyItem(a));
    } else if (a.kind === 'waiting') {
      add(a.type + ' for ' + a.role, el('div', { class: 'item', 'data-key': 'w:' + a.id, 'data-waiting': a.id },
        el('div', { class: 'what' }, a.role + ' has waiting ' + a.type + ' from ' + a.from), el('div', { class: 'text' }, visible(a.text)),
        el('div', { class: 'kv' }, idChip(a.id), ' ', when(a.since)),
        el('button', { type: 'button', 'data-done': a.id, 'data-action': 'done', 'data-id': a.id, 'data-human': a.role }, 'Mark done')));
    } else {
      const r = S.roles.get(a.role);
      add(a.role + ' ' + a.kind.replace('_', ' '), el('div', { class: 'item', 'data-key': 'p:' + a.role + ':' + a.kind, 'data-pane': a.role },
        el('div', { class: 'what' }, a.role + ': ' + a.kind.replace('_', ' ') + ' ', when(a.since)),
        r && r.prompt && (r.state === 'needs_input' || r.state === 'blocked') ? promptBox(r) : el('div', { class: 'text' }, visible(a.text)),
        el('div', { class: 'mute' }, 'or: ', el('code', {}, a.handle))));
    }
  }
  for (const h of S.attention.held || []) add('approval for ' + h.from + ' → ' + h.to, heldItem(h));
  for (const r of S.roles.values()) {
    if (r.state === 'dead') add(r.role + ' dead', el('div', { class: 'item', 'data-key': 'd:' + r.role }, el('div', { class: 'what' }, r.role + ': agent dead ', when(r.since))));
  }
  for (const r of waits.filter((w) => !asking.has(w.role))) {
    add(r.role + ' waits for ' + (r.waiting_for || []).join(', '), el('div', { class: 'item', 'data-key': 'q:' + r.role },
      el('div', { class: 'what' }, r.role + ': waiting for ' + (r.waiting_for || []).join(', ') + '\u2019s answer')));
  }
  S.violations.slice(-10).forEach((v, i) => add('expectation violated', el('div', { class: 'item', 'data-key': 'v' + i }, el('div', { class: 'what' }, 'expectation violated'), visible((v.path || '') + ' ' + (v.reason || '')))));
  return items;
}

function renderAttention(need) {
  patch('attention', need.length ? need.map((n) => n.e) : el('div', { class: 'empty', 'data-key': 'empty' }, 'nothing needs a person'));
}

function receiptsOf(id) {
  const r = S.receipts.get(id);
  if (!r) return el('div', { class: 'receipts' }, 'loading…');
  return el('div', { class: 'receipts' }, r);
}

function msgRow(m) {
  const h = m.headers || {};
  return el('div', { class: 'msg ' + m.state, 'data-key': m.id, 'data-id': m.id },
    el('div', { class: 'meta' }, when(m.time), ' ', el('span', { class: 'who' }, m.from + ' → ' + m.to),
      m.state !== 'sent' ? el('span', { class: 'state' }, ' [' + m.state + (m.reason ? ': ' + visible(m.reason) : '') + ']') : null, ' ', idChip(m.id)),
    el('div', { class: 'line' }, el('span', { class: 'type' }, m.type), ' ', el('span', { class: 'summary' }, visible(m.summary || '')),
      h.in_reply_to ? el('span', { class: 'mute' }, ' ↩ ' + h.in_reply_to) : null),
    m.body && m.body.trim() ? el('details', { class: 'body', 'data-key': 'body' }, el('summary', {}, 'body'), el('pre', {}, visible(m.body))) : null,
    el('details', { class: 'rcpt', 'data-key': 'rcpt', 'data-receipts': m.id }, el('summary', {}, 'receipts'), receiptsOf(m.id)));
}

function renderTranscript() {
  const msgs = [...S.messages.values()].sort((a, b) => (a.time || '').localeCompare(b.time || '') || a.id.localeCompare(b.id));
  const titles = new Map((S.sessions || []).map((s) => [s.id, s.title || s.id]));
  const out = [];
  for (const m of msgs.reverse()) {
    const h = m.headers || {};
    const frame = h.session ? 'session ' + (titles.get(h.session) || h.session) : h.discussion ? 'discussion ' + h.discussion : null;
    const row = msgRow(m);
    if (frame) row.prepend(el('div', { class: 'frame' }, frame));
    out.push(row);
  }
  patch('transcript', out.length ? out : el('div', { class: 'empty', 'data-key': 'empty' }, 'no messages yet'));
  $('earlier').hidden = !S.more;
  $('earlier').textContent = 'Load earlier (' + (S.total - S.messages.size) + ' more)';
}

function roleNames() { return [...S.roles.keys()]; }

function legend(entries) {
  return el('ul', { class: 'legend' }, entries.map(([name, color, text]) => el('li', { 'data-key': name }, el('span', { class: 'swatch', style: 'background:' + color }), name + (text !== undefined ? ' ' + text : ''))));
}

function renderDepth() {
  const W = 420, H = 150, L = 30, P = 10;
  const names = roleNames();
  const all = names.flatMap((n) => S.depth[n] || []);
  if (!all.length) { patch('depth', el('div', { class: 'empty', 'data-key': 'empty' }, 'no deliveries yet')); return; }
  const now = Date.now();
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(now, t0 + 1);
  const max = Math.max(1, ...all.map((p) => p.n));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - P), y = (n) => H - 20 - (n / max) * (H - 20 - P);
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'queue depth per role over time', 'data-key': 'chart', 'data-t0': String(t0) },
    svg('line', { x1: L, y1: H - 20, x2: W - P, y2: H - 20, stroke: '#8a94a6' }),
    svg('text', { x: 2, y: P + 4 }, String(max)), svg('text', { x: 2, y: H - 20 }, '0'),
    svg('text', { x: L, y: H - 4 }, new Date(t0).toISOString().slice(0, 16).replace('T', ' ')),
    svg('text', { x: W - P, y: H - 4, 'text-anchor': 'end' }, 'now'));
  names.forEach((n, i) => {
    const h = S.depth[n] || [];
    if (!h.length) return;
    // A step line: the depth holds until the next change, and until now.
    const pts = [];
    h.forEach((p, j) => { if (j) pts.push([x(p.t), y(h[j - 1].n)]); pts.push([x(p.t), y(p.n)]); });
    pts.push([x(now), y(h[h.length - 1].n)]);
    g.append(svg('polyline', { fill: 'none', stroke: COLORS[i % COLORS.length], 'stroke-width': 2, points: pts.map((p) => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' ') }));
  });
  patch('depth', g, legend(names.map((n, i) => [n, COLORS[i % COLORS.length], String(((S.depth[n] || []).slice(-1)[0] || { n: 0 }).n)])));
}

function renderLatency() {
  const labels = { created_to_enqueued: 'enqueue', enqueued_to_dequeued: 'wait', dequeued_to_completed: 'work' };
  const rows = [...S.roles.values()].filter((r) => r.latency && S.stages.some((s) => r.latency[s]));
  if (!rows.length) { patch('latency', el('div', { class: 'empty', 'data-key': 'empty' }, 'no completed items yet')); return; }
  const max = Math.max(1, ...rows.flatMap((r) => S.stages.map((s) => (r.latency[s] ? r.latency[s].p50_ms : 0))));
  const fmt = (ms) => (ms < 1000 ? ms + ' ms' : ms < 120000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms / 60000) + ' min');
  patch('latency', el('table', { class: 'bars', 'data-key': 'table' },
    el('thead', {}, el('tr', {}, el('th', {}, 'role'), el('th', {}, 'stage'), el('th', {}, 'p50'))),
    el('tbody', {}, rows.flatMap((r) => S.stages.map((s, j) => {
      const v = r.latency[s];
      return el('tr', { 'data-key': r.role + s },
        el('td', {}, j ? '' : r.role), el('td', {}, labels[s] || s),
        el('td', {}, v ? el('span', { class: 'bar', style: `width:${Math.max(2, (v.p50_ms / max) * 100).toFixed(1)}%;background:${COLORS[j]}` }) : null,
          el('span', { class: 'barval' }, v ? fmt(v.p50_ms) + ' (' + v.count + ')' : 'not measured')));
    })))));
}

function renderCost() {
  const days = (S.usage && S.usage.by_day) || [];
  if (!days.length) { patch('cost', el('div', { class: 'empty', 'data-key': 'empty' }, 'no usage recorded')); return; }
  const max = Math.max(0.01, ...days.map((d) => d[1]));
  patch('cost', el('table', { class: 'bars', 'data-key': 'table' },
    el('tbody', {}, days.map(([day, c]) => el('tr', { 'data-key': day },
      el('td', {}, day), el('td', {}, el('span', { class: 'bar', style: `width:${Math.max(2, (c / max) * 100).toFixed(1)}%;background:${COLORS[0]}` }), el('span', { class: 'barval' }, money(c))))))));
}

function renderJournal() {
  patch('journal', S.journal.map((e) => el('li', { 'data-key': String(e.offset) },
    when(e.time), ' ', el('b', {}, e.kind), ' ', e.id ? el('code', {}, e.id) : '', e.recipient ? ' → ' + e.recipient : '', e.reason ? ' — ' + visible(e.reason) : '')));
}

function renderCompose() {
  const roles = roleNames();
  const humans = [...S.roles.values()].filter((r) => r.human).map((r) => r.role);
  const fill = (sel, names) => {
    if ([...sel.options].map((o) => o.value).join() !== names.join()) {
      const keep = sel.value;
      sel.replaceChildren(...names.map((h) => el('option', { value: h }, h)));
      if (names.includes(keep)) sel.value = keep;
    }
  };
  fill($('c-role'), humans);
  fill($('c-to'), roles);
}

function render() {
  if (!S.header) return;
  const need = needsPerson();
  renderHeader(need); renderAttention(need); renderBoard(); renderTranscript(); renderDepth(); renderLatency(); renderCost(); renderJournal(); renderCompose();
}

// ---------------------------------------------------------------- actions

function fieldErrors(byField) {
  for (const d of document.querySelectorAll('#compose .field-error')) d.textContent = '';
  for (const [f, msg] of byField || []) {
    const d = document.querySelector(`#compose .field-error[data-for="${CSS.escape(f)}"]`) || document.querySelector('#compose .field-error[data-for=""]');
    d.textContent = (d.textContent ? d.textContent + '\n' : '') + msg;
  }
}

const actions = {
  async pause() { await act('/api/pause', { types: $('pause-types').value.split(/[\s,]+/).filter(Boolean) }); },
  async resume() { await act('/api/resume', {}); },
  async approve(b) { await act('/api/approve', { id: b.dataset.id, sha256: b.dataset.sha }); },
  async deny(b) {
    const reason = document.querySelector(`[data-reason="${CSS.escape(b.dataset.id)}"]`);
    await act('/api/deny', { id: b.dataset.id, reason: reason ? reason.value : '' });
  },
  async done(b) { await act('/api/inbox/done', { id: b.dataset.id, role: b.dataset.human }); },
  async answer(b) {
    const id = b.dataset.id;
    const opts = [...document.getElementsByName('c-' + id)];
    const choices = opts.filter((x) => x.checked).map((x) => Number(x.value));
    const t = document.querySelector(`[data-custom="${CSS.escape(id)}"]`);
    const text = t && t.value.trim() ? t.value : null;
    if (!choices.length && !text) {
      showError(!t ? 'Choose an option first.' : opts.length ? 'Choose an option or write an answer first.' : 'Write an answer first.');
      (opts[0] || t || b).focus();
      return;
    }
    b.disabled = true;
    try { await act('/api/answer', { id, choices, text }); } finally { b.disabled = false; }
  },
  async choose(b) {
    b.disabled = true;
    await act('/api/choose', { role: b.dataset.agent, option: Number(b.dataset.option), label: b.dataset.label, prompt: b.dataset.prompt });
    b.disabled = false;
  },
  async cancel(b) {
    b.disabled = true;
    try { await act('/api/cancel', { role: b.dataset.agent }); } finally { b.disabled = false; }
  },
  async copy(b) {
    try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = 'copied'; } catch (_) {
      const r = document.createRange(); r.selectNodeContents(b.previousSibling);
      const s = getSelection(); s.removeAllRanges(); s.addRange(r); b.textContent = 'selected';
    }
    setTimeout(() => { b.textContent = 'copy'; }, 1500);
  },
  async earlier() {
    const oldest = [...S.messages.values()].sort((a, b) => (a.time || '').localeCompare(b.time || ''))[0];
    const j = await api('/api/transcript?limit=200' + (oldest ? '&before=' + encodeURIComponent(oldest.id) : ''));
    setMessages(j.messages); S.more = j.more; soon();
  },
};

document.addEventListener('click', (e) => {
  const b = e.target.closest('[data-action]');
  if (!b || b.disabled) return;
  e.preventDefault();
  actions[b.dataset.action](b).catch((x) => showError(String(x.message || x)));
});

// Receipts load when their details open.
document.addEventListener('toggle', (e) => {
  const d = e.target;
  if (!d.open || !d.dataset || !d.dataset.receipts) return;
  const id = d.dataset.receipts;
  api('/api/receipts?id=' + encodeURIComponent(id)).then((r) => {
    const lines = r.recipients.map((x) => x.recipient + ': ' + x.state +
      (x.enqueued_at ? '  enqueued ' + x.enqueued_at : '') + (x.completed_at ? '  completed ' + x.completed_at : ''));
    for (const o of r.originals) lines.unshift('original: ' + o.state + (o.reason ? ' (' + o.reason + ')' : ''));
    S.receipts.set(id, lines.join('\n')); soon();
  }).catch((x) => showError(String(x.message || x)));
}, true);

$('compose').addEventListener('submit', async (e) => {
  e.preventDefault();
  const f = new FormData($('compose'));
  const fields = {};
  for (const [k, v] of f.entries()) if (k !== 'role') fields[k] = v;
  const j = await act('/api/send', { role: f.get('role'), fields });
  if (j.error) { fieldErrors(j.error.errors_by_field || [['', j.error.message]]); $('compose-result').textContent = ''; return; }
  fieldErrors([]);
  $('compose-result').textContent = 'queued ' + (j.id || '');
  for (const n of ['subject', 'message', 'in_reply_to', 'body']) $('compose').elements[n].value = '';
});

// ---------------------------------------------------------------- live

let source = null;
async function start() {
  try {
    load(await api('/api/snapshot'));
    render();
  } catch (e) { showError(String(e.message || e)); return; }
  if (source) source.close();
  source = new EventSource('/api/live?since=' + S.seq);
  const live = $('live');
  source.addEventListener('hello', () => { live.className = 'on'; live.textContent = 'live'; });
  for (const kind of ['message', 'role', 'attention', 'header', 'usage', 'journal']) {
    source.addEventListener(kind, (e) => {
      try { applyDelta(kind, JSON.parse(e.data)); S.seq = Number(e.lastEventId) || S.seq; } catch (_) { /* not JSON: skip */ }
      soon();
    });
  }
  // Some deltas are no longer kept: start again from a snapshot.
  source.addEventListener('reset', () => { source.close(); start(); });
  source.onerror = () => { live.className = 'off'; live.textContent = 'reconnecting…'; };
}

// The token is in a cookie now: keep it out of the address bar and history
// (the server's redirect already did; this covers a page cached with it).
if (location.search.includes('token=')) history.replaceState(null, '', location.pathname);
setInterval(soon, 10000);
start();
