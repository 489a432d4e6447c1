// Drive code-server (VS Code in the browser) with playwright-core and Debian's Chromium: open an
// agent-written file of the fixture repository, check the Engram lenses, the hover, Explain (lens click
// and the command palette) and a transcript window. Screenshots go to OUT_DIR.
//
//   node vscode_e2e.js URL RELATIVE_FILE HOVER_LINE OUT_DIR SESSION_ID
// Prints one JSON line with what it saw; exits 1 when a check failed.
const {
  activeEditorText, hoverLine, launch, linePoint, openWorkbench, quickOpen, recorder, runCommand, selectLines, waitText,
  workbenchState,
} = require('./vscode_lib');

const [url, file, hoverAt, outDir, session] = process.argv.slice(2);
const { result, check, shot, finish } = recorder(outDir);

(async () => {
  const { browser, page } = await launch(result.console_errors);
  try {
    await openWorkbench(page, url);
    check('workbench and extension', true);
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
    const hover = await hoverLine(page, Number(hoverAt), /Asked/);
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
    const ok = finish();
    await browser.close();
    process.exit(ok ? 0 : 1);
  }
})();
