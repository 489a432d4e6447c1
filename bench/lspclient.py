"""A minimal LSP client for the benchmarks: start `engram lsp` on a repository and wait for its
HTTP endpoint (`.engram/run/mcp.json`)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


class MiniLsp:
    """Just enough of an LSP client: framed JSON-RPC over a subprocess's stdin/stdout."""

    def __init__(self, cmd: list[str], cwd: Path, log: Path) -> None:
        self.log = log.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.responses: dict[int, dict[str, Any]] = {}
        self.cond = threading.Condition()
        self.next_id = 1
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.partition(b":")
                if k.lower() == b"content-length":
                    length = int(v)
            if length is None:
                continue
            msg = json.loads(out.read(length))
            if "method" in msg and "id" in msg:  # a request from the server: answer null
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                with self.cond:
                    self.responses[msg["id"]] = msg
                    self.cond.notify_all()

    def request(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        i = self.next_id
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        with self.cond:
            if not self.cond.wait_for(lambda: i in self.responses, timeout):
                raise TimeoutError(f"LSP {method}: no response in {timeout}s")
            return self.responses.pop(i)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
            self.proc.wait(10)
        except Exception:  # noqa: BLE001 - whatever state it is in, it goes
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_lsp(cmd: list[str], repo: Path, log: Path, timeout: float = 60) -> tuple[MiniLsp, dict[str, Any]]:
    """`engram lsp` initialised on `repo`, once its endpoint's run file names it; (client, run file)."""
    lsp = MiniLsp(cmd, repo, log)
    init = lsp.request("initialize", {"processId": os.getpid(), "rootUri": repo.as_uri(), "capabilities": {},
                                      "workspaceFolders": [{"uri": repo.as_uri(), "name": repo.name}]})
    if "error" in init:
        lsp.close()
        raise SystemExit(f"LSP initialize failed: {init['error']}")
    lsp.notify("initialized", {})
    run_file = repo / ".engram" / "run" / "mcp.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = json.loads(run_file.read_text())
            if info.get("pid") == lsp.proc.pid:
                return lsp, info
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    lsp.close()
    raise SystemExit(f"the language server wrote no {run_file} within {timeout:.0f}s (log: {log})")
