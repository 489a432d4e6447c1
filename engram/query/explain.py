"""`engram explain`: which sessions wrote, read or discussed a span, ranked, with windows.

1. Direct lookup: the span's k-grams against the postings, minus the stop-list — every k-gram
   of a short span (the index holds the winnowed fingerprints of the tapes, and any of those
   inside the span is among the span's k-grams), only the span's own winnowed ones for a longer
   span (see direct.WINNOWED_ONLY_FROM). A fragment's confidence is the share of
   the span's winnowed fingerprint count it matched, weighted by kind (code.* above msg/tool).
   Once the span's own file has a match, matches only as the text of another live file drop
   out unless clearly better (`own_file_first`).
2. Lineage BFS backwards from matched edits (depth, min confidence, fan-out and edge caps;
   agent links always followed), labelling hops that cross a continuation edge. An edge leads
   only to an edit holding some of the span's searched fingerprints (`direct.Holders`): an edit
   that added the span next to older code is linked to that code's writer, who never held the span.
3. Sessions ordered by touch count, then most recent touch (or, with `rank="evidence"`, by
   their strongest match); a transcript window per touch.

Given the span's file, a span too short to fingerprint, or with no or only weak evidence of its
own, is answered for a few lines more around it, and the document says so (`resolve`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import apsw

from engram.index import snapshot
from engram.index.sql import int_array, reading
from engram.index.edges import LINK_THRESHOLD
from engram.index.kinds import CODE_CARRIED, KIND_NAME, KIND_NO
from engram.query.copies import Event, copies, quoting_reviews
from engram.query.direct import (
    RELATIVE_FLOOR,
    Holders,
    SpanTokens,
    direct_hits,
    span_tokens,
)
from engram.query.spans import Span, in_tree
from engram.query.touches import touch_count
from engram.store.repo import Store
from engram.tape import events as E

if TYPE_CHECKING:
    from engram.tape.reader import TapeReader

log = logging.getLogger(__name__)

EXPLAIN_VERSION: Final = 1
MAX_DEPTH: Final = 10
MAX_FANOUT: Final = 50
MAX_EDGES: Final = 500
MAX_FRAGMENTS_PER_SESSION: Final = 20
MAX_STRING: Final = 20_000
# A span with no evidence, or only weak evidence, of its own takes in up to this many lines above
# and below, one a side at a time, until the neighbours have evidence (`widen_for_evidence`).
# Chosen on bench/provenance.py's unseen repositories (spans with no evidence): 2 and 3 lines
# found the writer as often, within one query; 5 and 8 widened 2 more of entireio/cli's 1,560
# queries (one more writer found with 20% and with 30% of tokens edited) and none more on
# FSM1/cipher-box; further out, the neighbours are more often another writer's code.
MAX_WIDEN_LINES: Final = 3
# Weak: the strongest match holds less than this share of the span (weighted by kind). Chosen
# with bench/provenance.py on five sets of sessions, trying 0 (off) / 0.2 / 0.3 / 0.4 / 0.5: no
# figure fell against 0 at any of them; summed over the sets, R@1 with 20% and 30% of tokens
# edited on every line plus precision came to 14.03 / 14.20 / 14.23 / 14.23 / 14.18, and each
# set's figures at 0.3 and 0.4 were within a query or two of each other (bench/README.md, "A span
# with no or weak evidence of its own").
WEAK_EVIDENCE: Final = 0.3
# `rank="evidence"` leaves out a session whose strongest match is under this share of the top
# session's (bench/provenance.py's `proposed_order`, where it was chosen).
EVIDENCE_SESSION_FLOOR: Final = 0.8
# Once the span's own file has a code match, another live file's match counts only if it is
# better than this many times the own file's best (`own_file_first`): the inverse of the
# relative floor, within whose band every match kept is as good as the best. At 1.0 (no better
# at all), edited test set-up matched in other modules a k-gram or two more than its writer's
# edit, and a reader of two of them outnumbered the writer on touches. 1.25 and 1.5 gave the
# same figures on eleven sets: none lower than at 1.0, R@1 higher on five (bench/README.md,
# "Another file's match"). As every direct match is within this band of the best, an own-file
# match that passes the floor leaves no other live file's; the margin decides only beside
# own-file edits kept under the floor by joining (`direct.joined_edits`).
ELSEWHERE_MARGIN: Final = 1 / RELATIVE_FLOOR
_CODE: Final = frozenset({KIND_NO[E.CODE_EDIT], KIND_NO[E.CODE_READ], KIND_NO[CODE_CARRIED]})
_CALLS: Final = frozenset({KIND_NO[E.TOOL_CALL], KIND_NO[E.TOOL_RESULT]})


@dataclass
class Options:
    before: int = 3
    after: int = 3
    brief: bool = False
    min_confidence: float = 0.5
    include_deleted: bool = False
    forensics: bool = False
    depth: int = MAX_DEPTH
    # Callers that show only the first sessions / fragments (the MCP tools) say so, so windows are
    # read for what is returned only; what is cut is reported as `truncated`.
    max_sessions: int | None = None
    max_fragments: int = MAX_FRAGMENTS_PER_SESSION
    rank: str = "touches"  # or "evidence": see sessions_of


@dataclass
class Hit:
    frag: int
    confidence: float
    via: str
    edge: dict[str, Any] | None = None


@dataclass
class Frag:
    id: int
    tape_no: int
    offset: int
    kind: int
    file: str | None
    ts: str | None
    line0: int | None
    line1: int | None
    tape: str
    session_id: str
    harness: str
    model: str | None


@dataclass
class Result:
    span: Span
    hits: dict[int, Hit] = field(default_factory=dict)
    frags: dict[int, Frag] = field(default_factory=dict)
    edges_followed: int = 0
    truncated: bool = False
    asked: Span | None = None  # the span asked for, when `span` is wider
    widened: str | None = None  # why: few-tokens, no-evidence, weak-evidence or expand-until


def _frag_rows(db: apsw.Connection, ids: list[int]) -> dict[int, Frag]:
    if not ids:
        return {}
    return {r[0]: Frag(*r) for r in db.execute(
        "SELECT f.id, f.tape, f.offset, f.kind, files.path, f.ts, f.line0, f.line1, t.id, t.session_id,"
        " t.harness, t.model FROM fragments f JOIN tapes t ON t.no = f.tape"
        " LEFT JOIN files ON files.id = f.file WHERE f.id IN carray(?)", (int_array(ids),))}


def _continuations(db: apsw.Connection, tapes: set[int]) -> set[tuple[int, int]]:
    """Continuation edges touching these tapes, both directions."""
    pairs: set[tuple[int, int]] = set()
    if not tapes:
        return pairs
    for a, b in db.execute("SELECT src_tape, dst_tape FROM continuations WHERE src_tape IN carray(?1) "
                           "UNION SELECT src_tape, dst_tape FROM continuations WHERE dst_tape IN carray(?1)",
                           (int_array(tapes),)):
        pairs.add((a, b))
        pairs.add((b, a))
    return pairs


def _edges_into(db: apsw.Connection, nodes: list[int]) -> dict[int, list[tuple[Any, ...]]]:
    """Lineage edges ending at each of `nodes`, strongest first (ties by source: deterministic)."""
    out: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    if not nodes:
        return out
    for dst, *edge in db.execute(
            "SELECT dst, src, confidence, containment, location_delta, cardinality, agent_link, note"
            " FROM lineage WHERE dst IN carray(?) ORDER BY dst, confidence DESC, src", (int_array(nodes),)):
        out[dst].append(tuple(edge))
    return out


def lineage_walk(db: apsw.Connection, res: Result, opts: Options, holders: Holders | None = None) -> None:
    """Breadth-first backwards along lineage edges from the directly matched fragments.

    One query per level of the walk, not per node; nodes are expanded in the same order as a
    queue would (a level's nodes in the order they were reached)."""
    level: list[tuple[int, float]] = [(f, h.confidence) for f, h in res.hits.items()]
    seen = set(res.hits)
    edges = 0
    depth = 0
    full = False  # MAX_EDGES reached: the walk stops where it is
    while level and depth < opts.depth and not full:
        into = _edges_into(db, [node for node, _ in level])
        reached: list[tuple[int, float]] = []
        for node, conf in level:
            rows = into.get(node, [])
            if len(rows) > MAX_FANOUT:
                rows = rows[:MAX_FANOUT]
                res.truncated = True
            for src, econf, contain, loc, card, agent_link, note in rows:
                location_only = econf < LINK_THRESHOLD and not agent_link
                if location_only and not opts.forensics:
                    continue
                if not agent_link and not location_only and econf < opts.min_confidence:
                    continue
                if holders is not None and not agent_link and not location_only and src not in holders:
                    continue
                if edges >= MAX_EDGES:
                    res.truncated = full = True
                    break
                edges += 1
                if src in seen:
                    continue
                seen.add(src)
                via = "agent_link" if agent_link else ("location_only" if location_only else "lineage")
                res.hits[src] = Hit(src, round(conf * (1.0 if agent_link else econf), 4), via,
                                    {"from": node, "confidence": econf, "containment": contain,
                                     "location_delta": loc, "cardinality": card, "agent_link": bool(agent_link),
                                     "note": note})
                reached.append((src, conf * (1.0 if agent_link else econf)))
            if full:
                break
        level = reached
        depth += 1
    res.edges_followed = edges
    crossed = [h for h in res.hits.values() if h.edge and h.via == "lineage"]
    if crossed:
        frag_tape = {f: fr.tape_no for f, fr in _frag_rows(db, list(res.hits)).items()}
        conts = _continuations(db, {t for t in frag_tape.values() if t is not None})
        for h in crossed:
            if h.edge and h.via == "lineage":
                a, b = frag_tape.get(h.frag), frag_tape.get(h.edge["from"])
                if a is not None and b is not None and a != b and (a, b) in conts:
                    h.via = "continuation"


def run(store: Store, db: apsw.Connection, span: Span, opts: Options, tokens: SpanTokens | None = None) -> Result:
    """The evidence for `span` (`tokens`: the span's, when the caller has them)."""
    res = Result(span)
    snap = snapshot.read(db)
    holders = Holders()
    direct = direct_hits(db, span.text, tokens=tokens, snap=snap, file=span.file, holders=holders)
    frags = _frag_rows(db, list(direct))
    checked = {fr.tape_no for fr in frags.values()} if snap.subagents else set()
    reviews = quoting_reviews(db, checked)
    if reviews:  # matched again without them: they may have set the floor their parent fell under
        holders = Holders()
        direct = direct_hits(db, span.text, tokens=tokens, snap=snap, file=span.file, holders=holders,
                             exclude=_fragments_of(db, reviews))
        frags = _frag_rows(db, list(direct))
    for fid, conf in own_file_first(store.root, span, direct, frags).items():
        res.hits[fid] = Hit(fid, conf, "direct")
    if snap.links:
        for fid, h in _span_links(db, span).items():
            res.hits.setdefault(fid, h)
    lineage_walk(db, res, opts, holders)
    if opts.include_deleted:
        from engram.query.direct_np import tombstone_hits  # noqa: PLC0415 - numpy, for this option only

        for fid, share in tombstone_hits(db, span.text).items():
            res.hits.setdefault(fid, Hit(fid, share, "tombstone"))
    res.frags = {f: frags[f] for f in res.hits if f in frags}
    res.frags.update(_frag_rows(db, [f for f in res.hits if f not in frags]))
    drop_copies(db, res, snap.subagents, checked, reviews)
    return res


def drop_copies(db: apsw.Connection, res: Result, subagents: bool, checked: set[int], reviews: set[int]) -> None:
    """Leave out what a session holds only as a copy of a session it resumed, or of the one
    whose work it reviews (`copies`, `quoting_reviews`: the latter may still be reached along
    lineage; `subagents`: whether the store holds any subagent's tape; `checked`: tapes already
    asked about, `reviews` the reviewers among them); a session left without fragments leaves
    the answer."""
    if subagents:
        reviews = reviews | quoting_reviews(db, {fr.tape_no for fr in res.frags.values()} - checked)
    drop = {f for f, fr in res.frags.items() if fr.tape_no in reviews}
    drop.update(copies(db, (Event(f, fr.session_id, fr.harness, fr.kind, fr.ts, fr.file, fr.line0, fr.line1)
                            for f in res.hits if f not in drop and (fr := res.frags.get(f)) is not None)))
    for fid in drop:  # (res.frags holds fragments of res.hits only)
        del res.hits[fid]
        del res.frags[fid]


def _fragments_of(db: apsw.Connection, tapes: set[int]) -> list[int]:
    """Every fragment of `tapes` (`tapes.no`), ascending."""
    return [f for (f,) in db.execute("SELECT id FROM fragments WHERE tape IN carray(?) ORDER BY id",
                                     (int_array(sorted(tapes)),))]


def own_file_first(root: Path, span: Span, direct: dict[int, float], frags: dict[int, Frag]) -> dict[int, float]:
    """`direct` without what matches the span only as text another file of the working tree
    holds (`root`: the working tree; `frags`: the rows of `direct`'s fragments).

    A short span (an import block, a guard clause, test set-up) reads alike in many files, and
    the sessions that read or wrote those files were returned beside the span's writer, often
    above it on touches: on entireio/cli, all 223 returned sessions that never touched the span
    matched it only in other files (bench/provenance.py). So once the span's own file has a code
    fragment, a code fragment of another file whose match is not clearly better (ELSEWHERE_MARGIN)
    is dropped; so are its session's tool calls and results (the calls that made those reads and
    edits) when theirs is not either and nothing else of the session is left. A file no longer in
    the tree is kept: it may be where the span lived before a rename."""
    own = [c for f, c in direct.items()
           if (fr := frags.get(f)) is not None and fr.kind in _CODE and fr.file == span.file]
    if not own:
        return direct
    bar = max(own) * ELSEWHERE_MARGIN
    live: dict[str, bool] = {}

    def elsewhere(fr: Frag) -> bool:
        if fr.kind not in _CODE or fr.file is None or fr.file == span.file:
            return False
        if fr.file not in live:
            live[fr.file] = in_tree(root, fr.file)
        return live[fr.file]

    drop = {f for f, c in direct.items() if c <= bar and (fr := frags.get(f)) is not None and elsewhere(fr)}
    if not drop:
        return direct
    rest: dict[tuple[str, str], list[int]] = defaultdict(list)
    for f in direct:
        if f not in drop and (fr := frags.get(f)) is not None:
            rest[(fr.harness, fr.session_id)].append(f)
    for key in {(frags[f].harness, frags[f].session_id) for f in drop}:
        if all(frags[g].kind in _CALLS and direct[g] <= bar for g in rest[key]):
            drop.update(rest[key])
    return {f: c for f, c in direct.items() if f not in drop}


def _span_links(db: apsw.Connection, span: Span) -> dict[int, Hit]:
    """Explicit agent links placed on this span (an agent's own assertion, not a location guess)."""
    out: dict[int, Hit] = {}
    for (fid,) in db.execute(
            f"SELECT f.id FROM fragments f JOIN files ON files.id = f.file WHERE f.kind = {KIND_NO[E.SPAN_LINK]}"
            " AND files.path=?"
            " AND f.line0 <= ? AND f.line1 >= ?", (span.file, span.end, span.start)):
        out[fid] = Hit(fid, 1.0, "agent_link")
    return out


def sessions_of(res: Result, rank: str = "touches") -> list[dict[str, Any]]:
    """Group touches by session, in rank order.

    "touches" (the specification's): most touches first (engram.query.touches), then the most
    recent touch. A session that read the span in several files, or discussed it at length, can
    still come before the one that wrote it in one edit (bench/README.md). "evidence": the session
    with the strongest match first, then its strongest code.edit, then whether it read or edited
    the span's own file, then touches and recency; a session whose strongest match is under
    EVIDENCE_SESSION_FLOOR of the top one's is left out."""
    groups: dict[tuple[str, str], list[tuple[Hit, Frag]]] = defaultdict(list)
    for fid, h in res.hits.items():
        fr = res.frags.get(fid)
        if fr is not None:
            groups[(fr.harness, fr.session_id)].append((h, fr))
    sessions = []
    for (harness, sid), items in groups.items():
        items.sort(key=lambda x: (x[1].ts or "", x[1].tape, x[1].offset))
        last = max((fr.ts or "" for _, fr in items), default="")
        latest_tape = max(items, key=lambda x: (x[1].ts or "", x[1].tape_no))[1].tape
        sessions.append({"tape": latest_tape, "session_id": sid, "harness": harness,
                         "model": items[0][1].model,
                         "touches": touch_count((fr.kind, fr.file, (fr.tape_no, fr.offset)) for _, fr in items),
                         "last_touch": last or None,
                         "_items": items})
    if rank == "evidence":
        return _by_evidence(sessions, res.span.file)
    sessions.sort(key=lambda s: (-s["touches"], _neg_time(s["last_touch"]), s["session_id"]))
    return sessions


def _by_evidence(sessions: list[dict[str, Any]], file: str) -> list[dict[str, Any]]:
    best = {id(s): max(h.confidence for h, _ in s["_items"]) for s in sessions}

    def key(s: dict[str, Any]) -> tuple[Any, ...]:
        items = s["_items"]
        best_edit = max((h.confidence for h, fr in items if fr.kind == KIND_NO[E.CODE_EDIT]), default=0.0)
        own = any(fr.kind in _CODE and fr.file == file for _, fr in items)
        return (-best[id(s)], -best_edit, not own, -s["touches"], _neg_time(s["last_touch"]), s["session_id"])

    top = max(best.values(), default=0.0)
    return sorted((s for s in sessions if best[id(s)] >= EVIDENCE_SESSION_FLOOR * top), key=key)


def _neg_time(ts: str | None) -> tuple[int, ...]:
    return tuple(-ord(c) for c in (ts or ""))


def _trim(value: Any, limit: int = MAX_STRING) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"…[{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _trim(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v, limit) for v in value]
    return value


def to_json(store: Store, res: Result, opts: Options) -> dict[str, Any]:
    sessions = sessions_of(res, opts.rank)
    truncated = res.truncated
    if opts.max_sessions is not None and len(sessions) > opts.max_sessions:
        sessions = sessions[: opts.max_sessions]
        truncated = True
    readers: dict[str, TapeReader] = {}
    try:
        out_sessions = []
        for s in sessions:
            items = s.pop("_items")
            frags = []
            for h, fr in items[:opts.max_fragments]:
                entry: dict[str, Any] = {
                    "tape": fr.tape, "offset": fr.offset, "kind": KIND_NAME.get(fr.kind, "?"), "file": fr.file,
                    "lines": [fr.line0, fr.line1] if fr.line0 is not None else None,
                    "confidence": h.confidence, "via": h.via, "timestamp": fr.ts,
                }
                if h.edge:
                    entry["edge"] = h.edge
                if not opts.brief:
                    r = readers.get(fr.tape)
                    if r is None:
                        r = readers[fr.tape] = _reader(store, fr.tape)
                    entry["window"] = [{"offset": off, **_trim(ev)} for off, ev in
                                       r.window(fr.offset, opts.before, opts.after)]
                frags.append(entry)
            if len(items) > opts.max_fragments:
                truncated = True
            out_sessions.append({**s, "fragments": frags})
    finally:
        for r in readers.values():
            r.close()
    return {
        "version": EXPLAIN_VERSION,
        "span": {"file": res.span.file, "start": res.span.start, "end": res.span.end},
        "sessions": out_sessions,
        "truncated": truncated,
        "lineage": {"edges_followed": res.edges_followed},
        "widened": _widened(res),
        "rank": opts.rank,
    }


def _widened(res: Result) -> dict[str, Any] | None:
    if res.asked is None:
        return None
    return {"asked": {"file": res.asked.file, "start": res.asked.start, "end": res.asked.end}, "why": res.widened}


def _reader(store: Store, tape: str) -> TapeReader:
    """A reader of `tape` for its windows; imported here, as `--brief` never reads a tape (zstd
    and the tape modules are a tenth of the CLI's own import time)."""
    from engram.tape.reader import TapeReader  # noqa: PLC0415
    from engram.tape.writer import tape_path  # noqa: PLC0415

    return TapeReader(tape_path(store.tapes_dir, tape), store.objects_dir)


def widen_short(db: apsw.Connection, span: Span, file_lines: list[str] | None) -> tuple[Span, SpanTokens]:
    """A span with fewer than k + w - 1 tokens has no guaranteed fingerprint: take in neighbouring
    lines until it has (the reported span says so). Returns the span and its tokens (tokenising
    is a seventh of a warm explain: the lookup reuses them)."""
    tokens = span_tokens(span.text)
    if file_lines is None:
        return span, tokens
    k, w = snapshot.index_params(db)
    while len(tokens) < k + w - 1 and (span.start > 1 or span.end < len(file_lines)):
        start, end = max(1, span.start - 1), min(len(file_lines), span.end + 1)
        span = _lines(span.file, file_lines, start, end)
        tokens = span_tokens(span.text)
    return span, tokens


def widen_for_evidence(store: Store, db: apsw.Connection, res: Result, opts: Options,
                       file_lines: list[str]) -> Result:
    """The evidence for the span with a line more above and below, up to MAX_WIDEN_LINES a side,
    when the span's own is missing or weak (see `strongest`): the first wider span whose strongest
    match reaches WEAK_EVIDENCE; when none does, the one with the strongest match (`res` when no
    wider span's is stronger).

    Three lines a person rewrote (a fifth or more of their tokens, on every line) keep few or no
    k-grams of the text the agent wrote: the answer was empty, or made of matches on a k-gram or
    two that many files share; the code around them usually came from the same session. On the
    unseen repositories of bench/provenance.py this found the writer first for most such spans
    (entireio/cli: R@1 with 20% of tokens edited on every line 0.833 → 0.908, 30%: 0.792 →
    0.917, precision 0.927 → 0.932) and no figure fell on any set. The answer names the wider
    span and why.

    A span with no evidence at all used to stop at the first wider span with any match, often
    one line more holding a k-gram that messages of other sessions share, though the writer's
    edit held more of a span a line or two wider. Going on to the strongest wider span gave R@1
    at 30% 0.704 → 0.778 on chikachow/cyspbot and 0.869 → 0.897 on savekirk/session-bridge, up
    or level on the five other sets tried; two figures lost one query each, cyspbot's rename (of
    54) and FSM1/cipher-box's R@1 at 30% (of 120) (bench/README.md, "The strongest wider span")."""
    top = strongest(res)
    if top >= WEAK_EVIDENCE:
        return res
    best, span, tried = res, res.span, (res.span.start, res.span.end)
    for step in range(1, MAX_WIDEN_LINES + 1):
        start, end = max(1, span.start - step), min(len(file_lines), span.end + step)
        if (start, end) == tried:
            break  # the whole file, already asked
        tried = (start, end)
        wide = run(store, db, _lines(span.file, file_lines, start, end), opts)
        strength = strongest(wide)
        if strength >= WEAK_EVIDENCE:
            return wide
        if strength > top:
            best, top = wide, strength
    return best


def strongest(res: Result) -> float:
    """The span's own evidence: its strongest direct match or agent link (lineage and tombstones
    are reached through those, or are about deleted text)."""
    return max((h.confidence for h in res.hits.values() if h.via in ("direct", "agent_link")), default=0.0)


def _lines(file: str, file_lines: list[str], start: int, end: int) -> Span:
    return Span(file, start, end, "\n".join(file_lines[start - 1:end]) + "\n")


def resolve(store: Store, db: apsw.Connection, span: Span, opts: Options, expand_until: int | None = None,
            file_lines: list[str] | None = None) -> Result:
    """The evidence `explain` reports: for `span`, or for the wider span it had to take in
    (`Result.asked` / `Result.widened` say so). `file_lines` (the whole file) lets a span too
    short to fingerprint, or with no or weak evidence of its own, take in its neighbours; with
    `expand_until`, the span grows until at most N sessions match."""
    asked, why = span, None
    with reading(db):
        span, tokens = widen_short(db, span, file_lines)
        if span != asked:
            why = "few-tokens"
        res = run(store, db, span, opts, tokens)
        if file_lines is not None:
            had = bool(res.hits)
            res = widen_for_evidence(store, db, res, opts, file_lines)
            if res.span != span:
                why = "weak-evidence" if had else "no-evidence"
        if expand_until is not None and file_lines is not None:
            while len(sessions_of(res, opts.rank)) > expand_until and (res.span.start > 1 or res.span.end < len(file_lines)):
                start, end = max(1, res.span.start - 2), min(len(file_lines), res.span.end + 2)
                res = run(store, db, _lines(span.file, file_lines, start, end), opts)
                why = "expand-until"
    if res.span != asked:
        res.asked, res.widened = asked, why
    return res


def explain(store: Store, db: apsw.Connection, span: Span, opts: Options, expand_until: int | None = None,
            file_lines: list[str] | None = None) -> dict[str, Any]:
    """The explain document (see `resolve` for the span it answers)."""
    doc = to_json(store, resolve(store, db, span, opts, expand_until, file_lines), opts)
    if expand_until is not None:
        doc["expanded"] = True
    return doc
