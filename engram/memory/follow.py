"""Notes' places carried along with an edit of their file instead of resolved again.

Resolving a note whose code changed aligns its tokens (~1.5 ms a note) and, when its code
vanished, searches the repository's other files for it (~0.25 s for a file's vanished notes,
bench/anchors_git.py); a file of a few hundred aged notes costs a second or more. An edit
changes a few lines: a note whose lines it did not reach has the same text as when it was
resolved, so its verdict stands and only its lines move. The rule is the language server's
(engram_server.lsp.notes, the edits an editor sends) and the pre-edit hook's through a running
server (`Followed`, the edit found by a line diff of the text the last resolution was made on):

- a change moves what is below it by the lines it added or removed (`follow_change`);
- a note whose places the change reaches (`touched`, vanished ones included: the change may bring
  their text back), or that it stretched (`moved`), is resolved again;
- so is a vanished note an edit elsewhere may have brought its code back with (`needs_resolving`:
  every one when the edits' text is not at hand, as in the editor; for the hook, those whose
  anchor shares a token k-gram with the lines the edits put in).

The whole file is resolved again at least every FULL_S, and whenever the store's memories changed
(`Memories.stamp`).
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from engram.memory.anchors import unpack_fingerprints
from engram.memory.places import Place

log = logging.getLogger(__name__)

#: A file's notes are resolved whole at least this often; in between, only those an edit touched
#: and the vanished ones are. This is a safety net: another file that code moved into, or git's
#: history, may have changed meanwhile.
FULL_S = 300.0
#: Lines of the new text either side of a change whose k-grams count as added (`added_kgrams`):
#: a k-gram is DEFAULT_K (4) tokens, and a few blank lines may lie between.
CONTEXT_LINES = 6
#: The files whose last resolution a `Followed` keeps (the hook asks about the file being edited).
KEPT_FILES = 16


class Span(Protocol):
    start: int  # 0-based, inclusive
    end: int
    dirty: bool


S = TypeVar("S", bound=Span)


@dataclass
class _Lines:
    start: int
    end: int
    dirty: bool = False


def follow_change(regions: list[S], start_line: int, end_line: int, new_text: str, start_char: int = 1,
                  end_char: int = 1) -> list[S]:
    """The spans after the text between two positions (0-based lines) became `new_text`: those
    below the change move by the lines it added or removed, those it touches are marked dirty
    (an editor's evidence regions, engram_server.documents, and notes' places, `moved`)."""
    delta = new_text.count("\n") - (end_line - start_line)
    if start_char == 0 and end_char == 0 and (new_text == "" or new_text.endswith("\n")):
        # Whole lines inserted or removed before `end_line`: that line's own text is untouched.
        if end_line == start_line:
            start_line -= 1  # pure insertion: nothing at or after start_line is touched
        end_line -= 1
        if end_line < start_line:
            for r in regions:
                if r.start >= start_line + 1:
                    r.start += delta
                    r.end += delta
            return regions
    kept: list[S] = []
    for r in regions:
        if r.end < start_line:
            kept.append(r)
        elif r.start > end_line:
            r.start += delta
            r.end += delta
            kept.append(r)
        else:  # the change touches the span's own text
            r.dirty = True
            r.end = max(r.start, r.end + delta)
            if r.start > start_line and delta < 0:
                r.start = max(start_line, r.start + delta)
            kept.append(r)
    return kept


def touched(places: Sequence[Place], start0: int, end0: int) -> bool:
    """Whether a change of 0-based lines start0-end0 reaches one of the places (vanished ones
    included: the change may bring their text back)."""
    return any(p.start - 1 <= end0 and start0 <= p.end - 1 for p in places)


def needs_resolving(places: Sequence[Place], added: AbstractSet[int] | None = None) -> bool:
    """A note not touched by the edits since its resolution that is resolved again all the same:
    its code vanished and an edit may have brought it back — `added`, the token k-grams the edits
    put in (`added_kgrams`), holds one of its anchor's fingerprints; any vanished one when the
    edits' text is not known (None). Resolving a vanished note searches the repository's other
    files (~6 ms a note, most of a hook's answer on a file with a few dozen)."""
    for p in places:
        if p.state != "vanished":
            continue
        if added is None:
            return True
        try:
            fingerprints = unpack_fingerprints(p.anchor.get("fingerprints") or "")
        except ValueError:
            return True
        if not added.isdisjoint(fingerprints):
            return True
    return False


def moved(places: list[Place], start_line: int, end_line: int, text: str, start_char: int = 1,
          end_char: int = 1) -> tuple[list[Place], bool]:
    """The places (1-based lines) after the change `follow_change` describes, and whether it marked
    one of them dirty (a place ending on the line above whole lines inserted is stretched over
    them: its lines are then no longer its code's, and it is resolved again like a touched one).
    A vanished place stays where its anchor was, as a resolution shows it."""
    if all(p.end - 1 < start_line - 1 for p in places):
        return places, False  # wholly above the change (and the line before it)
    spans = follow_change([_Lines(p.start - 1, p.end - 1) for p in places], start_line, end_line, text,
                          start_char, end_char)
    live = [(p, s) for p, s in zip(places, spans) if p.state != "vanished"]
    return ([p if p.state == "vanished" else replace(p, start=s.start + 1, end=s.end + 1) for p, s in zip(places, spans)],
            any(s.dirty for _, s in live))


def line_changes(old: str, new: str) -> list[tuple[int, int, str]]:
    """`new` as whole-line changes of `old`, (first 0-based line, line after the last, the lines put
    there), bottom first: each one's lines are still `old`'s when it is applied after those below
    it, as an editor's changes are applied one after another. Empty when the texts are equal."""
    a, b = _lines(old), _lines(new)
    return [(i1, i2, "".join(b[j1:j2])) for i1, i2, j1, j2 in _hunks(a, b)][::-1]


def added_kgrams(old: str, new: str) -> set[int]:
    """The token k-gram values `new` has that hold a token of the lines it put in place of `old`'s
    (those across their edges included: the last DEFAULT_K - 1 tokens of up to CONTEXT_LINES lines
    above, the first of those below): what a vanished note's code would need to be back (its
    anchor's fingerprints are some of these values)."""
    from engram.anchor import definition  # noqa: PLC0415

    k = definition.DEFAULT_K
    b = _lines(new)
    out: set[int] = set()
    for _, _, j1, j2 in _hunks(_lines(old), b):
        if j2 > j1:
            above = definition.token_hashes("".join(b[max(0, j1 - CONTEXT_LINES):j1]))[-(k - 1):]
            below = definition.token_hashes("".join(b[j2:j2 + CONTEXT_LINES]))[:k - 1]
            hashes = above + definition.token_hashes("".join(b[j1:j2])) + below
            out.update(definition.kgram_values(hashes, k))
    return out


def _hunks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The line ranges (a's i1-i2 became b's j1-j2) where the two differ, top first."""
    from engram.adapters.unified import common_ends  # noqa: PLC0415

    if a == b:
        return []
    head, tail = common_ends(a, b)
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    return [(head + i1, head + i2, head + j1, head + j2)
            for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
            if op != "equal"]


def _lines(text: str) -> list[str]:
    """The text's lines, each with its newline (a last line without one is a whole line too)."""
    return (text if not text or text.endswith("\n") else text + "\n").splitlines(keepends=True)


@dataclass(frozen=True)
class _Kept:
    stamp: Any  # the store's memories (`Memories.stamp`)
    text: str  # the file's text the places are for
    places: dict[int, list[Place]]  # memory no -> its places in the file
    whole_at: float  # when the file's notes were last resolved whole (time.monotonic)


class Followed:
    """The last resolution of a few files' notes, each with the text it was made on: the next
    one for a changed text resolves only the notes the change touched and the vanished ones it
    may have brought back, and moves the others (the module's rule). A long-running process's (the language server answering
    an agent's hooks); its store work runs on one thread, so no lock."""

    def __init__(self) -> None:
        self._files: dict[str, _Kept] = {}

    def places(self, file: str, text: str | None, stamp: Any, nos: list[int],
               resolve: Callable[[list[int]], dict[int, list[Place]]]) -> dict[int, list[Place]]:
        """The places in `file` of memories `nos` for its `text` (None: unreadable, resolved, not
        kept): `resolve(nos)` for those the module's rule says, the kept ones moved for the rest."""
        kept = self._files.pop(file, None)
        now = time.monotonic()
        if text is None or kept is None or kept.stamp != stamp or now - kept.whole_at >= FULL_S:
            found = resolve(nos)
            whole_at = now
        else:
            carried = _carried(kept, text)
            todo = [no for no in nos if no not in carried]
            found = {no: carried[no] for no in nos if no in carried}
            if todo:
                found.update(resolve(todo))
            whole_at = kept.whole_at
            log.debug("%s: %d notes moved along, %d resolved", file, len(found) - len(todo), len(todo))
        if text is not None:
            self._files[file] = _Kept(stamp, text, {no: found.get(no, []) for no in nos}, whole_at)
            while len(self._files) > KEPT_FILES:
                self._files.pop(next(iter(self._files)))
        return found


def _carried(kept: _Kept, text: str) -> dict[int, list[Place]]:
    """The kept places the edits from `kept.text` to `text` leave standing, moved along with them."""
    places = dict(kept.places)
    dirty: set[int] = set()
    for start, end, lines in line_changes(kept.text, text):
        for no, ps in places.items():
            if no not in dirty and touched(ps, start, end):
                dirty.add(no)
        if lines.count("\n") != end - start:
            for no, ps in list(places.items()):
                places[no], stretched = moved(ps, start, end, lines, 0, 0)
                if stretched:
                    dirty.add(no)
    added = added_kgrams(kept.text, text) if any(p.state == "vanished" for ps in places.values() for p in ps) else set()
    return {no: ps for no, ps in places.items() if no not in dirty and not needs_resolving(ps, added)}
