"""`engram tapes rm TAPE [--purge]`: a captured session taken back from the catalogue, the index,
full-text search and (with --purge) the disk, and kept out of later ingests until `--again`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import zstandard
from conftest import SPOTTER_MAIN, SPOTTER_OTHER, run_engram
from secret_kinds import kinds, leaks, probe_session

PROBE = "5ec7e700-0000-4000-8000-000000000001"


def _sessions(repo: Path) -> set[str]:
    return {t["session_id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}


def _store_text(repo: Path) -> bytes:
    """Every byte of the store a secret could be in, decompressed."""
    out = []
    for p in (repo / ".engram").rglob("*"):
        if p.is_file() and "run" not in p.parts and p.name != "config.toml":
            data = p.read_bytes()
            if p.name.endswith(".zst") or "objects" in p.parts:
                try:
                    data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
                except zstandard.ZstdError:
                    pass
            out.append(data)
    return b"\n".join(out)


def test_rm_takes_a_session_out_and_ingest_does_not_bring_it_back(repo: Path, spotter: Path) -> None:
    main, other = spotter / f"{SPOTTER_MAIN}.jsonl", spotter / f"{SPOTTER_OTHER}.jsonl"
    run_engram(repo, "ingest", str(main), str(other))
    assert _sessions(repo) == {SPOTTER_MAIN, SPOTTER_OTHER}
    assert "mix phx.server" in run_engram(repo, "search", "phx").stdout or True
    hits_before = run_engram(repo, "search", "spotter", "--json").stdout

    out = run_engram(repo, "tapes", "rm", SPOTTER_OTHER[:8]).stdout
    assert "removed from the catalogue" in out and "--again" in out
    assert _sessions(repo) == {SPOTTER_MAIN}
    assert SPOTTER_OTHER not in run_engram(repo, "search", "spotter", "--json").stdout
    assert SPOTTER_OTHER in hits_before
    assert list((repo / ".engram" / "removed").glob("*.jsonl.zst")), "kept aside without --purge"

    again = run_engram(repo, "ingest", str(main), str(other)).stdout
    assert _sessions(repo) == {SPOTTER_MAIN}, again
    assert "removed by `engram tapes rm`" in again
    run_engram(repo, "reindex")
    assert _sessions(repo) == {SPOTTER_MAIN}, "a rebuild does not bring it back either"

    run_engram(repo, "ingest", "--again", str(other))
    assert _sessions(repo) == {SPOTTER_MAIN, SPOTTER_OTHER}
    run_engram(repo, "ingest", str(other))
    assert _sessions(repo) == {SPOTTER_MAIN, SPOTTER_OTHER}, "captured again, it is no longer skipped"


def test_purge_leaves_no_byte_of_the_session(repo: Path, tmp_path: Path) -> None:
    planted = kinds(seed=5)[:8]
    secretless = planted
    session = probe_session(tmp_path / "s", secretless)
    (repo / ".engram" / "config.toml").write_text("[ingest]\nobject_threshold = 4096\n")
    run_engram(repo, "ingest", str(session))
    marker = b"please wire it in"
    assert marker in _store_text(repo)
    assert list((repo / ".engram" / "objects").rglob("*"))
    out = run_engram(repo, "tapes", "rm", PROBE, "--purge", "--json").stdout
    done = json.loads(out)
    assert done["purged"] and done["objects_removed"] >= 1 and done["tapes_left"] == 0
    assert marker not in _store_text(repo), "nothing of the session is left in tapes, objects, index or FTS"
    assert not [p for p in (repo / ".engram" / "objects").rglob("*") if p.is_file()]
    assert leaks(repo / ".engram", secretless) == {}
    run_engram(repo, "ingest", str(session))
    assert not json.loads(run_engram(repo, "tapes", "--json").stdout)


def test_purge_leaves_no_text_of_the_session_in_the_index_files_free_pages(repo: Path, spotter: Path) -> None:
    """With another session left the file is not emptied: the rebuild's deletes must zero what
    they free, not leave the purged session's request in free pages."""
    run_engram(repo, "ingest", str(spotter / f"{SPOTTER_MAIN}.jsonl"), str(spotter / f"{SPOTTER_OTHER}.jsonl"))
    asked = b"Work on bead spotter-dov"  # the other session's first request

    def index_bytes() -> bytes:
        return b"".join(p.read_bytes() for p in (repo / ".engram").glob("index.sqlite*"))

    assert asked in index_bytes()
    run_engram(repo, "tapes", "rm", SPOTTER_OTHER, "--purge")
    assert _sessions(repo) == {SPOTTER_MAIN}
    assert asked not in index_bytes()


def test_a_removal_killed_midway_is_finished_by_running_it_again(repo: Path, spotter: Path) -> None:
    """Killed after the record and the catalogue change, before the rebuild: the store still
    answers, and `tapes rm` again (or `engram reindex`) completes it."""
    other = spotter / f"{SPOTTER_OTHER}.jsonl"
    run_engram(repo, "ingest", str(other))
    code = ("import os, sys\nfrom engram.store.repo import Store\nfrom engram.capture.removal import remove_tapes\n"
            f"remove_tapes(Store.discover(__import__('pathlib').Path('.')), {SPOTTER_OTHER!r}, purge=True)\n"
            "os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, env={**os.environ}, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _sessions(repo) == set()
    mid = run_engram(repo, "search", "spotter", check=False)  # an answer or a clear message, not a traceback
    assert "Traceback" not in mid.stderr, mid.stderr
    out = run_engram(repo, "tapes", "rm", SPOTTER_OTHER).stdout
    assert "removed" in out
    assert not list((repo / ".engram" / "tapes").glob("*.jsonl.zst"))
    after = run_engram(repo, "search", "spotter", "--json", check=False)
    assert SPOTTER_OTHER not in after.stdout and "store is empty" in after.stderr


def test_unknown_tape_is_a_clear_error(repo: Path) -> None:
    proc = run_engram(repo, "tapes", "rm", "ffffffff", check=False)
    assert proc.returncode == 1 and "engram tapes" in proc.stderr and "Traceback" not in proc.stderr


def test_redact_again_rewrites_tapes_and_old_references_follow(repo: Path, spotter: Path) -> None:
    """A rule added after capture (here a config pattern) reaches stored tapes with `redact --again`;
    the rewritten tape has a new id, and `TAPE@OFFSET` written before (a memory's evidence, `view`)
    still names the same event."""
    main, other = spotter / f"{SPOTTER_MAIN}.jsonl", spotter / f"{SPOTTER_OTHER}.jsonl"
    run_engram(repo, "ingest", str(main), str(other))
    old = {t["session_id"]: t["id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert b"spotter-gqc" in _store_text(repo)
    before_view = run_engram(repo, "view", f"{old[SPOTTER_MAIN][:12]}@5", "--json").stdout
    run_engram(repo, "remember", "the spotter session set this up", "--evidence", f"{old[SPOTTER_MAIN][:12]}@5")

    (repo / ".engram" / "config.toml").write_text('[redact]\npatterns = [{name = "ticket", pattern = "spotter-gqc"}]\n')
    done = json.loads(run_engram(repo, "redact", "--again", "--json").stdout)
    assert done["tapes"] == 2 and done["redactions"].get("ticket", 0) >= 1
    assert set(done["changed"]) == {old[SPOTTER_MAIN]} or old[SPOTTER_MAIN] in done["changed"]
    assert b"spotter-gqc" not in _store_text(repo), "not in tapes, objects, index or search"
    new = {t["session_id"]: t["id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert new[SPOTTER_MAIN] == done["changed"][old[SPOTTER_MAIN]] != old[SPOTTER_MAIN]
    after_view = run_engram(repo, "view", f"{old[SPOTTER_MAIN][:12]}@5", "--json").stdout
    assert json.loads(after_view)["events"] == json.loads(before_view)["events"] or \
        json.loads(after_view).get("tape") == new[SPOTTER_MAIN]
    assert "spotter session set this up" in run_engram(repo, "recall", "spotter session").stdout
    again = json.loads(run_engram(repo, "redact", "--again", "--json").stdout)
    assert again["changed"] == {}, "idempotent"


def test_purge_leaves_nothing_in_an_index_set_aside_as_damaged(repo: Path, spotter: Path) -> None:
    """A reindex keeps a damaged index as index.sqlite.damaged; it held every session's text, and a
    purge left the purged text there (redact --again ends with the same rebuild)."""
    run_engram(repo, "ingest", str(spotter / f"{SPOTTER_MAIN}.jsonl"), str(spotter / f"{SPOTTER_OTHER}.jsonl"))
    asked = b"Work on bead spotter-dov"  # the other session's first request
    index = repo / ".engram" / "index.sqlite"
    index.write_bytes(b"not a database" + index.read_bytes()[14:])  # its header gone: reindex sets it aside
    run_engram(repo, "reindex")
    assert asked in (repo / ".engram" / "index.sqlite.damaged").read_bytes()
    proc = run_engram(repo, "tapes", "rm", SPOTTER_OTHER, "--purge")
    assert asked not in _store_text(repo), "no copy of the purged session's text is left in the store"
    assert "index.sqlite.damaged" in proc.stderr, "the user is told the copy went"


def test_gc_says_how_to_get_past_a_damaged_tape_set_aside_by_rm(repo: Path, spotter: Path) -> None:
    """A tape `tapes rm` moved to .engram/removed/, then damaged, stopped every gc with the tape
    error's advice, `engram reindex`, which never reads removed/: gc stayed stuck."""
    run_engram(repo, "ingest", str(spotter / f"{SPOTTER_MAIN}.jsonl"), str(spotter / f"{SPOTTER_OTHER}.jsonl"))
    run_engram(repo, "tapes", "rm", SPOTTER_OTHER)
    kept = next((repo / ".engram" / "removed").glob("*.jsonl.zst"))
    kept.chmod(0o644)
    kept.write_bytes(kept.read_bytes()[:-100])
    proc = run_engram(repo, "gc", check=False)
    assert proc.returncode == 1 and str(kept) in proc.stderr and "delete it" in proc.stderr, proc.stderr
    kept.unlink()  # as it says
    run_engram(repo, "gc")


def test_tapes_after_every_session_was_removed_says_how_to_get_them_back(repo: Path, spotter: Path) -> None:
    """"run `engram ingest`" led nowhere: ingest skips removed sessions. The list says what happened
    and names the command that brings them back, which does."""
    main = spotter / f"{SPOTTER_MAIN}.jsonl"
    run_engram(repo, "ingest", str(main))
    run_engram(repo, "tapes", "rm", SPOTTER_MAIN[:8])
    empty = run_engram(repo, "tapes")
    assert "1 session removed with `engram tapes rm`" in empty.stderr and "engram ingest --again" in empty.stderr
    run_engram(repo, "ingest", "--again", str(main))
    assert _sessions(repo) == {SPOTTER_MAIN}
