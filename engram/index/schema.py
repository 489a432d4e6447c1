"""The index schema's versioned migrations, applied in order by `open_db`.

The database is a projection of the tapes; a migration may therefore drop and rebuild derived
tables, and `engram reindex` is always a valid way out of a bad state. Each migration imports
what it rewrites (postings, lineage, kinds), which is why they live apart from `db`: the
modules they use can import `engram.index.sql` without importing the schema."""

from __future__ import annotations

import logging
from typing import Callable

import apsw

from engram.index.sql import immediate

log = logging.getLogger(__name__)


def _v1(db: apsw.Connection) -> None:
    db.execute(
        """
        CREATE TABLE tapes(
            id TEXT PRIMARY KEY,
            harness TEXT NOT NULL,
            session_id TEXT NOT NULL,
            model TEXT,
            started TEXT,
            ended TEXT,
            events INTEGER NOT NULL,
            edits INTEGER NOT NULL,
            reads INTEGER NOT NULL,
            size INTEGER NOT NULL,
            raw_bytes INTEGER NOT NULL,
            prev TEXT,
            indexed INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX tapes_session ON tapes(session_id);
        -- Which bytes of which source file each tape captured: how ingest knows what is new.
        CREATE TABLE captures(
            tape TEXT NOT NULL,
            harness TEXT NOT NULL,
            session_id TEXT NOT NULL,
            source TEXT NOT NULL,
            path TEXT NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            prefix_sha256 TEXT NOT NULL,
            PRIMARY KEY(tape, source)
        ) WITHOUT ROWID;
        CREATE INDEX captures_path ON captures(path, end);
        CREATE INDEX captures_session ON captures(harness, session_id, source, end);
        """
    )


def _v2(db: apsw.Connection) -> None:
    """The evidence index: fragments, bucketed posting segments, lineage, tombstones, continuations."""
    db.execute(
        """
        ALTER TABLE tapes ADD COLUMN no INTEGER;
        CREATE UNIQUE INDEX tapes_no ON tapes(no);
        CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL);
        -- One row per event with text: the unit explain reports ("evidence fragment").
        CREATE TABLE fragments(
            id INTEGER PRIMARY KEY,
            tape INTEGER NOT NULL,      -- tapes.no
            offset INTEGER NOT NULL,    -- event offset in the tape
            kind INTEGER NOT NULL,      -- see engram.index.kinds
            file INTEGER,               -- files.id for code.* events
            ts TEXT,
            nfp INTEGER NOT NULL,       -- distinct fingerprints of the event's text
            line0 INTEGER, line1 INTEGER
        );
        CREATE INDEX fragments_tape ON fragments(tape, offset);
        CREATE INDEX fragments_file ON fragments(file) WHERE file IS NOT NULL;
        -- Postings, bucketed by the fingerprint's top bits; one row per bucket per segment.
        CREATE TABLE postings(bucket INTEGER NOT NULL, seg INTEGER NOT NULL, blob BLOB NOT NULL,
                              PRIMARY KEY(bucket, seg)) WITHOUT ROWID;
        CREATE TABLE segments(seg INTEGER PRIMARY KEY, postings INTEGER NOT NULL, tapes INTEGER NOT NULL);
        CREATE TABLE stoplist(fp INTEGER PRIMARY KEY, tapes INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE lineage(
            dst INTEGER NOT NULL,       -- the code.edit fragment
            src INTEGER NOT NULL,       -- the earlier fragment that produced its before-text
            confidence REAL NOT NULL,   -- fingerprint similarity of the edit's before and after text
            containment REAL NOT NULL,  -- share of the before-text fingerprints found in src
            location_delta TEXT NOT NULL,
            cardinality TEXT NOT NULL,
            agent_link INTEGER NOT NULL DEFAULT 0,
            note TEXT,
            PRIMARY KEY(dst, src)
        ) WITHOUT ROWID;
        CREATE INDEX lineage_src ON lineage(src);
        CREATE TABLE tombstones(
            id INTEGER PRIMARY KEY,
            frag INTEGER NOT NULL,      -- the code.edit that deleted the text
            file INTEGER, line0 INTEGER, line1 INTEGER, ts TEXT,
            anchors BLOB NOT NULL       -- sorted int64 fingerprints of the deleted text
        );
        CREATE TABLE continuations(
            src_tape INTEGER NOT NULL, dst_tape INTEGER NOT NULL,
            confidence REAL NOT NULL, marker TEXT,
            PRIMARY KEY(src_tape, dst_tape)
        ) WITHOUT ROWID;
        CREATE TABLE heads(tape INTEGER PRIMARY KEY, head BLOB NOT NULL, tail BLOB NOT NULL, marker TEXT);
        CREATE VIRTUAL TABLE fts USING fts5(text, content='', contentless_delete=1);
        CREATE TABLE state(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
        """
    )


def _v3(db: apsw.Connection) -> None:
    """Tombstone fingerprints, so re-insertion finds its tombstones by lookup, not by a scan."""
    import numpy as np  # noqa: PLC0415

    db.execute("CREATE TABLE tombstone_fps(fp INTEGER NOT NULL, tomb INTEGER NOT NULL, PRIMARY KEY(fp, tomb))"
               " WITHOUT ROWID")
    for tomb, anchors in db.execute("SELECT id, anchors FROM tombstones").fetchall():
        db.executemany("INSERT OR IGNORE INTO tombstone_fps(fp, tomb) VALUES(?, ?)",
                       ((int(v), tomb) for v in np.frombuffer(anchors, "<i8")))


def _v4(db: apsw.Connection) -> None:
    """Explicit agent links by file, without scanning every fragment of a busy file."""
    db.execute("CREATE INDEX fragments_links ON fragments(file, line0, line1) WHERE kind = 7")


def _v5(db: apsw.Connection) -> None:
    """Postings in a rowid table, and code.edit fragments indexed for lineage.

    A WITHOUT ROWID row keeps at most ~1 KB in its b-tree page (4 KB pages); bucket blobs are
    ~1.4 KB at 1 GB of transcripts, so every row spilled to an overflow page that was mostly empty
    (index 254 MB, 104 MB of it overflow). A rowid table keeps up to ~4 KB in the leaf: 166 MB.
    Lineage looks up earlier code.edit fragments on every flush: the partial index saves a scan.
    """
    db.execute(
        """
        CREATE TABLE postings_v5(bucket INTEGER NOT NULL, seg INTEGER NOT NULL, blob BLOB NOT NULL);
        INSERT INTO postings_v5(bucket, seg, blob) SELECT bucket, seg, blob FROM postings ORDER BY seg, bucket;
        DROP TABLE postings;
        ALTER TABLE postings_v5 RENAME TO postings;
        CREATE UNIQUE INDEX postings_bucket ON postings(bucket, seg);
        CREATE INDEX fragments_edits ON fragments(id) WHERE kind = 6;
        """
    )


def _v6(db: apsw.Connection) -> None:
    """Head and tail fingerprints by value, so a new tape finds the tapes it continues by lookup.

    Continuation edges compare a new tape's head with every earlier tape's tail (and its tail with
    their heads). Before, each flush decoded the `heads` blobs of all tapes into maps: 0.2 s of a
    0.3 s append at 1 GB of transcripts, growing with the store. The `heads` blobs stay: they give
    each tape's head size and marker."""
    import numpy as np  # noqa: PLC0415

    db.execute("""
        CREATE TABLE head_fps(fp INTEGER NOT NULL, tape INTEGER NOT NULL, PRIMARY KEY(fp, tape)) WITHOUT ROWID;
        CREATE TABLE tail_fps(fp INTEGER NOT NULL, tape INTEGER NOT NULL, PRIMARY KEY(fp, tape)) WITHOUT ROWID;
    """)
    for tape, head, tail in db.execute("SELECT tape, head, tail FROM heads").fetchall():
        for table, blob in (("head_fps", head), ("tail_fps", tail)):
            db.executemany(f"INSERT OR IGNORE INTO {table}(fp, tape) VALUES(?, ?)",
                           ((v, tape) for v in np.frombuffer(blob, "<i8").tolist()))


def _v7(db: apsw.Connection) -> None:
    """Postings keyed by `seg << 18 | row` (rowid), rows split by 18 key bits instead of 16.

    At 1 GB of transcripts a 20-line span read ~200 KB of rows (mostly other fingerprints'
    postings); copying and scanning them was half of a warm explain: rows of 18 key bits hold a
    quarter of that. Keying rows by segment first keeps a segment contiguous, so an append
    writes at the end of the table instead of into an index shared by every segment. The rows
    are rewritten from the stored postings (no tape is read): a few seconds at 1 GB, once."""
    from engram.index import postings  # noqa: PLC0415

    n = postings.from_v6(db)
    log.info("posting rows rewritten in the schema 7 layout (%d postings)", n)


def _v8(db: apsw.Connection) -> None:
    """At most FP_ROWS_CAP rows per fingerprint in head_fps / tail_fps (engram.index.lineage).

    A fingerprint in the heads (or tails) of more than COMMON_TEXT_TAPES tapes is boilerplate,
    never counted; its rows for every further tape were half of these tables at 1 GB, and
    inserting them dirtied most of their pages on every append. The rows kept are the earliest
    tapes'."""
    from engram.index.lineage import FP_ROWS_CAP  # noqa: PLC0415

    for table in ("head_fps", "tail_fps"):
        db.execute(f"DELETE FROM {table} WHERE (fp, tape) IN (SELECT fp, tape FROM (SELECT fp, tape, "
                   f"row_number() OVER (PARTITION BY fp ORDER BY tape) AS n FROM {table}) WHERE n > ?)",
                   (FP_ROWS_CAP,))


def _v9(db: apsw.Connection) -> None:
    """`tapes.begins`: when a tape's content begins, the order tapes are indexed in.

    A session's first tape begins when the session started; a later segment (a live session
    captured again) when its own first event happened, not at the session's start: indexed by
    session start, a rebuild put a long session's later segments before sessions that ran in
    between, and their lineage reversed. New tapes get it from their events (`catalog_row`, also
    on `engram reindex`); here a segment's is read from its fragments' times, the events the
    index holds."""
    db.execute("ALTER TABLE tapes ADD COLUMN begins TEXT")
    db.execute("UPDATE tapes SET begins = started")
    db.execute("UPDATE tapes SET begins = m.first FROM (SELECT tape, min(ts) AS first FROM fragments"
               " WHERE ts IS NOT NULL GROUP BY tape) AS m WHERE m.tape = tapes.no AND tapes.prev IS NOT NULL")


def _v10(db: apsw.Connection) -> None:
    """The code.edit fragments' postings apart (`postings.EDITS`), where lineage looks up sources.

    An append's source lookup read the rows of every posting of its edits' fingerprints, then
    sorted thousands of candidate reads and messages out by kind: 12-46 ms of a 1 MB append at
    1 GB. Filled from the stored postings and fragment kinds (no tape is read): 3.3-3.5 s at 1 GB."""
    import numpy as np  # noqa: PLC0415

    from engram.arrays import member  # noqa: PLC0415
    from engram.index import postings  # noqa: PLC0415
    from engram.index.kinds import KIND_NO  # noqa: PLC0415
    from engram.tape import events as E  # noqa: PLC0415

    db.execute(f"CREATE TABLE {postings.EDITS}(id INTEGER PRIMARY KEY, blob BLOB NOT NULL)")
    rows = db.execute("SELECT id FROM fragments WHERE kind=? ORDER BY id", (KIND_NO[E.CODE_EDIT],)).fetchall()
    edits = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    for (seg,) in db.execute("SELECT seg FROM segments ORDER BY seg").fetchall():
        key, frags = postings.all_postings(db, [seg])
        keep = member(frags.astype(np.int64), edits)
        postings.write_sorted(db, seg, key[keep], frags[keep], table=postings.EDITS)


def _v11(db: apsw.Connection) -> None:
    """`subagents`: the tapes of sessions another agent started, with that agent's session.

    A Codex `guardian` reviewer is sent its parent thread's history, planned patches included,
    as one long prompt: it holds the parent's work as a copy (`engram.query.copies`). Tapes
    captured before it have no such rows; nothing can be filled in from the index."""
    db.execute("CREATE TABLE subagents(tape TEXT PRIMARY KEY, kind TEXT NOT NULL, parent_session TEXT) WITHOUT ROWID")


def _v12(db: apsw.Connection) -> None:
    """Memories: the projection of the memory event log (`engram.memory.projection` fills it).

    `memories.no` is the row number the full-text index and the embedding matrix use; `seq` the
    projection's change counter when the row last changed (a long-lived process refreshes its
    embedding matrix from it). Anchors keep their resolution (state, place) with the stat of the
    file it was resolved against. Vectors are keyed by the content's hash and the model, so a
    rebuild from the log keeps them. `memory_terms` counts the memories each word is in (recall
    leaves the commonest words of a long query out of its full-text match at scale). `memory_log`
    says how much of each log file is applied.
    (IF NOT EXISTS: a store whose version was set back by hand keeps its memory tables.)"""
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS memories(
            no INTEGER PRIMARY KEY,
            id TEXT UNIQUE NOT NULL,
            content TEXT NOT NULL,
            hash TEXT NOT NULL,          -- blake2b of the content: the vector's key
            kind TEXT NOT NULL,
            tags TEXT NOT NULL,          -- JSON array
            importance REAL NOT NULL,
            pinned INTEGER NOT NULL,
            source TEXT NOT NULL,        -- JSON object
            trust INTEGER NOT NULL,
            status TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            last_recalled TEXT,
            recall_count INTEGER NOT NULL DEFAULT 0,
            evidence TEXT NOT NULL,      -- JSON array of {tape, offset}
            seq INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS memories_seq ON memories(seq);
        CREATE INDEX IF NOT EXISTS memories_hash ON memories(hash);
        CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(content, tags, content='', contentless_delete=1,
                                                   tokenize='porter unicode61');
        CREATE TABLE IF NOT EXISTS memory_anchors(
            memory INTEGER NOT NULL,     -- memories.no
            n INTEGER NOT NULL,          -- the anchor's place in the memory's list
            file TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
            anchor TEXT NOT NULL,        -- JSON: engram.memory.anchors.Anchor.to_json()
            state TEXT, at_file TEXT, at_start INTEGER, at_end INTEGER, retained REAL,
            resolution TEXT,             -- JSON: the last Resolution.to_json()
            stamp TEXT,                  -- the stat of each file it was resolved against
            PRIMARY KEY(memory, n)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS memory_anchors_file ON memory_anchors(file);
        CREATE INDEX IF NOT EXISTS memory_anchors_at_file ON memory_anchors(at_file);
        CREATE TABLE IF NOT EXISTS memory_relations(
            src INTEGER NOT NULL, dst INTEGER NOT NULL, relation TEXT NOT NULL,
            ts TEXT NOT NULL, why TEXT, candidate INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY(src, dst, relation)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS memory_relations_dst ON memory_relations(dst);
        CREATE TABLE IF NOT EXISTS memory_transitions(
            memory INTEGER NOT NULL, ts TEXT NOT NULL, status_from TEXT, status TEXT NOT NULL,
            by TEXT NOT NULL, why TEXT
        );
        CREATE INDEX IF NOT EXISTS memory_transitions_memory ON memory_transitions(memory, ts);
        CREATE TABLE IF NOT EXISTS memory_forgotten(id TEXT PRIMARY KEY, ts TEXT NOT NULL, purged INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS memory_vectors(hash TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL,
                                    PRIMARY KEY(hash, model));
        CREATE TABLE IF NOT EXISTS memory_terms(term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS memory_log(file TEXT PRIMARY KEY, size INTEGER NOT NULL, ino INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS memory_state(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
        """
    )


def _v13(db: apsw.Connection) -> None:
    """`requests`: the first line of each person's request (`kinds.request_line`), by msg.in fragment.

    `engram blame` names each region's edit by the request that led to it; reading that from the
    tape decompressed a frame per edit, a third of a cold blame of a 5,000-line file (~100 edits).
    Tapes indexed before have no rows: `state.requests_from` is the first fragment id that has
    them, and blame reads the older ones' requests from their tapes until `engram reindex`."""
    db.execute("CREATE TABLE IF NOT EXISTS requests(frag INTEGER PRIMARY KEY, line TEXT NOT NULL,"
               " long INTEGER NOT NULL)")
    db.execute("INSERT OR REPLACE INTO state(key, value) SELECT 'requests_from', (SELECT max(id) + 1 FROM fragments)"
               " WHERE EXISTS (SELECT 1 FROM fragments)")


def _v14(db: apsw.Connection) -> None:
    """A memory's context: what it was said in reply to or written during (the request it answers,
    the conversation before it), searched at half the weight of its content (`MEMORY_FTS_RANK`) and
    never shown as the memory itself. The full-text table gets the column (it is contentless:
    rebuilt from `memories`; no memory had a context before)."""
    if "context" not in {r[1] for r in db.execute("PRAGMA table_info(memories)")}:  # (a version set back by hand)
        db.execute("ALTER TABLE memories ADD COLUMN context TEXT NOT NULL DEFAULT ''")
    db.execute("DROP TABLE IF EXISTS memory_fts")
    db.execute("CREATE VIRTUAL TABLE memory_fts USING fts5(content, tags, context, content='', contentless_delete=1,"
               " tokenize='porter unicode61')")
    db.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES('rank', ?)", (MEMORY_FTS_RANK,))
    db.execute("INSERT INTO memory_fts(rowid, content, tags, context) SELECT no, content,"
               " coalesce((SELECT group_concat(value, ' ') FROM json_each(tags)), ''), context FROM memories")


#: The memories' full-text ranking: content 1.0, tags 1.0, context 0.5 (context alone matching is a
#: weaker sign; 0.5 was the best of 0.3-1.0 on LoCoMo's tuning conversations, bench/locomo.py).
MEMORY_FTS_RANK = "bm25(1.0, 1.0, 0.5)"


MIGRATIONS: list[Callable[[apsw.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9, _v10, _v11,
                                                       _v12, _v13, _v14]
REWRITES = {7}  # schema versions whose migration rewrites the largest table: compact after it
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: apsw.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchall()[0][0]
    if version > SCHEMA_VERSION:
        from engram.errors import EngramError  # noqa: PLC0415

        raise EngramError(
            f"index.sqlite has schema {version}, newer than this engram ({SCHEMA_VERSION}); upgrade engram"
        )
    rewrote = False
    while version < SCHEMA_VERSION:
        # One immediate transaction per step: a crash leaves the previous version intact, and a
        # second process that migrated meanwhile is noticed instead of applied twice.
        with immediate(db):
            current = db.execute("PRAGMA user_version").fetchall()[0][0]
            if current == version:
                MIGRATIONS[version](db)
                db.execute(f"PRAGMA user_version={version + 1}")
                log.info("index.sqlite migrated to schema %d", version + 1)
                rewrote |= version + 1 in REWRITES
        version = db.execute("PRAGMA user_version").fetchall()[0][0]
    if rewrote:
        _compact(db)


def _compact(db: apsw.Connection) -> None:
    """Give back the pages of tables a migration rewrote (the file had doubled); if another
    connection is using the index now, the free pages are simply reused by later writes."""
    try:
        db.execute("VACUUM")
    except (apsw.BusyError, apsw.LockedError, apsw.SQLError) as exc:
        log.info("index.sqlite not compacted after migrating (%s); its free pages will be reused", exc)
