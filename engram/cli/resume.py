"""`engram resume`: what a new session needs to pick up a session's work, and `engram handoff`:
an explicit hand-off note for it (engram.continuity)."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing

from engram.cli.argtypes import count
from engram.cli.context import store_of
from engram.cli.output import people_output, print_json


def cmd_resume(args: argparse.Namespace) -> int:
    from engram.cli.query import _ready_db
    from engram.continuity.package import DEFAULT_BUDGET, Options, resume
    from engram.continuity.text import first_prompt, render

    store = store_of(args)
    more = "engram resume {session} --budget {budget}" + (f" --for {args.for_}" if args.for_ else "")
    opts = Options(session=args.session, harness=args.harness,
                   budget=DEFAULT_BUDGET if args.budget is None else args.budget, more=more)
    with closing(_ready_db(store)) as db:
        doc = resume(store, db, opts)
    if args.json:
        print_json(doc)
    else:
        sys.stdout.write(first_prompt(doc, args.for_) if args.for_ else render(doc))
    return 0


_NOTE_FLAGS = (("goal", "--goal", "the goal of the work, in a sentence"),
               ("done", "--done", "a thing done (repeat the option for more)"),
               ("in_progress", "--in-progress", "a thing under way"),
               ("blocked", "--blocked", "a thing blocked, and on what"),
               ("next", "--next", "a next step"),
               ("must_not_redo", "--must-not-redo", "a thing already done that must not be done again"),
               ("must_preserve", "--must-preserve", "a thing to keep as it is (FILE:A-B anchors the note there)"))


def cmd_handoff(args: argparse.Namespace) -> int:
    from engram.cli.query import _ready_db
    from engram.continuity.handoff import handoff_request, parse_note
    from engram.errors import BadInput
    from engram.memory.model import calling_agent

    given = {key: getattr(args, key) for key, _, _ in _NOTE_FLAGS if getattr(args, key)}
    if given:
        note = given
    elif sys.stdin.isatty():
        raise BadInput("give the note with --goal/--done/--next/... or on stdin (text with `Goal:`, `Done:`, "
                       "`Next steps:`... headings and `- item` lines, or JSON)")
    else:
        note = parse_note(sys.stdin.read())
    store = store_of(args)
    with closing(_ready_db(store)) as db:
        done = handoff_request(store, db, args.session, note, calling_agent(), args.harness)
    if args.json:
        print_json(done)
        return 0
    print(f"{done['id']}  hand-off note for session {done['session_id']}")
    for span in done["anchored"]:
        print(f"  anchored to {span}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `engram resume` and `engram handoff` to the command line."""
    s = sub.add_parser("resume", help="what a new session needs to continue a session's work, from its transcript")
    s.add_argument("session", nargs="?", help="a session id (or its start) or tape-id prefix, as `engram show` takes "
                                              "(default: the latest session in this repository)")
    s.add_argument("--harness", metavar="NAME", help="the latest session of this harness (claude-code, codex, ...)")
    s.add_argument("--budget", type=count, metavar="TOKENS",
                   help="at most this many tokens, 4 bytes of the package's JSON each (default 2000; 0: no bound)")
    s.add_argument("--for", dest="for_", choices=["claude", "codex"],
                   help="print it as the first prompt of a new Claude Code or Codex session")
    people_output(s)
    s.set_defaults(func=cmd_resume)

    s = sub.add_parser("handoff", help="leave a hand-off note for the next session (resume shows it, checked)")
    s.add_argument("session", nargs="?", help="the session it hands off (default: the calling agent's session when "
                                              "its harness says, else the latest)")
    s.add_argument("--harness", metavar="NAME", help="with no session: the latest session of this harness")
    for key, flag, text in _NOTE_FLAGS:
        if key == "goal":
            s.add_argument(flag, dest=key, metavar="TEXT", help=text)
        else:
            s.add_argument(flag, dest=key, metavar="TEXT", action="append", help=text)
    people_output(s)
    s.set_defaults(func=cmd_handoff)
