#!/usr/bin/env python3
"""Sharing through git (docs/sharing.md): `engram push` and `engram pull` of a store's tapes
against `git push` / `git fetch` of the same bytes as plain blobs, measured in the same run; and
indexing sessions a pull brought into a large store.

    python bench/sharing.py                                   # 200 MB of tapes, 100 MB store (a loaded VM)
    python bench/sharing.py --tapes 1GB --store-corpus bench/data/c1g --store-size 1GB   # the issue's sizes
    python bench/sharing.py --skip-transfer --store REPO --push-only   # push of REPO's real tapes only

Transfer: N tapes (`--tape-size` each, `--tapes` in all) are written into a store with engram's
own tape writer, their events random text (zstd leaves it as large as real tapes, which are
already compressed), over 3 months (3 shards). Then, each into a fresh repository and a fresh bare
remote on the same disk:
  reference push   `git hash-object -w --stdin-paths` of the tape files, `mktree`, `commit-tree`,
                   `git push` to a ref                                  (the same bytes as plain blobs)
  engram push      `engram.share.push.push` (reads every tape, runs the redaction rules again over those
                   whose meta does not record today's, then the same plumbing)
  reference fetch  `git fetch` of that ref into an empty repository
  engram pull      `engram.share.pull.pull` without indexing (fetch, land: check each object, write, fsync)
  catalogue        `reconcile` of what it brought, as the indexing of a pull starts: each tape read
                   once, checked against its id (its sha256) unless the landing of this process did
Index: a store ingested from a generated corpus (`--store-size` of raw transcripts), and
`--sessions` other generated sessions ingested in another clone and pushed; the store's clone
pulls them, and the incremental index of what arrived (`pull.index_new`) is timed (target ≤ 10 s).

Wall and CPU (this process plus its children: git) are printed for each row, with the load
average: on a shared machine compare a row with its reference of the same run.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common
import gen_sessions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engram.index.catalog import reconcile  # noqa: E402
from engram.index.db import open_db  # noqa: E402
from engram.share.pull import index_new, pull  # noqa: E402
from engram.share.push import push  # noqa: E402
from engram.store.repo import Store, init_store  # noqa: E402
from engram.tape.writer import tape_files, write_tape  # noqa: E402

MONTHS = ("2026-09", "2026-10", "2026-11")


def cpu_now() -> float:
    return time.process_time() + common.child_cpu()


def git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], input=input, capture_output=True, check=True).stdout.decode()


def new_repo(base: Path, name: str, remote: Path | None = None) -> Path:
    root = base / name
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    if remote is not None:
        git(root, "remote", "add", "origin", str(remote))
    return root


def bare(base: Path, name: str) -> Path:
    path = base / name
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def synthesize_tapes(store: Store, total: int, each: int) -> tuple[int, int]:
    """Tapes of random text summing to about `total` bytes on disk: (tapes, bytes)."""
    n = max(1, round(total / each))
    raw_per_event = 64 * 1024
    events_per_tape = max(1, round(each / 0.76 / raw_per_event))  # base64 text: zstd keeps ~76% of it
    written = 0
    for i in range(n):
        month = MONTHS[i % len(MONTHS)]
        meta = {"kind": "meta", "v": 1, "harness": "claude-code", "session_id": str(uuid.UUID(int=i + 1)),
                "started": f"{month}-{1 + i % 27:02d}T10:00:00Z", "cwd": "/home/dev/proj", "git_head": None,
                "sources": [], "prev": None}
        body = [{"kind": "msg.out", "ts": meta["started"], "block": "text",
                 "text": base64.b64encode(os.urandom(raw_per_event * 3 // 4)).decode()} for _ in range(events_per_tape)]
        t = write_tape(store.tapes_dir, store.objects_dir, [meta, *body], object_threshold=1 << 30)
        written += t.size
    return n, written


def timed(fn: object) -> tuple[float, float, object]:
    w0, c0 = time.perf_counter(), cpu_now()
    result = fn()  # type: ignore[operator]
    return time.perf_counter() - w0, cpu_now() - c0, result


def reference_push(base: Path, files: list[Path], tag: str = "") -> tuple[float, float]:
    repo = new_repo(base, f"plain-src{tag}")
    remote = bare(base, f"plain{tag}.git")

    def run() -> None:
        shas = git(repo, "hash-object", "-w", "--no-filters", "--stdin-paths",
                   input="".join(f"{p}\n" for p in files).encode()).split()
        listing = "".join(f"100644 blob {s}\t{p.name}\n" for s, p in zip(shas, files)).encode()
        tree = git(repo, "mktree", input=listing).strip()
        commit = git(repo, "commit-tree", tree, "-m", "plain").strip()
        git(repo, "push", "-q", str(remote), f"{commit}:refs/bench/plain")

    wall, cpu, _ = timed(run)
    return wall, cpu


def reference_fetch(base: Path, tag: str = "") -> tuple[float, float]:
    repo = new_repo(base, f"plain-dst{tag}")
    wall, cpu, _ = timed(lambda: git(repo, "fetch", "-q", str(base / "plain.git"), "refs/bench/plain:refs/bench/plain"))
    return wall, cpu


def warm(files: list[Path]) -> None:
    for p in files:
        with p.open("rb") as f:
            while f.read(1 << 20):
                pass


def transfer(base: Path, total: int, each: int, rounds: int = 0) -> list[list[str]]:
    src = new_repo(base, "alice", bare(base, "remote.git"))
    store, _ = init_store(src)
    t0 = time.perf_counter()
    n, size = synthesize_tapes(store, total, each)
    files = tape_files(store.tapes_dir)
    print(f"  {n} tapes, {size / 1e6:.1f} MB written in {time.perf_counter() - t0:.1f} s; load {common.load()}",
          flush=True)
    warm(files)
    ref_push = reference_push(base, files)
    warm(files)
    eng_push = timed(lambda: push(store, "origin"))
    dst = new_repo(base, "bob", base / "remote.git")
    dst_store, _ = init_store(dst)
    ref_fetch = reference_fetch(base)
    eng_pull = timed(lambda: pull(dst_store, "origin", everything=True, index=False))
    got = len(tape_files(dst_store.tapes_dir))
    if got != n:
        raise SystemExit(f"sharing.py: the pull brought {got} of {n} tapes")
    eng_cat = timed(lambda: catalogue(dst_store))
    mb = size / 1e6
    if rounds:
        interleaved(base, rounds, n, mb)

    def row(name: str, wall: float, cpu: float, ref: tuple[float, float] | None, vs: str = "reference") -> list[str]:
        if ref:
            vs = f"{ref[0] / wall:.2f}x (CPU {ref[1] / cpu:.2f}x)"
        return [name, f"{mb:.0f} MB", f"{wall:.1f} s", f"{cpu:.1f} s", f"{mb / wall:.1f} MB/s", vs]

    return [row("git push, plain blobs (reference)", *ref_push, None),
            row("engram push", eng_push[0], eng_push[1], ref_push),
            row("git fetch, plain blobs (reference)", *ref_fetch, None),
            row("engram pull (no index)", eng_pull[0], eng_pull[1], ref_fetch),
            row("  then catalogue what it brought", eng_cat[0], eng_cat[1], None, "—"),
            row("  pull + catalogue", eng_pull[0] + eng_cat[0], eng_pull[1] + eng_cat[1], ref_fetch)]


def interleaved(base: Path, rounds: int, n: int, mb: float) -> None:
    """`rounds` more pairs, each a reference fetch then a pull into fresh repositories (the order
    alternating): on a shared machine one pair's ratio swings by ±20%, their sums much less."""
    pairs = []
    for i in range(rounds):
        def pull_once() -> tuple[float, float]:
            dst = new_repo(base, f"bob-{i}", base / "remote.git")
            store, _ = init_store(dst)
            wall, cpu, _ = timed(lambda: pull(store, "origin", everything=True, index=False))
            if len(tape_files(store.tapes_dir)) != n:
                raise SystemExit(f"sharing.py: round {i} brought {len(tape_files(store.tapes_dir))} of {n} tapes")
            shutil.rmtree(dst)
            return wall, cpu

        if i % 2:
            pulled, ref = pull_once(), reference_fetch(base, f"-{i}")
        else:
            ref, pulled = reference_fetch(base, f"-{i}"), pull_once()
        shutil.rmtree(base / f"plain-dst-{i}")
        pairs.append((ref, pulled))
        print(f"  round {i + 1}: git fetch {ref[0]:.1f} s (CPU {ref[1]:.1f}), engram pull {pulled[0]:.1f} s "
              f"(CPU {pulled[1]:.1f}): {ref[0] / pulled[0]:.2f}x (CPU {ref[1] / pulled[1]:.2f}x); load {common.load()}",
              flush=True)
    ref_wall, ref_cpu = sum(r[0] for r, _ in pairs), sum(r[1] for r, _ in pairs)
    wall, cpu = sum(p[0] for _, p in pairs), sum(p[1] for _, p in pairs)
    print(f"  {rounds} rounds of {mb:.0f} MB: git fetch {ref_wall:.1f} s (CPU {ref_cpu:.1f}), engram pull {wall:.1f} s "
          f"(CPU {cpu:.1f}): {ref_wall / wall:.2f}x (CPU {ref_cpu / cpu:.2f}x) the reference's speed", flush=True)


def catalogue(store: Store) -> None:
    """What an indexing pull does first: catalogue the tapes that reached tapes/ (`reconcile`)."""
    db = open_db(store)
    try:
        reconcile(db, store)
    finally:
        db.close()


def ingest(repo: Path, engram: list[str], path: Path) -> tuple[float, float]:
    wall, cpu, _ = common.timed([*engram, "ingest", str(path)], repo, "ingest")
    return wall, cpu


def indexing(base: Path, args: argparse.Namespace) -> list[list[str]]:
    engram = args.engram.split()
    remote = bare(base, "team.git")
    corpus = args.store_corpus or base / "store-corpus"
    if not args.store and not (common.corpus_files(corpus / "projects") if (corpus / "projects").is_dir() else []):
        print(f"  generating a {args.store_size / 1e6:.0f} MB corpus in {corpus} ...", flush=True)
        gen_sessions.generate(corpus, args.store_size, 1, 2)
    big = new_repo(base, "big", remote)
    if args.store:  # a copy: the store given is never written
        shutil.copytree(args.store / ".engram", big / ".engram", symlinks=True,
                        ignore=shutil.ignore_patterns("run", "*.lock"))
        (big / ".engram" / "run").mkdir()
        store = Store(big)
        print(f"  store: a copy of {args.store}", flush=True)
    else:
        subprocess.run([*engram, "init"], cwd=big, check=True, capture_output=True)
        wall, cpu = ingest(big, engram, corpus / "projects")
        store = Store(big)
        print(f"  store: {args.store_size / 1e6:.0f} MB of transcripts ingested in {wall:.0f} s ({cpu:.0f} s CPU)",
              flush=True)
    tapes_mb = sum(p.stat().st_size for p in tape_files(store.tapes_dir)) / 1e6
    print(f"  {len(tape_files(store.tapes_dir))} tapes, {tapes_mb:.0f} MB; load {common.load()}", flush=True)
    if args.push_only:
        return store_push(base, store)
    mains: list[Path] = []
    seed = 2
    while len(mains) < args.sessions and seed < 12:  # (the generator picks each session's size itself)
        extra = base / f"extra-corpus-{seed}"
        gen_sessions.generate(extra, (args.sessions - len(mains)) * args.session_size, seed, 2)
        mains += sorted(p for p in (extra / "projects").glob("*/*.jsonl"))
        seed += 1
    mains = mains[: args.sessions]
    sessions = base / "extra-sessions"
    sessions.mkdir()
    for p in mains:
        shutil.copy(p, sessions / p.name)
    other = new_repo(base, "other", remote)
    subprocess.run([*engram, "init"], cwd=other, check=True, capture_output=True)
    ingest(other, engram, sessions)
    push(Store(other), "origin")
    rows = store_push(base, store)
    fetched = timed(lambda: pull(store, "origin", everything=True, index=False))
    n = len(fetched[2].sessions)  # type: ignore[attr-defined]
    # once serially in a copy (all the CPU in this process: the total work), once as a pull does it
    # (worker processes: their CPU is counted once the forkserver that waited for them is stopped)
    serial_root = base / "big-serial"  # (the store alone: git may be repacking the repository in the background)
    shutil.copytree(big / ".engram", serial_root / ".engram", symlinks=True)
    s_wall, s_cpu, _ = timed(lambda: index_new(Store(serial_root), workers=1))
    wall, cpu, indexed = timed(lambda: index_new(store) + _reap_workers())
    ok = "met" if wall <= 10 else "**not met**"
    return [*rows,
            [f"pull {n} sessions (fetch, verify, write)", f"{fetched[0]:.1f} s", f"{fetched[1]:.1f} s", "—"],
            [f"index the {indexed} pulled tapes into the {args.store_size / 1e6:.0f} MB store, serially",
             f"{s_wall:.2f} s", f"{s_cpu:.2f} s", "(the CPU of the work)"],
            [f"the same as `engram pull` does it ({min(2, os.cpu_count() or 1)} workers)", f"{wall:.2f} s",
             f"{cpu:.2f} s" if cpu else "—", f"≤ 10 s: {ok}"]]


def store_push(base: Path, store: Store) -> list[list[str]]:
    """Realistic tapes too: the large store's own, pushed as plain blobs (the reference) and by
    engram (the tapes not recorded clean under today's redaction rules are scanned again)."""
    files = tape_files(store.tapes_dir)
    mb = sum(p.stat().st_size for p in files) / 1e6
    print(f"  push of the store's tapes: load {common.load()}", flush=True)
    warm(files)
    ref = reference_push(base, files, "-store")
    warm(files)
    eng = timed(lambda: push(store, "origin"))
    scanned = eng[2].scanned  # type: ignore[attr-defined]
    print(f"  pushed; load {common.load()}", flush=True)
    return [[f"git push of the store's {mb:.0f} MB of tapes, plain blobs (reference)", f"{ref[0]:.1f} s",
             f"{ref[1]:.1f} s", "reference"],
            [f"engram push of the same {len(files)} tapes ({scanned} scanned again by today's redaction rules)",
             f"{eng[0]:.1f} s", f"{eng[1]:.1f} s",
             f"{ref[0] / eng[0]:.2f}x the reference's speed (CPU {ref[1] / eng[1]:.2f}x)"]]


def _reap_workers() -> int:
    """Stop multiprocessing's forkserver, so that its CPU and its workers' (which it waited for)
    count as this process's children's; 0 (nothing to add to the tapes indexed)."""
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)  # (private: best effort)
    if stop is not None:
        stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tapes", default="200MB", type=gen_sessions.parse_size, help="tape bytes to push and pull")
    ap.add_argument("--tape-size", default="2MB", type=gen_sessions.parse_size, help="bytes of each tape")
    ap.add_argument("--store-corpus", type=Path, help="raw transcripts of the large store (generated when empty)")
    ap.add_argument("--store", type=Path, help="a repository with an ingested .engram to copy as the large store "
                    "(instead of ingesting --store-corpus)")
    ap.add_argument("--store-size", default="100MB", type=gen_sessions.parse_size,
                    help="size of the store's corpus when it is generated")
    ap.add_argument("--sessions", type=int, default=100, help="sessions pulled into the large store")
    ap.add_argument("--session-size", default="500KB", type=gen_sessions.parse_size,
                    help="about this much raw transcript each")
    ap.add_argument("--engram", default=f"{sys.executable} -m engram.cli", help="the engram command for ingests")
    ap.add_argument("--workdir", type=Path, help="where the throw-away repositories go (default: system temp)")
    ap.add_argument("--rounds", type=int, default=0, help="then this many more reference fetches and pulls, "
                    "interleaved, each into fresh repositories (their sums are steadier than one pair)")
    ap.add_argument("--push-only", action="store_true", help="of the index part, only the push of the large "
                    "store's tapes and its reference (no sessions generated, pulled or indexed)")
    ap.add_argument("--skip-transfer", action="store_true")
    ap.add_argument("--skip-index", action="store_true")
    args = ap.parse_args(argv)
    print(f"machine: {common.machine()}\nengram: {common.engram_version()}\nload: {common.load()}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="engram-sharing-", dir=args.workdir))
    try:
        if not args.skip_transfer:
            print("transfer:", flush=True)
            rows = transfer(base, args.tapes, args.tape_size, args.rounds)
            print(common.fmt_table(["", "bytes", "wall", "CPU", "rate", "speed vs reference"], rows))
        if not args.skip_index:
            print("index:", flush=True)
            rows = indexing(base, args)
            print(common.fmt_table(["", "wall", "CPU", "target / reference"], rows))
        print(f"load after: {common.load()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
