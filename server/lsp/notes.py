"""The memories (notes) anchored in open documents: resolved against the buffer's unsaved text on
the worker thread, kept per document version, and their drift published as diagnostics.

Shared by the features (hover and lenses read the notes, commands announce a changed store,
document sync schedules the diagnostics); it registers no handler. Nothing here blocks the loop:
resolving reads and fingerprints text, so it runs on the index worker like the regions do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from lsprotocol import types

from engram.errors import EngramError
from engram.memory.model import Memory
from engram.memory.places import Place

from ..documents import DocState, LiveRegion, follow_change
from .server import EngramLanguageServer

log = logging.getLogger(__name__)

#: A document's notes are resolved again after this long even when its text did not change:
#: another process (the command line, an agent) may have written or forgotten one meanwhile.
FRESH_S = 2.0


@dataclass(frozen=True)
class Note:
    """One memory as a document shows it: the memory and its places in this document (1-based
    lines, as `engram.memory.places` gives them)."""

    memory: Memory
    places: list[Place]

    def covers(self, line0: int) -> bool:
        """Whether a 0-based line is on one of its live (not vanished) places."""
        return any(p.state != "vanished" and p.start - 1 <= line0 <= p.end - 1 for p in self.places)

    def overlaps(self, start0: int, end0: int) -> bool:
        return any(p.state != "vanished" and p.start - 1 <= end0 and start0 <= p.end - 1 for p in self.places)


def relative(state: DocState) -> str:
    """The document's path relative to its store's root."""
    return state.path.resolve().relative_to(state.store.root.resolve()).as_posix()  # type: ignore[union-attr]


def buffers_of(ls: EngramLanguageServer, store: Any) -> dict[str, str]:
    """The unsaved text of every open document of `store`, by repository-relative path: anchors
    resolve against what the person sees, not what is on disk."""
    out: dict[str, str] = {}
    for state in list(ls.docs.values()):
        if state.store is not None and state.store.root == store.root:
            try:
                out[relative(state)] = ls.text_of(state.uri)
            except ValueError:
                continue
    return out


async def of_document(ls: EngramLanguageServer, uri: str, exact: bool = False) -> list[Note]:
    """The notes anchored in an open document's current text.

    Resolving them costs a few milliseconds per note anchored in the document (a hundred
    milliseconds for 500 notes in a 5,000-line file, bench/lsp_notes.py), too long for each
    hover or lens while the person types. So, unless `exact`, the last resolution answers as
    long as it is for this version: resolved, or moved along with the edits since (`follow`),
    their resolution being the debounced one `schedule` runs. One older than FRESH_S (another
    process may have written or forgotten a note) still answers, and is resolved again in the
    background. `exact` (the diagnostics): resolved for this version, FRESH_S at most ago."""
    state = ls.docs.get(uri)
    if state is None or state.store is None:
        return []
    cached = ls.notes.get(uri)
    if cached is not None and cached[0] == state.version:
        version, when, found, resolved = cached
        fresh = time.monotonic() - when < FRESH_S
        if resolved and fresh:
            return found
        if not exact:
            if not fresh:  # resolved again in the background, asked again FRESH_S later at the earliest
                ls.notes[uri] = (version, time.monotonic(), found, resolved)
                schedule(ls, uri)
            return found
    version, rel, text, store = state.version, relative(state), ls.text_of(uri), state.store

    def work() -> list[Note]:
        from engram.memory import open_memories  # noqa: PLC0415

        return [Note(m, p) for m, p in open_memories(store).in_file(rel, {rel: text})]

    try:
        found = await ls.off_loop(work)
    except EngramError as exc:
        log.warning("%s: notes: %s", uri, exc)
        found = []
    if ls.docs.get(uri) is state and state.version == version:
        ls.notes[uri] = (version, time.monotonic(), found, True)
    return found


def follow(ls: EngramLanguageServer, uri: str, before: int, after: int,
           changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
    """Move a document's notes along with an edit (version `before` → `after`) as its evidence
    regions move (`follow_change`): what a hover or lens answers until the debounced resolution.
    A whole-text change, or notes not of `before`, are dropped: the next request resolves."""
    cached = ls.notes.get(uri)
    if cached is None:
        return
    version, when, found, _ = cached
    if version != before or not all(isinstance(c, types.TextDocumentContentChangePartial) for c in changes):
        ls.notes.pop(uri, None)
        return
    for change in changes:
        assert isinstance(change, types.TextDocumentContentChangePartial)
        rng = change.range
        found = [_moved(n, rng.start.line, rng.end.line, change.text, rng.start.character, rng.end.character)
                 for n in found]
    ls.notes[uri] = (after, when, found, False)


def _moved(note: Note, start_line: int, end_line: int, text: str, start_char: int, end_char: int) -> Note:
    if all(p.end - 1 < start_line - 1 for p in note.places):
        return note  # wholly above the change (and the line before it)
    spans = follow_change([LiveRegion(p.start - 1, p.end - 1, []) for p in note.places],
                          start_line, end_line, text, start_char, end_char)
    return Note(note.memory, [replace(p, start=s.start + 1, end=s.end + 1) for p, s in zip(note.places, spans)])


def drifted(ls: EngramLanguageServer, note: Note) -> list[Place]:
    """The places of a note a person should look at: vanished, or edited with less than the
    `noteDriftBelow` setting of its text retained."""
    return [p for p in note.places
            if p.state == "vanished" or p.state == "edited" and p.retained < ls.settings.note_drift_below]


def _diagnostic_range(place: Place, n_lines: int) -> types.Range:
    """Where the drift is shown: the anchor's code as it is (edited), its best remnant in this
    file (vanished), else the file's top."""
    start, end = 0, 0
    if place.state == "edited":
        start, end = place.start - 1, place.end - 1
    elif isinstance(place.best_partial, dict) and place.best_partial.get("file") == place.file:
        start, end = int(place.best_partial["start"]) - 1, int(place.best_partial["end"]) - 1
    start = max(0, min(start, n_lines - 1))
    end = max(start, min(end, n_lines - 1))
    return types.Range(start=types.Position(line=start, character=0), end=types.Position(line=end + 1, character=0))


def diagnostics(ls: EngramLanguageServer, notes: list[Note], n_lines: int) -> list[types.Diagnostic]:
    from .. import convert  # noqa: PLC0415

    out = []
    for note in notes:
        for place in drifted(ls, note):
            out.append(types.Diagnostic(
                range=_diagnostic_range(place, max(n_lines, 1)), severity=types.DiagnosticSeverity.Hint,
                source="engram", code="note-drift", message=convert.drift_message(note.memory, place),
                data={"memory": note.memory.id}))
    return out


async def publish(ls: EngramLanguageServer, uri: str) -> None:
    """Resolve a document's notes and publish their drift diagnostics (none when the setting is
    off)."""
    state = ls.docs.get(uri)
    if state is None or state.store is None:
        return
    notes = await of_document(ls, uri, exact=True)  # hovers and lenses answer from it too
    if ls.docs.get(uri) is not state:
        return
    found: list[types.Diagnostic] = []
    if ls.settings.note_diagnostics:
        found = diagnostics(ls, notes, len(ls.text_of(uri).splitlines()))
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=found,
                                                                        version=state.version))


def schedule(ls: EngramLanguageServer, uri: str, delay: float = 0.0) -> None:
    """Publish a document's diagnostics after `delay` (a new call replaces a pending one)."""
    timer = ls.note_timers.pop(uri, None)
    if timer is not None:
        timer.cancel()

    def start() -> None:
        ls.note_timers.pop(uri, None)
        ls.in_background(_publish_logged(ls, uri))

    if delay <= 0:
        start()
    else:
        ls.note_timers[uri] = asyncio.get_running_loop().call_later(delay, start)


async def _publish_logged(ls: EngramLanguageServer, uri: str) -> None:
    try:
        await publish(ls, uri)
    except Exception:  # noqa: BLE001 - diagnostics are a hint; the editor goes on without them
        log.exception("publishing note diagnostics of %s", uri)


def closed(ls: EngramLanguageServer, uri: str) -> None:
    ls.notes.pop(uri, None)
    timer = ls.note_timers.pop(uri, None)
    if timer is not None:
        timer.cancel()


async def changed(ls: EngramLanguageServer) -> None:
    """The store's memories changed (a command wrote one): drop what was resolved, publish the
    diagnostics again and ask the client for lenses again."""
    ls.notes.clear()
    for uri in list(ls.docs):
        await _publish_logged(ls, uri)
    ws = ls.client_capabilities.workspace if ls.client_capabilities else None
    if ws and ws.code_lens and ws.code_lens.refresh_support:
        try:
            await ls.workspace_code_lens_refresh_async(None)
        except Exception:  # noqa: BLE001 - a client may refuse; lenses come on its next request
            log.debug("codeLens/refresh refused", exc_info=True)
