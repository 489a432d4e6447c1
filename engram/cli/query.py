"""CLI commands over the index: explain, blame, view, search, index, reindex."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from engram.cli.argtypes import count, positive, share
from engram.cli.context import store_of
from engram.cli.output import agent_output, people_output, print_within, wants_pretty
from engram.cli.output import print_json as _out
from engram.words import agree, plural


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
    pretty = wants_pretty(args)
    budget = args.budget if args.budget is not None else int(cfg["budget"])
    if pretty:  # people read each session's story and edit, not windows: the text keeps to the budget
        params.update(brief=True, story=True)
    else:
        params.update(budget=budget or None, page=args.page, more=_paging_command(args))
        if args.full:
            params["full"] = True
    if args.debug:
        params["debug"] = True
    doc = None
    if args.text is not None:
        if args.span and args.span != "-":
            raise BadInput("give either FILE:START-END or --text -, not both")
        params["text"] = _text_to_explain(args.text)
    else:
        if not args.span:
            raise BadInput("what to explain? give FILE:START-END, or FILE for the whole file (or --text - with "
                           "the text on stdin)")
        params.update(span=args.span, cwd=os.getcwd())
        if not args.debug:  # (a running server may be of another version: the rules listed are this one's)
            from engram.cli.running_server import ask_language_server

            doc = ask_language_server(store.endpoint_file, "explain", params)
    if doc is None:
        with closing(_ready_db(store)) as db:
            from engram.memory.briefs import explain_with_notes

            doc = explain_with_notes(store, db, params)
    if pretty:
        from engram.query.render import explain_file_pretty, explain_pretty  # (~30 ms a JSON answer does not need)

        text = explain_file_pretty(doc, color=_color(args)) if "regions" in doc else explain_pretty(doc, color=_color(args))
        if args.debug:
            text += "\n\nranking rules that changed the answer (engram.query.ranking):\n"
            text += "\n".join(f"  {r['rule']}: {r['effect']}" for r in doc.get("ranking", [])) or "  none"
        print_within(text, budget, _explain_command(args) + " --budget 0 (all of it)", page=args.page)
    else:
        _out(doc, compact=True)
    return 0


def _color(args: argparse.Namespace) -> bool:
    """Colour for people, by the command line's one rule (`engram.cli.style.enabled`: a terminal,
    no NO_COLOR, not TERM=dumb), unless this command's `--no-color` was given."""
    from engram.cli.style import enabled

    return enabled(sys.stdout) and not (getattr(args, "no_color", False) or getattr(args, "command_no_color", False))


def _paging_command(args: argparse.Namespace) -> str:
    """`engram explain` as asked, and `--page {page}`: what the answer names to read on."""
    cmd = _explain_command(args, budget=args.budget).replace("{", "{{").replace("}", "}}")
    return cmd + " --page {page}" + ("  (the same text on stdin)" if args.text == "-" else "")


def _explain_command(args: argparse.Namespace, budget: int | None = None) -> str:
    """`engram explain` as asked, with the options that change the answer (and `--budget` when
    given): the start of the command an answer names to read more."""
    import shlex

    parts = ["engram", "explain"]
    if args.text is not None:
        parts += ["--text", args.text]
    elif args.span:
        parts.append(args.span)
    for flag, value in (("--before", args.before), ("--after", args.after), ("--min-confidence", args.min_confidence),
                        ("--expand-until", args.expand_until), ("--rank", args.rank), ("--budget", budget)):
        if value is not None:
            parts += [flag, str(value)]
    for flag, on in (("--brief", args.brief), ("--include-deleted", args.include_deleted),
                     ("--forensics", args.forensics), ("--full", args.full), ("--pretty", getattr(args, "pretty", False))):
        if on:
            parts.append(flag)
    return " ".join(shlex.quote(p) for p in parts)


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

    tape, at = _tape_at(args)
    before = args.before if args.before is not None else (0 if args.full else 5)
    after = args.after if args.after is not None else (0 if args.full else 5)
    store = store_of(args)
    with closing(_ready_db(store)) as db:
        row = resolve_tape(db, tape)
    with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
        if not 0 <= at < len(r):
            raise BadInput(f"offset {at}: tape {row.id[:12]} has events 0-{len(r) - 1}")
        window = r.window(at, before, after)
    if wants_pretty(args):
        print(events_view(window, full=args.full))
    else:
        _out({"tape": row.id, "session_id": row.session_id, "at": at,
              "events": [{"offset": off, **(ev if args.full else _trim(ev))} for off, ev in window]})
    return 0


def _tape_at(args: argparse.Namespace) -> tuple[str, int]:
    """The tape and offset of `engram view TAPE@OFFSET` or `engram view TAPE --at OFFSET`."""
    from engram.errors import BadInput

    tape, sep, offset = args.tape.rpartition("@")
    if not sep:
        if args.at is None:
            raise BadInput(f"which event of {args.tape}? give TAPE@OFFSET or --at OFFSET")
        return args.tape, args.at
    if not offset.isdigit() or not tape:
        raise BadInput(f"{args.tape}: expected TAPE@OFFSET, OFFSET a whole number (e.g. 3fa2c1d0e9ab@812)")
    if args.at is not None and args.at != int(offset):
        raise BadInput(f"{args.tape} and --at {args.at} name two offsets: give one")
    return tape, int(offset)


def cmd_blame(args: argparse.Namespace) -> int:
    from engram.query.spans import resolve_span_arg

    start, end = _blame_range(args.L) if args.L else (None, None)
    store = store_of(args)
    file = args.file
    if not args.L:  # `blame FILE:A-B`, explain's way of naming lines
        named = resolve_span_arg(store.root, args.file, Path.cwd())
        file, start, end = named.path, named.start, named.end
    params = {"file": file, "start": start, "end": end, "cwd": os.getcwd()}
    from engram.cli.running_server import ask_language_server

    doc = ask_language_server(store.endpoint_file, "blame", params)  # a running server: its warm index
    if doc is None:
        with closing(_ready_db(store)) as db:
            from engram.query.requests import blame_request

            doc = blame_request(store, db, params)
    if args.json:
        _out(doc, compact=True)
        return 0
    from engram.query.render import blame_pretty

    lines = (store.root / doc["file"]).read_bytes().decode("utf-8", "replace").split("\n")
    text = blame_pretty(doc, lines, color=_color(args))
    if text:
        print(text)
    else:  # as git blame, nothing on stdout; a word on stderr so an empty answer is not read as a fault
        print(f"engram: {doc['file']} is empty: no lines to blame", file=sys.stderr)
    return 0


def _blame_range(spec: str) -> tuple[int | None, int | None]:
    """`-L` as git blame reads it: `A,B`, `A,+N` (N lines from A), `A,-N` (N lines up to A), `A,`
    (to the end), `,B` (from the start); `A` alone is line A (git: to the end). None: the file's end."""
    from engram.errors import BadInput

    a, sep, b = (x.strip() for x in spec.partition(","))
    if a.startswith(("/", "^/", ":")) or b.startswith("/"):
        raise BadInput(f"-L {spec}: a range by regular expression is not taken; give line numbers, e.g. -L 10,40")
    number = b.lstrip("+-")
    if not ((a.isdigit() or (sep and not a)) and (not b or number.isdigit()) and (a or b)):
        raise BadInput(f"-L {spec}: expected -L START,END (1-based line numbers; git's START,+N, START, and ,END "
                       "too), e.g. -L 10,40")
    start = int(a) if a else 1
    if not sep:
        end: int | None = start
    elif not b:
        end = None
    elif b[0] == "+":
        end = start + int(number) - 1
    elif b[0] == "-":
        start, end = start - int(number) + 1, start
    else:
        end = int(b)
    if start < 1 or (end is not None and end < start):
        raise BadInput(f"-L {spec}: lines are 1-based and START must not exceed END")
    return start, end


def cmd_search(args: argparse.Namespace) -> int:
    import shlex

    from engram.errors import BadInput
    from engram.query.search import search_hits

    if not args.query.strip():
        raise BadInput("what to search for? give words: engram search 'retry backoff'")
    store = store_of(args)
    with closing(_ready_db(store)) as db:
        hits, more = search_hits(store, db, args.query, limit=args.limit)
    again = f"engram search {shlex.quote(args.query)} --limit {args.limit * 2}" if more else None
    if wants_pretty(args):
        for h in hits:
            print(f"{h['tape'][:12]} #{h['offset']:<5} {h['kind']:8} {(h['timestamp'] or '')[:16]}  {h['excerpt']}")
        if not hits:  # (a person saw nothing at all)
            print(f"no message or tool call matches {args.query!r}", file=sys.stderr)
        if again:
            print(f"… more messages and tool calls match: {again}")
    else:
        _out({"query": args.query, "hits": hits, **({"more": again} if again else {})})
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from engram.index.catalog import reconcile
    from engram.index.build import (
        Indexer,
        index_pending,
        older_text_note,
        out_of_order_note,
    )
    from engram.capture.pipeline import merge_idle
    from engram.index.db import open_db
    from engram.store.lock import ingest_lock

    store = store_of(args)
    db = open_db(store)
    indexer = Indexer(store)
    with ingest_lock(store):
        reconcile(db, store)
        n = index_pending(store, db, indexer)
    merged = merge_idle(store)  # segments appends left for a language server that is not running
    notes = [out_of_order_note(indexer.out_of_order)] if indexer.out_of_order else []
    if note := older_text_note(db):
        notes.append(note)
    if args.json:
        _out({"indexed": n, "segments_merged": merged, "out_of_order": indexer.out_of_order, "notes": notes})
        return 0
    print(f"index: {plural(n, 'tape')} indexed" + (f", {plural(merged, 'segment')} merged" if merged else ""))
    for note in notes:
        print("  " + note)
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from engram.index.reindex import reindex
    from engram.memory.memories import rebuild_projection
    from engram.memory.memories import embed_waiting

    store = store_of(args)
    stats = reindex(store, also=[rebuild_projection])
    embedded = embed_waiting(store)
    if args.json:
        _out({**stats, "embedded": embedded})
    else:
        print(f"reindex: {plural(stats['tapes'], 'tape')}, {plural(stats['fragments'], 'fragment')}, "
              f"{plural(stats['stoplist'], 'stop-listed fingerprint')} (threshold {stats['stoplist_share']:.0%} of "
              f"tapes, at least {plural(stats['stoplist_min_tapes'], 'tape')})")
        print(f"  memories: {plural(stats['memories'], 'memory', 'memories')} from "
              f"{plural(stats['memory_events'], 'logged event')}" + (f", {embedded} embedded" if embedded else ""))
    if skipped := stats["memory_lines_skipped"]:
        print(f"  skipped {plural(skipped, 'memory log line')} that {agree(skipped, 'is', 'are')} not a whole event "
              "(a write cut short)", file=sys.stderr)
    if damaged := stats["damaged"]:
        print(f"  moved {plural(len(damaged), 'damaged tape')} to .engram/quarantine/ "
              f"({', '.join(t[:12] for t in damaged)}): run "
              f"`engram ingest` to capture {agree(len(damaged), 'its', 'their')} sessions again from the transcripts",
              file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from engram.store.config import CHOICES

    s = sub.add_parser("explain", help="which sessions wrote, read or discussed FILE:START-END (or a whole FILE)")
    s.add_argument("span", nargs="?", help="FILE:START-END (1-based, inclusive) in the working tree; FILE alone: "
                                          "the whole file, region by region (the regions of `engram blame`)")
    s.add_argument("--text", metavar="FILE|-", help="explain this text instead (- reads stdin)")
    s.add_argument("--before", type=count, help="events before each touch (default: config explain.window)")
    s.add_argument("--after", type=count, help="events after each touch")
    s.add_argument("--brief", action="store_true", help="no transcript windows")
    s.add_argument("--expand-until", type=positive, metavar="N", help="grow the span until at most N sessions match")
    s.add_argument("--include-deleted", action="store_true", help="also match deleted code (tombstones)")
    s.add_argument("--forensics", action="store_true", help="also follow location-only edges")
    s.add_argument("--min-confidence", type=share, help="lineage edges below this are not followed (0.5)")
    s.add_argument("--rank", choices=CHOICES["explain.rank"],
                   help="writer: the sessions that changed these lines first, latest first (the default; "
                        "config explain.rank); touches: most touches, then recency; evidence: strongest match")
    s.add_argument("--budget", type=count, metavar="TOKENS",
                   help="at most this many tokens of the answer, JSON or text (4 bytes each; default: config "
                        "explain.budget, 4000; 0: no bound); JSON names what does not fit in \"truncated\" with the "
                        "command for the next page, text says how much it left out")
    s.add_argument("--page", type=positive, default=1, help="the page of an answer cut to the budget (default 1)")
    s.add_argument("--full", action="store_true",
                   help="windows' texts whole, not clipped to the span's lines (with --budget 0: nothing cut)")
    agent_output(s, pretty_help="for people (the default on a terminal): per session its request, its words "
                                "around the edit and the edit as a diff")
    s.add_argument("--no-color", dest="command_no_color", action="store_true",
                   help="no colour in --pretty output (also: NO_COLOR=1)")
    s.add_argument("--debug", action="store_true",
                   help="also list the ranking rules that changed the answer (\"ranking\", engram.query.ranking)")
    s.set_defaults(func=cmd_explain)

    s = sub.add_parser("view", help="events of a tape around an offset: engram view TAPE@OFFSET [--full]")
    s.add_argument("tape", help="TAPE@OFFSET, or a tape id (unique prefix) or session id with --at")
    s.add_argument("--at", type=count, metavar="OFFSET", help="the event to show (or give TAPE@OFFSET)")
    s.add_argument("--before", type=count, help="events before it (default 5; 0 with --full)")
    s.add_argument("--after", type=count, help="events after it (default 5; 0 with --full)")
    s.add_argument("--full", action="store_true",
                   help="every text whole, nothing cut (alone: only the event at OFFSET); what explain's "
                        "clipped windows name to show an event in full")
    agent_output(s)
    s.set_defaults(func=cmd_view)

    s = sub.add_parser("blame", help="which session last changed each line of FILE, like git blame")
    s.add_argument("file", help="a file of the working tree (FILE:START-END: those lines)")
    s.add_argument("-L", metavar="START,END", help="only lines START to END (1-based, inclusive); as git: START,+N, "
                                                   "START, (to the end), ,END")
    s.add_argument("--json", action="store_true",
                   help='porcelain: {"file", "regions": [{"lines": [a, b], "session_id", "tape", "harness", '
                        '"when", "request"}]}, session_id null where no recorded session wrote the lines')
    s.add_argument("--no-color", dest="command_no_color", action="store_true", help="no colour (also: NO_COLOR=1)")
    s.set_defaults(func=cmd_blame)

    s = sub.add_parser("search", help="plain text search over messages and tool calls (FTS5)")
    s.add_argument("query", help="words to find (SQLite FTS5 syntax)")
    s.add_argument("--limit", type=positive, default=20, help="at most N hits (default 20)")
    agent_output(s)
    s.set_defaults(func=cmd_search)

    s = sub.add_parser("index", help="index tapes not indexed yet")
    people_output(s)
    s.set_defaults(func=cmd_index)

    s = sub.add_parser("reindex", help="rebuild the whole index from the tapes and the memory log")
    people_output(s)
    s.set_defaults(func=cmd_reindex)
