"""The MCP tools over HTTP from the language server's own process (`engram_server.mcp_http`), so
agents read the live store: the editor tape and the unsaved text of open documents. The same
endpoint takes the command line's requests (`engram ingest FILE` handed to the running server).

Started in the background once the client is initialised: importing the MCP stack takes seconds
and the editor must not wait for it. The MCP modules are imported only then, off the loop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging

from pygls.exceptions import JsonRpcInvalidParams

from engram.store.repo import Store

from . import regions
from .server import EngramLanguageServer

log = logging.getLogger(__name__)

# Quiet time after an append handed over by the command line before the server merges the
# segments appends left (engram.capture.pipeline.merge_idle): an agent's hook appends after every turn,
# seconds apart, and none of them should wait for a merge.
MERGE_IDLE_S = 2.0


async def start_in_background(ls: EngramLanguageServer) -> None:
    if ls.settings.mcp:
        ls.mcp_starting = asyncio.ensure_future(start_mcp(ls))


async def start_mcp(ls: EngramLanguageServer) -> None:
    """Serve the MCP tools over HTTP from this process, on the live store (editor tape, unsaved text)."""
    try:
        store = ls.any_store(None)
    except JsonRpcInvalidParams:
        log.info("no store in the workspace: MCP endpoint not started")
        return
    http_mod = await asyncio.to_thread(importlib.import_module, "engram_server.mcp_http")
    tools_mod = await asyncio.to_thread(importlib.import_module, "engram_server.mcp_tools")
    start_endpoint, build_mcp = http_mod.start_endpoint, tools_mod.build_mcp

    def unsaved(st: Store, rel: str) -> str | None:
        for state in list(ls.docs.values()):
            if state.store is not None and state.store.root == st.root:
                try:
                    if state.path.resolve().relative_to(st.root.resolve()).as_posix() == rel:
                        return ls.text_of(state.uri)
                except ValueError:
                    continue
        return None

    mcp = build_mcp(lambda: store, ls.off_loop_call, unsaved)
    queries = tools_mod.command_queries(lambda: store, ls.off_loop_call, lambda: index_changed_soon(ls),
                                        lambda st: merge_when_idle(ls, st))
    try:
        ls.mcp_endpoint = await start_endpoint(mcp, store.endpoint_file, queries)
    except Exception:  # noqa: BLE001 - the editor features must work even if the endpoint cannot start
        log.exception("MCP endpoint did not start")


def index_changed_soon(ls: EngramLanguageServer) -> None:
    """`regions.index_changed` without waiting for it: an ingest handed over by the command line
    answers it first (the loop keeps a reference, so the task is not collected half-way)."""
    ls.in_background(regions.index_changed(ls))


def merge_when_idle(ls: EngramLanguageServer, store: Store) -> None:
    """Merge the segments of appends handed over by the command line once none has come for
    MERGE_IDLE_S (each new one restarts the wait), on the index worker."""
    if ls.merge_timer is not None:
        ls.merge_timer.cancel()

    async def merge() -> None:
        from engram.capture.pipeline import merge_idle  # noqa: PLC0415

        try:
            await ls.off_loop(merge_idle, store)
        except Exception:  # noqa: BLE001 - the next append merges as it needs
            log.exception("merging posting segments")

    def start() -> None:
        ls.merge_timer = None
        ls.in_background(merge())

    ls.merge_timer = asyncio.get_running_loop().call_later(MERGE_IDLE_S, start)


async def stop(ls: EngramLanguageServer) -> None:
    if ls.mcp_starting is not None and not ls.mcp_starting.done():
        try:
            await asyncio.wait_for(ls.mcp_starting, 10)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down regardless
            log.debug("MCP endpoint start did not finish", exc_info=True)
    if ls.mcp_endpoint is not None:
        await ls.mcp_endpoint.stop()
        ls.mcp_endpoint = None


def forget(ls: EngramLanguageServer) -> None:
    """The client went away without `shutdown`: remove the run file, so the command line does not
    hand its requests to a server that is gone."""
    if ls.mcp_endpoint is not None:
        ls.mcp_endpoint.remove_run_file()


def register(server: EngramLanguageServer) -> None:
    server.on_initialized.append(start_in_background)
    server.on_shutdown.append(stop)
