"""A damaged or booby-trapped store (issue 50): symbolic links out of `.engram/`, tapes that are
not what their name says, a corrupt index, paths replaced by the wrong kind of file. Each case is
what a user would see: data outside the repository untouched, a one-line error naming the path
and the fix, and answers that come from the tapes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SPOTTER_MAIN, build_spot_repo, git, run_engram, shown_events


def write_session(path: Path, repo: Path, sid: str, text: str, big: str | None = None) -> Path:
    """A small Claude Code transcript: a prompt, and a tool result (`big`, to make an object)."""
    base = {"sessionId": sid, "cwd": str(repo), "version": "2.1.39", "timestamp": "2026-01-01T00:00:00Z"}
    recs = [
        {**base, "type": "user", "uuid": f"{sid}-p", "parentUuid": None, "message": {"content": text}},
        {**base, "type": "assistant", "uuid": f"{sid}-a", "parentUuid": f"{sid}-p",
         "message": {"model": "m", "content": [{"type": "tool_use", "id": f"t-{sid}", "name": "Bash",
                                                "input": {"command": "make"}}]}},
        {**base, "type": "user", "uuid": f"{sid}-u", "parentUuid": f"{sid}-a",
         "message": {"content": [{"type": "tool_result", "tool_use_id": f"t-{sid}", "content": big or "ok"}]},
         "toolUseResult": {"stdout": big or "ok", "stderr": "", "interrupted": False}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def outside_files(base: Path) -> Path:
    victim = base / "precious"
    victim.mkdir()
    for i in range(3):
        (victim / f"{i:062x}").write_text(f"not engram's {i}\n")
    (victim / ".tmp-notes").write_text("mine\n")
    return victim


def test_gc_and_reindex_never_follow_a_symlink_out_of_the_store(repo: Path, tmp_path: Path) -> None:
    big = "line of build output\n" * 20000
    run_engram(repo, "ingest", str(write_session(tmp_path / "s-1.jsonl", repo, "s-1", "hello", big)))
    victim = outside_files(tmp_path)
    objects = repo / ".engram" / "objects"
    (objects / "ab").symlink_to(victim, target_is_directory=True)
    (objects / "cd").mkdir()
    (objects / "cd" / ("e" * 62)).symlink_to(victim / f"{0:062x}")
    outside_tape = tmp_path / ("f" * 64 + ".jsonl.zst")
    shutil.copy(next((repo / ".engram" / "tapes").glob("*.jsonl.zst")), outside_tape)
    (repo / ".engram" / "tapes" / outside_tape.name).symlink_to(outside_tape)
    before = {p.name: p.read_text() for p in victim.iterdir()}

    for args in (["gc"], ["reindex"], ["ingest", str(tmp_path / "s-1.jsonl")], ["gc"], ["doctor"]):
        proc = run_engram(repo, *args, check=False)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
    assert {p.name: p.read_text() for p in victim.iterdir()} == before, "files outside the repository untouched"
    assert outside_tape.exists()
    tapes = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert "f" * 64 not in {t["id"] for t in tapes}, "a symlinked tape is not catalogued"
    shown = json.loads(run_engram(repo, "show", "s-1", "--json").stdout)["events"]
    assert any(e.get("stdout") == big for e in shown), "the store's own objects kept"


def test_the_memory_log_is_never_written_or_read_through_a_link(repo: Path, tmp_path: Path) -> None:
    from engram.errors import EngramError
    from engram.memory.events import EventLog, Pending
    from engram.store.repo import Store

    log = EventLog(Store(repo))
    victim = tmp_path / "precious.jsonl"
    victim.write_text("not engram's\n")
    probe = Pending("create", "m-1", {"kind": "cli"}, {"text": "x"})
    log.dir.mkdir(parents=True, exist_ok=True)
    name = log.append([probe])[0]
    target = log.dir / log.file_for(name)
    target.unlink()
    target.symlink_to(victim)
    try:
        log.append([probe])
    except EngramError as exc:
        assert str(target) in str(exc) and "link" in str(exc)
    assert victim.read_text() == "not engram's\n"
    assert log.files() == [], "a link is not read as a log file"
    assert log.purge("m-1") == ([], 0) and victim.read_text() == "not engram's\n"


def _plant_link(store: Path, where: str, victim: Path) -> None:
    """A symbolic link out of the store at `where` (a path under `.engram/`), pointing into `victim`."""
    path = store / where
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists():
        shutil.copy(path, victim / path.name)  # (the index: its copy outside is what SQLite would write)
        path.unlink()
    target = victim if where in ("quarantine", "removed", "events/memories") else victim / path.name
    path.symlink_to(target, target_is_directory=target.is_dir())


@pytest.mark.parametrize("where", ["index.sqlite", "index.sqlite-wal", "quarantine", "removed", "events/memories",
                                   "run/memories.lock"])
def test_a_link_where_engram_writes_later_is_never_followed(repo: Path, tmp_path: Path, where: str) -> None:
    """SQLite followed a linked index.sqlite and wrote (and deleted the -wal beside) files outside;
    a linked quarantine/ took a damaged tape out of the repository; a linked memory log directory
    had `engram remember` append to a file outside; a linked lock file was created outside."""
    a = write_session(tmp_path / "s-a.jsonl", repo, "s-a", "the alpha session")
    b = write_session(tmp_path / "s-b.jsonl", repo, "s-b", "the beta session")
    run_engram(repo, "ingest", str(a), str(b))
    run_engram(repo, "remember", "the build retries twice")
    store = repo / ".engram"
    ids = {t["session_id"]: t["id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    tape_a, tape_b = (store / "tapes" / f"{ids[s]}.jsonl.zst" for s in ("s-a", "s-b"))
    tape_a.chmod(0o644)
    tape_a.write_bytes(tape_b.read_bytes())  # to be quarantined (s-b's is taken out by `tapes rm`)
    victim = outside_files(tmp_path)
    (victim / "index.sqlite-wal").write_text("not engram's wal\n")
    _plant_link(store, where, victim)
    before = {p.name: p.read_bytes() for p in victim.iterdir()}

    for args in (["remember", "another note"], ["tapes", "rm", "s-b"], ["reindex"], ["ingest", str(a), str(b)],
                 ["gc"], ["recall", "retries"]):
        proc = run_engram(repo, *args, check=False)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        if proc.returncode:
            said = [line for line in proc.stderr.splitlines() if line.startswith("engram:")]
            assert len(said) == 1 and where.split("/")[-1] in said[0], proc.stderr
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == before, "nothing outside written or deleted"
    doctor = run_engram(repo, "doctor", check=False)
    assert "Traceback" not in doctor.stderr
    if (store / where).is_symlink():
        assert doctor.returncode == 1 and where.split("/")[-1] in doctor.stdout, doctor.stdout


def test_a_linked_objects_shard_is_never_written_through_by_ingest_or_pull(repo: Path, tmp_path: Path) -> None:
    """`objects/<ab>` a link out of the store: ingest and pull wrote a new object through it."""
    import hashlib

    big = "line of build output\n" * 20000
    session = write_session(tmp_path / "s-1.jsonl", repo, "s-1", "hello", big)
    shard = hashlib.sha256(big.encode()).hexdigest()[:2]  # where the object will go
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    run_engram(other, "init")
    run_engram(other, "ingest", str(session))
    git(other, "commit", "-q", "--allow-empty", "-m", "x")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(other, "remote", "add", "origin", str(remote))
    run_engram(other, "push")
    git(repo, "remote", "add", "origin", str(remote))
    victim = tmp_path / "precious"
    victim.mkdir()
    (repo / ".engram" / "objects").mkdir(exist_ok=True)
    (repo / ".engram" / "objects" / shard).symlink_to(victim, target_is_directory=True)
    for args in (["ingest", str(session)], ["pull"]):
        proc = run_engram(repo, *args, check=False)
        said = [line for line in proc.stderr.splitlines() if line.startswith("engram:")]
        assert proc.returncode == 1 and len(said) == 1 and f"objects/{shard}" in said[0], (args, proc.stderr)
        assert not list(victim.iterdir()), f"{args[0]} wrote nothing outside the repository"
    doctor = run_engram(repo, "doctor", check=False)
    assert doctor.returncode == 1 and f"objects/{shard}" in doctor.stdout


def test_a_tape_overwritten_by_another_is_refused_then_quarantined(repo: Path, tmp_path: Path) -> None:
    a = write_session(tmp_path / "s-a.jsonl", repo, "s-a", "the alpha session")
    b = write_session(tmp_path / "s-b.jsonl", repo, "s-b", "the beta session")
    b.write_text(b.read_text().replace("2026-01-01T", "2026-01-02T"))  # (not one event to search: engram.query.copies)
    run_engram(repo, "ingest", str(a), str(b))
    tapes = {t["session_id"]: t["id"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    path_a = repo / ".engram" / "tapes" / f"{tapes['s-a']}.jsonl.zst"
    path_b = repo / ".engram" / "tapes" / f"{tapes['s-b']}.jsonl.zst"
    path_a.chmod(0o644)
    path_a.write_bytes(path_b.read_bytes())  # a valid tape, under the wrong name

    proc = run_engram(repo, "show", "s-a", "--json", check=False)
    assert "the beta session" not in proc.stdout, "never another session's events under this id"
    assert proc.returncode == 1 and "does not match its id" in proc.stderr and "Traceback" not in proc.stderr
    assert "engram reindex" in proc.stderr
    proc = run_engram(repo, "search", "session", "--json", check=False)  # (one damaged tape failed every search)
    assert proc.returncode == 0 and "engram reindex" in proc.stderr, proc.stderr
    hits = json.loads(proc.stdout)["hits"]
    assert hits and all(h["session_id"] == "s-b" for h in hits), hits

    proc = run_engram(repo, "reindex")
    assert "quarantine" in proc.stdout + proc.stderr
    assert not path_a.exists() and (repo / ".engram" / "quarantine" / path_a.name).exists()
    run_engram(repo, "ingest", str(a), str(b))
    shown = json.loads(run_engram(repo, "show", "s-a", "--json").stdout)["events"]
    assert any(e.get("text") == "the alpha session" for e in shown), "captured again from its transcript"
    assert path_a.exists() and path_a.read_bytes() != path_b.read_bytes()


def test_a_tape_or_a_memory_log_file_replaced_by_a_directory_is_one_line(repo: Path, tmp_path: Path) -> None:
    """Both were raw tracebacks (IsADirectoryError) from show, reindex and gc, or remember, recall
    and ingest."""
    a = write_session(tmp_path / "s-a.jsonl", repo, "s-a", "the alpha session")
    run_engram(repo, "ingest", str(a))
    run_engram(repo, "remember", "the build retries twice")
    tape = next((repo / ".engram" / "tapes").glob("*.jsonl.zst"))
    tape.chmod(0o644)
    tape.unlink()
    tape.mkdir()
    log_file = next((repo / ".engram" / "events" / "memories").glob("*.jsonl"))
    log_file.unlink()
    log_file.mkdir()
    for args in (["show", "s-a"], ["remember", "another"], ["recall", "retries"], ["gc"], ["reindex"],
                 ["ingest", str(a)]):
        proc = run_engram(repo, *args, check=False)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        if proc.returncode:
            said = [line for line in proc.stderr.splitlines() if line.startswith("engram:")]
            assert len(said) == 1 and (tape.name in said[0] or log_file.name in said[0]), (args, proc.stderr)
    assert (repo / ".engram" / "quarantine" / tape.name).is_dir(), "reindex set the directory aside"
    assert any(e.get("text") == "the alpha session" for e in shown_events(repo, "s-a")), "captured again"


def damage_pages(db: Path, size: int = 64 * 1024) -> None:
    """Garbage over `size` bytes in the middle of a database, its header page left intact."""
    data = bytearray(db.read_bytes())
    assert len(data) > 2 * size + 4096, len(data)
    at = max(4096, len(data) // 2 - size // 2)
    data[at:at + size] = os.urandom(size)
    db.write_bytes(bytes(data))


def test_a_corrupt_index_is_set_aside_and_rebuilt_with_the_memories(spotter: Path, tmp_path: Path) -> None:
    root = tmp_path / "spot"
    writer = build_spot_repo(spotter, root)
    path = next(p for p, s in writer.items() if s == SPOTTER_MAIN and p.endswith(".ex"))
    before = json.loads(run_engram(root, "explain", f"{path}:1-20").stdout)
    memory = json.loads(run_engram(root, "remember", "spotter parses the config first", "--json").stdout)["id"]
    run_engram(root, "index")
    index = root / ".engram" / "index.sqlite"
    import apsw

    with apsw.Connection(str(index)) as db:  # the WAL folded into the file, as after a quiet while
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damage_pages(index)

    for args in (["explain", f"{path}:1-20"], ["ingest", str(spotter)], ["tapes"]):
        proc = run_engram(root, *args, check=False)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        if proc.returncode:
            assert "engram reindex" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    doctor = run_engram(root, "doctor", check=False)  # (it said "ok   index: schema 14")
    line = next(x for x in doctor.stdout.splitlines() if "index:" in x)
    assert doctor.returncode == 1 and line.startswith("fail") and "engram reindex" in doctor.stdout, doctor.stdout
    proc = run_engram(root, "reindex")
    assert "Traceback" not in proc.stderr
    assert (root / ".engram" / "index.sqlite.damaged").exists()
    assert run_engram(root, "doctor", check=False).stdout.count("fail ") == 0
    assert json.loads(run_engram(root, "explain", f"{path}:1-20").stdout) == before
    listed = json.loads(run_engram(root, "memory", "list", "--json").stdout)
    assert memory in json.dumps(listed), "the memories' projection rebuilt from their log"


DAMAGES = {
    "config": lambda s: (s / "config.toml").write_bytes(b"[ingest]\nmax_line_bytes = 1\n# caf\xe9\xff\n"),
    "index-dir": lambda s: ((s / "index.sqlite").unlink(), (s / "index.sqlite").mkdir()),
    "lock-dir": lambda s: ((s / "run" / "ingest.lock").unlink(missing_ok=True), (s / "run" / "ingest.lock").mkdir()),
    "tapes-file": lambda s: (shutil.rmtree(s / "tapes"), (s / "tapes").write_text("oops")),
    "wal-dir": lambda s: ((s / "index.sqlite-wal").unlink(missing_ok=True), (s / "index.sqlite-wal").mkdir()),
    "shm-dir": lambda s: ((s / "index.sqlite-shm").unlink(missing_ok=True), (s / "index.sqlite-shm").mkdir()),
    "memory-log-file": lambda s: (shutil.rmtree(s / "events" / "memories"), (s / "events" / "memories").write_text("")),
    "clone-dir": lambda s: ((s / "clone").unlink(), (s / "clone").mkdir()),
    "memories-lock-dir": lambda s: ((s / "run" / "memories.lock").unlink(missing_ok=True),
                                    (s / "run" / "memories.lock").mkdir()),
}
PATHS = {"config": "config.toml", "index-dir": "index.sqlite", "lock-dir": "ingest.lock", "tapes-file": "tapes",
         "wal-dir": "index.sqlite-wal", "shm-dir": "index.sqlite-shm", "memory-log-file": "events/memories",
         "clone-dir": "clone", "memories-lock-dir": "memories.lock"}
SET_ASIDE = {"index-dir": "index.sqlite.damaged", "wal-dir": "index.sqlite.damaged-wal",
             "shm-dir": "index.sqlite.damaged-shm"}  # (reindex puts these right)


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_store_gives_one_line_naming_the_path_and_the_fix(repo: Path, tmp_path: Path, damage: str) -> None:
    session = write_session(tmp_path / "s-1.jsonl", repo, "s-1", "hello")
    run_engram(repo, "ingest", str(session))
    run_engram(repo, "remember", "the build retries twice")
    DAMAGES[damage](repo / ".engram")
    tapes_before = sorted((repo / ".engram").rglob("*.jsonl.zst"))
    for args in (["ingest", str(session)], ["recall", "retries"], ["remember", "another"], ["reindex"], ["tapes"],
                 ["gc"]):
        proc = run_engram(repo, *args, check=False)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        if proc.returncode:  # (recall notes on stderr what it searched with before the error)
            said = [line for line in proc.stderr.splitlines() if line.startswith("engram:")]
            assert len(said) == 1 and PATHS[damage] in said[0], (args, proc.stderr)
    assert sorted((repo / ".engram").rglob("*.jsonl.zst")) == tapes_before
    if damage in SET_ASIDE:  # reindex put that right (set aside): damage it again for doctor
        assert (repo / ".engram" / SET_ASIDE[damage]).is_dir()
        DAMAGES[damage](repo / ".engram")
    doctor = run_engram(repo, "doctor", check=False)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stderr
    failed = [line for line in doctor.stdout.splitlines() if PATHS[damage] in line]
    assert failed, doctor.stdout


def run_on_read_only_store(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`engram ARGS` with `.engram/` unwritable as a user meets it: without write permission
    (chmod -R a-w), or, for root (whom permissions do not stop), on a read-only bind mount."""
    store = repo / ".engram"
    if os.geteuid() != 0:
        for p in [store, *store.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        try:
            return run_engram(repo, *args, check=False)
        finally:
            for p in [store, *store.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)
    if not shutil.which("unshare"):
        pytest.skip("root without unshare: no way to make the store read-only")
    script = ('mount --bind .engram .engram && mount -o remount,bind,ro .engram || exit 99\n'
              'exec "$@"')
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-m", "engram.cli", *args],
                          cwd=repo, capture_output=True, text=True, timeout=120)
    if proc.returncode == 99:
        pytest.skip(f"no read-only bind mount here: {proc.stderr.strip()}")
    return proc


@pytest.mark.parametrize("args", [["tapes"], ["explain", "a.py"], ["recall", "retries"], ["ingest", "SESSION"],
                                  ["remember", "a note", "--at", "a.py:1"]])
def test_a_read_only_store_is_one_line_saying_so(repo: Path, tmp_path: Path, args: list[str]) -> None:
    (repo / "a.py").write_text("x = 1\n")
    session = write_session(tmp_path / "s-1.jsonl", repo, "s-1", "hello")
    run_engram(repo, "ingest", str(session))
    proc = run_on_read_only_store(repo, *[str(session) if a == "SESSION" else a for a in args])
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and ".engram cannot be written" in err, err


def test_doctor_says_the_store_cannot_be_written_and_how_to_fix_it(repo: Path) -> None:
    """doctor said the store was ok (and, once queries said why, 'fix: engram reindex', which cannot run)."""
    proc = run_on_read_only_store(repo, "doctor")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    store = next(line for line in proc.stdout.splitlines() if "store:" in line)
    assert store.startswith("fail") and ".engram cannot be written" in store, proc.stdout
    assert "engram reindex" not in proc.stdout and "chmod -R u+w .engram" in proc.stdout


@pytest.mark.parametrize("table", ["fts", "memory_fts"])
def test_doctor_finds_a_damaged_full_text_index(spotter: Path, tmp_path: Path, table: str) -> None:
    """A full-text index (the sessions' `fts`, the memories' `memory_fts`) damaged inside its own
    shadow table, every page of the file sound: doctor fails the index and names `engram reindex`,
    which puts it right. SQLite (3.44 and newer; apsw >= 3.54 is required) runs FTS5's own
    integrity check within `PRAGMA quick_check`, so doctor needs no check of its own (on a 203 MB
    index the FTS5 part is ~0.3 s of the quick check's ~0.5 s of CPU)."""
    import apsw

    root = tmp_path / "spot"
    build_spot_repo(spotter, root)
    run_engram(root, "remember", "spotter parses the config first, before any transcript is rendered")
    with apsw.Connection(str(root / ".engram" / "index.sqlite")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        leaf = db.execute(f"SELECT id FROM {table}_data WHERE id > 10 ORDER BY length(block) DESC LIMIT 1").fetchone()[0]
        db.execute(f"UPDATE {table}_data SET block = substr(block, 1, 4) || zeroblob(length(block) - 4) WHERE id = ?",
                   (leaf,))
        assert db.execute("PRAGMA quick_check(fts_data)").fetchall() == [("ok",)], "the pages are sound"
    doctor = run_engram(root, "doctor", check=False)
    line = next(x for x in doctor.stdout.splitlines() if "index:" in x)
    assert doctor.returncode == 1 and line.startswith("fail") and f'table "{table}"' in line, doctor.stdout
    assert "fix: engram reindex" in doctor.stdout
    run_engram(root, "reindex")
    assert run_engram(root, "doctor", check=False).stdout.count("fail ") == 0
    found = json.loads(run_engram(root, "recall", "config first", "--json").stdout)["memories"]
    assert found and "parses the config" in found[0]["content"]
