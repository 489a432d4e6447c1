"""The index's storage: stop-list, segment merges, edit postings, and the schema migrations, on real SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from conftest import run_engram
from test_explain import direct_both
from test_lineage import block, edit, tape, text

from engram.capture.discovery import jobs_from_paths
from engram.capture.pipeline import ingest, ingest_paths, merge_idle
from engram.capture.stats import IngestStats
from engram.index import postings
from engram.index.build import Indexer
from engram.index.db import BUSY_TIMEOUT_MS
from engram.index.kinds import KIND_NO
from engram.index.schema import MIGRATIONS
from engram.index.sql import int_array
from engram.store.lock import ingest_lock
from engram.store.repo import Store

ROW_IDS = (1 << postings.ROW_KEY_BITS) - 1  # a posting row's id without its segment


def explain_text(repo: Path, span_text: str) -> list[str]:
    doc = json.loads(run_engram(repo, "explain", "--brief", "--text", "-", input=span_text.encode()).stdout)
    return [s["session_id"] for s in doc["sessions"]]


def read(file: str, lines: list[str], ts: str) -> dict[str, Any]:
    return {"kind": "code.read", "ts": ts, "file": file, "range": [1, len(lines)], "text": text(lines)}


def db_of(repo: Path) -> apsw.Connection:
    """The index as a test reads it beside engram's own processes: with engram's busy timeout, so
    a test's read waits for a writer (a merge, an append) instead of failing "database is locked"."""
    conn = apsw.Connection(str(repo / ".engram" / "index.sqlite"))
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def six_sessions(tmp_path: Path) -> list[Path]:
    """Six sessions that all read one common file; s0 also writes a block nobody else has."""
    common = block("common", 12)
    paths = []
    for i in range(6):
        events = [read("lib/common.py", common, f"2026-01-0{i + 1}T10:00:00Z"),
                  read(f"lib/own{i}.py", block(f"own{i}", 8), f"2026-01-0{i + 1}T10:01:00Z")]
        if i == 0:
            events.append(edit("lib/rare.py", [], block("rare", 6), "2026-01-01T10:02:00Z", op="create"))
        paths.append(tape(tmp_path, f"s{i}", f"2026-01-0{i + 1}T10:00:00Z", events))
    return paths


def test_stoplist_drops_common_text_but_never_silences_a_span(repo: Path, tmp_path: Path) -> None:
    (repo / ".engram" / "config.toml").write_text("[index]\nstoplist_share = 0.5\nstoplist_min_tapes = 4\n")
    run_engram(repo, "ingest", *map(str, six_sessions(tmp_path)))
    out = run_engram(repo, "reindex").stdout
    assert "stop-listed fingerprints (threshold 50% of tapes, at least 4 tapes)" in out
    listed = {r[0]: r[1] for r in db_of(repo).execute("SELECT fp, tapes FROM stoplist")}
    assert listed and set(listed.values()) == {6}  # the common file, read by all six sessions
    # A span that is all common text is still answered: by every session that read it.
    assert sorted(explain_text(repo, text(block("common", 12)))) == [f"s{i}" for i in range(6)]
    # A span that is mostly rare text is answered by its rare part: the writer alone.
    assert explain_text(repo, text(block("common", 2) + block("rare", 6))) == ["s0"]
    # Each session's own file is not common: found, and only in its session.
    assert explain_text(repo, text(block("own3", 8))) == ["s3"]
    # The command line matched these in plain Python; the language server matches them with numpy.
    texts = [text(block("common", 12)), text(block("common", 2) + block("rare", 6)), text(block("own3", 8))]
    for small, vec in direct_both(repo, texts):
        assert small and list(small.items()) == list(vec.items())


def _store_with(root: Path) -> Store:
    root.mkdir()
    (root / ".git").mkdir()
    run_engram(root, "init")
    return Store(root)


def _sessions(tmp_path: Path, n: int, offset: int = 0) -> list[Path]:
    out = []
    for i in range(offset, offset + n):
        events = [edit(f"src/f{i}.py", [], block(f"w{i}", 10), f"2026-02-{i % 27 + 1:02d}T10:00:00Z", op="create"),
                  read("src/shared.py", block("shared", 6), f"2026-02-{i % 27 + 1:02d}T10:05:00Z")]
        out.append(tape(tmp_path, f"t{i:02d}", f"2026-02-{i % 27 + 1:02d}T10:00:00Z", events))
    return out


def _ingest(store: Store, paths: list[Path]) -> None:
    ingest(store, jobs_from_paths(paths, IngestStats()), after_tape=Indexer(store), workers=1)


def segments(store: Store) -> list[tuple[int, int]]:
    return db_of(store.root).execute("SELECT seg, postings FROM segments ORDER BY seg").fetchall()


def edit_postings_of_each_segment(store: Store) -> dict[int, list[tuple[int, int]]]:
    """Each segment's edit postings, checked to be exactly its postings of code.edit fragments
    (what lineage finds sources in), and no edit posting outside a segment."""
    db = db_of(store.root)
    edit_no = KIND_NO["code.edit"]
    edits = {r[0] for r in db.execute("SELECT id FROM fragments WHERE kind=?", (edit_no,))}
    segs = [r[0] for r in db.execute("SELECT seg FROM segments")]
    out = {}
    for seg in segs:
        k, f = postings.all_postings(db, [seg])
        ek, ef = postings.all_postings(db, [seg], postings.EDITS)
        out[seg] = sorted(zip(ek.tolist(), ef.tolist()))
        assert out[seg] == sorted((a, b) for a, b in zip(k.tolist(), f.tolist()) if b in edits)
    stray = db.execute("SELECT count(*) FROM edit_postings WHERE (id >> ?) NOT IN carray(?)",
                       (postings.ROW_KEY_BITS, int_array(segs))).fetchall()[0][0] if segs else 0
    assert stray == 0
    return out


def edit_postings_by_event(store: Store) -> list[tuple[int, str, int]]:
    """Every edit posting as (key, tape, event offset), sorted."""
    at = {r[0]: (r[1], r[2]) for r in db_of(store.root).execute(
        "SELECT f.id, t.id, f.offset FROM fragments f JOIN tapes t ON t.no = f.tape")}
    return sorted((k, *at[f]) for seg in edit_postings_of_each_segment(store).values() for k, f in seg)


def test_a_bulk_ingest_leaves_one_segment_and_appends_never_rewrite_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engram.index.build.FLUSH_POSTINGS", 1)  # one segment per tape while ingesting
    store = _store_with(tmp_path / "repo")
    src = tmp_path / "src"
    src.mkdir()
    _ingest(store, _sessions(src, 24))
    [(base, base_n)] = segments(store)  # 24 flushes, merged at the end of the run
    assert len(edit_postings_of_each_segment(store)[base]) >= 24  # each session's edit has some
    seen = {base}
    for j in range(10):  # one session per run, as a hook or the editor would append them
        _ingest(store, _sessions(src, 1, offset=24 + j))
        segs = segments(store)
        assert len(segs) <= postings.MAX_SEGMENTS
        edit_postings_of_each_segment(store)  # appended and merged alike
        # A new segment (appended or merged) never takes an id used before: copies of small
        # segments held in memory are keyed by it.
        new = {s for s, _ in segs} - seen
        assert new and min(new) > max(seen)
        seen |= new
        # Small appends are merged among themselves: the large segment is not rewritten until
        # they add up to half of it.
        assert (base, base_n) in segs
    total = sum(n for _, n in segments(store))
    # Every session is still found by its own code, and the merged segments lose no posting.
    for i in (0, 23, 24, 33):
        assert explain_text(store.root, text(block(f"w{i}", 10))) == [f"t{i:02d}"]
    before = {i: explain_text(store.root, text(block(f"w{i}", 10))) for i in range(34)}
    edits = edit_postings_by_event(store)
    run_engram(store.root, "reindex")
    assert len(segments(store)) == 1 and segments(store)[0][1] == total  # merges lost no posting
    assert edit_postings_by_event(store) == edits  # (a rebuild numbers fragments anew)
    assert {i: explain_text(store.root, text(block(f"w{i}", 10))) for i in range(34)} == before


def test_an_idle_merge_leaves_a_running_ingest_alone_and_loses_no_posting(tmp_path: Path) -> None:
    """Appends a language server indexed with merge_later leave more than MAX_SEGMENTS; its idle
    merge does nothing while an ingest holds the lock, then brings them back under."""
    store = _store_with(tmp_path / "repo")
    src = tmp_path / "src"
    src.mkdir()
    n = postings.MAX_SEGMENTS + 3
    for p in _sessions(src, n):
        ingest_paths(store, [p], merge_later=True)
    assert len(segments(store)) == n
    total = sum(k for _, k in segments(store))
    with ingest_lock(store):  # another ingest running: it merges as it needs
        assert merge_idle(store) == 0 and len(segments(store)) == n
    assert merge_idle(store) >= n - postings.MAX_SEGMENTS
    assert len(segments(store)) <= postings.MAX_SEGMENTS and sum(k for _, k in segments(store)) == total
    for i in (0, n - 1):
        assert explain_text(store.root, text(block(f"w{i}", 10))) == [f"t{i:02d}"]


def _to_schema_6_postings(db: apsw.Connection) -> None:
    """The postings table as schemas 5 and 6 kept it: `(bucket, seg, blob)` rows of the keys'
    top 16 bits, indexed by (bucket, seg). Written here from the decoded postings, so the
    migration is checked against the old format, not against its own inverse."""
    segs = [r[0] for r in db.execute("SELECT seg FROM segments ORDER BY seg")]
    per_seg = {seg: postings.all_postings(db, [seg]) for seg in segs}
    db.execute("DROP TABLE postings")
    db.execute("CREATE TABLE postings(bucket INTEGER NOT NULL, seg INTEGER NOT NULL, blob BLOB NOT NULL)")
    db.execute("CREATE UNIQUE INDEX postings_bucket ON postings(bucket, seg)")
    for seg, (key, frags) in per_seg.items():
        bucket = key >> 32
        for b in np.unique(bucket).tolist():
            at = bucket == b
            db.execute("INSERT INTO postings(bucket, seg, blob) VALUES(?, ?, ?)",
                       (b, seg, (key[at] & 0xFFFFFFFF).astype("<u4").tobytes() + frags[at].astype("<u4").tobytes()))


def test_schema_4_postings_are_migrated_without_a_reindex(repo: Path, tmp_path: Path) -> None:
    run_engram(repo, "ingest", *map(str, _sessions(tmp_path, 3)))
    span = text(block("w1", 10))
    want = explain_text(repo, span)
    assert want == ["t01"]
    db = db_of(repo)
    n = db.execute("SELECT count(*) FROM postings").fetchall()[0][0]
    v4 = apsw.Connection(":memory:")
    for step in MIGRATIONS[:4]:
        step(v4)
    v4_names = {r[0] for r in v4.execute("SELECT name FROM sqlite_schema")}
    with db:  # back to the schema 4 layout: WITHOUT ROWID postings split by 16 key bits, nothing a
        # later migration added
        _to_schema_6_postings(db)
        db.execute("""
            CREATE TABLE postings_v4(bucket INTEGER NOT NULL, seg INTEGER NOT NULL, blob BLOB NOT NULL,
                                     PRIMARY KEY(bucket, seg)) WITHOUT ROWID;
            INSERT INTO postings_v4 SELECT bucket, seg, blob FROM postings;
            DROP TABLE postings;
            ALTER TABLE postings_v4 RENAME TO postings;
        """)
        for kind, name in db.execute("SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'index')"
                                     " AND name NOT LIKE 'sqlite_%'").fetchall():
            if name not in v4_names and not name.startswith(("fts_", "memory_fts_")):  # (shadow tables)
                db.execute(f"DROP {kind.upper()} IF EXISTS {name}")
        db.execute("ALTER TABLE tapes DROP COLUMN begins")  # added by schema 9
        db.execute("PRAGMA user_version=4")
    db.close()
    assert explain_text(repo, span) == want
    db = db_of(repo)
    assert db.execute("PRAGMA user_version").fetchall()[0][0] == len(MIGRATIONS)
    assert db.execute("SELECT count(*) FROM postings").fetchall()[0][0] == n
    sql = db.execute("SELECT sql FROM sqlite_schema WHERE name='postings'").fetchall()[0][0]
    assert "WITHOUT ROWID" not in sql and "id INTEGER PRIMARY KEY" in sql
    assert not db.execute("SELECT 1 FROM sqlite_schema WHERE name='postings_bucket'").fetchall()


def test_query_set_operations_agree_with_numpy() -> None:
    from engram import arrays

    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 50, 5000):
        a = rng.integers(-2**62, 2**62, n) if n % 2 else rng.integers(0, 40, n)
        b = np.unique(rng.choice(a, n // 3 + 1) if n else rng.integers(0, 5, 3))
        assert np.array_equal(arrays.unique(a), np.unique(a))
        vals, counts = arrays.unique_counts(a)
        want_v, want_c = np.unique(a, return_counts=True)
        assert np.array_equal(vals, want_v) and np.array_equal(counts, want_c)
        assert np.array_equal(arrays.member(a, b), np.isin(a, b))


def test_schema_5_heads_are_migrated_and_continued_by_a_later_ingest(repo: Path, tmp_path: Path) -> None:
    """v6 keeps head/tail fingerprints by value; a store indexed before it finds the tapes that
    continue its old tapes without a reindex."""
    from test_lineage import continuations, msg, prose  # noqa: PLC0415

    tail = prose("tail", 12)
    p = tape(tmp_path, "p", "2026-01-01T00:00:00Z", [
        msg("msg.in", prose("start", 10), "2026-01-01T00:00:01Z"),
        msg("msg.out", tail, "2026-01-01T00:10:00Z")])
    q = tape(tmp_path, "q", "2026-01-02T00:00:00Z", [
        msg("msg.in", "Picking up where we left off: " + tail, "2026-01-02T00:00:01Z"),
        msg("msg.out", prose("other", 10), "2026-01-02T00:00:02Z")])
    run_engram(repo, "ingest", str(p))
    db = db_of(repo)
    with db:  # the schema 5 layout: heads as blobs only, posting rows split by 16 key bits
        _to_schema_6_postings(db)
        db.execute("DROP TABLE head_fps; DROP TABLE tail_fps; ALTER TABLE tapes DROP COLUMN begins;"
                   " DROP TABLE edit_postings; DROP TABLE subagents; PRAGMA user_version=5;")
    db.close()
    run_engram(repo, "ingest", str(q))
    db = db_of(repo)
    assert db.execute("PRAGMA user_version").fetchall()[0][0] == len(MIGRATIONS)
    assert [(s, d) for s, d, _, _ in continuations(repo)] == [("p", "q")]
    want = continuations(repo)
    run_engram(repo, "reindex")  # a rebuild from the tapes finds the same edge
    assert continuations(repo) == want


def test_schema_8_keeps_the_earliest_holders_of_boilerplate_only() -> None:
    """Stores written before the row cap hold a row per tape for boilerplate fingerprints; the
    migration keeps FP_ROWS_CAP of them (the earliest tapes) and every row of the rest."""
    from engram.index.lineage import FP_ROWS_CAP  # noqa: PLC0415

    db = apsw.Connection(":memory:")
    db.execute("CREATE TABLE head_fps(fp INTEGER NOT NULL, tape INTEGER NOT NULL, PRIMARY KEY(fp, tape)) WITHOUT ROWID;"
               "CREATE TABLE tail_fps(fp INTEGER NOT NULL, tape INTEGER NOT NULL, PRIMARY KEY(fp, tape)) WITHOUT ROWID;")
    many, few = range(1, FP_ROWS_CAP + 6), range(1, FP_ROWS_CAP)
    for table in ("head_fps", "tail_fps"):
        db.executemany(f"INSERT INTO {table} VALUES(?, ?)", [(-7, t) for t in reversed(many)] + [(42, t) for t in few])
    MIGRATIONS[7](db)
    for table in ("head_fps", "tail_fps"):
        kept = db.execute(f"SELECT fp, tape FROM {table} ORDER BY fp, tape").fetchall()
        assert kept == [(-7, t) for t in range(1, FP_ROWS_CAP + 1)] + [(42, t) for t in few]


def test_schema_9_edit_postings_are_filled_and_lineage_still_finds_its_sources(tmp_path: Path) -> None:
    """Schema 10 keeps the code.edit fragments' postings apart, where lineage looks up sources. A
    store indexed before it gets them from its postings on opening, and the next session's edit
    of code written before then still descends from it."""
    from test_lineage import edges  # noqa: PLC0415

    store = _store_with(tmp_path / "repo")
    src = tmp_path / "src"
    src.mkdir()
    _ingest(store, _sessions(src, 3))
    _ingest(store, _sessions(src, 1, offset=3))
    want = edit_postings_of_each_segment(store)
    assert len(want) == 2 and all(want.values())
    db = db_of(store.root)
    with db:
        db.execute("DROP TABLE edit_postings; DROP TABLE subagents; PRAGMA user_version=9;")
    db.close()
    w1 = block("w1", 10)
    later = tape(src, "later", "2026-03-01T10:00:00Z",
                 [edit("src/f1.py", w1, w1[:8] + block("new", 2), "2026-03-01T10:00:01Z")])
    run_engram(store.root, "ingest", str(later))
    assert db_of(store.root).execute("PRAGMA user_version").fetchall()[0][0] == len(MIGRATIONS)
    got = edit_postings_of_each_segment(store)
    assert {seg: got[seg] for seg in want} == want
    assert [(a, b) for a, b, *_ in edges(store.root)] == [("t01", "later")]


def test_schema_9_dates_a_later_segment_by_its_own_events(repo: Path, tmp_path: Path) -> None:
    """Stores written before `tapes.begins` get it on opening: a session's first tape begins at
    the session's start, a later segment at its first event, as a rebuild computes them."""
    from test_lineage import grow  # noqa: PLC0415

    x, y = block("x", 8), block("x", 6) + block("y", 2)
    a = tape(tmp_path, "a", "2026-01-01T10:00:00Z", [edit("f.py", [], x, "2026-01-01T10:00:05Z", op="create")])
    run_engram(repo, "ingest", str(a))
    grow(a, edit("f.py", x, y, "2026-01-01T12:00:00Z"))
    run_engram(repo, "ingest", str(a))
    db = db_of(repo)
    with db:
        db.execute("ALTER TABLE tapes DROP COLUMN begins; DROP TABLE edit_postings; DROP TABLE subagents;"
                   " PRAGMA user_version=8;")
    db.close()
    run_engram(repo, "tapes")  # any command opens the store and migrates it
    query = "SELECT prev IS NULL, started, begins FROM tapes ORDER BY begins"
    got = db_of(repo).execute(query).fetchall()
    assert got == [(1, "2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z"),
                   (0, "2026-01-01T10:00:00Z", "2026-01-01T12:00:00Z")]
    run_engram(repo, "reindex")
    assert db_of(repo).execute(query).fetchall() == got


def test_lineage_is_the_same_in_one_flush_many_flushes_or_one_run_per_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sources of an edit come from the batch being written, from earlier flushes of the same run
    (kept in memory) or from earlier runs (SQLite): the edges must not depend on which."""
    from test_lineage import edges  # noqa: PLC0415

    x, y = block("x", 8), block("x", 6) + block("y", 2)
    z = block("x", 4) + block("y", 2) + block("z", 3)
    src = tmp_path / "src"
    src.mkdir()
    paths = [tape(src, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
             tape(src, "r", "2026-01-01T12:00:00Z", [read("f.py", x, "2026-01-01T12:00:01Z")]),
             tape(src, "b", "2026-01-02T00:00:00Z", [edit("f.py", x, y, "2026-01-02T00:00:01Z"),
                                                     edit("g.py", [], y, "2026-01-02T00:00:02Z", op="create")]),
             tape(src, "c", "2026-01-03T00:00:00Z", [edit("g.py", y, z, "2026-01-03T00:00:01Z", line=3)])]
    one = _store_with(tmp_path / "one")
    _ingest(one, paths)
    want = edges(one.root)
    assert {(s, d) for s, d, *_ in want} >= {("a", "b"), ("b", "c")}
    monkeypatch.setattr("engram.index.build.FLUSH_POSTINGS", 1)  # a flush per session
    many = _store_with(tmp_path / "many")
    _ingest(many, paths)
    assert edges(many.root) == want
    runs = _store_with(tmp_path / "runs")
    for p in paths:
        _ingest(runs, [p])
    assert edges(runs.root) == want


@pytest.mark.parametrize("parallel", [1 << 30, 1], ids=["one-merge", "parts-in-threads"])
def test_a_bulk_ingest_computes_the_stoplist_a_reindex_computes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 parallel: int) -> None:
    """A bulk run into an empty store merges and stop-lists its postings from memory; the
    result must be what reading them back gives (`engram reindex` does). Large runs are merged
    in parts of the key space, in threads (`postings.write_runs`): the same rows."""
    monkeypatch.setattr("engram.index.build.FLUSH_POSTINGS", 1)  # many segments, merged at the end
    monkeypatch.setattr("engram.index.postings.PARALLEL_POSTINGS", parallel)
    store = _store_with(tmp_path / "repo")
    (store.root / ".engram" / "config.toml").write_text("[index]\nstoplist_share = 0.5\nstoplist_min_tapes = 4\n")
    store = Store(store.root)
    _ingest(store, six_sessions(tmp_path))
    db = db_of(store.root)
    listed = db.execute("SELECT fp, tapes FROM stoplist ORDER BY fp").fetchall()
    rows = db.execute("SELECT id & ?, blob FROM postings ORDER BY 1", (ROW_IDS,)).fetchall()
    db.close()
    assert listed and {n for _, n in listed} == {6} and len(segments(store)) == 1
    run_engram(store.root, "reindex")
    db = db_of(store.root)
    assert db.execute("SELECT fp, tapes FROM stoplist ORDER BY fp").fetchall() == listed
    assert db.execute("SELECT id & ?, blob FROM postings ORDER BY 1", (ROW_IDS,)).fetchall() == rows


def test_an_edit_of_stoplisted_code_still_finds_the_edit_that_wrote_it(repo: Path, tmp_path: Path) -> None:
    (repo / ".engram" / "config.toml").write_text("[index]\nstoplist_share = 0.5\nstoplist_min_tapes = 4\n")
    common = block("common", 12)
    first = [tape(tmp_path, "s0", "2026-01-01T10:00:00Z",
                  [edit("lib/common.py", [], common, "2026-01-01T10:00:00Z", op="create")])]
    first += [tape(tmp_path, f"s{i}", f"2026-01-0{i + 1}T10:00:00Z",
                   [read("lib/common.py", common, f"2026-01-0{i + 1}T10:00:00Z")]) for i in range(1, 6)]
    run_engram(repo, "ingest", *map(str, first))
    assert db_of(repo).execute("SELECT count(*) FROM stoplist").fetchall()[0][0] > 0  # the file is common
    changed = common[:6] + ["    total_changed = 1"] + common[7:]
    later = tape(tmp_path, "s9", "2026-01-09T10:00:00Z", [edit("lib/common.py", common, changed, "2026-01-09T10:00:00Z")])
    run_engram(repo, "ingest", str(later))
    edges = db_of(repo).execute(
        "SELECT ts.session_id, td.session_id FROM lineage l JOIN fragments s ON s.id = l.src "
        "JOIN fragments d ON d.id = l.dst JOIN tapes ts ON ts.no = s.tape JOIN tapes td ON td.no = d.tape").fetchall()
    assert ("s0", "s9") in edges


def test_a_run_killed_before_writing_its_postings_is_finished_by_the_next_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run keeps its postings in memory until it ends. Killed before that, its tapes have
    fragments and lineage but no postings: the next query or ingest fingerprints them again, and
    answers, segments and lineage come out as if nothing had happened."""
    from test_lineage import edges  # noqa: PLC0415

    monkeypatch.setattr("engram.index.build.FLUSH_POSTINGS", 1)  # a committed flush per tape
    src = tmp_path / "src"
    src.mkdir()
    sessions = _sessions(src, 6)
    w2 = block("w2", 10)
    later = tape(src, "u", "2026-03-01T10:00:00Z",  # edits what t02 wrote: lineage into a dead run's tape
                 [edit("src/f2.py", w2, w2[:5] + ["    extra_line = 1"] + w2[5:], "2026-03-01T10:00:00Z")])
    clean = _store_with(tmp_path / "clean")
    _ingest(clean, sessions)
    _ingest(clean, [later])

    store = _store_with(tmp_path / "repo")

    def killed(self: Indexer, db: apsw.Connection) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # killed while writing the postings, after every batch committed
        m.setattr(Indexer, "_write_postings", killed)
        with pytest.raises(KeyboardInterrupt):
            _ingest(store, sessions)
    db = db_of(store.root)
    assert db.execute("SELECT count(*) FROM tapes WHERE indexed=2").fetchall()[0][0] == 6
    assert db.execute("SELECT count(*) FROM postings").fetchall()[0][0] == 0
    db.close()
    assert explain_text(store.root, text(block("w3", 10))) == ["t03"]  # a query finishes them
    _ingest(store, [later])  # and a later run links its edit to theirs
    db = db_of(store.root)
    assert db.execute("SELECT count(*) FROM tapes WHERE indexed != 1").fetchall()[0][0] == 0
    db.close()
    assert edges(store.root) == edges(clean.root) and ("t02", "u") in [(e[0], e[1]) for e in edges(store.root)]
    for i in range(6):
        assert explain_text(store.root, text(block(f"w{i}", 10))) == explain_text(clean.root, text(block(f"w{i}", 10)))
    assert sum(n for _, n in segments(store)) == sum(n for _, n in segments(clean))


def test_a_restored_run_also_finishes_through_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a query in between, the next ingest writes the dead run's postings itself, and
    its own edits find their sources in them before anything is written."""
    from test_lineage import edges  # noqa: PLC0415

    monkeypatch.setattr("engram.index.build.FLUSH_POSTINGS", 1)
    src = tmp_path / "src"
    src.mkdir()
    store = _store_with(tmp_path / "repo")
    with monkeypatch.context() as m:
        m.setattr(Indexer, "_write_postings", lambda self, db: (_ for _ in ()).throw(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            _ingest(store, _sessions(src, 3))
    w2 = block("w2", 10)
    _ingest(store, [tape(src, "u", "2026-03-01T10:00:00Z",
                         [edit("src/f2.py", w2, w2[:5] + ["    extra_line = 1"] + w2[5:], "2026-03-01T10:00:00Z")])])
    db = db_of(store.root)
    assert db.execute("SELECT count(*) FROM tapes WHERE indexed=1").fetchall()[0][0] == 4
    db.close()
    assert ("t02", "u") in [(e[0], e[1]) for e in edges(store.root)]
    for i in range(2):
        assert explain_text(store.root, text(block(f"w{i}", 10))) == [f"t{i:02d}"]
    assert explain_text(store.root, text(w2)) == ["u", "t02"]  # u edited it last; t02 wrote it


def test_a_lookup_of_many_rows_in_parts_finds_what_one_read_finds(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A span of a whole file wants most posting rows; they are read LOOKUP_ROWS at a time, over
    several segments, and must give exactly the postings one read gives."""
    from engram.anchor import kgram_fingerprints  # noqa: PLC0415

    store = _store_with(tmp_path / "s")
    paths = _sessions(tmp_path, 12)
    _ingest(store, paths[:6])
    _ingest(store, paths[6:])  # a second segment
    db = db_of(store.root)
    segs = [s for s, _ in segments(store)]
    assert len(segs) == 2
    q = np.unique(np.concatenate([kgram_fingerprints(p.read_text(), 4).values for p in paths]))
    want_k, want_f = postings.lookup(db, q, segs)
    assert len(want_f) > 100
    for rows in (1, 7):
        monkeypatch.setattr(postings, "LOOKUP_ROWS", rows)
        got_k, got_f = postings.lookup(db, q, segs)
        assert sorted(zip(got_k.tolist(), got_f.tolist())) == sorted(zip(want_k.tolist(), want_f.tolist()))


def test_small_segments_held_in_memory_answer_as_read(tmp_path: Path) -> None:
    """A long-lived process holds the small segments appends leave (from its second query on) and
    searches them in memory: the same postings, and the same answers, as reading them — also
    after a later append (its segment is added to the copy) and after a merge (the copy is
    rebuilt)."""
    from engram.anchor import kgram_fingerprints  # noqa: PLC0415
    from engram.index import memo, snapshot  # noqa: PLC0415
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.index.sql import reading  # noqa: PLC0415
    from engram.query.direct import direct_hits  # noqa: PLC0415

    store = _store_with(tmp_path / "s")
    paths = _sessions(tmp_path, 18)
    _ingest(store, paths[:12])
    for p in paths[12:16]:  # appended one by one: small segments beside the bulk one
        _ingest(store, [p])
    db = open_db(store)
    snap = snapshot.read(db)
    assert len(snap.segs) == 5 and snap.seg_postings == tuple(n for _, n in segments(store))
    memo.forget()
    q = np.unique(np.concatenate([kgram_fingerprints(p.read_text(), 4).values for p in paths]))
    texts = [text(block(f"w{i}", 10)) for i in (0, 11, 12, 15, 16, 17)] + [text(block("shared", 6))]
    with reading(db):
        first = [direct_hits(db, t, snap=snap) for t in texts]  # the process's first query: read
    assert postings.held_segments(db, snap.epoch, snap.segs, snap.seg_postings) is None  # not outside a read

    def same_as_read(snap: snapshot.Snapshot) -> postings.Held:
        with reading(db):
            held = postings.held_segments(db, snap.epoch, snap.segs, snap.seg_postings)
            assert held is not None and sorted(held.segs) == list(snap.segs)  # all small enough here
            want_k, want_f = postings.lookup(db, q, snap.segs)
            got_k, got_f = postings.lookup(db, q, snap.segs, held)
            assert len(want_f) > 100
            assert sorted(zip(got_k.tolist(), got_f.tolist())) == sorted(zip(want_k.tolist(), want_f.tolist()))
        return held

    held = same_as_read(snap)
    with reading(db):
        assert [direct_hits(db, t, snap=snap) for t in texts] == first
    _ingest(store, [paths[16]])  # a sixth segment: added to the copy
    snap = snapshot.read(db)
    assert len(snap.segs) == 6
    grown = same_as_read(snap)
    assert held.segs < grown.segs
    _ingest(store, [paths[17]])  # a seventh: the smallest are merged, and the copy is rebuilt
    snap = snapshot.read(db)
    assert len(snap.segs) < 7
    rebuilt = same_as_read(snap)
    assert not rebuilt.segs <= grown.segs
    with reading(db):
        answers = [direct_hits(db, t, snap=snap) for t in texts]
    assert answers[:4] == first[:4] and answers[4] and answers[5]
    db.close()
    memo.forget()


def test_the_copy_of_fragment_kinds_never_holds_a_row_rolled_back(tmp_path: Path) -> None:
    """A process's copy of the fragments' kinds (engram.index.memo) grows with rows past its end;
    asked inside a write transaction, it would copy a row that a rollback then removes, and keep
    that row's kind for the id the next committed fragment takes."""
    from engram.index import memo, snapshot
    from engram.index.db import open_db
    from engram.index.kinds import KIND_NO

    store = _store_with(tmp_path / "s")
    _ingest(store, _sessions(tmp_path, 2))
    db = open_db(store)
    memo.forget()
    epoch = snapshot.read(db).epoch
    top, tape_no = db.execute("SELECT max(id), max(tape) FROM fragments").fetchall()[0]
    new = np.array([top + 1])
    memo.fragment_kinds(db, np.array([top]), epoch)  # a process's first query reads, copies nothing
    row = "INSERT INTO fragments(id, tape, offset, kind, file, ts, nfp) VALUES(?, ?, 999, ?, NULL, NULL, 1)"
    db.execute("BEGIN IMMEDIATE")
    db.execute(row, (top + 1, tape_no, KIND_NO["msg.in"]))
    assert memo.fragment_kinds(db, new, epoch).tolist() == [KIND_NO["msg.in"]]  # its own write
    db.execute("ROLLBACK")
    db.execute(row, (top + 1, tape_no, KIND_NO["code.edit"]))
    assert memo.fragment_kinds(db, new, epoch).tolist() == [KIND_NO["code.edit"]]
    db.close()
    memo.forget()


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_runs_merged_in_parts_write_the_rows_one_merge_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               parts: int) -> None:
    """`postings.write_runs` cuts the key space into parts, merged and laid out in threads: the
    cuts must fall between rows (a row split in two would be two rows with one id), and the
    segment must be the one a single merge of all runs writes, with its postings returned in
    stored order."""
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.index.layout import ROW_BITS  # noqa: PLC0415
    from engram.index.sql import immediate  # noqa: PLC0415

    monkeypatch.setattr(postings, "PARALLEL_POSTINGS", 1)
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 1 << 20, 40) << (32 - ROW_BITS)  # few rows, each holding many postings
    runs = []
    for first in range(0, 4000, 1000):  # flushes: disjoint fragment ranges, ascending
        key = rng.choice(rows, 3000) | rng.integers(0, 1 << (32 - ROW_BITS), 3000)
        runs.append(postings.sort_keys(key, rng.integers(first, first + 1000, 3000)))
    written = {}
    for name, write in (("one", lambda db: postings.write_runs(db, 1, runs, parts=1)),
                        ("parts", lambda db: postings.write_runs(db, 1, runs, parts=parts))):
        store = _store_with(tmp_path / name)
        db = open_db(store)
        with immediate(db):
            got = write(db)
        written[name] = (got, db.execute("SELECT id, blob FROM postings ORDER BY id").fetchall())
        db.close()
    (k1, f1), rows1 = written["one"]
    (k2, f2), rows2 = written["parts"]
    assert len(rows1) == len(set(rows.tolist())) and rows2 == rows1
    assert np.array_equal(k1, k2) and np.array_equal(f1, f2) and len(k1) == sum(len(r[0]) for r in runs)


def test_worker_processes_build_the_index_one_process_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With several sessions, `engram ingest` parses and fingerprints them in worker processes
    while one process writes the index, here in a batch per session. The store must be the
    one a single process builds: the same fragments, text, postings, lineage, tombstones and
    continuations."""
    from test_lineage import continuations, msg, prose  # noqa: PLC0415

    src = tmp_path / "src"
    src.mkdir()
    x, y = block("x", 8), block("x", 6) + block("y", 2)
    paths = six_sessions(src) + _sessions(src, 6) + [
        tape(src, "a", "2026-03-01T00:00:00Z", [edit("f.py", [], x, "2026-03-01T00:00:01Z", op="create"),
                                                msg("msg.out", prose("handover", 30), "2026-03-01T00:00:02Z")]),
        tape(src, "b", "2026-03-02T00:00:00Z", [msg("msg.in", prose("handover", 30), "2026-03-02T00:00:01Z"),
                                                edit("f.py", x, y, "2026-03-02T00:00:02Z"),
                                                edit("f.py", y, [], "2026-03-02T00:00:03Z", op="delete")])]
    tables = ["SELECT id, tape, offset, kind, file, ts, nfp, line0, line1 FROM fragments ORDER BY id",
              "SELECT rowid, text FROM fts ORDER BY rowid", "SELECT id, blob FROM postings ORDER BY id",
              "SELECT * FROM lineage ORDER BY dst, src", "SELECT * FROM tombstones ORDER BY 1",
              "SELECT * FROM continuations ORDER BY 1, 2"]
    built = {}
    for name, workers in (("one", 1), ("workers", 2)):
        monkeypatch.setattr("engram.index.build.FLUSH_POSTINGS", 1 if workers > 1 else 1 << 30)
        store = _store_with(tmp_path / name)
        ingest(store, jobs_from_paths(paths, IngestStats()), after_tape=Indexer(store), workers=workers)
        db = db_of(store.root)
        built[name] = [db.execute(q).fetchall() for q in tables]
        db.close()
    assert built["workers"] == built["one"]
    fragments, fts, rows, lineage, tombstones, _ = built["one"]
    assert len(fragments) >= 30 and fts and rows and lineage and tombstones
    assert continuations(tmp_path / "one") == [("a", "b", 1.0, None)]


@pytest.mark.parametrize("held", [False, True], ids=["read", "held"])
def test_a_merge_committed_during_a_query_does_not_hide_postings(tmp_path: Path, held: bool) -> None:
    """A query reads the segment list, then each segment's rows (or, in a long-lived process,
    copies the small segments into memory). Another process may append a session and merge the
    small segments between those reads; the query must still answer from the index as it was
    when it started, not from a list of segments that no longer hold rows."""
    from engram.index import memo  # noqa: PLC0415
    from engram.index.db import open_db  # noqa: PLC0415
    from engram.query.explain import Options, explain  # noqa: PLC0415
    from engram.query.spans import Span  # noqa: PLC0415

    store = _store_with(tmp_path / "repo")
    src = tmp_path / "src"
    src.mkdir()
    _ingest(store, _sessions(src, 30))
    for j in range(postings.MAX_SEGMENTS - 1):  # the large segment and five one-session ones
        _ingest(store, _sessions(src, 1, offset=30 + j))
    before = segments(store)
    assert len(before) == postings.MAX_SEGMENTS
    writer_of = "t33"  # its postings are in a small segment, which the next append merges
    span = Span("src/f33.py", 1, 10, text(block("w33", 10)))
    db = open_db(store)
    memo.forget()
    assert explain(store, db, span, Options(brief=True))["sessions"][0]["session_id"] == writer_of
    if not held:
        memo.forget()  # the next query is again a process's first: it reads every segment by SQL
    appended = []

    def append_before_reads(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        """Once the query has its segment list, another writer appends a session and merges."""
        if sql.startswith("SELECT id, blob FROM postings") and not appended:
            appended.append(True)
            _ingest(store, _sessions(src, 1, offset=30 + postings.MAX_SEGMENTS))
        return True

    db.exec_trace = append_before_reads
    doc = explain(store, db, span, Options(brief=True))
    db.exec_trace = None
    assert appended and segments(store) != before  # the merge did happen mid-query
    assert doc["sessions"] and doc["sessions"][0]["session_id"] == writer_of
    # The next query sees the merged segments and finds the same writer in them.
    assert explain(store, db, span, Options(brief=True))["sessions"][0]["session_id"] == writer_of
    db.close()
    memo.forget()
