"""The local HTTP endpoint's command routes (issue 50 point 12): ingest reads only transcript
locations, a request missing options is a 400 (not a 500), and a run file left by a killed server
is replaced at the next start and never removed by a server that does not own it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_engram
from test_store_safety import write_session

from engram.cli.running_server import _post
from engram.store.repo import Store


async def post(port: int, token: str, what: str, params: dict) -> tuple[int, dict]:
    status, body = await asyncio.to_thread(_post, port, f"/engram/{what}", token, json.dumps(params).encode())
    return status, json.loads(body)


async def test_the_endpoint_ingests_only_transcripts_and_validates_explain(repo: Path, tmp_path: Path) -> None:
    from engram_server.mcp_http import start_endpoint
    from engram_server.mcp_tools import build_mcp, command_queries, thread_runner

    store = Store(repo)
    runner = thread_runner()
    gone = subprocess.Popen(["true"])
    gone.wait()
    store.endpoint_file.parent.mkdir(parents=True, exist_ok=True)
    store.endpoint_file.write_text(json.dumps({"port": 1, "token": "t" * 40, "pid": gone.pid}))
    endpoint = await start_endpoint(build_mcp(lambda: store, runner), store.endpoint_file,
                                    command_queries(lambda: store, runner))
    try:
        info = json.loads(store.endpoint_file.read_text())
        assert info["pid"] == os.getpid() and info["port"] == endpoint.port, "a stale run file is replaced"
        secret = tmp_path / "secret.txt"
        secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
        for outside in (secret, Path("/etc/passwd")):
            status, doc = await post(endpoint.port, endpoint.token, "ingest", {"paths": [str(outside)]})
            assert status == 403 and "transcript" in doc["error"], doc
        assert not list(store.tapes_dir.iterdir()), "nothing outside the transcript locations became a tape"
        inside = write_session(repo / "s-1.jsonl", repo, "s-1", "hello")
        status, doc = await post(endpoint.port, endpoint.token, "ingest", {"paths": [str(inside)]})
        assert status == 200 and doc["tapes"] == 1, doc
        (repo / "a.py").write_text("x = 1\n")
        for params in ({"span": "a.py:1-1"}, {"span": "a.py:1-1", "before": "many", "after": 1, "brief": True,
                                               "include_deleted": False, "forensics": False, "min_confidence": 0.5}):
            status, doc = await post(endpoint.port, endpoint.token, "explain", params)
            assert status == 400 and "explain" in doc["error"], (status, doc)
        deep = b"[" * 100_000 + b"]" * 100_000  # valid JSON past the parser's depth: a 400, not a 500 and a traceback
        status, body = await asyncio.to_thread(_post, endpoint.port, "/engram/explain", endpoint.token, deep)
        assert status == 400 and "bad request" in json.loads(body)["error"], (status, body)
        # Another server took the run file over: stopping this one leaves it.
        store.endpoint_file.write_text(json.dumps({"port": 2, "token": "u" * 40, "pid": 1}))
    finally:
        await endpoint.stop()
    assert json.loads(store.endpoint_file.read_text())["pid"] == 1


async def test_the_endpoint_reads_the_harnesses_session_folders_not_their_homes_and_checks_blame(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~/.claude/history.jsonl (every prompt of every project) and ~/.codex/config.toml became tapes
    through the endpoint; `/engram/blame` without `file`, or with a line that is not a number, and
    an ingest path holding a NUL byte answered 500 (a traceback in the server's log)."""
    from engram_server.mcp_http import start_endpoint
    from engram_server.mcp_tools import build_mcp, command_queries, thread_runner

    claude, codex = tmp_path / "claude-home", tmp_path / "codex-home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    monkeypatch.setenv("CODEX_HOME", str(codex))
    (claude / "projects" / "-repo").mkdir(parents=True)
    (codex / "sessions").mkdir(parents=True)
    history = claude / "history.jsonl"
    history.write_text(json.dumps({"display": "a prompt of another project", "project": "/elsewhere"}) + "\n")
    config = codex / "config.toml"
    config.write_text('model = "o3"\n[mcp_servers.db]\nenv = { DB_NAME = "payroll" }\n')
    store = Store(repo)
    runner = thread_runner()
    endpoint = await start_endpoint(build_mcp(lambda: store, runner), store.endpoint_file,
                                    command_queries(lambda: store, runner))
    try:
        for outside in (history, config):
            status, doc = await post(endpoint.port, endpoint.token, "ingest", {"paths": [str(outside)]})
            assert status == 403 and "transcript" in doc["error"], (outside, status, doc)
        assert not list(store.tapes_dir.iterdir()), "nothing of the harnesses' homes became a tape"
        session = write_session(claude / "projects" / "-repo" / "s-1.jsonl", repo, "s-1", "hello")
        status, doc = await post(endpoint.port, endpoint.token, "ingest", {"paths": [str(session)]})
        assert status == 200 and doc["tapes"] == 1, doc
        status, doc = await post(endpoint.port, endpoint.token, "ingest", {"paths": [str(repo) + "\x00/x"]})
        assert status == 400, (status, doc)
        (repo / "a.py").write_text("x = 1\n")
        for params in ({}, {"path": "a.py"}, {"file": "a.py", "start": "one"}, {"file": "a.py", "cwd": 5}):
            status, doc = await post(endpoint.port, endpoint.token, "blame", params)
            assert status == 400 and "blame" in doc["error"], (params, status, doc)
        status, doc = await post(endpoint.port, endpoint.token, "blame", {"file": "a.py", "cwd": str(repo)})
        assert status == 200 and doc["file"] == "a.py", doc
    finally:
        await endpoint.stop()


def test_a_run_file_whose_pid_another_process_took_is_not_asked(repo: Path, tmp_path: Path) -> None:
    """A language server killed (or a reboot) leaves run/mcp.json; its pid, reused by a process
    started later, passed the liveness check, and the command line sent its request and token to
    whatever listened on the port and printed its answer as engram's."""
    import http.server
    import sys
    import threading

    from conftest import run_engram

    asked: list[str] = []

    class Foreign(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            asked.append(self.path)
            body = b'{"sessions": [{"session_id": "NOT-ENGRAM"}], "span": {}}'
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Foreign)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    run_file = Store(repo).endpoint_file
    run_file.parent.mkdir(parents=True, exist_ok=True)
    later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_file.write_text(json.dumps({"port": server.server_address[1], "token": "t" * 40, "pid": later.pid}))
        old = os.stat(run_file).st_mtime - 60  # written a minute before that process started
        os.utime(run_file, (old, old))
        (repo / "a.py").write_text("x = 1\n")
        proc = run_engram(repo, "explain", "a.py:1-1", "--json", check=False)
        doctor = run_engram(repo, "doctor", check=False).stdout
    finally:
        later.kill()
        later.wait()
        server.shutdown()
    assert "NOT-ENGRAM" not in proc.stdout and asked == [], (asked, proc.stdout)
    assert "left by a server that is gone" in doctor, doctor


async def test_recall_through_the_endpoint_refuses_a_limit_or_budget_that_is_no_whole_number(repo: Path) -> None:
    """`/engram/recall` cut a limit of 2.5 to 2, read true as 1 and 0 as the default, took a negative
    budget as no bound, and answered 500 (a traceback in the server's log) for a budget past 64 bits:
    each is a 400 naming the option, as the other routes answer a bad option."""
    from engram_server.mcp_http import start_endpoint
    from engram_server.mcp_tools import build_mcp, command_queries, thread_runner

    store = Store(repo)
    runner = thread_runner()
    run_engram(repo, "remember", "the cache is flushed every hour")
    endpoint = await start_endpoint(build_mcp(lambda: store, runner), store.endpoint_file,
                                    command_queries(lambda: store, runner))
    try:
        for key, value in (("limit", 2.5), ("limit", True), ("limit", 0), ("limit", "many"), ("limit", [3]),
                           ("budget", -3), ("budget", 10 ** 30), ("budget", 1.5), ("budget", "lots")):
            status, doc = await post(endpoint.port, endpoint.token, "recall", {"query": "cache", key: value})
            assert status == 400 and doc["error"].startswith(f"{key} "), (key, value, status, doc)
        status, doc = await post(endpoint.port, endpoint.token, "recall", {"query": "cache", "limit": 3, "budget": 500})
        assert status == 200 and "flushed" in doc["memories"][0]["content"], (status, doc)
        status, doc = await post(endpoint.port, endpoint.token, "recall", {"query": "cache", "limit": "3"})
        assert status == 200 and doc["memories"], "a number sent as text is still taken"
    finally:
        await endpoint.stop()
