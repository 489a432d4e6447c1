"""Event kinds as small integers in the index, and the text each kind contributes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import apsw

from engram.adapters.sniff import BEGIN_PATCH
from engram.index.sql import int_array
from engram.tape import events as E

# Not an event kind: the lines a code.edit held without changing them (`carried_runs`), indexed
# as fragments at the edit's offset, after the fragments of the regions it changed.
CODE_CARRIED: Final = "code.carried"
KIND_NO: Final = {E.MSG_IN: 1, E.MSG_OUT: 2, E.TOOL_CALL: 3, E.TOOL_RESULT: 4, E.CODE_READ: 5, E.CODE_EDIT: 6,
                  E.SPAN_LINK: 7, CODE_CARRIED: 8}
KIND_NAME: Final = {v: k for k, v in KIND_NO.items()}

# What `event_text` and `edit_texts` give the index. An index keeps the version it was first
# filled with (until `engram reindex`): tapes indexed later are read the new way, earlier ones
# the old way, and ingest says so. Bump it when a change alters what an event is indexed as.
# 1: every index filled before the version was kept. 2: a Codex apply_patch call is read as
# the code it carries (e7c100e); an edit of separate regions as those regions (1a16413);
# Codex agent messages are tape events (860fa69; a re-ingest captures them). 3: an edit is its
# changed lines only, a whole-file Write too, its lineage is looked up hunk by hunk, and the
# lines it held unchanged are a `code.carried` fragment. 4: each request's first line is kept
# (`requests`, schema 13), so blame names it without reading the tape.
TEXT_VERSION: Final = 4


def kinds_of(db: apsw.Connection, ids: Iterable[int]) -> dict[int, int]:
    """Fragment id → kind number, for the fragments among `ids` that the index holds (a one-off
    query reads its own rows; `memo.fragment_kinds` keeps a copy for a process that asks again)."""
    ids = list(ids)
    return dict(db.execute("SELECT id, kind FROM fragments WHERE id IN carray(?)", (int_array(ids),))) if ids else {}

# Harness-injected user-role text: notifications, reminders, slash-command wrappers, caveats.
_INJECTED = re.compile(r"^\s*(<[a-z][a-z0-9_-]*[ >]|Caveat:|\[Request interrupted)", re.I)

#: A request of fewer words than this ("continue", "yes, go on") says little on its own: the story
#: also gives the last longer one before it.
SHORT_REQUEST_WORDS: Final = 4
REQUEST_LINE_CHARS: Final = 200  # a request's first line as the index keeps it (`request_line`)


def is_request(ev: dict[str, Any]) -> bool:
    """A person's request: a user message that is not harness-injected context or another agent's
    message (`sender`; `agent`: the prompt a parent agent gave its subagent, which must not stand
    as the request of the parent's own edits after it)."""
    if (ev.get("kind") != E.MSG_IN or ev.get("is_meta") or ev.get("injected") or ev.get("compact_summary")
            or ev.get("sender") or ev.get("agent")):
        return False
    t = ev.get("text")
    return isinstance(t, str) and bool(t.strip()) and not _INJECTED.match(t)


def request_line(ev: dict[str, Any]) -> tuple[str, bool] | None:
    """A request's first non-blank line (at most REQUEST_LINE_CHARS) and whether it is of
    SHORT_REQUEST_WORDS words or more; None for an event that is no request (`is_request`).
    What blame names an edit by, kept in the index (`requests`) so it reads no tape."""
    if not is_request(ev):
        return None
    text = ev["text"]
    line = next((s for m in _LINE.finditer(text) if (s := m.group().strip())), "")
    line = line if len(line) <= REQUEST_LINE_CHARS else line[:REQUEST_LINE_CHARS - 1] + "…"
    return line, has_words(text, SHORT_REQUEST_WORDS)


_LINE = re.compile(r"[^\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")  # (str.splitlines' breaks)
_WORD = re.compile(r"\S+")


def has_words(text: str, n: int) -> bool:
    """Does `text` hold `n` words or more? Without splitting all of it: `len(text.split())` of an
    8 MiB message (a plain-text session's long line) made 1.7 million strings, 92 MiB, the peak of
    its ingest (bench/ingest_memory.py)."""
    return sum(1 for _ in itertools.islice(_WORD.finditer(text), n)) >= n


# Harness-injected text that is the same in every session: never evidence of continuity.
_BOILERPLATE = re.compile(
    r"<(system-reminder|environment_context|user_instructions|INSTRUCTIONS|command-[a-z-]+|local-command-[a-z]+)>"
    r".*?</\1>", re.S)


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def event_text(ev: dict[str, Any]) -> str:
    """The text of an event that is fingerprinted (objects already resolved)."""
    kind = ev.get("kind")
    if kind in (E.MSG_IN, E.MSG_OUT):
        t = ev.get("text")
        return t if isinstance(t, str) else ""
    if kind == E.TOOL_CALL:
        parts: list[str] = []
        _strings(ev.get("input"), parts)
        text = "\n".join(parts)
        if BEGIN_PATCH not in text:  # no envelope in any part: patch_text would return each as it is
            return text
        from engram.adapters.apply_patch import patch_text  # noqa: PLC0415 - ~6 ms of imports, for Codex's calls

        return "\n".join(map(patch_text, parts))
    if kind == E.TOOL_RESULT:
        out = ev.get("stdout") if isinstance(ev.get("stdout"), str) else ""
        err = ev.get("stderr") if isinstance(ev.get("stderr"), str) else ""
        return out + ("\n" + err if err else "")
    if kind == E.CODE_READ:
        t = ev.get("text")
        return t if isinstance(t, str) else ""
    if kind == E.CODE_EDIT:
        return edit_texts(ev)[1]
    if kind == E.SPAN_LINK:
        return str(ev.get("note") or "")
    return ""


#: Tools whose call holds the whole new file. A tape written before edits kept their `context`
#: (see `carried_runs`) says what such an edit carried only through its hunks: the lines between
#: them.
WHOLE_FILE_TOOLS: Final = frozenset({"Write"})


@dataclass(frozen=True, slots=True)
class Hunk:
    """One changed region of a code.edit: the lines it removed and those it wrote there, with
    their ranges in the file before and after (None when the edit has no ranges)."""

    before: str
    after: str
    before_range: list[int] | None
    after_range: list[int] | None


def line_range(value: Any) -> list[int] | None:
    """A [first, last] range of an event, or None when it is not one."""
    ok = isinstance(value, list) and len(value) == 2 and all(isinstance(x, int) for x in value)
    return list(value) if ok else None


def edit_hunks(ev: dict[str, Any]) -> list[Hunk]:
    """The changed regions of a code.edit, each with its own text and ranges: its `hunks` when it
    changed separate regions, else the whole edit as one.

    An edit's texts run from its first change to its last (or hold its changes one after another
    when the adapter did not know the file): the lines between its hunks are not its writing.
    Indexed as such, a whole-file Write or a patch touching lines 10 and 900 of a file held the
    lines between as its own, matched every span there in full, and linked to every earlier edit
    of them (savekirk/session-bridge: a later Codex session's two-hunk patch answered first, as
    the writer, for code another session wrote). An edit whose texts fit neither layout is one
    region."""
    before, after = ev.get("before_text"), ev.get("after_text")
    before, after = (before if isinstance(before, str) else ""), (after if isinstance(after, str) else "")
    whole = [Hunk(before, after, line_range(ev.get("before_range")), line_range(ev.get("after_range")))]
    hunks = ev.get("hunks")
    if not isinstance(hunks, list) or len(hunks) < 2:
        return whole
    quads = [[int(x) for x in h] for h in hunks
             if isinstance(h, list) and len(h) == 4 and all(isinstance(x, int) for x in h)]
    if len(quads) != len(hunks) or any(q[1] < q[0] - 1 or q[3] < q[2] - 1 for q in quads):
        return whole
    olds = _split_regions(before, line_range(ev.get("before_range")), [q[:2] for q in quads])
    news = _split_regions(after, line_range(ev.get("after_range")), [q[2:] for q in quads])
    if olds is None or news is None:
        return whole
    return [Hunk(o, n, q[:2], q[2:]) for o, n, q in zip(olds, news, quads)]


def _split_regions(text: str, rng: list[int] | None, parts: list[list[int]]) -> list[str] | None:
    """The text of each of `parts` (line ranges) in `text`, which holds either lines `rng` of the
    file or the parts' lines one after another; None when it holds neither."""
    lines = _lines(text)
    sizes = [last - first + 1 for first, last in parts]
    if rng is not None and len(lines) == rng[1] - rng[0] + 1 and all(
            rng[0] <= first and last <= rng[1] for first, last in parts if last >= first):
        return ["".join(lines[first - rng[0]:last - rng[0] + 1]) for first, last in parts]
    if len(lines) == sum(sizes):
        out, at = [], 0
        for n in sizes:
            out.append("".join(lines[at:at + n]))
            at += n
        return out
    return None


def _lines(text: str) -> list[str]:
    """`text`'s lines with their newlines, split at newlines only (as the adapters split files)."""
    out = [line + "\n" for line in text.split("\n")]
    out[-1] = out[-1][:-1]
    return out if out[-1] else out[:-1]


def edit_texts(ev: dict[str, Any]) -> tuple[str, str]:
    """The text a code.edit removed and the text it wrote: its changed regions' lines only
    (`edit_hunks`), one region after another."""
    hunks = edit_hunks(ev)
    return "".join(h.before for h in hunks), "".join(h.after for h in hunks)


def carried_runs(ev: dict[str, Any], hunks: list[Hunk] | None = None) -> list[tuple[int, int, str]]:
    """The lines a code.edit held without changing them, as runs of consecutive lines of the file
    after it: (first line, last line, text). A deletion does not end a run (nothing of it is left
    in the file), a written line does.

    They come from its `context` (each hunk's context lines; a whole-file Write, every line it
    kept); an edit recorded before `context` was, from a whole-file tool, carried the lines
    between its hunks. Such lines are evidence that the session had the code in hand, as a read
    is, never that it wrote them: a later session that rewrote a file and kept most of it, or
    patched beside a block, came first as the block's writer."""
    hunks = edit_hunks(ev) if hunks is None else hunks
    if any(h.after_range is None for h in hunks):
        return []  # where its changes are is not known, nor then what it kept
    held = _context_lines(ev)
    if held is None:
        held = _between_hunks(ev, hunks)
    if not held:
        return []
    changed: set[int] = set()
    for h in hunks:
        changed.update(range(h.after_range[0], h.after_range[1] + 1))  # type: ignore[index]
    runs: list[tuple[int, int, str]] = []
    for line, text in held:
        if line in changed:
            continue
        if runs and runs[-1][1] == line - 1:
            first, _, body = runs[-1]
            runs[-1] = (first, line, body + text)
        else:
            runs.append((line, line, text))
    return runs


def _context_lines(ev: dict[str, Any]) -> list[tuple[int, str]] | None:
    """(line, text) of each line of an edit's `context`; None when it has none (or one whose text
    does not hold its ranges' lines)."""
    ranges, text = ev.get("context"), ev.get("context_text")
    if not isinstance(ranges, list) or not isinstance(text, str):
        return None
    spans = [line_range(r) for r in ranges]
    if any(r is None or r[1] < r[0] for r in spans):
        return None
    lines = _lines(text)
    numbers = [n for r in spans if r is not None for n in range(r[0], r[1] + 1)]
    if len(numbers) != len(lines) or len(set(numbers)) != len(numbers):
        return None
    return sorted(zip(numbers, lines))


def _between_hunks(ev: dict[str, Any], hunks: list[Hunk]) -> list[tuple[int, str]]:
    """The lines between an old whole-file edit's hunks (see `carried_runs`)."""
    rng = line_range(ev.get("after_range"))
    after = ev.get("after_text")
    if ev.get("tool") not in WHOLE_FILE_TOOLS or len(hunks) < 2 or rng is None or not isinstance(after, str):
        return []
    lines = _lines(after)
    if len(lines) != rng[1] - rng[0] + 1:
        return []
    return [(rng[0] + i, line) for i, line in enumerate(lines)]


def conversational_text(ev: dict[str, Any]) -> str:
    """Text for continuation detection: messages without harness boilerplate."""
    if ev.get("kind") not in (E.MSG_IN, E.MSG_OUT) or ev.get("is_meta") or ev.get("injected"):
        return ""
    if ev.get("block") == "thinking":
        return ""
    return _BOILERPLATE.sub(" ", event_text(ev))


def fragment_file(ev: dict[str, Any]) -> Any:
    """The file a code event is indexed under: its `file`, except for a move in a tape written
    before moves were filed under their destination (`file` the source, `to_file` the
    destination), whose text and `after_range` are the destination's."""
    if ev.get("kind") == E.CODE_EDIT and ev.get("op") == "move" and isinstance(ev.get("to_file"), str) \
            and not ev.get("from_file"):
        return ev["to_file"]
    return ev.get("file")


def fragment_lines(ev: dict[str, Any]) -> tuple[int | None, int | None]:
    r = ev.get("after_range") if ev.get("kind") == E.CODE_EDIT else ev.get("range")
    if isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r):
        return r[0], r[1]
    return None, None
