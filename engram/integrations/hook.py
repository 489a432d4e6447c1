"""`engram hook`: called by Claude Code hooks and Codex's `notify` after agent activity.

It must never block or break the agent: it reads the payload, and if it names a session of a
repository with a store, starts a detached `engram ingest` of that transcript and returns at
once. Every failure is logged to `.engram/run/hook.log` (or swallowed) and the exit status is 0.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_PAYLOAD = 1 << 20


def parse_payload(raw: str) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except (ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def ingest_command(payload: dict[str, Any]) -> tuple[Path, list[str]] | None:
    """(repository root, arguments for `engram`) for a payload, or None when there is nothing to do."""
    from engram.errors import StoreNotFound  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        return None
    try:
        store = Store.discover(Path(cwd))
    except StoreNotFound:
        return None
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript.endswith(".jsonl") and os.path.isfile(transcript):
        return store.root, ["ingest", transcript]
    if payload.get("type") == "agent-turn-complete" or "thread-id" in payload:  # Codex notify
        return store.root, ["ingest"]
    return None


def run_hook(stdin_text: str | None, argv_payload: str | None) -> int:
    try:
        raw = argv_payload if argv_payload is not None else (stdin_text or "")
        payload = parse_payload(raw[:MAX_PAYLOAD])
        if payload is None:
            return 0
        found = ingest_command(payload)
        if found is None:
            return 0
        root, args = found
        logfile = root / ".engram" / "run" / "hook.log"
        logfile.parent.mkdir(parents=True, exist_ok=True)
        with open(logfile, "ab") as out:
            subprocess.Popen([sys.executable, "-m", "engram_server.entry", *args], cwd=root,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent's turn
        try:
            sys.stderr.write(f"engram hook: {exc}\n")
        except Exception:  # noqa: BLE001
            pass
    return 0
