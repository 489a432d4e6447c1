"""Claude Code sessions: `<session>.jsonl` plus `<session>/subagents/*.jsonl` (or, for a
subagent whose file is missing, its calls and results as the parent's progress records repeat them).

Records form a tree by parentUuid; we keep every branch that happened (all records, in file
order) and drop copies by uuid. Edits come from the `toolUseResult` of successful tool calls
only: a string result or `is_error` is a failure and stays a `tool.result`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

from engram.adapters.base import (
    Capture,
    Line,
    PathMapper,
    SourceSpan,
    posix_path,
    read_source,
)
from engram.adapters.unified import (
    apply_hunks,
    apply_hunks_text,
    changes_from_hunks,
    common_ends,
    context_fields,
    count_lines,
    diff_hunks,
    edit_ranges,
    hunk_extents,
    join_lines,
    reverse_hunks,
    split_lines,
    tag_hunks,
    whole_file_context,
)
from engram.adapters.sniff import looks_like_claude  # noqa: F401 - (its home before sniff)
from engram.tape import events as E

log = logging.getLogger(__name__)

HARNESS = "claude-code"
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
_EXIT_RE = re.compile(r"^Error: Exit code (\d+)")
_CAT_N_RE = re.compile(r"^ *(\d+)(?:→|\t)(.*)$")
# Known record types; those `_record` does not read are counted as ignored, not as unknown. The
# newer ones (2.1.x: titles, modes, a PR the session opened, worktree moves, bridge and frame links)
# name or describe a session; none holds code or a message (see the transcript-formats reference).
# `file-history-delta` (2.1.217) names one file's rewind backup, as a snapshot names several.
CLAUDE_TYPES = frozenset({"user", "assistant", "system", "progress", "summary", "file-history-snapshot",
                          "file-history-delta",
                          "queue-operation", "attachment", "pr-link", "custom-title", "ai-title",
                          "last-prompt", "agent-name", "mode", "permission-mode", "worktree-state",
                          "relocated", "bridge-session", "frame-link", "started", "result", "atis-latch"})


def session_sources(main: Path) -> list[SourceSpan]:
    """The main file and its subagent files, in a fixed order."""
    sources = [SourceSpan("main", main)]
    sub = main.with_suffix("") / "subagents"
    if sub.is_dir():
        for p in sorted(sub.glob("*.jsonl")):
            sources.append(SourceSpan(f"subagents/{p.name}", p))
    return sources


class _State:
    def __init__(self, agents_with_files: frozenset[str] = frozenset()) -> None:
        self.seen: set[str] = set()
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.agents_with_files = agents_with_files
        # What each agent (None: the main one) last knew of a file, whole: after its creates and
        # edits whose result file is known, and its reads of a whole file. A Write whose result
        # holds neither `originalFile` nor its patch is diffed against it.
        self.files: dict[tuple[str | None, str], str] = {}


def parse_session(
    sources: list[SourceSpan],
    mapper_for: Callable[[str | None], PathMapper],
    *,
    max_line_bytes: int,
) -> Capture:
    """Read all sources into one capture; every event is tagged with its source line."""
    skipped: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    subagents: list[tuple[SourceSpan, list[Line]]] = []
    for src in sources:
        if src.name != "main":
            lines = _read_subagent(src, max_line_bytes, skipped, ignored)
            if lines is not None:
                subagents.append((src, lines))
    # The main file keeps a subagent's progress records only when that subagent's own file was
    # not read: read the subagent files first.
    with_files = frozenset(_agent_id(src) for src, _ in subagents)
    parsed: list[tuple[SourceSpan, list[Line]]] = []
    for src in sources:
        if src.name == "main":
            lines = read_source(src, max_line_bytes=max_line_bytes, skipped=skipped,
                                skip=_unparsed_but_agents_without(with_files), ignored=ignored)
            parsed.append((src, lines))
    parsed += subagents
    sources = [src for src, _ in parsed]
    main_records = [line.record for line in parsed[0][1] if line.record] if parsed else []
    session_id = own_session(main_records, sources[0].path.stem) or sources[0].path.stem
    copies_apart = _real_session_ids(main_records)
    first = head_record(main_records, session_id)
    cap = Capture(HARNESS, session_id, sources, skipped=skipped, ignored=ignored)
    cwd = first.get("cwd")
    mapper = _with_entered_worktrees(mapper_for(cwd), parsed[0][1] if parsed else [])
    cap.meta = {
        "harness_version": first.get("version"),
        "cwd": cwd,
        "git_branch": first.get("gitBranch"),
        "git_head": None,
        "model": None,
        "started": first.get("timestamp"),
        "slug": first.get("slug"),
    }
    continues = _continued_session(main_records, session_id) if copies_apart else None
    if continues is not None:
        cap.meta.update(continues=continues[0], continues_via=continues[1])
    state = _State(with_files)
    for si, (src, lines) in enumerate(parsed):
        agent = None if src.name == "main" else _agent_id(src)
        for line in lines:
            rec = line.record
            if rec is None:
                continue
            cap.cursor = (si, line.offset)
            if copies_apart and (other := _session_of(rec)) is not None and other != session_id:
                _copied(cap, state, rec, other)
            else:
                _record(cap, state, mapper, rec, agent)
    return cap


def own_session(records: Iterable[dict[str, Any]], stem: str) -> str | None:
    """The session whose records a file holds, which is not always the first record's.

    Claude Code starts a session's file with records of another session in two cases: `--resume`
    and `--continue` write a new file that repeats the resumed session's records (keeping their
    `sessionId`) before its own; a session implementing a plan accepted with "clear context"
    starts with a line of the planning session. The session is the one the file is named after
    (Claude Code names it by the session id), even before a record of its own is written; for a
    file named otherwise (saved by hand, exported), the one its last records carry: a session's
    own records follow whatever it copied. Progress records, never read (`_unparsed`), do not count.

    Only Claude Code's own session ids (UUIDs) are told apart so: a file whose records carry other
    ids was made or trimmed by hand (a fixture, a redacted export) and is one session, the one its
    head record names (`_real_session_ids`)."""
    records = list(records)
    last: str | None = None
    for rec in records:
        sid = _session_of(rec)
        if sid is None or rec.get("type") == "progress":
            continue
        if sid == stem:
            return sid
        last = sid
    if not _real_session_ids(records):
        return _session_of(head_record(records))
    return stem if _SESSION_NAME.fullmatch(stem) else last


_SESSION_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def _real_session_ids(records: list[dict[str, Any]]) -> bool:
    """Whether every session id the records carry is one Claude Code makes (a UUID): only then
    are records of another session told apart from the file's own (`own_session`)."""
    # (`_session_of` written out: it is called for every record of the main file; each id matched once)
    ids = {sid for rec in records if isinstance(rec, dict) and isinstance(sid := rec.get("sessionId"), str) and sid}
    return all(_SESSION_NAME.fullmatch(sid) for sid in ids)


def _session_of(rec: dict[str, Any]) -> str | None:
    sid = rec.get("sessionId") if isinstance(rec, dict) else None
    return sid if isinstance(sid, str) and sid else None


_PLAN_PROMPT = "Implement the following plan:"


def _continued_session(records: list[dict[str, Any]], session_id: str) -> tuple[str, str] | None:
    """(session, "plan" or "resume") when this session continues another one: the session of the
    last copied record before its own (see `own_session`), or the planning session its first
    prompt names. How: "plan" when that prompt is a plan another session accepted (Claude Code
    hands it over as "Implement the following plan:", with the plan in `planContent` and, since
    2.1, the path of the planning session's transcript), else "resume"."""
    before: str | None = None
    for i, rec in enumerate(records):
        sid = _session_of(rec)
        if sid is None or rec.get("type") == "progress":
            continue
        if sid != session_id:
            before = sid
            continue
        plan = _plan_handover(records[i:i + 20], session_id)
        if before is not None:
            return before, "plan" if plan is not None else "resume"
        return (plan, "plan") if plan and plan != session_id else None
    return None


_PLAN_TRANSCRIPT = re.compile(r"read the full transcript at: \S*?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                              r"[0-9a-f]{12})\.jsonl")


def _plan_handover(records: list[dict[str, Any]], session_id: str) -> str | None:
    """When the session's first prompt (among `records`, its first) is the plan another session
    accepted: the planning session its transcript path names, else "" (None: not a plan)."""
    for rec in records:
        if rec.get("type") != "user" or rec.get("isMeta") or _session_of(rec) != session_id:
            continue
        content = (rec.get("message") or {}).get("content") if isinstance(rec.get("message"), dict) else None
        text = content if isinstance(content, str) else _text_of(content)
        if rec.get("planContent") or text.startswith(_PLAN_PROMPT):
            m = _PLAN_TRANSCRIPT.search(text)
            return m.group(1) if m else ""
        if text and not text.startswith("<"):  # a prompt the user typed; `<command-name>` and the like are not
            return None
    return None


def _copied(cap: Capture, st: _State, rec: dict[str, Any], other: str) -> None:
    """A record of another session the file repeats (see `own_session`): that session's
    evidence, which its own file holds, not this session's. It still names the tool calls whose
    results may follow among this session's records, and its uuid marks later copies of it."""
    uuid = rec.get("uuid")
    if isinstance(uuid, str):
        st.seen.add(uuid)
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if rec.get("type") == "assistant" and isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                inp = block.get("input") if isinstance(block.get("input"), dict) else {}
                st.calls[str(block.get("id") or "")] = (str(block.get("name") or ""), inp)
    cap.copied[other] += 1


def _read_subagent(src: SourceSpan, max_line_bytes: int, skipped: Counter[str],
                   ignored: Counter[str]) -> list[Line] | None:
    """A subagent file's lines, or None when it cannot be read: a file deleted since it was
    listed (Claude Code removes a session's folder while a live capture reads it), a dangling
    link or a folder named `*.jsonl` loses that file, not the whole session. It is read again,
    from its start, by the next capture that finds it."""
    try:
        lines = read_source(src, max_line_bytes=max_line_bytes, skipped=skipped, skip=_unparsed, ignored=ignored)
    except OSError as exc:
        skipped[f"unreadable subagent file ({exc.__class__.__name__})"] += 1
        log.warning("%s: %s; the session is captured without it", src.path, exc)
        return None
    return lines


_PROGRESS = b'"type":"progress","data":{'
_DATA = b'"data":'
_DATA_AT = _PROGRESS.index(_DATA)  # where `_PROGRESS` holds it
_AFTER_DATA = len(_PROGRESS) - _DATA_AT - len(_DATA)
_ENVELOPE_BYTES = 1200  # how far into a line the record's own `type` is looked for


def _unparsed(data: bytes, start: int, stop: int) -> str | None:
    """Progress records (about two thirds of a real session) are never evidence: recognise them
    from their envelope, where the record's own `type` precedes its `data`, without parsing
    (the line is data[start:stop], looked at in place: `engram.adapters.base._lines_of`).

    That is: `_PROGRESS` within the line's first `_ENVELOPE_BYTES`, after its start, with no
    `"data":` before it. Found as the line's first `"data":` with `_PROGRESS` around it, the same
    answer (a `"data":` before `_PROGRESS` is the first one, and the one `_PROGRESS` holds is
    first when there is none before it) from one search for a shorter string, not two: ~1% of
    capture's CPU (bench/README.md, `capture.py`)."""
    lim = min(stop, start + _ENVELOPE_BYTES) - _AFTER_DATA
    at = data.find(_DATA, start, lim) - _DATA_AT if lim > start else -1
    return "progress" if at > start and data.startswith(_PROGRESS, at) else None


def _with_entered_worktrees(mapper: PathMapper, lines: list[Line]) -> PathMapper:
    """`mapper`, also knowing the worktrees the session entered (`worktree-state` records).

    Claude Code can move a running session into a new worktree of its repository
    (`.claude/worktrees/<name>`) and removes it when done; git then no longer lists it, and a
    file there would be named from the checkout (`.claude/worktrees/<name>/src/f.py`). A worktree
    entered from inside this repository is a root of its own, as the ones git lists are."""
    found: list[PurePosixPath] = []
    for line in lines:
        rec = line.record
        if rec is None or rec.get("type") != "worktree-state":
            continue
        wt = rec.get("worktreeSession")
        path, origin = (wt.get("worktreePath"), wt.get("originalCwd")) if isinstance(wt, dict) else (None, None)
        if isinstance(path, str) and isinstance(origin, str) and PurePosixPath(posix_path(path)).is_absolute() \
                and mapper.to_repo(str(PurePosixPath(posix_path(origin)) / "f")) is not None:  # (the root maps to None)
            found.append(PurePosixPath(os.path.normpath(posix_path(path))))
    new = tuple(p for p in dict.fromkeys(found) if p not in mapper.trees)
    return dataclasses.replace(mapper, trees=mapper.trees + new) if new else mapper


_AGENT_PROGRESS = b'"type":"agent_progress"'
_AGENT_ID = re.compile(rb'"agentId":"([^"\\]{1,200})"')


def _unparsed_but_agents_without(with_files: frozenset[str]) -> Callable[[bytes], str | None]:
    """`_unparsed`, except for a subagent's progress when its own file is missing.

    The parent's `agent_progress` records repeat a subagent's tool calls and results (not its
    text replies) as they happen. With `subagents/agent-<id>.jsonl` present they are copies and
    stay unparsed; a transcript kept or shared without that folder (saved by hand, the Entire
    CLI's checkpoints) has the subagent's reads and edits only there."""
    def skip(data: bytes, start: int, stop: int) -> str | None:
        # `_unparsed`, written out: called on every line of a session (a call less per line
        # was 1.5% of capture's CPU)
        lim = start + _ENVELOPE_BYTES
        if lim > stop:
            lim = stop
        lim -= _AFTER_DATA
        at = data.find(_DATA, start, lim) - _DATA_AT if lim > start else -1
        if at <= start or not data.startswith(_PROGRESS, at):
            return None
        at = data.rfind(_AGENT_PROGRESS, start, stop)
        if at < 0:
            return "progress"
        # the record's own `data.type` and `data.agentId` follow its (long) `data.message`
        ids = {m.group(1).decode("utf-8", "replace") for m in _AGENT_ID.finditer(data, at, stop)}
        return "progress" if ids and ids <= with_files else None
    return skip


def head_record(records: Iterable[dict[str, Any]], session: str | None = None) -> dict[str, Any]:
    """The record a session's cwd and start time are read from: the first of `session` (any
    session when None) with a cwd, else the first of it. Progress records never count:
    `parse_session` does not read them (`_unparsed`), and `started` (read before parsing) must
    agree with it."""
    fallback: dict[str, Any] = {}
    for rec in records:
        sid = _session_of(rec)
        if sid is None or rec.get("type") == "progress" or (session is not None and sid != session):
            continue
        if rec.get("cwd"):
            return rec
        fallback = fallback or rec
    return fallback


def started(records: Iterable[dict[str, Any]], stem: str | None = None) -> str | None:
    """When the session began, as its capture's `started` will say: the time of its head record
    (`head_record` of the session `own_session` names) among `records`, the file's first ones.

    `records`: the file's first records, or for a file named by its session id those from the
    first line naming it (past the records a resumed session repeats first), read lazily up to
    that session's first record with a cwd. For a file named otherwise, all of them are read and
    the session is the one the last of them carries; a file whose records carry ids Claude Code
    does not make is one session, whose head record is the first of all (see `own_session`)."""
    firsts: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}  # session -> (first, first with cwd)
    last: str | None = None
    head: dict[str, Any] = {}  # `head_record` of all of them, the session of a file not told apart
    real = True
    for rec in records:
        sid = _session_of(rec)
        if sid is None or rec.get("type") == "progress":
            continue
        real = real and bool(_SESSION_NAME.fullmatch(sid))
        if not head.get("cwd") and (not head or rec.get("cwd")):
            head = rec
        first, with_cwd = firsts.get(sid, (rec, None))
        if with_cwd is None and rec.get("cwd"):
            with_cwd = rec
        firsts[sid] = (first, with_cwd)
        last = sid
        if sid == stem and with_cwd is not None:
            break
    if not real and (stem is None or stem not in firsts):
        ts = head.get("timestamp")
        return ts if isinstance(ts, str) else None
    own = stem if stem is not None and (stem in firsts or _SESSION_NAME.fullmatch(stem)) else last
    if own is None or own not in firsts:
        return None
    first, with_cwd = firsts[own]
    ts = (with_cwd or first).get("timestamp")
    return ts if isinstance(ts, str) else None


def _agent_id(src: SourceSpan) -> str:
    stem = Path(src.name).stem
    return stem[len("agent-"):] if stem.startswith("agent-") else stem


def _base(rec: dict[str, Any], agent: str | None, kind: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": kind, "ts": rec.get("timestamp")}
    if uuid := rec.get("uuid"):
        ev["id"] = uuid
    if parent := rec.get("parentUuid"):
        ev["parent"] = parent
    if agent is not None:
        ev["agent"] = agent
    return ev


def _record(cap: Capture, st: _State, mapper: PathMapper, rec: dict[str, Any], agent: str | None) -> None:
    uuid = rec.get("uuid")
    if isinstance(uuid, str):
        if uuid in st.seen:
            cap.ignored["duplicate record (same uuid)"] += 1
            return
        st.seen.add(uuid)
    typ = rec.get("type")
    if typ == "assistant":
        _assistant(cap, st, rec, agent)
    elif typ == "user":
        _user(cap, st, mapper, rec, agent)
    elif typ == "progress" and agent is None and _progress_of_agent(cap, st, mapper, rec):
        return
    elif typ == "attachment" and _attached_file(cap, mapper, rec, agent):
        return
    elif typ == "system" and rec.get("subtype") == "compact_boundary":
        ev = _base(rec, agent, E.COMPACT)
        meta = rec.get("compactMetadata") or {}
        ev.update(trigger=meta.get("trigger"), pre_tokens=meta.get("preTokens"),
                  logical_parent=rec.get("logicalParentUuid"))
        cap.add(ev)
    else:
        if typ in CLAUDE_TYPES:
            cap.ignored[f"{typ}" + (f"/{rec.get('subtype')}" if rec.get("subtype") else "")] += 1
        else:
            cap.skipped[f"unknown record type {typ!r}"] += 1


def _progress_of_agent(cap: Capture, st: _State, mapper: PathMapper, rec: dict[str, Any]) -> bool:
    """A subagent's call or result inside the parent's progress record, read as the subagent's
    own record when its file is missing (see `_unparsed_but_agents_without`)."""
    data = rec.get("data")
    if not isinstance(data, dict) or data.get("type") != "agent_progress":
        return False
    agent, msg = data.get("agentId"), data.get("message")
    if not isinstance(agent, str) or agent in st.agents_with_files or not isinstance(msg, dict) \
            or msg.get("type") not in ("user", "assistant"):
        return False
    _record(cap, st, mapper, msg, agent)
    return True


def _attached_file(cap: Capture, mapper: PathMapper, rec: dict[str, Any], agent: str | None) -> bool:
    """A file the user attached (`@path` in a prompt), whose text newer builds give the model in
    an `attachment` record rather than through a Read: a read of that file, by the session."""
    att = rec.get("attachment")
    content = att.get("content") if isinstance(att, dict) and att.get("type") == "file" else None
    f = content.get("file") if isinstance(content, dict) and content.get("type") == "text" else None
    if not isinstance(f, dict) or not isinstance(f.get("content"), str) or not f.get("filePath"):
        return False
    ev = _read(cap, mapper, rec, agent, None, f)
    if ev is not None:
        cap.add(ev)
    return True


def _assistant(cap: Capture, st: _State, rec: dict[str, Any], agent: str | None) -> None:
    msg = rec.get("message")
    if not isinstance(msg, dict):
        cap.skipped["assistant record without a message"] += 1
        return
    model = msg.get("model")
    if cap.meta.get("model") is None and isinstance(model, str) and not model.startswith("<"):
        cap.meta["model"] = model
    content = msg.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        bt = block.get("type")
        if bt == "tool_use":
            call_id = str(block.get("id") or "")
            name = str(block.get("name") or "")
            inp = block.get("input") if isinstance(block.get("input"), dict) else {}
            st.calls[call_id] = (name, inp)
            ev = _base(rec, agent, E.TOOL_CALL)
            ev.update(call_id=call_id, name=name, input=inp)
            cap.add(ev)
        elif bt == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            ev = _base(rec, agent, E.MSG_OUT)
            ev.update(text=block["text"], block="text")
            cap.add(ev)
        elif bt == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
            ev = _base(rec, agent, E.MSG_OUT)
            ev.update(text=block["thinking"], block="thinking")
            cap.add(ev)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _user(cap: Capture, st: _State, mapper: PathMapper, rec: dict[str, Any], agent: str | None) -> None:
    msg = rec.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        ev = _base(rec, agent, E.MSG_IN)
        ev["text"] = content
        if rec.get("isCompactSummary"):
            ev["compact_summary"] = True
        if rec.get("isMeta"):
            ev["is_meta"] = True
        cap.add(ev)
        return
    if not isinstance(content, list):
        cap.skipped["user record without content"] += 1
        return
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    for block in content:
        if not isinstance(block, dict):
            continue
        bt = block.get("type")
        if bt == "text" and isinstance(block.get("text"), str):
            ev = _base(rec, agent, E.MSG_IN)
            ev["text"] = block["text"]
            if rec.get("isCompactSummary"):
                ev["compact_summary"] = True
            cap.add(ev)
        elif bt == "tool_result":
            tur = rec.get("toolUseResult") if len(results) == 1 else None
            _tool_result(cap, st, mapper, rec, agent, block, tur)
        elif bt == "image":
            cap.ignored["image block"] += 1


def _tool_result(cap: Capture, st: _State, mapper: PathMapper, rec: dict[str, Any], agent: str | None,
                 block: dict[str, Any], tur: Any) -> None:
    call_id = str(block.get("tool_use_id") or "")
    name, inp = st.calls.get(call_id, ("", {}))
    output = _text_of(block.get("content"))
    failed = bool(block.get("is_error")) or isinstance(tur, str)
    ev = _base(rec, agent, E.TOOL_RESULT)
    ev.update(call_id=call_id, name=name, is_error=failed, exit_code=None, stdout=output, stderr="")
    derived: dict[str, Any] | None = None
    if failed:
        m = _EXIT_RE.match(output) or (_EXIT_RE.match(tur) if isinstance(tur, str) else None)
        if m:
            ev["exit_code"] = int(m.group(1))
    elif isinstance(tur, dict):
        if name == "Bash" or ("stdout" in tur and "stderr" in tur):
            ev.update(stdout=tur.get("stdout") or "", stderr=tur.get("stderr") or "",
                      exit_code=None if tur.get("interrupted") else 0)
        elif name in EDIT_TOOLS or "structuredPatch" in tur:
            derived = _edit(cap, st, mapper, rec, agent, call_id, name, inp, tur)
        elif isinstance(tur.get("file"), dict) and tur.get("type") in ("text", None):
            derived = _read(cap, mapper, rec, agent, call_id, tur["file"])
            if derived is not None:
                ev["stdout"] = None  # the code.read right after holds the text, once
                _remember_read(st, agent, derived, tur["file"])
    elif name == "Read" and not failed:
        derived = _read_from_output(cap, mapper, rec, agent, call_id, inp, output)
        if derived is not None:
            ev["stdout"] = None
    cap.add(ev)
    if derived is not None:
        cap.add(derived)


def _read(cap: Capture, mapper: PathMapper, rec: dict[str, Any], agent: str | None, call_id: str | None,
          f: dict[str, Any]) -> dict[str, Any] | None:
    rel = mapper.to_repo(str(f.get("filePath") or ""))
    if rel is None:
        cap.ignored["read outside the repository"] += 1
        return None
    text = f.get("content") if isinstance(f.get("content"), str) else ""
    try:
        start = int(f.get("startLine") or 1)
    except (TypeError, ValueError):
        start = 1
    # numLines counts the empty string after a final newline; the text itself is the truth.
    n = count_lines(text)
    ev = _base(rec, agent, E.CODE_READ)
    ev.update(file=rel, range=[start, start + n - 1], text=text, call_id=call_id)
    return ev


def _read_from_output(cap: Capture, mapper: PathMapper, rec: dict[str, Any], agent: str | None, call_id: str,
                      inp: dict[str, Any], output: str) -> dict[str, Any] | None:
    """Older transcripts have no toolUseResult: strip the `cat -n` prefixes ourselves."""
    rel = mapper.to_repo(str(inp.get("file_path") or ""))
    if rel is None:
        return None
    nums: list[int] = []
    body: list[str] = []
    for line in output.split("\n"):
        m = _CAT_N_RE.match(line)
        if not m:
            continue
        nums.append(int(m.group(1)))
        body.append(m.group(2))
    if not nums:
        return None
    limit = inp.get("limit")
    if len(body) > 1 and body[-1] == "" and not (isinstance(limit, int) and len(body) >= limit):
        # the read reached the end of the file, and `cat -n` numbered the empty string after its
        # final newline (toolUseResult's numLines counts it too; its text does not)
        nums.pop()
        body.pop()
    ev = _base(rec, agent, E.CODE_READ)
    ev.update(file=rel, range=[nums[0], nums[-1]], text=join_lines(body), call_id=call_id)
    return ev


def _edit(cap: Capture, st: _State, mapper: PathMapper, rec: dict[str, Any], agent: str | None, call_id: str,
          name: str, inp: dict[str, Any], tur: dict[str, Any]) -> dict[str, Any] | None:
    path = tur.get("filePath") or inp.get("file_path") or inp.get("notebook_path") or ""
    rel = mapper.to_repo(str(path))
    if rel is None:
        cap.drop(mapper.drop_reason(str(path)))  # counted in the ingest summary
        return None
    ev = _base(rec, agent, E.CODE_EDIT)
    ev.update(file=rel, tool=name, call_id=call_id)
    hunks = tur.get("structuredPatch") if isinstance(tur.get("structuredPatch"), list) else []
    original = tur.get("originalFile")
    if original is None:
        original = tur.get("originalFileContents")
    content = tur.get("content") if isinstance(tur.get("content"), str) else None
    exact = isinstance(original, str)  # the file before is the tool's own word, not our reconstruction
    if name == "Write" and tur.get("type") != "create" and content is not None and (original is None or not hunks):
        original, hunks = _write_base(st, agent, rel, content, original, hunks)
    if tur.get("type") == "create" or (name == "Write" and original is None and content is not None):
        content = content or ""
        lines = split_lines(content)
        st.files[(agent, rel)] = content
        ev.update(op="create", before_range=[1, 0], after_range=[1, len(lines)], before_text="",
                  after_text=join_lines(lines), file_before_sha=None, file_after_sha=E.git_blob_sha(content))
        return _hash_texts(ev)
    if not hunks:
        if name == "NotebookEdit":
            return _notebook_edit(cap, ev, inp, tur)
        cap.ignored["edit that changed nothing"] += 1
        return None
    tagged = tag_hunks(hunks)
    changes = changes_from_hunks(hunks, tagged)
    if not changes:
        cap.ignored["edit that changed nothing"] += 1
        return None
    # The files' lines serve a Write's context and the ranges of several changes; for the rest,
    # the file after is made as text (`apply_hunks_text`).
    by_line = name == "Write" or len(changes) > 1
    old_lines = split_lines(original) if isinstance(original, str) and by_line else None
    new_lines: list[str] | None = None
    after_file: str | None = None
    if content is not None and tur.get("type") == "update":
        after_file = content
        new_lines = split_lines(after_file) if by_line else None
    elif old_lines is not None:
        new_lines = apply_hunks(old_lines, hunks, tagged)
        if new_lines is not None:
            trailing = original.endswith("\n") if original else True
            after_file = "\n".join(new_lines) + ("\n" if trailing and new_lines else "")
    elif isinstance(original, str):
        after_file = apply_hunks_text(original, hunks, tagged)
    ev.update(op="update", **edit_ranges(changes, old_lines, new_lines),
              file_before_sha=E.git_blob_sha(original) if exact and isinstance(original, str) else None,
              file_after_sha=E.git_blob_sha(after_file) if after_file is not None else None)
    # What the tool held besides the lines it changed: a Write, the whole file; an Edit, its
    # patch's context (the index keeps those lines as carried, not as written).
    ev.update(whole_file_context(new_lines) if name == "Write" and new_lines is not None
              else context_fields(hunk_extents(hunks, tagged)))
    if after_file is not None:
        st.files[(agent, rel)] = after_file
    else:
        st.files.pop((agent, rel), None)
    if tur.get("userModified"):
        ev["user_modified"] = True
    return _hash_texts(ev)


def _write_base(st: _State, agent: str | None, rel: str, content: str, original: Any,
                hunks: list[Any]) -> tuple[str | None, list[Any]]:
    """The file a Write replaced, and the hunks that changed it, when its result lacks one of them.

    Some results keep the patch but not `originalFile` (trimmed or older transcripts): the patch
    undone on the new content gives the file before. A result with neither is diffed against
    what this session last knew of the file (its earlier edits and whole reads). Without any of
    these the Write stays a creation: every line of it counts as written, as nothing says which
    lines it kept."""
    new = split_lines(content)
    if original is None and hunks:
        back = reverse_hunks(hunks)
        old = apply_hunks(new, back) if back is not None else None
        return (join_lines(old), hunks) if old is not None else (None, hunks)
    if original is None:
        original = st.files.get((agent, rel))
    if not isinstance(original, str):
        return None, hunks
    return original, diff_hunks(split_lines(original), new)


def _remember_read(st: _State, agent: str | None, ev: dict[str, Any], f: dict[str, Any]) -> None:
    """A read of a whole file is what the session knew of it (`_State.files`)."""
    total, start = f.get("totalLines"), ev["range"][0]
    if isinstance(total, int) and start == 1 and ev["range"][1] >= total - 1:
        st.files[(ev.get("agent"), ev["file"])] = ev["text"]


def _notebook_edit(cap: Capture, ev: dict[str, Any], inp: dict[str, Any], tur: dict[str, Any]) -> dict[str, Any] | None:
    """A notebook cell's edit: the cell's changed lines, from the first to the last that differ
    from its source before (`old_source`, when the result has it; else the whole new cell).
    Its place in the notebook's JSON is not known: no ranges."""
    src = inp.get("new_source") if isinstance(inp.get("new_source"), str) else ""
    if isinstance(tur.get("new_source"), str):
        src = tur["new_source"]
    old = tur.get("old_source") if isinstance(tur.get("old_source"), str) else None
    before, after = ([], split_lines(src)) if old is None else _changed_middle(split_lines(old), split_lines(src))
    if old is not None and not before and not after:
        cap.ignored["edit that changed nothing"] += 1
        return None
    ev.update(op="update", before_range=None, after_range=None, before_text=join_lines(before),
              after_text=join_lines(after), file_before_sha=None, file_after_sha=None)
    return _hash_texts(ev)


def _changed_middle(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """`old` and `new` without the lines they start and end with alike."""
    head, tail = common_ends(old, new)
    return old[head:len(old) - tail], new[head:len(new) - tail]


def _hash_texts(ev: dict[str, Any]) -> dict[str, Any]:
    ev["before_sha"] = E.sha256_text(ev.get("before_text") or "")
    ev["after_sha"] = E.sha256_text(ev.get("after_text") or "")
    return ev
