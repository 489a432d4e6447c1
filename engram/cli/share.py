"""Sharing through git: `engram push`, `engram pull`, `engram sync` (engram/share/, docs/sharing.md)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from engram.cli.context import store_of
from engram.cli.output import people_output, print_json
from engram.words import plural


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} KB"


def _team(memories: dict[str, Any]) -> str:
    """The team memories a push adds or changes, of how many leave: `5 team memories` alone read as
    5 pushed again on every push."""
    team, new = memories.get("team", 0), memories.get("team_new", memories.get("team", 0))
    said = f"{plural(new, 'team memory', 'team memories')} new or changed (of {team})" if team else "0 team memories"
    purges = memories.get("purges_new", 0)  # (tombstones: no team memory, though they leave too)
    return said + (f", {plural(purges, 'memory purge')}" if purges else "")


def _print_push(doc: dict[str, Any]) -> None:
    verb = "would push" if doc["dry_run"] else "pushed"
    sessions = doc["sessions"]
    print(f"push {doc['remote']}: {verb} {plural(len(sessions), 'tape')} ({_size(doc['bytes'])}), "
          f"{_team(doc['memories'])}, {plural(doc['tombstones'], 'new tombstone')}; "
          f"{doc['already_on_remote']} already there")
    if doc["dry_run"]:
        for s in sessions:
            marks = sum(s["redacted"].values())
            print(f"  {s['tape'][:12]}  {s['harness']:<12} {str(s['session_id'])[:8]:<8} {str(s['started'] or '')[:16]:<16}"
                  f"  {_size(s['size']):>9}  {plural(marks, 'redaction')}")
    for s in doc["excluded"]:
        print(f"  kept here: {s['tape'][:12]} {str(s['session_id'])[:8]}: {s['excluded']}", file=sys.stderr)
    mem = doc["memories"]
    if mem.get("personal"):
        print(f"  kept here: {plural(mem['personal'], 'personal memory', 'personal memories')}", file=sys.stderr)
    for m, found in (mem.get("held_back") or {}).items():
        print(f"  kept here: memory {m}: today's redaction rules would change it ({', '.join(found)}); "
              "edit or forget it", file=sys.stderr)


def cmd_push(args: argparse.Namespace) -> int:
    from engram.share.push import push

    doc = push(store_of(args), args.remote, dry_run=args.dry_run).as_dict()
    if args.json:
        print_json(doc)
    else:
        _print_push(doc)
    return 0


def since_date(text: str) -> str:
    """`--since 2026-11-01` (or a full ISO time): sessions that began on or after it."""
    import datetime as dt  # noqa: PLC0415

    if not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.]+Z?)?$", text):
        raise argparse.ArgumentTypeError(f"{text!r}: a date, YYYY-MM-DD (or an ISO time)")
    try:  # (a month 13 passed the pattern and compared as text)
        dt.datetime.fromisoformat(text.replace(" ", "T").removesuffix("Z"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: no such date or time (YYYY-MM-DD)") from None
    return text.replace(" ", "T")


def _print_pull(doc: dict[str, Any]) -> None:
    print(f"pull {doc['remote']}: {plural(len(doc['sessions']), 'tape')} ({_size(doc['bytes'])}), "
          f"{plural(doc['objects'], 'object')}, {plural(doc['memory_files'], 'memory log file')} updated, "
          f"{plural(doc['indexed'], 'tape')} indexed" + (f"; {plural(len(doc['purged']), 'tape')} purged by a "
                                                         "teammate removed here" if doc["purged"] else ""))
    if doc.get("unchecked"):
        print(f"  {plural(doc['unchecked'], 'tape')} not indexed: each is checked against its id when `engram index` "
              "(or an ingest, or the next pull) catalogues it, and moved to .engram/quarantine/ if it does not match")
    for why, n in sorted(doc["skipped"].items()):
        print(f"  not pulled: {plural(n, 'tape')} {why}", file=sys.stderr)
    for what in doc["damaged"]:
        print(f"  not used (does not match its address on the remote): {what}", file=sys.stderr)


def cmd_pull(args: argparse.Namespace) -> int:
    from engram.share.pull import pull

    doc = pull(store_of(args), args.remote, since=args.since, everything=args.all, index=not args.no_index).as_dict()
    if args.json:
        print_json(doc)
    else:
        _print_pull(doc)
    return 1 if doc["damaged"] else 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Pull (when the remote has Engram data), then push."""
    from engram.share.git import Git
    from engram.share.layout import INDEX_REF, NAMESPACE
    from engram.share.pull import pull
    from engram.share.push import open_git, push

    store = store_of(args)
    git: Git = open_git(store)
    remote = args.remote or git.default_remote()
    if not git.has_remote(remote):
        from engram.errors import ShareError

        raise ShareError(f"no git remote {remote!r} (`git remote -v` lists them; `engram sync REMOTE` names one)")
    pulled = pull(store, remote).as_dict() if INDEX_REF in git.remote_refs(remote, NAMESPACE) else None
    pushed = push(store, remote).as_dict()
    if args.json:
        print_json({"pull": pulled, "push": pushed})
        return 0
    if pulled is not None:
        _print_pull(pulled)
    _print_push(pushed)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add push, pull and sync to the command line."""
    remote_help = "a git remote (default: the current branch's upstream remote, else origin)"
    s = sub.add_parser("push", help="share this clone's sessions and team memories on a git remote (refs/engram/)",
                       description="Push this clone's tapes, their objects, its team memories and its purges to "
                                   "refs/engram/ on a git remote: no branch, index or working tree is touched, and "
                                   "nothing is ever force-pushed. What stays here: docs/sharing.md.")
    s.add_argument("remote", nargs="?", metavar="REMOTE", help=remote_help)
    s.add_argument("--dry-run", action="store_true", help="list what would leave (sessions, sizes, redactions), "
                                                          "push nothing")
    people_output(s)
    s.set_defaults(func=cmd_push)

    s = sub.add_parser("pull", help="bring teammates' sessions, memories and purges from a git remote and index them",
                       description="Fetch refs/engram/ from a git remote, write the sessions this store lacks, "
                                   "union the memory log, apply purges, and index the new sessions incrementally "
                                   "(each verified against its content address as it is catalogued: one that does "
                                   "not match is moved to .engram/quarantine/ and named).")
    s.add_argument("remote", nargs="?", metavar="REMOTE", help=remote_help)
    s.add_argument("--since", type=since_date, metavar="DATE", help="only sessions that began on or after DATE")
    s.add_argument("--all", action="store_true",
                   help="also sessions of commits this clone does not have (by default only sessions of its history)")
    s.add_argument("--no-index", action="store_true",
                   help="write the sessions, do not index them (`engram index` does, checking each against its id)")
    people_output(s)
    s.set_defaults(func=cmd_pull)

    s = sub.add_parser("sync", help="engram pull, then engram push")
    s.add_argument("remote", nargs="?", metavar="REMOTE", help=remote_help)
    people_output(s)
    s.set_defaults(func=cmd_sync)
