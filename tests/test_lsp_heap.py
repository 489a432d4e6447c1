"""The language server freezes its long-lived heap (engram_server.lsp.heap) so the garbage
collector's full passes stop walking it; what it allocates afterwards must still be collected."""

from __future__ import annotations

import gc
import weakref

from engram_server.lsp import heap


class Node:
    other: object = None


def test_what_is_made_after_a_freeze_is_still_collected() -> None:
    try:
        before = heap.walked()
        frozen, _ = heap.freeze()
        assert frozen > 0 and heap.walked() < before, "what was alive is out of the collector's walks"
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector frees it
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None, "garbage made after the freeze is collected as before"
    finally:
        gc.unfreeze()
