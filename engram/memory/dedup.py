"""Dedup on write: is a new memory one the store already holds, a neighbour of one, or a
contradiction of one?

Why these rules (issue 47):

- **Near-identical → reinforce, never a second copy.** The new text's word 3-grams are found in
  an active memory's (containment ≥ 0.9), or their vectors' cosine is ≥ 0.92 (when this process
  has the model loaded: a command-line `remember` does not load it, and leaves the rest to
  `engram memory consolidate`). The existing memory is reinforced and the answer names it.
- **Never merge what only looks alike.** A near-duplicate anchored somewhere else (both have
  anchors, none overlap) may be the same advice about other code: it is linked `relates_to`.
  One that says the opposite about the same place (the same words once negations are set aside,
  one negated and the other not) is linked `contradicts`. Both links are marked as candidates
  found by the machine, for a person or agent to confirm or remove.
- **The cosine half waits for the vector.** Embedding one note (~80 tokens) costs MiniLM 25-30 ms
  of CPU, remember's whole budget (bench/memory_speed.py), so `remember` judges by words only
  (`check(..., embed=False)`) and the vector is made later in a batch (`Memories.embed_pending`:
  the servers right after answering, `engram memory embed`, an ingest). Then `check_embedded`
  compares it with the older active memories by cosine and the same rules apply; a merge found
  then is written as events (the older memory reinforced and linked `derived_from` the new one,
  the new one `superseded` "merged into …"), which `memory show` lists.

Containment is asymmetric on purpose: a short note whose words all appear in a longer memory
adds nothing to it; a longer note that contains a short memory adds something, and is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import apsw
import orjson

from engram.anchor.definition import kgram_values, token_hashes
from engram.memory.vectors import Matrix

CONTAINMENT = 0.9
COSINE = 0.92
OPPOSITE_OVERLAP = 0.75  # word-set Jaccard, negations and auxiliaries set aside
CANDIDATES = 20
RARE_WORDS = 4  # the candidates are found by the new text's rarest words
GRAM = 3

_WORD = re.compile(r"[a-z0-9_]+")
NEGATIONS = frozenset({"not", "no", "never", "none", "nothing", "nobody", "cannot", "without", "avoid",
                       "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "shouldnt", "mustnt",
                       "wont", "cant", "neither", "nor", "removed", "stop", "stopped"})
IGNORED = frozenset({"do", "does", "did", "t", "n", "s", "we", "the", "a", "an", "is", "are", "be", "to"})


@dataclass
class Verdict:
    vector: Any = None  # the new text's embedding, when the model was loaded (kept, not computed twice)
    merge_into: str | None = None
    similarity: dict[str, float] = field(default_factory=dict)
    adopt_anchors: bool = False  # the memory merged into has no anchor: it takes the new one's
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (memory id, relation, why)


def grams(text: str) -> set[int]:
    """Word 3-grams of a text, case folded (one value over all its words when it has fewer)."""
    return set(kgram_values(token_hashes(text.lower()), GRAM))


def containment(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a) if a else 0.0


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("'", "").replace("\u2019", ""))


def negated(text: str, kind: str) -> bool:
    return kind == "negative" or any(w in NEGATIONS for w in _words(text))


def opposite(a: str, a_kind: str, b: str, b_kind: str) -> bool:
    """Do two texts say the same thing, one of them negated? ("Use tabs here" / "Do not use tabs here")."""
    if negated(a, a_kind) == negated(b, b_kind):
        return False
    wa = {w for w in _words(a) if w not in NEGATIONS and w not in IGNORED}
    wb = {w for w in _words(b) if w not in NEGATIONS and w not in IGNORED}
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= OPPOSITE_OVERLAP


def overlap(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Do two anchor lists share a place (a file and overlapping lines)?"""
    return any(x.get("file") == y.get("file") and int(x.get("start", 0)) <= int(y.get("end", 0))
               and int(y.get("start", 0)) <= int(x.get("end", 0)) for x in a for y in b)


def check(db: apsw.Connection, matrix: Matrix, content: str, kind: str, anchors: list[dict[str, Any]], *,
          embed: bool = True) -> Verdict:
    """What to do with a new memory, judged against the active memories most like it (`matrix`:
    the process's embeddings, compared when the model is loaded and `embed` allows it)."""
    vec = _vector(content) if embed else None
    verdict = Verdict(vector=vec)
    new = grams(content)
    best: tuple[float, float, str, bool] | None = None
    for no, mid, text, other_kind in _candidates(db, matrix, content, vec):
        theirs = _anchors(db, no)
        relation = _relation(anchors, theirs, content, kind, text, other_kind)
        if relation == "contradicts":
            verdict.links.append(_link(mid, relation, "on write"))
            continue
        share = containment(new, grams(text))
        cos = _cosine(matrix, vec, no)
        if share < CONTAINMENT and cos < COSINE:
            continue
        if relation == "relates_to":
            verdict.links.append(_link(mid, relation, "on write"))
            continue
        if best is None or (share, cos) > best[:2]:
            best = (share, cos, mid, bool(anchors) and not theirs)
    if best is not None:
        _merge(verdict, best[2], {"containment": round(best[0], 3), "cosine": round(max(best[1], 0.0), 3)}, best[3])
    return verdict


def _relation(anchors: list[dict[str, Any]], theirs: list[dict[str, Any]], content: str, kind: str,
              text: str, other_kind: str) -> str | None:
    """How a new note stands to a similar memory by place: `relates_to` when both are anchored
    and nowhere together, `contradicts` when at the same place (or either unanchored) it says the
    opposite, else None (a merge candidate)."""
    if anchors and theirs and not overlap(anchors, theirs):
        return "relates_to"
    return "contradicts" if opposite(content, kind, text, other_kind) else None


_WHY: dict[str, str] = {"contradicts": "says the opposite about the same place",
                        "relates_to": "nearly the same note, anchored elsewhere"}


def _link(mid: str, relation: str, when: str) -> tuple[str, str, str]:
    return mid, relation, f"{_WHY[relation]} (found {when})"


def _merge(verdict: Verdict, into: str, similarity: dict[str, float], adopt_anchors: bool) -> None:
    """Make `verdict` a merge into memory `into` (no candidate link to it besides)."""
    verdict.merge_into = into
    verdict.similarity = similarity
    verdict.adopt_anchors = adopt_anchors
    verdict.links = [link for link in verdict.links if link[0] != into]


def _candidates(db: apsw.Connection, matrix: Matrix, content: str, vec: Any) -> list[tuple[int, str, str, str]]:
    """Active memories sharing words with `content` (best BM25 first), and the nearest by vector."""
    from engram.memory.projection import full_text_match  # noqa: PLC0415

    nos: list[int] = []
    match, _ = full_text_match(db, content, keep=RARE_WORDS)
    if match:
        nos = [r[0] for r in db.execute(
            "SELECT f.rowid FROM memory_fts f JOIN memories m ON m.no = f.rowid WHERE memory_fts MATCH ?"
            " AND m.status = 'active' ORDER BY f.rank LIMIT ?", (match, CANDIDATES))]
    if vec is not None:
        matrix.refresh(db)
        nos += [no for no, _ in matrix.top(vec, 5) if no not in nos]
    if not nos:
        return []
    rows = {r[0]: r for r in db.execute(
        "SELECT no, id, content, kind FROM memories WHERE no IN (SELECT value FROM json_each(?))",
        (orjson.dumps(nos).decode(),))}
    return [rows[no] for no in nos if no in rows]


def _vector(content: str) -> Any:
    from engram.memory.vectors import embedder  # noqa: PLC0415

    model = embedder(load=False)
    return None if model is None else model.embed([content])[0]


def _cosine(matrix: Matrix, vec: Any, no: int) -> float:
    if vec is None:
        return 0.0
    other = matrix.vector(no)
    return float(other @ vec) if other is not None else 0.0


def check_embedded(db: apsw.Connection, matrix: Matrix, no: int, content: str, kind: str, vec: Any,
                   earlier: list[tuple[int, str, Any]]) -> Verdict:
    """The cosine half of dedup for memory `no`, written before its vector was made: judged
    against the older active memories nearest `vec` (in `matrix`, and `earlier`: (no, id, vector)
    of older ones embedded in the same batch, not in the matrix yet). Word containment was
    judged on write; links made then are not made again."""
    verdict = Verdict(vector=vec)
    anchors = _anchors(db, no)
    linked = {r[0] for r in db.execute("SELECT dst FROM memory_relations WHERE src = ?", (no,))}
    near = {other: cos for other, cos in matrix.top(vec, CANDIDATES) if other < no and cos >= COSINE}
    near.update((other, float(v @ vec)) for other, _, v in earlier if other < no and float(v @ vec) >= COSINE)
    near = {other: cos for other, cos in near.items() if other not in linked}
    if not near:
        return verdict
    rows = {r[0]: r for r in db.execute(
        "SELECT no, id, content, kind FROM memories WHERE status = 'active' AND no IN (SELECT value FROM json_each(?))",
        (orjson.dumps(list(near)).decode(),))}
    best: tuple[float, str, bool] | None = None
    for other, cos in sorted(near.items(), key=lambda x: (-x[1], x[0])):
        if other not in rows:
            continue
        _, mid, text, other_kind = rows[other]
        theirs = _anchors(db, other)
        relation = _relation(anchors, theirs, content, kind, text, other_kind)
        if relation is not None:
            verdict.links.append(_link(mid, relation, "when embedded"))
        elif best is None:
            best = (cos, mid, bool(anchors) and not theirs)
    if best is not None:
        _merge(verdict, best[1], {"cosine": round(best[0], 3)}, best[2])
    return verdict


def _anchors(db: apsw.Connection, no: int) -> list[dict[str, Any]]:
    return [orjson.loads(a) for (a,) in db.execute("SELECT anchor FROM memory_anchors WHERE memory = ? ORDER BY n", (no,))]
