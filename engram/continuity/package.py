"""The resume package: a chain's facts as one document, the most load-bearing items first, cut to
a token budget that says what it left out and how to get more.

Tokens are counted as explain counts them (engram.query.budget: 4 bytes of the document's compact
JSON per token); the text rendering of the same items is smaller than their JSON, so the budget
bounds both. Items go in this order until the budget is spent: the latest request (and the one a
short request follows), where the hand-off note disagrees with the transcript, the agent's last
message, the note, the plan's open items, checks still failing, side effects not to repeat, files
edited or read (latest first), the first 20 files likely next (named but not touched yet:
engram.continuity.mentions; then related to the files edited by the repository's git:
engram.continuity.related), tool errors no later call fixed, commands whose last run failed,
earlier requests, the other files likely next, other commands, the accepted plan's text
(docs/resume.md). Under a budget, the files past the first three of each list are their path and
state alone: the next edits are often far down those lists, and a path fits where a full entry
would not."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.continuity.chain import Chain, resolve_chain
from engram.continuity.facts import Facts, FileTouch, read_facts
from engram.continuity.mentions import WEIGHTS, Mention
from engram.continuity.related import Related, read_history, related, tests_to_create
from engram.errors import BadInput
from engram.fsutil import repo_relative
from engram.query.budget import TOKEN_BYTES, Unit, json_size, left_out, page, tokens
from engram.query.story import SHORT_REQUEST_WORDS
from engram.tape import events as E
from engram.tape.objects import resolve

if TYPE_CHECKING:
    import apsw

    from engram.store.repo import Store

log = logging.getLogger(__name__)

DEFAULT_BUDGET: Final = 2000
COUNTED: Final = f"{TOKEN_BYTES} bytes of the package's compact JSON per token"
#: Characters kept of each text: the latest request is the task, earlier ones are context.
LATEST_REQUEST_CHARS: Final = 1500
REQUEST_CHARS: Final = 300
MESSAGE_CHARS: Final = 1000
OUTPUT_CHARS: Final = 300
PLAN_CHARS: Final = 1200
COMMAND_CHARS: Final = 200
#: Files named but not touched, listed at most (mentions.Mentions.ranked keeps 40; bench/resume.py,
#: tuning sets, with files past the first few in the compact form: 20 → 0.765, 30 → 0.765, 40 →
#: 0.775 next-files recall at 2,000 tokens).
LIKELY_NEXT: Final = 40
#: Files the repository relates to the working set (engram.continuity.related), listed at most after
#: those named; the first `EARLY_LIKELY` of both go right after the files touched, the rest after the
#: earlier requests (tuning sets, compact form, 40 named: 10 related and 10 early 0.775, 15 and 20
#: 0.784, 20 and 20 0.784 at 2,000 tokens; 15 related with 10, 20, 55 early: 0.676, 0.686, 0.683 at
#: 1,000 tokens).
RELATED: Final = 15
EARLY_LIKELY: Final = 20
#: Files of each list (working set, likely next) given in full; the rest, when a budget binds, are
#: their path, state and pointer alone (`{"file", "state", "at"}`: ~24 tokens against 33 in full,
#: so more fit; their ranges, counts and reasons are in the unbounded package; the pointer stays,
#: as every item's does, for `engram view`). Tuning sets at 1,000 / 1,500 tokens: all in full
#: 0.641 / 0.712 (with the former 20 named, 10 related, 10 early); the first 3 in full, the rest
#: with their pointer 0.672 / 0.740 (without it, the first 1, 3, 5 in full: 0.695 / 0.765, 0.686 /
#: 0.756, 0.669 / 0.751; bench/README.md).
FULL_FILES: Final = 3
#: Tests to create listed at most (engram.continuity.related.tests_to_create), ranked with the related
#: files (bench/resume.py, tuning sets: 0.748 next-files recall without, 0.755 with 3).
TO_CREATE: Final = 3
_RESERVE: Final = 600  # bytes for the session heading, the section keys and the budget line


@dataclass
class Options:
    session: str | None = None
    harness: str | None = None
    budget: int | None = DEFAULT_BUDGET  # None or 0: no bound
    more: str = "engram resume {session} --budget {budget}"  # the call that gets more ("{budget}": larger)
    task: str | None = None  # a task (engram.continuity.tasks): all its sessions, read as one
    checkpoint: bool = True  # with `task`: keep the package as the task's next checkpoint
    #: The git repository whose history relates files to the working set (engram.continuity.related):
    #: None, the store's own; `history_until` (an ISO time): its commits up to then (None: up to now).
    history: Path | None = None
    history_until: str | None = None


def text_of(store: Store, value: Any, limit: int, tail: bool = False) -> str:
    """A text of the tape (an object reference resolved), trimmed to `limit` characters: its
    head, or with `tail` its end (where a failing command's error is)."""
    if not isinstance(value, str):
        try:
            value = resolve(value, store.objects_dir)
        except Exception as exc:  # noqa: BLE001 - a missing object must not sink the package
            log.warning("could not read a text of the tape: %s", exc)
            return "[text unavailable]"
    text = value.strip() if isinstance(value, str) else ""
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1):].lstrip() if tail else text[: limit - 1].rstrip() + "…"


# ------------------------------------------------------------------ the working tree now


def _changed_by(db: apsw.Connection, path: str, after: str | None, chain_ids: set[str]) -> list[str]:
    """Sessions outside the chain whose captured edits of `path` came after `after`."""
    if after is None:
        return []
    rows = db.execute(
        "SELECT DISTINCT t.id, t.session_id, t.harness FROM fragments f JOIN files p ON p.id = f.file "
        "JOIN tapes t ON t.no = f.tape WHERE p.path = ? AND f.kind = 6 AND f.ts > ? ORDER BY f.ts DESC LIMIT 8",
        (path, after)).fetchall()
    out = []
    for tid, sid, harness in rows:
        if tid not in chain_ids:
            who = f"{harness} {str(sid)[:8]}"
            if who not in out:
                out.append(who)
    return out


def file_state(store: Store, touch: FileTouch) -> str:
    """The file now, against what the session left: as-left, changed, deleted (since), or for a
    file only read: present / deleted. Never reads through a link out of the repository."""
    try:
        rel = repo_relative(store.root, touch.path, store.root)
    except BadInput:
        return "outside the repository"
    full = os.path.join(store.root, rel)
    exists = os.path.isfile(full)
    edit = touch.last_edit
    if edit is None:
        return "present" if exists else "deleted"
    if edit.get("op") == "delete" or edit.get("moved_to"):
        return "as-left (deleted)" if not exists else "re-created since"
    if not exists:
        return "deleted since"
    try:
        with open(full, "rb") as f:
            data = f.read()
    except OSError:
        return "unreadable"
    sha = edit.get("file_after_sha")
    if isinstance(sha, str):
        return "as-left" if E.git_blob_sha(data.decode("utf-8", "surrogateescape")) == sha else "changed since"
    after = edit.get("after_text")
    if isinstance(after, str) and after.strip():
        return "as-left" if after.strip() in data.decode("utf-8", "replace") else "changed since"
    return "present"


def _present(store: Store, path: str) -> str:
    """A file named but not touched, in the working tree now: present, absent (to be created, or a
    path of another tree: a dependency's, a stack trace's), or outside the repository."""
    try:
        rel = repo_relative(store.root, path, store.root)
    except BadInput:
        return "outside the repository"
    return "present" if os.path.isfile(os.path.join(store.root, rel)) else "absent"


# ------------------------------------------------------------------ items


class _Items:
    """Builds each item of the package from the facts (lazily: a file's state is read only when
    its item is measured)."""

    def __init__(self, store: Store, db: apsw.Connection, facts: Facts, chain: Chain) -> None:
        self.store, self.db, self.f, self.chain = store, db, facts, chain
        self.chain_ids = {t.id for t in chain.tapes}

    def request(self, i: int) -> dict[str, Any]:
        at, text, ts = self.f.requests[-1 - i]
        return {"at": at, "ts": ts, "text": text_of(self.store, text, LATEST_REQUEST_CHARS if i == 0 else REQUEST_CHARS)}

    def last_message(self) -> dict[str, Any]:
        assert self.f.last_message is not None
        at, text, ts = self.f.last_message
        return {"at": at, "ts": ts, "text": text_of(self.store, text, MESSAGE_CHARS)}

    def file(self, t: FileTouch, full: bool = True) -> dict[str, Any]:
        """A file touched: in full, or (`full` false) its path, state and pointer, and who changed it since."""
        item: dict[str, Any] = {"file": t.path, "state": file_state(self.store, t)}
        if full:
            item.update({"edits": t.edited, "reads": t.read, "lines": t.ranges})
        item["at"] = t.at
        if item["state"] == "changed since":
            by = _changed_by(self.db, t.path, t.last_edit_ts, self.chain_ids)
            if by:
                item["changed_by"] = by
        return item


def _backing_request(items: _Items) -> int | None:
    """When the latest request is a word or three ("continue", "did you push?"), the index (latest
    first) of the last longer one before it (else the first): what "continue" continues."""
    reqs = items.f.requests
    if not reqs or len(text_of(items.store, reqs[-1][1], 200).split()) >= SHORT_REQUEST_WORDS:
        return None
    for i in range(1, len(reqs)):
        if len(text_of(items.store, reqs[-1 - i][1], 200).split()) >= SHORT_REQUEST_WORDS:
            return i
    return len(reqs) - 1 if len(reqs) > 1 else None  # none longer: the one that began the work


def _handoff_item(store: Store, handoff: dict[str, Any]) -> dict[str, Any]:
    note = {k: (text_of(store, v, 300) if isinstance(v, str) else [text_of(store, x, 300) for x in v[:12]])
            for k, v in handoff["note"].items() if v}
    return {"id": handoff["id"], "created": handoff["created"], "by": handoff.get("source"), "note": note}


def _facts_units(items: _Items, f: Facts, handoff: dict[str, Any] | None = None,
                 related_files: list[Related] | None = None, compact: bool = False
                 ) -> tuple[list[Unit], dict[Any, Callable[[], Any]]]:
    """The units of the package in the order they go in, and how to build each one's item (with
    `compact`, the files past the first `FULL_FILES` of each list as their path, state and pointer)."""
    build: dict[Any, Callable[[], Any]] = {}
    order: list[tuple[Any, str, Callable[[], Any]]] = []
    backing = _backing_request(items) if f.requests else None
    if f.requests:
        order.append((("requests", 0), "requests", lambda: items.request(0)))
    if f.requests and backing is not None:
        order.append((("requests", backing), "requests", lambda: items.request(backing)))
    for n, d in enumerate(handoff.get("disagreements") or [] if handoff else []):
        order.append((("disagreement", n), "disagreements", lambda d=d: d))
    if f.last_message:
        order.append((("last_message",), "last_message", items.last_message))
    if handoff:
        order.append((("handoff",), "handoff", lambda: _handoff_item(items.store, handoff)))
    open_items = [i for i in f.plan.items if i.status in ("pending", "in_progress")]
    for n, it in enumerate(open_items):
        order.append((("plan", n), "plan", lambda it=it: {"text": text_of(items.store, it.text, 300),
                                                                 "status": it.status, "at": it.at}))
    failing = sorted((r for r in f.runs.values() if r.failed and r.kind), key=lambda r: -r.seq)
    for r in failing:
        order.append((("failing", r.at), "failing", lambda r=r: {
            "command": text_of(items.store, r.command, COMMAND_CHARS), "kind": r.kind, "runs": r.runs,
            "exit_code": r.exit_code, "at": r.at, "failing_since": r.first_failed_at,
            "output": text_of(items.store, r.output, OUTPUT_CHARS, tail=True) if r.output is not None else None}))
    seen_effects: set[tuple[str, str]] = set()
    for e in sorted(f.effects, key=lambda e: -e.seq):
        if e.failed or (e.category, e.command) in seen_effects:
            continue  # a failed commit or push did nothing to repeat; a repeated one is listed once
        seen_effects.add((e.category, e.command))
        outcome = "no result recorded" if e.failed is None else "done"
        order.append((("effect", e.seq, e.command), "must_not_redo", lambda e=e, o=outcome: {
            "category": e.category, "command": text_of(items.store, e.command, COMMAND_CHARS), "outcome": o,
            "at": e.at}))
    touches = sorted(f.files.values(), key=lambda t: -t.last)
    # Files read and edited together, latest first: a file only read is edited next as often as one
    # edited (tuning sets: 37 of 152 files read, 60 of 317 edited); after the rest of the list, a
    # tight budget lost them (bench/resume.py at 1,000 tokens: 0.57, 0.50, 0.51 -> 0.72, 0.66, 0.55).
    for n, t in enumerate(touches):
        full = not compact or n < FULL_FILES
        order.append((("file", t.path), "working_set", lambda t=t, full=full: items.file(t, full)))
    likely = [(path, m, r, not compact or n < FULL_FILES) for n, (path, m, r) in enumerate(_likely(f, related_files or []))]
    for path, m, r, full in likely[:EARLY_LIKELY]:
        order.append((("likely", path), "likely_next",
                      lambda path=path, m=m, r=r, full=full: _likely_item(items, path, m, r, full)))
    for e in sorted(f.errors.values(), key=lambda e: -e.seq):
        order.append((("error", e.tool, e.target), "errors", lambda e=e: {
            "tool": e.tool, "target": e.target, "at": e.at,
            "output": text_of(items.store, e.output, OUTPUT_CHARS, tail=True) if e.output is not None else None}))
    commands = sorted((r for r in f.runs.values() if not (r.failed and r.kind)), key=lambda r: -r.seq)
    failed = [r for r in commands if r.failed]  # (errors no later run of the command fixed: before the rest)
    for r in failed:
        order.append(_command_unit(items, r))
    for i in range(1, len(f.requests)):
        if i == backing:
            continue
        order.append((("requests", i), "requests", lambda i=i: items.request(i)))
    for path, m, r, full in likely[EARLY_LIKELY:]:
        order.append((("likely", path), "likely_next",
                      lambda path=path, m=m, r=r, full=full: _likely_item(items, path, m, r, full)))
    for r in commands:
        if not r.failed:
            order.append(_command_unit(items, r))
    if f.plan.accepted is not None:
        order.append((("accepted_plan",), "accepted_plan", lambda: {
            "at": f.plan.accepted_at, "text": text_of(items.store, f.plan.accepted, PLAN_CHARS)}))
    units = []
    for key, what, fn in order:
        build[key] = _memo(fn)
        units.append(Unit(key, what, None, lambda k=key: json_size(build[k]()) + 1))
    return units, build


def _likely(f: Facts, found: list[Related]) -> list[tuple[str, Mention | None, Related | None]]:
    """The files likely next, most likely first: those the transcript names (engram.continuity.mentions),
    then those the repository relates to the working set (engram.continuity.related); a file in both
    once, where it ranks first."""
    by_path = {r.path: r for r in found}
    named: list[tuple[str, Mention | None, Related | None]] = [(m.path, m, by_path.pop(m.path, None))
                                                               for m in f.likely_next[:LIKELY_NEXT]]
    rest: list[tuple[str, Mention | None, Related | None]] = [(r.path, None, r) for r in found
                                                              if r.path in by_path][:RELATED]
    return named + rest


def _likely_item(items: _Items, path: str, m: Mention | None, r: Related | None, full: bool = True) -> dict[str, Any]:
    """A file likely next: in full (where it was named, why related), or its path, state and the
    pointer to where it was named."""
    if not full:
        return {"file": path, "state": _present(items.store, path), **({"at": m.at} if m is not None else {})}
    item: dict[str, Any] = {"file": path}
    if m is not None:
        item.update({"named_in": [s for s in WEIGHTS if s in m.sources], "at": m.at})
    if r is not None:
        item["why"] = r.why[:1]  # its strongest reason: a second cost as much as a file (tuning sets at 1,000 tokens)
    item["state"] = _present(items.store, path)
    return item


def _related(store: Store, facts: Facts, opts: Options) -> list[Related]:
    """The files the repository's history and naming conventions relate to the files edited, and
    the tests its layout expects for sources edited that have none yet, most related first."""
    edited = [t.path for t in sorted(facts.files.values(), key=lambda t: -t.last) if t.edited]
    if not edited:
        return []
    history = read_history(opts.history or Path(store.root), opts.history_until)
    if history is None:
        return []
    found = related(history, edited, set(facts.files), RELATED + LIKELY_NEXT)
    found += tests_to_create(history, edited, set(facts.files), TO_CREATE)
    return sorted(found, key=lambda r: -r.score)  # (stable: ties keep related's order)


def _command_unit(items: _Items, r: Any) -> tuple[Any, str, Callable[[], Any]]:
    last = "no result recorded" if r.failed is None else "failed" if r.failed else "passed"
    return (("command", r.at), "commands", lambda: {
        "command": text_of(items.store, r.command, COMMAND_CHARS), "runs": r.runs, "last": last,
        **({"exit_code": r.exit_code} if r.exit_code else {}), "at": r.at})


def _memo(fn: Callable[[], Any]) -> Callable[[], Any]:
    box: list[Any] = []

    def get() -> Any:
        if not box:
            box.append(fn())
        return box[0]
    return get


def _heading(f: Facts, chain: Chain) -> dict[str, Any]:
    last = chain.tapes[-1]
    head: dict[str, Any] = {"session_id": chain.session_id, "harness": last.harness, "started": f.started,
                            "ended": f.ended, "events": f.events, "tapes": len(chain.tapes)}
    if f.branch:
        head["branch"] = f.branch
    if len(chain.sessions) > 1:
        head["chain"] = chain.sessions
    if chain.continued_by:
        head["continued_by"] = chain.continued_by
    if f.compactions:
        head["compactions"] = len(f.compactions)
    return head


def _assemble(head: dict[str, Any], f: Facts, shown: list[Any], build: dict[Any, Callable[[], Any]]
              ) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": 1, "session": head, "requests": [], "last_message": None, "handoff": None}
    plan: dict[str, Any] | None = None
    if f.plan.tool or f.plan.accepted is not None:
        done = sum(1 for i in f.plan.items if i.status == "completed")
        plan = {"tool": f.plan.tool, "at": f.plan.at, "open": [], "done": done}
        if f.plan.explanation:
            plan["explanation"] = f.plan.explanation[:300]
    lists: dict[str, list[Any]] = {"failing": [], "must_not_redo": [], "working_set": [], "likely_next": [],
                                   "errors": [], "commands": []}
    section = {"failing": "failing", "effect": "must_not_redo", "file": "working_set", "likely": "likely_next",
               "error": "errors", "command": "commands"}
    for key in sorted(shown, key=_display_order):
        item = build[key]()
        if key[0] == "requests":
            doc["requests"].append(item)
        elif key[0] == "last_message":
            doc["last_message"] = item
        elif key[0] == "plan" and plan is not None:
            plan["open"].append(item)
        elif key[0] == "accepted_plan" and plan is not None:
            plan["accepted"] = item
        elif key[0] == "handoff":
            doc["handoff"] = {**item, "disagreements": (doc["handoff"] or {}).get("disagreements", [])}
        elif key[0] == "disagreement":
            doc["handoff"] = doc["handoff"] or {"disagreements": []}
            doc["handoff"]["disagreements"].append(item)
        else:
            lists[section[key[0]]].append(item)
    doc["plan"] = plan
    doc.update(lists)
    return doc


_KIND_ORDER: Final = {"requests": 0, "last_message": 1, "disagreement": 2, "handoff": 3, "plan": 4, "accepted_plan": 5,
                      "failing": 6, "effect": 7, "file": 8, "likely": 9, "error": 10, "command": 11}


def _display_order(key: Any) -> tuple[int, int]:
    return _KIND_ORDER[key[0]], 0


def resume(store: Store, db: apsw.Connection, opts: Options, stop: tuple[str, int] | None = None) -> dict[str, Any]:
    """The resume package of the chain `opts.session` names (default: the latest session), with
    the chain's latest hand-off note and where it disagrees with the transcript."""

    if opts.task:
        return _task_resume(store, db, opts, stop)
    chain = resolve_chain(db, opts.session, opts.harness)
    facts = read_facts(store, chain.tapes, stop)
    handoff = _handoff_of(store, db, chain, facts)
    task = _open_task_of(store, db, chain) if opts.checkpoint and stop is None else None
    if task is None:
        return package(store, db, chain, facts, opts, handoff)
    head = {"id": task.id, "title": task.title, "status": task.status, "checkpoint": None}
    doc = package(store, db, chain, facts, opts, handoff, task_head=head)
    _keep_checkpoint(store, task, chain, doc)
    return doc


def _handoff_of(store: Store, db: apsw.Connection, chain: Chain, facts: Facts) -> dict[str, Any] | None:
    """The chain's latest hand-off note, with where the transcript disagrees with it."""
    from engram.continuity.handoff import disagreements, latest_handoff  # noqa: PLC0415
    from engram.memory.memories import Memories  # noqa: PLC0415

    handoff = latest_handoff(Memories(store, db), chain)
    if handoff is not None:
        handoff["disagreements"] = disagreements(handoff["note"], handoff["created"], facts)
    return handoff


def _open_task_of(store: Store, db: apsw.Connection, chain: Chain) -> Any:
    """The open task the chain's session belongs to (the latest joined), if any: resuming one of
    its sessions is a state of that task too, so it is kept as a checkpoint like `resume --task`."""
    from engram.continuity.tasks import tasks_of  # noqa: PLC0415

    found = tasks_of(store, db, chain.session_id)
    return found[-1] if found else None


def _keep_checkpoint(store: Store, task: Any, chain: Chain, doc: dict[str, Any]) -> None:
    from engram.continuity import tasks as T  # noqa: PLC0415
    from engram.memory.model import calling_agent  # noqa: PLC0415

    doc["session"]["task"]["checkpoint"] = T.checkpoint(store, task, "resume", chain.session_id, doc,
                                                        calling_agent())


def _task_resume(store: Store, db: apsw.Connection, opts: Options, stop: tuple[str, int] | None) -> dict[str, Any]:
    """The package of a task: the facts of all its sessions read as one chain, headed by the task,
    kept as the task's next checkpoint (the version is in `task.checkpoint`)."""
    from engram.continuity import tasks as T  # noqa: PLC0415

    assert opts.task is not None
    task = T.find(T.load(store), opts.task)
    chain = T.task_chain(db, task)
    facts = read_facts(store, chain.tapes, stop)
    handoff = _handoff_of(store, db, chain, facts)
    head: dict[str, Any] = {"id": task.id, "title": task.title, "status": task.status,
                            "sessions": len(chain.sessions), "checkpoint": None}
    if task.goal:
        head["goal"] = text_of(store, task.goal, REQUEST_CHARS)
    doc = package(store, db, chain, facts, opts, handoff, task_head=head)
    if opts.checkpoint:
        _keep_checkpoint(store, task, chain, doc)
    return doc


def package(store: Store, db: apsw.Connection, chain: Chain, facts: Facts, opts: Options,
            handoff: dict[str, Any] | None = None, task_head: dict[str, Any] | None = None) -> dict[str, Any]:
    items = _Items(store, db, facts, chain)
    units, build = _facts_units(items, facts, handoff, _related(store, facts, opts), compact=bool(opts.budget))
    head = _heading(facts, chain)
    if task_head is not None:
        head["task"] = task_head
    if not opts.budget:
        doc = _assemble(head, facts, [u.key for u in units], build)
        doc["left_out"] = False
        return doc
    capacity = opts.budget * TOKEN_BYTES - json_size(head) - _RESERVE
    shown = [k for k in page(units, max(capacity, 0)).shown]
    doc = _finish(head, facts, shown, units, build, opts, chain)
    while tokens(json_size(doc)) > opts.budget and len(shown) > 1:  # the reserve fell short: drop the last
        shown = shown[:-1]
        doc = _finish(head, facts, shown, units, build, opts, chain)
    return doc


def _finish(head: dict[str, Any], facts: Facts, shown: list[Any], units: list[Unit],
            build: dict[Any, Callable[[], Any]], opts: Options, chain: Chain) -> dict[str, Any]:
    doc = _assemble(head, facts, shown, build)
    on = set(shown)
    left = [u for u in units if u.key not in on]
    doc["left_out"] = left_out(left) if left else False
    if left:
        bigger = max(2 * int(opts.budget or DEFAULT_BUDGET), int(opts.budget or 0) + 2000)
        doc["more"] = opts.more.format(session=chain.session_id, budget=bigger, task=opts.task)
    doc["budget"] = {"tokens": opts.budget, "used": 0, "counted": COUNTED}
    doc["budget"]["used"] = tokens(json_size(doc))
    return doc
