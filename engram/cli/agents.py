"""Commands for the agents' harnesses: `engram setup` (MCP server and hooks) and `engram hook`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def run_hook_command(payload: str | None) -> int:
    """The payload comes as an argument (Codex notify) or on stdin (Claude Code hooks)."""
    from engram.integrations.hook import run_hook

    stdin_text = None if payload is not None or sys.stdin.isatty() else sys.stdin.read(1 << 20)
    return run_hook(stdin_text, payload)


def cmd_hook(args: argparse.Namespace) -> int:
    return run_hook_command(args.payload)


def cmd_setup(args: argparse.Namespace) -> int:
    from engram.integrations.setup import codex_notify_conflict, setup
    from engram.store.repo import find_repo_root

    root = find_repo_root(Path.cwd()) or Path.cwd()
    plans = setup(args.agent, root, dry_run=args.dry_run)
    for p in plans:
        if args.dry_run:
            print(f"--- {p.path} ({'would change' if p.changed else 'unchanged'})\n{p.text}")
        else:
            print(f"{'updated' if p.changed else 'already set up'}: {p.path}")
    if args.agent == "codex":
        conflict = codex_notify_conflict()
        if conflict:
            print(f"note: {conflict}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the harness commands to the command line."""
    s = sub.add_parser("hook", help="for agent hooks: capture the session named on stdin; always exits 0")
    s.add_argument("payload", nargs="?", help="a JSON payload (Codex notify passes it as an argument)")
    s.set_defaults(func=cmd_hook)

    s = sub.add_parser("setup", help="add Engram's MCP server and automatic capture to Claude Code or Codex")
    s.add_argument("agent", choices=["claude", "codex"])
    s.add_argument("--dry-run", action="store_true", help="print the files instead of writing them")
    s.set_defaults(func=cmd_setup)
