"""`engram memory consolidate`: fewer, stronger memories, without an LLM.

Two kinds of change, both written as ordinary events (so a rebuild replays them, and the status
history says why):

- **Merge near-duplicates.** Active memories that nearly repeat each other (word 3-gram
  containment ≥ 0.9 either way, or stored vectors' cosine ≥ 0.92), are not anchored in different
  places and do not contradict each other form a cluster. One of them is kept — the most trusted
  source, then the most important, the most recalled, the longest, the oldest — and takes the
  others' tags and evidence; it is linked `derived_from` each of them, and they become
  `superseded` (hidden, still there: `engram recall --all`, `engram memory show`).
- **Archive what faded.** A memory whose strength (recall's decay: see `engram.memory.recall`)
  fell below ARCHIVE_BELOW, that is not pinned, has no anchor that still finds its code and was
  not recalled in the last RECENT_DAYS, becomes `archived`: hidden, never deleted.

`--dry-run` lists every change and writes nothing. Cost: one full-text query per active memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engram.memory import dedup as near_dups
from engram.memory.events import Pending
from engram.memory.model import Memory, Source, now_iso, seconds_between
from engram.memory.places import best_state
from engram.memory.recall import strength

if TYPE_CHECKING:
    from engram.memory.memories import Memories

ARCHIVE_BELOW = 0.05
RECENT_DAYS = 30.0
BATCH = 256


def consolidate(mem: Memories, *, dry_run: bool = False, source: Source | None = None,
                now: str | None = None) -> dict[str, Any]:
    """The changes consolidation makes (or, dry, would make): {"dry_run", "changes": [...]}."""
    now = now or now_iso()
    by = (source or Source("person")).to_json()
    with mem._writing():
        active = mem.by_no([no for (no,) in mem.db.execute("SELECT no FROM memories WHERE status = 'active'")],
                           full=True)
        changes, events = _merges(mem, active, by)
        merged = {mid for c in changes for mid in c["merged"]}
        archives, more = _archives(mem, {no: m for no, m in active.items() if m.id not in merged}, now, by)
        changes += archives
        events += more
        if not dry_run:
            mem._commit(events)
    return {"dry_run": dry_run, "changes": changes}


def _merges(mem: Memories, active: dict[int, Memory], by: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Pending]]:
    parent = {no: no for no in active}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    grams = {no: near_dups.grams(m.content) for no, m in active.items()}
    mem.matrix.refresh(mem.db)
    for no, m in active.items():
        for other in _neighbours(mem, m.content):
            if other == no or other not in active or find(other) == find(no):
                continue
            if _near(mem, m, active[other], grams[no], grams[other], no, other):
                parent[find(other)] = find(no)
    clusters: dict[int, list[int]] = {}
    for no in active:
        clusters.setdefault(find(no), []).append(no)
    changes: list[dict[str, Any]] = []
    events: list[Pending] = []
    for members in sorted(clusters.values(), key=lambda c: min(active[n].id for n in c)):
        if len(members) < 2:
            continue
        ranked = sorted(members, key=lambda n: _keeper_rank(active[n]))
        keep, rest = active[ranked[0]], [active[n] for n in ranked[1:]]
        tags = list(dict.fromkeys([*keep.tags, *(t for m in rest for t in m.tags)]))
        evidence = [*keep.evidence, *(e for m in rest for e in m.evidence if e not in keep.evidence)]
        changed: dict[str, Any] = {}
        if tags != keep.tags:
            changed["tags"] = tags
        if evidence != keep.evidence:
            changed["evidence"] = evidence
        if max(m.importance for m in rest) > keep.importance:
            changed["importance"] = max(m.importance for m in rest)
        if changed:
            events.append(Pending("edit", keep.id, by, {"set": changed}))
        for m in rest:
            events.append(Pending("link", keep.id, by, {"target": m.id, "relation": "derived_from",
                                                        "why": "consolidated: near-duplicates"}))
            events.append(Pending("status", m.id, by, {"status": "superseded", "why": f"consolidated into {keep.id}"}))
        changes.append({"change": "merge", "into": keep.id, "merged": [m.id for m in rest], "summary": keep.summary})
    return changes, events


def _neighbours(mem: Memories, content: str) -> list[int]:
    from engram.memory.projection import full_text_match  # noqa: PLC0415

    match, _ = full_text_match(mem.db, content, keep=near_dups.RARE_WORDS)
    if not match:
        return []
    return [r[0] for r in mem.db.execute(
        "SELECT f.rowid FROM memory_fts f JOIN memories m ON m.no = f.rowid WHERE memory_fts MATCH ?"
        " AND m.status = 'active' ORDER BY f.rank LIMIT ?", (match, near_dups.CANDIDATES))]


def _near(mem: Memories, a: Memory, b: Memory, ga: set[int], gb: set[int], na: int, nb: int) -> bool:
    if a.anchors and b.anchors and not near_dups.overlap(a.anchors, b.anchors):
        return False
    if near_dups.opposite(a.content, a.kind, b.content, b.kind):
        return False
    if max(near_dups.containment(ga, gb), near_dups.containment(gb, ga)) >= near_dups.CONTAINMENT:
        return True
    va, vb = mem.matrix.vector(na), mem.matrix.vector(nb)
    return va is not None and vb is not None and float(va @ vb) >= near_dups.COSINE


def _keeper_rank(m: Memory) -> tuple[Any, ...]:
    return (-m.trust, -m.importance, -m.recall_count, -len(m.content), m.created, m.id)


def _archives(mem: Memories, active: dict[int, Memory], now: str, by: dict[str, Any]
              ) -> tuple[list[dict[str, Any]], list[Pending]]:
    changes: list[dict[str, Any]] = []
    events: list[Pending] = []
    faded = {no: m for no, m in active.items() if not m.pinned and strength(m, now) < ARCHIVE_BELOW
             and not (m.last_recalled and seconds_between(m.last_recalled, now) < RECENT_DAYS * 86400)}
    places = mem.places(list(faded))
    for no, m in sorted(faded.items(), key=lambda x: x[1].id):
        state = best_state(places.get(no, []))
        if state not in (None, "vanished"):
            continue
        why = "decayed; " + ("its anchors vanished" if state == "vanished" else "no anchor") + \
              f"; not recalled in {RECENT_DAYS:g} days"
        events.append(Pending("status", m.id, by, {"status": "archived", "why": why}))
        changes.append({"change": "archive", "id": m.id, "strength": round(strength(m, now), 4), "why": why,
                        "summary": m.summary})
    return changes, events
