// A small stand-in for the `vscode` module and vscode-languageclient, so that out/extension.js can be
// loaded and driven by `node --test` (the seam for the code that imports `vscode`).
const Module = require('node:module');

function makeStubs(config = {}) {
  const calls = { commands: {}, errors: [], infos: [], shown: [], progress: [], clients: [], providers: {}, quickPicks: [], inputs: [], answers: [] };
  class EventEmitter {
    constructor() { this.listeners = []; this.event = (l) => { this.listeners.push(l); return { dispose() {} }; }; }
    fire(v) { for (const l of this.listeners) l(v); }
    dispose() {}
  }
  class Uri {
    constructor(scheme, path, query = '') { Object.assign(this, { scheme, path, query, fsPath: path }); }
    static parse(s) { const m = /^([\w+.-]+):([^?]*)(?:\?(.*))?$/.exec(s); return new Uri(m[1], m[2].replace(/^\/\//, ''), m[3] || ''); }
    static from(o) { return new Uri(o.scheme, o.path, o.query || ''); }
    static file(p) { return new Uri('file', p); }
    toString() { return `${this.scheme}:${this.scheme === 'file' ? '//' : ''}${this.path}${this.query ? '?' + this.query : ''}`; }
  }
  class Range {
    constructor(a, b, c, d) {
      if (typeof a === 'object') Object.assign(this, { start: a, end: b }); // (Position, Position)
      else Object.assign(this, { start: { line: a, character: b }, end: { line: c, character: d } });
    }
  }
  const docs = new Map();
  const vscode = {
    EventEmitter, Uri, Range, Position: class { constructor(line, character) { Object.assign(this, { line, character }); } },
    DocumentLink: class { constructor(range, target) { Object.assign(this, { range, target }); } },
    CodeLens: class { constructor(range, command) { Object.assign(this, { range, command }); } },
    MarkdownString: class { constructor(value) { this.value = value; } },
    Hover: class { constructor(contents, range) { Object.assign(this, { contents, range }); } },
    StatusBarAlignment: { Left: 1, Right: 2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    ViewColumn: { Active: -1, Beside: -2 },
    workspace: {
      workspaceFolders: [{ uri: Uri.file('/repo') }],
      getConfiguration: () => ({ get: (k, d) => (k in config ? config[k] : d) }),
      registerTextDocumentContentProvider: (scheme, p) => { calls.providers[scheme] = p; return { dispose() {} }; },
      asRelativePath: (uri) => uri.path.replace(/^\/repo\//, ''),
      openTextDocument: async (uri) => {
        if (uri.scheme === 'file') return { uri, languageId: 'plaintext', getText: () => '' };
        const text = calls.providers[uri.scheme].provideTextDocumentContent(uri);
        const doc = { uri, languageId: uri.path.endsWith('.md') ? 'markdown' : 'plaintext', getText: () => text };
        docs.set(uri.toString(), doc);
        return doc;
      },
      onDidChangeConfiguration: () => ({ dispose() {} }),
    },
    languages: {
      registerDocumentLinkProvider: (sel, p) => { calls.providers.links = p; return { dispose() {} }; },
      registerCodeLensProvider: (sel, p) => { calls.providers.lenses = p; return { dispose() {} }; },
      setTextDocumentLanguage: async (doc, lang) => { doc.languageId = lang; return doc; },
    },
    window: {
      activeTextEditor: undefined,
      createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {} }),
      createStatusBarItem: () => ({ text: '', tooltip: '', command: undefined, show() {}, dispose() {} }),
      showErrorMessage: async (m) => { calls.errors.push(m); return undefined; },
      showInformationMessage: async (m) => { calls.infos.push(m); return undefined; },
      showTextDocument: async (doc, opts) => { calls.shown.push({ doc, opts }); return {}; },
      showQuickPick: async (items) => { calls.quickPicks.push(items); return items[0]; },
      showInputBox: async (opts) => { calls.inputs.push(opts); return calls.answers.shift(); },
      withProgress: (opts, task) => {
        const entry = { opts, reports: [], cancel: undefined };
        calls.progress.push(entry);
        const ct = { onCancellationRequested: (f) => { entry.cancel = f; return { dispose() {} }; } };
        return Promise.resolve(task({ report: (v) => entry.reports.push(v) }, ct));
      },
    },
    commands: {
      registerCommand: (id, fn) => { calls.commands[id] = fn; return { dispose() {} }; },
      executeCommand: async () => undefined,
    },
    extensions: { getExtension: () => undefined },
  };

  const responses = {};
  class LanguageClient {
    constructor(id, name, serverOptions, clientOptions) {
      Object.assign(this, { id, name, serverOptions, clientOptions, features: [], notifications: {}, requests: {}, progress: {}, sent: [], requestsSent: [] });
      calls.clients.push(this);
    }
    registerFeature(f) { this.features.push(f); }
    onDidChangeState() { return { dispose() {} }; }
    onNotification(m, h) { this.notifications[m] = h; return { dispose() {} }; }
    onRequest(t, h) { this.requests[t.method || t] = h; return { dispose() {} }; }
    onProgress(type, token, h) { this.progress[token] = h; return { dispose() {} }; }
    sendNotification(t, p) { this.sent.push([t.method || t, p]); return Promise.resolve(); }
    async sendRequest(method, params) {
      this.requestsSent.push([method, params]);
      const key = method === 'workspace/executeCommand' ? params.command : method;
      const r = responses[key];
      if (r instanceof Error) throw r;
      return typeof r === 'function' ? r(params) : r;
    }
    async start() { this.started = true; for (const f of this.features) f.initialize({}, undefined); }
    async stop() { this.stopped = true; }
  }
  const lc = {
    LanguageClient,
    State: { Stopped: 1, Starting: 3, Running: 2 },
    WorkDoneProgress: { type: { method: '$/progress' } },
    WorkDoneProgressCreateRequest: { type: { method: 'window/workDoneProgress/create' } },
    WorkDoneProgressCancelNotification: { type: { method: 'window/workDoneProgress/cancel' } },
  };
  return { vscode, lc, calls, responses, docs };
}

/** Load a fresh out/extension.js against new stubs. */
function loadExtension(config) {
  const stubs = makeStubs(config);
  const orig = Module._load;
  Module._load = function (req, parent, isMain) {
    if (req === 'vscode') return stubs.vscode;
    if (req === 'vscode-languageclient/node') return stubs.lc;
    return orig.call(this, req, parent, isMain);
  };
  const p = require.resolve('../out/extension.js');
  delete require.cache[p];
  try {
    stubs.ext = require(p);
  } finally {
    Module._load = orig;
  }
  return stubs;
}

module.exports = { loadExtension };
