// Markdown for people: explain results, transcript windows, the status bar. Pure (no `vscode`).

export interface TapeEvent {
  offset: number;
  kind: string;
  ts?: string;
  agent?: string;
  [key: string]: unknown;
}

export interface Fragment {
  tape: string;
  offset: number;
  kind: string;
  file?: string | null;
  lines?: [number, number] | null;
  confidence: number;
  via: string;
  timestamp?: string | null;
  window?: TapeEvent[] | null;
}

export interface ExplainSession {
  tape: string;
  session_id: string;
  harness: string;
  model?: string | null;
  touches: number;
  last_touch?: string | null;
  fragments: Fragment[];
}

export interface ExplainDoc {
  version?: number;
  span: { file: string; start: number; end: number };
  sessions: ExplainSession[];
  truncated?: boolean | { left_out?: Record<string, number>; next?: string };
  lineage?: { edges_followed?: number };
}

/** What the server's `engram.explain` command returns. */
export interface ExplainResponse {
  result: ExplainDoc;
  /** The explain document rendered by the server (engram.query.render: the rules of the hover and `engram explain --pretty`). */
  markdown?: string;
  /** Lines of `markdown` (0-based) that point at a transcript event: [line, tape, offset]. */
  targets?: [number, string, number][];
  text?: string;
}

/** The transcript event the explain document points at on `line` or the nearest line above it. */
export function targetAt(res: ExplainResponse | undefined, line: number): [string, number] | undefined {
  let found: [string, number] | undefined;
  for (const [l, tape, offset] of res?.targets ?? []) {
    if (l <= line) found = [tape, offset];
  }
  return found;
}

/** What the server's `engram.view` command returns. */
export interface ViewResponse {
  tape: string;
  session_id: string;
  at: number;
  events: TapeEvent[];
  markdown?: string;
}

export interface TapeRow {
  id: string;
  session_id: string;
  harness?: string;
  [key: string]: unknown;
}

const HARNESS_NAMES: Record<string, string> = {
  'claude-code': 'Claude Code',
  codex: 'Codex',
  editor: 'editor',
  raw: 'text',
  record: 'recorded command',
};

export function harnessName(h: string | undefined | null): string {
  if (!h) return 'unknown harness';
  return HARNESS_NAMES[h] ?? h;
}

/** A command URI: `command:id?<json args>`. */
export function commandUri(command: string, args: unknown[]): string {
  return `command:${command}?${encodeURIComponent(JSON.stringify(args))}`;
}

/**
 * Markdown reference links to commands: the text reads `[widen windows][1]` and the long command URIs
 * are defined once at the end of the document (`[1]: command:...`), out of the reader's way.
 */
export class CommandLinks {
  private readonly defs: string[] = [];
  private readonly seen = new Map<string, number>();

  link(label: string, command: string, args: unknown[]): string {
    const uri = commandUri(command, args);
    let n = this.seen.get(uri);
    if (n === undefined) {
      n = this.defs.length + 1;
      this.seen.set(uri, n);
      this.defs.push(`[${n}]: ${uri}`);
    }
    return `[${label}][${n}]`;
  }

  definitions(): string[] {
    return this.defs.length ? ['', '<!-- links -->', ...this.defs] : [];
  }
}

/** `[label][ref]` links of a document resolved through its `[ref]: command:...` definitions. */
export function findCommandLinks(lines: string[]): { line: number; start: number; label: string; command: string; args: unknown[] }[] {
  const defs = new Map<string, string>();
  for (const l of lines) {
    const m = /^\[([^\]]+)\]: (command:\S+)$/.exec(l);
    if (m) defs.set(m[1], m[2]);
  }
  const out: { line: number; start: number; label: string; command: string; args: unknown[] }[] = [];
  lines.forEach((text, i) => {
    for (const m of text.matchAll(/\[([^\]]+)\]\[([^\]]+)\]/g)) {
      const uri = defs.get(m[2]);
      if (!uri) continue;
      const q = uri.indexOf('?');
      const command = uri.slice('command:'.length, q < 0 ? undefined : q);
      let args: unknown[] = [];
      try {
        args = q < 0 ? [] : JSON.parse(decodeURIComponent(uri.slice(q + 1)));
      } catch {
        args = [];
      }
      out.push({ line: i, start: (m.index ?? 0) + 1, label: m[1], command, args });
    }
  });
  return out;
}

export function when(ts: string | null | undefined): string {
  if (!ts) return 'unknown time';
  const m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(ts);
  return m ? `${m[1]} ${m[2]} UTC` : ts;
}

function clock(ts: string | null | undefined): string {
  const m = /T(\d{2}:\d{2}:\d{2})/.exec(ts ?? '');
  return m ? m[1] : '';
}

function plural(n: number, word: string, many = word + 's'): string {
  return `${n} ${n === 1 ? word : many}`;
}

function isObjectRef(v: unknown): v is { $obj: string; len: number } {
  return typeof v === 'object' && v !== null && '$obj' in v;
}

/** One line of text: the first lines joined, cut at `limit` characters. */
export function oneLine(v: unknown, limit = 140): string {
  if (isObjectRef(v)) return `<${v.len} characters in object ${String(v.$obj).slice(0, 12)}>`;
  const text = typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v);
  const joined = text
    .replace(/\r/g, '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(0, 3)
    .join(' ⏎ ');
  return joined.length <= limit ? joined : joined.slice(0, limit - 1) + '…';
}

function rangeText(r: unknown): string {
  if (!Array.isArray(r) || r.length < 2) return '?';
  const [a, b] = r as number[];
  return b >= a ? `${a}–${b}` : `∅ before ${a}`;
}

function toolArg(input: unknown): string {
  if (typeof input !== 'object' || input === null) return '';
  const i = input as Record<string, unknown>;
  const arg = i.command ?? i.file_path ?? i.path ?? i.pattern ?? i.description ?? i.query ?? '';
  return oneLine(arg, 100);
}

/** A compact one-line description of an event (for explain windows). */
export function eventSummary(ev: TapeEvent, withOutput = true): string {
  const who = ev.agent ? ` [${ev.agent}]` : '';
  switch (ev.kind) {
    case 'meta':
      return `**session start**${who} ${harnessName(ev.harness as string)} · ${ev.model ?? 'unknown model'}`;
    case 'msg.in':
      return `**user**${who}: ${oneLine(ev.text)}`;
    case 'msg.out':
      if (ev.block === 'thinking') return `**thinking**${who}: ${oneLine(ev.text)}`;
      return `**assistant**${who}: ${oneLine(ev.text)}`;
    case 'tool.call': {
      let arg = toolArg(ev.input);
      if (arg && !arg.includes('`')) arg = '`' + arg + '`';
      return `**tool call**${who} \`${ev.name ?? '?'}\`${arg ? ' ' + arg : ''}`;
    }
    case 'tool.result': {
      const status = ev.is_error ? 'error' : 'ok';
      const code = ev.exit_code != null ? ` exit ${ev.exit_code}` : '';
      const out = ev.stdout && withOutput ? `: ${oneLine(ev.stdout, 100)}` : '';
      return `**result**${who} ${ev.name ? '`' + ev.name + '` ' : ''}${status}${code}${out}`;
    }
    case 'code.read':
      return `**read**${who} \`${ev.file}\` lines ${rangeText(ev.range)}`;
    case 'code.edit':
      return `**edit**${who} ${ev.op ?? ''} \`${ev.file}\` ${rangeText(ev.before_range)} → ${rangeText(ev.after_range)}` +
        (ev.to_file ? ` (moved to \`${ev.to_file}\`)` : '');
    case 'compact':
      return `**compaction**${who} (${ev.trigger ?? '?'})`;
    case 'span.link':
      return `**link**${who} ${oneLine(ev.note)}`;
    default:
      return `**${ev.kind}**${who}`;
  }
}

/** What a touch did to the code, in words. */
export function touchLabel(f: Fragment): string {
  const where = f.file ? ` \`${f.file}\`${f.lines ? ` lines ${rangeText(f.lines)}` : ''}` : '';
  switch (f.kind) {
    case 'code.edit':
      return `wrote${where}`;
    case 'code.read':
      return `read${where}`;
    case 'tool.call': {
      const call = (f.window ?? []).find((e) => e.offset === f.offset);
      return call && call.name ? `a \`${call.name}\` call held it` : 'a tool call held it';
    }
    case 'tool.result':
      return 'saw it in tool output';
    case 'msg.in':
      return 'the user quoted it';
    case 'msg.out':
      return 'discussed it';
    default:
      return f.kind + where;
  }
}

export interface ExplainRenderOptions {
  /** Key of the virtual document, for the "widen" link. */
  docKey: string;
  before: number;
  after: number;
  /** Language id for the fenced code block of the explained text. */
  language?: string;
  maxCodeLines?: number;
}

/** The explain document: sessions in rank order, each touch with its transcript window. */
export function explainMarkdown(res: ExplainResponse, o: ExplainRenderOptions): string {
  const doc = res.result;
  const { file, start, end } = doc.span;
  const out: string[] = [];
  const links = new CommandLinks();
  const lines = start === end ? `line ${start}` : `lines ${start}–${end}`;
  out.push(`# Why does \`${file}\` ${lines} exist?`, '');
  const n = doc.sessions.length;
  out.push(
    n === 0
      ? 'No recorded session wrote, read or discussed this code.'
      : `**${plural(n, 'session')}** wrote, read or discussed this code${doc.truncated ? ' (only the first shown)' : ''}. ` +
        `Transcript windows: ${o.before} events before and ${o.after} after each touch · ` +
        links.link('widen windows', 'engram.widenWindows', [o.docKey]),
    '',
  );
  if (res.text) {
    const code = res.text.replace(/\n$/, '').split('\n');
    const max = o.maxCodeLines ?? 12;
    out.push('```' + (o.language ?? ''), ...code.slice(0, max), ...(code.length > max ? [`… ${code.length - max} more lines`] : []), '```', '');
  }
  doc.sessions.forEach((s, i) => {
    const rank = i + 1;
    out.push('---', '');
    out.push(`## ${rank}. ${harnessName(s.harness)} · ${when(s.last_touch)} · ${s.model || 'unknown model'} · ${plural(s.touches, 'touch', 'touches')}`, '');
    out.push(`Session \`${s.session_id}\` · tape \`${s.tape.slice(0, 12)}\` · ` + links.link('whole transcript', 'engram.showTranscript', [s.tape, 0, 0, 100000]), '');
    s.fragments.forEach((f, j) => {
      const conf = typeof f.confidence === 'number' ? f.confidence.toFixed(2) : String(f.confidence);
      out.push(
        `### ${rank}.${j + 1} ${touchLabel(f)} · ${when(f.timestamp)} · confidence ${conf} (${f.via}) · ` +
          links.link(`open transcript at #${f.offset}`, 'engram.showTranscript', [f.tape, f.offset, 10, 10]),
        '',
      );
      for (const ev of f.window ?? []) {
        const mark = ev.offset === f.offset ? '▶ ' : '';
        out.push(`- ${mark}\`#${ev.offset}\` ${clock(ev.ts)} ${eventSummary(ev)}`);
      }
      if ((f.window ?? []).length) out.push('');
    });
  });
  if (doc.lineage && doc.lineage.edges_followed) {
    out.push('---', '', `Lineage: followed ${plural(doc.lineage.edges_followed, 'edge')} from earlier versions of this code.`, '');
  }
  out.push(...links.definitions());
  return out.join('\n').replace(/\n{3,}/g, '\n\n') + '\n';
}

function fence(text: string, maxLines: number, lang = ''): string[] {
  const ls = text.replace(/\r/g, '').replace(/\n$/, '').split('\n');
  const tick = text.includes('```') ? '~~~~' : '```';
  return [tick + lang, ...ls.slice(0, maxLines), ...(ls.length > maxLines ? [`… ${ls.length - maxLines} more lines`] : []), tick];
}

function textOf(v: unknown): string {
  if (isObjectRef(v)) return `<${v.len} characters in object ${String(v.$obj).slice(0, 12)}>`;
  return typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v, null, 2);
}

function quote(text: string, maxLines: number): string[] {
  const ls = text.replace(/\r/g, '').replace(/\n$/, '').split('\n');
  const shown = ls.slice(0, maxLines).map((l) => (l.trim() ? '> ' + l : '>'));
  return ls.length > maxLines ? [...shown, `> … ${ls.length - maxLines} more lines`] : shown;
}

/** One event in full (for transcript windows). */
export function eventMarkdown(ev: TapeEvent, at: number): string[] {
  const mark = ev.offset === at ? '▶ ' : '';
  const who = ev.agent ? ` [${ev.agent}]` : '';
  const title =
    ev.kind === 'msg.in' ? 'user' + who
    : ev.kind === 'msg.out' ? (ev.block === 'thinking' ? 'thinking' : 'assistant') + who
    : eventSummary(ev, false).replace(/\*\*/g, '');
  const head = `#### ${mark}#${ev.offset} · ${clock(ev.ts)} · ${title}`;
  const out = [head, ''];
  switch (ev.kind) {
    case 'msg.in':
    case 'msg.out':
      out.push(...quote(textOf(ev.text), 80));
      break;
    case 'tool.call': {
      const input = (ev.input ?? {}) as Record<string, unknown>;
      const body = input.content ?? input.new_string ?? input.command ?? input.patch ?? null;
      if (body != null) out.push(...fence(textOf(body), 40));
      else if (Object.keys(input).length) out.push(...fence(JSON.stringify(input, null, 2), 20, 'json'));
      break;
    }
    case 'tool.result':
      if (ev.stdout) out.push(...fence(textOf(ev.stdout), 30));
      if (ev.stderr) out.push('stderr:', ...fence(textOf(ev.stderr), 15));
      break;
    case 'code.read':
      if (ev.text) out.push(...fence(textOf(ev.text), 30));
      break;
    case 'code.edit': {
      const before = ev.before_text ? textOf(ev.before_text).replace(/\n$/, '').split('\n').map((l) => '-' + l) : [];
      const after = ev.after_text ? textOf(ev.after_text).replace(/\n$/, '').split('\n').map((l) => '+' + l) : [];
      if (before.length || after.length) out.push(...fence([...before, ...after].join('\n'), 50, 'diff'));
      break;
    }
    default:
      break;
  }
  out.push('');
  return out;
}

export interface ViewRenderOptions {
  before: number;
  after: number;
}

/** A transcript window: the events around an offset, in full, with links to move the window. */
export function viewMarkdown(v: ViewResponse, o: ViewRenderOptions): string {
  const out: string[] = [];
  const first = v.events.length ? v.events[0].offset : v.at;
  const last = v.events.length ? v.events[v.events.length - 1].offset : v.at;
  const whole = o.after >= 100000;
  out.push(whole ? `# Transcript of session \`${v.session_id}\`` : `# Session \`${v.session_id}\` around event #${v.at}`, '');
  const links = new CommandLinks();
  const nav = [`Tape \`${v.tape.slice(0, 12)}\` · events #${first}–#${last}`];
  if (!whole) {
    if (first > 0) nav.push(links.link('earlier', 'engram.showTranscript', [v.tape, first, 20, 0]));
    nav.push(links.link('later', 'engram.showTranscript', [v.tape, last, 0, 20]));
    nav.push(links.link('wider', 'engram.showTranscript', [v.tape, v.at, o.before * 2 + 5, o.after * 2 + 5]));
    nav.push(links.link('whole transcript', 'engram.showTranscript', [v.tape, 0, 0, 100000]));
  }
  out.push(nav.join(' · '), '', '---', '');
  for (const ev of v.events) out.push(...eventMarkdown(ev, whole ? -1 : v.at));
  out.push(...links.definitions());
  return out.join('\n').replace(/\n{3,}/g, '\n\n') + '\n';
}

export type Phase = 'starting' | 'missing' | 'no-store' | 'indexing' | 'ready' | 'stopped' | 'error';

export interface StatusState {
  phase: Phase;
  sessions?: number;
  detail?: string;
}

/** The status bar item's text (with codicons) and tooltip. */
export function statusText(s: StatusState): { text: string; tooltip: string } {
  switch (s.phase) {
    case 'starting':
      return { text: '$(loading~spin) Engram', tooltip: 'Engram: starting the language server' };
    case 'missing':
      return { text: '$(error) Engram: no server', tooltip: s.detail ?? 'Engram: the language server was not found' };
    case 'no-store':
      return {
        text: '$(circle-slash) Engram: not initialised',
        tooltip: 'No Engram store in this workspace. Run `engram init` and `engram ingest` in the repository, then "Engram: Reindex".',
      };
    case 'indexing':
      return { text: '$(sync~spin) Engram: indexing', tooltip: s.detail ?? 'Engram: capturing sessions and updating the index' };
    case 'ready': {
      const n = s.sessions ?? 0;
      return { text: `$(history) Engram: ${plural(n, 'session')}`, tooltip: `Engram: ${plural(n, 'agent session')} captured in this workspace. Click to ingest new sessions.` };
    }
    case 'stopped':
      return { text: '$(debug-stop) Engram: stopped', tooltip: 'Engram: the language server is not running. Run "Engram: Restart Server".' };
    case 'error':
    default:
      return { text: '$(warning) Engram', tooltip: s.detail ?? 'Engram: error' };
  }
}

/** Distinct harness sessions among the tapes (a grown session has several segment tapes). */
export function sessionCount(tapes: TapeRow[]): number {
  return new Set(tapes.map((t) => t.session_id)).size;
}

export interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

/** Whole lines `first`..`last` (0-based, inclusive) as an LSP range ending at the start of the next line. */
export function linesRange(first: number, last: number): LspRange {
  return { start: { line: first, character: 0 }, end: { line: last + 1, character: 0 } };
}

/** The lines a selection covers: a selection ending at column 0 of a later line leaves that line out. */
export function selectionLines(sel: LspRange): [number, number] {
  let last = sel.end.line;
  if (sel.end.character === 0 && last > sel.start.line) last -= 1;
  return [Math.min(sel.start.line, last), Math.max(sel.start.line, last)];
}

export interface LensLike {
  range: LspRange;
  data?: unknown;
  command?: { arguments?: unknown[] };
}

/** The evidence region under `line`, from the server's code lenses (their data or resolved arguments). */
export function regionAt(lenses: LensLike[], line: number): [number, number] | undefined {
  for (const l of lenses) {
    const d = l.data as { start?: number; end?: number } | undefined;
    if (d && typeof d.start === 'number' && typeof d.end === 'number' && d.start <= line && line <= d.end) return [d.start, d.end];
    const rng = l.command?.arguments?.[1] as LspRange | undefined;
    if (rng && rng.start && rng.end) {
      const [a, b] = selectionLines(rng);
      if (a <= line && line <= b) return [a, b];
    }
  }
  return undefined;
}

const LANGUAGES: Record<string, string> = {
  py: 'python', ts: 'typescript', tsx: 'tsx', js: 'javascript', jsx: 'jsx', rs: 'rust', go: 'go', rb: 'ruby',
  ex: 'elixir', exs: 'elixir', java: 'java', kt: 'kotlin', c: 'c', h: 'c', cpp: 'cpp', cc: 'cpp', hpp: 'cpp',
  cs: 'csharp', sh: 'bash', lua: 'lua', md: 'markdown', json: 'json', yml: 'yaml', yaml: 'yaml', toml: 'toml',
  html: 'html', css: 'css', sql: 'sql', swift: 'swift', php: 'php', scala: 'scala', zig: 'zig',
};

/** A fenced-code language for a file name. */
export function fenceLanguage(file: string): string {
  const m = /\.([A-Za-z0-9]+)$/.exec(file);
  return (m && LANGUAGES[m[1].toLowerCase()]) || '';
}

/**
 * Markdown with the HTML-looking text of transcripts shown as text: `<task-notification>` in a quoted
 * message would otherwise be taken for an HTML tag and dropped by VS Code's renderer. Code spans and
 * fenced blocks are left alone (their contents are literal already).
 */
export function escapeHtmlOutsideCode(md: string): string {
  let fenced = false;
  return md
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return line;
      }
      if (fenced) return line;
      const quote = /^\s*(?:>\s?)*/.exec(line)?.[0] ?? ''; // blockquote markers stay markdown
      const rest = line
        .slice(quote.length)
        .split(/(`[^`]*`)/)
        .map((part, i) => (i % 2 === 1 ? part : part.replace(/</g, '&lt;').replace(/>/g, '&gt;')))
        .join('');
      return quote + rest;
    })
    .join('\n');
}
