"""Bad input met by ingest (issue 50): a line nested too deep, a killed worker, a huge line of a
plain-text session. Each is a counted skip or a one-line report, never a traceback, and what can be
captured is."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_engram
from test_store_safety import write_session


def test_a_line_nested_too_deep_is_a_counted_skip(repo: Path, tmp_path: Path) -> None:
    good = write_session(tmp_path / "s-good.jsonl", repo, "s-good", "the good session")
    bad = write_session(tmp_path / "s-deep.jsonl", repo, "s-deep", "the deep session")
    deep = b'{"type":"user","x":' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    bad.write_bytes(bad.read_bytes() + deep)
    for _ in range(2):  # and every later ingest while the file is there
        proc = run_engram(repo, "ingest", str(good), str(bad), check=False)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "1 skipped" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    sessions = {t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert {"s-good", "s-deep"} <= sessions
    shown = json.loads(run_engram(repo, "show", "s-deep", "--json").stdout)["events"]
    assert any(e.get("text") == "the deep session" for e in shown)
