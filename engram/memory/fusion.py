"""Hybrid recall's query processing and fusion: one ranking out of BM25, dense and anchor channels.

`fts_query` turns any text a person or agent types into a safe FTS5 MATCH string: the OR of its
non-stopword terms, each quoted, so punctuation, FTS5 operators (AND, NEAR, `*`, `:`, `^`) and
unbalanced quotes are plain words and a query is never a syntax error. Question words are
stopwords too ("what did we decide about X" is about X).

`fuse` merges the channels by a **min-max normalised weighted sum**: each channel's scores are
mapped onto 0..1 over the memories it returned (its best 1, its last 0, a memory it did not return
0), multiplied by the channel's weight and added up. A channel given without scores (the anchor
channel: memories on or near the code asked about) is scored by rank the same way. The issue asked
for weighted reciprocal rank fusion; both were measured on LoCoMo in the same run (bench/locomo.py;
tables in bench/README.md, "locomo.py"), settings chosen on conv-26, conv-30 and conv-41, and
checked on conv-42 and conv-43 (turn level: Hit@1 / Hit@5 / MRR):

                                          tuning (383 questions)   held out (377)
    BM25 alone                            0.358  0.585  0.466      0.340  0.576  0.452
    dense alone                           0.198  0.431  0.308      0.212  0.485  0.332
    RRF, k = 60, equal weights            0.287  0.554  0.412      0.316  0.581  0.435
    weighted RRF, k = 5, dense 0.7        0.319  0.629  0.460      0.342  0.610  0.469
    normalised sum, dense 0.5             0.373  0.634  0.498      0.369  0.618  0.492

(the weighted RRF row is the best Hit@5 of k in 5, 10, 20, 60 and dense weight 0.3 to 1.0; its
best MRR, k = 5 and dense 0.3, was 0.479 at Hit@5 0.598). At Hit@5 the two are close; the sum wins
at the top, Hit@1 and MRR, on both halves. Reciprocal rank throws the scores away: a BM25 list
whose first memory matches every rare term of the query and whose second matches one common word
gives them nearly the same credit, so the dense channel's near misses outvote BM25's clear wins
(plain RRF is *below* BM25 alone). The normalised sum keeps how far ahead a channel's best are.

Weights (`DEFAULT_WEIGHTS`): BM25 1.0, dense 0.5 (dense 0.3 to 0.7 were within 0.01 of each other
on the tuning half). The anchor channel's weight (1.0) is not measured by LoCoMo (its memories
have no anchors): a memory anchored on the code being asked about is as strong a sign as the best
word match.

`query_period` and `time_closeness`: a question that names a date ("on 3 June, 2023", "in March
2023") asks about memories written then; recall adds TIME_WEIGHT times a fused memory's closeness
in time (by its `created` date) to its score (`time_bonus`). On LoCoMo it lifted the dated questions'
Hit@5 from 0.56 to 0.84 (32 tuning questions) and from 0.45 to 0.65 (51 held out), +0.02 to +0.03
overall; weights 0.25 to 2 and half-lives 3 to 30 days were within 0.02 of each other. A query
naming one day weighs its date more (TIME_WEIGHT_DAY) than one naming a month or a year.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

#: Weights of the channels recall uses (see the module docstring for how they were chosen).
DEFAULT_WEIGHTS: dict[str, float] = {"bm25": 1.0, "dense": 0.5, "anchor": 1.0}
#: At most this many distinct terms reach FTS5: a pasted page as a query stays cheap.
MAX_TERMS = 64

# English function words and question words: they match nearly every memory and say nothing about
# which one is asked for ("what did we decide about X" is about X). Measured on LoCoMo's tuning
# half: keeping negations, "before"/"after" or a few more verbs out of the list moved Hit@5 by
# less than 0.005 either way, so the list stays the plain one.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each else few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me might more most must my myself no nor not of off on once only or other our ours
ourselves out over own same shall she should so some such than that the their theirs them
themselves then there these they this those through to too under until up upon very was we were
what when where which while who whom whose why will with would you your yours yourself
yourselves s t d ll m re ve don didn doesn isn wasn weren hasn haven hadn won wouldn shouldn
""".split())

_WORD = re.compile(r"\w+")


def query_terms(text: str) -> list[str]:
    """The distinct lower-cased words of `text` that are not stopwords, in order (all of them when
    every word is a stopword, so "what is this?" still asks for something)."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in STOPWORDS]
    return (kept or words)[:MAX_TERMS]


def fts_query(text: str) -> str:
    """A safe FTS5 MATCH string for `text`: its terms, each quoted, joined by OR.

    "" when `text` has no word at all: the caller skips the BM25 channel (FTS5 rejects an empty
    MATCH).
    """
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in query_terms(text))


@dataclass(frozen=True)
class FusedHit:
    """One memory in the fused ranking, with what each channel gave it (for `recall --debug`)."""

    id: str
    score: float
    ranks: dict[str, int | None]  # channel -> 1-based rank, None when the channel did not return it
    contributions: dict[str, float] = field(default_factory=dict)  # channel -> weight * normalised score


def _normalised(ids: Sequence[str], scores: Sequence[float] | None) -> dict[str, float]:
    """id -> 0..1: min-max over the channel's list (by rank, best first, when it has no scores)."""
    if scores is None:
        scores = [-float(r) for r in range(len(ids))]
    if len(scores) != len(ids):
        raise ValueError(f"{len(ids)} ids but {len(scores)} scores")
    finite = [s for s in scores if math.isfinite(s)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    out: dict[str, float] = {}
    for i, s in zip(ids, scores, strict=True):
        if i in out:
            continue  # a channel lists a memory once; a repeat counts at its best place
        out[i] = (s - lo) / (hi - lo) if hi > lo and math.isfinite(s) else (1.0 if math.isfinite(s) else 0.0)
    return out


def _ranks(ids: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for r, i in enumerate(ids, 1):
        ranks.setdefault(i, r)
    return ranks


def fuse(channels: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None, *,
         scores: Mapping[str, Sequence[float]] | None = None, top: int | None = None) -> list[FusedHit]:
    """The fused ranking of every memory any channel returned, best first (its first `top` only,
    when given: the same hits in the same order as the full ranking cut there, found without
    building the others, which was a tenth of a recall at 100,000 memories).

    `channels`: channel name -> memory ids, best first ("bm25", "dense", "anchor", ...).
    `weights`: channel -> weight (missing ones from DEFAULT_WEIGHTS, else 1.0).
    `scores`: channel -> scores aligned with its ids, higher is better (BM25 as -bm25(), dense as
    the cosine); a channel without scores is scored by rank. Ties: the better best rank, then id.
    """
    weights = {**DEFAULT_WEIGHTS, **(weights or {})}
    scores = scores or {}
    total: dict[str, float] = {}
    best: dict[str, int] = {}  # id -> its best rank in any channel
    normalised: dict[str, dict[str, float]] = {}
    for name, ids in channels.items():
        weight = weights.get(name, 1.0)
        values = normalised[name] = _normalised(ids, scores.get(name))
        for i, value in values.items():
            total[i] = total.get(i, 0.0) + weight * value
        for r, i in enumerate(ids, 1):
            if r < best.get(i, r + 1):
                best[i] = r
    order = (lambda i: (-total[i], best[i], i))  # noqa: E731 - the one sort key, used twice
    chosen = sorted(total, key=order) if top is None or top >= len(total) else heapq.nsmallest(top, total, key=order)
    ranks = {name: _ranks(ids) for name, ids in channels.items()}
    return [FusedHit(i, total[i], {name: ranks[name].get(i) for name in channels},
                     {name: weights.get(name, 1.0) * normalised[name][i] for name in channels if i in normalised[name]})
            for i in chosen]


def fuse_rrf(channels: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None, *,
             k: float = 60.0) -> list[FusedHit]:
    """Weighted reciprocal rank fusion (sum of weight / (k + rank)): the alternative `fuse` was
    measured against (bench/locomo.py); kept so the comparison can be run again."""
    weights = {**DEFAULT_WEIGHTS, **(weights or {})}
    ranks = {name: _ranks(ids) for name, ids in channels.items()}
    parts: dict[str, dict[str, float]] = {}
    for name, by_id in ranks.items():
        for i, r in by_id.items():
            parts.setdefault(i, {})[name] = weights.get(name, 1.0) / (k + r)
    hits = [FusedHit(i, sum(p.values()), {name: ranks[name].get(i) for name in channels}, p)
            for i, p in parts.items()]
    hits.sort(key=lambda h: (-h.score, min((r for r in h.ranks.values() if r), default=0), h.id))
    return hits


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = r"(" + "|".join(_MONTHS) + r"|" + "|".join(m[:3] for m in _MONTHS) + r")\.?"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b")
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+(\d{4})\b")


def _month(name: str) -> int:
    return next(n for n, m in enumerate(_MONTHS, 1) if m.startswith(name.lower()[:3]))


def _day(year: str, month: int, day: str) -> date | None:
    try:
        return date(int(year), month, int(day))
    except ValueError:
        return None


def query_period(text: str) -> tuple[date, date] | None:
    """The days a query names, first and last ("3 June 2023", "June 3, 2023", "2023-06-03": one
    day; "June 2023": the month; "in 2023": the year), or None when it names no date."""
    t = text.lower()
    if m := _DAY_MONTH_YEAR.search(t):
        day = _day(m[3], _month(m[2]), m[1])
    elif m := _MONTH_DAY_YEAR.search(t):
        day = _day(m[3], _month(m[1]), m[2])
    elif m := _ISO_DAY.search(t):
        day = _day(m[1], int(m[2]), m[3]) if 1 <= int(m[2]) <= 12 else None
    else:
        day = None
    if day is not None:
        return day, day
    if (m := _MONTH_YEAR.search(t)) and 1 <= int(m[2]) <= 9999:
        year, month = int(m[2]), _month(m[1])
        last = date(year, 12, 31) if month == 12 else date(year, month + 1, 1) - timedelta(days=1)
        return date(year, month, 1), last
    if (m := _YEAR.search(t)) and 1 <= int(m[1]) <= 9999:
        return date(int(m[1]), 1, 1), date(int(m[1]), 12, 31)
    return None


#: A memory written up to this many days after the period still counts as in it (people write
#: about what happened last week); further away its closeness halves every TIME_HALF_LIFE days.
TIME_GRACE_DAYS = 7
TIME_HALF_LIFE = 7.0
#: What recall adds to a fused score per unit of closeness to a month or a year the query names (a
#: memory written then gains as much as the dense channel's best, weighted 0.5).
TIME_WEIGHT = 0.5
#: The same for a query naming one day ("on 31 July, 2023"): a day is a precise question, and the
#: memories written on it or in the week after are few, so being one of them outweighs a better word
#: match from another month. A month-wide weight let such a note lose to the many that share the
#: question's topic words: on LoCoMo's tuning conversations (bench/locomo.py) turn Hit@5 0.820 ->
#: 0.828 (3 more of the 17 questions naming a day found; 1.25 to 3 gave the same 0.828, 0.75 and 1.0
#: 0.825; the month and year weight from 0.25 to 1.0 changed nothing), held out 0.761 -> 0.767.
TIME_WEIGHT_DAY = 1.5


#: What recall adds to a fused score when the query names one of the memory's tags ("what did
#: Alice decide about caching" and a memory tagged `alice` or `caching`): a tag is the writer's own
#: word for what a memory is about. The tag the query names first (among those of the memories
#: ranked) gets TAG_WEIGHT, any tag it names later TAG_WEIGHT_LATER: "what did Alice tell Bob about
#: X" asks what Alice said, and an equal lift for every named tag lifted every memory of Alice and
#: Bob's conversation alike. On LoCoMo (each turn tagged with its speaker; bench/locomo.py) the tuning
#: conversations' turn Hit@5 0.802 -> 0.820, Hit@1 0.496 -> 0.520 (an equal 0.3 for every named tag:
#: the first figures; equal 0.5: 0.812; the first 0.3 / 0.7 / 1.0 with none for later tags: 0.809 /
#: 0.815 / 0.807; later tags 0 to 0.25: the same 0.820). Held out: Hit@5 0.761 both, Hit@1 0.467 -> 0.477.
TAG_WEIGHT = 0.5
TAG_WEIGHT_LATER = 0.25


def named_tags(query: str, tags: Sequence[str]) -> list[str]:
    """The tags a query names: every word of the tag is a word of the query (case aside), and the
    tag is not made of stopwords only ("a", "it")."""
    where = _first_places(query)
    return [tag for tag in tags if _named_at(tag, where) is not None]


def tag_bonuses(query: str, tag_lists: Sequence[Sequence[str]]) -> list[float]:
    """What each memory (given by its tags) gains for the tags `query` names: TAG_WEIGHT when one
    of its tags is the first the query names of all the tags given, TAG_WEIGHT_LATER when the query
    names one of its tags later, 0 when none (see TAG_WEIGHT)."""
    where = _first_places(query)
    seen: dict[str, int | None] = {}  # tag -> where it is named (candidates share their tags)

    def named_at(tag: str) -> int | None:
        if tag not in seen:
            seen[tag] = _named_at(tag, where)
        return seen[tag]

    places = [min((p for tag in tags if (p := named_at(tag)) is not None), default=None) for tags in tag_lists]
    first = min((p for p in places if p is not None), default=None)
    return [0.0 if p is None else TAG_WEIGHT if p == first else TAG_WEIGHT_LATER for p in places]


def _first_places(query: str) -> dict[str, int]:
    """Each lower-cased word of `query` -> the index of its first occurrence."""
    where: dict[str, int] = {}
    for i, w in enumerate(_WORD.findall(query)):
        where.setdefault(w.lower(), i)
    return where


def _named_at(tag: str, where: Mapping[str, int]) -> int | None:
    """Where the query (its words' first places) names `tag`: its earliest word's place; None when
    one of the tag's words is missing or the tag is stopwords only."""
    parts = [w.lower() for w in _WORD.findall(tag)]
    if not parts or all(p in STOPWORDS for p in parts) or any(p not in where for p in parts):
        return None
    return min(where[p] for p in parts)


def time_bonus(period: tuple[date, date], when: datetime | date) -> float:
    """What recall adds to the fused score of a memory written `when` for a query naming `period`
    (`query_period`): its closeness (`time_closeness`) times TIME_WEIGHT_DAY when the period is one
    day, TIME_WEIGHT when it is a month or a year."""
    weight = TIME_WEIGHT_DAY if period[0] == period[1] else TIME_WEIGHT
    return weight * time_closeness(period, when)


def time_closeness(period: tuple[date, date], when: datetime | date) -> float:
    """How close a memory written `when` lies to `period`: 1.0 inside it (or up to TIME_GRACE_DAYS
    after), halving every TIME_HALF_LIFE days away (`time_bonus` weighs it)."""
    first, last = period[0], period[1] + timedelta(days=TIME_GRACE_DAYS)
    day = when.date() if isinstance(when, datetime) else when
    away = (first - day).days if day < first else (day - last).days if day > last else 0
    return 0.5 ** (away / TIME_HALF_LIFE)
