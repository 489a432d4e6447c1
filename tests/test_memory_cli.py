"""The memory commands as a user runs them: `engram remember`, `recall`, `forget`, `memory ...`,
their `--json` shapes (docs/memories.md), standard input, anchors reported as the code drifts,
imports (JSON Lines, CLAUDE.md, mem0) and exports, consolidation, reindex, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import RETRY_PY, run_engram

FIXTURES = Path(__file__).parent / "fixtures" / "memories"


@pytest.fixture
def repo(repo: Path) -> Path:
    (repo / "net.py").write_text(RETRY_PY)
    return repo


def js(repo: Path, *args: str, input: bytes | None = None) -> dict:
    return json.loads(run_engram(repo, *args, "--json", input=input).stdout)


def test_remember_recall_show_and_the_json_shapes(repo: Path) -> None:
    first = js(repo, "remember", "Retries back off exponentially\nTwo to the power of the attempt, in seconds.",
               "--at", "net.py:4-10", "--kind", "decision", "--tag", "net", "--tag", "resilience",
               "--importance", "0.8")
    assert first == {"id": first["id"], "embedding": "pending"}  # (made in a batch, off remember's path)
    piped = js(repo, "remember", "-", "--kind", "negative", input=b"There is no circuit breaker in net.py\n")
    again = js(repo, "remember", "retries back off exponentially\ntwo to the power of the attempt, in seconds.")
    assert again == {"id": first["id"], "merged_into": first["id"]}

    doc = js(repo, "recall", "how do retries back off", "--debug")
    top = doc["memories"][0]
    assert set(top) >= {"id", "content", "kind", "tags", "importance", "status", "source", "score", "anchors",
                        "evidence"}
    assert top["id"] == first["id"] and top["tags"] == ["net", "resilience"] and top["importance"] == 0.8
    assert top["anchors"] == [{"file": "net.py", "lines": [4, 10], "state": "intact", "retained": 1.0}]
    assert set(top["debug"]["ranks"]) >= {"bm25", "dense"} and set(top["debug"]["factors"]) == {
        "decay", "status", "drift"}
    assert doc["dense"].startswith("used") or doc["dense"].startswith("unavailable: ")
    assert js(repo, "recall", "circuit breaker", "--kind", "negative")["memories"][0]["id"] == piped["id"]

    text = run_engram(repo, "recall", "retries").stdout
    assert first["id"] in text and "at net.py:4-10 (intact)" in text
    shown = js(repo, "memory", "show", first["id"][:6])
    assert shown["recall_count"] >= 2 and shown["transitions"][0]["to"] == "active"
    assert "Two to the power" in run_engram(repo, "memory", "show", first["id"]).stdout


def test_a_long_note_listed_says_how_many_more_lines_in_the_right_number(repo: Path) -> None:
    one = js(repo, "remember", "Goal: retries\nDone:\n- net.py\nNext:\n- push")["id"]  # 4 more lines: 3 shown
    two = js(repo, "remember", "Flaky: the proxy test\na\nb\nc\nd\ne")["id"]
    listed = run_engram(repo, "memory", "list").stdout
    assert f"… 1 more line (`engram memory show {one}`)" in listed, listed
    assert f"… 2 more lines (`engram memory show {two}`)" in listed, listed


def test_list_drifted_and_recall_report_the_anchors_state(repo: Path) -> None:
    mid = js(repo, "remember", "retry sleeps two to the power of the attempt", "--at", "net.py:4-10")["id"]
    (repo / "net.py").write_text("# a header line\n\n" + RETRY_PY)  # shifted: still intact
    assert js(repo, "memory", "list", "--drifted")["memories"] == []
    listed = js(repo, "memory", "list", "--at", "net.py:8")["memories"]
    assert listed[0]["anchors"][0]["lines"] == [6, 12] and listed[0]["anchors"][0]["state"] == "intact"
    (repo / "net.py").write_text(RETRY_PY.replace("attempts=5", "attempts=7").replace("gave up", "giving up"))
    drifted = js(repo, "memory", "list", "--drifted")["memories"]
    assert drifted[0]["anchors"][0]["state"] == "edited" and 0.5 < drifted[0]["anchors"][0]["retained"] < 1
    placed = js(repo, "recall", "--at", "net.py")["memories"]  # no words: what is known about this file
    assert [m["id"] for m in placed] == [mid]
    nothing = run_engram(repo, "recall", check=False)
    assert nothing.returncode == 1 and "--at FILE" in nothing.stderr
    (repo / "net.py").write_text("print('all gone')\n")
    doc = js(repo, "recall", "retry sleeps", "--debug")
    m = doc["memories"][0]
    assert m["id"] == mid and m["anchors"][0]["state"] == "vanished" and m["drift"].startswith("vanished")
    gone = js(repo, "recall", "--at", "net.py")["memories"]  # what is known about the file: its gone code too
    assert [g["id"] for g in gone] == [mid] and gone[0]["drift"].startswith("vanished")
    assert js(repo, "recall", "--at", "net.py:1")["memories"] == []  # a vanished anchor is near no line
    assert m["debug"]["factors"]["drift"] < 1
    assert "vanished" in run_engram(repo, "memory", "list", "--drifted").stdout
    moved = js(repo, "memory", "reanchor", mid, "net.py:1-1")
    assert moved["anchors"][0]["state"] == "intact" and js(repo, "memory", "list", "--drifted")["memories"] == []


def test_edit_link_graph_forget(repo: Path) -> None:
    old = js(repo, "remember", "CI runs on Jenkins")["id"]
    new = js(repo, "remember", "CI runs on GitHub Actions since March")["id"]
    assert js(repo, "memory", "link", new, old, "--relation", "supersedes") == {
        "from": new, "to": old, "relation": "supersedes"}
    assert js(repo, "memory", "show", old)["status"] == "superseded"
    assert old not in [m["id"] for m in js(repo, "recall", "CI runs")["memories"]]
    assert old in [m["id"] for m in js(repo, "recall", "CI runs", "--all")["memories"]]
    edited = js(repo, "memory", "edit", new, "--tag", "ci", "--importance", "0.9", "--status", "invalidated",
                "--why", "moved to Buildkite")
    assert (edited["tags"], edited["importance"], edited["status"]) == (["ci"], 0.9, "invalidated")
    assert edited["transitions"][-1] == {**edited["transitions"][-1], "from": "active", "to": "invalidated",
                                         "why": "moved to Buildkite"}
    graph = js(repo, "memory", "graph", new, "--depth", "1")
    assert {n["id"] for n in graph["nodes"]} == {new, old}
    assert js(repo, "forget", old) == {"id": old, "forgotten": True, "purged": False, "files_rewritten": 0,
                                       "events_removed": 0}
    err = run_engram(repo, "memory", "show", old, check=False)
    assert err.returncode == 1 and f"memory {old} was forgotten" in err.stderr


def test_memory_show_gives_a_long_note_whole(repo: Path) -> None:
    """`memory list` cuts a note at 4 lines and names `memory show ID` for the rest; `memory show`
    itself gives it whole (it cut it too, and named itself)."""
    body = "\n".join(f"step {i}: do thing {i}" for i in range(1, 8))
    mid = js(repo, "remember", f"How to release\n{body}")["id"]
    listed = run_engram(repo, "memory", "list").stdout
    assert f"    … 4 more lines (`engram memory show {mid}`)" in listed.splitlines()
    shown = run_engram(repo, "memory", "show", mid).stdout.splitlines()
    assert shown[1:8] == [f"    step {i}: do thing {i}" for i in range(1, 8)] and "more lines" not in "".join(shown)


def test_a_forgotten_memory_can_still_be_purged_as_forget_says(repo: Path) -> None:
    """`forget` says "its events stay in the log; --purge erases them": `forget ID --purge` then
    erases them (it answered "memory … was forgotten", exit 1, and the text stayed in the log)."""
    mid = js(repo, "remember", "The staging password rotates on Mondays")["id"]
    told = run_engram(repo, "forget", mid).stdout
    assert told.strip() == f"forgot {mid} (its events stay in the log; --purge erases them)"
    log = repo / ".engram" / "events" / "memories"
    assert any(b"staging password" in f.read_bytes() for f in log.iterdir())
    purged = run_engram(repo, "forget", mid[:6], "--purge").stdout
    assert purged.startswith(f"forgot {mid} and erased it from the log (1 event removed from 1 file)")
    assert not any(b"staging password" in f.read_bytes() for f in log.iterdir())
    again = run_engram(repo, "forget", mid, "--purge", check=False)
    assert again.returncode == 1 and again.stderr.strip() == f"engram: memory {mid} was forgotten and purged"


@pytest.mark.parametrize("args,message", [
    (("remember", ""), "the text is empty"),
    (("remember", "x", "--at", "net.py:4-99"), "past the end"),
    (("remember", "x", "--at", "../../etc/passwd:1-2"), "outside the repository"),
    (("remember", "x", "--at", "net.py"), "anchor a memory to lines"),
    (("remember", "x", "--evidence", "abc"), "TAPE@OFFSET"),
    (("memory", "show", "0123456789ab"), "no memory matches"),
    (("memory", "edit", "0123456789ab", "--kind", "fact"), "no memory matches"),
    (("memory", "edit", "0123456789ab"), "nothing to change"),
    (("recall", ""), "what to recall"),
])
def test_bad_input_is_one_line_on_stderr_and_changes_nothing(repo: Path, args: tuple[str, ...], message: str) -> None:
    js(repo, "remember", "something already there")
    events = repo / ".engram" / "events" / "memories"
    before = {f.name: f.read_bytes() for f in events.iterdir()}
    proc = run_engram(repo, *args, check=False)
    assert proc.returncode == 1 and message in proc.stderr and proc.stderr.count("\n") == 1
    assert {f.name: f.read_bytes() for f in events.iterdir()} == before


@pytest.mark.parametrize("args,message", [
    (("recall", "x", "--limit", "0"), "argument --limit: '0': must be 1 or more"),
    (("recall", "x", "--limit", "-3"), "argument --limit: '-3': must be 1 or more"),
    (("memory", "graph", "0123456789ab", "--depth", "99"), "argument --depth: '99': must be from 1 to 5"),
    (("memory", "graph", "0123456789ab", "--depth", "0"), "argument --depth: '0': must be from 1 to 5"),
])
def test_an_option_value_out_of_range_is_a_usage_error(repo: Path, args: tuple[str, ...], message: str) -> None:
    """`memory graph --depth 99` once got past the parser and exited 1 as a failure; a value out of
    range is a usage error (status 2) like argparse's own, with its one-line reason."""
    proc = run_engram(repo, *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_kind_is_a_usage_error(repo: Path) -> None:
    proc = run_engram(repo, "remember", "x", "--kind", "opinion", check=False)
    assert proc.returncode == 2 and "invalid choice: 'opinion'" in proc.stderr


def test_import_export_round_trip_and_a_malformed_line_imports_nothing(repo: Path, tmp_path: Path) -> None:
    lines = [
        {"content": "Builds are reproducible: SOURCE_DATE_EPOCH is set", "kind": "fact", "tags": ["build"],
         "importance": 0.7, "created": "2025-06-01T12:00:00Z", "source": {"type": "person"}},
        {"content": "retry backs off exponentially", "at": "net.py:4-10", "kind": "decision"},
        {"content": "There is no Windows support", "kind": "negative", "source": "import"},
    ]
    good = tmp_path / "in.jsonl"
    good.write_text("".join(json.dumps(x) + "\n" for x in lines))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + '{"content": "x", "kind": "opinion"}\n{"content": \n')
    proc = run_engram(repo, "memory", "import", str(bad), check=False)
    assert proc.returncode == 1 and "line 4: unknown kind 'opinion'" in proc.stderr and "nothing was imported" in proc.stderr
    assert not (repo / ".engram" / "events" / "memories").exists() or js(repo, "memory", "list")["memories"] == []
    report = js(repo, "memory", "import", str(good))
    assert (report["imported"], report["skipped"], report["format"]) == (3, 0, "jsonl")
    assert js(repo, "memory", "import", str(good))["skipped"] == 3  # nothing twice
    exported = [json.loads(x) for x in run_engram(repo, "memory", "export").stdout.splitlines()]
    assert [e["content"] for e in exported] == [x["content"] for x in lines]
    assert exported[0]["created"] == "2025-06-01T12:00:00.000000Z" and exported[1]["at"] == "net.py:4-10"
    other = tmp_path / "other"
    shutil.copytree(repo, other, ignore=shutil.ignore_patterns(".engram"))
    run_engram(other, "init")
    out = tmp_path / "out.jsonl"
    run_engram(repo, "memory", "export", "-o", str(out))
    assert js(other, "memory", "import", str(out))["imported"] == 3
    assert [json.loads(x) for x in run_engram(other, "memory", "export").stdout.splitlines()] == exported


def test_export_to_a_missing_folder_and_import_of_empty_stdin_are_errors(repo: Path, tmp_path: Path) -> None:
    """`memory export -o` into a folder that is not there made it and said "exported 1 memories";
    `memory import -` of nothing said "imported 0 memories" as if it had read something."""
    js(repo, "remember", "Builds are reproducible")
    target = tmp_path / "no" / "such" / "notes.jsonl"
    bad = run_engram(repo, "memory", "export", "-o", str(target), check=False)
    assert bad.returncode == 1 and bad.stderr == f"engram: -o {target}: no such directory {target.parent}\n"
    assert not (tmp_path / "no").exists()
    done = run_engram(repo, "memory", "export", "-o", str(tmp_path / "notes.jsonl"))
    assert done.stderr == f"exported 1 memory to {tmp_path / 'notes.jsonl'}\n"
    one = tmp_path / "one.jsonl"
    one.write_text('{"content": "Deploys run on Fridays"}\n')
    assert run_engram(repo, "memory", "import", str(one)).stdout == f"imported 1 memory from {one} (jsonl)\n"
    number = run_engram(repo, "memory", "import", "-", input=b'{"content": 5}\n', check=False)  # (was "the text is empty")
    assert number.returncode == 1 and number.stderr == ("engram: nothing was imported: stdin line 1: a memory's content "
                                                        "is text, not int '5'\n")
    empty = run_engram(repo, "memory", "import", "-", input=b"", check=False)
    assert empty.returncode == 1 and empty.stderr.startswith("engram: nothing to import: stdin is empty; ")


def test_past_the_end_of_a_one_line_file_says_1_line(repo: Path) -> None:
    (repo / "one.py").write_text("VERSION = 3\n")
    proc = run_engram(repo, "remember", "x", "--at", "one.py:1-3", check=False)
    assert proc.returncode == 1 and "past the end of the file (1 line); anchor lines within 1-1" in proc.stderr


def test_import_claude_md_and_auto_memory_notes_and_mem0(repo: Path) -> None:
    md = js(repo, "memory", "import", str(FIXTURES / "CLAUDE.md"))
    assert md["format"] == "claude-md" and md["imported"] == 6
    listed = {m["content"]: m for m in js(repo, "memory", "list")["memories"]}
    assert listed["Use tabs in Makefiles; spaces everywhere else"]["kind"] == "preference"
    assert listed["Use tabs in Makefiles; spaces everywhere else"]["tags"] == ["project-guide", "conventions"]
    assert listed["Use tabs in Makefiles; spaces everywhere else"]["source"] == {
        "type": "import", "origin": "claude-md:CLAUDE.md"}
    notes = js(repo, "memory", "import", str(FIXTURES / "auto-memory"))
    assert notes["imported"] == 2  # MEMORY.md's pointer lines are the notes themselves
    fed = js(repo, "recall", "integration tests database mocks")["memories"][0]
    assert fed["kind"] == "preference" and "real database" in fed["content"]
    mem0 = js(repo, "memory", "import", str(FIXTURES / "mem0-export.json"))
    assert (mem0["format"], mem0["imported"]) == ("mem0", 3)
    hit = js(repo, "recall", "dark mode editor theme")["memories"][0]
    assert hit["tags"] == ["user_preferences"] and hit["source"] == {"type": "import", "origin": "mem0"}


def test_consolidate_merges_near_duplicates_and_archives_what_faded(repo: Path, tmp_path: Path) -> None:
    records = [
        {"content": "Use tabs in Makefiles", "kind": "preference"},
        {"content": "Use tabs in Makefiles always", "kind": "preference", "tags": ["make"]},
        {"content": "The old deploy script was removed in 2023", "kind": "negative", "created": "2023-01-01",
         "importance": 0.1, "source": "import"},
        {"content": "Keep this one around", "created": "2023-01-01", "pinned": True},
    ]
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in records))
    js(repo, "memory", "import", str(f), "--no-dedup")
    before = (repo / ".engram" / "events" / "memories").stat()
    plan = js(repo, "memory", "consolidate", "--dry-run")
    assert plan["dry_run"] is True
    assert [c["change"] for c in plan["changes"]] == ["merge", "archive"]
    assert len(js(repo, "memory", "list")["memories"]) == 4  # a dry run writes nothing
    assert (repo / ".engram" / "events" / "memories").stat().st_mtime_ns == before.st_mtime_ns
    assert "would merge" in run_engram(repo, "memory", "consolidate", "--dry-run").stdout
    done = js(repo, "memory", "consolidate")
    assert done["changes"] == plan["changes"]
    kept = {m["content"] for m in js(repo, "memory", "list")["memories"]}
    assert kept == {"Use tabs in Makefiles always", "Keep this one around"}
    everything = js(repo, "memory", "list", "--all")["memories"]
    assert sorted(m["status"] for m in everything) == ["active", "active", "archived", "superseded"]
    merged = next(m for m in everything if m["content"] == "Use tabs in Makefiles always")
    graph = js(repo, "memory", "graph", merged["id"])
    assert [e["relation"] for e in graph["edges"]] == ["derived_from"]


def test_reindex_rebuilds_memories_with_the_same_answers(repo: Path) -> None:
    a = js(repo, "remember", "Retries back off exponentially", "--at", "net.py:4-10", "--tag", "net")["id"]
    js(repo, "remember", "Timeouts are in seconds")
    want = js(repo, "memory", "list")
    out = run_engram(repo, "reindex").stdout
    assert "memories: 2 memories from 2 logged events" in out
    assert js(repo, "memory", "list") == want
    (repo / ".engram" / "index.sqlite").unlink()
    assert js(repo, "memory", "list") == want
    assert js(repo, "recall", "retries")["memories"][0]["id"] == a


def test_embed_gives_waiting_memories_their_vectors(repo: Path) -> None:
    js(repo, "remember", "The service listens on port 8080 in development")
    doc = js(repo, "memory", "embed")
    if doc["dense"].startswith("unavailable"):
        pytest.skip(doc["dense"])
    assert doc["waiting"] == 0 and doc["embedded"] <= 1
    assert js(repo, "recall", "which port")["dense"] == "used"


def test_an_agent_s_memory_records_the_agent_and_its_session(repo: Path) -> None:
    out = run_engram(repo, "remember", "The flaky test is test_upload; it races the cleanup", "--kind", "debug",
                     "--json", env={"CLAUDECODE": "1", "CLAUDE_SESSION_ID": "5d1c0c1e-aaaa"}).stdout
    shown = js(repo, "memory", "show", json.loads(out)["id"])
    assert shown["source"] == {"type": "agent", "harness": "claude-code", "session": "5d1c0c1e-aaaa"}


def test_every_option_has_help_text(repo: Path) -> None:
    import argparse

    from engram.cli.main import build_parser

    def walk(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if name in ("remember", "recall", "forget", "memory") or p.prog.endswith("memory"):
                        walk(sub)
            elif not isinstance(action, argparse._HelpAction) and p.prog.split()[1:2] in (
                    ["remember"], ["recall"], ["forget"], ["memory"]):
                assert action.help, f"{p.prog} {action.dest}"

    walk(build_parser())


def test_a_budget_too_small_for_one_whole_line_marks_the_line_it_cuts(repo: Path) -> None:
    """Under a budget smaller than the first line, the text shows that line's head: it was cut
    mid-word with no mark, read as the note's whole first line."""
    run_engram(repo, "remember", "Review tokens are one-time and expire after 120 seconds; the hook never reuses one, "
               "and the store forgets them when the review closes")
    text = run_engram(repo, "memory", "list", "--budget", "40").stdout
    first, last = text.splitlines()
    assert first.endswith("…") and "when the review closes" not in first, text
    assert len(first.encode()) <= 40 * 4 and last.startswith("… ") and "--budget 0 (all)" in last


def test_recall_at_a_path_named_from_a_folder_of_the_repository(repo: Path) -> None:
    """`recall --at deep.py` in src/ found nothing: the path was made repository-relative, then
    read from src/ again (src/src/deep.py); `memory list --at` and `remember --at` were right."""
    (repo / "src").mkdir()
    (repo / "src" / "deep.py").write_text("def deep():\n    return 42\n")
    mid = js(repo / "src", "remember", "deep returns the answer", "--at", "deep.py:1-2")["id"]
    js(repo, "remember", "Retries back off exponentially", "--at", "net.py:4-10")
    for at in ("deep.py", "deep.py:1-2"):
        doc = js(repo / "src", "recall", "--at", at)
        assert doc["at"] == "src/" + at and [m["id"] for m in doc["memories"]] == [mid], doc
    assert js(repo / "src", "recall", "the answer", "--at", "deep.py")["memories"][0]["id"] == mid


def test_recall_and_list_keep_to_a_budget_in_text_and_json(repo: Path) -> None:
    """Recall and the list answer within 2,000 tokens by default, for people as for programs: an
    agent may read either, and a store of long notes would otherwise pour all of them out. The
    text ends saying what it left out and how to see it; the JSON names the notes left out."""
    topics = ["retry", "cache", "queue", "upload", "thumbnail", "checksum", "region", "token", "backoff",
              "timeout", "battery", "bucket", "progress"]
    for t in topics:  # (distinct notes: near-duplicates would merge into one)
        body = "\n".join(f"The {t} rule, line {i}: " + f"{t} detail {i} " * 30 for i in range(4))
        run_engram(repo, "remember", f"How the {t} works in the uploader\n{body}")
    for args in (("recall", "uploader works", "--limit", "20"), ("memory", "list")):  # (every note: the second
        # recall's ten would differ from the first's, vectors made between them)
        text = run_engram(repo, *args).stdout
        lines = text.splitlines()
        assert len("\n".join(lines[:-1]).encode()) <= 2000 * 4, args
        assert lines[-1].startswith("… ") and "left out of the 2000-token budget: engram " in lines[-1], args
        assert lines[-1].endswith(" --budget 0 (all)"), args
        whole = run_engram(repo, *args, "--budget", "0").stdout  # (recall's scores move: it reinforces)
        ids = [line.split()[0] for line in whole.splitlines() if not line.startswith(" ")]
        shown = [line.split()[0] for line in lines[:-1] if not line.startswith(" ")]
        assert set(shown) < set(ids) and len(ids) == len(topics), args
    out = run_engram(repo, "memory", "list", "--json").stdout
    doc = json.loads(out)
    assert len(out.encode()) <= 2000 * 4 + 1 and doc["budget"]["tokens"] == 2000
    assert len(doc["memories"]) + doc["left_out"]["count"] == len(topics)
    assert len(js(repo, "memory", "list", "--budget", "0")["memories"]) == len(topics)


def test_one_long_note_does_not_hide_the_others_in_text(repo: Path) -> None:
    """People's text keeps to the budget in whole lines: one note of 38,000 characters on one line
    (a pasted log) filled it, and `memory list` and `recall` showed that note alone, the others 'left
    out'. A listed note's line is cut, naming `engram memory show ID`, as its 4th line already was."""
    short = run_engram(repo, "remember", "Uploads retry three times before they give up").stdout.strip()
    content = "Upload log: " + "retry upload chunk " * 2000
    long = run_engram(repo, "remember", "-", input=content.encode()).stdout.strip()
    for args in (("memory", "list"), ("recall", "upload retry")):
        text = run_engram(repo, *args).stdout
        assert "left out" not in text and short in text and long in text, (args, text[:300])
        assert f"… ({len(content.strip()):,} characters: `engram memory show {long}`)" in text, args
        assert max(len(line) for line in text.splitlines()) < 400, args
    assert content.strip() in run_engram(repo, "memory", "show", long).stdout, "show gives it whole"


def test_an_export_never_writes_over_the_store(repo: Path) -> None:
    """`engram memory export -o` naming the memory log itself (a slip of tab completion) wrote the
    export over it: every memory was gone ('skipped 15 lines that are not whole events'). A file
    inside `.engram/` is refused, before anything is written; the memories are all there."""
    ids = {run_engram(repo, "remember", f"note number {i} about the uploader").stdout.strip() for i in range(3)}
    log = next((repo / ".engram" / "events" / "memories").glob("*.jsonl"))
    before = log.read_bytes()
    for out in (log, repo / ".engram" / "index.sqlite", repo / ".engram" / "export.jsonl"):
        for args in (["memory", "export", "-o", str(out)], ["export", "--agent-trace", "-o", str(out.relative_to(repo))]):
            proc = run_engram(repo, *args, check=False)
            assert proc.returncode == 1 and "inside engram's store" in proc.stderr, (args, proc.stderr)
    assert log.read_bytes() == before and not (repo / ".engram" / "export.jsonl").exists()
    assert {m["id"] for m in js(repo, "memory", "list")["memories"]} == ids


def test_recall_at_a_file_not_in_the_tree_says_so(repo: Path) -> None:
    """A mistyped or deleted file answers the notes anchored there (a deleted file's notes are
    still worth reading), and says the file is not in the working tree, so a typo is seen."""
    run_engram(repo, "remember", "Retries back off exponentially", "--at", "net.py:4-10")
    (repo / "net.py").unlink()
    gone = run_engram(repo, "recall", "--at", "net.py")
    assert "net.py is not in the working tree" in gone.stderr and "Retries back off" in gone.stdout
    for args in (("recall", "--at", "nett.py"), ("memory", "list", "--at", "nett.py")):
        typo = run_engram(repo, *args)
        assert "nett.py is not in the working tree" in typo.stderr and typo.stdout == "", args
    worded = run_engram(repo, "recall", "retries", "--at", "nett.py")  # (the place only ranks: the words find it)
    assert "Retries back off" in worded.stdout and "only notes anchored there" not in worded.stderr
    assert "(nett.py is not in the working tree: notes the words find are listed wherever they are)" in worded.stderr


def _links(repo: Path, mid: str) -> list[tuple[str, str, str, bool, str | None]]:
    shown = js(repo, "memory", "show", mid)["links"]
    return sorted((x["direction"], x["id"], x["relation"], x["candidate"], x["why"]) for x in shown)


def test_export_carries_the_links_and_import_restores_them_under_the_new_ids(repo: Path, tmp_path: Path) -> None:
    """`memory export` dropped the links between memories (relates_to, supersedes, derived_from,
    contradicts), so an export imported into another store lost them. Each line now names its
    links by the exported ids; import maps those to the ids the memories have in the store it
    imports into (a memory already there with the same content keeps its own id) and restores them."""
    def remember(text: str) -> str:
        return js(repo, "remember", text)["id"]

    a = remember("Retries back off exponentially, two to the power of the attempt")
    b = remember("The retry cap is five attempts, then the error is raised")
    c = remember("Jitter is added to each retry delay so clients do not retry in step")
    d = remember("Uploads are never retried: the server is not idempotent for them")
    e = remember("Retries used a fixed delay of one second")
    for src, dst, relation in ((a, b, "relates_to"), (c, a, "derived_from"), (d, a, "contradicts"),
                               (a, e, "supersedes")):
        run_engram(repo, "memory", "link", src, dst, "--relation", relation, "--why", f"{relation} test")
    before = {m: _links(repo, m) for m in (a, b, c, d, e)}
    out = tmp_path / "out.jsonl"
    run_engram(repo, "memory", "export", "--all", "-o", str(out))
    lines = {x["id"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert lines[a]["links"] == [{"relation": "relates_to", "to": b, "why": "relates_to test"},
                                 {"relation": "supersedes", "to": e, "why": "supersedes test"}]

    other = tmp_path / "other"
    shutil.copytree(repo, other, ignore=shutil.ignore_patterns(".engram"))
    run_engram(other, "init")
    b2 = js(other, "remember", "The retry cap is five attempts, then the error is raised")["id"]
    assert b2 != b
    report = js(other, "memory", "import", str(out))
    assert (report["imported"], report["skipped"], report["links"]) == (4, 1, 4), report
    renamed = {b: b2}
    for m in (a, c, d, e):
        assert _links(other, m) == sorted((w, renamed.get(i, i), *rest) for w, i, *rest in before[m]), m
    assert js(other, "memory", "show", e)["status"] == "superseded"
    again = js(other, "memory", "import", str(out))
    assert (again["imported"], again["links"]) == (0, 0), "importing twice adds nothing"
    assert _links(other, a) == sorted((w, renamed.get(i, i), *rest) for w, i, *rest in before[a])


def test_import_warns_of_a_link_to_a_memory_it_does_not_have(repo: Path, tmp_path: Path) -> None:
    """A link naming a memory that is neither in the file nor in the store is left out with a
    warning naming both; the memories are imported. A malformed link imports nothing."""
    f = tmp_path / "in.jsonl"
    f.write_text(json.dumps({"id": "aaaaaaaaaaaa", "content": "Logs rotate daily at midnight UTC",
                             "links": [{"relation": "relates_to", "to": "bbbbbbbbbbbb"}]}) + "\n")
    proc = run_engram(repo, "memory", "import", str(f), check=False)
    assert proc.returncode == 0 and "imported 1 memory" in proc.stdout, proc.stdout + proc.stderr
    assert "aaaaaaaaaaaa relates_to bbbbbbbbbbbb" in proc.stderr and "not in the file" in proc.stderr, proc.stderr
    assert _links(repo, "aaaaaaaaaaaa") == []
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"content": "Config is read once at start",
                               "links": [{"relation": "explains", "to": "aaaaaaaaaaaa"}]}) + "\n")
    proc = run_engram(repo, "memory", "import", str(bad), check=False)
    assert proc.returncode == 1 and "line 1" in proc.stderr and "unknown relation 'explains'" in proc.stderr
