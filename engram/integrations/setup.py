"""`engram setup claude|codex`: add Engram's MCP server and automatic capture to an agent.

Existing configuration is merged, never overwritten, and the previous file is kept as
`<file>.engram-backup`. With `dry_run`, nothing is written and the planned files are returned.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram.errors import BadInput

HOOK_COMMAND = "engram hook"
CLAUDE_HOOKS = {
    "PostToolUse": {"matcher": "Edit|MultiEdit|Write|NotebookEdit", "timeout": 10},
    "PreCompact": {"timeout": 30},
    "SessionEnd": {"timeout": 30},
}


@dataclass
class Planned:
    path: Path
    text: str
    changed: bool


def _write(plan: Planned) -> None:
    if not plan.changed:
        return
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    if plan.path.exists():
        shutil.copy2(plan.path, plan.path.with_name(plan.path.name + ".engram-backup"))
    tmp = plan.path.with_name(f".{plan.path.name}.engram-tmp")
    tmp.write_text(plan.text, encoding="utf-8")
    os.replace(tmp, plan.path)


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


def plan_claude(root: Path) -> list[Planned]:
    plans = []
    mcp_path = root / ".mcp.json"
    mcp = _load_json(mcp_path)
    servers = mcp.setdefault("mcpServers", {})
    before = json.dumps(mcp, sort_keys=True)
    servers.setdefault("engram", {"type": "stdio", "command": "engram", "args": ["mcp"]})
    plans.append(Planned(mcp_path, json.dumps(mcp, indent=2) + "\n", json.dumps(mcp, sort_keys=True) != before
                         or not mcp_path.exists()))
    settings_path = root / ".claude" / "settings.json"
    settings = _load_json(settings_path)
    before = json.dumps(settings, sort_keys=True)
    hooks = settings.setdefault("hooks", {})
    for event, spec in CLAUDE_HOOKS.items():
        groups = hooks.setdefault(event, [])
        present = any(h.get("command") == HOOK_COMMAND for g in groups if isinstance(g, dict)
                      for h in g.get("hooks", []) if isinstance(h, dict))
        if not present:
            group: dict[str, Any] = {"hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": spec["timeout"]}]}
            if "matcher" in spec:
                group = {"matcher": spec["matcher"], **group}
            groups.append(group)
    plans.append(Planned(settings_path, json.dumps(settings, indent=2) + "\n",
                         json.dumps(settings, sort_keys=True) != before or not settings_path.exists()))
    return plans


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def plan_codex() -> list[Planned]:
    path = codex_home() / "config.toml"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path} is not valid TOML ({exc}); fix it first, Engram will not overwrite it") from exc
    new = text
    if "engram" not in (data.get("mcp_servers") or {}):
        block = '\n[mcp_servers.engram]\ncommand = "engram"\nargs = ["mcp"]\n'
        new = new + ("" if new.endswith("\n") or not new else "\n") + block
    if "notify" not in data:
        # A top-level key must come before the first table.
        line = 'notify = ["engram", "hook"]\n'
        m = re.search(r"^\s*\[", new, re.M)
        new = new[: m.start()] + line + "\n" + new[m.start():] if m else line + new
    return [Planned(path, new, new != text)]


def codex_notify_conflict() -> str | None:
    path = codex_home() / "config.toml"
    if not path.exists():
        return None
    try:
        notify = tomllib.loads(path.read_text(encoding="utf-8")).get("notify")
    except tomllib.TOMLDecodeError:
        return None
    if notify and list(notify)[:2] != ["engram", "hook"]:
        return (f"{path} already has notify = {notify!r}; Codex allows one notify command, so Engram left it. "
                "Call `engram hook` from your notify script to capture sessions automatically.")
    return None


def setup(agent: str, root: Path, dry_run: bool = False) -> list[Planned]:
    if agent == "claude":
        plans = plan_claude(root)
    elif agent == "codex":
        plans = plan_codex()
    else:
        raise BadInput(f"unknown agent {agent!r}: use claude or codex")
    if not dry_run:
        for p in plans:
            _write(p)
    return plans
