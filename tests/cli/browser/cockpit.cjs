// The cockpit in real headless Chromium (driven by playwright-core), run by
// tests/cli/serve.rs: the page loads, a message sent from the shell appears
// without a reload, a clarify is answered by clicking and the asker's
// ready-next shows the answer, a person's note is marked done by clicking, a
// held handoff is approved by clicking, and a
// screenshot of the board is saved. Every wait has a deadline; none is timed.
'use strict';
const shell = require('./shell.cjs');

const URL_ = process.env.COCKPIT_URL;
const DIRS = JSON.parse(process.env.ROLE_DIRS);
const SHOT = process.env.SHOT;
const DEADLINE = 20000;

const run = (role, program, args) => shell.run(DIRS[role], role, program, args);
const send = (role, draft) => shell.send(DIRS[role], role, draft);

(async () => {
  const browser = await shell.launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.setDefaultTimeout(DEADLINE);
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(URL_);
    await page.waitForSelector('[data-role="coder"]');
    await page.waitForSelector('#live.on');
    await page.evaluate(() => { window.__sameLoad = true; });

    // A message sent from the shell appears without a reload.
    const hello = send('qa', 'type: note\nto: coder\npriority: 50\nmessage: hello from the shell\n');
    await page.waitForSelector(`.msg[data-id="${hello}"]`);
    await page.getByText('hello from the shell').first().waitFor();

    // A clarify answered by clicking; the asker's ready-next shows the answer.
    const clarify = send('qa', 'type: clarify\nto: boss\npriority: 10\nquestion: which parser?\n\npeg\nhand-written\n');
    const item = page.locator(`[data-clarify="${clarify}"]`);
    await item.waitFor();
    await item.locator('input[data-option="hand-written"]').check();
    // Anything that happens meanwhile re-renders the list: the choice stays.
    const meanwhile = send('qa', 'type: note\nto: coder\npriority: 50\nmessage: meanwhile\n');
    await page.waitForSelector(`.msg[data-id="${meanwhile}"]`);
    if (!(await item.locator('input[data-option="hand-written"]').isChecked())) {
      throw new Error('a re-render wiped the chosen answer');
    }
    await item.getByRole('button', { name: 'Answer' }).click();
    await item.waitFor({ state: 'detached' });
    // The daemon delivers the answer; the asker takes it with ready-next.
    let shown = '';
    const end = Date.now() + DEADLINE;
    while (!shown.includes('hand-written')) {
      if (Date.now() > end) throw new Error('ready-next never showed the answer: ' + shown);
      shown = run('qa', 'ready-next', []);
      if (!shown.includes('hand-written')) await page.waitForTimeout(50);
    }
    run('qa', 'done-current', []);

    // A person's note marked done by clicking (as `swarm inbox done`).
    const fyi = send('qa', 'type: note\nto: boss\npriority: 50\nmessage: mark me done\n');
    const waiting = page.locator(`[data-waiting="${fyi}"]`);
    await waiting.waitFor();
    await page.locator(`[data-done="${fyi}"]`).click();
    await waiting.waitFor({ state: 'detached' });

    // A held handoff approved by clicking.
    const held = send('coder', 'type: note\nto: qa\npriority: 50\nmessage: needs a nod\n');
    const approve = page.locator(`[data-approve="${held}"]`);
    await approve.waitFor();
    // The person sees the whole held message before approving it.
    const heldText = await page.locator(`[data-held-text="${held}"]`).textContent();
    if (!heldText.includes('message: needs a nod')) throw new Error('the held message is not shown: ' + heldText);
    await page.waitForSelector('[data-role="coder"]');
    await page.screenshot({ path: SHOT, fullPage: true });
    await approve.click();
    await page.locator(`[data-held="${held}"]`).waitFor({ state: 'detached' });

    if (!(await page.evaluate(() => window.__sameLoad === true))) throw new Error('the page reloaded');
    if (errors.length) throw new Error('page errors: ' + errors.join('; '));
    console.log('BROWSER OK ' + held);
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
