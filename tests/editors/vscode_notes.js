// Notes (memories) in code-server: a note seeded with `engram remember --at` shows first in the hover
// and is counted by the lens; "Engram: Remember a Note for the Selection…" writes one through its quick
// pick and input box; deleting a note's lines (unsaved) brings a hint diagnostic, whose hover names
// the note. Screenshots go to OUT_DIR (vscode-note-hover.png, vscode-note-drift.png, clipped).
//
//   node vscode_notes.js URL RELATIVE_FILE OUT_DIR SPEC_JSON
// SPEC_JSON: {"note": {"a", "b", "summary"}, "remember": {"a", "b", "kind", "text"}} (lines 1-based).
// Prints one JSON line with what it saw; exits 1 when a check failed.
const {
  hoverLine, launch, openWorkbench, pickRow, quickOpen, recorder, runCommand, selectLines, waitText, workbenchState,
} = require('./vscode_lib');

const [url, file, outDir, specJson] = process.argv.slice(2);
const spec = JSON.parse(specJson);
const { result, check, shot, finish } = recorder(outDir);

/** A clip around the hover widget and the lines it points at, from the editor's left edge. */
async function hoverClip(page) {
  return page.evaluate(() => {
    const hover = [...document.querySelectorAll('.monaco-hover')].find((h) => h.getBoundingClientRect().height > 0);
    const editor = document.querySelector('.editor-group-container.active .monaco-editor');
    if (!hover || !editor) return undefined;
    const h = hover.getBoundingClientRect();
    const e = editor.getBoundingClientRect();
    const x = Math.max(0, e.left - 60);
    const y = Math.max(0, Math.min(h.top, e.top) - 10);
    return { x, y, width: Math.min(1440 - x, Math.max(h.right + 30, x + 700) - x), height: Math.min(900 - y, h.bottom + 60 - y) };
  });
}

(async () => {
  const { browser, page } = await launch(result.console_errors);
  try {
    await openWorkbench(page, url);
    if (!check('file opened', await quickOpen(page, file))) throw new Error('could not open ' + file);
    await page.keyboard.press('Control+B');

    // 1. the lens over the note's region counts it beside the sessions
    const lens = await waitText(page, '.codelens-decoration', /why\? .*\b1 note\b/, 60000).catch(() => []);
    check('lens counts the note', lens.length > 0, lens.length ? lens : await page.locator('.codelens-decoration').allTextContents());

    // 2. the hover over the note's lines: the note first, then the sessions
    const summary = spec.note.summary;
    const hover = await hoverLine(page, spec.note.a + 1, new RegExp(summary.slice(0, 30).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    result.note_hover = hover.slice(0, 800);
    const at = hover.indexOf(summary.slice(0, 30));
    const evidence = hover.search(/Wrote these lines|Asked|Claude Code/);
    check('hover shows the note first', at >= 0 && /decision/.test(hover) && (evidence < 0 || at < evidence), result.note_hover);
    await page.waitForTimeout(800); // the hover fades in
    const clip = await hoverClip(page);
    await shot(page, 'vscode-note-hover.png', clip);
    await page.mouse.move(5, 890);
    await page.keyboard.press('Escape');

    // 3. "Remember a Note for the Selection…": the kind from a quick pick, the text from an input box
    const r = spec.remember;
    check('remember: lines selected', await selectLines(page, r.a, r.b), await workbenchState(page));
    check('remember: palette command', await runCommand(page, 'Engram: Remember a Note for the Selection…'));
    await waitText(page, '.quick-input-widget', /what kind of note/, 10000).catch(() => []);
    check('remember: kind picked', await pickRow(page, r.kind, 10000), await workbenchState(page));
    const box = await waitText(page, '.quick-input-widget', /Engram note/, 10000).catch(() => []);
    check('remember: input box', box.length > 0);
    await page.keyboard.type(r.text, { delay: 5 });
    await page.keyboard.press('Enter');
    const toast = await waitText(page, '.notifications-toasts', /Engram: remembered note [0-9a-f]+/, 20000).catch(() => []);
    result.remembered = ((toast[0] || '').match(/remembered note ([0-9a-f]+)/) || [])[1] || null;
    check('remember: confirmed', !!result.remembered, toast.length ? result.remembered : await workbenchState(page));
    // The lenses (one region or two) count both notes once the server asked for them again.
    const counted = (texts) => texts.reduce((n, t) => n + Number((t.match(/\b(\d+) notes?\b/) || [0, 0])[1]), 0);
    let lensTexts = [];
    for (const end = Date.now() + 20000; Date.now() < end && counted(lensTexts) < 2; await page.waitForTimeout(300)) {
      lensTexts = await page.locator('.codelens-decoration').allTextContents();
    }
    check('lenses count the new note', counted(lensTexts) === 2, lensTexts);
    await page.keyboard.press('Escape');

    // 4. delete the note's lines (unsaved): a hint diagnostic appears; its hover names the note
    check('drift: lines selected', await selectLines(page, spec.note.a, spec.note.b), await workbenchState(page));
    await page.keyboard.press('Delete');
    const hint = page.locator('.editor-group-container.active .squiggly-hint').first();
    const shown = await hint.waitFor({ state: 'attached', timeout: 30000 }).then(() => true, () => false);
    check('drift: hint diagnostic (unsaved buffer)', shown, await workbenchState(page));
    if (shown) {
      const box2 = await hint.boundingBox();
      result.drift_hover = '';
      for (let attempt = 0; attempt < 4 && !/Engram note/.test(result.drift_hover); attempt++) {
        await page.mouse.move(box2.x + 2 + attempt * 6, box2.y + box2.height / 2);
        await page.mouse.move(box2.x + 4 + attempt * 6, box2.y + box2.height / 2);
        await waitText(page, '.monaco-hover', /Engram note/, 8000).catch(() => {});
        result.drift_hover = ((await page.$$eval('.monaco-hover', (els) => els.map((e) => e.textContent).join(' | '))) || '').slice(0, 800);
      }
      check('drift: the hint names the note', /Engram note [0-9a-f]{8} \(decision\): its code (is gone|was edited)/.test(result.drift_hover),
        result.drift_hover);
      await page.waitForTimeout(800);
      await shot(page, 'vscode-note-drift.png', await hoverClip(page));
    }
    await page.mouse.move(5, 890);
    await page.keyboard.press('Escape');
    // Saved, so that the command line (which reads the file on disk) sees the drift too.
    await page.keyboard.press('Control+S');
    const saved = await page.waitForFunction(() => {
      const tab = document.querySelector('.editor-group-container.active .tab.active');
      return !!tab && !tab.classList.contains('dirty');
    }, null, { timeout: 10000 }).then(() => true, () => false);
    check('saved', saved, await workbenchState(page));
  } catch (err) {
    check('no error', false, String(err && err.stack || err).slice(0, 1000));
    await shot(page, 'vscode-notes-failure.png').catch(() => {});
  } finally {
    const ok = finish();
    await browser.close();
    process.exit(ok ? 0 : 1);
  }
})();
