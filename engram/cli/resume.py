"""`engram resume`: what a new session needs to pick up a session's work (engram.continuity)."""

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


def register(sub: argparse._SubParsersAction) -> None:
    """Add `engram resume` to the command line."""
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
