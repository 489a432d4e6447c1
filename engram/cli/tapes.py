"""Commands over the stored tapes: `engram tapes`, `engram show`, `engram gc`."""

from __future__ import annotations

import argparse
import sys

from engram.cli.argtypes import positive
from engram.cli.context import store_of
from engram.cli.output import people_output, print_json
from engram.words import plural


def cmd_tapes(args: argparse.Namespace) -> int:
    from engram.index.catalog import list_tapes
    from engram.index.db import open_db
    from engram.query.render import tapes_table

    store = store_of(args)
    db = open_db(store)
    if args.private or args.shared:
        return _mark(store, db, args.private or args.shared, private=bool(args.private), json=args.json)
    from engram.share.choose import private_sessions

    rows = list_tapes(db, limit=args.limit, harness=args.harness)
    private = private_sessions(store)
    if args.json:
        print_json([{**r.as_dict(), "private": r.session_id in private} for r in rows])
    elif rows:
        print(tapes_table(rows, private))
    elif args.harness and (held := sorted({h for (h,) in db.execute("SELECT DISTINCT harness FROM tapes")})):
        print(f"no tapes from harness {args.harness!r}; the store holds {', '.join(held)}", file=sys.stderr)
    else:
        print(_no_tapes(store), file=sys.stderr)
    return 0


def _no_tapes(store: object) -> str:
    """What to do about an empty list: sessions removed with `tapes rm` are skipped by a plain
    ingest, so "run `engram ingest`" would lead nowhere for them."""
    from engram.capture.removal import removed_sessions

    removed = len(removed_sessions(store))  # type: ignore[arg-type]
    if removed:
        return (f"no tapes: {plural(removed, 'session')} removed with `engram tapes rm`; `engram ingest --again` "
                "captures them again (with today's redaction rules)")
    return "no tapes yet: run `engram ingest`"


def _mark(store: object, db: object, ref: str, *, private: bool, json: bool) -> int:
    """`engram tapes --private ID` / `--shared ID`: mark a session (all its segments) as never
    pushed, or pushable again (engram.share.choose)."""
    from engram.index.catalog import resolve_tapes
    from engram.share.choose import mark_private

    sessions = sorted({r.session_id for r in resolve_tapes(db, ref)})  # type: ignore[arg-type]
    mark_private(store, sessions, private)  # type: ignore[arg-type]
    sent = _already_pushed(store, db, sessions) if private else {}
    if json:
        print_json({"sessions": sessions, "private": private, "already_pushed": sent})
    else:
        state = "private: `engram push` leaves it here" if private else "shared again: `engram push` sends it"
        purged = [] if private else _purged_here(store, db, ref)
        if purged:
            state = (f"shared again, but {plural(len(purged), 'tape')} of it {'was' if len(purged) == 1 else 'were'} "
                     "purged earlier: the tombstone keeps it here (`engram push --dry-run` lists it)")
        print(f"{plural(len(sessions), 'session')} ({', '.join(s[:8] for s in sessions)}) {state}")
    for remote, tapes in sent.items():
        print(f"warning: {plural(len(tapes), 'tape')} of it {'was' if len(tapes) == 1 else 'were'} pushed to "
              f"{remote!r} already (its index as of this clone's last push or pull), and git cannot un-send: "
              "--private only stops later pushes. To take it back from the remote and from every store that "
              f"pulls: `engram tapes rm {ref} --purge`, then `engram push` (a tombstone; it deletes the session "
              "here too). Whoever fetched it before keeps a copy: rotate any secret in it (docs/sharing.md, "
              "\"what git cannot un-send\")", file=sys.stderr)
    return 0


def _purged_here(store: object, db: object, ref: str) -> list[str]:
    """The tapes of `ref` this clone purged before (captured again since: same ids), which push
    never sends."""
    from engram.index.catalog import resolve_tapes
    from engram.share.choose import local_tombstones

    gone = local_tombstones(store)  # type: ignore[arg-type]
    return [r.id for r in resolve_tapes(db, ref) if r.id in gone]  # type: ignore[arg-type]


def _already_pushed(store: object, db: object, sessions: list[str]) -> dict[str, list[str]]:
    """Remote -> the tapes of `sessions` its index listed when this clone last pushed or pulled."""
    from engram.share.push import pushed_to

    marks = ",".join("?" * len(sessions))
    tapes = {r[0] for r in db.execute(f"SELECT id FROM tapes WHERE session_id IN ({marks})", sessions)}  # type: ignore[attr-defined]
    return pushed_to(store, tapes)  # type: ignore[arg-type]


def cmd_show(args: argparse.Namespace) -> int:
    from engram.index.catalog import resolve_tapes, tape_file
    from engram.index.db import open_db
    from engram.query.render import events_view
    from engram.tape.reader import TapeReader

    store = store_of(args)
    db = open_db(store)
    rows = resolve_tapes(db, args.tape)
    import orjson

    out = sys.stdout
    for row in rows:
        with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
            stop = args.limit if args.limit else None
            if args.raw:
                for line in r.raw_lines(0, stop):
                    out.write(line.decode("utf-8") + "\n")
            elif args.json:
                evs = list(r.events(0, stop, resolve_objects=True))
                out.write(orjson.dumps({"tape": row.id, "events": evs}).decode() + "\n")
            else:
                print(f"tape {row.id}  ({plural(row.events, 'event')}, {plural(row.edits, 'edit')}, "
                      f"{plural(row.reads, 'read')})")
                print(events_view(enumerate(r.events(0, stop))))
                if stop is not None and row.events > stop:  # (else it reads as the tape's end)
                    print(f"… {plural(row.events - stop, 'more event')}: engram view {row.id[:12]}@{stop} --before 0 "
                          f"--after 40, or engram show {row.id[:12]} without --limit")
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from engram.store.gc import collect

    removed, kept = collect(store_of(args), dry_run=args.dry_run)
    if args.json:
        print_json({"removed": removed, "kept": kept, "dry_run": args.dry_run})
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print(f"gc: {verb} {plural(removed, 'unreferenced object')}, kept {kept}; tapes are never removed")
    return 0


def cmd_tapes_rm(args: argparse.Namespace) -> int:
    from engram.capture.removal import remove_tapes
    from engram.index.reindex import reindex
    from engram.memory.memories import rebuild_projection
    from engram.store.gc import collect

    store = store_of(args)
    done = remove_tapes(store, args.tape, purge=args.purge)
    stats = reindex(store, also=[rebuild_projection], scrub=args.purge)  # the index without them: a projection of the tapes left
    removed_objects = collect(store)[0] if args.purge else 0
    if args.json:
        print_json({**done.as_dict(), "objects_removed": removed_objects, "tapes_left": stats["tapes"]})
        return 0
    what = plural(len(done.tapes), "tape")
    where = "deleted with the objects only they used" if args.purge else f"moved to {done.kept_in}"
    print(f"tapes rm: {what} of {', '.join(s[:8] for s in done.sessions)} removed from the catalogue, the index "
          f"and search; files {where}" + (f" ({plural(removed_objects, 'object')})" if args.purge else ""))
    print("  a later `engram ingest` skips the session; `engram ingest --again PATH` captures it again")
    return 0


def cmd_redact(args: argparse.Namespace) -> int:
    from engram.capture.removal import redact_again
    from engram.index.reindex import reindex
    from engram.memory.memories import rebuild_projection
    from engram.store.gc import collect

    if not args.again:
        print("engram redact: say --again to re-apply today's rules to every stored tape", file=sys.stderr)
        return 2
    store = store_of(args)
    done = redact_again(store)
    if done.changed:
        reindex(store, also=[rebuild_projection], scrub=True)  # the old tapes' text is not left in free pages
    objects = collect(store)[0] if done.changed else 0
    if args.json:
        print_json({**done.as_dict(), "objects_removed": objects})
        return 0
    found = sum(done.redactions.values())
    print(f"redact --again: {plural(done.tapes, 'tape')} read, {plural(len(done.changed), 'tape')} rewritten "
          f"({plural(found, 'secret')} newly redacted), {plural(objects, 'old object')} removed")
    if done.changed:
        print("  rewritten tapes have new ids; .engram/redirects.jsonl maps the old ones, which `show`, `view` "
              "and memories' evidence still accept")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the tape commands to the command line."""
    s = sub.add_parser("tapes", help="list tapes")
    people_output(s)
    s.add_argument("--limit", type=positive, help="only the newest N tapes")
    s.add_argument("--harness", metavar="NAME", help="only tapes of this harness (claude-code, codex, editor, ...)")
    mark = s.add_mutually_exclusive_group()
    mark.add_argument("--private", metavar="ID", help="mark a session (a tape-id prefix or session id) private: "
                                                      "`engram push` never sends it")
    mark.add_argument("--shared", metavar="ID", help="undo --private: the session may be pushed again")
    s.set_defaults(func=cmd_tapes)
    tsub = s.add_subparsers(dest="tapes_command", metavar="{rm}")
    r = tsub.add_parser("rm", help="remove a tape (or a session's tapes) from the store; ingest will not bring it back",
                        description="Remove a tape, or every segment of a session, from the catalogue, the index and "
                                    "full-text search, and record it in .engram/removed.jsonl so that a later ingest "
                                    "skips the session (`engram ingest --again PATH` captures it again). The tape "
                                    "file is kept in .engram/removed/ unless --purge deletes it and the objects only "
                                    "it used: for a secret captured by mistake.")
    r.add_argument("tape", help="a unique tape-id prefix, or a session id: all its segments")
    r.add_argument("--purge", action="store_true", help="delete the tape file and its objects, keep no copy")
    people_output(r)
    r.set_defaults(func=cmd_tapes_rm)

    s = sub.add_parser("show", help="show a tape (id prefix or session id)")
    s.add_argument("tape", help="a unique tape-id prefix, or a session id (or its start): all its segments")
    form = s.add_mutually_exclusive_group()  # (--raw silently won over --json)
    form.add_argument("--raw", action="store_true", help="the stored JSONL, verbatim")
    form.add_argument("--json", action="store_true", help="one JSON document per tape, objects resolved")
    s.add_argument("--limit", type=positive, help="only the first N events")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("redact", help="re-apply today's redaction rules to every stored tape (--again)",
                       description="Rewrite every stored tape through the current redaction rules (built-in and "
                                   "[redact] patterns of .engram/config.toml). A tape that changes gets a new id; "
                                   ".engram/redirects.jsonl maps the old id to it, so references written before "
                                   "(memories' evidence, TAPE@OFFSET) still resolve. The index is rebuilt and the "
                                   "objects only the old tapes used are deleted. Interrupted, run it again.")
    s.add_argument("--again", action="store_true", help="required: this rewrites tapes")
    people_output(s)
    s.set_defaults(func=cmd_redact)

    s = sub.add_parser("gc", help="remove objects no tape refers to (never a tape)")
    s.add_argument("--dry-run", action="store_true", help="count what would be removed, remove nothing")
    people_output(s)
    s.set_defaults(func=cmd_gc)
