"""Commands for the agents' harnesses: `engram setup` (MCP server and hooks) and `engram hook`."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from engram.cli.output import people_output, print_json

AGENTS = ("claude", "codex", "gemini", "qwen", "opencode", "cursor", "vscode", "cline", "roo")


def run_hook_command(payload: str | None) -> int:
    """The payload comes as an argument (Codex notify) or on stdin (Claude Code hooks)."""
    from engram.cli.running_server import ask_language_server
    from engram.integrations.hook import hook_process

    return hook_process(payload, ask_language_server, _resume_package)


def _resume_package(raw: str) -> str | None:
    """`engram hook` at a SessionStart after a compaction, a resume or /clear: the resume package
    (imported here: every other hook call is spared the import)."""
    from engram.cli.resume import resume_hook

    return resume_hook(raw)


def cmd_hook(args: argparse.Namespace) -> int:
    return run_hook_command(args.payload)


def _root(args: argparse.Namespace) -> Path:
    from engram.store.repo import find_repo_root

    here = Path(args.repo).resolve() if getattr(args, "repo", None) else Path.cwd()
    return find_repo_root(here) or here


def cmd_setup(args: argparse.Namespace) -> int:
    from engram.errors import BadInput

    if args.remove:
        return _remove(args)
    if args.agent is None:
        raise BadInput(f"set up which agent? `engram setup AGENT`, AGENT one of {', '.join(AGENTS)} "
                       "(`engram setup --remove` takes Engram out of each)")
    from engram.integrations import editors
    from engram.integrations.setup import (
        codex_notify_conflict,
        engram_command,
        path_note,
        setup,
        verify,
    )

    command = engram_command()
    set_up = editors.setup if args.agent in editors.EDITORS else setup
    plans = set_up(args.agent, _root(args), dry_run=args.dry_run, command=command)
    ok, answer = verify(command)
    warnings = [w for w in (path_note(command), codex_notify_conflict() if args.agent == "codex" else None) if w]
    if args.json:
        print_json({"agent": args.agent, "command": command, "dry_run": args.dry_run, "verified": ok,
                    "version" if ok else "error": answer, "warnings": warnings, "files": _files(plans)})
        return 0 if ok else 1
    for p in plans:
        if args.dry_run:
            print(f"--- {p.path} ({'would create' if p.created else 'would change' if p.changed else 'unchanged'})\n{p.text}")
        else:
            print(f"{'created' if p.created else 'updated' if p.changed else 'already set up'}: {p.path}"
                  + (f" ({p.note})" if p.note else ""))
    _say_verified(command, ok, answer)
    for w in warnings:
        print(f"note: {w}", file=sys.stderr)
    return 0 if ok else 1


def _say_verified(command: list[str], ok: bool, answer: str) -> None:
    from engram.cli.style import paint

    shown = shlex.join(command)
    if ok:
        print(f"{paint('verified', 'green', sys.stdout)}: `{shown} --version` answers {answer}")
    else:
        print(f"{paint('engram:', 'red bold', sys.stderr)} the configured command does not run: {answer}; "
              "run `engram setup` again with the engram you mean to use", file=sys.stderr)


def _only_if_present() -> dict[str, Any]:
    """Agents whose configuration file `setup --remove` (without an agent) visits only when it exists:
    their folders are created by setup itself, so an absent one holds nothing of Engram's."""
    from engram.integrations.setup import gemini_settings, opencode_file, opencode_plugin

    return {"gemini": gemini_settings, "qwen": lambda root: gemini_settings(root, ".qwen"),
            "opencode": lambda root: opencode_file(root) if opencode_file(root).exists() else opencode_plugin(root)}


def _remove(args: argparse.Namespace) -> int:
    from engram.integrations import editors
    from engram.integrations.setup import remove

    present = _only_if_present()
    agents = [args.agent] if args.agent else [a for a in AGENTS if a not in present
                                              or present[a](_root(args)).exists()]
    plans = [p for agent in agents for p in (editors.remove if agent in editors.EDITORS else remove)(
        agent, _root(args), dry_run=args.dry_run)]
    if args.json:
        print_json({"agents": agents, "dry_run": args.dry_run, "files": _files(plans)})
        return 0
    for p in plans:
        if not p.changed:
            line = f"nothing of Engram's in {p.path}" if p.path.exists() else f"no {p.path}: nothing to remove"
        elif p.text is None:
            line = f"{'would remove' if args.dry_run else 'removed'} {p.path} (it held only Engram's entries)"
        else:
            line = f"{'would take' if args.dry_run else 'took'} Engram's entries out of {p.path}"
        print(line + (f" ({p.note})" if p.note and p.changed else ""))
    return 0


def _files(plans: list[Any]) -> list[dict[str, Any]]:
    return [{"path": str(p.path), "changed": p.changed, "removed": p.text is None and p.changed, "note": p.note}
            for p in plans]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the harness commands to the command line."""
    s = sub.add_parser("hook", help="for agent hooks: capture the session named on stdin; always exits 0")
    s.add_argument("payload", nargs="?", help="a JSON payload (Codex notify passes it as an argument)")
    s.set_defaults(func=cmd_hook)

    s = sub.add_parser("setup", help="add Engram's MCP server (and automatic capture where the agent runs hooks) "
                                     "to Claude Code, Codex, Gemini CLI, Qwen Code, OpenCode, Cursor, VS Code, Cline or Roo Code")
    s.add_argument("agent", nargs="?", choices=AGENTS,
                   help="the agent to set up: claude (.mcp.json, .claude/settings.json), codex "
                        "(~/.codex/config.toml), gemini (.gemini/settings.json: MCP server and hooks), qwen "
                        "(.qwen/settings.json: the same), opencode (opencode.json and a capture plugin in "
                        ".opencode/plugins/); the MCP server only: cursor "
                        "(.cursor/mcp.json), vscode (.vscode/mcp.json, Copilot), roo (.roo/mcp.json), cline "
                        "(cline_mcp_settings.json)")
    s.add_argument("--dry-run", action="store_true", help="print the files instead of writing them")
    s.add_argument("--remove", action="store_true",
                   help="take out exactly what setup added (every agent when none is named); the rest stays")
    people_output(s)
    s.set_defaults(func=cmd_setup)
