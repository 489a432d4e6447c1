"""`engram blame FILE` (issue 46, point 3): line-by-line attribution like `git blame`, from the index
in one pass; its regions agree with `engram explain` on them; `engram explain FILE` explains the
whole file region by region."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SPOTTER_MAIN, build_spot_repo, run_engram
from test_lineage import db, tape

PORCELAIN = {"lines", "session_id", "tape", "harness", "when", "request"}


def line(i: int, word: str = "compute_total") -> str:
    return f"    total_{i} = {word}(ledger_{i}, rate={i * 7}, label='row {i}')"


@pytest.fixture
def two_sessions(repo: Path, tmp_path: Path) -> Path:
    """report.py as session A wrote it (30 lines), then session B rewrote lines 10-15."""
    first = [line(i) for i in range(1, 31)]
    final = first[:9] + [line(i, "summarise_rounded") for i in range(10, 16)] + first[15:]
    a = tape(tmp_path, "writer-a", "2026-01-01T00:00:00Z", [
        {"kind": "msg.in", "ts": "2026-01-01T00:00:01Z", "text": "Write the report module with thirty totals"},
        {"kind": "code.edit", "ts": "2026-01-01T00:00:02Z", "file": "report.py", "op": "create",
         "before_range": [1, 0], "after_range": [1, 30], "before_text": "", "after_text": "\n".join(first) + "\n"}])
    b = tape(tmp_path, "editor-b", "2026-01-02T00:00:00Z", [
        {"kind": "msg.in", "ts": "2026-01-02T00:00:01Z", "text": "Round the totals ten to fifteen in the summary\nplease"},
        {"kind": "code.edit", "ts": "2026-01-02T00:00:02Z", "file": "report.py", "op": "update",
         "before_range": [10, 15], "after_range": [10, 15], "before_text": "\n".join(first[9:15]) + "\n",
         "after_text": "\n".join(final[9:15]) + "\n"}])
    (repo / "report.py").write_text("\n".join(final) + "\n")
    run_engram(repo, "ingest", str(a), str(b))
    return repo


def blame(root: Path, *args: str) -> dict[str, Any]:
    return json.loads(run_engram(root, "blame", *args, "--json").stdout)


def covers(doc: dict[str, Any], n_lines: int, first: int = 1) -> None:
    """Regions in order, back to back, from `first` to `n_lines`, in the porcelain shape exactly."""
    assert set(doc) == {"file", "regions"}
    at = first
    for r in doc["regions"]:
        assert set(r) == PORCELAIN
        a, b = r["lines"]
        assert a == at and b >= a
        at = b + 1
    assert at == n_lines + 1


def test_the_last_session_to_change_a_line_is_its_writer(two_sessions: Path) -> None:
    doc = blame(two_sessions, "report.py")
    covers(doc, 30)
    got = [(r["lines"], r["session_id"]) for r in doc["regions"]]
    assert got == [([1, 9], "writer-a"), ([10, 15], "editor-b"), ([16, 30], "writer-a")]
    b = doc["regions"][1]
    assert b["request"] == "Round the totals ten to fifteen in the summary"  # its first line
    assert b["when"] == "2026-01-02T00:00:02Z" and b["harness"] == "test" and len(b["tape"]) == 64
    assert doc["regions"][0]["request"] == "Write the report module with thirty totals"
    # Each region's writer is who `engram explain` puts first on those lines.
    for r in doc["regions"]:
        a, z = r["lines"]
        first = json.loads(run_engram(two_sessions, "explain", f"report.py:{a}-{z}", "--brief").stdout)
        assert first["sessions"][0]["session_id"] == r["session_id"], r["lines"]
    part = blame(two_sessions, "report.py", "-L", "12,20")
    covers(part, 20, first=12)
    assert [(r["lines"], r["session_id"]) for r in part["regions"]] == [([12, 15], "editor-b"), ([16, 20], "writer-a")]
    text = run_engram(two_sessions, "blame", "report.py", env={"NO_COLOR": "1"}).stdout.splitlines()
    assert text[0].startswith("writer-a · test · 2026-01-01 00:00 UTC · \"Write the report module")
    assert text[10] == "editor-b · test · 2026-01-02 00:00 UTC · \"Round the totals ten to fifteen in the summary\""
    assert text[11] == "10 │ " + line(10, "summarise_rounded")


def test_requests_come_from_the_index_and_from_the_tapes_of_an_index_filled_before(repo: Path, tmp_path: Path) -> None:
    """The index keeps each request's first line (blame reads no tape for it); an index filled
    before it kept them reads them from the tapes, with the same answer, until `engram reindex`."""
    lines = [line(i) for i in range(1, 21)]
    t = tape(tmp_path, "short-ask", "2026-01-03T00:00:00Z", [
        {"kind": "msg.in", "ts": "2026-01-03T00:00:01Z", "text": "Write the ledger totals for all twenty rows"},
        {"kind": "msg.in", "ts": "2026-01-03T00:00:02Z", "text": "<system-reminder>not a request</system-reminder>"},
        {"kind": "msg.in", "ts": "2026-01-03T00:00:03Z", "text": "go on"},
        {"kind": "code.edit", "ts": "2026-01-03T00:00:04Z", "file": "ledger.py", "op": "create",
         "before_range": [1, 0], "after_range": [1, 20], "before_text": "", "after_text": "\n".join(lines) + "\n"}])
    (repo / "ledger.py").write_text("\n".join(lines) + "\n")
    run_engram(repo, "ingest", str(t))
    doc = blame(repo, "ledger.py")
    # "go on" is a word or two: the longer request before it names the edit.
    assert [(r["lines"], r["session_id"], r["request"]) for r in doc["regions"]] == [
        ([1, 20], "short-ask", "Write the ledger totals for all twenty rows")]
    conn = db(repo)
    assert conn.execute("SELECT line, long FROM requests ORDER BY frag").fetchall() == [
        ("Write the ledger totals for all twenty rows", 1), ("go on", 0)]
    conn.execute("DELETE FROM requests; INSERT OR REPLACE INTO state(key, value)"
                 " SELECT 'requests_from', max(id) + 1 FROM fragments")  # as schema 13 leaves an older index
    conn.close()
    assert blame(repo, "ledger.py") == doc
    run_engram(repo, "reindex")
    conn = db(repo)
    assert conn.execute("SELECT count(*) FROM requests").fetchall()[0][0] == 2
    assert not conn.execute("SELECT 1 FROM state WHERE key = 'requests_from'").fetchall()
    conn.close()
    assert blame(repo, "ledger.py") == doc


def test_lines_no_session_wrote_and_bad_ranges(two_sessions: Path) -> None:
    (two_sessions / "report.py").write_text("# a header a person wrote by hand, no agent\n"
                                            + (two_sessions / "report.py").read_text())
    doc = blame(two_sessions, "report.py")
    covers(doc, 31)
    assert doc["regions"][0] == {"lines": [1, 1], "session_id": None, "tape": None, "harness": None, "when": None,
                                 "request": None}
    assert doc["regions"][2]["lines"] == [11, 16] and doc["regions"][2]["session_id"] == "editor-b"
    for bad, says in ((["-L", "9"], None), (["-L", "x,3"], "expected -L START,END"), (["-L", "5,2"], "must not exceed")):
        proc = run_engram(two_sessions, "blame", "report.py", *bad, check=False)
        if says is None:
            assert proc.returncode == 0 and json.loads(run_engram(two_sessions, "blame", "report.py", *bad, "--json")
                                                       .stdout)["regions"][0]["lines"] == [9, 9]
        else:
            assert proc.returncode == 1 and says in proc.stderr
    missing = run_engram(two_sessions, "blame", "nope.py", check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr
    for past in ("40,50", "30,32"):  # (an empty answer, exit 0, read as "no session wrote them")
        proc = run_engram(two_sessions, "blame", "report.py", "-L", past, check=False)
        a, b = past.split(",")
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr == f"engram: report.py:{a}-{b}: past the end of the file (31 lines)\n"
    (two_sessions / "empty.py").write_text("")
    empty = run_engram(two_sessions, "blame", "empty.py", check=False)
    assert (empty.returncode, empty.stdout) == (0, ""), "no blank line for a file without lines"
    assert empty.stderr == "engram: empty.py is empty: no lines to blame\n"


def test_explain_a_whole_file_region_by_region(two_sessions: Path) -> None:
    doc = json.loads(run_engram(two_sessions, "explain", "report.py").stdout)
    regions = blame(two_sessions, "report.py")["regions"]
    assert [{k: r[k] for k in PORCELAIN} for r in doc["regions"]] == regions
    assert doc["budget"]["used"] <= 4000 and doc["truncated"] is False
    b = doc["regions"][1]["explain"]
    assert b["span"] == {"file": "report.py", "start": 10, "end": 15}
    assert b["sessions"][0]["session_id"] == "editor-b" and b["sessions"][0]["story"]["edit"]["diff"]
    small = json.loads(run_engram(two_sessions, "explain", "report.py", "--budget", "300").stdout)
    assert small["truncated"]["next"] == "engram explain report.py --budget 300 --page 2"
    shown = [r["lines"] for r in small["regions"] if "explain" in r]
    page2 = json.loads(run_engram(two_sessions, "explain", "report.py", "--budget", "300", "--page", "2").stdout)
    assert page2["page"] == 2 and all(r["lines"] not in shown for r in page2["regions"] if "explain" in r)
    pretty = run_engram(two_sessions, "explain", "report.py", "--pretty", "--no-color").stdout
    assert "── lines 10-15: editor-b · test · 2026-01-02 00:00 UTC" in pretty and "wrote these lines" in pretty


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("blame") / "repo"
    return root, build_spot_repo(spotter, root)


def test_git_blames_line_ranges_and_explains_span_are_understood(two_sessions: Path) -> None:
    """`engram blame` is used like `git blame`: `-L 12,+3`, `-L 28,` and `-L ,4` were refused
    ('expected -L START,END'), and `blame report.py:12-14`, explain's way of naming lines, said
    'lines must be numbers'. They give the lines git would; a regex range says it is not taken."""
    def lines(*args: str) -> list[int]:
        regions = blame(two_sessions, *args)["regions"]
        return [regions[0]["lines"][0], regions[-1]["lines"][1]]

    assert lines("report.py", "-L", "12,+3") == [12, 14]
    assert lines("report.py", "-L", "14,-3") == [12, 14]
    assert lines("report.py", "-L", "28,") == [28, 30]
    assert lines("report.py", "-L", ",4") == [1, 4]
    assert lines("report.py:12-14") == [12, 14] and lines("report.py:13") == [13, 13]
    regex = run_engram(two_sessions, "blame", "report.py", "-L", "/def/,+3", check=False)
    assert regex.returncode == 1 and "-L /def/,+3: a range by regular expression is not taken" in regex.stderr


def test_blame_of_a_real_file_agrees_with_explain_on_its_regions(spot: tuple[Path, dict[str, str]]) -> None:
    root, writers = spot
    rel = "lib/spotter_web/live/session_live.ex"
    n = len((root / rel).read_text().splitlines())
    doc = blame(root, rel)
    covers(doc, n)
    written = [r for r in doc["regions"] if r["session_id"]]
    assert written and {r["session_id"] for r in written} <= {SPOTTER_MAIN, writers["lib/spotter_web/live/subagent_live.ex"]}
    assert all(r["request"] for r in written) and all(r["tape"] and r["when"] for r in written)
    sample = [r for r in written if r["lines"][1] - r["lines"][0] >= 2][:8]
    agree = 0
    for r in sample:
        a, b = r["lines"]
        first = json.loads(run_engram(root, "explain", f"{rel}:{a}-{b}", "--brief").stdout)["sessions"]
        agree += bool(first) and first[0]["session_id"] == r["session_id"]
    assert len(sample) >= 5 and agree >= len(sample) - 1, (agree, len(sample))


def test_no_color_before_or_after_the_command_leaves_a_terminal_plain(two_sessions: Path) -> None:
    """`engram --no-color blame` is as plain as `engram blame --no-color`: the command's own flag
    must not reset the global one."""
    from test_cli import on_terminal

    env = {"NO_COLOR": ""}
    assert "\x1b[" in on_terminal(two_sessions, "blame", "report.py", env=env)
    assert "\x1b[" not in on_terminal(two_sessions, "--no-color", "blame", "report.py", env=env)
    assert "\x1b[" not in on_terminal(two_sessions, "blame", "report.py", "--no-color", env=env)


def test_a_files_first_lines_keep_their_writer_after_a_line_is_inserted_under_them(repo: Path, tmp_path: Path) -> None:
    """Session A creates a module; session B inserts an import as line 4. Lines 1-3 (too few
    k-grams to count alone, cut off from the rest of A's text by B's line) are still A's."""
    head = ["defmodule ReportWeb.SummaryLive do", "  use Phoenix.LiveView", ""]
    body = ["  alias Report.Ledger.{Entry, Account, Period}", "  require Logger", "", *(line(i) for i in range(1, 31))]
    inserted = "  alias Report.Services.{RoundingPolicy, CurrencyTable, LedgerCache}"
    a = tape(tmp_path, "writer-a", "2026-01-01T00:00:00Z", [
        {"kind": "msg.in", "ts": "2026-01-01T00:00:01Z", "text": "Write the summary live view"},
        {"kind": "code.edit", "ts": "2026-01-01T00:00:02Z", "file": "summary_live.ex", "op": "create",
         "before_range": [1, 0], "after_range": [1, 36], "before_text": "",
         "after_text": "\n".join(head + body) + "\n"}])
    b = tape(tmp_path, "editor-b", "2026-01-02T00:00:00Z", [
        {"kind": "msg.in", "ts": "2026-01-02T00:00:01Z", "text": "Alias the services the view needs"},
        {"kind": "code.edit", "ts": "2026-01-02T00:00:02Z", "file": "summary_live.ex", "op": "update",
         "before_range": [4, 3], "after_range": [4, 4], "before_text": "", "after_text": inserted + "\n"}])
    (repo / "summary_live.ex").write_text("\n".join([*head, inserted, *body]) + "\n")
    run_engram(repo, "ingest", str(a), str(b))
    doc = blame(repo, "summary_live.ex")
    covers(doc, 37)
    assert [(r["lines"], r["session_id"]) for r in doc["regions"]] == [
        ([1, 3], "writer-a"), ([4, 4], "editor-b"), ([5, 37], "writer-a")]


def test_a_binary_file_is_named_as_one_not_printed(two_sessions: Path) -> None:
    """`engram blame` on a binary file printed its bytes (escape sequences and all) as numbered
    lines; blame and explain say it is a binary file, as `remember --at` does, and fail (status 1)."""
    (two_sessions / "logo.bin").write_bytes(b"PNG\0\x01\x02\nxx\x1b[31mred\n")
    for args in (("blame", "logo.bin"), ("blame", "logo.bin", "--json"), ("explain", "logo.bin"),
                 ("explain", "logo.bin:1-2"), ("remember", "x", "--at", "logo.bin:1-2")):
        proc = run_engram(two_sessions, *args, check=False)
        assert (proc.returncode, proc.stdout) == (1, ""), args
        assert proc.stderr.startswith("engram: logo.bin: a binary file;") and proc.stderr.count("\n") == 1, args
