"""The companion MCP endpoint inside the language server: streamable HTTP on 127.0.0.1.

It also answers the command line (`POST /engram/explain`, see engram.cli.running_server), so
`engram explain` in a terminal gets the warm index instead of a cold start.

Security: a random bearer token (32 bytes, compared in constant time) on every request, Host
and Origin allowlists pinned to the bound port (421/403 from the SDK's transport security), the
port and token in `.engram/run/mcp.json` (mode 0600, removed on exit). uvicorn runs with
`log_config=None, access_log=False`: its default access log writes to stdout, which is the LSP
stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import orjson
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from engram.errors import EngramError, NotAllowed

log = logging.getLogger(__name__)

TOKEN_BYTES = 32
MAX_QUERY_BYTES = 16 << 20  # an `explain --text` of a large file still fits


class BearerGate:
    """ASGI middleware: 401 unless `Authorization: Bearer <token>` matches (constant time)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = b"Bearer " + token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = b""
            for k, v in scope.get("headers") or []:
                if k == b"authorization":
                    got = v
            if not secrets.compare_digest(got, self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await self.app(scope, receive, send)


class CommandRoutes:
    """ASGI: `POST /engram/<query>` for the command line (engram.cli.running_server), the rest to MCP.

    Inside the bearer gate; Host and Origin are checked here as the SDK checks them for /mcp
    (421 / 403), so a web page can no more reach these routes than the MCP one."""

    def __init__(self, app: Any, queries: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]],
                 hosts: list[str], origins: list[str]) -> None:
        self.app, self.queries = app, queries
        self.hosts, self.origins = {h.encode() for h in hosts}, {o.encode() for o in origins}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith("/engram/"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if headers.get(b"host") not in self.hosts:
            await _reply(send, 421, {"error": "wrong Host"})
            return
        if b"origin" in headers and headers[b"origin"] not in self.origins:
            await _reply(send, 403, {"error": "foreign Origin"})
            return
        query = self.queries.get(path[len("/engram/"):])
        if query is None or scope.get("method") != "POST":
            await _reply(send, 404, {"error": f"no such query: {path}"})
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if len(body) > MAX_QUERY_BYTES:
                await _reply(send, 413, {"error": "request too large"})
                return
            if not msg.get("more_body"):
                break
        try:
            params = json.loads(body)
            if not isinstance(params, dict):
                raise ValueError("a JSON object is expected")
        except (ValueError, RecursionError) as exc:  # (RecursionError: arrays nested thousands deep)
            await _reply(send, 400, {"error": f"bad request: {exc}"})
            return
        try:
            doc = await query(params)
        except NotAllowed as exc:  # the command line then does it itself
            await _reply(send, 403, {"error": str(exc)})
            return
        except EngramError as exc:
            await _reply(send, 400, {"error": str(exc)})
            return
        except Exception:  # noqa: BLE001 - the client answers locally after a 500
            log.exception("query %s failed", path)
            await _reply(send, 500, {"error": "internal error (see the language server log)"})
            return
        await _reply(send, 200, doc)


async def _reply(send: Any, status: int, doc: Any) -> None:
    body = orjson.dumps(doc)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class _QuietServer(uvicorn.Server):
    """Leaves signal handling to the host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # type: ignore[override]
        yield


@dataclass
class Endpoint:
    server: uvicorn.Server
    port: int
    token: str
    run_file: Path | None
    task: asyncio.Task[None]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def stop(self) -> None:
        self.remove_run_file()
        self.server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self.task), 5)
        except (asyncio.TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping anyway
            self.task.cancel()
            log.debug("MCP endpoint stop", exc_info=True)

    def remove_run_file(self) -> None:
        """Remove the run file if it is still this process's: another server on the store may have
        replaced it since (a run file a killed server left is replaced at the next start)."""
        if self.run_file is None:
            return
        try:
            with self.run_file.open(encoding="utf-8") as f:
                owner = json.load(f).get("pid")
        except (OSError, ValueError, AttributeError):
            owner = os.getpid()  # unreadable: ours, half-written
        if owner == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self.run_file.unlink()


def write_run_file(path: Path, port: int, token: str) -> None:
    """The endpoint's address and token, readable by this user only (created 0600, never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": f"http://127.0.0.1:{port}/mcp", "port": port, "token": token, "pid": os.getpid()}, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


async def start_endpoint(mcp: MCPServer, run_file: Path | None,
                         queries: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] | None = None,
                         ) -> Endpoint:
    """Bind 127.0.0.1 on a free port and serve `mcp` (and the command line's `queries`) on the
    running loop."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it, Nagle's algorithm and the client's delayed
    # ACK hold each small response for ~40 ms (measured: 52 ms floor for a trivial tool call).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(TOKEN_BYTES)
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=origins)
    app = BearerGate(CommandRoutes(mcp.streamable_http_app(transport_security=security, host="127.0.0.1"),
                                   queries or {}, hosts, origins), token)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = _QuietServer(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name="engram-mcp-http")
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # raises what went wrong
    if run_file is not None:
        write_run_file(run_file, port, token)
    log.info("MCP endpoint on http://127.0.0.1:%d/mcp", port)
    return Endpoint(server, port, token, run_file, task)
