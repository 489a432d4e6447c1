"""Where a repository's `.engram/` store is, found with `os.path` alone.

`Store` (store.py) builds every path under `.engram/` from these names. They sit apart so that
a command handed whole to a running language server (running_server.py) can find the server's run file
without importing pathlib and dataclasses: ~15 ms of a process that is otherwise done in ~25.
"""

from __future__ import annotations

import os

STORE_DIR = ".engram"
RUN_DIR = "run"  # files of running processes: the endpoint's run file, the ingest lock
ENDPOINT_FILE = "mcp.json"  # a running language server's port, token and pid (mode 0600)


def find_store_root(start: str) -> str | None:
    """The nearest directory at or above `start` (symbolic links resolved) holding `.engram/`."""
    here = os.path.realpath(start)
    while True:
        if os.path.isdir(os.path.join(here, STORE_DIR)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def endpoint_file(root: str) -> str:
    """The run file a language server serving the store at `root` writes while it runs."""
    return os.path.join(root, STORE_DIR, RUN_DIR, ENDPOINT_FILE)


def started_after(pid: int, written: float) -> bool:
    """Did process `pid` start after `written` (a run file's mtime)? Then it is not the server that
    wrote that file, which starts first: the server died and its pid went to another process,
    and whatever listens on the file's port now would be sent the request and believed. False
    where /proc cannot tell (not Linux): the liveness check alone, as before."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            start_ticks = int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        started = boot + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return started > written + 2  # (btime is whole seconds)
