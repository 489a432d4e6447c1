"""Tapes: one agent session as immutable, compressed, content-addressed events."""
