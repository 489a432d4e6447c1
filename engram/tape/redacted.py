"""Which redaction rules each local tape is known to be clean under: `redacted.jsonl`, one line
`{"tape": ID, "rules": DIGEST}` a tape written by a redactor (`Redactor.digest`).

A record is a fact about a tape's bytes, not about who made it: a tape is content-addressed, so
every tape with that id is the output of those rules, and redaction is idempotent: running the
same rules again changes nothing. `engram push` skips the scan of such tapes
(engram/share/choose.py). The record lives beside the tapes, never in them, so a tape's bytes and
id do not depend on the engram, the patterns or the Python that wrote it. Lines are appended
without a sync: a record a crash loses only makes push scan that tape again, and a line a crash
cut short is not read."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

from engram.fsutil import json_lines

log = logging.getLogger(__name__)

LOG_NAME = "redacted.jsonl"


def record(store_dir: Path, tape_ids: list[str], rules: str | None) -> None:
    """Say that these tapes are clean under `rules` (nothing recorded when `rules` is None)."""
    if rules is None or not tape_ids:
        return
    data = b"".join(orjson.dumps({"tape": t, "rules": rules}) + b"\n" for t in tape_ids)
    try:
        fd = os.open(store_dir / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    except OSError as exc:  # (a read-only store: push scans these tapes, as before)
        log.debug("cannot record redaction rules: %s", exc)
        return
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def recorded(store_dir: Path) -> dict[str, set[str]]:
    """Each tape id recorded, with the rules it is clean under."""
    out: dict[str, set[str]] = {}
    for rec in json_lines(store_dir / LOG_NAME):
        if isinstance(rec.get("tape"), str) and isinstance(rec.get("rules"), str):
            out.setdefault(rec["tape"], set()).add(rec["rules"])
    return out
