"""Sending a command-line request to the language server running on this repository, over its local endpoint.

A command-line `engram explain` pays for a Python start and numpy's import (~150 ms here) before
its few milliseconds of work, and `engram ingest FILE` as much before a 1 MB append's ~50 ms.
When the editor is open, the language server already has the index warm and serves HTTP on
127.0.0.1 (`.engram/run/mcp.json`: port and bearer token, mode 0600): the command sends it the
request and prints what it answers. Anything wrong with that path — no run file, a dead server,
a refused or slow connection — falls back to doing the work locally; only an answer the server
gives (including an error about the request) is final. `ENGRAM_LOCAL=1` always works locally.

`quick` carries out `engram hook` (engram.integrations.hook: the agent waits for it before every
edit) and hands `engram ingest PATH...` (what an agent's hook runs after every turn) over before
the command line is even built: argparse, logging, pathlib and typing, which every other command
imports, cost ~30 ms here, a third of the 100 ms an append may take (bench/README.md, "The quick
path"). It knows only the plain forms of that one command; anything else (an option it does not
know, no store, no server, more than SERVER_INGEST_MAX_BYTES) goes to the full command line, which hands
over through the same functions. So this module imports os, sys and json at run time, socket
when a server is there, logging only when something configured it.
"""

from __future__ import annotations

import os
import sys

from engram.store.location import endpoint_file, find_store_root, started_after

TYPE_CHECKING = False  # (not typing's: importing typing costs the quick path ~10 ms)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

TIMEOUT_S = 30.0
# The most transcript bytes `engram ingest PATH...` hands to a running language server: ~0.5 s of
# its work at the measured 50 MB/s, shown without a progress bar and holding up the editor's
# lenses meanwhile. Anything bigger is captured by the command, with progress on the terminal.
SERVER_INGEST_MAX_BYTES = 32 << 20
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

answered = False  # a language server has carried out this process's command
_unreachable = False  # a language server was asked and did not answer: do not wait on it twice


def ask_language_server(endpoint: str | os.PathLike[str], what: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to `what` ("explain", "ingest") of the language server whose run file is
    `endpoint` (`Store.endpoint_file`), or None to do the work locally."""
    global answered, _unreachable
    if os.environ.get("ENGRAM_LOCAL") or _unreachable:
        return None
    import json  # noqa: PLC0415 - not for `engram --help`

    try:
        with open(endpoint, encoding="utf-8") as f:
            info = json.load(f)
            written = os.fstat(f.fileno()).st_mtime
        port, token, pid = int(info["port"]), str(info["token"]), int(info["pid"])
        os.kill(pid, 0)  # a run file left by a server that died is not asked
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if started_after(pid, written):
        return None  # nor one whose pid another process has now (after a reboot: any port may be another's)
    try:
        status, data = _post(port, f"/engram/{what}", token, json.dumps(params).encode())
        doc = json.loads(data)
    except (OSError, ValueError) as exc:
        _unreachable = True
        _info("language server on port %d did not answer (%s): answering locally", port, exc)
        return None
    if status == 400:
        from engram.errors import BadInput  # noqa: PLC0415

        raise BadInput(str(doc.get("error") if isinstance(doc, dict) else "")
                       or "the language server refused the request")
    if status != 200 or not isinstance(doc, dict):
        _unreachable = True
        _info("language server answered %d: answering locally", status)
        return None
    _info("answered by the language server on port %d", port)
    answered = True
    return doc


def ingest_via_server(root: str, paths: Sequence[str], maps: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """The report of the language server serving the store at `root` on ingesting `paths`, or
    None to ingest here.

    A fresh process pays ~150 ms of imports (numpy's, the index's) before a 1 MB append's ~50 ms
    of work; the server has them loaded, and tells the editor to refresh its lenses after. A
    path that does not exist is left to the local path, which says so."""
    endpoint = endpoint_file(root)
    if os.environ.get("ENGRAM_LOCAL") or not os.path.exists(endpoint):  # do not walk the paths for nothing
        return None
    total = 0
    for p in paths:
        size = transcript_bytes(p)
        total += size
        if size < 0 or total > SERVER_INGEST_MAX_BYTES:
            return None
    return ask_language_server(endpoint, "ingest", {"paths": [os.path.abspath(p) for p in paths],
                                                    "maps": [list(m) for m in maps]})


def transcript_bytes(path: str) -> int:
    """The size of the transcripts at `path` (a file, or the *.jsonl under a directory); -1 when
    there is nothing there."""
    try:
        if os.path.isfile(path):
            return os.stat(path).st_size
        if not os.path.isdir(path):
            return -1
    except OSError:
        return -1
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            if name.endswith(".jsonl"):
                try:
                    total += os.stat(os.path.join(dirpath, name)).st_size
                except OSError:  # a dangling link, or gone since listed: the ingest reports it
                    continue
    return total


def quick(argv: Sequence[str], resume: Callable[[str], str | None] | None = None) -> int | None:
    """The exit status of `engram ARGV` when a running language server did all of it, or None
    for the full command line (the module docstring). `resume`: the resume package for a
    SessionStart hook's payload (engram.integrations.hook.run_hook; given by the caller, which may
    import engram.cli.resume: this module may not)."""
    if argv[:1] == ["hook"] and argv[1:2] not in (["-h"], ["--help"]):  # never fails the agent, whatever
        from engram.integrations.hook import hook_process  # noqa: PLC0415 - follows (bad arguments included)

        return hook_process(argv[1] if len(argv) > 1 else None, ask_language_server, resume)
    parsed = _ingest_args(argv)
    if parsed is None or os.environ.get("ENGRAM_LOCAL"):
        return None
    verbosity, repo, paths, maps = parsed
    root = find_store_root(repo if repo is not None else os.getcwd())
    if root is None:  # the command line says what to do about it
        return None
    if verbosity:
        configure_logging(verbosity)
    from engram.errors import EngramError  # noqa: PLC0415 - (a few classes: no imports)

    try:
        doc = ingest_via_server(root, paths, maps)
    except EngramError as exc:  # the server's answer about the request: final, as on the full path
        print(f"engram: {exc}", file=sys.stderr)
        return 1
    if doc is None:
        return None
    print(doc["summary"])
    return 0


def _ingest_args(argv: Sequence[str]) -> tuple[int, str | None, list[str], list[tuple[str, str]]] | None:
    """(verbosity, -C directory, paths, maps) of `[-v] [-C DIR] ingest [--map FROM=TO] PATH...`,
    or None for any other command line (parsed by argparse, which may well accept it)."""
    verbosity, repo, i = 0, None, 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("-v", "--verbose", "-vv"):
            verbosity += 2 if argv[i] == "-vv" else 1
        elif argv[i] in ("-C", "--repo") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            repo = argv[i + 1]
            i += 1
        else:
            return None
        i += 1
    if argv[i:i + 1] != ["ingest"]:
        return None
    paths: list[str] = []
    maps: list[tuple[str, str]] = []
    rest = argv[i + 1:]
    j = 0
    while j < len(rest):
        arg = rest[j]
        if arg == "--map" and j + 1 < len(rest):
            item = rest[j + 1]
            j += 1
        elif arg.startswith("--map="):
            item = arg[len("--map="):]
        elif arg.startswith("-"):
            return None
        else:
            paths.append(arg)
            j += 1
            continue
        pair = path_map(item)
        if pair is None:  # the full command line explains what is wrong with it
            return None
        maps.append(pair)
        j += 1
    return (verbosity, repo, paths, maps) if paths else None


def path_map(item: str) -> tuple[str, str] | None:
    """`FROM=TO` of `ingest --map` as (FROM, TO), None when it is not one (an empty FROM included);
    `argtypes.path_map` says which, for argparse (not imported here: the quick path skips argparse)."""
    source, eq, target = item.partition("=")
    return (source, target) if eq and source else None


def configure_logging(verbosity: int) -> None:
    """Log to stderr: warnings, then info with -v, then debug with -vv."""
    import logging  # noqa: PLC0415

    logging.basicConfig(level=logging.WARNING - 10 * min(verbosity, 2), stream=sys.stderr, format=LOG_FORMAT)


def leave(code: int) -> NoReturn:
    """End the process with `code` once its output and logs are flushed, without the
    interpreter's teardown: a query, or a command a language server carried out, opened and
    started nothing that needs it, and the teardown (freeing every module's objects, numpy's
    among them) took 15-50 ms here (bench/README.md, "CLI exit")."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): the answer was not wanted
            pass
    os._exit(code)


def _info(msg: str, *args: object) -> None:
    """Log at INFO if logging was configured (by -v, or by the full command line): the quick
    path does not import logging for a line nobody would see."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(__name__).info(msg, *args)


def _post(port: int, path: str, token: str, body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 POST to our own endpoint on 127.0.0.1: (status, body).

    A socket and a few lines instead of http.client, whose imports (email, ssl) cost ~15 ms of
    a command that should take well under 150 ms. The server is ours (uvicorn): the response has
    a Content-Length or chunked encoding, and `Connection: close` ends it. The C `_socket`
    alone, connected to the address as it is: `socket`'s module (selectors, enum) and the name
    lookup `create_connection` makes (which imports the idna codec and unicodedata) are work an
    agent's hook waits for before every edit."""
    import _socket  # noqa: PLC0415 - only when a server is running

    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT_S)
        sock.connect(("127.0.0.1", port))
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        sock.sendall(head.encode() + body)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    finally:
        sock.close()
    raw = b"".join(chunks)
    header, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("truncated HTTP response")
    lines = header.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:])}
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        out = bytearray()
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            out += rest[:size]
            rest = rest[size + 2:]
        return status, bytes(out)
    if b"content-length" in fields:
        n = int(fields[b"content-length"])
        if len(rest) < n:
            raise ValueError("truncated HTTP response")
        return status, rest[:n]
    return status, rest
