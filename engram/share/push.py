"""`engram push [REMOTE] [--dry-run]`: this clone's shareable tapes, objects, team memories and
tombstones onto the remote's `refs/engram/` (layout.py), never forced.

Order, so that an interrupted push leaves both sides valid: the blobs and the shard commits are
pushed first (each shard is written by this clone alone), the shared index last; git moves a ref
only after the objects it names have arrived. A push killed between the two leaves tapes the
index does not list yet: invisible to pulls, and listed by the next push. A rejected index push
(another clone pushed first) fetches the new index, unions again and retries (MAX_TRIES).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from engram.capture.redact import Redactor
from engram.errors import ShareError
from engram.memory.events import EventLog
from engram.share.choose import (
    Candidate,
    MemoryChoice,
    exclude,
    local_candidates,
    local_tombstones,
    memory_files,
    purged_in,
    read_candidate,
    union_log,
)
from engram.share.git import Git
from engram.share.layout import (
    FORMAT_FILE,
    INDEX_REF,
    MEMORIES,
    NAMESPACE,
    SESSIONS,
    SHARD_PREFIX,
    TAPE_SUFFIX,
    TOMBSTONES,
    TRACKING_PREFIX,
    RemoteIndex,
    format_blob,
    month_of,
    read_index,
    session_doc,
    shard_ref,
    tracking_ref,
)
from engram.store.repo import Store
from engram.tape.objects import object_path

log = logging.getLogger(__name__)

MAX_TRIES = 8


@dataclass
class PushReport:
    remote: str
    dry_run: bool
    sessions: list[dict[str, Any]] = field(default_factory=list)  # tapes that leave (or would)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    already: int = 0  # local tapes the remote has
    scanned: int = 0  # tapes not on the remote and not recorded clean under today's redaction rules
    bytes: int = 0
    memories: dict[str, Any] = field(default_factory=dict)
    tombstones: int = 0  # new on the remote
    refs: list[str] = field(default_factory=list)
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"remote": self.remote, "dry_run": self.dry_run, "sessions": self.sessions, "excluded": self.excluded,
                "already_on_remote": self.already,
                "scanned_again": self.scanned, "bytes": self.bytes, "memories": self.memories,
                "tombstones": self.tombstones, "refs": self.refs, "attempts": self.attempts}


def open_git(store: Store) -> Git:
    git = Git(store.root)
    if not git.is_repository():
        raise ShareError(f"{store.root} is not a git repository: engram shares through the repository's git "
                         "remotes (`git init`, `git remote add origin URL`)")
    return git


def fetch_index(git: Git, remote: str, refs: dict[str, str]) -> RemoteIndex:
    """The remote's index as `refs` (its ls-remote) names it, fetched if not held yet."""
    tip = refs.get(INDEX_REF)
    if tip is not None and not git.have([tip]):
        git.fetch(remote, [f"+{INDEX_REF}:{tracking_ref(remote, INDEX_REF)}"])
    elif tip is not None:
        git.set_ref(tracking_ref(remote, INDEX_REF), tip)
    return read_index(git, tip, remote)


def pushed_to(store: Store, tape_ids: set[str]) -> dict[str, list[str]]:
    """Which of `tape_ids` each remote's index lists, as this clone last saw it (its latest push
    or pull to that remote: `refs/engram-remotes/<remote>/index`); no network. Remote -> tapes."""
    git = Git(store.root)
    if not tape_ids or not git.is_repository():
        return {}
    out: dict[str, list[str]] = {}
    suffix = "/" + INDEX_REF[len(NAMESPACE):]
    for ref, sha in sorted(git.refs(TRACKING_PREFIX).items()):
        if not ref.endswith(suffix):
            continue
        listed = git.run("ls-tree", "--name-only", "-z", sha, SESSIONS, check=False).stdout.decode().split("\0")
        hit = sorted(tape_ids & {name[len(SESSIONS):-len(".json")] for name in listed if name.endswith(".json")})
        if hit:
            out[ref.rsplit("/", 2)[-2]] = hit
    return out


def push(store: Store, remote: str | None = None, *, dry_run: bool = False) -> PushReport:
    git = open_git(store)
    remote = remote or git.default_remote()
    if not git.has_remote(remote):
        raise ShareError(f"no git remote {remote!r} (`git remote -v` lists them; `engram push REMOTE` names one)")
    redactor = Redactor(store.config["redact"].get("patterns") or [])
    tombs = local_tombstones(store)
    clone = EventLog(store).clone
    read: dict[str, Candidate] = {}
    report = PushReport(remote, dry_run)
    for attempt in range(1, MAX_TRIES + 1):
        report.attempts = attempt
        refs = git.remote_refs(remote, NAMESPACE)
        idx = fetch_index(git, remote, refs)
        gone = set(tombs) | set(idx.tombstones)
        skip = set(idx.sessions) | gone
        fresh = local_candidates(store, skip | set(read), redactor)
        read.update((c.id, c) for c in fresh)
        cands = [c for tid, c in sorted(read.items()) if tid not in skip]
        exclude(store, cands)
        going = [c for c in cands if not c.excluded]
        mem = memory_files(store, redactor)
        _describe(report, store, cands, going, mem, idx, tombs)
        report.excluded += _tombstoned_here(store, gone, read, redactor)
        new = _new_memories(git, idx, mem)
        report.memories["team_new"] = len(new - mem.purged)
        report.memories["purges_new"] = len(new & mem.purged)
        if dry_run:
            return report
        entries, shard_commits = _shards(git, store, remote, refs, clone, going, gone, idx)
        if shard_commits:
            ok, why = git.push(remote, [f"{c}:{ref}" for ref, c in sorted(shard_commits.items())])
            if not ok:
                log.info("push of the tape shards was rejected (%s); fetching and trying again", why)
                _pause(attempt)
                continue
            for ref, c in shard_commits.items():
                git.set_ref(tracking_ref(remote, ref), c)
        commit = _index_commit(git, store, idx, entries, tombs, mem)
        if commit is None:
            report.refs = sorted(shard_commits)
            return report
        ok, why = git.push(remote, [f"{commit}:{INDEX_REF}"])
        if ok:
            git.set_ref(tracking_ref(remote, INDEX_REF), commit)
            report.refs = sorted([*shard_commits, INDEX_REF])
            return report
        log.info("push of %s was rejected (%s): another clone pushed first; unioning with it", INDEX_REF, why)
        _pause(attempt)
    raise ShareError(f"the push to {remote!r} was rejected {MAX_TRIES} times: other clones keep pushing; "
                     "run `engram push` again (nothing was overwritten, nothing is half-pushed)")


PURGED_WHY = ("purged earlier (`tapes rm --purge` here or a teammate's purge): its tombstone keeps this tape "
              "from being shared again, `ingest --again` included")


def _tombstoned_here(store: Store, gone: set[str], read: dict[str, Candidate], redactor: Redactor
                     ) -> list[dict[str, Any]]:
    """The tapes this store holds that a tombstone names (a purged session ingested again has
    the same id): never pushed, so listed with why, not left out without a word."""
    out = []
    for tid in sorted(gone):
        path = store.tapes_dir / f"{tid}{TAPE_SUFFIX}"
        if path.exists():
            c = read.get(tid) or read_candidate(store, path, redactor)
            read[tid] = c
            out.append({**c.as_dict(), "excluded": PURGED_WHY})
    return out


def _pause(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2 ** attempt))


def _describe(report: PushReport, store: Store, cands: list[Candidate], going: list[Candidate],
              mem: MemoryChoice, idx: RemoteIndex, tombs: dict[str, dict[str, Any]]) -> None:
    report.sessions = [c.as_dict() for c in going]
    report.excluded = [c.as_dict() for c in cands if c.excluded]
    report.bytes = sum(c.size for c in going) + sum(
        _size(object_path(store.objects_dir, d)) for d in set().union(*(c.objects for c in going)))
    report.scanned = sum(1 for c in cands if c.scanned)
    report.already = sum(1 for tid in idx.sessions if (store.tapes_dir / f"{tid}{TAPE_SUFFIX}").exists())
    report.tombstones = len(set(tombs) - set(idx.tombstones))
    report.memories = {"team": mem.team, "personal": mem.personal, "purged": len(mem.purged),
                       "held_back": {m: dict(c) for m, c in mem.held.items()}, "log_files": len(mem.files)}


def _new_memories(git: Git, idx: RemoteIndex, mem: MemoryChoice) -> set[str]:
    """The memories with an event the remote's log lacks: what a push adds (every team memory
    was counted as pushed again on each push, though nothing of it changed); a purged one's
    event is its tombstone."""
    from engram.memory.events import events_in  # noqa: PLC0415

    there = {ev.id for _, data in git.blobs(sorted(set(idx.memories.values()))) for ev, _ in events_in(data)}
    return {ev.memory for data in mem.files.values() for ev, _ in events_in(data) if ev.id not in there and ev.memory}


def _size(path: Any) -> int:
    try:
        return int(path.stat().st_size)
    except OSError:
        return 0


def _shards(git: Git, store: Store, remote: str, refs: dict[str, str], clone: str, going: list[Candidate],
            gone: set[str], idx: RemoteIndex) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """New commits of this clone's shards: each the remote shard's tree (tombstoned tapes left
    out, with the objects no tape left in it names) plus the tapes going into it and their
    objects. Returns the index entries of the tapes and the commits by ref."""
    by_ref: dict[str, list[Candidate]] = {}
    for c in going:
        by_ref.setdefault(shard_ref(clone, month_of(c.started)), []).append(c)
    own = [r for r in refs if r.startswith(f"{SHARD_PREFIX}{clone}/")]
    entries: dict[str, dict[str, Any]] = {}
    commits: dict[str, str] = {}
    for ref in sorted(set(by_ref) | set(own)):
        base = refs.get(ref)
        if base is not None and not git.have([base]):
            git.fetch(remote, [f"+{ref}:{tracking_ref(remote, ref)}"])
        files = {p: e.sha for p, e in git.tree(base).items()} if base else {}
        kept = {p: s for p, s in files.items() if not (p.endswith(TAPE_SUFFIX) and p[:64] in gone)}
        group = by_ref.get(ref, [])
        if kept != files:  # a purged tape's objects (a large tool output) go with it
            named = {d for tid, e in idx.sessions.items() if tid not in gone and
                     SHARD_PREFIX + str(e.get("shard")) == ref for d in (e.get("objects") or {})}
            named |= set().union(*(c.objects for c in group)) if group else set()
            kept = {p: s for p, s in kept.items() if not p.startswith("objects/") or p[8:10] + p[11:] in named}
        if not group and kept == files:
            continue
        tape_paths = [c.path for c in group]
        digests = sorted(set().union(*(c.objects for c in group))) if group else []
        obj_paths = [object_path(store.objects_dir, d) for d in digests]
        missing = [d for d, p in zip(digests, obj_paths) if not p.is_file()]
        if missing:
            raise ShareError(f"object {missing[0]} is missing from {store.objects_dir}: run `engram reindex`, "
                             "or remove the session that names it, then push again")
        shas = git.hash_files([*tape_paths, *obj_paths])
        blob = dict(zip([c.id for c in group], shas))
        obj_blob = dict(zip(digests, shas[len(group):]))
        for c in group:
            kept[f"{c.id}{TAPE_SUFFIX}"] = blob[c.id]
        for d in digests:
            kept[f"objects/{d[:2]}/{d[2:]}"] = obj_blob[d]
        for c in group:
            entries[c.id] = {"tape": c.id, "harness": c.harness, "session_id": c.session_id, "started": c.started,
                             "ended": c.ended, "git_head": c.git_head, "prev": c.prev, "size": c.size,
                             "shard": ref[len(SHARD_PREFIX):], "blob": blob[c.id],
                             "objects": {d: obj_blob[d] for d in sorted(c.objects)}, "redacted": dict(c.redacted)}
        tree = git.make_tree(kept)
        commits[ref] = git.commit(tree, [base] if base else [], f"engram: {len(group)} tapes")
    return entries, commits


def _index_commit(git: Git, store: Store, idx: RemoteIndex, entries: dict[str, dict[str, Any]],
                  tombs: dict[str, dict[str, Any]], mem: MemoryChoice) -> str | None:
    """The index's next commit: its tree unioned with this clone's new sessions, tombstones and
    team memory log (None when that changes nothing)."""
    gone = set(tombs) | set(idx.tombstones)
    files = {p: s for p, s in idx.files.items()
             if not (p.startswith(SESSIONS) and p[len(SESSIONS):len(SESSIONS) + 64] in gone)}
    new: list[tuple[str, bytes]] = []
    if FORMAT_FILE not in files:
        new.append((FORMAT_FILE, format_blob()))
    for tid, entry in sorted(entries.items()):
        new.append((f"{SESSIONS}{tid}.json", session_doc(entry)))
    for tid, rec in sorted(tombs.items()):
        if tid not in idx.tombstones:
            new.append((f"{TOMBSTONES}{tid}.json", session_doc(rec)))
    remote_logs = dict(git.blobs(sorted(set(idx.memories.values()))))
    remote_by_name = {name: remote_logs.get(sha) or b"" for name, sha in idx.memories.items()}
    purged = purged_in([*remote_by_name.values(), *mem.files.values()])
    for name in sorted(set(remote_by_name) | set(mem.files)):
        there = remote_by_name.get(name)
        merged = union_log([there or b"", mem.files.get(name, b"")], purged)
        if merged != there:
            if merged:
                new.append((f"{MEMORIES}{name}", merged))
            else:
                files.pop(f"{MEMORIES}{name}", None)
    if not new and files == idx.files:
        return None
    for (path, _), sha in zip(new, git.hash_many([d for _, d in new], store.run_dir)):
        files[path] = sha
    tree = git.make_tree(files)
    if idx.commit is not None and tree == git.text("rev-parse", f"{idx.commit}^{{tree}}"):
        return None
    return git.commit(tree, [idx.commit] if idx.commit else [], f"engram: {len(entries)} sessions")
