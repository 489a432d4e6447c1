"""The language server's transport under bad frames (issue 50 point 6): a request whose positions
the protocol types cannot hold gets an error response, and a frame announcing a body too large to
hold is skipped with a log line while the server stays up and answers the next request. A raw
stdio client: pytest-lsp's own client would refuse to send such messages."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any

SERVER = [sys.executable, "-m", "engram_server.entry", "lsp", "--stdio"]


def frame(doc: dict[str, Any]) -> bytes:
    body = json.dumps(doc).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def responses(stream: Any, out: Queue[dict[str, Any]]) -> None:
    while True:
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            c = stream.read(1)
            if not c:
                return
            header += c
        n = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        out.put(json.loads(stream.read(n)))


def answer(out: Queue[dict[str, Any]], msg_id: int, timeout: float = 60) -> dict[str, Any]:
    while True:
        try:
            doc = out.get(timeout=timeout)
        except Empty:
            raise AssertionError(f"no response to request {msg_id}") from None
        if doc.get("id") == msg_id:
            return doc


def opened(repo: Path) -> tuple[subprocess.Popen[bytes], Queue[dict[str, Any]], str]:
    """A language server on `repo`, initialized, with a.py open; its responses go to the queue."""
    (repo / "a.py").write_text("x = 1\n")
    uri = (repo / "a.py").as_uri()
    proc = subprocess.Popen(SERVER, cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out: Queue[dict[str, Any]] = Queue()
    threading.Thread(target=responses, args=(proc.stdout, out), daemon=True).start()
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"processId": None, "rootUri": repo.as_uri(), "capabilities": {}}}))
    proc.stdin.flush()
    assert "result" in answer(out, 1)
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}}}))
    return proc, out, uri


def closed(proc: subprocess.Popen[bytes]) -> str:
    """Stop the server (`exit`, else a kill) and return what it logged."""
    try:
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.close()
        proc.wait(timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pass
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    return proc.stderr.read().decode()


def test_bad_positions_get_an_error_and_a_huge_frame_is_skipped(repo: Path) -> None:
    proc, out, uri = opened(repo)
    try:
        send = proc.stdin.write
        for msg_id, pos in ((2, {"line": -1, "character": 0}), (3, {"line": 0, "character": 2 ** 40})):
            send(frame({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
                        "params": {"textDocument": {"uri": uri}, "position": pos}}))
            proc.stdin.flush()
            got = answer(out, msg_id)
            assert got["error"]["code"] == -32602, got
        send(b"Content-Length: 1099511627776\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 4, "method": "junk"}')
        send(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
        proc.stdin.flush()
        assert answer(out, 5).get("error") is None, "the server stayed up and answers"
        assert proc.poll() is None
    finally:
        err = closed(proc)
    assert "MemoryError" not in err and "1099511627776" in err, err


def test_a_header_without_its_body_costs_one_frame_and_a_burst_is_answered_whole(repo: Path) -> None:
    """After `Content-Length: 40` with no body, the server read the next frame's start as that body
    and answered nothing more, ever (each later header line began with the rest of the frame before):
    400 hovers sent after it went unanswered while the process stayed up."""
    proc, out, uri = opened(repo)

    def hover(msg_id: int) -> bytes:
        return frame({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
                      "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}})
    try:
        send = proc.stdin.write
        send(b"Content-Length: 40\r\n\r\n")  # its body never comes: frame 2's start is read as it
        send(hover(2) + hover(3))
        proc.stdin.flush()
        assert "error" not in answer(out, 3), "the frame after the one the header ate is answered"
        burst = range(100, 300)
        send(b"".join(hover(i) for i in burst))
        proc.stdin.flush()
        waiting = set(burst)
        while waiting:  # (in any order)
            try:
                waiting.discard(out.get(timeout=60).get("id"))
            except Empty:
                raise AssertionError(f"{len(waiting)} of {len(burst)} requests unanswered") from None
        assert proc.poll() is None
        send(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
    finally:
        err = closed(proc)
    assert "shorter than its Content-Length" in err


def next_response(out: Queue[dict[str, Any]], timeout: float = 30) -> dict[str, Any]:
    """The next message from the server that is not a notification (as its log of an error)."""
    while True:
        try:
            doc = out.get(timeout=timeout)
        except Empty:
            raise AssertionError("no response") from None
        if "method" not in doc:
            return doc


def test_a_body_that_is_not_json_is_answered_with_a_parse_error(repo: Path) -> None:
    """A frame whose body is not JSON got no response at all (pygls only logged it), so a client
    waited on it forever; JSON-RPC 2.0 answers it with a Parse error (-32700), id null, and the
    server answers the next request."""
    proc, out, _ = opened(repo)
    try:
        for body in (b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": {',
                     b'\xff\xfe not utf-8'):
            proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            proc.stdin.flush()
            got = next_response(out)
            assert got["error"]["code"] == -32700 and "id" in got and got["id"] is None, got
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
        proc.stdin.flush()
        assert answer(out, 5).get("error") is None, "the server stayed up and answers"
    finally:
        closed(proc)


def test_json_that_is_not_a_message_is_answered_with_invalid_request(repo: Path) -> None:
    """A body that is JSON but no JSON-RPC message (a number, an array, an object without
    "jsonrpc") got no response (pygls failed on it and logged it), so a client waited on it
    forever; JSON-RPC 2.0 answers it with Invalid Request (-32600), id null, and the server answers
    the next request."""
    proc, out, _ = opened(repo)
    try:
        for body in (b"3", b"[1,2]", b'{"foo": 1}', b'"hover"', b"null"):
            proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            proc.stdin.flush()
            got = next_response(out)
            assert got["error"]["code"] == -32600 and "id" in got and got["id"] is None, (body, got)
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
        proc.stdin.flush()
        assert answer(out, 5).get("error") is None, "the server stayed up and answers"
    finally:
        closed(proc)
