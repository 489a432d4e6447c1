"""Recall's query processing and fusion: any text is a valid FTS5 query, and the fused order is the
one a person would expect from the channels (agreement first, weights respected, ties stable)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.memory.fusion import (TIME_GRACE_DAYS, TIME_HALF_LIFE, fts_query, fuse, fuse_rrf, query_period,
                                  query_terms, time_closeness)

NOTES = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "We chose SQLite FTS5 because it needs no server; see store/schema.py",
    'The parser rejects "unterminated strings" with a clear message',
    "NEAR(the build cache) is NOT a directory: AND it is gone*",
]


@pytest.fixture(scope="module")
def fts() -> apsw.Connection:
    db = apsw.Connection(":memory:")
    db.execute("CREATE VIRTUAL TABLE notes USING fts5(content, tags, tokenize='porter unicode61')")
    for note in NOTES:
        db.execute("INSERT INTO notes(content, tags) VALUES(?, '')", (note,))
    return db


def search(db: apsw.Connection, text: str) -> list[int]:
    query = fts_query(text)
    if not query:
        return []
    return [r for (r,) in db.execute("SELECT rowid FROM notes WHERE notes MATCH ? ORDER BY bm25(notes)", (query,))]


HOSTILE = ['"', '""', '"unbalanced', "AND", "OR NOT", "NEAR(a b, 3)", "content:cache", "tags:x OR", "*", "a*",
           "^start", "(", ")", "((a) OR", "-", "+", "col : val", "'; DROP TABLE notes; --", "\x00", "a\x00b",
           "\u0301", "😀 emoji", "שלום עולם", "日本語のテキスト", "x" * 5000, "NOT NOT NOT", "{a b}", "a:b:c",
           "\\", "%", "_", "a_b", "é", "ǅ"]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_is_never_a_syntax_error(fts: apsw.Connection, text: str) -> None:
    search(fts, text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_any_text_is_a_valid_match(fts: apsw.Connection, text: str) -> None:
    search(fts, text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(['"', "AND", "OR", "NOT", "NEAR", "(", ")", "*", "^", ":", "content", "-", "cache",
                                 "build", ",", "{", "}", "+", "'"]), max_size=30))
def test_fts5_syntax_soup_is_a_valid_match(fts: apsw.Connection, words: list[str]) -> None:
    search(fts, " ".join(words))
    search(fts, "".join(words))


def test_question_words_are_not_searched_for(fts: apsw.Connection) -> None:
    assert query_terms("What did Caroline research?") == ["caroline", "research"]
    assert search(fts, "When did Caroline go to the support group?")[0] == 1
    assert search(fts, "why did we choose sqlite?")[0] == 2


def test_operators_are_words(fts: apsw.Connection) -> None:
    assert search(fts, "NEAR the cache AND gone*") == [4]
    assert search(fts, 'the "unterminated strings') == [3]


def test_a_query_of_stopwords_still_asks_for_something() -> None:
    assert fts_query("what is it?") == '"what" OR "is" OR "it"'
    assert fts_query("?!  ...") == ""


def test_what_both_channels_rank_high_comes_first() -> None:
    hits = fuse({"bm25": ["a", "b", "c"], "dense": ["c", "b", "a"]},
                scores={"bm25": [9.0, 8.5, 1.0], "dense": [0.3, 0.6, 0.1]})
    # b: close to the best in BM25 (8.5 of 9) and the dense channel's best; a and c each win one channel only
    assert hits[0].id == "b"


def test_scores_matter_not_only_ranks() -> None:
    channels = {"bm25": ["a", "b", "c"], "dense": ["b", "c", "a"]}
    clear_win = fuse(channels, {"dense": 0.5}, scores={"bm25": [10.0, 1.0, 0.9], "dense": [0.50, 0.49, 0.1]})
    assert clear_win[0].id == "a"  # BM25's far-ahead best beats dense's narrow one
    narrow = fuse(channels, {"dense": 0.5}, scores={"bm25": [10.0, 9.9, 0.9], "dense": [0.50, 0.1, 0.05]})
    assert narrow[0].id == "b"


def test_weights_shift_the_order() -> None:
    channels = {"bm25": ["a", "b"], "dense": ["b", "a"]}
    scores = {"bm25": [2.0, 1.0], "dense": [0.9, 0.1]}
    assert fuse(channels, {"bm25": 1.0, "dense": 0.5}, scores=scores)[0].id == "a"
    assert fuse(channels, {"bm25": 0.5, "dense": 1.0}, scores=scores)[0].id == "b"


def test_debug_detail_names_each_channels_rank_and_share() -> None:
    hits = fuse({"bm25": ["a", "b"], "dense": ["b"], "anchor": ["c", "a"]}, scores={"bm25": [3.0, 1.0], "dense": [0.7]})
    by_id = {h.id: h for h in hits}
    assert by_id["a"].ranks == {"bm25": 1, "dense": None, "anchor": 2}
    assert by_id["c"].ranks == {"bm25": None, "dense": None, "anchor": 1}
    for h in hits:
        assert h.score == pytest.approx(sum(h.contributions.values()))
    assert by_id["c"].contributions == {"anchor": 1.0}  # a channel without scores counts by rank


def test_ties_are_broken_by_best_rank_then_id() -> None:
    hits = fuse({"bm25": ["x", "y"], "dense": ["y", "x"]}, {"bm25": 1.0, "dense": 1.0})
    assert [h.id for h in hits] == ["x", "y"]
    assert [h.id for h in fuse({"a": ["q"], "b": ["p"]}, {"a": 1.0, "b": 1.0})] == ["p", "q"]


def test_empty_channels_and_bad_scores() -> None:
    assert fuse({}) == []
    assert fuse({"bm25": [], "dense": []}) == []
    with pytest.raises(ValueError, match="2 ids but 1 scores"):
        fuse({"bm25": ["a", "b"]}, scores={"bm25": [1.0]})


def test_reciprocal_rank_fusion_is_kept_for_comparison() -> None:
    hits = fuse_rrf({"bm25": ["a", "b"], "dense": ["b", "a"]}, {"bm25": 1.0, "dense": 0.5}, k=60)
    assert [h.id for h in hits] == ["a", "b"]
    assert hits[0].score == pytest.approx(1 / 61 + 0.5 / 62)


@pytest.mark.parametrize(("text", "period"), [
    ("What did Maria do on 31 July, 2023?", (date(2023, 7, 31), date(2023, 7, 31))),
    ("what happened on May 23, 2023", (date(2023, 5, 23), date(2023, 5, 23))),
    ("the 2024-02-29 release", (date(2024, 2, 29), date(2024, 2, 29))),
    ("What did John attend in March 2023?", (date(2023, 3, 1), date(2023, 3, 31))),
    ("decisions from Dec 2023", (date(2023, 12, 1), date(2023, 12, 31))),
    ("How many times in 2022?", (date(2022, 1, 1), date(2022, 12, 31))),
    ("the parser on line 2023", None),
    ("on 31 February, 2023", (date(2023, 2, 1), date(2023, 2, 28))),  # no such day: the month
    ("2023-13-01", None),
    ("nothing dated", None),
])
def test_the_period_a_query_names(text: str, period: tuple[date, date] | None) -> None:
    assert query_period(text) == period


def test_time_closeness_is_full_inside_the_period_and_halves_away_from_it() -> None:
    june = (date(2023, 6, 1), date(2023, 6, 30))
    assert time_closeness(june, date(2023, 6, 15)) == 1.0
    assert time_closeness(june, datetime(2023, 7, 1 + TIME_GRACE_DAYS - 1, 12)) == 1.0
    assert time_closeness(june, date(2023, 6, 1) - timedelta(days=int(TIME_HALF_LIFE))) == pytest.approx(0.5)
    assert time_closeness(june, date(2023, 6, 30) + timedelta(days=TIME_GRACE_DAYS + 2 * int(TIME_HALF_LIFE))) \
        == pytest.approx(0.25)


def test_a_tag_is_named_when_all_its_words_are_in_the_query() -> None:
    from engram.memory.fusion import named_tags

    assert named_tags("What did Alice's team decide about auth-flow?", ["alice", "auth-flow", "bob", "it"]) == \
        ["alice", "auth-flow"]
    assert named_tags("is it deployed", ["it", "deployed"]) == ["deployed"]  # a stopword tag is never named
    assert named_tags("", ["x"]) == []


def test_the_tag_named_first_gains_most() -> None:
    from engram.memory.fusion import TAG_WEIGHT, TAG_WEIGHT_LATER, tag_bonuses

    assert TAG_WEIGHT > TAG_WEIGHT_LATER > 0
    asked = "What did Bob's team tell Alice about auth-flow?"
    assert tag_bonuses(asked, [["alice"], ["bob"], ["auth-flow", "alice"], ["carol"], []]) == \
        [TAG_WEIGHT_LATER, TAG_WEIGHT, TAG_WEIGHT_LATER, 0.0, 0.0]
    # first among the tags the memories carry: with no memory of Bob's, Alice's is first
    assert tag_bonuses(asked, [["alice"], ["carol"]]) == [TAG_WEIGHT, 0.0]
    assert tag_bonuses("", [["alice"]]) == [0.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcdefghij"), max_size=12), st.lists(st.sampled_from("abcdefghij"), max_size=12),
       st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=12, max_size=12), st.integers(0, 12))
def test_the_first_hits_alone_are_the_full_ranking_cut(bm25: list[str], dense: list[str], values: list[float],
                                                      top: int) -> None:
    """Recall asks only for the hits it scores: they are the full ranking's first ones, in its
    order, with the same ranks and shares (ties and repeats included)."""
    channels = {"bm25": bm25, "dense": dense}
    scores = {"bm25": values[:len(bm25)], "dense": values[-len(dense):] if dense else []}
    full = fuse(channels, scores=scores)
    assert fuse(channels, scores=scores, top=top) == full[:top]
    # the definition, written out: min-max per channel over its first listing of each id, weighted
    # sum; ties by the best rank in any channel, then the id
    weights, expected = {"bm25": 1.0, "dense": 0.5}, {}
    for name, ids in channels.items():
        vals = scores[name][:len(ids)]
        lo, hi = (min(vals), max(vals)) if vals else (0.0, 0.0)
        for i in dict.fromkeys(ids):
            v = vals[ids.index(i)]
            expected[i] = expected.get(i, 0.0) + weights[name] * ((v - lo) / (hi - lo) if hi > lo else 1.0)
    order = sorted(expected, key=lambda i: (-expected[i], min(ids.index(i) + 1 for ids in channels.values()
                                                             if i in ids), i))
    assert [h.id for h in full] == order and [h.score for h in full] == [expected[i] for i in order]
