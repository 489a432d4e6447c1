"""Queries over the index: explain (its windows clipped by `clip`, its size bounded by `budget`,
each session's `story`), blame, view, search; `render` writes what people read."""
