"""Initialisation, settings and shutdown: the LSP methods every feature may want a part in.

pygls takes one handler per method, so this module owns `initialize`, `initialized`,
`workspace/didChangeConfiguration` and `shutdown`, and runs the hooks features added to
`ls.on_initialized` / `ls.on_shutdown` (a feature with start-up or shutdown work adds a hook in
its own `register` rather than a line here).
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types

from .server import EngramLanguageServer

log = logging.getLogger(__name__)


class ClientLogHandler(logging.Handler):
    """Forwards records to the client's log (window/logMessage) when the setting asks for it."""

    LEVELS = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning,
              logging.INFO: types.MessageType.Info}

    def __init__(self, ls: EngramLanguageServer, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.INFO)
        self.ls, self.loop = ls, loop

    def emit(self, record: logging.LogRecord) -> None:
        kind = self.LEVELS.get(record.levelno, types.MessageType.Log)
        params = types.LogMessageParams(type=kind, message=self.format(record))
        try:
            self.loop.call_soon_threadsafe(self.ls.window_log_message, params)
        except RuntimeError:  # the loop is closed: the client is gone
            pass


def on_initialize(ls: EngramLanguageServer, params: types.InitializeParams) -> None:
    ls.settings = ls.settings.merged(params.initialization_options)


async def on_initialized(ls: EngramLanguageServer, params: types.InitializedParams) -> None:
    ws = ls.client_capabilities.workspace if ls.client_capabilities else None
    if ws and ws.configuration:
        try:
            got = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="engram")]))
            if got:
                ls.settings = ls.settings.merged(got[0])
        except Exception:  # noqa: BLE001 - configuration is optional
            log.debug("workspace/configuration failed", exc_info=True)
    if ls.settings.log_to_client:
        logging.getLogger("engram").addHandler(ClientLogHandler(ls, asyncio.get_running_loop()))
        logging.getLogger("engram_server").addHandler(ClientLogHandler(ls, asyncio.get_running_loop()))
    for hook in ls.on_initialized:
        await hook(ls)


async def on_shutdown(ls: EngramLanguageServer, params: None) -> None:
    for hook in ls.on_shutdown:
        await hook(ls)


def on_configuration(ls: EngramLanguageServer, params: types.DidChangeConfigurationParams) -> None:
    raw = params.settings.get("engram") if isinstance(params.settings, dict) else None
    ls.settings = ls.settings.merged(raw if raw is not None else params.settings)


def register(server: EngramLanguageServer) -> None:
    server.feature(types.INITIALIZE)(on_initialize)
    server.feature(types.INITIALIZED)(on_initialized)
    server.feature(types.SHUTDOWN)(on_shutdown)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(on_configuration)
