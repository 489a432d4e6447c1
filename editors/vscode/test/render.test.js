// Markdown rendering of explain results and transcript windows, status text (no VS Code needed).
const test = require('node:test');
const assert = require('node:assert');
const r = require('../out/render.js');

const TAPE = 'db4b44ed4d285aa8a70b2d737d0c6330c2b3d369ab130b8ef10e9566e9471351';
const explain = {
  result: {
    version: 1,
    span: { file: 'lib/spotter/services/review_context_builder.ex', start: 10, end: 30 },
    sessions: [
      { tape: TAPE, session_id: '258c7280-ae70-4798-800f-63464d01a85d', harness: 'claude-code', model: 'claude-opus-4-6', touches: 2,
        last_touch: '2026-02-11T21:28:34.337Z',
        fragments: [
          { tape: TAPE, offset: 472, kind: 'code.edit', file: 'lib/spotter/services/review_context_builder.ex', lines: [1, 90], confidence: 1, via: 'direct',
            timestamp: '2026-02-11T21:12:00.000Z',
            window: [
              { offset: 469, kind: 'msg.in', ts: '2026-02-11T21:11:58Z', text: 'Build the review context\nfor a session' },
              { offset: 470, kind: 'tool.call', ts: '2026-02-11T21:11:59Z', name: 'Write', input: { file_path: '/x/lib/a.ex', content: 'defmodule A do\nend\n' } },
              { offset: 472, kind: 'code.edit', ts: '2026-02-11T21:12:00Z', op: 'create', file: 'lib/a.ex', before_range: [1, 0], after_range: [1, 90] },
              { offset: 473, kind: 'msg.out', ts: '2026-02-11T21:12:01Z', text: 'Created the builder.' },
            ] },
          { tape: TAPE, offset: 510, kind: 'code.read', file: 'lib/a.ex', lines: [1, 166], confidence: 0.4151, via: 'lineage', timestamp: '2026-02-11T21:20:00Z', window: null },
        ] },
      { tape: 'ff'.repeat(32), session_id: 'editor-1', harness: 'editor', model: null, touches: 1, last_touch: null, fragments: [] },
    ],
    truncated: false,
    lineage: { edges_followed: 1 },
  },
  markdown: 'plain',
  text: 'def a\n  :ok\nend\n',
};

test('explain: sessions in rank order with harness, date, model, touches and windows', () => {
  const md = r.explainMarkdown(explain, { docKey: 'k1', before: 3, after: 3, language: 'elixir' });
  assert.match(md, /^# Why does `lib\/spotter\/services\/review_context_builder\.ex` lines 10–30 exist\?/);
  assert.match(md, /\*\*2 sessions\*\* wrote, read or discussed this code/);
  const first = md.indexOf('## 1. Claude Code · 2026-02-11 21:28 UTC · claude-opus-4-6 · 2 touches');
  const second = md.indexOf('## 2. editor · unknown time · unknown model · 1 touch');
  assert.ok(first > 0 && second > first, md);
  assert.match(md, /```elixir\ndef a\n  :ok\nend\n```/);
  assert.match(md, /### 1\.1 wrote `lib\/spotter\/services\/review_context_builder\.ex` lines 1–90 · 2026-02-11 21:12 UTC · confidence 1\.00 \(direct\)/);
  assert.match(md, /### 1\.2 read `lib\/a\.ex` lines 1–166 .* confidence 0\.42 \(lineage\)/);
  assert.match(md, /- `#469` 21:11:58 \*\*user\*\*: Build the review context ⏎ for a session/);
  assert.match(md, /- ▶ `#472` 21:12:00 \*\*edit\*\* create `lib\/a\.ex` ∅ before 1 → 1–90/);
  assert.match(md, /- `#470` 21:11:59 \*\*tool call\*\* `Write` `\/x\/lib\/a\.ex`/);
  assert.match(md, /Lineage: followed 1 edge/);
});

test('explain: links widen the windows and open transcripts', () => {
  const md = r.explainMarkdown(explain, { docKey: 'k1', before: 3, after: 3 });
  const links = r.findCommandLinks(md.split('\n')).map((l) => [l.label, l.command, l.args]);
  // The text reads [label][n]; the long command URIs are defined once, at the end.
  assert.match(md, /· \[widen windows\]\[1\]/);
  assert.match(md, /\n\[1\]: command:engram\.widenWindows\?%5B%22k1%22%5D/);
  assert.doesNotMatch(md.split('<!-- links -->')[0], /command:/);
  assert.deepStrictEqual(links[0], ['widen windows', 'engram.widenWindows', ['k1']]);
  assert.ok(links.some(([l, c, a]) => l === 'whole transcript' && c === 'engram.showTranscript' && a[0] === TAPE && a[1] === 0 && a[3] === 100000));
  assert.ok(links.some(([l, c, a]) => l === 'open transcript at #472' && c === 'engram.showTranscript' && a[1] === 472));
});

test('explain: nothing found says so', () => {
  const md = r.explainMarkdown({ result: { span: { file: 'a.py', start: 3, end: 3 }, sessions: [] } }, { docKey: 'k', before: 3, after: 3 });
  assert.match(md, /line 3 exist\?/);
  assert.match(md, /No recorded session wrote, read or discussed this code\./);
});

test('view: events in full around the offset, with links to move', () => {
  const v = { tape: TAPE, session_id: '258c7280', at: 472, events: explain.result.sessions[0].fragments[0].window.concat([
    { offset: 474, kind: 'tool.result', ts: '2026-02-11T21:12:02Z', name: 'Bash', is_error: true, exit_code: 1, stdout: 'boom\n', stderr: '' },
    { offset: 475, kind: 'code.edit', ts: 'x', op: 'update', file: 'a.ex', before_range: [2, 2], after_range: [2, 3], before_text: 'old\n', after_text: 'new\nnewer\n' },
    { offset: 476, kind: 'msg.out', ts: 'x', text: { $obj: 'abcdef0123456789', len: 300000 } },
  ]) };
  const md = r.viewMarkdown(v, { before: 10, after: 10 });
  assert.match(md, /^# Session `258c7280` around event #472/);
  assert.match(md, /#### #469 · 21:11:58 · user\n\n> Build the review context\n> for a session/);
  assert.match(md, /#### ▶ #472 · 21:12:00 · edit create `lib\/a\.ex`/);
  assert.match(md, /```\ndefmodule A do\nend\n```/);
  assert.match(md, /```diff\n-old\n\+new\n\+newer\n```/);
  assert.match(md, /result `Bash` error exit 1/);
  assert.match(md, /<300000 characters in object abcdef012345>/);
  assert.ok(r.findCommandLinks(md.split('\n')).some((l) => l.label === 'earlier' && l.command === 'engram.showTranscript' && l.args[1] === 469 && l.args[2] === 20));
  const whole = r.viewMarkdown(v, { before: 0, after: 100000 });
  assert.match(whole, /^# Transcript of session `258c7280`/);
  assert.doesNotMatch(whole, /▶/);
});

test('status text', () => {
  assert.strictEqual(r.statusText({ phase: 'ready', sessions: 2 }).text, '$(history) Engram: 2 sessions');
  assert.strictEqual(r.statusText({ phase: 'ready', sessions: 1 }).text, '$(history) Engram: 1 session');
  assert.match(r.statusText({ phase: 'no-store' }).text, /not initialised/);
  assert.match(r.statusText({ phase: 'no-store' }).tooltip, /engram init/);
  assert.match(r.statusText({ phase: 'indexing' }).text, /indexing/);
  assert.match(r.statusText({ phase: 'missing', detail: 'install it' }).tooltip, /install it/);
  assert.strictEqual(r.sessionCount([{ id: 'a', session_id: 's1' }, { id: 'b', session_id: 's1' }, { id: 'c', session_id: 's2' }]), 2);
});

test('selections, regions and ranges', () => {
  assert.deepStrictEqual(r.selectionLines({ start: { line: 4, character: 2 }, end: { line: 9, character: 0 } }), [4, 8]);
  assert.deepStrictEqual(r.selectionLines({ start: { line: 4, character: 0 }, end: { line: 4, character: 0 } }), [4, 4]);
  assert.deepStrictEqual(r.linesRange(4, 8), { start: { line: 4, character: 0 }, end: { line: 9, character: 0 } });
  const lenses = [
    { range: r.linesRange(0, 0), data: { uri: 'u', start: 0, end: 5 } },
    { range: r.linesRange(10, 10), command: { arguments: ['u', r.linesRange(10, 20)] } },
  ];
  assert.deepStrictEqual(r.regionAt(lenses, 3), [0, 5]);
  assert.deepStrictEqual(r.regionAt(lenses, 20), [10, 20]);
  assert.strictEqual(r.regionAt(lenses, 7), undefined);
  assert.strictEqual(r.fenceLanguage('x/y.EX'), 'elixir');
  assert.strictEqual(r.fenceLanguage('Makefile'), '');
});

test('HTML-looking transcript text is shown, not swallowed', () => {
  const md = '**Asked:**\n> <task-notification>\n> <status>done</status>\n>\n> a -> b\n\n`<kept>` x<y\n```\n<raw>\n```';
  assert.strictEqual(r.escapeHtmlOutsideCode(md),
    '**Asked:**\n> &lt;task-notification&gt;\n> &lt;status&gt;done&lt;/status&gt;\n>\n> a -&gt; b\n\n`<kept>` x&lt;y\n```\n<raw>\n```');
});
