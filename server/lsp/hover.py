"""Hover: over an evidence region, the story of the sessions that most tellingly touched it, rendered
by the same rules as `engram explain --pretty` and the explain document (engram.query.render)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from engram.query.render import explain_markdown

from .. import convert
from . import regions
from .server import EngramLanguageServer

HOVER_SESSIONS = 3
HOVER_DIFF_LINES = 12  # a hover is a glance: the explain document has the whole diff


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
    doc = await regions.explain_region(ls, state, region, story=True)
    if not doc["sessions"]:  # the region's own sessions, without their stories
        doc = {**doc, "sessions": [_region_session(s) for s in region.sessions]}
    value = explain_markdown(doc, link=convert.view_link, sessions=HOVER_SESSIONS, heading=False,
                             diff_lines=HOVER_DIFF_LINES)
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value),
                       range=convert.line_range(region.start, region.end))


def _region_session(s: Any) -> dict[str, Any]:
    return {"tape": s.tape, "session_id": s.session_id, "harness": s.harness, "model": s.model,
            "touches": s.touches, "last_touch": s.last_touch, "fragments": [],
            "story": {"tape": s.tape, "offset": s.offset, "kind": s.kinds[0] if s.kinds else None}}


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
