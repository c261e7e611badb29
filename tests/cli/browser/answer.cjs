// Every question the cockpit shows can be answered from it, in real
// headless Chromium (driven by playwright-core), run by tests/cli/serve.rs
// with a swarm whose person `boss` has an open clarify without options, a
// clarify with options, and a held handoff to approve: the header's "need
// you" counts all three (and follows as they go); at 1400, 1024 and 390
// pixels every button, radio (with its label), summary and link is at least
// 44 by 44 pixels and nothing scrolls sideways; at 390 "Needs a person"
// comes before the role cards; free text is offered for both questions; an
// answer typed into the question without options and one chosen by tapping
// an option's label reach the asker (its `ready-next` shows them); the
// approval empties the list; a clarify with `allow_custom: no` gets no
// text field. Screenshots at each width go to SHOTS. Every
// wait has a deadline; none is timed.
'use strict';
const path = require('path');
const shell = require('./shell.cjs');

const URL_ = process.env.COCKPIT_URL;
const DIRS = JSON.parse(process.env.ROLE_DIRS);
const SHOTS = process.env.SHOTS;
const DEADLINE = 20000;

const run = (role, program, args) => shell.run(DIRS[role], role, program, args);
const send = (role, draft) => shell.send(DIRS[role], role, draft);

function check(cond, what) { if (!cond) throw new Error(what); }

// The number the header shows after "need you" (found by its label).
function needYou() {
  const t = [...document.querySelectorAll('#totals .total')].find((e) => e.querySelector('dt').textContent === 'need you');
  return t ? Number(t.querySelector('dd').textContent) : NaN;
}

// In the page: every touch target smaller than 44 by 44 pixels, and a
// sideways scroll.
function smallTargets() {
  const shown = (e) => e.getClientRects().length > 0 && !e.closest('[hidden], details:not([open]) > :not(summary)');
  const targets = [...document.querySelectorAll('button, summary, a[href], input, select, label:has(> input[type=radio]), label:has(> input[type=checkbox])')]
    .filter(shown);
  const small = [];
  for (const e of targets) {
    const r = e.getBoundingClientRect();
    if (r.width < 44 || r.height < 44) {
      small.push(`${e.tagName}${e.type ? '[' + e.type + ']' : ''}${e.dataset.action ? ':' + e.dataset.action : ''} "${(e.textContent || e.value || '').trim().slice(0, 30)}" ${r.width.toFixed(1)}x${r.height.toFixed(1)}`);
    }
  }
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw + 1) small.push(`page scrolls sideways: ${document.documentElement.scrollWidth} > ${vw}`);
  return { count: targets.length, small: small.slice(0, 20) };
}

// Waits for ready-next (as `role`) to show `want`; returns what it showed.
async function readyNext(page, role, want) {
  let shown = '';
  const end = Date.now() + DEADLINE;
  while (!shown.includes(want)) {
    if (Date.now() > end) throw new Error(`${role}'s ready-next never showed ${want}: ${shown}`);
    shown = run(role, 'ready-next', []);
    if (!shown.includes(want)) await page.waitForTimeout(50);
  }
  run(role, 'done-current', []);
  return shown;
}

(async () => {
  const browser = await shell.launch();
  try {
    const open = send('qa', 'type: clarify\nto: boss\npriority: 10\nquestion: what shall the release be called?\n');
    const choice = send('qa', 'type: clarify\nto: boss\npriority: 20\nquestion: which parser?\n\npeg\nhand-written\n');
    const held = send('coder', 'type: note\nto: qa\npriority: 50\nmessage: needs a nod\n');

    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.setDefaultTimeout(DEADLINE);
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    await page.goto(URL_);
    await page.waitForSelector('[data-role="coder"]');
    await page.waitForSelector('#live.on');
    for (const sel of [`[data-clarify="${open}"]`, `[data-clarify="${choice}"]`, `[data-held="${held}"]`]) {
      await page.locator('#attention ' + sel).waitFor();
    }

    // The header counts what waits for a person: the two questions and
    // the approval, as many as "Needs a person" lists.
    const counted = await page.evaluate(needYou);
    const listed = await page.locator('#attention .item').count();
    check(counted === 3 && listed === 3, `"need you" says ${counted}; "Needs a person" lists ${listed}; 3 wait`);

    // Free text wherever the protocol allows it (allow_custom defaults to
    // yes): the question without options and the one with options.
    const openItem = page.locator(`[data-clarify="${open}"]`);
    const choiceItem = page.locator(`[data-clarify="${choice}"]`);
    check(await openItem.locator(`[data-custom="${open}"]`).isVisible(), 'no text field for the question without options');
    check(await choiceItem.locator(`[data-custom="${choice}"]`).isVisible(), 'no text field for the question with options (allow_custom defaults to yes)');

    for (const width of [1400, 1024, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      await page.screenshot({ path: path.join(SHOTS, `answer-${width}.png`), fullPage: true });
      const t = await page.evaluate(smallTargets);
      check(t.count > 10, `only ${t.count} touch targets seen at ${width}px`);
      check(!t.small.length, `touch targets under 44 px at ${width}px:\n` + t.small.join('\n'));
    }

    // At phone width (390 px, where the loop ended) what needs a person
    // comes before every role card, its first entry on the first screen.
    const order = await page.evaluate(() => {
      const top = (e) => e.getBoundingClientRect().top + window.scrollY;
      const items = [...document.querySelectorAll('#attention .item')].map(top);
      const cards = [...document.querySelectorAll('#board .card')].map(top);
      return { first: Math.min(...items), lastItem: Math.max(...items), firstCard: Math.min(...cards), screen: window.innerHeight };
    });
    check(order.lastItem < order.firstCard, 'at 390 px a role card comes before what needs a person: ' + JSON.stringify(order));
    check(order.first < order.screen, 'at 390 px what needs a person starts below the first screen: ' + JSON.stringify(order));

    // An answer typed into the question without options reaches the asker.
    const words = 'call it Lighthouse, and tag it v1';
    await openItem.locator(`[data-custom="${open}"]`).click();
    await page.keyboard.type(words);
    await openItem.getByRole('button', { name: 'Answer' }).click();
    await openItem.waitFor({ state: 'detached' });
    const first = await readyNext(page, 'qa', words);
    check(/^TYPE: answer$/m.test(first) && first.includes('IN_REPLY_TO: ' + open), 'the answer is not shown as an answer to ' + open + ':\n' + first);
    await page.waitForFunction(() => {
      const t = [...document.querySelectorAll('#totals .total')].find((e) => e.querySelector('dt').textContent === 'need you');
      return t && t.querySelector('dd').textContent === '2';
    });

    // An option chosen by tapping its label's text.
    await choiceItem.locator('label', { hasText: 'hand-written' }).locator('span').click();
    check(await choiceItem.locator('input[data-option="hand-written"]').isChecked(), 'tapping the label did not choose the option');
    await choiceItem.getByRole('button', { name: 'Answer' }).click();
    await choiceItem.waitFor({ state: 'detached' });
    await readyNext(page, 'qa', 'hand-written');

    // The approval: the list and the count go to nothing.
    await page.locator(`[data-approve="${held}"]`).click();
    await page.locator(`[data-held="${held}"]`).waitFor({ state: 'detached' });
    await page.waitForFunction(() => {
      const t = [...document.querySelectorAll('#totals .total')].find((e) => e.querySelector('dt').textContent === 'need you');
      return t && t.querySelector('dd').textContent === '0';
    });
    await page.locator('#attention .empty').waitFor();

    // Where the clarify says `allow_custom: no` there is no text field.
    const closed = send('qa', 'type: clarify\nto: boss\npriority: 30\nquestion: ship today?\nallow_custom: no\n\nyes\nnot yet\n');
    const closedItem = page.locator(`[data-clarify="${closed}"]`);
    await closedItem.locator('input[data-option="not yet"]').waitFor();
    check(!(await closedItem.locator('[data-custom]').count()), 'a text field for a clarify with allow_custom: no');
    check((await page.evaluate(needYou)) === 1, '"need you" does not count the new question');

    check(!errors.length, 'page errors: ' + errors.join('; '));
    console.log('BROWSER OK ' + open);
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
