"""`engram pull [REMOTE] [--since DATE] [--all]`: teammates' sessions, notes and purges from the
remote's `refs/engram/` into this store, then into its index incrementally.

Order, so that a pull killed anywhere leaves a store every command can use and the next pull
finishes the job: git fetches the index and the wanted shards (objects first, refs last); the
tombstones are applied (the purged tapes removed, as `engram tapes rm --purge` does); then each
object and tape is written atomically (temp file, fsync, rename), objects before the tapes
naming them, each object checked against its content address first; the memory log files are
unioned atomically under the memory lock; last, under the ingest lock, the new tapes are
catalogued and indexed (the code path of `engram index`: `reconcile` + `index_pending`) and the
index gets a new epoch, which a running language server polls to recompute its lenses. What to
fetch is decided from the index alone, so a tape already here is never fetched again.

A tape is checked against its id where it is first read, when it is catalogued
(`catalog.register_from_file`: the one decompression that makes its row also hashes it), not as
it lands: git has checked every blob's SHA-1 as it fetched it, and checking the tape twice cost a
pull a decompression and a sha256 of every tape (10 s of CPU a GB here). A tape whose content
does not match its id is moved to `.engram/quarantine/` there, never catalogued, indexed or
shown, and named in the pull's `damaged`. Until then nothing answers from it: commands find
tapes through the catalog, and those that read `tapes/` itself (push, gc) open each with a
`TapeReader`, which checks the id of a file it opens first in a process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import zstandard

from engram.capture.pipeline import _worker_count
from engram.capture.removal import remove_tapes, removed_sessions
from engram.errors import ShareError, UnknownTape
from engram.fsutil import atomic_write
from engram.index.build import index_pending
from engram.index.catalog import reconcile
from engram.index.db import open_db
from engram.index.memo import new_epoch
from engram.index.sql import immediate
from engram.memory.events import EventLog
from engram.share.choose import local_tombstones, purged_in, union_log
from engram.share.git import Fetching, Git
from engram.share.land import Landing, land
from engram.share.pack import NewPacks, PackReader
from engram.share.layout import (
    INDEX_REF,
    NAMESPACE,
    SHARD_PREFIX,
    RemoteIndex,
    is_address,
    tracking_ref,
)
from engram.share.push import fetch_index, open_git
from engram.store.lock import ingest_lock, memory_lock
from engram.store.repo import Store
from engram.tape.objects import object_path
from engram.tape.reader import MISMATCH, TapeReader, trust, verified_as
from engram.tape.writer import TAPE_SUFFIX, tape_files, tape_path

log = logging.getLogger(__name__)


@dataclass
class PullReport:
    remote: str
    sessions: list[dict[str, Any]] = field(default_factory=list)  # tapes pulled
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> tapes not pulled
    damaged: list[str] = field(default_factory=list)  # what did not match its address (not used)
    objects: int = 0
    bytes: int = 0
    purged: list[str] = field(default_factory=list)  # local tapes removed by a teammate's tombstone
    memory_files: int = 0  # log files that changed here
    indexed: int = 0
    unchecked: int = 0  # tapes written, not catalogued yet: checked against their ids when indexed

    def as_dict(self) -> dict[str, Any]:
        return {"remote": self.remote, "sessions": self.sessions, "skipped": self.skipped, "damaged": self.damaged,
                "objects": self.objects, "bytes": self.bytes, "purged": self.purged,
                "memory_files": self.memory_files, "indexed": self.indexed, "unchecked": self.unchecked}


def pull(store: Store, remote: str | None = None, *, since: str | None = None, everything: bool = False,
         index: bool = True) -> PullReport:
    if damage := store.damage(index=False):  # (files land before any lock: links out of the store first)
        raise ShareError(damage[0])
    git = open_git(store)
    remote = remote or git.default_remote()
    if not git.has_remote(remote):
        raise ShareError(f"no git remote {remote!r} (`git remote -v` lists them; `engram pull REMOTE` names one)")
    refs = git.remote_refs(remote, NAMESPACE)
    if INDEX_REF not in refs:
        raise ShareError(f"remote {remote!r} holds no Engram data (no {INDEX_REF}): nothing to pull. "
                         "`engram push` puts this clone's sessions there")
    idx = fetch_index(git, remote, refs)
    report = PullReport(remote)
    report.purged = _apply_tombstones(store, idx)
    wanted = _wanted(store, git, idx, refs, since, everything, report)
    _fetch_and_land(store, git, remote, refs, wanted, report)
    report.memory_files = _merge_memories(store, git, idx)
    if index:
        report.indexed, damaged = _index_new(store)
        _left_out(report, damaged)
    else:
        report.unchecked = len(report.sessions)
    if report.damaged:
        log.warning("%d items from the remote did not match their content address and were not kept: %s",
                    len(report.damaged), ", ".join(report.damaged[:5]))
    return report


def _left_out(report: PullReport, damaged: list[str]) -> None:
    """The tapes cataloguing left out (their content does not match their id: moved to
    quarantine/) named in `damaged`, and no longer counted as pulled."""
    bad = set(damaged)
    for tid in damaged:
        report.damaged.append(f"tape {tid[:12]} ({MISMATCH}; moved to .engram/quarantine/)")
    kept = [s for s in report.sessions if s["tape"] not in bad]
    report.bytes -= sum(int(s["size"]) for s in report.sessions if s["tape"] in bad)
    report.sessions = kept


def _fetch_and_land(store: Store, git: Git, remote: str, refs: dict[str, str], wanted: list[dict[str, Any]],
                    report: PullReport) -> None:
    """Fetch the shards holding `wanted` and land their objects, then their tapes, a group of
    shards at a time, in order: IN_FLIGHT groups download at once, and a group lands while the
    next ones download, so the landing costs little more wall time than the fetches
    (bench/sharing.py). A failed fetch stops the others: what landed before stays (whole files),
    the rest is fetched by the next pull."""
    groups = deque(_groups(wanted))
    packs = NewPacks(git.pack_folder())  # (what the fetches below write is read from directly: pack.py)
    running: deque[tuple[list[dict[str, Any]], Fetching]] = deque()

    def top_up() -> None:
        while groups and len(running) < IN_FLIGHT:
            group = groups.popleft()
            running.append((group, _fetch(git, remote, refs, group)))

    try:
        top_up()
        while running:
            group, started = running[0]
            started.wait()
            running.popleft()
            for ref in sorted({SHARD_PREFIX + str(e["shard"]) for e in group}):
                git.set_ref(tracking_ref(remote, ref), refs[ref])
            top_up()  # (before landing this group: the next downloads meanwhile)
            reader = packs.reader()
            _write_objects(store, git, group, report, reader)
            _write_tapes(store, git, group, report, reader)
    finally:
        for _, started in running:
            started.stop()


# Shard-group fetches running at once: one `git fetch` keeps 1.2-1.4 cores busy here (its
# upload-pack and index-pack, most of it SHA-1), so two use both cores of a 2-core machine, and
# over a network two streams; the landing of a group overlaps them (bench/README.md, `sharing.py`).
IN_FLIGHT = 2
PIPELINE_BYTES = 48 << 20  # a pull smaller than twice this fetches in one `git fetch`


def _groups(wanted: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`wanted` by shard, the shards in groups of at least PIPELINE_BYTES of tapes (one git fetch
    each: a small pull pays one fetch's start-up, not one a month)."""
    by_shard: dict[str, list[dict[str, Any]]] = {}
    for e in wanted:
        by_shard.setdefault(str(e["shard"]), []).append(e)
    groups: list[list[dict[str, Any]]] = [[]]
    size = 0
    for shard in sorted(by_shard):
        if size >= PIPELINE_BYTES:
            groups.append([])
            size = 0
        groups[-1] += by_shard[shard]
        size += sum(int(e.get("size") or 0) for e in by_shard[shard])
    if len(groups) > 1 and size < PIPELINE_BYTES:  # (a small last group joins the one before)
        last = groups.pop()  # (not `groups[-2] += groups.pop()`: its target is indexed before the pop)
        groups[-1] += last
    return [g for g in groups if g]


def _fetch(git: Git, remote: str, refs: dict[str, str], group: list[dict[str, Any]]) -> Fetching:
    shards = sorted({SHARD_PREFIX + str(e["shard"]) for e in group})
    return git.fetch_started(remote, [f"+{ref}:{tracking_ref(remote, ref)}" for ref in shards
                                      if not git.have([refs[ref]])])


def _skip(report: PullReport, why: str) -> None:
    report.skipped[why] = report.skipped.get(why, 0) + 1


def _wanted(store: Store, git: Git, idx: RemoteIndex, refs: dict[str, str], since: str | None, everything: bool,
            report: PullReport) -> list[dict[str, Any]]:
    """The remote's sessions to fetch: not here already, not purged or removed here, begun on or
    after `since`, and (unless `everything`) of a commit this clone knows or of no commit."""
    here = {p.name[: -len(TAPE_SUFFIX)] for p in tape_files(store.tapes_dir)}
    gone = set(local_tombstones(store)) | set(idx.tombstones)
    removed = removed_sessions(store)
    heads = {str(e.get("git_head")) for e in idx.sessions.values() if e.get("git_head")}
    known = git.have(heads) if not everything else heads
    out = []
    for tid, e in sorted(idx.sessions.items()):
        shard = SHARD_PREFIX + str(e.get("shard") or "")
        if tid in here:
            continue
        if tid in gone:
            _skip(report, "purged")
        elif (str(e.get("harness") or ""), str(e.get("session_id") or "")) in removed:
            _skip(report, "removed here (engram tapes rm)")
        elif since and str(e.get("started") or "") < since:
            _skip(report, f"began before {since}")
        elif e.get("git_head") and str(e["git_head"]) not in known:
            _skip(report, "of a commit not in this clone's history (--all pulls them)")
        elif shard not in refs or not isinstance(e.get("blob"), str):
            _skip(report, "listed, but its shard is not on the remote (an interrupted push: push again there)")
        else:
            out.append(e)
    return out


def _apply_tombstones(store: Store, idx: RemoteIndex) -> list[str]:
    """Remove here, for good, the tapes a teammate purged (each recorded in removed.jsonl, so
    this clone's pushes carry the tombstone on), then rebuild the index without them."""
    here = {p.name[: -len(TAPE_SUFFIX)] for p in tape_files(store.tapes_dir)}
    hit = sorted(set(idx.tombstones) & here)
    if not hit:
        return []
    from engram.index.reindex import reindex
    from engram.memory.memories import rebuild_projection
    from engram.store.gc import collect

    for tid in hit:
        try:
            remove_tapes(store, tid, purge=True, why="purged by a teammate (engram pull)")
        except UnknownTape:  # on disk but never catalogued: delete the file itself
            tape_path(store.tapes_dir, tid).unlink(missing_ok=True)
    reindex(store, also=[rebuild_projection], scrub=True)
    collect(store)
    log.info("applied %d tombstones from the remote", len(hit))
    return hit


def _write_objects(store: Store, git: Git, wanted: list[dict[str, Any]], report: PullReport,
                   packs: PackReader | None = None) -> None:
    """Objects first: a tape written before its objects would answer with a missing one."""
    want: dict[str, str] = {}
    for e in wanted:
        for digest, sha in (e.get("objects") or {}).items():
            if is_address(digest) and not object_path(store.objects_dir, digest).exists():
                want[digest] = str(sha)
    items = [Landing(sha, object_path(store.objects_dir, d), partial(_object_error, d), f"object {d}")
             for d, sha in sorted(want.items())]
    landed = land(git, items, store.run_dir / "pull", packs=packs)
    report.objects += len(landed.done)
    report.damaged += landed.damaged


_DCTX = threading.local()


def _object_error(digest: str, data: bytes) -> str | None:
    """What is wrong with an object's bytes (zstd of text whose sha256 is `digest`), or None."""
    dctx = getattr(_DCTX, "dctx", None) or zstandard.ZstdDecompressor()
    _DCTX.dctx = dctx
    try:
        ok = hashlib.sha256(dctx.decompress(data)).hexdigest() == digest
    except zstandard.ZstdError as exc:
        return f"not zstd: {exc}"
    return None if ok else "content does not match its address"


def _write_tapes(store: Store, git: Git, wanted: list[dict[str, Any]], report: PullReport,
                 packs: PackReader | None = None) -> None:
    """Each tape landed in tapes/ (land.py) as git verified it; checked against its id when it is
    catalogued (the module docstring says why there)."""
    items = []
    for e in wanted:
        tid = str(e["tape"]) if is_address(str(e.get("tape"))) else ""
        if not tid:
            report.damaged.append(f"tape {e.get('blob')} (its entry names no tape id)")
            continue
        items.append(Landing(str(e["blob"]), tape_path(store.tapes_dir, tid), None, f"tape {tid[:12]}", mode=0o444))
    by_path = {tape_path(store.tapes_dir, str(e["tape"])): e for e in wanted if is_address(str(e.get("tape")))}
    landed = land(git, items, store.run_dir / "pull", packs=packs)
    report.damaged += landed.damaged
    for it, size in landed.done:
        e = by_path[it.final]
        report.sessions.append({"tape": e["tape"], "session_id": e.get("session_id"), "harness": e.get("harness"),
                                "started": e.get("started"), "size": size})
        report.bytes += size


def _merge_memories(store: Store, git: Git, idx: RemoteIndex) -> int:
    """Each remote log file unioned into the local one (other clones' files only: this clone's
    own are written here alone). Returns the files changed."""
    if not idx.memories:
        return 0
    elog = EventLog(store)
    own = f".{elog.clone}."
    remote = dict(git.blobs(sorted(set(idx.memories.values()))))
    changed = 0
    with memory_lock(store):
        local = {f.name: (elog.dir / f.name).read_bytes() for f in elog.files()}
        theirs = {name: remote.get(sha) or b"" for name, sha in idx.memories.items() if own not in name}
        purged = purged_in([*local.values(), *theirs.values()])
        for name, data in sorted(theirs.items()):
            merged = union_log([local.get(name, b""), data], purged)
            if merged and merged != local.get(name):
                atomic_write(elog.dir / name, merged, mode=0o644)
                changed += 1
    if changed:
        from engram.memory.memories import Memories

        Memories(store).db.close()
    return changed


def index_new(store: Store, workers: int | None = None) -> int:
    """Catalogue and index the tapes that arrived (the path of `engram index`: `reconcile`, then
    the tapes not indexed yet, fingerprinted in up to 2 worker processes as a bulk ingest does),
    then give the index a new epoch so a running language server recomputes its lenses. Returns
    the tapes indexed."""
    return _index_new(store, workers)[0]


def _index_new(store: Store, workers: int | None = None) -> tuple[int, list[str]]:
    """`index_new`, and the ids of the tapes cataloguing left out as damaged (moved to quarantine/)."""
    with ingest_lock(store):
        db = open_db(store)
        try:
            damaged = reconcile(db, store)
            todo = [r[0] for r in db.execute("SELECT id FROM tapes WHERE indexed=0 ORDER BY begins, id")]
            n_workers = workers if workers is not None else _worker_count(len(todo))  # (ENGRAM_WORKERS, as ingest)
            if n_workers > 1 and len(todo) > 1:
                n = _index_parallel(store, db, todo, n_workers)
            else:
                n = index_pending(store, db)
            if n:
                with immediate(db):
                    new_epoch(db)
        finally:
            db.close()
    return n, damaged


def _index_parallel(store: Store, db: Any, todo: list[str], n_workers: int) -> int:
    """`index_pending` with the fingerprinting in worker processes (results taken in order, so
    the index is the one the serial path builds). The writes stay one batch at the end: writing
    every 16 tapes while the workers fingerprint the next cost 0.9 s more CPU for 97 tapes into
    the 1 GB store (a lineage lookup per batch), for a wall gain a loaded machine could not show.
    A killed worker leaves the rest unindexed, for the next pull or `engram index`."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from engram.capture.pipeline import _exit_with
    from engram.index.build import Indexer, small_pages

    indexer = Indexer(store)
    indexer.restore(db)
    k, w = indexer.resolve_params(db)
    ctx = multiprocessing.get_context("forkserver")  # safe in a process with threads (a language server)
    ctx.set_forkserver_preload(["engram.index.build"])
    # Cataloguing (`reconcile`) hashed each pulled tape: the workers need not hash it again (~7 s a
    # GB of JSONL on a CPU without SHA instructions). A tape not checked in this process is checked there.
    trusted = [verified_as(tape_path(store.tapes_dir, tid)) for tid in todo]
    done = 0
    with small_pages(), ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx, initializer=_exit_with,
                                            initargs=(os.getpid(),)) as pool:
        try:
            for prepared in pool.map(_prepare, [str(store.root)] * len(todo), todo, [k] * len(todo),
                                     [w] * len(todo), trusted):
                indexer.accept(db, prepared)
                done += 1
        except (BrokenProcessPool, EOFError):
            log.warning("a worker process was killed: %d pulled tapes left unindexed; `engram index` indexes them",
                        len(todo) - done)
        indexer.finish(db)
    return done


def _prepare(root: str, tape_id: str, k: int, w: int, trusted: tuple[str, int, int] | None = None) -> Any:
    """Worker side: one tape's fragments and fingerprints (`prepare_tape`), read from the store
    (`trusted`: the tape's identity when the parent process has checked its id, see `verified_as`)."""
    from engram.index.build import prepare_tape

    if trusted is not None:
        trust(trusted)
    store = Store(Path(root))
    with TapeReader(tape_path(store.tapes_dir, tape_id), store.objects_dir) as r:
        return prepare_tape(tape_id, list(r.events(resolve_objects=True)), k, w)
