"""What counts as one touch of a span, for the order of sessions (explain and the editor's lenses).

Each matching event of a session is a touch (an edit of several regions is one event, however
many of its regions match), except that its reads of one file are one touch however often it read
that file; the lines an edit held without changing them (`code.carried`) count as such a read. Agents re-read files all the time (after a compaction, at each
step of a plan, to check an edit), and a reader counted per read came before the session that
wrote the code. On ShamsiievDmytro/entire-bmad every story session reads the planning documents
an earlier one wrote, one of them a 715-line file ten times: R@1 of the writer was 0.640 on
unmutated spans, 0.994 with each file's reads counted once (bench/README.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Final

from engram.index.kinds import CODE_CARRIED, KIND_NO
from engram.tape import events as E

# The lines an edit carried unchanged (`code.carried`) are read-strength evidence: counted with
# the session's reads of the file, not as an edit of its own.
_READS: Final = frozenset({KIND_NO[E.CODE_READ], KIND_NO[CODE_CARRIED]})


def touch_key(kind: int, file: Hashable | None, event: Hashable) -> tuple[str, Hashable]:
    """Fragments of one session with equal keys are one touch (`file`: its path or its id;
    `event`: the event the fragment is of, as (tape, offset): an edit of several regions is a
    fragment per region, and one touch)."""
    return ("read", file) if kind in _READS and file is not None else ("event", event)


def touch_count(fragments: Iterable[tuple[int, Hashable | None, Hashable]]) -> int:
    """A session's touches among its fragments, each given as (kind, file, event)."""
    return len({touch_key(kind, file, event) for kind, file, event in fragments})
