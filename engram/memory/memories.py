"""One store's memories: writing changes through the event log, reading the projection.

Every change follows the same path (`_commit`): under the store's memory lock, the projection
catches up with the log (another process may have written), the new events are appended and
fsynced, then applied to the projection in one transaction. The log is written first: a crash
between the two leaves the projection behind, and the next open catches it up.

Input is checked before anything is written (`engram.memory.model`'s checks, anchors captured,
evidence looked up): a bad request changes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import apsw
import orjson

from engram.errors import BadInput, UnknownMemory, UnknownTape
from engram.index.sql import ambiguity, by_prefix, immediate
from engram.memory import projection
from engram.memory.events import Event, EventLog, Pending
from engram.memory.model import (
    DEFAULT_IMPORTANCE,
    Evidence,
    Memory,
    Source,
    calling_agent,
    check_content,
    check_context,
    check_importance,
    check_kind,
    check_relation,
    check_status,
    check_tags,
    new_id,
    parse_evidence,
    parse_time,
)
from engram.memory.places import Place, best_state, near, places_of
from engram.memory.vocabulary import MAX_GRAPH_DEPTH
from engram.store.lock import memory_lock
from engram.store.repo import Store
from engram.words import plural

if TYPE_CHECKING:
    from engram.memory.follow import Followed
    from engram.memory.vectors import Matrix

log = logging.getLogger(__name__)

#: A long-lived process looks for log files added from elsewhere (a pull) at most this often;
#: this process's own writes, and other processes' on this clone, show at once.
RESCAN_S = 2.0
#: Recall reinforcement is written in batches: after this many recalls, or this long after the
#: first one waiting, or when the process closes its store.
REINFORCE_BATCH = 32
REINFORCE_WAIT_S = 30.0


@dataclass(frozen=True)
class At:
    """`FILE`, `FILE:LINE` or `FILE:A-B`, the file repository-relative."""

    file: str
    start: int | None = None
    end: int | None = None

    def __str__(self) -> str:
        return self.file if self.start is None else f"{self.file}:{self.start}-{self.end}"


def parse_at(text: str) -> tuple[str, int | None, int | None]:
    """`FILE[:A-B]` or `FILE:LINE` → (file as given, start, end); the range is optional here."""
    path, sep, rng = text.rpartition(":")
    if sep and path:
        a, dash, b = rng.partition("-")
        if a.isdigit() and (not dash or b.isdigit()):
            start, end = int(a), int(b) if dash else int(a)
            if start < 1 or end < start:
                raise BadInput(f"{text!r}: lines are 1-based and START must not exceed END")
            return path, start, end
    if not text.strip():
        raise BadInput("an empty place: give FILE or FILE:START-END")
    return text, None, None


@dataclass
class Remembered:
    """What `remember` did: the memory written, or the one it reinforced instead, and the links
    it made to near-duplicates it did not merge with."""

    id: str
    merged_into: str | None = None
    links: list[dict[str, Any]] = field(default_factory=list)
    #: a new memory's vector: "pending" (made later, in a batch, with the cosine half of dedup) or
    #: "done" (its content had one already); None when it reinforced another
    embedding: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.merged_into is not None:
            out["merged_into"] = self.merged_into
        if self.links:
            out["links"] = self.links
        if self.embedding is not None:
            out["embedding"] = self.embedding
        return out


class Memories:
    """The memories of one store: its event log and the projection in its index."""

    def __init__(self, store: Store, db: apsw.Connection | None = None) -> None:
        from engram.index.db import open_db  # noqa: PLC0415

        self.store = store
        self.db = db if db is not None else open_db(store)
        self.log = EventLog(store)
        self._scanned = 0.0
        self._recalled: Counter[str] = Counter()
        self._first_recalled = 0.0
        self._lock = threading.RLock()
        self.torn = 0  # log lines skipped the last time the projection caught up
        self.sync(force=True)

    @cached_property
    def matrix(self) -> Matrix:
        """The embeddings, loaded when first needed: what only lists and reads notes (an agent's
        hook before an edit) does not pay numpy's import."""
        from engram.memory.vectors import Matrix  # noqa: PLC0415

        return Matrix()

    # ------------------------------------------------------------ the log and the projection

    def sync(self, force: bool = False) -> None:
        """Catch the projection up with the log when it is behind (checked at most every RESCAN_S
        unless `force`)."""
        now = time.monotonic()
        if not force and now - self._scanned < RESCAN_S:
            return
        self._scanned = now
        if projection.behind(self.db, self.log):
            with self._lock, memory_lock(self.store):
                self._caught_up(projection.catch_up(self.db, self.log))

    def _caught_up(self, stats: dict[str, Any]) -> None:
        """After applying others' events (the caller holds the memory lock): a purge tombstone
        among them erases that memory's events from this clone's files too."""
        self.torn = stats["torn"]
        for memory in stats.get("purged", []):
            rewritten, dropped = self.log.purge(memory)
            if dropped:
                log.info("erased %s of purged memory %s from %s", plural(dropped, "event"), memory, plural(len(rewritten), "log file"))
                self._record_rewritten(rewritten)

    def _record_rewritten(self, names: list[str]) -> None:
        with immediate(self.db):
            for name in names:
                st = (self.log.dir / name).stat()
                self.db.execute("INSERT OR REPLACE INTO memory_log(file, size, ino) VALUES(?, ?, ?)",
                                (name, st.st_size, st.st_ino))

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._lock, memory_lock(self.store):
            if projection.behind(self.db, self.log):
                self._caught_up(projection.catch_up(self.db, self.log))
            yield

    def _commit(self, pending: Sequence[Pending]) -> list[Event]:
        """Append `pending` (the caller is inside `_writing`) and apply them."""
        if not pending:
            return []
        written = self.log.append(pending, not_before=projection.last_key(self.db)[0] or None)
        with immediate(self.db):
            projection.apply(self.db, written)
            projection.record_appended(self.db, self.log, written)
        return written

    def record(self, decide: Callable[[], Sequence[Pending]]) -> list[Event]:
        """Append and apply the events `decide` returns, decided under the memory lock with the
        projection caught up (a change worked out elsewhere: `engram.memory.provenance`)."""
        with self._writing():
            return self._commit(decide())

    def rebuild(self) -> dict[str, int]:
        """Replay the whole log into the projection (`engram reindex`)."""
        with self._lock, memory_lock(self.store):
            stats = projection.rebuild(self.db, self.log)
            self._caught_up(stats)
        return stats

    def close(self) -> None:
        """Write the recall reinforcement still waiting; the connection stays the caller's."""
        self.flush_recalls(force=True)

    # ------------------------------------------------------------ finding memories

    def resolve(self, ref: str) -> tuple[int, str]:
        """(memory no, id) of a full id or a unique prefix of one."""
        ref = ref.strip().lower()
        if not ref:
            raise UnknownMemory("which memory? give its id (or the first characters of it)")
        self.sync()
        ids = by_prefix(self.db, "memories", "id", ref)
        if len(ids) > 1:
            raise UnknownMemory(ambiguity(ref, ids, "memories"))
        if not ids:
            gone = self.db.execute("SELECT id, purged FROM memory_forgotten WHERE id >= ? AND id < ? LIMIT 1",
                                   (ref, ref + "\uffff")).fetchall()
            if gone:
                raise UnknownMemory(f"memory {gone[0][0]} was forgotten{' and purged' if gone[0][1] else ''}")
            raise UnknownMemory(f"no memory matches {ref!r}; `engram memory list` lists them")
        no = self.db.execute("SELECT no FROM memories WHERE id = ?", (ids[0],)).fetchall()[0][0]
        return no, ids[0]

    def _forgettable(self, ref: str) -> str:
        """The id `forget --purge` erases: a memory's, or one forgotten but not purged yet (`forget`
        says --purge erases its events; refusing it as "was forgotten" left no way to)."""
        try:
            return self.resolve(ref)[1]
        except UnknownMemory:
            ref = ref.strip().lower()
            rows = self.db.execute("SELECT id FROM memory_forgotten WHERE id >= ? AND id < ? AND NOT purged LIMIT 2",
                                   (ref, ref + "\uffff")).fetchall()
            if len(rows) != 1:
                raise
            return str(rows[0][0])

    def get(self, ref: str) -> Memory:
        no, _ = self.resolve(ref)
        return self.by_no([no], full=True)[no]

    def by_no(self, nos: Sequence[int], *, full: bool = False) -> dict[int, Memory]:
        from engram.index.sql import int_array  # noqa: PLC0415

        if not nos:
            return {}
        rows = self.db.execute(projection.select_sql("WHERE no IN carray(?)"), (int_array(list(nos)),)).fetchall()
        out = {r[0]: projection.row_to_memory(self.db, r) for r in rows}
        if full and out:
            projection.add_history(self.db, out)
        return out

    def ids_of(self, nos: Sequence[int]) -> dict[int, str]:
        """The ids of memories by number (what a caller keeping resolved notes by id needs)."""
        from engram.index.sql import int_array  # noqa: PLC0415

        if not nos:
            return {}
        return dict(self.db.execute("SELECT no, id FROM memories WHERE no IN carray(?)", (int_array(list(nos)),)))

    def stamp(self) -> tuple[tuple[str, int, int], ...]:
        """What the memories are now, as cheaply as it can be told (the log files' names, sizes
        and inodes: every change is an append, a purge a rewrite): equal stamps, same memories."""
        return tuple((f.name, f.size, f.ino) for f in self.log.files())

    def places(self, nos: Sequence[int], buffers: Mapping[str, str] | None = None,
               attribute: bool = True, quick: bool = False) -> dict[int, list[Place]]:
        return places_of(self.db, self.store.root, list(nos), buffers, attribute, quick)

    def shown(self, ref: str, buffers: Mapping[str, str] | None = None
              ) -> tuple[Memory, list[Place], list[dict[str, Any]]]:
        """One memory as `memory show` gives it: with its anchors resolved and its links."""
        no, _ = self.resolve(ref)
        m = self.by_no([no], full=True)[no]
        return m, self.places([no], buffers).get(no, []), self.relations(no)

    def at(self, text: str) -> At:
        """A place a user named (`FILE[:A-B]`), its file made repository-relative."""
        from engram.fsutil import repo_relative  # noqa: PLC0415

        path, start, end = parse_at(text)
        return At(repo_relative(self.store.root, path, _cwd_inside(self.store.root)), start, end)

    # ------------------------------------------------------------ writing

    def remember(self, content: str, *, kind: str = "fact", tags: Sequence[str] = (),
                 importance: float = DEFAULT_IMPORTANCE, pinned: bool = False, at: Sequence[str] = (),
                 evidence: Sequence[str | Evidence] = (), source: Source | None = None,
                 created: str | None = None, dedup: bool = True,
                 buffers: Mapping[str, str] | None = None, context: str = "", scope: str | None = None
                 ) -> Remembered:
        """Write a memory, or reinforce the active memory it nearly repeats (see `dedup`).

        `scope`: "team" (leaves with `engram push`) or "personal" (never leaves this clone); None
        stores none, and the setting `share.memory_scope` decides when it is pushed.

        `context`: what the memory was said in reply to or written during (the request it answers,
        the conversation before it); recall searches it at half weight (`Memory.context`)."""
        from engram.memory import dedup as near_dups  # noqa: PLC0415

        content = check_content(content)
        check_kind(kind)
        tag_list = check_tags(list(tags))
        importance = check_importance(importance)
        context = check_context(context)
        created = parse_time(created) if created is not None else None
        source = source or Source("person")
        anchors = [self._capture(a, buffers) for a in at]
        proofs = [self._evidence(e) for e in evidence]
        with self._writing():
            # words only: the cosine half waits for the vector (`embed_pending`; engram.memory.dedup)
            found = near_dups.check(self.db, self.matrix, content, kind, anchors, embed=False) if dedup \
                else near_dups.Verdict()
            if found.merge_into is not None:
                events = [Pending("reinforce", found.merge_into, source.to_json(),
                                  {"why": "remembered again", "tags": tag_list, "evidence": proofs,
                                   "similarity": found.similarity})]
                if found.adopt_anchors:
                    events.append(Pending("reanchor", found.merge_into, source.to_json(), {"anchors": anchors}))
                self._commit(events)
                return Remembered(found.merge_into, merged_into=found.merge_into)
            mid = new_id()
            data: dict[str, Any] = {"content": content, "kind": kind, "tags": tag_list, "importance": importance,
                                    "pinned": bool(pinned), "source": source.to_json(), "anchors": anchors,
                                    "evidence": proofs}
            if created is not None:
                data["created"] = created
            if context:
                data["context"] = context
            if scope is not None:
                data["scope"] = check_scope(scope)
            if dedup:
                data[projection.VECTOR_DEDUP] = True
            events = [Pending("add", mid, source.to_json(), data)]
            links = []
            for target, relation, why in found.links:
                events.append(Pending("link", mid, source.to_json(), {"target": target, "relation": relation,
                                                                      "why": why, "candidate": True}))
                links.append({"id": target, "relation": relation, "candidate": True, "why": why})
            self._commit(events)
            embedded = projection.has_vector(self.db, projection.content_hash(content))
        return Remembered(mid, links=links, embedding="done" if embedded else "pending")

    def check_anchor(self, at: str) -> None:
        """Raise BadInput, saying why, when `at` (FILE:START-END) names no lines of the working
        tree a memory could be anchored to; write nothing."""
        self._capture(at, None)

    def _capture(self, at: str, buffers: Mapping[str, str] | None) -> dict[str, Any]:
        from engram.memory.anchors import capture  # noqa: PLC0415 - fingerprints load numpy

        place = self.at(at)
        if place.start is None or place.end is None:
            raise BadInput(f"{at!r}: anchor a memory to lines, FILE:START-END (e.g. src/app.py:10-24)")
        text = buffers.get(place.file) if buffers else None
        return capture(self.store.root, place.file, place.start, place.end, text=text).to_json()

    def _evidence(self, value: str | Evidence) -> dict[str, Any]:
        """A tape fragment named by TAPE@OFFSET, checked against the catalog (the tape's full id)."""
        from engram.index.catalog import resolve_tape  # noqa: PLC0415

        ev = parse_evidence(value) if isinstance(value, str) else value
        try:
            row = resolve_tape(self.db, ev.tape)
        except UnknownTape as exc:
            raise BadInput(f"evidence {ev.tape}@{ev.offset}: {exc}") from None
        if ev.offset >= row.events:
            raise BadInput(f"evidence {ev.tape}@{ev.offset}: tape {row.id[:12]} has events 0-{row.events - 1}")
        return Evidence(row.id, ev.offset).to_json()

    def _embed_if_cheap(self, contents: Sequence[str]) -> None:
        """Embed these new contents when the model is loaded in this process already."""
        try:
            self.embed_pending(load=False, hashes=[projection.content_hash(c) for c in contents])
        except Exception:  # noqa: BLE001 - the memory is written; its vector comes with the next batch
            log.exception("embedding new memories")

    def embed_pending(self, *, load: bool = True, limit: int | None = None, hashes: list[str] | None = None) -> int:
        """Make the vectors memories wait for (`engram.memory.vectors.embed_pending`), and for each
        memory `remember` wrote, the cosine half of its dedup (`_judge`); returns how many."""
        from engram.memory.vectors import embed_pending  # noqa: PLC0415

        return embed_pending(self.db, load=load, limit=limit, hashes=hashes, judge=self._judge)

    def embed_remembered(self, *, load: bool = False, limit: int = 32) -> int:
        """`embed_pending` for the memories remember wrote that wait for their vector (a server, right
        after answering a remember): they are listed, so no scan of every memory for a missing
        vector (~0.16 s of CPU at 100,000 memories)."""
        hashes = projection.unchecked_hashes(self.db)
        return self.embed_pending(load=load, limit=limit, hashes=hashes) if hashes else 0

    def _judge(self, hashes: list[str], vecs: Any) -> None:
        """Dedup by cosine, now that their vectors are made, the memories of a batch that remember
        wrote (`engram.memory.dedup.check_embedded`): a near-duplicate of an older active memory is
        merged into it as events — the older reinforced (the newer's tags and evidence added) and
        linked `derived_from` it, the newer `superseded` — and near-duplicates it must not merge
        with are linked as candidates. Before the batch's vectors are stored: a crash in between
        judges them again, and a merged memory is no longer active."""
        from engram.memory import dedup as near_dups  # noqa: PLC0415

        with self._writing():
            rows = projection.unchecked(self.db, hashes)
            if not rows:
                return
            row_of = {h: i for i, h in enumerate(hashes)}
            self.matrix.refresh(self.db)
            events: list[Pending] = []
            earlier: list[tuple[int, str, Any]] = []
            for no, mid, content, kind, source in rows:
                vec = vecs[row_of[projection.content_hash(content)]]
                found = near_dups.check_embedded(self.db, self.matrix, no, content, kind, vec, earlier)
                by = orjson.loads(source)
                for target, relation, why in found.links:
                    events.append(Pending("link", mid, by, {"target": target, "relation": relation, "why": why,
                                                            "candidate": True}))
                if found.merge_into is None:
                    earlier.append((no, mid, vec))
                    continue
                events += self._merged(no, mid, found, by)
            self._commit(events)

    def _merged(self, no: int, mid: str, found: Any, by: dict[str, Any]) -> list[Pending]:
        """The events of memory `mid` merged into `found.merge_into` after it was written."""
        into = found.merge_into
        m = self.by_no([no], full=True)[no]
        why = f"nearly the same note (cosine {found.similarity['cosine']:.2f}), found when its vector was made"
        events = [Pending("reinforce", into, by, {"why": "remembered again: " + why, "tags": m.tags,
                                                  "evidence": m.evidence, "similarity": found.similarity,
                                                  "from": mid})]
        if found.adopt_anchors:
            events.append(Pending("reanchor", into, by, {"anchors": m.anchors}))
        events.append(Pending("link", into, by, {"target": mid, "relation": "derived_from", "why": "merged: " + why}))
        events.append(Pending("status", mid, by, {"status": "superseded", "why": f"merged into {into}: {why}"}))
        return events

    def edit(self, ref: str, *, content: str | None = None, kind: str | None = None,
             tags: Sequence[str] | None = None, importance: float | None = None, pinned: bool | None = None,
             status: str | None = None, why: str | None = None, source: Source | None = None,
             context: str | None = None) -> Memory:
        """Change a memory's fields and/or status; returns it as it is now."""
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = check_content(content)
        if context is not None:
            changes["context"] = check_context(context)
        if kind is not None:
            changes["kind"] = check_kind(kind)
        if tags is not None:
            changes["tags"] = check_tags(list(tags))
        if importance is not None:
            changes["importance"] = check_importance(importance)
        if pinned is not None:
            changes["pinned"] = bool(pinned)
        if status is not None:
            check_status(status)
        if not changes and status is None:
            raise BadInput("nothing to change: give the new content, kind, tags, importance, pin or status")
        by = (source or Source("person")).to_json()
        with self._writing():
            no, mid = self.resolve(ref)
            current = self.by_no([no])[no]
            changes = {k: v for k, v in changes.items() if getattr(current, k) != v}
            events = [Pending("edit", mid, by, {"set": changes})] if changes else []
            if status is not None and status != current.status:
                events.append(Pending("status", mid, by, {"status": status, "why": why}))
            self._commit(events)
        if "content" in changes:
            self._embed_if_cheap([changes["content"]])
        return self.get(mid)

    def link(self, ref: str, target_ref: str, relation: str, *, why: str | None = None,
             source: Source | None = None) -> dict[str, Any]:
        """A typed link from one memory to another; `supersedes` marks the target superseded."""
        check_relation(relation)
        with self._writing():
            _, src = self.resolve(ref)
            _, dst = self.resolve(target_ref)
            if src == dst:
                raise BadInput(f"a memory cannot be linked to itself ({src})")
            self._commit([Pending("link", src, (source or Source("person")).to_json(),
                                  {"target": dst, "relation": relation, "why": why})])
        return {"from": src, "to": dst, "relation": relation}

    def reanchor(self, ref: str, at: str, *, source: Source | None = None,
                 buffers: Mapping[str, str] | None = None) -> Memory:
        """Confirm where a memory's code is now: the anchor in that file (or its only anchor) is
        replaced by the span given; otherwise the span is added."""
        anchor = self._capture(at, buffers)
        with self._writing():
            no, mid = self.resolve(ref)
            current = self.by_no([no], full=True)[no].anchors
            places = self.places([no]).get(no, [])
            same = [i for i, a in enumerate(current)
                    if a.get("file") == anchor["file"] or (i < len(places) and places[i].file == anchor["file"])]
            if same:
                anchors = [a for i, a in enumerate(current) if i not in same[1:]]
                anchors[same[0]] = anchor
            elif len(current) == 1:
                anchors = [anchor]
            else:
                anchors = [*current, anchor]
            self._commit([Pending("reanchor", mid, (source or Source("person")).to_json(), {"anchors": anchors})])
        return self.get(mid)

    def forget(self, ref: str, *, purge: bool = False, why: str | None = None,
               source: Source | None = None) -> dict[str, Any]:
        """Tombstone a memory (hidden everywhere, for good); with `purge`, also erase its events
        from the log files (docs/memories.md, "Purge")."""
        with self._writing():
            mid = self._forgettable(ref) if purge else self.resolve(ref)[1]
            self._recalled.pop(mid, None)
            rewritten: list[str] = []
            dropped = 0
            if purge:
                rewritten, dropped = self.log.purge(mid)
            by = (source or Source("person")).to_json()
            written = self.log.append([Pending("forget", mid, by, {"purge": purge, "why": why})],
                                      not_before=projection.last_key(self.db)[0] or None)
            with projection.scrubbing(self.db, purge):  # freed pages zeroed, not left holding the text
                with immediate(self.db):
                    projection.apply(self.db, written)
                    projection.record_appended(self.db, self.log, written)
                    if purge:
                        projection.erase_leftovers(self.db)
                self._record_rewritten(rewritten)
        return {"id": mid, "forgotten": True, "purged": purge, "files_rewritten": len(rewritten),
                "events_removed": dropped}

    # ------------------------------------------------------------ recall reinforcement

    def recalled(self, ids: Sequence[str]) -> None:
        """Count a recall of these memories: written with the next batch (see REINFORCE_BATCH)."""
        with self._lock:
            if not self._recalled:
                self._first_recalled = time.monotonic()
            self._recalled.update(ids)
        self.flush_recalls()

    def flush_recalls(self, force: bool = False) -> int:
        with self._lock:
            waiting = sum(self._recalled.values())
            if not waiting or not force and waiting < REINFORCE_BATCH and \
                    time.monotonic() - self._first_recalled < REINFORCE_WAIT_S:
                return 0
            counts, self._recalled = dict(self._recalled), Counter()
            with self._writing():
                self._commit([Pending("recalled", None, calling_agent().to_json(), {"memories": counts})])
        return waiting

    # ------------------------------------------------------------ reading

    def list(self, *, at: str | None = None, drifted: bool = False, kind: str | None = None,
             tags: Sequence[str] = (), hidden: bool = False, limit: int | None = None,
             buffers: Mapping[str, str] | None = None) -> list[tuple[Memory, list[Place]]]:
        """Memories, most recently changed first, with their anchors resolved. Filters: anchored
        on or near `at`; with a drifted anchor (anything but intact); of `kind`; carrying every
        tag of `tags`; `hidden` includes superseded, invalidated and archived ones."""
        self.sync()
        if kind is not None:
            check_kind(kind)
        where, args = [], []
        if not hidden:
            where.append("status = 'active'")
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        for tag in check_tags(list(tags)):
            where.append("EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?)")
            args.append(tag)
        if at is not None:
            place = self.at(at)
            nos = [no for no, _ in near(self.db, self.store.root, place.file, place.start, place.end, buffers)]
            where.append("no IN (SELECT value FROM json_each(?))")
            args.append(orjson.dumps(nos).decode())
        if drifted:
            where.append("no IN (SELECT memory FROM memory_anchors)")
        sql = projection.select_sql(("WHERE " + " AND ".join(where)) if where else "") + " ORDER BY updated DESC, id"
        found: list[tuple[Memory, list[Place]]] = []
        for batch in _batches(self.db.execute(sql, args), 256):
            places = self.places([r[0] for r in batch], buffers)
            for r in batch:
                mem_places = places.get(r[0], [])
                if drifted and best_state(mem_places) in (None, "intact"):
                    continue
                found.append((projection.row_to_memory(self.db, r, full=True), mem_places))
                if limit is not None and len(found) >= limit:
                    return found
        return found

    def anchored_in(self, file: str) -> list[int]:
        """The active memories (numbers) with an anchor in `file` or last resolved into it."""
        self.sync()
        return [r[0] for r in self.db.execute(
            "SELECT DISTINCT a.memory FROM memory_anchors a JOIN memories m ON m.no = a.memory"
            " WHERE (a.file = ? OR a.at_file = ?) AND m.status = 'active'", (file, file))]

    def in_file(self, file: str, buffers: Mapping[str, str] | None = None, attribute: bool = True,
                quick: bool = False, nos: Sequence[int] | None = None, follow: bool = False
                ) -> list[tuple[Memory, list[Place]]]:
        """The active memories with an anchor in `file` (repository-relative), each with those of its
        places that are in it now (a vanished anchor: where it was): what an editor shows on that
        file's lines (hovers, lenses, drift diagnostics), vanished anchors included unlike `near`.
        `attribute`, `quick`: see `places_of`. `nos`: only these of `anchored_in(file)` (a caller
        resolving hundreds in slices, so that other work is not queued behind them). `follow`: the
        file as it is on disk, its last resolution in this process moved along with the edits
        since and only the notes they touched resolved again (`engram.memory.follow`; a server
        answering an agent's hook before each edit, the file changed by the edit before)."""
        if follow and buffers is None and not quick and nos is None:
            nos = self.anchored_in(file)
            places = self._followed_places(file, nos, attribute)
        else:
            nos = self.anchored_in(file) if nos is None else list(nos)
            places = self.places(nos, buffers, attribute, quick)
        mems = self.by_no(nos, full=True)
        found = []
        for no in nos:
            here = [p for p in places.get(no, []) if p.file == file]
            if here and no in mems:
                found.append((mems[no], here))
        found.sort(key=lambda mp: (min(p.start for p in mp[1]), mp[0].id))
        return found

    def _followed_places(self, file: str, nos: list[int], attribute: bool) -> dict[int, list[Place]]:
        """`in_file`'s places with `follow`: kept in `self.followed` with the text they are for."""
        from engram.memory.anchors import working_text  # noqa: PLC0415

        text = working_text(self.store.root, file, None)

        def resolve(todo: list[int]) -> dict[int, list[Place]]:
            got = self.places(todo, None, attribute)
            return {no: [p for p in ps if p.file == file] for no, ps in got.items()}

        return self.followed.places(file, text, self.stamp(), nos, resolve)

    @cached_property
    def followed(self) -> Followed:
        """The last resolutions of the files `in_file(follow=True)` was asked about."""
        from engram.memory.follow import Followed  # noqa: PLC0415

        return Followed()

    def graph(self, ref: str, depth: int = 2) -> dict[str, Any]:
        """The memories linked to one, both ways, to `depth` links (at most MAX_GRAPH_DEPTH)."""
        if not 1 <= depth <= MAX_GRAPH_DEPTH:
            raise BadInput(f"depth {depth}: from 1 to {MAX_GRAPH_DEPTH}")
        root, _ = self.resolve(ref)
        seen = {root: 0}
        edges: set[tuple[int, int, str, int]] = set()
        frontier = [root]
        for d in range(1, depth + 1):
            nxt = []
            for no in frontier:
                for src, dst, rel, cand in self.db.execute(
                        "SELECT src, dst, relation, candidate FROM memory_relations WHERE src = ? OR dst = ?", (no, no)):
                    edges.add((src, dst, rel, cand))
                    other = dst if src == no else src
                    if other not in seen:
                        seen[other] = d
                        nxt.append(other)
            frontier = nxt
        mems = self.by_no(list(seen))
        ids = {no: m.id for no, m in mems.items()}
        return {
            "root": ids[root],
            "nodes": [{"id": ids[no], "depth": d, "kind": mems[no].kind, "status": mems[no].status,
                       "summary": mems[no].summary} for no, d in sorted(seen.items(), key=lambda x: (x[1], ids[x[0]]))],
            "edges": [{"from": ids[s], "to": ids[t], "relation": r, "candidate": bool(c)}
                      for s, t, r, c in sorted(edges, key=lambda e: (ids[e[0]], ids[e[1]], e[2])) if s in ids and t in ids],
        }

    def relations(self, no: int) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT 'out', m.id, r.relation, r.candidate, r.why FROM memory_relations r JOIN memories m ON m.no = r.dst"
            " WHERE r.src = ? UNION ALL SELECT 'in', m.id, r.relation, r.candidate, r.why FROM memory_relations r"
            " JOIN memories m ON m.no = r.src WHERE r.dst = ? ORDER BY 2, 3", (no, no)).fetchall()
        return [{"direction": d, "id": mid, "relation": rel, "candidate": bool(c), "why": why}
                for d, mid, rel, c, why in rows]


def _batches(rows: Any, size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for r in rows:
        batch.append(r)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _cwd_inside(root: Any) -> Any:
    """Relative paths are taken from the working directory when it is inside the repository (a
    user in src/ names `app.py`), else from the root (a server started elsewhere)."""
    from pathlib import Path  # noqa: PLC0415

    cwd = Path.cwd().resolve()
    rootp = Path(root).resolve()
    return cwd if cwd == rootp or rootp in cwd.parents else rootp


SCOPES = ("team", "personal")


def check_scope(scope: str) -> str:
    if scope not in SCOPES:
        raise BadInput(f"scope {scope!r}: must be team (leaves with `engram push`) or personal (never leaves)")
    return scope


def rebuild_projection(store: Store, db: apsw.Connection) -> dict[str, Any]:
    """Replay the store's memory log into `db` (`engram reindex` passes it to
    `engram.index.reindex.reindex`): what the reindex report adds."""
    events = EventLog(store)
    with memory_lock(store):
        stats = projection.rebuild(db, events)
        for memory in stats["purged"]:  # (events copied in before their purge tombstone)
            events.purge(memory)
        if stats["purged"]:
            stats = projection.rebuild(db, events)
    n = db.execute("SELECT count(*) FROM memories").fetchall()[0][0]
    return {"memories": n, "memory_events": stats["events"], "memory_lines_skipped": stats["torn"]}


def embed_waiting(store: Store, *, load: bool = True) -> int:
    """Embed the memories of `store` still waiting for a vector (after an ingest or a reindex), with
    the cosine half of dedup for those remember wrote (`Memories.embed_pending`): nothing to do,
    and nothing loaded, when the store has no memory log or nothing waits."""
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.memory import has_log  # noqa: PLC0415
    from engram.memory.vectors import count_pending  # noqa: PLC0415
    from engram.store.lock import embed_lock_if_free  # noqa: PLC0415

    if not has_log(store):
        return 0
    with embed_lock_if_free(store) as mine:
        if not mine:
            return 0
        db = open_db(store)
        try:
            if not count_pending(db):
                return 0
            return Memories(store, db).embed_pending(load=load)
        finally:
            db.close()


_open: dict[str, tuple[int, Memories]] = {}
_open_lock = threading.Lock()


def open_memories(store: Store) -> Memories:
    """This process's Memories of `store`, opened once and kept (a warm matrix and connection);
    opened again if index.sqlite was replaced (a reindex that set a damaged one aside)."""
    from engram.index.db import index_inode  # noqa: PLC0415

    path = str(store.index_path)
    with _open_lock:
        cached = _open.get(path)
        if cached is not None and cached[0] == index_inode(store):
            cached[1].sync()
            return cached[1]
        mem = Memories(store)
        _open[path] = (index_inode(store), mem)
        return mem


def close_all() -> None:
    """Write every open store's waiting reinforcement (a process about to exit)."""
    with _open_lock:
        for _, mem in _open.values():
            try:
                mem.close()
            except Exception:  # noqa: BLE001 - reinforcement is a hint; exiting matters more
                log.exception("writing recall reinforcement")
