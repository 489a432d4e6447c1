"""The secrets probe as a standing test: 55 kinds of secret, each in a prompt, a command's output,
a file the agent wrote and a stored object, captured end to end; none may be found in a tape, an
object or the full-text index (`engram search`)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_engram
from secret_kinds import PLACES, kinds, leaks, probe_session


def test_no_planted_secret_reaches_the_store(tmp_path: Path, repo: Path) -> None:
    planted = kinds(seed=3)
    assert len({k for k, _, _ in planted}) >= 45
    session = probe_session(tmp_path / "sessions", planted)
    raw = session.read_text()
    assert all(s in raw or s.replace("\n", "\\n") in raw for _, _, secrets in planted for s in secrets)
    (repo / ".engram" / "config.toml").write_text("[ingest]\nobject_threshold = 4096\n")
    out = run_engram(repo, "ingest", str(session)).stdout
    assert "secrets redacted" in out, out
    assert list((repo / ".engram" / "objects").rglob("*")), "the long output became a stored object"
    found = leaks(repo / ".engram", planted)
    assert found == {}, "leaks by kind: " + ", ".join(f"{k} in {sorted(v)}" for k, v in sorted(found.items()))
    shown = run_engram(repo, "show", "5ec7e700", "--json").stdout
    assert shown.count("[REDACTED:") >= 3 * len(planted), "every kind is marked where it was"


def test_the_probe_finds_a_secret_wherever_one_is_stored(tmp_path: Path) -> None:
    """Without redaction, the same texts are found in each place the probe looks: it is not blind."""
    import apsw

    from engram.tape.writer import write_tape

    planted = kinds(seed=4)[:5]
    store = tmp_path / ".engram"
    text = "\n".join(t for _, t, _ in planted)
    events = [{"kind": "meta", "v": 1, "harness": "raw", "session_id": "s"}, {"kind": "msg.in", "text": text},
              {"kind": "tool.result", "call_id": "c", "stdout": text}, {"kind": "code.edit", "file": "a", "after_text": text},
              {"kind": "tool.result", "call_id": "d", "stdout": text + "x" * 5000}]
    write_tape(store / "tapes", store / "objects", events, object_threshold=4096)
    db = apsw.Connection(str(store / "index.sqlite"))
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(text); INSERT INTO fts(text) VALUES(?)", (text,))
    db.close()
    found = leaks(store, planted)
    assert found == {k: set(PLACES) for k, _, _ in planted}
