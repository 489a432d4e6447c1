"""What leaves this clone on `engram push`, and why the rest stays.

A tape leaves unless its session is marked private (`engram tapes --private ID`), its harness or
one of the files it read or edited is excluded by `[share]` in `.engram/config.toml`, it is older
than `max_age_days`, or today's redaction rules would still change it (a tape captured before a
rule was added: `engram redact --again` rewrites it, then it leaves). A memory's events leave when
its scope is `team`; a purged tape leaves as a tombstone; a purged memory as its `forget` event
alone. Nothing here writes to the store except the private marks.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from engram.capture.redact import Redactor
from engram.capture.removal import REDIRECTS, log_path
from engram.fsutil import append_durably, json_lines
from engram.memory.events import EventLog, event_from_json, events_in
from engram.store.repo import Store
from engram.tape import events as E
from engram.tape.redacted import recorded
from engram.tape.objects import OBJ_KEY, referenced_objects, resolve
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_files

log = logging.getLogger(__name__)

PRIVATE_LOG = "private.jsonl"
_MARKER = re.compile(rb"\[REDACTED:([A-Za-z0-9_.\-]{1,64})\]")
# Canonical JSON (sorted keys, no spaces): a line holding an object reference holds its key, a
# code event's line its kind (other lines may hold them too: they are parsed and checked)
_OBJ_NEEDLE = b'"' + OBJ_KEY.encode() + b'"'
_WANTED = re.compile(b"|".join(re.escape(n) for n in [
    _OBJ_NEEDLE, *(b'"kind":' + orjson.dumps(k) for k in sorted(E.CODE_KINDS))]))


@dataclass
class Candidate:
    """A local tape that is not on the remote yet, and what pushing it would mean."""

    id: str
    path: Path
    harness: str
    session_id: str
    started: str | None
    ended: str | None
    git_head: str | None
    prev: str | None
    size: int
    objects: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    redacted: Counter[str] = field(default_factory=Counter)  # markers already in the tape, by class
    would_redact: Counter[str] = field(default_factory=Counter)  # what today's rules would still replace
    excluded: str | None = None  # why it stays, or None
    scanned: bool = False  # run through today's rules again (not recorded clean under them)
    held: str | None = None  # why its meta alone keeps it back (then it was not scanned)

    def as_dict(self) -> dict[str, Any]:
        return {"tape": self.id, "session_id": self.session_id, "harness": self.harness, "started": self.started,
                "size": self.size, "objects": len(self.objects), "redacted": dict(self.redacted),
                "would_redact": dict(self.would_redact), "excluded": self.excluded}


def read_candidate(store: Store, path: Path, redactor: Redactor,
                   stays: Callable[[dict[str, Any]], str | None] | None = None,
                   clean: frozenset[str] = frozenset()) -> Candidate:
    """One tape read whole: its meta, the objects it names, the files it touched, its redaction
    markers, and whether today's rules would change any of its strings (objects included).

    A tape in `clean` (engram.tape.redacted: written by today's rules, `redactor.digest`) is their
    output, and redaction is idempotent: running them again changes nothing, so it is not
    scanned again. Its lines are then parsed only where they
    can name an object or a file (the needles below); the markers are counted from every line.
    Nor is a tape whose meta alone keeps its session back (`stays`: private, its harness, its
    age): nothing of it leaves, whatever the rules would say (it would be scanned on every push).
    """
    tid = path.name[: -len(".jsonl.zst")]
    with TapeReader(path, store.objects_dir) as r:
        meta = r.meta()
        cand = Candidate(tid, path, str(meta.get("harness") or ""), str(meta.get("session_id") or ""),
                         meta.get("started"), meta.get("ended"), meta.get("git_head"), meta.get("prev"), r.size)
        cand.held = stays(meta) if stays is not None else None
        trusted = cand.held is not None or tid in clean
        wholes = []
        for line in r.raw_lines():
            if b"[REDACTED:" in line:
                for m in _MARKER.finditer(line):
                    cand.redacted[m.group(1).decode()] += 1
            if trusted and _WANTED.search(line) is None:
                continue
            ev = E.loads(line)
            refs: set[str] = set()
            if _OBJ_NEEDLE in line:
                referenced_objects(ev, refs)
                cand.objects |= refs
            if ev.get("kind") in E.CODE_KINDS and isinstance(ev.get("file"), str):
                cand.files.add(ev["file"])
            if not trusted:
                wholes.append(resolve(ev, store.objects_dir) if refs else ev)
    if trusted:
        return cand
    cand.scanned = True
    before = Counter(redactor.counts)  # the tape's events at once, as capture redacts them
    if redactor.events(wholes) != wholes:
        cand.would_redact.update(redactor.counts - before)
    return cand


def local_candidates(store: Store, skip: set[str], redactor: Redactor, now: float | None = None) -> list[Candidate]:
    stays = _stays_by_meta(store, now)
    digest = redactor.digest
    clean = frozenset(t for t, rules in recorded(store.dir).items() if digest in rules)
    return [read_candidate(store, p, redactor, stays, clean) for p in tape_files(store.tapes_dir)
            if p.name[: -len(".jsonl.zst")] not in skip]


def _stays_by_meta(store: Store, now: float | None = None) -> Callable[[dict[str, Any]], str | None]:
    """Why a tape's session stays, from its meta alone (private, harness, age), or None: the
    reasons of `exclude` that need no scan of the tape."""
    cfg = store.config["share"]
    harnesses = set(cfg.get("exclude_harnesses") or [])
    max_age = int(cfg.get("max_age_days") or 0)
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now or time.time()) - max_age * 86400)) if max_age else ""
    private = private_sessions(store)

    def stays(meta: dict[str, Any]) -> str | None:
        if str(meta.get("session_id") or "") in private:
            return "private (engram tapes --private)"
        if str(meta.get("harness") or "") in harnesses:
            return f"harness {meta.get('harness')} excluded ([share] exclude_harnesses)"
        if cutoff and str(meta.get("started") or "") < cutoff:
            return f"older than {max_age} days ([share] max_age_days)"
        return None

    return stays


def exclude(store: Store, cands: list[Candidate], now: float | None = None) -> None:
    """Set each candidate's `excluded` reason from the settings and marks; a session is excluded
    whole when any of its segments is (by path, by redaction)."""
    globs = [str(g) for g in store.config["share"].get("exclude_paths") or []]
    stays = _stays_by_meta(store, now)
    by_session: dict[tuple[str, str], str] = {}
    for c in cands:
        # (held: kept back unscanned when read; it stays so though a mark changed since)
        why = (stays({"session_id": c.session_id, "harness": c.harness, "started": c.started}) or c.held
               or _by_content(c, globs))
        if why:
            by_session.setdefault((c.harness, c.session_id), why)
    for c in cands:
        c.excluded = by_session.get((c.harness, c.session_id))


def _by_content(c: Candidate, globs: list[str]) -> str | None:
    """Why a tape stays for what it holds: a file it touched, what today's rules would change."""
    if globs and (hit := next((f for f in sorted(c.files) for g in globs if fnmatch.fnmatch(f, g)), None)):
        return f"touched {hit} ([share] exclude_paths)"
    if c.would_redact:
        return ("today's redaction rules would still change it: run `engram redact --again`, then push "
                f"({', '.join(f'{k} x{n}' for k, n in sorted(c.would_redact.items()))})")
    return None


# ---------------------------------------------------------------- private marks


def private_sessions(store: Store) -> set[str]:
    """Session ids marked private and not shared again since (the last mark wins)."""
    state: dict[str, bool] = {}
    for rec in json_lines(store.dir / PRIVATE_LOG):
        if isinstance(rec.get("session_id"), str):
            state[rec["session_id"]] = bool(rec.get("private"))
    return {s for s, private in state.items() if private}


def mark_private(store: Store, sessions: Iterable[str], private: bool = True) -> None:
    """Record sessions as private (never pushed) or shareable again: an fsynced append."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    append_durably(store.dir / PRIVATE_LOG, [orjson.dumps({"session_id": s, "private": private, "at": now})
                                             for s in sessions])


# ---------------------------------------------------------------- tombstones


def local_tombstones(store: Store) -> dict[str, dict[str, Any]]:
    """Tapes this clone purged (`engram tapes rm --purge`, or a purge pulled from a teammate) and
    tapes `engram redact --again` replaced: their ids must leave no copy anywhere."""
    out: dict[str, dict[str, Any]] = {}
    for rec in json_lines(log_path(store)):
        tid = rec.get("tape")
        if rec.get("op") == "rm" and rec.get("purge") and isinstance(tid, str):
            out[tid] = {"tape": tid, "session_id": rec.get("session_id"), "harness": rec.get("harness"),
                        "why": "purged", "at": rec.get("at")}
    for rec in json_lines(store.dir / REDIRECTS):
        old, new = rec.get("old"), rec.get("new")
        if isinstance(old, str) and isinstance(new, str):
            out.setdefault(old, {"tape": old, "why": "redacted again", "replaced_by": new})
    return out


# ---------------------------------------------------------------- memories


@dataclass
class MemoryChoice:
    files: dict[str, bytes] = field(default_factory=dict)  # log file name -> the lines that leave
    team: int = 0  # memories whose events leave
    personal: int = 0  # memories that stay (scope personal)
    held: dict[str, Counter[str]] = field(default_factory=dict)  # memory -> what redaction would replace
    purged: set[str] = field(default_factory=set)


def memory_files(store: Store, redactor: Redactor) -> MemoryChoice:
    """The memory log as it may leave: only team memories' events (a link only between two of
    them), never a `recalled` batch (this clone's reading habits), nothing of a purged memory but
    its tombstone, and nothing of a memory whose text today's redaction rules would change."""
    default = store.config["share"]["memory_scope"]
    elog = EventLog(store)
    lines: dict[str, list[tuple[Any, bytes]]] = {}
    scope: dict[str, str] = {}
    purged: set[str] = set()
    held: dict[str, Counter[str]] = {}
    for f in elog.files():
        for raw in _whole_lines(elog.dir / f.name):
            try:
                ev = event_from_json(orjson.loads(raw))
            except orjson.JSONDecodeError:
                continue
            if ev is None or ev.memory is None:
                continue
            lines.setdefault(f.name, []).append((ev, raw))
            if ev.op == "add":
                scope[ev.memory] = str(ev.data.get("scope") or default)
            if ev.op == "forget" and ev.data.get("purge"):
                purged.add(ev.memory)
            before = Counter(redactor.counts)
            body = {"data": ev.data, "by": ev.by}
            if redactor.value(body) != body:
                held.setdefault(ev.memory, Counter()).update(redactor.counts - before)
    out = MemoryChoice(purged=purged, held=held)
    team = {m for m, s in scope.items() if s == "team" and m not in held}
    out.team = len(team - purged)
    out.personal = sum(1 for s in scope.values() if s != "team")
    for name, evs in lines.items():
        keep = [raw for ev, raw in evs if _leaves(ev, team, purged)]
        if keep:
            out.files[name] = b"".join(raw + b"\n" for raw in keep)
    return out


def _leaves(ev: Any, team: set[str], purged: set[str]) -> bool:
    if ev.memory in purged:
        return ev.op == "forget" and bool(ev.data.get("purge"))
    if ev.op == "recalled" or ev.memory not in team:
        return False
    target = ev.data.get("target")
    return not (ev.op == "link" and isinstance(target, str) and target not in team)


def _whole_lines(path: Path) -> list[bytes]:
    """The whole lines of a log file (a torn last line is not one)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    cut = data.rfind(b"\n") + 1
    return [line for line in data[:cut].split(b"\n") if line.strip()]


def purged_in(logs: Iterable[bytes]) -> set[str]:
    """Memories a purge tombstone in any of these log files forgot."""
    out: set[str] = set()
    for data in logs:
        for raw in data.split(b"\n"):
            if b'"forget"' in raw and b'"purge":true' in raw:
                try:
                    ev = event_from_json(orjson.loads(raw))
                except orjson.JSONDecodeError:
                    continue
                if ev is not None and ev.op == "forget" and ev.data.get("purge") and ev.memory:
                    out.add(ev.memory)
    return out


def union_log(sides: Iterable[bytes], purged: set[str]) -> bytes:
    """The union of copies of one log file, by event id, in replay order (time, id): a purged
    memory's events are dropped, its tombstone kept; lines that are not whole events are dropped."""
    events: dict[str, tuple[tuple[str, str], bytes]] = {}
    for data in sides:
        for ev, raw in events_in(data):
            if not (ev.memory in purged and not (ev.op == "forget" and ev.data.get("purge"))):
                events.setdefault(ev.id, (ev.key, raw))
    return b"".join(raw + b"\n" for _, raw in sorted(events.values()))
