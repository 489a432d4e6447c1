"""The story around one touch, for a person or an agent: what was asked, what was said, what the
edit changed, what happened next.

Read from the tape around the fragment: the person's request that led to it (the last real
`msg.in` before it), the assistant's words right before and right after, the result of the next
tool run, and for an edit the span's lines before → after as a small unified diff. Raw text,
trimmed; nothing is summarised. Every part says at which event it is, so `engram view
TAPE@OFFSET` shows it whole.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from engram.index.kinds import SHORT_REQUEST_WORDS, has_words, is_request
from engram.query.clip import CONTEXT_LINES, SpanWords, clip_message, locate
from engram.tape import events as E

if TYPE_CHECKING:
    from engram.tape.reader import TapeReader

LOOK_BACK: Final = 5000  # the request may be far back: a long session asks once, works for hours
LOOK_AHEAD: Final = 60
_CHUNK: Final = 256  # events read at a time when looking back
#: Characters of the request, and of the words before and after, an explain answer keeps.
STORY_CHARS: Final = 400
_EDIT_TOOLS: Final = ("Edit", "Write", "MultiEdit", "Read", "NotebookEdit", "apply_patch", "TodoWrite")


@dataclass
class Story:
    request: str | None
    said_before: str | None
    said_after: str | None
    next_result: str | None
    next_result_tool: str | None
    next_result_error: bool
    request_at: int | None = None
    said_before_at: int | None = None
    said_after_at: int | None = None
    next_result_at: int | None = None
    # When the request is a word or three ("continue", "yes, do it"), the last longer one before it.
    earlier_request: str | None = None
    earlier_request_at: int | None = None


def trim(text: str | None, limit: int) -> str | None:
    if not text:
        return None
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _said(ev: dict[str, Any]) -> bool:
    return ev.get("kind") == E.MSG_OUT and ev.get("block") != "thinking" and isinstance(ev.get("text"), str)


def _last_before(reader: TapeReader, offset: int, kind: str, ok: Callable[[dict[str, Any]], bool]
                 ) -> tuple[int, dict[str, Any]] | None:
    """The last event of `kind` before `offset` (LOOK_BACK at most) for which `ok` holds.

    Looks back a chunk at a time and parses only the lines of that kind (a tape line is canonical
    JSON with sorted keys, so `"kind":"msg.in"` is in it verbatim): a request thousands of events
    back took 20-35 ms when every event was parsed and its objects read."""
    from engram.tape.objects import resolve  # noqa: PLC0415

    marker = b'"kind":"' + kind.encode() + b'"'
    floor, stop = max(1, offset - LOOK_BACK), offset
    while stop > floor:
        start = max(floor, stop - _CHUNK)
        lines = list(reader.raw_lines(start, stop))
        for i in range(len(lines) - 1, -1, -1):
            if marker in lines[i]:
                ev = E.loads(lines[i])
                if reader.objects_dir is not None:
                    ev = resolve(ev, reader.objects_dir)
                if ok(ev):
                    return start + i, ev
        stop = start
    return None


def _substantive(ev: dict[str, Any]) -> bool:
    return is_request(ev) and has_words(ev["text"], SHORT_REQUEST_WORDS)


def touch_story(reader: TapeReader, offset: int, limit: int = 400) -> Story:
    request = _last_before(reader, offset, E.MSG_IN, is_request)
    earlier = None
    if request is not None and not _substantive(request[1]):
        earlier = _last_before(reader, request[0], E.MSG_IN, _substantive)
    window = list(reader.window(offset, 0, LOOK_AHEAD))
    # The words around the touch are its own agent's: a subagent's (`agent`) interleaved with
    # the parent's are about other work.
    agent = window[0][1].get("agent") if window else None

    def own_words(ev: dict[str, Any]) -> bool:
        return _said(ev) and ev.get("agent") == agent

    before = _last_before(reader, offset, E.MSG_OUT, own_words)
    after = window[1:]
    said_after = next(((off, ev) for off, ev in after if own_words(ev)), None)
    result = next(((off, ev) for off, ev in after if ev.get("kind") == E.TOOL_RESULT
                   and ev.get("name") not in _EDIT_TOOLS), None)
    out = None
    if result is not None:
        out = "\n".join(x for x in (result[1].get("stdout"), result[1].get("stderr"))
                        if isinstance(x, str) and x.strip())
    return Story(trim(request[1]["text"], limit) if request else None,
                 trim(before[1]["text"], limit) if before else None,
                 trim(said_after[1]["text"], limit) if said_after else None,
                 trim(out, limit), result[1].get("name") if result else None,
                 bool(result[1].get("is_error")) if result else False,
                 request[0] if request else None, before[0] if before else None,
                 said_after[0] if said_after else None, result[0] if result else None,
                 trim(earlier[1]["text"], limit) if earlier else None, earlier[0] if earlier else None)


def story_json(story: Story, span: SpanWords, limit: int = STORY_CHARS) -> dict[str, Any]:
    """The parts of a story an explain answer carries: each text with the event it is at, the
    words trimmed around what matches the span (a request keeps its head)."""
    def part(text: str | None, at: int | None) -> dict[str, Any] | None:
        if text is None or at is None:
            return None
        return {"offset": at, "text": clip_message(text, span, limit)[0]}

    out: dict[str, Any] = {"earlier_request": part(story.earlier_request, story.earlier_request_at),
                           "request": part(story.request, story.request_at),
                           "said_before": part(story.said_before, story.said_before_at),
                           "said_after": part(story.said_after, story.said_after_at)}
    if story.next_result_tool is not None and story.next_result_at is not None:
        out["next_run"] = {"offset": story.next_result_at, "tool": story.next_result_tool,
                           "failed": story.next_result_error,
                           "output": clip_message(story.next_result or "", span, limit)[0]}
    return {k: v for k, v in out.items() if v is not None}


# --------------------------------------------------------------------------- the edit itself


def edit_change(ev: dict[str, Any], lines: list[tuple[int, int]], span: SpanWords,
                context: int = CONTEXT_LINES) -> dict[str, Any] | None:
    """What a code.edit did to the span: the changed regions (`lines`: the after-ranges of the
    fragments of it that matched) as a unified diff, kept to the span's lines and `context`
    lines around them, with the cuts marked. None when the event holds no text."""
    from engram.index.kinds import edit_hunks  # noqa: PLC0415

    hunks = edit_hunks(ev)
    chosen = [h for h in hunks if h.after_range is not None
              and any(a <= h.after_range[1] and h.after_range[0] <= b for a, b in lines)] or hunks
    parts = [_hunk_diff(h.before, h.after, h.before_range, h.after_range, span, context) for h in chosen]
    diff = "\n".join(p for p in parts if p)
    if not diff:
        return None
    return {"file": ev.get("file"), "op": ev.get("op"), "before_range": ev.get("before_range"),
            "after_range": ev.get("after_range"), "diff": diff}


Row = tuple[str, str, int, int]  # tag (" ", "-", "+"), text, line before, line after (0-based in the hunk)


def _rows(before: list[str], after: list[str]) -> list[Row]:
    rows: list[Row] = []
    sm = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            rows.extend((" ", before[i1 + d], i1 + d, j1 + d) for d in range(i2 - i1))
            continue
        rows.extend(("-", before[i], i, j1) for i in range(i1, i2))
        rows.extend(("+", after[j], i2, j) for j in range(j1, j2))
    return rows


def _hunk_diff(before: str, after: str, before_range: list[int] | None, after_range: list[int] | None,
               span: SpanWords, context: int) -> str:
    """One changed region as unified diff lines (`@@ -a,n +b,m @@` headers with file line
    numbers when known), kept to where the span is in what it wrote (or, when the span is not
    in it, where it is in what it removed; else its first lines)."""
    b_lines, a_lines = before.splitlines(), after.splitlines()
    rows = _rows(b_lines, a_lines)
    if not rows:
        return ""
    where = locate(a_lines, span)
    side = 3
    if where is None:
        where, side = locate(b_lines, span), 2
    if where is None:
        lo, hi, side = 0, span.lines + 2 * context - 1, 3
    else:
        lo, hi = where[0] - context, where[1] + context
    keep = [lo <= r[side] <= hi for r in rows]
    b0 = before_range[0] if before_range else 1
    a0 = after_range[0] if after_range else 1
    out: list[str] = []
    i = 0
    while i < len(rows):
        if not keep[i]:
            j = i
            while j < len(rows) and not keep[j]:
                j += 1
            out.append(f"⋯ {j - i} diff line{'s' if j - i != 1 else ''} cut ⋯")
            i = j
            continue
        j = i
        while j < len(rows) and keep[j]:
            j += 1
        block = rows[i:j]
        olds = [r for r in block if r[0] != "+"]
        news = [r for r in block if r[0] != "-"]
        # (as git writes them: an empty side names the line after which the other side goes)
        ob = (olds[0][2] if olds else block[0][2] - 1) + b0
        nb = (news[0][3] if news else block[0][3] - 1) + a0
        out.append(f"@@ -{ob},{len(olds)} +{nb},{len(news)} @@")
        out.extend(tag + text for tag, text, _, _ in block)
        i = j
    return "\n".join(out)
