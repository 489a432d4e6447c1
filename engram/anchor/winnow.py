"""Token k-gram hashes and winnowing (Schleimer, Wilkerson & Aiken, SIGMOD 2003).

Why winnowing: storing every k-gram of every tape would make the index as large as the
text; winnowing keeps about ``2 / (w + 1)`` of them and still guarantees that any run
of at least ``w + k - 1`` tokens shared by two texts yields at least one shared
fingerprint (each window of ``w`` consecutive k-grams contributes its minimum, and the
minimum of a window depends only on the window's content).

k-gram value (uint64 arithmetic mod 2**64, token hashes ``t_i`` from ``tokens.py``)::

    x = sum(t_i * Q**(m-1-i) for i in range(m)) + m * C_CNT    # m = k (or all tokens
    x ^= x >> 30; x *= M1; x ^= x >> 27; x *= M2; x ^= x >> 31  #   of a text shorter than k)
    value = x reinterpreted as int64                             # SQLite INTEGER range

The last line is splitmix64's finaliser.  DESIGN.md names xxh3_64 for fingerprints;
xxh3 cannot be applied per k-gram without a Python call per token (its 17..128-byte
path needs 128-bit multiplies numpy lacks), so this vectorised polynomial + splitmix64
avalanche is used instead: deterministic (no PYTHONHASHSEED), 64-bit, well mixed, so
the window minimum is a fair sample.

Selection: in each window the minimum *signed* value, the rightmost one on ties; a
fingerprint is recorded when the selected position changes.  That set of positions is
computed without visiting windows (see ``_selected``), in cache-sized blocks, streamed
piece by piece from the tokenizer.  Consecutive selections with the same value on the
same line are then merged -- they add no information to line-level postings and a line
of 80 ``-`` would otherwise store 76 copies.  (That merge is not Schleimer's "robust"
tie rule, which needs a sequential scan; it only drops exact (value, line) repeats, so
every guarantee above still holds.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from engram import arrays
from engram.anchor import definition
from engram.anchor.tokens import CHUNK_BYTES, Tokens, iter_token_chunks, tokenize

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_K", "DEFAULT_W", "Fingerprints", "kgram_hashes", "winnow_positions",
    "fingerprints_from_tokens", "fingerprints_bytes", "fingerprints", "fingerprint_set", "all_kgrams",
    "kgram_fingerprints", "fingerprints_by_line", "BatchFingerprints", "fingerprints_many",
]

#: Tokens per k-gram and k-grams per winnowing window (chosen with bench/provenance.py; every
#: function takes k and w as parameters, so the benchmark can sweep them).
DEFAULT_K = definition.DEFAULT_K
DEFAULT_W = definition.DEFAULT_W

_U64 = np.uint64
Q_KGRAM = _U64(definition.Q_KGRAM)
C_CNT = _U64(definition.C_CNT)
M1 = _U64(definition.M1)
M2 = _U64(definition.M2)
_S30, _S27, _S31 = _U64(30), _U64(27), _U64(31)
_MASK = (1 << 64) - 1

#: k-gram positions decided per block: keeps the temporaries of a block in CPU cache.
BLOCK = 1 << 16


@dataclass(frozen=True)
class Fingerprints:
    """Selected k-gram hashes in text order (a value may repeat on different lines).

    ``lines``/``offsets`` locate the first token of each k-gram: 0-based line and byte
    offset into the UTF-8 text, so a posting can point at the quoted code, not just
    the event.
    """

    values: np.ndarray  # int64
    lines: np.ndarray  # int32
    offsets: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.values.shape[0])


def _empty() -> Fingerprints:
    return Fingerprints(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int64))


def _check(k: int, w: int | None = None) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if w is not None and w < 1:
        raise ValueError(f"w must be >= 1, got {w}")


def _finish(x: np.ndarray, m: int) -> np.ndarray:
    """Add the length term and avalanche in place; return the int64 view."""
    x += _U64((m * int(C_CNT)) & _MASK)  # Python int: numpy warns on scalar wraparound
    x ^= x >> _S30
    x *= M1
    x ^= x >> _S27
    x *= M2
    x ^= x >> _S31
    return x.view(np.int64)


def _qpow(e: int) -> np.uint64:
    return _U64(pow(int(Q_KGRAM), e, 1 << 64))


def _kgram_block(h: np.ndarray, lo: int, hi: int, k: int) -> np.ndarray:
    """k-gram values for start positions lo..hi-1 (needs h[lo : hi + k - 1]).

    The polynomial is built by doubling (spans 1, 2, 4, ... combined as
    ``left * Q**len(right) + right``), about 2 log2(k) + 2 vector passes instead of
    2 (k - 1) for Horner; the value is the same.
    """
    n = hi - lo
    seg = h[lo : hi + k - 1]
    spans: dict[int, np.ndarray] = {1: seg}
    span = 1
    while 2 * span <= k:
        g = spans[span]
        nxt = g[: g.shape[0] - span] * _qpow(span)
        nxt += g[span:]
        span *= 2
        spans[span] = nxt
    # combine the binary digits of k, largest span first
    x: np.ndarray | None = None
    done = 0
    for span in sorted(spans, reverse=True):
        if done + span > k:
            continue
        part = spans[span][done : done + n]
        if x is None:
            x = part.copy() if span == 1 else part  # span 1 is a view of h: never modify it
        else:
            x *= _qpow(span)
            x += part
        done += span
    assert x is not None and done == k
    return _finish(x, k)


def _short_value(h: np.ndarray) -> np.ndarray:
    """One value over all tokens of a text shorter than k, so short spans still match
    texts that are exactly as short (a lone identifier, a one-line edit)."""
    x = np.zeros(1, dtype=np.uint64)
    for t in h:
        x *= Q_KGRAM
        x += t
    return _finish(x, int(h.shape[0]))


def kgram_hashes(hashes: np.ndarray, k: int = DEFAULT_K) -> np.ndarray:
    """Every k-gram value of a token-hash array (one value if shorter than k, none if empty)."""
    _check(k)
    h = np.asarray(hashes, dtype=np.uint64)
    n = h.shape[0]
    if n == 0:
        return np.empty(0, np.int64)
    if n < k:
        return _short_value(h)
    nk = n - k + 1
    if nk <= BLOCK:
        return _kgram_block(h, 0, nk, k)
    return np.concatenate([_kgram_block(h, lo, min(lo + BLOCK, nk), k) for lo in range(0, nk, BLOCK)])


_MIN = np.iinfo(np.int64).min


def _selected(v: np.ndarray, wl: int, nb: int, wr: int, w: int,
              valid: np.ndarray | None = None) -> np.ndarray:
    """Mask over ``v[wl : wl + nb]``: is the k-gram the rightmost minimum of some window?

    ``v`` holds ``wl`` values of left context and ``wr`` of right context (fewer than
    ``w - 1`` only at the ends of the text).  A position is picked by some window iff
    the run of strictly greater values to its right (R) plus the run of greater-or-
    equal values to its left (L), each capped at ``w - 1``, satisfy ``L + R >= w - 1``:
    the window then fits between them.  The set of such positions is exactly the set
    of positions the per-window scan records.  One comparison per distance d serves
    both sides (``v[p-d] >= v[p]`` is ``not v[p] > v[p-d]``), so the cost is ``w - 1``
    comparisons of shifted slices plus cheap boolean algebra, not a minimum per window.

    ``valid`` (aligned with ``v``) marks k-grams that exist: an invalid one ends the
    runs like the end of a text does, so many texts can be winnowed in one pass.
    """
    if w == 1:
        return np.ones(nb, dtype=bool) if valid is None else valid[wl : wl + nb].copy()
    pad_l, pad_r = w - 1 - wl, w - 1 - wr
    if pad_l or pad_r:  # text ends: the minimum sentinel never counts as "greater"
        v = np.concatenate([np.full(pad_l, _MIN, np.int64), v, np.full(pad_r, _MIN, np.int64)])
        if valid is not None:
            valid = np.concatenate([np.zeros(pad_l, bool), valid, np.zeros(pad_r, bool)])
    c0 = w - 1
    pr: list[np.ndarray] = []
    pl: list[np.ndarray] = []
    for d in range(1, w):
        g = v[d:] > v[:-d]
        lt = ~g[c0 - d : c0 - d + nb]
        if valid is None:
            r = g[c0 : c0 + nb]
        else:
            r = g[c0 : c0 + nb] & valid[c0 + d : c0 + d + nb]
            lt &= valid[c0 - d : c0 - d + nb]
        if pad_l and d > wl:
            lt[: d - wl] = False  # no left neighbour at distance d (exact even for _MIN values)
        pr.append(r if d == 1 else pr[-1] & r)
        pl.append(lt if d == 1 else pl[-1] & lt)
    sel = pr[-1] | pl[-1]
    for a in range(1, w - 1):  # a greater values to the right, w-1-a to the left
        sel |= pr[a - 1] & pl[w - 2 - a]
    if valid is not None:
        sel &= valid[c0 : c0 + nb]
    return sel


class _Winnower:
    """Streaming winnowing over token pieces.

    Keeps ``w - 1`` k-grams of left context and every not-yet-decidable token between
    pieces, so the result is identical to winnowing the concatenation.
    """

    def __init__(self, k: int, w: int) -> None:
        self.k, self.w = k, w
        self.h = np.empty(0, np.uint64)
        self.lines = np.empty(0, np.int64)
        self.offs = np.empty(0, np.int64)
        self.base = 0  # global token index of self.h[0]
        self.done = 0  # k-gram positions below this are decided
        self.last_val: int | None = None
        self.last_line = -1
        self.out_v: list[np.ndarray] = []
        self.out_l: list[np.ndarray] = []
        self.out_o: list[np.ndarray] = []

    def feed(self, h: np.ndarray, lines: np.ndarray, offs: np.ndarray) -> None:
        if self.h.shape[0]:
            h = np.concatenate([self.h, h])
            lines = np.concatenate([self.lines, lines])
            offs = np.concatenate([self.offs, offs])
        self.h, self.lines, self.offs = h, lines, offs
        nk_avail = self.base + h.shape[0] - self.k + 1
        self._decide(nk_avail - (self.w - 1), nk_avail)
        keep_from = max(0, self.done - (self.w - 1)) - self.base
        if keep_from > 0:
            self.h, self.lines, self.offs = h[keep_from:], lines[keep_from:], offs[keep_from:]
            self.base += keep_from

    def _decide(self, until: int, nk: int) -> None:
        """Decide k-gram positions [done, until); ``nk`` k-grams exist so far."""
        k, w, h, base = self.k, self.w, self.h, self.base
        for lo in range(self.done, until, BLOCK):
            hi = min(lo + BLOCK, until)
            wl = min(w - 1, lo)
            wr = min(w - 1, nk - hi)
            v = _kgram_block(h, lo - wl - base, hi + wr - base, k)
            sel = np.flatnonzero(_selected(v, wl, hi - lo, wr, w))
            if not sel.shape[0]:
                continue
            vals = v[sel + wl]
            sel += lo - base
            ln = self.lines[sel]
            # merge consecutive repeats of (value, line): no information for postings
            dup = np.empty(sel.shape[0], dtype=bool)
            dup[0] = vals[0] == self.last_val and ln[0] == self.last_line
            np.logical_and(vals[1:] == vals[:-1], ln[1:] == ln[:-1], out=dup[1:])
            self.last_val, self.last_line = int(vals[-1]), int(ln[-1])
            if dup.any():
                keep = ~dup
                vals, sel, ln = vals[keep], sel[keep], ln[keep]
            self.out_v.append(vals)
            self.out_l.append(ln)
            self.out_o.append(self.offs[sel])
        self.done = max(self.done, until)

    def finish(self) -> Fingerprints:
        ntok = self.base + self.h.shape[0]
        nk = ntok - self.k + 1
        if ntok == 0:
            return _empty()
        if nk < self.w:
            # fewer than w k-grams in the whole text (nothing decided yet, base == 0):
            # one window, or one short value
            h = self.h
            if nk < 1:
                vals, pos = _short_value(h), 0
            else:
                kg = _kgram_block(h, 0, nk, self.k)
                pos = nk - 1 - int(np.argmin(kg[::-1]))
                vals = kg[pos : pos + 1].copy()
            return Fingerprints(vals, self.lines[pos : pos + 1].astype(np.int32), self.offs[pos : pos + 1].copy())
        self._decide(nk, nk)
        if not self.out_v:
            return _empty()
        if len(self.out_v) == 1:
            return Fingerprints(self.out_v[0], self.out_l[0].astype(np.int32), self.out_o[0])
        return Fingerprints(np.concatenate(self.out_v), np.concatenate(self.out_l).astype(np.int32),
                            np.concatenate(self.out_o))


def winnow_positions(values: np.ndarray, w: int = DEFAULT_W) -> np.ndarray:
    """Positions selected by winnowing an arbitrary int64 array (for tests and tuning)."""
    _check(1, w)
    v = np.asarray(values, dtype=np.int64)
    n = v.shape[0]
    if n == 0:
        return np.empty(0, np.int64)
    if n < w:
        return np.array([n - 1 - int(np.argmin(v[::-1]))], dtype=np.int64)
    return np.flatnonzero(_selected(v, 0, n, 0, w))


def winnowed_values(kgrams: np.ndarray, w: int = DEFAULT_W) -> np.ndarray:
    """Sorted distinct winnowed values of a text, from every k-gram value of it in text order
    (`kgram_fingerprints`): the set `fingerprint_set` gives, without hashing the tokens again.

    A query needs both sets of its span; winnowing the k-grams it already has takes a tenth of
    the streaming winnower's time on a 20-line span."""
    return arrays.unique(kgrams[winnow_positions(kgrams, w)])


def fingerprints_from_tokens(tokens: Tokens, k: int = DEFAULT_K, w: int = DEFAULT_W) -> Fingerprints:
    """Winnowed fingerprints of already tokenized text (tokenize once, try several k/w)."""
    _check(k, w)
    win = _Winnower(k, w)
    if len(tokens):
        win.feed(tokens.hashes, tokens.lines.astype(np.int64), tokens.offsets)
    return win.finish()


def fingerprints_bytes(data: bytes, k: int = DEFAULT_K, w: int = DEFAULT_W, *,
                       chunk: int = CHUNK_BYTES) -> Fingerprints:
    """Winnowed fingerprints of UTF-8 bytes, streamed piece by piece (the fast path for
    whole tapes: no text-sized token arrays are ever built)."""
    _check(k, w)
    win = _Winnower(k, w)
    for h, lines, offs in iter_token_chunks(data, chunk):
        win.feed(h, lines, offs)
    return win.finish()


def fingerprints(text: str, k: int = DEFAULT_K, w: int = DEFAULT_W) -> Fingerprints:
    """Winnowed fingerprints of ``text`` with the line of each, in text order."""
    return fingerprints_bytes(text.encode("utf-8", "surrogatepass"), k, w)


@dataclass(frozen=True)
class BatchFingerprints:
    """Fingerprints of many texts, flat and in input order: row i belongs to
    ``texts[text[i]]``; ``lines``/``offsets`` are relative to that text."""

    values: np.ndarray  # int64
    lines: np.ndarray  # int32
    offsets: np.ndarray  # int64
    text: np.ndarray  # int32, non-decreasing

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def of(self, i: int) -> Fingerprints:
        """The rows of text ``i``, as ``fingerprints(texts[i])`` would return them."""
        lo, hi = np.searchsorted(self.text, [i, i + 1])
        return Fingerprints(self.values[lo:hi], self.lines[lo:hi], self.offsets[lo:hi])


#: Small texts are fingerprinted together in groups of about this many bytes.
GROUP_BYTES = CHUNK_BYTES


def text_groups(texts: Sequence[str], joint: int) -> Iterator[tuple[list[int], list[bytes], bool]]:
    """The texts as UTF-8, in order, in groups of about GROUP_BYTES: `(indices, datas, large)`.

    One vector pass per group instead of one per text, whose fixed numpy cost dominates for the
    thousands of small events of a tape. A text larger than a group comes alone with `large`
    set, for the caller to stream. `joint` is what the caller puts between two texts of a group,
    counted in its size."""
    ids: list[int] = []
    datas: list[bytes] = []
    size = 0
    for i, text in enumerate(texts):
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > GROUP_BYTES:
            if datas:
                yield ids, datas, False
                ids, datas, size = [], [], 0
            yield [i], [data], True
            continue
        ids.append(i)
        datas.append(data)
        size += len(data) + joint
        if size >= GROUP_BYTES:
            yield ids, datas, False
            ids, datas, size = [], [], 0
    if datas:
        yield ids, datas, False


def _group(datas: list[bytes], k: int, w: int) -> tuple[np.ndarray, ...]:
    """(values, lines, offsets, text) of a group of small texts, in one vector pass.

    The texts are joined with a line holding one punctuation token (so each text
    starts a line, as ``cat -n`` detection needs, and no token spans two texts); every
    k-gram touching that token or two texts is invalid, which ends a text's windows
    exactly as the end of the text would -- also for k = 1.
    """
    sep = b"\n~\n"
    lens = np.fromiter((len(d) for d in datas), dtype=np.int64, count=len(datas))
    starts = np.cumsum(lens + len(sep)) - (lens + len(sep))
    nls = np.fromiter((d.count(b"\n") for d in datas), dtype=np.int64, count=len(datas))
    line0 = np.cumsum(nls + 2) - (nls + 2)
    joined = sep.join(datas)
    parts = list(iter_token_chunks(joined, len(joined) + 1))
    if not parts:
        return _no_rows()
    h, lines, offs = parts[0]
    first = np.searchsorted(offs, starts)
    cnt = np.searchsorted(offs, starts + lens) - first
    doc = np.searchsorted(starts, offs, side="right") - 1
    doc[offs >= (starts + lens)[doc]] = -1  # the separator tokens
    pos_parts: list[np.ndarray] = []
    val_parts: list[np.ndarray] = []
    ntok = h.shape[0]
    if ntok >= k:
        nk = ntok - k + 1
        v = _kgram_block(h, 0, nk, k)
        valid = (doc[:nk] == doc[k - 1 :]) & (doc[:nk] >= 0)
        sel = np.flatnonzero(_selected(v, 0, nk, 0, w, valid))
        pos_parts.append(sel)
        val_parts.append(v[sel])
        # texts with fewer than w k-grams: the rightmost minimum of their only window
        few = np.flatnonzero((cnt >= k) & (cnt - k + 1 < w))
        if few.size:
            nkf = cnt[few] - k + 1
            best_pos = first[few].copy()
            best_val = v[best_pos]
            for j in range(1, w - 1):
                cand = first[few] + j
                ok = j < nkf
                cv = v[np.minimum(cand, nk - 1)]
                better = ok & (cv <= best_val)
                best_pos = np.where(better, cand, best_pos)
                best_val = np.where(better, cv, best_val)
            pos_parts.append(best_pos)
            val_parts.append(best_val)
    short = np.flatnonzero((cnt > 0) & (cnt < k))
    if short.size:  # texts shorter than k tokens: one value over all their tokens
        x = np.zeros(short.shape[0], dtype=np.uint64)
        for j in range(k - 1):
            take = j < cnt[short]
            t = h[np.minimum(first[short] + j, ntok - 1)]
            x = np.where(take, x * Q_KGRAM + t, x)
        vals = np.empty(short.shape[0], dtype=np.int64)
        for m in arrays.unique(cnt[short]):  # the length term differs per token count
            sel_m = cnt[short] == m
            vals[sel_m] = _finish(x[sel_m].copy(), int(m))
        pos_parts.append(first[short])
        val_parts.append(vals)
    if not pos_parts:
        return _no_rows()
    pos = np.concatenate(pos_parts)
    vals = np.concatenate(val_parts)
    if len(pos_parts) > 1:
        order = np.argsort(pos, kind="stable")
        pos, vals = pos[order], vals[order]
    d = doc[pos]
    ln = lines[pos] - line0[d]
    if pos.shape[0] > 1:
        keep = np.ones(pos.shape[0], dtype=bool)
        keep[1:] = (vals[1:] != vals[:-1]) | (ln[1:] != ln[:-1]) | (d[1:] != d[:-1])
        pos, vals, d, ln = pos[keep], vals[keep], d[keep], ln[keep]
    return vals, ln, offs[pos] - starts[d], d


def _no_rows() -> tuple[np.ndarray, ...]:
    return (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))


def fingerprints_many(texts: Sequence[str], k: int = DEFAULT_K, w: int = DEFAULT_W) -> BatchFingerprints:
    """Fingerprints of every text, identical to calling ``fingerprints`` on each.

    Why: a tape has thousands of small events and one ``fingerprints`` call costs a
    fixed ~100 us of numpy overhead; grouping small texts into one vector pass makes
    the per-event cost proportional to its size.  Texts larger than a group are
    streamed on their own.
    """
    _check(k, w)
    out: list[tuple[np.ndarray, ...]] = []
    for ids, datas, large in text_groups(texts, joint=1):
        if large:
            fp = fingerprints_bytes(datas[0], k, w)
            out.append((fp.values, fp.lines, fp.offsets, np.full(len(fp), ids[0], dtype=np.int64)))
        else:
            vals, ln, offs, d = _group(datas, k, w)
            out.append((vals, ln, offs, np.asarray(ids, dtype=np.int64)[d]))
    if not out:
        return BatchFingerprints(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int64),
                                 np.empty(0, np.int32))
    return BatchFingerprints(
        np.concatenate([o[0] for o in out]),
        np.concatenate([o[1] for o in out]).astype(np.int32),
        np.concatenate([o[2] for o in out]),
        np.concatenate([o[3] for o in out]).astype(np.int32),
    )


def fingerprints_by_line(text: str, k: int = DEFAULT_K, w: int = DEFAULT_W) -> tuple[np.ndarray, np.ndarray]:
    """(values, 0-based lines): the shape postings are stored in."""
    fp = fingerprints(text, k, w)
    return fp.values, fp.lines


def fingerprint_set(text: str, k: int = DEFAULT_K, w: int = DEFAULT_W) -> np.ndarray:
    """Sorted unique winnowed values: what similarity and containment compare."""
    return arrays.unique(fingerprints(text, k, w).values)


def kgram_fingerprints(text: str, k: int = DEFAULT_K) -> Fingerprints:
    """Every k-gram (not winnowed) with its line: a query span is small, so matching all
    its k-grams against the index finds any indexed fingerprint inside it, even where
    the span's own windows would have selected different ones."""
    return kgram_fingerprints_from_tokens(tokenize(text), k)


def kgram_fingerprints_from_tokens(tokens: Tokens, k: int = DEFAULT_K) -> Fingerprints:
    """`kgram_fingerprints` of already tokenized text (a query also winnows the same tokens)."""
    _check(k)
    n = len(tokens)
    if n == 0:
        return _empty()
    if n < k:
        return Fingerprints(_short_value(tokens.hashes), tokens.lines[:1].copy(), tokens.offsets[:1].copy())
    return Fingerprints(kgram_hashes(tokens.hashes, k), tokens.lines[: n - k + 1].copy(),
                        tokens.offsets[: n - k + 1].copy())


def all_kgrams(text: str, k: int = DEFAULT_K) -> np.ndarray:
    """Every k-gram value of ``text`` in text order (not winnowed, may repeat)."""
    return kgram_hashes(tokenize(text).hashes, k)
