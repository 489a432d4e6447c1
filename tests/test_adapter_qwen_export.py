"""Qwen Code's `/export md` file (`qwen-code-export-<time>.md`), as projects commit it: `engram
ingest FILE` reads it as the session it was exported from, an Edit at the lines a diff of the
whole file before and after it gives, a failed Edit left out, a whole ReadFile a read.

The fixture is an excerpt of two real exports (tests/fixtures/qwen_export/NOTICE.md, MIT); the
six exports of that repository are measured by bench/harness_qwen_export.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import run_engram

FIXTURE = next((Path(__file__).parent / "fixtures" / "qwen_export").glob("qwen-code-export-*.md"))
RECORDED = "/Users/berloga/Documents/GitHub/flutter-github-issues-todo"
SID = "8a004c3d-ca1c-4c07-aff1-dd77c62f4de1"


def test_a_real_qwen_code_export_gives_its_read_and_its_edit_at_their_lines(repo: Path, tmp_path: Path) -> None:
    """berlogabob/flutter-github-issues-todo's session read base_agent.dart whole, then an Edit
    added a doc comment before `_isActive` and a setter after its getter: one code.edit spanning
    lines 10-19 before and 10-22 after, with the file's hashes (the export shows the whole file
    after the call); its failed Edit of another file is no edit; the session keeps its id and
    start, and says it keeps no other time."""
    export = tmp_path / FIXTURE.name
    shutil.copy(FIXTURE, export)
    out = run_engram(repo, "ingest", str(export), "--map", f"{RECORDED}={repo}").stdout
    assert "1 session" in out and "1 edit" in out and "1 read" in out, out
    events = json.loads(run_engram(repo, "show", SID, "--json").stdout)["events"]
    assert (events[0]["harness"], events[0]["started"]) == ("qwen-code", "2026-03-11T22:07:46.453Z")
    [read] = [e for e in events if e["kind"] == "code.read"]
    assert (read["file"], read["range"]) == ("lib/agents/base_agent.dart", [1, 108])
    [edit] = [e for e in events if e["kind"] == "code.edit"]
    assert (edit["file"], edit["before_range"], edit["after_range"]) == ("lib/agents/base_agent.dart", [10, 19], [10, 22])
    assert edit["after_text"].startswith("  /// Protected setter for active state - subclasses can set this\n")
    assert edit["file_before_sha"] and edit["file_after_sha"]
    assert "times" in run_engram(repo, "show", SID).stdout
