// What the cockpit's browser scripts share: Debian's Chromium started
// headless, and a draft sent from the shell as a role (the id it got).
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
}

// Runs one of the package's programs in `dir` as `role`.
function run(dir, role, program, args) {
  return execFileSync(path.join(process.env.BIN_DIR, program), args, {
    cwd: dir, env: { PATH: process.env.PATH, SWARMFORGE_ROLE: role }, encoding: 'utf8',
  });
}

let drafts = 0;
// Sends `draft` with swarm-handoff as `role` from `dir`; returns its id.
function send(dir, role, draft) {
  const file = path.join(dir, `browser-draft-${role}-${++drafts}.txt`);
  fs.writeFileSync(file, draft);
  const out = run(dir, role, 'swarm-handoff', [file]);
  const id = /_(\d{8}T\d{6}Z_\d+_from_[A-Za-z0-9-]+)_to_/.exec(out);
  if (!id) throw new Error('no id in: ' + out);
  return id[1];
}

module.exports = { launch, run, send };
