"""The `engram` console script: the core CLI plus the protocol servers as subcommands."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from engram.cli import exit_process
from engram.cli import main as core_main


def _lsp(args: argparse.Namespace) -> int:
    from .lsp import main as lsp_main  # noqa: PLC0415 - pygls loads only for `engram lsp`

    return lsp_main(args.lsp_args)


def _mcp(args: argparse.Namespace) -> int:
    from .mcp_stdio import main as mcp_main  # noqa: PLC0415

    return mcp_main(args.mcp_args)


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("lsp", help="run the language server (stdio; --tcp PORT for debugging)", add_help=False)
    s.add_argument("lsp_args", nargs=argparse.REMAINDER)
    s.set_defaults(func=_lsp)
    s = sub.add_parser("mcp", help="run the MCP server over stdio for agents", add_help=False)
    s.add_argument("mcp_args", nargs=argparse.REMAINDER)
    s.set_defaults(func=_mcp)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # argparse's REMAINDER cannot take options first (`engram lsp --stdio`): route these directly.
    if args and args[0] == "lsp":
        return _lsp(argparse.Namespace(lsp_args=args[1:]))
    if args and args[0] == "mcp":
        return _mcp(argparse.Namespace(mcp_args=args[1:]))
    return core_main(args, plugins=[register])


def console() -> None:
    """The installed `engram` script (and `python -m engram_server.entry`): `main`, then the exit
    the command allows (see `engram.cli.exit_process`)."""
    argv = sys.argv[1:]
    exit_process(argv, main(argv))


if __name__ == "__main__":
    console()
