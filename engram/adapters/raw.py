"""Any text becomes `msg.in` events: the minimal adapter that still gives working provenance.

Text is cut at blank lines into chunks of at most CHUNK_LINES lines, so an explain window
points at the part of a long text that matched rather than at the whole file.
"""

from __future__ import annotations

import hashlib
from collections import Counter

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


def parse_raw(sources: list[SourceSpan]) -> Capture:
    src = sources[0]
    data = src.path.read_bytes()
    skipped: Counter[str] = Counter()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        skipped["non-UTF-8 bytes replaced"] += 1
    # Only whole lines are captured: a file still being written is picked up later.
    end = data.rfind(b"\n") + 1 if not data.endswith(b"\n") and b"\n" in data else len(data)
    src.end = end
    session_id = "raw-" + hashlib.sha256(str(src.path).encode()).hexdigest()[:16]
    cap = Capture(HARNESS, session_id, sources, skipped=skipped)
    cap.meta = {"harness_version": None, "cwd": None, "git_head": None, "git_branch": None, "model": None,
                "started": None, "title": src.path.name}
    offset = 0
    for chunk in chunks(text[: len(data[:end].decode("utf-8", "replace"))]):
        cap.cursor = (0, offset)
        cap.add({"kind": E.MSG_IN, "ts": None, "text": chunk})
        offset += len(chunk.encode("utf-8"))
    return cap
