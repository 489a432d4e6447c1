"""Lineage rules, tombstones, re-insertion and continuation edges, on tapes built event by event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
from conftest import run_engram

from engram.index.db import BUSY_TIMEOUT_MS


def block(tag: str, n: int, start: int = 0) -> list[str]:
    """Lines of code whose tokens are unique to (tag, line): fingerprints never collide by accident."""
    return [f"    total_{tag}{i} = compute_{tag}{i}(alpha_{tag}{i}, beta_{tag}{i}) + gamma_{tag}{i} * {i + 7}"
            for i in range(start, start + n)]


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def edit(file: str, before: list[str], after: list[str], ts: str, line: int = 1, op: str = "update") -> dict[str, Any]:
    return {"kind": "code.edit", "ts": ts, "file": file, "op": op,
            "before_range": [line, line + len(before) - 1], "after_range": [line, line + len(after) - 1],
            "before_text": text(before), "after_text": text(after)}


def tape(dirpath: Path, session: str, started: str, events: list[dict[str, Any]]) -> Path:
    meta = {"kind": "meta", "harness": "test", "session_id": session, "started": started, "model": "m"}
    p = dirpath / f"{session}.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in [meta, *events]))
    return p


def ingest(repo: Path, *paths: Path) -> None:
    run_engram(repo, "ingest", *map(str, paths))


def db(repo: Path) -> apsw.Connection:
    """The index as a test reads it beside engram's own processes: with engram's busy timeout, so
    a test's read waits for a writer (a merge, an append) instead of failing "database is locked"."""
    conn = apsw.Connection(str(repo / ".engram" / "index.sqlite"))
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def edges(repo: Path) -> list[tuple]:
    q = ("SELECT ts.session_id, td.session_id, l.confidence, l.containment, l.location_delta, l.cardinality, "
         "l.agent_link, l.note FROM lineage l JOIN fragments s ON s.id = l.src JOIN fragments d ON d.id = l.dst "
         "JOIN tapes ts ON ts.no = s.tape JOIN tapes td ON td.no = d.tape ORDER BY 1, 2")
    return db(repo).execute(q).fetchall()


def sessions(repo: Path, *args: str, span: str | None = None, stdin: str | None = None) -> dict[str, str]:
    argv = ["explain", "--brief", *args] + ([span] if span else ["--text", "-"])
    doc = json.loads(run_engram(repo, *argv, input=stdin.encode() if stdin else None).stdout)
    return {s["session_id"]: s["fragments"][0]["via"] for s in doc["sessions"]}


def test_edit_edges_carry_similarity_location_and_cardinality(repo: Path, tmp_path: Path) -> None:
    x = block("x", 8)
    y = x[:6] + block("y", 2)  # a small change: most fingerprints survive
    z = block("z", 8)  # a rewrite: nothing survives
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [edit("f.py", x, y, "2026-01-02T00:00:01Z")]),
           tape(tmp_path, "c", "2026-01-03T00:00:00Z", [edit("g.py", y, z, "2026-01-03T00:00:01Z", line=40)]))
    got = {(s, d): rest for s, d, *rest in edges(repo)}
    conf_ab, contain_ab, loc_ab, card_ab, link_ab, _ = got[("a", "b")]
    assert 0.5 <= conf_ab < 1.0 and contain_ab == 1.0 and loc_ab == "same" and card_ab == "1:1" and not link_ab
    conf_bc, contain_bc, loc_bc, *_ = got[("b", "c")]
    assert conf_bc < 0.30 and contain_bc == 1.0 and loc_bc == "moved", "a rewrite is location_only"


def test_bfs_follows_lineage_and_respects_min_confidence_and_forensics(repo: Path, tmp_path: Path) -> None:
    x = block("x", 6)
    y = x[:4] + block("v", 2)  # b rewrites two of a's lines
    w = block("w", 9) + block("v", 1, start=1)  # d rewrites b's region almost completely
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [edit("f.py", x, y, "2026-01-02T00:00:01Z")]))
    edited = text(y)
    found = sessions(repo, stdin=edited)
    assert found == {"b": "direct", "a": "lineage"}, "a's version holds too little of the span to match directly"
    assert sessions(repo, "--min-confidence", "0.99", stdin=edited) == {"b": "direct"}
    ingest(repo, tape(tmp_path, "d", "2026-01-03T00:00:00Z", [edit("f.py", y, w, "2026-01-03T00:00:01Z")]))
    rewritten = text(block("w", 9))
    assert set(sessions(repo, stdin=rewritten)) == {"d"}, "location alone never links spans"
    forensic = sessions(repo, "--forensics", stdin=rewritten)
    assert forensic["d"] == "direct" and forensic["b"] == "location_only"


def test_code_added_beside_older_code_does_not_descend_from_it(repo: Path, tmp_path: Path) -> None:
    """b appends new code to a's file: the edit links b's file to a's (most of it survives), but
    the new lines were never a's. Seen on Ri5ha6h/tan-mapper-app, where two earlier writers of a
    file came back as lineage for most spans a later Write added to it."""
    x = block("x", 6)
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [edit("f.py", x, x + block("y", 4), "2026-01-02T00:00:01Z")]))
    assert [e[:2] for e in edges(repo)] == [("a", "b")]
    assert sessions(repo, stdin=text(block("y", 4))) == {"b": "direct"}
    assert sessions(repo, stdin=text(x[3:] + block("y", 2))) == {"b": "direct", "a": "lineage"}


def test_cardinality_one_to_many_and_many_to_one(repo: Path, tmp_path: Path) -> None:
    x = block("x", 8)
    ingest(repo, tape(tmp_path, "a1", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "a2", "2026-01-01T01:00:00Z", [edit("g.py", [], x, "2026-01-01T01:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [
               edit("f.py", x[:4], x[:4] + block("p", 1), "2026-01-02T00:00:01Z"),
               edit("f.py", x[4:], x[4:] + block("q", 1), "2026-01-02T00:00:02Z", line=6)]))
    got = edges(repo)
    to_b = [e for e in got if e[1] == "b"]
    assert {e[0] for e in to_b} == {"a1", "a2"}, "both earlier copies are sources"
    assert {e[5] for e in to_b} <= {"N:1", "1:N"} and "N:1" in {e[5] for e in to_b}


def test_tombstone_and_verbatim_reinsertion(repo: Path, tmp_path: Path) -> None:
    x = block("x", 6)
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [edit("f.py", x, [], "2026-01-02T00:00:01Z")]))
    stones = db(repo).execute("SELECT count(*) FROM tombstones").fetchall()[0][0]
    assert stones == 1
    deleted = text(x)
    assert "b" not in sessions(repo, stdin=deleted)
    assert sessions(repo, "--include-deleted", stdin=deleted)["b"] == "tombstone"
    ingest(repo, tape(tmp_path, "c", "2026-01-03T00:00:00Z", [edit("h.py", [], x, "2026-01-03T00:00:01Z", op="create")]))
    relinked = [e for e in edges(repo) if e[1] == "c"]
    assert relinked and relinked[0][0] == "b" and relinked[0][2] >= 0.9 and relinked[0][7] == "reinserted"
    assert relinked[0][4] == "moved"


def test_deleted_text_is_found_by_share_of_its_own_fingerprints(repo: Path, tmp_path: Path) -> None:
    """`--include-deleted` names a deletion when at least half of the deleted text's fingerprints
    are in the span: all of x (deleted whole), most of y, too little of z, none of w."""
    from engram.query.direct_np import tombstone_hits  # noqa: PLC0415

    x, y, z, w = block("x", 6), block("y", 6), block("z", 6), block("w", 6)
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z",
                      [edit(f"{n}.py", [], b, "2026-01-01T00:00:01Z", op="create") for n, b in zip("xyzw", (x, y, z, w))]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z",
                [edit(f"{n}.py", b, [], f"2026-01-02T00:00:0{i}Z") for i, (n, b) in enumerate(zip("xyzw", (x, y, z, w)))]))
    conn = db(repo)
    deleted_in = {path: frag for frag, path in conn.execute(
        "SELECT t.frag, f.path FROM tombstones t JOIN files f ON f.id = t.file")}
    assert set(deleted_in) == {"x.py", "y.py", "z.py", "w.py"}
    hits = tombstone_hits(conn, text(x + y[:5] + z[:1]))
    assert set(hits) == {deleted_in["x.py"], deleted_in["y.py"]}
    assert hits[deleted_in["x.py"]] == 1.0 and 0.5 <= hits[deleted_in["y.py"]] < 1.0
    assert tombstone_hits(conn, text(block("v", 6))) == {}


def test_agent_links_are_always_followed(repo: Path, tmp_path: Path) -> None:
    x = block("x", 6)
    (repo / "doc.md").write_text("".join(f"line {i}\n" for i in range(1, 30)))
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [
               {"kind": "span.link", "ts": "2026-01-02T00:00:01Z", "file": "doc.md", "range": [10, 12],
                "target": {"file": "f.py", "range": [1, 6]}, "note": "documents the computation in f.py"}]))
    found = sessions(repo, "--min-confidence", "0.99", span="doc.md:11-11")
    assert found == {"b": "agent_link", "a": "agent_link"}


def msg(kind: str, words: str, ts: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "ts": ts, "text": words, **extra}


def prose(tag: str, n: int) -> str:
    return " ".join(f"the {tag}{i} handler validates {tag}{i} payload before {tag}{i} commit" for i in range(n))


BOILERPLATE = ("<system-reminder>As you answer the user's questions, you can use the following context: "
               "the repository uses pytest, black, ruff and mypy; never commit secrets.</system-reminder>\n"
               "<environment_context><cwd>/home/dev/proj</cwd><approval_policy>never</approval_policy>"
               "</environment_context>")


def continuations(repo: Path) -> list[tuple]:
    return db(repo).execute(
        "SELECT s.session_id, d.session_id, c.confidence, c.marker FROM continuations c "
        "JOIN tapes s ON s.no = c.src_tape JOIN tapes d ON d.no = c.dst_tape ORDER BY 1, 2").fetchall()


def continued_pair(tmp_path: Path) -> tuple[Path, Path, str]:
    """Tape p, and tape q that a compaction continued from p's tail: (p, q, the shared tail)."""
    tail = prose("tail", 12)
    p = tape(tmp_path, "p", "2026-01-01T00:00:00Z", [
        msg("msg.in", prose("start", 10), "2026-01-01T00:00:01Z"),
        msg("msg.out", tail, "2026-01-01T00:10:00Z")])
    q = tape(tmp_path, "q", "2026-01-02T00:00:00Z", [
        msg("msg.in", "This session is being continued from a previous conversation. " + tail,
            "2026-01-02T00:00:01Z", compact_summary=True),
        msg("msg.out", prose("other", 10), "2026-01-02T00:00:02Z")])
    return p, q, tail


def test_continuation_from_tail_head_overlap_with_and_without_marker(repo: Path, tmp_path: Path) -> None:
    p, q, tail = continued_pair(tmp_path)
    r = tape(tmp_path, "r", "2026-01-03T00:00:00Z", [
        msg("msg.in", "Picking up where we left off: " + tail, "2026-01-03T00:00:01Z"),
        msg("msg.out", prose("third", 10), "2026-01-03T00:00:02Z")])
    unrelated = tape(tmp_path, "s", "2026-01-04T00:00:00Z", [msg("msg.in", prose("unrelated", 12), "2026-01-04T00:00:01Z")])
    ingest(repo, p, q, r, unrelated)
    got = {(s, d): (c, m) for s, d, c, m in continuations(repo)}
    assert got[("p", "q")][1] == "compact-summary" and got[("p", "r")][1] is None
    assert 0.15 <= got[("p", "r")][0] < got[("p", "q")][0] - 0.2, "the harness marker strengthens the edge"
    assert not [k for k in got if "s" in k], "an unrelated session links to nothing"
    # Deterministic: ingesting in the other order gives the same edges.
    from conftest import git  # noqa: PLC0415

    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    run_engram(other, "init")
    ingest(other, unrelated, r, q, p)
    assert {(s, d): (c, m) for s, d, c, m in continuations(other)} == got


def test_shared_boilerplate_alone_never_links(repo: Path, tmp_path: Path) -> None:
    a = tape(tmp_path, "a", "2026-01-01T00:00:00Z", [
        msg("msg.in", BOILERPLATE + "\n" + prose("alpha", 3), "2026-01-01T00:00:01Z"),
        msg("msg.out", prose("alphaout", 5) + "\n" + BOILERPLATE, "2026-01-01T00:00:02Z"),
        msg("msg.in", BOILERPLATE, "2026-01-01T00:00:03Z", injected=True)])
    b = tape(tmp_path, "b", "2026-01-02T00:00:00Z", [
        msg("msg.in", BOILERPLATE, "2026-01-02T00:00:01Z", injected=True),
        msg("msg.in", BOILERPLATE + "\n" + prose("beta", 3), "2026-01-02T00:00:02Z"),
        msg("msg.out", prose("betaout", 5), "2026-01-02T00:00:03Z")])
    ingest(repo, a, b)
    assert continuations(repo) == []


def test_continuations_are_found_across_separate_ingests_in_both_directions(repo: Path, tmp_path: Path) -> None:
    """Each ingest looks up the stored heads and tails of earlier runs: a tape continues one
    captured in an earlier run, and a tape captured later can be the one that was continued."""
    p, q, _ = continued_pair(tmp_path)
    ingest(repo, p)
    ingest(repo, q)  # q's head is looked up in the tails stored by the first run
    got = {(s, d): (c, m) for s, d, c, m in continuations(repo)}
    assert list(got) == [("p", "q")] and got[("p", "q")][1] == "compact-summary"

    from conftest import git  # noqa: PLC0415

    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    run_engram(other, "init")
    ingest(other, q)
    ingest(other, p)  # p's tail is looked up in the heads stored by the first run: the same edge
    assert {(s, d): (c, m) for s, d, c, m in continuations(other)} == got


def test_text_in_many_earlier_tails_is_boilerplate_across_runs(repo: Path, tmp_path: Path) -> None:
    """A head whose only overlap is text ending more than COMMON_TEXT_TAPES earlier tapes links
    to none of them, even when each was captured by its own ingest."""
    from engram.index.lineage import COMMON_TEXT_TAPES, FP_ROWS_CAP  # noqa: PLC0415

    shared = prose("shared", 12)

    def ender(i: int) -> Path:
        return tape(tmp_path, f"e{i:02d}", f"2026-01-01T0{i % 10}:00:00Z", [
            msg("msg.in", prose(f"own{i}", 10), f"2026-01-01T0{i % 10}:00:01Z"),
            msg("msg.out", prose(f"body{i}", 120), f"2026-01-01T0{i % 10}:05:00Z"),  # heads end before `shared`
            msg("msg.out", shared, f"2026-01-01T0{i % 10}:10:00Z")])

    def opener(name: str, day: int) -> Path:
        return tape(tmp_path, name, f"2026-01-0{day}T00:00:00Z", [
            msg("msg.in", "Picking up where we left off: " + shared, f"2026-01-0{day}T00:00:01Z"),
            msg("msg.out", prose(name, 10), f"2026-01-0{day}T00:00:02Z")])

    for i in range(COMMON_TEXT_TAPES):
        ingest(repo, ender(i))
    ingest(repo, opener("mid", 3))  # at the limit the overlap still counts: linked
    assert [c for c in continuations(repo) if c[1] == "mid"]
    ingest(repo, ender(COMMON_TEXT_TAPES))
    ingest(repo, opener("late", 5))
    assert [c for c in continuations(repo) if "late" in c[:2]] == []
    # Past the limit, further tapes' rows for that text are not stored (FP_ROWS_CAP), and the
    # verdict stays the same however many more tapes end with it.
    for i in range(COMMON_TEXT_TAPES + 1, COMMON_TEXT_TAPES + 4):
        ingest(repo, ender(i))
    ingest(repo, opener("later", 7))
    # Captured after more than COMMON_TEXT_TAPES tapes ending with that text, an ender links to
    # no opener either, although few heads hold the text: boilerplate whichever end it is at.
    assert [c for c in continuations(repo) if c[1] in ("late", "later")] == []
    most = db(repo).execute("SELECT max(n) FROM (SELECT count(*) AS n FROM tail_fps GROUP BY fp)").fetchall()[0][0]
    assert most == FP_ROWS_CAP < COMMON_TEXT_TAPES + 4


def test_one_run_takes_sessions_in_time_order_whatever_their_file_names(repo: Path, tmp_path: Path) -> None:
    """Claude Code names session files by random ids. A run captures them by start time, so an
    edit's lineage source is the earlier session's edit, and `engram reindex` (which indexes tapes
    by start time) finds the same edges."""
    x, y = block("x", 8), block("x", 6) + block("y", 2)
    src = tmp_path / "src"
    src.mkdir()
    tape(src, "b-first", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")])
    tape(src, "a-second", "2026-01-02T00:00:00Z", [edit("f.py", x, y, "2026-01-02T00:00:01Z")])
    ingest(repo, src)
    got = edges(repo)
    assert [(s, d) for s, d, *_ in got] == [("b-first", "a-second")]
    run_engram(repo, "reindex")
    assert edges(repo) == got


def grow(path: Path, *events: dict[str, Any]) -> None:
    """A live session appends records (the next ingest writes them as a new segment tape)."""
    with path.open("a") as f:
        f.write("".join(json.dumps(e) + "\n" for e in events))


def test_segments_of_sessions_that_ran_side_by_side_keep_their_lineage_after_reindex(repo: Path,
                                                                                    tmp_path: Path) -> None:
    """Two agents edit one file in turn while each ingest captures what they appended: A writes,
    B edits A's text, A (a later segment of a session begun before B) edits B's. A rebuild must
    find the same edges: it indexes a segment when its own events happened, not at its
    session's start (which linked A's second edit to A's first and B's to nothing of A's)."""
    x = block("x", 8)
    y = x[:6] + block("y", 2)
    z = y[:6] + block("z", 2)
    a = tape(tmp_path, "A", "2026-01-01T10:00:00Z", [edit("f.py", [], x, "2026-01-01T10:00:01Z", op="create")])
    ingest(repo, a)
    ingest(repo, tape(tmp_path, "B", "2026-01-01T10:30:00Z", [edit("f.py", x, y, "2026-01-01T10:30:01Z")]))
    grow(a, edit("f.py", y, z, "2026-01-01T11:00:01Z"))
    ingest(repo, a)
    # A third agent, at work since before A, first captured now: it overlaps the others, no note.
    c = tape(tmp_path, "C", "2026-01-01T09:00:00Z", [edit("g.py", [], block("c", 8), "2026-01-01T11:30:00Z", op="create")])
    assert "note:" not in run_engram(repo, "ingest", str(c)).stdout
    live = [(s, d) for s, d, *_ in edges(repo)]
    assert ("A", "B") in live and ("B", "A") in live
    run_engram(repo, "reindex")
    assert [(s, d) for s, d, *_ in edges(repo)] == live


def test_one_run_orders_a_later_segment_by_its_own_time(repo: Path, tmp_path: Path) -> None:
    """In one run, a session's new segment is taken when its new records begin: after a session
    that started in between (as a rebuild orders them), not at its own session's start."""
    x = block("x", 8)
    y = x[:6] + block("y", 2)
    z = y[:6] + block("z", 2)
    a = tape(tmp_path, "A", "2026-01-01T10:00:00Z", [edit("f.py", [], x, "2026-01-01T10:00:01Z", op="create")])
    ingest(repo, a)
    grow(a, edit("f.py", y, z, "2026-01-01T12:00:01Z"))
    b = tape(tmp_path, "B", "2026-01-01T11:00:00Z", [edit("f.py", x, y, "2026-01-01T11:00:01Z")])
    out = run_engram(repo, "ingest", str(a), str(b)).stdout
    assert "note:" not in out, out
    live = [(s, d) for s, d, *_ in edges(repo)]
    assert ("A", "B") in live and ("B", "A") in live
    run_engram(repo, "reindex")
    assert [(s, d) for s, d, *_ in edges(repo)] == live


def test_history_captured_out_of_time_order_is_reported_and_put_right_by_reindex(repo: Path,
                                                                                 tmp_path: Path) -> None:
    """Old sessions imported after newer ones are indexed after them, so their lineage runs
    backwards in time. Ingest says so; `engram reindex` indexes by time and links old → new."""
    x, y = block("x", 8), block("x", 6) + block("y", 2)
    newer = tape(tmp_path, "new", "2026-02-01T00:00:00Z", [edit("f.py", x, y, "2026-02-01T00:00:01Z")])
    older = tape(tmp_path, "old", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")])
    assert "note:" not in run_engram(repo, "ingest", str(newer)).stdout
    out = run_engram(repo, "ingest", str(older)).stdout
    assert "note: 1 tape is older than tapes indexed before it" in out and "run `engram reindex`" in out
    assert ("old", "new") not in [(s, d) for s, d, *_ in edges(repo)]
    run_engram(repo, "reindex")
    assert [(s, d) for s, d, *_ in edges(repo)] == [("old", "new")]
    notes = tmp_path / "notes.txt"  # plain text has no time: never out of order
    notes.write_text("design notes without any timestamp\n")
    assert "older than tapes indexed" not in run_engram(repo, "ingest", str(notes)).stdout


def test_an_index_filled_by_an_older_engram_is_pointed_to_reindex(repo: Path, tmp_path: Path) -> None:
    """An index keeps the way it was first filled until `engram reindex`: after an upgrade that
    changed what events are indexed as, ingest says so. An index filled before engram kept the
    version has no `text` key in its state; one filled now has the current version."""
    from engram.index.kinds import TEXT_VERSION  # noqa: PLC0415

    first = tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], block("x", 8), "2026-01-01T00:00:01Z",
                                                              op="create")])
    assert "note:" not in run_engram(repo, "ingest", str(first)).stdout
    conn = db(repo)
    assert conn.execute("SELECT value FROM state WHERE key = 'text'").fetchall() == [(TEXT_VERSION,)]
    conn.execute("DELETE FROM state WHERE key = 'text'")  # as an index filled before the version was kept
    conn.close()
    second = tape(tmp_path, "b", "2026-01-02T00:00:00Z", [edit("g.py", [], block("y", 8), "2026-01-02T00:00:01Z",
                                                               op="create")])
    out = run_engram(repo, "ingest", str(second)).stdout
    assert f"indexed some events differently (text version 1, now {TEXT_VERSION})" in out
    assert "`engram reindex`" in out
    run_engram(repo, "reindex")
    third = tape(tmp_path, "c", "2026-01-03T00:00:00Z", [edit("h.py", [], block("z", 8), "2026-01-03T00:00:01Z",
                                                              op="create")])
    assert "note:" not in run_engram(repo, "ingest", str(third)).stdout


def test_edit_confidences_of_a_tape_equal_each_edit_on_its_own() -> None:
    """Confidences are computed for a whole tape in one tokenizer pass; every value must be the
    one `edit_confidence` gives the edit alone, also for texts at the edges of tokenization."""
    from engram.index.lineage import edit_confidence, edit_confidences  # noqa: PLC0415

    x, y = text(block("x", 8)), text(block("x", 5) + block("y", 3))
    numbered = "".join(f"{i:6d}\t{line}\n" for i, line in enumerate(block("n", 4), 1))  # cat -n output
    pairs = [(x, y), (y, x), ("", x), (x, ""), ("", ""), ("a", "a"), ("a", "a b"), ("42", "42\n"),
             ("total = 1\n", "total = 1"), (numbered, numbered.replace("n1", "m1")),
             ("naïve → café\n", "naïve café\n"), ("~\n~", "~"), (x * 40, y * 40),
             (x * 4000, y * 40), ("end 12", "end 12 13")]  # x * 4000: a text larger than a tokenizer group
    assert edit_confidences(pairs) == [edit_confidence(a, b) for a, b in pairs]
    assert edit_confidences([]) == []


def test_lineage_sources_are_the_earlier_edits_holding_half_of_the_before_text(spotter: Path,
                                                                               tmp_path: Path) -> None:
    """`source_candidates` pairs only an edit's rarest fingerprints with the fragments holding
    them, then checks those candidates for the rest. Against a brute force over the real index
    of the spotter sessions (every earlier edit's stored fingerprints compared with a before-text
    made to share a half, more or less, with one of them and to carry common ones), it names
    the same sources, with the same shares, best first."""
    import random  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    from conftest import build_spot_repo  # noqa: PLC0415

    from engram.index import postings  # noqa: PLC0415
    from engram.index.kinds import KIND_NO  # noqa: PLC0415
    from engram.index.lineage import MAX_SOURCES, SOURCE_CONTAINMENT, source_candidates  # noqa: PLC0415
    from engram.tape import events as E  # noqa: PLC0415

    root = tmp_path / "spot"
    build_spot_repo(spotter, root)
    conn = db(root)
    edit_ids = [r[0] for r in conn.execute("SELECT id FROM fragments WHERE kind=? ORDER BY id",
                                           (KIND_NO[E.CODE_EDIT],))]
    key, frag = postings.all_postings(conn)
    held: dict[int, set[int]] = {}
    wanted = set(edit_ids)
    for k, f in zip(key.tolist(), frag.tolist()):
        if f in wanted:
            held.setdefault(f, set()).add(k)
    holders: dict[int, int] = {}
    for keys in held.values():
        for k in keys:
            holders[k] = holders.get(k, 0) + 1
    common = sorted(holders, key=lambda k: -holders[k])[:200]
    assert len(edit_ids) > 80 and holders[common[0]] > 8, f"edits sharing common code: {holders[common[0]]}"

    rng = random.Random(7)
    queries: list[tuple[int, np.ndarray]] = []
    # (an edit is looked up once per hunk too: some fragments have two lookups, each answered apart)
    for dst in [f for f in edit_ids[len(edit_ids) // 3:] if f in held for _ in range(1 + (f % 4 == 0))]:
        source = rng.choice([f for f in edit_ids if f < dst and f in held])
        own = sorted(held[source])
        if len(queries) % 3:
            before = set(rng.sample(own, max(1, int(len(own) * rng.uniform(0.3, 0.9)))))
            before |= set(rng.sample(common, rng.randrange(0, 40)))
            before |= {rng.getrandbits(40) for _ in range(rng.randrange(0, 12))}  # held by nothing
        else:  # at the threshold: the source holds exactly half, and only the before-text's most common keys
            m = rng.randrange(1, 12)
            before = set(sorted(own, key=lambda k: -holders[k])[:m])
            before |= {rng.getrandbits(40) for _ in range(m + rng.randrange(0, 2))}
        queries.append((dst, postings.key_to_fp(np.array(sorted(before), dtype=np.int64))))

    got = source_candidates(conn, queries, (np.empty(0, np.int64), np.empty(0, np.int64)))
    want: list[list[tuple[int, float]]] = []
    for dst, fps in queries:
        before = set(postings.keys(fps).tolist())
        shares = [(f, len(before & held[f]) / len(before)) for f in edit_ids if f < dst and f in held]
        best = sorted(((f, s) for f, s in shares if s >= SOURCE_CONTAINMENT), key=lambda x: (-x[1], -x[0]))
        want.append(best[:MAX_SOURCES])
    assert got == want
    assert sum(len(v) > 1 for v in want) >= 5, "several edits have more than one source to rank"
    twice = [i for i in range(1, len(queries)) if queries[i][0] == queries[i - 1][0]]
    assert twice and any(want[i] != want[i - 1] for i in twice), "two lookups of one fragment, answered apart"
    at_threshold = [i for i in range(len(queries)) if i % 3 == 0]
    assert 0 < sum(bool(want[i]) for i in at_threshold) < len(at_threshold), "sources at exactly half, and just under"
    # An append of one edit whose rarer keys no earlier edit holds: no candidate at all, no source.
    dst, source = edit_ids[-1], edit_ids[0]
    lone = sorted({max(held[source], key=lambda k: holders[k])} | {rng.getrandbits(40) for _ in range(3)})
    assert source_candidates(conn, [(dst, postings.key_to_fp(np.array(lone, dtype=np.int64)))],
                             (np.empty(0, np.int64), np.empty(0, np.int64))) == [[]]


def test_a_line_deleted_inside_a_block_keeps_the_blocks_writer_on_the_lines_around_it(repo: Path,
                                                                                     tmp_path: Path) -> None:
    """Session a wrote a block of checks; session d deleted one line in the middle with an Edit.
    A span of the two lines that now meet there is held whole by d's Edit (its call, its patch's
    context) and by a only in part (a never had these two lines together): a fell under the
    floor and was not answered at all, even with `--min-confidence 0.1 --forensics`. d's context
    is kept as the lines it carried, linked to where they came from: a is reached through it, as
    the writer of an edit; d is not an editor of them."""
    from claude_shapes import Session, joined

    cwd = Path("/home/u/proj")
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()
    checks = [f"    check_{w}(config.{w}_limit)" for w in words]
    a = Session(cwd, "aaaaaaaa-1111-4111-8111-000000000001", day="2026-03-01")
    a.prompt("add the checks")
    a.write("checks.py", "def validate(config):\n" + joined(checks) + "    return True\n")
    d = Session(cwd, "dddddddd-4444-4444-8444-000000000004", day="2026-03-03", files=dict(a.files))
    d.prompt("theta is gone")
    d.edit("checks.py", joined(checks[6:9]), joined([checks[6], checks[8]]))
    (repo / "checks.py").write_text(d.files["checks.py"])
    run_engram(repo, "ingest", "--map", f"{cwd}={repo}", str(a.save(tmp_path / "t")), str(d.save(tmp_path / "t")))
    assert repo.joinpath("checks.py").read_text().splitlines()[7:9] == [checks[6], checks[8]]

    for args in ((), ("--min-confidence", "0.1", "--forensics")):
        doc = json.loads(run_engram(repo, "explain", "--brief", *args, "checks.py:8-9").stdout)
        frags = {s["session_id"][:1]: s["fragments"] for s in doc["sessions"]}
        assert "a" in frags, args
        (edit,) = [f for f in frags["a"] if f["kind"] == "code.edit"]
        assert edit["via"] == "lineage" and edit["edge"]["note"] == "carried"
        assert {f["kind"] for f in frags["d"]} == {"code.carried", "tool.call"}


def test_an_old_tapes_whole_file_write_carries_the_lines_between_its_hunks(repo: Path, tmp_path: Path) -> None:
    """A tape written before edits kept their `context`: a Write's event holds the text from its
    first change to its last, with `hunks`. Indexed now, the lines between the hunks are what it
    carried, not what it wrote."""
    x = block("x", 12)
    y = [*x]
    y[1], y[10] = block("p", 1)[0], block("q", 1)[0]
    rewrite = {**edit("f.py", x[1:11], y[1:11], "2026-01-02T00:00:01Z", line=2), "tool": "Write",
               "hunks": [[2, 2, 2, 2], [11, 11, 11, 11]]}
    ingest(repo, tape(tmp_path, "a", "2026-01-01T00:00:00Z", [edit("f.py", [], x, "2026-01-01T00:00:01Z", op="create")]),
           tape(tmp_path, "b", "2026-01-02T00:00:00Z", [rewrite]))
    kinds = {(s, k) for s, k in db(repo).execute(
        "SELECT t.session_id, f.kind FROM fragments f JOIN tapes t ON t.no = f.tape")}
    assert kinds == {("a", 6), ("b", 6), ("b", 8)}
    doc = json.loads(run_engram(repo, "explain", "--brief", "--text", "-", input=text(x[4:8]).encode()).stdout)
    assert {s["session_id"]: {f["kind"] for f in s["fragments"]} for s in doc["sessions"]} == {
        "a": {"code.edit"}, "b": {"code.carried"}}
    assert sessions(repo, stdin=text(y[10:11])) == {"b": "direct"}
