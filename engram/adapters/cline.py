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
* a result that says the edit failed (no saved file) is a failed edit, not counted;
* Roo Code's (and Kilo Code's) `search_and_replace` is done again on this session's copy of the
  file (engram.adapters.roo_replace): its lines are a line diff of the copy before and after;
  without a copy a text's replacement is kept without lines, a pattern's not at all.

Roo Code writes its tool uses either as `tool_use` blocks or, in its XML protocol, as XML in the
assistant's text (`<apply_diff><path>…</path><diff>…</diff></apply_diff>`, each result then in the
next user message as `[apply_diff for 'path'] Result:` and the result's own text block); both are
read. Its `apply_diff` sends SEARCH/REPLACE blocks marked with the line they start at
(`<<<<<<< SEARCH` / `:start_line:N` / `-------` / `=======` / `>>>>>>> REPLACE`), numbered in the
file before the tool, and keeps no saved file: the result says only `Changes successfully
applied` or `<file_write_result>` (`<operation>modified</operation>`). Each block is placed where
its SEARCH lines stand in this session's copy of the file, nearest the line it names (Roo applies
the blocks in that order, shifting each by what the earlier ones added or took away); without a
copy holding them, at the line it names, marked `placed: start_line` (Roo itself searches about
that line, so the lines are Roo's but not checked against the file). Roo's `read_file` results are
numbered (`<content lines="A-B">` with `N | text`): a code.read of those lines, and the session's
copy of the file when they are all of it. A partial success (`But unable to apply all diff
parts`) keeps the blocks this session's copy places and counts the others as failed.

Roo Code 3.5x writes an edit's result as JSON (`{"path":…,"operation":"modified"}`) and a read's as
`File: path`, a `Showing lines A-B of N` notice when only part is shown, then numbered lines; the
lines of a part shown let an apply_diff block be checked where Roo was told it stands. Its
diagnostics file (`// Please share this file with Roo Code Support`, then `{"error", "history"}`)
holds one task's conversation: read as that task, named by its first message's time.

Times come from `ui_messages.json` (each tool the panel showed, in order, matched to the tool uses),
else from Roo Code's `ts` on each message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson

from engram.adapters.aider import _hashed, block_changes, locate
from engram.adapters.base import Capture, PathMapper, SourceSpan
from engram.adapters.roo_replace import replaced, replacements
from engram.adapters.sniff import REPORT_HEAD, is_roo_report
from engram.adapters.unified import context_fields, edit_ranges, join_lines, split_lines
from engram.tape import events as E

HISTORY_FILE: Final = "api_conversation_history.json"
UI_FILE: Final = "ui_messages.json"
# `[apply_diff for 'path'] Result:`; also `[read_file for 3 files] Result:` (a read of several files) and
# `[switch_mode to 'code' because: …] Result:`, which name no path in quotes
_RESULT = re.compile(r"^\[(\w+)(?: for '(.*?)'[^\]\n]*| (?!for ')[^\]\n]*)?\] Result:\n?", re.DOTALL)
_FINAL = re.compile(r'<final_file_content path="[^"]*">\n?(.*?)\n?</final_file_content>', re.DOTALL)
_MODEL = re.compile(r"^<model>([^<\n]+)</model>$", re.MULTILINE)  # Roo Code's environment details
_CWD = re.compile(r"# Current (?:Working|Workspace) Directory \((.+?)\)")  # Cline's; Roo Code's
_BLOCK = re.compile(r"^(?:-{3,} SEARCH|<{3,} SEARCH)\s*\n(.*?)^={3,}\s*\n(.*?)^(?:\+{3,} REPLACE|>{3,} REPLACE)\s*$",
                    re.DOTALL | re.MULTILINE)
EDITS: Final = frozenset({"replace_in_file", "write_to_file", "apply_diff", "search_and_replace", "insert_content"})
# Roo Code's apply_diff blocks: an optional `:start_line:` (and `:end_line:`) before the `-------` line.
_ROO_BLOCK = re.compile(r"^<{3,} SEARCH[ \t]*\n(?::start_line:[ \t]*(\d+)[ \t]*\n)?(?::end_line:[ \t]*\d+[ \t]*\n)?"
                        r"(?:-{3,}[ \t]*\n)?(.*?)^={3,}[ \t]*\n(.*?)^>{3,} REPLACE[ \t]*$", re.DOTALL | re.MULTILINE)
_NUMBERED = re.compile(r"^\s*\d+ \| ?")
# The tools of Roo Code's (and older Cline's) XML protocol, as they appear in the assistant's text.
XML_TOOLS: Final = ("read_file", "write_to_file", "apply_diff", "replace_in_file", "search_and_replace",
                    "insert_content", "execute_command", "list_files", "search_files", "list_code_definition_names",
                    "codebase_search", "browser_action", "use_mcp_tool", "access_mcp_resource",
                    "ask_followup_question", "attempt_completion", "switch_mode", "new_task", "update_todo_list",
                    "fetch_instructions", "run_slash_command")
_XML_TOOL = re.compile(r"<(" + "|".join(XML_TOOLS) + r")>\n?(.*?)\n?</\1>", re.DOTALL)
_XML_PARAM = re.compile(r"<(\w+)>\n?(.*?)\n?</\1>", re.DOTALL)
_ROO_FILE = re.compile(r"<file>\s*<path>(.*?)</path>(.*?)</file>", re.DOTALL)
_NOT_RUN = re.compile(r"Tool \[(\w+)\] was not executed because a tool has already been used in this message")
_RANGED = re.compile(r"<path>\s*([^<]*?)\s*</path>\s*<line_range>")  # a file read asks lines of, in `args`
_ROO_CONTENT = re.compile(r'<content(?: lines="(\d+)-(\d+)")?>\n?(.*?)</content>', re.DOTALL)
_ROO_OK = ("Changes successfully applied", "<operation>modified</operation>", "<operation>created</operation>",
           "successfully saved", '"operation":"modified"', '"operation":"created"')
_ROO_CREATED = ("<operation>created</operation>", '"operation":"created"')
# Roo Code's native read_file result (3.4x on): `File: path`, a notice when only some lines are shown
# (`Showing lines A-B of N total lines`), then the lines numbered (`  12 | text`).
_ROO_NATIVE_READ = re.compile(r"File: [^\n]*\n(?:IMPORTANT: File content truncated\.\n\s*Status: Showing lines "
                              r"(\d+)-(\d+) of \d+ total lines\.\n.*?\n\s*\n)?[ \t]*(?=\d+ \|)", re.DOTALL)
_ROO_PARTIAL = "unable to apply all diff parts"


def report_parses(path: Path) -> bool:
    """Does a Roo Code diagnostics file still hold its JSON? A markdown formatter run over a
    committed one escapes characters and rewraps lines; such a file is read as plain text instead
    (its words stay findable), not as a task with no message."""
    try:
        orjson.loads(_report_json(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        return False
    return True


def _report_json(data: bytes) -> bytes:
    """A diagnostics file's JSON: its `//` comment lines dropped (other files: as they are)."""
    if data.lstrip().startswith(REPORT_HEAD):
        return b"\n".join(x for x in data.split(b"\n") if not x.startswith(b"//"))
    return data


def task_sources(path: Path) -> list[SourceSpan]:
    """A task's files: the conversation first, the panel's messages (for times) when there."""
    folder = path.parent
    out = [SourceSpan("main", path)]
    if path.name == HISTORY_FILE and (folder / UI_FILE).is_file():
        out.append(SourceSpan(UI_FILE, folder / UI_FILE))
    return out


def harness_of(path: Path) -> str:
    if path.suffix.lower() == ".md":  # a markdown export: Cline's by its name, else Roo Code's or a fork's
        return "cline" if path.name.lower().startswith("cline_task_") else "roo-code"
    return "roo-code" if "roo-cline" in str(path).lower() or is_roo_report(path) else "cline"


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
    cap = Capture(harness, "", sources)
    export = main.path.suffix.lower() == ".md"  # a task exported as markdown (roo_export.py)
    messages = _load_export(main, cap) if export else _load(main, cap, "conversation")
    report = isinstance(messages, dict) and "history" in messages  # a Roo Code diagnostics file
    version = messages.get("error", {}).get("version") if report and isinstance(messages.get("error"), dict) else None
    messages = messages["history"] if report else messages
    first = messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
    # a diagnostics file or an export names no task id: the time of the task's first message stands for it
    task = str(first.get("ts") or main.path.stem) if report or export else main.path.parent.name
    cap.session_id = f"{'roo' if harness == 'roo-code' else 'cline'}-{task}"
    ui = _load(sources[1], cap, "panel messages") if len(sources) > 1 else []
    if not isinstance(messages, list):
        cap.skipped[f"{HISTORY_FILE} is not a list of messages"] += 1
        return cap
    cwd = next((m.group(1) for msg in messages[:2] for text in _texts(msg) if (m := _CWD.search(text))), None)
    times = [x for x in ui if isinstance(x, dict)] if isinstance(ui, list) else []
    started = _iso(times[0].get("ts")) if times else _iso(int(task)) if task.isdigit() else None
    tools = [(_iso(x.get("ts")), _tool_kind(x)) for x in times if x.get("say") == "tool"]
    model = next((x["modelInfo"].get("modelId") for x in times if isinstance(x.get("modelInfo"), dict)), None)
    cap.meta = {"harness_version": version, "cwd": cwd, "git_branch": None, "git_head": None, "model": model,
                "started": started}
    if export:
        from engram.adapters.roo_export import exported_by  # noqa: PLC0415

        cap.meta["exported_by"] = exported_by(main.path)
        cap.meta["model"] = next((m.group(1) for msg in messages[:3] for text in _texts(msg)
                                  if (m := _MODEL.search(text))), None)
        cap.meta["unkept"] = ["the task's id (named by its first message's time)"] + (
            [] if any(m.get("ts") for m in messages) else ["message times (the export keeps none)"])
    elif not times and not any(isinstance(m, dict) and m.get("ts") for m in messages):  # Roo stamps messages
        cap.meta["unkept"] = [f"message times ({UI_FILE} missing)"]
    _Task(cap, mapper_for(cwd), tools).read(messages)
    return cap


def _load(src: SourceSpan, cap: Capture, what: str) -> Any:
    try:
        data = src.path.read_bytes()
        src.end = len(data)
        return orjson.loads(_report_json(data))
    except (OSError, orjson.JSONDecodeError) as exc:
        cap.skipped[f"unreadable {what} ({exc.__class__.__name__}): the task is still being written, or damaged"] += 1
        return None


def _load_export(src: SourceSpan, cap: Capture) -> Any:
    """A markdown export's conversation, as the task folder held it (roo_export.py)."""
    from engram.adapters.roo_export import messages  # noqa: PLC0415

    try:
        data = src.path.read_bytes()
    except OSError as exc:
        cap.skipped[f"unreadable export ({exc.__class__.__name__})"] += 1
        return None
    src.end = len(data)
    return messages(data.decode("utf-8", "replace"))


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
        self.seen: dict[str, dict[int, str]] = {}  # lines (by number) of files Roo showed only in part
        # (name, input, ts, ui kind, tool_use id): the tool uses whose results have not come yet
        self.pending: list[tuple[str, dict[str, Any], str | None, str, Any]] = []
        self.msg_ts: str | None = None

    def read(self, messages: list[Any]) -> None:
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict):
                self.cap.skipped["conversation entry that is not a message"] += 1
                continue
            self.cap.cursor = (0, i)
            self.msg_ts = _iso(msg.get("ts"))  # Roo Code stamps each message; Cline does not
            content = msg.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            if msg.get("role") == "user":
                blocks = _results_joined(blocks)
            for block in blocks:
                if isinstance(block, dict):
                    self.block(msg.get("role"), block)

    def block(self, role: Any, b: dict[str, Any]) -> None:
        kind = b.get("type")
        if role == "assistant" and kind == "tool_use":
            name, inp = str(b.get("name") or ""), b.get("input") if isinstance(b.get("input"), dict) else {}
            ts, ui = self.tools.pop(0) if self.tools else (self.msg_ts, "")
            self.pending.append((name, inp, ts, ui, b.get("id")))
            self.add({"kind": E.TOOL_CALL, "call_id": b.get("id"), "name": name, "input": inp}, ts)
        elif role == "assistant" and kind == "text" and isinstance(b.get("text"), str) and _XML_TOOL.search(b["text"]):
            self.xml_tools(b["text"])
        elif role == "assistant" and kind in ("text", "thinking", "reasoning"):  # reasoning: Roo Code's
            text = b.get("thinking") if kind == "thinking" else b.get("text")
            if isinstance(text, str) and text.strip():
                self.add({"kind": E.MSG_OUT, "text": text, "block": "text" if kind == "text" else "thinking"})
        elif kind == "text" and isinstance(b.get("text"), str):
            m = _RESULT.match(b["text"])
            if m and self.pending:
                self.result(m.group(1), b["text"][m.end():], path=m.group(2))
            elif b["text"].strip():
                self.add({"kind": E.MSG_IN, "text": b["text"],
                          **({"injected": True} if b["text"].startswith("<environment_details>") else {})})
        elif kind == "tool_result" and self.pending:
            content = b.get("content")
            text = content if isinstance(content, str) else "\n".join(_texts({"content": content}))
            self.result(self.pending[0][0], text, bool(b.get("is_error")), b.get("tool_use_id"))

    def xml_tools(self, text: str) -> None:
        """An assistant's text holding tool uses in the XML protocol: the words around them are its
        message, each tool use a tool.call (its parameters the tags inside it)."""
        at = 0
        for m in _XML_TOOL.finditer(text):
            if text[at:m.start()].strip():
                self.add({"kind": E.MSG_OUT, "text": text[at:m.start()], "block": "text"})
            name, inp = m.group(1), dict(_XML_PARAM.findall(m.group(2)))
            ts, ui = self.tools.pop(0) if self.tools else (None, "")
            self.pending.append((name, inp, ts, ui, None))
            self.add({"kind": E.TOOL_CALL, "call_id": None, "name": name, "input": inp}, ts)
            at = m.end()
        if text[at:].strip():
            self.add({"kind": E.MSG_OUT, "text": text[at:], "block": "text"})

    def add(self, ev: dict[str, Any], ts: str | None = None) -> None:
        ts = ts or self.msg_ts
        if ts:
            ev["ts"] = ts
        self.cap.add(ev)

    def result(self, name: str, text: str, error: bool = False, use_id: Any = None, path: str | None = None) -> None:
        """A tool's result, paired with its use by the use's id when it has one (a use whose
        result never came must not shift the others), else by the tool's name and the path its
        header quotes (`[write_to_file for 'b.py'] Result:`), else by the name alone."""
        i = next((k for k, p in enumerate(self.pending) if use_id is not None and p[4] == use_id),
                 next((k for k, p in enumerate(self.pending) if p[0] == name and path is not None
                       and str(p[1].get("path") or "").strip() == path),
                      next((k for k, p in enumerate(self.pending) if p[0] == name), 0)))
        call, inp, ts, ui, _ = self.pending.pop(i)
        for skipped in _NOT_RUN.findall(text):  # XML protocol: a reply's second tool use never ran
            k = next((k for k in range(len(self.pending) - 1, -1, -1) if self.pending[k][0] == skipped), None)
            if k is not None:
                self.pending.pop(k)
        final = _FINAL.search(text)
        partial = call == "apply_diff" and _ROO_PARTIAL in text
        failed = error or (call in EDITS and final is None and not partial and not any(m in text for m in _ROO_OK))
        self.add({"kind": E.TOOL_RESULT, "call_id": None, "name": call, "is_error": failed, "exit_code": None,
                  "stdout": text, "stderr": ""}, ts)
        path = str(inp.get("absolutePath") or inp.get("path") or "")
        rel = self.mapper.to_repo(path) if path else None
        if call == "read_file" and not failed and text.lstrip().startswith("<files>"):  # Roo Code's
            self.roo_reads(text, ts, set(_RANGED.findall(str(inp.get("args") or ""))))
        elif call == "read_file" and not failed and rel is not None and text.startswith("File: "):  # Roo 3.5x
            if m := _ROO_NATIVE_READ.match(text):  # else an error (`Error: ENOENT…`): no read
                self.roo_native_read(rel, text[m.end():], m.group(1) is not None, ts)
        elif call == "apply_diff" and not failed:
            for file, diff, hint in _diffs(inp):
                where = self.mapper.to_repo(file)
                if where is None:
                    self.cap.drop(self.mapper.drop_reason(file))
                    continue
                for ev in self.roo_edits(where, diff, hint, partial):
                    self.add(ev, ts)
        elif call == "read_file" and not failed and rel is not None and text and not text.startswith("Error"):
            text = _unnumbered(text)
            self.files[rel] = text if text.endswith("\n") else text + "\n"
            self.add({"kind": E.CODE_READ, "file": rel, "range": [1, len(split_lines(text))],
                      "text": self.files[rel], "call_id": None}, ts)
        elif call in EDITS and failed:
            self.cap.ignored[f"{call} that failed"] += 1
        elif call == "insert_content":
            if rel is None:
                self.cap.drop(self.mapper.drop_reason(path))
                return
            for ev in self.inserted(rel, inp):
                self.add(ev, ts)
        elif call == "search_and_replace":
            if rel is None:
                self.cap.drop(self.mapper.drop_reason(path))
                return
            for ev in self.search_replaced(rel, inp):
                self.add(ev, ts)
        elif call in EDITS:
            if rel is None:
                self.cap.drop(self.mapper.drop_reason(path))
                return
            after = final.group(1) if final else str(inp.get("content") or "")
            after = after if after.endswith("\n") or not after else after + "\n"
            ui = "newFileCreated" if any(c in text for c in _ROO_CREATED) else ui
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

    def roo_reads(self, text: str, ts: str | None, ranged: set[str]) -> None:
        """Roo Code's `read_file` result: each file's numbered lines a code.read; the session's copy
        of the file when they start at its first line and nothing says more were left out (a read
        asked for a `<line_range>` shows those lines only, even from the first: the lines seen)."""
        for path, body in _ROO_FILE.findall(text):
            rel = self.mapper.to_repo(path.strip())
            m = _ROO_CONTENT.search(body)
            if rel is None or m is None or "<error>" in body:
                continue
            lines = [_NUMBERED.sub("", x, count=1) for x in split_lines(m.group(3))]
            if not lines:
                continue
            first = int(m.group(1) or 1)
            if first == 1 and "<notice>" not in body and path.strip() not in ranged:
                self.files[rel] = join_lines(lines)
                self.seen.pop(rel, None)
            else:
                self.seen.setdefault(rel, {}).update({first + i: x for i, x in enumerate(lines)})
            self.add({"kind": E.CODE_READ, "file": rel, "range": [first, first + len(lines) - 1],
                      "text": join_lines(lines), "call_id": None}, ts)

    def roo_native_read(self, rel: str, body: str, truncated: bool, ts: str | None) -> None:
        """Roo Code's native `read_file` result (numbered lines after a `File:` header): a code.read
        of the lines it shows, and the session's copy of the file when they are all of it."""
        first, lines = None, []
        for x in split_lines(body):  # the numbered lines, up to whatever Roo put after them
            if (m := _NUMBERED.match(x)) is None:
                break
            first = first or int(x[:m.end()].split("|")[0])
            lines.append(x[m.end():])
        if first is None:
            return
        if not truncated and len(lines) > 1 and not lines[-1]:
            lines.pop()  # Roo numbers the empty string after a file's last newline as a line of its own
        if first == 1 and not truncated:
            self.files[rel] = join_lines(lines)
            self.seen.pop(rel, None)
        else:
            self.seen.setdefault(rel, {}).update({first + i: x for i, x in enumerate(lines)})
        self.add({"kind": E.CODE_READ, "file": rel, "range": [first, first + len(lines) - 1],
                  "text": join_lines(lines), "call_id": None}, ts)

    def roo_edits(self, rel: str, diff: str, hint: int | None, partial: bool) -> list[dict[str, Any]]:
        """Roo Code's apply_diff blocks as code.edits, in the order Roo applies them (by the line
        each names, shifted by what the blocks before it added or took away)."""
        blocks = sorted(_roo_blocks(diff, hint), key=lambda b: b[0] or 0)
        known = self.files.get(rel)
        lines = split_lines(known) if known is not None else None
        delta, out = 0, []
        for start, search, replace in blocks:
            target = start - 1 + delta if start else None
            at = _nearest(lines, search, target) if lines is not None else None
            if at is None and partial:
                self.cap.ignored["apply_diff block that failed"] += 1
                continue
            if at is not None and lines is not None:
                new = lines[:at] + replace + lines[at + len(search):]
                if changes := block_changes(at, search, replace):
                    out.append(_hashed({"kind": E.CODE_EDIT, "file": rel, "tool": "apply_diff", "call_id": None,
                                        "op": "update", **edit_ranges(changes, lines, new),
                                        **context_fields([(at + 1, replace)]),
                                        "file_before_sha": E.git_blob_sha(join_lines(lines)),
                                        "file_after_sha": E.git_blob_sha(join_lines(new))}))
                lines = new
            elif target is not None and target >= 0:
                seen = self.seen.get(rel, {})
                checked = bool(search) and all(seen.get(target + 1 + k) == x for k, x in enumerate(search))
                if changes := block_changes(target, search, replace):
                    out.append(_hashed({"kind": E.CODE_EDIT, "file": rel, "tool": "apply_diff", "call_id": None,
                                        "op": "update", **edit_ranges(changes), **context_fields([(target + 1, replace)]),
                                        "file_before_sha": None, "file_after_sha": None,
                                        **({} if checked else {"placed": "start_line"})}))
                lines = None
            else:
                out.append(_hashed({"kind": E.CODE_EDIT, "file": rel, "tool": "apply_diff", "call_id": None,
                                    "op": "update", "before_range": None, "after_range": None,
                                    "before_text": join_lines(search), "after_text": join_lines(replace),
                                    "file_before_sha": None, "file_after_sha": None}))
                lines = None
            delta += len(replace) - len(search)
        if lines is not None:
            self.files[rel] = join_lines(lines)
        else:
            self.files.pop(rel, None)
        self.seen.pop(rel, None)  # the lines it showed have moved
        return out

    def inserted(self, rel: str, inp: dict[str, Any]) -> list[dict[str, Any]]:
        """Roo Code's insert_content (IBM Bob's too): its lines go before line N, or after the last
        for 0, where Roo puts them without matching any text: at that line even without a copy of
        the file, but for an append to a file this session never saw whole (its end unknown)."""
        add = split_lines(str(inp.get("content") or ""))
        raw = str(inp.get("line") or "").strip()
        known = self.files.pop(rel, None)
        self.seen.pop(rel, None)  # the lines it showed below the insertion have moved
        if not add or not raw.isdigit():
            self.cap.ignored["insert_content without lines or a line number"] += 1
            return []
        n = int(raw)
        base = {"kind": E.CODE_EDIT, "file": rel, "tool": "insert_content", "call_id": None, "op": "update"}
        if known is not None:
            lines = split_lines(known)
            at = len(lines) if n == 0 else min(n - 1, len(lines))
            new = lines[:at] + add + lines[at:]
            self.files[rel] = join_lines(new)
            return [_hashed({**base, **edit_ranges(block_changes(at, [], add), lines, new),
                             **context_fields([(at + 1, add)]), "file_before_sha": E.git_blob_sha(known),
                             "file_after_sha": E.git_blob_sha(join_lines(new))})]
        if n == 0:
            return [_hashed({**base, "before_range": None, "after_range": None, "before_text": "",
                             "after_text": join_lines(add), "file_before_sha": None, "file_after_sha": None})]
        return [_hashed({**base, **edit_ranges(block_changes(n - 1, [], add)), **context_fields([(n, add)]),
                         "file_before_sha": None, "file_after_sha": None})]

    def search_replaced(self, rel: str, inp: dict[str, Any]) -> list[dict[str, Any]]:
        """Roo Code's search_and_replace (Kilo Code's too): done again on this session's copy of
        the file, its lines those a line diff of the copy before and after gives. Without a copy,
        a text's replacement is kept as its texts, without lines (nothing says where its matches
        were); a pattern's is not kept (its search is not the file's text)."""
        reps = replacements(inp)
        known = self.files.pop(rel, None)
        self.seen.pop(rel, None)  # the lines it showed may have changed
        base = {"kind": E.CODE_EDIT, "file": rel, "tool": "search_and_replace", "call_id": None, "op": "update"}
        if known is None:
            if patterns := sum(r.regex for r in reps):
                self.cap.ignored["search_and_replace by pattern on a file this session never saw whole"] += patterns
            return [_hashed({**base, "before_range": None, "after_range": None, "before_text": r.search,
                             "after_text": r.replace, "file_before_sha": None, "file_after_sha": None})
                    for r in reps if not r.regex]
        text: str | None = known
        for r in reps:
            text = replaced(text, r) if text is not None else None
        if text is None:
            self.cap.ignored["search_and_replace whose pattern is not read (the file after it is not known)"] += 1
            return []
        self.files[rel] = text
        old, new = split_lines(known), split_lines(text)
        changes = block_changes(0, old, new)
        if not changes:
            return []
        return [_hashed({**base, **edit_ranges(changes, old, new), "file_before_sha": E.git_blob_sha(known), "file_after_sha": E.git_blob_sha(text)})]

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


def _results_joined(blocks: list[Any]) -> list[Any]:
    """A user message's blocks with each result header that stands alone (`[tool for 'p'] Result:`,
    Roo Code's way) joined to the text blocks after it that hold the result."""
    out: list[Any] = []
    open_header = False
    for b in blocks:
        text = b.get("text") if isinstance(b, dict) and b.get("type") == "text" else None
        if isinstance(text, str) and open_header and not _RESULT.match(text) \
                and not text.startswith("<environment_details>"):
            out[-1] = {**out[-1], "text": out[-1]["text"] + text}
            continue
        m = _RESULT.match(text) if isinstance(text, str) else None
        open_header = bool(m and not text[m.end():].strip())
        out.append(b)
    return out


def _diffs(inp: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    """(path, SEARCH/REPLACE text, the start line given apart) of an apply_diff: one file
    (`path`, `diff`, the older `start_line`), or several (`args` of `<file>` elements)."""
    if isinstance(inp.get("diff"), str) and inp.get("path"):
        start = str(inp.get("start_line") or "")
        return [(str(inp["path"]), inp["diff"], int(start) if start.isdigit() else None)]
    out = []
    for path, body in _ROO_FILE.findall(str(inp.get("args") or "")):
        for diff in re.findall(r"<diff>(.*?)</diff>", body, re.DOTALL):
            content = re.search(r"<content>\n?(.*?)</content>", diff, re.DOTALL)
            start = re.search(r"<start_line>\s*(\d+)\s*</start_line>", diff)
            out.append((path.strip(), content.group(1) if content else diff, int(start.group(1)) if start else None))
    return out


def _roo_blocks(diff: str, hint: int | None) -> list[tuple[int | None, list[str], list[str]]]:
    """(start line, SEARCH lines, REPLACE lines) of each block; line numbers (`12 | `) that
    prefix every SEARCH line are taken off, as Roo Code does."""
    out = []
    for start, search, replace in _ROO_BLOCK.findall(diff):
        s, r = split_lines(search), split_lines(replace)
        if s and all(_NUMBERED.match(x) for x in s if x.strip()):
            s = [_NUMBERED.sub("", x, count=1) for x in s]
            r = [_NUMBERED.sub("", x, count=1) for x in r]
        out.append((int(start) if start else hint, s, r))
    return out


def _nearest(lines: list[str], search: list[str], target: int | None) -> int | None:
    """Where `search` stands in `lines` (exactly, else ignoring trailing white space), the
    occurrence nearest `target` (0-based) when it stands in several places."""
    n = len(search)
    if not n:
        return None
    for key in (lambda x: x, lambda x: x.rstrip()):
        want = [key(x) for x in search]
        keyed = [key(x) for x in lines]
        hits = [i for i in range(len(lines) - n + 1) if keyed[i:i + n] == want]
        if hits:
            return min(hits, key=lambda i: abs(i - target)) if target is not None else hits[0]
    return None


def _unnumbered(text: str) -> str:
    """A read's text without the line numbers older Roo Code put before every line (`3 | x`)."""
    lines = split_lines(text)
    if lines and all(_NUMBERED.match(x) for x in lines if x.strip()):
        return join_lines([_NUMBERED.sub("", x, count=1) for x in lines])
    return text
