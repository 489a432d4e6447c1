"""Queries over the index: explain, view, search."""
