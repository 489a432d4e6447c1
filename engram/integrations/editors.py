"""`engram setup cursor|vscode|cline|roo`: Engram's MCP server for agents that read an MCP
configuration file and have no hook Engram could run after a turn (their sessions are captured
by `engram ingest`, which finds Cline / Roo Code tasks and SpecStory exports itself).

* Cursor: the project's `.cursor/mcp.json` (`mcpServers`);
* VS Code (GitHub Copilot's agent mode): the project's `.vscode/mcp.json` (`servers`, typed stdio);
* Roo Code: the project's `.roo/mcp.json` (`mcpServers`);
* Cline: its one settings file, `cline_mcp_settings.json`, in Cline's folder of the editor's user
  data (no project file), for every editor that has one (see `cline_settings_files`).

As for Claude Code (engram.integrations.setup): merged into what is there, the file before kept
as `<file>.engram-backup`, Engram's entry told apart by what it runs, `--remove` takes exactly it out.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engram.errors import BadInput
from engram.integrations.setup import (
    Configured,
    Planned,
    _drop_server,
    _json_plan,
    _json_removal,
    _load_json,
    _write,
    put_engram_server,
    server_engram,
)

EDITOR_NAMES = ("Code", "Code - Insiders", "Cursor", "VSCodium", "Windsurf")
# agent -> (the file, relative to the repository, or None for Cline's settings; the servers' key; entry extras)
EDITORS: dict[str, tuple[str | None, str, dict[str, Any]]] = {
    "cursor": (".cursor/mcp.json", "mcpServers", {}),
    "vscode": (".vscode/mcp.json", "servers", {"type": "stdio"}),
    "roo": (".roo/mcp.json", "mcpServers", {}),
    "cline": (None, "mcpServers", {"disabled": False}),
}


CLINE_EXTENSION = "saoudrizwan.claude-dev"


def cline_settings_files() -> list[Path]:
    """Cline's MCP settings file in each editor whose user data holds Cline's folder (none found:
    VS Code's, which Cline creates on first use). The editors' user data is found as discovery
    finds Cline's tasks there (engram.capture.discovery.cline_task_dirs, a layer this one does
    not import): `VSCODE_APPDATA`, else the system's place for it."""
    base = Path(os.environ["VSCODE_APPDATA"]) if os.environ.get("VSCODE_APPDATA") else (
        Path.home() / "Library" / "Application Support" if sys.platform == "darwin" else
        Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming") if sys.platform == "win32" else
        Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"))
    folders = [base / editor / "User" / "globalStorage" / CLINE_EXTENSION for editor in EDITOR_NAMES]
    found = [f for f in folders if f.is_dir()] or folders[:1]
    return [folder / "settings" / "cline_mcp_settings.json" for folder in found]


def files(agent: str, root: Path) -> list[Path]:
    rel, _, _ = EDITORS[agent]
    return [root / rel] if rel else cline_settings_files()


def plan(agent: str, root: Path, command: Sequence[str]) -> list[Planned]:
    """The MCP configuration of `agent` with Engram's server in it."""
    _, key, extras = EDITORS[agent]
    out = []
    for path in files(agent, root):
        data = _load_json(path)
        before = _load_json(path)
        wanted = {**extras, "command": command[0], "args": [*command[1:], "mcp"]}
        had, note = put_engram_server(path, data.setdefault(key, {}), wanted)
        p = _json_plan(path, data, before, had_engram=had)
        p.note = note
        out.append(p)
    return out


def unplan(agent: str, root: Path) -> list[Planned]:
    """The MCP configuration of `agent` without Engram's server."""
    _, key, _ = EDITORS[agent]
    out = []
    for path in files(agent, root):
        data = _load_json(path)
        out.append(_json_removal(path, data, _drop_server(data, key)))
    return out


def configured(agent: str, root: Path) -> list[Configured]:
    """Engram's MCP server in `agent`'s configuration, where it runs an engram (`engram doctor`)."""
    _, key, _ = EDITORS[agent]
    found = []
    for path in files(agent, root):
        try:
            servers = _load_json(path).get(key)
        except (BadInput, OSError):
            continue
        if isinstance(servers, dict) and (cmd := server_engram(servers.get("engram"))):
            found.append(Configured(agent, path, "MCP server", tuple(cmd)))
    return found


def setup(agent: str, root: Path, dry_run: bool = False, command: Sequence[str] | None = None) -> list[Planned]:
    """`engram.integrations.setup.setup` for the editor agents."""
    from engram.integrations.setup import engram_command

    return _carry_out(lambda: plan(agent, root, list(command or engram_command())), dry_run)


def remove(agent: str, root: Path, dry_run: bool = False) -> list[Planned]:
    return _carry_out(lambda: unplan(agent, root), dry_run)


def _carry_out(planner: Callable[[], list[Planned]], dry_run: bool) -> list[Planned]:
    plans = planner()
    if not dry_run:
        for p in plans:
            _write(p)
    return plans
