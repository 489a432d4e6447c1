// The server lookup order, with a fake file system (no VS Code needed).
const test = require('node:test');
const assert = require('node:assert');
const { findServer, findExecutable, INSTALL_HINT } = require('../out/lookup.js');

const fsWith = (...files) => (f) => files.includes(f);

test('engram.path wins and runs `<path> lsp`', async () => {
  const r = await findServer({ enginePath: '/opt/engram/bin/engram', pythonPath: '/usr/bin/python3', envPath: '/usr/bin', isExecutable: fsWith('/opt/engram/bin/engram', '/usr/bin/engram'), platform: 'linux' });
  assert.ok(r.ok);
  assert.deepStrictEqual(r.server, { command: '/opt/engram/bin/engram', args: ['lsp'], source: 'engram.path' });
});

test('engram.path may be a command name looked up on PATH', async () => {
  const r = await findServer({ enginePath: 'engram', envPath: '/a:/b', isExecutable: fsWith('/b/engram'), platform: 'linux' });
  assert.strictEqual(r.ok && r.server.command, '/b/engram');
});

test('a broken engram.path is an error naming the setting, not a fall-through', async () => {
  const r = await findServer({ enginePath: '/nope/engram', envPath: '/usr/bin', isExecutable: fsWith('/usr/bin/engram'), platform: 'linux' });
  assert.strictEqual(r.ok, false);
  assert.match(r.message, /engram\.path/);
  assert.match(r.message, /\/nope\/engram/);
});

test('engram.pythonPath runs the module, after checking it can import engram_server', async () => {
  const checked = [];
  const r = await findServer({ pythonPath: '/venv/bin/python', envPath: '/usr/bin', isExecutable: fsWith('/venv/bin/python', '/usr/bin/engram'), platform: 'linux',
    hasEngram: async (p) => { checked.push(p); return true; } });
  assert.ok(r.ok);
  assert.deepStrictEqual(r.server, { command: '/venv/bin/python', args: ['-m', 'engram_server.entry', 'lsp'], source: 'engram.pythonPath' });
  assert.deepStrictEqual(checked, ['/venv/bin/python']);
  const bad = await findServer({ pythonPath: '/venv/bin/python', isExecutable: fsWith('/venv/bin/python'), platform: 'linux', hasEngram: async () => false });
  assert.strictEqual(bad.ok, false);
  assert.match(bad.message, /cannot import engram_server/);
  assert.match(bad.message, /pip install/);
});

test('then `engram` on PATH, first directory first', async () => {
  const r = await findServer({ envPath: '/home/u/.local/bin:/usr/bin', isExecutable: fsWith('/usr/bin/engram', '/home/u/.local/bin/engram'), platform: 'linux',
    pythonExtension: async () => { throw new Error('must not be asked'); } });
  assert.deepStrictEqual(r.ok && r.server, { command: '/home/u/.local/bin/engram', args: ['lsp'], source: 'PATH' });
});

test('then the Python extension interpreter, only when it has Engram', async () => {
  const inputs = { envPath: '/usr/bin', isExecutable: fsWith(), platform: 'linux', pythonExtension: async () => '/proj/.venv/bin/python' };
  const r = await findServer({ ...inputs, hasEngram: async () => true });
  assert.deepStrictEqual(r.ok && r.server, { command: '/proj/.venv/bin/python', args: ['-m', 'engram_server.entry', 'lsp'], source: 'python-extension' });
  const no = await findServer({ ...inputs, hasEngram: async () => false });
  assert.strictEqual(no.ok, false);
  assert.ok(no.tried.some((t) => t.includes('/proj/.venv/bin/python')));
});

test('nothing found: one message with the fix and what was tried', async () => {
  const r = await findServer({ envPath: '/usr/bin', isExecutable: fsWith(), platform: 'linux' });
  assert.strictEqual(r.ok, false);
  assert.ok(r.message.includes(INSTALL_HINT));
  assert.match(r.message, /engram\.path/);
  assert.match(r.message, /engram\.pythonPath/);
  assert.match(r.message, /Tried: engram\.path \(not set\); engram\.pythonPath \(not set\); engram on PATH \(not found\); Python extension \(not installed\)/);
});

test('Windows: PATHEXT and ; separators', () => {
  const exe = findExecutable('engram', { envPath: 'C:\\a;C:\\py\\Scripts', platform: 'win32', pathExt: '.EXE;.CMD', isExecutable: (f) => f.endsWith('Scripts/engram.exe') || f.endsWith('Scripts\\engram.exe') });
  assert.ok(exe && /engram\.exe$/.test(exe), exe);
});
