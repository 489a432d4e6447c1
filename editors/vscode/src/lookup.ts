// Finding the language server. Pure: no `vscode` import, so `node --test` covers every rule.
//
// Lookup order (the first that applies wins; a setting that is set but broken is an error, not a
// silent fall-through, so a typo never starts some other Engram):
//   1. setting `engram.path`        → `<path> lsp`
//   2. setting `engram.pythonPath`  → `<python> -m engram_server.entry lsp`
//   3. `engram` on PATH             → `engram lsp`
//   4. the Python extension's active interpreter, when it can import engram_server
//                                   → `<python> -m engram_server.entry lsp`
import * as path from 'path';

export type Source = 'engram.path' | 'engram.pythonPath' | 'PATH' | 'python-extension';

export interface ServerCommand {
  command: string;
  args: string[];
  source: Source;
}

export interface LookupInputs {
  /** The `engram.path` setting. */
  enginePath?: string;
  /** The `engram.pythonPath` setting. */
  pythonPath?: string;
  /** PATH of the extension host. */
  envPath?: string;
  platform?: string;
  /** PATHEXT on Windows. */
  pathExt?: string;
  /** Is this an executable regular file? */
  isExecutable: (file: string) => boolean;
  /** The Python extension's active interpreter, when that extension is installed. */
  pythonExtension?: () => Promise<string | undefined>;
  /** Can this interpreter import engram_server? */
  hasEngram?: (python: string) => Promise<boolean>;
}

export type Lookup =
  | { ok: true; server: ServerCommand; tried: string[] }
  | { ok: false; message: string; tried: string[] };

export const LSP_MODULE_ARGS = ['-m', 'engram_server.entry', 'lsp'];

export const INSTALL_HINT =
  'Install Engram into a Python environment (`pip install engram`, or `pip install .` in an Engram checkout) ' +
  'so that `engram` is on PATH, or set `engram.path` to the engram executable, or `engram.pythonPath` to a ' +
  'Python interpreter that has Engram installed; then run "Engram: Restart Server".';

function hasSeparator(p: string): boolean {
  return p.includes('/') || p.includes('\\');
}

/** The first executable called `name` on `envPath` (like `which`); a name with a separator is checked as is. */
export function findExecutable(name: string, inputs: Pick<LookupInputs, 'envPath' | 'platform' | 'pathExt' | 'isExecutable'>): string | undefined {
  const win = (inputs.platform ?? process.platform) === 'win32';
  const exts = win ? (inputs.pathExt ?? '.EXE;.CMD;.BAT;.COM').split(';').filter(Boolean) : [''];
  const candidates = (base: string) => (win && path.extname(base) === '' ? [base, ...exts.map((e) => base + e.toLowerCase()), ...exts.map((e) => base + e)] : [base]);
  if (hasSeparator(name)) {
    return candidates(name).find((c) => inputs.isExecutable(c));
  }
  const sep = win ? ';' : ':';
  for (const dir of (inputs.envPath ?? '').split(sep)) {
    if (!dir) continue;
    for (const c of candidates(path.join(dir, name))) {
      if (inputs.isExecutable(c)) return c;
    }
  }
  return undefined;
}

export async function findServer(inputs: LookupInputs): Promise<Lookup> {
  const tried: string[] = [];
  const enginePath = (inputs.enginePath ?? '').trim();
  if (enginePath) {
    const exe = findExecutable(enginePath, inputs);
    if (!exe) {
      return {
        ok: false,
        tried: [`engram.path = ${enginePath}: not an executable`],
        message: `Engram: the setting engram.path is "${enginePath}", which is not an executable file. ` +
          'Point it at the `engram` executable (e.g. `.venv/bin/engram`), or clear it to look on PATH.',
      };
    }
    return { ok: true, tried: [`engram.path = ${exe}`], server: { command: exe, args: ['lsp'], source: 'engram.path' } };
  }
  tried.push('engram.path (not set)');

  const pythonPath = (inputs.pythonPath ?? '').trim();
  if (pythonPath) {
    const exe = findExecutable(pythonPath, inputs);
    if (!exe) {
      return {
        ok: false,
        tried: [...tried, `engram.pythonPath = ${pythonPath}: not an executable`],
        message: `Engram: the setting engram.pythonPath is "${pythonPath}", which is not an executable file. ` +
          'Point it at a Python interpreter that has Engram installed, or clear it.',
      };
    }
    if (inputs.hasEngram && !(await inputs.hasEngram(exe))) {
      return {
        ok: false,
        tried: [...tried, `engram.pythonPath = ${exe}: cannot import engram_server`],
        message: `Engram: ${exe} (setting engram.pythonPath) cannot import engram_server. ` +
          `Install Engram into it (\`${exe} -m pip install engram\`, or \`pip install .\` in an Engram checkout), or clear the setting.`,
      };
    }
    return { ok: true, tried: [...tried, `engram.pythonPath = ${exe}`], server: { command: exe, args: [...LSP_MODULE_ARGS], source: 'engram.pythonPath' } };
  }
  tried.push('engram.pythonPath (not set)');

  const onPath = findExecutable('engram', inputs);
  if (onPath) {
    return { ok: true, tried: [...tried, `PATH: ${onPath}`], server: { command: onPath, args: ['lsp'], source: 'PATH' } };
  }
  tried.push('engram on PATH (not found)');

  if (inputs.pythonExtension) {
    let python: string | undefined;
    try {
      python = await inputs.pythonExtension();
    } catch {
      python = undefined;
    }
    if (python) {
      if (!inputs.hasEngram || (await inputs.hasEngram(python))) {
        return { ok: true, tried: [...tried, `Python extension: ${python}`], server: { command: python, args: [...LSP_MODULE_ARGS], source: 'python-extension' } };
      }
      tried.push(`Python extension interpreter ${python} (cannot import engram_server)`);
    } else {
      tried.push('Python extension (no active interpreter)');
    }
  } else {
    tried.push('Python extension (not installed)');
  }
  return {
    ok: false,
    tried,
    message: 'Engram: cannot find the `engram` language server. ' + INSTALL_HINT + ' Tried: ' + tried.join('; ') + '.',
  };
}
