"""GitHub Copilot CLI sessions (`~/.copilot/session-state/<id>/events.jsonl`): found by `engram
ingest` under `COPILOT_HOME`, their `view` reads and `edit` / `create` edits at the lines Copilot's
own diff gives, a failed edit left out, compaction kept, and `engram explain` naming the session.

The log is built here in Copilot CLI's own shape (events as in EntityProcess/agentv's Entire
checkpoints, copilotVersion 1.0.64); the real sessions are measured by bench/harness_gemini.py."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_engram

APP = "def greet(name):\n    return 'hi ' + name\n\n\ndef main():\n    print(greet('you'))\n"
APP_AFTER = APP.replace("    return 'hi ' + name\n", "    message = f'hello {name}!'\n    return message\n")
SID = "c3f091b3-1a1f-435f-8acb-6c7520106212"


def event(typ: str, data: dict, n: int) -> dict:
    return {"type": typ, "data": data, "id": f"e{n}", "timestamp": f"2026-06-23T23:{n:02d}:00.000Z",
            "parentId": f"e{n - 1}" if n else None}


def git_diff(path: str, body: str, create: bool = False) -> str:
    head = f"\ndiff --git a{path} b{path}\n" + ("create file mode 100644\n" if create else "")
    return head + f"index 0000000..0000000 100644\n--- a{'/dev/null' if create else path}\n+++ b{path}\n{body}"


def session_log(cwd: Path) -> list[dict]:
    app, extra = f"{cwd}/app.py", f"{cwd}/extra.py"
    numbered = "".join(f"{i}. {line}\n" for i, line in enumerate(APP.splitlines(), 1))
    old, new = "    return 'hi ' + name", "    message = f'hello {name}!'\n    return message"
    hunk = ("@@ -1,5 +1,6 @@\n def greet(name):\n-    return 'hi ' + name\n+    message = f'hello {name}!'\n"
            "+    return message\n \n \n def main():\n")
    steps = [
        ("session.start", {"sessionId": SID, "version": 1, "producer": "copilot-agent", "copilotVersion": "1.0.64-3",
                           "startTime": "2026-06-23T23:00:00.000Z",
                           "context": {"cwd": str(cwd), "gitRoot": str(cwd), "branch": "main", "headCommit": "cbee02b"}}),
        ("user.message", {"content": "make greet friendlier"}),
        ("assistant.message", {"messageId": "m1", "model": "claude-opus-4.8", "content": "Reading it first.",
                               "toolRequests": [{"toolCallId": "t1", "name": "view", "arguments": {"path": app}}]}),
        ("tool.execution_start", {"toolCallId": "t1", "toolName": "view", "arguments": {"path": app}}),
        ("tool.execution_complete", {"toolCallId": "t1", "success": True, "result": {"content": numbered}}),
        ("tool.execution_start", {"toolCallId": "t2", "toolName": "edit",
                                  "arguments": {"path": app, "old_str": "nope", "new_str": "x"}}),
        ("tool.execution_complete", {"toolCallId": "t2", "success": False,
                                     "error": {"message": "No match found", "code": "failure"}}),
        ("tool.execution_start", {"toolCallId": "t3", "toolName": "edit",
                                  "arguments": {"path": app, "old_str": old, "new_str": new}}),
        ("tool.execution_complete", {"toolCallId": "t3", "success": True, "result": {
            "content": f"File {app} updated with changes.", "detailedContent": git_diff(app, hunk)}}),
        ("session.compaction_complete", {"success": True, "preCompactionTokens": 120000}),
        ("tool.execution_start", {"toolCallId": "t4", "toolName": "create",
                                  "arguments": {"path": extra, "file_text": "X = 1\nY = 2\n"}}),
        ("tool.execution_complete", {"toolCallId": "t4", "success": True, "result": {
            "content": f"Created file {extra} with 12 characters",
            "detailedContent": git_diff(extra, "@@ -1,0 +1,2 @@\n+X = 1\n+Y = 2\n", create=True)}}),
        ("hook.start", {"hookType": "postToolUse"}),
        ("assistant.message", {"messageId": "m2", "model": "claude-opus-4.8", "content": "Done.", "toolRequests": []}),
    ]
    return [event(typ, data, n) for n, (typ, data) in enumerate(steps)]


def test_a_copilot_cli_session_is_found_and_gives_reads_and_edits(repo: Path, tmp_path: Path) -> None:
    (repo / "app.py").write_text(APP_AFTER)
    (repo / "extra.py").write_text("X = 1\nY = 2\n")
    home = tmp_path / "copilot"
    log = home / "session-state" / SID / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(e) + "\n" for e in session_log(repo)))
    out = run_engram(repo, "ingest", env={"COPILOT_HOME": str(home)}).stdout
    assert "1 session" in out and "2 edits" in out and "1 read" in out, out  # the failed edit is not one
    events = json.loads(run_engram(repo, "show", SID, "--json").stdout)["events"]
    meta = events[0]
    assert (meta["harness"], meta["model"], meta["git_branch"]) == ("copilot-cli", "claude-opus-4.8", "main")
    [read] = [e for e in events if e["kind"] == "code.read"]
    assert (read["file"], read["range"], read["text"]) == ("app.py", [1, 6], APP)
    edits = [e for e in events if e["kind"] == "code.edit"]
    assert [(e["file"], e["op"], e["before_range"], e["after_range"]) for e in edits] == [
        ("app.py", "update", [2, 2], [2, 3]), ("extra.py", "create", [1, 0], [1, 2])]
    assert edits[0]["after_text"] == "    message = f'hello {name}!'\n    return message\n"
    assert edits[0]["file_after_sha"] is not None  # the session had shown the file whole
    assert [e["kind"] for e in events].count("compact") == 1
    doc = json.loads(run_engram(repo, "explain", "app.py:2-3", "--brief").stdout)
    assert doc["sessions"][0]["session_id"] == SID


def test_an_edit_of_a_file_never_shown_takes_its_lines_from_copilot_s_diff(repo: Path, tmp_path: Path) -> None:
    log = [e for e in session_log(repo) if e["data"].get("toolCallId") not in ("t1",)]
    f = tmp_path / "events.jsonl"
    f.write_text("".join(json.dumps(e) + "\n" for e in log))
    run_engram(repo, "ingest", str(f))
    edits = [e for e in json.loads(run_engram(repo, "show", SID, "--json").stdout)["events"] if e["kind"] == "code.edit"]
    assert (edits[0]["before_range"], edits[0]["after_range"], edits[0]["file_after_sha"]) == ([2, 2], [2, 3], None)


def test_a_vs_code_log_places_its_edits_by_their_text_in_the_file_committed_before(repo: Path, tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """VS Code's Copilot Chat writes the same log without tool results: a replacement is placed
    where its old string stands in the file of the newest commit before the edit (`placed: git
    history`, no file hashes); one whose old string is not there has no line ranges."""
    commit_at(repo, monkeypatch, "2026-02-16T10:00:00Z", {"app.py": APP})
    rec = "c:\\Users\\me\\repos\\proj"
    steps = [
        ("session.start", {"sessionId": "vs-1", "version": 1, "producer": "copilot-agent", "copilotVersion": "0.37.6",
                           "vscodeVersion": "1.109.3", "startTime": "2030-02-16T12:28:35.487Z"}),
        ("user.message", {"content": "friendlier", "attachments": []}),
        ("tool.execution_start", {"toolCallId": "t1", "toolName": "multi_replace_string_in_file", "arguments": {
            "replacements": [{"filePath": rec + "\\app.py", "oldString": "    return 'hi ' + name",
                              "newString": "    message = f'hello {name}!'\n    return message"},
                             {"filePath": rec + "\\app.py", "oldString": "not in the file", "newString": "x"}]}}),
        ("tool.execution_complete", {"toolCallId": "t1", "success": True}),
    ]
    f = tmp_path / "2030-02-16-friendlier-vs1.json"
    f.write_text("".join(json.dumps(event(t, d, n)) + "\n" for n, (t, d) in enumerate(steps)))
    run_engram(repo, "ingest", "--map", f"c:/Users/me/repos/proj={repo}", str(f))
    edits = [e for e in json.loads(run_engram(repo, "show", "vs-1", "--json").stdout)["events"]
             if e["kind"] == "code.edit"]
    assert [(e["after_range"], e.get("placed"), e["file_after_sha"]) for e in edits] == [
        ([2, 3], "git history", None), (None, None, None)]


def test_a_view_printed_bare_is_read_by_the_hunk_copilot_keeps_of_it(repo: Path, tmp_path: Path) -> None:
    """Copilot CLI 1.0.7x (polecatspeaks/StarCar's Entire checkpoints, MIT) prints a view's lines
    without numbers and keeps in `detailedContent` a diff of the file with itself, its one hunk
    numbering them: a code.read of those lines, and the session's copy of a file shown whole."""
    app = f"{repo}/app.py"
    shown = "".join(f" {line}\n" for line in APP.splitlines()[1:4])
    log = session_log(repo)
    for e in log:
        if e["type"] == "tool.execution_start" and e["data"]["toolCallId"] == "t1":
            e["data"]["arguments"] = {"path": app, "view_range": [2, 4]}
        if e["type"] == "tool.execution_complete" and e["data"]["toolCallId"] == "t1":
            e["data"]["result"] = {"content": "".join(line + "\n" for line in APP.splitlines()[1:4]),
                                   "detailedContent": git_diff(app, "@@ -2,3 +2,3 @@\n" + shown)}
    f = tmp_path / "events.jsonl"
    f.write_text("".join(json.dumps(e) + "\n" for e in log))
    run_engram(repo, "ingest", str(f))
    events = json.loads(run_engram(repo, "show", SID, "--json").stdout)["events"]
    [read] = [e for e in events if e["kind"] == "code.read"]
    assert (read["file"], read["range"], read["text"]) == ("app.py", [2, 4], "    return 'hi ' + name\n\n\n")


REC = "c:\\Users\\me\\repos\\proj"


def commit_at(repo: Path, monkeypatch, when: str, files: dict[str, str]) -> None:
    """Commit `files` as made at `when` (author and committer date: what git's --before/--since read)."""
    from conftest import git

    for name, text in files.items():
        (repo / name).write_text(text)
        git(repo, "add", name)
    monkeypatch.setenv("GIT_COMMITTER_DATE", when)
    git(repo, "commit", "-q", "-m", f"at {when}", "--date", when)
    monkeypatch.delenv("GIT_COMMITTER_DATE")


def vscode_edits(repo: Path, tmp_path: Path, sid: str, steps: list[tuple[str, str, dict]]) -> list[dict]:
    """Ingest a VS Code Copilot Chat log of `steps` (time, type, data) and return its code.edits."""
    head = ("2026-02-17T09:16:37.233Z", "session.start", {
        "sessionId": sid, "version": 1, "producer": "copilot-agent", "copilotVersion": "0.37.6",
        "vscodeVersion": "1.109.3", "startTime": "2026-02-17T09:16:37.233Z"})
    log = []
    for n, (ts, typ, data) in enumerate([head, *steps]):
        log.append({**event(typ, data, n), "timestamp": ts})
    f = tmp_path / f"{sid}.json"
    f.write_text("".join(json.dumps(e) + "\n" for e in log))
    run_engram(repo, "ingest", "--map", f"c:/Users/me/repos/proj={repo}", str(f))
    return [e for e in json.loads(run_engram(repo, "show", sid, "--json").stdout)["events"] if e["kind"] == "code.edit"]


def replace(ts: str, call: str, path: str, old: str, new: str) -> list[tuple[str, str, dict]]:
    return [(ts, "tool.execution_start", {"toolCallId": call, "toolName": "replace_string_in_file", "arguments": {
                "filePath": f"{REC}\\{path}", "oldString": old, "newString": new}}),
            (ts, "tool.execution_complete", {"toolCallId": call, "success": True})]


def test_after_a_subagent_a_vs_code_edit_is_placed_in_the_commit_after_it(repo: Path, tmp_path: Path,
                                                                          monkeypatch) -> None:
    """idealase/PulseQuiz's 11d0263f: the chat ran subagents (`runSubagent`), whose edits its log
    does not show, then edited a file one of them had changed. Placed in the commit before the
    session, the edit stood a line too high; the subagent's lines are in the commit made after
    it, which places the edit where it is (`placed: commit after`)."""
    commit_at(repo, monkeypatch, "2026-02-16T10:00:00Z", {"app.py": APP})
    steps = [("2026-02-17T09:20:00.000Z", "tool.execution_start", {
                  "toolCallId": "s1", "toolName": "runSubagent",
                  "arguments": {"description": "Refine app", "prompt": "You are refining the app"}}),
             ("2026-02-17T09:25:00.000Z", "tool.execution_complete", {"toolCallId": "s1", "success": True}),
             *replace("2026-02-17T09:30:00.000Z", "t1", "app.py", "    print(greet('you'))", "    print(greet('world'))")]
    commit_at(repo, monkeypatch, "2026-02-17T09:33:00Z",
              {"app.py": "import sys\n" + APP.replace("greet('you')", "greet('world')")})
    [edit] = vscode_edits(repo, tmp_path, "vs-sub", steps)
    assert (edit["before_range"], edit["after_range"], edit.get("placed")) == ([7, 7], [7, 7], "commit after")
    assert (edit["after_text"], edit["file_after_sha"]) == ("    print(greet('world'))\n", None)


SH = '#!/bin/sh\n# name files by time\nNAME="chat-$TS-$ID.json"\necho "$NAME"\n'
SH_COMMITTED = '#!/bin/sh\n# name files by session\nSLUG=$(head -c 20 "$T")\nNAME="chat-$SLUG-$ID.json"\necho "$NAME"\n'


def test_edits_of_a_file_no_commit_before_holds_are_placed_by_undoing_the_later_ones(repo: Path, tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """idealase/PulseQuiz's 117c2e28: the chat edited scripts made outside it, first committed
    after three of its edits. Each is placed in that commit with the chat's later replacements
    undone; its edit after the commit is placed in it as the commit before (`git history`)."""
    commit_at(repo, monkeypatch, "2026-02-16T10:00:00Z", {"README.md": "proj\n"})
    steps = [*replace("2026-02-17T09:20:00.000Z", "t1", "notes.sh", 'NAME="chat-$TS-$ID.json"',
                      'NAME="chat-session-$ID.json"'),
             *replace("2026-02-17T09:21:00.000Z", "t2", "notes.sh", 'NAME="chat-session-$ID.json"',
                      'SLUG=$(head -c 20 "$T")\nNAME="chat-$SLUG-$ID.json"'),
             *replace("2026-02-17T09:22:00.000Z", "t3", "notes.sh", "# name files by time", "# name files by session"),
             *replace("2026-02-17T09:40:00.000Z", "t4", "notes.sh", 'echo "$NAME"', 'printf "%s\\n" "$NAME"')]
    commit_at(repo, monkeypatch, "2026-02-17T09:30:00Z", {"notes.sh": SH_COMMITTED})
    commit_at(repo, monkeypatch, "2026-02-17T09:45:00Z",
              {"notes.sh": SH_COMMITTED.replace('echo "$NAME"', 'printf "%s\\n" "$NAME"')})
    edits = vscode_edits(repo, tmp_path, "vs-out", steps)
    assert [(e["before_range"], e["after_range"], e.get("placed")) for e in edits] == [
        ([3, 3], [3, 3], "commit after"), ([3, 3], [3, 4], "commit after"), ([2, 2], [2, 2], "commit after"),
        ([5, 5], [5, 5], "git history")]
    assert edits[1]["after_text"] == 'SLUG=$(head -c 20 "$T")\nNAME="chat-$SLUG-$ID.json"\n'
    assert SH.count('NAME="chat-$TS-$ID.json"') == 1  # the file before the first edit, as undone
