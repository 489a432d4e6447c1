"""`engram resume`: what a new session needs to pick up a session's work, and `engram handoff`:
an explicit hand-off note for it (engram.continuity)."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from typing import Any

from engram.cli.argtypes import count
from engram.cli.context import store_of
from engram.cli.output import people_output, print_json

#: SessionStart sources the hook answers: the context was lost (compact, clear) or the session was
#: resumed. A fresh `startup` gets nothing: a new task should not start inside an old one.
HOOK_SOURCES = ("compact", "resume", "clear")


def resume_hook(raw: str) -> str | None:
    """The SessionStart hook (Claude Code; Codex's hooks take the same payload): for a session
    that starts after a compaction, a resume or a /clear in a repository with a store, the hook
    output that adds the resume package to the new context, else None. The transcript named in
    the payload is ingested first (a compaction's own session, up to its last event). Never raises:
    a hook must not break the agent's start."""
    try:
        return _hook_output(raw)
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the session's start
        import logging  # noqa: PLC0415

        logging.getLogger(__name__).debug("resume hook: %s", exc)
        return None


def _hook_output(raw: str) -> str | None:
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from engram.integrations.hook import MAX_PAYLOAD, parse_payload  # noqa: PLC0415

    payload = parse_payload(raw[:MAX_PAYLOAD])
    if payload is None or payload.get("hook_event_name", "SessionStart") != "SessionStart":
        return None
    source, cwd = payload.get("source"), payload.get("cwd")
    if source not in HOOK_SOURCES or not isinstance(cwd, str) or not os.path.isdir(cwd):
        return None
    from engram.cli.query import _ready_db  # noqa: PLC0415
    from engram.continuity.package import DEFAULT_BUDGET, Options, resume  # noqa: PLC0415
    from engram.continuity.text import first_prompt  # noqa: PLC0415
    from engram.errors import StoreNotFound, UnknownTape  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    try:
        store = Store.discover(Path(cwd))
    except StoreNotFound:
        return None
    if not store.exists():
        return None
    transcript = payload.get("transcript_path")
    if source != "clear" and isinstance(transcript, str) and transcript.endswith(".jsonl") and os.path.isfile(transcript):
        from engram.capture.pipeline import ingest_paths  # noqa: PLC0415

        ingest_paths(store, [Path(transcript)], [], None)
    session = payload.get("session_id") if source != "clear" else None
    with closing(_ready_db(store)) as db:
        try:
            doc = resume(store, db, _hook_options(store, db, session if isinstance(session, str) and session else None))
        except UnknownTape:
            doc = resume(store, db, Options(budget=DEFAULT_BUDGET))  # its own session is not captured: the latest
    codex = isinstance(transcript, str) and (".codex" in transcript or "rollout-" in os.path.basename(transcript))
    context = first_prompt(doc, "codex" if codex else "claude")  # the harness starting, whichever recorded the work
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}})


def _hook_options(store: Any, db: Any, session: str | None) -> Any:
    """What the hook resumes: the session's package, or when the session belongs to an open task
    (joined, or continuing a session that did), the task's (the latest task it joined; kept as
    the task's checkpoint like any `resume --task`)."""
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415
    from engram.continuity.package import DEFAULT_BUDGET, Options  # noqa: PLC0415
    from engram.continuity.tasks import tasks_of  # noqa: PLC0415

    if session is not None:
        sid = resolve_chain(db, session).session_id
        found = tasks_of(store, db, sid)
        if found:
            return Options(task=found[-1].id, budget=DEFAULT_BUDGET,
                           more="engram resume --task {task} --budget {budget}")
    return Options(session=session, budget=DEFAULT_BUDGET)


def cmd_resume(args: argparse.Namespace) -> int:
    if args.hook:
        out = resume_hook(sys.stdin.read() if not sys.stdin.isatty() else "")
        if out:
            sys.stdout.write(out + "\n")
        return 0
    from engram.cli.query import _ready_db
    from engram.continuity.package import DEFAULT_BUDGET, Options, resume
    from engram.continuity.text import first_prompt, render

    store = store_of(args)
    if args.task and (args.session or args.harness):
        from engram.errors import BadInput

        raise BadInput("--task reads the task's sessions: give the task, or a session (--harness), not both")
    more = ("engram resume --task {task} --budget {budget}" if args.task else
            "engram resume {session} --budget {budget}") + (f" --for {args.for_}" if args.for_ else "")
    opts = Options(session=args.session, harness=args.harness,
                   budget=DEFAULT_BUDGET if args.budget is None else args.budget, more=more, task=args.task)
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
        done = handoff_request(store, db, args.session, note, calling_agent(), args.harness, task=args.task)
    if args.json:
        print_json(done)
        return 0
    print(f"{done['id']}  hand-off note for session {done['session_id']}")
    for t in done.get("checkpoints") or []:
        print(f"  checkpoint {t['version']} of task {t['task']}", file=sys.stderr)
    for span in done["anchored"]:
        print(f"  anchored to {span}", file=sys.stderr)
    for gone in done.get("unanchored") or []:
        print(f"  not anchored: {gone['why']} (the note keeps {gone['span']} as text)", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `engram resume` and `engram handoff` to the command line."""
    s = sub.add_parser("resume", help="what a new session needs to continue a session's work, from its transcript")
    s.add_argument("session", nargs="?", help="a session id (or its start) or tape-id prefix, as `engram show` takes "
                                              "(default: the latest session in this repository)")
    s.add_argument("--harness", metavar="NAME", help="the latest session of this harness (claude-code, codex, ...)")
    s.add_argument("--task", metavar="TASK", help="all the sessions of a task (engram task), read as one; the "
                                                  "package is kept as the task's next checkpoint")
    s.add_argument("--budget", type=count, metavar="TOKENS",
                   help="at most this many tokens, 4 bytes of the package's JSON each (default 2000; 0: no bound)")
    s.add_argument("--for", dest="for_", choices=["claude", "codex"],
                   help="print it as the first prompt of a new Claude Code or Codex session")
    s.add_argument("--hook", action="store_true",
                   help="for a SessionStart hook: read its payload on stdin, print the package as context "
                        "after a compaction, resume or /clear; always exits 0 (docs/resume.md)")
    people_output(s)
    s.set_defaults(func=cmd_resume)

    s = sub.add_parser("handoff", help="leave a hand-off note for the next session (resume shows it, checked)")
    s.add_argument("session", nargs="?", help="the session it hands off (default: the calling agent's session when "
                                              "its harness says, else the latest)")
    s.add_argument("--harness", metavar="NAME", help="with no session: the latest session of this harness")
    s.add_argument("--task", metavar="TASK", help="the session joins this task (engram task), and the note is "
                                                  "kept as its next checkpoint")
    for key, flag, text in _NOTE_FLAGS:
        if key == "goal":
            s.add_argument(flag, dest=key, metavar="TEXT", help=text)
        else:
            s.add_argument(flag, dest=key, metavar="TEXT", action="append", help=text)
    people_output(s)
    s.set_defaults(func=cmd_handoff)
    from engram.cli import task  # noqa: PLC0415

    task.register(sub)
