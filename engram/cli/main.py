"""The `engram` command line: builds the parser from the command groups and dispatches.

Each group of commands lives in its own module of this package and adds its parsers with a
`register(sub)` function: `capture` (init, ingest, record), `tapes` (tapes, show, gc), `agents`
(setup, hook), `query` (explain, view, search, index, reindex), `memory` (remember, recall,
forget, memory ...); the language server and MCP commands come from `engram_server.entry` as
plugins. The demo runs other commands through `main`,
so it is wired here. Imports stay inside handlers: `engram --help` must be instant."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from engram.cli import agents, capture, memory, query, running_server, tapes

log = logging.getLogger("engram")

# Nothing engram runs uses BLAS; with one thread OpenBLAS starts no pool when numpy is imported,
# ~15 ms of every command that fingerprints (measured with `python -c "import numpy"` here).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

Handler = Callable[[argparse.Namespace], int]


def cmd_demo(args: argparse.Namespace) -> int:
    from engram.cli.demo import run_demo

    return run_demo(Path(args.dir) if args.dir else None, keep=args.keep, run=main)


Plugin = Callable[[argparse._SubParsersAction], None]


class _Skipped:
    """Stands in for the parser of a command that is not being run (see `_OnlyCommand`)."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        return None

    def set_defaults(self, **kwargs: object) -> None:
        return None

    def add_subparsers(self, **kwargs: object) -> _Skipped:
        return self

    def add_parser(self, *args: object, **kwargs: object) -> _Skipped:
        return self

    def add_mutually_exclusive_group(self, **kwargs: object) -> _Skipped:
        return self


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

    capture.register(sub)
    tapes.register(sub)
    s = sub.add_parser("demo", help="ingest a real shipped session into a throw-away repository and explain it")
    s.add_argument("--dir", help="build the demo repository here instead of a temporary directory")
    s.add_argument("--keep", action="store_true", help="keep the temporary repository")
    s.set_defaults(func=cmd_demo)
    agents.register(sub)
    query.register(sub)
    memory.register(sub)
    for plugin in plugins:
        plugin(sub)
    if isinstance(sub, _OnlyCommand) and not sub.found:
        return build_parser(plugins)  # not a command: the full parser says which ones exist
    return p


def main(argv: Sequence[str] | None = None, plugins: Sequence[Plugin] = ()) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:  # a hook never fails the agent, not even on bad arguments
        return agents.run_hook_command(argv[1] if len(argv) > 1 else None)
    parser = build_parser(plugins, only=_command_of(argv))
    args = parser.parse_args(argv)
    running_server.configure_logging(args.verbose)
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
QUICK_EXIT_COMMANDS = frozenset({"explain", "view", "search", "recall"})


def exit_process(argv: Sequence[str], code: int) -> NoReturn:
    """End a command-line run with `code`: a query (or a command a language server carried out)
    without the interpreter's teardown, its output and logs flushed first; any other normally."""
    if _command_of(argv) not in QUICK_EXIT_COMMANDS and not running_server.answered:
        sys.exit(code)
    running_server.leave(code)


if __name__ == "__main__":
    exit_process(sys.argv[1:], main())
