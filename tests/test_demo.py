"""`engram demo`, the README's first command: what a new user sees before they have any history."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import SPOTTER_MAIN, created_by


def test_demo_explains_code_the_shipped_session_created(spotter: Path, tmp_path: Path) -> None:
    """The demo ingests the shipped session and explains lines of a file that session created:
    the session comes first and its Write of that file is among the touches shown. It cleans up."""
    proc = subprocess.run([sys.executable, "-m", "engram.cli", "demo"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "ingest: 1 session, 1 new tape" in out
    ingested = re.search(r"^ingest: .* (\d+) events, (\d+) edits, (\d+) reads", out, re.M)
    listed = re.search(r"^[0-9a-f]{12} +claude-code +\S+ +\S+ +[\d-]+ [\d:]+ +(\d+) +(\d+) +(\d+) ", out, re.M)
    assert ingested and listed, out[:2000]
    assert ingested.groups() == listed.groups(), "ingest and `engram tapes` count the same events, edits, reads"
    explained = re.search(r"^\$ engram explain (\S+):(\d+)-(\d+) --pretty", out, re.M)
    assert explained, out[-2000:]
    path = explained.group(1)
    assert path in created_by(spotter, SPOTTER_MAIN), f"{path} was created by the demo session"
    answer = out[explained.end():]
    assert re.search(rf"^1\. wrote these lines — Claude Code · .* · session {SPOTTER_MAIN[:8]}$", answer, re.M), \
        answer[:1000]
    assert re.search(rf"^   edit +{re.escape(path)}, event #\d+$", answer, re.M), answer[:3000]  # its Write
    assert re.search(r"^ +@@ -0,0 \+\d+,\d+ @@$", answer, re.M), answer[:3000]  # a file it created
    repo = re.search(r"^demo repository: (.+)$", out, re.M)
    assert repo and not Path(repo.group(1)).exists(), "the throw-away repository is removed"


def test_demo_again_in_the_same_folder_shows_it_again(tmp_path: Path) -> None:
    """`engram demo --dir DIR` a second time (to see it again, or after a first run broke off) was a
    traceback: git had nothing to commit. It shows the demo again, nothing captured twice."""
    runs = [subprocess.run([sys.executable, "-m", "engram.cli", "demo", "--dir", str(tmp_path / "d")], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300) for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert "$ engram explain " in proc.stdout and "1. wrote these lines" in proc.stdout
    assert "ingest: 1 session, 1 new tape" in runs[0].stdout and "(1 session unchanged)" in runs[1].stdout, \
        runs[1].stdout[:1500]
