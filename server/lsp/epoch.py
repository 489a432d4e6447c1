"""Noticing a rebuild another process made (issue 50 point 5): `engram reindex` on the command
line refills the index under a running language server, whose lenses, computed mid-rebuild, were
left empty until the next edit. Every EPOCH_POLL_S the server reads each open store's epoch (one
small query on the index worker); when it changed and no rebuild is running, every open document
is recomputed and the client asked to refresh its lenses."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from engram.index.db import index_inode
from engram.index.memo import index_state

from . import regions
from .server import EngramLanguageServer

log = logging.getLogger(__name__)

EPOCH_POLL_S = 2.0


async def watch(ls: EngramLanguageServer) -> None:
    seen: dict[Path, tuple[int, str, bool]] = ls.epoch_seen  # type: ignore[attr-defined]
    while True:
        await asyncio.sleep(EPOCH_POLL_S)
        stores = {st.root: st for st in (d.store for d in list(ls.docs.values())) if st is not None}
        changed = False
        for root, store in stores.items():
            try:
                now = await ls.off_loop(_state, ls, store)
            except Exception:  # noqa: BLE001 - a damaged or missing index: the next poll tries again
                log.debug("reading the index epoch of %s", root, exc_info=True)
                continue
            before = seen.get(root)
            seen[root] = now
            if before is not None and before != now and not now[2]:
                changed = True
        if changed:
            log.info("the index was rebuilt by another process: recomputing open documents")
            await regions.index_changed(ls)


def _state(ls: EngramLanguageServer, store: object) -> tuple[int, str, bool]:
    """(inode, epoch, rebuilding) on the worker thread; a replaced file gets a new connection."""
    inode = index_inode(store)  # type: ignore[arg-type]
    if ls.epoch_inodes.get(store.root) not in (None, inode):  # type: ignore[attr-defined]
        ls.close_conn(store)  # type: ignore[arg-type]
    ls.epoch_inodes[store.root] = inode  # type: ignore[attr-defined]
    epoch, rebuilding = index_state(ls.conn(store))  # type: ignore[arg-type]
    return inode, epoch, rebuilding


async def start(ls: EngramLanguageServer) -> None:
    ls.in_background(watch(ls))


def register(server: EngramLanguageServer) -> None:
    server.epoch_inodes = {}  # type: ignore[attr-defined]
    # Each store's (inode, epoch, rebuilding) as last seen: first as the lenses were computed
    # (regions.record_epoch), so a rebuild within the first poll's 2 s is noticed too.
    server.epoch_seen = {}  # type: ignore[attr-defined]
    server.on_initialized.append(start)
