"""Gemini CLI sessions, and the exports people commit of them.

Formats read (google-gemini/gemini-cli, packages/core/src/services/chatRecording*.ts):

- the chat recording, `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl` (current): a
  metadata line `{sessionId, projectHash, startTime, kind}`, then one line per message write. A
  message is written again, whole, each time it grows (its tool calls finish, its tokens arrive),
  so a later line with the same `id` replaces an earlier one; `{"$set": …}` updates the metadata
  (with `messages`: the history rebuilt, a continuation marker) and `{"$rewindTo": id}` marks a rewind (the conversation restarts before that message; the
  files the dropped turns changed stay changed, so their edits are kept). A subagent's file is
  `chats/<parent session>/<id>.jsonl` with `kind: "subagent"`;
- the same record as one JSON document, `session-….json` (before the JSONL change);
- `/chat share FILE.json` and `/chat save TAG` (`checkpoint-TAG.json`): the model's history as
  `Content[]` (`{role, parts: [text | functionCall | functionResponse]}`), or `{history: [...]}`;
- `/chat share FILE.md`: the same history as markdown (`## USER 🧑‍💻`, `**Tool Command**` and
  `**Tool Response**` blocks holding the JSON of each call and response).

Edits: a successful `replace` / `write_file` call of the recording keeps, in `resultDisplay`, the
whole file before and after (`originalContent`, `newContent`): the ranges are a line diff of the
two, exact. Failed, cancelled or rejected calls are not edits. The exports keep neither times nor
file text: an edit there is placed only on a text of its file this session showed whole (a
`write_file` it made, a whole-file read); elsewhere it is recorded with its old and new strings
and no line ranges, and the capture's `unkept` says so (`engram show`, the ingest summary).

The recording names no working directory, only its project: the directory is read from the
project folder's `.project_root` (newer Gemini CLI), else it is the work tree of this repository
whose SHA-256 is the `projectHash` (older), else it is inferred from a call that names one file
both by its absolute and its relative path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Final, Iterable

import orjson

from engram.adapters.base import (
    JSON_DEPTH,
    Capture,
    PathMapper,
    SourceSpan,
    nested_too_deep,
    read_source,
)
from engram.adapters.unified import edit_from_texts, join_lines, split_lines
from engram.tape import events as E
from engram.words import whole_text

log = logging.getLogger(__name__)

HARNESS: Final = "gemini-cli"
EDIT_TOOLS: Final = frozenset({"replace", "write_file", "edit", "smart_edit", "write_new_file"})
READ_TOOLS: Final = frozenset({"read_file"})
# A call's status once it is over (scheduler/types.ts); any other is a call still running.
DONE: Final = frozenset({"success", "error", "cancelled"})
MESSAGE_TYPES: Final = frozenset({"user", "gemini", "info", "error", "warning"})
_SHOWING_RE: Final = re.compile(r"Showing lines (\d+)-(\d+) of (\d+) total lines")
_CONTENT_MARK: Final = "--- FILE CONTENT (truncated) ---\n"
_REFERENCED_RE: Final = re.compile(r"^\s*Content from @(.+?):\s*$")
_WORKING_DIR_RE: Final = re.compile(r"I'm currently working in the directory: (\S[^\n]*)")
_MD_HEAD_RE: Final = re.compile(r"^(?:## (USER|MODEL) \S+|\S+ ## (USER|MODEL))[ \t]*$", re.M)
_MD_BLOCK_RE: Final = re.compile(r"\*\*Tool (Command|Response)\*\*:\n```json\n(.*?)\n```", re.S)
UNKEPT_TIMES: Final = "times (the export keeps none)"
UNKEPT_RANGES: Final = "line ranges of edits on files the session never showed whole (the export keeps no file text)"


def sniff(head: bytes) -> bool:
    """Whether the start of a file is one of the Gemini CLI formats this adapter reads."""
    text = head[:65536].decode("utf-8", "replace")
    start = text.lstrip()[:1]
    if start == "{":
        return bool(re.search(r'"sessionId"\s*:', text) and re.search(r'"projectHash"\s*:', text)) or \
            bool(re.match(r'\{\s*"history"\s*:\s*\[\s*\{\s*"role"', text.lstrip()))
    if start == "[":
        return bool(re.match(r'\[\s*\{\s*"role"\s*:\s*"(?:user|model)"\s*,\s*"parts"', text.lstrip()))
    return bool(_MD_HEAD_RE.match(text.lstrip())) and "## MODEL" in text


@dataclass
class State:
    """What the session knew while it was read: its calls, and its last whole text of each file."""

    files: dict[str, str] = field(default_factory=dict)  # repository path -> the file as this session last saw it
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # call id -> (name, args)
    done: set[str] = field(default_factory=set)  # ids of calls already turned into events
    said: dict[str, set[str]] = field(default_factory=dict)  # message id -> the texts already recorded of it


def parse_gemini(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
                 max_line_bytes: int) -> Capture:
    src = sources[0]
    cap = Capture(HARNESS, "", sources)
    data = src.path.read_bytes()
    src.end = len(data)
    whole = _whole_json(data)
    if whole is _TOO_DEEP:  # (complete or not, no reader takes it: read as JSON lines, it was a "truncated last line")
        cap.skipped[f"JSON nested deeper than {JSON_DEPTH} levels: nothing captured"] += 1
        src.end = 0
        return cap
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
        _recording(cap, mapper_for, [(0, whole)], src.path)
    elif isinstance(whole, (dict, list)):
        history = whole.get("history") if isinstance(whole, dict) else whole
        if not isinstance(history, list):
            cap.skipped["JSON file of no Gemini CLI format known here (no messages, no history)"] += 1
            src.end = 0
            return cap
        _history(cap, mapper_for, history, src.path, "json")
    elif data.lstrip()[:1] in (b"{", b"[") and b"\n" in data.strip() and data.lstrip()[1:2].isspace():
        cap.skipped["truncated or malformed JSON (a Gemini CLI session or export cut short): "
                    "nothing captured; ingest it again once it is complete"] += 1
        src.end = 0
    elif data.lstrip()[:1] == b"{":
        lines = read_source(src, max_line_bytes=max_line_bytes, skipped=cap.skipped)
        _recording(cap, mapper_for, [(line.offset, line.record) for line in lines if line.record is not None],
                   src.path)
    else:
        _history(cap, mapper_for, markdown_history(data.decode("utf-8", "replace")), src.path, "md")
    return cap


_TOO_DEEP: Final = object()


def _whole_json(data: bytes) -> Any:
    """The file as one JSON document, None when it is not one (a JSONL file, markdown, cut JSON),
    `_TOO_DEEP` when it is nested deeper than orjson reads."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return _TOO_DEEP if nested_too_deep(exc) else None


# ---------------------------------------------------------------- the chat recording


def _recording(cap: Capture, mapper_for: Callable[[str | None], PathMapper], records: list[tuple[int, Any]],
               path: Path) -> None:
    meta: dict[str, Any] = {}
    messages: list[tuple[int, dict[str, Any]]] = []
    for offset, rec in records:
        if not isinstance(rec, dict):
            cap.skipped["record that is not a JSON object"] += 1
        elif "$rewindTo" in rec:
            cap.ignored["rewind marker (the dropped turns' edits stay: the files kept them)"] += 1
        elif isinstance(rec.get("$set"), dict):
            meta.update({k: v for k, v in rec["$set"].items() if k != "messages"})
            if isinstance(rec["$set"].get("messages"), list):  # the history rebuilt (a compression, a checkpoint)
                messages.append((offset, {"type": "$compact", "timestamp": rec["$set"].get("lastUpdated")}))
                messages += [(offset, m) for m in rec["$set"]["messages"] if isinstance(m, dict)]
        elif "sessionId" in rec and "projectHash" in rec:
            meta.update({k: v for k, v in rec.items() if k != "messages"})
            messages += [(offset, m) for m in rec.get("messages") or [] if isinstance(m, dict)]
        elif isinstance(rec.get("id"), str) and rec.get("type") in MESSAGE_TYPES:
            messages.append((offset, rec))
        else:
            cap.skipped[f"unknown Gemini CLI record (type {rec.get('type')!r})"] += 1
    if not meta.get("sessionId"):
        cap.skipped["Gemini CLI session without its metadata (sessionId, projectHash): an unknown version"] += 1
    cap.session_id = str(meta.get("sessionId") or _content_id(path, messages))
    base = mapper_for(None)
    cwd = project_root(path, meta, base) or _cwd_from_calls(m for _, m in messages)
    mapper = mapper_for(cwd)
    cap.meta = {"harness_version": None, "cwd": cwd, "git_branch": None, "git_head": None, "model": None,
                "started": meta.get("startTime"), "project_hash": meta.get("projectHash")}
    if meta.get("kind") == "subagent":
        cap.meta.update(subagent="subagent", parent_session=path.parent.name)
    st = State()
    for offset, msg in messages:
        cap.cursor = (0, offset)
        _message(cap, st, mapper, msg)


def project_root(path: Path, meta: dict[str, Any], mapper: PathMapper) -> str | None:
    """The project directory a recording belongs to: its project folder's `.project_root`, or the
    work tree of this repository whose SHA-256 is the recorded `projectHash`."""
    for folder in (path.parent.parent, path.parent.parent.parent):
        marker = folder / ".project_root"
        try:
            if marker.is_file() and marker.stat().st_size < 4096:
                return marker.read_text("utf-8").strip() or None
        except OSError:
            continue
    want = meta.get("projectHash")
    if isinstance(want, str):
        for tree in (PurePosixPath(str(mapper.repo_root)), *mapper.trees):
            if hashlib.sha256(str(tree).encode()).hexdigest() == want:
                return str(tree)
    return None


def _cwd_from_calls(messages: Iterable[dict[str, Any]]) -> str | None:
    """The directory a call's relative `file_path` was taken from, where its display names the
    same file by its absolute path; else the one the session's setup message states."""
    for msg in messages:
        for tc in msg.get("toolCalls") or []:
            if not isinstance(tc, dict):
                continue
            rel = (tc.get("args") or {}).get("file_path") if isinstance(tc.get("args"), dict) else None
            rd = tc.get("resultDisplay")
            full = rd.get("filePath") if isinstance(rd, dict) else None
            if isinstance(rel, str) and isinstance(full, str) and rel and not rel.startswith("/") \
                    and full.endswith("/" + rel.lstrip("./")):
                return full[: -len(rel.lstrip("./")) - 1] or "/"
    return None


def _message(cap: Capture, st: State, mapper: PathMapper, msg: dict[str, Any]) -> None:
    typ = msg.get("type")
    ts = msg.get("timestamp")
    mid = str(msg.get("id") or "")
    said = st.said.setdefault(mid, set())
    if typ == "user":
        text = parts_text(msg.get("content"))
        if text.strip() and "text" not in said:
            said.add("text")
            cap.add({"kind": E.MSG_IN, "ts": ts, "id": mid, "text": text})
            _referenced(cap, st, mapper, msg.get("content"), {"ts": ts, "id": mid})
    elif typ == "gemini":
        if cap.meta.get("model") is None and isinstance(msg.get("model"), str):
            cap.meta["model"] = msg["model"]
        for thought in msg.get("thoughts") or []:
            text = _thought_text(thought)
            if text and ("t:" + text) not in said:
                said.add("t:" + text)
                cap.add({"kind": E.MSG_OUT, "ts": thought.get("timestamp") or ts, "id": mid, "text": text,
                         "block": "thinking"})
        text = parts_text(msg.get("content"))
        if text.strip() and ("o:" + text) not in said:
            said.add("o:" + text)
            cap.add({"kind": E.MSG_OUT, "ts": ts, "id": mid, "text": text, "block": "text"})
        for tc in msg.get("toolCalls") or []:
            if isinstance(tc, dict):
                _recorded_call(cap, st, mapper, tc, ts)
    elif typ == "$compact":
        cap.add({"kind": E.COMPACT, "ts": ts, "trigger": "history rewritten", "pre_tokens": None, "message": None})
    else:
        cap.ignored[f"{typ} message (the CLI's own notice)"] += 1


def _referenced(cap: Capture, st: State, mapper: PathMapper, content: Any, base: dict[str, Any]) -> None:
    """The files a prompt referenced (`@path`), whose whole text Gemini CLI put in the message after
    a `Content from @path:` part: reads of those files, by the session."""
    parts = content if isinstance(content, list) else []
    for head, body in zip(parts, parts[1:]):
        m = _REFERENCED_RE.match(head.get("text") or "") if isinstance(head, dict) else None
        text = body.get("text") if isinstance(body, dict) else None
        rel = mapper.to_repo(m.group(1)) if m else None
        lines = split_lines(text) if isinstance(text, str) else []
        if rel is None or not lines:
            continue
        st.files[rel] = join_lines(lines)
        cap.add({"kind": E.CODE_READ, **base, "file": rel, "range": [1, len(lines)], "text": join_lines(lines)})


def _thought_text(thought: Any) -> str:
    if not isinstance(thought, dict):
        return ""
    subject, desc = thought.get("subject") or "", thought.get("description") or ""
    return f"{subject}\n{desc}".strip() if isinstance(subject, str) and isinstance(desc, str) else ""


def _recorded_call(cap: Capture, st: State, mapper: PathMapper, tc: dict[str, Any], ts: Any) -> None:
    call_id = str(tc.get("id") or "")
    status = tc.get("status")
    if call_id in st.done or status not in DONE:
        return  # recorded once it is over; a call still running is written again when it ends
    st.done.add(call_id)
    name = str(tc.get("name") or "")
    args = tc.get("args") if isinstance(tc.get("args"), dict) else {}
    base = {"ts": tc.get("timestamp") or ts, "call_id": call_id}
    if isinstance(tc.get("agentId"), str):
        base["agent"] = tc["agentId"]
    output, error = response_text(tc.get("result"))
    call_outcome(cap, st, mapper, base, name, args, ok=status == "success" and not error, output=output or error,
                 display=tc.get("resultDisplay"))


def call_outcome(cap: Capture, st: State, mapper: PathMapper, base: dict[str, Any], name: str, args: dict[str, Any],
                 *, ok: bool, output: str, display: Any) -> None:
    """A finished call's tool.call and tool.result, and the code.edit or code.read it made.

    Shared with Qwen Code, whose tools and displays are Gemini CLI's."""
    cap.add({"kind": E.TOOL_CALL, **base, "name": name, "input": args})
    derived: dict[str, Any] | None = None
    result = {"kind": E.TOOL_RESULT, **base, "name": name, "is_error": not ok, "exit_code": None,
              "stdout": output, "stderr": ""}
    if not ok:
        if name in EDIT_TOOLS or _is_file_diff(display):
            cap.ignored["failed, cancelled or rejected edit (not an edit)"] += 1
    elif _is_file_diff(display) or name in EDIT_TOOLS:
        derived = _edit(cap, st, mapper, base, name, args, display)
    elif name in READ_TOOLS:
        derived = _read(cap, st, mapper, base, args, output)
        if derived is not None:
            result["stdout"] = None  # the code.read right after holds the text, once
    cap.add(result)
    if derived is not None:
        cap.add(derived)


def _is_file_diff(display: Any) -> bool:
    return isinstance(display, dict) and "fileDiff" in display


def _edit(cap: Capture, st: State, mapper: PathMapper, base: dict[str, Any], name: str, args: dict[str, Any],
          display: Any) -> dict[str, Any] | None:
    rd = display if isinstance(display, dict) else {}
    path = str(rd.get("filePath") or args.get("file_path") or args.get("absolute_path") or args.get("path") or "")
    rel = mapper.to_repo(path)
    if rel is None:
        cap.drop(mapper.drop_reason(path))
        return None
    fields = _edit_fields(st, rel, name, args, rd)
    if fields is None:
        cap.ignored["edit that changed nothing"] += 1
        return None
    if fields.get("after_range") is None:
        cap.meta.setdefault("unkept", [])
        if UNKEPT_RANGES not in cap.meta["unkept"]:
            cap.meta["unkept"].append(UNKEPT_RANGES)
    return {"kind": E.CODE_EDIT, **base, "file": rel, "tool": name, **fields}


def _edit_fields(st: State, rel: str, name: str, args: dict[str, Any], rd: dict[str, Any]) -> dict[str, Any] | None:
    """The code.edit's fields: from the whole file before and after when the display has them
    (exact), else from the call's arguments on the session's own whole text of the file, else
    the arguments' strings alone, without ranges."""
    new = rd.get("newContent")
    if isinstance(new, str):
        old = rd.get("originalContent")
        before = None if rd.get("isNewFile") or not isinstance(old, str) else old
        if before is None and not rd.get("isNewFile") and rel in st.files:
            before = st.files[rel]
        st.files[rel] = new
        return edit_from_texts(before, new)
    content = args.get("content")
    if name in ("write_file", "write_new_file") and isinstance(content, str):
        before = st.files.get(rel)
        st.files[rel] = content
        return edit_from_texts(before, content)
    old_s, new_s = args.get("old_string"), args.get("new_string")
    if not isinstance(old_s, str) or not isinstance(new_s, str):
        return None
    known = st.files.get(rel)
    if known is not None and old_s and known.count(old_s) >= 1:
        after = known.replace(old_s, new_s) if args.get("allow_multiple") or args.get("replace_all") \
            else known.replace(old_s, new_s, 1)
        st.files[rel] = after
        return edit_from_texts(known, after)
    if old_s == "" and known is None:
        st.files[rel] = new_s
        return edit_from_texts(None, new_s)
    st.files.pop(rel, None)
    if old_s == new_s:
        return None
    before_text, after_text = join_lines(split_lines(old_s)), join_lines(split_lines(new_s))
    return {"op": "update", "before_range": None, "after_range": None, "before_text": before_text,
            "after_text": after_text, "file_before_sha": None, "file_after_sha": None,
            "before_sha": E.sha256_text(before_text), "after_sha": E.sha256_text(after_text)}


def _read(cap: Capture, st: State, mapper: PathMapper, base: dict[str, Any], args: dict[str, Any],
          output: str) -> dict[str, Any] | None:
    path = str(args.get("file_path") or args.get("absolute_path") or args.get("path") or "")
    rel = mapper.to_repo(path)
    if rel is None or not output or "<tool_output_masked>" in output:
        return None
    m = _SHOWING_RE.search(output)
    if m:
        text = output.split(_CONTENT_MARK, 1)[1] if _CONTENT_MARK in output else ""
        start = int(m.group(1))
    elif output.startswith("\nIMPORTANT:") or output.startswith("IMPORTANT:"):
        return None  # a truncation notice of a form not known here: no sure range
    else:
        text, start = output, 1
    lines = split_lines(text)
    if not lines:
        return None
    if start == 1 and not m:
        st.files[rel] = text if text.endswith("\n") else text + "\n"
    return {"kind": E.CODE_READ, **base, "file": rel, "range": [start, start + len(lines) - 1],
            "text": join_lines(lines)}


# ---------------------------------------------------------------- exports: Content[] and markdown


def _history(cap: Capture, mapper_for: Callable[[str | None], PathMapper], history: list[Any], path: Path,
             form: str) -> None:
    """`/chat share` (JSON or markdown) and `/chat save` checkpoints: the model's history alone."""
    contents = [c for c in history if isinstance(c, dict)]
    cap.session_id = "gemini-" + ("share-" if form == "md" else "history-") + _content_id(path, contents)
    texts = [parts_text(c.get("parts")) for c in contents[:3]]
    m = next((m for t in texts if (m := _WORKING_DIR_RE.search(t))), None)
    cwd = m.group(1).strip().rstrip(".") if m else None
    mapper = mapper_for(cwd)
    cap.meta = {"harness_version": None, "cwd": cwd, "git_branch": None, "git_head": None, "model": None,
                "started": None, "export": "chat share (markdown)" if form == "md" else "chat share / checkpoint (JSON)",
                "unkept": [UNKEPT_TIMES]}
    st = State()
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    for i, content in enumerate(contents):
        cap.cursor = (0, i)
        role = content.get("role")
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str) and part["text"].strip():
                kind = E.MSG_IN if role == "user" else E.MSG_OUT
                ev = {"kind": kind, "ts": None, "text": part["text"]}
                if kind == E.MSG_OUT:
                    ev["block"] = "thinking" if part.get("thought") else "text"
                cap.add(ev)
            elif isinstance(part.get("functionCall"), dict):
                fc = part["functionCall"]
                key = str(fc.get("id") or fc.get("name") or "")
                pending[key] = (str(fc.get("name") or ""), fc.get("args") if isinstance(fc.get("args"), dict) else {})
            elif isinstance(part.get("functionResponse"), dict):
                _history_response(cap, st, mapper, pending, part["functionResponse"])
    for key, (name, args) in pending.items():
        cap.add({"kind": E.TOOL_CALL, "ts": None, "call_id": key, "name": name, "input": args})
        if name in EDIT_TOOLS:
            cap.ignored["edit call without its response (not counted as an edit)"] += 1


def _history_response(cap: Capture, st: State, mapper: PathMapper,
                      pending: dict[str, tuple[str, dict[str, Any]]], fr: dict[str, Any]) -> None:
    key = str(fr.get("id") or fr.get("name") or "")
    if key not in pending:  # an older export without ids: the oldest call of that name
        key = next((k for k, (n, _) in pending.items() if n == fr.get("name")), key)
    name, args = pending.pop(key, (str(fr.get("name") or ""), {}))
    output, error = response_text([{"functionResponse": fr}])
    ok = not error and not output.startswith(("Error", "Failed"))
    call_outcome(cap, st, mapper, {"ts": None, "call_id": key}, name, args, ok=ok, output=output or error, display=None)


def markdown_history(text: str) -> list[dict[str, Any]]:
    """`/chat share FILE.md` read back into the history it was written from: each `## USER` or
    `## MODEL` section's text, and its Tool Command / Tool Response blocks as function parts."""
    heads = list(_MD_HEAD_RE.finditer(text))
    out: list[dict[str, Any]] = []
    for i, head in enumerate(heads):
        body = text[head.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        body = body.strip("\n").removesuffix("\n\n---").rstrip()
        role = "user" if (head.group(1) or head.group(2)) == "USER" else "model"
        parts: list[dict[str, Any]] = []
        at = 0
        for m in _MD_BLOCK_RE.finditer(body):
            if body[at:m.start()].strip():
                parts.append({"text": body[at:m.start()].strip("\n")})
            try:
                value = whole_text(json.loads(m.group(2)))
            except ValueError:
                value = None
            if isinstance(value, dict):
                parts.append({"functionCall" if m.group(1) == "Command" else "functionResponse": value})
            at = m.end()
        if body[at:].strip():
            parts.append({"text": body[at:].strip("\n")})
        out.append({"role": role, "parts": parts})
    return out


# ---------------------------------------------------------------- helpers


def parts_text(content: Any) -> str:
    """The text of a PartListUnion: a string, a part, or a list of them (non-text parts left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    return "".join(p if isinstance(p, str) else p.get("text", "") if isinstance(p, dict) and not p.get("thought")
                   and isinstance(p.get("text"), str) else "" for p in content)


def response_text(result: Any) -> tuple[str, str]:
    """(output, error) of a call's functionResponse parts."""
    outs: list[str] = []
    errs: list[str] = []
    for part in result if isinstance(result, list) else [result]:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        resp = fr.get("response") if isinstance(fr, dict) else None
        if not isinstance(resp, dict):
            continue
        if resp.get("error"):
            errs.append(str(resp["error"]))
        out = resp.get("output", resp.get("content"))
        if isinstance(out, str):
            outs.append(out)
        elif out is not None:
            outs.append(json.dumps(out, sort_keys=True))
    return "\n".join(outs), "\n".join(errs)


def _content_id(path: Path, items: list[Any]) -> str:
    """An id for a session whose file names none: from its first records, so two copies of one
    export are one session."""
    h = hashlib.sha256()
    for item in items[:4]:
        h.update(orjson.dumps(item, option=orjson.OPT_SORT_KEYS, default=str))
    if not items:
        h.update(str(path).encode())
    return h.hexdigest()[:16]


def started(path: Path) -> str | None:
    """When the session began, as its capture's `started` will say (the recording's startTime)."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    m = re.search(rb'"startTime"\s*:\s*"([^"]+)"', head)
    return m.group(1).decode() if m else None
