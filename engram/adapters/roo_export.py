"""Roo Code's markdown export of a task ("Export task": `roo_task_<date>.md`), which its forks
write too (Kilo Code's `kilo_code_task_<date>.md`, IBM Bob's `bob_task_<date>.md`) and Cline
(`cline_task_<date>.md`). Projects commit them.

The export is the task's conversation (`api_conversation_history`) as markdown: each message
`**User:**` or `**Assistant:**`, a blank line, its blocks joined by newlines; messages apart by
`---` lines. A block is its text, `[Reasoning]` and the text, `[Tool Use: NAME]` and the tool's
parameters one per line (`Path: …`, `Diff: …`: the name with its first letter upper-cased, a
value that spans lines running on), or a tool's result, `[Tool]` (`[Tool (Error)]` when it failed)
and its text. Older Roo Code wrote its tool uses as XML in the assistant's text and each result
as `[apply_diff for 'path'] Result:` text; both are read as the task folder's are (cline.py).

Here the export is turned back into the conversation's messages, which the task reader reads as
it reads a task folder: apply_diff blocks placed by the session's own numbered reads, results'
`{"operation":"modified"}` as successes, errors as failed edits. What the export loses: the
message times, except the ones its environment details name (`Current time in ISO 8601 UTC
format: …`, Roo Code 3.2x and later: each assistant message takes the time of the user message
that brought its tools' results, when they had run); the task's id (the session is named by the
time of its first message, else the file's name); and which fork wrote it, but by the file's name.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Final

# The first message may follow a few stray characters typed into the file (a committed IBM Bob
# export starts `22**User:**`): the rest of the file still says what it is.
_HEAD: Final = re.compile(rb"\A\s*[^\n*]{0,8}\*\*User:\*\*\r?\n")
_MESSAGE: Final = re.compile(r"(?:\A\s*[^\n*]{0,8}|\n---\n\n)\*\*(User|Assistant):\*\*\n\n")
_TOOL_USE: Final = re.compile(r"^\[Tool Use: ([\w.:-]+)\]$")
_TOOL_RESULT: Final = re.compile(r"^\[(Tool|\w+)( \(Error\))?\]$")
_TOOL_NAME: Final = re.compile(r"^[a-z]+(?:_[a-z]+)+$")  # a result headed by its tool's name: `[read_file]`
_PARAM: Final = re.compile(r"^([A-Z][A-Za-z0-9]*(?:_[a-z0-9]+)*): ?(.*)$")
_NOW: Final = re.compile(r"Current time in ISO 8601 UTC format: (\S+)")
# Roo Code's tool parameters (lower-cased first letter). A parameter whose value spans lines (a
# diff, a file's content) runs to the end of the tool use: its lines are not read as parameters,
# but for a scalar one after it (write_to_file's `line_count`).
_PARAMS: Final = frozenset({
    "path", "diff", "content", "line_count", "mode", "offset", "limit", "indentation", "args", "regex",
    "file_pattern", "command", "cwd", "question", "follow_up", "result", "todos", "recursive", "search",
    "replace", "start_line", "end_line", "use_regex", "ignore_case", "files", "query", "directory_prefix",
    "server_name", "tool_name", "arguments", "uri", "message", "reason", "slug", "patch", "line",
    "old_string", "new_string", "file_path", "expected_replacements", "timeout", "image", "prompt"})
_SPANNING: Final = frozenset({"diff", "content", "result", "patch", "command", "question", "message", "todos",
                              "old_string", "new_string", "search", "replace", "prompt"})
_TAIL_PARAMS: Final = frozenset({"line_count", "start_line", "end_line", "use_regex", "ignore_case"})
PREFIXES: Final = {"kilo_code_task_": "Kilo Code", "bob_task_": "IBM Bob", "cline_task_": "Cline",
                   "roo_task_": "Roo Code"}


def is_export(head: bytes) -> bool:
    """A task exported as markdown: it starts with the user's message, and holds the assistant's
    reply with a tool use or the environment details Roo Code and Cline send."""
    return bool(_HEAD.match(head)) and b"**Assistant:**" in head and (
        b"<environment_details>" in head or b"[Tool Use: " in head or b"] Result:" in head)


def exported_by(path: Path) -> str | None:
    """The agent whose export this is, by its file's name (the content does not say); people
    rename exports with a prefix of their own (`2-build-app-kilo_code_task_aug-13-2025_….md`)."""
    return next((who for prefix, who in PREFIXES.items() if prefix in path.name.lower()), None)


def messages(text: str) -> list[dict[str, Any]]:
    """The conversation an export was written from: `{role, content: [blocks], ts}` as in a task
    folder's `api_conversation_history.json` (`ts`: epoch milliseconds, when the export says)."""
    text = text.replace("\r\n", "\n")
    heads = list(_MESSAGE.finditer(text))
    out: list[dict[str, Any]] = []
    for i, m in enumerate(heads):
        body = text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        body = body[:-2] if body.endswith("\n\n") else body.rstrip("\n")
        role = m.group(1).lower()
        blocks = _assistant_blocks(body) if role == "assistant" else _user_blocks(body)
        msg: dict[str, Any] = {"role": role, "content": blocks}
        if role == "user" and (ms := _now(body)) is not None:
            msg["ts"] = ms
        out.append(msg)
    for i, msg in enumerate(out):  # a reply: when the results of its tools came back (the last: the time before)
        after = out[i + 1] if i + 1 < len(out) else out[i - 1] if i else {}
        if msg["role"] == "assistant" and "ts" in after:
            msg["ts"] = after["ts"]
    return out


def _now(body: str) -> int | None:
    m = _NOW.search(body)
    if m is None:
        return None
    try:
        return int(datetime.fromisoformat(m.group(1)).timestamp() * 1000)
    except ValueError:
        return None


def _assistant_blocks(body: str) -> list[dict[str, Any]]:
    """An assistant message's blocks: text, reasoning, and tool uses with their parameters."""
    blocks: list[dict[str, Any]] = []
    lines: list[str] = []
    kind: tuple[str, str] = ("text", "")

    def close() -> None:
        chunk = "\n".join(lines)
        if kind[0] == "tool_use":
            blocks.append({"type": "tool_use", "name": kind[1], "input": _params(lines), "id": None})
        elif chunk.strip():
            blocks.append({"type": kind[0], "text": chunk})

    for line in body.split("\n"):
        m = _TOOL_USE.match(line)
        if m or line == "[Reasoning]":
            close()
            lines, kind = [], ("tool_use", m.group(1)) if m else ("reasoning", "")
        else:
            lines.append(line)
    close()
    return blocks


def _params(lines: list[str]) -> dict[str, str]:
    """A tool use's parameters, `Name: value` lines; a value runs on over the lines that are not
    a parameter's, and a spanning one (a diff) to the end but for a scalar parameter after it."""
    out: dict[str, list[str]] = {}
    key: str | None = None
    for line in lines:
        m = _PARAM.match(line)
        name = m.group(1)[0].lower() + m.group(1)[1:] if m else ""
        spanning = key in _SPANNING
        if m and name in _PARAMS and (not spanning or name in _TAIL_PARAMS):
            key = name
            out[key] = [m.group(2)]
        elif key is not None:
            out[key].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _user_blocks(body: str) -> list[dict[str, Any]]:
    """A user message's blocks: tool results (`[Tool]` and its text), the environment details,
    and the rest as text (an XML-protocol result `[x for 'path'] Result:` stays text, as it was)."""
    blocks: list[dict[str, Any]] = []
    lines: list[str] = []
    kind: tuple[str, bool] = ("text", False)

    def close() -> None:
        chunk = "\n".join(lines)
        if kind[0] == "tool_result":
            blocks.append({"type": "tool_result", "content": chunk, "is_error": kind[1], "tool_use_id": None})
        elif chunk.strip():
            blocks.append({"type": "text", "text": chunk})

    for line in body.split("\n"):
        m = _TOOL_RESULT.match(line)
        m = m if m and (m.group(1) == "Tool" or _TOOL_NAME.match(m.group(1))) else None
        if m or line == "<environment_details>":
            close()
            lines, kind = ([], ("tool_result", bool(m.group(2)))) if m else ([line], ("text", False))
        else:
            lines.append(line)
    close()
    return blocks
