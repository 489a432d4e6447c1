"""Anchors: what a user notices when code is found (or not) in transcripts.

The vectorised tokenizer/winnower is checked against a slow pure-Python reference
written straight from the definitions in the module docstrings (regex tokens, per-token
hash loop, per-window minimum), so the documented hash is the one actually stored.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.anchor import definition
from engram.anchor import (
    DEFAULT_K,
    DEFAULT_W,
    all_kgrams,
    containment,
    fingerprint_set,
    fingerprints,
    fingerprints_by_line,
    fingerprints_bytes,
    fingerprints_from_tokens,
    fingerprints_many,
    kgram_fingerprints,
    similarity,
    tokenize,
    tokenize_bytes,
    winnow_positions,
    winnowed_values,
)

# --------------------------------------------------------------------------- reference

M64 = (1 << 64) - 1
P_WORD, C_TOK = 0x9E3779B97F4A7C15, 0x165667B19E3779F9
Q_KGRAM, C_CNT = 0xD6E8FEB86659FD93, 0x9E3779B97F4A7C15
M1, M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB

_PREFIX = re.compile(rb"(?m)^( *[0-9]+)(?:\xe2\x86\x92|\t)")
_TOKEN = re.compile(rb"[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*|[0-9][0-9A-Za-z_.\x80-\xff]*|[^\x00-\x20\x7f]")


def ref_tokens(text: str) -> list[tuple[bytes, int, int]]:
    """(token bytes, line, byte offset) straight from the regex definition."""
    raw = text.encode("utf-8", "surrogatepass")
    data = bytearray(raw)
    for m in _PREFIX.finditer(raw):
        if len(m.group(1)) <= 16:
            data[m.start() : m.end()] = b" " * (m.end() - m.start())
    data = bytes(data)
    return [(m.group(), data.count(b"\n", 0, m.start()), m.start()) for m in _TOKEN.finditer(data)]


def ref_token_hash(tok: bytes) -> int:
    acc = 0
    for j in range(0, len(tok), 8):
        word = int.from_bytes(tok[j : j + 8], "little")
        acc = (acc + word * pow(P_WORD, j // 8, 1 << 64)) & M64
    t = (acc * C_TOK) & M64
    return t ^ (t >> 32)


def ref_kgram(hashes: list[int]) -> int:
    x = 0
    for h in hashes:
        x = (x * Q_KGRAM + h) & M64
    x = (x + len(hashes) * C_CNT) & M64
    x ^= x >> 30
    x = (x * M1) & M64
    x ^= x >> 27
    x = (x * M2) & M64
    x ^= x >> 31
    return x - (1 << 64) if x >> 63 else x


def ref_fingerprints(text: str, k: int, w: int) -> list[tuple[int, int, int]]:
    """(value, line, offset) by the book: every window, rightmost minimum, record on change,
    then merge consecutive equal (value, line)."""
    toks = ref_tokens(text)
    hs = [ref_token_hash(t) for t, _, _ in toks]
    if not toks:
        return []
    if len(toks) < k:
        return [(ref_kgram(hs), toks[0][1], toks[0][2])]
    kg = [ref_kgram(hs[i : i + k]) for i in range(len(hs) - k + 1)]
    picked: list[int] = []
    for i in range(max(1, len(kg) - w + 1)):
        win = kg[i : i + w]
        m = min(win)
        pos = i + max(j for j, v in enumerate(win) if v == m)
        if not picked or picked[-1] != pos:
            picked.append(pos)
    out: list[tuple[int, int, int]] = []
    for p in picked:
        fp = (kg[p], toks[p][1], toks[p][2])
        if not out or out[-1][:2] != fp[:2]:
            out.append(fp)
    return out


def as_triples(fp) -> list[tuple[int, int, int]]:
    return list(zip(fp.values.tolist(), fp.lines.tolist(), fp.offsets.tolist()))


# Characters that exercise every branch: identifiers, numbers with dots, punctuation,
# all kinds of whitespace, cat -n prefixes, multi-byte letters, lone surrogates.
_ALPHABET = list("ab_Z09.5 \n\t\r(){}-+=,;:'\"#→é变😀\x1b\x7f") + ["\ud800"]
texts = st.lists(
    st.one_of(
        st.sampled_from(_ALPHABET),
        st.sampled_from(["     12→", "  7\t", "1.5", "x.y", "v2.1.38", "0x1F", "a..b", "...", "\n   3→def f():\n",
                         "a_long_identifier_of_41_bytes_for_hashing", "é" * 60, "9" * 70 + ".5"]),
    ),
    max_size=120,
).map("".join)

# --------------------------------------------------------------------------- reference equivalence


@settings(max_examples=400, deadline=None)
@given(texts, st.integers(1, 6), st.integers(1, 6))
def test_the_plain_python_twin_matches_the_documented_definition(text: str, k: int, w: int) -> None:
    """A command-line query fingerprints its span with `definition` (no numpy): it must find
    exactly what the tapes' numpy fingerprints hold, or a query would silently miss sessions."""
    ref = ref_tokens(text)
    hashes = definition.token_hashes(text)
    assert hashes == [ref_token_hash(t) for t, _, _ in ref]
    kgrams = definition.kgram_values(hashes, k)
    if len(hashes) >= k:
        assert kgrams == [ref_kgram(hashes[i:i + k]) for i in range(len(hashes) - k + 1)]
    else:
        assert kgrams == ([ref_kgram(hashes)] if hashes else [])
    assert kgrams == kgram_fingerprints(text, k).values.tolist()
    assert definition.winnowed(kgrams, w) == {v for v, _, _ in ref_fingerprints(text, k, w)}


@settings(max_examples=400, deadline=None)
@given(texts)
def test_tokenizer_matches_the_documented_definition(text: str) -> None:
    ref = ref_tokens(text)
    tok = tokenize(text)
    assert tok.offsets.tolist() == [o for _, _, o in ref]
    assert tok.lines.tolist() == [ln for _, ln, _ in ref]
    assert tok.hashes.tolist() == [ref_token_hash(t) for t, _, _ in ref]
    assert tok.hashes.dtype == np.uint64 and tok.lines.dtype == np.int32 and tok.offsets.dtype == np.int64


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(1, 7), st.integers(1, 6))
def test_fingerprints_match_the_documented_definition(text: str, k: int, w: int) -> None:
    fp = fingerprints(text, k, w)
    assert as_triples(fp) == ref_fingerprints(text, k, w)
    assert fp.values.dtype == np.int64 and fp.lines.dtype == np.int32


@given(texts, st.integers(1, 7), st.integers(1, 6))
def test_a_query_winnowing_its_kgrams_gets_the_stored_set(text: str, k: int, w: int) -> None:
    """explain winnows the k-grams it already hashed: the set must be what a tape of the same
    text stores, or confidences drift from the index."""
    assert winnowed_values(kgram_fingerprints(text, k).values, w).tolist() == fingerprint_set(text, k, w).tolist()


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 40), st.integers(1, 6), st.integers(1, 5))
def test_cutting_text_into_pieces_changes_nothing(text: str, chunk: int, k: int, w: int) -> None:
    """Big tapes are processed in cache-sized pieces; the pieces must be invisible."""
    data = text.encode("utf-8", "surrogatepass")
    whole = tokenize_bytes(data)
    cut = tokenize_bytes(data, chunk=chunk)
    assert cut.hashes.tolist() == whole.hashes.tolist()
    assert cut.lines.tolist() == whole.lines.tolist()
    assert cut.offsets.tolist() == whole.offsets.tolist()
    streamed = fingerprints_bytes(data, k, w, chunk=chunk)
    assert as_triples(streamed) == as_triples(fingerprints_from_tokens(whole, k, w))


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=8), st.integers(1, 7), st.integers(1, 6), st.sampled_from([1, 40, 1 << 18]))
def test_many_texts_at_once_match_one_at_a_time(docs: list[str], k: int, w: int, group: int) -> None:
    """The batch path (thousands of small events per tape) must not change a single row."""
    import engram.anchor.winnow as winnow

    old = winnow.GROUP_BYTES
    winnow.GROUP_BYTES = group
    try:
        batch = fingerprints_many(docs, k, w)
    finally:
        winnow.GROUP_BYTES = old
    assert batch.text.tolist() == sorted(batch.text.tolist())
    for i, doc in enumerate(docs):
        assert as_triples(batch.of(i)) == as_triples(fingerprints(doc, k, w))
    assert len(batch) == sum(len(fingerprints(d, k, w)) for d in docs)


def test_pieces_cut_inside_a_long_line_keep_the_next_read_prefixes() -> None:
    """A piece may end mid-line at a space; the following Read lines must still lose
    their line-number prefixes (regression: a newline cut was taken for a space cut)."""
    text = "a" * 100 + " " + "b" * 50 + "\n" + "  12→ x y z\n" * 3 + " " * 30 + "7→ q\n"
    data = text.encode()
    ref = [(ref_token_hash(t), ln, o) for t, ln, o in ref_tokens(text)]
    for chunk in range(1, 60):
        tok = tokenize_bytes(data, chunk=chunk)
        assert list(zip(tok.hashes.tolist(), tok.lines.tolist(), tok.offsets.tolist())) == ref, chunk


def test_many_pieces_and_blocks_on_real_sized_text() -> None:
    """Past one winnowing block and one tokenizer piece, on realistic code."""
    rng = random.Random(7)
    words = ["def", "self", "return", "x", "y", "1.5", "(", ")", ":", "=", "+", "naïve", "→"]
    lines = [" " * rng.randrange(8) + " ".join(rng.choice(words) for _ in range(rng.randrange(1, 12)))
             for _ in range(30000)]
    text = "\n".join(lines)
    data = text.encode()
    whole = fingerprints_from_tokens(tokenize_bytes(data, chunk=len(data) + 1))
    for chunk in (1000, 1 << 16):
        assert as_triples(fingerprints_bytes(data, chunk=chunk)) == as_triples(whole)
    small = "\n".join(lines[:300])
    assert as_triples(fingerprints(small)) == ref_fingerprints(small, DEFAULT_K, DEFAULT_W)


# --------------------------------------------------------------------------- what users notice

CODE = '''\
def parse_range(spec: str, total: int) -> tuple[int, int]:
    """Turn '10-20' into a (start, end) pair."""
    start, _, end = spec.partition("-")
    lo = int(start) if start else 1
    hi = int(end) if end else total
    if lo > hi:
        raise ValueError(f"empty range {spec!r}")
    return lo, min(hi, total)
'''


def test_reindenting_and_respacing_code_keeps_its_fingerprints() -> None:
    reformatted = textwrap.indent(CODE, "        ").replace(" = ", "   =   ").replace(", ", ",\t")
    assert fingerprints(reformatted).values.tolist() == fingerprints(CODE).values.tolist()
    one_line = " ".join(CODE.split())
    assert fingerprints(one_line).values.tolist() == fingerprints(CODE).values.tolist()


def test_code_quoted_by_the_read_tool_fingerprints_like_the_code() -> None:
    quoted = "".join(f"{n:6d}→{line}\n" for n, line in enumerate(CODE.splitlines(), start=12))
    assert quoted.splitlines()[0] == "    12→def parse_range(spec: str, total: int) -> tuple[int, int]:"
    raw, read = fingerprints(CODE), fingerprints(quoted)
    assert read.values.tolist() == raw.values.tolist()
    assert read.lines.tolist() == raw.lines.tolist()
    tabbed = "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(CODE.splitlines(), start=1))
    assert fingerprints(tabbed).values.tolist() == raw.values.tolist()
    # only at the start of a line: an arrow in prose stays a token
    assert len(tokenize("x 12→ y")) == 3


def test_a_read_result_inside_a_message_still_contains_the_code() -> None:
    quoted = "".join(f"{n:6d}→{line}\n" for n, line in enumerate(CODE.splitlines(), start=40))
    message = f"I read the file:\n{quoted}\nThe bug is in the range check."
    assert containment(fingerprint_set(CODE), fingerprint_set(message)) == 1.0


def test_non_ascii_identifiers_are_single_tokens_and_lines_stay_right() -> None:
    assert len(tokenize("naïve_ünïcode = 1")) == 3
    assert len(tokenize("变量名 = 值")) == 3
    assert len(tokenize("emoji😀name")) == 1
    text = "naïve_ünïcode = 1\n变量名 = 值 # 注释 ✓\nlast_line = naïve_ünïcode\n"
    tok = tokenize(text)
    assert tok.lines.tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2]
    assert tok.hashes[0] == tok.hashes[-1]  # the same identifier, wherever it appears
    data = text.encode()
    assert data[tok.offsets[-1] :].decode().strip() == "naïve_ünïcode"


def test_numbers_keep_their_dots_but_attribute_access_does_not() -> None:
    assert len(tokenize("3.14")) == 1
    assert len(tokenize("version 2.1.38")) == 2
    assert len(tokenize("obj.attr.method()")) == 7


def test_fingerprint_lines_point_at_the_line_where_the_kgram_starts() -> None:
    fp = fingerprints(CODE, k=3, w=2)
    lines = CODE.encode().split(b"\n")
    starts = np.cumsum([0] + [len(ln) + 1 for ln in lines])
    for line, off in zip(fp.lines.tolist(), fp.offsets.tolist()):
        assert starts[line] <= off < starts[line + 1]
    assert set(fp.lines.tolist()) == set(range(len(CODE.splitlines())))
    values, by_line = fingerprints_by_line("\n\n\nfoo ( bar )\n", k=2, w=2)
    assert by_line.tolist() == [3] * len(values)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "(", ")", "1", "x_y", "é"]), max_size=30),
    st.lists(st.sampled_from(["a", "b", "c", "(", ")", "1", "x_y", "é"]), min_size=1, max_size=40),
    st.lists(st.sampled_from(["a", "b", "c", "(", ")", "1", "x_y", "é"]), max_size=30),
    st.integers(1, 6),
    st.integers(1, 5),
)
def test_any_shared_run_of_w_plus_k_minus_1_tokens_shares_a_fingerprint(
        pre: list[str], shared: list[str], post: list[str], k: int, w: int) -> None:
    """The winnowing guarantee: a long enough copy is never missed."""
    if len(shared) < w + k - 1:
        shared = (shared * (w + k))[: w + k - 1]
    a = " ".join(pre + shared + post)
    b = " ".join(list(reversed(post)) + ["\n"] + shared + ["zz"] + pre)
    assert set(fingerprints(a, k, w).values.tolist()) & set(fingerprints(b, k, w).values.tolist())


_NAMES = ["user", "total", "items", "price", "count", "result", "config", "path", "index", "value"]


def _code_like(rng: random.Random, n_lines: int, names: list[str] = _NAMES) -> list[str]:
    ops = ["+", "-", "*", "==", "<", ">="]
    out = []
    for _ in range(n_lines):
        a, b, c = rng.sample(names, 3)
        out.append(f"    {a}_{rng.randrange(100)} = {b}.get('{c}', {rng.randrange(1000)}) {rng.choice(ops)} {c}[{rng.randrange(9)}]")
    return out


def test_a_lightly_edited_copy_stays_similar_and_unrelated_code_does_not() -> None:
    rng = random.Random(42)
    original = _code_like(rng, 200)
    edited = list(original)
    for i in rng.sample(range(len(edited)), len(edited) // 5):  # edit 20% of the lines
        edited[i] = edited[i].replace("=", "!=", 1) + "  # changed"
    unrelated = _code_like(random.Random(99), 200, ["row", "col", "grid", "cell", "width", "height", "style"])
    fo, fe, fu = (fingerprint_set("\n".join(x)) for x in (original, edited, unrelated))
    assert similarity(fo, fe) > 0.5
    assert containment(fo, fe) > 0.6
    assert similarity(fo, fu) < 0.05
    assert similarity(fo, fo) == 1.0


def test_similarity_and_containment_edge_cases() -> None:
    empty = np.empty(0, np.int64)
    assert similarity(empty, empty) == 0.0
    assert containment(empty, np.array([1, 2])) == 0.0
    assert similarity(np.array([1, 1, 2]), np.array([2, 3])) == pytest.approx(1 / 3)
    assert containment(np.array([1, 1, 2]), np.array([2, 3])) == 0.5


# Derivation of the pinned value, from the docstrings (all mod 2**64):
#   token "x": one word 0x78, L = 1
#     t = 0x78 * C_TOK; t ^= t >> 32
#   text shorter than k -> one k-gram of m = 1 token: x = t + 1 * C_CNT, splitmix64
#   finaliser, read as signed.  Written out step by step in the test below.
PINNED_X = 6292703745377449260


def test_values_are_pinned_and_independent_of_pythonhashseed() -> None:
    t = (0x78 * C_TOK) & M64
    t ^= t >> 32
    assert int(tokenize("x").hashes[0]) == t
    x = (t + C_CNT) & M64
    x ^= x >> 30
    x = (x * M1) & M64
    x ^= x >> 27
    x = (x * M2) & M64
    x ^= x >> 31
    assert (x - (1 << 64) if x >> 63 else x) == PINNED_X
    assert fingerprints("x").values.tolist() == [PINNED_X]
    prog = "from engram.anchor import fingerprints; print(fingerprints(open(0).read()).values.tolist())"
    outs = {
        subprocess.run([sys.executable, "-c", prog], input=CODE, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(outs) == 1
    assert outs.pop().strip() == str(fingerprints(CODE).values.tolist())


@pytest.mark.parametrize("text", ["", " ", "\n\n\t  \r\n", "     12→\n  3\t\n"])
def test_empty_and_blank_text_have_no_fingerprints(text: str) -> None:
    assert len(tokenize(text)) == 0
    for arr in (fingerprints(text).values, fingerprint_set(text), all_kgrams(text)):
        assert arr.shape == (0,) and arr.dtype == np.int64


@pytest.mark.parametrize("text", ["x", "foo(", "a b c"])
def test_text_shorter_than_k_tokens_gives_exactly_one_fingerprint(text: str) -> None:
    assert len(tokenize(text)) < DEFAULT_K
    fp = fingerprints(text)
    assert len(fp) == 1 and fp.lines.tolist() == [0]
    assert all_kgrams(text).tolist() == fp.values.tolist()
    assert fingerprints(f"  {text}\n").values.tolist() == fp.values.tolist()
    assert fingerprints(text + " extra") .values.tolist() != fp.values.tolist()


def test_fewer_than_w_kgrams_keep_their_minimum() -> None:
    text = "a b c d e f"  # 6 tokens, k=5 -> 2 k-grams < w=4
    kg = all_kgrams(text, 5)
    assert kg.shape == (2,)
    assert fingerprints(text, 5, 4).values.tolist() == [kg.min()]


def test_all_kgrams_cover_every_position_and_contain_the_winnowed_ones() -> None:
    kg = kgram_fingerprints(CODE, k=4)
    assert len(kg) == len(tokenize(CODE)) - 3
    assert set(fingerprints(CODE, 4, 3).values.tolist()) <= set(kg.values.tolist())
    assert all_kgrams(CODE, 4).tolist() == kg.values.tolist()


def test_winnow_positions_picks_the_rightmost_minimum() -> None:
    assert winnow_positions(np.array([3, 1, 1, 5, 0, 9]), 3).tolist() == [2, 4]
    assert winnow_positions(np.array([5, 4]), 3).tolist() == [1]
    assert winnow_positions(np.array([2, 2, 2, 2, 2]), 2).tolist() == [1, 2, 3, 4]


def test_repeated_tokens_on_one_line_do_not_flood_the_index() -> None:
    fp = fingerprints("-" * 80)
    assert len(fp) == 1
    fp = fingerprints("\n".join(["-" * 20] * 5))
    assert fp.lines.tolist() == sorted(set(fp.lines.tolist()))


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        fingerprints("a b c", k=0)
    with pytest.raises(ValueError):
        fingerprints("a b c", w=0)
