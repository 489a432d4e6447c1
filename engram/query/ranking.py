"""How `engram explain` decides what it answers and in what order: every rule in one place.

Each rule below was chosen on measured data; its docstring or comment names the measurement
(`python bench/provenance.py …` unless it says otherwise; the figures are pres / e20s / e30s /
rename / precision, R@1 of the writing session under the token-preserving mutations, with 20%
and 30% of tokens edited on every line and after a rename, then precision; bench/README.md has
the tables). The lookup and the arithmetic stay where they run fastest (`direct.py` in plain
Python, `direct_np.py` with numpy, `explain.lineage_walk`); this module holds what decides which
fragments and sessions are kept and in what order. `explain.resolve` and `explain.run` apply the
rules in this order, and `engram explain FILE:A-B --debug` lists those that changed the answer
(`Trace`), under these names:

The span asked (explain.resolve)
  too_few_tokens         a span with no guaranteed fingerprint takes in its neighbours
  widen_for_evidence     so does one with no or weak evidence of its own in its own file (WEAK_EVIDENCE,
                         MAX_WIDEN_LINES)
  widen_for_writer       so does one that no edit of its file holds as well as the file's reads do
                         (WRITER_WIDEN_SHARE)
  expand_until           `--expand-until N` (asked for, not a measured rule)
Fragments matched directly (direct.direct_hits)
  winnowed_only          a long span looks up its own winnowed fingerprints only (WINNOWED_ONLY_FROM)
  stop_list_restored     stop-listed fingerprints looked up after all for an edited span
                         (engram.index.stoplist.restored; direct._restored in plain Python)
  own_file_stop_listed   an edit of the span's own file counts the stop-listed fingerprints too
                         (own_file_share)
  expected_count         a span whose winnowed fingerprints are all stop-listed counts every k-gram
  reviewers              a reviewer quoting its parent is matched away while the parent is stored
  kind_weight            a fragment's share of the span is weighed by its kind (KIND_WEIGHT)
  candidate_cap          at most MAX_CANDIDATES fragments are weighed
  floor_of               fragments under RELATIVE_FLOOR of the best are dropped
  joined_edits           a session's edits of the span's file that hold it together are kept
  moved_file             a fragment of a path git renamed the span's file from is one of the file
                         (engram.query.moves; explain._own_paths, lineage's fragments too)
  own_file_first         another live file's copy of the span drops out (ELSEWHERE_MARGIN)
Fragments reached along lineage (explain.lineage_walk)
  lineage_holders        an edge leads only to a fragment holding some of the span (Holders)
  lineage_location_only  location-only edges are followed with `--forensics` only
  lineage_min_confidence edges under `--min-confidence` are not followed
Sessions (explain.sessions_of)
  drop_copies            a resumed session's copy of another's events, and a reviewer reached
                         along lineage, leave the answer
  reads_once             a session's reads of one file are one touch (engram.query.touches)
  writer_first           the sessions whose edits changed the span come first, latest first (the
                         default order; WRITER_FLOOR)
  writer_together        so does one whose hunks of one edit hold the span together
                         (session_writes, WRITER_TOGETHER_FLOOR)
  writer_landed          the latest writer's edits that landed on another copy of the span in the
                         file, its lines kept, are no writing of the span (explain.writer_landed)
  writer_context         a writer whose edits hold little of the lines around the span wrote
                         them elsewhere in the file: after the others (explain.writer_context)
  by_touches             most touches first, then the most recent touch (`--rank touches`)
  by_evidence            `--rank evidence`: the strongest match first (EVIDENCE_SESSION_FLOOR)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import apsw

from engram.index.sql import int_array
from engram.index.edges import LINK_THRESHOLD
from engram.index.kinds import CODE_CARRIED, KIND_NAME, KIND_NO
from engram.query.copies import Event, copies, quoting_reviews
from engram.query.spans import in_tree
from engram.tape import events as E
from engram.words import plural

EDIT: Final = KIND_NO[E.CODE_EDIT]
_READ: Final = KIND_NO[E.CODE_READ]
CODE: Final = frozenset({EDIT, _READ, KIND_NO[CODE_CARRIED]})
CALLS: Final = frozenset({KIND_NO[E.TOOL_CALL], KIND_NO[E.TOOL_RESULT]})


class Trace:
    """The rules that changed an answer, in the order they ran: what `--debug` reports as
    `ranking`. Only made when asked for: the default answer computes none of it."""

    def __init__(self) -> None:
        self.fired: list[dict[str, str]] = []

    def note(self, rule: str, effect: str) -> None:
        self.fired.append({"rule": rule, "effect": effect})


class Fragment(Protocol):
    """What the rules read of a matched fragment (`explain.Frag`)."""

    id: int
    kind: int
    file: str | None
    ts: str | None
    line0: int | None
    line1: int | None
    tape_no: int
    offset: int
    session_id: str
    harness: str


class Hit(Protocol):
    """What the rules read of a fragment's evidence (`explain.Hit`)."""

    confidence: float
    via: str


R = TypeVar("R")


# --------------------------------------------------------------------------- the span asked


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


def too_few_tokens(tokens: int, k: int, w: int) -> bool:
    """Has a span of `tokens` tokens no guaranteed fingerprint (fewer than k + w - 1)? Then it
    takes in neighbouring lines until it has (`explain.widen_short`). Such spans failed even
    unmutated: `resources_test.exs:13-15` is 5 tokens, one k-gram, which winnowing need not
    keep (bench/README.md, "Failure patterns seen in explain", 4; 1.7% of the shipped spans
    at k=5, w=4)."""
    return tokens < k + w - 1


def widen_for_evidence(res: R, strength: Callable[[R], float], ask: Callable[[int, int], R],
                       start: int, end: int, last: int, trace: Trace | None = None) -> R:
    """The answer for lines `start`-`end` (`res`, of strength `strength(res)`), or for the span
    with a line more above and below, up to MAX_WIDEN_LINES a side (`ask(a, b)`: the answer for
    lines a-b, `last` the file's last line), when the span's own evidence is missing or weak:
    the first wider span whose strongest match reaches WEAK_EVIDENCE; when none does, the one
    with the strongest match (`res` when no wider span's is stronger).

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
    top = first = strength(res)
    if top >= WEAK_EVIDENCE:
        return res
    best, lines, tried = res, (start, end), (start, end)
    for step in range(1, MAX_WIDEN_LINES + 1):
        a, b = max(1, start - step), min(last, end + step)
        if (a, b) == tried:
            break  # the whole file, already asked
        tried = (a, b)
        wide = ask(a, b)
        wide_strength = strength(wide)
        if wide_strength >= WEAK_EVIDENCE:
            best, top, lines = wide, wide_strength, (a, b)
            break
        if wide_strength > top:
            best, top, lines = wide, wide_strength, (a, b)
    if trace is not None:
        if lines == (start, end):
            trace.note("widen_for_evidence", f"strongest own match {first:.4g} < {WEAK_EVIDENCE}; no span up to "
                                             f"{MAX_WIDEN_LINES} lines wider a side had stronger evidence: kept")
        else:
            trace.note("widen_for_evidence", f"strongest own match {first:.4g} < {WEAK_EVIDENCE}: answered for "
                                             f"lines {lines[0]}-{lines[1]} (strongest match {top:.4g})")
    return best


# A span whose own file's edits hold under this share of what a read of the file holds names no
# writer of its lines: it takes in up to MAX_WIDEN_LINES a side until one edit holds as much of the
# wider span as the file's reads do (`widen_for_writer`).
WRITER_WIDEN_SHARE: Final = 0.95


def widen_for_writer(res: R, attributed: Callable[[R], bool | None], ask: Callable[[int, int], R],
                     start: int, end: int, last: int, trace: Trace | None = None, first_step: int = 1) -> R:
    """The answer for lines `start`-`end` (`res`), or for the span with a line more above and
    below, up to MAX_WIDEN_LINES a side (`ask(a, b)`), when no edit of the span's file holds it
    as well as the file's reads do (`attributed(res)` False; None: nothing of the file matched):
    the first wider span where one does; `res` when none does. `first_step`: the fewest lines a
    side to take in (`res` may be for a span `widen_for_evidence` widened already: never narrower).

    A person's renames leave a 5-line span few k-grams (short lines keep none), and those it keeps
    are the common ones every read of the file holds: the writer's edit held no more than
    each of a dozen reads and fell under the floor, or was not among the matches at all, and the
    most recent reader came first. The lines around the span are the writer's too, more often than
    not: with them, its edit holds as much as the reads do."""
    if attributed(res) is not False:
        return res
    tried = (max(1, start - first_step + 1), min(last, end + first_step - 1))
    for step in range(first_step, MAX_WIDEN_LINES + 1):
        a, b = max(1, start - step), min(last, end + step)
        if (a, b) == tried:
            break
        tried = (a, b)
        wide = ask(a, b)
        if attributed(wide):
            if trace is not None:
                trace.note("widen_for_writer", f"no edit held the span as well as a read of its file: answered "
                                               f"for lines {a}-{b}, where one does")
            return wide
    if trace is not None:
        trace.note("widen_for_writer", f"no edit held the span as well as a read of its file, nor up to "
                                       f"{MAX_WIDEN_LINES} lines wider a side: kept")
    return res


def attributed(items: Iterable[tuple[Hit, Fragment | None]], file: str, start: int, end: int) -> bool | None:
    """Does an edit of `file` match lines `start`-`end` directly as strongly as anything of `file`
    does (WRITER_WIDEN_SHARE), or hold a line of them it changed (`changes_lines`), directly or
    reached through lineage? None when nothing of `file` matches them directly
    (`widen_for_evidence` answers for such a span).

    An edit in the answer that changed a line of the span names its writer, however a read of the
    file compares: widening it took in a neighbour another session wrote, and a resumed session's
    one-line edit fell behind the original's whole-file Write (tests/test_session_identity.py)."""
    best = best_edit = 0.0
    changed = False
    for h, fr in items:
        if h.via == "direct" and fr is not None and fr.kind in CODE and fr.file == file:
            best = max(best, h.confidence)
            if fr.kind == EDIT:
                best_edit = max(best_edit, h.confidence)
                changed = changed or changes_lines(fr, file, start, end)
        elif h.via == "lineage" and fr is not None and fr.kind == EDIT and fr.file == file:
            changed = True  # lines a later edit carried, traced to the edit that wrote them
    if best <= 0.0:
        return None
    return changed or best_edit >= WRITER_WIDEN_SHARE * best


def changes_lines(fr: Fragment, file: str, start: int, end: int) -> bool:
    """Is `fr` an edit of `file` whose added or changed lines (its hunk's range, in the edit's
    own line numbers) take in a line of `start`-`end`?"""
    return (fr.kind == EDIT and fr.file == file and fr.line0 is not None and fr.line1 is not None
            and fr.line0 <= end and fr.line1 >= start and fr.line0 <= fr.line1)


def edit_on_lines(edits: Iterable[tuple[float, Fragment | None]], file: str, start: int, end: int) -> float:
    """The strongest of `edits` (confidence, fragment: a session's edits the answer holds that
    session's evidence of, under the floor or not) that changed a line of `start`-`end` of `file`
    (`changes_lines`): evidence of the span in its own file. A resumed session's one-line Edit
    held 0.71 of its 3-line span, under the floor its own tool call (0.9) set: judged on what
    passed the floor, the span had no evidence in its file, took in a line above, and the
    original session's Write came first (tests/test_session_identity.py)."""
    return max((c for c, fr in edits if fr is not None and changes_lines(fr, file, start, end)), default=0.0)


def strongest(hits: Iterable[Hit]) -> float:
    """A span's own evidence: its strongest direct match or agent link (lineage and tombstones
    are reached through those, or are about deleted text)."""
    return max((h.confidence for h in hits if h.via in ("direct", "agent_link")), default=0.0)


def strongest_in_file(items: Iterable[tuple[Hit, Fragment | None]], file: str) -> float:
    """A span's own evidence in its own file: its strongest direct match by an edit, a read or
    carried lines of `file`, or an agent link (what `widen_for_evidence` weighs). Weighed over
    every match, a span whose renamed lines kept a few k-grams that another file's edit held at
    0.44 was not widened, nothing of its own file passed the floor, and that other session was the
    whole answer (savekirk/session-bridge, `src/test/checkpoints/transcript.test.ts`)."""
    return max((h.confidence for h, fr in items if h.via == "agent_link" or (
        h.via == "direct" and fr is not None and fr.kind in CODE and fr.file == file)), default=0.0)


# --------------------------------------------------------------------------- direct matches


# A tool call weighs 0.9: under an edit or a read of the same text, as the specification has it,
# but close enough that the call of a writer's edit (a Write's content, an Edit's new string, a
# patch's code) still passes the floor beside its edit when a later reader holds a little more
# of the span. At 0.85 it fell under whenever the span had changed since: the writer was left
# one touch, tied with every reader, and came after them, being the oldest (bench/README.md,
# "A tool call's weight": R@1 over every mutation up on 8 of 10 repositories, down on none).
# The lines an edit held without changing them (`code.carried`: a patch's context, what a
# whole-file Write kept) weigh what the edit's call holding them weighs: at most a read's, and
# never more than the call that carried them already did (a Write's call holds the whole file).
KIND_WEIGHT: Final = {KIND_NO[E.CODE_EDIT]: 1.0, KIND_NO[E.CODE_READ]: 1.0, KIND_NO[E.TOOL_CALL]: 0.9,
                      KIND_NO[E.MSG_OUT]: 0.7, KIND_NO[E.MSG_IN]: 0.7, KIND_NO[E.TOOL_RESULT]: 0.6,
                      KIND_NO[E.SPAN_LINK]: 1.0, KIND_NO[CODE_CARRIED]: 0.9}
OTHER_WEIGHT: Final = 0.6  # any other kind, and a fragment missing from the index
MIN_WEIGHT: Final = min(OTHER_WEIGHT, *KIND_WEIGHT.values())
MIN_CONFIDENCE_DIRECT: Final = 0.2  # a fragment weaker than this is not a touch
# An edit holding at least this share of a span may be kept with its session's other edits of
# the file (`joined_edits`), though under the floor alone: one that would be a touch on its own.
# (bench/provenance.py, as the only tier: 0.1 shows the writer's edit in 6 more of 2,290
# queries, 0.3 in 1 fewer, every other figure the same; 0.05 for every span weighed more
# candidates in every query, p50 +0.3 ms on the 1 GB store's spans.)
JOIN_MIN_SHARE: Final = MIN_CONFIDENCE_DIRECT
# ... and when no edit passes at all (the span is held only by reads, messages or tool calls),
# an edit holding this share: a long span, a whole file, is written in many small edits. Only
# then are the fragments under the candidate bar weighed (bench/provenance.py: the writer's edit
# shown in 2,284 of 2,290 queries, against 2,275 with one tier; every other figure the same).
JOIN_MIN_SHARE_NO_EDIT: Final = 0.05
# ... nor one weaker than this share of the best fragment: chosen with bench/provenance.py, where
# 0.35 let sessions with many weak matches (shared test boilerplate) outvote the writer (k=4,
# w=3: precision 0.865 at 0.35; with 0.8, pres 0.983, e20s 0.939, e30s 0.889, precision 0.972:
# bench/README.md, "Floor only" and "Failure patterns seen in explain", 2).
RELATIVE_FLOOR: Final = 0.8
# A span with at least this many searchable winnowed fingerprints looks up only those: the ones a
# tape of the same text holds wherever a winnowing window lies inside the span. That halves the
# posting rows a 20-line span reads (warm explain at 1 GB: 0.98 → 0.80 ms). Shorter spans look up
# every k-gram: edited, they keep the writer found through k-grams the tape's windows happened to
# pick (bench/provenance.py, 3-line spans edited 20% on every line: R@1 0.82 with every k-gram,
# 0.73 with the winnowed ones only; from 24 on, every figure there is unchanged).
WINNOWED_ONLY_FROM: Final = 24
# At most this many fragments are weighed, the most matched first: a bound on a query's work (the
# kinds of the candidates are read from the index), set in the first version and not measured.
# It bites on common code in a large store: 17 of the 1,200 queries of `bench/rankings.py sample
# --edited` on a 1 GB bench/gen_sessions.py corpus (`candidate_cap`), none of the shipped ones.
MAX_CANDIDATES: Final = 2000


def expected_count(winnowed_searched: int, searched: int) -> int:
    """How many of the searched fingerprints a tape holding the span's text is sure to hold: its
    winnowed ones. When the stop-list dropped every one of those (a short span of common code,
    `let timer = null;` twice), nothing is sure; then all `searched` k-grams count, so one shared
    k-gram is a weak match rather than a whole one. Counting it whole let any session holding
    that k-gram in another file take the answer at 1.0 while the writer, whose text the winnowing
    had sampled elsewhere, held none of them; now such a span is answered as one with weak
    evidence of its own, by its neighbours (`widen_for_evidence`). On
    blackgirlbytes/planetfall-seed-signalkit pres 0.895 → 0.902, precision 0.962 → 0.966;
    entireio/cli sessions per answer 2.74 → 2.39; seven other sets unchanged (283a584)."""
    return winnowed_searched if winnowed_searched else max(1, searched)


def candidate_bar(best_share: float) -> float:
    """The least share a fragment needs to be considered at all: what could pass the floor as the
    weakest kind, or be joined as an edit. (Exact: skipping the others left `direct_hits`
    identical on 581 spans of the 1 GB store, 3e6d769.)"""
    return min(RELATIVE_FLOOR * MIN_WEIGHT * best_share, JOIN_MIN_SHARE)


def floor_of(best: float) -> float:
    """The weakest confidence kept when the strongest is `best` (RELATIVE_FLOOR of it, and
    MIN_CONFIDENCE_DIRECT scaled down for a weak best: an absolute floor loses the writer of an
    edited span, whose best match is itself low)."""
    return min(best, max(MIN_CONFIDENCE_DIRECT * min(1.0, best / 0.5), RELATIVE_FLOOR * best))


def joined_edits(db: apsw.Connection, file: str | None, below: dict[int, float], small: dict[int, float],
                 passing: list[int], expected: int, floor: float,
                 pairs: Callable[[set[int]], Iterable[tuple[int, int]]]) -> set[int]:
    """Edits kept though under the floor: those of the span's own `file` whose session's edits of
    it hold `floor` of the span together, in a session none of whose edits passes on its own.

    `below`: code.edit fragments under the floor → confidence (their share); `small`: fragments
    of any kind under the candidate bar → share, given when no edit passes (`passing` is empty);
    both in ascending id order. A member holds at least JOIN_MIN_SHARE, or JOIN_MIN_SHARE_NO_EDIT
    when no edit passes.

    A span written by two edits (a function, then the one added after it) is held whole only by
    what came later, typically a read of the file: alone, each edit falls under the floor, and
    the session that wrote the span was shown by its read only, or, when another session read the
    file, not at all. A session with an edit that passes is already shown writing the span, and
    edits of other files are weaker evidence: joining either let a session that wrote the same
    3 lines of test boilerplate elsewhere outrank the span's writer on touches
    (bench/provenance.py: the writer's edit shown in 0.989 → 0.993 of the shipped queries that
    return the writer, every other figure unchanged, 07a8f93). Each kept edit keeps its own
    confidence. `pairs(frags)`: the (key, fragment) postings of the span's searched fingerprints
    that these fragments hold."""
    least = JOIN_MIN_SHARE if passing else JOIN_MIN_SHARE_NO_EDIT
    members = {f: c for f, c in [*below.items(), *small.items()] if c >= least}
    if len(members) < 2 or file is None or sum(members.values()) < floor:
        return set()  # (no group can hold more than the sum of its members)
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    writing: set[tuple[str, str]] = set()
    for fid, kind, harness, session, same_file in db.execute(
            "SELECT f.id, f.kind, t.harness, t.session_id, f.file = (SELECT id FROM files WHERE path = ?)"
            " FROM fragments f JOIN tapes t ON t.no = f.tape WHERE f.id IN carray(?) ORDER BY f.id",
            (file, int_array([*members, *passing]))):
        if fid not in members:
            writing.add((harness, session))
        elif same_file and kind == EDIT:
            found[(harness, session)].append(fid)
    groups = {g: group for g, group in found.items() if len(group) > 1 and g not in writing}
    if not groups:
        return set()
    held: dict[int, set[int]] = defaultdict(set)
    for key, frag in pairs({f for group in groups.values() for f in group}):
        held[frag].add(key)
    joined: set[int] = set()
    for group in groups.values():
        together = set().union(*(held[f] for f in group))
        if min(1.0, len(together) / expected) * KIND_WEIGHT[EDIT] >= floor:
            joined.update(group)
    return joined


def own_file_edits(db: apsw.Connection, file: str | None, frags: Iterable[int]) -> list[int]:
    """Of these fragments, the code.edit fragments of the span's own `file`, ascending: those whose
    share of the span is also counted on its stop-listed fingerprints (`own_file_share`)."""
    ids = sorted(set(frags))
    if file is None or not ids:
        return []
    return [r[0] for r in db.execute(
        f"SELECT id FROM fragments WHERE id IN carray(?) AND kind = {EDIT}"
        " AND file = (SELECT id FROM files WHERE path = ?) ORDER BY id", (int_array(ids), file))]


def own_file_unheld(db: apsw.Connection, file: str | None, ratios: Iterable[tuple[int, float]]) -> bool:
    """Whether no code.edit of the span's own `file` holds WEAK_EVIDENCE of its searched
    fingerprints (`ratios`: fragment → its count over the expected one): only then are its edits
    counted on the stop-listed ones too (`own_file_share`). Counting them whenever some were
    stop-listed made later edits of a test file full of repeated table rows writers of rows they
    did not write, and the latest came first (entireio/git-sync planner_test.go,
    bootstrap_test.go: regular spans 0.967 → 0.933)."""
    strong = [f for f, r in ratios if r >= WEAK_EVIDENCE]
    return file is not None and not own_file_edits(db, file, strong)


def own_file_share(searched_count: int, expected: int, all_count: int, expected_all: int) -> float:
    """The share of the span an edit of its own file holds: the better of its share of the
    searched fingerprints and of all of them, stop-listed ones included (`expected_all`: the
    count a tape of the span's text holds when nothing is stop-listed).

    The stop-list drops what more than a tenth of the tapes hold; on a file that many sessions
    read, that is the file's own text, and the edit that wrote a span of it held nothing searched
    (entireio/git-sync, 99 sessions: stats.go and auth.go, read by 16-38 sessions each, written
    by one Write; the writer was not in the answer on 24 of 240 queries of carried spans). An
    edit of the span's own file holding those fingerprints is the evidence the stop-list is not
    about (boilerplate shared across files), and there are few such edits to look up."""
    return min(1.0, max(searched_count / expected, all_count / max(1, expected_all)))


def line_count(text: str) -> int:
    """How many lines `text` spans (a last line without its newline counts)."""
    return text.count("\n") + (not text.endswith("\n"))


class Writes:
    """For each session with a code.edit of the span's own file in the direct answer, the hunks of
    one of its edits that hold the span between them: (harness, session id) → (their share of the
    span's searched fingerprints, as an edit's confidence; the edit's time; how many hunks). What
    the writer test reads beside each single fragment (`writer_edits`); filled by
    `direct.direct_hits` through `session_writes`."""

    def __init__(self, wanted: Iterable[tuple[str, str]] = (), carried: bool = False) -> None:
        self.by_session: dict[tuple[str, str], tuple[float, str, int]] = {}
        self.wanted = set(wanted)  # sessions measured whatever the answer holds of them
        self.carried = carried  # with the lines each edit kept (code.carried): what it had in hand there
        # Every code.edit among the direct candidates, passing the floor or not → its confidence
        # (`direct.direct_hits`): what `edit_on_lines` reads of edits a stronger match set the floor for.
        self.edits: dict[int, float] = {}
        # The code.edit fragments that landed on another copy of the span in its file, leaving the
        # span as it was (`landed_elsewhere`): no writing of it.
        self.elsewhere: set[int] = set()


def session_writes(db: apsw.Connection, file: str | None, answer_edits: Iterable[int], expected: int,
                   lines: int, pairs: Callable[[set[int]], Iterable[tuple[int, int]]],
                   writes: Writes | None) -> None:
    """Fill `writes` for the sessions with a code.edit of `file` among `answer_edits` (the direct
    answer's edits): for each, the best group of hunks of one of its edits of `file` that a window
    of `lines` lines (the span's) reaches, in the edit's own line numbers, counted together
    (`pairs(frags)`: the (key, fragment) postings of the span's searched fingerprints these
    fragments hold; `expected`: the count a share is of). Hunks that hold any of the span count,
    however little: a line or two of it under the candidate bar is what completes it.

    A patch that re-indents a block is cut by the line diff into hunks around a line it kept (a
    closing tag at its old indentation): each hunk's fragment holds part of a span across them
    (0.85 and 0.12), neither passed the writer test alone, and an earlier whole-file Write holding
    all of it came first (issue 45, savekirk/session-bridge). Taking every hunk of the edit, or
    of the session, together made carriers writers: a patch of 55 hunks across a stylesheet held
    the tokens of any 5 of its lines somewhere (carried R@1 there 0.867 → 0.829 / 0.842)."""
    if writes is None or file is None:
        return
    ids = sorted(set(answer_edits))
    if len(ids) < 2 and not writes.wanted:
        return  # one edit: nothing to rank it against
    tapes = {no: (harness, session) for no, harness, session in db.execute(
        "SELECT DISTINCT o.no, o.harness, o.session_id FROM fragments f JOIN tapes t ON t.no = f.tape"
        " JOIN tapes o ON o.session_id = t.session_id AND o.harness = t.harness"
        f" WHERE f.id IN carray(?) AND f.kind = {EDIT} AND f.file = (SELECT id FROM files WHERE path = ?)",
        (int_array(ids), file))} if ids else {}
    for harness, session in writes.wanted:
        tapes.update((no, (harness, session)) for (no,) in db.execute(
            "SELECT no FROM tapes WHERE session_id = ? AND harness = ?", (session, harness)))
    if len(set(tapes.values())) < 2 and not writes.wanted:
        return  # one session's edits: nobody to rank it against
    hunks: dict[int, tuple[int, int, int | None, int | None, str]] = {}  # id → (tape, offset, line0, line1, ts)
    if not tapes:
        return
    kinds = f"{EDIT}, {KIND_NO[CODE_CARRIED]}" if writes.carried else f"{EDIT}"
    for fid, tape, offset, line0, line1, ts in db.execute(
            f"SELECT id, tape, offset, line0, line1, ts FROM fragments WHERE tape IN carray(?) AND kind IN ({kinds})"
            " AND file = (SELECT id FROM files WHERE path = ?)", (int_array(sorted(tapes)), file)):
        hunks[fid] = (tape, offset, line0, line1, ts or "")
    held: dict[int, set[int]] = defaultdict(set)
    for key, frag in pairs(set(hunks)):
        held[frag].add(key)
    edits: dict[tuple[int, int], list[int]] = defaultdict(list)
    for fid in held:
        edits[hunks[fid][:2]].append(fid)
    for (tape, _), group in edits.items():
        keys, n = _best_window(group, hunks, held, lines)
        who, share = tapes[tape], min(1.0, len(keys) / expected) * KIND_WEIGHT[EDIT]
        if share > writes.by_session.get(who, (0.0, "", 0))[0]:
            writes.by_session[who] = (share, hunks[group[0]][4], n)


def _best_window(group: list[int], hunks: dict[int, tuple[int, int, int | None, int | None, str]],
                 held: dict[int, set[int]], lines: int) -> tuple[set[int], int]:
    """The keys held by hunks of one edit (`group`) next to each other (at most KEPT_BETWEEN lines
    kept between two) that one window of `lines` lines reaches, for the window holding most, and
    how many of those hunks hold keys none of the others does (a hunk without a range is alone)."""
    placed = sorted((hunks[f][2], hunks[f][3], f) for f in group if hunks[f][2] is not None and hunks[f][3] is not None)
    windows = [[f] for f in group if hunks[f][2] is None or hunks[f][3] is None]
    for i, (_, reach, first) in enumerate(placed):
        members, end = [first], reach
        for line0, line1, f in placed[i + 1:]:
            if line0 - min(reach, line1) > lines - 1 or line0 - end - 1 > KEPT_BETWEEN:
                break  # (sorted by first line: every later hunk starts further off)
            members.append(f)
            reach, end = min(reach, line1), max(end, line1)
        windows.append(members)
    best = max(windows, key=lambda m: len(set().union(*(held[f] for f in m))))
    keys = set().union(*(held[f] for f in best))
    adding = sum(1 for f in best if held[f] - set().union(*(held[g] for g in best if g != f)))
    return keys, adding


def note_own_file(trace: Trace | None, edits: int, fingerprints: int) -> None:
    """`own_file_share` counted the stop-listed fingerprints of `edits` edits of the span's file."""
    if trace is not None and edits:
        trace.note("own_file_stop_listed", f"{plural(edits, 'edit')} of the span's file also counted on "
                                           f"{plural(fingerprints, 'stop-listed fingerprint')} they hold")


def note_lookup(trace: Trace | None, *, searched: int, winnowed: int, winnowed_only: bool, restored: int,
                all_kgrams: bool, expected: int) -> None:
    """What the lookup rules did to a direct match (`searched`: the searchable k-grams, `winnowed`
    the span's winnowed ones among them, `restored` the stop-listed ones looked up after all,
    `all_kgrams`: whether a share is of every searched k-gram (`expected_count`), `expected` the
    count a share is of); the same figures from either implementation.

    The stop-listed fingerprints are looked up after all when fewer than half of the span's
    searched winnowed ones have postings (engram.index.stoplist.restored, direct._restored in
    plain Python): a span edited on every line is mostly new k-grams, and what is left of the
    writer's text was never looked up when it was stop-listed. chikachow/cyspbot 0.984 / 0.852 /
    0.815 / 0.852 / 0.914 → 0.995 / 0.963 / 0.852 / 0.981 / 0.917; PackmindHub/context-evaluator
    lost one e30s query and 0.008 of precision (bench/README.md, "Stop-listed fingerprints looked
    up after all")."""
    if trace is None:
        return
    if winnowed_only:
        trace.note("winnowed_only", f"looked up the span's {winnowed} winnowed fingerprints only, not all "
                                    f"{searched} searchable k-grams (at least {WINNOWED_ONLY_FROM})")
    if restored:
        trace.note("stop_list_restored", f"{plural(restored, 'stop-listed fingerprint')} looked up after all: under half "
                                         "of the span's winnowed ones have postings")
    if all_kgrams:
        trace.note("expected_count", f"every winnowed fingerprint of the span is stop-listed: a share is of "
                                     f"all {expected} searched k-grams")


def note_scoring(trace: Trace | None, *, kinds: Iterable[int], cut: int, best: float, floor: float, kept: int,
                 joined: int) -> None:
    """What the scoring rules did to a direct match (`kinds`: the kinds of the fragments weighed,
    `cut` those left unweighed by the cap, `kept` those at or over the floor, `joined` those kept
    under it); the same figures from either implementation."""
    if trace is None:
        return
    by_kind = Counter(kinds)
    weighed = sum(by_kind.values())
    lower = {k: n for k, n in sorted(by_kind.items()) if KIND_WEIGHT.get(k, OTHER_WEIGHT) < 1.0}
    if lower:
        trace.note("kind_weight", f"{sum(lower.values())} of {plural(weighed, 'fragment')} weighed under an edit or a read: "
                   + ", ".join(f"{KIND_NAME.get(k, 'other')} ×{KIND_WEIGHT.get(k, OTHER_WEIGHT)} ({n})"
                               for k, n in lower.items()))
    if cut:
        trace.note("candidate_cap", f"{plural(cut, 'fragment')} matching least left unweighed (at most {MAX_CANDIDATES})")
    if weighed > kept:
        trace.note("floor_of", f"{weighed - kept} of {plural(weighed, 'fragment')} under the floor {floor:.4g} "
                               f"(strongest {best:.4g}) dropped")
    if joined:
        trace.note("joined_edits", f"{plural(joined, 'edit')} of the span's file kept under the floor: together, their "
                                   "session's edits hold the span")


# --------------------------------------------------------------------------- after the match


def reviewers(db: apsw.Connection, tapes: set[int], trace: Trace | None = None) -> set[int]:
    """The tapes among `tapes` (`tapes.no`) of reviewers that quote their parent session, while
    that session is in the store (`copies.quoting_reviews`): the match is made again without
    them, as they may have set the floor their parent fell under. On chikachow/cyspbot (51 of 80
    rollouts are Codex guardians) e20s 0.833 → 0.852, e30s 0.778 → 0.815, precision 0.887 → 0.914
    (rename 0.870 → 0.852); savekirk/session-bridge unchanged (bench/README.md, "Codex's automatic
    reviewers")."""
    found = quoting_reviews(db, tapes)
    if found and trace is not None:
        trace.note("reviewers", f"matched again without {plural(len(found), 'reviewer tape')} quoting a session in the store")
    return found


# Once the span's own file has a code match, another live file's match counts only if it is
# better than this many times the own file's best (`own_file_first`): the inverse of the
# relative floor, within whose band every match kept is as good as the best. At 1.0 (no better
# at all), edited test set-up matched in other modules a k-gram or two more than its writer's
# edit, and a reader of two of them outnumbered the writer on touches. 1.25 and 1.5 gave the
# same figures on eleven sets: none lower than at 1.0, R@1 higher on five (bench/README.md,
# "Another file's match"). As every direct match is within this band of the best, an own-file
# match that passes the floor leaves no other live file's; the margin decides only beside
# own-file edits kept under the floor by joining (`joined_edits`).
ELSEWHERE_MARGIN: Final = 1 / RELATIVE_FLOOR


def own_file_first(root: Path, file: str, direct: dict[int, float], frags: dict[int, Fragment],
                   trace: Trace | None = None) -> dict[int, float]:
    """`direct` without what matches the span (of `file`) only as text another file of the
    working tree holds (`root`: the working tree; `frags`: the rows of `direct`'s fragments).

    A short span (an import block, a guard clause, test set-up) reads alike in many files, and
    the sessions that read or wrote those files were returned beside the span's writer, often
    above it on touches: on entireio/cli, all 223 returned sessions that never touched the span
    matched it only in other files (bench/provenance.py; pres 0.890 → 0.905, precision 0.894 →
    0.927, no figure fell on seven sets: bench/README.md, "Another live file's copy of the
    span"). So once the span's own file has a code fragment, a code fragment of another file
    whose match is not clearly better (ELSEWHERE_MARGIN) is dropped; so are its session's tool
    calls and results (the calls that made those reads and edits) when theirs is not either and
    nothing else of the session is left. A file no longer in the tree is kept: it may be where
    the span lived before a rename."""
    own = [c for f, c in direct.items()
           if (fr := frags.get(f)) is not None and fr.kind in CODE and fr.file == file]
    if not own:
        return direct
    bar = max(own) * ELSEWHERE_MARGIN
    live: dict[str, bool] = {}

    def elsewhere(fr: Fragment) -> bool:
        if fr.kind not in CODE or fr.file is None or fr.file == file:
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
        if all(frags[g].kind in CALLS and direct[g] <= bar for g in rest[key]):
            drop.update(rest[key])
    if trace is not None:
        files = sorted({fr.file for f in drop if (fr := frags[f]).kind in CODE and fr.file})
        trace.note("own_file_first", f"{plural(len(drop), 'fragment')} dropped that match the span only as another live "
                                     f"file's text, no better than {ELSEWHERE_MARGIN:g}× the own file's best "
                                     f"{max(own):.4g}: {', '.join(files)}")
    return {f: c for f, c in direct.items() if f not in drop}


def follow_edge(src: int, confidence: float, agent_link: bool, holders: Holders | None, min_confidence: float,
                forensics: bool) -> tuple[str | None, str]:
    """How the lineage walk takes an edge into `src`: (its `via`, "") when it follows it, (None,
    the rule) when it does not.

    An agent link is always followed. A location-only edge (under the link threshold) only with
    `--forensics`; an edge under `min_confidence` not at all. An edge leads only to a fragment
    holding some of the span's searched fingerprints (`holders`): an edit that appended code to a
    file is linked to the file's earlier writers, who never held the span; on
    Ri5ha6h/tan-mapper-app two earlier writers of a file came back for most spans a later Write
    added. Precision there 0.900 → 0.912; 82 of the 93 sessions it left out of answers on four
    sets had not touched the span (5f2e683)."""
    if agent_link:
        return "agent_link", ""
    if confidence < LINK_THRESHOLD:
        return ("location_only", "") if forensics else (None, "lineage_location_only")
    if confidence < min_confidence:
        return None, "lineage_min_confidence"
    if holders is not None and src not in holders:
        return None, "lineage_holders"
    return "lineage", ""


def note_edges(trace: Trace | None, refused: Counter[str]) -> None:
    """The lineage edges not followed, by the rule that refused them."""
    if trace is None:
        return
    why = {"lineage_holders": "their source holds none of the span's searched fingerprints",
           "lineage_location_only": "location only (followed with --forensics)",
           "lineage_min_confidence": "under --min-confidence"}
    for rule, n in sorted(refused.items()):
        trace.note(rule, f"{plural(n, 'lineage edge')} not followed: {why[rule]}")


class Holders:
    """The fragments holding any of a span's searched fingerprints, however few: what a lineage
    walk may step back to (`follow_edge`). Filled by `direct.direct_hits`."""

    def __init__(self) -> None:
        self._ids: Any = ()  # as the lookup left them: a Counter, or an ascending numpy array

    def fill(self, ids: Any) -> None:
        self._ids = ids  # kept, not copied: a large span is held by many fragments

    def __contains__(self, frag: int) -> bool:
        if hasattr(self._ids, "searchsorted"):
            i = int(self._ids.searchsorted(frag))
            return i < len(self._ids) and int(self._ids[i]) == frag
        return frag in self._ids


def copies_to_drop(db: apsw.Connection, hits: Iterable[int], frags: dict[int, Fragment], subagents: bool,
                   checked: set[int], reviews: set[int], trace: Trace | None = None) -> set[int]:
    """The fragments among `hits` that a session holds only as a copy of a session it resumed
    (`copies.copies`), or of the one whose work it reviews (`quoting_reviews`, here reached along
    lineage); `subagents`: whether the store holds any subagent's tape; `checked`: tapes already
    asked about, `reviews` the reviewers among them. A session left without fragments leaves the
    answer.

    `claude --resume` starts a new session file holding every record of the one it resumes: both
    were answered with the same touches, the copy (more recent) first. On
    JanDeDobbeleer/oh-my-posh (7 groups of resumed sessions among 48) R@1 and precision went
    from 0.776 / 0.767 / 0.750 / 0.767 / 0.927 to 0.965 / 0.965 / 0.965 / 0.956 / 0.903 (with the
    bench's ground truth for resumed sessions; 654e5b4, 4c95035; bench/README.md, "Four more")."""
    if subagents:
        reviews = reviews | quoting_reviews(db, {fr.tape_no for fr in frags.values()} - checked)
    drop = {f for f, fr in frags.items() if fr.tape_no in reviews}
    by_review = len(drop)
    drop.update(copies(db, (Event(f, fr.session_id, fr.harness, fr.kind, fr.ts, fr.file, fr.line0, fr.line1)
                            for f in hits if f not in drop and (fr := frags.get(f)) is not None)))
    if drop and trace is not None:
        trace.note("drop_copies", f"{plural(len(drop) - by_review, 'fragment')} held only as a copy of a resumed "
                                  f"session's events, {by_review} of reviewers quoting their parent: left out")
    return drop


# --------------------------------------------------------------------------- the order of sessions


# `rank="evidence"` leaves out a session whose strongest match is under this share of the top
# session's: proposed with that order in bench/provenance.py's simulation of it (bench/README.md,
# "Failure patterns seen in explain"). With it `--rank evidence` meets every target on six sets
# where the default order misses pres on three; it costs cipher-box's R@3 0.988 → 0.975, where it
# leaves out sessions that did touch the span (bench/README.md, "`--rank evidence`").
EVIDENCE_SESSION_FLOOR: Final = 0.8


def order_sessions(sessions: list[dict[str, Any]], rank: str, file: str, trace: Trace | None = None,
                   writes: Writes | None = None,
                   context: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """`sessions` (each with its "touches", "last_touch" and "_items", its (Hit, Fragment) pairs)
    in rank order.

    "writer" (the default): the sessions whose code.edit changed the span's lines, latest first,
    then the others by touches (`_by_writer`). "touches" (the specification's): most touches first (engram.query.touches), then the most
    recent touch. A session that read the span in several files, or discussed it at length, can
    still come before the one that wrote it in one edit (bench/README.md). "evidence": the session
    with the strongest match first, then its strongest code.edit, then whether it read or edited
    the span's own file, then touches and recency; a session whose strongest match is under
    EVIDENCE_SESSION_FLOOR of the top one's is left out."""
    note_reads(trace, sessions)
    if rank == "evidence":
        return _by_evidence(sessions, file, trace)
    if rank == "writer":
        return _by_writer(sessions, file, trace, writes, context)
    return _by_touches(sessions, trace)


def _by_touches(sessions: list[dict[str, Any]], trace: Trace | None) -> list[dict[str, Any]]:
    sessions.sort(key=lambda s: (-s["touches"], _neg_time(s["last_touch"]), s["session_id"]))
    if trace is not None and len(sessions) > 1:
        ties = sum(1 for a, b in zip(sessions, sessions[1:]) if a["touches"] == b["touches"])
        trace.note("by_touches", f"{len(sessions)} sessions by touches ({', '.join(str(s['touches']) for s in sessions)})"
                                 f"{'; ' + plural(ties, 'tie') + ' broken by the most recent touch' if ties else ''}")
    return sessions


def note_reads(trace: Trace | None, sessions: list[dict[str, Any]]) -> None:
    """Where a session's reads of one file counted as one touch (engram.query.touches: on
    ShamsiievDmytro/entire-bmad R@1 0.640 → 0.994 on unmutated spans, bench/README.md, "A file's
    reads are one touch")."""
    if trace is None:
        return
    reads = files = 0
    for s in sessions:
        read = [fr.file for _, fr in s["_items"] if fr.kind == _READ and fr.file is not None]
        if len(read) > len(set(read)):
            reads, files = reads + len(read), files + len(set(read))
    if reads:
        trace.note("reads_once", f"{plural(reads, 'read')} of {plural(files, 'file')} counted as {plural(files, 'touch')}")


# A session wrote the span when one of its code.edit fragments matches it directly with at least
# this share of the strongest such match. Lower, a session that wrote similar lines elsewhere in
# the file (test boilerplate) passed as a writer and, being later, came first (bench/provenance.py
# --multi, tuned on spotter, session-bridge, m-claude and agentv: carried-span R@1 at 0.5 / 0.8 /
# 0.95: spotter 0.850 / 0.850 / 0.900, session-bridge 0.767 / – / 0.867, the others equal; the
# held-out sets are in bench/README.md, "Multi-session sets").
WRITER_FLOOR: Final = 0.95
# ... and several hunks of one edit taken together this share: the k-grams that cross a line the
# edit kept between them belong to no fragment, so two hunks around one kept line hold at most
# ~0.88 of a 5-line span that they wrote but for that line (issue 45, savekirk/session-bridge).
WRITER_TOGETHER_FLOOR: Final = 0.8
# ... when at most this many lines are kept between two of them: with more, the hunks are
# separate changes, and a carrier's patch that changed test set-up around a span held its
# boilerplate in two nearby hunks (session-bridge, sessionDetailsPanel.test.ts: 3 lines apart).
KEPT_BETWEEN: Final = 1


def writer_edits(s: dict[str, Any], file: str, writes: Writes | None = None) -> list[tuple[float, str, float]]:
    """(confidence, time, the share of the strongest write it needs) of each code.edit of session
    `s` that matches the span directly: what it changed there, not lines it only held (those are
    code.carried) and not text it wrote that a later edit replaced (that comes by lineage); and,
    for a session with such an edit, its edits of the file taken together (`writes`,
    `session_writes`), which pass at WRITER_TOGETHER_FLOOR when there are several."""
    away = writes.elsewhere if writes is not None else set()
    own = [(h.confidence, fr.ts or "", WRITER_FLOOR) for h, fr in _direct_edits(s, file) if fr.id not in away]
    if own and writes is not None and not any(fr.id in away for _, fr in s["_items"]) \
            and (together := writes.by_session.get((s["harness"], s["session_id"]))):
        share, ts, n = together
        own.append((share, ts, WRITER_TOGETHER_FLOOR if n > 1 else WRITER_FLOOR))
    return own


def _direct_edits(s: dict[str, Any], file: str) -> list[tuple[Hit, Fragment]]:
    """Session `s`'s code.edit fragments of `file` that match the span directly."""
    return [(h, fr) for h, fr in s["_items"] if fr.kind == EDIT and h.via == "direct" and fr.file == file]


def latest_writes(sessions: list[dict[str, Any]], file: str, writes: Writes | None = None) -> dict[int, str]:
    """The sessions among `sessions` that changed the span's lines (`writer_edits` at least
    WRITER_FLOOR of the strongest such edit, or WRITER_TOGETHER_FLOOR for several edits taken
    together), keyed by `id(session)`, each with the time of its latest such change."""
    edits = {id(s): writer_edits(s, file, writes) for s in sessions}
    top = max((c for e in edits.values() for c, _, _ in e), default=0.0)
    if top <= 0.0:
        return {}
    last = {k: max((t for c, t, floor in e if c >= floor * top), default=None) for k, e in edits.items()}
    return {k: t for k, t in last.items() if t is not None}


def _by_writer(sessions: list[dict[str, Any]], file: str, trace: Trace | None, writes: Writes | None = None,
               context: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """The sessions that changed the span's lines first, the latest change first (as git blame
    names the last commit to change a line), then every other session by touches. A session's
    reads, its discussion and the lines it carried in a later edit add touches, and the most
    recent of equals won: a carrier came before the writer (issue 45's measurements)."""
    last = latest_writes(sessions, file, writes)
    if not last:
        return _by_touches(sessions, trace)
    writers = [s for s in sessions if id(s) in last]
    elsewhere = _written_elsewhere(writers, context)
    writers.sort(key=lambda s: (id(s) in elsewhere, _neg_time(last[id(s)]), s["session_id"]))
    others = _by_touches([s for s in sessions if id(s) not in last], None)
    if trace is not None and len(sessions) > 1:
        trace.note("writer_first", f"{plural(len(writers), 'session')} changed these lines (latest first: "
                   f"{', '.join(s['session_id'][:8] for s in writers)}); {plural(len(others), 'other')} by touches")
        _note_together(trace, writers, file, writes)
        _note_landed(trace, sessions, writes)
        if elsewhere:
            trace.note("writer_context", f"{plural(len(elsewhere), 'writer')} whose edits hold little of the "
                       f"{WRITER_CONTEXT_LINES} lines around the span after the others: "
                       + ", ".join(s["session_id"][:8] for s in writers if id(s) in elsewhere))
    return writers + others


# A writer whose edits hold under WRITER_CONTEXT_FLOOR of what the best writer's hold of the span
# with this many lines more a side (its hunks and the lines it kept there, taken together as
# `session_writes` does) wrote the same lines elsewhere in the file (test set-up, a
# guard clause repeated): it comes after the other writers (`writer_context`).
WRITER_CONTEXT_LINES: Final = 3
WRITER_CONTEXT_FLOOR: Final = RELATIVE_FLOOR


def _written_elsewhere(writers: list[dict[str, Any]], context: dict[tuple[str, str], float] | None) -> set[int]:
    """`id` of the writers whose edits hold little of the lines around the span (`context`:
    (harness, session id) → the strongest of its edits there), when another's hold them."""
    if not context or len(writers) < 2:
        return set()
    held = {id(s): context.get((s["harness"], s["session_id"]), 0.0) for s in writers}
    top = max(held.values())
    if top <= 0.0:
        return set()
    return {k for k, c in held.items() if c < WRITER_CONTEXT_FLOOR * top}


def landed_elsewhere(sessions: list[dict[str, Any]], file: str, start: int, end: int, writes: Writes,
                     holds_there: Callable[[Fragment], bool]) -> set[int]:
    """The edits of the latest writer of lines `start`-`end` of `file` (`latest_writes`) that passed
    the writer test, when each landed elsewhere in the file: its range (its own line numbers)
    misses the span, and the file's lines there still hold what the edit holds of the span while
    the edit held the span's own lines unchanged (`holds_there(fragment)`). Such an edit added a
    copy of the span's text there and left the span itself as it was; set aside
    (`Writes.elsewhere`), it is no writing of the span, and the writer test is taken again without
    it. Nothing is set aside when that leaves no writer (somebody wrote the span) or only later
    ones (a copy is made of what was there before it: a later edit holding the span means the
    file moved under the first one's range), nor when the latest writer passed only on its hunks
    taken together.

    A later session that put a copy of a block elsewhere in the file (a new job made of another
    job's checks and their neighbours) held the original as fully as its writer's edit did, and
    around it too (`writer_context`), and came first as the latest writer; where the copy's
    lines differ by a k-gram, it was the only writer (issue 45, EntityProcess/agentv,
    `.github/workflows/publish.yml`: carried R@1 0 → 11 of 12 queries; bench/README.md,
    "Multi-session: the writer first"). Only the latest writer is judged: the file has moved least
    since its edit, while an older edit's range may lie over a later copy."""
    last = latest_writes(sessions, file, writes)
    if not last:
        return set()
    latest = min((s for s in sessions if id(s) in last), key=lambda s: (_neg_time(last[id(s)]), s["session_id"]))
    top = max(c for s in sessions if id(s) in last for c, _, _ in writer_edits(s, file, writes))
    edits = [fr for h, fr in _direct_edits(latest, file) if h.confidence >= WRITER_FLOOR * top]
    if not edits or not all(fr.line0 is not None and fr.line1 is not None and (fr.line1 < start or fr.line0 > end)
                            and holds_there(fr) for fr in edits):
        return set()
    before, writes.elsewhere = writes.elsewhere, writes.elsewhere | {fr.id for fr in edits}
    left = latest_writes(sessions, file, writes)
    writes.elsewhere = before
    made = min(fr.ts or "" for fr in edits)
    return {fr.id for fr in edits} if left and max(left.values()) < made else set()


def _note_landed(trace: Trace, sessions: list[dict[str, Any]], writes: Writes | None) -> None:
    """The sessions whose edits `landed_elsewhere` set aside."""
    away = writes.elsewhere if writes is not None else set()
    who = [s["session_id"][:8] for s in sessions if any(fr.id in away for _, fr in s["_items"])]
    if who:
        trace.note("writer_landed", f"{plural(len(away), 'edit')} of {', '.join(who)} holding the span landed on "
                                    "another copy of it in the file, the span's lines kept: not its writing")


def _note_together(trace: Trace, writers: list[dict[str, Any]], file: str, writes: Writes | None) -> None:
    """The writers that passed only on their edits of the file taken together (`writer_edits`)."""
    if writes is None:
        return
    top = max(c for s in writers for c, _, _ in writer_edits(s, file, writes))  # (the top session is a writer)
    for s in writers:
        best = max((h.confidence for h, fr in _direct_edits(s, file) if fr.id not in writes.elsewhere), default=0.0)
        if best < WRITER_FLOOR * top and (together := writes.by_session.get((s["harness"], s["session_id"]))):
            trace.note("writer_together", f"{s['session_id'][:8]}: hunks of one of its edits hold {together[0]:.4g} of the "
                                          f"span together (its best single edit {best:.4g})")


def _by_evidence(sessions: list[dict[str, Any]], file: str, trace: Trace | None) -> list[dict[str, Any]]:
    best = {id(s): max(h.confidence for h, _ in s["_items"]) for s in sessions}

    def key(s: dict[str, Any]) -> tuple[Any, ...]:
        items = s["_items"]
        best_edit = max((h.confidence for h, fr in items if fr.kind == EDIT), default=0.0)
        own = any(fr.kind in CODE and fr.file == file for _, fr in items)
        return (-best[id(s)], -best_edit, not own, -s["touches"], _neg_time(s["last_touch"]), s["session_id"])

    top = max(best.values(), default=0.0)
    kept = sorted((s for s in sessions if best[id(s)] >= EVIDENCE_SESSION_FLOOR * top), key=key)
    if trace is not None and sessions:
        left = len(sessions) - len(kept)
        trace.note("by_evidence", f"{len(kept)} session(s) by strongest match (top {top:.4g})"
                   + (f"; {left} left out under {EVIDENCE_SESSION_FLOOR} of it" if left else ""))
    return kept


def _neg_time(ts: str | None) -> tuple[int, ...]:
    return tuple(-ord(c) for c in (ts or ""))
