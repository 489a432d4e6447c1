"""`engram mcp`: the MCP server over stdio, for agents started in the repository."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .mcp_tools import build_mcp, discover_store, thread_runner


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="engram mcp", description="Engram MCP server (stdio)")
    ap.add_argument("--stdio", action="store_true", help="stdio transport (the default)")
    ap.add_argument("--repo", help="repository root (default: found from the working directory)")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * min(args.verbose, 2), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    mcp = build_mcp(discover_store(Path(args.repo) if args.repo else None), thread_runner())
    mcp.run("stdio")
    return 0
