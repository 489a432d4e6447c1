"""Which command lines are handed whole to a running language server, and what happens when the
server named in the run file cannot take them (engram/cli/running_server.py; the request itself is in
test_lsp.py, against a real server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SPOTTER_OTHER
from engram.cli.running_server import _ingest_args


@pytest.mark.parametrize(("argv", "parsed"), [
    (["ingest", "a.jsonl"], (0, None, ["a.jsonl"], [])),
    (["-v", "ingest", "a", "b"], (1, None, ["a", "b"], [])),
    (["-vv", "-C", "repo", "ingest", "--map", "/x=/y", "a", "--map=/p=/q"],
     (2, "repo", ["a"], [("/x", "/y"), ("/p", "/q")])),
    (["--verbose", "--repo", "r", "ingest", "s.jsonl"], (1, "r", ["s.jsonl"], [])),
])
def test_the_plain_forms_of_ingest_are_taken_before_the_command_line_is_built(
        argv: list[str], parsed: tuple[object, ...]) -> None:
    assert _ingest_args(argv) == parsed


@pytest.mark.parametrize("argv", [
    [], ["ingest"],  # discovery: its size is not known before it runs
    ["ingest", "--watch", "a"], ["ingest", "--claude", "d", "a"], ["ingest", "--", "a"], ["ingest", "-h"],
    ["ingest", "--map", "no-equals", "a"], ["ingest", "--map", "=/y", "a"], ["ingest", "a", "--map"],
    ["explain", "f.py:1-2"], ["-q", "ingest", "a"], ["-C", "ingest", "a"], ["-C", "-v", "ingest", "a"],
])
def test_every_other_command_line_is_left_to_argparse(argv: list[str]) -> None:
    assert _ingest_args(argv) is None


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_run_file_whose_server_is_gone_or_deaf_leaves_the_ingest_here(repo: Path, spotter: Path) -> None:
    """A stale run file (the server died) or a server that does not answer: the command ingests
    locally, and asks the deaf server once, not again from the full command line."""
    run_file = repo / ".engram" / "run" / "mcp.json"
    run_file.parent.mkdir(parents=True, exist_ok=True)
    gone = subprocess.Popen(["true"])
    gone.wait()  # (Popen's wait: an event loop's child watcher left by another test may reap it first)
    dead_pid = gone.pid
    session = spotter / f"{SPOTTER_OTHER}.jsonl"
    for pid, first in ((dead_pid, True), (os.getpid(), False)):  # this test's own pid is alive
        run_file.write_text(json.dumps({"port": closed_port(), "token": "t" * 40, "pid": pid}))
        proc = subprocess.run([sys.executable, "-m", "engram_server.entry", "-v", "ingest", str(session)],
                              cwd=repo, capture_output=True, text=True, env={**os.environ, "ENGRAM_LOCAL": ""},
                              timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
        new = "1 new tape," if first else "0 new tapes"
        assert proc.stdout.startswith(f"ingest: 1 session, {new}"), proc.stdout
        assert "answered by the language server" not in proc.stderr
        asked = proc.stderr.count("did not answer")
        assert asked == (0 if first else 1), proc.stderr
