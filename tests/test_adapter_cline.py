"""Cline / Roo Code task folders: reads of the files the task read, SEARCH/REPLACE edits placed in
the file Cline saved, whole-file writes, failed edits left out, times from the panel's messages.

The conversations are built in Cline's own shapes (`[tool for 'path'] Result:` texts, the saved
file in `<final_file_content>`); the real Cline task folders found in public repositories carry no
licence that allows a copy here (bench/harness_aider.py --cline measures them). Roo Code 3.53's
test reads an excerpt of a real, Apache-2.0 task (tests/fixtures/roo; bench/harness_roo.py)."""

from __future__ import annotations

import datetime as dt
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


ROO_READ = ("[read_file for 'app.py'. Reading multiple files at once is more efficient for the LLM. If other files "
            "are relevant to your current task, please read them simultaneously.] Result:")


def roo_task(folder: Path, cwd: Path) -> Path:
    """A Roo Code task in its own shapes: tool uses as XML in the assistant's text (and one as a
    `tool_use` block, as newer Roo writes them), each result header alone in its text block with the
    result in the next, numbered reads, apply_diff blocks with `:start_line:`."""
    numbered = "".join(f"{i:>3} | {line}\n" for i, line in enumerate(APP.splitlines(), 1))
    two_blocks = ("<<<<<<< SEARCH\n:start_line:2\n-------\n    return 'hi ' + name\n=======\n"
                  "    message = f'hello {name}!'\n    return message\n>>>>>>> REPLACE\n\n"
                  "<<<<<<< SEARCH\n:start_line:5\n-------\ndef main():\n    print(greet('you'))\n=======\n"
                  "def main():\n    print(greet('world'))\n>>>>>>> REPLACE")
    wrong = "<<<<<<< SEARCH\n:start_line:9\n-------\nnot in the file\n=======\nx\n>>>>>>> REPLACE"
    unseen = "<<<<<<< SEARCH\n:start_line:3\n-------\nb = 2\n=======\nb = 3\n>>>>>>> REPLACE"
    native = "<<<<<<< SEARCH\n:start_line:1\n-------\ndef greet(name):\n=======\ndef greet(name: str) -> str:\n>>>>>>> REPLACE"

    def said(text: str) -> dict:
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}

    def result(header: str, text: str) -> dict:
        return {"role": "user", "content": [{"type": "text", "text": header}, {"type": "text", "text": text},
                                            {"type": "text", "text": ENV.format(cwd=cwd)}]}

    written = "<file_write_result>\n<path>{}</path>\n<operation>{}</operation>\n<notice>\n<i>You do not need to " \
              "re-read the file, as you have seen all changes</i>\n</notice>\n</file_write_result>\n"
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nmake greet friendlier\n</task>"},
                                     {"type": "text", "text": ENV.format(cwd=cwd)}]},
        said("Reading it first.\n\n<read_file>\n<args>\n  <file>\n    <path>app.py</path>\n  </file>\n</args>\n"
             "</read_file>"),
        result(ROO_READ, f'<files>\n<file><path>app.py</path>\n<content lines="1-6">\n{numbered}</content>\n'
                         "</file>\n</files>"),
        said(f"<apply_diff>\n<path>app.py</path>\n<diff>\n{two_blocks}\n</diff>\n</apply_diff>"),
        result("[apply_diff for 'app.py'] Result:", written.format("app.py", "modified")),
        said(f"<apply_diff>\n<path>app.py</path>\n<diff>\n{wrong}\n</diff>\n</apply_diff>"),
        result("[apply_diff for 'app.py'] Result:", "<error_details>\nNo sufficiently similar match found at line: "
                                                    "9 (12% similar, needs 100%)\n</error_details>"),
        said(f"<apply_diff>\n<path>other.py</path>\n<diff>\n{unseen}\n</diff>\n</apply_diff>"),
        result("[apply_diff for 'other.py'] Result:", "Changes successfully applied to other.py:\n\n"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "apply_diff",
                                           "input": {"path": "app.py", "diff": native}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "text", "text": written.format("app.py", "modified")}]}]},
        said("<write_to_file>\n<path>extra.py</path>\n<content>\nX = 1\n</content>\n<line_count>1</line_count>\n"
             "</write_to_file>"),
        result("[write_to_file for 'extra.py'] Result:", written.format("extra.py", "created")),
    ]
    folder.mkdir(parents=True)
    (folder / "api_conversation_history.json").write_text(json.dumps(conversation))
    return folder


def test_roo_code_apply_diff_blocks_are_edits_at_the_lines_they_wrote(repo: Path, tmp_path: Path) -> None:
    """Roo Code's apply_diff keeps no saved file: its blocks are placed in the session's copy of
    the file (the numbered read), each block shifted by what the ones before it added; a block in
    a file the session never read stands at the line Roo was told (`placed: start_line`); a
    failed apply_diff is not an edit."""
    final = ("def greet(name: str) -> str:\n    message = f'hello {name}!'\n    return message\n\n\n"
             "def main():\n    print(greet('world'))\n")
    (repo / "app.py").write_text(final)
    (repo / "other.py").write_text("a = 1\n\nb = 3\n")
    folder = roo_task(tmp_path / "rooveterinaryinc.roo-cline" / "tasks" / "0197a1b2-task", repo)
    out = run_engram(repo, "ingest", str(folder)).stdout
    assert "1 session" in out and "5 edits" in out and "1 read" in out, out
    events = json.loads(run_engram(repo, "show", "roo-0197a1b2-task", "--json").stdout)["events"]
    assert events[0]["harness"] == "roo-code"
    [read] = [e for e in events if e["kind"] == "code.read"]
    assert read["file"] == "app.py" and read["range"] == [1, 6] and read["text"] == APP
    edits = [e for e in events if e["kind"] == "code.edit"]
    assert [(e["file"], e["op"], e["before_range"], e["after_range"], e.get("placed")) for e in edits] == [
        ("app.py", "update", [2, 2], [2, 3], None),
        ("app.py", "update", [7, 7], [7, 7], None),  # line 5 of the file Roo was given, 7 after the first block
        ("other.py", "update", [3, 3], [3, 3], "start_line"),
        ("app.py", "update", [1, 1], [1, 1], None),
        ("extra.py", "create", [1, 0], [1, 1], None)]
    assert edits[1]["after_text"] == "    print(greet('world'))\n"
    assert edits[3]["file_after_sha"] is not None and edits[2]["file_after_sha"] is None
    failed = [e for e in events if e["kind"] == "tool.result" and e["is_error"]]
    assert len(failed) == 1 and "No sufficiently similar match" in failed[0]["stdout"]
    doc = json.loads(run_engram(repo, "explain", "app.py:2-3", "--brief").stdout)
    assert doc["sessions"][0]["session_id"] == "roo-0197a1b2-task"


FIXTURE = Path(__file__).parent / "fixtures" / "roo" / "api_conversation_history.json"


def test_a_real_roo_code_3_53_task_native_tools_and_json_results(repo: Path, tmp_path: Path) -> None:
    """An excerpt of a real Roo Code 3.53.0 task (tests/fixtures/roo/NOTICE.md): native `tool_use`
    blocks whose results are paired by id, `read_file` results headed `File: path` with numbered
    lines, apply_diff's JSON result (`"operation":"modified"`), the workspace its environment
    details name (`# Current Workspace Directory`), times from each message's `ts`; a block in a
    file Roo showed only in part stands at Roo's line, checked against the lines it showed; a
    failed apply_diff and a failed write_to_file are not edits, a failed read_file no read."""
    cwd = "/home/krzych/Projekty/QUB-IT/Roo-Code"
    conversation = json.loads(FIXTURE.read_text(encoding="utf-8"))
    block = next(b["input"]["diff"] for m in conversation for b in m["content"] if b.get("name") == "apply_diff")
    replace = block.split("=======\n", 1)[1].split(">>>>>>> REPLACE", 1)[0]
    (repo / "packages" / "cloud" / "src").mkdir(parents=True)
    (repo / "packages" / "cloud" / "src" / "config.ts").write_text(replace)
    folder = tmp_path / "rooveterinaryinc.roo-cline" / "tasks" / "1778012230830"
    folder.mkdir(parents=True)
    (folder / "api_conversation_history.json").write_bytes(FIXTURE.read_bytes())
    out = run_engram(repo, "ingest", str(folder), "--map", f"{cwd}={repo}").stdout
    assert "1 session" in out and "2 edits" in out and "3 reads" in out, out
    events = json.loads(run_engram(repo, "show", "roo-1778012230830", "--json").stdout)["events"]
    assert events[0]["harness"] == "roo-code" and "unkept" not in events[0]  # times: each message's `ts`
    reads = [(e["file"], e["range"]) for e in events if e["kind"] == "code.read"]
    assert reads == [("packages/cloud/src/config.ts", [1, 6]), ("packages/cloud/src/index.ts", [1, 6]),
                     ("src/package.json", [427, 446])]  # "Showing lines 427-446 of 585 total lines"
    # (a read_file of a file that is not there, `File: …` then `Error: ENOENT`, is no read)
    edit, slice_edit = [e for e in events if e["kind"] == "code.edit"]
    # its SEARCH text is lines 427-435 of what Roo showed; 21 lines go in after the 5th (431)
    assert (slice_edit["file"], slice_edit["before_range"], slice_edit["after_range"]) == (
        "src/package.json", [432, 431], [432, 452])
    assert "placed" not in slice_edit and slice_edit["file_before_sha"] is None
    # Roo's block starts at line 1; its first two lines are unchanged, so the edit is 3-6 -> 3-27
    assert (edit["file"], edit["before_range"], edit["after_range"]) == ("packages/cloud/src/config.ts", [3, 6], [3, 27])
    assert edit["file_before_sha"] is not None and "placed" not in edit
    asked = next(m["ts"] for m in conversation if any(b.get("name") == "apply_diff" for b in m["content"]))
    assert edit["ts"] == dt.datetime.fromtimestamp(asked / 1000, dt.UTC).isoformat(timespec="milliseconds")[:23] + "Z"
    failed = [e["name"] for e in events if e["kind"] == "tool.result" and e["is_error"]]
    assert failed == ["apply_diff", "write_to_file"]
    doc = json.loads(run_engram(repo, "explain", "packages/cloud/src/config.ts:9-14", "--brief").stdout)
    assert doc["sessions"][0]["session_id"] == "roo-1778012230830"


def test_a_roo_code_diagnostics_file_is_its_task(repo: Path, tmp_path: Path) -> None:
    """The file Roo Code writes for its support (comment lines, then the error and the task's
    history), as projects commit it, is read as the task it holds; its first message's time
    names the session (the file keeps no task id), its `version` is the harness's."""
    report = tmp_path / "spotted-errors" / "file-write-error.json"
    report.parent.mkdir()
    head = ("// Please share this file with Roo Code Support (support@roocode.com) to diagnose the issue faster\n"
            "// Just make sure you're OK sharing the contents of the conversation below.\n\n")
    history = json.loads(FIXTURE.read_text(encoding="utf-8"))
    report.write_text(head + json.dumps({"error": {"version": "3.53.0", "details": "Error writing file"},
                                         "history": history}))
    out = run_engram(repo, "ingest", str(report), "--map", f"/home/krzych/Projekty/QUB-IT/Roo-Code={repo}").stdout
    assert "1 session" in out and "2 edits" in out, out
    meta = json.loads(run_engram(repo, "show", f"roo-{history[0]['ts']}", "--json").stdout)["events"][0]
    assert meta["harness"] == "roo-code" and meta["harness_version"] == "3.53.0"


def test_a_diagnostics_file_a_formatter_damaged_is_kept_as_plain_text(repo: Path, tmp_path: Path) -> None:
    """Roo Code's diagnostics files are committed as markdown, and a markdown formatter run over
    them breaks their JSON (four of the five real ones): the file is captured as plain text, its
    words findable, and the ingest says why — not a tape holding nothing under a made-up task."""
    report = tmp_path / "spotted-errors" / "file-write-error.md"
    report.parent.mkdir()
    head = "// Please share this file with Roo Code Support (support@roocode.com) to diagnose the issue faster\n\n"
    body = json.dumps({"error": {"version": "3.53.0"}, "history": json.loads(FIXTURE.read_text(encoding="utf-8"))},
                      indent=2)
    report.write_text(head + body.replace('"history": [', "\\*history\\*: [", 1))  # what prettier/markdown did
    out = run_engram(repo, "ingest", str(report)).stdout
    assert "1 session" in out and "JSON does not parse" in out and "captured as plain text" in out, out
    tapes = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert [t["harness"] for t in tapes] == ["raw"], tapes
    hits = json.loads(run_engram(repo, "search", "Current Workspace Directory").stdout)
    assert hits, "the damaged file's text is not searchable"
