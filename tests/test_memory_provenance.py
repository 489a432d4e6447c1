"""A memory an agent writes leads to the transcript event it was written at: the MCP SDK's client
writes memories through `engram mcp` (and a command runs `engram remember` as an agent's shell
would), then the session's transcript, in Claude Code's and Codex's shapes, holding those calls is
ingested; the memories then name the session and the call (tape + offset) in `memory show`,
`recall --json` and the MCP tools, once, however often the ingest runs."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

from claude_shapes import Session
from conftest import run_engram
from mcp import Client
from test_codex import Rollout
from test_memory_mcp import stdio

DECISION = "Uploads retry three times with jittered backoff, then surface a toast"
CLI_NOTE = "The nightly export job must run after the ledger closes at 02:00 UTC"


def _now_times(records: list[dict[str, Any]], key: str) -> None:
    """Stamp the records as written in the last minute, one second apart (a session just now)."""
    start = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=len(records) + 5)
    for i, rec in enumerate(records):
        rec[key] = (start + dt.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _mcp_call(s: Session, name: str, inp: dict[str, Any], text: str) -> None:
    """An MCP tool call as Claude Code records it: the tool_use, then the tool_result whose content
    (and toolUseResult) is the server's text blocks."""
    call_id = f"toolu_{s.session_id[:6]}{len(s.records):04d}"
    s.records.append({**s._base(), "type": "assistant", "message": {
        "model": "claude-opus-4-6", "role": "assistant", "type": "message",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": inp}]}})
    blocks = [{"type": "text", "text": text}]
    s.records.append({**s._base(), "type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": call_id, "type": "tool_result", "content": blocks}]}, "toolUseResult": blocks})


def _show(repo: Path, mid: str) -> dict[str, Any]:
    return json.loads(run_engram(repo, "memory", "show", mid, "--json").stdout)


def _log_lines(repo: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in (repo / ".engram" / "events" / "memories").glob("*.jsonl"))


def _event(repo: Path, ref: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(run_engram(repo, "view", ref["tape"], "--at", str(ref["offset"]), "--before", "0",
                                "--after", "0", "--json").stdout)
    return next(e for e in doc["events"] if e["offset"] == ref["offset"])


async def test_claude_code_session_links_its_memories_to_the_calls_that_wrote_them(repo: Path, tmp_path: Path) -> None:
    async with Client(stdio(repo)) as c:
        wrote = await c.call_tool("remember", {"content": DECISION, "kind": "decision", "tags": ["uploads"]})
        assert wrote.is_error is False, wrote.content
        mid = wrote.structured_content["id"]
        again = await c.call_tool("remember", {"content": DECISION.lower()})
        assert again.structured_content["merged_into"] == mid
        wrote_text, again_text = wrote.content[0].text, again.content[0].text
    # the agent's shell runs the command line (Claude Code sets CLAUDECODE=1 in what its tools run)
    cli_out = run_engram(repo, "remember", CLI_NOTE, "--kind", "fact", env={"CLAUDECODE": "1"}).stdout
    cli_id = cli_out.split()[0]
    before = _show(repo, mid)
    assert before["evidence"] == [] and "session" not in before["source"]

    sid = str(uuid.uuid4())
    s = Session(cwd=repo, session_id=sid)
    s.prompt("why do uploads fail silently? fix it and remember the decision")
    _mcp_call(s, "mcp__engram__remember", {"content": DECISION, "kind": "decision", "tags": ["uploads"]}, wrote_text)
    _mcp_call(s, "mcp__engram__remember", {"content": DECISION.lower()}, again_text)
    s._call("Bash", {"command": f"engram remember '{CLI_NOTE}' --kind fact", "description": "Record the note"},
            cli_out, {"stdout": cli_out, "stderr": "", "interrupted": False, "isImage": False})
    _now_times(s.records, "timestamp")
    transcript = s.save(tmp_path / "claude")
    run_engram(repo, "ingest", str(transcript))

    shown = _show(repo, mid)
    written = shown["source"]["written_at"]
    assert shown["source"]["session"] == sid and shown["source"]["type"] == "agent"
    call = _event(repo, written)
    assert call["kind"] == "tool.call" and call["name"] == "mcp__engram__remember"
    assert call["input"]["content"] == DECISION
    # the second call reinforced the memory: its event is evidence too, not where it was written
    assert len(shown["evidence"]) == 2 and shown["evidence"][0] == written
    merged = _event(repo, shown["evidence"][1])
    assert merged["input"]["content"] == DECISION.lower()
    text = run_engram(repo, "memory", "show", mid).stdout
    assert f"engram view {written['tape'][:12]} --at {written['offset']} (the call that wrote it)" in text
    assert f"session {sid[:12]}" in text

    by_cli = _show(repo, cli_id)
    assert by_cli["source"]["session"] == sid and by_cli["source"]["harness"] == "claude-code"
    shell = _event(repo, by_cli["source"]["written_at"])
    assert shell["name"] == "Bash" and "engram remember" in shell["input"]["command"]

    recalled = json.loads(run_engram(repo, "recall", "upload retry backoff", "--json").stdout)["memories"][0]
    assert recalled["id"] == mid and recalled["evidence"] == shown["evidence"]
    async with Client(stdio(repo)) as c:
        found = await c.call_tool("recall", {"query": "upload retry backoff"})
        top = found.structured_content["memories"][0]
        assert top["evidence"] == shown["evidence"] and top["source"]["written_at"] == written

    # idempotent: ingesting again, or a rebuilt index looking at every tape again, adds nothing
    lines = _log_lines(repo)
    run_engram(repo, "ingest", str(transcript))
    run_engram(repo, "reindex")
    run_engram(repo, "ingest", str(transcript))
    assert _log_lines(repo) == lines
    assert _show(repo, mid) == {**shown, "last_recalled": _show(repo, mid)["last_recalled"],
                                "recall_count": _show(repo, mid)["recall_count"]}


async def test_codex_session_links_an_mcp_memory_by_its_content(repo: Path, tmp_path: Path) -> None:
    """Codex records an MCP call as a function call (`engram__remember`, or `mcp__engram__remember`
    in newer versions); with its output missing, the content finds the memory."""
    async with Client(stdio(repo)) as c:
        wrote = await c.call_tool("remember", {"content": DECISION})
        mid = wrote.structured_content["id"]
    r = Rollout().meta(repo).turn(repo).message("user", "remember how uploads retry")
    r.function("call_1", "engram__remember", {"content": DECISION})
    _now_times(r.records, "timestamp")
    run_engram(repo, "ingest", str(r.write(tmp_path / "codex" / "rollout-2026-11-28T10-00-00-x.jsonl")))
    shown = _show(repo, mid)
    call = _event(repo, shown["source"]["written_at"])
    assert call["name"] == "engram__remember" and call["input"] == {"content": DECISION}
    assert shown["source"]["session"] == r.records[0]["payload"]["id"]


async def test_a_person_s_memory_and_another_text_are_not_linked(repo: Path, tmp_path: Path) -> None:
    """A call whose content no agent's memory holds, and a person's memory with the same words as a
    call, stay as they were: a link needs the agent's memory the call wrote."""
    mine = run_engram(repo, "remember", DECISION, env={"CLAUDECODE": "", "CLAUDE_CODE_ENTRYPOINT": ""}).stdout.split()[0]
    s = Session(cwd=repo, session_id=str(uuid.uuid4()))
    _mcp_call(s, "mcp__engram__remember", {"content": DECISION}, "")
    _mcp_call(s, "mcp__engram__remember", {"content": "a note nobody kept"}, "")
    _now_times(s.records, "timestamp")
    lines = _log_lines(repo)
    run_engram(repo, "ingest", str(s.save(tmp_path / "claude")))
    assert _log_lines(repo) == lines
    assert _show(repo, mine)["evidence"] == []
