"""Roo Code's markdown export of a task (`roo_task_*.md`; Kilo Code's `kilo_code_task_*.md`, IBM
Bob's `bob_task_*.md`), as projects commit them: `engram ingest FILE` (or a folder holding one)
reads it as the task it was exported from, its apply_diff blocks placed by the task's own reads,
failed edits left out, times from the environment details.

The first test reads an excerpt of a real export (tests/fixtures/roo_export/NOTICE.md, MIT); the
second is built in the same shape to cover what that excerpt lacks (a write, a failed edit, a
fork's file name). The real exports are measured by bench/harness_roo_export.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import run_engram, shown_events

FIXTURE = Path(__file__).parent / "fixtures" / "roo_export" / "roo_task_aug-25-2026_6-55-50-am.md"
RECORDED = "e:/2026_E/LiveStreamers"


def test_a_real_roo_code_export_gives_the_reads_and_the_edits_at_their_lines(repo: Path, tmp_path: Path) -> None:
    """yonixw/LiveStreamers' task: Roo read popup.css whole (`File:` and numbered lines), then one
    apply_diff of five blocks took out its transitions (`{"operation":"modified"}`): five edits at
    the lines the read numbers, the file's hashes known, each at the time the result came back."""
    export = tmp_path / FIXTURE.name
    shutil.copy(FIXTURE, export)
    out = run_engram(repo, "ingest", str(export), "--map", f"{RECORDED}={repo}").stdout
    assert "1 session" in out and "5 edits" in out and "1 read" in out, out
    events = shown_events(repo, "roo-1787629814743")
    meta = events[0]
    assert (meta["harness"], meta["exported_by"], meta["model"], meta["cwd"]) == (
        "roo-code", "Roo Code", "google/gemini-3.7-flash", RECORDED)
    [read] = [e for e in events if e["kind"] == "code.read"]
    assert (read["file"], read["range"]) == ("src/popup/popup.css", [1, 348])
    edits = [e for e in events if e["kind"] == "code.edit"]
    assert [(e["before_range"], e["after_range"]) for e in edits] == [
        ([120, 120], [120, 119]), ([157, 164], [157, 162]), ([258, 263], [258, 261]), ([309, 309], [309, 308]),
        ([327, 327], [327, 326])]
    assert edits[0]["before_text"] == "  transition: all 0.15s;\n"
    assert all(e["file_after_sha"] and e["ts"] == "2026-08-25T03:51:59.820Z" for e in edits)
    shown = run_engram(repo, "show", "roo-1787629814743").stdout
    assert "the task's id" in shown, shown  # what the export does not keep is said


def env(at: str) -> str:
    return (f"<environment_details>\n# Current Time\nCurrent time in ISO 8601 UTC format: {at}\n\n# Current Mode\n"
            f"<slug>code</slug>\n<model>kilo/auto</model>\n\n\n# Current Workspace Directory (c:/work/app) Files\n"
            "style.css\n</environment_details>")


def test_a_kilo_code_export_in_a_folder_keeps_writes_and_leaves_failed_edits_out(repo: Path, tmp_path: Path) -> None:
    """A write_to_file whose content holds a `Name: …` line (not a parameter: the content runs to
    the end), an apply_diff that failed (`{"status":"error"}`: no edit) and one that applied;
    found in a folder given to `engram ingest`, named a Kilo Code export by its file's name."""
    css = "a {\n  color: red;\n  transition: all 0.2s;\n}\n"
    numbered = "".join(f"{i} | {line}\n" for i, line in enumerate(css.splitlines(), 1))
    messages = [
        ("User", "<task>\ndrop the transition, add notes\n</task>\n" + env("2026-05-01T10:00:00.000Z")),
        ("Assistant", "[Tool Use: read_file]\nPath: style.css"),
        ("User", f"[Tool]\nFile: style.css\n{numbered}" + env("2026-05-01T10:00:05.000Z")),
        ("Assistant", ("[Tool Use: apply_diff]\nPath: style.css\nDiff: <<<<<<< SEARCH\n:start_line:9\n-------\nnope\n"
                       "=======\nx\n>>>>>>> REPLACE")),
        ("User", '[Tool]\n{"status":"error","message":"No sufficiently similar match found"}\n'
                 + env("2026-05-01T10:00:10.000Z")),
        ("Assistant", ("[Reasoning]\nThe line is 3.\n[Tool Use: apply_diff]\nPath: style.css\nDiff: <<<<<<< SEARCH\n"
                       ":start_line:2\n-------\n  color: red;\n  transition: all 0.2s;\n=======\n  color: red;\n"
                       ">>>>>>> REPLACE")),
        ("User", '[Tool]\n{"path":"style.css","operation":"modified"}\n' + env("2026-05-01T10:00:20.000Z")),
        ("Assistant", ("[Tool Use: write_to_file]\nPath: notes.md\nContent: # Notes\nName: the transition\n\nGone.\n"
                       "Line_count: 4")),
        ("User", '[Tool]\n{"path":"notes.md","operation":"created"}\n' + env("2026-05-01T10:00:30.000Z")),
    ]
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "kilo_code_task_may-1-2026_12-00-00-pm.md").write_text(
        "---\n\n".join(f"**{who}:**\n\n{text}\n\n" for who, text in messages))
    out = run_engram(repo, "ingest", str(folder), "--map", f"c:/work/app={repo}").stdout
    assert "1 session" in out and "2 edits" in out, out
    events = shown_events(repo, "roo-1777629600000")
    assert events[0]["exported_by"] == "Kilo Code" and events[0]["model"] == "kilo/auto"
    edit, write = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["before_range"], edit["after_range"], edit["ts"]) == (
        "style.css", [3, 3], [3, 2], "2026-05-01T10:00:20.000Z")
    assert (write["file"], write["op"], write["after_text"]) == ("notes.md", "create",
                                                                "# Notes\nName: the transition\n\nGone.\n")


def test_an_older_export_with_xml_tool_uses_is_read_as_its_task_folder_would_be(repo: Path, tmp_path: Path) -> None:
    """Roo Code before its native tools wrote tool uses as XML in the reply and each result as
    `[apply_diff for 'path'] Result:` text (the shape of the exports the index shows); the export
    keeps them as they were, and they are read the same way: a read, an edit at its lines."""
    cwd = "/home/u/proj"
    numbered = "".join(f"{i} | {line}\n" for i, line in enumerate(["def f():", "    return 1", "", "X = f()"], 1))
    env_old = f"<environment_details>\n# Current Working Directory ({cwd}) Files\napp.py\n</environment_details>"
    messages = [
        ("User", f"<task>\nreturn 2\n</task>\n{env_old}"),
        ("Assistant", ("Reading it.\n\n<read_file>\n<args>\n  <file>\n    <path>app.py</path>\n  </file>\n</args>\n"
                       "</read_file>")),
        ("User", "[read_file for 'app.py'. Reading multiple files at once is more efficient.] Result:\n<files>\n"
                 f"<file><path>app.py</path>\n<content lines=\"1-4\">\n{numbered}</content>\n</file>\n</files>\n"
                 + env_old),
        ("Assistant", ("<apply_diff>\n<path>app.py</path>\n<diff>\n<<<<<<< SEARCH\n:start_line:2\n-------\n"
                       "    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n</diff>\n</apply_diff>")),
        ("User", "[apply_diff for 'app.py'] Result:\n<file_write_result>\n<path>app.py</path>\n"
                 "<operation>modified</operation>\n</file_write_result>\n" + env_old),
    ]
    export = tmp_path / "roo_task_may-2-2025_9-00-00-am.md"
    export.write_text("---\n\n".join(f"**{who}:**\n\n{text}\n\n" for who, text in messages))
    out = run_engram(repo, "ingest", str(export), "--map", f"{cwd}={repo}").stdout
    assert "1 session" in out and "1 edit" in out and "1 read" in out, out
    sid = "roo-roo_task_may-2-2025_9-00-00-am"  # no time in these environment details: named by the file
    events = shown_events(repo, sid)
    [edit] = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["before_range"], edit["after_range"], edit["after_text"]) == (
        "app.py", [2, 2], [2, 2], "    return 2\n")
    assert "message times" in " ".join(events[0]["unkept"])


def test_an_ibm_bob_export_reading_several_files_at_once_places_the_edits_by_that_read(repo: Path,
                                                                                      tmp_path: Path) -> None:
    """IBM Bob (a Roo Code fork) exports in the XML shape; a read of several files has its result
    headed `[read_file for 2 files] Result:` (no quoted path), as in Hellcatshots/bobflow's
    `bob_task_may-1-2026_12-00-51-pm.md` (this test is written in its shape, not copied). Both
    files are reads, and the later apply_diff (two blocks without `:start_line:`, taken in the
    order written) is placed by that read: its edits at their lines, not left without ranges."""
    cwd = "c:/Users/dev/bobflow"
    page = ["import { useState } from 'react';", "import { save } from './storage';", "",
            "export function Page() {", "  const go = () => {", "    save(1);", "  };", "  return go;", "}"]
    numbered = "".join(f"{i} | {line}\n" for i, line in enumerate(page, 1))
    env_bob = ("<environment_details>\n# Current Time\nCurrent time in ISO 8601 UTC format: {at}\n\n# Current Mode\n"
               f"<slug>code</slug>\n<name>Code</name>\n\n\n# Current Workspace Directory ({cwd}) Files\n"
               "src/\n</environment_details>")
    messages = [
        ("User", "<task>\nuse the generator\n</task>\n" + env_bob.format(at="2026-05-01T10:07:07.476Z")),
        ("Assistant", ("<read_file>\n<args>\n  <file>\n    <path>package.json</path>\n  </file>\n  <file>\n"
                       "    <path>src/Page.tsx</path>\n  </file>\n</args>\n</read_file>")),
        ("User", "[read_file for 2 files] Result:\n<files>\n<file><path>package.json</path>\n"
                 "<content lines=\"1-3\">\n1 | {\n2 |   \"name\": \"bobflow\"\n3 | }\n</content>\n</file>\n"
                 f"<file><path>src/Page.tsx</path>\n<content lines=\"1-9\">\n{numbered}</content>\n</file>\n</files>\n"
                 + env_bob.format(at="2026-05-01T10:07:52.703Z")),
        ("Assistant", ("<apply_diff>\n<path>src/Page.tsx</path>\n<diff>\n<<<<<<< SEARCH\n"
                       "import { save } from './storage';\n=======\nimport { save } from './storage';\n"
                       "import { generate } from './generator';\n>>>>>>> REPLACE\n<<<<<<< SEARCH\n    save(1);\n"
                       "=======\n    save(generate());\n>>>>>>> REPLACE\n</diff>\n</apply_diff>")),
        ("User", "[apply_diff for 'src/Page.tsx'] Result:\n<file_write_result>\n<path>src/Page.tsx</path>\n"
                 "<operation>modified</operation>\n<notice>\n<i>You do not need to re-read the file, as you have seen "
                 "all changes</i>\n</notice>\n</file_write_result>\n" + env_bob.format(at="2026-05-01T10:08:30.000Z")),
    ]
    export = tmp_path / "bob_task_may-1-2026_12-00-51-pm.md"
    export.write_text("---\n\n".join(f"**{who}:**\n\n{text}\n\n" for who, text in messages))
    out = run_engram(repo, "ingest", str(export), "--map", f"{cwd}={repo}").stdout
    assert "1 session" in out and "2 edits" in out and "2 reads" in out, out
    events = shown_events(repo, "roo-1777630027476")
    assert events[0]["exported_by"] == "IBM Bob"
    assert sorted(e["file"] for e in events if e["kind"] == "code.read") == ["package.json", "src/Page.tsx"]
    edits = [e for e in events if e["kind"] == "code.edit"]
    assert [(e["before_range"], e["after_range"]) for e in edits] == [([3, 2], [3, 3]), ([7, 7], [7, 7])]


def bob_env(cwd: str, at: str) -> str:
    """IBM Bob's environment details (Roo Code's): the time of the message, the workspace."""
    return (f"<environment_details>\n# Current Time\nCurrent time in ISO 8601 UTC format: {at}\n\n"
            f"# Current Workspace Directory ({cwd}) Files\n</environment_details>")


def xml_read(path: str, lines: list[str]) -> tuple[str, str]:
    """A read of one whole file in the XML protocol: the reply's tool use, and its result."""
    numbered = "".join(f"{i} | {line}\n" for i, line in enumerate(lines, 1))
    return (f"<read_file>\n<args>\n  <file>\n    <path>{path}</path>\n  </file>\n</args>\n</read_file>",
            f"[read_file for '{path}'. Reading multiple files at once is more efficient.] Result:\n<files>\n"
            f"<file><path>{path}</path>\n<content lines=\"1-{len(lines)}\">\n{numbered}</content>\n</file>\n</files>\n")


def written(tool: str, path: str, operation: str = "modified") -> str:
    """An edit tool's result in the XML protocol."""
    return (f"[{tool} for '{path}'] Result:\n<file_write_result>\n<path>{path}</path>\n"
            f"<operation>{operation}</operation>\n</file_write_result>\n")


def tool_turn(use: str, tool: str, path: str, cwd: str, at: str, operation: str = "modified") -> list[tuple[str, str]]:
    """An edit tool's use in the XML protocol and its result, as two messages of an export."""
    return [("Assistant", use), ("User", written(tool, path, operation) + bob_env(cwd, at))]


def ingest_export(repo: Path, export: Path, messages: list[tuple[str, str]], cwd: str, head: str = "") -> str:
    """The messages written as an export (after `head`), ingested with the workspace mapped."""
    export.write_text(head + "---\n\n".join(f"**{who}:**\n\n{text}\n\n" for who, text in messages))
    return run_engram(repo, "ingest", str(export), "--map", f"{cwd}={repo}").stdout


def test_an_export_with_stray_characters_before_its_first_message_is_still_read(repo: Path, tmp_path: Path) -> None:
    """A committed IBM Bob export (Eman2123/Bob-RepoIQ's `bob_task_may-3-2026_12-52-23-am.md`)
    starts `22**User:**`: two characters typed into the file. It is still the task's export (the
    rest of the file says so), not plain text: its edit is captured (a test in that shape)."""
    cwd = "d:/work"
    use, result = xml_read("x.py", ["a = 1", "b = 2"])
    messages = [
        ("User", "<task>\nb is 3\n</task>\n" + bob_env(cwd, "2026-05-02T19:51:24.770Z")),
        ("Assistant", use),
        ("User", result + bob_env(cwd, "2026-05-02T19:51:30.000Z")),
        ("Assistant", "<apply_diff>\n<path>x.py</path>\n<diff>\n<<<<<<< SEARCH\n:start_line:2\n-------\nb = 2\n=======\n"
                      "b = 3\n>>>>>>> REPLACE\n</diff>\n</apply_diff>"),
        ("User", written("apply_diff", "x.py") + bob_env(cwd, "2026-05-02T19:52:18.604Z")),
    ]
    out = ingest_export(repo, tmp_path / "bob_task_may-3-2026_12-52-23-am.md", messages, cwd, head="22")
    assert "1 session" in out and "1 edit" in out, out
    events = shown_events(repo, "roo-1777751484770")
    [edit] = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["after_range"], edit["after_text"]) == ("x.py", [2, 2], "b = 3\n")


def test_a_read_asked_for_a_line_range_is_not_taken_for_the_whole_file(repo: Path, tmp_path: Path) -> None:
    """IBM Bob reads a file in part with `<line_range>` (JojoAArtI/BobForge's task read
    `mcpGeneratorService.ts` lines 1-100 of 600): the result starts at line 1 and says nothing
    of the rest, but it is not the file. An apply_diff inside those lines is placed by them, and
    no file hash is claimed for a file Engram never saw whole (a test in that shape)."""
    cwd = "d:/work"
    use, result = xml_read("svc.ts", ["const a = 1;", "const b = 2;"])
    messages = [
        ("User", "<task>\nrename\n</task>\n" + bob_env(cwd, "2026-05-03T05:00:00.000Z")),
        ("Assistant", use.replace("</path>", "</path>\n    <line_range>1-2</line_range>")),
        ("User", result + bob_env(cwd, "2026-05-03T05:00:10.000Z")),
        ("Assistant", "<apply_diff>\n<path>svc.ts</path>\n<diff>\n<<<<<<< SEARCH\n:start_line:2\n-------\nconst b = 2;\n"
                      "=======\nconst bb = 2;\n>>>>>>> REPLACE\n</diff>\n</apply_diff>"),
        ("User", written("apply_diff", "svc.ts") + bob_env(cwd, "2026-05-03T05:00:20.000Z")),
    ]
    out = ingest_export(repo, tmp_path / "bob_task_may-3-2026_1-41-10-pm.md", messages, cwd)
    assert "1 edit" in out and "1 read" in out, out
    events = shown_events(repo, "roo-1777784400000")
    [edit] = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["before_range"], edit["after_range"]) == ("svc.ts", [2, 2], [2, 2])
    assert edit["file_before_sha"] is None and edit["file_after_sha"] is None
    assert "placed" not in edit  # the lines it read there are the block's: the place is checked


def test_a_second_tool_use_that_never_ran_does_not_take_the_next_result(repo: Path, tmp_path: Path) -> None:
    """In the XML protocol only a reply's first tool runs: IBM Bob answered an update_todo_list +
    write_to_file reply with `Tool [write_to_file] was not executed because a tool has already
    been used in this message` (MrinalDesai/savealife-with-ibm's `08_speech_input.md`). The next
    reply's write and its `[write_to_file for 'voice/speech_input.py'] Result:` are one edit of
    that file; the write that never ran (`voice/__init__.py`) is no edit (a test in that shape)."""
    cwd = "c:/work/app"
    messages = [
        ("User", "<task>\nadd voice input\n</task>\n" + bob_env(cwd, "2026-05-02T16:59:18.536Z")),
        ("Assistant", "Steps first.\n\n<update_todo_list>\n<todos>\n[ ] voice package\n</todos>\n</update_todo_list>\n\n"
                      "<write_to_file>\n<path>voice/__init__.py</path>\n<content>\n# Voice input package\n</content>\n"
                      "<line_count>1</line_count>\n</write_to_file>"),
        ("User", "[update_todo_list] Result:\nTodo list updated successfully.\nTool [write_to_file] was not executed "
                 "because a tool has already been used in this message. Only one tool may be used per message. You must "
                 "assess the first tool's result before proceeding to use the next tool.\n"
                 + bob_env(cwd, "2026-05-02T16:59:30.000Z")),
        ("Assistant", "<write_to_file>\n<path>voice/speech_input.py</path>\n<content>\ndef listen():\n    return ''\n"
                      "</content>\n<line_count>2</line_count>\n</write_to_file>"),
        ("User", written("write_to_file", "voice/speech_input.py", "created") + bob_env(cwd, "2026-05-02T17:00:00.000Z")),
    ]
    out = ingest_export(repo, tmp_path / "08_speech_input.md", messages, cwd)
    assert "1 edit" in out, out
    events = shown_events(repo, "roo-1777741158536")
    [edit] = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["op"], edit["after_range"], edit["after_text"]) == (
        "voice/speech_input.py", "create", [1, 2], "def listen():\n    return ''\n")


def test_insert_content_is_an_edit_at_the_line_it_names(repo: Path, tmp_path: Path) -> None:
    """Roo Code's and IBM Bob's insert_content puts its lines before line N (0: after the last),
    as in RennieSimiyu-Dev/FraudX-Agent's export (`<insert_content>` with `<path>`, `<line>`,
    `<content>`): each is a code.edit at those lines, not an ignored call (a test in that shape)."""
    cwd = "c:/work/fraudx"
    use, result = xml_read("main.py", ["import os", "", "app = 1"])
    messages = [
        ("User", "<task>\nadd auth\n</task>\n" + bob_env(cwd, "2026-05-02T10:09:13.096Z")),
        ("Assistant", use),
        ("User", result + bob_env(cwd, "2026-05-02T10:09:20.000Z")),
        *tool_turn("<insert_content>\n<path>main.py</path>\n<line>2</line>\n<content>\nimport auth\nimport jwt\n"
                   "</content>\n</insert_content>", "insert_content", "main.py", cwd, "2026-05-02T10:09:30.000Z"),
        *tool_turn("<insert_content>\n<path>main.py</path>\n<line>0</line>\n<content>\nauth.setup(app)\n"
                   "</content>\n</insert_content>", "insert_content", "main.py", cwd, "2026-05-02T10:09:40.000Z"),
    ]
    out = ingest_export(repo, tmp_path / "bob_task_may-2-2026_1-24-39-pm.md", messages, cwd)
    assert "2 edits" in out, out
    events = shown_events(repo, "roo-1777716553096")
    edits = [e for e in events if e["kind"] == "code.edit"]
    assert [(e["tool"], e["before_range"], e["after_range"], e["after_text"]) for e in edits] == [
        ("insert_content", [2, 1], [2, 3], "import auth\nimport jwt\n"),
        ("insert_content", [6, 5], [6, 6], "auth.setup(app)\n")]
    assert all(e["file_after_sha"] for e in edits)  # the session's copy of the file was whole


def test_an_export_that_showed_a_utf16_file_is_still_read(repo: Path, tmp_path: Path) -> None:
    """A task read a requirements.txt that PowerShell had written in UTF-16, and Roo showed its
    bytes as they were: the export holds NUL bytes (buckz6/onboarding-buddy's
    `session10export.md`, 785 of them). It is still the task's export, not binary junk: its edit
    is captured (a test in that shape)."""
    cwd = "c:/onboarding-buddy"
    utf16 = "\n".join(f"{i} | " + "\0".join(name) + "\0\r\0" for i, name in enumerate(["fastapi==0.1", "uvicorn"], 1))
    messages = [
        ("User", "<task>\ndeploy on railway\n</task>\n" + bob_env(cwd, "2026-05-16T06:40:06.325Z")),
        ("Assistant", xml_read("backend/requirements.txt", [])[0]),
        ("User", "[read_file for 'backend/requirements.txt'. Reading multiple files at once is more efficient.] "
                 "Result:\n<files>\n<file><path>backend/requirements.txt</path>\n<content lines=\"1-2\">\n"
                 f"{utf16}\n</content>\n</file>\n</files>\n" + bob_env(cwd, "2026-05-16T06:40:20.000Z")),
        ("Assistant", "<write_to_file>\n<path>railway.toml</path>\n<content>\n[build]\nbuilder = \"nixpacks\"\n"
                      "</content>\n<line_count>2</line_count>\n</write_to_file>"),
        ("User", written("write_to_file", "railway.toml", "created") + bob_env(cwd, "2026-05-16T06:41:00.000Z")),
    ]
    out = ingest_export(repo, tmp_path / "session10export.md", messages, cwd)
    assert "1 session" in out and "1 edit" in out, out
    events = shown_events(repo, "roo-1778913606325")
    [edit] = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["op"], edit["after_range"]) == ("railway.toml", "create", [1, 2])


def test_search_and_replace_is_an_edit_at_the_lines_it_changed(repo: Path, tmp_path: Path) -> None:
    """Kilo Code's (Roo Code's) search_and_replace replaces every match of a text and its result
    keeps no file (Improwised/vibe-coding's `kilo_code_task_aug-13-2025_5-59-13-pm.md`: 15 of
    them). On a file the task wrote, the replacement is done again on that copy: an edit at the
    line it changed. On a file the task never saw (`.env`, made by a shell command), it is kept
    as its texts without lines (a test in that shape)."""
    cwd = "/home/u/app"
    compose = 'services:\n  mysql:\n    ports:\n      - "3306:3306"\n  redis:\n    ports:\n      - "6379:6379"\n'
    messages = [
        ("User", "<task>\nmove mysql to 3307\n</task>\n" + bob_env(cwd, "2025-08-13T12:00:00.000Z")),
        *tool_turn(f"<write_to_file>\n<path>docker-compose.yml</path>\n<content>\n{compose}</content>\n"
                   "<line_count>7</line_count>\n</write_to_file>", "write_to_file", "docker-compose.yml", cwd,
                   "2025-08-13T12:00:10.000Z", "created"),
        *tool_turn('<search_and_replace>\n<path>docker-compose.yml</path>\n<search>ports:\n      - "3306:3306"'
                   '</search>\n<replace>ports:\n      - "3307:3306"</replace>\n</search_and_replace>',
                   "search_and_replace", "docker-compose.yml", cwd, "2025-08-13T12:00:20.000Z"),
        *tool_turn("<search_and_replace>\n<path>.env</path>\n<search>DB_PORT=3306</search>\n"
                   "<replace>DB_PORT=3307</replace>\n</search_and_replace>", "search_and_replace", ".env", cwd,
                   "2025-08-13T12:00:30.000Z"),
    ]
    out = ingest_export(repo, tmp_path / "kilo_code_task_aug-13-2025_5-59-13-pm.md", messages, cwd)
    assert "3 edits" in out, out
    _, replaced, env_edit = [e for e in shown_events(repo, "roo-1755086400000") if e["kind"] == "code.edit"]
    assert (replaced["tool"], replaced["file"], replaced["before_range"], replaced["after_range"]) == (
        "search_and_replace", "docker-compose.yml", [4, 4], [4, 4])
    assert (replaced["before_text"], replaced["after_text"]) == ('      - "3306:3306"\n', '      - "3307:3306"\n')
    assert replaced["file_after_sha"]  # the copy the task wrote, replaced again: the file after is known
    assert (env_edit["file"], env_edit["after_range"], env_edit["before_text"], env_edit["after_text"]) == (
        ".env", None, "DB_PORT=3306", "DB_PORT=3307")


def test_search_and_replace_within_lines_does_what_roo_does_and_never_runs_a_pattern() -> None:
    """A text, case ignored, only in lines 2-3, with `$&` and `$$` in the replacement
    (JavaScript's String.replace): every match there, none outside. A pattern (`use_regex`) is not
    run: a transcript's `(a+)+$` would hold the ingest for hours in Python's re."""
    import time

    from engram.adapters.roo_replace import replaced, replacements

    [rep] = replacements({"search": "port=", "replace": "[$&]$$", "ignore_case": "true",
                          "start_line": "2", "end_line": "3"})
    assert replaced("port=1\nPort=2 port=3\nport=4\nport=5\n", rep) == "port=1\n[Port=]$2 [port=]$3\n[port=]$4\nport=5\n"
    [evil] = replacements({"search": "(a+)+$", "replace": "b", "use_regex": "true"})
    started = time.process_time()
    assert replaced("a" * 26 + "!", evil) is None and time.process_time() - started < 1  # (run: ~5 s)


def test_an_export_renamed_with_a_prefix_still_names_its_agent(repo: Path, tmp_path: Path) -> None:
    """Improwised/vibe-coding commits its Kilo Code exports as `2-build-app-kilo_code_task_aug-13-2025_5-08-40-pm.md`
    (a step number and a title before Kilo's own name): `engram show` still says Kilo Code wrote it."""
    cwd = "/home/u/app"
    messages = [
        ("User", "<task>\nadd a readme\n</task>\n" + bob_env(cwd, "2025-08-13T11:30:00.000Z")),
        ("Assistant", "<write_to_file>\n<path>README.md</path>\n<content>\n# App\n</content>\n"
                      "<line_count>1</line_count>\n</write_to_file>"),
        ("User", written("write_to_file", "README.md", "created") + bob_env(cwd, "2025-08-13T11:30:10.000Z")),
    ]
    out = ingest_export(repo, tmp_path / "2-build-app-kilo_code_task_aug-13-2025_5-08-40-pm.md", messages, cwd)
    assert "1 edit" in out, out
    assert shown_events(repo, "roo-1755084600000")[0]["exported_by"] == "Kilo Code"
