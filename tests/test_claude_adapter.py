"""Claude Code capture on the real spotter sessions, checked against the transcripts themselves."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import pytest
import zstandard

from conftest import FIXTURES, SPOTTER_MAIN, SPOTTER_OTHER, run_engram
from engram.index.catalog import resolve_tapes, tape_file
from engram.index.db import open_db
from engram.store.repo import Store
from engram.tape.reader import TapeReader

if TYPE_CHECKING:
    from claude_shapes import Session

EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}


def tape_events(root: Path, session: str) -> list[dict[str, Any]]:
    store = Store(root)
    db = open_db(store)
    out: list[dict[str, Any]] = []
    for row in resolve_tapes(db, session):
        with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
            evs = list(r.events(resolve_objects=True))
            out.extend(evs if not out else evs[1:])
    db.close()
    return out


def transcript_edits(path: Path) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Straight from the JSONL: successful edit results by tool_use_id, and failed edit call ids."""
    names: dict[str, str] = {}
    ok: dict[str, dict[str, Any]] = {}
    failed: set[str] = set()
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        content = (rec.get("message") or {}).get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            if block.get("type") == "tool_result" and names.get(block["tool_use_id"]) in EDIT_TOOLS:
                tur = rec.get("toolUseResult")
                if block.get("is_error") or not isinstance(tur, dict):
                    failed.add(block["tool_use_id"])
                else:
                    ok[block["tool_use_id"]] = tur
    return ok, failed


def expected_new_file(tur: dict[str, Any]) -> str:
    """The file after the edit, computed the way the tool itself does (not from the patch)."""
    if "content" in tur and tur.get("type") in ("create", "update"):
        return tur["content"]
    old, new = tur["oldString"], tur["newString"]
    if new == "" and old + "\n" in tur["originalFile"]:
        old += "\n"  # Claude Code's Edit deletes the line break too when new_string is empty
    return tur["originalFile"].replace(old, new) if tur.get("replaceAll") else tur["originalFile"].replace(old, new, 1)


def lines(text: str) -> list[str]:
    out = text.split("\n")
    return out[:-1] if out and out[-1] == "" else out


@pytest.fixture(scope="module")
def ingested(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("claude") / "repo"
    root.mkdir()
    from conftest import git

    git(root, "init", "-q")
    run_engram(root, "init")
    run_engram(root, "ingest", str(spotter))
    return root


@pytest.mark.parametrize("session", [SPOTTER_MAIN, SPOTTER_OTHER])
def test_every_successful_edit_is_one_exact_code_edit(ingested: Path, spotter: Path, session: str) -> None:
    ok, failed = transcript_edits(spotter / f"{session}.jsonl")
    assert len(ok) >= 39
    edits = {ev["call_id"]: ev for ev in tape_events(ingested, session) if ev["kind"] == "code.edit"}
    assert set(edits) == set(ok), "one code.edit per successful Edit/Write, none for failed ones"
    assert not (set(edits) & failed)
    for call_id, tur in ok.items():
        ev = edits[call_id]
        new = lines(expected_new_file(tur))
        old = lines(tur.get("originalFile") or "")
        b0, b1 = ev["before_range"]
        a0, a1 = ev["after_range"]
        assert lines(ev["after_text"]) == new[a0 - 1:a1], call_id
        assert lines(ev["before_text"]) == old[b0 - 1:b1], call_id
        # Replacing the before range by the after text in the old file gives the new file:
        # the ranges are exact, not just plausible.
        assert old[: b0 - 1] + lines(ev["after_text"]) + old[b1:] == new, call_id
        assert a0 == b0, "an edit's region starts at the same line on both sides"
        root = "/home/USER/projects/spotter-worktrees/"
        assert tur["filePath"].startswith(root) and tur["filePath"].endswith("/" + ev["file"])
        assert not ev["file"].startswith("/")


def test_reads_are_code_reads_without_cat_n_prefixes(ingested: Path) -> None:
    reads = [ev for ev in tape_events(ingested, SPOTTER_MAIN) if ev["kind"] == "code.read"]
    assert len(reads) >= 30
    arrow = re.compile(r"^\s*\d+→", re.M)
    for ev in reads:
        assert not arrow.search(ev["text"]), ev["file"]
        first, last = ev["range"]
        assert last - first + 1 == len(lines(ev["text"]))
    annotation = next(ev for ev in reads if ev["file"] == "lib/spotter/transcripts/annotation.ex")
    assert annotation["range"] == [1, 45]  # 45 lines and a final newline (cat -n shows an empty 46th)
    assert annotation["text"].startswith("defmodule Spotter.Transcripts.Annotation do\n")


def test_compaction_and_subagents_are_part_of_the_session(ingested: Path) -> None:
    evs = tape_events(ingested, SPOTTER_MAIN)
    assert evs[0]["kind"] == "meta" and evs[0]["session_id"] == SPOTTER_MAIN
    assert [e for e in evs if e["kind"] == "compact"][0]["trigger"] == "auto"
    summaries = [e for e in evs if e.get("compact_summary")]
    assert summaries and summaries[0]["text"].startswith("This session is being continued")
    agents = {e.get("agent") for e in evs if e.get("agent")}
    assert {"a881341", "acompact-fffbd0"} <= agents
    names = {s["name"] for s in evs[0]["sources"]}
    assert "subagents/agent-a881341.jsonl" in names
    tools = {e["name"] for e in evs if e["kind"] == "tool.call"}
    assert {"Bash", "Read", "Edit", "Write", "Task"} <= tools


def progress_messages(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Straight from the JSONL: each subagent's records repeated in the parent's agent_progress."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        data = rec.get("data") if rec.get("type") == "progress" else None
        if isinstance(data, dict) and data.get("type") == "agent_progress":
            out.setdefault(data["agentId"], []).append(data["message"])
    return out


def test_a_subagent_without_its_file_is_read_from_the_parents_progress(ingested: Path, spotter: Path) -> None:
    """`subagent.jsonl` (session 491e126e) was kept without its `subagents/` folder: its
    subagent's calls, results and reads exist only in the parent's progress records."""
    session = "491e126e-1e71-469c-ade2-fcc8af567c74"
    msgs = progress_messages(spotter / "subagent.jsonl")
    assert set(msgs) == {"afb92ff"}
    calls = {b["id"]: b for m in msgs["afb92ff"] for b in m["message"]["content"]
             if isinstance(m["message"]["content"], list) and b.get("type") == "tool_use"}
    assert len(calls) >= 8
    evs = [e for e in tape_events(ingested, session) if e.get("agent") == "afb92ff"]
    got = {e["call_id"]: e for e in evs if e["kind"] == "tool.call"}
    assert set(got) == set(calls), "every call of the subagent, once"
    assert all(got[c]["name"] == calls[c]["name"] and got[c]["input"] == calls[c]["input"] for c in calls)
    assert len([e for e in evs if e["kind"] == "tool.result"]) == len(calls)
    reads = {e["file"]: e for e in evs if e["kind"] == "code.read"}
    assert "mix.exs" in reads and reads["mix.exs"]["text"].startswith("defmodule Spotter.MixProject do")
    # taken from `cat -n` text, the read agrees with the parent's own read of the same file, which
    # has a toolUseResult: 83 lines and a final newline (cat -n numbers an empty 84th)
    parent = [e for e in tape_events(ingested, session) if e["kind"] == "code.read" and e["file"] == "mix.exs"
              and not e.get("agent")]
    assert parent and parent[0]["range"] == reads["mix.exs"]["range"] == [1, 83]
    assert parent[0]["text"] == reads["mix.exs"]["text"]
    prompt = [e for e in evs if e["kind"] == "msg.in"]
    assert len(prompt) == 1 and prompt[0]["text"].startswith("Draft bead content")


@pytest.mark.parametrize("limit,shown,expected", [
    (None, "     1→a\n     2→\n     3→b\n     4→", [1, 3]),  # to the end: the 4th is cat -n's artifact
    (3, "     1→a\n     2→b\n     3→", [1, 3]),  # as many lines as asked: the empty 3rd is the file's
    (5, "     1→a\n     2→b\n     3→", [1, 2]),  # fewer than asked: the end of the file, artifact
])
def test_a_read_from_cat_n_text_ends_where_the_file_does(tmp_path: Path, limit: int | None, shown: str,
                                                          expected: list[int]) -> None:
    """Reads without toolUseResult (older transcripts, subagents from progress records) take
    their range from `cat -n` numbers, which count the empty string after a final newline."""
    from engram.adapters.base import PathMapper, SourceSpan
    from engram.adapters.claude import parse_session

    root = PurePosixPath("/w/repo")
    inp = {"file_path": "/w/repo/f.txt", **({"limit": limit} if limit else {})}
    recs = [{"type": "assistant", "uuid": "u1", "sessionId": "s", "cwd": str(root), "timestamp": "2026-01-01T00:00:00Z",
             "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": inp}]}},
            {"type": "user", "uuid": "u2", "sessionId": "s", "cwd": str(root), "timestamp": "2026-01-01T00:00:01Z",
             "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": shown}]}}]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    cap = parse_session([SourceSpan("main", tmp_path / "s.jsonl")],
                        lambda cwd: PathMapper(Path(str(root)), root, root), max_line_bytes=1 << 20)
    read = next(e for e in cap.events if e["kind"] == "code.read")
    assert read["range"] == expected
    assert len(read["text"].split("\n")) - 1 == expected[1] - expected[0] + 1


def test_a_subagent_with_its_file_is_not_read_twice(ingested: Path, spotter: Path) -> None:
    """SPOTTER_MAIN has both the file of subagent a881341 and its progress records in the parent."""
    assert progress_messages(spotter / f"{SPOTTER_MAIN}.jsonl").get("a881341")
    sub = spotter / SPOTTER_MAIN / "subagents" / "agent-a881341.jsonl"
    in_file = [b["id"] for line in sub.read_text().splitlines()
               for b in (json.loads(line).get("message") or {}).get("content") or []
               if isinstance(b, dict) and b.get("type") == "tool_use"]
    evs = tape_events(ingested, SPOTTER_MAIN)
    calls = [e["call_id"] for e in evs if e["kind"] == "tool.call" and e.get("agent") == "a881341"]
    assert sorted(calls) == sorted(in_file)


# Records of newer Claude Code versions that hold no evidence, in the shape seen in real sessions.
_NEWER_RECORDS = {
    # 2.1: the pull request the session opened (FSM1/cipher-box's sessions, MIT).
    "pr-link": {"type": "pr-link", "sessionId": SPOTTER_MAIN, "prNumber": 175,
                "prUrl": "https://github.com/FSM1/cipher-box/pull/175", "prRepository": "FSM1/cipher-box",
                "timestamp": "2026-02-21T02:06:23.295Z"},
    # 2.1.217: one file's backup for rewinding, in place of a whole file-history-snapshot
    # (polecatspeaks/StarCar's sessions): a backup's name, not its text.
    "file-history-delta": {"type": "file-history-delta", "messageId": "60b38547-f58e-4050-a941-d6d1653ad211",
                           "snapshotMessageId": "cec6ecf2-27ec-4757-9a6f-9520bf5a323a", "trackingPath": "CLAUDE.md",
                           "backup": {"backupFileName": "ae8d30e85126c328@v1", "version": 1,
                                      "backupTime": "2026-07-24T10:04:17.660Z", "realParentDir": "/home/u/proj"},
                           "timestamp": "2026-07-24T10:04:17.660Z"},
}


@pytest.mark.parametrize("kind", sorted(_NEWER_RECORDS))
def test_a_newer_record_without_evidence_is_known_not_unknown(spotter: Path, repo: Path, tmp_path: Path,
                                                              kind: str) -> None:
    """Not evidence, but not an unknown record type worth a line in the ingest summary either."""
    lines = (spotter / f"{SPOTTER_MAIN}.jsonl").read_text().splitlines(keepends=True)[:40]
    lines.insert(20, json.dumps(_NEWER_RECORDS[kind]) + "\n")
    (tmp_path / "s.jsonl").write_text("".join(lines))
    proc = run_engram(repo, "ingest", str(tmp_path / "s.jsonl"))
    assert "unknown record type" not in proc.stdout + proc.stderr
    assert "1 session," in proc.stdout and "0 skipped" in proc.stdout


def test_newer_record_types_are_known_and_an_attached_file_is_a_read(repo: Path, tmp_path: Path) -> None:
    """Claude Code 2.1 writes titles, modes, worktree moves and more (the schema-coverage fixture
    holds one of each): none is an unknown record. A file attached with `@path` arrives as an
    `attachment` record holding the file as a Read result does; it is the session reading it."""
    schema = tmp_path / "schema.jsonl"
    schema.write_bytes(zstandard.ZstdDecompressor().decompress(
        (FIXTURES / "claude" / "schema" / "claude_small_schema_coverage.jsonl.zst").read_bytes(),
        max_output_size=1 << 24))
    proc = run_engram(repo, "ingest", str(schema))
    assert "unknown record type" not in proc.stdout + proc.stderr and "0 skipped" in proc.stdout

    text = "defmodule Greeter do\n  def hello(name), do: \"hi \" <> name\nend\n"
    (repo / "lib").mkdir()
    (repo / "lib" / "greeter.ex").write_text(text)
    base = {"sessionId": "att-session", "cwd": str(repo), "version": "2.1.233", "isSidechain": False,
            "userType": "external", "timestamp": "2026-03-01T10:00:00.000Z"}
    recs = [{**base, "type": "user", "uuid": "u1", "parentUuid": None,
             "message": {"role": "user", "content": "why does @lib/greeter.ex say hi?"}},
            {**base, "type": "attachment", "uuid": "a1", "parentUuid": "u1",
             "attachment": {"type": "file", "filename": str(repo / "lib" / "greeter.ex"), "displayPath": "lib/greeter.ex",
                            "content": {"type": "text", "file": {"filePath": str(repo / "lib" / "greeter.ex"),
                                                                 "content": text, "numLines": 4, "startLine": 1,
                                                                 "totalLines": 4}}}}]
    (tmp_path / "att.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    run_engram(repo, "ingest", str(tmp_path / "att.jsonl"))
    reads = [e for e in tape_events(repo, "att-session") if e["kind"] == "code.read"]
    assert len(reads) == 1 and reads[0]["file"] == "lib/greeter.ex" and reads[0]["range"] == [1, 3]
    assert reads[0]["text"] == text
    doc = json.loads(run_engram(repo, "explain", "lib/greeter.ex:1-3", "--brief").stdout)
    assert [x["session_id"] for x in doc["sessions"]] == ["att-session"]


def test_subagent_edit_belongs_to_parent_session(spotter: Path, tmp_path: Path, repo: Path) -> None:
    """No real subagent here edits, so graft a real Edit pair into a real subagent file."""
    src = tmp_path / "s"
    shutil.copytree(spotter, src, ignore=shutil.ignore_patterns(f"{SPOTTER_OTHER}*", "subagent.jsonl",
                                                                 "tool_heavy.jsonl"))
    main = src / f"{SPOTTER_MAIN}.jsonl"
    recs = [json.loads(x) for x in main.read_text().splitlines()]
    call = next(r for r in recs if r.get("type") == "assistant"
                and any(b.get("name") == "Edit" for b in r["message"]["content"] if isinstance(b, dict)))
    call_id = next(b["id"] for b in call["message"]["content"] if b.get("name") == "Edit")
    result = next(r for r in recs if r.get("type") == "user" and isinstance(r["message"]["content"], list)
                  and any(b.get("tool_use_id") == call_id for b in r["message"]["content"]))
    # Remove the pair from the main file and put it in the subagent, as a sidechain.
    main.write_text("".join(json.dumps(r) + "\n" for r in recs if r not in (call, result)))
    sub = src / SPOTTER_MAIN / "subagents" / "agent-a881341.jsonl"
    with sub.open("a") as f:
        for r in (call, result):
            f.write(json.dumps({**r, "isSidechain": True, "agentId": "a881341"}) + "\n")
    run_engram(repo, "ingest", str(src))
    evs = tape_events(repo, SPOTTER_MAIN)
    edit = [e for e in evs if e["kind"] == "code.edit" and e["call_id"] == call_id]
    assert len(edit) == 1 and edit[0]["agent"] == "a881341"
    assert evs[0]["session_id"] == SPOTTER_MAIN


def test_a_subagent_file_gone_since_listing_loses_that_file_not_the_session(spotter: Path, tmp_path: Path,
                                                                            repo: Path) -> None:
    """Claude Code deletes a session's folder while a live capture reads it: a subagent file that
    cannot be read (here a dangling link) used to skip the whole session as unreadable."""
    src = tmp_path / "s"
    src.mkdir()
    shutil.copy(spotter / f"{SPOTTER_MAIN}.jsonl", src)
    shutil.copytree(spotter / SPOTTER_MAIN, src / SPOTTER_MAIN)
    sub = src / SPOTTER_MAIN / "subagents" / "agent-a881341.jsonl"
    sub.unlink()
    sub.symlink_to(tmp_path / "deleted.jsonl")
    proc = run_engram(repo, "ingest", str(src))
    assert "1 new tape," in proc.stdout and "1 × unreadable subagent file (FileNotFoundError)" in proc.stdout
    evs = tape_events(repo, SPOTTER_MAIN)
    assert len([e for e in evs if e["kind"] == "code.edit"]) == 48  # the main file's, all of them
    # With its file unread, the subagent's work comes from the parent's progress records.
    progress = {b["id"] for m in progress_messages(src / f"{SPOTTER_MAIN}.jsonl")["a881341"]
                if isinstance(m["message"]["content"], list) for b in m["message"]["content"]
                if b.get("type") == "tool_use"}
    calls = {e["call_id"] for e in evs if e["kind"] == "tool.call" and e.get("agent") == "a881341"}
    assert progress and calls == progress
    assert "subagents/agent-a881341.jsonl" not in {s["name"] for s in evs[0]["sources"]}
    # Back in place, the next capture reads it from its start.
    sub.unlink()
    shutil.copy(spotter / SPOTTER_MAIN / "subagents" / "agent-a881341.jsonl", sub)
    assert "1 new tape," in run_engram(repo, "ingest", str(src)).stdout
    store = Store(repo)
    db = open_db(store)
    try:
        rows = resolve_tapes(db, SPOTTER_MAIN)
    finally:
        db.close()
    with TapeReader(tape_file(store, rows[-1].id), store.objects_dir) as r:
        meta = next(iter(r.events()))
    assert {s["name"]: s["start"] for s in meta["sources"]}["subagents/agent-a881341.jsonl"] == 0


def test_tapes_and_show_commands(ingested: Path) -> None:
    listing = json.loads(run_engram(ingested, "tapes", "--json").stdout)
    by_session = {t["session_id"]: t for t in listing}
    assert by_session[SPOTTER_MAIN]["edits"] == 48 and by_session[SPOTTER_MAIN]["harness"] == "claude-code"
    assert by_session[SPOTTER_MAIN]["model"] == "claude-opus-4-6"
    tid = by_session[SPOTTER_MAIN]["id"]
    # A unique prefix and the session id name the same tape.
    by_prefix = run_engram(ingested, "show", tid[:8], "--limit", "5").stdout
    by_session_id = run_engram(ingested, "show", SPOTTER_MAIN, "--limit", "5").stdout
    assert by_prefix == by_session_id and "Implement spotter-gqc" in by_prefix
    # So does the start of the session id, as explain prints it and people quote it.
    assert not any(t["id"].startswith(SPOTTER_MAIN[:8]) for t in listing)
    assert run_engram(ingested, "show", SPOTTER_MAIN[:8], "--limit", "5").stdout == by_session_id
    raw = run_engram(ingested, "show", tid, "--raw").stdout.splitlines()
    assert len(raw) == by_session[SPOTTER_MAIN]["events"] and json.loads(raw[0])["kind"] == "meta"
    bad = run_engram(ingested, "show", "zzzz", check=False)
    assert bad.returncode == 1 and "no tape or session matches" in bad.stderr


def test_paths_outside_the_session_tree_stay_tool_events(spotter: Path, repo: Path, tmp_path: Path) -> None:
    recs = [json.loads(x) for x in (spotter / f"{SPOTTER_MAIN}.jsonl").read_text().splitlines()]
    for r in recs:  # move the session's cwd elsewhere: now every file path leaves its tree
        if "cwd" in r:
            r["cwd"] = "/somewhere/else"
    f = tmp_path / "moved.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run_engram(repo, "ingest", str(f))
    evs = tape_events(repo, SPOTTER_MAIN)
    assert not [e for e in evs if e["kind"] in ("code.edit", "code.read")]
    assert [e for e in evs if e["kind"] == "tool.call" and e["name"] == "Edit"]


def test_map_option_overrides_the_mapping(spotter: Path, repo: Path) -> None:
    run_engram(repo, "ingest", str(spotter / f"{SPOTTER_MAIN}.jsonl"),
               "--map", "/home/USER/projects/spotter-worktrees/spotter-gqc/lib=src")
    evs = tape_events(repo, SPOTTER_MAIN)
    files = {e["file"] for e in evs if e["kind"] == "code.edit"}
    assert any(f.startswith("src/spotter/") for f in files)
    assert not any(f.startswith("lib/") for f in files)


def test_a_session_from_a_removed_worktree_elsewhere_lands_on_repository_paths(spotter: Path, repo: Path,
                                                                             tmp_path: Path) -> None:
    """A teammate's session ran in `.worktrees/feature` of their checkout, long since removed, and
    is ingested here with `--map THEIR_CHECKOUT=HERE` (seen on dougnukem/orpheus: its CI
    workflow's edits were filed under `.worktrees/fix-ci-bootstrap/.github/...`)."""
    text = (spotter / f"{SPOTTER_MAIN}.jsonl").read_text()
    theirs, here = tmp_path / "theirs", tmp_path / "here"
    theirs.mkdir()
    (theirs / f"{SPOTTER_MAIN}.jsonl").write_text(
        text.replace("/home/USER/projects/spotter-worktrees/spotter-gqc", "/Users/dev/proj/.worktrees/feature"))
    # ... and a session of this checkout's own, from a worktree removed since (no --map)
    here.mkdir()
    (here / f"{SPOTTER_MAIN}.jsonl").write_text(
        text.replace("/home/USER/projects/spotter-worktrees/spotter-gqc", f"{repo}/worktrees/feature"))
    for source, args in ((theirs, ["--map", f"/Users/dev/proj={repo}"]), (here, [])):
        shutil.rmtree(repo / ".engram")
        run_engram(repo, "init")
        run_engram(repo, "ingest", str(source / f"{SPOTTER_MAIN}.jsonl"), *args)
        files = {e["file"] for e in tape_events(repo, SPOTTER_MAIN) if e["kind"] in ("code.edit", "code.read")}
        assert "lib/spotter/application.ex" in files and "config/config.exs" in files, source
        assert not [f for f in files if "worktrees/" in f], source


def test_failed_and_rejected_edits_are_tool_results_only(spotter: Path, repo: Path, tmp_path: Path) -> None:
    """The real sessions have no failed Edit, so turn real successful ones into the two failure shapes."""
    recs = [json.loads(x) for x in (spotter / f"{SPOTTER_MAIN}.jsonl").read_text().splitlines()]
    ok, _ = transcript_edits(spotter / f"{SPOTTER_MAIN}.jsonl")
    victims = sorted(ok)[:2]
    shapes = ["Error: String to replace not found in file.", "User rejected tool use"]
    for r in recs:
        content = (r.get("message") or {}).get("content")
        if r.get("type") != "user" or not isinstance(content, list):
            continue
        for b in content:
            if b.get("type") == "tool_result" and b["tool_use_id"] in victims:
                msg = shapes[victims.index(b["tool_use_id"])]
                b["is_error"] = True
                b["content"] = msg
                r["toolUseResult"] = msg
    f = tmp_path / f"{SPOTTER_MAIN}.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run_engram(repo, "ingest", str(f))
    evs = tape_events(repo, SPOTTER_MAIN)
    edits = {e["call_id"] for e in evs if e["kind"] == "code.edit"}
    assert len(edits) == len(ok) - 2 and not (edits & set(victims))
    results = {e["call_id"]: e for e in evs if e["kind"] == "tool.result"}
    for v, msg in zip(victims, shapes):
        assert results[v]["is_error"] is True and results[v]["stdout"] == msg
    # The failed Read of the real session gives no code.read either.
    missing = [e for e in evs if e["kind"] == "tool.result" and "File does not exist" in (e["stdout"] or "")]
    assert missing and not [e for e in evs if e["kind"] == "code.read" and e["call_id"] == missing[0]["call_id"]]


def test_structured_patch_hunks_rebuild_the_file_and_say_where_each_line_came_from() -> None:
    """Edit results carry `originalFile` + `structuredPatch`; the file after the edit is rebuilt
    from them (capture) and each line traced to the original or to the agent (the benchmark)."""
    from engram.adapters.unified import apply_hunks, changes_from_hunks, trace_hunks

    original = ["def f():", "    a = 1", "    return a", "", "def g():", "    pass"]
    hunks = [{"oldStart": 2, "oldLines": 2, "newStart": 2, "newLines": 3,
              "lines": ["-    a = 1", "+    a = 2", "+    b = 3", "     return a"]},
             {"oldStart": 6, "oldLines": 1, "newStart": 7, "newLines": 1,
              "lines": ["-    pass", "+    return None"]}]
    lines, origin = trace_hunks(original, hunks)
    assert lines == ["def f():", "    a = 2", "    b = 3", "    return a", "", "def g():", "    return None"]
    assert origin == [0, -1, -1, 2, 3, 4, -1]
    assert apply_hunks(original, hunks) == lines

    # A hunk whose context is not in the file is refused, not applied somewhere else.
    assert trace_hunks(original, [{"oldStart": 2, "oldLines": 1, "lines": ["-    a = 9", "+    a = 2"]}]) is None
    # A hunk whose context starts one line below its oldStart (as formatted diffs place it) applies there.
    assert trace_hunks(["a", "b", "c"], [{"oldStart": 1, "oldLines": 1, "lines": [" b", "+x"]}]) == (
        ["a", "b", "x", "c"], [0, 1, -1, 2])
    # Writing into an empty file: oldStart 0.
    assert trace_hunks([], [{"oldStart": 0, "oldLines": 0, "lines": ["+x"]}]) == (["x"], [-1])
    # A line that lost its tag, as Entire's checkpoints redact an added secret (entireio/cli),
    # gets the tag the hunk's counts leave for it (one short on the new side: added); read as
    # context it took the next original line with it. Without counts to say, the hunk is refused.
    redacted = {"oldStart": 2, "oldLines": 2, "newStart": 2, "newLines": 3,
                "lines": [" # fake values", " ", "REDACTED"]}
    env = ["[env]", "# fake values", "", "LAST=1"]
    assert trace_hunks(env, [redacted]) == (["[env]", "# fake values", "", "REDACTED", "LAST=1"], [0, 1, 2, -1, 3])
    assert [(c.old_start, c.old_end, c.new_start, c.new_end, c.new_lines) for c in changes_from_hunks([redacted])] == [
        (4, 3, 4, 4, ("REDACTED",))]
    assert apply_hunks(env, [{**redacted, "newLines": 4}]) is None  # counts that fit no one tag
    assert apply_hunks(env, [{k: v for k, v in redacted.items() if k != "newLines"}]) is None


def test_a_session_id_prefix_must_name_one_session(tmp_path: Path) -> None:
    from engram.errors import UnknownTape
    from engram.index.catalog import resolve_tapes
    from engram.store.repo import init_store

    store, _ = init_store(tmp_path)
    db = open_db(store)
    for i, (tape, session) in enumerate([("aa01", "abc1-x"), ("aa02", "abc1-x"), ("bb01", "abc2-y")], 1):
        db.execute("INSERT INTO tapes(id, harness, session_id, started, events, edits, reads, size, raw_bytes, prev, no)"
                   " VALUES(?, 'claude-code', ?, ?, 1, 0, 0, 1, 1, ?, ?)",
                   (tape, session, f"2026-01-0{i}", "aa01" if tape == "aa02" else None, i))
    assert [r.id for r in resolve_tapes(db, "abc1")] == ["aa01", "aa02"]  # every segment, in order
    assert [r.id for r in resolve_tapes(db, "abc2")] == ["bb01"]
    with pytest.raises(UnknownTape, match="'abc' starts 2 session ids .*abc1-x, abc2-y.*give more characters"):
        resolve_tapes(db, "abc")
    # a tape id prefix is still tried first; both matches are listed, with no "…" promising more
    with pytest.raises(UnknownTape, match=r"^'aa0' matches 2 tapes \(aa01, aa02\); give more characters$"):
        resolve_tapes(db, "aa0")
    db.close()


# ------------------------------------------------------------------ what an edit changed, hunk by hunk

def _session_edits(repo: Path, tmp_path: Path, s: "Session") -> list[dict[str, Any]]:
    run_engram(repo, "ingest", str(s.save(tmp_path / "t")), "--map", f"{s.cwd}={repo}")
    return [e for e in tape_events(repo, s.session_id) if e["kind"] == "code.edit"]


def _module(n: int = 30) -> list[str]:
    from claude_shapes import code_lines

    return ["def run(config):", *code_lines("m", n - 2), "    return config"]


def test_a_write_over_a_file_is_an_edit_of_the_lines_it_changed(repo: Path, tmp_path: Path) -> None:
    """A Write replacing a file that it mostly keeps: the event says which lines changed (its
    `hunks`, from the result's patch) and that the tool held the whole new file (`context`), whether
    or not the result kept `originalFile` (the patch undone gives the file before)."""
    from claude_shapes import Session, joined

    old = _module()
    new = [*old]
    new[4] = "    limit = max(config.limit, 10)"
    new[25:27] = ["    total = sum(config.values)"]  # two lines become one
    edits = {}
    for keep in (True, False):
        s = Session(Path("/home/u/proj"), f"{'ab'[keep]}bbbbbbb-2222-4222-8222-00000000000{int(keep)}")
        s.files["app.py"] = joined(old)
        s.prompt("tidy app.py")
        s.write("app.py", joined(new), keep_original=keep)
        (edits[keep],) = _session_edits(repo, tmp_path / str(keep), s)
    for ev in edits.values():
        assert ev["op"] == "update" and ev["tool"] == "Write"
        assert ev["before_range"] == [5, 27] and ev["after_range"] == [5, 26]
        assert ev["hunks"] == [[5, 5, 5, 5], [26, 27, 26, 26]]
        assert ev["context"] == [[1, 29]] and ev["context_text"] == joined(new)
    assert edits[True]["file_before_sha"] is not None and edits[False]["file_before_sha"] is None
    assert {k: v for k, v in edits[True].items() if k not in ("file_before_sha", "id", "parent", "ts", "call_id")} \
        == {k: v for k, v in edits[False].items() if k not in ("file_before_sha", "id", "parent", "ts", "call_id")}


def test_a_write_without_its_patch_is_diffed_against_what_the_session_last_saw(repo: Path, tmp_path: Path) -> None:
    """A result without `originalFile` nor `structuredPatch` (a trimmed transcript): the Write is
    compared with the file as the session last knew it (here, after its own Edit). Without that,
    it stays what it looks like: a file written whole."""
    from claude_shapes import Session, joined

    s = Session(Path("/home/u/proj"), "cccccccc-3333-4333-8333-000000000003")
    s.files["app.py"] = joined(_module())
    s.prompt("tidy app.py")
    s.edit("app.py", "    return config\n", "    return dict(config)\n")
    s.write("app.py", s.files["app.py"].replace("result_m3 =", "value_m3 ="), keep_original=False, keep_patch=False)
    s.files["other.py"] = joined(_module(8))
    s.write("other.py", joined(_module(9)), keep_original=False, keep_patch=False)
    edit, write, blind = _session_edits(repo, tmp_path, s)
    assert edit["tool"] == "Edit" and write["tool"] == "Write"
    assert write["op"] == "update" and write["before_range"] == write["after_range"] == [5, 5]
    assert write["after_text"].startswith("    value_m3 =") and write["context"] == [[1, 30]]
    assert blind["op"] == "create" and blind["after_range"] == [1, 9] and "context" not in blind


def test_an_edit_keeps_its_patch_context_as_carried_lines(repo: Path, tmp_path: Path) -> None:
    """An Edit's result patch holds three lines of context around its change: the event keeps
    where they are in the file after it (`context`, with the changed lines), so the index can
    tell the lines the session held from those it wrote. A MultiEdit's hunks alike."""
    from claude_shapes import Session, joined

    lines = _module()
    s = Session(Path("/home/u/proj"), "dddddddd-4444-4444-8444-000000000004")
    s.files["app.py"] = joined(lines)
    s.prompt("drop one check, change two")
    s.edit("app.py", joined(lines[9:12]), joined([lines[9], lines[11]]))  # deletes line 11
    s.multi_edit("app.py", [(lines[3], "    first = 1"), (lines[20], "    second = 2")])
    edit, multi = _session_edits(repo, tmp_path, s)
    assert edit["before_range"] == [11, 11] and edit["after_range"] == [11, 10] and edit["after_text"] == ""
    after = s.files["app.py"].splitlines()
    assert edit["context"] == [[8, 13]]  # three lines either side of the deleted one
    assert multi["hunks"] == [[4, 4, 4, 4], [20, 20, 20, 20]]
    assert multi["context"] == [[1, 7], [17, 23]]
    assert multi["context_text"] == joined(after[0:7] + after[16:23])


def test_a_notebook_cell_edit_is_the_lines_that_changed(repo: Path, tmp_path: Path) -> None:
    """A NotebookEdit result with the cell's source before: the edit is the lines from the first
    that differs to the last (no ranges: where the cell is in the notebook's JSON is not known)."""
    from claude_shapes import Session

    s = Session(Path("/home/u/proj"), "eeeeeeee-5555-4555-8555-000000000005")
    path = str(s.cwd / "nb.ipynb")
    old = "import pandas as pd\nframe = pd.read_csv('a.csv')\nframe.describe()\n"
    new = "import pandas as pd\nframe = pd.read_csv('b.csv', sep=';')\nframe.describe()\n"
    tur = {"new_source": new, "old_source": old, "cell_type": "code", "language": "python", "edit_mode": "replace",
           "cell_id": "c1", "error": "", "notebook_path": path}
    s.prompt("read b.csv")
    s._call("NotebookEdit", {"notebook_path": path, "cell_id": "c1", "new_source": new}, "Updated cell c1", tur)
    s._call("NotebookEdit", {"notebook_path": path, "cell_id": "c2", "new_source": "x = 1\n", "edit_mode": "insert"},
            "Inserted cell c2", {**tur, "new_source": "x = 1\n", "old_source": None, "cell_id": "c2",
                                 "edit_mode": "insert"})
    changed, inserted = _session_edits(repo, tmp_path, s)
    assert changed["before_text"] == "frame = pd.read_csv('a.csv')\n"
    assert changed["after_text"] == "frame = pd.read_csv('b.csv', sep=';')\n"
    assert changed["after_range"] is None and inserted["after_text"] == "x = 1\n"
