"""Tasks: one goal worked on across sessions and harnesses, and the checkpoints kept of it.

A session ends mid-task; the task goes on in the next one, perhaps in another harness. A task
groups those sessions: a session joins it explicitly (`engram task join`, the MCP tool
`task_join`, or a hand-off that names the task), and the sessions continuing a joined one or
continued by it (the index's continuation edges: compactions, resumed sessions) belong to it
without being named. `resume --task` reads all of them as one piece of work.

Every hand-off written for one of a task's sessions and every `resume --task` is kept as a
checkpoint: a numbered version of what the next session was told (the package, or the note),
so what an agent was handed can be read back later and compared.

The tasks live in `.engram/tasks.jsonl`, an append-only log (never rewritten; a line a crash
cut short is skipped): not in the index, which `engram reindex` rebuilds from the tapes, and not
among the memories, which recall searches. A task's title is the person's own words when not
given: the first longer request of the session it starts from, verbatim."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import orjson

from engram.errors import BadInput, UnknownTape
from engram.fsutil import append_durably, json_lines
from engram.query.story import SHORT_REQUEST_WORDS
from engram.store.lock import tasks_lock

if TYPE_CHECKING:
    from pathlib import Path

    import apsw

    from engram.continuity.chain import Chain
    from engram.memory.model import Source
    from engram.store.repo import Store

log = logging.getLogger(__name__)

LOG_NAME: Final = "tasks.jsonl"
TITLE_CHARS: Final = 120
#: Sessions of a task read by `resume --task`, latest last: older ones are the task's history, and
#: `engram task show` still lists them.
MAX_TASK_SESSIONS: Final = 16


@dataclass
class Task:
    id: str
    title: str
    created: str
    by: dict[str, Any]
    goal: str | None = None
    status: str = "open"
    closed: str | None = None
    why: str | None = None
    joined: list[dict[str, Any]] = field(default_factory=list)  # each: session, via, ts
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # each: version, kind, session, ts, by, doc

    def summary(self) -> dict[str, Any]:
        """The task without its checkpoints' documents (what `list` and `show` print)."""
        last = self.checkpoints[-1] if self.checkpoints else None
        return {"id": self.id, "title": self.title, "goal": self.goal, "status": self.status,
                "created": self.created, "by": self.by, "closed": self.closed, "why": self.why,
                "joined": self.joined, "checkpoints": len(self.checkpoints),
                "last_checkpoint": {k: last[k] for k in ("version", "kind", "session", "ts")} if last else None}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _log_path(store: Store) -> Path:
    return store.dir / LOG_NAME


def _checked_path(store: Store) -> Path:
    """The log's path, refused when it is a link: nothing is read or written through one."""
    path = _log_path(store)
    if os.path.islink(path):
        raise BadInput(f"{path} is a symbolic link: engram does not follow it out of the store; move it away "
                       "and run the command again")
    return path


# ------------------------------------------------------------------ reading the log


def load(store: Store) -> dict[str, Task]:
    """Every task, in the order created, with its joins, closing and checkpoints applied."""
    tasks: dict[str, Task] = {}
    for rec in json_lines(_checked_path(store)):
        op, tid = rec.get("op"), rec.get("task")
        if not isinstance(tid, str):
            continue
        if op == "new" and isinstance(rec.get("title"), str):
            tasks[tid] = Task(tid, rec["title"], str(rec.get("ts")), rec.get("by") or {}, rec.get("goal"))
            continue
        task = tasks.get(tid)
        if task is None:
            continue  # a record of a task whose creation the log does not hold: nothing to attach it to
        if op == "join" and isinstance(rec.get("session"), str):
            if all(j["session"] != rec["session"] for j in task.joined):
                task.joined.append({"session": rec["session"], "via": rec.get("via"), "ts": rec.get("ts")})
        elif op == "close":
            task.status, task.closed, task.why = "closed", rec.get("ts"), rec.get("why")
        elif op == "reopen":
            task.status, task.closed, task.why = "open", None, None
        elif op == "checkpoint" and isinstance(rec.get("doc"), dict):
            task.checkpoints.append({"version": len(task.checkpoints) + 1, "kind": rec.get("kind"),
                                     "session": rec.get("session"), "ts": rec.get("ts"), "by": rec.get("by"),
                                     "doc": rec["doc"]})
    return tasks


def find(tasks: dict[str, Task], ref: str) -> Task:
    """The task `ref` names: its id, a unique prefix of it, or its title (any case)."""
    ref = ref.strip()
    if ref in tasks:
        return tasks[ref]
    ids = [t for t in tasks if t.startswith(ref.lower())] if ref else []
    if len(ids) == 1:
        return tasks[ids[0]]
    if len(ids) > 1:
        raise BadInput(f"{ref!r} starts {len(ids)} task ids ({', '.join(ids[:5])}): give more characters")
    titled = [t for t in tasks.values() if t.title.lower() == ref.lower()]
    if len(titled) == 1:
        return titled[0]
    if len(titled) > 1:
        raise BadInput(f"{len(titled)} tasks are titled {ref!r}: name one by its id ({', '.join(t.id for t in titled)})")
    raise BadInput(f"no task {ref!r}: `engram task list --all` shows the tasks, `engram task new` starts one")


def _append(store: Store, records: list[dict[str, Any]]) -> None:
    """Append under the lock; after a line a crash cut short, on a line of its own (else the first
    record would be glued to the torn one and lost with it)."""
    path = _checked_path(store)
    lines = [orjson.dumps(r) for r in records]
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell():
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    lines.insert(0, b"")
    except FileNotFoundError:
        pass
    append_durably(path, lines)


# ------------------------------------------------------------------ the sessions of a task


def _session_rows(db: apsw.Connection, session: str) -> dict[str, Any] | None:
    rows = db.execute("SELECT harness, min(started), max(coalesce(ended, started)) FROM tapes WHERE session_id = ?",
                      (session,)).fetchall()
    if not rows or rows[0][0] is None:
        return None
    return {"harness": rows[0][0], "started": rows[0][1], "ended": rows[0][2]}


def captured(db: apsw.Connection, session: str) -> bool:
    """Is this session (its id) in the index yet?"""
    return _session_rows(db, session) is not None


def sessions(db: apsw.Connection, task: Task) -> list[dict[str, Any]]:
    """The task's sessions, oldest first: those joined, the ones they continue and the ones that
    continue them (followed as `resume` follows them), each with how it belongs. A joined session
    not captured yet is listed with `captured: false`."""
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415

    found: dict[str, dict[str, Any]] = {}
    frontier: list[str] = []
    for j in task.joined:
        found[j["session"]] = {"session_id": j["session"], "via": j.get("via") or "joined"}
        frontier.append(j["session"])
    while frontier:
        session = frontier.pop()
        try:
            chain = resolve_chain(db, session)
        except UnknownTape:
            continue
        if chain.session_id != session and session in found:  # joined by a prefix: keep the full id
            found[chain.session_id] = {**found.pop(session), "session_id": chain.session_id}
        for s in [*(c["session_id"] for c in chain.sessions), *chain.continued_by]:
            if s and s not in found:
                found[str(s)] = {"session_id": str(s), "via": f"continuation of {chain.session_id[:8]}"}
                frontier.append(str(s))
    out = []
    for s in found.values():
        row = _session_rows(db, s["session_id"])
        out.append({**s, **(row or {}), "captured": row is not None})
    out.sort(key=lambda s: (s.get("started") or "~", s["session_id"]))
    return out


def task_chain(db: apsw.Connection, task: Task) -> Chain:
    """The tapes of the task's captured sessions (the latest MAX_TASK_SESSIONS), as one chain."""
    from engram.continuity.chain import Chain  # noqa: PLC0415
    from engram.index.catalog import resolve_tapes  # noqa: PLC0415

    captured = [s for s in sessions(db, task) if s["captured"]][-MAX_TASK_SESSIONS:]
    if not captured:
        raise UnknownTape(f"task {task.id} has no captured session yet: `engram task join {task.id} SESSION` "
                          "adds one (`engram ingest` captures it)")
    tapes = [t for s in captured for t in resolve_tapes(db, s["session_id"])]
    return Chain(tapes=tapes, session_id=captured[-1]["session_id"],
                 sessions=[{"session_id": s["session_id"], "harness": s["harness"], "via": s["via"]}
                           for s in captured])


def tasks_of(store: Store, db: apsw.Connection, session: str, open_only: bool = True) -> list[Task]:
    """The tasks `session` belongs to (joined, or by continuation)."""
    out = []
    for task in load(store).values():
        if open_only and task.status != "open" or not task.joined:
            continue
        if any(s["session_id"] == session for s in sessions(db, task)):
            out.append(task)
    return out


# ------------------------------------------------------------------ changing tasks


def _title_from(store: Store, db: apsw.Connection, session: str | None) -> tuple[str, str]:
    """(title, the session it came from): the first line, verbatim, of the session's (default: the
    latest session's) first request that is more than a word or two ("continue", "yes"), else of
    its first request."""
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415
    from engram.continuity.facts import read_facts  # noqa: PLC0415
    from engram.tape.objects import resolve  # noqa: PLC0415

    chain = resolve_chain(db, session)
    texts = []
    for _, value, _ in read_facts(store, chain.tapes).requests:
        text = value if isinstance(value, str) else resolve(value, store.objects_dir)
        texts.append(text.strip() if isinstance(text, str) else "")
    for text in sorted(texts, key=lambda t: len(t.split()) < SHORT_REQUEST_WORDS):  # (stable: first longer one)
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        if first:
            return (first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1].rstrip() + "…"), chain.session_id
    raise BadInput(f"session {chain.session_id[:8]} has no request to title a task with: give a title "
                   "(engram task new \"TITLE\")")


def new_task(store: Store, db: apsw.Connection, title: str | None, *, goal: str | None = None,
             session: str | None = None, source: Source) -> Task:
    """Start a task. With `session`, that session joins it; with no title, the session's (default:
    the latest session's) first longer request titles it."""
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415

    title = (title or "").strip() or None
    if title is None:
        title, session = _title_from(store, db, session)
    elif session is not None:
        session = resolve_chain(db, session).session_id
    if len(title) > 400:
        raise BadInput("a task's title is a line (at most 400 characters); put the rest in --goal")
    tid = "t" + secrets.token_hex(4)
    ts, by = _now(), source.to_json()
    records: list[dict[str, Any]] = [{"op": "new", "task": tid, "title": title, "ts": ts, "by": by}]
    if goal and goal.strip():
        records[0]["goal"] = goal.strip()
    if session is not None:
        records.append({"op": "join", "task": tid, "session": session, "via": "joined", "ts": ts, "by": by})
    with tasks_lock(store):
        _append(store, records)
    return load(store)[tid]


def join(store: Store, db: apsw.Connection, ref: str, session: str | None, *, via: str = "joined",
         source: Source) -> tuple[Task, str]:
    """Add a session (default: the writer's own when its harness says which, else the latest) to
    a task; (the task, the session id joined)."""
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415

    if session is None and source.session:
        try:
            session = resolve_chain(db, source.session).session_id
        except UnknownTape:
            session = None
    sid = resolve_chain(db, session).session_id
    with tasks_lock(store):
        task = find(load(store), ref)
        if task.status != "open":
            raise BadInput(f"task {task.id} is closed: `engram task reopen {task.id}` first")
        if all(j["session"] != sid for j in task.joined):
            _append(store, [{"op": "join", "task": task.id, "session": sid, "via": via, "ts": _now(),
                             "by": source.to_json()}])
        return load(store)[task.id], sid


def close(store: Store, ref: str, *, why: str | None = None, reopen: bool = False, source: Source) -> Task:
    """Close a task (its sessions and checkpoints are kept), or open it again."""
    with tasks_lock(store):
        task = find(load(store), ref)
        if (task.status == "open") == reopen:
            return task  # already so
        rec: dict[str, Any] = {"op": "reopen" if reopen else "close", "task": task.id, "ts": _now(),
                               "by": source.to_json()}
        if why and not reopen:
            rec["why"] = why.strip()
        _append(store, [rec])
        return load(store)[task.id]


def _digest(doc: dict[str, Any]) -> str:
    """What a checkpoint says, without what changes on every call (the budget used)."""
    body = {k: v for k, v in doc.items() if k != "budget"}
    if isinstance(body.get("session"), dict) and isinstance(body["session"].get("task"), dict):
        body["session"] = {**body["session"], "task": {k: v for k, v in body["session"]["task"].items()
                                                       if k != "checkpoint"}}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def checkpoint(store: Store, task: Task, kind: str, session: str | None, doc: dict[str, Any],
               source: Source) -> int:
    """Keep `doc` (a resume package, or a hand-off note) as the task's next version; the version
    number. A package the same as the task's latest checkpoint is not kept twice (its number is
    returned): a resume repeated with nothing new in between is one state, not two."""
    with tasks_lock(store):
        now = find(load(store), task.id)
        same = [c for c in now.checkpoints if c["kind"] == kind]
        if same and _digest(same[-1]["doc"]) == _digest(doc) and now.checkpoints[-1] is same[-1]:
            return int(same[-1]["version"])
        _append(store, [{"op": "checkpoint", "task": task.id, "kind": kind, "session": session, "ts": _now(),
                         "by": source.to_json(), "doc": doc}])
        return len(now.checkpoints) + 1
