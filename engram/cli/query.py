"""CLI commands over the index: explain, view, search, index, reindex."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from engram.cli.argtypes import count, positive, share
from engram.cli.context import store_of


def _out(doc: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")


def _ready_db(store):  # noqa: ANN001, ANN202
    """The index, with anything captured but not yet indexed indexed first."""
    from engram.query.requests import index_captured
    from engram.errors import EngramError
    from engram.index.catalog import require_tapes
    from engram.index.db import open_db

    db = open_db(store)
    try:
        require_tapes(db, store, "run `engram ingest`")
    except EngramError:
        db.close()
        raise
    index_captured(store, db)
    return db


def cmd_explain(args: argparse.Namespace) -> int:
    from engram.errors import BadInput

    store = store_of(args)
    cfg = store.config["explain"]
    params: dict[str, Any] = {
        "before": args.before if args.before is not None else int(cfg["window"]["before"]),
        "after": args.after if args.after is not None else int(cfg["window"]["after"]),
        "brief": args.brief, "include_deleted": args.include_deleted, "forensics": args.forensics,
        "min_confidence": args.min_confidence if args.min_confidence is not None else float(cfg["min_confidence"]),
        "expand_until": args.expand_until, "rank": args.rank or str(cfg["rank"]),
    }
    if args.debug:
        params["debug"] = True
    doc = None
    if args.text is not None:
        if args.span and args.span != "-":
            raise BadInput("give either FILE:START-END or --text -, not both")
        params["text"] = _text_to_explain(args.text)
    else:
        if not args.span:
            raise BadInput("what to explain? give FILE:START-END (or --text - with the text on stdin)")
        params.update(span=args.span, cwd=os.getcwd())
        if not args.debug:  # (a running server may be of another version: the rules listed are this one's)
            from engram.cli.running_server import ask_language_server

            doc = ask_language_server(store.endpoint_file, "explain", params)
    if doc is None:
        with closing(_ready_db(store)) as db:
            from engram.query.requests import explain_request

            doc = explain_request(store, db, params)
    if args.pretty:
        from engram.query.render import (
            explain_pretty,  # (~30 ms of imports a JSON answer does not need)
        )

        print(explain_pretty(doc))
        if args.debug:
            print("\nranking rules that changed the answer (engram.query.ranking):")
            print("\n".join(f"  {r['rule']}: {r['effect']}" for r in doc.get("ranking", [])) or "  none")
    else:
        _out(doc)
    return 0


def _text_to_explain(source: str) -> str:
    """The text of `--text FILE|-`, read as bytes and decoded with replacement (what stdin decodes
    with depends on the locale: strict under some, which made a stray byte a traceback)."""
    from engram.errors import BadInput

    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise BadInput(f"--text {source}: cannot read it ({exc.strerror or exc})") from None
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        raise BadInput("--text: stdin is empty: pipe the text to explain into it" if source == "-"
                       else f"--text {source}: the file is empty")
    return text


def cmd_view(args: argparse.Namespace) -> int:
    from engram.errors import BadInput
    from engram.index.catalog import resolve_tape, tape_file
    from engram.query.explain import _trim
    from engram.query.render import events_view
    from engram.tape.reader import TapeReader

    store = store_of(args)
    with closing(_ready_db(store)) as db:
        row = resolve_tape(db, args.tape)
    with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
        if not 0 <= args.at < len(r):
            raise BadInput(f"--at {args.at}: tape {row.id[:12]} has events 0-{len(r) - 1}")
        window = r.window(args.at, args.before, args.after)
    if args.pretty:
        print(events_view(window))
    else:
        _out({"tape": row.id, "session_id": row.session_id, "at": args.at,
              "events": [{"offset": off, **_trim(ev)} for off, ev in window]})
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from engram.query.search import search

    store = store_of(args)
    with closing(_ready_db(store)) as db:
        hits = search(store, db, args.query, limit=args.limit)
    if args.pretty:
        for h in hits:
            print(f"{h['tape'][:12]} #{h['offset']:<5} {h['kind']:8} {(h['timestamp'] or '')[:16]}  {h['excerpt']}")
    else:
        _out({"query": args.query, "hits": hits})
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from engram.index.catalog import reconcile
    from engram.index.build import (
        Indexer,
        index_pending,
        older_text_note,
        out_of_order_note,
    )
    from engram.index.db import open_db
    from engram.store.lock import ingest_lock

    store = store_of(args)
    db = open_db(store)
    indexer = Indexer(store)
    with ingest_lock(store):
        reconcile(db, store)
        n = index_pending(store, db, indexer)
    print(f"index: {n} tapes indexed")
    if indexer.out_of_order:
        print("  " + out_of_order_note(indexer.out_of_order))
    if note := older_text_note(db):
        print("  " + note)
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from engram.index.reindex import reindex
    from engram.memory.memories import rebuild_projection
    from engram.memory.vectors import embed_waiting

    store = store_of(args)
    stats = reindex(store, also=[rebuild_projection])
    print(f"reindex: {stats['tapes']} tapes, {stats['fragments']} fragments, {stats['stoplist']} stop-listed "
          f"fingerprints (threshold {stats['stoplist_share']:.0%} of tapes, at least {stats['stoplist_min_tapes']} tapes)")
    embedded = embed_waiting(store)
    print(f"  memories: {stats['memories']} from {stats['memory_events']} logged events"
          + (f", {embedded} embedded" if embedded else ""))
    if stats["memory_lines_skipped"]:
        print(f"  skipped {stats['memory_lines_skipped']} memory log line(s) that are not whole events "
              "(a write cut short)", file=sys.stderr)
    if stats["damaged"]:
        print(f"  left out {len(stats['damaged'])} damaged tape(s) ({', '.join(t[:12] for t in stats['damaged'])}): "
              "`engram ingest` captures their sessions again from the transcripts", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from engram.store.config import CHOICES

    s = sub.add_parser("explain", help="which sessions wrote, read or discussed FILE:START-END")
    s.add_argument("span", nargs="?", help="FILE:START-END (1-based, inclusive) in the working tree")
    s.add_argument("--text", metavar="FILE|-", help="explain this text instead (- reads stdin)")
    s.add_argument("--before", type=count, help="events before each touch (default: config explain.window)")
    s.add_argument("--after", type=count, help="events after each touch")
    s.add_argument("--brief", action="store_true", help="no transcript windows")
    s.add_argument("--expand-until", type=positive, metavar="N", help="grow the span until at most N sessions match")
    s.add_argument("--include-deleted", action="store_true", help="also match deleted code (tombstones)")
    s.add_argument("--forensics", action="store_true", help="also follow location-only edges")
    s.add_argument("--min-confidence", type=share, help="lineage edges below this are not followed (0.5)")
    s.add_argument("--rank", choices=CHOICES["explain.rank"],
                   help="order sessions by touches, then recency (the default; config explain.rank), "
                        "or by their strongest match")
    s.add_argument("--pretty", action="store_true", help="for people, not programs")
    s.add_argument("--debug", action="store_true",
                   help="also list the ranking rules that changed the answer (\"ranking\", engram.query.ranking)")
    s.set_defaults(func=cmd_explain)

    s = sub.add_parser("view", help="events of a tape around an offset")
    s.add_argument("tape")
    s.add_argument("--at", type=count, required=True, metavar="OFFSET")
    s.add_argument("--before", type=count, default=5)
    s.add_argument("--after", type=count, default=5)
    s.add_argument("--pretty", action="store_true")
    s.set_defaults(func=cmd_view)

    s = sub.add_parser("search", help="plain text search over messages and tool calls (FTS5)")
    s.add_argument("query")
    s.add_argument("--limit", type=positive, default=20)
    s.add_argument("--pretty", action="store_true")
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("index", help="index tapes not indexed yet")
    s.set_defaults(func=cmd_index)

    s = sub.add_parser("reindex", help="rebuild the whole index from the tapes and the memory log")
    s.set_defaults(func=cmd_reindex)
