"""Adapters turn one harness's session files into tape events (raw facts, source order)."""
