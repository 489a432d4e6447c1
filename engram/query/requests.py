"""Requests the command line makes of the index, answered the same way in its own process or by
a running language server it sends them to (`engram.cli.running_server`): one function each, so
the two paths cannot drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import apsw

    from engram.store.repo import Store


def index_captured(store: Store, db: apsw.Connection) -> None:
    """Index tapes captured but not indexed yet (an ingest interrupted before indexing, or before
    writing its postings), so a query answers from everything captured."""
    if db.execute("SELECT 1 FROM tapes WHERE indexed IN (0, 2) LIMIT 1").fetchall():
        from engram.index.build import index_pending
        from engram.store.lock import ingest_lock_if_free

        with ingest_lock_if_free(store) as free:
            if free:  # else a running ingest indexes them: answer from what is indexed now
                index_pending(store, db)


def explain_request(store: Store, db: apsw.Connection, params: dict[str, Any]) -> dict[str, Any]:
    """The explain document for a request of `engram explain` (from the command line, or sent by
    one to a running language server, which answers it the same way)."""
    from engram.query.explain import Options, explain
    from engram.query.spans import parse_span, read_span, text_span
    from engram.store.config import choice

    opts = Options(before=int(params["before"]), after=int(params["after"]), brief=bool(params["brief"]),
                   include_deleted=bool(params["include_deleted"]), forensics=bool(params["forensics"]),
                   min_confidence=float(params["min_confidence"]), rank=choice("explain.rank", params.get("rank", "writer")),
                   debug=bool(params.get("debug", False)))
    file_lines = None
    if params.get("text") is not None:
        span = text_span(str(params["text"]))
    else:
        path, start, end = parse_span(str(params["span"]))
        span = read_span(store.root, path, start, end, Path(params["cwd"]) if params.get("cwd") else None)
        file_lines = (store.root / span.file).read_text(encoding="utf-8", errors="replace").splitlines()
    return explain(store, db, span, opts, expand_until=params.get("expand_until"), file_lines=file_lines)
