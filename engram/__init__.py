"""Engram: why does this code exist? Provenance of code from coding-agent transcripts."""

__version__ = "0.1.0"
