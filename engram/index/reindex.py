"""`engram reindex`: rebuild index.sqlite's projections from their sources: the catalog and the
evidence index from the tapes alone, then whatever the caller adds (`also`: the memories, from
their event log; the index may not import the layers above it that own them)."""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import apsw

from engram.index.catalog import register_intact
from engram.errors import DamagedIndex
from engram.index import memo, stoplist
from engram.index.build import Indexer, small_pages
from engram.fsutil import names_in
from engram.index.db import open_db, quick_check, set_aside, set_aside_paths
from engram.index.sql import immediate
from engram.store.lock import ingest_lock
from engram.store.repo import Store
from engram.tape.writer import tape_files
from engram.words import plural

log = logging.getLogger(__name__)

DERIVED = ("tapes", "captures", "files", "fragments", "postings", "edit_postings", "segments", "stoplist", "lineage",
           "tombstones", "tombstone_fps", "continuations", "heads", "head_fps", "tail_fps", "state", "subagents",
           "requests")


Projection = Callable[[Store, apsw.Connection], dict[str, Any]]


def reindex(store: Store, k: int | None = None, w: int | None = None, also: Sequence[Projection] = (),
            scrub: bool = False) -> dict[str, Any]:
    """Readers see the old index until the catalog is rebuilt, then an index that fills up.
    `k`, `w`: the anchor parameters to rebuild with (the defaults; bench/provenance.py tries others).
    `also`: further projections rebuilt afterwards on the same connection; what each returns is
    added to the answer. `scrub` (a purge): the pages the rebuild frees are zeroed and the WAL
    truncated after, so the removed tapes' text is not left in the file's free pages."""
    with ingest_lock(store):
        try:
            db = open_db(store)
        except DamagedIndex:
            set_aside(store)
            db = open_db(store)
        try:
            if scrub:
                db.execute("PRAGMA secure_delete = ON")
            try:
                out = _rebuild(store, db, k, w, also)
            except (apsw.CorruptError, apsw.NotADBError) as exc:
                # Pages inside the file are damaged (its header reads): the first rebuild's DELETEs
                # or reads met them. The tapes are the truth: start again from an empty file.
                log.warning("index.sqlite is damaged (%s; quick_check: %s)", exc, quick_check(db))
                db.close()
                set_aside(store)
                db = open_db(store)
                out = _rebuild(store, db, k, w, also)
            if scrub:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                _scrub_copies(store)
            return out
        finally:
            db.close()


def _scrub_copies(store: Store) -> None:
    """What a purge must not leave elsewhere in the store: an index a rebuild set aside as damaged
    (index.sqlite.damaged, kept for a look) holds every session's text as it was, the purged one's
    too, so it goes. Tapes in quarantine/ are damaged, so unread: the user is told they remain."""
    for path in set_aside_paths(store):
        path.unlink()
        log.warning("removed %s (an index set aside as damaged: it held the text being purged)", path.name)
    left = names_in(store.quarantine_dir)
    if left:
        log.warning("%s in %s not read: delete them if they may hold what was purged",
                    plural(len(left), "damaged tape file"), store.quarantine_dir)


def _rebuild(store: Store, db: apsw.Connection, k: int | None, w: int | None, also: Sequence[Projection]
             ) -> dict[str, Any]:
    with immediate(db):
        for table in DERIVED:
            db.execute(f"DELETE FROM {table}")
        db.execute("INSERT INTO fts(fts) VALUES('delete-all')")  # (a DELETE leaves the terms in its segments)
        # Readers see this with the emptied catalogue: their answers say they are partial until
        # the last transaction below (a reindex killed half-way leaves it: run it again).
        db.execute("INSERT OR REPLACE INTO state(key, value) VALUES(?, ?)", (memo.REBUILDING, "1"))
        damaged = register_intact(db, store, tape_files(store.tapes_dir))
    from engram.anchor import DEFAULT_K, DEFAULT_W  # noqa: PLC0415

    indexer = Indexer(store, k or DEFAULT_K, w or DEFAULT_W)  # a rebuild adopts the current parameters
    ids = [r[0] for r in db.execute("SELECT id FROM tapes ORDER BY begins, id")]
    with small_pages():
        for tid in ids:
            indexer.add(db, tid)
        indexer.flush(db)
    cfg = store.config["index"]
    with immediate(db):
        n_stop, _ = stoplist.rebuild_from_config(db, store)
    frags = db.execute("SELECT count(*) FROM fragments").fetchall()[0][0]
    out = {"tapes": len(ids), "fragments": frags, "stoplist": n_stop, "damaged": damaged,
           "stoplist_share": float(cfg["stoplist_share"]), "stoplist_min_tapes": int(cfg["stoplist_min_tapes"])}
    for rebuild in also:
        out.update(rebuild(store, db))
    with immediate(db):  # whole again: a new epoch tells a language server to recompute its lenses
        db.execute("DELETE FROM state WHERE key = ?", (memo.REBUILDING,))
        memo.new_epoch(db)
    return out
