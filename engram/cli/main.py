"""The `engram` command line: builds the parser from the command groups and dispatches.

Each group of commands lives in its own module of this package and adds its parsers with a
`register(sub)` function: `capture` (init, ingest, record), `tapes` (tapes, show, gc), `agents`
(setup, hook), `query` (explain, blame, view, search, index, reindex), `memory`
(remember, recall, forget, memory ...), `doctor`; the language server and
MCP commands come from `engram_server.entry` as plugins. The demo runs other commands through
`main`, and `completion` describes the whole parser, so both are wired here. Imports stay inside
handlers: `engram --help` must be instant.

Bare `engram` prints the help and exits 1, as bare `git` does: a script that runs engram without
a command learns that it did nothing. A mistyped command is answered with the nearest ones."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from engram.cli import running_server
from engram.cli.version import answer_version, version_line

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


class _VersionAction(argparse.Action):
    """`--version`, computed only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version_line())
        parser.exit()


_DASHED = "; for a file or directory whose name starts with '-', write ./{}"


class _Parser(argparse.ArgumentParser):
    """argparse's parser (its subcommands' too: they take the parent's class), whose formatters
    get the terminal's width without `shutil`: argparse imports it, and with it bz2 and lzma, for
    the first formatter it makes, even the one `add_argument` makes to check a metavar; ~5 ms of
    every command here (bench/blame.py), the same width (`shutil.get_terminal_size`'s columns)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=_terminal_columns() - 2)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def, override]
        self._given = list(sys.argv[1:] if args is None else args)  # (for `error`'s hint)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """argparse's error; an argument missing because a file named `-x.py` was read as an
        option says how to name that file."""
        if message.startswith("the following arguments are required") or message.endswith("expected one argument"):
            dashed = [w for w in getattr(self, "_given", []) if w.startswith("-") and _names_a_file(w, None)]
            if dashed:
                message += _DASHED.format(dashed[0])
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction) and a.required]
        if subs and message == f"the following arguments are required: {subs[0].metavar or subs[0].dest}":
            message = f"which command? one of {', '.join(subs[0].choices)} (`{self.prog} COMMAND --help` for one)"
        super().error(message)


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`: COLUMNS when positive, else the terminal on
    sys.__stdout__, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str],
                  extra: list[str]) -> None:
    """Exit 2 on arguments no parser took, with the usage of the command they were given to and the
    nearest option (`memory edit --tags` showed `engram`'s own usage, naming no option of edit's)."""
    import difflib  # noqa: PLC0415

    inner = parser
    command = getattr(args, "command_name", None)
    before = argv[:argv.index(command)] if command in argv else []
    while not set(extra) <= set(before):  # (a typo of an option of engram's own, before the command: engram's)
        subs = [a for a in inner._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subs[0].dest, None) if subs else None
        if not subs or chosen not in subs[0].choices:
            break
        inner = subs[0].choices[chosen]
    options = [o for a in inner._actions for o in a.option_strings if o.startswith("--")]
    own = {o for a in parser._actions for o in a.option_strings}  # engram's own: -v, -C DIR, --no-color
    hint = ""
    for word in extra:
        if inner is not parser and word.split("=", 1)[0] in own:
            hint = f"; {word} is an option of engram itself: put it before the command (engram {word} {command} ...)"
            break
        near = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.75) if word.startswith("-") else []
        if near and near[0] == word.split("=", 1)[0] and "--" in argv[:argv.index(word) if word in argv else 0]:
            hint = f"; {word} came after `--`, which ends the options: put it before"
            break
        if near:
            hint = f"; did you mean {near[0]}?"
            break
        if word.startswith("-") and _names_a_file(word, getattr(args, "repo", None)):
            hint = _DASHED.format(word)
            break
    inner.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def _names_a_file(word: str, repo: str | None) -> bool:
    """Is `word` (maybe FILE:LINES, FILE:A-B) a path in the directory the command runs in? A file
    named `-x.py` is read by argparse as an option; the user meant the file."""
    path = word.split(":", 1)[0] if not os.path.lexists(word) else word
    return os.path.lexists(os.path.join(repo or ".", path))


def build_parser(plugins: Sequence[Plugin] = (), only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `only`, the parser of that command alone (see `_OnlyCommand`)."""
    p = _Parser(
        prog="engram", description="Why does this code exist? Provenance of code from coding-agent sessions.",
        epilog="`engram COMMAND --help` lists a command's options. Commands print for people, except explain, "
               "view and search, which print JSON for agents and scripts (text on a terminal; --pretty, --json choose); "
               "--json gives JSON everywhere "
               "(docs/cli.md).")
    p.add_argument("--version", action=_VersionAction, help="print the version of engram and exit")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)")
    p.add_argument("-C", "--repo", metavar="DIR", help="run as if started in this directory")
    p.add_argument("--no-color", action="store_true", help="no colour, even on a terminal (as NO_COLOR=1)")
    sub: Any = p.add_subparsers(dest="command_name", required=True, metavar="COMMAND")
    if only is not None:
        sub = _OnlyCommand(sub, only)

    _register("capture", sub, only)
    _register("tapes", sub, only)
    s = sub.add_parser("demo", help="ingest a real shipped session into a throw-away repository and explain it")
    s.add_argument("--dir", help="build the demo repository here instead of a temporary directory")
    s.add_argument("--keep", action="store_true", help="keep the temporary repository")
    s.set_defaults(func=cmd_demo)
    for group in ("agents", "query", "resume", "memory", "share", "doctor", "interop"):
        _register(group, sub, only)
    s = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    s.add_argument("shell", choices=["bash", "zsh", "fish"],
                   help="the shell: e.g. `source <(engram completion bash)` in ~/.bashrc (docs/cli.md)")
    s.set_defaults(func=lambda args: _print_completion(args.shell, plugins))
    for plugin in plugins:
        plugin(sub)
    if isinstance(sub, _OnlyCommand) and not sub.found:
        return build_parser(plugins)  # not a command: the full parser says which ones exist
    _describe_commands(sub.sub if isinstance(sub, _OnlyCommand) else sub)
    return p


# The commands each group's module adds (`register`): a run imports the module of its own command
# alone. A command missing here still runs: not found among the parsers built, it gets the full one.
GROUPS: dict[str, tuple[str, ...]] = {
    "capture": ("init", "ingest", "record"),
    "tapes": ("tapes", "show", "redact", "gc"),
    "agents": ("setup", "hook"),
    "query": ("explain", "view", "blame", "search", "index", "reindex"),
    "resume": ("resume", "handoff", "task"),
    "memory": ("remember", "recall", "forget", "memory"),
    "share": ("push", "pull", "sync"),
    "doctor": ("doctor",),
    "interop": ("export", "import"),
}


def _register(group: str, sub: Any, only: str | None) -> None:
    """Add the commands of `group` (engram.cli.<group>), unless `only` names another group's."""
    if only is not None and only not in GROUPS[group]:
        return
    name = f"engram.cli.{group}"
    __import__(name)
    sys.modules[name].register(sub)


def _describe_commands(sub: argparse._SubParsersAction) -> None:
    """A command's one-line help heads its own `--help` too."""
    for action in sub._choices_actions:
        parser = sub.choices.get(action.dest)
        if parser is not None and parser.description is None:
            parser.description = action.help


def _print_completion(shell: str, plugins: Sequence[Plugin]) -> int:
    from engram.cli.completion import script  # noqa: PLC0415

    sys.stdout.write(script(shell, build_parser(plugins)))
    return 0


def commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands `parser` knows, by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_command(name: str, known: Sequence[str]) -> str:
    """What `engram NAME` says when NAME is no command: the nearest ones, if any is near."""
    import difflib  # noqa: PLC0415

    near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    line = f"engram: {name!r} is not a command"
    if near:
        line += f"; did you mean {' or '.join(near)}?"
    return line + "\n`engram --help` lists the commands."


def _utf8_arguments(argv: Sequence[str]) -> None:
    """Refuse an argument that is not UTF-8 (typed in a Latin-1 terminal: Python keeps its bytes as
    lone surrogates, which no note, tape, index or JSON can hold; each command was a traceback). A
    file's name says to rename the file (engram.fsutil.utf8_name), other text to use a UTF-8 locale."""
    from engram.errors import BadInput  # noqa: PLC0415
    from engram.fsutil import is_utf8, shown_bytes, utf8_name  # noqa: PLC0415

    for arg in argv:
        if arg.isascii() or is_utf8(arg):
            continue
        for name in (arg, arg.rsplit(":", 1)[0]):
            if os.path.lexists(name):
                utf8_name(name)
        raise BadInput(f"{shown_bytes(arg)}: not UTF-8 text; engram reads its arguments as UTF-8: give them in a UTF-8 "
                       "locale (LANG=C.UTF-8)")


def main(argv: Sequence[str] | None = None, plugins: Sequence[Plugin] = ()) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"] and argv[1:2] not in (["-h"], ["--help"]):  # a hook never fails the agent,
        from engram.cli.agents import run_hook_command  # noqa: PLC0415

        return run_hook_command(argv[1] if len(argv) > 1 else None)  # not even on bad arguments
    if answer_version(argv):  # what setup and doctor run to check a configured engram: no parser to build
        return 0
    from engram.cli.style import guard_terminals  # noqa: PLC0415

    guard_terminals()  # (what people read quotes transcripts and files: their escapes are shown, not obeyed)
    command = _command_of(argv)
    if command is None and not {"-h", "--help", "--version"} & set(argv):
        build_parser(plugins).print_help()
        return 1
    parser = build_parser(plugins, only=command)
    known = commands_of(parser)
    if command is not None and command not in known:
        print(unknown_command(command, list(known)), file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unrecognized(parser, args, argv, extra)
    if args.no_color or getattr(args, "command_no_color", False):
        from engram.cli import style  # noqa: PLC0415

        style.disable()
    running_server.configure_logging(args.verbose + getattr(args, "command_verbose", 0))
    from engram.errors import EngramError

    try:
        if getattr(args, "repo", None) and not os.path.isdir(args.repo):  # (a wrong -C is not a missing store)
            from engram.errors import BadInput  # noqa: PLC0415

            raise BadInput(f"-C {args.repo}: {'not a' if os.path.exists(args.repo) else 'no such'} directory")
        _utf8_arguments(argv)
        return args.func(args)
    except EngramError as exc:
        from engram.cli.style import paint  # noqa: PLC0415

        print(f"{paint('engram:', 'red bold', sys.stderr)} {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("engram: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if type(exc).__module__ != "apsw" or (message := _damaged_index(exc)) is None:
            raise
        from engram.cli.style import paint  # noqa: PLC0415

        print(f"{paint('engram:', 'red bold', sys.stderr)} {message}", file=sys.stderr)
        return 1


def _damaged_index(exc: BaseException) -> str | None:
    """The message for an error that says the index is damaged (issue 50: a raw `apsw.CorruptError`)."""
    from engram.errors import StoreNotFound  # noqa: PLC0415
    from engram.index.db import damage_message  # noqa: PLC0415
    from engram.store.repo import Store  # noqa: PLC0415

    try:
        path = Store.discover().index_path
    except StoreNotFound:
        path = None
    return damage_message(exc, path)


# Queries close what they open and start no process: once their answer is written, nothing the
# interpreter's teardown does (freeing every module's objects, numpy's among them) matters to
# anyone. It took 30-50 ms of a ~200 ms `engram explain` here (bench/README.md, "CLI exit").
QUICK_EXIT_COMMANDS = frozenset({"explain", "blame", "view", "search", "recall"})


def one_shot(argv: Sequence[str]) -> bool:
    """Does `engram ARGV` run a query of QUICK_EXIT_COMMANDS (one answer, then the process ends)?"""
    return _command_of(argv) in QUICK_EXIT_COMMANDS


# Commands that end without the interpreter's teardown too (`exit_process`): an ingest has closed
# its index, released its lock and joined its workers when it returns; its teardown (collecting
# and freeing every object the run left, each page first copied as the forked workers shared
# it) took 20-60 ms of a 1 s capture of 100 MB, after its last tape (bench/README.md, `capture.py`).
NO_TEARDOWN_COMMANDS = QUICK_EXIT_COMMANDS | {"ingest"}


def exit_process(argv: Sequence[str], code: int) -> NoReturn:
    """End a command-line run with `code`: a query, an ingest (NO_TEARDOWN_COMMANDS) or a command a
    language server carried out without the interpreter's teardown, its output and logs flushed
    first; any other normally."""
    if _command_of(argv) not in NO_TEARDOWN_COMMANDS and not running_server.answered:
        sys.exit(code)
    running_server.leave(code)


if __name__ == "__main__":
    exit_process(sys.argv[1:], main())
