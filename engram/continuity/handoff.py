"""Explicit hand-off notes: what an agent or a person says is the state of a session's work (goal,
done, in progress, blocked, next steps, must not redo, must preserve), kept as a memory of kind
`handoff` tied to the session, and checked against what the transcript shows.

A note is what its writer chose to say; the package is what happened. `resume` shows both and
lists where they disagree: the note says the tests pass and the last test run failed; the note
says a file is done and the session edited it after the note; the note names as a next step a
side effect the session already ran after the note. The checks are deterministic and
conservative: a disagreement always cites the event (`tape@offset`) that contradicts the note."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import orjson

from engram.errors import BadInput

if TYPE_CHECKING:
    from engram.continuity.chain import Chain
    from engram.continuity.facts import Facts
    from engram.memory.memories import Memories
    from engram.memory.model import Source

LISTS: Final = ("done", "in_progress", "blocked", "next", "must_not_redo", "must_preserve")
FIELDS: Final = ("goal", *LISTS)
_HEADINGS: Final = {"goal": "goal", "done": "done", "in progress": "in_progress", "in_progress": "in_progress",
                    "blocked": "blocked", "next": "next", "next steps": "next", "next_steps": "next",
                    "must not redo": "must_not_redo", "must_not_redo": "must_not_redo",
                    "must preserve": "must_preserve", "must_preserve": "must_preserve"}
_TITLE: Final = {"goal": "Goal", "done": "Done", "in_progress": "In progress", "blocked": "Blocked",
                 "next": "Next steps", "must_not_redo": "Must not redo", "must_preserve": "Must preserve"}
_HEAD_RE: Final = re.compile(r"^\s*#*\s*([A-Za-z_ ]+?)\s*:\s*(.*)$")
# A file name with a letter in it (Makefile, src/Dockerfile, a.py; not a time such as 10:30-11).
_SPAN_RE: Final = re.compile(r"(?<![\w/.-])([\w./-]*[A-Za-z][\w./-]*):(\d+)-(\d+)\b")
_PASS_RE: Final = re.compile(r"\b(tests?|suite|specs?|build|ci|checks?)\b[^.\n]{0,40}\b(pass(es|ing|ed)?|green|succeed"
                             r"(s|ed)?|ok|fixed|clean)\b", re.IGNORECASE)
TAG: Final = "handoff"


def session_tag(session_id: str) -> str:
    return f"session:{session_id}"


# ------------------------------------------------------------------ the note's text


def parse_note(text: str) -> dict[str, Any]:
    """A note from JSON (an object with the fields) or from text: `Heading: value` lines, each
    followed by `- item` lines (`Goal:`, `Done:`, `In progress:`, `Blocked:`, `Next steps:`,
    `Must not redo:`, `Must preserve:`). Text before any heading is the goal."""
    text = text.strip()
    if not text:
        raise BadInput("an empty hand-off note: give at least a goal or one item (engram handoff --help)")
    if text.startswith("{"):
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise BadInput(f"the note is not valid JSON: {exc}") from None
        return check_note(doc)
    note: dict[str, Any] = {"goal": None, **{k: [] for k in LISTS}}
    field: str | None = None
    loose: list[str] = []
    for line in text.splitlines():
        m = _HEAD_RE.match(line)
        key = _HEADINGS.get(m.group(1).strip().lower()) if m else None
        if m and key:
            field = key
            if m.group(2).strip():
                _put(note, key, m.group(2).strip())
            continue
        item = line.strip().lstrip("-*•").strip()
        if not item:
            continue
        if field is None:
            loose.append(item)
        else:
            _put(note, field, item)
    if loose:
        note["goal"] = " ".join([*loose, *([note["goal"]] if note["goal"] else [])])
    return check_note(note)


def _put(note: dict[str, Any], key: str, value: str) -> None:
    if key == "goal":
        note["goal"] = f"{note['goal']} {value}" if note["goal"] else value
    else:
        note[key].append(value)


def check_note(doc: Any) -> dict[str, Any]:
    """The note's fields, checked: a goal string, lists of strings; unknown fields refused."""
    if not isinstance(doc, dict):
        raise BadInput("a hand-off note is an object with " + ", ".join(FIELDS))
    unknown = sorted(set(doc) - set(FIELDS) - {"next_steps"})
    if unknown:
        raise BadInput(f"unknown hand-off field {unknown[0]!r}: one of {', '.join(FIELDS)}")
    note: dict[str, Any] = {"goal": None, **{k: [] for k in LISTS}}
    goal = doc.get("goal")
    if goal is not None and not isinstance(goal, str):
        raise BadInput("`goal` is a sentence, not a list")
    note["goal"] = goal.strip() if isinstance(goal, str) and goal.strip() else None
    for key in LISTS:
        value = doc.get(key, doc.get("next_steps") if key == "next" else None)
        if value is None:
            continue
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise BadInput(f"`{key}` is a list of sentences")
        note[key] = [i.strip() for i in items if i.strip()]
    if not note["goal"] and not any(note[k] for k in LISTS):
        raise BadInput("an empty hand-off note: give at least a goal or one item")
    return note


def note_text(note: dict[str, Any]) -> str:
    """The note as the memory's content: readable, and read back by `parse_note`."""
    out = [f"Goal: {note['goal']}"] if note.get("goal") else []
    for key in LISTS:
        if note.get(key):
            out.append(f"{_TITLE[key]}:")
            out += [f"- {item}" for item in note[key]]
    return "\n".join(out)


def spans_named(note: dict[str, Any]) -> list[str]:
    """The `FILE:A-B` spans the note names (anchored, so the note follows the code)."""
    out: list[str] = []
    for key in LISTS:
        for item in note.get(key) or []:
            out += [f"{m.group(1)}:{m.group(2)}-{m.group(3)}" for m in _SPAN_RE.finditer(item)]
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------ storing and finding


def write_handoff(mem: Memories, chain: Chain, last_at: str | None, note: dict[str, Any], source: Source
                  ) -> dict[str, Any]:
    """Store the note as a memory of kind handoff, tagged with the session, its evidence the
    session's last event, anchored to the spans it names that still exist."""
    anchors: list[str] = []
    unanchored: list[dict[str, str]] = []
    rooted: dict[str, str] = {}
    for span in spans_named(note):
        try:
            mem.check_anchor(span)
            anchors.append(span)
            rooted[span] = str(mem.at(span))
        except BadInput as exc:  # a file gone, lines past its end, outside the repository: the text still names it
            unanchored.append({"span": span, "why": str(exc).split(";")[0]})
    note = _rooted(note, rooted)
    evidence = [last_at] if last_at else []
    try:
        done = mem.remember(note_text(note), kind="handoff", tags=[TAG, session_tag(chain.session_id)],
                            at=anchors, evidence=evidence, source=source, dedup=False)
    except BadInput:
        if not anchors:
            raise
        done = mem.remember(note_text(note), kind="handoff", tags=[TAG, session_tag(chain.session_id)],
                            evidence=evidence, source=source, dedup=False)
    return {"id": done.id, "session_id": chain.session_id, "note": note, "anchored": [rooted[a] for a in anchors],
            "unanchored": unanchored}


def _rooted(note: dict[str, Any], rooted: dict[str, str]) -> dict[str, Any]:
    """The note with each span it anchors written from the repository's root (`rooted`: as typed →
    repository-relative): typed in src/, `app.py:3-9` named no file to whoever reads the note
    from the root (resume, a teammate, the next agent)."""
    if all(typed == root for typed, root in rooted.items()):
        return note

    def root(m: re.Match[str]) -> str:
        return rooted.get(f"{m.group(1)}:{m.group(2)}-{m.group(3)}", m.group(0))

    return {**note, **{key: [_SPAN_RE.sub(root, item) for item in note.get(key) or []] for key in LISTS}}


def latest_handoff(mem: Memories, chain: Chain) -> dict[str, Any] | None:
    """The newest active hand-off note of any session of the chain, with when and by whom."""
    best = None
    for s in chain.sessions or [{"session_id": chain.session_id}]:
        for m, _ in mem.list(kind="handoff", tags=[session_tag(str(s["session_id"]))], limit=5):
            if best is None or m.created > best.created:
                best = m
    if best is None:
        return None
    return {"id": best.id, "created": best.created, "source": best.source, "note": parse_note(best.content)}


# ------------------------------------------------------------------ checking it


def disagreements(note: dict[str, Any], created: str, facts: Facts) -> list[dict[str, str]]:
    """Where the note and the transcript disagree, each with the event that shows it."""
    out: list[dict[str, str]] = []
    claims = [s for k in ("goal", "done") for s in ([note[k]] if k == "goal" and note[k] else note.get(k) or [])]
    said_pass = next((c for c in claims if _PASS_RE.search(c)), None)
    if said_pass is not None:
        for r in facts.runs.values():
            if r.failed and r.kind:
                out.append({"note": said_pass, "transcript": f"the last run of `{r.command[:120]}` failed"
                            + (f" (exit {r.exit_code})" if r.exit_code is not None else ""), "at": r.at})
    for item in note.get("done") or []:
        for path, touch in facts.files.items():
            if touch.edited and _names(item, path) and _after(touch.last_edit_ts, created):
                out.append({"note": item, "transcript": f"{path} was edited after the note", "at": touch.at})
    for item in note.get("next") or []:
        for e in facts.effects:
            if not e.failed and _effect_named(item, e.category) and _after(e.ts, created):
                out.append({"note": item, "transcript": f"already done after the note: {e.category} `{e.command[:120]}`",
                            "at": e.at})
    return out


def _names(item: str, path: str) -> bool:
    """Does a note's item name this file (its path, or its file name as a word)?"""
    if path in item:
        return True
    name = path.rsplit("/", 1)[-1]
    return len(name) > 3 and re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w-])", item) is not None


_EFFECT_WORDS: Final = {"commit": r"\bcommit", "push": r"\bpush", "tag": r"\btag\b", "migration": r"\bmigrat",
                        "deploy": r"\bdeploy", "publish": r"\b(publish|release)", "pull request": r"\b(pr|pull request)\b",
                        "package install": r"\binstall"}


def _effect_named(item: str, category: str) -> bool:
    word = _EFFECT_WORDS.get(category)
    return word is not None and re.search(word, item, re.IGNORECASE) is not None


def _after(ts: str | None, created: str) -> bool:
    """Is the transcript's time `ts` later than the note's `created`? (False when either is unreadable.)"""
    from datetime import UTC, datetime  # noqa: PLC0415

    try:
        a, b = datetime.fromisoformat(str(ts)), datetime.fromisoformat(created)
    except ValueError:
        return False
    a = a if a.tzinfo else a.replace(tzinfo=UTC)
    b = b if b.tzinfo else b.replace(tzinfo=UTC)
    return a > b


def handoff_request(store: Any, db: Any, session: str | None, note: dict[str, Any], source: Source,
                    harness: str | None = None, task: str | None = None) -> dict[str, Any]:
    """Write a hand-off note for the session `session` names (default: the writer's own session
    when its harness says which, else the latest session), as `engram handoff` and the MCP tool
    `handoff` do. With `task`, the session joins that task first; the note is kept as a
    checkpoint of every open task the session belongs to (`checkpoints`: task and version)."""
    from engram.continuity import tasks as T  # noqa: PLC0415
    from engram.continuity.chain import resolve_chain  # noqa: PLC0415
    from engram.errors import UnknownTape  # noqa: PLC0415
    from engram.memory.memories import Memories  # noqa: PLC0415

    ref = session
    if ref is None and source.session:
        try:
            chain = resolve_chain(db, source.session)
        except UnknownTape:
            chain = None  # the writer's session is not captured yet: the latest one
        else:
            ref = chain.session_id
    chain = resolve_chain(db, ref, harness)
    note = check_note(note)
    if task is not None:
        T.join(store, db, task, chain.session_id, via="handoff", source=source)
    last = chain.tapes[-1]
    mem = Memories(store, db)
    try:
        done = write_handoff(mem, chain, f"{last.id[:12]}@{max(0, last.events - 1)}", note, source)
    finally:
        mem.close()
    done["checkpoints"] = [{"task": t.id, "version": T.checkpoint(store, t, "handoff", chain.session_id,
                                                                 {"id": done["id"], "note": note}, source)}
                           for t in T.tasks_of(store, db, chain.session_id)]
    return done
