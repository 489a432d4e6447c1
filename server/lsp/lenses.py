"""Code lenses: one "why?" lens per evidence region of an open document, resolved (the sessions
behind it) only when the editor shows it."""

from __future__ import annotations


from lsprotocol import types

from engram.errors import EngramError

from .. import convert
from . import regions
from .server import EngramLanguageServer


async def code_lens(ls: EngramLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None or not ls.settings.lenses:
        return None
    state = await regions.ready(ls, state.uri)
    return [convert.lens(state.uri, state.version, r) for r in state.regions if r.sessions]


async def code_lens_resolve(ls: EngramLanguageServer, lens: types.CodeLens) -> types.CodeLens:
    data = lens.data if isinstance(lens.data, dict) else {}
    state = ls.docs.get(str(data.get("uri")))
    region = state.region_at(int(data.get("start", -1))) if state is not None else None
    if state is None or state.store is None or region is None or not region.sessions:
        lens.command = types.Command(title="why? (moved: ask again)", command="")
        return lens
    try:
        doc = await regions.explain_region(ls, state, region)
        sessions = doc["sessions"]
    except (EngramError, ValueError):
        sessions = []
    lens.command = convert.resolved_command(state.uri, region, sessions)
    return lens


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))(code_lens)
    server.feature(types.CODE_LENS_RESOLVE)(code_lens_resolve)
