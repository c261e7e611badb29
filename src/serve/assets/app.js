// The cockpit's page: plain JavaScript, no build step, no dependency.
// Everything it shows comes from /api/*; everything it does is a POST with
// the token in a header. Text from files is always set as text, never HTML.
'use strict';

const TOKEN = new URLSearchParams(location.search).get('token') || '';
const $ = (id) => document.getElementById(id);
const S = { status: null, transcript: null, audit: null, history: {}, open: new Set(),
  receipts: new Map(), violations: [], journal: [] };
const COLORS = ['#2f6fde', '#1b9e5a', '#c62828', '#9e7b1b', '#7b3fbf', '#00838f', '#ef6c00', '#5d4037'];

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else if (v !== false && v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k !== null && k !== undefined && k !== false) e.append(k.nodeType ? k : String(k));
  }
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k.nodeType ? k : String(k));
  return e;
}

function age(s) {
  if (s === null || s === undefined) return '-';
  if (s < 120) return s + 's';
  if (s < 7200) return Math.floor(s / 60) + 'm';
  return Math.floor(s / 3600) + 'h';
}

function showError(text) { const e = $('error'); e.textContent = text; e.hidden = !text; }

async function api(path) {
  const r = await fetch(path, { headers: { 'X-Swarm-Token': TOKEN } });
  const j = await r.json();
  if (!r.ok) throw new Error(j.message || r.statusText);
  return j;
}

async function act(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    headers: { 'X-Swarm-Token': TOKEN, 'Content-Type': 'application/json' },
    body: JSON.stringify(body || {}),
  });
  const j = await r.json().catch(() => ({ message: r.statusText }));
  if (!r.ok) {
    showError((j.message || 'refused') + (j.errors ? '\n' + j.errors.join('\n') : ''));
    return null;
  }
  showError('');
  soon();
  return j;
}

let timer = null;
function soon() { if (!timer) timer = setTimeout(() => { timer = null; refresh(); }, 100); }

async function refresh() {
  try {
    const [st, tr, au] = await Promise.all([api('/api/status'), api('/api/transcript'), api('/api/audit')]);
    S.status = st; S.transcript = tr; S.audit = au;
    const t = Date.now();
    for (const r of st.roles) {
      const h = S.history[r.role] || (S.history[r.role] = []);
      h.push({ t, n: r.new + (r.in_process ? 1 : 0) });
      if (h.length > 240) h.shift();
    }
    render();
  } catch (e) { showError(String(e.message || e)); }
}

function render() {
  const st = S.status;
  $('root').textContent = st.root + (st.daemon_running ? '  (handoffd pid ' + st.daemon_pid + ')' : '  (handoffd not running)');
  const b = $('banner');
  if (st.paused) {
    b.hidden = false;
    b.textContent = 'PAUSED: ' + (st.paused.types.length ? 'delivery of ' + st.paused.types.join(', ') : 'all delivery') +
      ' since ' + st.paused.since + ' (agents keep working; files wait in their outboxes)';
  } else { b.hidden = true; b.textContent = ''; }
  renderBoard(st); renderAttention(st); renderTranscript(); renderPipeline(); renderDepth(); renderLatency(); renderPostRoles(st);
}

function renderBoard(st) {
  const held = {};
  for (const h of st.held) held[h.from] = (held[h.from] || 0) + 1;
  $('board').replaceChildren(...st.roles.map((r) => {
    const state = r.agent_state || (r.human ? 'human' : 'unknown');
    const ip = r.in_process ? r.in_process.split('/').pop() : null;
    return el('div', { class: 'card state-' + state, 'data-role': r.role },
      el('h3', {}, r.role, el('span', { class: 'badge' }, state)),
      el('div', { class: 'kv' }, 'waiting ', el('b', {}, r.new), r.new ? ' (oldest ' + age(r.oldest_new_age_s) + ')' : ''),
      el('div', { class: 'kv' }, 'in process ', el('b', {}, ip ? ip.slice(0, 40) : '-'), ip ? ' (' + age(r.in_process_age_s) + ')' : ''),
      el('div', { class: 'kv' }, 'last wake ', el('b', {}, r.last_wake || '-')),
      el('div', { class: 'kv' }, 'failed ', el('b', {}, r.failed), '  outbox ', el('b', {}, r.outbox),
        held[r.role] ? el('span', {}, '  held ', el('b', {}, held[r.role])) : null),
      r.not_moving ? el('div', { class: 'kv' }, 'not moving: ' + r.not_moving) : null,
      r.problem ? el('div', { class: 'kv' }, r.problem) : null);
  }));
}

function message(id) {
  return (S.transcript ? S.transcript.messages : []).find((m) => m.id === id);
}

// What a person has chosen or typed in an attention item, by item: every
// event re-renders the list, which must not wipe a half-made answer.
const drafts = new Map();
function draft(key) {
  if (!drafts.has(key)) drafts.set(key, { checked: new Set(), text: '' });
  return drafts.get(key);
}

// A text input that keeps its draft text across re-renders.
function draftText(d, attrs) {
  const t = el('input', Object.assign({ type: 'text' }, attrs));
  t.value = d.text;
  t.addEventListener('input', () => { d.text = t.value; });
  return t;
}

function clarifyItem(a) {
  const m = message(a.id);
  const h = (m && m.headers) || {};
  const multiple = h.allow_multiple === 'yes';
  const custom = h.allow_custom === 'yes';
  const name = 'c-' + a.id;
  const d = draft(name);
  const opts = (a.options || []).map((o, i) => {
    const v = String(i + 1);
    const input = el('input', { type: multiple ? 'checkbox' : 'radio', name, value: v, 'data-option': o });
    input.checked = d.checked.has(v);
    input.addEventListener('change', () => {
      if (!multiple) d.checked.clear();
      if (input.checked) d.checked.add(v); else d.checked.delete(v);
    });
    return el('label', {}, input, ' ', o);
  });
  const text = custom ? draftText(d, { placeholder: 'your own answer', 'data-custom': a.id, 'data-draft': name }) : null;
  const send = () => {
    const choices = [...document.getElementsByName(name)].filter((x) => x.checked).map((x) => Number(x.value));
    act('/api/answer', { id: a.id, choices, text: text && text.value ? text.value : null });
  };
  return el('div', { class: 'item', 'data-clarify': a.id },
    el('div', { class: 'what' }, a.from + ' asks ' + a.role + ': ' + a.text),
    el('div', { class: 'kv' }, 'open ' + age(a.age_s) + (multiple ? ' · several choices' : '') + (custom ? ' · own answer allowed' : '')),
    opts, text, el('button', { type: 'button', onclick: send }, 'Answer'));
}

// Bidi controls and line separators shown as what they are, so a held
// message cannot make its text read as something else.
function visible(t) {
  return t.replace(/[\u202a-\u202e\u2066-\u2069\u2028\u2029]/g, (c) => '\\u{' + c.charCodeAt(0).toString(16) + '}');
}

// The whole held message is shown, and Approve names its sha256: the server
// approves exactly what is on screen, or refuses (CHANGED_SINCE_REVIEW).
function heldItem(h) {
  const reason = draftText(draft('h-' + h.id), { placeholder: 'reason to deny', 'data-draft': 'h-' + h.id });
  return el('div', { class: 'item', 'data-held': h.id },
    el('div', { class: 'what' }, 'held ' + h.type + ': ' + h.from + ' → ' + h.to),
    el('div', { class: 'kv' }, h.id + ' · waiting ' + age(h.age_s) + ' · sha256 ' + h.sha256.slice(0, 12)),
    el('pre', { class: 'held-text', 'data-held-text': h.id }, visible(h.text) + (h.truncated ? '\n… (longer; `swarm approve ' + h.id + '` shows it all)' : '')),
    h.truncated ? null : el('button', { type: 'button', 'data-approve': h.id, onclick: () => act('/api/approve', { id: h.id, sha256: h.sha256 }) }, 'Approve'), ' ',
    reason, ' ',
    el('button', { type: 'button', onclick: () => act('/api/deny', { id: h.id, reason: reason.value }) }, 'Deny'));
}

function renderAttention(st) {
  const items = [];
  for (const a of st.attention) {
    if (a.kind === 'clarify') items.push(clarifyItem(a));
    else items.push(el('div', { class: 'item', 'data-waiting': a.id }, el('div', { class: 'what' }, a.role + ' has waiting ' + a.type + ' from ' + a.from), a.text, ' ',
      el('button', { type: 'button', 'data-done': a.id, onclick: () => act('/api/inbox/done', { id: a.id, role: a.role }) }, 'Mark done')));
  }
  for (const h of st.held) items.push(heldItem(h));
  for (const r of st.roles) {
    if (r.agent_state === 'dead') items.push(el('div', { class: 'item' }, el('div', { class: 'what' }, r.role + ': agent dead' + (r.agent_since ? ' since ' + r.agent_since : ''))));
  }
  for (const v of S.violations.slice(-10)) {
    items.push(el('div', { class: 'item' }, el('div', { class: 'what' }, 'expectation violated'), (v.path || '') + ' ' + (v.reason || '')));
  }
  // The text input being typed in keeps its focus and caret.
  const f = document.activeElement;
  const typing = f && f.dataset && f.dataset.draft ? [f.dataset.draft, f.selectionStart, f.selectionEnd] : null;
  $('attention').replaceChildren(...(items.length ? items : [el('div', { class: 'empty' }, 'nothing needs a person')]));
  if (typing) {
    const again = [...$('attention').querySelectorAll('[data-draft]')].find((x) => x.dataset.draft === typing[0]);
    if (again) { again.focus(); again.setSelectionRange(typing[1], typing[2]); }
  }
  // Drafts of items that are gone (answered, approved) are dropped.
  const live = new Set([...$('attention').querySelectorAll('[data-clarify]')].map((x) => 'c-' + x.dataset.clarify)
    .concat([...$('attention').querySelectorAll('[data-held]')].map((x) => 'h-' + x.dataset.held)));
  for (const k of [...drafts.keys()]) if (!live.has(k)) drafts.delete(k);
}

function toggleReceipts(m, box) {
  if (S.receipts.has(m.id)) { S.receipts.delete(m.id); box.replaceChildren(); return; }
  api('/api/receipts?id=' + encodeURIComponent(m.id)).then((r) => {
    const lines = r.recipients.map((x) => x.recipient + ': ' + x.state +
      (x.enqueued_at ? '  enqueued ' + x.enqueued_at : '') +
      (x.completed_at ? '  completed ' + x.completed_at : ''));
    for (const o of r.originals) lines.unshift('original: ' + o.state + (o.reason ? ' (' + o.reason + ')' : ''));
    S.receipts.set(m.id, lines.join('\n'));
    box.replaceChildren(el('div', { class: 'receipts' }, S.receipts.get(m.id)));
  }).catch((e) => showError(String(e.message || e)));
}

function msgRow(m) {
  const box = el('div', {});
  if (S.receipts.has(m.id)) box.append(el('div', { class: 'receipts' }, S.receipts.get(m.id)));
  const row = el('div', { class: 'msg ' + m.state, 'data-id': m.id },
    el('div', { class: 'meta' }, (m.time || '') + '  ' + m.from + ' → ' + m.to + (m.state !== 'sent' ? '  [' + m.state + (m.reason ? ': ' + m.reason : '') + ']' : '')),
    el('span', { class: 'type' }, m.type), ' ', el('span', { class: 'summary' }, m.summary || ''), box);
  row.addEventListener('click', (e) => { if (e.target.closest('.receipts')) return; e.stopPropagation(); toggleReceipts(m, box); });
  return row;
}

function renderTranscript() {
  const msgs = S.transcript.messages;
  const byId = new Map(msgs.map((m) => [m.id, m]));
  const rootOf = (m) => {
    let cur = m; const seen = new Set();
    while (cur.headers && cur.headers.in_reply_to && byId.has(cur.headers.in_reply_to) && !seen.has(cur.id)) {
      seen.add(cur.id); cur = byId.get(cur.headers.in_reply_to);
    }
    return cur.id;
  };
  const threads = new Map();
  for (const m of msgs) {
    const r = rootOf(m);
    if (!threads.has(r)) threads.set(r, []);
    if (r !== m.id) threads.get(r).push(m);
  }
  const titles = new Map((S.transcript.sessions || []).map((s) => [s.id, s.title || s.id]));
  const out = [];
  let frame = null; let frameKey = null;
  for (const [rid, replies] of threads) {
    const root = byId.get(rid);
    const h = root.headers || {};
    const key = h.session ? 'session ' + (titles.get(h.session) || h.session) : h.discussion ? 'discussion ' + h.discussion : null;
    if (key !== frameKey) {
      frameKey = key;
      frame = key ? el('fieldset', { class: 'frame' }, el('legend', {}, key)) : null;
      if (frame) out.push(frame);
    }
    const block = [msgRow(root)];
    if (replies.length) {
      const open = S.open.has(rid);
      block.push(el('button', { type: 'button', class: 'toggle', onclick: () => { open ? S.open.delete(rid) : S.open.add(rid); renderTranscript(); } },
        (open ? '▾ ' : '▸ ') + replies.length + (replies.length === 1 ? ' reply' : ' replies')));
      if (open) block.push(el('div', { class: 'replies' }, replies.map(msgRow)));
    }
    const thread = el('div', { class: 'thread' }, block);
    if (frame) frame.insertBefore(thread, frame.firstChild.nextSibling); else out.push(thread);
  }
  $('transcript').replaceChildren(...(out.length ? out.reverse() : [el('div', { class: 'empty' }, 'no messages yet')]));
}

function roleNames() { return S.status.roles.map((r) => r.role); }

function renderPipeline() {
  const names = roleNames();
  const counts = new Map();
  for (const m of S.transcript.messages) {
    for (const to of m.recipients || []) {
      const k = m.from + '\u0000' + to;
      counts.set(k, (counts.get(k) || 0) + 1);
    }
  }
  const W = 420, H = 300, cx = W / 2, cy = H / 2, R = 110;
  const pos = new Map(names.map((n, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(names.length, 1);
    return [n, [cx + R * Math.cos(a), cy + R * Math.sin(a)]];
  }));
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'who hands to whom' },
    svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 20, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto' },
      svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#667085' }))));
  for (const [k, n] of counts) {
    const [a, b] = k.split('\u0000');
    if (!pos.has(a) || !pos.has(b)) continue;
    const [x1, y1] = pos.get(a), [x2, y2] = pos.get(b);
    g.append(svg('line', { x1, y1, x2, y2, stroke: '#98a2b3', 'stroke-width': Math.min(1 + Math.log2(n), 6), 'marker-end': 'url(#arrow)' }));
    g.append(svg('text', { x: (x1 * 2 + x2) / 3, y: (y1 * 2 + y2) / 3 - 3 }, String(n)));
  }
  names.forEach((n, i) => {
    const [x, y] = pos.get(n);
    g.append(svg('circle', { cx: x, cy: y, r: 16, fill: COLORS[i % COLORS.length] }));
    g.append(svg('text', { x, y: y + 30, 'text-anchor': 'middle' }, n));
  });
  $('pipeline').replaceChildren(counts.size ? g : el('div', { class: 'empty' }, 'no handoffs yet'));
}

function renderDepth() {
  const W = 420, H = 160, P = 24;
  const names = roleNames();
  const all = names.flatMap((n) => S.history[n] || []);
  if (!all.length) { $('depth').replaceChildren(); return; }
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t), t0 + 1);
  const max = Math.max(1, ...all.map((p) => p.n));
  const x = (t) => P + ((t - t0) / (t1 - t0)) * (W - 2 * P), y = (n) => H - P - (n / max) * (H - 2 * P);
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'queue depth per role' },
    svg('line', { x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: '#d8dde6' }),
    svg('text', { x: 2, y: P }, String(max)), svg('text', { x: 2, y: H - P }, '0'));
  names.forEach((n, i) => {
    const h = S.history[n] || [];
    if (!h.length) return;
    g.append(svg('polyline', { fill: 'none', stroke: COLORS[i % COLORS.length], 'stroke-width': 2,
      points: h.map((p) => x(p.t).toFixed(1) + ',' + y(p.n).toFixed(1)).join(' ') }));
    g.append(svg('text', { x: W - P - 60, y: 12 + 12 * i, fill: COLORS[i % COLORS.length] }, n + ' ' + h[h.length - 1].n));
  });
  $('depth').replaceChildren(g);
}

function renderLatency() {
  const stages = ['created_to_enqueued', 'enqueued_to_dequeued', 'dequeued_to_completed'];
  const rows = (S.audit.roles || []).filter((r) => stages.some((s) => r.stages && r.stages[s] && r.stages[s].count));
  if (!rows.length) { $('latency').replaceChildren(el('div', { class: 'empty' }, 'no completed stages yet')); return; }
  const max = Math.max(...rows.flatMap((r) => stages.map((s) => r.stages[s].p50_ms || 0)), 0.001);
  const W = 420, rowH = 16 * stages.length + 14, H = rows.length * rowH + 10, L = 90;
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'latency per role' });
  rows.forEach((r, i) => {
    const y0 = 6 + i * rowH;
    g.append(svg('text', { x: 0, y: y0 + 12 }, r.role));
    stages.forEach((s, j) => {
      const v = r.stages[s].p50_ms || 0;
      const w = (v / max) * (W - L - 70);
      g.append(svg('rect', { x: L, y: y0 + j * 16, width: Math.max(w, 1), height: 12, fill: COLORS[j] }));
      g.append(svg('text', { x: L + w + 4, y: y0 + j * 16 + 10 }, v.toFixed(v < 10 ? 2 : 0) + ' ms'));
    });
  });
  g.append(svg('text', { x: W - 200, y: H - 2 }, 'enqueue · dequeue · complete'));
  $('latency').replaceChildren(g);
}

function renderPostRoles(st) {
  const sel = $('post-role');
  const humans = st.roles.filter((r) => r.human).map((r) => r.role);
  const now = [...sel.options].map((o) => o.value);
  if (now.join() !== humans.join()) sel.replaceChildren(...humans.map((h) => el('option', { value: h }, h)));
}

function journal(j) {
  S.journal.unshift(j);
  S.journal.length = Math.min(S.journal.length, 50);
  $('journal').replaceChildren(...S.journal.map((e) => el('li', {}, e.time.slice(11, 19) + ' ' + e.kind + ' ' + (e.id || '') + (e.reason ? ' — ' + e.reason : ''))));
}

function connect() {
  const es = new EventSource('/api/events?token=' + encodeURIComponent(TOKEN));
  const live = $('live');
  es.addEventListener('hello', () => { live.className = 'on'; live.textContent = 'live'; soon(); });
  es.addEventListener('journal', (e) => {
    try {
      const j = JSON.parse(e.data);
      if (j.kind === 'expectation_violated') S.violations.push(j);
      journal(j);
    } catch (_) { /* a line that is not JSON: skip it */ }
    soon();
  });
  es.addEventListener('changed', soon);
  es.onerror = () => { live.className = 'off'; live.textContent = 'reconnecting…'; };
}

$('pause').addEventListener('click', () => {
  const types = $('pause-types').value.split(/[\s,]+/).filter(Boolean);
  act('/api/pause', { types });
});
$('resume').addEventListener('click', () => act('/api/resume', {}));
$('post').addEventListener('submit', async (e) => {
  e.preventDefault();
  const j = await act('/api/send', { role: $('post-role').value, draft: $('post-draft').value });
  $('post-result').textContent = j ? 'queued: ' + j.path : '';
});

refresh();
connect();
