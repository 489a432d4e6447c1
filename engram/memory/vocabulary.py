"""The words a memory's fields take: kinds, statuses, relations, sources. Apart from `model` (which
defines the rest) so that the command line can offer them as choices without importing it: every
`engram` command builds its parser from them."""

from __future__ import annotations

#: `handoff`: a session's explicit hand-off note (engram.continuity.handoff), written by `engram handoff`.
KINDS = ("fact", "decision", "preference", "pattern", "debug", "todo", "negative", "handoff")
#: `archived` is what consolidation sets on a memory that decayed and nothing keeps: hidden, kept.
STATUSES = ("active", "superseded", "invalidated", "archived")
RELATIONS = ("relates_to", "supersedes", "derived_from", "contradicts")
SOURCE_TYPES = ("person", "agent", "import")
#: How many links `memory graph` follows at most (the command line refuses more as a usage error).
MAX_GRAPH_DEPTH = 5
