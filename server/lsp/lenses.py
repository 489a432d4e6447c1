"""Code lenses: one "why?" lens per evidence region of an open document, and per note anchored
outside every region, resolved (the sessions behind it, the notes on it) only when the editor
shows it."""

from __future__ import annotations

from lsprotocol import types

from engram.errors import EngramError

from .. import convert
from ..documents import LiveRegion
from . import notes, regions
from .server import EngramLanguageServer


async def code_lens(ls: EngramLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None or not ls.settings.lenses:
        return None
    found = await notes.of_document(ls, state.uri)
    state = await regions.ready(ls, state.uri)
    shown = [r for r in state.regions if r.sessions]
    out = [convert.lens(state.uri, state.version, r) for r in shown]
    # A note outside every evidence region still gets a lens, one per place.
    alone: dict[int, int] = {}
    for note in found:
        for p in note.places:
            a, b = p.start - 1, p.end - 1
            if p.state != "vanished" and not any(r.start <= b and a <= r.end for r in shown):
                alone[a] = max(b, alone.get(a, b))
    out += [convert.lens(state.uri, state.version, LiveRegion(a, b, []), notes_only=True) for a, b in sorted(alone.items())]
    out.sort(key=lambda lens: lens.range.start.line)
    return out


async def code_lens_resolve(ls: EngramLanguageServer, lens: types.CodeLens) -> types.CodeLens:
    data = lens.data if isinstance(lens.data, dict) else {}
    state = ls.docs.get(str(data.get("uri")))
    if state is not None and state.store is not None and data.get("notesOnly"):
        start, end = int(data.get("start", -1)), int(data.get("end", -1))
        n = sum(1 for note in await notes.of_document(ls, state.uri) if note.overlaps(start, end))
        if n:
            lens.command = convert.resolved_command(state.uri, LiveRegion(start, end, []), notes=n)
            return lens
    region = state.region_at(int(data.get("start", -1))) if state is not None else None
    if state is None or state.store is None or region is None or not region.sessions:
        lens.command = types.Command(title="why? (moved: ask again)", command="")
        return lens
    try:
        doc = await regions.explain_region(ls, state, region)
        sessions = doc["sessions"]
    except (EngramError, ValueError):
        sessions = []
    n = sum(1 for note in await notes.of_document(ls, state.uri) if note.overlaps(region.start, region.end))
    lens.command = convert.resolved_command(state.uri, region, sessions, notes=n)
    return lens


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))(code_lens)
    server.feature(types.CODE_LENS_RESOLVE)(code_lens_resolve)
