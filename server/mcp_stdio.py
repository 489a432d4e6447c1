"""`engram mcp`: the MCP server over stdio, for agents started in the repository."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from .mcp_tools import build_mcp, discover_store, thread_runner

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="engram mcp", description="Engram MCP server (stdio)")
    ap.add_argument("--stdio", action="store_true", help="stdio transport (the default)")
    ap.add_argument("--repo", help="repository root (default: found from the working directory)")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    mcp = build_mcp(discover_store(Path(args.repo) if args.repo else None), thread_runner())
    if getattr(mcp, "_lowlevel_server", None) is None:  # (another SDK's layout: served as it serves)
        mcp.run("stdio")
        return 0
    import anyio  # noqa: PLC0415

    anyio.run(_serve_stdio, mcp)
    return 0


async def _serve_stdio(mcp: Any) -> None:
    """What `mcp.run("stdio")` does, with the requests read through `_Mended`."""
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    server = mcp._lowlevel_server  # (the SDK's run_stdio_async, whose read stream cannot be wrapped)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(_Mended(read_stream), write_stream, server.create_initialization_options())


class _Mended:
    """The SDK's stdio read stream, where a line its JSON parser refused for a lone surrogate
    escape (`"\\ud800"`: half a character, valid JSON; an agent copying a transcript's cut emoji)
    is parsed again with each one replaced by U+FFFD. The SDK passed the parse error on, and the
    request was never answered: the agent waited until its own timeout."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def receive(self) -> Any:
        return _mended(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Mended:
        return self

    async def __anext__(self) -> Any:
        return _mended(await self._inner.__anext__())

    async def __aenter__(self) -> _Mended:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:  # (`last_context`, what the SDK reads of its own streams)
        return getattr(self._inner, name)


def _mended(item: Any) -> Any:
    """`item` (a message, or the exception the SDK read in its place), a refused line mended."""
    if not isinstance(item, Exception) or not hasattr(item, "errors"):
        return item
    try:
        line = item.errors()[0].get("input")
    except Exception:  # noqa: BLE001 - not pydantic's ValidationError after all
        return item
    if not isinstance(line, str) or "\\ud" not in line.lower():  # (no escaped surrogate: refused for another reason)
        return item
    import json  # noqa: PLC0415

    from mcp import types  # noqa: PLC0415
    from mcp.shared.message import SessionMessage  # noqa: PLC0415

    from engram.words import whole_text  # noqa: PLC0415

    try:
        message = types.jsonrpc_message_adapter.validate_json(json.dumps(whole_text(json.loads(line))), by_name=False)
    except Exception:  # noqa: BLE001 - broken in another way: the SDK's own error stands
        return item
    log.debug("a request with a lone surrogate escape, read with U+FFFD in its place")
    return SessionMessage(message)
