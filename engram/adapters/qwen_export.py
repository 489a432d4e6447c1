"""Qwen Code's `/export md` file (`qwen-code-export-<time>.md`, written in the working directory;
packages/cli/src/ui/utils/export), which projects commit.

The export starts `# Chat Session Export` with the session's id and start time, then its messages
under `## User` / `## Assistant`, and each tool call as `### Tool: NAME: description`, its
`**Status**` (completed, failed…), its `**Input:**` as JSON and its `**Output:**`. An `Edit` or
`WriteFile` output shows the whole file after the call (`*Diff for `name`:*` and a fence holding
the file, not a diff): the file before an `Edit` is that text with its `new_string` put back to
`old_string`, so the edit's ranges are a line diff of two real texts, exact. A `WriteFile` over a
file the session had not seen is a creation (every line written). A whole `ReadFile` (no offset
or limit) is a code.read and this session's copy of the file.

The fenced text is the file as it is, up to its last newline (a fence of four back quotes when the
file holds three): on berlogabob/flutter-github-issues-todo, 85 of the 95 last states of a file
the exports show are byte for byte blobs of the repository, so the file hashes are kept. What the
export does not keep: times (only the session's start; every event takes it) and the working
directory (its calls name absolute paths: give `--map`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from engram.adapters.base import Capture, PathMapper, SourceSpan
from engram.adapters.unified import edit_from_texts, split_lines
from engram.tape import events as E
from engram.words import whole_text

HARNESS: Final = "qwen-code"
HEAD: Final = b"# Chat Session Export"
_SECTION: Final = re.compile(r"## User|## Assistant|### Tool: [^\n]*")
_META: Final = re.compile(r"^- \*\*(Session ID|Start Time)\*\*: `?([^`\n]+)`?$", re.MULTILINE)
_FENCE: Final = re.compile(r"^(`{3,})[\w+-]*\s*$")
_STATUS: Final = re.compile(r"^\*\*Status\*\*: (\w+)", re.MULTILINE)
_INPUT: Final = re.compile(r"\*\*Input:\*\*\n(`{3,})json\n(.*?)\n\1\n", re.DOTALL)
_OUTPUT: Final = re.compile(r"\*\*Output:\*\*\n")
# a fence as long as it must be (```` when the text holds ```), the text as is up to its last newline
_SHOWN: Final = re.compile(r"\A\s*(?:\*Diff for `[^`\n]*`:\*\n)?(`{3,})[\w+-]*\n(.*)\n\1\s*\Z", re.DOTALL)
EDITS: Final = frozenset({"Edit", "WriteFile"})
UNKEPT: Final = ["times (the export keeps only the session's start)", "the working directory"]


def is_export(head: bytes) -> bool:
    return head.lstrip().startswith(HEAD) and b"- **Session ID**:" in head[:4096]


def started(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    m = re.search(r"^- \*\*Start Time\*\*: (\S+)$", head, re.MULTILINE)
    return m.group(1) if m else None


def parse_export(sources: list[SourceSpan], mapper_for: Callable[[str | None], PathMapper]) -> Capture:
    src = sources[0]
    data = src.path.read_bytes()
    src.end = len(data)
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    meta: dict[str, str] = {}
    for key, value in _META.findall(text[:4096]):  # the first: a message may quote another export
        meta.setdefault(key, value)
    cap = Capture(HARNESS, str(meta.get("Session ID") or src.path.stem), sources)
    cap.session_id = str(meta.get("Session ID") or src.path.stem)
    ts = meta.get("Start Time")
    cap.meta = {"harness_version": None, "cwd": None, "git_branch": None, "git_head": None, "model": None,
                "started": ts, "unkept": list(UNKEPT)}
    reader = _Reader(cap, mapper_for(None), ts)
    heads = _headings(text)
    for i, (at, end, head) in enumerate(heads):
        cap.cursor = (0, at)
        reader.section(head, text[end: heads[i + 1][0] if i + 1 < len(heads) else len(text)])
    return cap


def _headings(text: str) -> list[tuple[int, int, str]]:
    """The section headings outside fenced blocks: (start, end, heading). A read's output can
    hold another export (a session reading an earlier one): its headings are text, not sections."""
    out: list[tuple[int, int, str]] = []
    fence = ""
    at = 0
    for line in text.split("\n"):
        end = at + len(line)
        if fence:
            if line.strip() == fence:
                fence = ""
        elif m := _FENCE.match(line):
            fence = m.group(1)
        elif _SECTION.fullmatch(line):
            out.append((at, end, line))
        at = end + 1
    if fence:  # a fence never closed (a cut file): every heading line counts, as if there were none
        return [(m.start(), m.end(), m.group(0)) for m in re.finditer(rf"^(?:{_SECTION.pattern})$", text, re.MULTILINE)]
    return out


class _Reader:
    def __init__(self, cap: Capture, mapper: PathMapper, ts: str | None) -> None:
        self.cap, self.mapper, self.ts = cap, mapper, ts
        self.files: dict[str, str] = {}  # this session's copy of the files it read whole or wrote
        self.calls = 0

    def add(self, ev: dict[str, Any]) -> None:
        if self.ts:
            ev["ts"] = self.ts
        self.cap.add(ev)

    def section(self, head: str, body: str) -> None:
        if head == "## User" and body.strip():
            self.add({"kind": E.MSG_IN, "text": body.strip("\n")})
        elif head == "## Assistant" and body.strip():
            self.add({"kind": E.MSG_OUT, "text": body.strip("\n"), "block": "text"})
        elif head.startswith("### Tool: "):
            self.tool(head.removeprefix("### Tool: ").split(":", 1)[0].strip(), body)

    def tool(self, name: str, body: str) -> None:
        self.calls += 1
        call = f"call-{self.calls}"
        status = m.group(1) if (m := _STATUS.search(body)) else ""
        try:
            args = whole_text(json.loads(m.group(2))) if (m := _INPUT.search(body)) else {}
        except ValueError:
            args = {}
        args = args if isinstance(args, dict) else {}
        out = body[m.end():] if (m := _OUTPUT.search(body)) else ""
        ok = status == "completed"
        self.add({"kind": E.TOOL_CALL, "call_id": call, "name": name, "input": args})
        self.add({"kind": E.TOOL_RESULT, "call_id": call, "name": name, "is_error": not ok, "exit_code": None,
                  "stdout": out.strip("\n"), "stderr": ""})
        shown = m.group(2) if (m := _SHOWN.match(out)) else None
        path = str(args.get("file_path") or args.get("absolute_path") or "")
        if name in EDITS and not ok:
            self.cap.ignored[f"{name} that did not complete ({status or 'no status'})"] += 1
        elif name in EDITS:
            self.edit(call, name, path, args, shown)
        elif name == "ReadFile" and ok and shown is not None and "offset" not in args and "limit" not in args:
            self.read(call, path, shown)

    def read(self, call: str, path: str, text: str) -> None:
        rel = self.mapper.to_repo(path) if path else None
        if rel is None:
            return
        self.files[rel] = text
        self.add({"kind": E.CODE_READ, "call_id": call, "file": rel, "range": [1, len(split_lines(text))],
                  "text": self.files[rel]})

    def edit(self, call: str, name: str, path: str, args: dict[str, Any], shown: str | None) -> None:
        rel = self.mapper.to_repo(path) if path else None
        if rel is None:
            self.cap.drop(self.mapper.drop_reason(path) if path else "an edit naming no file")
            return
        after = shown
        before = self.before(rel, name, args, after)
        if after is None or (before is None and name == "Edit"):
            self.cap.drop("an Edit whose file the export does not show whole")
            self.files.pop(rel, None)
            return
        fields = edit_from_texts(before, after)
        self.files[rel] = after
        if fields is None:
            self.cap.ignored[f"{name} that changed nothing"] += 1
            return
        self.add({"kind": E.CODE_EDIT, "call_id": call, "file": rel, "tool": name, **fields})

    def before(self, rel: str, name: str, args: dict[str, Any], after: str | None) -> str | None:
        """The file before the call: the session's copy when the call turns it into `after`, else
        (an Edit) `after` with its new string put back to the old one, where that is unambiguous."""
        known = self.files.get(rel)
        old, new = args.get("old_string"), args.get("new_string")
        if name == "WriteFile":
            return known
        if not isinstance(old, str) or not isinstance(new, str) or after is None:
            return None
        every = bool(args.get("replace_all"))
        if known is not None and (known.replace(old, new) if every else known.replace(old, new, 1)) == after:
            return known
        if new and (every or after.count(new) == 1):
            return after.replace(new, old)
        return None
