"""What a query needs to know about the index before reading postings, in one statement.

A warm explain at 1 GB takes about a millisecond; reading the fingerprint parameters, the
index epoch, the stop-list generation, the segment list and whether any agent links (or
subagents' tapes) exist as separate statements cost ~5% of it each. Reading them together also
gives the query one consistent view of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import apsw

from engram.anchor.definition import DEFAULT_K, DEFAULT_W
from engram.index.kinds import KIND_NO
from engram.index.layout import BUCKET_BITS
from engram.tape import events as E

# Bump when the tokenizer or hash definitions in engram/anchor change: stored fingerprints
# depend on them bit for bit, and an index built with other definitions must be rebuilt.
ANCHOR_VERSION: Final = 1

PARAMS: Final = ("k", "w", "anchor", "bucket_bits")  # what the stored fingerprints depend on
_PARAMS_SQL: Final = f"SELECT key, value FROM state WHERE key IN ({','.join(repr(k) for k in PARAMS)})"
_SQL: Final = (f"SELECT key, value, NULL FROM state WHERE key IN "
               f"({','.join(repr(k) for k in (*PARAMS, 'epoch', 'stoplist_gen'))})"
               " UNION ALL SELECT 'seg', seg, postings FROM segments"
               f" UNION ALL SELECT 'links', EXISTS(SELECT 1 FROM fragments WHERE kind = {KIND_NO[E.SPAN_LINK]}), NULL"
               " UNION ALL SELECT 'subagents', EXISTS(SELECT 1 FROM subagents), NULL")


@dataclass(frozen=True)
class Snapshot:
    k: int
    w: int
    epoch: str  # see memo.new_epoch
    stoplist_gen: int
    segs: tuple[int, ...]  # posting segments, ascending
    # Whether any agent link (span.link) is indexed: most stores have none, and a query then
    # skips looking for links on its span (a join that cost ~4% of a warm explain).
    links: bool = True
    seg_postings: tuple[int, ...] = ()  # postings in each of `segs`
    # Whether any tape is a subagent's: in most stores none is, and a query then skips asking
    # whether its matches hold a reviewer's copy of its parent (`copies.quoting_reviews`).
    subagents: bool = True


def read(db: apsw.Connection) -> Snapshot:
    got: dict[str, Any] = {}
    segs: list[tuple[int, int]] = []
    for key, value, extra in db.execute(_SQL):
        if key == "seg":
            segs.append((int(value), int(extra)))
        else:
            got[key] = value
    k, w = _params(got)
    segs.sort()
    return Snapshot(k, w, str(got.get("epoch", "")), int(got.get("stoplist_gen", 0)), tuple(s for s, _ in segs),
                    bool(got.get("links", 1)), tuple(n for _, n in segs), bool(got.get("subagents", 1)))


def stored_params(db: apsw.Connection) -> dict[str, Any]:
    """The PARAMS the index recorded when it was first filled (empty for a new index)."""
    return dict(db.execute(_PARAMS_SQL).fetchall())


def index_params(db: apsw.Connection) -> tuple[int, int]:
    """The (k, w) the index was built with; the anchor defaults for an empty index."""
    return _params(stored_params(db))


def _params(got: dict[str, Any]) -> tuple[int, int]:
    """Refuses an index whose fingerprint definition or bucket layout differs from this engram's:
    its postings would be read wrongly, silently."""
    if "k" in got and "w" in got:
        if int(got.get("anchor", -1)) != ANCHOR_VERSION or int(got.get("bucket_bits", -1)) != BUCKET_BITS:
            from engram.errors import EngramError  # noqa: PLC0415

            raise EngramError("the index was built by another version of engram; run `engram reindex`")
        return int(got["k"]), int(got["w"])
    return DEFAULT_K, DEFAULT_W
