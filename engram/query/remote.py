"""Asking a running language server to answer a command-line query.

A command-line `engram explain` pays for a Python start and numpy's import (~150 ms here) before
its few milliseconds of work. When the editor is open, the language server already has the
index warm and serves HTTP on 127.0.0.1 (`.engram/run/mcp.json`: port and bearer token, mode
0600): the command sends it the request and prints the same document. Anything wrong with that
path — no run file, a dead server, a refused or slow connection — falls back to answering
locally; only an answer the server gives (including an error about the request) is final.
`ENGRAM_LOCAL=1` always answers locally.
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
    """The server's answer to `what` (e.g. "explain"), or None to answer locally."""
    if os.environ.get("ENGRAM_LOCAL"):
        return None
    try:
        info = json.loads((store.run_dir / "mcp.json").read_text())
        port, token, pid = int(info["port"]), str(info["token"]), int(info["pid"])
        os.kill(pid, 0)  # a run file left by a server that died is not asked
    except (OSError, ValueError, KeyError, TypeError):
        return None
    import http.client  # noqa: PLC0415 - only when a server is running

    body = json.dumps(params).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        conn.request("POST", f"/engram/{what}", body=body,
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                              "Host": f"127.0.0.1:{port}"})
        resp = conn.getresponse()
        data = resp.read()
    except OSError as exc:
        log.info("language server on port %d did not answer (%s): answering locally", port, exc)
        return None
    finally:
        conn.close()
    if resp.status == 400:
        raise BadInput(json.loads(data).get("error") or "the language server refused the request")
    if resp.status != 200:
        log.info("language server answered %d: answering locally", resp.status)
        return None
    log.info("answered by the language server on port %d", port)
    return json.loads(data)
