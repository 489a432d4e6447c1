"""The live evidence regions of open documents: computing them on the worker thread, after a
debounce while the person types, and telling the client when the index changed under them.

Shared by the features (document sync schedules, lenses and hover read, commands and the endpoint
announce a changed index); it registers no handler. A computation works on a snapshot
`(uri, version, text)`; a result for a version the document has moved past is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from engram.errors import EngramError
from engram.index.db import index_inode
from engram.index.memo import index_state
from engram.query.regions import evidence_regions
from engram.store.repo import Store

from ..documents import DocState, LiveRegion
from .server import EngramLanguageServer

log = logging.getLogger(__name__)

INDEX_CHANGED = "engram/indexChanged"
CONTEXT_LINES = 2


def schedule(ls: EngramLanguageServer, uri: str, delay: float = 0.0, dirty_only: bool = False) -> None:
    """(Re)compute a document's regions after `delay`, replacing any pending timer."""
    timer = ls.timers.pop(uri, None)
    if timer is not None:
        timer.cancel()
    loop = asyncio.get_running_loop()

    def start() -> None:
        ls.timers.pop(uri, None)
        ls.computing[uri] = asyncio.ensure_future(compute(ls, uri, dirty_only))

    if delay <= 0:
        start()
    else:
        ls.timers[uri] = loop.call_later(delay, start)


async def compute(ls: EngramLanguageServer, uri: str, dirty_only: bool) -> None:
    state = ls.docs.get(uri)
    if state is None or state.store is None:
        return
    version, text = state.version, ls.text_of(uri)
    lines = text.splitlines()
    try:
        if not dirty_only or state.computed_version < 0:
            regions = await ls.off_loop(_regions_blocking, ls, state.store, text)
            if ls.docs.get(uri) is not state:
                return
            if state.version != version:
                if state.computed_version >= 0:
                    return  # the document moved on: a newer computation is scheduled
                # Never computed yet and the person keeps typing (each computation outrun by
                # the next keystroke would leave the document without lenses for as long as
                # they type): take these regions, marked dirty, and re-check them.
                state.set_regions(regions, version)
                for r in state.regions:
                    r.dirty = True
                schedule(ls, uri, ls.settings.debounce, dirty_only=True)
                return
            state.set_regions(regions, version)
            return
        for r in [r for r in state.regions if r.dirty]:
            a, b = max(0, r.start - CONTEXT_LINES), min(len(lines) - 1, r.end + CONTEXT_LINES)
            snippet = "\n".join(lines[a:b + 1]) + "\n"
            found = await ls.off_loop(_regions_blocking, ls, state.store, snippet)
            if ls.docs.get(uri) is not state or state.version != version:
                return
            idx = state.regions.index(r) if r in state.regions else -1
            if idx < 0:
                continue
            state.regions[idx:idx + 1] = [LiveRegion(f.start + a, f.end + a, f.sessions) for f in found]
        state.computed_version = version
    except EngramError as exc:
        log.warning("%s: %s", uri, exc)


def _regions_blocking(ls: EngramLanguageServer, store: Store, text: str) -> list:
    db = ls.conn(store)
    seen = getattr(ls, "epoch_seen", None)
    if seen is not None and store.root not in seen:  # the index these lenses come from (epoch.watch)
        seen[store.root] = (index_inode(store), *index_state(db))
    return evidence_regions(db, text)


async def ready(ls: EngramLanguageServer, uri: str) -> DocState:
    """The document's state once the computation under way (if any) has finished, so a lens or hover
    asked right after an edit answers for the text as it is (waiting 15 s at most)."""
    state = ls.doc_state(uri)
    pending = ls.computing.get(uri)
    if pending is not None and not pending.done():
        try:
            await asyncio.wait_for(asyncio.shield(pending), timeout=15)
        except asyncio.TimeoutError:
            log.warning("regions of %s still computing", uri)
    return state


async def explain_region(ls: EngramLanguageServer, state: DocState, region: LiveRegion,
                         story: bool = False) -> dict[str, Any]:
    """The brief explain of a region's current buffer text: what its lens and hover report, so
    they agree with what `engram.explain` then shows (`story`: each session's, for the hover)."""
    from engram.query.explain import Options, explain  # noqa: PLC0415
    from engram.query.spans import Span  # noqa: PLC0415

    lines = ls.text_of(state.uri).splitlines()
    end = min(region.end, len(lines) - 1)
    rel = state.path.resolve().relative_to(state.store.root.resolve()).as_posix()  # type: ignore[union-attr]
    span = Span(rel, region.start + 1, end + 1, "\n".join(lines[region.start:end + 1]) + "\n")
    store = state.store
    opts = Options(brief=True, min_confidence=ls.settings.min_confidence, story=story,
                   rank=str(store.config["explain"]["rank"]))  # type: ignore[union-attr]
    return await ls.off_loop(lambda: explain(store, ls.conn(store), span, opts))  # type: ignore[arg-type]


async def index_changed(ls: EngramLanguageServer) -> None:
    """Recompute every open document, then tell the client to ask for lenses again."""
    for uri in list(ls.docs):
        schedule(ls, uri)
    for fut in list(ls.computing.values()):
        try:
            await fut
        except Exception:  # noqa: BLE001 - one document's failure must not stop the others
            log.exception("recomputing regions")
    ls.protocol.notify(INDEX_CHANGED, {"uris": list(ls.docs)})
    ws = ls.client_capabilities.workspace if ls.client_capabilities else None
    if ws and ws.code_lens and ws.code_lens.refresh_support:
        try:
            await ls.workspace_code_lens_refresh_async(None)
        except Exception:  # noqa: BLE001 - a client may refuse; lenses come on its next request
            log.debug("codeLens/refresh refused", exc_info=True)
