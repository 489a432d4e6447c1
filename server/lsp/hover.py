"""Hover: the notes anchored at the position, then, over an evidence region, the stories of the
sessions that most tellingly touched it."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from engram.query.story import touch_story
from engram.store.repo import Store
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_path

from .. import convert
from . import notes, regions
from .server import EngramLanguageServer

HOVER_SESSIONS = 3


async def hover(ls: EngramLanguageServer, params: types.HoverParams) -> types.Hover | None:
    """The notes anchored at the position first, then the evidence region's stories; no hover when
    there is neither."""
    if not ls.settings.hover:
        return None
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None:
        return None
    line = params.position.line
    here = [n for n in await notes.of_document(ls, state.uri) if n.covers(line)]
    parts = [convert.note_markdown(n.memory, [p for p in n.places if p.state != "vanished"]) for n in here]
    spans = [(p.start - 1, p.end - 1) for n in here for p in n.places if p.state != "vanished"]
    state = await regions.ready(ls, state.uri)
    region = state.region_at(line)
    if region is not None and region.sessions:
        parts.append(await _evidence_markdown(ls, state, region))
        spans.append((region.start, region.end))
    if not parts:
        return None
    start = max(a for a, b in spans if a <= line) if spans else line
    end = min(b for a, b in spans if b >= line) if spans else line
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)),
                       range=convert.line_range(start, end))


async def _evidence_markdown(ls: EngramLanguageServer, state: Any, region: Any) -> str:
    doc = await regions.explain_region(ls, state, region)
    top = [_telling(s) for s in doc["sessions"][:HOVER_SESSIONS]]
    if not top:
        top = [(s, s.tape, s.offset) for s in region.sessions[:HOVER_SESSIONS]]
    store = state.store
    stories = await ls.off_loop(_stories_blocking, store, top)
    return convert.hover_markdown(stories)


def _telling(session: dict[str, Any]) -> tuple[Any, str, int]:
    """An explain session and its most telling touch: the latest edit, else the latest touch."""
    frags = session["fragments"]
    edits = [f for f in frags if f["kind"] == "code.edit"]
    best = (edits or frags)[-1]
    from engram.query.regions import RegionSession  # noqa: PLC0415

    rs = RegionSession(session["session_id"], session["harness"], session.get("model"), best["tape"],
                       session["touches"], session.get("last_touch"), offset=best["offset"])
    return rs, best["tape"], best["offset"]


def _stories_blocking(store: Store, items: list[tuple[Any, str, int]]) -> list:
    out = []
    for s, tape, offset in items:
        with TapeReader(tape_path(store.tapes_dir, tape), store.objects_dir) as r:
            out.append((s, touch_story(r, offset), offset))
    return out


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
