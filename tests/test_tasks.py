"""Tasks (`engram task ...`, `resume --task`, checkpoints) on the real spotter Claude Code sessions
and the real Codex fixture session: one task spanning both harnesses, sessions brought in by a
continuation, hand-offs and resumes kept as numbered checkpoints, the log's damage handled; and the
same through the MCP SDK client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, SPOTTER_MAIN, SPOTTER_OTHER, build_spot_repo, git, run_engram

from engram.query.budget import TOKEN_BYTES

CODEX = FIXTURES / "codex" / "codex_small_schema_coverage.jsonl"
CODEX_SESSION = "019fc8be-3658-7ca3-9e29-000000000000"


@pytest.fixture()
def spot(spotter: Path, tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    build_spot_repo(spotter, root)
    run_engram(root, "ingest", str(CODEX))
    return root


def js(cwd: Path, *args: str) -> Any:
    return json.loads(run_engram(cwd, *args, "--json").stdout)


def test_a_task_spans_a_claude_and_a_codex_session_with_checkpoints(spot: Path) -> None:
    task = js(spot, "task", "new", "--session", SPOTTER_MAIN[:8])
    assert task["title"] == "Implement spotter-gqc", "no title given: the session's first request, verbatim"
    assert [s["session_id"] for s in task["sessions"]] == [SPOTTER_MAIN]
    tid = task["id"]
    joined = js(spot, "task", "join", tid, CODEX_SESSION)
    assert [(s["harness"], s["via"]) for s in joined["sessions"]] == [("claude-code", "joined"), ("codex", "joined")]

    doc = js(spot, "resume", "--task", tid, "--budget", "1500")
    assert doc["session"]["task"]["id"] == tid and doc["session"]["task"]["checkpoint"] == 1
    assert [c["session_id"] for c in doc["session"]["chain"]] == [SPOTTER_MAIN, CODEX_SESSION]
    assert doc["budget"]["used"] <= 1500
    assert len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()) <= 1500 * TOKEN_BYTES
    assert doc["more"] == f"engram resume --task {tid} --budget 3500"
    again = js(spot, "resume", "--task", tid, "--budget", "1500")
    assert again["session"]["task"]["checkpoint"] == 1, "nothing happened in between: the same checkpoint"
    whole = js(spot, "resume", "--task", tid, "--budget", "0")
    texts = [r["text"] for r in whole["requests"]]
    assert "Implement spotter-gqc" in texts and "List the files" in texts, "both harnesses' requests, one package"
    assert whole["session"]["task"]["checkpoint"] == 2, "a different package: a new version"

    note = js(spot, "handoff", CODEX_SESSION, "--task", tid, "--goal", "review context", "--done", "tests pass")
    assert note["checkpoints"] == [{"task": tid, "version": 3}]
    rows = js(spot, "task", "checkpoints", tid)
    assert [(r["version"], r["kind"], r["session"]) for r in rows] == [
        (1, "resume", CODEX_SESSION), (2, "resume", CODEX_SESSION), (3, "handoff", CODEX_SESSION)]
    kept = js(spot, "task", "checkpoints", tid, "--version", "1")
    assert kept["doc"]["requests"] == doc["requests"], "a checkpoint is the package as it was handed over"
    assert "Goal: review context" in run_engram(spot, "task", "checkpoints", tid, "--version", "3").stdout
    text = run_engram(spot, "resume", "--task", tid).stdout
    assert text.startswith(f"Task {tid} (open): Implement spotter-gqc — 2 sessions, checkpoint 4")
    assert "review context" in text, "the hand-off note is part of the task's package"

    js(spot, "task", "close", tid, "--why", "merged")
    assert js(spot, "task", "list") == []
    closed = js(spot, "task", "list", "--all")
    assert [(t["id"], t["status"], t["why"], t["checkpoints"]) for t in closed] == [(tid, "closed", "merged", 4)]
    bad = run_engram(spot, "task", "join", tid, SPOTTER_OTHER, check=False)
    assert bad.returncode == 1 and "is closed" in bad.stderr and "reopen" in bad.stderr
    assert js(spot, "task", "reopen", tid)["status"] == "open"


def test_unknown_tasks_and_conflicting_options_are_clear_errors(spot: Path) -> None:
    for args in (("task", "show", "nope"), ("resume", "--task", "nope"),
                 ("handoff", "--task", "nope", "--goal", "x")):
        r = run_engram(spot, *args, check=False)
        assert r.returncode == 1 and "no task 'nope'" in r.stderr and "engram task list" in r.stderr
    for args, said in ((("task", "list"), "no open task (engram task new TITLE starts one; --all lists closed ones too)"),
                       (("task", "list", "--all"), "no task yet (engram task new TITLE starts one)")):
        r = run_engram(spot, *args)  # (before any task: --all is no hint to give)
        assert r.stdout == "" and r.stderr.strip() == said, args
    assert js(spot, "memory", "list", "--kind", "handoff")["memories"] == [], "a refused hand-off wrote nothing"
    tid = js(spot, "task", "new", "renderer", "--session", SPOTTER_OTHER)["id"]
    r = run_engram(spot, "resume", "--task", tid, SPOTTER_OTHER, check=False)
    assert r.returncode == 1 and "not both" in r.stderr
    assert js(spot, "task", "show", "RENDERER")["id"] == tid, "a task is named by its title too"
    empty = js(spot, "task", "new", "not started yet")["id"]
    r = run_engram(spot, "resume", "--task", empty, check=False)
    assert r.returncode == 1 and f"engram task join {empty} SESSION" in r.stderr


def test_the_log_survives_a_torn_line_and_refuses_a_link(spot: Path, tmp_path: Path) -> None:
    tid = js(spot, "task", "new", "one", "--session", SPOTTER_MAIN)["id"]
    log = spot / ".engram" / "tasks.jsonl"
    with log.open("ab") as f:
        f.write(b'{"op": "close", "task": "' + tid.encode())  # a crash in the middle of an append
    assert js(spot, "task", "show", tid)["status"] == "open", "the torn line's change had not begun"
    assert js(spot, "task", "close", tid)["status"] == "closed", "the next append starts on a line of its own"
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    before = outside.read_bytes()
    r = run_engram(spot, "task", "new", "two", check=False)
    assert r.returncode == 1 and "symbolic link" in r.stderr
    assert outside.read_bytes() == before, "nothing written through the link"


def test_sessions_join_a_task_by_continuation(tmp_path: Path) -> None:
    from test_lineage import continued_pair  # noqa: PLC0415

    root = (tmp_path / "repo").resolve()
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    p, q, _ = continued_pair(tmp_path)
    run_engram(root, "ingest", str(p))
    tid = js(root, "task", "new", "handlers", "--session", "p")["id"]
    run_engram(root, "ingest", str(q))  # the compaction's new session, captured later
    shown = js(root, "task", "show", tid)
    assert [(s["session_id"], s["via"]) for s in shown["sessions"]] == [("p", "joined"), ("q", "continuation of p")]
    doc = js(root, "resume", "--task", tid)
    assert doc["session"]["session_id"] == "q" and doc["requests"][-1]["text"].startswith("the start0 handler")
    note = js(root, "handoff", "q", "--goal", "the handlers")  # no --task: q belongs to the task already
    assert note["checkpoints"] == [{"task": tid, "version": 2}]


def test_the_mcp_task_tools(spot: Path) -> None:
    from mcp import Client, StdioServerParameters  # noqa: PLC0415

    params = StdioServerParameters(command=sys.executable, args=["-m", "engram_server.entry", "mcp"], cwd=str(spot),
                                   env=dict(os.environ))

    async def go() -> None:
        async with Client(params) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"task_new", "task_list", "task_show", "task_join", "task_close", "task_checkpoints"} <= names
            made = await c.call_tool("task_new", {"title": "review context", "session": SPOTTER_OTHER})
            assert made.is_error is False, made.content
            tid = made.structured_content["id"]
            joined = (await c.call_tool("task_join", {"task": tid, "session": CODEX_SESSION})).structured_content
            assert [s["harness"] for s in joined["sessions"]] == ["claude-code", "codex"]
            doc = (await c.call_tool("resume", {"task": tid, "budget": 900})).structured_content
            assert doc["session"]["task"]["checkpoint"] == 1 and doc["budget"]["used"] <= 900
            assert doc["more"] == f"resume(task='{tid}', budget=2900)"
            note = (await c.call_tool("handoff", {"task": tid, "session": CODEX_SESSION,
                                                  "next_steps": ["run the tests"]})).structured_content
            assert note["checkpoints"] == [{"task": tid, "version": 2}]
            rows = (await c.call_tool("task_checkpoints", {"task": tid})).structured_content["checkpoints"]
            assert [(r["version"], r["kind"]) for r in rows] == [(1, "resume"), (2, "handoff")]
            one = (await c.call_tool("task_checkpoints", {"task": tid, "version": 2})).structured_content
            assert one["checkpoints"][0]["doc"]["note"]["next"] == ["run the tests"]
            listed = (await c.call_tool("task_list", {})).structured_content["tasks"]
            assert [t["id"] for t in listed] == [tid]
            closed = (await c.call_tool("task_close", {"task": tid, "why": "done"})).structured_content
            assert closed["status"] == "closed" and closed["by"]["type"] == "agent"
            assert (await c.call_tool("task_list", {})).structured_content["tasks"] == []
            bad = await c.call_tool("task_show", {"task": "zzz"})
            assert bad.is_error and "no task 'zzz'" in bad.content[0].text
            cli = js(spot, "task", "show", tid)
            assert cli["status"] == "closed" and cli["checkpoints"] == 2

    asyncio.run(go())


def test_the_session_start_hook_gives_the_task_package(spot: Path, spotter: Path) -> None:
    """After a compaction of a session that belongs to an open task, the context the hook injects
    is the task's package (its sessions, its latest hand-off), kept as a checkpoint."""
    tid = js(spot, "task", "new", "review context", "--session", CODEX_SESSION)["id"]
    js(spot, "task", "join", tid, SPOTTER_OTHER)
    payload = {"session_id": SPOTTER_OTHER, "transcript_path": str(spotter / f"{SPOTTER_OTHER}.jsonl"),
               "cwd": str(spot), "hook_event_name": "SessionStart", "source": "compact"}
    out = json.loads(run_engram(spot, "resume", "--hook", input=json.dumps(payload).encode()).stdout)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert f"Task {tid} (open): review context — 2 sessions, checkpoint 1" in context
    assert "List the files" in context or "019fc8be" in context, "the other harness's session is part of it"
    assert [c["kind"] for c in js(spot, "task", "checkpoints", tid)] == ["resume"]
    js(spot, "task", "close", tid)
    out = json.loads(run_engram(spot, "resume", "--hook", input=json.dumps(payload).encode()).stdout)
    assert f"Task {tid}" not in out["hookSpecificOutput"]["additionalContext"], "closed: the session's own package"


def test_resuming_one_session_of_an_open_task_is_kept_as_the_tasks_checkpoint(spot: Path) -> None:
    tid = js(spot, "task", "new", "--session", SPOTTER_MAIN[:8])["id"]
    doc = js(spot, "resume", SPOTTER_MAIN[:8], "--budget", "1200")
    assert doc["session"]["session_id"] == SPOTTER_MAIN, "the session's own package, not the task's"
    assert doc["session"]["task"] == {"id": tid, "title": "Implement spotter-gqc", "status": "open", "checkpoint": 1}
    assert doc["budget"]["used"] <= 1200
    assert js(spot, "resume", SPOTTER_MAIN[:8], "--budget", "1200")["session"]["task"]["checkpoint"] == 1, \
        "the same package again is the same checkpoint"
    rows = js(spot, "task", "checkpoints", tid)
    assert [(r["version"], r["kind"], r["session"]) for r in rows] == [(1, "resume", SPOTTER_MAIN)]
    text = run_engram(spot, "resume", SPOTTER_MAIN[:8], "--budget", "1200").stdout
    assert f"Part of task {tid} (open): Implement spotter-gqc — kept as its checkpoint 1; " \
           f"the whole task: engram resume --task {tid}" in text
    other = js(spot, "resume", CODEX_SESSION, "--budget", "600")
    assert "task" not in other["session"], "a session of no task: nothing kept"
    assert len(js(spot, "task", "checkpoints", tid)) == 1
    js(spot, "task", "close", tid)
    assert "task" not in js(spot, "resume", SPOTTER_MAIN[:8], "--budget", "1300")["session"], \
        "a closed task keeps no more checkpoints"
