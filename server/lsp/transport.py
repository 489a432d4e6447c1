"""Hardening of pygls's stdio transport (issue 50 point 6), without replacing it.

pygls reads a frame's body with one `read(Content-Length)` and structures it before dispatch: a
header announcing 1 TiB made the server die of MemoryError, and a request whose positions the
protocol types cannot hold (line -1) was logged and never answered. `CappedStdin` wraps the stdin
pygls reads (`start_io(stdin=...)`), and `answer_invalid_requests` answers such requests with an error,
a body that is not JSON with JSON-RPC's Parse error, and JSON that is no JSON-RPC message (`3`,
`[1, 2]`, `{"foo": 1}`) with Invalid Request (pygls logged both and answered nothing).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, BinaryIO

from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 256 << 20  # an editor's didOpen of a large file stays well under this
_HEADER = re.compile(rb"Content-Length: \d+\r\n")
MAX_HEADER_LINE = 1 << 16
#: What pygls gets in place of a dropped body: a notification nobody handles (`$/` ones are ignored).
DROPPED = b'{"jsonrpc": "2.0", "method": "$/engram/droppedFrame", "params": {}}'


class CappedStdin:
    """stdin for pygls: a body longer than MAX_FRAME_BYTES is not read into memory; the bytes up
    to the next frame's header are passed over, a log line says so, and the server reads on."""

    def __init__(self, raw: BinaryIO, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self.raw, self.max_bytes = raw, max_bytes
        self._next: bytes | None = None

    def readline(self) -> bytes:
        """A header line. Bytes before a `Content-Length:` on it are passed over with a log line:
        a frame whose body was shorter than its header said (a header sent without its body) had
        the next frame's start read as its body, and pygls, which only takes a header at the start
        of a line, then lost every later frame: each one's header line began with the rest of the
        frame before. A line is read at most MAX_HEADER_LINE bytes at a time (no header is longer)."""
        if self._next is not None:
            line, self._next = self._next, None
            return line
        line = self.raw.readline(MAX_HEADER_LINE)
        found = _HEADER.search(line)
        if found is not None and found.start():
            log.error("skipped %d bytes before a frame header: the frame before was shorter than its "
                      "Content-Length said", found.start())
            return line[found.start():]
        return line

    def read(self, n: int) -> bytes:
        if n <= self.max_bytes:
            return self.raw.read(n)
        log.error("a message of %d bytes (more than %d) was skipped: the client sent a frame too large to hold",
                  n, self.max_bytes)
        while True:
            line = self.raw.readline(1 << 20)
            if not line:
                return DROPPED  # (the next readline gives EOF: pygls stops as it would have)
            found = _HEADER.search(line)
            if found is not None:
                self._next = line[found.start():]
                return DROPPED


def answer_invalid_requests(server: LanguageServer) -> None:
    """A request whose params do not fit the protocol's types gets an Invalid Params error response
    (pygls raises while structuring it, before any handler could answer)."""
    protocol = server.protocol
    structure = protocol.structure_message

    def structure_or_answer(data: dict[str, Any]) -> Any:
        try:
            return structure(data)
        except JsonRpcInvalidParams as exc:
            if "id" in data and "method" in data:
                exc.message = f"invalid params for {data['method']}: {exc.__cause__ or exc}"
                protocol._send_response(data["id"], error=exc.to_response_error())  # noqa: SLF001
            raise

    protocol.structure_message = structure_or_answer  # type: ignore[method-assign]
    _answer_parse_errors(server)
    _answer_non_messages(server)


def _answer_parse_errors(server: LanguageServer) -> None:
    """A frame whose body is not JSON (or not UTF-8) gets the response JSON-RPC 2.0 asks for: a Parse
    error, id null. pygls's read loop catches the decoding error and hands it to the server's error
    reporter, which logged it: a client waiting on that request waited forever. The reporter is
    read when the loop starts (`start_io`), so it is wrapped before."""
    report = server.report_server_error

    def answer_then_report(error: Exception, source: Any) -> None:
        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)):
            _send_error(server, JsonRpcParseError.CODE, f"Parse error: the message body is not JSON ({error})")
        report(error, source)

    server.report_server_error = answer_then_report  # type: ignore[method-assign]


def _send_error(server: LanguageServer, code: int, message: str) -> None:
    """An error response with "id": null (written as a dict: the protocol's types leave out an id of
    None, and JSON-RPC wants "id": null when the request's id could not be read)."""
    server.protocol._send_data({"jsonrpc": "2.0", "id": None,  # noqa: SLF001
                                "error": {"code": code, "message": message}})


def _answer_non_messages(server: LanguageServer) -> None:
    """A body that is JSON but no JSON-RPC 2.0 message (a number, an array, an object without
    "jsonrpc": pygls's reader leaves those as plain Python values) gets Invalid Request, id null,
    as JSON-RPC 2.0 asks: pygls's `handle_message` failed on them with an AttributeError that its read
    loop only logged, so a client waiting on that request waited forever. The loop looks the
    method up for each message, so wrapping it on the protocol object is enough."""
    protocol = server.protocol
    handle = protocol.handle_message

    def handle_or_refuse(message: Any) -> Any:
        if isinstance(message, (dict, list, str, int, float, bool)) or message is None:
            shown = json.dumps(message)
            log.error("not a JSON-RPC message (answered Invalid Request): %.200s", shown)
            _send_error(server, JsonRpcInvalidRequest.CODE,
                        f"Invalid Request: not a JSON-RPC 2.0 message ({shown[:80]})")
            return None
        return handle(message)

    protocol.handle_message = handle_or_refuse  # type: ignore[method-assign]
