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
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import apsw

from engram.anchor import definition
from engram.index import layout, memo, snapshot
from engram.index.sql import int_array, reading
from engram.index.kinds import CODE_CARRIED, KIND_NAME, KIND_NO
from engram.query import moves, ranking
from engram.query.budget import TOKEN_BYTES, Unit, json_size, left_out, page, tokens
from engram.query.clip import CONTEXT_LINES, SpanWords, clip_event
from engram.query.direct import SpanTokens, direct_hits, span_tokens
from engram.query.ranking import Holders, Trace, Writes
from engram.query.spans import Span
from engram.query.touches import touch_count
from engram.store.repo import Store
from engram.tape import events as E
from engram.words import plural

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
    brief: bool = False  # no transcript windows
    min_confidence: float = 0.5
    include_deleted: bool = False
    forensics: bool = False
    depth: int = MAX_DEPTH
    # Without a budget, at most this many fragments per session are read (what is cut is reported
    # as `truncated`); with one, the budget decides and paging reaches every fragment.
    max_fragments: int = MAX_FRAGMENTS_PER_SESSION
    rank: str = "writer"  # or "touches", "evidence": see ranking.order_sessions
    debug: bool = False  # list the ranking rules that changed the answer (`Result.trace`)
    # Each session's story: the request, the words around its telling touch, its edit's diff
    # (engram.query.story). None: unless `brief`.
    story: bool | None = None
    # The answer's size in tokens (engram.query.budget: TOKEN_BYTES bytes of compact JSON each),
    # and which page of it; None: no bound (a window's texts are still clipped).
    budget: int | None = None
    page: int = 1
    # Lines kept around the span in a window's long texts (engram.query.clip); None: texts whole
    # (cut at MAX_STRING characters), as before windows were clipped.
    context: int | None = CONTEXT_LINES
    # The command that asks for another page, with "{page}" where its number goes (the CLI's
    # own flags, or an MCP call); None: `engram explain FILE:A-B --page N`.
    more: str | None = None
    # How an argument that could be read two ways was read (`spans.resolve_span_arg`): said in the answer.
    read_as: str | None = None

    def __post_init__(self) -> None:
        if self.story is None:
            self.story = not self.brief


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
    # The path the tape recorded, when it was an earlier path of the span's file (`_own_paths`):
    # `file` is then the span's file, as the ranking reads it.
    recorded: str | None = None


@dataclass
class Result:
    span: Span
    hits: dict[int, Hit] = field(default_factory=dict)
    frags: dict[int, Frag] = field(default_factory=dict)
    edges_followed: int = 0
    truncated: bool = False
    asked: Span | None = None  # the span asked for, when `span` is wider
    widened: str | None = None  # why: few-tokens, no-evidence, weak-evidence, no-writer or expand-until
    trace: Trace | None = None  # with Options.debug: the ranking rules that changed the answer
    partial: bool = False  # read while `engram reindex` refilled the index (memo.index_state)
    writes: Writes = field(default_factory=Writes)  # each writing session's edits of the file together
    # (harness, session id) → its strongest edit of the lines around the span, when several
    # sessions passed the writer test (`writer_context`); None: not asked
    context: dict[tuple[str, str], float] | None = None


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
    direct = direct_hits(db, span.text, tokens=tokens, snap=snap, file=span.file, holders=holders, trace=match,
                         writes=res.writes)
    frags = _frag_rows(db, list(direct))
    checked = {fr.tape_no for fr in frags.values()} if snap.subagents else set()
    reviews = ranking.reviewers(db, checked, res.trace)
    if reviews:  # matched again without them: they may have set the floor their parent fell under
        holders = Holders()
        match = Trace() if opts.debug else None
        res.writes = Writes()
        direct = direct_hits(db, span.text, tokens=tokens, snap=snap, file=span.file, holders=holders,
                             exclude=_fragments_of(db, reviews), trace=match, writes=res.writes)
        frags = _frag_rows(db, list(direct))
    if res.trace is not None and match is not None:
        res.trace.fired += match.fired
    _own_paths(store, span.file, frags, res.trace)
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
    res.frags.update(_own_paths(store, span.file, _frag_rows(db, [f for f in res.hits if f not in frags])))
    for fid in ranking.copies_to_drop(db, res.hits, res.frags, snap.subagents, checked, reviews, res.trace):
        del res.hits[fid]  # (res.frags holds fragments of res.hits only)
        del res.frags[fid]
    return res


def _own_paths(store: Store, file: str, frags: dict[int, Frag], trace: Trace | None = None) -> dict[int, Frag]:
    """`frags`, those of an earlier path of `file` (`moves.earlier_paths`: git renamed it since)
    made fragments of `file` in place, the recorded path kept (`Frag.recorded`): an edit made
    before the move is an edit of the span's own file for every rule that asks (`writer_first`,
    `own_file_first`, the windows shown first). git is asked only when a code fragment names a
    path gone from the working tree."""
    gone = moves.gone(store.root, file, {fr.file for fr in frags.values() if fr.kind in ranking.CODE and fr.file})
    earlier = moves.earlier_paths(store.root, file) & gone if gone else frozenset()
    moved = {fid: fr for fid, fr in frags.items() if fr.file in earlier}
    for fid, fr in moved.items():
        frags[fid] = replace(fr, file=file, recorded=fr.file)
    if trace is not None and moved:
        paths = sorted({fr.file for fr in moved.values() if fr.file})
        trace.note("moved_file", f"{plural(len(moved), 'fragment')} of {', '.join(paths)} counted as {file}'s: "
                                 "git follows the file back to that path")
    return frags


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
    ordered = ranking.order_sessions(sessions, rank, res.span.file, trace, res.writes, res.context)
    wrote = ranking.latest_writes(ordered, res.span.file, res.writes)
    for s in ordered:
        s["wrote"] = id(s) in wrote
    return ordered


def _trim(value: Any, limit: int = MAX_STRING) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"…[{len(value) - limit} more characters]"
    if isinstance(value, dict):
        return {k: _trim(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim(v, limit) for v in value]
    return value


# The order in which a session's windows are kept under a budget: what it wrote first, then what
# held the code (a tool call, lines carried in an edit, a read), then what was said or printed.
_WINDOW_ORDER: Final = {KIND_NO[E.CODE_EDIT]: 0, KIND_NO[E.TOOL_CALL]: 1, KIND_NO[CODE_CARRIED]: 2,
                        KIND_NO[E.CODE_READ]: 3, KIND_NO[E.MSG_OUT]: 4, KIND_NO[E.MSG_IN]: 5,
                        KIND_NO[E.TOOL_RESULT]: 6}
# A window's least size (bytes): one that cannot fit this is not read.
_WINDOW_LEAST: Final = 200
# Bytes kept free beside the units for `truncated` and `budget` (their counts are known last).
_RESERVE: Final = 320


def view_command(tape: str, offset: int) -> str:
    """The command that shows an event of a tape whole."""
    return f"engram view {tape[:12]}@{offset} --full"


class _Answer:
    """The pieces of one explain answer (`budget.Unit`s), built when first needed: a session's
    heading, its story, each fragment's line and window."""

    def __init__(self, store: Store, res: Result, opts: Options, sessions: list[dict[str, Any]]) -> None:
        self.store, self.res, self.opts, self.sessions = store, res, opts, sessions
        self.items = [s.pop("_items") for s in sessions]
        self.span = SpanWords(res.span.text)
        self.readers: dict[str, TapeReader] = {}
        self.memo: dict[Hashable, Any] = {}

    def close(self) -> None:
        for r in self.readers.values():
            r.close()

    def reader(self, tape: str) -> TapeReader:
        r = self.readers.get(tape)
        if r is None:
            r = self.readers[tape] = _reader(self.store, tape)
        return r

    def _cached(self, key: Hashable, make: Callable[[], Any]) -> Any:
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def head(self, si: int) -> dict[str, Any]:
        return self.sessions[si]

    def fragment(self, si: int, fi: int) -> dict[str, Any]:
        h, fr = self.items[si][fi]
        entry: dict[str, Any] = {
            "tape": fr.tape, "offset": fr.offset, "kind": KIND_NAME.get(fr.kind, "?"), "file": fr.recorded or fr.file,
            "lines": [fr.line0, fr.line1] if fr.line0 is not None else None,
            "confidence": h.confidence, "via": h.via, "timestamp": fr.ts,
        }
        if h.edge:
            entry["edge"] = h.edge
        return entry

    def window(self, si: int, fi: int) -> list[dict[str, Any]]:
        def make() -> list[dict[str, Any]]:
            fr = self.items[si][fi][1]
            events = self.reader(fr.tape).window(fr.offset, self.opts.before, self.opts.after)
            if self.opts.context is None:
                return [{"offset": off, **_trim(ev)} for off, ev in events]
            return [self._cached(("ev", fr.tape, off), lambda off=off, ev=ev: {  # type: ignore[misc]
                "offset": off, **clip_event(ev, self.span, view_command(fr.tape, off), self.opts.context)})
                for off, ev in events]
        return self._cached(("w", si, fi), make)  # type: ignore[no-any-return]

    def telling(self, si: int) -> Frag:
        """The touch a session's story tells: its latest edit that matched the span's own lines,
        else its latest edit, else its latest touch."""
        items = self.items[si]
        edits = [fr for h, fr in items if fr.kind == ranking.EDIT and h.via == "direct" and fr.file == self.res.span.file]
        edits = edits or [fr for _, fr in items if fr.kind == ranking.EDIT]
        return edits[-1] if edits else items[-1][1]

    def story(self, si: int) -> dict[str, Any]:
        def make() -> dict[str, Any]:
            from engram.query.story import edit_change, story_json, touch_story  # noqa: PLC0415

            fr = self.telling(si)
            r = self.reader(fr.tape)
            out: dict[str, Any] = {"tape": fr.tape, "offset": fr.offset, "kind": KIND_NAME.get(fr.kind, "?"),
                                   "ts": fr.ts}
            out.update(story_json(touch_story(r, fr.offset), self.span))
            if fr.kind == ranking.EDIT:
                lines = [(f.line0, f.line1) for _, f in self.items[si] if f.tape == fr.tape and f.offset == fr.offset
                         and f.kind == ranking.EDIT and f.line0 is not None and f.line1 is not None]
                change = edit_change(r.event(fr.offset, resolve_objects=True), lines, self.span,
                                     self.opts.context if self.opts.context is not None else CONTEXT_LINES)
                if change is not None:
                    out["edit"] = change
            return out
        return self._cached(("story", si), make)  # type: ignore[no-any-return]

    def units(self) -> list[Unit]:
        """Every piece, most load-bearing first: the writers' headings, stories, edits and their
        windows; every other session's heading and story; every fragment's line; the remaining
        windows, the writers' first and by kind (_WINDOW_ORDER)."""
        opts, file = self.opts, self.res.span.file
        cap = opts.max_fragments if opts.budget is None else None
        made: dict[Hashable, Unit] = {}

        def add(key: Hashable, what: str, needs: Hashable | None, measure: Callable[[], int], least: int = 0) -> None:
            if key not in made:
                made[key] = Unit(key, what, needs, measure, least)

        def head(si: int) -> None:
            add(("s", si), "sessions", None, lambda: json_size(self.head(si)) + len(',"fragments":[]') + 1)
            if opts.story:
                add(("story", si), "stories", ("s", si), lambda: json_size({"story": self.story(si)}) - 1, 60)

        def frag(si: int, fi: int) -> None:
            add(("f", si, fi), "fragments", ("s", si), lambda: json_size(self.fragment(si, fi)) + 1)

        def window(si: int, fi: int) -> None:
            if not opts.brief:
                add(("w", si, fi), "windows", ("f", si, fi), lambda: json_size({"window": self.window(si, fi)}) - 1,
                    _WINDOW_LEAST)

        shown = [list(range(len(items) if cap is None else min(cap, len(items)))) for items in self.items]
        writers = [si for si, s in enumerate(self.sessions) if s.get("wrote")]
        for si in writers:
            head(si)
            for fi in shown[si]:
                h, fr = self.items[si][fi]
                if fr.kind == ranking.EDIT and h.via == "direct" and fr.file == file:
                    frag(si, fi)
                    if opts.context is None or not any(("w", si, fj) in made for fj in shown[si] if self.items[si][fj][1].offset == fr.offset
                               and self.items[si][fj][1].tape == fr.tape):
                        window(si, fi)
        for si in range(len(self.sessions)):
            head(si)
        for si in range(len(self.sessions)):
            for fi in shown[si]:
                frag(si, fi)
        for si in writers + [si for si in range(len(self.sessions)) if si not in writers]:
            seen: set[tuple[str, int]] = set()  # an edit of several regions: one window for them all
            for fi in sorted(shown[si], key=lambda fi: _WINDOW_ORDER.get(self.items[si][fi][1].kind, 9)):
                fr = self.items[si][fi][1]
                if (fr.tape, fr.offset) not in seen or opts.context is None:
                    seen.add((fr.tape, fr.offset))
                    window(si, fi)
        self.capped = sum(len(items) - len(keep) for items, keep in zip(self.items, shown))
        return list(made.values())

    def sessions_shown(self, shown: set[Hashable]) -> list[dict[str, Any]]:
        out = []
        for si in range(len(self.sessions)):
            if ("s", si) not in shown:
                continue
            s = dict(self.head(si))
            if ("story", si) in shown:
                s["story"] = self.story(si)
            frags = []
            for fi in range(len(self.items[si])):
                if ("f", si, fi) in shown:
                    entry = self.fragment(si, fi)
                    if ("w", si, fi) in shown:
                        entry["window"] = self.window(si, fi)
                    frags.append(entry)
            s["fragments"] = frags
            out.append(s)
        return out


def to_json(store: Store, res: Result, opts: Options) -> dict[str, Any]:
    """The explain document. With `opts.budget`, the pieces that fit the budget on page
    `opts.page` (engram.query.budget), and `truncated` saying what was left out and the command
    that shows the next page."""
    order = Trace() if opts.debug else None
    answer = _Answer(store, res, opts, sessions_of(res, opts.rank, order))
    doc: dict[str, Any] = {
        "version": EXPLAIN_VERSION,
        "span": {"file": res.span.file, "start": res.span.start, "end": res.span.end},
        "sessions": [],
        "truncated": False,
        "lineage": {"edges_followed": res.edges_followed},
        "widened": _widened(res),
        "rank": opts.rank,
    }
    if opts.read_as:
        doc["read_as"] = opts.read_as
    try:
        units = answer.units()
        if opts.budget is None:
            shown: set[Hashable] = {u.key for u in units}
            left: list[Unit] = []
            over = False
        else:
            capacity = opts.budget * TOKEN_BYTES - json_size(doc) - _RESERVE
            pg = page(units, capacity, opts.page)
            shown, left, over = set(pg.shown), pg.left, pg.over
            if opts.page > 1 and not pg.new:  # an empty page would read as "no session"
                _past_the_last_page(opts)
        doc["sessions"] = answer.sessions_shown(shown)
    finally:
        answer.close()
    doc["truncated"] = _truncated(res, opts, left, answer.capped)
    if opts.budget is not None:
        doc["budget"] = {"tokens": opts.budget, "used": 0}
        if opts.page > 1:
            doc["page"] = opts.page
        if over:
            doc["budget"]["over"] = True
        doc["budget"]["used"] = tokens(json_size(doc))
    if order is not None:  # only when asked (and not counted): agents and editors read the document as it was
        doc["ranking"] = [*(res.trace.fired if res.trace is not None else []), *order.fired]
    return doc


def _past_the_last_page(opts: Options) -> None:
    from engram.errors import BadInput  # noqa: PLC0415

    raise BadInput(f"page {opts.page}: past the end of this answer at this budget (page 1's "
                   "`truncated.next` names the next page while there is one)")


def _truncated(res: Result, opts: Options, left: list[Unit], capped: int) -> dict[str, Any] | bool:
    """False when nothing was left out; else what was (`left_out`: sessions, stories, fragments,
    windows), why, and the command that shows the next page."""
    out: dict[str, Any] = {}
    counts = left_out(left)
    if capped:
        counts["fragments"] = counts.get("fragments", 0) + capped
    if counts:
        out["left_out"] = counts
    if res.truncated:
        out["lineage"] = (f"the lineage walk stopped at its caps ({MAX_FANOUT} edges per fragment, "
                          f"{MAX_EDGES} in all): older versions may be missing")
    if left:
        out["next"] = _next_command(res, opts)
    elif capped:
        out["why"] = f"at most {opts.max_fragments} fragments per session without a budget"
    return out or False


def _next_command(res: Result, opts: Options) -> str:
    nxt = opts.page + 1
    if opts.more:
        return opts.more.format(page=nxt)
    span = res.asked or res.span
    if span.file == "-":
        return f"engram explain --text - --page {nxt}  (the same text on stdin)"
    return f"engram explain {span.file}:{span.start}-{span.end} --page {nxt}"


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
    missing or weak in its own file (`ranking.widen_for_evidence`, `ranking.strongest_in_file`)."""
    span = res.span

    def strength(r: Result) -> float:
        return max(ranking.strongest_in_file(((h, r.frags.get(f)) for f, h in r.hits.items()), span.file),
                   ranking.edit_on_lines(_answered_edits(db, r), span.file, r.span.start, r.span.end))

    return ranking.widen_for_evidence(
        res, strength, lambda start, end: run(store, db, _lines(span.file, file_lines, start, end), opts),
        span.start, span.end, len(file_lines), trace)


def _answered_edits(db: apsw.Connection, res: Result) -> list[tuple[float, Frag | None]]:
    """The code.edit fragments among `res`'s direct candidates, under the floor or not, of the
    sessions the answer holds a direct match of (its tool call, say), with their confidence
    (`Writes.edits`). Another session's edit under the floor is not the answer's evidence: a
    renamed span's writer, only there, is found by widening (`ranking.edit_on_lines`)."""
    edits = res.writes.edits
    rows = {f: res.frags[f] for f in edits if f in res.frags}
    rows.update(_frag_rows(db, [f for f in edits if f not in rows]))
    answered = {(fr.harness, fr.session_id) for f, h in res.hits.items()
                if h.via == "direct" and (fr := res.frags.get(f)) is not None}
    return [(conf, fr) for f, conf in edits.items()
            if (fr := rows.get(f)) is not None and (fr.harness, fr.session_id) in answered]


def widen_for_writer(store: Store, db: apsw.Connection, span: Span, res: Result, opts: Options,
                     file_lines: list[str], trace: Trace | None = None) -> Result:
    """`res` (the answer for `span`, or for the wider span `widen_for_evidence` chose), or the
    evidence for `span` with a few lines more above and below when no edit of its file holds
    `res`'s span as well as a read of the file does (`ranking.widen_for_writer`)."""
    return ranking.widen_for_writer(
        res, lambda r: ranking.attributed(((h, r.frags.get(f)) for f, h in r.hits.items()), span.file,
                                          r.span.start, r.span.end),
        lambda start, end: run(store, db, _lines(span.file, file_lines, start, end), opts),
        span.start, span.end, len(file_lines), trace,
        first_step=1 + max(span.start - res.span.start, res.span.end - span.end))


def writer_context(db: apsw.Connection, res: Result, file_lines: list[str]) -> dict[tuple[str, str], float] | None:
    """When several sessions passed the writer test, how much of the lines around the span
    (`ranking.WRITER_CONTEXT_LINES` a side) each one's edits hold: its strongest direct code.edit
    of the file there, or its hunks taken together (`ranking.writer_context`)."""
    pad = ranking.WRITER_CONTEXT_LINES
    span = res.span
    start, end = max(1, span.start - pad), min(len(file_lines), span.end + pad)
    if pad <= 0 or (start, end) == (span.start, span.end):
        return None
    writers = [(s["harness"], s["session_id"]) for s in sessions_of(res) if s["wrote"]]
    if len(writers) < 2:
        return None
    wide = _lines(span.file, file_lines, start, end)
    writes = Writes(writers, carried=True)
    hits = direct_hits(db, wide.text, file=span.file, writes=writes)
    rows = _frag_rows(db, list(hits))
    best = {who: together[0] for who, together in writes.by_session.items()}
    for fid, conf in hits.items():
        fr = rows.get(fid)
        if fr is not None and fr.kind == ranking.EDIT and fr.file == span.file:
            key = (fr.harness, fr.session_id)
            best[key] = max(best.get(key, 0.0), conf)
    return best


def writer_landed(db: apsw.Connection, res: Result, file_lines: list[str]) -> None:
    """Set aside the latest writer's edits that landed on another copy of the span in the file
    (`ranking.landed_elsewhere`, into `res.writes.elsewhere`): each lies over lines of the file that
    hold at least WRITER_FLOOR of the span's fingerprints the edit holds, and the edit event held
    the span's own lines unchanged (they lie between its first and last hunk or carried line).

    Without the last test, lines a person inserted above a span written at the end of a hunk
    (a shift of 7 lines) moved it out of the hunk's recorded range, and test set-up the hunk
    repeats made its writer look like a copier (entireio/cli, `explain_test.go`; a 3-line span
    moved within its file on Ri5ha6h/tan-mapper-app likewise)."""
    span = res.span
    k = snapshot.index_params(db)[0]
    segs = snapshot.read(db).segs
    span_keys: set[int] = set()

    def holds_there(fr: ranking.Fragment) -> bool:
        reach = db.execute(f"SELECT min(line0), max(line1) FROM fragments WHERE tape = ? AND offset = ?"
                           f" AND kind IN ({ranking.EDIT}, {KIND_NO[CODE_CARRIED]})",
                           (fr.tape_no, fr.offset)).fetchone()
        if reach is None or reach[0] is None or not reach[0] <= span.start <= span.end <= reach[1]:
            return False
        if not span_keys:
            span_keys.update(_keys(span.text, k))
        held = {key for key, _ in layout.lookup_pairs_small(db, span_keys, segs, {fr.id})}
        there = file_lines[max(0, (fr.line0 or 1) - 1):fr.line1 or 0]
        if not held or not there:
            return False
        return len(held & _keys("\n".join(there) + "\n", k)) >= ranking.WRITER_FLOOR * len(held)

    res.writes.elsewhere = ranking.landed_elsewhere(sessions_of(res), span.file, span.start, span.end, res.writes,
                                                    holds_there)


def _keys(text: str, k: int) -> set[int]:
    """The posting keys of every k-gram of `text`."""
    return {layout.key(fp) for fp in definition.kgram_values(definition.token_hashes(text), k)}


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
        partial = memo.index_state(db)[1]  # (in the answer's own snapshot)
        span, tokens = widen_short(db, span, file_lines, notes)
        if span != asked:
            why = "few-tokens"
        res = run(store, db, span, opts, tokens)
        if file_lines is not None:
            had = bool(res.hits)
            res = widen_for_evidence(store, db, res, opts, file_lines, notes)
            if res.span != span:
                why = "weak-evidence" if had else "no-evidence"
            wider = widen_for_writer(store, db, span, res, opts, file_lines, notes)
            if wider is not res:
                res, why = wider, "no-writer"
        if expand_until is not None and file_lines is not None:
            before = res.span
            while len(sessions_of(res, opts.rank)) > expand_until and (res.span.start > 1 or res.span.end < len(file_lines)):
                start, end = max(1, res.span.start - 2), min(len(file_lines), res.span.end + 2)
                res = run(store, db, _lines(span.file, file_lines, start, end), opts)
                why = "expand-until"
            if notes is not None and res.span != before:
                notes.note("expand_until", f"grown to lines {res.span.start}-{res.span.end} "
                                           f"for at most {plural(expand_until, 'session')}")
        if file_lines is not None and opts.rank == "writer":
            writer_landed(db, res, file_lines)
            res.context = writer_context(db, res, file_lines)
    res.partial = partial
    if res.span != asked:
        res.asked, res.widened = asked, why
    if notes is not None and res.trace is not None:
        res.trace.fired[:0] = notes.fired
    return res


PARTIAL = ("the index is being rebuilt (`engram reindex`): sessions not indexed yet are missing from this answer; "
           "ask again when it ends (or run `engram reindex` if none is running)")


def explain(store: Store, db: apsw.Connection, span: Span, opts: Options, expand_until: int | None = None,
            file_lines: list[str] | None = None) -> dict[str, Any]:
    """The explain document (see `resolve` for the span it answers)."""
    res = resolve(store, db, span, opts, expand_until, file_lines)
    doc = to_json(store, res, opts)
    if res.partial:
        doc["partial"] = PARTIAL
    if expand_until is not None:
        doc["expanded"] = True
    return doc
