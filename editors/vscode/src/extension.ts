// The VS Code client of `engram lsp`. Everything that does not need `vscode` lives in lookup.ts and
// render.ts (unit-tested with `node --test`); this file is the glue, tested through a stubbed `vscode`.
import * as cp from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';
import { findServer, Lookup, LookupInputs } from './lookup';
import {
  commandUri,
  escapeHtmlOutsideCode,
  ExplainResponse,
  findCommandLinks,
  explainMarkdown,
  fenceLanguage,
  harnessName,
  LensLike,
  linesRange,
  LspRange,
  regionAt,
  selectionLines,
  sessionCount,
  StatusState,
  statusText,
  TapeRow,
  targetAt,
  touchLabel,
  ViewResponse,
  viewMarkdown,
} from './render';

export const SCHEME = 'engram';
export const INDEX_CHANGED = 'engram/indexChanged';

/** Seams for tests: replace how the server is found. */
export interface Deps {
  lookup?: Partial<LookupInputs>;
}

interface ExplainDocState {
  key: string;
  uri: vscode.Uri;
  sourceUri: string;
  range: LspRange;
  before: number;
  after: number;
  response?: ExplainResponse;
}

/** Read-only virtual documents (scheme `engram:`) holding rendered markdown. */
export class EngramDocuments implements vscode.TextDocumentContentProvider {
  private readonly contents = new Map<string, string>();
  private readonly emitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.emitter.event;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? '_This Engram document is gone: run the command again._\n';
  }

  set(uri: vscode.Uri, text: string): void {
    this.contents.set(uri.toString(), text);
    this.emitter.fire(uri);
  }

  dispose(): void {
    this.emitter.dispose();
  }
}

function docLines(doc: vscode.TextDocument): string[] {
  const lines: string[] = [];
  for (let i = 0; i < doc.lineCount; i++) lines.push(doc.lineAt(i).text);
  return lines;
}

/** Makes the `[label][n]` command links of engram documents clickable (Ctrl/Cmd+click). */
class CommandLinkProvider implements vscode.DocumentLinkProvider {
  provideDocumentLinks(doc: vscode.TextDocument): vscode.DocumentLink[] {
    return findCommandLinks(docLines(doc)).map((l) => {
      const link = new vscode.DocumentLink(
        new vscode.Range(l.line, l.start, l.line, l.start + l.label.length),
        vscode.Uri.parse(commandUri(l.command, l.args)),
      );
      link.tooltip = l.label;
      return link;
    });
  }
}

/** The same commands as lenses over the lines that hold them (one click, no modifier). */
class CommandLinkLenses implements vscode.CodeLensProvider {
  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    return findCommandLinks(docLines(doc)).map(
      (l) => new vscode.CodeLens(new vscode.Range(l.line, 0, l.line, 0), { title: l.label, command: l.command, arguments: l.args }),
    );
  }
}

function isExecutable(file: string): boolean {
  try {
    return fs.statSync(file).isFile() && (process.platform === 'win32' || (fs.accessSync(file, fs.constants.X_OK), true));
  } catch {
    return false;
  }
}

function hasEngram(python: string): Promise<boolean> {
  return new Promise((resolve) => {
    cp.execFile(python, ['-c', 'import engram_server'], { timeout: 20000 }, (err) => resolve(!err));
  });
}

/** The active interpreter of the Python extension (ms-python.python), when it is installed. */
async function pythonFromExtension(): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const api: any = ext.isActive ? ext.exports : await ext.activate();
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const envs = api?.environments;
  if (envs?.getActiveEnvironmentPath) {
    const active = envs.getActiveEnvironmentPath(folder);
    const resolved = envs.resolveEnvironment ? await envs.resolveEnvironment(active) : undefined;
    const exe = resolved?.executable?.uri?.fsPath ?? active?.path;
    if (exe) return exe;
  }
  const details = api?.settings?.getExecutionDetails?.(folder);
  return details?.execCommand?.[0];
}

/** The `engram` section as the server expects it (initializationOptions and workspace/configuration). */
export function serverSettings(): Record<string, unknown> {
  const c = vscode.workspace.getConfiguration('engram');
  return {
    lenses: c.get<boolean>('lenses', true),
    hover: c.get<boolean>('hover', true),
    editorTape: c.get<boolean>('editorTape', true),
    window: { before: c.get<number>('window.before', 3), after: c.get<number>('window.after', 3) },
    minConfidence: c.get<number>('minConfidence', 0.5),
    mcp: { enabled: c.get<boolean>('mcp.enabled', true) },
    noteDiagnostics: c.get<boolean>('noteDiagnostics', true),
    noteDriftBelow: c.get<number>('noteDriftBelow', 0.8),
  };
}

/** The kinds of note the server takes (engram.memory.model.KINDS). */
export const NOTE_KINDS = ['fact', 'decision', 'preference', 'pattern', 'debug', 'todo', 'negative'];

/** One answer of the server's engram.recall. */
interface RecalledNote {
  id: string;
  content: string;
  kind: string;
  state: string | null;
  location: { uri: string; range: LspRange } | null;
}

export class EngramExtension implements vscode.Disposable {
  client: LanguageClient | undefined;
  readonly docs = new EngramDocuments();
  readonly explains = new Map<string, ExplainDocState>();
  readonly status: vscode.StatusBarItem;
  readonly output: vscode.OutputChannel;
  private readonly disposables: vscode.Disposable[] = [];
  private state: StatusState = { phase: 'starting' };
  private busy = 0;
  private sessions: number | undefined;
  lookup: Lookup | undefined;

  constructor(private readonly context: vscode.ExtensionContext, private readonly deps: Deps = {}) {
    this.output = vscode.window.createOutputChannel('Engram');
    this.status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
    this.status.command = 'engram.ingestSessions';
    this.setStatus({ phase: 'starting' });
    this.status.show();
    this.disposables.push(
      this.output,
      this.status,
      this.docs,
      vscode.workspace.registerTextDocumentContentProvider(SCHEME, this.docs),
      vscode.languages.registerDocumentLinkProvider({ scheme: SCHEME }, new CommandLinkProvider()),
      vscode.languages.registerCodeLensProvider({ scheme: SCHEME }, new CommandLinkLenses()),
      vscode.commands.registerCommand('engram.explainSelection', () => this.explainSelection()),
      vscode.commands.registerCommand('engram.showTranscript', (...args: unknown[]) => this.showTranscript(args)),
      vscode.commands.registerCommand('engram.ingestSessions', () => this.ingest()),
      vscode.commands.registerCommand('engram.reindexAll', () => this.reindex()),
      vscode.commands.registerCommand('engram.restartServer', () => this.restart()),
      vscode.commands.registerCommand('engram.widenWindows', (key?: string) => this.widen(key)),
      vscode.commands.registerCommand('engram.rememberSelection', (uri?: string, range?: LspRange) => this.rememberSelection(uri, range)),
      vscode.commands.registerCommand('engram.recallNotes', () => this.recallNotes()),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('engram.path') || e.affectsConfiguration('engram.pythonPath')) void this.restart();
      }),
    );
  }

  setStatus(s: StatusState): void {
    this.state = s;
    const shown = this.busy > 0 && s.phase !== 'missing' ? { phase: 'indexing' as const } : s;
    const { text, tooltip } = statusText(shown);
    this.status.text = text;
    this.status.tooltip = tooltip;
  }

  private async withBusy<T>(fn: () => Thenable<T> | Promise<T>): Promise<T> {
    this.busy++;
    this.setStatus(this.state);
    try {
      return await fn();
    } finally {
      this.busy--;
      this.setStatus(this.state);
    }
  }

  // ---------------------------------------------------------------- server lifecycle

  async findServer(): Promise<Lookup> {
    const c = vscode.workspace.getConfiguration('engram');
    return findServer({
      enginePath: c.get<string>('path', ''),
      pythonPath: c.get<string>('pythonPath', ''),
      envPath: process.env.PATH,
      pathExt: process.env.PATHEXT,
      isExecutable,
      pythonExtension: pythonFromExtension,
      hasEngram,
      ...this.deps.lookup,
    });
  }

  async start(): Promise<boolean> {
    this.setStatus({ phase: 'starting' });
    const found = (this.lookup = await this.findServer());
    this.output.appendLine(`lookup: ${found.tried.join('; ')}`);
    if (!found.ok) {
      this.setStatus({ phase: 'missing', detail: found.message });
      this.output.appendLine(found.message);
      void vscode.window.showErrorMessage(found.message, 'Open Settings', 'Show Log').then((pick) => {
        if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'engram.');
        if (pick === 'Show Log') this.output.show();
      });
      return false;
    }
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command: found.server.command,
      args: found.server.args,
      options: { cwd, env: process.env },
    };
    this.output.appendLine(`starting: ${found.server.command} ${found.server.args.join(' ')} (from ${found.server.source})`);
    const clientOptions: LanguageClientOptions = {
      // Every file, whatever its language: provenance is language-agnostic.
      documentSelector: [{ scheme: 'file' }],
      initializationOptions: serverSettings(),
      synchronize: { configurationSection: 'engram' },
      outputChannel: this.output,
      markdown: { isTrusted: { enabledCommands: ['engram.view', 'engram.explain', 'engram.showTranscript'] }, supportHtml: false },
      middleware: {
        provideHover: async (document, position, token, next) => {
          const hover = await next(document, position, token);
          if (!hover) return hover;
          const contents = hover.contents.map((c) => {
            if (!(c instanceof vscode.MarkdownString)) return c;
            const md = new vscode.MarkdownString(escapeHtmlOutsideCode(c.value));
            md.isTrusted = c.isTrusted;
            md.supportHtml = false;
            return md;
          });
          return new vscode.Hover(contents, hover.range);
        },
        executeCommand: async (command, args, next) => {
          // Lenses and hover links run the server's commands; show what they return.
          if (command === 'engram.explain') return this.explainAndShow(args[0] as string, args[1] as LspRange, args[2] as Record<string, unknown> | undefined, next);
          if (command === 'engram.view') {
            const res = (await next(command, args)) as ViewResponse;
            if (res) await this.openView(res, Number(args[2] ?? 5), Number(args[3] ?? 5));
            return res;
          }
          return next(command, args);
        },
      },
    };
    const client = new LanguageClient('engram', 'Engram', serverOptions, clientOptions);
    client.registerFeature(this.notificationProgress(client));
    this.client = client;
    this.disposables.push(
      client.onDidChangeState((e) => {
        if (e.newState === State.Stopped && this.state.phase !== 'missing') this.setStatus({ phase: 'stopped' });
      }),
    );
    try {
      await client.start();
    } catch (err) {
      const msg = `Engram: the language server (${found.server.command} ${found.server.args.join(' ')}) failed to start: ${err}. ` +
        'Check the Engram output channel; "Engram: Restart Server" tries again.';
      this.setStatus({ phase: 'error', detail: msg });
      void vscode.window.showErrorMessage(msg);
      return false;
    }
    this.disposables.push(client.onNotification(INDEX_CHANGED, () => void this.refreshStatus()));
    await this.refreshStatus();
    return true;
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop();
      } catch (err) {
        this.output.appendLine(`stop: ${err}`);
      }
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Work-done progress from the server as a notification (with a Cancel button when cancellable). */
  notificationProgress(client: LanguageClient): StaticFeature {
    const ext = this;
    return {
      fillClientCapabilities() {},
      getState: () => ({ kind: 'static' }),
      clear() {},
      initialize() {
        // Registered after the built-in progress feature, so this handler replaces its status-bar one.
        client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
          let report: ((v: { message?: string; increment?: number }) => void) | undefined;
          let done: (() => void) | undefined;
          let last = 0;
          const sub = client.onProgress(WorkDoneProgress.type, token, (value) => {
            if (value.kind === 'begin') {
              void ext.withBusy(() =>
                vscode.window.withProgress(
                  { location: vscode.ProgressLocation.Notification, title: value.title, cancellable: !!value.cancellable },
                  (progress, ct) =>
                    new Promise<void>((resolve) => {
                      report = (v) => progress.report(v);
                      done = resolve;
                      ct.onCancellationRequested(() => void client.sendNotification(WorkDoneProgressCancelNotification.type, { token }));
                      if (value.message) progress.report({ message: value.message });
                    }),
                ),
              );
            } else if (value.kind === 'report') {
              const pct = value.percentage ?? last;
              report?.({ message: value.message, increment: Math.max(0, pct - last) });
              last = pct;
            } else {
              if (value.message) ext.output.appendLine(`${value.message}`);
              done?.();
              sub.dispose();
            }
          });
        });
      },
    };
  }

  async refreshStatus(): Promise<void> {
    if (!this.client) return;
    try {
      const tapes = (await this.client.sendRequest('workspace/executeCommand', { command: 'engram.tapes', arguments: [] })) as TapeRow[];
      this.sessions = sessionCount(tapes ?? []);
      this.setStatus({ phase: 'ready', sessions: this.sessions });
    } catch (err) {
      const msg = String((err as Error)?.message ?? err);
      this.setStatus(/no Engram store/i.test(msg) ? { phase: 'no-store' } : { phase: 'error', detail: msg });
    }
  }

  private requireClient(): LanguageClient {
    if (!this.client) {
      const msg = this.lookup && !this.lookup.ok ? this.lookup.message : 'Engram: the language server is not running. Run "Engram: Restart Server".';
      void vscode.window.showErrorMessage(msg);
      throw new Error(msg);
    }
    return this.client;
  }

  async exec<T>(command: string, args: unknown[]): Promise<T> {
    return (await this.requireClient().sendRequest('workspace/executeCommand', { command, arguments: args })) as T;
  }

  // ---------------------------------------------------------------- explain

  /** The lines to explain in an editor: the selection, else the evidence region under the cursor, else its line. */
  async targetLines(editor: vscode.TextEditor): Promise<[number, number]> {
    const sel = editor.selection;
    if (!sel.isEmpty) {
      return selectionLines({ start: { line: sel.start.line, character: sel.start.character }, end: { line: sel.end.line, character: sel.end.character } });
    }
    const line = sel.active.line;
    try {
      const lenses = (await this.requireClient().sendRequest('textDocument/codeLens', { textDocument: { uri: editor.document.uri.toString() } })) as LensLike[] | null;
      const region = regionAt(lenses ?? [], line);
      if (region) return region;
    } catch (err) {
      this.output.appendLine(`codeLens: ${err}`);
    }
    return [line, line];
  }

  async explainSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== 'file') {
      void vscode.window.showInformationMessage('Engram: open a file and select the code to explain.');
      return;
    }
    const [a, b] = await this.targetLines(editor);
    await this.explainAndShow(editor.document.uri.toString(), linesRange(a, b));
  }

  // ---------------------------------------------------------------- notes

  /** "Remember a note for the selection…" (the server's code action passes uri and range; the
   * palette uses the active selection): the kind from a quick pick, the text from an input box,
   * then the server's engram.remember, which anchors it to the buffer's text, saved or not. */
  async rememberSelection(uri?: string, range?: LspRange): Promise<string | undefined> {
    if (!uri || !range) {
      const editor = vscode.window.activeTextEditor;
      if (!editor || editor.document.uri.scheme !== 'file') {
        void vscode.window.showInformationMessage('Engram: open a file and select the code the note is about.');
        return undefined;
      }
      const sel = editor.selection;
      const [a, b] = selectionLines({
        start: { line: sel.start.line, character: sel.start.character },
        end: { line: sel.end.line, character: sel.end.character },
      });
      uri = editor.document.uri.toString();
      range = linesRange(a, b);
    }
    const kind = await vscode.window.showQuickPick(NOTE_KINDS, { placeHolder: 'Engram: what kind of note?' });
    if (!kind) return undefined;
    const text = await vscode.window.showInputBox({
      prompt: 'Engram note (its first line is its summary)',
      validateInput: (v) => (v.trim() ? undefined : 'A note needs some text'),
    });
    if (!text) return undefined;
    const res = await this.exec<{ id: string; merged_into?: string }>('engram.remember', [uri, range, text, kind]);
    void vscode.window.showInformationMessage(
      res.merged_into ? `Engram: reinforced note ${res.merged_into}` : `Engram: remembered note ${res.id}`);
    return res.id;
  }

  /** "Recall Notes…": a query, then the notes that answer it (those anchored near the active file
   * first) in a quick pick; picking one opens its anchor. */
  async recallNotes(): Promise<void> {
    const query = await vscode.window.showInputBox({ prompt: 'Engram: recall notes about…' });
    if (!query) return;
    const editor = vscode.window.activeTextEditor;
    const uri = editor && editor.document.uri.scheme === 'file' ? editor.document.uri.toString() : null;
    const rows = await this.exec<RecalledNote[]>('engram.recall', [query, uri]);
    if (!rows.length) {
      void vscode.window.showInformationMessage(`Engram: no note answers "${query}".`);
      return;
    }
    const pick = await vscode.window.showQuickPick(rows.map((r) => ({
      label: r.content.split('\n')[0],
      description: r.kind + (r.state && r.state !== 'intact' ? ` · ${r.state}` : ''),
      detail: r.location
        ? `${vscode.workspace.asRelativePath(vscode.Uri.parse(r.location.uri))}:${r.location.range.start.line + 1}`
        : `${r.id} · not anchored`,
      row: r,
    })), { placeHolder: 'Open the note\'s code' });
    const loc = pick?.row.location;
    if (!loc) return;
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(loc.uri));
    const at = new vscode.Position(loc.range.start.line, 0);
    await vscode.window.showTextDocument(doc, { selection: new vscode.Range(at, at) });
  }

  async explainAndShow(
    uri: string,
    range: LspRange,
    options?: Record<string, unknown>,
    next?: (command: string, args: unknown[]) => unknown,
  ): Promise<ExplainResponse | undefined> {
    const settings = serverSettings().window as { before: number; after: number };
    const before = Number(options?.before ?? settings.before);
    const after = Number(options?.after ?? settings.after);
    const key = `${uri}#${range.start.line}-${range.end.line}`;
    let state = this.explains.get(key);
    if (!state) {
      const [a, b] = selectionLines(range);
      const base = path.posix.basename(vscode.Uri.parse(uri).path);
      const docUri = vscode.Uri.from({ scheme: SCHEME, path: `/why ${base} ${a + 1}-${b + 1}.md`, query: `k=${this.explains.size + 1}` });
      state = { key, uri: docUri, sourceUri: uri, range, before, after };
      this.explains.set(key, state);
    } else {
      state.before = before;
      state.after = after;
    }
    const args = [uri, range, { ...(options ?? {}), before, after, links: 'reference' }];
    let res: ExplainResponse;
    try {
      res = (next ? await next('engram.explain', args) : await this.exec('engram.explain', args)) as ExplainResponse;
    } catch (err) {
      void vscode.window.showErrorMessage(`Engram: explain failed: ${(err as Error)?.message ?? err}`);
      return undefined;
    }
    if (!res || !res.result) {
      void vscode.window.showErrorMessage('Engram: the server returned no explain result.');
      return undefined;
    }
    state.response = res;
    // The server's rendering (the hover's and `engram explain --pretty`'s rules); this extension's own for an older server.
    const body = res.markdown ?? explainMarkdown(res, { docKey: key, before, after, language: fenceLanguage(res.result.span.file) });
    await this.show(state.uri, body);
    return res;
  }

  async widen(key?: string): Promise<void> {
    const active = vscode.window.activeTextEditor?.document.uri.toString();
    const state = key ? this.explains.get(key) : [...this.explains.values()].find((s) => s.uri.toString() === active);
    if (!state) {
      void vscode.window.showInformationMessage('Engram: run "Engram: Explain Selection" first.');
      return;
    }
    await this.explainAndShow(state.sourceUri, state.range, { before: state.before * 2 + 3, after: state.after * 2 + 3 });
  }

  async show(uri: vscode.Uri, body: string): Promise<void> {
    this.docs.set(uri, body);
    const doc = await vscode.workspace.openTextDocument(uri);
    if (doc.languageId !== 'markdown') await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    const source = vscode.window.activeTextEditor;
    const column = source && source.document.uri.scheme !== SCHEME ? vscode.ViewColumn.Beside : vscode.ViewColumn.Active;
    await vscode.window.showTextDocument(doc, { viewColumn: column, preview: false, preserveFocus: false });
  }

  // ---------------------------------------------------------------- transcripts

  async openView(res: ViewResponse, before: number, after: number): Promise<void> {
    const whole = after >= 100000;
    const name = whole ? `transcript ${res.session_id.slice(0, 8)}.md` : `transcript ${res.session_id.slice(0, 8)} @${res.at}.md`;
    const uri = vscode.Uri.from({ scheme: SCHEME, path: `/${name}` });
    await this.show(uri, viewMarkdown(res, { before, after }));
  }

  /** [tape, offset, before?, after?] from links; with no arguments, pick a fragment of the code under the cursor. */
  async showTranscript(args: unknown[]): Promise<void> {
    if (typeof args[0] === 'string') {
      const [tape, offset, before, after] = [args[0], Number(args[1] ?? 0), Number(args[2] ?? 10), Number(args[3] ?? 10)];
      const res = await this.exec<ViewResponse>('engram.view', [tape, offset, before, after]);
      await this.openView(res, before, after);
      return;
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor) return;
    let response: ExplainResponse | undefined;
    let fromHeading: [number, number] | undefined;
    if (editor.document.uri.scheme === SCHEME) {
      // In an explain document: the fragment whose heading is at or above the cursor.
      const state = [...this.explains.values()].find((s) => s.uri.toString() === editor.document.uri.toString());
      response = state?.response;
      const target = targetAt(response, editor.selection.active.line);
      if (target) return this.showTranscript([target[0], target[1], 10, 10]);
      for (let i = editor.selection.active.line; i >= 0 && response; i--) {
        const m = /^### (\d+)\.(\d+) /.exec(editor.document.lineAt(i).text);
        if (m) {
          fromHeading = [Number(m[1]) - 1, Number(m[2]) - 1];
          break;
        }
      }
    } else if (editor.document.uri.scheme === 'file') {
      const [a, b] = await this.targetLines(editor);
      response = await this.exec<ExplainResponse>('engram.explain', [editor.document.uri.toString(), linesRange(a, b), { brief: true }]);
    }
    const sessions = response?.result.sessions ?? [];
    if (fromHeading) {
      const f = sessions[fromHeading[0]]?.fragments[fromHeading[1]];
      if (f) return this.showTranscript([f.tape, f.offset, 10, 10]);
    }
    const items = sessions.flatMap((s, i) =>
      s.fragments.map((f) => ({
        label: `${i + 1}. ${harnessName(s.harness)} · ${touchLabel(f).replace(/`/g, '')}`,
        description: `#${f.offset} · confidence ${f.confidence.toFixed(2)}`,
        detail: `session ${s.session_id} · ${s.model ?? 'unknown model'} · ${(f.timestamp ?? '').slice(0, 16).replace('T', ' ')}`,
        fragment: f,
      })),
    );
    if (items.length === 0) {
      void vscode.window.showInformationMessage('Engram: no recorded session touched this code.');
      return;
    }
    const pick = items.length === 1 ? items[0] : await vscode.window.showQuickPick(items, { placeHolder: 'Transcript at which touch?' });
    if (pick) await this.showTranscript([pick.fragment.tape, pick.fragment.offset, 10, 10]);
  }

  // ---------------------------------------------------------------- index

  async ingest(): Promise<void> {
    // Progress arrives from the server as work-done progress (see notificationProgress).
    const res = await this.withBusy(() => this.exec<{ cancelled: boolean; summary: string }>('engram.ingest', []));
    void vscode.window.showInformationMessage(res.cancelled ? `Engram: ingest cancelled. ${res.summary}` : `Engram: ${res.summary}`);
    await this.refreshStatus();
  }

  async reindex(): Promise<void> {
    await this.withBusy(() =>
      vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Engram: rebuilding the index' }, () =>
        this.exec('engram.reindex', []),
      ),
    );
    await this.refreshStatus();
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

let ext: EngramExtension | undefined;

export async function activate(context: vscode.ExtensionContext, deps: Deps = {}): Promise<EngramExtension> {
  ext = new EngramExtension(context, deps);
  context.subscriptions.push(ext);
  await ext.start();
  return ext;
}

export async function deactivate(): Promise<void> {
  const e = ext;
  ext = undefined;
  await e?.stop();
  e?.dispose();
}
