"""The evidence index: a projection of the tapes that `engram reindex` rebuilds."""
