"""`engram lsp`: build the server from its feature modules and run it on stdio (or TCP)."""

from __future__ import annotations

import argparse
import logging
import sys
from types import ModuleType

from . import actions, commands, endpoint, epoch, heap, hover, lenses, lifecycle, sync
from .server import EngramLanguageServer
from .transport import CappedStdin, answer_invalid_requests

# Each registers its handlers with `register(server)`. Lifecycle first: it owns `initialized` and
# `shutdown`, which run the other features' hooks in this order (heap after endpoint: it waits for
# the endpoint's start-up).
FEATURES: tuple[ModuleType, ...] = (lifecycle, sync, lenses, hover, actions, commands, endpoint, epoch, heap)
#: The GIL's switch interval in this process (Python's default: 5 ms). While the worker thread
#: resolves notes or regions, each hand-over of a request between the stdin reader thread (pygls
#: reads stdin on a thread) and the event loop may wait that long for the GIL, several times a
#: request. With it and the notes resolved in slices, a hover right after an edit went from 76 to
#: 27 ms p50 at load 17 (bench/lsp_notes.py, the two changes measured together).
SWITCH_INTERVAL_S = 0.0005


def create_server() -> EngramLanguageServer:
    server = EngramLanguageServer()
    for feature in FEATURES:
        feature.register(server)
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="engram lsp", description="Engram language server")
    ap.add_argument("--stdio", action="store_true", help="use stdio (the default; VS Code's client passes it)")
    ap.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT instead (for debugging)")
    ap.add_argument("--log-file", help="also log to this file")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    args = ap.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    logging.basicConfig(level=level, handlers=handlers, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        force=True)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    server = create_server()
    answer_invalid_requests(server)
    try:
        if args.tcp:
            server.start_tcp("127.0.0.1", args.tcp)
        else:
            server.start_io(stdin=CappedStdin(sys.stdin.buffer))
    finally:
        endpoint.forget(server)
    return 0
