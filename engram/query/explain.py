"""`engram explain`: which sessions wrote, read or discussed a span, ranked, with windows.

1. Direct lookup: the span's k-grams against the postings, minus the stop-list — every k-gram
   of a short span (the index holds the winnowed fingerprints of the tapes, and any of those
   inside the span is among the span's k-grams), only the span's own winnowed ones for a longer
   span. A fragment's confidence is the share of the span's winnowed fingerprint count it
   matched, weighted by kind (code.* above msg/tool); then the fragments another live file
   explains better drop out.
2. Lineage BFS backwards from matched edits (depth, min confidence, fan-out and edge caps;
   agent links always followed), labelling hops that cross a continuation edge.
3. Sessions ordered by touch count, then most recent touch (or, with `rank="evidence"`, by
   their strongest match); a transcript window per touch.

Given the span's file, a span too short to fingerprint, or with no or only weak evidence of its
own, is answered for a few lines more around it, and the document says so (`resolve`).

What is kept and in what order is decided by the rules of engram.query.ranking, which `resolve`,
`run`, `lineage_walk` and `sessions_of` apply in the order that module lists; with
`Options(debug=True)` (`engram explain --debug`) the document's `ranking` lists those that
changed the answer.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import apsw

from engram.index import snapshot
from engram.index.sql import int_array, reading
from engram.index.kinds import KIND_NAME, KIND_NO
from engram.query import ranking
from engram.query.direct import SpanTokens, direct_hits, span_tokens
from engram.query.ranking import Holders, Trace
from engram.query.spans import Span
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
    rank: str = "writer"  # or "touches", "evidence": see ranking.order_sessions
    debug: bool = False  # list the ranking rules that changed the answer (`Result.trace`)


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
    trace: Trace | None = None  # with Options.debug: the ranking rules that changed the answer


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
    """Breadth-first backwards along lineage edges from the directly matched fragments, taking
    the edges `ranking.follow_edge` follows.

    One query per level of the walk, not per node; nodes are expanded in the same order as a
    queue would (a level's nodes in the order they were reached)."""
    level: list[tuple[int, float]] = [(f, h.confidence) for f, h in res.hits.items()]
    seen = set(res.hits)
    edges = 0
    depth = 0
    full = False  # MAX_EDGES reached: the walk stops where it is
    refused: Counter[str] = Counter()
    while level and depth < opts.depth and not full:
        into = _edges_into(db, [node for node, _ in level])
        reached: list[tuple[int, float]] = []
        for node, conf in level:
            rows = into.get(node, [])
            if len(rows) > MAX_FANOUT:
                rows = rows[:MAX_FANOUT]
                res.truncated = True
            for src, econf, contain, loc, card, agent_link, note in rows:
                via, rule = ranking.follow_edge(src, econf, bool(agent_link), holders, opts.min_confidence,
                                                opts.forensics)
                if via is None:
                    refused[rule] += 1
                    continue
                if edges >= MAX_EDGES:
                    res.truncated = full = True
                    break
                edges += 1
                if src in seen:
                    continue
                seen.add(src)
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
    ranking.note_edges(res.trace, refused)
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
    """The evidence for `span` (`tokens`: the span's, when the caller has them): the direct match
    and the lineage walk, with the rules of engram.query.ranking in the order they apply."""
    res = Result(span, trace=Trace() if opts.debug else None)
    snap = snapshot.read(db)
    holders = Holders()
    match = Trace() if opts.debug else None
    direct = direct_hits(db, span.text, tokens=tokens, snap=snap, file=span.file, holders=holders, trace=match)
    frags = _frag_rows(db, list(direct))
    checked = {fr.tape_no for fr in frags.values()} if snap.subagents else set()
    reviews = ranking.reviewers(db, checked, res.trace)
    if reviews:  # matched again without them: they may have set the floor their parent fell under
        holders = Holders()
        match = Trace() if opts.debug else None
        direct = direct_hits(db, span.text, tokens=tokens, snap=snap, file=span.file, holders=holders,
                             exclude=_fragments_of(db, reviews), trace=match)
        frags = _frag_rows(db, list(direct))
    if res.trace is not None and match is not None:
        res.trace.fired += match.fired
    for fid, conf in ranking.own_file_first(store.root, span.file, direct, frags, res.trace).items():
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
    for fid in ranking.copies_to_drop(db, res.hits, res.frags, snap.subagents, checked, reviews, res.trace):
        del res.hits[fid]  # (res.frags holds fragments of res.hits only)
        del res.frags[fid]
    return res


def _fragments_of(db: apsw.Connection, tapes: set[int]) -> list[int]:
    """Every fragment of `tapes` (`tapes.no`), ascending."""
    return [f for (f,) in db.execute("SELECT id FROM fragments WHERE tape IN carray(?) ORDER BY id",
                                     (int_array(sorted(tapes)),))]


def _span_links(db: apsw.Connection, span: Span) -> dict[int, Hit]:
    """Explicit agent links placed on this span (an agent's own assertion, not a location guess)."""
    out: dict[int, Hit] = {}
    for (fid,) in db.execute(
            f"SELECT f.id FROM fragments f JOIN files ON files.id = f.file WHERE f.kind = {KIND_NO[E.SPAN_LINK]}"
            " AND files.path=?"
            " AND f.line0 <= ? AND f.line1 >= ?", (span.file, span.end, span.start)):
        out[fid] = Hit(fid, 1.0, "agent_link")
    return out


def sessions_of(res: Result, rank: str = "writer", trace: Trace | None = None) -> list[dict[str, Any]]:
    """Group touches by session, in rank order (`ranking.order_sessions`: "touches", the
    specification's, or "evidence"; `trace`: where the ordering rules are noted)."""
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
    return ranking.order_sessions(sessions, rank, res.span.file, trace)


def _trim(value: Any, limit: int = MAX_STRING) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"…[{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _trim(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v, limit) for v in value]
    return value


def to_json(store: Store, res: Result, opts: Options) -> dict[str, Any]:
    order = Trace() if opts.debug else None
    sessions = sessions_of(res, opts.rank, order)
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
    doc = {
        "version": EXPLAIN_VERSION,
        "span": {"file": res.span.file, "start": res.span.start, "end": res.span.end},
        "sessions": out_sessions,
        "truncated": truncated,
        "lineage": {"edges_followed": res.edges_followed},
        "widened": _widened(res),
        "rank": opts.rank,
    }
    if order is not None:  # only when asked: agents and the editors read the document as it was
        doc["ranking"] = [*(res.trace.fired if res.trace is not None else []), *order.fired]
    return doc


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


def widen_short(db: apsw.Connection, span: Span, file_lines: list[str] | None,
                trace: Trace | None = None) -> tuple[Span, SpanTokens]:
    """A span with fewer than k + w - 1 tokens has no guaranteed fingerprint: take in neighbouring
    lines until it has (`ranking.too_few_tokens`; the reported span says so). Returns the span and
    its tokens (tokenising is a seventh of a warm explain: the lookup reuses them)."""
    tokens = span_tokens(span.text)
    if file_lines is None:
        return span, tokens
    k, w = snapshot.index_params(db)
    asked, had = span, len(tokens)
    while ranking.too_few_tokens(len(tokens), k, w) and (span.start > 1 or span.end < len(file_lines)):
        start, end = max(1, span.start - 1), min(len(file_lines), span.end + 1)
        span = _lines(span.file, file_lines, start, end)
        tokens = span_tokens(span.text)
    if trace is not None and span != asked:
        trace.note("too_few_tokens", f"{had} tokens, under k + w - 1 = {k + w - 1}: answered for lines "
                                     f"{span.start}-{span.end} ({len(tokens)} tokens)")
    return span, tokens


def widen_for_evidence(store: Store, db: apsw.Connection, res: Result, opts: Options,
                       file_lines: list[str], trace: Trace | None = None) -> Result:
    """`res`, or the evidence for the span with a few lines more above and below when its own is
    missing or weak (`ranking.widen_for_evidence`)."""
    span = res.span
    return ranking.widen_for_evidence(
        res, lambda r: ranking.strongest(r.hits.values()),
        lambda start, end: run(store, db, _lines(span.file, file_lines, start, end), opts),
        span.start, span.end, len(file_lines), trace)


def _lines(file: str, file_lines: list[str], start: int, end: int) -> Span:
    return Span(file, start, end, "\n".join(file_lines[start - 1:end]) + "\n")


def resolve(store: Store, db: apsw.Connection, span: Span, opts: Options, expand_until: int | None = None,
            file_lines: list[str] | None = None) -> Result:
    """The evidence `explain` reports: for `span`, or for the wider span it had to take in
    (`Result.asked` / `Result.widened` say so). `file_lines` (the whole file) lets a span too
    short to fingerprint, or with no or weak evidence of its own, take in its neighbours; with
    `expand_until`, the span grows until at most N sessions match."""
    asked, why = span, None
    notes = Trace() if opts.debug else None  # how the span answered was chosen
    with reading(db):
        span, tokens = widen_short(db, span, file_lines, notes)
        if span != asked:
            why = "few-tokens"
        res = run(store, db, span, opts, tokens)
        if file_lines is not None:
            had = bool(res.hits)
            res = widen_for_evidence(store, db, res, opts, file_lines, notes)
            if res.span != span:
                why = "weak-evidence" if had else "no-evidence"
        if expand_until is not None and file_lines is not None:
            before = res.span
            while len(sessions_of(res, opts.rank)) > expand_until and (res.span.start > 1 or res.span.end < len(file_lines)):
                start, end = max(1, res.span.start - 2), min(len(file_lines), res.span.end + 2)
                res = run(store, db, _lines(span.file, file_lines, start, end), opts)
                why = "expand-until"
            if notes is not None and res.span != before:
                notes.note("expand_until", f"grown to lines {res.span.start}-{res.span.end} "
                                           f"for at most {expand_until} session(s)")
    if res.span != asked:
        res.asked, res.widened = asked, why
    if notes is not None and res.trace is not None:
        res.trace.fired[:0] = notes.fired
    return res


def explain(store: Store, db: apsw.Connection, span: Span, opts: Options, expand_until: int | None = None,
            file_lines: list[str] | None = None) -> dict[str, Any]:
    """The explain document (see `resolve` for the span it answers)."""
    doc = to_json(store, resolve(store, db, span, opts, expand_until, file_lines), opts)
    if expand_until is not None:
        doc["expanded"] = True
    return doc
