"""The `engram` console script: the core CLI plus the protocol servers as subcommands."""

from __future__ import annotations

import gc
import sys

TYPE_CHECKING = False  # (not typing's: see `console`)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def _lsp(args: argparse.Namespace) -> int:
    from .lsp import main as lsp_main  # noqa: PLC0415 - pygls loads only for `engram lsp`

    return lsp_main(args.lsp_args)


def _mcp(args: argparse.Namespace) -> int:
    from .mcp_stdio import main as mcp_main  # noqa: PLC0415

    return mcp_main(args.mcp_args)


def register(sub: argparse._SubParsersAction) -> None:
    import argparse  # noqa: PLC0415

    s = sub.add_parser("lsp", help="run the language server (stdio; --tcp PORT for debugging)", add_help=False)
    s.add_argument("lsp_args", nargs=argparse.REMAINDER, metavar="...",
                   help="the language server's own options (--stdio, --tcp PORT, --log-file F): `engram lsp --help`")
    s.set_defaults(func=_lsp)
    s = sub.add_parser("mcp", help="run the MCP server over stdio for agents", add_help=False)
    s.add_argument("mcp_args", nargs=argparse.REMAINDER, metavar="...",
                   help="the MCP server's own options (--repo DIR): `engram mcp --help`")
    s.set_defaults(func=_mcp)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # noqa: PLC0415

    from engram.cli.main import main as core_main  # noqa: PLC0415

    args = list(sys.argv[1:] if argv is None else argv)
    # argparse's REMAINDER cannot take options first (`engram lsp --stdio`): route these directly.
    if args and args[0] == "lsp":
        return _lsp(argparse.Namespace(lsp_args=args[1:]))
    if args and args[0] == "mcp":
        return _mcp(argparse.Namespace(mcp_args=args[1:]))
    return core_main(args, plugins=[register])


def _resume_package(raw: str) -> str | None:
    """The hook's resume package after a compaction (engram.cli.resume: imported only then)."""
    from engram.cli.resume import resume_hook  # noqa: PLC0415

    return resume_hook(raw)


def console() -> None:
    """The installed `engram` script (and `python -m engram_server.entry`): `main`, then the exit
    the command allows (see `engram.cli.main.exit_process`).

    An `engram ingest FILE` that a running language server can do whole is handed to it first,
    before anything else is imported (`engram.cli.running_server.quick`): the command line's own imports
    would be a third of the time an agent's hook may take to append its session.

    The cyclic garbage collector is off until the command is known: the start-up's imports (numpy,
    the memory modules' dataclasses) allocate enough to set off 30-80 collections that free
    nothing, 9-16 ms of the CPU of a hook before an edit or of a blame (bench/hooks.py,
    bench/blame.py). The hook and the one-shot queries (`QUICK_EXIT_COMMANDS`: they exit without
    the interpreter's teardown) keep it off, their garbage freed by reference counting; every
    other command (an ingest, a server) turns it back on."""
    gc.disable()
    argv = sys.argv[1:]
    from engram.cli.version import answer_version  # noqa: PLC0415

    if answer_version(argv):  # what setup and doctor run to check a configured engram
        return
    from engram.cli import running_server  # noqa: PLC0415

    code = running_server.quick(argv, _resume_package)
    if code is not None:
        running_server.leave(code)
    from engram.cli.main import exit_process, one_shot  # noqa: PLC0415

    if not one_shot(argv):
        gc.enable()
    exit_process(argv, main(argv))


if __name__ == "__main__":
    console()
