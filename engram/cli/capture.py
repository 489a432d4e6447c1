"""Commands that capture: `engram init`, `engram ingest`, `engram record`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engram.cli import argtypes, running_server
from engram.cli.context import store_of
from engram.cli.output import people_output, print_json
from engram.words import plural


def cmd_init(args: argparse.Namespace) -> int:
    from engram.store.repo import find_repo_root, init_store

    here = Path(args.repo).resolve() if getattr(args, "repo", None) else Path.cwd()  # -C: as if started there
    given = (here / args.path).resolve() if args.path else here
    if not given.is_dir():  # (a typo must not make a folder tree)
        from engram.errors import BadInput

        raise BadInput(f"{args.path}: {'not a' if given.exists() else 'no such'} directory; "
                       "give the repository's root (or run `engram init` in it)")
    # a folder of a repository (or its .engram/): the store goes at the root, where every command looks
    root = find_repo_root(given) or given
    store, warnings = init_store(root)
    existed = store.index_path.is_file()  # (a store, not a folder someone made; open_db below creates it)
    from engram.index.db import open_db

    open_db(store).close()  # the index exists from the start: a read-only query never creates it
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print_json({"store": str(store.dir), "created": not existed, "warnings": warnings})
    else:
        done = "already initialised" if existed else "initialised"  # (re-running is safe: it repairs)
        print(f"{done} {store.dir}" + (f" (the root of the repository {args.path} is in)"
                                       if args.path and root != given else ""))
        from engram.share.git import Git

        if Git(store.root).remotes():  # (no network: whether teammates pushed is for `engram pull` to find)
            print("  teammates' sessions and notes shared on the remote: `engram pull` (docs/sharing.md)",
                  file=sys.stderr)
    return 0


def _harness_dir(value: str | None, option: str) -> Path | None:
    """The directory given with --claude or --codex: a typo must not read as "no sessions"."""
    from engram.errors import BadInput

    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise BadInput(f"{option} {value}: no such directory")
    return path


def cmd_ingest(args: argparse.Namespace) -> int:
    store = store_of(args)
    maps: list[tuple[str, str]] = args.map or []
    again = bool(getattr(args, "again", False))
    if args.paths and not args.watch and not again:
        handed = running_server.ingest_via_server(str(store.root), args.paths, maps)
        if handed is not None:
            _report(handed, handed["summary"], args.json)
            return _incomplete(int(handed.get("failed") or 0))
    from engram.capture.discovery import DiscoveryReport, discover
    from engram.capture.pipeline import ingest, ingest_paths, terminal_progress
    from engram.capture.stats import IngestStats

    progress = terminal_progress("ingest")
    if args.paths:
        stats = ingest_paths(store, [Path(p) for p in args.paths], maps, progress, again=again)
        _report(stats.as_dict(), stats.summary(), args.json)
    else:
        stats, report = IngestStats(), DiscoveryReport()
        jobs = discover(store.root, _harness_dir(args.claude, "--claude"), _harness_dir(args.codex, "--codex"), stats,
                        report, maps)
        ingest(store, jobs, maps=maps, stats=stats, progress=progress, after_tape=_indexer(store), again=again)
        from engram.interop.sources import ingest_repository_sources  # Entire checkpoints, git-ai notes

        kept = ingest_repository_sources(store, stats, lambda: _indexer(store))
        verbose = bool(args.verbose or args.command_verbose)
        _report({**stats.as_dict(), "discovery": report.as_dict(), "repository": kept.as_dict()},
                stats.summary() + "".join(f"\n{line}" for line in kept.lines())
                + _where_looked(report, verbose, kept.found),
                args.json)
    from engram.memory import has_log

    if has_log(store):  # (the memory modules load only for a store that has memories)
        from engram.memory.memories import embed_waiting
        from engram.memory.provenance import link_waiting

        embed_waiting(store)  # memories written since the last ingest get their vectors (batched, off recall's path)
        link_waiting(store)  # agents' memories: the remember call in the new tapes that wrote each
    if args.watch:
        from engram.capture.watch import watch

        return watch(store, args, maps, indexer_for=_indexer)
    return _incomplete(stats.failed)


def _incomplete(failed: int) -> int:
    """Exit 1 when the run itself lost sessions (a worker killed, a tape the disk refused): a
    script or hook that checks the status learns that a re-run is needed, which a summary on
    stdout alone never told it. Input engram does not read (not a transcript) is not a failure."""
    if not failed:
        return 0
    print(f"engram: ingest incomplete: {plural(failed, 'session')} not captured; run `engram ingest` again",
          file=sys.stderr)
    return 1


def _where_looked(report, verbose: bool, in_repository: bool = False) -> str:  # noqa: ANN001
    """Where discovery looked and why sessions there did not match: said when it found none
    (`0 sessions` alone left a user guessing) and with --verbose; not when the repository's own
    sessions (an Entire branch, git-ai notes: `in_repository`) are what this ingest reads."""
    found = report.found or in_repository
    if found and not verbose:
        return ""
    lines = report.lines(every=verbose)
    if not found:
        lines.append("to capture sessions kept elsewhere, give their files or directories: `engram ingest PATH...` "
                     "(or --claude DIR / --codex DIR)")
    return "".join(f"\n  {line}" for line in lines)


def _report(doc: dict, summary: str, as_json: bool) -> None:
    if as_json:
        print_json(doc)
    else:
        print(summary)


def _indexer(store):  # noqa: ANN001, ANN202
    """Indexing runs as part of capture: each new tape is indexed, in batches."""
    from engram.index.build import Indexer

    return Indexer(store)


def cmd_record(args: argparse.Namespace) -> int:
    from engram.capture.record import record_command, record_stdin

    store = store_of(args)
    if args.stdin:
        stats = record_stdin(store, args.format, sys.stdin.buffer, after_tape=_indexer(store))
        if not stats.sessions and stats.skipped:  # one input and nothing of it kept: an error, not a summary
            from engram.errors import BadInput

            if set(stats.skipped) == {"empty input on stdin"}:
                raise BadInput("nothing recorded: stdin is empty; pipe a transcript into it")
            why = "; ".join(reason for reason in stats.skipped)
            raise BadInput(f"nothing recorded: stdin holds no transcript engram reads ({why}); "
                           "`--format claude|codex|events|raw` names its format")
        _report(stats.as_dict(), stats.summary(), args.json)
        return 0
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        from engram.errors import BadInput

        raise BadInput("nothing to record: give a command after `--`, or --stdin")
    code, tape = record_command(store, cmd, after_tape=_indexer(store))
    # A command a signal ended (-N, Python's way) exits as a shell says it did: 128 + N (Ctrl-C: 130;
    # sys.exit(-2) was 254)
    status = 128 - code if code < 0 else code
    if args.json:
        print_json({"tape": tape, "exit_status": status})
    else:
        how = f"killed by {_signal_name(-code)}, exit status {status}" if code < 0 else f"exit status {code}"
        print(f"recorded tape {tape[:12]} ({how})", file=sys.stderr)
    return status


def _signal_name(n: int) -> str:
    import signal  # noqa: PLC0415

    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def register(sub: argparse._SubParsersAction) -> None:
    """Add the capture commands to the command line."""
    s = sub.add_parser("init", help="create .engram/ in this repository")
    s.add_argument("path", nargs="?", help="repository root (default: the enclosing repository)")
    people_output(s)
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("ingest", help="capture agent sessions as tapes (and index them)")
    s.add_argument("paths", nargs="*", help="transcript files or directories (default: discover this repo's sessions)")
    s.add_argument("--claude", metavar="DIR", help="Claude Code projects directory (default ~/.claude/projects)")
    s.add_argument("--codex", metavar="DIR", help="Codex sessions directory (default ~/.codex)")
    s.add_argument("--map", action="append", metavar="FROM=TO", type=argtypes.path_map, help="rewrite session paths starting with FROM (without case for sessions recorded on macOS or "
                   "Windows)")
    s.add_argument("--watch", action="store_true", help="keep following live session files")
    s.add_argument("--again", action="store_true",
                   help="also capture sessions removed by `engram tapes rm` (from their start, with today's rules)")
    s.add_argument("-v", "--verbose", action="count", default=0, dest="command_verbose",
                   help="also say where discovery looked and why sessions there did not match (as `engram -v`)")
    people_output(s)
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("record", help="record a command (or a transcript on stdin) as a tape")
    s.add_argument("--stdin", action="store_true", help="read a transcript from standard input")
    s.add_argument("--format", choices=["claude", "codex", "events", "raw"], help="stdin format (default: detect)")
    people_output(s)
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]: the command to run and record")
    s.set_defaults(func=cmd_record)
