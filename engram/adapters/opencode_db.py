"""OpenCode's SQLite store (`$XDG_DATA_HOME/opencode/opencode.db`, OpenCode ≥ 1.2 moved its
sessions there from the `storage/` JSON folders): a `session` table (one row per session:
`id`, `project_id`, `parent_id`, `slug`, `directory`, `title`, `version`, `time_created`,
`time_updated`, `time_compacting`), and `message` and `part` tables whose `data` column holds the
message's or part's JSON as the storage files held it, less the ids kept in their own columns
(`id`, `session_id`, `message_id`). Put back together, a session is what `opencode export`
writes, and `engram.adapters.opencode` reads it.

The store belongs to a running tool: it is opened read-only (`mode=ro`), never written, and each
read is one short transaction (a reader of a WAL database never blocks OpenCode's writes; in the
older rollback journal a reader holds its shared lock only while its query runs). A session's
source is the store with the session's id as its name; its `digest` (the count, latest update and
size of its messages and parts, which hold every event) tells a later ingest whether it changed,
so the store is never hashed whole.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import orjson

from engram.adapters.base import SourceSpan

log = logging.getLogger(__name__)

STORE_NAME: Final = "opencode.db"
SQLITE_MAGIC: Final = b"SQLite format 3\x00"
SOURCE_PREFIX: Final = "opencode.db:"  # a source's name: the session it is, in the store at its path
BUSY_MS: Final = 2000


def is_store(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)


@contextmanager
def _reading(path: Path) -> Iterator[Any]:
    """The store opened read-only, in one transaction (the reads see one state of it)."""
    import apsw  # noqa: PLC0415 - only a store's reader needs SQLite

    conn = apsw.Connection(f"file:{quote(str(path))}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    conn.setbusytimeout(BUSY_MS)
    with closing(conn):
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")


def _columns(conn: Any, table: str) -> list[str]:
    """The table's columns in their order (what `SELECT *` gives); [] when there is no such table."""
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def sessions(path: Path) -> list[tuple[str, str | None]]:
    """(id, working directory) of every session in the store; [] when it is no OpenCode store."""
    try:
        with _reading(path) as conn:
            if not {"id", "directory"} <= set(_columns(conn, "session")):
                return []
            return [(str(sid), d if isinstance(d, str) else None)
                    for sid, d in conn.execute("SELECT id, directory FROM session ORDER BY time_created, id")]
    except Exception as exc:  # noqa: BLE001 - apsw's errors: a locked, damaged or foreign file
        log.info("OpenCode store %s not read: %s", path, exc)
        return []


def source(path: Path, session_id: str) -> SourceSpan:
    """The source of one session of the store, with its size (the JSON its rows hold) and digest."""
    src = SourceSpan(SOURCE_PREFIX + session_id, path)
    try:
        with _reading(path) as conn:
            counts = [conn.execute(f"SELECT count(*), max(time_updated), coalesce(sum(length(data)), 0) FROM {t} "
                                   "WHERE session_id=?", (session_id,)).fetchall()[0] for t in ("message", "part")]
    except Exception as exc:  # noqa: BLE001
        log.info("OpenCode session %s not read: %s", session_id, exc)
        return src
    src.end = sum(int(c[2] or 0) for c in counts) + 1
    src.digest = hashlib.sha256(orjson.dumps([[*c] for c in counts])).hexdigest()
    return src


def session_id_of(src: SourceSpan) -> str | None:
    return src.name[len(SOURCE_PREFIX):] if src.name.startswith(SOURCE_PREFIX) else None


def load(path: Path, session_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A session as `opencode export` gives it: (its info, its messages each with its parts), in
    id order (OpenCode's ids sort by time). None when the store has no such session."""
    with _reading(path) as conn:
        cols = _columns(conn, "session")
        rows = conn.execute("SELECT * FROM session WHERE id=?", (session_id,)).fetchall()
        if not rows:
            return None
        info = _info(dict(zip(cols, rows[0], strict=True)))
        messages = [(mid, _json(data)) for mid, data in
                    conn.execute("SELECT id, data FROM message WHERE session_id=? ORDER BY id", (session_id,))]
        parts: dict[str, list[dict[str, Any]]] = {}
        for pid, mid, data in conn.execute("SELECT id, message_id, data FROM part WHERE session_id=? ORDER BY id",
                                           (session_id,)):
            parts.setdefault(mid, []).append({**_json(data), "id": pid, "sessionID": session_id, "messageID": mid})
    out = [{"info": {**m, "id": mid, "sessionID": session_id}, "parts": parts.get(mid, [])} for mid, m in messages]
    return info, out


def _json(data: Any) -> dict[str, Any]:
    try:
        value = orjson.loads(data) if isinstance(data, (str, bytes)) else None
    except orjson.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {}


def _info(row: dict[str, Any]) -> dict[str, Any]:
    """A session row as the session info of OpenCode's export (`projectID`, `parentID`, `time`)."""
    return {"id": row.get("id"), "slug": row.get("slug"), "projectID": row.get("project_id"),
            "directory": row.get("directory"), "parentID": row.get("parent_id"), "title": row.get("title"),
            "version": row.get("version"),
            "time": {k: row.get(f"time_{k}") for k in ("created", "updated", "compacting") if row.get(f"time_{k}")}}


def started(path: Path, session_id: str) -> str | None:
    """When the session began (its row's `time_created`, epoch milliseconds), as tapes write times."""
    from datetime import UTC, datetime  # noqa: PLC0415

    try:
        with _reading(path) as conn:
            rows = conn.execute("SELECT time_created FROM session WHERE id=?", (session_id,)).fetchall()
    except Exception:  # noqa: BLE001
        return None
    ms = rows[0][0] if rows else None
    if not isinstance(ms, int):
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
