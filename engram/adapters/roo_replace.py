"""Roo Code's `search_and_replace` tool (Kilo Code's too), done again on a copy of the file.

The tool replaces every match of a text, or of a JavaScript pattern (`use_regex`), in the whole
file or in a range of its lines (`start_line`, `end_line`), and keeps no file in its result (only
`<operation>modified</operation>`). Where the session holds the file, doing the same replacement
on it gives the file after, and a line diff of the two the edit's lines; this module does only
that, the adapter (engram.adapters.cline) makes the events. The parameters come flat (`<search>`,
`<replace>`, …) or, in some releases, as a list of `operations` (JSON, or `<operation>` elements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

_OPERATION = re.compile(r"<operation>(.*?)</operation>", re.DOTALL)
_PARAM = re.compile(r"<(\w+)>\n?(.*?)\n?</\1>", re.DOTALL)
_JS_REPLACEMENT = re.compile(r"\$([$&])")


@dataclass(frozen=True)
class Replacement:
    """One search and its replacement, as the tool was asked for it."""
    search: str
    replace: str
    regex: bool = False
    ignore_case: bool = False
    start_line: int | None = None
    end_line: int | None = None


def replacements(inp: dict[str, Any]) -> list[Replacement]:
    """The replacements a tool use asked for, in order (none when it names no search text)."""
    ops = inp.get("operations")
    if isinstance(ops, str) and ops.strip():
        try:
            raw = orjson.loads(ops)
        except orjson.JSONDecodeError:
            raw = [dict(_PARAM.findall(body)) for body in _OPERATION.findall(ops)]
    elif isinstance(ops, list):
        raw = ops
    else:
        raw = [inp]
    return [r for r in (_replacement(op) for op in raw if isinstance(op, dict)) if r is not None]


def _replacement(op: dict[str, Any]) -> Replacement | None:
    search, replace = op.get("search"), op.get("replace")
    if not isinstance(search, str) or not search or not isinstance(replace, str):
        return None
    return Replacement(search, replace, _flag(op.get("use_regex")), _flag(op.get("ignore_case")),
                       _line(op.get("start_line")), _line(op.get("end_line")))


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _line(value: Any) -> int | None:
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else None


def replaced(text: str, r: Replacement) -> str | None:
    """`text` after the replacement, as the tool does it: every match, within the lines asked for
    (their text joined by newlines, the lines outside kept as they are). None for a pattern
    (`use_regex`): a transcript's pattern is never run, since one written to backtrack
    (`(a+)+$`) would hold an ingest for hours in Python's `re`, and the file after is then not
    known (no real export measured used one: docs/harnesses.md)."""
    if r.regex:
        return None
    pattern = re.compile(re.escape(r.search), re.IGNORECASE if r.ignore_case else 0)
    if r.start_line is None and r.end_line is None:
        return _sub(pattern, r.replace, text)
    lines = text.split("\n")
    start = max((r.start_line or 1) - 1, 0)
    end = min((r.end_line or len(lines)) - 1, len(lines) - 1)
    target = "\n".join(lines[start:end + 1])
    return "\n".join([*lines[:start], *_sub(pattern, r.replace, target).split("\n"), *lines[end + 1:]])


def _sub(pattern: re.Pattern[str], replace: str, text: str) -> str:
    """JavaScript's `String.replace` with a global search: `$$` and `$&` in the replacement stand
    for `$` and the match; any other `$` is itself."""
    def one(m: re.Match[str]) -> str:
        return _JS_REPLACEMENT.sub(lambda t: "$" if t.group(1) == "$" else m.group(0), replace)
    return pattern.sub(one, text)
