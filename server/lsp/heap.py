"""The language server's long-lived heap kept out of the garbage collector's full passes.

Once started, the server holds ~145,000 objects that live as long as it does: lsprotocol's and
pygls's types, the MCP SDK and pydantic the endpoint loads, engram's modules. CPython's full
(generation 2) collection walks every one of them: ~100 ms of CPU, 200-300 ms at a load of 4,
once every ~25 s while a person types, paused on whatever request was being answered. It was the
whole codeLens tail of bench/lsp_notes.py (p99 ~250 ms: every request over 100 ms overlapped one,
the notes and regions having answered in ~0 ms). `gc.freeze()` moves what is alive into the
permanent generation that no collection walks; what is allocated afterwards is collected as
before (and frozen objects are still freed when their last reference goes).

Frozen: once start-up is over (the endpoint's imports loaded), and again when the heap that
collections walk grew past REFREEZE_OBJECTS (a module loaded on first use, such as onnxruntime
for recall), at a moment no document changed for CHECK_S. Each freeze collects first, so no
garbage is pinned.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

from .server import EngramLanguageServer

log = logging.getLogger(__name__)

#: Objects in the oldest generation that make a full collection worth avoiding (~20 ms of CPU).
REFREEZE_OBJECTS = 25_000
#: How often the heap is looked at, and how long no document may have changed before a freeze.
CHECK_S = 10.0


def freeze() -> tuple[int, float]:
    """Collect, then freeze what is alive; (objects frozen in all, seconds it took)."""
    t = time.perf_counter()
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count(), time.perf_counter() - t


def walked() -> int:
    """Objects a full collection would walk (the oldest generation; the frozen ones are not)."""
    return len(gc.get_objects(generation=2))


def _edits(ls: EngramLanguageServer) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((uri, state.version) for uri, state in list(ls.docs.items())))


async def keep_frozen(ls: EngramLanguageServer) -> None:
    """Freeze once start-up is over, then whenever the walked heap grew and the person paused."""
    if ls.mcp_starting is not None:  # (its failure is the endpoint's to log: freeze what loaded)
        await asyncio.wait({ls.mcp_starting})
    total, took = freeze()
    log.info("heap frozen after start-up: %d objects (%.0f ms)", total, took * 1000)
    seen = _edits(ls)
    while True:
        await asyncio.sleep(CHECK_S)
        now = _edits(ls)
        if now == seen and walked() > REFREEZE_OBJECTS:
            total, took = freeze()
            log.info("heap frozen again: %d objects (%.0f ms)", total, took * 1000)
        seen = now


async def start(ls: EngramLanguageServer) -> None:
    ls.in_background(keep_frozen(ls))


def register(server: EngramLanguageServer) -> None:
    server.on_initialized.append(start)
