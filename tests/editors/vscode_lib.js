// What the code-server scripts (vscode_e2e.js, vscode_notes.js) share: launching Chromium, polling
// the workbench's DOM, quick open, the command palette, keyboard selections, and the checks each
// script prints as one JSON line.
const path = require('path');
const { chromium } = require('playwright-core');

/** A run's checks and screenshots: `check` records one, `finish` prints the JSON line and exits. */
function recorder(outDir) {
  const t0 = Date.now();
  const result = { checks: [], console_errors: [] };
  return {
    result,
    check(name, ok, detail) {
      result.checks.push({ name, ok: !!ok, detail, ms: Date.now() - t0 });
      return ok;
    },
    shot: (page, name, clip) => page.screenshot(clip ? { path: path.join(outDir, name), clip } : { path: path.join(outDir, name) }),
    finish() {
      result.ms = Date.now() - t0;
      result.ok = result.checks.every((c) => c.ok);
      console.log(JSON.stringify(result));
      return result.ok;
    },
  };
}

/** Headless Chromium on a 1440x900 page; console errors (but the usual noise) go to `errors`. */
async function launch(errors) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error' && !/404|vsda|Failed to load resource/.test(m.text())) errors.push(m.text().slice(0, 300));
  });
  return { browser, page };
}

/** The workbench is up and the extension host with it (the Engram status item shows: keystrokes sent
 * earlier can be lost). */
async function openWorkbench(page, url) {
  // On a loaded machine code-server can take more than Playwright's default 30 s to serve the workbench.
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 120000 });
  await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
  await waitText(page, '.statusbar-item', /Engram/, 60000).catch(() => {});
}

/** Texts of the elements matching `selector` (shadow DOM included) that match `re`, polled until some do. */
async function waitText(page, selector, re, timeout = 30000) {
  const end = Date.now() + timeout;
  let last = '';
  for (;;) {
    try {
      const texts = (await page.locator(selector).allTextContents()).filter((t) => re.test(t));
      if (texts.length) return texts;
    } catch (err) {
      last = String(err).slice(0, 200);
    }
    if (Date.now() > end) throw new Error(`no ${selector} matching ${re} within ${timeout} ms ${last}`);
    await page.waitForTimeout(150);
  }
}

async function quickOpen(page, name) {
  for (let attempt = 1; attempt <= 6; attempt++) {
    if (attempt > 1) {
      console.error(`quick open: attempt ${attempt}`);
      await page.waitForTimeout(1000);
    }
    await page.keyboard.press('Control+P');
    try {
      await page.waitForSelector('.quick-input-widget input', { state: 'visible', timeout: 5000 });
    } catch {
      continue;
    }
    await page.keyboard.type(name, { delay: 10 });
    try {
      await page.waitForSelector('.quick-input-list .monaco-list-row', { timeout: 5000 });
    } catch {
      await page.keyboard.press('Escape');
      continue;
    }
    await page.keyboard.press('Enter');
    // Done when the active group's active tab is the file (a tab of the same name elsewhere, or an
    // explain document named after it, does not count).
    try {
      await page.waitForFunction((base) => {
        const tab = document.querySelector('.editor-group-container.active .tab.active .label-name');
        return !!tab && tab.textContent.trim() === base;
      }, path.basename(name), { timeout: 5000 });
      return true;
    } catch {
      /* try again */
    }
  }
  return false;
}

/** Runs a palette command by its exact title: the row whose label equals `title` is clicked, not
 * whatever row is first (other "Engram: …" commands and recently used ones share the list). */
async function runCommand(page, title) {
  for (let attempt = 1; attempt <= 4; attempt++) {
    if (attempt > 1) console.error(`palette ${title}: attempt ${attempt}`);
    await page.keyboard.press('F1');
    try {
      await page.waitForSelector('.quick-input-widget input', { state: 'visible', timeout: 5000 });
    } catch {
      continue;
    }
    await page.keyboard.type(title, { delay: 10 });
    if (await pickRow(page, title)) return true;
    await page.keyboard.press('Escape');
  }
  return false;
}

/** Clicks the row of the open quick pick whose label is exactly `label`; false when none shows. */
async function pickRow(page, label, timeout = 5000) {
  const row = page.locator('.quick-input-list .monaco-list-row').filter({
    has: page.locator('.label-name', { hasText: new RegExp(`^\\s*${escapeRe(label)}\\s*$`) }),
  }).first();
  try {
    await row.waitFor({ state: 'visible', timeout });
    await row.click();
    return true;
  } catch {
    return false;
  }
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** What the workbench shows, for a failed check: every tab (the active group's marked), the
 * status bar's cursor item and the notifications. */
async function workbenchState(page) {
  return page.evaluate(() => ({
    tabs: [...document.querySelectorAll('.editor-group-container')].map((g) =>
      [...g.querySelectorAll('.tab')].map((t) => (t.classList.contains('active') ? '*' : '') + t.textContent.trim())
        .join(' | ') + (g.classList.contains('active') ? '  <- active group' : '')),
    cursor: [...document.querySelectorAll('.statusbar-item')].map((e) => e.textContent.trim()).filter((t) => /^Ln \d+/.test(t)),
    notifications: [...document.querySelectorAll('.notifications-toasts .notification-list-item-message')]
      .map((e) => e.textContent.trim().slice(0, 200)),
  }));
}

/** Selects whole lines a..b (1-based) of the active editor with the keyboard (Go to Line, then
 * Shift+Down/End): no mouse, so no hover, lens or lightbulb can take a click. Waits until the
 * status bar says so ("Ln b, Col n (m selected)"). */
async function selectLines(page, a, b) {
  for (let attempt = 1; attempt <= 3; attempt++) {
    await page.keyboard.press('Control+G');
    try {
      await page.waitForSelector('.quick-input-widget input', { state: 'visible', timeout: 5000 });
    } catch {
      continue;
    }
    await page.keyboard.type(String(a), { delay: 10 });
    await page.waitForTimeout(200);
    await page.keyboard.press('Enter');
    await page.waitForSelector('.quick-input-widget', { state: 'hidden', timeout: 5000 }).catch(() => {});
    for (let i = a; i < b; i++) await page.keyboard.press('Shift+ArrowDown');
    await page.keyboard.press('Shift+End');
    try {
      await waitText(page, '.statusbar-item', new RegExp(`^\\s*Ln ${b}, Col \\d+ \\(\\d+ selected\\)`), 5000);
      return true;
    } catch {
      console.error(`select lines ${a}-${b}: attempt ${attempt}: ${JSON.stringify(await workbenchState(page))}`);
    }
  }
  return false;
}

/** The screen position of a line (1-based) of the active editor, from its line number. */
async function linePoint(page, line) {
  return page.evaluate((n) => {
    const editors = [...document.querySelectorAll('.editor-group-container.active .monaco-editor')];
    for (const ed of editors) {
      const num = [...ed.querySelectorAll('.line-numbers')].find((e) => e.textContent.trim() === String(n));
      if (!num) continue;
      const r = num.getBoundingClientRect();
      const lines = ed.querySelector('.view-lines').getBoundingClientRect();
      return { x: lines.left + 40, y: r.top + r.height / 2 };
    }
    return null;
  }, line);
}

/** Moves the mouse over a line (1-based) of the active editor until a hover matching `re` shows;
 * returns the text of every hover then ('' when the line is not on screen). */
async function hoverLine(page, line, re) {
  const p = await linePoint(page, line);
  let hover = '';
  if (!p) return hover;
  for (let attempt = 0; attempt < 4 && !re.test(hover); attempt++) {
    await page.mouse.move(p.x + attempt * 12, p.y);
    await page.mouse.move(p.x + 8 + attempt * 12, p.y);
    await waitText(page, '.monaco-hover', re, 8000).catch(() => {}); // else move again
    hover = (await page.$$eval('.monaco-hover', (els) => els.map((e) => e.textContent).join(' | '))) || '';
  }
  return hover;
}

async function activeEditorText(page) {
  return page.evaluate(() => {
    const ed = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
    return ed ? ed.innerText.replace(/\u00a0/g, ' ') : ''; // Monaco renders spaces as no-break spaces
  });
}

module.exports = {
  activeEditorText, escapeRe, hoverLine, launch, linePoint, openWorkbench, pickRow, quickOpen, recorder, runCommand,
  selectLines, waitText, workbenchState,
};
