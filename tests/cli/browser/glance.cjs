// The cockpit at a glance, in real headless Chromium (driven by
// playwright-core), run by tests/cli/serve.rs with a tmux swarm at work:
// the token leaves the URL on the first load and no later request carries
// it; a message sent from the shell appears without a reload; a half-typed
// message, its focus and caret, and an open message body survive ten live
// updates; the depth and latency charts show the work done before the
// server started, from the journal; the cost and tokens shown equal the
// usage records' sums; Tab
// visits every control in page order with a visible focus ring, and Enter
// and Space activate them: the coder's folder-trust dialog (needs_input)
// is answered from the keyboard; and at
// 1400, 1024 and 390 pixels nothing is wider than its card or section and
// no two text boxes overlap (screenshots saved). Every wait has a deadline.
'use strict';
const path = require('path');
const shell = require('./shell.cjs');

const URL_ = process.env.COCKPIT_URL;
const TOKEN = process.env.TOKEN;
const LEAD = process.env.LEAD_DIR;
const EXPECT = JSON.parse(process.env.EXPECT);
const SHOTS = process.env.SHOTS;
const DEADLINE = 30000;

const send = (message) => shell.send(LEAD, 'lead', `type: note\nto: qa\npriority: 50\nmessage: ${message}\n`);

function check(cond, what) { if (!cond) throw new Error(what); }

// In the page: elements wider than their card/section, and pairs of text
// boxes that overlap (neither inside the other).
function layoutProblems() {
  const problems = [];
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw + 1) problems.push(`page scrolls sideways: ${document.documentElement.scrollWidth} > ${vw}`);
  const boxes = [...document.querySelectorAll('.card, section, header, .item')];
  for (const box of boxes) {
    const b = box.getBoundingClientRect();
    for (const e of box.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      if (!r.width || !r.height) continue;
      // Content scrolled inside a box of its own is not overflow.
      let scroller = e.parentElement; let scrolled = false;
      while (scroller && scroller !== box) {
        const st = getComputedStyle(scroller);
        if (/(auto|scroll|hidden)/.test(st.overflowX) && scroller.scrollWidth >= scroller.clientWidth) { scrolled = true; break; }
        scroller = scroller.parentElement;
      }
      if (scrolled) continue;
      if (r.right > b.right + 1 || r.left < b.left - 1) {
        problems.push(`${e.tagName}.${e.className} "${(e.textContent || '').slice(0, 40)}" is wider than its ${box.tagName}.${box.className} (${Math.round(r.left)}..${Math.round(r.right)} in ${Math.round(b.left)}..${Math.round(b.right)})`);
      }
    }
  }
  // Text boxes: each element's own text, as the ranges the browser lays
  // out, cut to what the boxes that clip it (overflow, line clamps) show.
  const clipOf = (p) => {
    let c = { left: -Infinity, top: -Infinity, right: Infinity, bottom: Infinity };
    for (let a = p; a && a !== document.body; a = a.parentElement) {
      const st = getComputedStyle(a);
      if (st.overflowX !== 'visible' || st.overflowY !== 'visible') {
        const r = a.getBoundingClientRect();
        c = { left: Math.max(c.left, r.left), top: Math.max(c.top, r.top), right: Math.min(c.right, r.right), bottom: Math.min(c.bottom, r.bottom) };
      }
    }
    return c;
  };
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    if (!t.data.trim()) continue;
    const p = t.parentElement;
    if (!p || p.closest('[hidden], svg, details:not([open]) > :not(summary)')) continue;
    const range = document.createRange(); range.selectNodeContents(t);
    const c = clipOf(p);
    for (const raw of range.getClientRects()) {
      const r = { left: Math.max(raw.left, c.left), top: Math.max(raw.top, c.top), right: Math.min(raw.right, c.right), bottom: Math.min(raw.bottom, c.bottom) };
      if (r.right - r.left > 1 && r.bottom - r.top > 1) texts.push({ r, t, p });
    }
  }
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      if (texts[i].t === texts[j].t) continue;
      const a = texts[i].r, b = texts[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 2 && h > 2) {
        problems.push(`text "${texts[i].t.data.slice(0, 30)}" overlaps "${texts[j].t.data.slice(0, 30)}"`);
      }
    }
  }
  // Contrast: every text's colour on the first opaque background behind it.
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const seenPairs = new Set();
  for (const { p } of texts) {
    if (p.closest('button, input, select, textarea, option')) continue;
    const fg = rgb(getComputedStyle(p).color);
    let bg = null;
    for (let a = p; a; a = a.parentElement) {
      const c = rgb(getComputedStyle(a).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) { bg = c; break; }
    }
    bg = bg || [255, 255, 255];
    const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const key = fg.join() + '/' + bg.join();
    if (ratio < 4.5 && !seenPairs.has(key)) {
      seenPairs.add(key);
      problems.push(`contrast ${ratio.toFixed(2)}:1 of "${p.textContent.slice(0, 30)}" (${fg} on ${bg})`);
    }
  }
  return problems.slice(0, 10);
}

(async () => {
  const browser = await shell.launch();
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await context.newPage();
    page.setDefaultTimeout(DEADLINE);
    const errors = [];
    const requests = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    // A refusal by the page's Content-Security-Policy is a console error.
    page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(URL_);
    await page.waitForSelector('[data-role="coder"]');
    await page.waitForSelector('#live.on');
    check(!page.url().includes('token'), 'the token is still in the address bar: ' + page.url());
    const cookies = await context.cookies();
    const c = cookies.find((k) => k.name.startsWith('swarm_cockpit_'));
    check(c && c.httpOnly && c.sameSite === 'Strict', 'no HttpOnly SameSite=Strict cookie: ' + JSON.stringify(cookies));
    check(await page.evaluate(() => !document.cookie.includes('swarm_cockpit')), 'the page script can read the cookie');
    await page.evaluate(() => { window.__sameLoad = true; });

    // The charts show what happened before the server started, as the
    // journal says: the depth chart starts at the first copy's enqueue
    // (its `dequeued`/`completed` line), and qa's work was measured.
    const loaded = Date.now();
    const t0 = Number(await page.locator('#depth svg').getAttribute('data-t0'));
    check(t0 <= EXPECT.depth_from && t0 >= EXPECT.journal_from && t0 < loaded,
      `the depth chart starts at ${t0}, not at the journal's first enqueue ${EXPECT.depth_from} (server started after it)`);
    const work = await page.locator('#latency tr[data-key="qadequeued_to_completed"]').textContent();
    check(!work.includes('not measured') && /\(\d+\)/.test(work), `qa's work before the server started is not charted: ${work}`);

    // needs_input: the prompt and its options as buttons on the coder's card.
    const yes = page.locator('[data-role="coder"] button[data-action="choose"]', { hasText: 'Yes, I trust this folder' });
    await yes.waitFor();
    const cardText = await page.locator('[data-role="coder"]').textContent();
    check(cardText.includes('Claude Code asks whether to trust'), 'the prompt is not on the card: ' + cardText);

    // The cost and tokens are the usage records' sums.
    await page.waitForFunction((want) => {
      const t = document.querySelector('[data-total="cost"]');
      return t && t.textContent === want;
    }, EXPECT.cost);
    check((await page.locator('[data-total="cost"]').getAttribute('title')) === EXPECT.cost_exact, 'exact total cost');
    check((await page.locator('[data-total="tokens"]').textContent()) === EXPECT.tokens, 'total tokens');
    for (const [role, [tok, cost]] of Object.entries(EXPECT.roles)) {
      check((await page.locator(`[data-tokens="${role}"]`).textContent()) === tok, role + ' tokens');
      check((await page.locator(`[data-cost="${role}"]`).textContent()) === cost, role + ' cost');
    }
    // The activity line of qa's last record.
    check((await page.locator('[data-role="qa"]').textContent()).includes('tool_call Bash'), 'no activity line');

    // A message from the shell appears without a reload.
    const first = send('hello from the shell');
    await page.waitForSelector(`.msg[data-id="${first}"]`);
    // Open its body; start typing a message and leave the caret inside it.
    await page.locator(`.msg[data-id="${first}"] details.body > summary`).click();
    const field = page.locator('#c-message');
    await field.click();
    await field.type('half-typed');
    await page.evaluate(() => { const f = document.getElementById('c-message'); f.setSelectionRange(4, 4); });
    // Ten live updates.
    for (let i = 0; i < 10; i++) {
      const id = send('update ' + i);
      await page.waitForSelector(`.msg[data-id="${id}"]`);
    }
    const kept = await page.evaluate((id) => {
      const f = document.getElementById('c-message');
      return {
        value: f.value, focused: document.activeElement === f, caret: f.selectionStart,
        open: document.querySelector(`.msg[data-id="${id}"] details.body`).open,
      };
    }, first);
    check(kept.value === 'half-typed' && kept.focused && kept.caret === 4, 'typing did not survive: ' + JSON.stringify(kept));
    check(kept.open, 'the open body was closed by an update');

    // The charts are drawn: latency bars and legend swatches have their
    // size and colour (styles the CSP lets through).
    const drawn = await page.evaluate(() => ({
      bars: [...document.querySelectorAll('#latency .bar')].map((b) => b.getBoundingClientRect().width),
      swatches: [...document.querySelectorAll('#depth .swatch')].map((w) => getComputedStyle(w).backgroundColor),
    }));
    check(drawn.bars.length && drawn.bars.every((w) => w > 1), 'latency bars not drawn: ' + JSON.stringify(drawn));
    check(drawn.swatches.length && drawn.swatches.every((c) => c !== 'rgba(0, 0, 0, 0)'), 'legend without colours: ' + JSON.stringify(drawn));

    // Keyboard: from the top, Tab visits every control of the page, each
    // once, in document order (header, what needs a person, roles with the dialog's answer
    // buttons, the form, the transcript), each with a
    // visible focus ring.
    await page.screenshot({ path: path.join(SHOTS, 'cockpit-needs-input.png') });
    const want = await page.evaluate(() => {
      const shown = (e) => e.getClientRects().length > 0 && !e.closest('[hidden], details:not([open]) > :not(summary)');
      const radios = new Set();
      const list = [...document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')]
        .filter((e) => shown(e) && !e.disabled && e.tabIndex >= 0)
        .filter((e) => {
          // A radio group is one stop.
          if (e.type !== 'radio') return true;
          if (radios.has(e.name)) return false;
          radios.add(e.name); return true;
        });
      window.__stops = new Map(list.map((e, i) => [e, i]));
      const h1 = document.querySelector('h1'); h1.tabIndex = -1; h1.focus();
      return list.map((e) => e.tagName + (e.dataset.action ? ':' + e.dataset.action : '') + (e.id ? '#' + e.id : ''));
    });
    check(want.length > 10, 'too few controls: ' + want.join(' '));
    const reached = [];
    for (let i = 0; i < want.length; i++) {
      await page.keyboard.press('Tab');
      reached.push(await page.evaluate(() => {
        const a = document.activeElement;
        const st = getComputedStyle(a);
        return {
          at: window.__stops.has(a) ? window.__stops.get(a) : -1,
          what: a.tagName + (a.dataset.action ? ':' + a.dataset.action : '') + (a.id ? '#' + a.id : ''),
          ring: st.outlineStyle !== 'none' && parseFloat(st.outlineWidth) >= 2,
        };
      }));
    }
    const order = reached.map((r) => r.at);
    check(order.every((at, i) => at === i), 'Tab order is not the page order:\n' +
      reached.map((r, i) => `${i}: ${r.what} (${r.at}; want ${want[i]})`).join('\n'));
    const ringless = reached.filter((r) => !r.ring).map((r) => r.what);
    check(!ringless.length, 'focused without a visible ring: ' + ringless.join(' '));
    check(want.some((w) => w === 'BUTTON:choose'), 'the dialog\'s answers are not reachable: ' + want.join(' '));

    // Space and Enter activate: a message body opens, delivery pauses and
    // resumes, and the dialog is answered from the keyboard (the card
    // leaves needs_input; the Rust side checks the agent got "yes").
    const summary = page.locator(`.msg[data-id="${first}"] details.rcpt > summary`);
    await summary.focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction((id) => document.querySelector(`.msg[data-id="${id}"] details.rcpt`).open, first);
    await page.locator('#pause').focus();
    await page.keyboard.press('Space');
    await page.locator('#banner:not([hidden])').waitFor();
    await page.locator('#resume').focus();
    await page.keyboard.press('Enter');
    await page.locator('#banner').waitFor({ state: 'hidden' });
    await yes.focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => {
      const b = document.querySelector('[data-role="coder"] .badge');
      return b && b.dataset.state !== 'needs_input';
    });

    // Layout at three widths, with screenshots.
    for (const width of [1400, 1024, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const problems = await page.evaluate(layoutProblems);
      await page.screenshot({ path: path.join(SHOTS, `cockpit-${width}.png`), fullPage: true });
      check(!problems.length, `layout at ${width}px:\n` + problems.join('\n'));
    }

    const leaked = requests.slice(1).filter((u) => u.includes(TOKEN));
    check(!leaked.length, 'requests after the first carry the token: ' + leaked.join(' '));
    check(requests.length > 2, 'too few requests seen: ' + requests.join(' '));
    check(await page.evaluate(() => window.__sameLoad === true), 'the page reloaded');
    check(!errors.length, 'page errors: ' + errors.join('; '));
    console.log('BROWSER OK');
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
