"""A token budget for an answer: what fits, in the order that bears most on the question, and what
is left for the next page.

An answer is made of units — a session's heading, its story (the request, the words around the
edit, the edit's diff), a fragment's one line, a fragment's window — each needing the one it
belongs to (`Unit.needs`). `page` fills a page with the units not shown on earlier pages, in the
order given, skipping any that no longer fits: the least load-bearing are the ones left out. A
unit whose parent was shown on an earlier page brings the parent along again (its size counted),
so each page reads on its own. A page on which nothing fits takes its first unit anyway (the
answer says it went over), so paging always ends.

Tokens are counted as TOKEN_BYTES bytes of the answer's compact UTF-8 JSON, rounded up. Real
tokenizers (cl100k, o200k) give 3.5-4.5 bytes per token on code and English and fewer on escaped
JSON, so the count is an estimate that errs on neither side by much; it is the same whatever
model reads the answer, and cheap enough to apply to every unit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

#: Bytes of compact JSON counted as one token.
TOKEN_BYTES: Final = 4


def tokens(n_bytes: int) -> int:
    """Tokens for `n_bytes` bytes of JSON (TOKEN_BYTES each, rounded up)."""
    return -(-n_bytes // TOKEN_BYTES)


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (orjson: what `tokens` counts)."""
    return len(orjson.dumps(value))


@dataclass
class Unit:
    """One piece of an answer. `size` is computed when first asked (a window reads a tape); `least`
    is a bound under it known without computing, so a unit that cannot fit is never built."""

    key: Hashable
    what: str  # "sessions", "stories", "fragments" or "windows": how `left_out` counts it
    needs: Hashable | None
    measure: Callable[[], int]
    least: int = 0
    _size: int | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        if self._size is None:
            self._size = self.measure()
        return self._size


@dataclass
class Page:
    shown: list[Hashable]  # the units this page shows, its carriers (parents shown before) included
    new: list[Hashable]  # the units shown for the first time
    left: list[Unit]  # the units no page up to this one has shown
    used: int  # bytes the units take
    over: bool  # the page took a unit larger than its capacity (nothing else fitted)


def page(units: Sequence[Unit], capacity: int, number: int = 1) -> Page:
    """Page `number` (1-based) of `units`, each page at most `capacity` bytes of units."""
    by_key = {u.key: u for u in units}
    done: set[Hashable] = set()
    result = Page([], [], list(units), 0, False)
    for _ in range(number):
        result = _fill([u for u in units if u.key not in done], by_key, capacity)
        done.update(result.new)
        result.left = [u for u in units if u.key not in done]
        if not result.new:
            break
    return result


def _chain(u: Unit, by_key: dict[Hashable, Unit], on_page: set[Hashable]) -> list[Unit]:
    """`u` and the units it needs that this page does not show yet, parents first."""
    out = [u]
    need = u.needs
    while need is not None and need not in on_page:
        parent = by_key[need]
        out.append(parent)
        need = parent.needs
    return out[::-1]


def _fill(candidates: Sequence[Unit], by_key: dict[Hashable, Unit], capacity: int) -> Page:
    fresh = {u.key for u in candidates}  # (a parent not shown before is new on this page too)
    on_page: set[Hashable] = set()
    shown: list[Hashable] = []
    new: list[Hashable] = []
    used = 0
    first: Unit | None = None
    for u in candidates:
        first = first or u
        if u.key in on_page:
            continue
        chain = _chain(u, by_key, on_page)
        parents = sum(p.size for p in chain[:-1])
        if used + parents + u.least > capacity:
            continue
        cost = parents + u.size
        if used + cost > capacity:
            continue
        used += cost
        for p in chain:
            on_page.add(p.key)
            shown.append(p.key)
            if p.key in fresh:
                new.append(p.key)
    over = False
    if not new and first is not None:
        chain = _chain(first, by_key, on_page)
        shown = [p.key for p in chain]
        new = [p.key for p in chain if p.key in fresh]
        used = sum(p.size for p in chain)
        over = used > capacity
    return Page(shown, new, [], used, over)


def left_out(units: Iterable[Unit]) -> dict[str, int]:
    """How many units of each kind are left, for the answer's `truncated`."""
    out: dict[str, int] = {}
    for u in units:
        out[u.what] = out.get(u.what, 0) + 1
    return out
