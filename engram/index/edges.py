"""What a lineage edge's confidence means, for the index that stores edges and the query that walks them.

Apart from `lineage.py` (numpy) so that `engram explain` can walk edges without importing numpy.
"""

from __future__ import annotations

from typing import Final

LINK_THRESHOLD: Final = 0.30  # below: `location_only`, kept for --forensics, never lineage
REINSERT_SIMILARITY: Final = 0.90  # deleted text re-inserted at least this similar relinks to its chain
