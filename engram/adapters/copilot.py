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
* `view` prints the file's lines numbered (`12. text`): a code.read of them; newer releases
  (1.0.7x) print them bare and keep in `detailedContent` a diff of the file with itself whose one
  hunk (`@@ -12,40 +12,40 @@`) numbers them;
* `session.compaction_complete` is a compaction marker; hook, turn and permission events are
  the harness's own bookkeeping (counted as ignored).

A failed call (`success: false`) is not an edit. The legacy `history-session-state/*.json`
files of Copilot CLI before its events log are not read.

VS Code's Copilot Chat writes the same log (`vscodeVersion` in `session.start`; projects export
it with a hook, e.g. `.chat/*.json`) with its own tools and **no tool results**: no reads, and an
edit keeps only what it asked for. `create_file` (`content`) is a creation, exact;
`replace_string_in_file` and each replacement of `multi_replace_string_in_file` (`oldString`,
`newString`) is placed where its old string stands once in this session's copy of the file, else
in the file of the newest commit before the edit, else in the file of the first commit after it
with this session's later replacements of the file undone (its new string standing there once),
else on disk (`placed`: `git history`, `commit after`, `working tree`, and no file hashes); one
nothing places is kept without line ranges. A subagent (`runSubagent`) edits files the log does
not show, and a terminal command may rewrite them (`shell_effect`): after one, the session's copies
of those files are forgotten, and a commit before the edit counts only if made after it (else the
commit after is tried first). Its start names no working directory: absolute paths need `--map`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from engram.adapters.aider import GitFiles, _on_disk
from engram.adapters.base import Capture, PathMapper, SourceSpan, read_source
from engram.adapters.codex import shell_effect
from engram.adapters.opencode import edit_from_diff
from engram.adapters.sniff import looks_like_copilot  # noqa: F401 - (its home before sniff)
from engram.adapters.unified import edit_from_texts, join_lines, split_lines
from engram.tape import events as E

HARNESS: Final = "copilot-cli"
EDIT_TOOLS: Final = frozenset({"edit", "create", "apply_patch", "str_replace_editor", "write"})
VSCODE_EDITS: Final = frozenset({"replace_string_in_file", "multi_replace_string_in_file", "create_file"})
HISTORY, AFTER, TREE = "git history", "commit after", "working tree"
_NUMBERED = re.compile(r"^(\d+)\. ?(.*)$")
_FILE_DIFF = re.compile(r"^diff --git a/(.*?) b/(.*)$", re.MULTILINE)
_SHOWN = re.compile(r"^@@ -(\d+),(\d+) \+\1,\2 @@[^\n]*\n", re.MULTILINE)  # a view's lines, unchanged
_BOOKKEEPING: Final = ("hook.", "assistant.turn_", "permission.", "session.info", "session.shutdown",
                       "system.notification", "session.permissions_changed", "abort", "assistant.message_delta")


def parse_copilot(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper], *,
                  max_line_bytes: int, repo_root: Path | None = None) -> Capture:
    src = sources[0]
    name = src.path.parent.name if src.path.name == "events.jsonl" else src.path.stem
    cap = Capture(HARNESS, name, sources)
    lines = read_source(src, max_line_bytes=max_line_bytes, skipped=cap.skipped)
    records = [(line.offset, line.record) for line in lines if isinstance(line.record, dict)]
    start = next((r.get("data") or {} for _, r in records if r.get("type") == "session.start"), {})
    context = start.get("context") if isinstance(start.get("context"), dict) else {}
    cwd = context.get("cwd") if isinstance(context.get("cwd"), str) else None
    cap.session_id = str(start.get("sessionId") or name)
    cap.meta = {"harness_version": start.get("copilotVersion"), "cwd": cwd, "git_branch": context.get("branch"),
                "git_head": context.get("headCommit"), "model": start.get("selectedModel"),
                "started": start.get("startTime") or (records[0][1].get("timestamp") if records else None)}
    if start.get("vscodeVersion"):
        cap.meta["unkept"] = ["tool results (VS Code's log): no reads, and edits placed by their text"]
    session = _Session(cap, mapper_for(cwd), GitFiles(repo_root) if repo_root is not None else None)
    for offset, rec in records:
        cap.cursor = (0, offset)
        session.event(rec)
    session.place_pending()
    return cap


@dataclass
class _Replacement:
    """One VS Code replacement (or `create_file`: `old` None) of a file, kept to undo it when a
    commit made after it places an earlier one; `event` its code.edit."""
    event: dict[str, Any]
    rel: str
    old: str | None
    new: str
    ts: str


class _Session:
    def __init__(self, cap: Capture, mapper: PathMapper, git: GitFiles | None = None) -> None:
        self.cap, self.mapper, self.git = cap, mapper, git
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.files: dict[str, str] = {}  # this session's copy of the files it showed whole or wrote
        self.placed: dict[str, str] = {}  # a copy taken from git or the disk, not the session: where from
        self.since: dict[str, str] = {}  # file -> when it last changed in a way not followed
        self.blind = ""  # when a subagent or command last changed files not named
        self.replacements: list[_Replacement] = []  # VS Code's, in order
        self.pending: list[_Replacement] = []  # those no state before them placed

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
        if name == "runSubagent":
            self.forget(base.get("ts"), None)
        elif name == "run_in_terminal" and isinstance(args.get("command"), str):
            effect = shell_effect(args["command"])
            if effect != "none":
                self.forget(base.get("ts"), None if effect == "all" else args["command"])
        if not ok:
            if name in EDIT_TOOLS:
                self.cap.ignored[f"{name} that failed"] += 1
        elif name == "view":
            if (ev := self.view(at, args, text, detail if isinstance(detail, str) else "")) is not None:
                self.cap.add(ev)
        elif name in VSCODE_EDITS:
            for ev in self.vscode_edits(at, name, args):
                self.cap.add(ev)
        elif name in EDIT_TOOLS or (isinstance(detail, str) and detail.lstrip().startswith("diff --git")):
            for ev in self.edits(at, name, args, detail if isinstance(detail, str) else ""):
                self.cap.add(ev)

    def view(self, at: dict[str, Any], args: dict[str, Any], output: str, detail: str) -> dict[str, Any] | None:
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
        if not nums:
            nums, lines = _shown_lines(output, detail)
        if not nums or nums != list(range(nums[0], nums[0] + len(nums))):
            return None
        if nums[0] == 1 and not args.get("view_range"):
            self.files[rel] = join_lines(lines)
            self.placed.pop(rel, None)
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
            self.placed.pop(rel, None)
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

    def forget(self, ts: Any, command: str | None) -> None:
        """Files changed behind the log's back at `ts`: those `command` names (None: any file, as a
        subagent's edits or a formatter). Their copies are dropped, and an older commit no longer
        holds them as the session found them."""
        when = str(ts or "")
        if command is None:
            self.files.clear()
            self.placed.clear()
            self.blind = when
            return
        for rel in list(self.files):
            if rel in command or rel.rsplit("/", 1)[-1] in command:
                del self.files[rel]
                self.placed.pop(rel, None)
                self.since[rel] = when

    def vscode_edits(self, at: dict[str, Any], name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        """VS Code's edits, known by what they asked for (its log keeps no results)."""
        if name == "create_file":
            return self.replaced(at, name, args.get("filePath"), None, args.get("content"))
        pairs = args.get("replacements") if name == "multi_replace_string_in_file" else [args]
        out = []
        for r in pairs if isinstance(pairs, list) else []:
            if isinstance(r, dict):
                out += self.replaced(at, name, r.get("filePath"), r.get("oldString"), r.get("newString"))
        return out

    def replaced(self, at: dict[str, Any], name: str, path: Any, old: Any, new: Any) -> list[dict[str, Any]]:
        if not isinstance(path, str) or not isinstance(new, str) or (old is not None and not isinstance(old, str)):
            self.cap.ignored[f"{name} without its file or text"] += 1
            return []
        rel = self.mapper.to_repo(path)
        if rel is None:
            self.cap.drop(self.mapper.drop_reason(path))
            return []
        if old is None:  # create_file
            fields = edit_from_texts(None, new)
            self.files[rel] = new
            self.placed.pop(rel, None)
            ev = {"kind": E.CODE_EDIT, **at, "file": rel, "tool": name, **(fields or {})}
            self.replacements.append(_Replacement(ev, rel, None, new, str(at.get("ts") or "")))
            return [ev] if fields else []
        text, where = self.state(rel, str(at.get("ts") or ""))
        if text is not None and old and text.count(old) == 1:
            after = text.replace(old, new, 1)
            fields = edit_from_texts(text, after)
            self.files[rel] = after
            if fields is None:
                self.cap.ignored[f"{name} that changed nothing"] += 1
                return []
            if where is not None:
                fields.update(placed=where, file_before_sha=None, file_after_sha=None)
        else:
            self.files.pop(rel, None)
            self.placed.pop(rel, None)
            self.since[rel] = str(at.get("ts") or "")
            o, n = join_lines(split_lines(old)), join_lines(split_lines(new))
            fields = {"op": "update", "before_range": None, "after_range": None, "before_text": o, "after_text": n,
                      "file_before_sha": None, "file_after_sha": None,
                      "before_sha": E.sha256_text(o), "after_sha": E.sha256_text(n)}
        ev = {"kind": E.CODE_EDIT, **at, "file": rel, "tool": name, **fields}
        self.replacements.append(_Replacement(ev, rel, old, new, str(at.get("ts") or "")))
        if fields["after_range"] is None:
            self.pending.append(self.replacements[-1])
        return [ev]

    def state(self, rel: str, ts: str) -> tuple[str | None, str | None]:
        """The file as this session last left it (where None: the session's own copy), else as the
        newest commit before the edit at `ts` holds it when that commit is newer than every change
        of the file the session did not follow (its earlier replacements no state placed, a
        subagent's or a command's writes); (None, None) when neither does. Taken from git, the copy
        is `placed`: other uncommitted work may have moved its lines."""
        if rel in self.files:
            return self.files[rel], self.placed.get(rel)
        if self.git is None or not ts:
            return None, None
        commit = self.git.before(ts)
        if commit is None or not _not_older(self.git.time(commit), max(self.blind, self.since.get(rel, ""))):
            return None, None
        text = self.git.text(commit, rel)
        if text is None:
            return None, None
        self.files[rel], self.placed[rel] = text, HISTORY
        return text, HISTORY

    def place_pending(self) -> None:
        """Place the replacements no state before them held, once the whole log is read: in the
        first commit after each (this session's later replacements of the file undone), else in
        the newest commit before it or on disk even if files changed unseen since (the old string
        must stand there once). One none of these places keeps no line ranges."""
        for rep in self.pending:
            for where, before, after in self.placements(rep):
                fields = edit_from_texts(before, after)
                if fields is not None:
                    rep.event.update(fields, placed=where, file_before_sha=None, file_after_sha=None)
                    break

    def placements(self, rep: _Replacement) -> Iterator[tuple[str, str, str]]:
        """The file before and after `rep` as each state places it, in order: the first commit
        after it (its new string standing there once once the session's later replacements are
        undone), the newest commit before it, the working tree (its old string standing once)."""
        old = rep.old or ""
        if self.git is not None and rep.ts:
            commit = self.git.after(rep.ts, rep.rel)
            text = self.git.text(commit, rep.rel) if commit else None
            after = _undo_later(text, self.replacements, rep, self.git.time(commit or "")) if text else None
            if after is not None and rep.new and after.count(rep.new) == 1:
                yield AFTER, after.replace(rep.new, old, 1), after
            commit = self.git.before(rep.ts)
            text = self.git.text(commit, rep.rel) if commit else None
            if text is not None and old and text.count(old) == 1:
                yield HISTORY, text, text.replace(old, rep.new, 1)
        text = _on_disk(self.mapper.repo_root / rep.rel)
        if text is not None and old and text.count(old) == 1:
            yield TREE, text, text.replace(old, rep.new, 1)


def _not_older(commit_time: str | None, since: str) -> bool:
    """Whether a commit made at `commit_time` is not older than the moment `since` ("" : always)."""
    if not since:
        return True
    try:
        return commit_time is not None and datetime.fromisoformat(commit_time) >= datetime.fromisoformat(since)
    except ValueError:
        return False


def _undo_later(text: str, replacements: list[_Replacement], rep: _Replacement, until: str | None) -> str | None:
    """`text`, the file in a commit made at `until` after `rep`, with this session's replacements
    of the file made after `rep` and before that commit undone, latest first: the file just after
    `rep`. None when one cannot be undone (its new string not standing there once, a creation)."""
    if not until:
        return None
    later = [r for r in replacements[replacements.index(rep) + 1:] if r.rel == rep.rel
             and not _not_older(r.ts, until or "")]
    for r in reversed(later):
        if r.old is None or not r.new or text.count(r.new) != 1:
            return None
        text = text.replace(r.new, r.old, 1)
    return text


def started(path: Any) -> str | None:
    """When the session began: its `session.start` event's `startTime`, from the file's start."""
    try:
        with open(path, "rb") as f:
            head = f.read(16384).decode("utf-8", "replace")
    except OSError:
        return None
    m = re.search(r'"startTime"\s*:\s*"([^"]+)"', head)
    return m.group(1) if m else None


def _shown_lines(output: str, detail: str) -> tuple[list[int], list[str]]:
    """The numbers and lines of a view printed bare (Copilot CLI 1.0.7x): its `detailedContent`
    is a diff of the file with itself whose one hunk holds exactly the lines shown, numbered;
    anything else (several hunks, lines that are not the output's) gives nothing."""
    hunks = list(_SHOWN.finditer(detail))
    if len(hunks) != 1:
        return [], []
    start, count = int(hunks[0].group(1)), int(hunks[0].group(2))
    body = detail[hunks[0].end():].split("\n")[:count]
    if len(body) != count or any(not line.startswith(" ") for line in body if line):
        return [], []
    lines = [line[1:] for line in body]
    if split_lines(output) != lines:
        return [], []
    return list(range(start, start + count)), lines
