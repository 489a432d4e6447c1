"""`engram doctor`: the checks of engram/doctor.py, one line each, for people or as JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engram.cli.output import people_output, print_json


def cmd_doctor(args: argparse.Namespace) -> int:
    from engram.cli.style import paint, status
    from engram.doctor import FAIL, run_checks

    start = Path(args.repo).resolve() if getattr(args, "repo", None) else Path.cwd()
    checks = []
    for check in run_checks(start):
        checks.append(check)
        if not args.json:  # each line as its check completes: verifying a configured engram takes a moment
            line = f"{status(check.status, sys.stdout)} {check.area}: {check.detail}"
            if check.fix and check.status != "ok":
                line += f"\n     {paint('fix:', 'bold', sys.stdout)} {check.fix}"
            print(line, flush=True)
    failed = sum(c.status == FAIL for c in checks)
    if args.json:
        print_json({"ok": not failed, "checks": [c.as_dict() for c in checks]})
    return 1 if failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `engram doctor` to the command line."""
    s = sub.add_parser("doctor", help="check the store, the index, captured sessions, agent set-up, the language "
                                      "server and the embedding model; exits 1 if a check fails")
    people_output(s)
    s.set_defaults(func=cmd_doctor)
