"""Gemini CLI, Qwen Code and OpenCode capture: real sessions (tests/fixtures/gemini, opencode: the
Entire CLI's copies from savekirk/session-bridge, MIT) parsed into the edits, reads and lines
they made, ingested end to end and named by `engram explain` as the writer; the other forms
(JSONL recording, `/chat share` markdown, Qwen Code, OpenCode's storage folder) from small
hand-made files in the formats' own shapes; bad input counted and said."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

from conftest import FIXTURES, git, run_engram, shown_events, unpack
from engram.adapters.base import PathMapper, SourceSpan
from engram.adapters.gemini import parse_gemini
from engram.adapters.opencode import parse_opencode
from engram.adapters.qwen import parse_qwen
from engram.capture.discovery import detect_format

GEMINI_ONE = "914f3c63-152a-4f25-9f4e-367c43140554"
GEMINI_FIVE = "d0ed8c54-d24e-4ca5-b7ff-2f2b943c0d2d"
OC_EDITS = "ses_277ed760bffeXZM4Joly2lQJzU"
OC_PATCH = "ses_27a3283eeffe2okXvUQaxKJ0Nw"
PROJECT = "/Users/savekirk/dev/ai/entire/session-bridge"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real")
    unpack(FIXTURES / "gemini", out / "gemini")
    unpack(FIXTURES / "opencode", out / "opencode")
    return out


def mapper(cwd: str | None) -> PathMapper:
    root = PurePosixPath(cwd) if cwd else None
    return PathMapper(Path("/nonexistent-repo"), root, root)


def edits(cap) -> list[tuple[str, str, list[int] | None, list[int] | None]]:
    return [(e["file"], e["op"], e["before_range"], e["after_range"]) for e in cap.events if e["kind"] == "code.edit"]


# ---------------------------------------------------------------- real sessions


def test_real_gemini_recording_edits_reads_and_lines(real: Path) -> None:
    f = real / "gemini" / f"{GEMINI_ONE}.json"
    assert detect_format(f) == "gemini-cli"
    cap = parse_gemini([SourceSpan("main", f)], mapper, max_line_bytes=1 << 30)
    assert cap.session_id == GEMINI_ONE
    assert cap.meta["cwd"] == PROJECT  # inferred: the call names README.md both ways
    assert cap.meta["model"] == "gemini-3-flash-preview"
    assert edits(cap) == [("README.md", "update", [21, 33], [21, 53])]
    read = [e for e in cap.events if e["kind"] == "code.read"]
    # the prompt's @README.md (its text in the message), then a read_file of it
    assert [(r["file"], r["range"]) for r in read] == [("README.md", [1, 49]), ("README.md", [1, 49])]
    edit = next(e for e in cap.events if e["kind"] == "code.edit")
    assert '<img src="docs/assets/checkpoints.gif" width=75%>' in edit["after_text"]
    assert edit["ts"].startswith("2026-04-14T14:1") and not cap.skipped


def test_real_gemini_session_with_writes(real: Path) -> None:
    cap = parse_gemini([SourceSpan("main", real / "gemini" / f"{GEMINI_FIVE}.json")], mapper, max_line_bytes=1 << 30)
    got = edits(cap)
    assert got[0] == ("CONTRIBUTING.md", "create", [1, 0], [1, 97])
    assert [g[0] for g in got] == ["CONTRIBUTING.md", "README.md", "CONTRIBUTING.md",
                                   ".github/ISSUE_TEMPLATE/bug_report.yml", ".github/ISSUE_TEMPLATE/feature_request.yml"]
    assert all(g[3] is not None for g in got)


def test_real_opencode_exports(real: Path) -> None:
    f = real / "opencode" / f"{OC_EDITS}.json"
    assert detect_format(f) == "opencode"
    cap = parse_opencode([SourceSpan("main", f)], mapper, max_line_bytes=1 << 30)
    assert cap.session_id == OC_EDITS and cap.meta["cwd"] == PROJECT and cap.meta["harness_version"] == "1.4.3"
    assert [(e[0], e[3]) for e in edits(cap)] == [
        ("src/components/entireStatusBarItem.ts", [116, 116]), ("src/extension.ts", [20, 20]),
        ("src/extension.ts", [40, 40]), ("src/extension.ts", [96, 96]), ("src/extension.ts", [292, 292]),
        ("src/extension.ts", [473, 477])]
    assert sum(e["kind"] == "code.read" for e in cap.events) == 6
    cap = parse_opencode([SourceSpan("main", real / "opencode" / f"{OC_PATCH}.json")], mapper, max_line_bytes=1 << 30)
    assert edits(cap) == [("LICENSE.md", "create", [1, 0], [1, 21])]
    assert cap.events[0]["ts"].endswith("Z")


def test_real_gemini_session_ingested_and_explained_as_writer(real: Path, repo: Path) -> None:
    doc = json.loads((real / "gemini" / f"{GEMINI_ONE}.json").read_text())
    after = next(tc["resultDisplay"]["newContent"] for m in doc["messages"] for tc in m.get("toolCalls") or []
                 if tc["name"] == "replace")
    (repo / "README.md").write_text(after)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "readme")
    out = run_engram(repo, "ingest", "--map", f"{PROJECT}={repo}", str(real / "gemini" / f"{GEMINI_ONE}.json"))
    assert "1 edit" in out.stdout + out.stderr
    line = next(i for i, t in enumerate(after.splitlines(), 1) if "checkpoints.gif" in t)
    res = json.loads(run_engram(repo, "explain", f"README.md:{line - 1}-{line + 3}", "--brief").stdout)
    assert res["sessions"][0]["session_id"] == GEMINI_ONE
    assert res["sessions"][0]["harness"] == "gemini-cli"
    events = shown_events(repo, GEMINI_ONE)
    assert [e["kind"] for e in events].count("code.edit") == 1


# ---------------------------------------------------------------- other forms, hand-made in the formats' shapes


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _diff(call_id: str, path: str, before: str | None, after: str, status: str = "success") -> dict:
    return {"id": call_id, "name": "replace", "args": {"file_path": path, "old_string": "x", "new_string": "y"},
            "status": status, "timestamp": "2026-05-01T10:00:02Z",
            "result": [{"functionResponse": {"id": call_id, "name": "replace",
                                             "response": {"output": "ok"} if status == "success" else {"error": "no"}}}],
            "resultDisplay": {"fileDiff": "@@", "fileName": Path(path).name, "filePath": path,
                              "originalContent": before, "newContent": after}}


def test_jsonl_recording_counts_each_call_once_and_not_failed_ones(tmp_path: Path) -> None:
    msg = {"id": "m2", "timestamp": "2026-05-01T10:00:01Z", "type": "gemini", "content": "done", "model": "g"}
    running = {**_diff("c1", "/w/app/a.py", "a\nb\n", "a\nB\nc\n"), "status": "executing"}
    f = _write_jsonl(tmp_path / "session-2026-05-01T10-00-abcd1234.jsonl", [
        {"sessionId": "s-1", "projectHash": "h", "startTime": "2026-05-01T10:00:00Z", "kind": "main"},
        {"id": "m1", "timestamp": "2026-05-01T10:00:00Z", "type": "user", "content": [{"text": "fix a.py"}]},
        {**msg, "toolCalls": [running]},
        {**msg, "toolCalls": [_diff("c1", "/w/app/a.py", "a\nb\n", "a\nB\nc\n"),
                              _diff("c2", "/w/app/a.py", "a\nB\nc\n", "z\n", status="error")]},
        {"$set": {"lastUpdated": "2026-05-01T10:00:03Z"}},
        {"$rewindTo": "m2"},
        {"$set": {"lastUpdated": "2026-05-01T10:00:04Z", "messages": [
            {"id": "m9", "timestamp": "2026-05-01T10:00:04Z", "type": "user", "content": "summary of the work"}]}},
    ])
    assert detect_format(f) == "gemini-cli"
    cap = parse_gemini([SourceSpan("main", f)], lambda cwd: mapper("/w/app"), max_line_bytes=1 << 20)
    assert edits(cap) == [("a.py", "update", [2, 2], [2, 3])]
    assert [e["kind"] for e in cap.events].count("msg.out") == 1  # the message written twice: its text once
    assert [e["kind"] for e in cap.events].count("tool.call") == 2
    assert cap.ignored["failed, cancelled or rejected edit (not an edit)"] == 1
    assert [e["kind"] for e in cap.events][-2:] == ["compact", "msg.in"]  # the rebuilt history, marked


def test_chat_share_markdown_places_edits_it_can_and_says_what_it_cannot(tmp_path: Path, repo: Path) -> None:
    def block(kind: str, value: dict) -> str:
        return f"**Tool {kind}**:\n```json\n{json.dumps(value, indent=2)}\n```"

    sections = [
        ("USER 🧑‍💻", "I'm currently working in the directory: /home/u/proj\nMy setup is complete."),
        ("MODEL ✨", block("Command", {"id": "w1", "name": "write_file",
                                        "args": {"file_path": "/home/u/proj/calc.py",
                                                 "content": "def add(a, b):\n    return a + b\n"}})),
        ("USER 🧑‍💻", block("Response", {"id": "w1", "name": "write_file",
                                          "response": {"output": "Successfully created and wrote to new file"}})),
        ("MODEL ✨", block("Command", {"id": "r1", "name": "replace",
                                        "args": {"file_path": "/home/u/proj/calc.py", "old_string": "a + b",
                                                 "new_string": "int(a) + int(b)"}})),
        ("USER 🧑‍💻", block("Response", {"id": "r1", "name": "replace",
                                          "response": {"output": "Successfully modified file (1 replacements)."}})),
        ("MODEL ✨", block("Command", {"id": "r2", "name": "replace",
                                        "args": {"file_path": "/home/u/proj/other.py", "old_string": "old",
                                                 "new_string": "new"}})),
        ("USER 🧑‍💻", block("Response", {"id": "r2", "name": "replace", "response": {"output": "Successfully"}})),
        ("MODEL ✨", block("Command", {"id": "r3", "name": "replace",
                                        "args": {"file_path": "/home/u/proj/calc.py", "old_string": "nope",
                                                 "new_string": "x"}})),
        ("USER 🧑‍💻", block("Response", {"id": "r3", "name": "replace", "response": {"error": "0 occurrences"}})),
    ]
    f = tmp_path / "share.md"
    f.write_text("\n\n---\n\n".join(f"## {head}\n\n{body}" for head, body in sections))
    assert detect_format(f) == "gemini-cli"
    cap = parse_gemini([SourceSpan("main", f)], mapper, max_line_bytes=1 << 20)
    assert cap.meta["cwd"] == "/home/u/proj"
    assert edits(cap) == [("calc.py", "create", [1, 0], [1, 2]), ("calc.py", "update", [2, 2], [2, 2]),
                          ("other.py", "update", None, None)]
    assert cap.ignored["failed, cancelled or rejected edit (not an edit)"] == 1
    assert any("times" in u for u in cap.meta["unkept"]) and any("line ranges" in u for u in cap.meta["unkept"])
    out = run_engram(repo, "ingest", "--map", f"/home/u/proj={repo}", str(f))
    assert "gemini-cli session: not kept by the harness: times" in out.stdout + out.stderr
    shown = run_engram(repo, "show", cap.session_id).stdout
    assert "not kept by this harness: times" in shown


def test_qwen_code_recording(tmp_path: Path) -> None:
    base = {"sessionId": "q-1", "cwd": "/w/p", "version": "0.1.0", "gitBranch": "main"}
    f = _write_jsonl(tmp_path / "q-1.jsonl", [
        {**base, "uuid": "u1", "parentUuid": None, "timestamp": "2026-05-02T09:00:00Z", "type": "user",
         "message": {"role": "user", "parts": [{"text": "rename it"}]}},
        {**base, "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-05-02T09:00:01Z", "type": "assistant",
         "model": "qwen3-coder-plus", "message": {"role": "model", "parts": [
             {"text": "thinking", "thought": True},
             {"functionCall": {"id": "c1", "name": "edit", "args": {"file_path": "/w/p/m.py", "old_string": "foo",
                                                                  "new_string": "bar"}}}]}},
        {**base, "uuid": "t1", "parentUuid": "a1", "timestamp": "2026-05-02T09:00:02Z", "type": "tool_result",
         "message": {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "edit",
                                                                     "response": {"output": "ok"}}}]},
         "toolCallResult": {"callId": "c1", "status": "success",
                            "resultDisplay": {"fileDiff": "@@", "fileName": "m.py", "originalContent": "x\nfoo\n",
                                              "newContent": "x\nbar\n"}}},
        {**base, "uuid": "s1", "parentUuid": "t1", "timestamp": "2026-05-02T09:00:03Z", "type": "system",
         "subtype": "chat_compression", "systemPayload": {"info": {"originalTokenCount": 9000}}},
    ])
    assert detect_format(f) == "qwen-code"  # not Claude Code, whose envelope it shares
    cap = parse_qwen([SourceSpan("main", f)], mapper, max_line_bytes=1 << 20)
    assert cap.session_id == "q-1" and cap.meta["model"] == "qwen3-coder-plus"
    assert edits(cap) == [("m.py", "update", [2, 2], [2, 2])]
    assert [e["kind"] for e in cap.events] == ["msg.in", "msg.out", "tool.call", "tool.result", "code.edit", "compact"]


def _store_session(real: Path, tmp_path: Path) -> Path:
    """The real export laid out as OpenCode's storage folder; the session file's path."""
    doc = json.loads((real / "opencode" / f"{OC_EDITS}.json").read_text())
    storage = tmp_path / "opencode" / "storage"
    session = storage / "session" / "proj1" / f"{OC_EDITS}.json"
    session.parent.mkdir(parents=True)
    session.write_text(json.dumps(doc["info"]))
    for m in doc["messages"]:
        mdir = storage / "message" / OC_EDITS
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / f"{m['info']['id']}.json").write_text(json.dumps(m["info"]))
        for p in m["parts"]:
            pdir = storage / "part" / m["info"]["id"]
            pdir.mkdir(parents=True, exist_ok=True)
            (pdir / f"{p['id']}.json").write_text(json.dumps(p))
    return session


def test_opencode_storage_folder_reads_as_the_export(real: Path, tmp_path: Path) -> None:
    session = _store_session(real, tmp_path)
    assert detect_format(session) == "opencode"
    stored = parse_opencode([SourceSpan("main", session)], mapper, max_line_bytes=1 << 30)
    exported = parse_opencode([SourceSpan("main", real / "opencode" / f"{OC_EDITS}.json")], mapper,
                              max_line_bytes=1 << 30)
    assert edits(stored) == edits(exported)
    assert len(stored.events) == len(exported.events)


def test_a_rewritten_session_file_adds_only_its_new_events(real: Path, repo: Path, tmp_path: Path) -> None:
    session = _store_session(real, tmp_path)
    run_engram(repo, "ingest", str(session))
    info = json.loads(session.read_text())
    info["time"]["updated"] += 1000  # OpenCode rewrites the session file as the session goes on
    session.write_text(json.dumps(info, indent=1))
    last = sorted((session.parents[2] / "message" / OC_EDITS).glob("*.json"))[-1]
    part_dir = session.parents[2] / "part" / last.stem
    (part_dir / "prt_zzzzzzzzzzzz.json").write_text(json.dumps(
        {"id": "prt_zzzzzzzzzzzz", "type": "text", "text": "one more thing, later"}))
    run_engram(repo, "ingest", str(session))
    tapes = json.loads(run_engram(repo, "tapes", "--json").stdout)
    ours = [t for t in tapes if t["session_id"] == OC_EDITS]
    assert len(ours) == 2 and sorted(t["events"] for t in ours)[0] == 2  # its meta and the one new event
    run_engram(repo, "ingest", str(session))
    assert len(json.loads(run_engram(repo, "tapes", "--json").stdout)) == len(tapes)


def test_discovery_honours_the_tools_environment(real: Path, repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "ghome"
    project = home / ".gemini" / "tmp" / "proj"
    (project / "chats").mkdir(parents=True)
    (project / ".project_root").write_text(str(repo))
    recording = (real / "gemini" / f"{GEMINI_ONE}.json").read_text().replace(PROJECT, str(repo))
    (project / "chats" / "session-2026-04-14T14-14-914f3c63.json").write_text(recording)
    (repo / "README.md").write_text("hello\n")
    qwen_chats = tmp_path / "q" / "projects" / "-repo" / "chats"
    qwen_chats.mkdir(parents=True)
    _write_jsonl(qwen_chats / "q-7.jsonl", [{"sessionId": "q-7", "cwd": str(repo), "uuid": "u", "type": "user",
                                             "timestamp": "2026-05-02T09:00:00Z",
                                             "message": {"role": "user", "parts": [{"text": "hi"}]}}])
    oc = _store_session(real, tmp_path / "xdg")
    oc.write_text(oc.read_text().replace(PROJECT, str(repo)))
    env = {"GEMINI_CLI_HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "xdg"), "QWEN_RUNTIME_DIR": str(tmp_path / "q"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "CODEX_HOME": str(tmp_path / "none")}
    out = run_engram(repo, "ingest", env=env)
    assert "3 sessions" in out.stdout + out.stderr
    tapes = run_engram(repo, "tapes", env=env).stdout
    assert GEMINI_ONE in tapes and "q-7" in tapes and OC_EDITS in tapes


def test_bad_input_is_counted_and_said(real: Path, repo: Path, tmp_path: Path) -> None:
    whole = (real / "gemini" / f"{GEMINI_ONE}.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: len(whole) // 2])
    assert detect_format(cut) == "gemini-cli"
    unknown = _write_jsonl(tmp_path / "later.jsonl", [
        {"sessionId": "s-9", "projectHash": "h", "startTime": "2026-05-01T10:00:00Z"},
        {"id": "m1", "type": "user", "timestamp": "2026-05-01T10:00:00Z", "content": "hi"},
        {"novel": "record of a later version"},
    ])
    out = run_engram(repo, "ingest", str(cut), str(unknown))
    said = out.stdout + out.stderr
    assert "truncated or malformed JSON" in said
    assert "unknown Gemini CLI record" in said
    oc_cut = tmp_path / "oc.json"
    oc_cut.write_text((real / "opencode" / f"{OC_PATCH}.json").read_text()[:5000])
    said = (lambda p: p.stdout + p.stderr)(run_engram(repo, "ingest", str(oc_cut)))
    assert "OpenCode export or session file cut short" in said


def test_setup_gemini_and_opencode_round_trip(repo: Path) -> None:
    run_engram(repo, "setup", "gemini", check=False)
    settings = json.loads((repo / ".gemini" / "settings.json").read_text())
    assert settings["mcpServers"]["engram"]["args"][-1] == "mcp"
    assert set(settings["hooks"]) == {"AfterAgent", "PreCompress", "SessionEnd"}
    run_engram(repo, "setup", "opencode", check=False)
    assert json.loads((repo / "opencode.json").read_text())["mcp"]["engram"]["command"][-1] == "mcp"
    run_engram(repo, "setup", "--remove")
    assert not (repo / "opencode.json").exists() and not (repo / ".gemini" / "settings.json").exists()


def test_older_chat_share_markdown_shape(tmp_path: Path) -> None:
    """Older exports put the icon first (`🧑‍💻 ## USER`), glue `**Tool Command**` to the text before
    it and give calls no id (the response's id is not the call's): as a public export has them."""
    call = {"name": "replace", "args": {"old_string": "cp -r pkg/* dist/", "file_path": "/home/u/app/deploy.yml",
                                        "new_string": "cp -r pkg dist/"}}
    resp = {"id": "replace-1763281890233-88a8073605567", "name": "replace",
            "response": {"output": "Successfully modified file: /home/u/app/deploy.yml (1 replacements)."}}
    f = tmp_path / "chat.md"
    f.write_text("🧑‍💻 ## USER\n\nI'm currently working in the directory: /home/u/app\n\n---\n\n"
                 f"✨ ## MODEL\n\nI will fix the copy.**Tool Command**:\n```json\n{json.dumps(call, indent=2)}\n```\n\n---\n\n"
                 f"🧑‍💻 ## USER\n\n**Tool Response**:\n```json\n{json.dumps(resp, indent=2)}\n```")
    assert detect_format(f) == "gemini-cli"
    cap = parse_gemini([SourceSpan("main", f)], mapper, max_line_bytes=1 << 20)
    assert edits(cap) == [("deploy.yml", "update", None, None)]
    edit = next(e for e in cap.events if e["kind"] == "code.edit")
    assert edit["before_text"] == "cp -r pkg/* dist/\n" and edit["after_text"] == "cp -r pkg dist/\n"
    assert [e["kind"] for e in cap.events][:2] == ["msg.in", "msg.out"]


def test_opencode_session_kept_one_message_per_line_reads_as_the_export(real: Path, tmp_path: Path) -> None:
    """The Entire CLI's early checkpoints kept an OpenCode session as one `{info, parts}` message
    per line, no session document (a real one: adrianmg/test-repo, OpenCode of February 2026). The
    same messages read that way give the export's session and edits; a last line cut short is a
    file cut short, left for a later ingest."""
    doc = json.loads((real / "opencode" / f"{OC_PATCH}.json").read_text())
    lines = tmp_path / "messages.jsonl"
    lines.write_text("".join(json.dumps({"info": {k: v for k, v in m["info"].items() if k != "sessionID"},
                                         "parts": m["parts"]}) + "\n" for m in doc["messages"]))
    assert detect_format(lines) == "opencode"
    cap = parse_opencode([SourceSpan("main", lines)], mapper, max_line_bytes=1 << 30)
    assert cap.session_id == OC_PATCH and cap.meta["cwd"] == PROJECT
    assert edits(cap) == [("LICENSE.md", "create", [1, 0], [1, 21])]
    cut = tmp_path / "cut.jsonl"
    cut.write_text(lines.read_text()[:-200])
    cap = parse_opencode([SourceSpan("main", cut)], mapper, max_line_bytes=1 << 30)
    assert not cap.events and any("cut short" in k for k in cap.skipped)


def test_a_session_file_nested_too_deep_is_a_skip_saying_so(repo: Path, tmp_path: Path) -> None:
    """A Gemini CLI session file (one JSON document) nested past orjson's depth was read as JSON
    lines and reported as a "truncated last line (left for the next ingest)" (pretty-printed: "cut
    short ... ingest it again once it is complete"), which no later ingest could ever finish."""
    deep = "[" * 3000 + "]" * 3000
    doc = {"sessionId": "g-deep", "projectHash": "h", "startTime": "2026-05-01T10:00:00Z",
           "messages": [{"id": "m1", "type": "user", "timestamp": "2026-05-01T10:00:00Z", "content": "hi", "x": "@@"}]}
    files = [tmp_path / "session-compact.json", tmp_path / "session-pretty.json"]
    files[0].write_text(json.dumps(doc).replace('"@@"', deep))
    files[1].write_text(json.dumps(doc, indent=2).replace('"@@"', deep))
    for f in files:
        assert detect_format(f) == "gemini-cli"
        for _ in range(2):
            skipped = json.loads(run_engram(repo, "ingest", str(f), "--json").stdout)["skipped"]
            assert skipped == {"JSON nested deeper than 1024 levels: nothing captured": 1}, (f.name, skipped)
