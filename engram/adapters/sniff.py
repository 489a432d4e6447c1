"""Which harness wrote a record or a file, judged without importing the harness's adapter.

`engram ingest` sniffs every file before it parses any (engram.capture.discovery); the adapters
that recognise a record shape import much more (copilot: aider, codex, opencode and the patch
parsers; cline: aider), ~40 ms of a 1 MB append's start that a session of another harness never
uses (bench/cli_start.py). The adapters re-export these under their old names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

#: Qwen Code's record types (the same envelope as Claude Code's; engram.adapters.qwen).
QWEN_RECORD_TYPES: Final = frozenset({"user", "assistant", "tool_result", "system"})
#: The first line of Codex's apply_patch envelope (engram.adapters.apply_patch parses it).
BEGIN_PATCH: Final = "*** Begin Patch"
# Roo Code's diagnostics file ("Export task for support"): these comment lines, then
# `{"error": {…, "version"}, "history": [the task's api_conversation_history]}`. Projects commit them.
REPORT_HEAD: Final = b"// Please share this file with Roo Code Support"


def looks_like_claude(rec: dict[str, Any]) -> bool:
    """A Claude Code record."""
    return ("sessionId" in rec and ("uuid" in rec or rec.get("type") == "queue-operation")) or (
        rec.get("type") in ("summary", "file-history-snapshot", "file-history-delta") and "payload" not in rec
    )


def looks_like_copilot(rec: dict[str, Any]) -> bool:
    """A Copilot CLI event: the `{type, data, id, timestamp}` envelope of its session log."""
    data = rec.get("data")
    typ = rec.get("type")
    return isinstance(data, dict) and isinstance(typ, str) and "id" in rec and "timestamp" in rec and (
        (typ == "session.start" and data.get("producer") == "copilot-agent")
        or typ.startswith(("tool.execution_", "assistant.turn_", "session.")) and "payload" not in rec)


def looks_like_qwen(rec: dict[str, Any]) -> bool:
    """A Qwen Code record: Claude Code's envelope around a Gemini `Content` (`parts`, not `content`)."""
    if "sessionId" not in rec or rec.get("type") not in QWEN_RECORD_TYPES:
        return False
    msg = rec.get("message")
    return (isinstance(msg, dict) and "parts" in msg) or "toolCallResult" in rec or "systemPayload" in rec


def is_roo_report(path: Path) -> bool:
    """A Roo Code diagnostics file, from its first line."""
    try:
        with path.open("rb") as f:
            return f.read(len(REPORT_HEAD) + 8).lstrip().startswith(REPORT_HEAD)
    except OSError:
        return False
