"""Handing a command-line request to a running language server.

A command-line `engram explain` pays for a Python start and numpy's import (~150 ms here) before
its few milliseconds of work, and `engram ingest FILE` as much before a 1 MB append's ~50 ms.
When the editor is open, the language server already has the index warm and serves HTTP on
127.0.0.1 (`.engram/run/mcp.json`: port and bearer token, mode 0600): the command sends it the
request and prints what it answers. Anything wrong with that path — no run file, a dead server,
a refused or slow connection — falls back to doing the work locally; only an answer the server
gives (including an error about the request) is final. `ENGRAM_LOCAL=1` always works locally.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from engram.errors import BadInput
from engram.store import Store

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0


def ask_language_server(store: Store, what: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The server's answer to `what` ("explain", "ingest"), or None to do the work locally."""
    if os.environ.get("ENGRAM_LOCAL"):
        return None
    try:
        info = json.loads((store.run_dir / "mcp.json").read_text())
        port, token, pid = int(info["port"]), str(info["token"]), int(info["pid"])
        os.kill(pid, 0)  # a run file left by a server that died is not asked
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        status, data = _post(port, f"/engram/{what}", token, json.dumps(params).encode())
    except (OSError, ValueError) as exc:
        log.info("language server on port %d did not answer (%s): answering locally", port, exc)
        return None
    if status == 400:
        raise BadInput(json.loads(data).get("error") or "the language server refused the request")
    if status != 200:
        log.info("language server answered %d: answering locally", status)
        return None
    log.info("answered by the language server on port %d", port)
    return json.loads(data)


def _post(port: int, path: str, token: str, body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 POST to our own endpoint on 127.0.0.1: (status, body).

    A socket and a few lines instead of http.client, whose imports (email, ssl) cost ~15 ms of
    a command that should take well under 150 ms. The server is ours (uvicorn): the response has
    a Content-Length or chunked encoding, and `Connection: close` ends it."""
    import socket  # noqa: PLC0415 - ~4 ms, only when a server is running

    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head.encode() + body)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    raw = b"".join(chunks)
    header, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("truncated HTTP response")
    lines = header.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:])}
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        out = bytearray()
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2:]
        return status, bytes(out)
    if b"content-length" in fields:
        n = int(fields[b"content-length"])
        if len(rest) < n:
            raise ValueError("truncated HTTP response")
        return status, rest[:n]
    return status, rest
