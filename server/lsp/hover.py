"""Hover: the notes anchored at the position, then, over an evidence region, the story of the
sessions that most tellingly touched it, rendered by the same rules as `engram explain --pretty`
and the explain document (engram.query.render)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from engram.query.render import explain_markdown

from .. import convert
from . import notes, regions
from .server import EngramLanguageServer

HOVER_SESSIONS = 3
HOVER_DIFF_LINES = 12  # a hover is a glance: the explain document has the whole diff


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
    doc = await regions.explain_region(ls, state, region, story=True)
    if not doc["sessions"]:  # the region's own sessions, without their stories
        doc = {**doc, "sessions": [_region_session(s) for s in region.sessions]}
    return explain_markdown(doc, link=convert.view_link, sessions=HOVER_SESSIONS, heading=False,
                            diff_lines=HOVER_DIFF_LINES)


def _region_session(s: Any) -> dict[str, Any]:
    return {"tape": s.tape, "session_id": s.session_id, "harness": s.harness, "model": s.model,
            "touches": s.touches, "last_touch": s.last_touch, "fragments": [],
            "story": {"tape": s.tape, "offset": s.offset, "kind": s.kinds[0] if s.kinds else None}}


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
