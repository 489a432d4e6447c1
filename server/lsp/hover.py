"""Hover: over an evidence region, the stories of the sessions that most tellingly touched it."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from engram.query.story import touch_story
from engram.store.repo import Store
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_path

from .. import convert
from . import regions
from .server import EngramLanguageServer

HOVER_SESSIONS = 3


async def hover(ls: EngramLanguageServer, params: types.HoverParams) -> types.Hover | None:
    if not ls.settings.hover:
        return None
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None:
        return None
    state = await regions.ready(ls, state.uri)
    region = state.region_at(params.position.line)
    if region is None or not region.sessions:
        return None
    doc = await regions.explain_region(ls, state, region)
    top = [_telling(s) for s in doc["sessions"][:HOVER_SESSIONS]]
    if not top:
        top = [(s, s.tape, s.offset) for s in region.sessions[:HOVER_SESSIONS]]
    store = state.store
    stories = await ls.off_loop(_stories_blocking, store, top)
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                    value=convert.hover_markdown(stories)),
                       range=convert.line_range(region.start, region.end))


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
