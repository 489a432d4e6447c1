// The glue in extension.ts through a stubbed `vscode` (see ../test-support/vscode-stub.js).
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { loadExtension } = require('../test-support/vscode-stub.js');
const pkg = require('../package.json');

const TAPE = 'ab'.repeat(32);
const EXPLAIN = {
  result: { span: { file: 'src/a.py', start: 3, end: 8 }, sessions: [
    { tape: TAPE, session_id: 'sess-1', harness: 'claude-code', model: 'm', touches: 1, last_touch: '2026-01-02T03:04:05Z',
      fragments: [{ tape: TAPE, offset: 7, kind: 'code.edit', file: 'src/a.py', lines: [1, 9], confidence: 1, via: 'direct', timestamp: '2026-01-02T03:04:05Z',
        window: [{ offset: 6, kind: 'msg.in', ts: '2026-01-02T03:04:00Z', text: 'add a' }, { offset: 7, kind: 'code.edit', op: 'create', file: 'src/a.py', before_range: [1, 0], after_range: [1, 9] }] }] },
  ] },
  text: 'x = 1\n',
};

const config = { path: process.execPath, 'window.before': 7, 'window.after': 2, lenses: true, hover: false, minConfidence: 0.25 };

test('activate starts `<engram.path> lsp` for every file and passes the settings', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [{ id: 't1', session_id: 'a' }, { id: 't2', session_id: 'a' }, { id: 't3', session_id: 'b' }];
  const ctx = { subscriptions: [] };
  const ext = await s.ext.activate(ctx);
  const c = s.calls.clients[0];
  assert.strictEqual(c.serverOptions.command, process.execPath);
  assert.deepStrictEqual(c.serverOptions.args, ['lsp']);
  assert.strictEqual(c.serverOptions.transport, undefined, 'no --stdio appended');
  assert.deepStrictEqual(c.clientOptions.documentSelector, [{ scheme: 'file' }]);
  assert.deepStrictEqual(c.clientOptions.initializationOptions, {
    lenses: true, hover: false, editorTape: true, window: { before: 7, after: 2 }, minConfidence: 0.25, mcp: { enabled: true },
    noteDiagnostics: true, noteDriftBelow: 0.8 });
  assert.strictEqual(c.clientOptions.synchronize.configurationSection, 'engram');
  assert.ok(c.started);
  assert.ok('engram/indexChanged' in c.notifications);
  const contributed = pkg.contributes.commands.map((x) => x.command).sort();
  assert.deepStrictEqual(Object.keys(s.calls.commands).sort(), contributed);
  assert.strictEqual(ext.status.text, '$(history) Engram: 2 sessions');
  // Each menu entry names a contributed command.
  const submenus = (pkg.contributes.submenus || []).map((m) => m.id);
  for (const items of Object.values(pkg.contributes.menus)) {
    for (const m of items) assert.ok(m.submenu ? submenus.includes(m.submenu) : contributed.includes(m.command), m.command || m.submenu);
  }
  // Every command is reachable from the editor's context menu (directly or in the Engram submenu).
  const inContext = new Set([...pkg.contributes.menus['editor/context'], ...pkg.contributes.menus['engram.editorContext']].map((m) => m.command));
  for (const id of ['engram.explainSelection', 'engram.showTranscript', 'engram.ingestSessions', 'engram.reindexAll', 'engram.restartServer']) assert.ok(inContext.has(id), id);
  await s.ext.deactivate();
  assert.ok(c.stopped);
});

test('clicking a lens (engram.explain through the middleware) opens the rendered explain document', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  const seen = [];
  const next = async (command, args) => { seen.push([command, args]); return EXPLAIN; };
  const range = { start: { line: 2, character: 0 }, end: { line: 8, character: 0 } };
  const res = await c.clientOptions.middleware.executeCommand('engram.explain', ['file:///repo/src/a.py', range], next);
  assert.strictEqual(res, EXPLAIN);
  assert.deepStrictEqual(seen, [['engram.explain', ['file:///repo/src/a.py', range, { before: 7, after: 2, links: 'reference' }]]]);
  const { doc, opts } = s.calls.shown.at(-1);
  assert.strictEqual(doc.uri.scheme, 'engram');
  assert.match(doc.uri.path, /^\/why a\.py 3-8\.md$/);
  assert.strictEqual(doc.languageId, 'markdown');
  assert.strictEqual(opts.preview, false);
  const text = doc.getText();
  assert.match(text, /## 1\. Claude Code · 2026-01-02 03:04 UTC · m · 1 touch/);
  assert.match(text, /```python\nx = 1\n```/);
  // Links in the document are clickable, and its headings carry the same commands as lenses.
  const lines = text.split('\n');
  const fakeDoc = { lineCount: lines.length, lineAt: (i) => ({ text: lines[i] }) };
  const links = s.calls.providers.links.provideDocumentLinks(fakeDoc);
  assert.ok(links.some((l) => l.target.scheme === 'command' && l.target.path === 'engram.showTranscript'));
  const lenses = s.calls.providers.lenses.provideCodeLenses(fakeDoc);
  assert.ok(lenses.some((l) => l.command.command === 'engram.widenWindows'));
  const open = lenses.find((l) => l.command.title === 'open transcript at #7');
  assert.deepStrictEqual(open.command.arguments, [TAPE, 7, 10, 10]);
  s.responses['engram.explain'] = EXPLAIN;
  // Widen: runs explain again with wider windows and updates the same document.
  await s.calls.commands['engram.widenWindows']('file:///repo/src/a.py#2-8');
  const again = c.requestsSent.at(-1)[1];
  assert.deepStrictEqual(again.arguments[2], { before: 17, after: 7, links: 'reference' });
  assert.strictEqual(s.calls.shown.at(-1).doc.uri.toString(), doc.uri.toString());
});

test('the explain document is the server\'s rendering when it sends one, and Show Transcript follows its targets', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  const md = '# Why `src/a.py:3-8`?\n\n1 session.\n\n**1. Wrote these lines** · Claude Code\n\n- read src/a.py (#4)\n';
  const served = { ...EXPLAIN, markdown: md, targets: [[4, TAPE, 7], [6, TAPE, 4]] };
  const range = { start: { line: 2, character: 0 }, end: { line: 8, character: 0 } };
  await c.clientOptions.middleware.executeCommand('engram.explain', ['file:///repo/src/a.py', range], async () => served);
  const { doc } = s.calls.shown.at(-1);
  assert.strictEqual(doc.getText(), md);
  s.responses['engram.view'] = { tape: TAPE, session_id: 'sess-1', at: 4, events: [] };
  s.vscode.window.activeTextEditor = { document: doc, selection: { isEmpty: true, active: { line: 6 } } };
  await s.calls.commands['engram.showTranscript']();
  assert.deepStrictEqual(c.requestsSent.at(-1)[1], { command: 'engram.view', arguments: [TAPE, 4, 10, 10] });
});

test('hover links (engram.view) and Show Transcript open a transcript document', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  const view = { tape: TAPE, session_id: 'sess-1', at: 7, events: EXPLAIN.result.sessions[0].fragments[0].window };
  s.responses['engram.view'] = view;
  s.responses['engram.explain'] = EXPLAIN;
  s.responses['textDocument/codeLens'] = [{ range: { start: { line: 2, character: 0 }, end: { line: 2, character: 0 } }, data: { start: 2, end: 7 } }];
  await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  await c.clientOptions.middleware.executeCommand('engram.view', [TAPE, 7, 10, 10], async () => view);
  assert.match(s.calls.shown.at(-1).doc.uri.path, /^\/transcript sess-1 @7\.md$/);
  assert.match(s.calls.shown.at(-1).doc.getText(), /#### ▶ #7/);
  // From a source editor with the cursor in an evidence region: explain it briefly, then the single touch opens.
  s.vscode.window.activeTextEditor = { document: { uri: s.vscode.Uri.parse('file:///repo/src/a.py') },
    selection: { isEmpty: true, active: { line: 4 }, start: { line: 4, character: 0 }, end: { line: 4, character: 0 } } };
  await s.calls.commands['engram.showTranscript']();
  const explainCall = c.requestsSent.find(([m, p]) => p && p.command === 'engram.explain');
  assert.deepStrictEqual(explainCall[1].arguments[1], { start: { line: 2, character: 0 }, end: { line: 8, character: 0 } });
  assert.deepStrictEqual(c.requestsSent.at(-1)[1], { command: 'engram.view', arguments: [TAPE, 7, 10, 10] });
});

test('Explain Selection uses the selection, else the region under the cursor', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  s.responses['engram.explain'] = EXPLAIN;
  s.responses['textDocument/codeLens'] = [];
  await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  s.vscode.window.activeTextEditor = { document: { uri: s.vscode.Uri.parse('file:///repo/src/a.py') },
    selection: { isEmpty: false, active: { line: 9 }, start: { line: 3, character: 4 }, end: { line: 9, character: 0 } } };
  await s.calls.commands['engram.explainSelection']();
  const args = c.requestsSent.at(-1)[1].arguments;
  assert.deepStrictEqual(args[1], { start: { line: 3, character: 0 }, end: { line: 9, character: 0 } });
  s.vscode.window.activeTextEditor.selection = { isEmpty: true, active: { line: 5 }, start: { line: 5, character: 1 }, end: { line: 5, character: 1 } };
  await s.calls.commands['engram.explainSelection']();
  assert.deepStrictEqual(c.requestsSent.at(-1)[1].arguments[1], { start: { line: 5, character: 0 }, end: { line: 6, character: 0 } });
});

test('no server found: an error with the fix, no client', async () => {
  const s = loadExtension({ path: '', pythonPath: '' });
  const ext = await s.ext.activate({ subscriptions: [] }, { lookup: { envPath: path.join(__dirname, 'no-such-dir'), pythonExtension: undefined } });
  assert.strictEqual(s.calls.clients.length, 0);
  assert.strictEqual(s.calls.errors.length, 1);
  assert.match(s.calls.errors[0], /cannot find the `engram` language server/);
  assert.match(s.calls.errors[0], /engram\.pythonPath/);
  assert.strictEqual(ext.status.text, '$(error) Engram: no server');
  await s.calls.commands['engram.explainSelection']();
});

test('a workspace without a store shows "not initialised"', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = new Error('no Engram store in this workspace: run `engram init` in the repository');
  const ext = await s.ext.activate({ subscriptions: [] });
  assert.strictEqual(ext.status.text, '$(circle-slash) Engram: not initialised');
});

test('server progress becomes a cancellable notification; Cancel tells the server', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  const ext = await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  c.requests['window/workDoneProgress/create']({ token: 'tok' });
  c.progress.tok({ kind: 'begin', title: 'Engram: ingesting sessions', cancellable: true, percentage: 0 });
  assert.strictEqual(ext.status.text, '$(sync~spin) Engram: indexing');
  const p = s.calls.progress.at(-1);
  assert.deepStrictEqual(p.opts, { location: 15, title: 'Engram: ingesting sessions', cancellable: true });
  c.progress.tok({ kind: 'report', message: '1/4 sessions', percentage: 25 });
  c.progress.tok({ kind: 'report', message: '2/4 sessions', percentage: 50 });
  assert.deepStrictEqual(p.reports, [{ message: '1/4 sessions', increment: 25 }, { message: '2/4 sessions', increment: 25 }]);
  p.cancel();
  assert.deepStrictEqual(c.sent.at(-1), ['window/workDoneProgress/cancel', { token: 'tok' }]);
  c.progress.tok({ kind: 'end', message: 'cancelled' });
  await new Promise((r) => setTimeout(r, 10));
  assert.strictEqual(ext.status.text, '$(history) Engram: 0 sessions');
});

test('hovers show transcript text that looks like HTML', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  const md = new s.vscode.MarkdownString('**Asked:**\n> <task-notification>');
  md.isTrusted = { enabledCommands: ['engram.view'] };
  const h = await c.clientOptions.middleware.provideHover({}, {}, {}, async () => new s.vscode.Hover([md], 'R'));
  assert.strictEqual(h.contents[0].value, '**Asked:**\n> &lt;task-notification&gt;');
  assert.deepStrictEqual(h.contents[0].isTrusted, { enabledCommands: ['engram.view'] });
  assert.strictEqual(h.range, 'R');
});

test('Restart Server stops the client and starts a new one with the current settings', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  await s.ext.activate({ subscriptions: [] });
  const first = s.calls.clients[0];
  await s.calls.commands['engram.restartServer']();
  assert.ok(first.stopped);
  assert.strictEqual(s.calls.clients.length, 2);
  assert.ok(s.calls.clients[1].started);
});

test('Ingest Sessions runs engram.ingest and reports its summary', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [{ id: 't', session_id: 's' }];
  s.responses['engram.ingest'] = { cancelled: false, summary: 'ingest: 1 session, 1 new tape' };
  const ext = await s.ext.activate({ subscriptions: [] });
  await s.calls.commands['engram.ingestSessions']();
  assert.deepStrictEqual(s.calls.infos.at(-1), 'Engram: ingest: 1 session, 1 new tape');
  assert.strictEqual(ext.status.text, '$(history) Engram: 1 session');
  s.responses['engram.ingest'] = { cancelled: true, summary: 'ingest: 0 sessions' };
  await s.calls.commands['engram.ingestSessions']();
  assert.match(s.calls.infos.at(-1), /cancelled/);
});

test('Remember a note asks kind and text and runs engram.remember; Recall Notes opens the pick', async () => {
  const s = loadExtension(config);
  s.responses['engram.tapes'] = [];
  s.responses['engram.remember'] = { id: 'abc123' };
  await s.ext.activate({ subscriptions: [] });
  const c = s.calls.clients[0];
  const range = { start: { line: 4, character: 0 }, end: { line: 7, character: 0 } };
  s.calls.answers.push('Retries stop at three');
  // The server's code action passes the document and the selection's range.
  const id = await s.calls.commands['engram.rememberSelection']('file:///repo/a.py', range);
  assert.strictEqual(id, 'abc123');
  assert.strictEqual(s.calls.quickPicks.at(-1)[0], 'fact');
  assert.deepStrictEqual(c.requestsSent.at(-1), ['workspace/executeCommand',
    { command: 'engram.remember', arguments: ['file:///repo/a.py', range, 'Retries stop at three', 'fact'] }]);
  assert.match(s.calls.infos.at(-1), /remembered note abc123/);
  // Escape in the input box writes nothing.
  const sent = c.requestsSent.length;
  assert.strictEqual(await s.calls.commands['engram.rememberSelection']('file:///repo/a.py', range), undefined);
  assert.strictEqual(c.requestsSent.length, sent);

  s.responses['engram.recall'] = [{ id: 'abc123', content: 'Retries stop at three\nmore', kind: 'decision', state: 'moved',
    location: { uri: 'file:///repo/a.py', range } }];
  s.calls.answers.push('retries');
  await s.calls.commands['engram.recallNotes']();
  const pick = s.calls.quickPicks.at(-1)[0];
  assert.strictEqual(pick.label, 'Retries stop at three');
  assert.strictEqual(pick.description, 'decision · moved');
  assert.strictEqual(pick.detail, 'a.py:5');
  assert.strictEqual(s.calls.shown.at(-1).opts.selection.start.line, 4);
});
