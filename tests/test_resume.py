"""`engram resume` on real transcripts (the spotter Claude Code sessions), on sessions in the
harnesses' real record shapes (Claude Code TodoWrite / TaskCreate / TaskUpdate and failing Bash
runs, Codex update_plan and shell calls), on a chain a compaction split into two sessions, and
through the MCP SDK client."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_shapes import Session
from conftest import (
    SPOTTER_MAIN,
    SPOTTER_OTHER,
    build_spot_repo,
    git,
    run_engram,
    session_cwd,
    unpack,
)

from engram.continuity.package import file_entries
from engram.query.budget import TOKEN_BYTES


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("resume") / "repo"
    build_spot_repo(spotter, root)
    return root


def resume(cwd: Path, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(run_engram(cwd, "resume", "--json", *args).stdout)
    return doc


def ats(doc: dict[str, Any]) -> list[str]:
    """Every `tape@offset` pointer in the package."""
    out = [r["at"] for r in doc["requests"]] + ([doc["last_message"]["at"]] if doc["last_message"] else [])
    for key in ("failing", "must_not_redo", "errors", "commands"):
        out += [x["at"] for x in doc[key] if "at" in x]
    out += [x["at"] for x in file_entries(doc, "working_set")]
    if doc["plan"]:
        out += [i["at"] for i in doc["plan"]["open"]]
    return out


def test_resume_of_the_latest_real_session_within_its_budget(spot: Path) -> None:
    doc = resume(spot)
    assert doc["session"]["session_id"] == SPOTTER_OTHER, "the latest session is the default"
    assert doc["session"]["compactions"] == 1
    assert doc["budget"]["tokens"] == 2000 and doc["budget"]["used"] <= 2000
    assert len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()) <= 2000 * TOKEN_BYTES
    # the person's words, latest first, verbatim: "continue" then the request it continues
    assert doc["requests"][0]["text"] == "continue"
    assert doc["requests"][1]["text"].startswith("Work on bead spotter-dov.")
    assert "pushed" in doc["last_message"]["text"]
    done = {(e["category"], e["command"]) for e in doc["must_not_redo"]}
    assert ("push", "git push --set-upstream origin spotter-dov 2>&1") in done
    assert any(c == "commit" for c, _ in done)
    assert all(e["outcome"] == "done" for e in doc["must_not_redo"]), "a failed commit did nothing to repeat"
    files = [w["file"] for w in file_entries(doc, "working_set")]
    assert files[0] == "priv/static/assets/spotter.css", "the file touched last comes first"
    assert doc["left_out"] and doc["more"] == f"engram resume {SPOTTER_OTHER} --budget 4000"
    # every pointer opens in `engram view` on the event it names
    for at in ats(doc)[:12]:
        view = json.loads(run_engram(spot, "view", at, "--before", "0", "--after", "0").stdout)
        assert view["at"] == int(at.split("@")[1]) and view["session_id"] == SPOTTER_OTHER


def test_no_budget_gives_everything_and_a_small_one_keeps_the_most_load_bearing(spot: Path) -> None:
    whole = resume(spot, SPOTTER_MAIN[:8], "--budget", "0")
    assert whole["left_out"] is False and "budget" not in whole
    assert whole["session"]["session_id"] == SPOTTER_MAIN
    assert {"mix ecto.migrate 2>&1"} <= {e["command"] for e in whole["must_not_redo"] if e["category"] == "migration"}
    assert len(whole["working_set"]) > 30 and len(whole["commands"]) > 40
    small = resume(spot, SPOTTER_MAIN, "--budget", "400")
    assert small["budget"]["used"] <= 400
    assert small["requests"][0]["text"] == "did you push?"
    assert small["requests"][1]["text"] == "Implement spotter-gqc", "a short request brings the one it follows"
    assert small["left_out"]["working_set"] >= 30


def test_the_working_set_says_what_changed_since(spot: Path, tmp_path: Path) -> None:
    doc = resume(spot, SPOTTER_MAIN, "--budget", "0")
    state = {w["file"]: w["state"] for w in doc["working_set"]}
    edited = [w["file"] for w in doc["working_set"] if w["edits"] and w["state"] == "as-left"]
    assert len(edited) >= 10
    changed, gone = edited[0], edited[1]
    original = (spot / changed).read_text()
    removed = (spot / gone).read_text()
    try:
        (spot / changed).write_text(original + "\n# edited by hand after the session\n")
        (spot / gone).unlink()
        state = {w["file"]: w["state"] for w in resume(spot, SPOTTER_MAIN, "--budget", "0")["working_set"]}
        assert state[changed] == "changed since" and state[gone] == "deleted since"
    finally:
        (spot / changed).write_text(original)
        (spot / gone).write_text(removed)
    assert state[edited[2]] == "as-left"


def test_line_endings_alone_are_not_an_edit(spot: Path) -> None:
    """A checkout with `core.autocrlf` (or an editor) turning LF into CRLF changed no line: resume
    says the file is as the session left it, with its line endings changed, not `changed since`."""
    doc = resume(spot, SPOTTER_MAIN, "--budget", "0")
    edited = [w["file"] for w in doc["working_set"] if w["edits"] and w["state"] == "as-left"]
    crlf, changed = edited[3], edited[4]
    originals = {p: (spot / p).read_bytes() for p in (crlf, changed)}
    try:
        (spot / crlf).write_bytes(originals[crlf].replace(b"\n", b"\r\n"))
        (spot / changed).write_bytes(originals[changed].replace(b"\n", b"\r\n") + b"# by hand\r\n")
        works = {w["file"]: w for w in resume(spot, SPOTTER_MAIN, "--budget", "0")["working_set"]}
        text = run_engram(spot, "resume", SPOTTER_MAIN, "--budget", "0").stdout
    finally:
        for p, data in originals.items():
            (spot / p).write_bytes(data)
    assert works[crlf]["state"] == "as-left (line endings changed)"
    assert "changed_by" not in works[crlf]
    assert works[changed]["state"] == "changed since", "an edit beside new line endings is still an edit"
    assert f"- {crlf}:" in text and "[as-left (line endings changed)]" in text


def test_pretty_text_and_first_prompts(spot: Path) -> None:
    text = run_engram(spot, "resume").stdout
    assert text.startswith(f"Session {SPOTTER_OTHER} (claude-code)")
    assert "## Must not redo" in text and "## Working set" in text and "Budget: " in text
    assert "Left out: " in text and f"More: engram resume {SPOTTER_OTHER} --budget 4000" in text
    small = run_engram(spot, "resume", "--budget", "600").stdout
    assert "1 edit," in small or "1 edit " in small, "the real session has files edited once"
    assert not re.search(r"\b1 (edits|reads|tool errors|files|commands|side effects|plan items)\b", text + small)
    for harness, name in (("codex", "Codex"), ("claude", "Claude Code")):
        prompt = run_engram(spot, "resume", "--for", harness).stdout
        assert prompt.startswith(f"You are continuing work that session {SPOTTER_OTHER} (claude-code) left unfinished")
        assert f"you are in {name}" in prompt
        assert f"--for {harness}" in prompt


def test_the_first_prompt_names_a_session_of_any_harness_in_good_english(repo: Path, tmp_path: Path) -> None:
    """It said "work that a opencode session" (a harness whose name starts with a vowel)."""
    unpack(Path(__file__).parent / "fixtures" / "opencode", tmp_path / "oc")
    run_engram(repo, "ingest", str(tmp_path / "oc" / "ses_27a3283eeffe2okXvUQaxKJ0Nw.json"))
    prompt = run_engram(repo, "resume", "--for", "claude").stdout
    assert prompt.startswith("You are continuing work that session ses_27a3283eeffe2okXvUQaxKJ0Nw (opencode) "
                             "left unfinished; you are in Claude Code."), prompt[:200]


def test_unknown_session_is_a_clear_error(spot: Path) -> None:
    proc = run_engram(spot, "resume", "zzzz-no-such", check=False)
    assert proc.returncode == 1 and "no tape or session matches 'zzzz-no-such'" in proc.stderr
    proc = run_engram(spot, "resume", "--harness", "codex", check=False)
    assert proc.returncode == 1 and "no session from harness 'codex': the store holds sessions of claude-code" \
        in proc.stderr and "engram ingest" not in proc.stderr, proc.stderr


def test_the_session_start_hook_with_real_payloads_and_garbage(spot: Path, spotter: Path, tmp_path: Path) -> None:
    """Claude Code's SessionStart payload after a compaction: the session's package as context for
    the new one. Anything else (a fresh start, garbage, a directory without a store): nothing,
    exit 0, at once."""
    import time  # noqa: PLC0415

    payload = {"session_id": SPOTTER_OTHER, "transcript_path": str(spotter / f"{SPOTTER_OTHER}.jsonl"),
               "cwd": str(spot), "hook_event_name": "SessionStart", "source": "compact"}
    out = json.loads(run_engram(spot, "resume", "--hook", input=json.dumps(payload).encode()).stdout)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert f"session {SPOTTER_OTHER} (claude-code) left unfinished" in context and "you are in Claude Code" in context
    assert "## Must not redo" in context and "git push --set-upstream origin spotter-dov" in context
    cleared = json.loads(run_engram(spot, "resume", "--hook", input=json.dumps(
        {**payload, "source": "clear", "session_id": "new-session"}).encode()).stdout)
    assert SPOTTER_OTHER in cleared["hookSpecificOutput"]["additionalContext"], "after /clear: the latest session"
    garbage = ["", "garbage", "[]", "{}", json.dumps({**payload, "source": "startup"}),
               json.dumps({**payload, "cwd": str(tmp_path)}), json.dumps({**payload, "cwd": "/nonexistent"}),
               json.dumps({**payload, "hook_event_name": "Stop"}), json.dumps({"source": ["compact"], "cwd": 3}),
               "\x00" * 5000]
    for raw in garbage:
        t0 = time.monotonic()
        proc = run_engram(spot, "resume", "--hook", input=raw.encode(), check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), raw[:40]
        assert time.monotonic() - t0 < 10


def _long_session(spotter: Path, out: Path, mb: float) -> Path:
    """One Claude Code session of about `mb` MB: the real spotter session's records again and
    again, each pass a day later with its own record and tool-call ids."""
    from datetime import datetime, timedelta  # noqa: PLC0415

    lines = (spotter / f"{SPOTTER_MAIN}.jsonl").read_text().splitlines()
    sid = "77777777-8888-4999-8aaa-bbbbbbbbbbbb"
    path = out / f"{sid}.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    size, day = 0, 0
    with path.open("w") as f:
        while size < mb * 1e6:
            for line in lines:
                rec = json.loads(line.replace("toolu_", f"toolu_d{day}"))
                for key in ("uuid", "parentUuid", "logicalParentUuid"):
                    if isinstance(rec.get(key), str):
                        rec[key] = f"{day:04d}{rec[key][4:]}"
                if isinstance(rec.get("sessionId"), str):
                    rec["sessionId"] = sid
                if isinstance(rec.get("timestamp"), str):
                    t = datetime.fromisoformat(rec["timestamp"]) + timedelta(days=day)
                    rec["timestamp"] = t.isoformat().replace("+00:00", "Z")
                data = json.dumps(rec) + "\n"
                f.write(data)
                size += len(data)
            day += 1
    return path


def test_budgets_hold_on_a_10_mb_session(spotter: Path, tmp_path: Path) -> None:
    root = _repo(tmp_path)
    path = _long_session(spotter, tmp_path / "long", 10)
    assert path.stat().st_size >= 10e6
    run_engram(root, "ingest", str(path))
    for budget in (300, 2000):
        doc = resume(root, "--budget", str(budget))
        assert doc["session"]["events"] > 2000 and doc["budget"]["used"] <= budget
        assert doc["left_out"]["commands"] >= 40
        assert len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()) <= budget * TOKEN_BYTES
    assert doc["requests"][0]["text"] == "did you push?" and doc["must_not_redo"]
    whole = resume(root, "--budget", "0")
    for key in ("working_set", "likely_next"):  # at 2,000 tokens every file, the first three of each in full
        assert doc[key][:3] == whole[key][:3]
        assert sorted(w["file"] for w in file_entries(doc, key)) == sorted(w["file"] for w in whole[key])


def _repo(tmp_path: Path) -> Path:
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    return root


# ------------------------------------------------------------------ plans and failing checks


def _bash(s: Session, command: str, code: int, out: str) -> None:
    """A Bash call and its result as Claude Code records them (a failure: `is_error`, and the
    result's text and `toolUseResult` starting with the exit code)."""
    if code == 0:
        s._call("Bash", {"command": command, "description": "run"}, out,
                {"stdout": out, "stderr": "", "interrupted": False, "isImage": False})
        return
    call_id = f"toolu_{s.session_id[:6]}{len(s.records):04d}"
    s.records.append({**s._base(), "type": "assistant", "message": {
        "model": "claude-opus-4-6", "role": "assistant", "type": "message",
        "content": [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}]}})
    s.records.append({**s._base(), "type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": call_id, "type": "tool_result", "content": f"Exit code {code}\n{out}", "is_error": True}]},
        "toolUseResult": f"Error: Exit code {code}\n{out}"})


def test_claude_todowrite_then_task_tools_and_a_failing_test(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    s = Session(root, "dddddddd-4444-4444-8444-000000000004")
    s.prompt("Add retries to the fetcher and make the suite pass")
    s._call("TodoWrite", {"todos": [
        {"content": "Write retry helper", "status": "completed", "activeForm": "Writing retry helper"},
        {"content": "Wire it into fetch()", "status": "in_progress", "activeForm": "Wiring it"},
        {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"}]},
        "Todos have been modified successfully.", {"oldTodos": [], "newTodos": []})
    s.write("retry.py", "def retry(fn):\n    return fn()\n")
    _bash(s, "pytest tests/test_retry.py -x 2>&1 | tail -20", 1, "FAILED tests/test_retry.py::test_gives_up")
    _bash(s, "git commit -am 'retry helper'", 0, "[main 1a2b3c4] retry helper")
    _bash(s, "pip install tenacity", 0, "Successfully installed tenacity")
    sess = s.save(tmp_path / "sessions")
    run_engram(root, "ingest", str(sess))
    doc = resume(root)
    assert doc["plan"]["tool"] == "TodoWrite" and doc["plan"]["done"] == 1
    assert [(i["text"], i["status"]) for i in doc["plan"]["open"]] == [
        ("Wire it into fetch()", "in_progress"), ("Run the tests", "pending")]
    (fail,) = doc["failing"]
    assert fail["kind"] == "test" and fail["exit_code"] == 1 and "test_gives_up" in fail["output"]
    assert {e["category"] for e in doc["must_not_redo"]} == {"commit", "package install"}
    assert doc["working_set"][0]["file"] == "retry.py" and doc["working_set"][0]["state"] == "deleted since"

    # the newer task tools replace the list; a later passing run of the whole suite settles the failure
    s.prompt("continue")
    s._call("TaskCreate", {"subject": "Handle timeouts", "description": "d", "activeForm": "Handling timeouts"},
            "Task #1 created successfully: Handle timeouts", {"task": {"id": "1", "subject": "Handle timeouts"}})
    s._call("TaskCreate", {"subject": "Document retries", "description": "d", "activeForm": "Documenting"},
            "Task #2 created successfully: Document retries", {"task": {"id": "2", "subject": "Document retries"}})
    s._call("TaskUpdate", {"taskId": "1", "status": "completed"}, "Updated task #1 status",
            {"success": True, "taskId": "1", "updatedFields": ["status"]})
    _bash(s, "pytest", 0, "12 passed in 0.5s")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    doc = resume(root)
    assert doc["plan"]["tool"] == "TaskCreate" and doc["plan"]["done"] == 1
    assert [(i["text"], i["status"]) for i in doc["plan"]["open"]] == [("Document retries", "pending")]
    assert doc["failing"] == []
    assert [r["text"] for r in doc["requests"]] == ["continue", "Add retries to the fetcher and make the suite pass"]


def test_codex_update_plan_and_shell_outcomes(tmp_path: Path) -> None:
    from test_codex import SID, Rollout, exec_out  # noqa: PLC0415

    root = _repo(tmp_path)
    r = Rollout().meta(root).turn(root)
    r.message("user", "Port the CLI to click and keep the tests green")
    r.function("c1", "update_plan", {"explanation": "Porting step by step", "plan": [
        {"step": "Inventory the commands", "status": "completed"},
        {"step": "Port the parser", "status": "in_progress"},
        {"step": "Update the docs", "status": "pending"}]}, "Plan updated")
    r.function("c2", "shell", {"command": ["bash", "-lc", "cargo build"], "workdir": str(root)},
               exec_out(101, "error[E0425]: cannot find value `x`"))
    r.function("c3", "shell", {"command": ["bash", "-lc", "git push origin main"], "workdir": str(root)},
               exec_out(0, "To example.invalid"))
    r.message("assistant", "The build fails on an unresolved name; fixing it next.")
    path = r.write(tmp_path / "codex" / "rollout-2025-11-22T20-45-35-x.jsonl")
    run_engram(root, "ingest", str(path))
    doc = resume(root, "--harness", "codex")
    assert doc["session"]["session_id"] == SID and doc["session"]["harness"] == "codex"
    assert doc["plan"]["tool"] == "update_plan" and doc["plan"]["explanation"] == "Porting step by step"
    assert [i["text"] for i in doc["plan"]["open"]] == ["Port the parser", "Update the docs"]
    (fail,) = doc["failing"]
    assert fail["kind"] == "build" and fail["command"] == "cargo build" and fail["exit_code"] == 101
    assert [(e["category"], e["command"]) for e in doc["must_not_redo"]] == [("push", "git push origin main")]
    assert doc["last_message"]["text"].startswith("The build fails")


# ------------------------------------------------------------------ hand-off notes


def test_a_handoff_note_is_shown_and_checked_against_the_transcript(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    s = Session(root, "eeeeeeee-5555-4555-8555-000000000005")
    s.prompt("Add retries to the fetcher and make the suite pass")
    s.write("retry.py", "def retry(fn):\n    return fn()\n")
    _bash(s, "pytest -q", 1, "1 failed, 11 passed")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    note = ("Goal: retries in the fetcher\nDone:\n- retry.py is finished\n- all tests pass\n"
            "Next steps:\n- commit the work\nMust preserve:\n- the retry signature\n")
    written = run_engram(root, "handoff", "--json", input=note.encode())
    saved = json.loads(written.stdout)
    assert saved["session_id"] == s.session_id and saved["note"]["next"] == ["commit the work"]
    doc = resume(root)
    h = doc["handoff"]
    assert h["id"] == saved["id"] and h["note"]["goal"] == "retries in the fetcher"
    assert h["note"]["must_preserve"] == ["the retry signature"]
    (d,) = h["disagreements"]
    assert d["note"] == "all tests pass" and "`pytest -q` failed (exit 1)" in d["transcript"]
    assert d["at"] == doc["failing"][0]["at"]
    assert "## The hand-off note disagrees with the transcript" in run_engram(root, "resume").stdout

    # the session goes on after the note (its clock later than the note's): the file it called
    # finished is edited again, the next step it named is done, and the suite passes
    s.day = "2099-01-01"
    s.write("retry.py", "def retry(fn, attempts=3):\n    return fn()\n")
    _bash(s, "git commit -am 'retries'", 0, "[main 1a2b3c4] retries")
    _bash(s, "pytest -q", 0, "12 passed")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    found = {d["transcript"].split(":")[0]: d for d in resume(root)["handoff"]["disagreements"]}
    assert set(found) == {"retry.py was edited after the note", "already done after the note"}
    assert "commit `git commit -am 'retries'`" in found["already done after the note"]["transcript"]

    # flags give the same note; a bad one is refused with the fields it takes
    out = run_engram(root, "handoff", "--goal", "ship it", "--next", "tag v1", "--done", "docs")
    assert out.stdout.split()[0] == resume(root)["handoff"]["id"]
    bad = run_engram(root, "handoff", check=False, input=b'{"goal": "x", "todo": ["y"]}')
    assert bad.returncode == 1 and "unknown hand-off field 'todo'" in bad.stderr


def test_a_handoff_says_which_named_spans_it_could_not_anchor(tmp_path: Path) -> None:
    """A hand-off's `FILE:A-B` that names no lines of the tree (a file gone, a typo) stays text;
    handoff says so and why. It printed "anchored to nosuch.py:1-2" for a file that is not there."""
    root = _repo(tmp_path)
    s = Session(root, "eeeeeeee-5555-4555-8555-000000000006")
    s.prompt("Add retries to the fetcher")
    s.write("retry.py", "def retry(fn):\n    return fn()\n")
    (root / "retry.py").write_text("def retry(fn):\n    return fn()\n")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    out = run_engram(root, "handoff", "--goal", "retries", "--must-preserve", "retry.py:1-2",
                     "--must-preserve", "nosuch.py:1-2", "--done", "old.py:900-901 removed")
    notes = out.stderr.splitlines()
    assert "  anchored to retry.py:1-2" in notes and not any("anchored to nosuch" in n for n in notes)
    assert f"  not anchored: nosuch.py: no such file in the working tree {root} (the note keeps nosuch.py:1-2 as text)" \
        in notes
    doc = json.loads(run_engram(root, "handoff", "--json", "--goal", "again", "--must-preserve", "nosuch.py:1-2").stdout)
    assert doc["anchored"] == [] and [u["span"] for u in doc["unanchored"]] == ["nosuch.py:1-2"]
    (root / "Makefile").write_text("all:\n\tpython retry.py\n")  # a file name with no extension
    doc = json.loads(run_engram(root, "handoff", "--json", "--goal", "build", "--must-preserve", "Makefile:1-2",
                                "--must-preserve", "/etc/passwd:1-2", "--next", "at 10:30-11 deploy").stdout)
    assert doc["anchored"] == ["Makefile:1-2"] and [u["span"] for u in doc["unanchored"]] == ["/etc/passwd:1-2"]


def test_a_handoff_written_in_a_folder_names_its_spans_from_the_root(tmp_path: Path) -> None:
    """Typed in src/, `retry.py:1-2` anchored the note right but its text kept the folder's path:
    resume, read at the root, named a file that is not there."""
    root = _repo(tmp_path)
    s = Session(root, "eeeeeeee-5555-4555-8555-000000000007")
    s.prompt("Add retries to the fetcher")
    s.write("src/retry.py", "def retry(fn):\n    return fn()\n")
    (root / "src").mkdir()
    (root / "src" / "retry.py").write_text("def retry(fn):\n    return fn()\n")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    doc = json.loads(run_engram(root / "src", "handoff", "--json", "--goal", "retries", "--must-preserve", "retry.py:1-2",
                                "--next", "check nosuch.py:1-2").stdout)
    assert doc["anchored"] == ["src/retry.py:1-2"] and doc["note"]["must_preserve"] == ["src/retry.py:1-2"]
    assert doc["note"]["next"] == ["check nosuch.py:1-2"]  # (anchored nowhere: kept as typed)
    assert resume(root)["handoff"]["note"]["must_preserve"] == ["src/retry.py:1-2"]
    assert "Must preserve:\n- src/retry.py:1-2\n" in run_engram(root, "resume").stdout


# ------------------------------------------------------------------ a chain of sessions


def test_a_compacted_chain_reads_as_one_session(tmp_path: Path) -> None:
    from test_lineage import continued_pair, tape  # noqa: PLC0415

    root = _repo(tmp_path)
    p, q, _ = continued_pair(tmp_path)
    unrelated = tape(tmp_path, "s", "2026-01-01T12:00:00Z", [
        {"kind": "msg.in", "text": "an unrelated question about the weather", "ts": "2026-01-01T12:00:01Z"}])
    run_engram(root, "ingest", str(p), str(q), str(unrelated))
    doc = resume(root, "q")
    assert [c["session_id"] for c in doc["session"]["chain"]] == ["p", "q"]
    assert doc["session"]["chain"][0]["via"] == "compact-summary"
    assert doc["requests"][-1]["text"].startswith("the start0 handler"), "the earlier session's request is part of the package"
    assert doc["last_message"]["text"].startswith("the other0 handler"), "the latest session's words are the last"
    assert doc["requests"][-1]["at"].split("@")[0] != doc["last_message"]["at"].split("@")[0]
    assert resume(root, "p")["session"]["continued_by"] == ["q"]


# ------------------------------------------------------------------ the MCP tool


def test_the_mcp_resume_tool(spot: Path) -> None:
    from mcp import Client, StdioServerParameters  # noqa: PLC0415

    params = StdioServerParameters(command=sys.executable, args=["-m", "engram_server.entry", "mcp"], cwd=str(spot),
                                   env=dict(os.environ))

    async def go() -> None:
        async with Client(params) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            hint = tools["resume"].annotations  # resume(task=) keeps a checkpoint, the same one once
            assert hint.read_only_hint is False and hint.idempotent_hint is True and hint.destructive_hint is False
            r = await c.call_tool("resume", {"budget": 800})
            assert r.is_error is False, r.content
            doc = r.structured_content
            assert doc["session"]["session_id"] == SPOTTER_OTHER and doc["budget"]["used"] <= 800
            assert doc["more"] == f"resume(session='{SPOTTER_OTHER}', budget=2800)"
            cli = resume(spot, "--budget", "800")
            assert doc["requests"] == cli["requests"] and doc["must_not_redo"] == cli["must_not_redo"]
            note = await c.call_tool("handoff", {"goal": "finish the renderer", "done": ["tests pass"],
                                                 "next_steps": ["review session_live.ex"]})
            assert note.is_error is False, note.content
            assert note.structured_content["session_id"] == SPOTTER_OTHER
            again = (await c.call_tool("resume", {"budget": 800})).structured_content
            assert again["handoff"]["id"] == note.structured_content["id"]
            assert again["handoff"]["note"]["next"] == ["review session_live.ex"]
            assert again["handoff"]["by"]["type"] == "agent"
            found = await c.call_tool("recall", {"query": "renderer", "kind": "handoff"})  # the CLI's kinds
            assert found.is_error is False, found.content
            assert [m["id"] for m in found.structured_content["memories"]] == [note.structured_content["id"]]
            listed = await c.call_tool("memories", {"kind": "handoff"})
            assert [m["id"] for m in listed.structured_content["memories"]] == [note.structured_content["id"]]
            run_engram(spot, "forget", note.structured_content["id"], "--purge")
            bad = await c.call_tool("resume", {"session": "zzzz-no-such"})
            assert bad.is_error and "no tape or session matches" in bad.content[0].text

    asyncio.run(go())


def test_engram_hook_gives_the_package_after_a_compaction_and_the_notes_brief(spot: Path, spotter: Path) -> None:
    """The SessionStart hook `engram setup` registers (`engram hook`) answers a compaction with the
    resume package and the notes' brief in one additionalContext; a fresh start with the brief alone."""
    run_engram(spot, "remember", "Deploys go through the staging branch first", "--kind", "decision",
               "--importance", "0.9")
    payload = {"session_id": SPOTTER_OTHER, "transcript_path": str(spotter / f"{SPOTTER_OTHER}.jsonl"),
               "cwd": str(spot), "hook_event_name": "SessionStart", "source": "compact"}
    out = json.loads(run_engram(spot, "hook", input=json.dumps(payload).encode()).stdout)
    context = out["hookSpecificOutput"]["additionalContext"]
    installed = subprocess.run([sys.executable, "-m", "engram_server.entry", "hook"], cwd=spot, check=True,
                               capture_output=True, text=True, input=json.dumps(payload), timeout=600)  # as setup runs it
    installed_context = json.loads(installed.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "spotter-dov" in installed_context and "staging branch first" in installed_context, "package and brief"
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "git push --set-upstream origin spotter-dov" in context, "the package"
    assert "staging branch first" in context, "the notes' brief"
    fresh = json.loads(run_engram(spot, "hook", input=json.dumps({**payload, "source": "startup"}).encode()).stdout)
    fresh_context = fresh["hookSpecificOutput"]["additionalContext"]
    assert "staging branch first" in fresh_context and "spotter-dov" not in fresh_context


# ------------------------------------------------------------------ files named, not touched yet


def test_files_named_but_not_touched_are_listed_most_likely_first(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    s = Session(root, "eeeeeeee-5555-4555-8555-000000000005")
    s.prompt("Add retries to src/fetch/client.py, then cover them in tests/test_client.py")
    s.write("src/fetch/retry.py", "def retry(fn):\n    return fn()\n")
    _bash(s, "git status --short", 0, " M src/fetch/retry.py\n?? src/fetch/backoff.py\n")
    _bash(s, "pytest -x", 1, "  File \"/usr/lib/python3/site-packages/urllib3/poolmanager.py\", line 3\n"
                             "node_modules/left-pad/index.js\nsee https://docs.python.org/3/library/os.path.html")
    sess = s.save(tmp_path / "sessions")
    run_engram(root, "ingest", str(sess))
    doc = resume(root)
    named = {m["file"]: m for m in file_entries(doc, "likely_next")}
    assert list(named)[:2] == ["src/fetch/client.py", "tests/test_client.py"], "said in the request: first"
    assert named["src/fetch/client.py"]["named_in"] == ["request"]
    assert named["src/fetch/backoff.py"]["named_in"] == ["output"], "git status named it"
    assert "src/fetch/retry.py" not in named, "a file touched is in the working set, not here"
    assert not [f for f in named if "site-packages" in f or "node_modules" in f or "python.org" in f]
    text = run_engram(root, "resume").stdout
    assert "## Not touched yet: named" in text and "src/fetch/backoff.py  [absent] (in: output;" in text
    (root / "src" / "fetch").mkdir(parents=True, exist_ok=True)
    (root / "src" / "fetch" / "client.py").write_text("x = 1\n")
    assert {m["file"]: m["state"] for m in file_entries(resume(root), "likely_next")}["src/fetch/client.py"] == "present"


def test_every_file_named_is_in_the_transcript_where_it_points(spot: Path) -> None:
    """Nothing guessed: each file of `likely_next` is written in the event its `at` opens."""
    doc = resume(spot, SPOTTER_MAIN, "--budget", "0")
    named = [m for m in doc["likely_next"] if m.get("named_in")]
    assert len(named) >= 10
    touched = {w["file"] for w in doc["working_set"]}
    for m in named[:10]:
        assert m["file"] not in touched
        view = run_engram(spot, "view", m["at"], "--before", "0", "--after", "0", "--json").stdout
        assert m["file"].rsplit("/", 1)[-1] in view, (m, view[:300])


def test_the_working_set_is_latest_first_whether_a_file_was_edited_or_read(tmp_path: Path) -> None:
    """The session edited src/old.py, then read src/next.py and src/other.py (where its next edit
    goes, often): the files read come first, and a budget holding two files keeps those two, not
    the file edited earlier."""
    root = _repo(tmp_path)
    s = Session(root, "dcdcdcdc-aaaa-4aaa-8aaa-00000000000a")
    s.files.update({"src/next.py": "x = 1\n", "src/other.py": "y = 2\n"})
    s.prompt("Tidy the loaders")
    s.write("src/old.py", "z = 3\n")
    s.read("src/other.py")
    s.read("src/next.py")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    doc = resume(root)
    assert [w["file"] for w in doc["working_set"]] == ["src/next.py", "src/other.py", "src/old.py"]
    head = len(json.dumps({k: v for k, v in doc.items() if k not in ("working_set", "budget", "left_out", "more")},
                          separators=(",", ":")).encode()) // TOKEN_BYTES
    low, high = head, head + 400  # the smallest budget that holds two files
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if len(resume(root, "--budget", str(mid))["working_set"]) >= 2 else (mid + 1, high)
    small = resume(root, "--budget", str(low))
    assert [w["file"] for w in file_entries(small, "working_set")] == ["src/next.py", "src/other.py"]


def test_under_a_budget_files_past_the_first_three_share_their_tape_and_folder_so_all_fit(tmp_path: Path) -> None:
    """The session edited 60 files of one folder: at 820 tokens, where the former short entry of
    each (path, state, pointer: ~24 tokens) fits for fewer than half of them, the package names all
    60, the latest three in full and the rest in one group that says the tape, the state and the
    folder once and each file's offset: every file keeps a pointer that `engram view` opens on
    the event that edited it."""
    root = _repo(tmp_path)
    s = Session(root, "dcdcdcdc-bbbb-4bbb-8bbb-00000000000b")
    s.prompt("Rename the handlers' option")
    paths = [f"src/services/handlers/handler_number_{n:02d}.py" for n in range(60)]
    for p in paths:
        s.write(p, f"OPTION = {len(p)}\n")
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text(f"OPTION = {len(p)}\n")  # the tree as the session left it
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    doc = resume(root, "--budget", "820")
    files = file_entries(doc, "working_set")
    assert doc["budget"]["used"] <= 820 and not doc["left_out"]
    assert [w["file"] for w in files] == paths[::-1], "every file named, latest first"
    former = sum(len(json.dumps({"file": w["file"], "state": w["state"], "at": w["at"]}, separators=(",", ":"))) + 1
                 for w in files[3:])
    rest = doc["budget"]["used"] * TOKEN_BYTES - len(json.dumps(doc["working_set"][3:], separators=(",", ":")))
    assert 820 * TOKEN_BYTES - rest < former / 2, "in the former form fewer than half of these files would fit"
    assert all("at" in w and w["edits"] == 1 for w in doc["working_set"][:3])
    group = doc["working_set"][3]
    assert len(doc["working_set"]) == 4 and list(group["files"]) == ["src/services/handlers/"]
    assert group["tape"] and group["state"] == "as-left" and len(group["files"]["src/services/handlers/"]) == 57
    assert {w["state"] for w in files} == {"as-left"}
    for w in (files[3], files[30], files[-1]):  # each pointer opens on the edit of its file
        assert w["at"].startswith(group["tape"] + "@")
        view = json.loads(run_engram(root, "view", w["at"], "--before", "0", "--after", "0").stdout)
        assert view["at"] == int(w["at"].split("@")[1]) and w["file"] in json.dumps(view)
    text = run_engram(root, "resume", "--budget", "820").stdout
    assert f"- {paths[-1]}:1-1  [as-left] 1 edit (" in text
    off = files[-1]["at"].split("@")[1]
    assert f"\n- tape {group['tape']} [as-left]: src/services/handlers/ {{handler_number_56.py @" in text
    assert f"handler_number_00.py @{off}}}\n" in text, "a group on a line, each file with its offset"
    assert "Past the first three of a list, files by tape and state (`tape T: x.py @12`: `engram view T@12`)" in text


def _related_session(root: Path, tmp_path: Path) -> None:
    s = Session(root, "ffffffff-6666-4666-8666-000000000006")
    s.prompt("Make the core module's parse step stricter")
    s.write("src/app/core.py", "def parse(x):\n    return int(x)\n")
    sess = s.save(tmp_path / f"sessions-{root.name}")
    run_engram(root, "ingest", str(sess))


def _commit_files(root: Path, files: dict[str, str], message: str) -> None:
    """Write these files (folders made) and commit them all: a repository whose history resume reads."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", ".")
    git(root, "commit", "-qm", message)


def test_files_the_history_relates_to_the_working_set_are_listed_with_why(tmp_path: Path) -> None:
    """The session edits src/app/core.py and names nothing else: the repository's history says
    helpers.py changes with it, and its naming says tests/test_core.py tests it; none of that is
    read from a repository without git."""
    root = _repo(tmp_path)
    files = {"src/app/core.py": "a\n", "src/app/helpers.py": "a\n", "src/app/other.py": "a\n",
             "tests/test_core.py": "a\n", "README.md": "a\n"}
    _commit_files(root, files, "start")
    for n in range(2):
        for rel in ("src/app/core.py", "src/app/helpers.py"):
            (root / rel).write_text(f"v{n}\n")
        git(root, "commit", "-qam", f"core and helpers {n}")
    (root / "src/app/other.py").write_text("b\n")
    git(root, "commit", "-qam", "other alone")
    _related_session(root, tmp_path)
    doc = resume(root)
    related = {m["file"]: m["why"] for m in doc["likely_next"] if "why" in m}
    assert related["tests/test_core.py"] == ["test of src/app/core.py"], "its strongest reason only: room for more files"
    assert related["src/app/helpers.py"][0] == "changed with src/app/core.py in 3 commits"
    assert list(related)[:2] == ["tests/test_core.py", "src/app/helpers.py"], "a test, then the file changed with it"
    assert "src/app/core.py" not in related, "the file edited is in the working set"
    assert {m["file"]: m["state"] for m in file_entries(doc, "likely_next")}["src/app/helpers.py"] == "present"
    text = run_engram(root, "resume").stdout
    assert "- src/app/helpers.py  [present] (changed with src/app/core.py in 3 commits" in text

    bare = (tmp_path / "nogit").resolve()
    bare.mkdir()
    run_engram(bare, "init")
    (bare / "tests").mkdir()
    (bare / "tests" / "test_core.py").write_text("a\n")
    _related_session(bare, tmp_path)
    doc = resume(bare)
    assert doc["working_set"][0]["file"] == "src/app/core.py"
    assert not [m for m in doc["likely_next"] if "why" in m], "no git: nothing related, nothing guessed"


# ------------------------------------------------------------------ tests to create, Windows paths


def test_a_new_source_gets_the_test_the_repository_layout_expects(tmp_path: Path) -> None:
    """The session adds lib/shop/checkout.ex and lib/shop/pay/card.ex and edits lib/shop/cart.ex;
    the repository tests its Elixir sources as test/<same folders>/<name>_test.exs. The new
    sources have no test yet: the package names the ones to create, each with the pair it follows;
    cart.ex has one already (listed as its test, nothing to create)."""
    root = _repo(tmp_path)
    files = {"lib/shop/cart.ex": "defmodule Cart do\nend\n", "test/shop/cart_test.exs": "# cart\n",
             "lib/shop/price.ex": "defmodule Price do\nend\n", "mix.exs": "# mix\n"}
    _commit_files(root, files, "shop")
    s = Session(root, "abababab-7777-4777-8777-000000000007")
    s.files.update(files)
    s.prompt("Add a checkout step that charges the card")
    s.write("lib/shop/pay/card.ex", "defmodule Shop.Pay.Card do\nend\n")
    s.edit("lib/shop/cart.ex", "defmodule Cart do\n", "defmodule Cart do\n  def total(c), do: c\n")
    s.write("lib/shop/checkout.ex", "defmodule Shop.Checkout do\nend\n")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    doc = resume(root)
    why = {m["file"]: m.get("why") for m in file_entries(doc, "likely_next")}
    assert why["test/shop/checkout_test.exs"] == [
        "test to create for lib/shop/checkout.ex, as test/shop/cart_test.exs tests lib/shop/cart.ex"]
    assert why["test/shop/pay/card_test.exs"] == [
        "test to create for lib/shop/pay/card.ex, as test/shop/cart_test.exs tests lib/shop/cart.ex"], "folders kept"
    assert why["test/shop/cart_test.exs"][0] == "test of lib/shop/cart.ex", "a test there: its own, none to create"
    assert not [f for f in why if f.startswith("test/") and "price" in f], "price.ex was not edited"
    states = {m["file"]: m["state"] for m in file_entries(doc, "likely_next")}
    assert states["test/shop/checkout_test.exs"] == "absent"
    text = run_engram(root, "resume").stdout
    assert "- test/shop/checkout_test.exs  [absent] (test to create for lib/shop/checkout.ex, as " in text


def test_a_python_layout_with_one_tests_folder(tmp_path: Path) -> None:
    """src/app/x.py tested by tests/test_x.py: a new src/app/y.py gets tests/test_y.py."""
    root = _repo(tmp_path)
    for rel in ("src/app/core.py", "tests/test_core.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "app")
    s = Session(root, "cdcdcdcd-8888-4888-8888-000000000008")
    s.prompt("Add a loader module")
    s.write("src/app/loader.py", "def load():\n    return 1\n")
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")))
    why = {m["file"]: m.get("why") for m in file_entries(resume(root), "likely_next")}
    assert why["tests/test_loader.py"] == ["test to create for src/app/loader.py, as tests/test_core.py tests src/app/core.py"]


def test_a_session_recorded_on_windows_names_the_same_files_likely_next(spot: Path, spotter: Path,
                                                                        tmp_path: Path) -> None:
    """The real spotter session with its paths as Claude Code on Windows writes them
    (`D:\\work\\spotter\\lib\\x.ex`): the files it names but did not touch are the repository's
    paths, the same as from the session recorded on Linux (they were bare names, most dropped)."""
    posix = resume(spot, SPOTTER_MAIN, "--budget", "0")
    cwd = re.escape(json.dumps(session_cwd(spotter / f"{SPOTTER_MAIN}.jsonl").rstrip("/"))[1:-1])
    windows = tmp_path / "windows"
    for src in spotter.rglob("*.jsonl"):  # (its subagents' transcripts too)
        lines = [re.sub(cwd + r"((?:/[\w.\-]+)*)", lambda m: "D:\\\\work\\\\spotter" + m.group(1).replace("/", "\\\\"), ln)
                 for ln in src.read_text().splitlines() if ln.strip()]
        (windows / src.relative_to(spotter)).parent.mkdir(parents=True, exist_ok=True)
        (windows / src.relative_to(spotter)).write_text("\n".join(lines) + "\n")
    assert '"cwd":"D:\\\\work\\\\spotter"' in (windows / f"{SPOTTER_MAIN}.jsonl").read_text().replace(" ", "")
    root = _repo(tmp_path)
    run_engram(root, "ingest", str(windows))
    doc = resume(root, SPOTTER_MAIN, "--budget", "0")
    named = [m["file"] for m in doc["likely_next"] if m.get("named_in")]
    assert not [f for f in named if "\\" in f or ":" in f]
    expected = [m["file"] for m in posix["likely_next"] if m.get("named_in")]
    assert len(expected) >= 20 and named[:20] == expected[:20]
