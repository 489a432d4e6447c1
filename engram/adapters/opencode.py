"""OpenCode sessions (sst/opencode, packages/opencode/src/session/message-v2.ts).

Two forms are read:

- `opencode export [id]` (also what the Entire CLI keeps for OpenCode sessions): one JSON document
  `{info, messages: [{info, parts}]}`;
- the storage directory, `$XDG_DATA_HOME/opencode/storage/` (default `~/.local/share/opencode`):
  `session/<project>/<id>.json` is the session's info, `message/<id>/<msg>.json` its messages and
  `part/<msg>/<part>.json` their parts. The session file is the job's source; its messages and
  parts are read beside it.

A message's `info` holds its role, times (epoch milliseconds), model and, for the assistant, the
working directory (`path.cwd`). Parts are text, reasoning, tool calls (`{tool, callID, state:
{status, input, output, metadata, time}}`), step markers, file attachments, subtasks and
compaction markers. Edits come from completed `edit`, `write`, `multiedit` and `apply_patch`
calls: `apply_patch` (and newer `edit`) keep the whole file before and after
(`metadata.files[].before/after`, `metadata.filediff.before/after`), so their ranges are a line
diff of the two; an `edit` with only its unified diff (`metadata.diff`, whose lines OpenCode trims
of their common indentation) gives the ranges of its hunks; a `write` is diffed against the
session's last whole text of the file, else it is a creation. Errored calls are not edits. A
session another agent started (a `task` subagent) names its parent (`info.parentID`); a
`compaction` part, or an assistant message that is a summary, is a continuation marker.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Final

import orjson

from engram.adapters import opencode_db
from engram.adapters.base import Capture, PathMapper, SourceSpan
from engram.adapters.unified import (
    changes_from_hunks,
    context_fields,
    edit_from_texts,
    edit_ranges,
    hunk_extents,
    hunks_from_diff,
    join_lines,
    split_lines,
)
from engram.tape import events as E

log = logging.getLogger(__name__)

HARNESS: Final = "opencode"
EDIT_TOOLS: Final = frozenset({"edit", "write", "multiedit", "apply_patch", "patch"})
_NUMBERED_RE: Final = re.compile(r"^0*(\d+)(?::|\|) ?(.*)$")
_MAX_FILE_BYTES: Final = 64 << 20


def sniff(head: bytes) -> bool:
    """Whether the start of a file is an OpenCode export or a storage session file."""
    text = head[:65536].decode("utf-8", "replace").lstrip()
    if not text.startswith("{"):
        return False
    export = re.match(r'\{\s*"info"\s*:\s*\{', text) and re.search(r'"(?:projectID|sessionID)"\s*:', text)
    stored = re.search(r'"id"\s*:\s*"ses_', text) and re.search(r'"projectID"\s*:', text) and '"messages"' not in text
    return bool(export or stored)


def parse_opencode(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
                   max_line_bytes: int) -> Capture:
    src = sources[0]
    cap = Capture(HARNESS, src.path.stem, sources)
    if (stored := opencode_db.session_id_of(src)) is not None:
        return _from_store(cap, mapper_for, src, stored)
    data = src.path.read_bytes()
    src.end = len(data)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        doc = _message_lines(data)
    if doc is None:
        cap.skipped["truncated or malformed JSON (an OpenCode export or session file cut short): nothing "
                    "captured; ingest it again once it is complete"] += 1
        src.end = 0
        return cap
    if not isinstance(doc, dict):
        cap.skipped["JSON file of no OpenCode format known here"] += 1
        src.end = 0
        return cap
    if isinstance(doc.get("info"), dict) and isinstance(doc.get("messages"), list):
        info, messages = doc["info"], [m for m in doc["messages"] if isinstance(m, dict)]
    elif str(doc.get("id") or "").startswith("ses_"):
        info, messages = doc, stored_messages(src.path, str(doc["id"]), cap)
    else:
        cap.skipped["JSON file of no OpenCode format known here (neither an export nor a session file)"] += 1
        src.end = 0
        return cap
    _session(cap, mapper_for, info, messages)
    return cap


def _message_lines(data: bytes) -> dict[str, Any] | None:
    """A session kept as one message per line (`{info, parts}`, as the Entire CLI's early
    checkpoints kept OpenCode's), as an export: its info the first message's time. None unless
    every line is such a message (a file cut short is left for a later ingest)."""
    messages = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not (isinstance(msg, dict) and isinstance(msg.get("info"), dict) and isinstance(msg.get("parts"), list)):
            return None
        messages.append(msg)
    if not messages:
        return None
    return {"info": {"time": messages[0]["info"].get("time")}, "messages": messages}


def _from_store(cap: Capture, mapper_for: Callable[[str | None], PathMapper], src: SourceSpan,
                session_id: str) -> Capture:
    """A session of OpenCode's SQLite store (engram.adapters.opencode_db)."""
    cap.session_id = session_id
    try:
        found = opencode_db.load(src.path, session_id)
    except Exception as exc:  # noqa: BLE001 - apsw's errors: a locked or damaged store
        cap.skipped[f"OpenCode's store could not be read ({exc.__class__.__name__}); try again, or `opencode "
                    "export` the session and ingest the file"] += 1
        src.end = 0
        return cap
    if found is None:
        cap.skipped["a session no longer in OpenCode's store"] += 1
        src.end = 0
        return cap
    _session(cap, mapper_for, *found)
    return cap


def stored_messages(session_file: Path, session_id: str, cap: Capture) -> list[dict[str, Any]]:
    """A stored session's messages with their parts, read from the storage folders beside its
    `session/<project>/` folder, in id order (OpenCode's ids sort by time)."""
    storage = session_file.parent.parent.parent
    out: list[dict[str, Any]] = []
    for mf in sorted((storage / "message" / session_id).glob("*.json")):
        info = _load(mf, cap)
        if not isinstance(info, dict):
            continue
        parts = [p for pf in sorted((storage / "part" / str(info.get("id") or mf.stem)).glob("*.json"))
                 if isinstance(p := _load(pf, cap), dict)]
        out.append({"info": info, "parts": parts})
    if not out:
        cap.skipped["OpenCode session file without its message folder (storage/message/<id>/)"] += 1
    return out


def _load(path: Path, cap: Capture) -> Any:
    try:
        if path.is_symlink() or path.stat().st_size > _MAX_FILE_BYTES:
            cap.skipped["OpenCode storage file skipped (a symlink, or too large)"] += 1
            return None
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        cap.skipped["unreadable or malformed OpenCode storage file"] += 1
        return None


def iso(ms: Any) -> str | None:
    """An OpenCode time (epoch milliseconds) as the ISO 8601 text tapes use."""
    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _session(cap: Capture, mapper_for: Callable[[str | None], PathMapper], info: dict[str, Any],
             messages: list[dict[str, Any]]) -> None:
    cap.session_id = _session_id(info, messages) or cap.session_id
    cwd = info.get("directory") if isinstance(info.get("directory"), str) else None
    if cwd is None:
        cwd = next((m["info"]["path"]["cwd"] for m in messages if isinstance(m.get("info"), dict)
                    and isinstance(m["info"].get("path"), dict) and isinstance(m["info"]["path"].get("cwd"), str)), None)
    mapper = mapper_for(cwd)
    times = info.get("time") if isinstance(info.get("time"), dict) else {}
    cap.meta = {"harness_version": info.get("version"), "cwd": cwd, "git_branch": None, "git_head": None,
                "model": None, "started": iso(times.get("created")), "title": info.get("title")}
    if info.get("parentID"):
        cap.meta.update(subagent="task", parent_session=info["parentID"])
    files: dict[str, str] = {}
    for i, msg in enumerate(messages):
        cap.cursor = (0, i)
        minfo = msg.get("info") if isinstance(msg.get("info"), dict) else {}
        if cap.meta["model"] is None and isinstance(minfo.get("modelID"), str):
            cap.meta["model"] = minfo["modelID"]
        if minfo.get("role") == "assistant" and minfo.get("summary") is True:
            cap.add({"kind": E.COMPACT, "ts": iso((minfo.get("time") or {}).get("created")), "trigger": "summary",
                     "pre_tokens": None, "message": None})
        for part in msg.get("parts") or []:
            if isinstance(part, dict):
                _part(cap, mapper, files, minfo, part)


def _session_id(info: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """The session's id (`ses_…`); where a copy replaced it (the Entire CLI's redaction writes
    `REDACTED`), its messages' `sessionID`, else its slug and creation time: never one id shared
    by every redacted session."""
    ids = [info.get("id"), *((m.get("info") or {}).get("sessionID") for m in messages[:3] if isinstance(m, dict)),
           *(p.get("sessionID") for m in messages[:3] if isinstance(m, dict) for p in m.get("parts") or []
             if isinstance(p, dict))]
    found = next((i for i in ids if isinstance(i, str) and i.startswith("ses_")), None)
    if found:
        return found
    created = (info.get("time") or {}).get("created") if isinstance(info.get("time"), dict) else None
    return f"opencode-{info.get('slug') or 'session'}-{created}" if created else None


def _part(cap: Capture, mapper: PathMapper, files: dict[str, str], minfo: dict[str, Any], part: dict[str, Any]) -> None:
    typ = part.get("type")
    mtime = (minfo.get("time") or {}).get("created") if isinstance(minfo.get("time"), dict) else None
    ptime = (part.get("time") or {}).get("start") if isinstance(part.get("time"), dict) else None
    ts = iso(ptime or mtime)
    base = {"ts": ts, "id": part.get("id") or minfo.get("id")}
    if typ == "text" and isinstance(part.get("text"), str) and part["text"].strip():
        ev = {"kind": E.MSG_IN if minfo.get("role") == "user" else E.MSG_OUT, **base, "text": part["text"]}
        if ev["kind"] == E.MSG_OUT:
            ev["block"] = "text"
        if part.get("synthetic"):
            ev["injected"] = True
        cap.add(ev)
    elif typ == "reasoning" and isinstance(part.get("text"), str) and part["text"].strip():
        cap.add({"kind": E.MSG_OUT, **base, "text": part["text"], "block": "thinking"})
    elif typ == "tool":
        _tool(cap, mapper, files, base, part)
    elif typ == "compaction":
        cap.add({"kind": E.COMPACT, **base, "trigger": "auto" if part.get("auto") else "manual", "pre_tokens": None,
                 "message": None})
    else:
        cap.ignored[f"{typ} part"] += 1


def _tool(cap: Capture, mapper: PathMapper, files: dict[str, str], base: dict[str, Any], part: dict[str, Any]) -> None:
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    status = state.get("status")
    name = str(part.get("tool") or "")
    call_id = str(part.get("callID") or part.get("id") or "")
    if status not in ("completed", "error"):
        cap.ignored[f"tool call still {status or 'unknown'} when the session was saved"] += 1
        return
    inp = state.get("input") if isinstance(state.get("input"), dict) else {}
    times = state.get("time") if isinstance(state.get("time"), dict) else {}
    ev_base = {**base, "ts": iso(times.get("start")) or base["ts"], "call_id": call_id}
    cap.add({"kind": E.TOOL_CALL, **ev_base, "name": name, "input": inp})
    ok = status == "completed"
    output = state.get("output") if isinstance(state.get("output"), str) else str(state.get("error") or "")
    meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
    result = {"kind": E.TOOL_RESULT, **ev_base, "ts": iso(times.get("end")) or ev_base["ts"], "name": name,
              "is_error": not ok, "exit_code": meta.get("exit") if isinstance(meta.get("exit"), int) else None,
              "stdout": output, "stderr": ""}
    derived: list[dict[str, Any]] = []
    if not ok:
        if name in EDIT_TOOLS:
            cap.ignored["failed edit (not an edit)"] += 1
    elif name in EDIT_TOOLS:
        derived = _edits(cap, mapper, files, ev_base, name, inp, meta)
    elif name == "read":
        read = _read(mapper, files, ev_base, inp, output)
        if read is not None:
            result["stdout"] = None
            derived = [read]
    cap.add(result)
    for ev in derived:
        cap.add(ev)


def _edits(cap: Capture, mapper: PathMapper, files: dict[str, str], base: dict[str, Any], name: str,
           inp: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The code.edits of one completed edit call: one per file it changed."""
    out: list[dict[str, Any]] = []
    if isinstance(meta.get("files"), list):  # apply_patch: every file, whole before and after
        for f in meta["files"]:
            if isinstance(f, dict):
                out += _one_edit(cap, mapper, files, base, name, f.get("movePath") or f.get("filePath"),
                                 f.get("before"), f.get("after"), f.get("diff") or f.get("patch"), f.get("type"))
        return out
    fd = meta.get("filediff") if isinstance(meta.get("filediff"), dict) else {}
    path = inp.get("filePath") or fd.get("file")
    if name == "write":
        return _one_edit(cap, mapper, files, base, name, path, None, inp.get("content"), None,
                         "update" if meta.get("exists") else "add")
    if name == "multiedit" and isinstance(meta.get("results"), list):
        for r in meta["results"]:
            r_fd = r.get("filediff") if isinstance(r, dict) and isinstance(r.get("filediff"), dict) else {}
            out += _one_edit(cap, mapper, files, base, name, path, r_fd.get("before"), r_fd.get("after"),
                             r.get("diff") if isinstance(r, dict) else None, "update")
        return out
    return _one_edit(cap, mapper, files, base, name, path, fd.get("before"), fd.get("after"),
                     meta.get("diff") or fd.get("patch"), "update")


def _one_edit(cap: Capture, mapper: PathMapper, files: dict[str, str], base: dict[str, Any], name: str, path: Any,
              before: Any, after: Any, diff: Any, typ: Any) -> list[dict[str, Any]]:
    path = str(path or "")
    rel = mapper.to_repo(path)
    if rel is None:
        cap.drop(mapper.drop_reason(path))
        return []
    if typ == "delete":
        files.pop(rel, None)
        fields = {"op": "delete", "before_range": [1, len(split_lines(before))] if isinstance(before, str) else None,
                  "after_range": [1, 0], "before_text": before if isinstance(before, str) else "", "after_text": "",
                  "file_before_sha": E.git_blob_sha(before) if isinstance(before, str) else None, "file_after_sha": None}
        fields["before_sha"] = E.sha256_text(fields["before_text"])
        fields["after_sha"] = E.sha256_text("")
    elif isinstance(after, str):
        if not isinstance(before, str) or typ == "add":
            before = None if typ == "add" else files.get(rel)
        files[rel] = after
        fields = edit_from_texts(before, after)
    elif isinstance(diff, str) and "@@" in diff:
        files.pop(rel, None)
        fields = edit_from_diff(diff)
        if fields is not None and typ == "add":
            fields["op"] = "create"
    else:
        cap.drop("an edit whose call kept neither the file's text nor its diff")
        return []
    if fields is None:
        cap.ignored["edit that changed nothing"] += 1
        return []
    return [{"kind": E.CODE_EDIT, **base, "file": rel, "tool": name, **fields}]


def edit_from_diff(diff: str) -> dict[str, Any] | None:
    """An edit known only by its unified diff: the hunks' line numbers are the file's; their
    lines may have lost a common indentation (OpenCode trims it), so texts can differ in it."""
    hunks = hunks_from_diff(diff)
    changes = changes_from_hunks(hunks)
    if not changes:
        return None
    out = {"op": "update", **edit_ranges(changes), "file_before_sha": None, "file_after_sha": None,
           **context_fields(hunk_extents(hunks))}
    out["before_sha"] = E.sha256_text(out.get("before_text") or "")
    out["after_sha"] = E.sha256_text(out.get("after_text") or "")
    return out


def _read(mapper: PathMapper, files: dict[str, str], base: dict[str, Any], inp: dict[str, Any],
          output: str) -> dict[str, Any] | None:
    """A read's lines from its numbered output (`N: text`, older `0000N| text`)."""
    path = str(inp.get("filePath") or "")
    rel = mapper.to_repo(path)
    if rel is None:
        return None
    body = output.split("<content>", 1)[1] if "<content>" in output else output.split("<file>", 1)[-1]
    nums: list[int] = []
    lines: list[str] = []
    for line in body.split("\n"):
        m = _NUMBERED_RE.match(line)
        if m is None:
            if nums:
                break
            continue
        nums.append(int(m.group(1)))
        lines.append(m.group(2))
    if not nums or nums != list(range(nums[0], nums[0] + len(nums))):
        return None
    whole = re.search(r"\(End of file - total (\d+) lines\)", output)
    if nums[0] == 1 and whole and int(whole.group(1)) == nums[-1]:
        files[rel] = join_lines(lines)
    return {"kind": E.CODE_READ, **base, "file": rel, "range": [nums[0], nums[-1]], "text": join_lines(lines)}


def started(path: Path) -> str | None:
    """When the session began (its info's `time.created`), read from the file's start."""
    try:
        with path.open("rb") as f:
            head = f.read(8192).decode("utf-8", "replace")
    except OSError:
        return None
    m = re.search(r'"created"\s*:\s*(\d{10,})', head)
    return iso(int(m.group(1))) if m else None
