// Drive code-server (VS Code in the browser) with playwright-core and Debian's Chromium: open an
// agent-written file of the fixture repository, check the Engram lenses, the hover, Explain (lens click
// and the command palette) and a transcript window. Screenshots go to OUT_DIR.
//
//   node vscode_e2e.js URL RELATIVE_FILE HOVER_LINE OUT_DIR SESSION_ID
// Prints one JSON line with what it saw; exits 1 when a check failed.
const path = require('path');
const { chromium } = require('playwright-core');

const [url, file, hoverLine, outDir, session] = process.argv.slice(2);
const t0 = Date.now();
const result = { checks: [], console_errors: [] };
const check = (name, ok, detail) => {
  result.checks.push({ name, ok: !!ok, detail, ms: Date.now() - t0 });
  return ok;
};
const shot = (page, name) => page.screenshot({ path: path.join(outDir, name) });

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
    const row = page.locator('.quick-input-list .monaco-list-row').filter({
      has: page.locator('.label-name', { hasText: new RegExp(`^${escapeRe(title)}$`) }),
    }).first();
    try {
      await row.waitFor({ state: 'visible', timeout: 5000 });
      await row.click();
    } catch {
      await page.keyboard.press('Escape');
      continue;
    }
    return true;
  }
  return false;
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

async function activeEditorText(page) {
  return page.evaluate(() => {
    const ed = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
    return ed ? ed.innerText.replace(/\u00a0/g, ' ') : ''; // Monaco renders spaces as no-break spaces
  });
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('console', (m) => {
    if (m.type() === 'error' && !/404|vsda|Failed to load resource/.test(m.text())) result.console_errors.push(m.text().slice(0, 300));
  });
  try {
    // On a loaded machine code-server can take more than the default 30 s to serve the workbench.
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 120000 });
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    check('workbench', true);
    // The extension host is up once the Engram status item shows (keystrokes sent earlier can be lost).
    await waitText(page, '.statusbar-item', /Engram/, 60000).catch(() => {});
    check('extension activated', true);
    if (!check('file opened', await quickOpen(page, file))) throw new Error('could not open ' + file);
    await page.keyboard.press('Control+B'); // hide the side bar: room for the code and the explanation

    // 1. lenses over the agent-written code
    const lenses = await waitText(page, '.codelens-decoration', /why\? \d+ sessions? · Claude Code · /, 60000);
    result.lenses = lenses;
    check('lenses', lenses.length > 0, lenses);
    await page.waitForTimeout(300);
    await shot(page, 'vscode-lens.png');

    // 2. the status bar counts the sessions
    try {
      result.status = await waitText(page, '.statusbar-item', /Engram: \d+ sessions?/, 20000);
    } catch {
      result.status = await page.$$eval('.statusbar-item', (els) => els.map((e) => e.textContent).filter((t) => /Engram/.test(t)));
    }
    check('status bar', (result.status || []).some((t) => /Engram: \d+ sessions?/.test(t)), result.status);

    // 3. hovering shows the user's request from the transcript
    const p = await linePoint(page, Number(hoverLine));
    let hover = '';
    if (p) {
      for (let attempt = 0; attempt < 4 && !/Asked/.test(hover); attempt++) {
        await page.mouse.move(p.x + attempt * 12, p.y);
        await page.mouse.move(p.x + 8 + attempt * 12, p.y);
        try {
          await waitText(page, '.monaco-hover', /Asked/, 8000);
        } catch {
          /* move again */
        }
        hover = (await page.$$eval('.monaco-hover', (els) => els.map((e) => e.textContent).join(' | '))) || '';
      }
    }
    result.hover = hover.slice(0, 800);
    // The quoted request under "Asked:" (the first session's), as rendered.
    result.hover_asked = await page.evaluate(() => {
      const strong = [...document.querySelectorAll('.monaco-hover strong')].find((e) => /Asked/.test(e.textContent));
      const next = strong && strong.closest('p') && strong.closest('p').nextElementSibling;
      return next ? next.textContent.trim().slice(0, 400) : '';
    });
    check('hover shows the request', /Asked/.test(hover) && hover.includes(session) && result.hover_asked.length > 0,
      { asked: result.hover_asked, hover: result.hover.slice(0, 200) });
    await page.waitForTimeout(800); // the hover fades in
    await shot(page, 'vscode-hover.png');
    await page.mouse.move(5, 890);
    await page.keyboard.press('Escape');

    // 4. clicking the lens runs engram.explain and opens the result document beside the code
    await page.click('.codelens-decoration a');
    const tabs = await waitText(page, '.tab', /why .+ \d+-\d+\.md/, 30000);
    await page.waitForTimeout(800);
    const explainText = await activeEditorText(page);
    result.explain_tab = tabs;
    result.explain_text = explainText.slice(0, 1500);
    check('lens opens the explain document', /# Why `/.test(explainText) && /\*\*1\. [^*]+\*\* · Claude Code/.test(explainText), tabs);
    const explainLenses = await waitText(page, '.editor-group-container.active .codelens-decoration a', /open transcript at #/, 15000).catch(() => []);
    result.explain_lenses = explainLenses;
    await shot(page, 'vscode-explain.png');

    // 5. a transcript window from the explain document
    const open = await page.$('.editor-group-container.active .codelens-decoration a:text-matches("open transcript at #")');
    if (check('explain document has transcript lenses', !!open, explainLenses)) {
      await open.click();
      await waitText(page, '.tab', /transcript .+ @\d+\.md/, 30000);
      await page.waitForTimeout(800);
      const t = await activeEditorText(page);
      result.transcript_text = t.slice(0, 800);
      check('transcript window', /#### ▶ #\d+/.test(t) || /around event #\d+/.test(t), t.slice(0, 200));
      await shot(page, 'vscode-transcript.png');
    }

    // 6. the command palette: select lines of the code, run "Engram: Explain Selection"
    await page.mouse.move(5, 890);
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+1'); // back to the code's editor group
    await quickOpen(page, file);
    const selected = await selectLines(page, 2, 5);
    check('lines 2-5 selected', selected, await workbenchState(page));
    check('palette command', await runCommand(page, 'Engram: Explain Selection'));
    const tabs2 = await waitText(page, '.tab', /why .+ 2-5\.md/, 30000).catch(() => []);
    check('explain selection opens lines 2-5', tabs2.length > 0, tabs2.length ? tabs2 : await workbenchState(page));
    await page.waitForTimeout(500);
    await shot(page, 'vscode-palette-explain.png');

    // The editor's context menu has Explain Selection and the Engram submenu.
    await page.keyboard.press('Control+1');
    const c = await linePoint(page, 7);
    if (c) {
      await page.mouse.click(c.x, c.y, { button: 'right' });
      await waitText(page, '.monaco-menu .action-label', /^Engram$/, 10000).catch(() => []);
      const menu = (await page.locator('.monaco-menu .action-label').allTextContents()).filter((t) => /Explain Selection|^Engram$/.test(t));
      result.context_menu = menu;
      check('context menu', menu.includes('Explain Selection') && menu.includes('Engram'), menu);
      await page.keyboard.press('Escape');
    }

    // 7. Ingest Sessions: the server's progress, then its summary as a notification
    check('ingest command', await runCommand(page, 'Engram: Ingest Sessions'));
    const toast = await waitText(page, '.notifications-toasts', /Engram: ingest:/, 60000).catch(() => []);
    result.ingest_toast = toast.map((t) => t.slice(0, 200));
    check('ingest summary', toast.length > 0, result.ingest_toast);

    // 8. Reindex, then the status bar counts the sessions again
    check('reindex command', await runCommand(page, 'Engram: Reindex'));
    const after = await waitText(page, '.statusbar-item', /Engram: \d+ sessions?/, 60000).catch(() => []);
    check('status after reindex', after.length > 0, after);
  } catch (err) {
    check('no error', false, String(err && err.stack || err).slice(0, 1000));
    await shot(page, 'vscode-failure.png').catch(() => {});
  } finally {
    result.ms = Date.now() - t0;
    result.ok = result.checks.every((c) => c.ok);
    console.log(JSON.stringify(result));
    await browser.close();
    process.exit(result.ok ? 0 : 1);
  }
})();
