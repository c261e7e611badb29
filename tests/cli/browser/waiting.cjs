// A role waiting on a person's answer to its clarify, in real headless
// Chromium (driven by playwright-core), run by tests/cli/serve.rs with a
// headless swarm whose agent `lead` asked its person `boss` and waits: its
// card is in the `waiting` state, styled as such (its own colours, not an
// idle card's), and says for whom; the header's "need you" counts it once,
// with the question it waits on (named as what lead waits for). A
// screenshot goes to SHOT. Every wait has a deadline; none is timed.
'use strict';
const shell = require('./shell.cjs');

const URL_ = process.env.COCKPIT_URL;
const SHOT = process.env.SHOT;
const DEADLINE = 20000;

function check(cond, what) { if (!cond) throw new Error(what); }

(async () => {
  const browser = await shell.launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.setDefaultTimeout(DEADLINE);
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(URL_);
    await page.waitForSelector('#live.on');
    const card = page.locator('[data-role="lead"]');
    await card.waitFor();
    const cls = await card.getAttribute('class');
    check(/\bstate-waiting\b/.test(cls), 'lead\'s card is not in the waiting state: ' + cls);
    const look = await page.evaluate(() => {
      const c = document.querySelector('[data-role="lead"]');
      const b = c.querySelector('.badge');
      const idle = document.createElement('article');
      idle.className = 'card state-idle';
      document.body.appendChild(idle);
      const base = getComputedStyle(idle);
      const plain = document.createElement('span');
      plain.className = 'badge';
      document.body.appendChild(plain);
      const out = {
        badge: b.textContent, badgeBg: getComputedStyle(b).backgroundColor, plainBg: getComputedStyle(plain).backgroundColor,
        border: getComputedStyle(c).borderLeftColor, idleBorder: base.borderLeftColor,
        bg: getComputedStyle(c).backgroundColor, idleBg: base.backgroundColor,
        waits: (c.querySelector('[data-waiting-for]') || {}).textContent,
      };
      idle.remove(); plain.remove();
      return out;
    });
    check(look.badge === 'waiting', 'the badge says ' + look.badge);
    check(look.badgeBg !== look.plainBg, 'the waiting badge has no colour of its own: ' + JSON.stringify(look));
    check(look.border !== look.idleBorder && look.bg !== look.idleBg, 'the waiting card looks like an idle one: ' + JSON.stringify(look));
    check(look.waits === 'waiting for boss\u2019s answer', 'the card does not say for whom: ' + look.waits);
    // "need you": one, the question lead waits on.
    const need = await page.locator('#totals [data-total="need_you"]');
    check(await need.textContent() === '1', 'need you: ' + await need.textContent());
    const title = await need.getAttribute('title');
    check(title === 'question from lead (lead waits)', 'need you names: ' + title);
    await page.screenshot({ path: SHOT, fullPage: true });
    check(!errors.length, 'page errors: ' + errors.join('; '));
    console.log('BROWSER OK');
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
