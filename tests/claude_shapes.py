"""Small Claude Code sessions in the shape of real transcripts (2.1.x), built call by call.

A `Session` keeps the files as its tools would see them and writes each Write, Edit, MultiEdit
and Read the way Claude Code records it: the assistant's `tool_use`, then the user record with
its `tool_result` and `toolUseResult` (`structuredPatch` hunks with three lines of context,
`originalFile`, `content` for a Write). The hunks are made here with difflib, independently of
engram's own diff code, in jsdiff's shape (`oldStart` at the insertion point of an empty side).
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def structured_patch(old: str, new: str, context: int = 3) -> list[dict[str, Any]]:
    """The jsdiff-shaped hunks that turn `old` into `new` (lines without their newline)."""
    hunks: list[dict[str, Any]] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context):
        m = _HEADER.match(line)
        if m:
            o_n = int(m[2]) if m[2] is not None else 1
            n_n = int(m[4]) if m[4] is not None else 1
            # difflib, like diff -u, names the line before an empty side; jsdiff the one after
            hunks.append({"oldStart": int(m[1]) + (o_n == 0), "oldLines": o_n,
                          "newStart": int(m[3]) + (n_n == 0), "newLines": n_n, "lines": []})
        elif hunks and line[:1] in (" ", "-", "+") and not line.startswith(("---", "+++")):
            hunks[-1]["lines"].append(line)
    return hunks


@dataclass
class Session:
    """One session's records; `files` holds what its tools last saw of each path (relative to cwd)."""

    cwd: Path
    session_id: str
    day: str = "2026-03-01"
    files: dict[str, str] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    version: str = "2.1.39"
    _n: int = 0

    def _ts(self) -> str:
        self._n += 1
        return f"{self.day}T10:{self._n // 60:02d}:{self._n % 60:02d}.000Z"

    def _base(self) -> dict[str, Any]:
        uuid = f"{self.session_id[:8]}-0000-4000-8000-{len(self.records):012d}"
        parent = self.records[-1]["uuid"] if self.records else None
        return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": str(self.cwd),
                "sessionId": self.session_id, "version": self.version, "gitBranch": "main", "uuid": uuid,
                "timestamp": self._ts()}

    def prompt(self, text: str) -> None:
        self.records.append({**self._base(), "type": "user", "message": {"role": "user", "content": text}})

    def _call(self, name: str, inp: dict[str, Any], result_text: str, tur: dict[str, Any]) -> str:
        call_id = f"toolu_{self.session_id[:6]}{len(self.records):04d}"
        self.records.append({**self._base(), "type": "assistant", "message": {
            "model": "claude-opus-4-6", "role": "assistant", "type": "message",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": inp}]}})
        self.records.append({**self._base(), "type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": call_id, "type": "tool_result", "content": result_text}]}, "toolUseResult": tur})
        return call_id

    def write(self, rel: str, content: str, *, keep_original: bool = True, keep_patch: bool = True) -> str:
        """A Write; of a file that exists, an overwrite (`keep_original`/`keep_patch`: whether the
        result still holds `originalFile`/`structuredPatch`, as older or trimmed transcripts may not)."""
        path = str(self.cwd / rel)
        old = self.files.get(rel)
        self.files[rel] = content
        if old is None:
            tur = {"type": "create", "filePath": path, "content": content, "structuredPatch": [], "originalFile": None}
            return self._call("Write", {"file_path": path, "content": content},
                              f"File created successfully at: {path}", tur)
        tur = {"type": "update", "filePath": path, "content": content}
        if keep_patch:
            tur["structuredPatch"] = structured_patch(old, content)
        if keep_original:
            tur["originalFile"] = old
        return self._call("Write", {"file_path": path, "content": content},
                          f"The file {path} has been updated successfully.", tur)

    def edit(self, rel: str, old_string: str, new_string: str) -> str:
        path = str(self.cwd / rel)
        old = self.files[rel]
        assert old.count(old_string) == 1, "an Edit's old_string is unique in the file"
        new = old.replace(old_string, new_string, 1)
        self.files[rel] = new
        tur = {"filePath": path, "oldString": old_string, "newString": new_string, "originalFile": old,
               "structuredPatch": structured_patch(old, new), "userModified": False, "replaceAll": False}
        return self._call("Edit", {"file_path": path, "old_string": old_string, "new_string": new_string},
                          f"The file {path} has been updated successfully.", tur)

    def multi_edit(self, rel: str, edits: list[tuple[str, str]]) -> str:
        path = str(self.cwd / rel)
        old = new = self.files[rel]
        for a, b in edits:
            new = new.replace(a, b, 1)
        self.files[rel] = new
        pairs = [{"old_string": a, "new_string": b, "replace_all": False} for a, b in edits]
        tur = {"filePath": path, "edits": pairs, "originalFileContents": old,
               "structuredPatch": structured_patch(old, new), "userModified": False}
        return self._call("MultiEdit", {"file_path": path, "edits": pairs},
                          f"Applied {len(edits)} edits to {path}", tur)

    def read(self, rel: str) -> str:
        path = str(self.cwd / rel)
        text = self.files[rel]
        n = len(text.splitlines())
        numbered = "".join(f"{i:>6}→{line}\n" for i, line in enumerate(text.splitlines(), 1))
        tur = {"type": "text", "file": {"filePath": path, "content": text, "numLines": n + 1, "startLine": 1,
                                        "totalLines": n + 1}}
        return self._call("Read", {"file_path": path}, numbered, tur)

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        p = folder / f"{self.session_id}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        return p


def code_lines(tag: str, n: int, start: int = 0) -> list[str]:
    """Lines of code whose tokens are unique to (tag, line): fingerprints never collide by accident."""
    return [f"    result_{tag}{i} = transform_{tag}{i}(source_{tag}{i}, limit_{tag}{i}) + offset_{tag}{i} * {i + 3}"
            for i in range(start, start + n)]


def joined(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)
