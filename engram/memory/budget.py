"""Recall's answer within a token budget: what an agent reads of `recall` and of the memory list
(MCP `recall`, `memories`; `engram recall --json`) costs it per token, so the answer fits a
budget, clips a long note rather than dropping the best one, and names what it left out and how to
get it. Tokens are counted as `engram.query.budget` counts them: TOKEN_BYTES bytes of compact JSON."""

from __future__ import annotations

from typing import Any

from engram.query.budget import TOKEN_BYTES, json_size, tokens

#: Tokens of a recall answer an agent gets by default (MCP `recall`, `engram recall --json`): ten
#: short notes with their anchors take ~1,000; a long note is clipped rather than crowding out the
#: rest. `budget` 0: no bound.
RECALL_BUDGET = 2000
#: A recalled note's content may take at most this share of the budget while notes follow it.
RECALL_NOTE_SHARE = 2
#: A note is clipped only to leave at least this many characters of it; with less room it is left out.
RECALL_MIN_CHARS = 120


def fit_recall(doc: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """`recall`'s answer within `budget` tokens of compact JSON (None or 0: as it is), in rank
    order: a note too long for its share is clipped (`clipped`: its length and the command that
    shows it whole), a note with no room left is left out, and `left_out` names them and how to get
    more. The budget is what the agent pays for the answer, so everything in it is counted; when
    not even `left_out` fits, the answer says it went over (`used` > `tokens`)."""
    if not budget:
        return doc
    cap = budget * TOKEN_BYTES
    whole = {**doc, "budget": {"tokens": budget, "used": budget}}
    if json_size(whole) <= cap:
        return {**doc, "budget": {"tokens": budget, "used": tokens(json_size(whole))}}
    head = {k: v for k, v in doc.items() if k != "memories"}
    ranked = doc["memories"]
    out: dict[str, Any] = {}
    reserve: list[str] = []
    for worst in (False, False, False, True):  # room kept for left_out grows until what it names fits in it
        if worst:
            reserve = [m["id"] for m in ranked]
        base = json_size({**head, "memories": [], "budget": {"tokens": budget, "used": budget},
                          **({"left_out": _left_out(reserve, budget)} if reserve else {})})
        kept, left = _fit_notes(ranked, cap, base)
        out = {**head, "memories": kept, "budget": {"tokens": budget, "used": budget},
               **({"left_out": _left_out(left, budget)} if left else {})}
        if json_size(out) <= cap:
            break
        reserve = left
    out["budget"]["used"] = tokens(json_size(out))
    return out


def _fit_notes(ranked: list[dict[str, Any]], cap: int, used: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The notes that fit `cap` bytes after `used`, in rank order, clipped where they must be
    (at most 1/RECALL_NOTE_SHARE of the budget while notes follow), and the ids left out."""
    kept: list[dict[str, Any]] = []
    left: list[str] = []
    for i, m in enumerate(ranked):
        share = cap // RECALL_NOTE_SHARE if i + 1 < len(ranked) else cap
        item = _clipped(m, min(share, cap - used))
        size = json_size(item) + 1 if item is not None else 0
        if item is None or used + size > cap:
            left.append(m["id"])
            continue
        kept.append(item)
        used += size
    return kept, left


def _left_out(ids: list[str], budget: int) -> dict[str, Any]:
    return {"count": len(ids), "ids": ids, "next": f"ask again with a larger budget (budget={budget * 2}; 0: no "
                                                   f"bound), or `engram memory show ID` for one note whole"}


def _clipped(m: dict[str, Any], room: int) -> dict[str, Any] | None:
    """`m` within `room` bytes of JSON, its content clipped if it must be; None when fewer than
    RECALL_MIN_CHARS bytes of its content would fit."""
    if json_size(m) + 1 <= room:
        return m
    raw = m["content"].encode()
    more = {"chars": len(m["content"]), "more": f"engram memory show {m['id']}"}
    keep = room - (json_size({**m, "content": "", "clipped": more}) + 1 + len("…".encode()))
    while keep >= RECALL_MIN_CHARS:  # (escapes in JSON make a cut longer than its bytes: cut again)
        item = {**m, "content": raw[:keep].decode("utf-8", "ignore").rstrip() + "…", "clipped": more}
        over = json_size(item) + 1 - room
        if over <= 0:
            return item
        keep -= over
    return None
