"""`engram task ...`: tasks that group sessions toward one goal, and their checkpoints
(engram.continuity.tasks; `engram resume --task T` reads a task's sessions as one)."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from typing import Any

from engram.cli.argtypes import positive
from engram.cli.context import store_of
from engram.cli.output import people_output, print_json


def _when(ts: str | None) -> str:
    return (ts or "?")[:16].replace("T", " ")


def _print_task(t: dict[str, Any], sessions: list[dict[str, Any]] | None = None) -> None:
    print(f"{t['id']}  [{t['status']}]  {t['title']}")
    if t.get("goal"):
        print(f"  goal: {t['goal']}")
    print(f"  created {_when(t['created'])}" + (f", closed {_when(t['closed'])}" if t.get("closed") else "")
          + (f" ({t['why']})" if t.get("why") else "") + f"; {t['checkpoints']} checkpoint"
          + ("s" if t["checkpoints"] != 1 else ""))
    for s in sessions or []:
        span = f"{_when(s.get('started'))} → {_when(s.get('ended'))}" if s["captured"] else "not captured yet"
        print(f"  - {s['session_id']}  {s.get('harness') or '?'}  {span}  ({s['via']})")


def cmd_task(args: argparse.Namespace) -> int:
    from engram.cli.query import _ready_db
    from engram.continuity import tasks as T
    from engram.memory.model import calling_agent

    store = store_of(args)
    who = calling_agent()
    with closing(_ready_db(store)) as db:
        cmd = args.task_command
        if cmd == "new":
            task = T.new_task(store, db, args.title, goal=args.goal, session=args.session, source=who)
            doc: Any = {**task.summary(), "sessions": T.sessions(db, task)}
        elif cmd == "list":
            doc = [t.summary() for t in T.load(store).values() if args.all or t.status == "open"]
        elif cmd == "show":
            task = T.find(T.load(store), args.task)
            doc = {**task.summary(), "sessions": T.sessions(db, task)}
        elif cmd == "join":
            task, sid = T.join(store, db, args.task, args.session, source=who)
            doc = {**task.summary(), "sessions": T.sessions(db, task), "joined_session": sid}
        elif cmd in ("close", "reopen"):
            task = T.close(store, args.task, why=getattr(args, "why", None), reopen=cmd == "reopen", source=who)
            doc = task.summary()
        else:
            return _checkpoints(args, T.find(T.load(store), args.task))
    if args.json:
        print_json(doc)
    elif cmd == "list":
        for t in doc:
            _print_task(t)
        if not doc:
            print("no task yet (engram task new TITLE starts one)" if args.all else
                  "no open task (engram task new TITLE starts one; --all lists closed ones too)", file=sys.stderr)
    else:
        _print_task(doc, doc.get("sessions"))
    return 0


def _checkpoints(args: argparse.Namespace, task: Any) -> int:
    from engram.continuity.text import render

    if args.version is not None:
        found = [c for c in task.checkpoints if c["version"] == args.version]
        if not found:
            from engram.errors import BadInput
            from engram.words import plural

            raise BadInput(f"task {task.id} has {plural(len(task.checkpoints), 'checkpoint')}; no version {args.version}")
        c = found[0]
        if args.json:
            print_json(c)
        elif c["kind"] == "resume":
            sys.stdout.write(f"Checkpoint {c['version']} of task {task.id} ({c['kind']}, {c['ts']})\n"
                             + render(c["doc"]))
        else:
            from engram.continuity.handoff import note_text

            print(f"Checkpoint {c['version']} of task {task.id} (hand-off note {c['doc'].get('id')}, {c['ts']})")
            print(note_text(c["doc"].get("note") or {}))
        return 0
    rows = [{k: c[k] for k in ("version", "kind", "session", "ts", "by")} for c in task.checkpoints]
    if args.json:
        print_json(rows)
        return 0
    for r in rows:
        by = r.get("by") or {}
        who = " ".join(str(x) for x in (by.get("type"), by.get("harness")) if x)
        print(f"{r['version']:>3}  {r['kind']:<7}  {_when(r['ts'])}  session {str(r['session'])[:8]}  by {who or '?'}")
    if not rows:
        print(f"task {task.id} has no checkpoint yet: `engram resume --task {task.id}` or a hand-off "
              "(engram handoff --task) keeps one", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `engram task ...` to the command line."""
    s = sub.add_parser("task", help="tasks: sessions grouped toward one goal, across harnesses, with checkpoints",
                       description="A task groups the sessions working toward one goal; `engram resume --task T` "
                                   "reads them as one, and keeps each package as a checkpoint (docs/resume.md).")
    tsub = s.add_subparsers(dest="task_command", required=True, metavar="SUBCOMMAND")
    p = tsub.add_parser("new", help="start a task (with --session, that session joins it)")
    p.add_argument("title", nargs="?", help="a line naming the goal (default: the first line of the first request "
                                            "of --session, or of the latest session, verbatim)")
    p.add_argument("--goal", metavar="TEXT", help="the goal in more words")
    p.add_argument("--session", metavar="SESSION", help="a session that joins the task at once (id, its start, "
                                                        "or a tape-id prefix)")
    people_output(p)
    p = tsub.add_parser("list", help="the open tasks (--all: closed ones too)")
    p.add_argument("--all", action="store_true", help="closed tasks too")
    people_output(p)
    for name, text in (("show", "a task, its sessions and how each belongs"),
                       ("reopen", "open a closed task again")):
        p = tsub.add_parser(name, help=text)
        p.add_argument("task", help="task id (or its start) or title")
        people_output(p)
    p = tsub.add_parser("join", help="add a session to a task (the ones continuing it follow on their own)")
    p.add_argument("task", help="task id (or its start) or title")
    p.add_argument("session", nargs="?", help="default: the calling agent's session when its harness says, "
                                              "else the latest session")
    people_output(p)
    p = tsub.add_parser("close", help="close a task (its sessions and checkpoints are kept)")
    p.add_argument("task", help="task id (or its start) or title")
    p.add_argument("--why", metavar="TEXT", help="why: done, abandoned, ...")
    people_output(p)
    p = tsub.add_parser("checkpoints", help="the task's checkpoints: each resume --task and hand-off, numbered")
    p.add_argument("task", help="task id (or its start) or title")
    p.add_argument("--version", type=positive, metavar="N", help="print checkpoint N (the package or note it kept)")
    people_output(p)
    s.set_defaults(func=cmd_task)
