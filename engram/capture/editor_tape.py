"""The editor tape: what a person changed in the editor, recorded as `code.edit` events.

One small tape per save, chained by `prev` into one `editor` session per editor process, so
lineage continues through human rewrites: the save's before-text is the agent's code, its
after-text the person's, and the index links the two.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field

from engram.capture.pipeline import store_events
from engram.capture.record import diff_edits
from engram.index.build import Indexer
from engram.store.repo import Store
from engram.tape import events as E
from engram.words import plural

log = logging.getLogger(__name__)


@dataclass
class EditorSession:
    """One editor process's session: its id and the last tape written."""

    session_id: str = field(default_factory=lambda: f"editor-{socket.gethostname()}-{uuid.uuid4().hex[:12]}")
    started: str = field(default_factory=lambda: now())
    prev: str | None = None


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_save(store: Store, session: EditorSession, file: str, before: str, after: str,
                editor: str | None = None) -> str | None:
    """Write (and index) a tape for one save; None when the save changed nothing."""
    ts = now()
    edits = diff_edits({file: before}, {file: after}, ts)
    if not edits:
        return None
    for ev in edits:
        ev["tool"] = "editor"
    meta = {"kind": E.META, "v": E.TAPE_FORMAT, "harness": "editor", "harness_version": editor, "model": None,
            "session_id": session.session_id, "cwd": str(store.root), "git_head": None, "git_branch": None,
            "started": session.started, "ended": ts, "sources": [], "prev": session.prev, "user": os.environ.get("USER")}
    events = [meta, *edits]
    written = store_events(store, events, Indexer(store))
    session.prev = written.id
    log.info("editor tape %s: %s in %s", written.id[:12], plural(len(edits), "edit"), file)
    return written.id
