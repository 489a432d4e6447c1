"""Tape events as JSONL (`--format events`): a tape exported by `engram show --raw`, or any
tool that writes our vocabulary directly. The meta line is kept; unknown kinds are skipped."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable

from engram.adapters.base import Capture, PathMapper, SourceSpan, read_source
from engram.tape import events as E


def started(records: Iterable[dict[str, Any]]) -> str | None:
    """When the session began, as its capture's `started` will say: the first meta line's."""
    for rec in records:
        if isinstance(rec, dict) and rec.get("kind") == E.META:
            at = rec.get("started")
            return at if isinstance(at, str) else None
    return None


def parse_events(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
                 max_line_bytes: int) -> Capture:
    src = sources[0]
    cap = Capture("events", "", sources)
    lines = read_source(src, max_line_bytes=max_line_bytes, skipped=cap.skipped)
    meta: dict = {}
    for line in lines:
        rec = line.record
        if rec is None:
            continue
        kind = rec.get("kind")
        if kind == E.META and not meta:
            meta = rec
            continue
        if kind not in E.KINDS or kind == E.META:
            cap.skipped[f"unknown event kind {kind!r}"] += 1
            continue
        cap.cursor = (0, line.offset)
        cap.add(rec)
    cap.harness = str(meta.get("harness") or "events")
    cap.session_id = str(meta.get("session_id") or "events-" + hashlib.sha256(str(src.path).encode()).hexdigest()[:16])
    cap.meta = {k: meta.get(k) for k in ("harness_version", "model", "cwd", "git_head", "git_branch", "started")}
    return cap
