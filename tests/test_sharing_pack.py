"""A pull lands tapes straight from the pack its `git fetch` wrote (engram/share/pack.py), with
real git and a bare remote: byte for byte what git holds, anything it cannot read simply left to
`git cat-file`, and a pack damaged on disk after git checked it costs the damaged tape only."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, run_engram

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _blobs(repo: Path) -> dict[str, bytes]:
    """Every blob of the repository, as git gives it."""
    listing = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    shas = [line.split()[0] for line in listing.splitlines() if line.endswith(" blob")]
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="".join(s + "\n" for s in shas).encode(),
                         capture_output=True, check=True).stdout
    blobs, at = {}, 0
    for sha in shas:
        nl = out.index(b"\n", at)
        size = int(out[at:nl].split()[2])
        blobs[sha] = out[nl + 1:nl + 1 + size]
        at = nl + 1 + size + 1
    return blobs


def _reader(repo: Path):  # type: ignore[no-untyped-def]
    from engram.share.pack import PackReader, pack_names

    folder = repo / ".git" / "objects" / "pack"
    return PackReader([folder / n for n in sorted(pack_names(folder))])


def test_a_blob_read_from_a_pack_is_the_one_git_gives_or_none(tmp_path: Path) -> None:
    """Stored (level 0) blobs come out as pieces of the pack, deflated ones inflated, deltas and
    anything odd as None (the caller asks git): never other bytes than git's."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    text = "".join(f"line {i}: {'words ' * (i % 7)}\n" for i in range(4000))  # ~100 KB, compressible
    noise = os.urandom(200_000)  # (several 64 KB stored blocks)
    for version in range(4):
        (repo / "a.txt").write_text(text + f"version {version}\n" * (version + 1))
        (repo / "b.bin").write_bytes(noise[version:])
        (repo / "empty").write_bytes(b"")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"v{version}")
    truth = _blobs(repo)

    git(repo, "-c", "pack.compression=0", "-c", "core.compression=0", "repack", "-q", "-adf", "--window=0")
    reader = _reader(repo)
    got = {sha: reader.blob(sha) for sha in truth}
    assert all(p is not None and b"".join(p) == truth[sha] for sha, p in got.items()), "level 0: every blob, as git has it"
    assert max(len(p or []) for p in got.values()) > 1, "a blob over 64 KB comes in several pieces"

    git(repo, "-c", "pack.compression=9", "repack", "-q", "-adf", "--window=10", "--depth=10")
    reader = _reader(repo)
    got = {sha: reader.blob(sha) for sha in truth}
    read = [sha for sha, p in got.items() if p is not None]
    assert all(b"".join(got[sha] or []) == truth[sha] for sha in read)
    assert read and len(read) < len(truth), "deflated blobs are read here, deltas left to git"

    # an index that is not a version-2 SHA-1 index of this pack: nothing is read from it
    folder = repo / ".git" / "objects" / "pack"
    idx = next(folder.glob("pack-*.idx"))
    odd = folder / "pack-odd"
    shutil.copyfile(idx.with_suffix(".pack"), odd.with_suffix(".pack"))
    data = bytearray(idx.read_bytes())
    data[-30] ^= 0xFF  # (the pack checksum it records)
    odd.with_suffix(".idx").write_bytes(bytes(data))
    from engram.share.pack import PackReader

    assert all(PackReader([odd]).blob(sha) is None for sha in truth)
    assert PackReader([folder / "pack-missing"]).blob(next(iter(truth))) is None
    assert reader.blob("0" * 40) is None and reader.blob("not hex") is None


def _store_with_tapes(tmp: Path, n: int) -> tuple[Path, Path]:
    """alice's store with `n` tapes of incompressible text pushed to a bare remote: (alice, remote)."""
    from engram.share.push import push
    from engram.store.repo import init_store
    from engram.tape.writer import write_tape

    remote = tmp / "remote.git"
    git(tmp, "init", "-q", "--bare", str(remote))
    alice = tmp / "alice"
    git(tmp, "init", "-q", str(alice))
    git(alice, "remote", "add", "origin", str(remote))
    store, _ = init_store(alice)
    for i in range(n):
        meta = {"kind": "meta", "v": 1, "harness": "claude-code", "session_id": f"s{i}",
                "started": "2026-11-02T10:00:00Z", "cwd": "/home/dev/proj", "git_head": None, "sources": [], "prev": None}
        body = {"kind": "msg.out", "ts": meta["started"], "block": "text", "text": os.urandom(60_000).hex()}
        write_tape(store.tapes_dir, store.objects_dir, [meta, body], object_threshold=1 << 30)
    push(store, "origin")
    return alice, remote


def _clone(tmp: Path, remote: Path, name: str) -> Path:
    root = tmp / name
    git(tmp, "init", "-q", str(root))
    git(root, "remote", "add", "origin", str(remote))
    run_engram(root, "init")
    return root


def _tapes(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / ".engram" / "tapes").glob("*.jsonl.zst")}


_DAMAGE = '''#!{python}
"""git, then: after a fetch of tape shards, one byte of the last object git wrote is flipped
(disk damage after git checked it)."""
import glob, os, subprocess, sys
args = sys.argv[1:]
code = subprocess.run([{real!r}, *args]).returncode
if code == 0 and "fetch" in args and any("refs/engram/tapes/" in a for a in args):
    objects = os.path.join(args[args.index("-C") + 1], ".git", "objects")
    packs = sorted(glob.glob(os.path.join(objects, "pack", "pack-*.idx")), key=os.path.getmtime)
    if packs:  # the last object of the newest pack (a tape: blobs come last), inside its first block
        listing = subprocess.run([{real!r}, "show-index"], stdin=open(packs[-1], "rb"), capture_output=True, text=True)
        path, at = packs[-1][:-4] + ".pack", max(int(line.split()[0]) for line in listing.stdout.splitlines()) + 200
    else:  # loose objects: the largest
        path = max(glob.glob(os.path.join(objects, "??", "*")), key=os.path.getsize)
        at = os.path.getsize(path) // 2
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))
sys.exit(code)
'''


def test_a_pull_lands_the_fetched_pack_byte_for_byte_and_damage_costs_one_tape(tmp_path: Path) -> None:
    alice, remote = _store_with_tapes(tmp_path, 5)
    bob = _clone(tmp_path, remote, "bob")
    report = json.loads(run_engram(bob, "pull", "--all", "--json").stdout)
    assert len(report["sessions"]) == 5 and not report["damaged"]
    assert _tapes(bob) == _tapes(alice), "byte for byte"
    # git kept the shard as a pack, and the landing read each tape from it
    reader = _reader(bob)
    for entry in report["sessions"]:
        pieces = reader.blob(git(bob, "rev-parse", f"refs/engram-remotes/origin/tapes/{_shard(remote)}:"
                                 f"{entry['tape']}.jsonl.zst").strip())
        assert pieces is not None
        assert hashlib.sha256(b"".join(pieces)).hexdigest() == _tapes(alice)[f"{entry['tape']}.jsonl.zst"]

    # git's copy damaged between the fetch and the landing: that tape is named and quarantined,
    # the others land, the store answers
    wrap = tmp_path / "wrap"
    wrap.mkdir()
    real = shutil.which("git")
    (wrap / "git").write_text(_DAMAGE.format(python=sys.executable, real=real))
    (wrap / "git").chmod(0o755)
    carol = _clone(tmp_path, remote, "carol")
    out = run_engram(carol, "pull", "--all", "--json", env={"PATH": f"{wrap}:{os.environ['PATH']}"}, check=False)
    assert out.stdout, f"the pull stopped: {out.stderr}"  # (through `git cat-file` alone, the damage stopped it)
    doc = json.loads(out.stdout)
    assert len(doc["damaged"]) == 1 and "quarantine" in doc["damaged"][0], out.stdout + out.stderr
    assert len(doc["sessions"]) == 4
    landed = _tapes(carol)
    assert len(landed) == 4 and all(_tapes(alice)[name] == digest for name, digest in landed.items())
    assert len(list((carol / ".engram" / "quarantine").glob("*.jsonl.zst"))) == 1
    assert len(json.loads(run_engram(carol, "tapes", "--json").stdout)) == 4


def _shard(remote: Path) -> str:
    refs = git(remote, "for-each-ref", "--format=%(refname)", "refs/engram/tapes/").split()
    assert len(refs) == 1
    return refs[0][len("refs/engram/tapes/"):]
