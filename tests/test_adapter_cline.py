"""Cline / Roo Code task folders: reads of the files the task read, SEARCH/REPLACE edits placed in
the file Cline saved, whole-file writes, failed edits left out, times from the panel's messages.

The conversations are built in Cline's own shapes (`[tool for 'path'] Result:` texts, the saved
file in `<final_file_content>`); the real task folders found in public repositories carry no
licence that allows a copy here (bench/harness_aider.py --cline measures them)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_engram

APP = "def greet(name):\n    return 'hi ' + name\n\n\ndef main():\n    print(greet('you'))\n"
APP_AFTER = APP.replace("return 'hi ' + name", "message = f'hello {name}!'\n    return message")
ENV = "<environment_details>\n# Current Working Directory ({cwd}) Files\napp.py\n</environment_details>"


def task(folder: Path, cwd: Path) -> Path:
    """A task that reads app.py, edits it (one block that applied, one that failed) and writes a new file."""
    diff = "------- SEARCH\n    return 'hi ' + name\n=======\n    message = f'hello {name}!'\n    return message\n+++++++ REPLACE\n"
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nmake greet friendlier\n</task>"},
                                     {"type": "text", "text": ENV.format(cwd=cwd)}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it first."},
                                          {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "app.py"}}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'app.py'] Result:\n" + APP}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "replace_in_file",
                                           "input": {"path": "app.py", "diff": diff.replace("hi '", "hey '")}}]},
        {"role": "user", "content": [{"type": "text", "text": "[replace_in_file for 'app.py'] Result:\n"
                                      "The tool execution failed with the following error:\n<error>The SEARCH block does not "
                                      "match anything in the file.</error>"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "replace_in_file",
                                           "input": {"path": "app.py", "diff": diff}}]},
        {"role": "user", "content": [{"type": "text", "text": "[replace_in_file for 'app.py'] Result:\nThe content was "
                                      f"successfully saved to app.py.\n\n<final_file_content path=\"app.py\">\n{APP_AFTER}\n"
                                      "</final_file_content>\n"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t4", "name": "write_to_file",
                                           "input": {"path": "extra.py", "content": "X = 1\n"}}]},
        {"role": "user", "content": [{"type": "text", "text": "[write_to_file for 'extra.py'] Result:\nThe content was "
                                      "successfully saved to extra.py.\n\n<final_file_content path=\"extra.py\">\nX = 1\n"
                                      "</final_file_content>\n"}]},
    ]
    ui = [{"ts": 1769064454625, "type": "say", "say": "text", "text": "make greet friendlier"},
          *({"ts": 1769064464095 + i * 1000, "type": "say", "say": "tool", "text": json.dumps({"tool": kind})}
            for i, kind in enumerate(["readFile", "editedExistingFile", "editedExistingFile", "newFileCreated"]))]
    folder.mkdir(parents=True)
    (folder / "api_conversation_history.json").write_text(json.dumps(conversation))
    (folder / "ui_messages.json").write_text(json.dumps(ui))
    return folder


def test_a_task_gives_reads_and_edits_at_their_lines(repo: Path, tmp_path: Path) -> None:
    (repo / "app.py").write_text(APP_AFTER)
    folder = task(tmp_path / "tasks" / "1769064454592", repo)
    out = run_engram(repo, "ingest", str(folder / "api_conversation_history.json")).stdout
    assert "1 session" in out and "2 edits" in out and "1 read" in out  # the failed edit is not one
    events = json.loads(run_engram(repo, "show", "cline-1769064454592", "--json").stdout)["events"]
    assert events[0]["harness"] == "cline" and events[0]["started"].startswith("2026-01-22T06:47:34")
    edits = [e for e in events if e["kind"] == "code.edit"]
    assert [(e["file"], e["op"], e["before_range"], e["after_range"]) for e in edits] == [
        ("app.py", "update", [2, 2], [2, 3]), ("extra.py", "create", [1, 0], [1, 1])]
    assert edits[0]["after_text"] == "    message = f'hello {name}!'\n    return message\n"
    assert edits[0]["ts"] == "2026-01-22T06:47:46.095Z"  # the panel's time of that tool use
    doc = json.loads(run_engram(repo, "explain", "app.py:2-3", "--brief").stdout)
    assert doc["sessions"][0]["session_id"] == "cline-1769064454592"


def test_a_damaged_task_is_a_counted_skip(repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tasks" / "1"
    folder.mkdir(parents=True)
    (folder / "api_conversation_history.json").write_text('[{"role": "user", "content": [')
    out = run_engram(repo, "ingest", str(folder)).stdout
    assert "unreadable conversation (JSONDecodeError)" in out
