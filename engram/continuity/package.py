"""The resume package: a chain's facts as one document, the most load-bearing items first, cut to
a token budget that says what it left out and how to get more.

Tokens are counted as explain counts them (engram.query.budget: 4 bytes of the document's compact
JSON per token); the text rendering of the same items is smaller than their JSON, so the budget
bounds both. Items go in this order until the budget is spent: the latest request (and the one a
short request follows), where the hand-off note disagrees with the transcript, the agent's last
message, the note, the plan's open items, checks still failing, side effects not to repeat, files
edited or read (latest first), files likely next (named but not touched yet:
engram.continuity.mentions; then related to the files edited by the repository's git:
engram.continuity.related), tool errors no later call fixed, commands whose last run failed,
earlier requests, other commands, the accepted plan's text (docs/resume.md). Under a budget, the
files past the first three of each list are listed in groups that say the tape of their pointers,
their state and their folder once, each file with its pointer's offset: the next edits are often
far down those lists, and a file fits at a few tokens where a full entry would not."""

from __future__ import annotations

import dataclasses
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
#: 0.775 next-files recall at 2,000 tokens; 60 named and 20 related in groups: no cut changed).
LIKELY_NEXT: Final = 40
#: Files the repository relates to the working set (engram.continuity.related), listed at most after
#: those named (tuning sets, compact form, 40 named: 10 related 0.775, 15 0.784, 20 0.784 at 2,000 tokens).
RELATED: Final = 15
#: Files of each list (working set, likely next) given in full; the rest, when a budget binds, are
#: listed in groups (`_Short`): each file its path and the offset of its pointer, each group its
#: tape, the state of its files and folders said once; ~8 tokens a file against 33 in full, so the
#: lists fit where they did not (the next edits are often far down them). Their ranges, counts and
#: reasons are in the unbounded package. Tuning sets at 1,000 / 1,500 / 2,000 tokens: the first 3
#: in full, the rest in groups 0.721 / 0.789 / 0.789; one entry each with its own pointer 0.672 /
#: 0.740 / 0.774; the first 1 or 0 in full, no folders: 0.721 / 0.779, 0.726 / 0.779 at 1,000 /
#: 1,500 (bench/README.md).
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
    """The file now, against what the session left: as-left (its line endings alone changed: not
    an edit), changed, deleted (since), or for a file only read: present / deleted. Never reads through a link out of the repository."""
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
    after = edit.get("after_text")
    if not isinstance(sha, str) and not (isinstance(after, str) and after.strip()):
        return "present"
    if _left_as(data, sha, after):
        return "as-left"
    # a checkout with core.autocrlf, or an editor, changes every line ending and no line
    lf = data.replace(b"\r\n", b"\n")
    if any(_left_as(d, sha, after) for d in {lf, lf.replace(b"\n", b"\r\n")} - {data}):
        return LINE_ENDINGS_STATE
    return "changed since"


LINE_ENDINGS_STATE: Final = "as-left (line endings changed)"


def _left_as(data: bytes, sha: object, after: object) -> bool:
    """Whether the file's bytes are what the last edit left: its git blob id, else its text in it."""
    if isinstance(sha, str):
        return E.git_blob_sha(data.decode("utf-8", "surrogateescape")) == sha
    return isinstance(after, str) and after.strip() in data.decode("utf-8", "replace")


def _present(store: Store, path: str) -> str:
    """A file named but not touched, in the working tree now: present, absent (to be created, or a
    path of another tree: a dependency's, a stack trace's), or outside the repository."""
    try:
        rel = repo_relative(store.root, path, store.root)
    except BadInput:
        return "outside the repository"
    return "present" if os.path.isfile(os.path.join(store.root, rel)) else "absent"


# ------------------------------------------------------------------ items

_NEVER_ALONE: Final = 1 << 40  # a group's `least`: it goes in only with a file of it


@dataclass(frozen=True)
class _Short:
    """A file past the first few of its list under a budget: its path, state and pointer, at a few
    tokens. It is listed in a group of the files of its list whose pointers are in the same tape
    and whose state is the same: the group says the tape and the state once, each file the offset
    of its own pointer (`{"tape": T, "state": S, "files": {path: offset}}`: `engram view T@offset`
    opens it), and files of one folder that the group holds two or more of are listed under the
    folder (`{"src/a/": {"x.go": 12, "y.go": 40}}`). A file the repository's history alone relates
    has no pointer: its group lists paths (`{"state": S, "files": [path, ...]}`)."""

    path: str
    state: str
    at: str | None
    by: tuple[str, ...] = ()  # sessions that changed it since
    folder: str | None = None  # set when its group lists it under its folder

    def group(self) -> tuple[str | None, str, tuple[str, ...]]:
        """What the files of one group share: the tape of their pointers, state, who changed them."""
        return (self.at.split("@")[0] if self.at else None, self.state, self.by)

    def header(self) -> dict[str, Any]:
        """The group's own part, no file in it yet."""
        tape, state, by = self.group()
        head: dict[str, Any] = {"tape": tape} if tape else {}
        head["state"] = state
        if by:
            head["changed_by"] = list(by)
        head["files"] = {} if tape else []
        return head

    def member(self) -> tuple[str, int | None]:
        """The file as its group lists it: its path (past its folder) and its pointer's offset."""
        if self.at is None:
            return self.path, None
        return self.path[len(self.folder or ""):], int(self.at.rsplit("@", 1)[1])

    def size(self) -> int:
        """Bytes the file adds to its group's compact JSON (a comma included)."""
        name, off = self.member()
        return json_size(name) + 1 + (len(str(off)) + 1 if off is not None else 0)

    def folder_of(self) -> str | None:
        """The folder its group could list it under (a file with a pointer, not at the top)."""
        return self.path.rsplit("/", 1)[0] + "/" if self.at is not None and "/" in self.path else None


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

    def file(self, t: FileTouch, full: bool = True) -> dict[str, Any] | _Short:
        """A file touched: in full, or (`full` false) its path, state and pointer, and who changed
        it since, listed in the group of its tape and state."""
        state = file_state(self.store, t)
        by = _changed_by(self.db, t.path, t.last_edit_ts, self.chain_ids) if state == "changed since" else []
        if not full:
            return _Short(t.path, state, t.at, tuple(by))
        item: dict[str, Any] = {"file": t.path, "state": state, "edits": t.edited, "reads": t.read,
                                "lines": t.ranges, "at": t.at}
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
    `compact`, the files past the first `FULL_FILES` of each list short, in groups: `_Short`)."""
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
    # Then the files likely next, all of them: in groups they cost ~8 tokens each, less than the
    # earlier requests, errors and commands after them (tuning sets at 1,500 tokens: 0.784 against
    # 0.779 with the first 20 here and the rest after the earlier requests; no other budget changed).
    for n, (path, m, r) in enumerate(_likely(f, related_files or [])):
        order.append((("likely", path), "likely_next", lambda path=path, m=m, r=r, full=not compact or n < FULL_FILES:
                      _likely_item(items, path, m, r, full)))
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
    for r in commands:
        if not r.failed:
            order.append(_command_unit(items, r))
    if f.plan.accepted is not None:
        order.append((("accepted_plan",), "accepted_plan", lambda: {
            "at": f.plan.accepted_at, "text": text_of(items.store, f.plan.accepted, PLAN_CHARS)}))
    for key, _, fn in order:
        build[key] = _memo(fn)
    units = [_unit(key, what, build, compact) for key, what, _ in order]
    return units + _group_units(units, build), build


def _shorts(units: list[Unit], build: dict[Any, Callable[[], Any]]) -> list[tuple[Unit, _Short]]:
    return [(u, item) for u in units if u.needs is not None and isinstance(item := build[u.key](), _Short)]


def _unit(key: Any, what: str, build: dict[Any, Callable[[], Any]], compact: bool) -> Unit:
    """The unit of an item; a file in a group needs its group (`_group_units` makes it), and is
    sized as a member of it."""
    item = build[key]() if compact and key[0] in ("file", "likely") else None
    if not isinstance(item, _Short):
        return Unit(key, what, None, lambda: json_size(build[key]()) + 1)
    return Unit(key, what, ("group", what, *item.group()), item.size)


def _group_units(units: list[Unit], build: dict[Any, Callable[[], Any]]) -> list[Unit]:
    """The groups of the files listed short (a group goes in with its first file: `least` keeps it
    from going in alone), and the folders a group holds two or more files of; each such file is
    then listed under its folder and needs it."""
    shorts = _shorts(units, build)
    count: dict[tuple[Any, ...], int] = {}
    for u, item in shorts:
        folder = item.folder_of()
        if folder:
            count[(u.needs, folder)] = count.get((u.needs, folder), 0) + 1
    out: dict[Any, Unit] = {}
    for u, item in shorts:
        gkey = u.needs
        if gkey not in out:
            build[gkey] = _memo(item.header)
            out[gkey] = Unit(gkey, "group", None, lambda g=gkey: json_size(build[g]()) + 1, least=_NEVER_ALONE)
        folder = item.folder_of()
        if folder and count[(gkey, folder)] >= 2:
            inside = dataclasses.replace(item, folder=folder)
            build[u.key] = _memo(lambda inside=inside: inside)
            u.needs, u.measure = ("folder", gkey, folder), inside.size
            if u.needs not in out:  # `"src/a/":{},`
                out[u.needs] = Unit(u.needs, "group", gkey, lambda f=folder: json_size(f) + 4, least=_NEVER_ALONE)
    return list(out.values())


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


def _likely_item(items: _Items, path: str, m: Mention | None, r: Related | None, full: bool = True
                 ) -> dict[str, Any] | _Short:
    """A file likely next: in full (where it was named, why related), or its path, state and the
    pointer to where it was named."""
    if not full:
        return _Short(path, _present(items.store, path), m.at if m is not None else None)
    item: dict[str, Any] = {"file": path}
    if m is not None:
        item.update({"named_in": [s for s in WEIGHTS if s in m.sources], "at": m.at})
    if r is not None:
        item["why"] = r.why[:1]  # its strongest reason: a second cost as much as a file (tuning sets at 1,000 tokens)
    item["state"] = _present(items.store, path)
    return item


def file_entries(doc: dict[str, Any], section: str) -> list[dict[str, Any]]:
    """The files of a package's `working_set` or `likely_next`, in order, one entry each: an entry
    in full as it is, a file of a group (under a budget, past the first few) as its path, state and
    pointer (`{"file", "state", "at"}`, with `changed_by` when the group has it; no `at` for a file
    the repository alone relates)."""
    out: list[dict[str, Any]] = []
    for item in doc.get(section) or []:
        if "file" in item:
            out.append(item)
            continue
        extra = {"changed_by": item["changed_by"]} if item.get("changed_by") else {}
        files = item["files"]
        for key, value in (files.items() if isinstance(files, dict) else ((f, None) for f in files)):
            inside = value.items() if isinstance(value, dict) else [("", value)]
            for name, off in inside:
                at = {"at": f"{item['tape']}@{off}"} if off is not None else {}
                out.append({"file": key + name, "state": item["state"], **at, **extra})
    return out


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
    groups: dict[Any, dict[str, Any]] = {}
    for key in sorted(shown, key=_display_order):
        if key[0] in ("group", "folder"):
            continue  # (a group is listed where its first file is)
        item = build[key]()
        if isinstance(item, _Short):
            _add_short(lists[section[key[0]]], groups, key[0], item)
        elif key[0] == "requests":
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
                      "failing": 6, "effect": 7, "file": 8, "likely": 9, "error": 10, "command": 11,
                      "group": 12, "folder": 12}


def _add_short(into: list[Any], groups: dict[Any, dict[str, Any]], kind: str, item: _Short) -> None:
    """A file listed short, into its group (the group made where its first file is listed)."""
    gkey = (kind, *item.group())
    if gkey not in groups:
        groups[gkey] = item.header()
        into.append(groups[gkey])
    name, off = item.member()
    files = groups[gkey]["files"]
    if isinstance(files, list):
        files.append(name)
    elif item.folder:
        files.setdefault(item.folder, {})[name] = off
    else:
        files[name] = off


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
    left = [u for u in units if u.key not in on and u.what != "group"]
    doc["left_out"] = left_out(left) if left else False
    if left:
        bigger = max(2 * int(opts.budget or DEFAULT_BUDGET), int(opts.budget or 0) + 2000)
        doc["more"] = opts.more.format(session=chain.session_id, budget=bigger, task=opts.task)
    doc["budget"] = {"tokens": opts.budget, "used": 0, "counted": COUNTED}
    doc["budget"]["used"] = tokens(json_size(doc))
    return doc
