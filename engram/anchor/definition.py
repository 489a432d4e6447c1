"""The fingerprint definition in plain Python: its constants, and a per-token implementation.

`tokens.py` and `winnow.py` document the definition and implement it with numpy, which is what
lets a tape be fingerprinted at tens of MB/s. A command-line query fingerprints one span of a
few hundred tokens, for which importing numpy (50-100 ms on this machine) costs far more than the
work: `engram.query.direct` fingerprints such spans here instead. The constants live here so that
both implementations read the same numbers, and `tests/test_anchor.py` holds both to the
documented definition (a stored fingerprint must be the same bit for bit whichever one made it).

This module must not import numpy.
"""

from __future__ import annotations

import re
from typing import Final

#: Tokens per k-gram and k-grams per winnowing window (`bench/provenance.py` chose them).
DEFAULT_K: Final = 4
DEFAULT_W: Final = 3
#: Longest ``cat -n`` prefix (spaces + digits, without the arrow/tab) that is blanked.
MAX_PREFIX: Final = 16

P_WORD: Final = 0x9E3779B97F4A7C15  # polynomial base over a token's 8-byte words
C_TOK: Final = 0x165667B19E3779F9  # token multiplier
Q_KGRAM: Final = 0xD6E8FEB86659FD93  # polynomial base over a k-gram's token hashes
C_CNT: Final = 0x9E3779B97F4A7C15  # times the number of tokens in the k-gram
M1: Final = 0xBF58476D1CE4E5B9  # splitmix64's finaliser
M2: Final = 0x94D049BB133111EB
_M64: Final = (1 << 64) - 1

_PREFIX = re.compile(rb"(?m)^( *[0-9]+)(?:\xe2\x86\x92|\t)")
_TOKEN = re.compile(rb"[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*|[0-9][0-9A-Za-z_.\x80-\xff]*|[^\x00-\x20\x7f]")
_word_powers: list[int] = [1]


def _blank(m: re.Match[bytes]) -> bytes:
    return b" " * (m.end() - m.start()) if len(m.group(1)) <= MAX_PREFIX else m.group()


def token_hash(token: bytes) -> int:
    """The hash of one token (unsigned 64-bit)."""
    while len(_word_powers) * 8 < len(token):
        _word_powers.append(_word_powers[-1] * P_WORD & _M64)
    acc = 0
    for j in range(0, len(token), 8):
        acc += int.from_bytes(token[j:j + 8], "little") * _word_powers[j >> 3]
    t = (acc & _M64) * C_TOK & _M64
    return t ^ (t >> 32)


def token_hashes(text: str) -> list[int]:
    """The hash of each token of `text`, in text order (`tokenize(text).hashes`)."""
    data = _PREFIX.sub(_blank, text.encode("utf-8", "surrogatepass"))
    return [token_hash(m) for m in _TOKEN.findall(data)]


def _finish(x: int, m: int) -> int:
    x = (x + m * C_CNT) & _M64
    x ^= x >> 30
    x = x * M1 & _M64
    x ^= x >> 27
    x = x * M2 & _M64
    x ^= x >> 31
    return x - (1 << 64) if x >> 63 else x


def kgram_values(hashes: list[int], k: int = DEFAULT_K) -> list[int]:
    """Every k-gram value (signed 64-bit) in text order; one value over all tokens of a text
    shorter than k, none for no tokens (`kgram_fingerprints(text, k).values`)."""
    if not hashes:
        return []
    if len(hashes) < k:
        x = 0
        for h in hashes:
            x = (x * Q_KGRAM + h) & _M64
        return [_finish(x, len(hashes))]
    top = pow(Q_KGRAM, k, 1 << 64)  # rolling: drop the token leaving the k-gram
    x = 0
    for h in hashes[:k]:
        x = (x * Q_KGRAM + h) & _M64
    out = [_finish(x, k)]
    for i in range(k, len(hashes)):
        x = (x * Q_KGRAM + hashes[i] - hashes[i - k] * top) & _M64
        out.append(_finish(x, k))
    return out


def winnowed(kgrams: list[int], w: int = DEFAULT_W) -> set[int]:
    """The values winnowing keeps: the minimum of every window of w k-grams, or of all of them
    when there are fewer (`winnowed_values(kgrams, w)`, as a set)."""
    if not kgrams:
        return set()
    if len(kgrams) <= w:
        return {min(kgrams)}
    return {min(kgrams[i:i + w]) for i in range(len(kgrams) - w + 1)}
