"""GitHub Copilot CLI sessions: `~/.copilot/session-state/<session id>/events.jsonl`
(`COPILOT_HOME` replaces `~/.copilot`), append-only JSONL, one event per line:
`{type, data, id, timestamp, parentId}`.

* `session.start` names the session (`sessionId`), Copilot's version and the working directory
  with its git branch and commit (`context`); `session.model_change` and each assistant message
  name the model;
* `user.message` / `assistant.message` (`content`, and the tool calls it asks for in
  `toolRequests`) are the conversation;
* `tool.execution_start` (`toolCallId`, `toolName`, `arguments`) and `tool.execution_complete`
  (`success`, `result.content` for the model and `result.detailedContent`, or `error`) are a
  tool's call and outcome. For a tool that changed files (`edit`, `create`, `apply_patch`),
  `detailedContent` is a git diff of each file, its hunks numbered as in the file: the edit's
  ranges are exact. `create` also keeps the whole file written (`file_text`); an `edit` whose
  file this session showed whole (`view`) has its file hashes too;
* `view` prints the file's lines numbered (`12. text`): a code.read of them;
* `session.compaction_complete` is a compaction marker; hook, turn and permission events are
  the harness's own bookkeeping (counted as ignored).

A failed call (`success: false`) is not an edit. The legacy `history-session-state/*.json`
files of Copilot CLI before its events log are not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from engram.adapters.base import Capture, PathMapper, SourceSpan, read_jsonl
from engram.adapters.opencode import edit_from_diff
from engram.adapters.unified import edit_from_texts, join_lines, split_lines
from engram.tape import events as E

HARNESS: Final = "copilot-cli"
EDIT_TOOLS: Final = frozenset({"edit", "create", "apply_patch", "str_replace_editor", "write"})
_NUMBERED = re.compile(r"^(\d+)\. ?(.*)$")
_FILE_DIFF = re.compile(r"^diff --git a/(.*?) b/(.*)$", re.MULTILINE)
_BOOKKEEPING: Final = ("hook.", "assistant.turn_", "permission.", "session.info", "session.shutdown",
                       "system.notification", "session.permissions_changed", "abort", "assistant.message_delta")


def looks_like_copilot(rec: dict[str, Any]) -> bool:
    """A Copilot CLI event: the `{type, data, id, timestamp}` envelope of its session log."""
    data = rec.get("data")
    typ = rec.get("type")
    return isinstance(data, dict) and isinstance(typ, str) and "id" in rec and "timestamp" in rec and (
        (typ == "session.start" and data.get("producer") == "copilot-agent")
        or typ.startswith(("tool.execution_", "assistant.turn_", "session.")) and "payload" not in rec)


def parse_copilot(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
                  max_line_bytes: int) -> Capture:
    src = sources[0]
    name = src.path.parent.name if src.path.name == "events.jsonl" else src.path.stem
    cap = Capture(HARNESS, name, sources)
    lines, src.end = read_jsonl(src.path, max_line_bytes=max_line_bytes, skipped=cap.skipped)
    records = [(line.offset, line.record) for line in lines if isinstance(line.record, dict)]
    start = next((r.get("data") or {} for _, r in records if r.get("type") == "session.start"), {})
    context = start.get("context") if isinstance(start.get("context"), dict) else {}
    cwd = context.get("cwd") if isinstance(context.get("cwd"), str) else None
    cap.session_id = str(start.get("sessionId") or name)
    cap.meta = {"harness_version": start.get("copilotVersion"), "cwd": cwd, "git_branch": context.get("branch"),
                "git_head": context.get("headCommit"), "model": start.get("selectedModel"),
                "started": start.get("startTime") or (records[0][1].get("timestamp") if records else None)}
    session = _Session(cap, mapper_for(cwd))
    for offset, rec in records:
        cap.cursor = (0, offset)
        session.event(rec)
    return cap


class _Session:
    def __init__(self, cap: Capture, mapper: PathMapper) -> None:
        self.cap, self.mapper = cap, mapper
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.files: dict[str, str] = {}  # this session's copy of the files it showed whole or wrote

    def event(self, rec: dict[str, Any]) -> None:
        typ = str(rec.get("type") or "")
        data = rec.get("data") if isinstance(rec.get("data"), dict) else {}
        base: dict[str, Any] = {"ts": rec.get("timestamp")}
        if isinstance(rec.get("id"), str):
            base["id"] = rec["id"]
        if typ == "user.message" and isinstance(data.get("content"), str):
            self.cap.add({"kind": E.MSG_IN, **base, "text": data["content"]})
        elif typ == "assistant.message":
            if isinstance(data.get("model"), str):
                self.cap.meta["model"] = self.cap.meta.get("model") or data["model"]
            if isinstance(data.get("content"), str) and data["content"].strip():
                self.cap.add({"kind": E.MSG_OUT, **base, "text": data["content"], "block": "text"})
        elif typ == "session.model_change" and isinstance(data.get("newModel"), str):
            self.cap.meta["model"] = self.cap.meta.get("model") or data["newModel"]
        elif typ == "tool.execution_start":
            call, name = str(data.get("toolCallId") or ""), str(data.get("toolName") or "")
            args = data.get("arguments") if isinstance(data.get("arguments"), dict) else {}
            self.calls[call] = (name, args)
            self.cap.add({"kind": E.TOOL_CALL, **base, "call_id": call, "name": name, "input": args})
        elif typ == "tool.execution_complete":
            self.complete(base, data)
        elif typ == "session.compaction_complete":
            self.cap.add({"kind": E.COMPACT, **base, "trigger": data.get("trigger"),
                          "pre_tokens": data.get("preCompactionTokens"), "message": data.get("summaryContent")})
        elif typ == "session.start" or typ.startswith(_BOOKKEEPING) or typ in ("system.message",
                                                                              "session.model_change"):
            self.cap.ignored[typ] += 1
        else:
            self.cap.ignored[f"Copilot CLI event {typ!r}"] += 1

    def complete(self, base: dict[str, Any], data: dict[str, Any]) -> None:
        call = str(data.get("toolCallId") or "")
        name, args = self.calls.pop(call, ("", {}))
        ok = data.get("success") is True
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        text = str(result.get("content") or "") if ok else str(error.get("message") or "")
        self.cap.add({"kind": E.TOOL_RESULT, **base, "call_id": call, "name": name, "is_error": not ok,
                      "exit_code": None, "stdout": text, "stderr": ""})
        at = {**base, "call_id": call}
        detail = result.get("detailedContent")
        if not ok:
            if name in EDIT_TOOLS:
                self.cap.ignored[f"{name} that failed"] += 1
        elif name == "view":
            if (ev := self.view(at, args, text)) is not None:
                self.cap.add(ev)
        elif name in EDIT_TOOLS or (isinstance(detail, str) and detail.lstrip().startswith("diff --git")):
            for ev in self.edits(at, name, args, detail if isinstance(detail, str) else ""):
                self.cap.add(ev)

    def view(self, at: dict[str, Any], args: dict[str, Any], output: str) -> dict[str, Any] | None:
        """A `view` of a file: its numbered lines a code.read; the session's copy of the file when
        it showed the whole file (no range asked)."""
        path = str(args.get("path") or "")
        rel = self.mapper.to_repo(path) if path else None
        if rel is None:
            return None
        nums: list[int] = []
        lines: list[str] = []
        for line in output.split("\n"):
            m = _NUMBERED.match(line)
            if m is None:
                break
            nums.append(int(m.group(1)))
            lines.append(m.group(2))
        if not nums or nums != list(range(nums[0], nums[0] + len(nums))):
            return None
        if nums[0] == 1 and not args.get("view_range"):
            self.files[rel] = join_lines(lines)
        return {"kind": E.CODE_READ, **at, "file": rel, "range": [nums[0], nums[-1]], "text": join_lines(lines)}

    def edits(self, at: dict[str, Any], name: str, args: dict[str, Any], detail: str) -> list[dict[str, Any]]:
        """The code.edits of a successful edit tool, one per file its diff names."""
        out = []
        sections = list(_FILE_DIFF.finditer(detail))
        if not sections and isinstance(args.get("path"), str):
            return self.one_edit(at, name, args, args["path"], "")
        for i, m in enumerate(sections):
            body = detail[m.end(): sections[i + 1].start() if i + 1 < len(sections) else len(detail)]
            path = "/" + m.group(2) if not re.match(r"[A-Za-z]:", m.group(2)) else m.group(2)
            if isinstance(args.get("path"), str) and len(sections) == 1:
                path = args["path"]
            out += self.one_edit(at, name, args, path, body)
        return out

    def one_edit(self, at: dict[str, Any], name: str, args: dict[str, Any], path: str,
                 diff: str) -> list[dict[str, Any]]:
        rel = self.mapper.to_repo(path)
        if rel is None:
            self.cap.drop(self.mapper.drop_reason(path))
            return []
        created = "\n--- a/dev/null" in f"\n{diff}" or "new file mode" in diff or "create file mode" in diff
        known = None if created else self.files.get(rel)
        after = None
        if name == "create" and isinstance(args.get("file_text"), str):
            after = args["file_text"]
        elif name == "edit" and known is not None and isinstance(args.get("old_str"), str) \
                and known.count(args["old_str"]) == 1 and isinstance(args.get("new_str"), str):
            after = known.replace(args["old_str"], args["new_str"])
        fields = None
        if after is not None:
            fields = edit_from_texts(known, after)
            self.files[rel] = after
        elif "@@" in diff:
            self.files.pop(rel, None)
            fields = edit_from_diff(diff)
            if fields is not None and created:
                fields["op"] = "create"
        elif isinstance(args.get("old_str"), str) and isinstance(args.get("new_str"), str):
            self.files.pop(rel, None)
            old, new = join_lines(split_lines(args["old_str"])), join_lines(split_lines(args["new_str"]))
            fields = {"op": "update", "before_range": None, "after_range": None, "before_text": old,
                      "after_text": new, "file_before_sha": None, "file_after_sha": None,
                      "before_sha": E.sha256_text(old), "after_sha": E.sha256_text(new)}
        if fields is None:
            self.cap.ignored[f"{name} that changed nothing (or kept no diff)"] += 1
            return []
        return [{"kind": E.CODE_EDIT, **at, "file": rel, "tool": name, **fields}]


def started(path: Any) -> str | None:
    """When the session began: its `session.start` event's `startTime`, from the file's start."""
    try:
        with open(path, "rb") as f:
            head = f.read(16384).decode("utf-8", "replace")
    except OSError:
        return None
    m = re.search(r'"startTime"\s*:\s*"([^"]+)"', head)
    return m.group(1) if m else None
