"""OpenCode's SQLite store (`opencode.db`, OpenCode >= 1.2): a real session (the export in
tests/fixtures/opencode, savekirk/session-bridge, MIT) laid out in the store's tables as OpenCode
keeps it, read as the export reads; found by discovery; captured again only when it changed;
and read while OpenCode holds a write transaction open, without writing the store."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import apsw
import pytest

from conftest import FIXTURES, run_engram, unpack
from engram.adapters.base import SourceSpan
from engram.adapters.opencode import parse_opencode
from engram.adapters.opencode_db import source
from test_adapter_gemini import OC_EDITS, PROJECT, edits, mapper

SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, name TEXT,
                      time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,
                      directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, share_url TEXT,
                      summary_additions INTEGER, summary_deletions INTEGER, summary_files INTEGER,
                      summary_diffs TEXT, revert TEXT, permission TEXT, time_created INTEGER NOT NULL,
                      time_updated INTEGER NOT NULL, time_compacting INTEGER, time_archived INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
                      time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
                   time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
"""


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real")
    unpack(FIXTURES / "opencode", out)
    return out / f"{OC_EDITS}.json"


def make_store(path: Path, export: Path, directory: str = PROJECT) -> Path:
    """The export's session as rows of OpenCode's store (ids in their columns, the rest in `data`)."""
    doc = json.loads(export.read_text())
    info = doc["info"]
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(SCHEMA)
    t = info["time"]
    conn.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
                 "time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (info["id"], info.get("projectID") or "p", info.get("parentID"), info.get("slug") or "s", directory,
                  info.get("title") or "", info.get("version") or "", t["created"], t.get("updated") or t["created"]))
    for m in doc["messages"]:
        mi = m["info"]
        created = (mi.get("time") or {}).get("created") or t["created"]
        conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                     (mi["id"], info["id"], created, created,
                      json.dumps({k: v for k, v in mi.items() if k not in ("id", "sessionID")})))
        for p in m["parts"]:
            conn.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                         (p["id"], mi["id"], info["id"], created, created,
                          json.dumps({k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")})))
    conn.close()
    return path


def test_a_session_of_the_store_reads_as_its_export(export: Path, tmp_path: Path) -> None:
    db = make_store(tmp_path / "opencode.db", export)
    stored = parse_opencode([source(db, OC_EDITS)], mapper, max_line_bytes=1 << 30)
    exported = parse_opencode([SourceSpan("main", export)], mapper, max_line_bytes=1 << 30)
    assert stored.session_id == OC_EDITS and stored.meta["cwd"] == PROJECT
    assert edits(stored) == edits(exported) and len(edits(stored)) > 0
    assert [e["kind"] for e in stored.events] == [e["kind"] for e in exported.events]


def test_discovery_reads_the_store_without_writing_or_blocking_it(export: Path, repo: Path, tmp_path: Path) -> None:
    db = make_store(tmp_path / "xdg" / "opencode" / "opencode.db", export, directory=str(repo))
    (repo / "README.md").write_text("hello\n")
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
           "CODEX_HOME": str(tmp_path / "none")}
    # OpenCode is running: it holds a write transaction open while engram reads.
    writer = apsw.Connection(str(db))
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE session SET title = 'renamed' WHERE id = ?", (OC_EDITS,))
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    out = run_engram(repo, "ingest", env=env)
    assert "1 session" in out.stdout + out.stderr, out.stdout + out.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # nothing written to the store
    writer.execute("COMMIT")  # and OpenCode's write was never blocked
    writer.close()
    tapes = json.loads(run_engram(repo, "tapes", "--json", env=env).stdout)
    assert [t["session_id"] for t in tapes] == [OC_EDITS]

    # Unchanged: nothing new. A part added: a tape of only that event.
    run_engram(repo, "ingest", env=env)
    assert len(json.loads(run_engram(repo, "tapes", "--json", env=env).stdout)) == 1
    doctor = json.loads(run_engram(repo, "doctor", "--json", env=env, check=False).stdout)
    [sessions] = [c for c in doctor["checks"] if c["area"] == "sessions"]
    assert sessions["status"] == "ok", sessions
    conn = apsw.Connection(str(db))
    last = conn.execute("SELECT id FROM message WHERE session_id = ? ORDER BY id DESC LIMIT 1", (OC_EDITS,)).fetchall()
    conn.execute("INSERT INTO part VALUES ('prt_zzzzzzzzzzzz', ?, ?, 1, 9999999999999, ?)",
                 (last[0][0], OC_EDITS, json.dumps({"type": "text", "text": "one more thing, later"})))
    conn.close()
    run_engram(repo, "ingest", env=env)
    tapes = json.loads(run_engram(repo, "tapes", "--json", env=env).stdout)
    assert len(tapes) == 2 and sorted(t["events"] for t in tapes)[0] == 2  # its meta and the one new event


def test_a_store_given_by_path_is_ingested(export: Path, repo: Path, tmp_path: Path) -> None:
    db = make_store(tmp_path / "copy" / "opencode.db", export)
    out = run_engram(repo, "ingest", "--map", f"{PROJECT}={repo}", str(db))
    assert "1 session" in out.stdout + out.stderr


def test_the_capture_plugin_setup_writes_captures_a_session_when_it_goes_idle(export: Path, repo: Path,
                                                                              tmp_path: Path) -> None:
    """`engram setup opencode` writes a plugin into `.opencode/plugins/`; run as OpenCode runs it
    (an ES module whose `event` hook gets `session.idle`; node stands in for Bun), it starts the
    capture of the session from OpenCode's store. `setup --remove` deletes it."""
    import os
    import shutil
    import subprocess
    import time

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the plugin cannot be run here")
    make_store(tmp_path / "xdg" / "opencode" / "opencode.db", export, directory=str(repo))
    (repo / "README.md").write_text("hello\n")
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "CODEX_HOME": str(tmp_path / "none")}
    run_engram(repo, "setup", "opencode", env=env, check=False)
    plugin = repo / ".opencode" / "plugins" / "engram-capture.js"
    script = (f"const m = await import({json.dumps(plugin.as_uri())});\n"
              f"const hooks = await m.EngramCapture({{ directory: {json.dumps(str(repo))} }});\n"
              "await hooks.event({ event: { type: 'session.idle', properties: { sessionID: 'x' } } });\n")
    ran = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **env})
    assert ran.returncode == 0, ran.stderr
    deadline, tapes = time.monotonic() + 120, []
    while time.monotonic() < deadline and not tapes:
        time.sleep(0.5)
        tapes = json.loads(run_engram(repo, "tapes", "--json", env=env).stdout)
    assert [t["session_id"] for t in tapes] == [OC_EDITS]
    doctor = json.loads(run_engram(repo, "doctor", "--json", env=env, check=False).stdout)
    assert [c["status"] for c in doctor["checks"] if c["area"] == "opencode"] == ["ok"]
    run_engram(repo, "setup", "--remove", "opencode", env=env)
    assert not plugin.exists() and not (repo / ".opencode").exists() and not (repo / "opencode.json").exists()
