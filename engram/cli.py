"""The `engram` command line. Imports stay inside handlers: `engram --help` must be instant."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from engram import handoff
from engram.argtypes import positive

log = logging.getLogger("engram")

# Nothing engram runs uses BLAS; with one thread OpenBLAS starts no pool when numpy is imported,
# ~15 ms of every command that fingerprints (measured with `python -c "import numpy"` here).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

Handler = Callable[[argparse.Namespace], int]


def _store(args: argparse.Namespace):  # noqa: ANN202 - lazy import keeps the type out of startup
    from engram.store import Store

    return Store.discover(Path(args.repo) if getattr(args, "repo", None) else None)


def cmd_init(args: argparse.Namespace) -> int:
    from engram.store import find_repo_root, init_store

    here = Path(args.repo).resolve() if getattr(args, "repo", None) else Path.cwd()  # -C: as if started there
    root = (here / args.path).resolve() if args.path else (find_repo_root(here) or here)
    store, warnings = init_store(root)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"initialised {store.dir}")
    return 0


def _parse_maps(items: list[str] | None) -> list[tuple[str, str]]:
    from engram.errors import BadInput

    maps = []
    for item in items or []:
        if "=" not in item:
            raise BadInput(f"--map {item!r}: expected FROM=TO")
        a, b = item.split("=", 1)
        if not a:
            raise BadInput(f"--map {item!r}: FROM is empty; give the path prefix the sessions recorded")
        maps.append((a, b))
    return maps


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
    store = _store(args)
    maps = _parse_maps(args.map)
    if args.paths and not args.watch:
        handed = handoff.hand_over_ingest(str(store.root), args.paths, maps)
        if handed is not None:
            print(handed["summary"])
            return 0
    from engram.ingest import IngestStats, discover, ingest, ingest_paths, terminal_progress

    progress = terminal_progress("ingest")
    if args.paths:
        stats = ingest_paths(store, [Path(p) for p in args.paths], maps, progress)
    else:
        stats = IngestStats()
        jobs = discover(store.root, _harness_dir(args.claude, "--claude"), _harness_dir(args.codex, "--codex"), stats)
        ingest(store, jobs, maps=maps, stats=stats, progress=progress, after_tape=_indexer(store))
    print(stats.summary())
    if args.watch:
        from engram.watch import watch

        return watch(store, args, maps)
    return 0


def _indexer(store):  # noqa: ANN001, ANN202
    """Indexing runs as part of capture: each new tape is indexed, in batches."""
    from engram.index.build import Indexer

    return Indexer(store)


def cmd_record(args: argparse.Namespace) -> int:
    from engram.record import record_command, record_stdin

    store = _store(args)
    if args.stdin:
        stats = record_stdin(store, args.format, sys.stdin.buffer, after_tape=_indexer(store))
        print(stats.summary())
        return 0
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        from engram.errors import BadInput

        raise BadInput("nothing to record: give a command after `--`, or --stdin")
    code, tape = record_command(store, cmd, after_tape=_indexer(store))
    print(f"recorded tape {tape[:12]} (exit status {code})", file=sys.stderr)
    return code


def cmd_tapes(args: argparse.Namespace) -> int:
    from engram.index.catalog import list_tapes
    from engram.index.db import open_db
    from engram.render import tapes_table

    store = _store(args)
    db = open_db(store)
    rows = list_tapes(db, limit=args.limit, harness=args.harness)
    if args.json:
        import orjson

        sys.stdout.write(orjson.dumps([r.as_dict() for r in rows], option=orjson.OPT_INDENT_2).decode() + "\n")
    elif rows:
        print(tapes_table(rows))
    elif args.harness and list_tapes(db, limit=1):
        print(f"no tapes from harness {args.harness!r}; `engram tapes` lists them all", file=sys.stderr)
    else:
        print("no tapes yet: run `engram ingest`", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from engram.index.catalog import resolve_tapes, tape_file
    from engram.index.db import open_db
    from engram.render import events_view
    from engram.tape.reader import TapeReader

    store = _store(args)
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
                print(f"tape {row.id}  ({row.events} events, {row.edits} edits, {row.reads} reads)")
                print(events_view(enumerate(r.events(0, stop))))
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from engram.gc import collect

    removed, kept = collect(_store(args), dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    print(f"gc: {verb} {removed} unreferenced objects, kept {kept}; tapes are never removed")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from engram.demo import run_demo

    return run_demo(Path(args.dir) if args.dir else None, keep=args.keep)


Plugin = Callable[[argparse._SubParsersAction], None]


def _hook(payload: str | None) -> int:
    """The payload comes as an argument (Codex notify) or on stdin (Claude Code hooks)."""
    from engram.hook import run_hook

    stdin_text = None if payload is not None or sys.stdin.isatty() else sys.stdin.read(1 << 20)
    return run_hook(stdin_text, payload)


def cmd_hook(args: argparse.Namespace) -> int:
    return _hook(args.payload)


def cmd_setup(args: argparse.Namespace) -> int:
    from engram.agents_setup import codex_notify_conflict, setup
    from engram.store import find_repo_root

    root = find_repo_root(Path.cwd()) or Path.cwd()
    plans = setup(args.agent, root, dry_run=args.dry_run)
    for p in plans:
        if args.dry_run:
            print(f"--- {p.path} ({'would change' if p.changed else 'unchanged'})\n{p.text}")
        else:
            print(f"{'updated' if p.changed else 'already set up'}: {p.path}")
    if args.agent == "codex":
        conflict = codex_notify_conflict()
        if conflict:
            print(f"note: {conflict}", file=sys.stderr)
    return 0


class _Skipped:
    """Stands in for the parser of a command that is not being run (see `_OnlyCommand`)."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        return None

    def set_defaults(self, **kwargs: object) -> None:
        return None


class _OnlyCommand:
    """The subparsers action, building only the parser of the command being run.

    argparse spends ~6 ms building twenty subcommand parsers (mostly gettext looking for
    translations of its own messages) of a command that should answer in well under 150 ms;
    `engram --help` and anything that names no known command still get the full parser."""

    def __init__(self, sub: argparse._SubParsersAction, name: str) -> None:
        self.sub, self.name, self.found = sub, name, False

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser | _Skipped:
        if name != self.name:
            return _Skipped()
        self.found = True
        return self.sub.add_parser(name, **kwargs)


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in `argv` (after the global options), if any."""
    it = iter(argv)
    for tok in it:
        if tok in ("-C", "--repo"):
            next(it, None)
        elif not tok.startswith("-"):
            return tok
    return None


def build_parser(plugins: Sequence[Plugin] = (), only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `only`, the parser of that command alone (see `_OnlyCommand`)."""
    p = argparse.ArgumentParser(prog="engram", description="Why does this code exist? Provenance from agent sessions.")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    p.add_argument("-C", "--repo", help="run as if started in this directory")
    sub: Any = p.add_subparsers(dest="command_name", required=True, metavar="COMMAND")
    if only is not None:
        sub = _OnlyCommand(sub, only)

    s = sub.add_parser("init", help="create .engram/ in this repository")
    s.add_argument("path", nargs="?", help="repository root (default: the enclosing repository)")
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("ingest", help="capture agent sessions as tapes (and index them)")
    s.add_argument("paths", nargs="*", help="transcript files or directories (default: discover this repo's sessions)")
    s.add_argument("--claude", metavar="DIR", help="Claude Code projects directory (default ~/.claude/projects)")
    s.add_argument("--codex", metavar="DIR", help="Codex sessions directory (default ~/.codex)")
    s.add_argument("--map", action="append", metavar="FROM=TO", help="rewrite session paths starting with FROM")
    s.add_argument("--watch", action="store_true", help="keep following live session files")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("record", help="record a command (or a transcript on stdin) as a tape")
    s.add_argument("--stdin", action="store_true", help="read a transcript from standard input")
    s.add_argument("--format", choices=["claude", "codex", "events", "raw"], help="stdin format (default: detect)")
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    s.set_defaults(func=cmd_record)

    s = sub.add_parser("tapes", help="list tapes")
    s.add_argument("--json", action="store_true")
    s.add_argument("--limit", type=positive)
    s.add_argument("--harness")
    s.set_defaults(func=cmd_tapes)

    s = sub.add_parser("show", help="show a tape (id prefix or session id)")
    s.add_argument("tape")
    s.add_argument("--raw", action="store_true", help="the stored JSONL, verbatim")
    s.add_argument("--json", action="store_true", help="one JSON document, objects resolved")
    s.add_argument("--limit", type=positive, help="only the first N events")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("gc", help="remove objects no tape refers to (never a tape)")
    s.add_argument("--dry-run", action="store_true")
    s.set_defaults(func=cmd_gc)

    s = sub.add_parser("demo", help="ingest a real shipped session into a throw-away repository and explain it")
    s.add_argument("--dir", help="build the demo repository here instead of a temporary directory")
    s.add_argument("--keep", action="store_true", help="keep the temporary repository")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("hook", help="for agent hooks: capture the session named on stdin; always exits 0")
    s.add_argument("payload", nargs="?", help="a JSON payload (Codex notify passes it as an argument)")
    s.set_defaults(func=cmd_hook)

    s = sub.add_parser("setup", help="add Engram's MCP server and automatic capture to Claude Code or Codex")
    s.add_argument("agent", choices=["claude", "codex"])
    s.add_argument("--dry-run", action="store_true", help="print the files instead of writing them")
    s.set_defaults(func=cmd_setup)

    _register_index_commands(sub)
    for plugin in plugins:
        plugin(sub)
    if isinstance(sub, _OnlyCommand) and not sub.found:
        return build_parser(plugins)  # not a command: the full parser says which ones exist
    return p


def _register_index_commands(sub: argparse._SubParsersAction) -> None:
    try:
        from engram.query.cli_commands import register
    except ImportError:
        return
    register(sub)


def main(argv: Sequence[str] | None = None, plugins: Sequence[Plugin] = ()) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:  # a hook never fails the agent, not even on bad arguments
        return _hook(argv[1] if len(argv) > 1 else None)
    parser = build_parser(plugins, only=_command_of(argv))
    args = parser.parse_args(argv)
    handoff.configure_logging(args.verbose)
    from engram.errors import EngramError

    try:
        return args.func(args)
    except EngramError as exc:
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("engram: interrupted", file=sys.stderr)
        return 130


# Queries close what they open and start no process: once their answer is written, nothing the
# interpreter's teardown does (freeing every module's objects, numpy's among them) matters to
# anyone. It took 30-50 ms of a ~200 ms `engram explain` here (bench/README.md, "CLI exit").
QUICK_EXIT_COMMANDS = frozenset({"explain", "view", "search"})


def exit_process(argv: Sequence[str], code: int) -> NoReturn:
    """End a command-line run with `code`: a query (or a command a language server carried out)
    without the interpreter's teardown, its output and logs flushed first; any other normally."""
    if _command_of(argv) not in QUICK_EXIT_COMMANDS and not handoff.answered:
        sys.exit(code)
    handoff.leave(code)


if __name__ == "__main__":
    exit_process(sys.argv[1:], main())
