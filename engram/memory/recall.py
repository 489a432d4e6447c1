"""Recall: the memories that answer a query, near a place in the code if one is given.

Three channels each rank memories: BM25 over content, tags and context (SQLite FTS5; the context,
what a memory was said in reply to, at half weight), dense cosine over the memories' vectors (one
matrix product, `vectors.Matrix`), and anchor proximity (memories anchored on or near the span
asked about, `places.near`, then on code the evidence index's lineage connects to it,
`places.connected`). `fusion.fuse` merges them; a query naming a date favours memories written
then, one naming a memory's tag favours it, the tag it names first most (`fusion.TAG_WEIGHT`).
Then each candidate's score is multiplied by its factors:

- **decay**: strength halves every HALF_LIFE_DAYS since the memory was written or last
  recalled, longer for important memories, for a person's (trust) and for often-recalled ones;
  a pinned memory never decays. Strength only scales the score down to DECAY_FLOOR: an old memory
  that matches well still comes back.
- **status**: superseded, invalidated and archived memories are left out unless asked for
  (`hidden`), and then count less.
- **drift**: a memory whose anchors all vanished is about code that is gone; it counts less and
  the answer says so.

Without the model (onnxruntime or the model package missing) recall runs on BM25 and anchors and
the answer says so (`"dense": "unavailable: <reason>"`).

**Nothing matches.** The dense channel always has nearest memories, however far: asked about
something never noted, recall listed notes by meaning alone at half the best score, as if they
matched. When BM25 finds no memory sharing a word with the query, a memory found by meaning alone
must reach a cosine of DENSE_FLOOR; below it the answer lists no memory and names the nearest
WEAK_SHOWN apart, as weak (`"weak": {"below", "note", "memories": [{"id", "kind", "summary",
"cosine"}]}`). The floor is the nearest memory's cosine for questions a store has no answer to:
LoCoMo's questions asked of another conversation's store where BM25 finds nothing, 95th
percentile 0.436 on the tuning conversations (0.418 held out), rounded up; it leaves out 97.4% of
them (held out 97.5%) and every one of 50 coding questions (their nearest at most 0.248), while a
question's own evidence turn reaches it 67% of the time (71% held out): `bench/recall_floor.py`.
When BM25 finds anything the floor does not apply (LoCoMo's figures are unchanged: each of its
questions shares a word with some turn of its conversation).
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeGuard

from engram.errors import BadInput
from engram.memory.model import (
    Memory,
    check_kind,
    check_tags,
    moment_of,
    now_iso,
    seconds_between,
)
from engram.memory.places import Place, best_state, connected, near
from engram.store.config import LARGEST

if TYPE_CHECKING:
    from engram.memory.memories import Memories  # noqa: F401 - the type of `mem`

log = logging.getLogger(__name__)

HALF_LIFE_DAYS = 30.0
DECAY_FLOOR = 0.5
TRUST_LIFE = {3: 3.0, 2: 1.5, 1: 1.0}  # person, agent, import
HIDDEN_FACTOR = 0.7  # superseded / invalidated / archived, when asked for
DRIFT_FACTOR = {"intact": 1.0, "moved": 1.0, "edited": 0.9, "vanished": 0.6}
POOL = 100  # candidates the dense channel finds on its own
DENSE_FLOOR = 0.45  # the cosine a memory found by meaning alone (no BM25 hit at all) must reach (module docstring)
WEAK_SHOWN = 3  # memories below DENSE_FLOOR named as weak when nothing matches
BM25_POOL = 100  # candidates BM25 finds: every one is also scored by its cosine (see `_dense`). 300 gave
# LoCoMo's tuning conversations 0.812 instead of 0.802 (held out: 0.761 both) for 15% more CPU per recall
# at 100,000 memories, which the 20 ms p50 target cannot spare (bench/README.md, "memory_speed.py")
SCORED = 30  # fused candidates whose factors are computed (at least 3 x limit); one further down could
# only overtake a candidate whose factors cut its score to a fifth (decay floor x hidden x vanished)
MAX_LIMIT = 200


def strength(m: Memory, now: str) -> float:
    """How much of a memory's weight is left: 1 when just written or recalled, halving every
    half-life (see the module docstring); 1 for a pinned memory."""
    if m.pinned:
        return 1.0
    last = max(m.created, m.last_recalled or "")
    days = max(0.0, seconds_between(last, now) / 86400.0)
    life = HALF_LIFE_DAYS * (1.0 + 2.0 * m.importance) * TRUST_LIFE.get(m.trust, 1.0) * \
        (1.0 + 0.5 * math.log1p(m.recall_count))
    return 0.5 ** (days / life)


def factors(m: Memory, places: list[Place], now: str) -> dict[str, float]:
    return {"decay": DECAY_FLOOR + (1.0 - DECAY_FLOOR) * strength(m, now),
            "status": 1.0 if m.status == "active" else HIDDEN_FACTOR,
            "drift": DRIFT_FACTOR.get(best_state(places) or "intact", 1.0)}


def recall(mem: Memories, query: str, *, at: str | None = None, kind: str | None = None,
           tags: Sequence[str] = (), limit: int = 10, hidden: bool = False, debug: bool = False,
           now: str | None = None, reinforce: bool = True,
           buffers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The answer of `engram recall --json`: {"query", "dense", "memories": [...]} (and, with
    `debug`, each memory's channel ranks and factors)."""
    from engram.memory.fusion import fuse  # noqa: PLC0415

    query = (query or "").strip()
    if not query and at is None:
        raise BadInput("what to recall? give words to search for (or a place, --at FILE[:A-B])")
    if kind is not None:
        check_kind(kind)
    tag_list = check_tags(list(tags))
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit {limit}: from 1 to {MAX_LIMIT}")
    # the query's vector first: it is computed beside everything that does not need it (catching
    # up with the log, the full-text search, the anchors near `at`), and recall waits only for the rest
    embedding = _embedding(query) if query else None
    mem.sync()
    now = now or now_iso()
    channels: dict[str, list[str]] = {}
    scores: dict[str, list[float]] = {}
    no_of: dict[str, int] = {}
    if query:
        _bm25(mem, query, kind, hidden, channels, scores, no_of)
    anchored: dict[str, list[str]] = {}
    if at is not None:
        _anchor(mem, at, buffers, anchored, no_of)
    floor = DENSE_FLOOR if query and not channels.get("bm25") else None  # (no memory shares a word with it)
    weak: list[tuple[int, float]] = []
    dense = _dense(mem, embedding, kind, hidden, channels, scores, no_of, floor, weak) if query else \
        "not used: no query"
    channels.update(anchored)  # (after the dense channel, as before: the fused sums add up in the same order)
    fused = fuse(channels, scores=scores, top=max(SCORED, 3 * limit))
    rows = mem.by_no([no_of[h.id] for h in fused])
    places = mem.places([no_of[h.id] for h in fused], buffers)
    period = _period(query)
    tag_of = _tag_bonuses(query, rows)
    ranked: list[tuple[float, dict[str, Any]]] = []
    for hit in fused:
        no = no_of[hit.id]
        m = rows.get(no)
        if not _passes_filters(m, hidden, kind, tag_list):
            continue
        mem_places = places.get(no, [])
        f = factors(m, mem_places, now)
        tag = tag_of.get(no, 0.0)
        base = hit.score + _time_bonus(period, m) + tag
        score = base * f["decay"] * f["status"] * f["drift"]
        ranked.append((score, _answer(m, mem_places, score, hit, f, (base, tag), debug)))
    ranked.sort(key=lambda x: (-x[0], x[1]["id"]))
    answers = [a for _, a in ranked[:limit]]
    if reinforce and answers:
        mem.recalled([a["id"] for a in answers])
    doc: dict[str, Any] = {"query": query, "dense": dense, "memories": answers}
    if at is not None:
        doc["at"] = str(mem.at(at))  # (repository-relative, however it was given)
    if not answers and weak:
        doc["weak"] = _weak(mem, weak, hidden, kind, tag_list)
    return doc


def _passes_filters(m: Memory | None, hidden: bool, kind: str | None, tags: list[str]) -> TypeGuard[Memory]:
    """Whether recall's filters let `m` into an answer (or among the weak): its status unless
    `hidden`, its kind, every tag asked for."""
    return m is not None and (hidden or m.status == "active") and (not kind or m.kind == kind) \
        and set(tags) <= set(m.tags)


def _weak(mem: Memories, weak: list[tuple[int, float]], hidden: bool, kind: str | None,
          tags: list[str]) -> dict[str, Any]:
    """The nearest memories by meaning when none matches, named apart from `memories` and as weak:
    id, kind, first line and cosine, so a person sees what is closest and an agent does not take it
    for an answer (nor pays for whole notes)."""
    rows = mem.by_no([no for no, _ in weak])
    shown = []
    for no, cos in weak:
        m = rows.get(no)
        if not _passes_filters(m, hidden, kind, tags):
            continue
        summary = m.summary
        shown.append({"id": m.id, "kind": m.kind, "summary": summary[:200] + ("…" if len(summary) > 200 else ""),
                      "cosine": round(cos, 3)})
        if len(shown) == WEAK_SHOWN:
            break
    return {"below": DENSE_FLOOR, "note": f"no memory shares a word with the query, and none is as close in meaning "
                                          f"as a cosine of {DENSE_FLOOR}: these are only the nearest",
            "memories": shown}


def _whole(params: Mapping[str, Any], key: str, default: int, bounds: tuple[int, int], what: str) -> int:
    """The whole number `params[key]` (`default` when absent), within `bounds`: a request from another
    program (the endpoint's `/engram/recall`) had 2.5 cut to 2, true read as 1, 0 taken as the
    default, a negative budget as no bound, and a budget past 64 bits answered 500."""
    value = params.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():  # (a number sent as text)
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{key} {value!r}: {what}")
    low, high = bounds
    if not low <= value <= high:
        raise BadInput(f"{key} {value}: from {low} to {high:,}")
    return value


def recall_request(mem: Memories, params: Mapping[str, Any]) -> dict[str, Any]:
    """`recall` for a request of `engram recall` (from the command line, or sent by one to a
    running language server, which answers it the same way), within `budget` tokens if given."""
    limit = _whole(params, "limit", 10, (1, MAX_LIMIT), "a whole number")
    budget = _whole(params, "budget", 0, (0, LARGEST), "a whole number of tokens")
    at = params.get("at")
    doc = recall(mem, str(params.get("query") or ""), at=str(at) if at else None, kind=params.get("kind") or None,
                 tags=list(params.get("tags") or []), limit=limit, hidden=bool(params.get("all")),
                 debug=bool(params.get("debug")))
    from engram.memory.budget import fit_recall  # noqa: PLC0415

    return fit_recall(doc, budget)


def _bm25(mem: Memories, query: str, kind: str | None, hidden: bool, channels: dict[str, list[str]],
          scores: dict[str, list[float]], no_of: dict[str, int]) -> None:
    from engram.memory.projection import full_text_match  # noqa: PLC0415

    match, newest = full_text_match(mem.db, query)
    if not match:
        return
    where = "" if hidden else " AND m.status = 'active'"
    args: list[Any] = [match]
    if kind is not None:
        where += " AND m.kind = ?"
        args.append(kind)
    order = "f.rowid DESC" if newest else "f.rank"
    rows = mem.db.execute(f"SELECT m.no, m.id, f.rank FROM memory_fts f JOIN memories m ON m.no = f.rowid"
                          f" WHERE memory_fts MATCH ?{where} ORDER BY {order} LIMIT {BM25_POOL}", args).fetchall()
    channels["bm25"] = [mid for _, mid, _ in rows]
    if not newest:  # (the newest matches are scored by their order)
        scores["bm25"] = [-rank for _, _, rank in rows]
    no_of.update((mid, no) for no, mid, _ in rows)


_embedding_thread: Any = None
_embedding_lock = threading.Lock()


def _embedding(query: str) -> Any:
    """The query's vector, being computed on a thread of its own while the caller runs the
    full-text search (a future; None when the model cannot run here). Both release the GIL (the
    ONNX run, SQLite's step): on two cores a recall waits for the longer of the two, not their
    sum (the embedding was ~40% of a recall's CPU at 100,000 memories, the full-text search ~15%)."""
    global _embedding_thread  # noqa: PLW0603 - one worker per process, started on first use
    from engram.memory import vectors  # noqa: PLC0415

    if not vectors.status()[0]:
        return None
    with _embedding_lock:
        if _embedding_thread is None:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

            _embedding_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-embed")
    model = vectors.embedder()
    return _embedding_thread.submit(lambda: model.embed([query])[0])


def _dense(mem: Memories, embedding: Any, kind: str | None, hidden: bool, channels: dict[str, list[str]],
           scores: dict[str, list[float]], no_of: dict[str, int], floor: float | None = None,
           weak: list[tuple[int, float]] | None = None) -> str:
    """The dense channel, and what the answer says of it.

    Its candidates are the POOL memories nearest the query *and* every memory BM25 found, each
    scored by its cosine: a BM25 candidate the dense top POOL missed is still given its own
    similarity, not the zero of "not returned" (on LoCoMo's tuning conversations turn Hit@5 0.794
    -> 0.802, held out 0.748 -> 0.761, bench/locomo.py). With `floor` (BM25 found nothing) only the
    candidates at or above it stay; the nearest others go to `weak` (no, cosine), best first."""
    from engram.memory import vectors  # noqa: PLC0415

    ok, reason = vectors.status()
    if not ok or embedding is None:
        return f"unavailable: {reason}"
    mem.matrix.refresh(mem.db)
    qv = embedding.result()
    top = mem.matrix.top(qv, POOL, hidden=hidden, kind=kind)
    seen = {no for no, _ in top}
    extra = mem.matrix.cosines(qv, [no_of[mid] for mid in channels.get("bm25", ()) if no_of[mid] not in seen])
    top = sorted([*top, *extra.items()], key=lambda x: (-x[1], x[0]))
    if floor is not None:
        if weak is not None:
            weak.extend((no, cos) for no, cos in top if cos < floor)
            del weak[3 * WEAK_SHOWN:]  # (room for those a filter of recall's leaves out)
        top = [(no, cos) for no, cos in top if cos >= floor]
    ids = {no: mid for mid, no in no_of.items()}  # (BM25's candidates: their ids are known)
    asked = [no for no, _ in top if no not in ids]
    if asked:
        ids.update(mem.db.execute("SELECT no, id FROM memories WHERE no IN (SELECT value FROM json_each(?))",
                                  (_json(asked),)).fetchall())
    top = [(no, cos) for no, cos in top if no in ids]
    channels["dense"] = [ids[no] for no, _ in top]
    scores["dense"] = [cos for _, cos in top]
    no_of.update((ids[no], no) for no, _ in top)
    waiting = mem.matrix.waiting()
    if waiting:
        return f"used; {waiting} {'memory has' if waiting == 1 else 'memories have'} no vector yet (`engram memory embed`)"
    return "used"


def _anchor(mem: Memories, at: str, buffers: Mapping[str, str] | None, channels: dict[str, list[str]],
            no_of: dict[str, int]) -> None:
    place = mem.at(at)
    found = near(mem.db, mem.store.root, place.file, place.start, place.end, buffers)
    found += connected(mem.db, mem.store.root, place.file, place.start, place.end, buffers,
                       {no for no, _ in found})  # after the memories on or near the span
    ids = dict(mem.db.execute("SELECT no, id FROM memories WHERE no IN (SELECT value FROM json_each(?))",
                              (_json([no for no, _ in found]),)).fetchall()) if found else {}
    channels["anchor"] = [ids[no] for no, _ in found if no in ids]
    no_of.update((ids[no], no) for no, _ in found if no in ids)


def _period(query: str) -> Any:
    from engram.memory import fusion  # noqa: PLC0415

    find = getattr(fusion, "query_period", None)
    return find(query) if find is not None and query else None


def _time_bonus(period: Any, m: Memory) -> float:
    """A query naming a date favours memories written then (`fusion.time_bonus`: a day most)."""
    if period is None:
        return 0.0
    from engram.memory.fusion import time_bonus  # noqa: PLC0415

    return float(time_bonus(period, moment_of(m.created)))


def _tag_bonuses(query: str, rows: Mapping[int, Memory]) -> dict[int, float]:
    """Memory no -> what it gains for the tags the query names (`fusion.tag_bonuses`: most for the
    tag named first among these candidates' tags)."""
    from engram.memory.fusion import tag_bonuses  # noqa: PLC0415

    if not query:
        return {}
    nos = [no for no, m in rows.items() if m.tags]
    return dict(zip(nos, tag_bonuses(query, [rows[no].tags for no in nos]), strict=True))


def _answer(m: Memory, places: list[Place], score: float, hit: Any, f: dict[str, float],
            bonus: tuple[float, float], debug: bool) -> dict[str, Any]:
    """`bonus`: (the fused score with the time and tag bonuses, the tag bonus)."""
    out = memory_json(m, places)
    out["score"] = round(score, 6)
    if debug:
        base, tag = bonus
        out["debug"] = {"ranks": dict(hit.ranks), "fused": round(hit.score, 6),
                        "time": round(base - hit.score - tag, 6), "tags": tag,
                        "factors": {k: round(v, 4) for k, v in f.items()}}
    return out


def memory_json(m: Memory, places: list[Place]) -> dict[str, Any]:
    """A memory as recall, list and show give it (`engram recall --json`'s fields)."""
    out: dict[str, Any] = {"id": m.id, "content": m.content, "kind": m.kind, "tags": m.tags,
                           "importance": m.importance, "status": m.status, "source": m.source,
                           "anchors": [p.to_json() for p in places], "evidence": m.evidence}
    if m.context:
        out["context"] = m.context
    state = best_state(places)
    if state == "vanished":
        out["drift"] = "vanished: the code this memory is anchored to is gone"
    elif state == "edited":
        out["drift"] = "edited: the code this memory is anchored to has changed"
    return out


def _json(values: list[int]) -> str:
    import orjson  # noqa: PLC0415

    return orjson.dumps(values).decode()
