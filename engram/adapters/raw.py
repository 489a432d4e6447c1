"""Any text becomes `msg.in` events: the minimal adapter that still gives working provenance.

Text is cut at blank lines into chunks of at most CHUNK_LINES lines, so an explain window
points at the part of a long text that matched rather than at the whole file.

JSON (one document, or one value per line) is read as the strings it carries: the transcripts
of harnesses engram has no adapter for (OpenCode, Copilot, Cursor) are JSON, and their escaped
text glues tokens across lines (`\\n` + the next line's first word). On 466 OpenCode sessions
of five public repositories (Entire checkpoints), ten lines of what a session wrote matched its
own text at a median confidence of 0.33 to 0.56 per repository as stored, and at 0.7 (a message
matched whole) once decoded; the writer came first for 117 of 136 such spans instead of 111,
and was in the answer for all of them instead of 133.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from engram.adapters.base import Capture, SourceSpan
from engram.tape import events as E

HARNESS = "raw"
CHUNK_LINES = 40


def chunks(text: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    for line in text.splitlines(keepends=True):
        cur.append(line)
        if (not line.strip() and len(cur) >= 4) or len(cur) >= CHUNK_LINES:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return [c for c in out if c.strip()]


def json_records(text: str) -> list[tuple[int, list[str]]] | None:
    """(byte offset, texts) of each record of `text` when it is JSON: a value per line (from its
    first line on; a line that is not JSON is kept as it is), or one document (offset 0); None
    when it is neither. See `_texts` for what a record's texts are."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    records: list[tuple[int, list[str]]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            try:
                records.append((offset, _texts(orjson.loads(line))))
            except orjson.JSONDecodeError:
                if not records:
                    break  # not a value per line: one document, perhaps
                records.append((offset, [line]))
        offset += len(line.encode("utf-8", "surrogatepass"))
    else:
        return records
    texts = _document(text)
    return None if texts is None else [(0, texts)]


def _document(data: str | bytes) -> list[str] | None:
    """The texts (`_texts`) of `data` when it is one JSON document, else None."""
    try:
        return _texts(orjson.loads(data))
    except orjson.JSONDecodeError:
        return None


def _texts(value: Any) -> list[str]:
    """The string values under `value` that hold a space, a line break or a slash (prose, code,
    paths; not the ids, enums and timestamps that would only add fingerprints no span shares), in
    document order. A value of several lines is a text of its own, as the harnesses' adapters keep
    a message or a file's content whole (cut at blank lines, a file a session wrote matched ten of
    its own lines at ~0.6, shared among the chunks). Single-line values between them are gathered
    as `key: value` lines: the key is what tells `password: correct horse` from prose to redaction."""
    out: list[str] = []
    short: list[str] = []
    for key, s in _leaves(value):
        if "\n" in s.strip():
            if short:
                out.append("\n".join(short))
                short = []
            out.append(s)
        elif " " in s or "/" in s:
            short.append(f"{key}: {s}" if key else s)
    if short:
        out.append("\n".join(short))
    return out


def _leaves(value: Any) -> Iterator[tuple[str | None, str]]:
    """(key, string) of the string values under `value`, depth first in document order; a list's
    items take the key of the list."""
    stack: list[tuple[str | None, Any]] = [(None, value)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, str):
            yield key, v
        elif isinstance(v, dict):
            stack.extend(reversed([(str(k), x) for k, x in v.items()]))
        elif isinstance(v, list):
            stack.extend(reversed([(key, x) for x in v]))


READ_BLOCK = 1 << 20


def read_short_lines(path: Path, max_line_bytes: int, skipped: Counter[str]) -> tuple[bytes, int]:
    """The file's bytes without its lines longer than `max_line_bytes` (each counted in
    `skipped`), read a block at a time: a long line is passed over, never held (a 100 MB line of
    plain text once took 2 GB: the bytes, their text, its chunks, the events). Also returns the
    file offset after its last line break: how far the file is captured."""
    kept = bytearray()
    done = pos = 0
    line = bytearray()
    too_long = False
    with path.open("rb") as f:
        while block := f.read(READ_BLOCK):
            at = 0
            while at < len(block):
                nl = block.find(b"\n", at)
                stop = len(block) if nl < 0 else nl + 1
                if not too_long:
                    line += block[at:stop]
                    if len(line) > max_line_bytes + 1 or (len(line) > max_line_bytes and not line.endswith(b"\n")):
                        too_long = True
                        line = bytearray()
                if nl >= 0:
                    done = pos + stop
                    if too_long:
                        skipped[f"line longer than {max_line_bytes} bytes"] += 1
                    else:
                        kept += line
                    line, too_long = bytearray(), False
                at = stop
            pos += len(block)
    if too_long:
        skipped[f"line longer than {max_line_bytes} bytes"] += 1
    else:
        kept += line
    return bytes(kept), done


def parse_raw(sources: list[SourceSpan], max_line_bytes: int | None = None) -> Capture:
    src = sources[0]
    skipped: Counter[str] = Counter()
    filtered_end = None
    if max_line_bytes is None or src.path.stat().st_size <= max_line_bytes:
        data = src.path.read_bytes()
    else:
        data, filtered_end = read_short_lines(src.path, max_line_bytes, skipped)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        skipped["non-UTF-8 bytes replaced"] += 1
    # Only whole lines are captured: a file still being written is picked up later. A JSON
    # document is whole when it parses, final line break or not (`json.dump` writes none).
    end = data.rfind(b"\n") + 1 if not data.endswith(b"\n") and b"\n" in data else len(data)
    whole = _document(data) if end < len(data) else None
    if whole is not None:
        end = len(data)
    src.end = end if filtered_end is None else filtered_end
    session_id = "raw-" + hashlib.sha256(str(src.path).encode()).hexdigest()[:16]
    cap = Capture(HARNESS, session_id, sources, skipped=skipped)
    cap.meta = {"harness_version": None, "cwd": None, "git_head": None, "git_branch": None, "model": None,
                "started": None, "title": src.path.name}
    # (no copies of a whole file: its one long line kept is most of an ingest's peak memory)
    captured = text if end == len(data) else text[: len(data[:end].decode("utf-8", "replace"))]
    del data
    records = [(0, whole)] if whole is not None else json_records(captured)
    if records is None:  # plain text: its own chunks, each at its offset in the text
        records = []
        offset = 0
        for chunk in chunks(captured):
            records.append((offset, [chunk]))
            offset += len(chunk) if chunk.isascii() else len(chunk.encode("utf-8"))
    for start, texts in records:
        cap.cursor = (0, start)
        for text in texts:
            cap.add({"kind": E.MSG_IN, "ts": None, "text": text})
    return cap
