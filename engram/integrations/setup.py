"""`engram setup claude|codex`: add Engram's MCP server and automatic capture to an agent, and
`engram setup --remove`: take exactly that back.

The configurations name the engram that ran `setup` by its absolute path (`engram_command`): a
hook calling a bare `engram` that is not on the agent's PATH (a virtual environment not
activated) fails without a word, since a hook never fails the agent. Existing configuration is
merged, never overwritten: the user's own servers and hooks stay as they are, and the file as it
was before Engram first touched it is kept as `<file>.engram-backup`. Engram's entries are told
apart by what they run (`runs_engram`), so a second setup updates them in place and `--remove`
finds them, whichever engram wrote them. With `dry_run`, nothing is written and the planned
files are returned.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.errors import BadInput

ENTRY_MODULE = "engram_server.entry"  # what `python -m` runs as the full `engram` command
PROGRAM_NAMES = ("engram", "engram.exe")
EDIT_TOOLS = "Edit|MultiEdit|Write|NotebookEdit"
# Capture after edits and at the end; the notes before an edit and at session start
# (engram.integrations.context: it gives up after its own deadline, well inside these timeouts).
CLAUDE_HOOKS = {
    "PostToolUse": {"matcher": EDIT_TOOLS, "timeout": 10},
    "PreCompact": {"timeout": 30},
    "SessionEnd": {"timeout": 30},
    "PreToolUse": {"matcher": EDIT_TOOLS, "timeout": 5},
    "SessionStart": {"timeout": 10},
}
# Codex (hooks.json beside config.toml, same format as Claude Code's): the session-start brief. Its
# PreToolUse refuses additionalContext (openai/codex#19385), so there are no notes before an edit.
CODEX_HOOKS = {"SessionStart": {"timeout": 10}}
BACKUP_SUFFIX = ".engram-backup"
VERIFY_TIMEOUT_S = 30


@dataclass
class Planned:
    """A file setup (or remove) writes: its new text (None: the file goes), whether that changes
    it, and what becomes of the backup."""

    path: Path
    text: str | None
    changed: bool
    backup: bool = False  # keep the current file as <file>.engram-backup first (it holds nothing of Engram's)
    drop_backup: bool = False  # the backup has been given back (or is obsolete): delete it
    note: str | None = None  # what a person should know about this file
    #: the file is not there when planned: writing it makes it (people read "created", not "updated")
    created: bool = field(init=False)

    def __post_init__(self) -> None:
        self.created = self.text is not None and not self.path.exists()


# ---------------------------------------------------------------- which engram


def engram_command() -> list[str]:
    """The command that runs the engram running now, by absolute path: the `engram` script that
    was started (found on PATH when started by name), or this Python with `-m engram_server.entry`
    when engram runs as a module. Symbolic links are kept, not resolved: a link made by pipx or a
    package manager stays valid across upgrades, the file it points to may not."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if os.path.basename(argv0) in PROGRAM_NAMES:
        found = argv0 if os.sep in argv0 else shutil.which(argv0)
        if found and os.path.isfile(found):
            return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", ENTRY_MODULE]


def runs_engram(argv: Sequence[str]) -> bool:
    """Whether a configured command line (without its subcommand) runs an engram: a program named
    `engram` anywhere, or a Python running engram's entry module."""
    if not argv:
        return False
    if os.path.basename(argv[0]) in PROGRAM_NAMES:
        return len(argv) == 1
    return len(argv) == 3 and argv[1] == "-m" and argv[2] in (ENTRY_MODULE, "engram.cli")


def engram_invocation(argv: Sequence[str], subcommand: str) -> list[str] | None:
    """The engram command of `argv` when it runs engram's `subcommand` (`mcp`, `hook`), else None."""
    argv = list(argv)
    if len(argv) >= 2 and argv[-1] == subcommand and runs_engram(argv[:-1]):
        return argv[:-1]
    return None


def verify(command: Sequence[str]) -> tuple[bool, str]:
    """Run `command --version` as an agent would start it: (whether it ran, its answer or why not)."""
    shown = shlex.join(command)
    program = command[0] if os.sep in command[0] else shutil.which(command[0])
    if program is None:
        return False, f"`{command[0]}` is not on PATH"
    if not os.path.isfile(program) or not os.access(program, os.X_OK):
        return False, f"{program} does not exist or is not executable"
    try:
        proc = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`{shown} --version` could not run ({exc})"
    answer = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    if proc.returncode != 0 or not answer or not answer[0].startswith("engram "):
        why = answer[-1] if answer else f"exit status {proc.returncode}"
        return False, f"`{shown} --version` failed: {why}"
    return True, answer[0]


def path_note(command: Sequence[str]) -> str | None:
    """What to tell a person about `engram` on their PATH when the configurations run `command`."""
    on_path = shutil.which("engram")
    configured = command[0] if len(command) == 1 else None
    if on_path is None:
        where = (f"its directory {os.path.dirname(configured)}" if configured
                 else f"an engram script (this one runs as `{shlex.join(command)}`)")
        return ("`engram` is not on PATH: the agents' configurations name it by its absolute path, so they work "
                f"anyway; to type `engram` yourself, activate its virtual environment or add {where} to PATH")
    if configured and os.path.abspath(on_path) != configured:
        return f"`engram` on PATH is {on_path}, not the one the configurations run ({configured})"
    return None


# ---------------------------------------------------------------- files


def _load_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as exc:
        raise BadInput(f"{path} is not valid JSON ({exc}); fix it first, Engram will not overwrite it") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object")
    return data


def _load_toml(path: Path) -> tuple[str, dict[str, Any]]:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path} is not valid TOML ({exc}); fix it first, Engram will not overwrite it") from exc


def _backup(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def _write(plan: Planned) -> None:
    if plan.changed:
        if plan.text is None:
            plan.path.unlink(missing_ok=True)
            _remove_if_empty(plan.path.parent)
        else:
            plan.path.parent.mkdir(parents=True, exist_ok=True)
            if plan.backup and plan.path.exists():
                shutil.copy2(plan.path, _backup(plan.path))
            tmp = plan.path.with_name(f".{plan.path.name}.engram-tmp")
            tmp.write_text(plan.text, encoding="utf-8")
            os.replace(tmp, plan.path)
    if plan.drop_backup:
        _backup(plan.path).unlink(missing_ok=True)


def _remove_if_empty(folder: Path) -> None:
    """A `.claude/` (or OpenCode's `.opencode/plugins/` and `.opencode/`) left empty by `--remove`
    goes: setup created it."""
    folders = [folder] if folder.name == ".claude" else \
        [folder, folder.parent] if folder.name == "plugins" and folder.parent.name == ".opencode" else []
    for f in folders:
        try:
            f.rmdir()
        except OSError:
            return


def _json_plan(path: Path, data: dict[str, Any], before: dict[str, Any], had_engram: bool) -> Planned:
    changed = data != before or not path.exists()
    return Planned(path, json.dumps(data, indent=2) + "\n", changed, backup=changed and not had_engram)


def _removal_plan(path: Path, text: str | None, same: Callable[[str], bool]) -> Planned:
    """The plan for a file once Engram's entries are out of it (`text`, None when nothing is left):
    the backup, byte for byte, when it says the same (`same`), so the user's file comes back as
    they wrote it."""
    backup = _backup(path)
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if backup.exists():
        old = backup.read_text(encoding="utf-8")
        if same(old):
            return Planned(path, old, old != current, drop_backup=True, note=f"restored from {backup.name}")
    if text is None:
        return Planned(path, None, current is not None, drop_backup=backup.exists())
    note = f"{backup.name} left as it was: the file changed since" if backup.exists() else None
    return Planned(path, text, text != current, note=note)


def _strip_empty(value: Any) -> Any:
    """`value` without empty objects and lists: what removing Engram's entries may leave behind."""
    if isinstance(value, dict):
        out = {k: _strip_empty(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_strip_empty(v) for v in value]
    return value


# ---------------------------------------------------------------- Claude Code


def claude_files(root: Path) -> tuple[Path, Path]:
    """(.mcp.json, .claude/settings.json) of the repository at `root`: what setup writes."""
    return root / ".mcp.json", root / ".claude" / "settings.json"


def _hook_commands(settings: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(event, group, hook) for every command hook in a Claude Code settings document."""
    out = []
    hooks = settings.get("hooks")
    for event, groups in (hooks.items() if isinstance(hooks, dict) else []):
        for group in groups if isinstance(groups, list) else []:
            for hook in group.get("hooks", []) if isinstance(group, dict) else []:
                if isinstance(hook, dict) and isinstance(hook.get("command"), str):
                    out.append((event, group, hook))
    return out


def hook_engram(command: str) -> list[str] | None:
    """The engram a hook's command line runs as `engram hook`, else None."""
    try:
        return engram_invocation(shlex.split(command), "hook")
    except ValueError:
        return None


def put_engram_server(path: Path, servers: dict[str, Any], wanted: dict[str, Any],
                      runs_engram: Callable[[Any], list[str] | None] | None = None) -> tuple[bool, str | None]:
    """Engram's entry in an MCP server table, merged into an existing Engram entry (the user's own
    keys kept); an entry named engram that runs another program is left alone and named in the note.
    Returns (an entry named engram was there, the note). One rule for every agent's file."""
    present = servers.get("engram")
    ours = (runs_engram or server_engram)(present) is not None if present is not None else True
    if not ours:
        return True, f"{path} has an MCP server named engram that runs something else: left as it is"
    servers["engram"] = {**present, **wanted} if isinstance(present, dict) else wanted
    return present is not None, None


def server_engram(server: Any) -> list[str] | None:
    """The engram an MCP server entry (`{"command": ..., "args": [...]}`) runs as `engram mcp`."""
    if not isinstance(server, dict) or not isinstance(server.get("command"), str):
        return None
    args = server.get("args") or []
    return engram_invocation([server["command"], *args], "mcp") if isinstance(args, list) else None


def plan_claude(root: Path, command: Sequence[str]) -> list[Planned]:
    mcp_path, settings_path = claude_files(root)
    mcp = _load_json(mcp_path)
    before = json.loads(json.dumps(mcp))
    wanted = {"type": "stdio", "command": command[0], "args": [*command[1:], "mcp"]}
    had, note = put_engram_server(mcp_path, mcp.setdefault("mcpServers", {}), wanted)
    plan = _json_plan(mcp_path, mcp, before, had_engram=had)
    plan.note = note
    plans = [plan]

    plans.append(_plan_hooks(settings_path, command, CLAUDE_HOOKS))
    return plans


def _plan_hooks(path: Path, command: Sequence[str], wanted: dict[str, dict[str, Any]]) -> Planned:
    """The hooks file at `path` (Claude Code's settings, Codex's hooks.json: the same format)
    running `command hook` on each event of `wanted` (its matcher and timeout); Engram's hooks
    already there run this engram now, the others stay as they are."""
    settings = _load_json(path)
    before = json.loads(json.dumps(settings))
    ours = _add_hooks(settings, command, wanted)
    return _json_plan(path, settings, before, had_engram=ours)


def _add_hooks(settings: dict[str, Any], command: Sequence[str], wanted: dict[str, dict[str, Any]]) -> bool:
    """`command hook` on each event of `wanted` in a hooks document (Claude Code's format, which
    Codex and Gemini CLI share); Engram's hooks already there run this engram now. Whether there
    were some."""
    hook_line = shlex.join([*command, "hook"])
    ours = [(event, hook) for event, _, hook in _hook_commands(settings) if hook_engram(hook["command"])]
    for _, hook in ours:
        hook["command"] = hook_line  # another engram's (an older setup's): this one now
    hooks = settings.setdefault("hooks", {})
    for event, spec in wanted.items():
        if any(e == event for e, _ in ours):
            continue
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": hook_line, "timeout": spec["timeout"]}]}
        if "matcher" in spec:
            group = {"matcher": spec["matcher"], **group}
        hooks.setdefault(event, []).append(group)
    return bool(ours)


def _unplan_hooks(path: Path) -> Planned:
    """The hooks file at `path` without Engram's hooks."""
    settings = _load_json(path)
    found = _drop_hooks(settings)
    return _json_removal(path, _without_empty_hooks(settings), found)


def _drop_hooks(settings: dict[str, Any]) -> bool:
    """Take Engram's hooks out of a hooks document; whether there were some."""
    hooks = [(group, hook) for _, group, hook in _hook_commands(settings) if hook_engram(hook["command"])]
    for group, hook in hooks:
        group["hooks"].remove(hook)
    return bool(hooks)


def _drop_server(doc: dict[str, Any], key: str = "mcpServers",
                 runs: Callable[[Any], list[str] | None] = server_engram) -> bool:
    """Take Engram's entry out of a document's MCP servers (`key`: `mcpServers`, OpenCode's `mcp`;
    `runs`: how an entry says what it runs); whether it was there."""
    servers = doc.get(key)
    found = isinstance(servers, dict) and runs(servers.get("engram")) is not None
    if found:
        del servers["engram"]
        if not servers:
            del doc[key]
    return found


def unplan_claude(root: Path) -> list[Planned]:
    """Claude Code's files without Engram's server and hooks."""
    mcp_path, settings_path = claude_files(root)
    mcp = _load_json(mcp_path)
    server = _drop_server(mcp)
    return [_json_removal(mcp_path, mcp, server), _unplan_hooks(settings_path)]


def _json_removal(path: Path, data: dict[str, Any], found: bool) -> Planned:
    """The plan for a JSON file once Engram's entries (`found`: there were some) are out of `data`."""
    if not found:
        return Planned(path, None, False)
    result = _strip_empty(data)

    def same(old: str) -> bool:
        try:
            return _strip_empty(json.loads(old or "{}")) == result
        except ValueError:
            return False

    return _removal_plan(path, json.dumps(data, indent=2) + "\n" if data else None, same)


def _without_empty_hooks(data: dict[str, Any]) -> dict[str, Any]:
    """Hook groups, events and the `hooks` key that held only Engram's hooks go with them."""
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if isinstance(groups, list):
                groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
                if not groups:
                    del hooks[event]
        if not hooks:
            del data["hooks"]
    return data


# ---------------------------------------------------------------- Codex


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def codex_file() -> Path:
    return codex_home() / "config.toml"


def codex_hooks_file() -> Path:
    return codex_home() / "hooks.json"


_TABLE = re.compile(r"^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*(?:engram|\"engram\")[ \t]*\][ \t]*(?:#.*)?$", re.M)
_HEADER = re.compile(r"^[ \t]*\[", re.M)
_NOTIFY = re.compile(r"^notify[ \t]*=.*\n?", re.M)
_NOTIFY_AND_BLANK = re.compile(r"^notify[ \t]*=.*\n?(?:[ \t]*\n)?", re.M)  # with the blank line setup puts after it


def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _engram_table(text: str) -> tuple[int, int] | None:
    """Where the `[mcp_servers.engram]` table is in `text`: from its header to the next table."""
    m = _TABLE.search(text)
    if m is None:
        return None
    nxt = _HEADER.search(text, m.end())
    return m.start(), nxt.start() if nxt else len(text)


def _top_level_notify(text: str, pattern: re.Pattern[str] = _NOTIFY) -> re.Match[str] | None:
    """The `notify = ...` line before the first table (a key of that name in a table is another)."""
    first = _HEADER.search(text)
    return pattern.search(text, 0, first.start() if first else len(text))


def plan_codex(command: Sequence[str]) -> list[Planned]:
    path = codex_file()
    text, data = _load_toml(path)
    new = text
    servers = data.get("mcp_servers") or {}
    block = f'[mcp_servers.engram]\ncommand = {json.dumps(command[0])}\nargs = {_toml_list([*command[1:], "mcp"])}\n'
    note = None
    had_engram = "engram" in servers or _codex_notify_engram(data.get("notify"))
    if "engram" not in servers:
        new += ("" if not new.strip() else "\n" if new.endswith("\n") else "\n\n") + block
    elif server_engram(servers["engram"]) is not None:
        where = _engram_table(new)
        if where is None:  # (written inline, `mcp_servers = { engram = ... }`): not edited by text
            note = f"{path}: the engram MCP server is not a [mcp_servers.engram] table; update it yourself"
        else:
            a, b = where
            new = new[:a] + block + ("\n" if b < len(new) else "") + new[b:]
    else:
        note = f"{path} has an MCP server named engram that runs something else: left as it is"
    notify = data.get("notify")
    line = f"notify = {_toml_list([*command, 'hook'])}\n"
    if notify is None:
        m = _HEADER.search(new)  # a top-level key must come before the first table
        new = new[: m.start()] + line + "\n" + new[m.start():] if m else line + new
    elif _codex_notify_engram(notify) and (m := _top_level_notify(new)):
        new = new[: m.start()] + line + new[m.end():]
    _check_toml(path, new, command)
    return [Planned(path, new, new != text, backup=new != text and not had_engram, note=note),
            _plan_hooks(codex_hooks_file(), command, CODEX_HOOKS)]


def _codex_notify_engram(notify: Any) -> bool:
    return isinstance(notify, list) and all(isinstance(x, str) for x in notify) and \
        engram_invocation(notify, "hook") is not None


def _check_toml(path: Path, text: str, command: Sequence[str]) -> None:
    """Refuse to write a config.toml the text edits got wrong (a layout they did not expect)."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: Engram could not add its entries safely ({exc}); add them yourself: "
                       f"notify = {_toml_list([*command, 'hook'])} and [mcp_servers.engram] with "
                       f"command = {json.dumps(command[0])}, args = {_toml_list([*command[1:], 'mcp'])}") from None


def unplan_codex() -> list[Planned]:
    """Codex's config.toml without Engram's server and notify command."""
    return [_unplan_codex_config(), _unplan_hooks(codex_hooks_file())]


def _unplan_codex_config() -> Planned:
    path = codex_file()
    if not path.exists():
        return Planned(path, None, False)
    text, data = _load_toml(path)
    if server_engram((data.get("mcp_servers") or {}).get("engram")) is None and not _codex_notify_engram(
            data.get("notify")):
        return Planned(path, None, False)
    new = text
    if server_engram((data.get("mcp_servers") or {}).get("engram")) is not None and (where := _engram_table(new)):
        a, b = where
        head, tail = new[:a].rstrip("\n"), new[b:]
        new = (head + ("\n\n" + tail if tail.strip() else "\n")) if head.strip() else tail
    if _codex_notify_engram(data.get("notify")) and (m := _top_level_notify(new, _NOTIFY_AND_BLANK)):
        new = new[: m.start()] + new[m.end():]
    try:
        result = _strip_empty(tomllib.loads(new))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: Engram could not take its entries out safely ({exc}); remove its notify line and "
                       "[mcp_servers.engram] table yourself") from None

    def same(old: str) -> bool:
        try:
            return _strip_empty(tomllib.loads(old)) == result
        except tomllib.TOMLDecodeError:
            return False

    return _removal_plan(path, new if new.strip() else None, same)


def codex_notify_conflict() -> str | None:
    path = codex_file()
    if not path.exists():
        return None
    try:
        notify = tomllib.loads(path.read_text(encoding="utf-8")).get("notify")
    except tomllib.TOMLDecodeError:
        return None
    if notify and not _codex_notify_engram(notify):
        return (f"{path} already has notify = {notify!r}; Codex allows one notify command, so Engram left it. "
                "Call `engram hook` from your notify script to capture sessions automatically.")
    return None


# ---------------------------------------------------------------- Gemini CLI, Qwen Code, OpenCode

# Gemini CLI runs command hooks from its settings.json in Claude Code's format (timeouts in
# milliseconds); its payload names the session's recording (`transcript_path`). Capture after each
# turn (AfterAgent), before a compression and at the end. Qwen Code's hooks are Claude Code's
# (settings.json, milliseconds, `transcript_path` in the payload): capture when a reply ends (Stop),
# before a compaction and at the end. OpenCode runs JavaScript plugins: setup writes one
# (`opencode_plugin`) that calls `engram hook` when a session goes idle or was compacted.
GEMINI_HOOKS = {
    "AfterAgent": {"matcher": "*", "timeout": 10000},
    "PreCompress": {"matcher": "*", "timeout": 30000},
    "SessionEnd": {"matcher": "*", "timeout": 30000},
}
QWEN_HOOKS = {"Stop": {"timeout": 10000}, "PreCompact": {"timeout": 30000}, "SessionEnd": {"timeout": 30000}}
PLUGIN_FILE = "engram-capture.js"
# The plugin's first line says it is Engram's: setup rewrites such a file, --remove deletes it, and
# a file of that name without it is the user's and is left alone.
PLUGIN_MARK = "// engram-capture: written by `engram setup opencode`"
PLUGIN_JS = PLUGIN_MARK + """; `engram setup --remove opencode` deletes it.
// When a session goes idle (a reply ended) or was compacted, it runs `engram hook`, which starts a
// background `engram ingest` of this repository's sessions and returns at once; a failure is ignored.
import { spawn } from "node:child_process";

const ENGRAM = %s;

export const EngramCapture = async ({ directory }) => ({
  event: async ({ event }) => {
    if (!event || (event.type !== "session.idle" && event.type !== "session.compacted")) return;
    const payload = JSON.stringify({ harness: "opencode", hook_event_name: event.type, cwd: directory,
                                     session_id: event.properties?.sessionID ?? null });
    try {
      const child = spawn(ENGRAM[0], [...ENGRAM.slice(1), "hook", payload], { stdio: "ignore", detached: true });
      child.on("error", () => {});
      child.unref();
    } catch {
      // a hook never fails the agent
    }
  },
});
"""
_PLUGIN_COMMAND = re.compile(r"^const ENGRAM = (\[.*\]);$", re.MULTILINE)


def gemini_settings(root: Path, folder: str = ".gemini") -> Path:
    """The project's settings file of Gemini CLI (`.gemini/settings.json`) or Qwen Code (`.qwen/`)."""
    return root / folder / "settings.json"


def opencode_file(root: Path) -> Path:
    """The project's OpenCode configuration: `opencode.json` (or an existing `opencode.jsonc`)."""
    jsonc = root / "opencode.jsonc"
    return jsonc if jsonc.exists() and not (root / "opencode.json").exists() else root / "opencode.json"


def _plan_mcp_servers(path: Path, command: Sequence[str], hooks: dict[str, dict[str, Any]] | None) -> Planned:
    """A settings file with `mcpServers.engram` (Gemini CLI's and Qwen Code's shape) and, with
    `hooks`, Engram's command hooks."""
    data = _load_json(path)
    before = json.loads(json.dumps(data))
    wanted = {"command": command[0], "args": [*command[1:], "mcp"]}
    had, note = put_engram_server(path, data.setdefault("mcpServers", {}), wanted)
    if hooks:
        _add_hooks(data, command, hooks)
    plan = _json_plan(path, data, before, had_engram=had)
    plan.note = note
    return plan


def _unplan_mcp_servers(path: Path) -> Planned:
    data = _load_json(path)
    found = _drop_server(data)
    found = _drop_hooks(data) or found
    return _json_removal(path, _without_empty_hooks(data), found)


def opencode_plugin(root: Path) -> Path:
    """The capture plugin setup writes in the project's OpenCode plugin folder."""
    return root / ".opencode" / "plugins" / PLUGIN_FILE


def plugin_engram(path: Path) -> list[str] | None:
    """The engram Engram's OpenCode plugin at `path` runs (None: no such file, or not Engram's)."""
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() and not path.is_symlink() else ""
    except OSError:
        return None
    m = _PLUGIN_COMMAND.search(text) if text.startswith(PLUGIN_MARK) else None
    try:
        argv = json.loads(m.group(1)) if m else None
    except ValueError:
        return None
    ok = isinstance(argv, list) and all(isinstance(a, str) for a in argv) and runs_engram(argv)
    return argv if ok else None


def _plan_plugin(root: Path, command: Sequence[str]) -> Planned:
    path = opencode_plugin(root)
    text = PLUGIN_JS % json.dumps(list(command))
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if current is not None and plugin_engram(path) is None and not current.startswith(PLUGIN_MARK):
        return Planned(path, current, False, note=f"{path} exists and is not Engram's: left as it is")
    return Planned(path, text, text != current)


def _unplan_plugin(root: Path) -> Planned:
    path = opencode_plugin(root)
    ours = path.is_file() and path.read_text(encoding="utf-8", errors="replace").startswith(PLUGIN_MARK)
    return Planned(path, None, ours)


def opencode_engram(entry: Any) -> list[str] | None:
    """The engram an OpenCode MCP entry (`{"type": "local", "command": [...]}`) runs as `engram mcp`."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), list):
        return None
    argv = entry["command"]
    return engram_invocation(argv, "mcp") if all(isinstance(a, str) for a in argv) else None


def plan_opencode(root: Path, command: Sequence[str]) -> list[Planned]:
    path = opencode_file(root)
    data = _load_json(path)
    before = json.loads(json.dumps(data))
    data.setdefault("$schema", "https://opencode.ai/config.json")
    wanted = {"type": "local", "command": [*command, "mcp"], "enabled": True}
    had, note = put_engram_server(path, data.setdefault("mcp", {}), wanted, opencode_engram)
    plan = _json_plan(path, data, before, had_engram=had)
    plan.note = note
    return [plan, _plan_plugin(root, command)]


def unplan_opencode(root: Path) -> list[Planned]:
    path = opencode_file(root)
    data = _load_json(path)
    found = _drop_server(data, "mcp", opencode_engram)
    if found and list(data) == ["$schema"]:
        data = {}
    return [_json_removal(path, data, found), _unplan_plugin(root)]


# ---------------------------------------------------------------- what is installed


@dataclass(frozen=True)
class Configured:
    """One place an agent's configuration runs engram: the file, what it is, the engram it runs."""

    agent: str  # claude, codex, gemini, qwen, opencode (the editor agents: engram.integrations.editors)
    path: Path
    what: str  # "MCP server", "PostToolUse hook", "notify"
    command: tuple[str, ...]


def user_settings(agent: str) -> Path:
    """The user's own settings file of Gemini CLI (`$GEMINI_CLI_HOME/.gemini/settings.json`), Qwen
    Code (`~/.qwen/settings.json`) or OpenCode (`$XDG_CONFIG_HOME/opencode/opencode.json`): each
    merges it under the project's, so an engram named there runs in this repository too."""
    if agent == "gemini":
        return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "settings.json"
    if agent == "qwen":
        return Path.home() / ".qwen" / "settings.json"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "opencode" / "opencode.json"


def _settings_entries(agent: str, path: Path) -> list[Configured]:
    """Engram's MCP server and command hooks in a Gemini CLI / Qwen Code settings file."""
    data = _safe(_load_json, path)
    servers = data.get("mcpServers")
    found = []
    if isinstance(servers, dict) and (cmd := server_engram(servers.get("engram"))):
        found.append(Configured(agent, path, "MCP server", tuple(cmd)))
    for event, _, hook in _hook_commands(data):
        if cmd := hook_engram(hook["command"]):
            found.append(Configured(agent, path, f"{event} hook", tuple(cmd)))
    return found


def configured(agent: str, root: Path) -> list[Configured]:
    """Every entry of `agent`'s configuration (for the repository at `root`) that runs an engram:
    what `engram doctor` checks. Claude Code reads hooks from the user's and the project's
    settings files, Gemini CLI, Qwen Code and OpenCode merge the user's file under the
    project's; all of them are looked at."""
    found: list[Configured] = []
    if agent in ("gemini", "qwen"):
        for path in dict.fromkeys((gemini_settings(root, f".{agent}"), user_settings(agent))):
            found += _settings_entries(agent, path)
    elif agent == "opencode":
        for path in dict.fromkeys((opencode_file(root), user_settings(agent))):
            mcp = _safe(_load_json, path).get("mcp")
            if isinstance(mcp, dict) and (cmd := opencode_engram(mcp.get("engram"))):
                found.append(Configured(agent, path, "MCP server", tuple(cmd)))
        if cmd := plugin_engram(opencode_plugin(root)):
            found.append(Configured(agent, opencode_plugin(root), "capture plugin", tuple(cmd)))
    elif agent == "claude":
        mcp_path, settings_path = claude_files(root)
        server = _safe(_load_json, mcp_path).get("mcpServers", {})
        if isinstance(server, dict) and (cmd := server_engram(server.get("engram"))):
            found.append(Configured("claude", mcp_path, "MCP server", tuple(cmd)))
        user = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
        for path in (settings_path, settings_path.with_name("settings.local.json"), user / "settings.json"):
            for event, _, hook in _hook_commands(_safe(_load_json, path)):
                if cmd := hook_engram(hook["command"]):
                    found.append(Configured("claude", path, f"{event} hook", tuple(cmd)))
    elif agent == "codex":
        path = codex_file()
        data = _safe(lambda p: _load_toml(p)[1], path)
        if cmd := server_engram((data.get("mcp_servers") or {}).get("engram")):
            found.append(Configured("codex", path, "MCP server", tuple(cmd)))
        if _codex_notify_engram(data.get("notify")):
            found.append(Configured("codex", path, "notify", tuple(data["notify"][:-1])))
        hooks_path = codex_hooks_file()
        for event, _, hook in _hook_commands(_safe(_load_json, hooks_path)):
            if cmd := hook_engram(hook["command"]):
                found.append(Configured("codex", hooks_path, f"{event} hook", tuple(cmd)))
    return found


def _safe(load: Callable[[Path], dict[str, Any]], path: Path) -> dict[str, Any]:
    try:
        return load(path)
    except (BadInput, OSError):
        return {}


# ---------------------------------------------------------------- entry points


def setup(agent: str, root: Path, dry_run: bool = False, command: Sequence[str] | None = None) -> list[Planned]:
    """Add Engram to `agent`'s configuration, running `command` (default: this engram)."""
    cmd = list(command or engram_command())
    return _carry_out(agent, {"claude": lambda: plan_claude(root, cmd), "codex": lambda: plan_codex(cmd),
                              "gemini": lambda: [_plan_mcp_servers(gemini_settings(root), cmd, GEMINI_HOOKS)],
                              "qwen": lambda: [_plan_mcp_servers(gemini_settings(root, ".qwen"), cmd, QWEN_HOOKS)],
                              "opencode": lambda: plan_opencode(root, cmd)}, dry_run)


def remove(agent: str, root: Path, dry_run: bool = False) -> list[Planned]:
    """Take Engram's entries out of `agent`'s configuration, leaving everything else as it is."""
    return _carry_out(agent, {"claude": lambda: unplan_claude(root), "codex": unplan_codex,
                              "gemini": lambda: [_unplan_mcp_servers(gemini_settings(root))],
                              "qwen": lambda: [_unplan_mcp_servers(gemini_settings(root, ".qwen"))],
                              "opencode": lambda: unplan_opencode(root)}, dry_run)


def _carry_out(agent: str, planners: dict[str, Callable[[], list[Planned]]], dry_run: bool) -> list[Planned]:
    """The plans of `agent`'s planner, written unless `dry_run`."""
    if agent not in planners:
        raise BadInput(f"unknown agent {agent!r}: use claude, codex, gemini, qwen or opencode")
    plans = planners[agent]()
    if not dry_run:
        for p in plans:
            _write(p)
    return plans
