"""Transcript text clipped to what concerns a span: the part of a file read, a tool's output, an
edit or a message that holds the span's code, and a marker saying what was cut.

A window of an explain answer used to carry every event in full: a `Read` of a 500-line file, a
whole-file `Write`, a test run's log. For a 16-line span that was 262 KB of JSON (issue 46), most
of it code the question was not about. Here each long text keeps the lines that hold the span
(found by the span's words, so an edited, shifted or reindented copy is found too) with
CONTEXT_LINES above and below; a text that does not hold the span keeps its first HEAD_LINES;
a long message keeps MESSAGE_CONTEXT characters either side of the matching text, or its head.
Every cut is marked in the text itself (`⋯ lines 1-54 cut ⋯`), and the event names the command
that shows it whole (`engram view TAPE@OFFSET --full`).

Matching here is local and approximate (words, no index): it decides what to show, never what
is evidence.
"""

from __future__ import annotations

import re
from typing import Any, Final

#: Lines kept above and below the lines that hold the span, in a read, an edit or a tool's output.
CONTEXT_LINES: Final = 3
#: A text without the span keeps this many first lines.
HEAD_LINES: Final = 6
#: ... and a kept line longer than this many characters is cut (minified code, a log line).
LINE_CHARS: Final = 300
#: A message (or other prose) longer than this many characters is trimmed ...
MESSAGE_CHARS: Final = 600
#: ... to this many characters either side of the text that matches the span (else its head).
MESSAGE_CONTEXT: Final = 240
#: Fields of an event that are identifiers and content hashes, not transcript: left out of a
#: clipped window (`engram view` shows them).
NOISE: Final = frozenset({"id", "parent", "before_sha", "after_sha", "file_before_sha", "file_after_sha"})

# Words: identifiers and numbers, letters beyond ASCII included but not the arrows, dashes and
# symbols of U+2000-U+303F (a `cat -n` line reads "  12→code").
_WORD = re.compile(r"[A-Za-z_\u00c0-\u1fff\u3040-\U0010ffff][A-Za-z0-9_\u00c0-\u1fff\u3040-\U0010ffff]+"
                   r"|[0-9][0-9A-Za-z_.]+")
_CAT_N = re.compile(r"(?m)^ *[0-9]{1,12}(?:→|\t)")  # a `cat -n` line number, as the index blanks it
_MESSAGES: Final = frozenset({"msg.in", "msg.out", "compact"})


class SpanWords:
    """The span's words (identifiers and numbers of two characters or more) and how many lines it
    has: what a text is searched for."""

    def __init__(self, text: str) -> None:
        self.words = frozenset(_WORD.findall(_CAT_N.sub("", text)))
        self.lines = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
        # A run of lines holds the span when it has at least this share of the span's words: an
        # edited copy keeps most of them (a fifth of tokens renamed on every line leaves ~80%),
        # other code of the same project shares its common names only.
        self.least = max(2, -(-len(self.words) * SHARE_OF_WORDS // 100))


#: The share (percent) of the span's distinct words a run of lines must hold to be where the span is.
SHARE_OF_WORDS: Final = 50


def _words_of(line: str, span: SpanWords) -> frozenset[str]:
    return span.words.intersection(_WORD.findall(line))


def locate(lines: list[str], span: SpanWords) -> tuple[int, int] | None:
    """The first and last line (0-based) of the run of `lines`, as tall as the span, that holds
    most of the span's words; None when none holds SHARE_OF_WORDS of them.

    Words, not k-grams: a set intersection per line runs at C speed, where building k-gram tuples
    in Python took ~6 ms for a 600-line read; what to show needs no more precision than that."""
    if not span.words:
        return None
    found = [_words_of(line, span) for line in lines]
    counts = [len(f) for f in found]
    tall = span.lines
    best, best_at, run = 0, -1, 0
    for i, c in enumerate(counts):
        run += c - (counts[i - tall] if i >= tall else 0)
        if run > best:
            best, best_at = run, i
    if best_at < 0:
        return None
    window = range(max(0, best_at - tall + 1), best_at + 1)
    if len(frozenset().union(*(found[i] for i in window))) < span.least:
        return None
    first = next(i for i in window if counts[i])
    last = next(i for i in reversed(window) if counts[i])
    return first, last


def _cap_line(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + f"… [{len(line) - LINE_CHARS} characters cut]"


def _cut_note(first: int, last: int) -> str:
    return f"⋯ line {first} cut ⋯" if first == last else f"⋯ lines {first}-{last} cut ⋯"


def clip_code(text: str, span: SpanWords, context: int = CONTEXT_LINES) -> tuple[str, bool]:
    """`text` (a file read, an edit, a tool's output) kept to the lines holding the span and
    `context` lines around them, or to its first HEAD_LINES when it does not hold the span; each
    cut marked with its line numbers (1-based, in `text`). Returns the text and whether it was cut."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # (a final newline)
    keep = span.lines + 2 * context
    if len(lines) <= max(keep, HEAD_LINES) + 2 and all(len(x) <= LINE_CHARS for x in lines):
        return text, False
    where = locate(lines, span)
    if where is None:
        a, b = 0, min(len(lines), HEAD_LINES) - 1
    else:
        a, b = max(0, where[0] - context), min(len(lines) - 1, where[1] + context)
    out = [_cut_note(1, a)] if a > 0 else []
    out.extend(_cap_line(x) for x in lines[a:b + 1])
    if b < len(lines) - 1:
        out.append(_cut_note(b + 2, len(lines)))
    clipped = "\n".join(out)
    return clipped, clipped != text


def clip_message(text: str, span: SpanWords, limit: int = MESSAGE_CHARS) -> tuple[str, bool]:
    """A message trimmed to `limit` characters: around the text that matches the span (with
    MESSAGE_CONTEXT characters either side, the match itself cut to `limit`), else its head."""
    if len(text) <= limit:
        return text, False
    found = _matched_chars(text, span)
    if found is None:
        a, b = 0, limit
    else:
        a = max(0, found[0] - MESSAGE_CONTEXT)
        b = min(len(text), max(found[1], found[0] + limit - MESSAGE_CONTEXT) + MESSAGE_CONTEXT)
        if b - a > limit + 2 * MESSAGE_CONTEXT:
            b = a + limit + 2 * MESSAGE_CONTEXT
    a, b = _word_start(text, a), _word_end(text, b)
    head = f"⋯ {a:,} characters cut ⋯ " if a > 0 else ""
    tail = f" ⋯ {len(text) - b:,} characters cut ⋯" if b < len(text) else ""
    return head + text[a:b] + tail, True


def _matched_chars(text: str, span: SpanWords) -> tuple[int, int] | None:
    """Character range of `text` from the first to the last of the span's words in the run of
    lines that holds it (`locate`)."""
    lines = text.split("\n")
    where = locate(lines, span)
    if where is None:
        return None
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    seg_a, seg_b = starts[where[0]], starts[where[1] + 1] - 1
    hits = [m for m in _WORD.finditer(text, seg_a, seg_b) if m.group() in span.words]
    if not hits:
        return seg_a, seg_b
    return hits[0].start(), hits[-1].end()


def _word_start(text: str, i: int) -> int:
    if i <= 0:
        return 0
    j = text.rfind(" ", max(0, i - 40), i)
    return j + 1 if j >= 0 else i


def _word_end(text: str, i: int) -> int:
    if i >= len(text):
        return len(text)
    j = text.find(" ", i, i + 40)
    return j if j >= 0 else i


def clip_event(ev: dict[str, Any], span: SpanWords, more: str, context: int = CONTEXT_LINES) -> dict[str, Any]:
    """One window event with its long texts clipped (`clip_code` / `clip_message`), identifiers
    and hashes left out (NOISE); `more` (the command that shows it whole) under "full" when
    anything was cut."""
    kind = ev.get("kind")
    cut = False

    def clip(value: Any, prose: bool) -> Any:
        nonlocal cut
        if isinstance(value, str):
            if prose or "\n" not in value:
                out, c = clip_message(value, span, MESSAGE_CHARS if prose else LINE_CHARS)
            else:
                out, c = clip_code(value, span, context)
            cut |= c
            return out
        if isinstance(value, dict):
            return {k: clip(v, prose) for k, v in value.items()}
        if isinstance(value, list):
            return [clip(v, prose) for v in value]
        return value

    out: dict[str, Any] = {}
    for key, value in ev.items():
        if key in NOISE:
            continue
        out[key] = clip(value, kind in _MESSAGES and key in ("text", "message"))
    if cut:
        out["full"] = more
    return out
