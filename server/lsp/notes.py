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
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from engram.errors import EngramError
from engram.memory.follow import FULL_S, moved, needs_resolving, touched
from engram.memory.model import Memory
from engram.memory.places import Place

from ..documents import DocState
from .server import EngramLanguageServer

log = logging.getLogger(__name__)

#: A document's notes are resolved again after this long even when its text did not change:
#: another process (the command line, an agent) may have written or forgotten one meanwhile.
FRESH_S = 2.0
# A document's notes are resolved whole at least every FULL_S (`engram.memory.follow`, the rule
# shared with the hook's answers); in between, only those an edit touched and those whose code
# vanished are. A change of the store's memories (`Memories.stamp`) resolves them whole at once.
# The whole resolution (~100 ms of the worker for 500 notes in a 5,000-line file) was the tail of
# a hover or lens that came meanwhile (bench/lsp_notes.py); FULL_S is only a safety net.

#: Notes resolved per turn of the worker thread (~0.2 ms each on a 5,000-line buffer): a hover or
#: lens asked meanwhile waits for one slice, not for the 500 notes of a big file (~100 ms,
#: bench/lsp_notes.py); between two slices the loop runs uncontended for the GIL.
NOTE_SLICE = 24


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
            if not fresh:  # looked at again in the background (marked unresolved, or the look answers
                ls.notes[uri] = (version, time.monotonic(), found, False)  # itself), FRESH_S later at the earliest
                schedule(ls, uri)
            return found
    version, rel, text = state.version, relative(state), ls.text_of(uri)
    keep = _kept(ls, uri, state.version)
    try:
        found = await _resolved(ls, state, rel, text, keep)
    except EngramError as exc:
        log.warning("%s: notes: %s", uri, exc)
        found = []
    if found is None:  # the document moved on: answer from its notes followed along (a newer resolution is due)
        cached = ls.notes.get(uri)
        return cached[2] if cached is not None and cached[0] == state.version else []
    if ls.docs.get(uri) is state and state.version == version:
        before = ls.notes.get(uri)
        ls.notes[uri] = (version, time.monotonic(), found, True)
        if before is not None and before[0] == version and not before[3] and _lines(before[2]) != _lines(found):
            ls.in_background(refresh_lenses(ls))  # the lenses shown were the followed guesses
    return found


def _kept(ls: EngramLanguageServer, uri: str, version: int) -> tuple[Any, dict[str, Note]] | None:
    """(store stamp, the notes that need no resolving again by id) when the document's notes of
    `version` are the last resolution's moved along with edits that touched only some of them;
    None to resolve them all."""
    cached, dirty = ls.notes.get(uri), ls.note_dirty.get(uri)
    if cached is None or cached[0] != version or dirty is None:
        return None
    stamp, full_at, edited = dirty
    if time.monotonic() - full_at >= FULL_S:  # due: whole, once (typing on may cut it short: then
        ls.note_dirty[uri] = (stamp, time.monotonic(), edited)  # the next is FULL_S later, not at every edit)
        return None
    return stamp, {n.memory.id: n for n in cached[2] if n.memory.id not in edited and not needs_resolving(n.places)}


async def _resolved(ls: EngramLanguageServer, state: DocState, rel: str, text: str,
                    keep: tuple[Any, dict[str, Note]] | None = None) -> list[Note] | None:
    """The document's notes resolved against `text` on the worker thread, NOTE_SLICE notes at a
    time so that other requests' work runs between slices; None when the document changed before
    the end (the rest is not worth resolving: a newer resolution is scheduled). With `keep`
    (`_kept`), the notes it holds are taken as they are unless the store's memories changed."""
    from engram.memory import open_memories  # noqa: PLC0415

    store, version, uri = state.store, state.version, state.uri
    mem = await ls.off_loop(open_memories, store)
    nos, stamp, ids = await ls.off_loop(_anchored, mem, rel, keep is not None)
    whole = keep is None or keep[0] != stamp
    found = [] if whole else [keep[1][ids[no]] for no in nos if ids.get(no) in keep[1]]  # type: ignore[index]
    todo = nos if whole else [no for no in nos if ids.get(no) not in keep[1]]  # type: ignore[index]
    buffers = {rel: text}
    for i in range(0, len(todo), NOTE_SLICE):
        if i:
            await asyncio.sleep(0)  # the requests that came meanwhile go first
            if ls.docs.get(uri) is not state or state.version != version:
                return None
        part = await ls.off_loop(lambda chunk=todo[i:i + NOTE_SLICE]: mem.in_file(rel, buffers, nos=chunk))
        found += [Note(m, p) for m, p in part]
    found.sort(key=lambda n: (min(p.start for p in n.places), n.memory.id))
    prior = ls.note_dirty.get(uri)  # (gone when `changed` or `closed` ran meanwhile: the next is whole)
    if ls.docs.get(uri) is state and state.version == version and (whole or prior is not None):
        ls.note_dirty[uri] = (stamp, time.monotonic() if whole else prior[1], set())  # type: ignore[index]
    return found


def _anchored(mem: Any, rel: str, with_ids: bool) -> tuple[list[int], Any, dict[int, str]]:
    """(the memories anchored in `rel`, the store's stamp, their ids when asked) — on the worker."""
    stamp = mem.stamp()
    nos = mem.anchored_in(rel)
    return nos, stamp, mem.ids_of(nos) if with_ids else {}


def _lines(notes: list[Note]) -> list[tuple[str, list[tuple[int, int, str]]]]:
    return [(n.memory.id, [(p.start, p.end, p.state) for p in n.places]) for n in notes]


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
        ls.note_dirty.pop(uri, None)
        return
    dirty = ls.note_dirty.get(uri)
    for change in changes:
        assert isinstance(change, types.TextDocumentContentChangePartial)
        rng = change.range
        if dirty is not None:  # their text changed: resolved again (the others only move)
            dirty[2].update(n.memory.id for n in found if touched(n.places, rng.start.line, rng.end.line))
        if change.text.count("\n") == rng.end.line - rng.start.line:
            continue  # no line added or removed (typing within lines): every place keeps its lines
        found = [_moved(n, rng.start.line, rng.end.line, change.text, rng.start.character, rng.end.character,
                        dirty[2] if dirty is not None else None) for n in found]
    ls.notes[uri] = (after, when, found, False)


def _moved(note: Note, start_line: int, end_line: int, text: str, start_char: int, end_char: int,
           dirty: set[str] | None) -> Note:
    places, stretched = moved(note.places, start_line, end_line, text, start_char, end_char)
    if stretched and dirty is not None:
        dirty.add(note.memory.id)
    return note if places is note.places else Note(note.memory, places)


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
    version = state.version
    notes = await of_document(ls, uri, exact=True)  # hovers and lenses answer from it too
    if ls.docs.get(uri) is not state or state.version != version:
        return  # (the next change scheduled a newer one)
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
    ls.note_dirty.pop(uri, None)
    timer = ls.note_timers.pop(uri, None)
    if timer is not None:
        timer.cancel()


async def changed(ls: EngramLanguageServer) -> None:
    """The store's memories changed (a command wrote one): drop what was resolved, publish the
    diagnostics again and ask the client for lenses again."""
    ls.notes.clear()
    ls.note_dirty.clear()
    for uri in list(ls.docs):
        await _publish_logged(ls, uri)
    await refresh_lenses(ls)


async def refresh_lenses(ls: EngramLanguageServer) -> None:
    """Ask the client for lenses again (when it can be asked)."""
    ws = ls.client_capabilities.workspace if ls.client_capabilities else None
    if ws and ws.code_lens and ws.code_lens.refresh_support:
        try:
            await ls.workspace_code_lens_refresh_async(None)
        except Exception:  # noqa: BLE001 - a client may refuse; lenses come on its next request
            log.debug("codeLens/refresh refused", exc_info=True)
