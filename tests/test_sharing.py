"""Sharing through git (`engram push`, `pull`, `sync`; docs/sharing.md), with real git and bare
remotes on local disk: what teammates see, what never leaves, and what an interrupted or bad
remote does to a store (nothing)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard
from conftest import (
    SPOTTER_MAIN,
    SPOTTER_OTHER,
    build_spot_repo,
    created_by,
    git,
    run_engram,
    session_cwd,
)
from pytest_lsp import LanguageClient
from test_lsp import client, lenses, open_doc, start  # noqa: F401 - the language server fixture

pytestmark = pytest.mark.skipif(shutil.which("git") is None,
                                reason="git is not installed")


def _sessions(root: Path) -> set[str]:
    return {t["session_id"] for t in json.loads(run_engram(root, "tapes", "--json").stdout)}


@pytest.fixture
def team(tmp_path: Path, spotter: Path) -> dict[str, Path]:
    """A bare remote; alice's clone (the repository, the main session ingested) pushed its branch;
    bob's clone, at another absolute path, with the other session ingested."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    alice = tmp_path / "home" / "alice" / "src" / "app"
    build_spot_repo(spotter, alice, ingest=False)
    run_engram(alice, "ingest", str(spotter / f"{SPOTTER_MAIN}.jsonl"))
    git(alice, "add", "-A")
    git(alice, "commit", "-qm", "the app")
    git(alice, "remote", "add", "origin", str(remote))
    git(alice, "push", "-q", "origin", "HEAD:main")
    bob = tmp_path / "Users" / "bob" / "work" / "deeper" / "app"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(bob))
    run_engram(bob, "init")
    run_engram(bob, "ingest", str(spotter / f"{SPOTTER_OTHER}.jsonl"))
    return {"remote": remote, "alice": alice, "bob": bob}


def _engram(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "engram.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
                            start_new_session=True)


def _remote_objects(remote: Path) -> bytes:
    """Every object of the remote, blobs decompressed when they are zstd (tapes, objects)."""
    out = subprocess.run(["git", "-C", str(remote), "cat-file", "--batch-all-objects", "--batch"],
                         capture_output=True, check=True).stdout
    parts = [out]
    dctx = zstandard.ZstdDecompressor()
    at = 0
    while at < len(out):
        nl = out.index(b"\n", at)
        head = out[at:nl].split()
        size = int(head[2])
        body = out[nl + 1:nl + 1 + size]
        at = nl + 1 + size + 1
        if head[1] == b"blob" and body[:4] == b"\x28\xb5\x2f\xfd":
            try:
                parts.append(dctx.stream_reader(io.BytesIO(body), read_across_frames=True).read())
            except zstandard.ZstdError:
                pass
    return b"\n".join(parts)


def test_two_clones_push_at_once_and_both_end_with_the_union(team: dict[str, Path]) -> None:
    alice, bob, remote = team["alice"], team["bob"], team["remote"]
    run_engram(alice, "remember", "Scans run in a Task.Supervisor, never inline", "--kind", "decision")
    run_engram(bob, "remember", "The subagent view polls every 2 s on purpose")
    run_engram(bob, "remember", "my own todo: ask about the poller", "--scope", "personal")
    pushes = [_engram(alice, "push"), _engram(bob, "push")]
    for p in pushes:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, (out, err)
    for clone in (alice, bob):
        run_engram(clone, "pull")
        assert _sessions(clone) == {SPOTTER_MAIN, SPOTTER_OTHER}
        notes = run_engram(clone, "memory", "list", "--json").stdout
        assert "Task.Supervisor" in notes and "polls every 2 s" in notes
    assert "my own todo" not in run_engram(alice, "memory", "list", "--json").stdout
    assert b"my own todo" not in _remote_objects(remote), "a personal memory never leaves"
    # explain and search in alice's clone see bob's session at once (the index was extended)
    assert SPOTTER_OTHER in run_engram(alice, "search", "subagent", "--json").stdout
    # the refs are engram's own: no branch changed, a plain clone or fetch does not bring them
    assert git(remote, "for-each-ref", "--format=%(refname)", "refs/heads").split() == ["refs/heads/main"]
    plain = remote.parent / "plain"
    git(remote.parent, "clone", "-q", "-b", "main", str(remote), str(plain))
    git(plain, "fetch", "-q")
    assert git(plain, "for-each-ref", "refs/engram", "refs/engram-remotes") == ""
    assert git(alice, "status", "--porcelain") == "", "the working tree and the index are untouched"
    again = json.loads(run_engram(alice, "push", "--json").stdout)
    assert again["sessions"] == [] and again["refs"] == [], "nothing new: nothing pushed"


def _explain_first(root: Path, span: str) -> str:
    doc = json.loads(run_engram(root, "explain", span, "--brief").stdout)
    return str(doc["sessions"][0]["session_id"]) if doc["sessions"] else ""


def test_a_clone_at_another_path_explains_the_same_spans_with_the_same_session_first(
        team: dict[str, Path], spotter: Path) -> None:
    alice, bob = team["alice"], team["bob"]
    run_engram(alice, "push")
    run_engram(bob, "pull")
    cwd = session_cwd(spotter / f"{SPOTTER_MAIN}.jsonl")
    assert not str(bob).startswith(cwd) and not str(alice).startswith(cwd)
    files = [rel for rel, text in sorted(created_by(spotter, SPOTTER_MAIN).items())
             if (bob / rel).is_file() and (alice / rel).read_text() == text and len(text.splitlines()) > 30][:3]
    assert files
    for rel in files:
        span = f"{rel}:5-25"
        first = _explain_first(alice, span)
        assert first == SPOTTER_MAIN
        assert _explain_first(bob, span) == first, span


def test_purges_propagate_as_tombstones(team: dict[str, Path], spotter: Path) -> None:
    alice, bob, remote = team["alice"], team["bob"], team["remote"]
    note = json.loads(run_engram(alice, "remember", "The scanner keeps a secret sauce recipe", "--json").stdout)["id"]
    run_engram(bob, "push")
    run_engram(alice, "pull")
    run_engram(alice, "push")
    run_engram(bob, "pull")
    assert _sessions(bob) == {SPOTTER_MAIN, SPOTTER_OTHER}
    assert "secret sauce" in run_engram(bob, "memory", "list", "--json").stdout

    run_engram(alice, "tapes", "rm", SPOTTER_OTHER, "--purge")
    run_engram(alice, "forget", note, "--purge")
    pushed = json.loads(run_engram(alice, "push", "--json").stdout)
    assert pushed["tombstones"] >= 1
    pulled = json.loads(run_engram(bob, "pull", "--json").stdout)
    assert pulled["purged"], pulled
    assert _sessions(bob) == {SPOTTER_MAIN}
    assert "secret sauce" not in run_engram(bob, "memory", "list", "--json").stdout
    assert not any(b"secret sauce" in p.read_bytes() for p in (bob / ".engram" / "events").rglob("*.jsonl"))
    index = b"".join(p.read_bytes() for p in (bob / ".engram").glob("index.sqlite*"))
    assert b"secret sauce" not in index and b"Work on bead spotter-dov" not in index, "nor in its free pages"
    # the tip of the remote's index no longer lists them (its history still holds them: docs/sharing.md)
    tree = git(remote, "ls-tree", "-r", "--name-only", "refs/engram/index")
    assert "sessions/" in tree and all(SPOTTER_OTHER not in git(remote, "show", f"refs/engram/index:{p}")
                                       for p in tree.split() if p.startswith("sessions/"))
    # bob pushes again: the purged session does not come back from his side
    run_engram(bob, "push")
    run_engram(alice, "pull")
    assert _sessions(alice) == {SPOTTER_MAIN}
    # ingested again, it has the same tape id: the tombstone keeps it here, and push says so
    run_engram(alice, "ingest", "--again", str(spotter / f"{SPOTTER_OTHER}.jsonl"))
    dry = run_engram(alice, "push", "--dry-run")
    assert "would push 0 tapes" in dry.stdout and "purged earlier" in dry.stderr, dry.stderr
    shared = run_engram(alice, "tapes", "--shared", SPOTTER_OTHER).stdout
    assert "purged earlier" in shared and "`engram push` sends it" not in shared, shared


def _git_wrapper(tmp: Path, sleep_on: str) -> dict[str, str]:
    """PATH with a `git` that runs the real one, but stops for a minute (after touching
    tmp/stopped) when its arguments contain `sleep_on`: a push killed at a known point."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    folder = tmp / "wrap"
    folder.mkdir(exist_ok=True)
    script = folder / "git"
    script.write_text(f"#!/bin/sh\ncase \"$*\" in *'{sleep_on}'*) touch '{tmp}/stopped'; sleep 60;; esac\n"
                      f"exec '{real}' \"$@\"\n")
    script.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def _kill(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def test_a_killed_push_and_a_killed_pull_recover(team: dict[str, Path], tmp_path: Path) -> None:
    alice, bob, remote = team["alice"], team["bob"], team["remote"]
    # push killed after its tapes reached the remote, before the index named them
    env = _git_wrapper(tmp_path, "refs/engram/index")
    proc = _engram(alice, "push", env=env)
    deadline = time.time() + 120
    while not (tmp_path / "stopped").exists() and time.time() < deadline:
        time.sleep(0.1)
    _kill(proc)
    assert git(remote, "for-each-ref", "--format=%(refname)", "refs/engram/tapes"), "the shard was pushed"
    assert git(remote, "for-each-ref", "refs/engram/index") == ""
    before = sorted(p.name for p in (bob / ".engram" / "tapes").iterdir())
    failed = run_engram(bob, "pull", check=False)
    assert failed.returncode == 1 and "holds no Engram data" in failed.stderr
    assert sorted(p.name for p in (bob / ".engram" / "tapes").iterdir()) == before
    run_engram(alice, "push")
    # pulls killed at known points, each in a fresh clone (listing the remote's refs, reading the
    # index's tree, recording the landed shard): the store stays usable, the next pull completes.
    # (Killed after a delay instead, a quick pull on a quiet machine finished before any kill.)
    for i, point in enumerate(("ls-remote", "ls-tree", "refs/engram-remotes/origin/tapes")):
        clone = tmp_path / f"carol{i}" / "app"
        git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(clone))
        run_engram(clone, "init")
        here = tmp_path / f"carol{i}"
        proc = _engram(clone, "pull", env=_git_wrapper(here, point))
        deadline = time.time() + 120
        while not (here / "stopped").exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the pull ended before git was asked for {point}"
        _kill(proc)
        assert run_engram(clone, "tapes", "--json").returncode == 0
        run_engram(clone, "pull")
        assert _sessions(clone) == {SPOTTER_MAIN}
        assert SPOTTER_MAIN in run_engram(clone, "search", "spotter", "--json").stdout
    run_engram(bob, "pull")
    assert _sessions(bob) == {SPOTTER_MAIN, SPOTTER_OTHER}


def test_nothing_unredacted_leaves(team: dict[str, Path], tmp_path: Path) -> None:
    from secret_kinds import kinds, probe_session

    alice, remote = team["alice"], team["remote"]
    probe = kinds(7)
    folder = tmp_path / "probe"
    folder.mkdir()
    run_engram(alice, "ingest", str(probe_session(folder, probe)))
    # a session captured before its token's rule was added: pushed only after `redact --again`
    token = "itk_" + "Q7wz" * 8
    late = tmp_path / "late.txt"
    late.write_text(f"the deploy uses {token} for the internal API\n")
    run_engram(alice, "ingest", str(late))
    (alice / ".engram" / "config.toml").write_text(
        '[redact]\npatterns = [{ name = "internal-token", pattern = "itk_[A-Za-z0-9]{32}" }]\n')
    run_engram(alice, "remember", f"the staging password is password={'Zq9' * 6}x", "--scope", "team")
    dry = json.loads(run_engram(alice, "push", "--dry-run", "--json").stdout)
    held = [s for s in dry["excluded"] if "redact --again" in (s["excluded"] or "")]
    assert len(held) == 1 and held[0]["would_redact"] == {"internal-token": 1}
    assert dry["memories"]["held_back"], "a memory holding a secret stays"
    assert any(sum(s["redacted"].values()) > 0 for s in dry["sessions"]), "redaction counts are listed"
    run_engram(alice, "push")
    run_engram(alice, "redact", "--again")
    run_engram(alice, "push")
    blob = _remote_objects(remote)
    assert token.encode() not in blob
    assert b"Zq9Zq9Zq9" not in blob
    for _kind, _text, secrets in probe:
        for secret in secrets:
            assert secret.encode() not in blob, _kind
    assert b"[REDACTED:internal-token]" in blob, "the rewritten tape went"


def test_push_scans_again_only_tapes_redacted_under_other_rules(team: dict[str, Path]) -> None:
    """Capture records beside the tapes the redaction rules each one is clean under, never in the
    tape (its bytes and id stay what they were); push trusts a tape recorded under today's rules
    (redaction is idempotent) and runs today's rules over every other one: a tape with no record
    (an older engram's), or captured before the config's patterns changed."""
    from engram.capture.redact import Redactor
    from engram.share.choose import mark_private
    from engram.store.repo import Store
    from engram.tape.redacted import recorded
    from engram.tape.reader import TapeReader
    from engram.tape.writer import tape_files, write_tape

    bob, remote = team["bob"], team["remote"]
    store = Store(bob)
    (captured,) = tape_files(store.tapes_dir)
    with TapeReader(captured, store.objects_dir) as r:
        meta = r.meta()
    assert "redacted_with" not in meta and recorded(store.dir)[captured.name[:64]] == {Redactor().digest}

    def dry() -> dict[str, Any]:
        return json.loads(run_engram(bob, "push", "--dry-run", "--json").stdout)

    doc = dry()
    assert doc["scanned_again"] == 0 and [s["session_id"] for s in doc["sessions"]] == [SPOTTER_OTHER]
    # a tape an older engram wrote (no rules recorded), holding what a pattern added since catches
    token = "itk_" + "Q7wz" * 8
    old_meta = {**meta, "session_id": "a-session-from-before", "prev": None}
    old = write_tape(store.tapes_dir, store.objects_dir, [old_meta, {
        "kind": "msg.out", "ts": meta["started"], "block": "text", "text": f"the deploy uses {token} here"}])
    (bob / ".engram" / "config.toml").write_text(
        '[redact]\npatterns = [{ name = "internal-token", pattern = "itk_[A-Za-z0-9]{32}" }]\n')
    doc = dry()
    assert doc["scanned_again"] == 2, "both: one records other rules, one none"
    assert [(s["tape"], s["would_redact"]) for s in doc["excluded"]] == [(old.id, {"internal-token": 1})]
    mark_private(store, ["a-session-from-before"])  # nothing of it leaves: not scanned on each push
    doc = dry()
    assert doc["scanned_again"] == 1 and [(s["tape"], s["excluded"]) for s in doc["excluded"]] == [
        (old.id, "private (engram tapes --private)")]
    mark_private(store, ["a-session-from-before"], private=False)
    run_engram(bob, "redact", "--again")
    (rewritten,) = [p for p in tape_files(store.tapes_dir) if p != captured]
    now = Redactor([{"name": "internal-token", "pattern": "itk_[A-Za-z0-9]{32}"}]).digest
    assert captured.exists(), "a tape the new rules leave as it is keeps its id"
    assert {p.name[:64]: now in recorded(store.dir)[p.name[:64]] for p in (captured, rewritten)} == {
        captured.name[:64]: True, rewritten.name[:64]: True}, "both clean under today's rules"
    doc = dry()
    assert doc["scanned_again"] == 0 and doc["excluded"] == [] and len(doc["sessions"]) == 2, "redact --again checked both"
    run_engram(bob, "push")
    blob = _remote_objects(remote)
    assert token.encode() not in blob and b"[REDACTED:internal-token]" in blob


def test_push_without_a_git_identity_says_how_to_set_one(team: dict[str, Path], tmp_path: Path) -> None:
    """git's own words were "fatal: no email was given and auto-detection is disabled": the user
    learns what to set from engram, and nothing reaches the remote."""
    alice = team["alice"]
    git(alice, "config", "user.useConfigOnly", "true")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_")) and k != "EMAIL"}
    env.update(HOME=str(tmp_path), GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    before = _remote_objects(team["remote"])
    proc = subprocess.run([sys.executable, "-m", "engram.cli", "push"], cwd=alice, capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 1, proc.stdout
    assert "git config user.email" in proc.stderr and "Traceback" not in proc.stderr
    assert _remote_objects(team["remote"]) == before


def test_push_counts_the_team_memories_it_adds_not_every_one_again(team: dict[str, Path]) -> None:
    """Each push said "pushed … N team memories" for every team memory, though the remote had them
    all: it names those with events the remote lacks, of how many leave."""
    alice = team["alice"]
    run_engram(alice, "remember", "Retries back off exponentially", "--scope", "team")
    assert ", 1 team memory new or changed (of 1), " in run_engram(alice, "push", "--dry-run").stdout
    assert ", 1 team memory new or changed (of 1), " in run_engram(alice, "push").stdout
    again = run_engram(alice, "push", "--dry-run").stdout
    assert ", 0 team memories new or changed (of 1), " in again and "would push 0 tapes" in again
    run_engram(alice, "remember", "The cache is per process", "--scope", "team")
    doc = json.loads(run_engram(alice, "push", "--json").stdout)
    assert (doc["memories"]["team"], doc["memories"]["team_new"]) == (2, 1)
    # a purge leaves as a tombstone: it is no team memory (it read '2 team memories new or changed (of 1)')
    gone = run_engram(alice, "remember", "a token pasted by mistake", "--scope", "team").stdout.strip()
    run_engram(alice, "forget", gone, "--purge")
    said = run_engram(alice, "push", "--dry-run").stdout
    assert ", 0 team memories new or changed (of 2), 1 memory purge, " in said, said
    doc = json.loads(run_engram(alice, "push", "--dry-run", "--json").stdout)
    assert (doc["memories"]["team_new"], doc["memories"]["purges_new"]) == (0, 1)


def test_bad_remotes_get_clear_messages_and_leave_the_store_untouched(team: dict[str, Path], tmp_path: Path) -> None:
    alice, bob, remote = team["alice"], team["bob"], team["remote"]

    def store_state(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / ".engram").rglob("*"))
                if p.is_file() and "run" not in p.parts and p.name != "index.sqlite-shm"}

    before = store_state(bob)
    out = run_engram(bob, "pull", check=False)
    assert out.returncode == 1 and "holds no Engram data" in out.stderr and "Traceback" not in out.stderr
    out = run_engram(bob, "pull", "nowhere", check=False)
    assert out.returncode == 1 and "nowhere" in out.stderr and "Traceback" not in out.stderr
    out = run_engram(bob, "sync", "nowhere", check=False)
    assert out.returncode == 1 and "no git remote 'nowhere'" in out.stderr and "engram sync REMOTE" in out.stderr
    git(bob, "remote", "add", "gone", str(tmp_path / "gone.git"))  # a remote whose repository is not there
    out = run_engram(bob, "pull", "gone", check=False)
    assert out.returncode == 1 and "does not appear to be a git repository" in out.stderr, out.stderr
    assert {k for k in store_state(bob)} == set(before)

    # a ref pointing at garbage: a blob where the index commit should be
    junk = subprocess.run(["git", "-C", str(remote), "hash-object", "-w", "--stdin"], input=b"not an index\n",
                          capture_output=True, check=True).stdout.decode().strip()
    git(remote, "update-ref", "refs/engram/index", junk)
    for cmd in ("pull", "push"):
        out = run_engram(bob, cmd, check=False)
        assert out.returncode == 1 and "points at a blob" in out.stderr and "Traceback" not in out.stderr, out.stderr
    git(remote, "update-ref", "-d", "refs/engram/index")

    # an index whose tape blob is not the tape it names: not written, said so, the rest pulled
    run_engram(alice, "push")
    tip = git(remote, "rev-parse", "refs/engram/index").strip()
    entry_path = git(remote, "ls-tree", "-r", "--name-only", tip, "sessions/").split()[0]
    entry = json.loads(git(remote, "show", f"{tip}:{entry_path}"))
    garbage = subprocess.run(["git", "-C", str(remote), "hash-object", "-w", "--stdin"],
                             input=b"\x28\xb5\x2f\xfd garbage", capture_output=True, check=True).stdout.decode().strip()
    entry["blob"] = garbage
    new_entry = subprocess.run(["git", "-C", str(remote), "hash-object", "-w", "--stdin"],
                               input=json.dumps(entry).encode(), capture_output=True, check=True).stdout.decode().strip()
    listing = git(remote, "ls-tree", "-r", tip)
    rows = [ln.replace(ln.split()[2], new_entry) if ln.endswith(entry_path) else ln for ln in listing.splitlines()]
    tree = _nested_tree(remote, rows)
    commit = git(remote, "commit-tree", tree, "-p", tip, "-m", "corrupt").strip()
    git(remote, "update-ref", "refs/engram/index", commit)
    out = run_engram(bob, "pull", "--json", check=False)
    assert out.returncode == 1, out.stdout
    doc = json.loads(out.stdout)
    assert entry["tape"][:12] in " ".join(doc["damaged"]), doc
    assert not (bob / ".engram" / "tapes" / f"{entry['tape']}.jsonl.zst").exists()
    assert run_engram(bob, "tapes", "--json").returncode == 0


def _nested_tree(repo: Path, rows: list[str]) -> str:
    """A tree from `ls-tree -r` lines (blobs at any depth)."""
    from engram.share.git import Git

    files = {}
    for ln in rows:
        head, path = ln.split("\t", 1)
        files[path] = head.split()[2]
    return Git(repo).make_tree(files)


async def test_a_running_language_server_shows_pulled_sessions(team: dict[str, Path], spotter: Path,
                                                               client: LanguageClient) -> None:  # noqa: F811
    alice, bob = team["alice"], team["bob"]
    await asyncio.to_thread(run_engram, alice, "push")
    await start(client, bob)
    uri = ""
    for rel, text in sorted(created_by(spotter, SPOTTER_MAIN).items()):  # a file only alice's session wrote
        if (bob / rel).is_file() and (bob / rel).read_text() == text and len(text.splitlines()) > 30:
            uri = open_doc(client, bob / rel)
            if not await lenses(client, uri):
                break
    assert uri and not await lenses(client, uri), "bob has no session of this file yet"
    client.indexed.clear()  # type: ignore[attr-defined]
    await asyncio.to_thread(run_engram, bob, "pull")
    for _ in range(300):
        if client.indexed:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.1)
    assert client.indexed, "the server noticed the pull's new epoch"  # type: ignore[attr-defined]
    assert await lenses(client, uri), "the lenses show alice's session"


def test_what_leaves_is_chosen_by_marks_and_settings(team: dict[str, Path]) -> None:
    bob, remote = team["bob"], team["remote"]

    def dry() -> dict[str, str | None]:
        doc = json.loads(run_engram(bob, "push", "--dry-run", "--json").stdout)
        return {**{s["session_id"]: None for s in doc["sessions"]}, **{s["session_id"]: s["excluded"]
                                                                        for s in doc["excluded"]}}

    assert dry() == {SPOTTER_OTHER: None}
    run_engram(bob, "tapes", "--private", SPOTTER_OTHER[:8])
    assert "private" in str(dry()[SPOTTER_OTHER])
    pushed = json.loads(run_engram(bob, "push", "--json").stdout)
    assert pushed["sessions"] == [] and SPOTTER_OTHER not in str(pushed["refs"])
    assert git(remote, "for-each-ref", "refs/engram/tapes") == "", "nothing of a private session left"
    run_engram(bob, "tapes", "--shared", SPOTTER_OTHER)
    assert dry() == {SPOTTER_OTHER: None}
    config = bob / ".engram" / "config.toml"
    for setting, why in (('exclude_harnesses = ["claude-code"]', "harness claude-code"),
                         ('exclude_paths = ["lib/spotter/*"]', "touched lib/spotter/"),
                         ("max_age_days = 30", "older than 30 days")):
        config.write_text(f"[share]\n{setting}\n")
        assert why in str(dry()[SPOTTER_OTHER]), setting
    config.write_text('[share]\nmemory_scope = "everyone"\n')
    bad = run_engram(bob, "push", "--dry-run", check=False)
    assert bad.returncode == 1 and "share.memory_scope" in bad.stderr
    # marked private after it was pushed: said plainly, with what to do
    first = run_engram(bob, "tapes", "--private", SPOTTER_OTHER)
    assert "warning" not in first.stderr, "never pushed: nothing to warn about"
    run_engram(bob, "tapes", "--shared", SPOTTER_OTHER)
    config.write_text("")
    run_engram(bob, "push")
    late = run_engram(bob, "tapes", "--private", SPOTTER_OTHER[:8])
    assert "pushed to 'origin' already" in late.stderr and "cannot un-send" in late.stderr
    assert f"engram tapes rm {SPOTTER_OTHER[:8]} --purge" in late.stderr
    doc = json.loads(run_engram(bob, "tapes", "--private", SPOTTER_OTHER, "--json").stdout)
    assert list(doc["already_pushed"]) == ["origin"]


def test_pull_takes_sessions_since_a_date_and_of_this_clones_history(team: dict[str, Path], tmp_path: Path) -> None:
    alice, bob, remote = team["alice"], team["bob"], team["remote"]
    (alice / "notes.txt").write_text("local work\n")
    git(alice, "add", "notes.txt")
    git(alice, "commit", "-qm", "not pushed")  # a commit only alice has
    run_engram(alice, "record", "--", sys.executable, "-c", "print('recorded on the unpushed commit')")
    run_engram(alice, "push")
    run_engram(bob, "push")
    carol = tmp_path / "carol" / "app"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(carol))
    run_engram(carol, "init")
    since = json.loads(run_engram(carol, "pull", "--since", "2026-02-12", "--json").stdout)
    assert {s["session_id"] for s in since["sessions"]} == {SPOTTER_OTHER}
    assert any("began before 2026-02-12" in why for why in since["skipped"])
    rest = json.loads(run_engram(carol, "pull", "--json").stdout)
    assert {s["session_id"] for s in rest["sessions"]} == {SPOTTER_MAIN}, rest
    assert any("not in this clone's history" in why for why in rest["skipped"]), rest["skipped"]
    everything = json.loads(run_engram(carol, "pull", "--all", "--json").stdout)
    assert [s["harness"] for s in everything["sessions"]] == ["record"], everything
    bad = run_engram(carol, "pull", "--since", "last tuesday", check=False)
    assert bad.returncode == 2 and "YYYY-MM-DD" in bad.stderr


def test_pull_since_refuses_a_date_that_does_not_exist() -> None:
    """`pull --since 2026-13-45` passed the pattern and compared as text (a month 13 took every
    session of 2026); a date that is not one is a usage error, as a date that is no date is."""
    import argparse as ap  # noqa: PLC0415

    from engram.cli.share import since_date  # noqa: PLC0415

    for bad in ("2026-13-45", "2026-02-30", "2026-02-11T25:00"):
        with pytest.raises(ap.ArgumentTypeError, match="no such date or time"):
            since_date(bad)
    assert since_date("2026-02-11") == "2026-02-11" and since_date("2026-02-11 20:36") == "2026-02-11T20:36"
    assert since_date("2026-02-11T20:36:45.618Z") == "2026-02-11T20:36:45.618Z"


def test_a_push_that_loses_the_race_unions_and_retries(team: dict[str, Path], tmp_path: Path) -> None:
    alice, bob, remote = team["alice"], team["bob"], team["remote"]
    real = shutil.which("git")
    folder = tmp_path / "hold"
    folder.mkdir()
    # alice's first push of the index waits (after touching `held`) until `go` exists: bob pushes meanwhile
    (folder / "git").write_text(
        "#!/bin/sh\ncase \"$*\" in *push*refs/engram/index*) if [ ! -e '{d}/held' ]; then touch '{d}/held';"
        " while [ ! -e '{d}/go' ]; do sleep 0.1; done; fi;; esac\nexec '{git}' \"$@\"\n".format(d=folder, git=real))
    (folder / "git").chmod(0o755)
    proc = _engram(alice, "push", "--json", env={"PATH": f"{folder}:{os.environ['PATH']}"})
    deadline = time.time() + 120
    while not (folder / "held").exists() and time.time() < deadline:
        time.sleep(0.1)
    assert (folder / "held").exists()
    run_engram(bob, "push")
    (folder / "go").touch()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert json.loads(out)["attempts"] >= 2, "rejected once, then unioned with bob's push"
    listed = git(remote, "ls-tree", "-r", "--name-only", "refs/engram/index", "sessions/").split()
    sessions = {json.loads(git(remote, "show", f"refs/engram/index:{p}"))["session_id"] for p in listed}
    assert sessions == {SPOTTER_MAIN, SPOTTER_OTHER}
    assert len(git(remote, "rev-list", "refs/engram/index").split()) == 2, "bob's commit, then alice's on top"


def test_a_purged_tape_leaves_the_tip_of_its_shard_with_its_objects(team: dict[str, Path], tmp_path: Path) -> None:
    from secret_kinds import kinds, probe_session

    alice, remote = team["alice"], team["remote"]
    (alice / ".engram" / "config.toml").write_text("[ingest]\nobject_threshold = 4096\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    run_engram(alice, "ingest", str(probe_session(probe, kinds(3), big=8192)))
    assert list((alice / ".engram" / "objects").rglob("*")), "the probe's long output is an object"
    run_engram(alice, "push")

    def shard_files() -> list[str]:
        refs = git(remote, "for-each-ref", "--format=%(refname)", "refs/engram/tapes").split()
        return [p for ref in refs for p in git(remote, "ls-tree", "-r", "--name-only", ref).split()]

    assert any(p.startswith("objects/") for p in shard_files())
    run_engram(alice, "tapes", "rm", "5ec7e700-0000-4000-8000-000000000001", "--purge")
    run_engram(alice, "push")
    left = shard_files()
    assert not any(p.startswith("objects/") for p in left), left
    assert len([p for p in left if p.endswith(".jsonl.zst")]) == 1, "the main session's tape stays"


def _three_months(tmp_path: Path) -> tuple[Any, Any]:
    """Alice's store (six tapes over three months, each with a large string kept as an object)
    pushed to a bare remote, and Bob's empty store in another clone: (alice, bob)."""
    from engram.share.push import push
    from engram.store.repo import init_store
    from engram.tape.writer import write_tape

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    roots = []
    for name in ("alice", "bob"):
        root = tmp_path / name
        git(tmp_path, "init", "-q", str(root))
        git(root, "remote", "add", "origin", str(remote))
        roots.append(root)
    alice, _ = init_store(roots[0])
    for i, month in enumerate(("2026-09", "2026-10", "2026-11") * 2):
        meta = {"kind": "meta", "v": 1, "harness": "claude-code", "session_id": f"s{i}", "started": f"{month}-02T10:00:00Z",
                "cwd": "/home/dev/proj", "git_head": None, "sources": [], "prev": None}
        big = {"kind": "tool.result", "ts": meta["started"], "call_id": f"c{i}", "name": "Bash", "is_error": False,
               "exit_code": 0, "stdout": f"output {i} " * 4000, "stderr": ""}
        write_tape(alice.tapes_dir, alice.objects_dir, [meta, big], object_threshold=1000)
    push(alice, "origin")
    bob, _ = init_store(roots[1])
    return alice, bob


def test_a_large_pull_lands_shard_groups_while_the_next_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """Three months of tapes with large strings kept as objects, pulled a shard at a time (each
    group's fetch overlaps the landing of the one before): every tape and object arrives intact."""
    from engram.share import pull as pull_module
    from engram.share.git import Git
    from engram.tape.reader import intact
    from engram.tape.writer import tape_files

    alice, bob = _three_months(tmp_path)
    monkeypatch.setattr(pull_module, "PIPELINE_BYTES", 1)  # a group per shard, as in a pull of many MB
    fetches: list[list[str]] = []
    real = Git.fetch_started
    monkeypatch.setattr(Git, "fetch_started", lambda g, remote, specs: fetches.append(specs) or real(g, remote, specs))
    report = pull_module.pull(bob, "origin", everything=True)
    assert [len(specs) for specs in fetches] == [1, 1, 1], "one fetch per shard"
    assert len(report.sessions) == 6 and report.objects == 6 and not report.damaged
    assert sorted(p.name for p in tape_files(bob.tapes_dir)) == sorted(p.name for p in tape_files(alice.tapes_dir))
    assert all(intact(p) for p in tape_files(bob.tapes_dir))
    assert not list((bob.run_dir / "pull").iterdir()), "no temp file is left behind"
    assert report.indexed == 6


def _fetch_wrapper(tmp: Path, fail: str) -> str:
    """PATH with a `git` whose fetches of tape shards each wait (up to 30 s, until one has ended)
    for another to start, and log whether one did ("together") or not ("alone"); the fetch whose
    arguments contain `fail` then fails as a dropped connection does. Everything else is real git."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    folder, marks = tmp / "wrap", tmp / "marks"
    folder.mkdir()
    marks.mkdir()
    started = f"$(ls '{marks}' | grep -c '^started')"
    script = folder / "git"
    script.write_text(f"""#!/bin/sh
case "$*" in *' fetch '*'refs/engram/tapes/'*)
  touch '{marks}/started.'$$
  i=0
  while [ {started} -lt 2 ] && [ ! -e '{marks}/ended' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  if [ {started} -ge 2 ]; then echo together >> '{marks}/log'; else echo alone >> '{marks}/log'; fi
  case "$*" in *'{fail}'*) touch '{marks}/ended'; echo 'fatal: the remote end hung up unexpectedly' >&2; exit 128;; esac
  '{real}' "$@"; rc=$?; touch '{marks}/ended'; exit $rc;;
esac
exec '{real}' "$@"
""")
    script.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def test_two_shard_groups_download_at_once_and_a_failed_fetch_leaves_the_store_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shard groups are fetched two at a time (a `git fetch` keeps about one core busy: two use a
    2-core machine's both, and two streams over a network). When one fails the pull stops the
    other: the tapes landed before stay whole and nothing half-written is left; the next pull
    brings the rest, and no pull starts git's automatic repack of the repository."""
    from engram.errors import ShareError
    from engram.share import pull as pull_module
    from engram.share.pack import pack_names
    from engram.tape.reader import intact
    from engram.tape.writer import tape_files

    alice, bob = _three_months(tmp_path)
    monkeypatch.setattr(pull_module, "PIPELINE_BYTES", 1)  # a group per shard, as in a pull of many MB
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", _fetch_wrapper(tmp_path, fail="2026-10"))
    with pytest.raises(ShareError, match="git fetch failed: fatal: the remote end hung up"):
        pull_module.pull(bob, "origin", everything=True)
    log = (tmp_path / "marks" / "log").read_text().split()
    assert len(log) >= 2 and set(log) == {"together"}, f"the first two shards' fetches ran at once: {log}"
    landed = tape_files(bob.tapes_dir)
    assert len(landed) == 2 and all(intact(p) for p in landed), "September's two tapes landed whole"
    assert not list((bob.run_dir / "pull").iterdir()), "no temp file is left behind"
    assert run_engram(bob.root, "tapes", "--json").returncode == 0
    monkeypatch.setenv("PATH", path)
    git(bob.root, "config", "gc.autoPackLimit", "1")  # (git's own default is 50 packs)
    git(bob.root, "config", "gc.autoDetach", "false")
    report = pull_module.pull(bob, "origin", everything=True)
    assert sorted(p.name for p in tape_files(bob.tapes_dir)) == sorted(p.name for p in tape_files(alice.tapes_dir))
    assert all(intact(p) for p in tape_files(bob.tapes_dir)) and not report.damaged
    packs = pack_names(Path(git(bob.root, "rev-parse", "--absolute-git-dir").strip()) / "objects" / "pack")
    assert len(packs) >= 3, f"each shard's fetch kept its own pack, not repacked by a pull: {packs}"


def test_index_workers_take_the_catalogues_check_only_for_the_bytes_it_checked(tmp_path: Path) -> None:
    """A pulled tape is hashed once (as it is catalogued): the index workers are handed its identity.
    A file changed since has another identity, and a worker hashes it: a tape replaced by other
    bytes under the same name is refused, never indexed under that name."""
    from engram.errors import CorruptTape
    from engram.tape.reader import TapeReader, trust, verified_as
    from engram.tape.writer import write_tape

    meta = {"kind": "meta", "v": 1, "harness": "claude-code", "session_id": "s1", "started": "2026-11-02T10:00:00Z",
            "cwd": "/home/dev/proj", "git_head": None, "sources": [], "prev": None}
    tapes, objects = tmp_path / "tapes", tmp_path / "objects"
    one = write_tape(tapes, objects, [meta, {"kind": "msg.in", "ts": meta["started"], "text": "one"}])
    two = write_tape(tapes, objects, [meta, {"kind": "msg.in", "ts": meta["started"], "text": "two, longer"}])
    ident = verified_as(one.path)
    assert ident is not None and ident[0] == str(one.path), "written (or catalogued) here: checked"
    trust(ident)  # (what a worker does with it)
    os.chmod(one.path, 0o644)
    shutil.copyfile(two.path, one.path)  # other bytes under the first tape's name
    assert verified_as(one.path) is None
    with pytest.raises(CorruptTape):
        TapeReader(one.path)  # (this process: the identity it trusted is not the file's any more)
    # A fresh process, as a pull's index worker is, handed the old identity: it hashes the file.
    code = ("import sys; from pathlib import Path; from engram.tape.reader import TapeReader, trust\n"
            "from engram.errors import CorruptTape\ntrust(tuple(sys.argv[2:]))\n"
            "try:\n    TapeReader(Path(sys.argv[1])).close(); print('opened')\n"
            "except CorruptTape:\n    print('refused')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code, str(one.path), *map(str, ident)], capture_output=True,
                         text=True, env=env, check=True).stdout.strip()
    assert out == "refused"


def _list_under_another_id(remote: Path, fake: str) -> str:
    """Forge the remote's index so that it also lists, under the tape id `fake`, the blob of a real
    tape (valid zstd, a valid tape: only its content does not match the id). Returns that blob."""
    tip = git(remote, "rev-parse", "refs/engram/index").strip()
    entry_path = git(remote, "ls-tree", "-r", "--name-only", tip, "sessions/").split()[0]
    entry = json.loads(git(remote, "show", f"{tip}:{entry_path}"))
    forged = {**entry, "tape": fake, "session_id": "forged-session"}
    blob = subprocess.run(["git", "-C", str(remote), "hash-object", "-w", "--stdin"], input=json.dumps(forged).encode(),
                          capture_output=True, check=True).stdout.decode().strip()
    rows = [*git(remote, "ls-tree", "-r", tip).splitlines(), f"100644 blob {blob}\tsessions/{fake}.json"]
    commit = git(remote, "commit-tree", _nested_tree(remote, rows), "-p", tip, "-m", "forged").strip()
    git(remote, "update-ref", "refs/engram/index", commit)
    return str(entry["blob"])


def test_a_pulled_tape_whose_content_is_not_its_id_is_quarantined_and_named(team: dict[str, Path],
                                                                             tmp_path: Path) -> None:
    """A pull writes each tape as git verified it and checks it against its id where it is first
    read, when it is catalogued: a tape whose content is another tape's is never catalogued,
    indexed, shown or pushed on; it is moved to .engram/quarantine/ and the pull names it."""
    alice, bob, remote = team["alice"], team["bob"], team["remote"]
    run_engram(alice, "push")
    fake = "ab" * 32
    _list_under_another_id(remote, fake)
    out = run_engram(bob, "pull", "--all", "--json", check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert any(fake[:12] in d and "quarantine" in d for d in doc["damaged"]), doc
    assert [s["session_id"] for s in doc["sessions"]] == [SPOTTER_MAIN], "the rest is pulled, the bad one not counted"
    assert not (bob / ".engram" / "tapes" / f"{fake}.jsonl.zst").exists()
    assert (bob / ".engram" / "quarantine" / f"{fake}.jsonl.zst").exists()
    assert _sessions(bob) == {SPOTTER_MAIN, SPOTTER_OTHER}
    assert "forged-session" not in run_engram(bob, "search", "spotter", "--json").stdout
    human = run_engram(bob, "pull", "--all", check=False)  # (fetched again, refused again: said in words too)
    assert human.returncode == 1 and fake[:12] in human.stderr and "Traceback" not in human.stderr

    # --no-index: written unchecked, said so; `engram index` checks, quarantines and names it
    carol = tmp_path / "carol" / "app"
    git(tmp_path, "clone", "-q", "-b", "main", str(remote), str(carol))
    run_engram(carol, "init")
    out = run_engram(carol, "pull", "--all", "--no-index")
    assert "checked against its id when `engram index`" in out.stdout, out.stdout
    assert (carol / ".engram" / "tapes" / f"{fake}.jsonl.zst").exists()
    # pushing elsewhere before it is indexed never sends the tape under the id it does not match
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", str(other))
    pushed = run_engram(carol, "push", str(other), check=False)
    assert pushed.returncode == 1 and fake in pushed.stderr and "does not match its id" in pushed.stderr
    assert "Traceback" not in pushed.stderr
    assert git(other, "for-each-ref", "refs/engram") == "", "nothing was pushed"
    indexed = run_engram(carol, "index")
    assert fake in indexed.stderr and "quarantine" in indexed.stderr, indexed.stderr
    assert not (carol / ".engram" / "tapes" / f"{fake}.jsonl.zst").exists()
    assert _sessions(carol) == {SPOTTER_MAIN}


def test_cataloguing_checks_each_tape_once_and_names_the_ones_it_quarantines(tmp_path: Path) -> None:
    """`reconcile` (the first read of a pulled tape) checks each tape against its id from the
    decompression that makes its row, records the check for the index workers, and returns the
    tapes it moved to quarantine/."""
    from engram.index.catalog import reconcile
    from engram.index.db import open_db
    from engram.store.repo import init_store
    from engram.tape.reader import verified_as
    from engram.tape.writer import write_tape

    src, _ = init_store(tmp_path / "src")
    meta = {"kind": "meta", "v": 1, "harness": "claude-code", "session_id": "s1", "started": "2026-11-02T10:00:00Z",
            "cwd": "/home/dev/proj", "git_head": None, "sources": [], "prev": None}
    good = write_tape(src.tapes_dir, src.objects_dir, [meta, {"kind": "msg.in", "ts": meta["started"], "text": "one"}])
    other = write_tape(src.tapes_dir, src.objects_dir, [meta, {"kind": "msg.in", "ts": meta["started"], "text": "2"}])
    dst, _ = init_store(tmp_path / "dst")
    dst.tapes_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(good.path, dst.tapes_dir / good.path.name)  # (as a landing writes it: not checked here)
    bad = "cd" * 32
    shutil.copyfile(other.path, dst.tapes_dir / f"{bad}.jsonl.zst")  # a valid tape under another id
    assert verified_as(dst.tapes_dir / good.path.name) is None
    db = open_db(dst)
    try:
        assert reconcile(db, dst) == [bad]
        assert [r[0] for r in db.execute("SELECT id FROM tapes")] == [good.path.name[:64]]
    finally:
        db.close()
    assert verified_as(dst.tapes_dir / good.path.name) is not None, "the workers are handed this check"
    assert (dst.quarantine_dir / f"{bad}.jsonl.zst").exists() and not (dst.tapes_dir / f"{bad}.jsonl.zst").exists()


def test_shard_groups_take_every_wanted_tape_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pull's shard groups, whatever the sizes: every wanted tape in exactly one group, in shard
    order (a small last group joins the one before; a pull of ~100 MB over 3 months failed there)."""
    from engram.share import pull as pull_module

    monkeypatch.setattr(pull_module, "PIPELINE_BYTES", 48)
    for sizes in ([33, 33, 33], [10, 60, 10], [50, 50, 50, 1], [100], [1, 1], [60, 60]):
        wanted = [{"tape": f"t{i}", "shard": f"2026-{i:02d}", "size": size} for i, size in enumerate(sizes)]
        groups = pull_module._groups(wanted)
        assert [e["tape"] for g in groups for e in g] == [e["tape"] for e in wanted], (sizes, groups)
        assert all(groups)
