"""Cline and Roo Code tasks: a folder per task (`…/globalStorage/saoudrizwan.claude-dev/tasks/<id>/`,
Roo Code's `rooveterinaryinc.roo-cline`) holding `api_conversation_history.json` (the messages
sent to the model: text, thinking, tool uses, and each tool's result as the next user message's
`[tool for 'path'] Result:` text), `ui_messages.json` (what the panel showed, with times) and
`task_metadata.json`. Projects sometimes commit a task folder they exported.

One task is one session (`cline-<id>`; `roo-<id>`). Its working directory is the one the first
message's environment details name. What the tools did:

* `read_file`'s result is the file's text: a code.read of it, and this session's copy of the file;
* `replace_in_file` sends SEARCH/REPLACE blocks (`------- SEARCH` / `=======` / `+++++++ REPLACE`);
  when it succeeded its result holds the whole file as saved (`<final_file_content>`). Each block is
  placed in the file before the edit: this session's copy when the blocks turn it into the saved
  file, else that file with the blocks undone (their REPLACE text found in it, their SEARCH text put
  back). A block neither places is kept without ranges;
* `write_to_file` writes a whole file: a creation when the panel said `newFileCreated` (or the
  session never saw the file), else diffed against this session's copy;
* a result that says the edit failed (no saved file) is a failed edit, not counted.

Times come from `ui_messages.json` (each tool the panel showed, in order, matched to the tool uses).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

from engram.adapters.aider import _hashed, block_changes, locate
from engram.adapters.base import Capture, PathMapper, SourceSpan
from engram.adapters.unified import context_fields, edit_ranges, join_lines, split_lines
from engram.tape import events as E

HISTORY_FILE: Final = "api_conversation_history.json"
UI_FILE: Final = "ui_messages.json"
_RESULT = re.compile(r"^\[(\w+)(?: for '(.*?)')?\] Result:\n?", re.DOTALL)
_FINAL = re.compile(r'<final_file_content path="[^"]*">\n?(.*?)\n?</final_file_content>', re.DOTALL)
_CWD = re.compile(r"# Current Working Directory \((.+?)\)")
_BLOCK = re.compile(r"^(?:-{3,} SEARCH|<{3,} SEARCH)\s*\n(.*?)^={3,}\s*\n(.*?)^(?:\+{3,} REPLACE|>{3,} REPLACE)\s*$",
                    re.DOTALL | re.MULTILINE)
EDITS: Final = frozenset({"replace_in_file", "write_to_file", "apply_diff", "search_and_replace"})


def task_sources(path: Path) -> list[SourceSpan]:
    """A task's files: the conversation first, the panel's messages (for times) when there."""
    folder = path.parent
    out = [SourceSpan("main", path)]
    if (folder / UI_FILE).is_file():
        out.append(SourceSpan(UI_FILE, folder / UI_FILE))
    return out


def harness_of(path: Path) -> str:
    return "roo-code" if "roo-cline" in str(path).lower() else "cline"


def first_cwd(path: Path) -> str | None:
    """The working directory the task's first message names (discovery matches it to a repository)."""
    try:
        with path.open("rb") as f:
            head = f.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    m = _CWD.search(head)
    return m.group(1) if m else None


def parse_task(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
               max_line_bytes: int) -> Capture:
    main = sources[0]
    harness = harness_of(main.path)
    task = main.path.parent.name
    cap = Capture(harness, f"{'roo' if harness == 'roo-code' else 'cline'}-{task}", sources)
    messages = _load(main, cap, "conversation")
    ui = _load(sources[1], cap, "panel messages") if len(sources) > 1 else []
    if not isinstance(messages, list):
        cap.skipped[f"{HISTORY_FILE} is not a list of messages"] += 1
        return cap
    cwd = next((m.group(1) for msg in messages[:2] for text in _texts(msg) if (m := _CWD.search(text))), None)
    times = [x for x in ui if isinstance(x, dict)] if isinstance(ui, list) else []
    started = _iso(times[0].get("ts")) if times else _iso(int(task)) if task.isdigit() else None
    tools = [(_iso(x.get("ts")), _tool_kind(x)) for x in times if x.get("say") == "tool"]
    model = next((x["modelInfo"].get("modelId") for x in times if isinstance(x.get("modelInfo"), dict)), None)
    cap.meta = {"harness_version": None, "cwd": cwd, "git_branch": None, "git_head": None, "model": model,
                "started": started}
    if not times:
        cap.meta["unkept"] = [f"message times ({UI_FILE} missing)"]
    _Task(cap, mapper_for(cwd), tools).read(messages)
    return cap


def _load(src: SourceSpan, cap: Capture, what: str) -> Any:
    try:
        data = src.path.read_bytes()
        src.end = len(data)
        return orjson.loads(data)
    except (OSError, orjson.JSONDecodeError) as exc:
        cap.skipped[f"unreadable {what} ({exc.__class__.__name__}): the task is still being written, or damaged"] += 1
        return None


def _iso(ms: Any) -> str | None:
    import datetime as dt

    if not isinstance(ms, (int, float)):
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tool_kind(ui: dict[str, Any]) -> str:
    try:
        return str(orjson.loads(ui.get("text") or "{}").get("tool") or "")
    except orjson.JSONDecodeError:
        return ""


def _texts(msg: Any) -> list[str]:
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return [content]
    return [b.get("text") or "" for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


class _Task:
    def __init__(self, cap: Capture, mapper: PathMapper, tools: list[tuple[str | None, str]]) -> None:
        self.cap, self.mapper, self.tools = cap, mapper, tools
        self.files: dict[str, str] = {}  # this session's copy of the files it read or wrote
        self.pending: list[tuple[str, dict[str, Any], str | None, str]] = []  # (name, input, ts, ui kind)

    def read(self, messages: list[Any]) -> None:
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict):
                self.cap.skipped["conversation entry that is not a message"] += 1
                continue
            self.cap.cursor = (0, i)
            content = msg.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for block in blocks:
                if isinstance(block, dict):
                    self.block(msg.get("role"), block)

    def block(self, role: Any, b: dict[str, Any]) -> None:
        kind = b.get("type")
        if role == "assistant" and kind == "tool_use":
            name, inp = str(b.get("name") or ""), b.get("input") if isinstance(b.get("input"), dict) else {}
            ts, ui = self.tools.pop(0) if self.tools else (None, "")
            self.pending.append((name, inp, ts, ui))
            self.add({"kind": E.TOOL_CALL, "call_id": b.get("id"), "name": name, "input": inp}, ts)
        elif role == "assistant" and kind in ("text", "thinking"):
            text = b.get("text") if kind == "text" else b.get("thinking")
            if isinstance(text, str) and text.strip():
                self.add({"kind": E.MSG_OUT, "text": text, "block": kind})
        elif kind == "text" and isinstance(b.get("text"), str):
            m = _RESULT.match(b["text"])
            if m and self.pending:
                self.result(m.group(1), b["text"][m.end():])
            elif b["text"].strip():
                self.add({"kind": E.MSG_IN, "text": b["text"],
                          **({"injected": True} if b["text"].startswith("<environment_details>") else {})})
        elif kind == "tool_result" and self.pending:
            content = b.get("content")
            text = content if isinstance(content, str) else "\n".join(_texts({"content": content}))
            self.result(self.pending[0][0], text, bool(b.get("is_error")))

    def add(self, ev: dict[str, Any], ts: str | None = None) -> None:
        if ts:
            ev["ts"] = ts
        self.cap.add(ev)

    def result(self, name: str, text: str, error: bool = False) -> None:
        i = next((k for k, p in enumerate(self.pending) if p[0] == name), 0)
        call, inp, ts, ui = self.pending.pop(i)
        final = _FINAL.search(text)
        failed = error or (call in EDITS and final is None and "successfully saved" not in text)
        self.add({"kind": E.TOOL_RESULT, "call_id": None, "name": call, "is_error": failed, "exit_code": None,
                  "stdout": text, "stderr": ""}, ts)
        path = str(inp.get("absolutePath") or inp.get("path") or "")
        rel = self.mapper.to_repo(path) if path else None
        if call == "read_file" and not failed and rel is not None and text and not text.startswith("Error"):
            self.files[rel] = text if text.endswith("\n") else text + "\n"
            self.add({"kind": E.CODE_READ, "file": rel, "range": [1, len(split_lines(text))],
                      "text": self.files[rel], "call_id": None}, ts)
        elif call in EDITS and failed:
            self.cap.ignored[f"{call} that failed"] += 1
        elif call in EDITS:
            if rel is None:
                self.cap.drop(self.mapper.drop_reason(path))
                return
            after = final.group(1) if final else str(inp.get("content") or "")
            after = after if after.endswith("\n") or not after else after + "\n"
            for ev in self.edits(call, rel, inp, after, ui):
                self.add(ev, ts)

    def edits(self, call: str, rel: str, inp: dict[str, Any], after: str, ui: str) -> list[dict[str, Any]]:
        known = self.files.get(rel)
        self.files[rel] = after
        if call == "write_to_file":
            return [self.whole(rel, known if ui != "newFileCreated" else "", after)]
        blocks = [(split_lines(s), split_lines(r)) for s, r in _BLOCK.findall(str(inp.get("diff") or ""))]
        before = known if known is not None and _apply(known, blocks) == split_lines(after) else _undo(after, blocks)
        if before is None:
            return [_hashed({"kind": E.CODE_EDIT, "file": rel, "tool": call, "call_id": None, "op": "update",
                             "before_range": None, "after_range": None, "before_text": join_lines(s),
                             "after_text": join_lines(r), "file_before_sha": None, "file_after_sha": None})
                    for s, r in blocks]
        out = []
        lines = split_lines(before)
        for search, replace in blocks:
            found = locate(lines, search, replace)
            if found is None:
                continue
            at, n, written = found
            new = lines[:at] + written + lines[at + n:]
            changes = block_changes(at, lines[at:at + n], written)
            if changes:
                ev = {"kind": E.CODE_EDIT, "file": rel, "tool": call, "call_id": None, "op": "update",
                      **edit_ranges(changes, lines, new), **context_fields([(at + 1, written)]),
                      "file_before_sha": E.git_blob_sha(join_lines(lines)), "file_after_sha": E.git_blob_sha(join_lines(new))}
                out.append(_hashed(ev))
            lines = new
        return out

    def whole(self, rel: str, before: str | None, after: str) -> dict[str, Any]:
        new = split_lines(after)
        ev: dict[str, Any] = {"kind": E.CODE_EDIT, "file": rel, "tool": "write_to_file", "call_id": None,
                              "file_after_sha": E.git_blob_sha(after)}
        if not before:
            ev.update(op="create", before_range=[1, 0], after_range=[1, len(new)], before_text="",
                      after_text=join_lines(new), file_before_sha=None)
            return _hashed(ev)
        old = split_lines(before)
        changes = block_changes(0, old, new)
        if not changes:
            ev.update(op="update", before_range=[1, 0], after_range=[1, 0], before_text="", after_text="",
                      file_before_sha=E.git_blob_sha(before))
            return _hashed(ev)
        ev.update(op="update", **edit_ranges(changes, old, new), **context_fields([(1, new)]),
                  file_before_sha=E.git_blob_sha(before))
        return _hashed(ev)


def _apply(text: str, blocks: list[tuple[list[str], list[str]]]) -> list[str] | None:
    lines = split_lines(text)
    for search, replace in blocks:
        found = locate(lines, search, replace)
        if found is None:
            return None
        at, n, written = found
        lines = lines[:at] + written + lines[at + n:]
    return lines


def _undo(after: str, blocks: list[tuple[list[str], list[str]]]) -> str | None:
    """The file before `blocks` made it `after`: each REPLACE text, last block first, found in it
    and its SEARCH text put back. None when a REPLACE text is not in it."""
    lines = split_lines(after)
    for search, replace in reversed(blocks):
        if not replace:
            return None  # a deletion: nothing in the saved file says where it was
        found = locate(lines, replace, search)
        if found is None:
            return None
        at, n, written = found
        lines = lines[:at] + written + lines[at + n:]
    return join_lines(lines)
