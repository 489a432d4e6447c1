"""Event kinds as small integers in the index, and the text each kind contributes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

import apsw

from engram.adapters.apply_patch import patch_text
from engram.index.sql import int_array
from engram.tape import events as E

KIND_NO: Final = {E.MSG_IN: 1, E.MSG_OUT: 2, E.TOOL_CALL: 3, E.TOOL_RESULT: 4, E.CODE_READ: 5, E.CODE_EDIT: 6,
                  E.SPAN_LINK: 7}
KIND_NAME: Final = {v: k for k, v in KIND_NO.items()}

# What `event_text` and `edit_texts` give the index. An index keeps the version it was first
# filled with (until `engram reindex`): tapes indexed later are read the new way, earlier ones
# the old way, and ingest says so. Bump it when a change alters what an event is indexed as.
# 1: every index filled before the version was kept. 2: a Codex apply_patch call is read as
# the code it carries (e7c100e); an edit of separate regions as those regions (1a16413);
# Codex agent messages are tape events (860fa69; a re-ingest captures them).
TEXT_VERSION: Final = 2


def kinds_of(db: apsw.Connection, ids: Iterable[int]) -> dict[int, int]:
    """Fragment id → kind number, for the fragments among `ids` that the index holds (a one-off
    query reads its own rows; `memo.fragment_kinds` keeps a copy for a process that asks again)."""
    ids = list(ids)
    return dict(db.execute("SELECT id, kind FROM fragments WHERE id IN carray(?)", (int_array(ids),))) if ids else {}

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


#: Tools whose call holds the whole new file: every line of it is the agent's writing, changed
#: or not, so their edits keep the text from the first change to the last.
WHOLE_FILE_TOOLS: Final = frozenset({"Write"})


def edit_texts(ev: dict[str, Any]) -> tuple[str, str]:
    """The text a code.edit removed and the text it wrote: of an edit that changed separate
    regions (`hunks`), those regions' lines only, as an edit of one region holds — unless its
    tool wrote the whole file (`WHOLE_FILE_TOOLS`).

    Why: the event's texts run from its first change to its last, so a patch touching lines 10
    and 900 of a file held the 890 lines between as its own writing, matched every span there in
    full, and linked to every earlier edit of them (savekirk/session-bridge: a later Codex
    session's two-hunk patch answered first, as the writer, for code another session wrote)."""
    before, after = ev.get("before_text"), ev.get("after_text")
    before, after = (before if isinstance(before, str) else ""), (after if isinstance(after, str) else "")
    hunks = ev.get("hunks")
    if not isinstance(hunks, list) or len(hunks) < 2 or ev.get("tool") in WHOLE_FILE_TOOLS:
        return before, after
    quads = [h for h in hunks if isinstance(h, list) and len(h) == 4]
    return (_regions(before, ev.get("before_range"), [h[:2] for h in quads]),
            _regions(after, ev.get("after_range"), [h[2:] for h in quads]))


def _regions(text: str, rng: Any, parts: list[list[Any]]) -> str:
    """The lines of `text` (lines `rng` of a file) inside the ranges `parts`; `text` itself when
    it does not hold exactly the lines of `rng` (an edit recorded without its file)."""
    if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng)):
        return text
    lines = text.splitlines(keepends=True)
    if len(lines) != rng[1] - rng[0] + 1:
        return text
    out: list[str] = []
    for first, last in parts:
        if isinstance(first, int) and isinstance(last, int):
            out += lines[max(first - rng[0], 0):max(last - rng[0] + 1, 0)]
    return "".join(out)


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
