"""What the agents' hooks tell the model: before an edit, the notes on the lines about to change;
at session start, a brief of the repository's most important notes (engram.memory.briefs).

The agent waits for a `PreToolUse` hook on every edit, so this path is built for a fresh process:
it reads the payload and the edited file with `os` and `json` alone, works out the lines the edit
changes, and hands the request to the language server running on the repository when there is one
(its index and imports are warm); otherwise it answers itself, importing only the memory modules
(no numpy, no command line). A hook that has not answered by the deadline (`hook_process`,
DEADLINE_S or ENGRAM_HOOK_DEADLINE_MS) prints nothing: the edit goes ahead without the notes.

Payloads, as Claude Code sends them on stdin (Codex's SessionStart is the same shape):

    {"hook_event_name": "PreToolUse", "cwd": "/repo", "tool_name": "Edit",
     "tool_input": {"file_path": "/repo/src/a.py", "old_string": "...", "new_string": "...", "replace_all": false}}
    MultiEdit: "tool_input": {"file_path": ..., "edits": [{"old_string", "new_string", "replace_all"}, ...]}
    Write: "tool_input": {"file_path": ..., "content": ...}; NotebookEdit: {"notebook_path": ..., "new_source": ...}
    {"hook_event_name": "SessionStart", "cwd": "/repo", "source": "startup"}

The answer is `{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": TEXT}}` on stdout,
or nothing at all.
"""

from __future__ import annotations

import os

from engram.store.location import endpoint_file, find_store_root

TYPE_CHECKING = False  # (not typing's: its import costs the hook ~10 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Ask = Callable[[str, str, dict[str, Any]], dict[str, Any] | None]

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
EVENTS = frozenset({"PreToolUse", "SessionStart"})
#: An edited file larger than this is not read to find the lines an edit changes (the whole
#: file's notes are given instead).
MAX_FILE_BYTES = 8 << 20
#: At most this many separate line ranges are sent (a replace_all of a common string).
MAX_RANGES = 64


def wants_context(payload: dict[str, Any]) -> bool:
    """Whether this payload is one the context hooks answer (the others are capture's)."""
    return payload.get("hook_event_name") in EVENTS


def request_of(payload: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(repository root, notes request) for a hook payload, or None when there is nothing to ask:
    no store, not an edit tool, a file outside the repository."""
    event = payload.get("hook_event_name")
    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None
    if event == "SessionStart":
        root = find_store_root(cwd) if cwd and os.path.isdir(cwd) else None
        return (root, {"event": "session"}) if root else None
    if event != "PreToolUse" or payload.get("tool_name") not in EDIT_TOOLS:
        return None
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    path = tool_input.get("file_path") or tool_input.get("notebook_path")
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    if not os.path.isabs(path):
        if cwd is None:
            return None
        path = os.path.join(cwd, path)
    found = _inside_store(path)
    if found is None:
        return None
    root, rel = found
    ranges = changed_lines(os.path.join(root, rel), payload["tool_name"], tool_input)
    return root, {"event": "edit", "file": rel, "ranges": ranges}


def _inside_store(path: str) -> tuple[str, str] | None:
    """(store root, repository-relative path) of `path`, links resolved, when it is inside a
    repository with a store (the same rule as engram.fsutil.repo_relative, without pathlib)."""
    real = os.path.realpath(path)
    probe = os.path.dirname(real)
    while probe and not os.path.isdir(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent
    root = find_store_root(probe)
    if root is None or not real.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return root, real[len(root.rstrip(os.sep)) + 1:].replace(os.sep, "/")


def changed_lines(path: str, tool: str, tool_input: dict[str, Any]) -> list[list[int]] | None:
    """The 1-based line ranges of the file at `path` an edit is about to change: where each
    `old_string` is now (every occurrence with `replace_all`); None for the whole file (Write,
    NotebookEdit, an empty old_string). An old_string that is not in the file (a MultiEdit's
    later edit of text an earlier one adds) changes no line there."""
    if tool == "Edit":
        edits = [tool_input]
    elif tool == "MultiEdit" and isinstance(tool_input.get("edits"), list):
        edits = [e for e in tool_input["edits"] if isinstance(e, dict)]
    else:
        return None
    olds = [(e.get("old_string"), bool(e.get("replace_all"))) for e in edits]
    if not olds or any(not isinstance(old, str) or not old for old, _ in olds):
        return None
    text = _read(path)
    if text is None:
        return []
    ranges: list[list[int]] = []
    for old, every in olds:
        at = text.find(old)
        while at >= 0 and len(ranges) < MAX_RANGES:
            first = text.count("\n", 0, at) + 1
            ranges.append([first, first + old.rstrip("\n").count("\n")])
            at = text.find(old, at + len(old)) if every else -1
    return _merged(ranges)


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _merged(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def answer(root: str, request: dict[str, Any], ask: Ask | None = None) -> dict[str, Any]:
    """The brief for `request`: from the language server serving `root` when `ask` reaches one,
    else computed here."""
    doc = ask(endpoint_file(root), "notes", request) if ask is not None else None
    if doc is not None:
        return doc
    from pathlib import Path  # noqa: PLC0415

    from engram.memory import open_memories  # noqa: PLC0415
    from engram.memory.briefs import notes_request  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    return notes_request(open_memories(Store(Path(root))), request, quick=True)


def respond(payload: dict[str, Any], ask: Ask | None = None) -> str:
    """What the hook prints for `payload`: the hook output JSON, or "" to say nothing."""
    found = request_of(payload)
    if found is None:
        return ""
    doc = answer(*found, ask=ask)
    text = doc.get("text") if isinstance(doc, dict) else None
    if not text:
        return ""
    import json  # noqa: PLC0415

    return json.dumps({"hookSpecificOutput": {"hookEventName": payload["hook_event_name"],
                                              "additionalContext": text}}) + "\n"
