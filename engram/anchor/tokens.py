"""Language-agnostic tokenizer over UTF-8 bytes, vectorised with numpy.

Why bytes and not `str`: classifying and hashing a numpy ``uint8`` array costs a few
vector operations per chunk instead of one Python call per character, which is what
lets all tape text of a session be fingerprinted at tens of MB/s on one core.

Token definition (the regex-equivalent spec; ``tests/test_anchor.py`` checks the
vectorised code against exactly this, written as a slow per-token reference):

* whitespace = every byte ``<= 0x20`` plus ``0x7f`` (control bytes such as the ESC of
  ANSI colour codes separate tokens, they are never tokens);
* identifier = ``[A-Za-z_\\x80-\\xff][A-Za-z0-9_\\x80-\\xff]*`` -- every byte ``>= 0x80``
  of the UTF-8 encoding counts as a letter, so ``naïve`` or ``变量`` stay one token;
* number = ``[0-9][0-9A-Za-z_.\\x80-\\xff]*`` (``3.14``, ``0x1F``, ``1.2.3``; but ``v2.1`` is ``v2 . 1``);
* any other byte is a one-byte punctuation token.

Before tokenizing, a ``cat -n`` style prefix at the start of a line -- optional spaces,
1+ digits, then ``→`` (U+2192, Claude Code's Read tool) or a tab (``cat -n``,
``nl -ba``) -- is blanked, so code quoted in a Read result fingerprints exactly like
the code itself.  The prefix (spaces + digits) may be at most ``MAX_PREFIX`` bytes.

Token hash (all arithmetic on uint64, mod 2**64): split the token's bytes into
little-endian 8-byte words ``w_0 .. w_{m-1}`` (the last one zero-padded),
``acc = sum(w_j * P**j)``, ``t = acc * C_TOK``, ``t ^= t >> 32``.  No token contains a
NUL byte (it is whitespace), so the padded words determine the token, and tokens of up
to 8 bytes never collide.  Not xxh3: xxh3 over variable-length inputs cannot be
applied per token without a Python call per token, and the k-gram stage finalises
with a full avalanche mix anyway (see ``winnow.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from engram.anchor import definition

log = logging.getLogger(__name__)

__all__ = ["Tokens", "tokenize", "tokenize_bytes", "iter_token_chunks", "MAX_PREFIX", "CHUNK_BYTES"]

#: Longest ``cat -n`` prefix (spaces + digits, without the arrow/tab) that is blanked
#: (``definition.MAX_PREFIX``). ``cat -n`` and Claude Code pad to 6 columns; 16 leaves room
#: for longer numbers and other tools while keeping the check to two 8-byte words.
MAX_PREFIX = definition.MAX_PREFIX

#: Text is tokenized in pieces of about this many bytes, cut after a newline, so that
#: every temporary array stays in CPU cache (whole-text arrays of 50 MB spend more time
#: in page faults than in arithmetic).
CHUNK_BYTES = 1 << 18

_U64 = np.uint64
P_WORD = _U64(definition.P_WORD)  # polynomial base over 8-byte words
C_TOK = _U64(definition.C_TOK)  # token multiplier
_SH32 = _U64(32)

_WS, _ID, _PU = 0, 1, 2
_CLASS = np.full(256, _PU, dtype=np.uint8)
_CLASS[: 0x21] = _WS
_CLASS[0x7F] = _WS
for _lo, _hi in ((ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("a"), ord("z")), (0x80, 0xFF)):
    _CLASS[_lo : _hi + 1] = _ID
_CLASS[ord("_")] = _ID
del _lo, _hi
_CLASS_TABLE = _CLASS.tobytes()  # bytes.translate: the fastest byte -> class map in CPython

_NL, _TAB, _DOT, _ZERO = 0x0A, 0x09, 0x2E, 0x30  # arrow U+2192 is E2 86 92 in UTF-8

_pow_cache = np.ones(1, dtype=np.uint64)


@dataclass(frozen=True)
class Tokens:
    """Tokens of one text, in text order.

    ``lines`` are 0-based (number of ``\\n`` before the token), ``offsets`` are byte
    offsets into ``text.encode("utf-8", "surrogatepass")`` -- bytes, not characters,
    because that is what the vectorised tokenizer sees and what seekable tapes store.
    """

    hashes: np.ndarray  # uint64
    lines: np.ndarray  # int32
    offsets: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.hashes.shape[0])


def _powers(n: int) -> np.ndarray:
    """P_WORD**j for j < n, grown on demand (a token of 100 KB needs 12 500 powers)."""
    global _pow_cache
    if _pow_cache.shape[0] < n:
        size = max(n, 2 * _pow_cache.shape[0], 64)
        p = np.full(size, P_WORD, dtype=np.uint64)
        p[0] = 1
        _pow_cache = np.cumprod(p, dtype=np.uint64)  # wraps mod 2**64, as intended
    return _pow_cache[:n]


def _words(buf: np.ndarray) -> np.ndarray:
    """Little-endian uint64 starting at every byte of ``buf`` (which has 8 zero bytes
    of padding at the end): an unaligned strided view, so reading a token's first word
    is one gather instead of eight."""
    return np.ndarray((buf.shape[0] - 7,), dtype="<u8", buffer=buf, strides=(1,))


_H = _U64(0x8080808080808080)
_L7 = _U64(0x7F7F7F7F7F7F7F7F)
_ASCII0 = _U64(0x3030303030303030)
_X10 = _U64(0x1010101010101010)
_ADD76 = _U64(0x7676767676767676)
_S8, _S56 = _U64(8), _U64(56)


def _spaces_then_digits(w1: np.ndarray, w2: np.ndarray, plen: np.ndarray) -> np.ndarray:
    """Do the first ``plen`` (<= 16) bytes, given as two little-endian words, match ``' *[0-9]+'``?

    SWAR: each 8-byte word is tested lane by lane with adds and masks (bit 7 of a lane
    carries the answer), a dozen operations on a few thousand words instead of 2-D
    byte arrays.  Bytes past ``plen`` are replaced by ``'0'`` so they always pass.
    """
    n1 = np.minimum(plen, 8)
    n2 = np.clip(plen - 8, 0, 8)
    bad = np.zeros(plen.shape[0], dtype=np.uint64)
    digs, sps = [], []
    for w, keep in ((w1, np.take(_LOW, n1)), (w2, np.take(_LOW, n2))):
        w = (w & keep) | (_ASCII0 & ~keep)
        y = w ^ _ASCII0  # digits -> 0x00..0x09, space -> 0x10
        nondig = (((y & _L7) + _ADD76) | y) & _H  # no carries: lanes are masked to 7 bits
        z = y ^ _X10  # space -> 0x00
        nonsp = (((z & _L7) + _L7) | z) & _H
        bad |= nondig & nonsp
        dig, sp = nondig ^ _H, nonsp ^ _H
        bad |= (dig << _S8) & sp  # a space right after a digit
        digs.append(dig)
        sps.append(sp)
    bad |= (digs[0] >> _S56) & sps[1]  # digit in byte 7, space in byte 8
    return bad == 0


def _blank_line_numbers(buf: np.ndarray, cls: np.ndarray, n: int, nl: np.ndarray,
                        at_line_start: bool) -> np.ndarray:
    """``cls`` with ``cat -n`` prefixes reclassified as whitespace (copied if changed).

    Works from the (few) arrow/tab bytes backwards to their line start rather than from
    every line start forwards: candidates are far rarer than lines in most text.  The
    prefix is read as two little-endian words and checked lane-wise (SWAR), so
    the cost per candidate line is a handful of vector operations, not 16 byte reads.
    Only the classes change, never the bytes: a blanked byte is whitespace, so it is
    never part of a token's hash.
    """
    body = buf[:n]
    arrows = np.flatnonzero(body == 0x92) - 2
    if arrows.size:
        arrows = arrows[arrows >= 0]
        arrows = arrows[(buf[arrows] == 0xE2) & (buf[arrows + 1] == 0x86)]
    tabs = np.flatnonzero(body == _TAB)
    if not arrows.size and not tabs.size:
        return cls
    marks = np.concatenate([arrows, tabs]) if tabs.size else arrows
    idx = np.searchsorted(nl, marks)
    ls = np.concatenate([[-1], nl])[idx] + 1
    if not at_line_start:
        ls[idx == 0] = -(MAX_PREFIX + 1)  # the line began in an earlier piece: no prefix here
    plen = marks - ls
    ok = (plen >= 1) & (plen <= MAX_PREFIX)
    ok &= (buf[np.maximum(marks - 1, 0)] - np.uint8(_ZERO)) < 10
    if not ok.all():
        if not ok.any():
            return cls
        marks, ls, plen = marks[ok], ls[ok], plen[ok]
    words = _words(buf)
    w1 = words[ls]
    w2 = words[np.minimum(ls + 8, n)]
    ok = _spaces_then_digits(w1, w2, plen)
    if not ok.any():
        return cls
    ls = ls[ok]
    mlen = np.where(buf[marks[ok]] == _TAB, 1, 3)
    lens = marks[ok] + mlen - ls
    starts_excl = np.cumsum(lens) - lens
    fill = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(ls - starts_excl, lens)
    if not cls.flags.writeable:
        cls = cls.copy()
    cls[fill] = _WS
    return cls


def _numbers(cls: np.ndarray, bounds: np.ndarray, first: np.ndarray, n: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run starts swallowed by numbers, so ``1 . 5`` becomes the one token ``1.5``.

    ``bounds`` are the starts of class runs (every punctuation byte its own run),
    ``first`` their first bytes.  A number absorbs every run glued to it up to
    whitespace or punctuation other than a dot.  Only dots glue runs (identifier runs
    are maximal), so all the work is over the dots -- sparse.  Returns (absorbed run
    indices, number run indices, run index whose start is each number's new end), the
    last two aligned.
    """
    none = np.empty(0, dtype=np.int64)
    td = np.flatnonzero(first == _DOT)  # run index of every dot
    if not td.size:
        return none, none, none
    dots = bounds[td]
    glued_w = cls[np.maximum(dots - 1, 0)] == _ID
    glued_w[0] &= dots[0] > 0
    # a number run right before the dot (if glued_w, run td-1 is that identifier/number run)
    num_left = glued_w & ((first[np.maximum(td - 1, 0)] - np.uint8(_ZERO)) < 10)
    if not num_left.any():
        return none, none, none
    right_w = cls[np.minimum(dots + 1, n - 1)] == _ID
    right_w[-1] &= dots[-1] + 1 < n
    connected = np.zeros(td.shape[0], dtype=bool)  # dot i and dot i+1 in one glued run
    gap = td[1:] - td[:-1]  # 1: adjacent dots; 2: one run between them
    connected[:-1] = (gap == 1) | ((gap == 2) & right_w[:-1])
    start = np.ones(td.shape[0], dtype=bool)
    start[1:] = ~connected[:-1]
    cs = np.cumsum(num_left)
    head = np.maximum.accumulate(np.where(start, np.arange(td.shape[0]), 0))
    seen = cs - (cs[head] - num_left[head])  # number starts so far in this chain
    absorbed = seen > 0
    runs = np.concatenate([td[absorbed], td[absorbed & right_w] + 1])
    first_num = num_left & (seen == 1)
    last = absorbed & ~connected
    return runs, td[first_num] - 1, td[last] + right_w[last] + 1


_DIRECT_WORDS = 3
_LOW = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _hash(buf: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Token hashes as defined in the module docstring."""
    # one contiguous copy of the unaligned words: gathering from the strided view
    # directly is 2-5x slower (numpy buffers or copies unaligned data per call)
    words = np.ascontiguousarray(_words(buf)[: int(e[-1]) if e.shape[0] else 0])
    length = e - s
    acc = words[s]
    acc &= np.take(_LOW, np.minimum(length, 8))
    sub = np.flatnonzero(length > 8)
    j = 1
    # words 1..4 of the (few) longer tokens, one shrinking subset per word
    while sub.shape[0] and j <= _DIRECT_WORDS:
        at = s[sub] + 8 * j
        rem = e[sub] - at
        w = words[at]
        w &= np.take(_LOW, np.minimum(rem, 8))
        w *= _powers(j + 1)[j]
        acc[sub] += w
        sub = sub[rem > 8]
        j += 1
    if sub.shape[0]:  # very long tokens (paths, base64): all remaining words at once
        nw = ((e[sub] - s[sub] - 1) >> 3) - (j - 1)  # words from index j on
        firsts = np.cumsum(nw) - nw
        jj = np.arange(int(nw.sum()), dtype=np.int64) - np.repeat(firsts - j, nw)
        at = np.repeat(s[sub], nw) + 8 * jj
        rem = np.repeat(e[sub], nw) - at
        w = words[at]
        w &= np.take(_LOW, np.minimum(rem, 8))
        w *= _powers(int(jj.max()) + 1)[jj]
        acc[sub] += np.add.reduceat(w, firsts)
    acc *= C_TOK
    acc ^= acc >> _SH32
    return acc


def _tokenize_chunk(buf: np.ndarray, cls: np.ndarray, n: int, at_line_start: bool
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(hashes, local lines, local byte offsets, newline count) of ``buf[:n]``.

    ``buf`` has at least 8 readable bytes past ``n`` (token words are read whole and
    masked); ``cls`` is the byte class of ``buf[:n]``.
    """
    body = buf[:n]
    nl = np.flatnonzero(body == _NL)
    cls = _blank_line_numbers(buf, cls, n, nl, at_line_start)
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.not_equal(cls[1:], cls[:-1], out=change[1:])
    change |= cls == _PU
    bounds = np.flatnonzero(change)
    is_tok = np.take(cls, bounds) != _WS
    absorbed, num_runs, end_runs = _numbers(cls, bounds, np.take(body, bounds), n)
    if absorbed.size:
        is_tok[absorbed] = False
    ti = np.flatnonzero(is_tok)
    s = np.take(bounds, ti)
    nb = bounds.shape[0]
    ti += 1
    e = np.take(bounds, ti, mode="clip")  # no np.append copy of bounds: fix the end below
    if ti.shape[0] and ti[-1] == nb:
        e[-1] = n
    if num_runs.size:
        e[np.searchsorted(ti, num_runs + 1)] = np.where(end_runs < nb, bounds[np.minimum(end_runs, nb - 1)], n)
    hashes = _hash(buf, s, e)
    if nl.size:
        first_after = np.searchsorted(s, nl)
        lines = np.cumsum(np.bincount(first_after, minlength=s.shape[0] + 1)[: s.shape[0]])
    else:
        lines = np.zeros(s.shape[0], dtype=np.int64)
    return hashes, lines, s, int(nl.shape[0])


def _chunk_bounds(data: bytes, chunk: int) -> list[tuple[int, int, bool]]:
    """Cut points after a newline (or, on a very long line, after a space).

    Cutting only at whitespace keeps every token whole; cutting at a newline keeps the
    ``cat -n`` detection line-based.  A space cut is never placed within the first
    ``MAX_PREFIX + 3`` bytes of a line, so no prefix is ever split between pieces.
    Searches look at most ``4 * chunk`` bytes ahead at a time, so a 50 MB line without
    spaces costs one pass, not one pass per piece.  (start, end, starts_a_line) triples.
    """
    n = len(data)
    out: list[tuple[int, int, bool]] = []
    start, at_line = 0, True
    while start < n:
        target = start + chunk
        if target >= n:
            out.append((start, n, at_line))
            break
        # only a line that began just before `target` can have its prefix split
        lo = max(start, target - MAX_PREFIX - 4)
        q = data.rfind(b"\n", lo, target)
        line_start = q + 1 if q >= 0 else (start if at_line and lo == start else -1)
        pos, cut, cut_line = target, -1, True
        while cut < 0 and pos < n:
            hi = min(n, pos + 4 * chunk)
            cut, cut_line = data.find(b"\n", pos, hi), True
            if cut < 0:
                from_ = max(pos, line_start + MAX_PREFIX + 3) if line_start >= 0 else pos
                cut, cut_line = data.find(b" ", from_, hi), False
            pos = hi
        if cut < 0:
            out.append((start, n, at_line))
            break
        out.append((start, cut + 1, at_line))
        start, at_line = cut + 1, cut_line
    return out


def iter_token_chunks(data: bytes, chunk: int = CHUNK_BYTES
                      ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(hashes, lines, byte offsets) of ``data``, one cache-sized piece at a time.

    Fingerprinting consumes these pieces directly, so a 50 MB tape never materialises
    whole-text token arrays (page faults on fresh 100 MB arrays cost more than the
    hashing itself).  Lines and offsets are already global.
    """
    n = len(data)
    if n == 0:
        return
    line_base = 0
    for start, end, at_line in _chunk_bounds(data, chunk):
        m = end - start
        piece = data[start:end]
        if end + 8 <= n:  # the next piece's bytes serve as padding: no copy
            buf = np.frombuffer(data, dtype=np.uint8, count=m + 8, offset=start)
        else:
            buf = np.frombuffer(piece + bytes(8), dtype=np.uint8)
        cls = np.frombuffer(piece.translate(_CLASS_TABLE), dtype=np.uint8)
        h, lines, offs, n_nl = _tokenize_chunk(buf, cls, m, at_line)
        if h.shape[0]:
            if line_base:
                lines += line_base
            if start:
                offs += start
            yield h, lines, offs
        line_base += n_nl


def tokenize_bytes(data: bytes, chunk: int = CHUNK_BYTES) -> Tokens:
    """Tokens of UTF-8 ``data`` (see the module docstring for the definition)."""
    parts = list(iter_token_chunks(data, chunk))
    if not parts:
        return Tokens(np.empty(0, np.uint64), np.empty(0, np.int32), np.empty(0, np.int64))
    if len(parts) == 1:
        h, lines, offs = parts[0]
        return Tokens(h, lines.astype(np.int32), offs)
    return Tokens(
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]).astype(np.int32),
        np.concatenate([p[2] for p in parts]),
    )


def tokenize(text: str) -> Tokens:
    """Tokens of ``text``; lone surrogates (seen in real transcripts) are kept, not an error."""
    return tokenize_bytes(text.encode("utf-8", "surrogatepass"))
