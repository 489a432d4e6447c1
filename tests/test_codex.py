"""Codex CLI capture, on rollouts built here from the documented format (transcript-formats.md §2)
and on the schema-coverage fixture from jazzyalex/agent-sessions (see tests/fixtures/codex/NOTICE.md).

Every expected range and text below is worked out by hand from the file and the patch in the
test, and file hashes come from `git hash-object`, never from the adapter itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import git, run_engram, shown_events
from engram.adapters.base import Capture, SourceSpan
from engram.adapters.codex import parse_output, read_spec, shell_effect
from engram.capture.discovery import Job, detect_format
from engram.capture.pipeline import parse_job

FIXTURE = Path(__file__).parent / "fixtures" / "codex" / "codex_small_schema_coverage.jsonl"
SID = "019a0000-0000-7000-8000-0000000000aa"

APP = (
    "import os\n"                      # 1
    "\n"                               # 2
    "def greet(name):\n"               # 3
    '    return "hi " + name\n'        # 4
    "\n"                               # 5
    "def main():\n"                    # 6
    '    print(greet("x"))\n'          # 7
    "    return 0\n"                   # 8
)
NOTES = "# Notes\n## Setup\nstep\n## Usage\nstep\n"
README = "hello\nworld\n"


# ---------------------------------------------------------------- builders


def blob(text: str) -> str:
    """The git blob id of `text`, from git itself."""
    return subprocess.run(["git", "hash-object", "--stdin"], input=text.encode(), capture_output=True,
                          check=True).stdout.decode().strip()


def patch(*body: str) -> str:
    return "*** Begin Patch\n" + "\n".join(body) + "\n*** End Patch\n"


def custom_ok(*files: str) -> str:
    summary = "Success. Updated the following files:\n" + "".join(f"M {f}\n" for f in files)
    return json.dumps({"output": summary, "metadata": {"exit_code": 0, "duration_seconds": 0.0}})


def custom_fail(message: str) -> str:
    return json.dumps({"output": message, "metadata": {"exit_code": 1, "duration_seconds": 0.0}})


def shell_out(code: int, body: str) -> str:
    """shell_command's output text (0.60)."""
    return f"Exit code: {code}\nWall time: 0.1 seconds\nOutput:\n{body}"


def exec_out(code: int, body: str) -> str:
    """exec_command's output text (unified exec, 0.10x)."""
    return f"Chunk ID: 3f2a1b\nWall time: 0.0102 seconds\nProcess exited with code {code}\nOriginal token count: 12\nOutput:\n{body}"


def shell_json(code: int, body: str) -> str:
    """The older `shell` tool's output: a JSON string with metadata."""
    return json.dumps({"output": body, "metadata": {"exit_code": code, "duration_seconds": 0.1}})


class Rollout:
    """Writes a rollout line by line in the envelope Codex uses."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def add(self, typ: str, payload: dict[str, Any]) -> "Rollout":
        n = len(self.records)
        self.records.append({"timestamp": f"2025-11-22T20:{n // 60:02d}:{n % 60:02d}.000Z", "type": typ,
                             "payload": payload})
        return self

    def meta(self, cwd: Path, commit: str | None = None, **extra: Any) -> "Rollout":
        payload = {"id": SID, "timestamp": "2025-11-22T20:45:35.590Z", "cwd": str(cwd), "originator": "codex_cli_rs",
                   "cli_version": "0.60.1", "instructions": None, "source": "cli", "model_provider": "openai", **extra}
        if commit:
            payload["git"] = {"commit_hash": commit, "branch": "main", "repository_url": "https://example.invalid/r"}
        return self.add("session_meta", payload)

    def turn(self, cwd: Path, model: str = "gpt-5.1-codex-max") -> "Rollout":
        return self.add("turn_context", {"cwd": str(cwd), "approval_policy": "on-request",
                                         "sandbox_policy": {"type": "workspace-write"}, "model": model,
                                         "effort": "high", "summary": "auto"})

    def message(self, role: str, text: str) -> "Rollout":
        kind = "input_text" if role == "user" else "output_text"
        return self.add("response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    def event(self, typ: str, **fields: Any) -> "Rollout":
        return self.add("event_msg", {"type": typ, **fields})

    def custom(self, call_id: str, raw: str, output: str | None, name: str = "apply_patch") -> "Rollout":
        self.add("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                                   "name": name, "input": raw})
        if output is not None:
            self.add("response_item", {"type": "custom_tool_call_output", "call_id": call_id, "output": output})
        return self

    def function(self, call_id: str, name: str, args: dict[str, Any], output: Any = None) -> "Rollout":
        self.add("response_item", {"type": "function_call", "name": name, "arguments": json.dumps(args),
                                   "call_id": call_id})
        if output is not None:
            self.add("response_item", {"type": "function_call_output", "call_id": call_id, "output": output})
        return self

    def write(self, path: Path, tail: bytes = b"") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in self.records) + tail)
        return path

    def offset_of(self, index: int) -> int:
        """Byte offset of the record at `index` in the written file."""
        return sum(len(json.dumps(r).encode()) + 1 for r in self.records[:index])


def capture(path: Path, repo: Path) -> Capture:
    return parse_job(Job("codex", [SourceSpan("main", path)]), repo, [], 1 << 24)


def kinds(cap: Capture, kind: str) -> list[dict[str, Any]]:
    return [e for e in cap.events if e["kind"] == kind]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A git repository with src/app.py, docs/notes.md and README.md committed; (root, HEAD)."""
    root = (tmp_path / "repo").resolve()
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "app.py").write_text(APP)
    (root / "docs" / "notes.md").write_text(NOTES)
    (root / "README.md").write_text(README)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root, git(root, "rev-parse", "HEAD").strip()


MULTI_HUNK = patch(
    "*** Update File: src/app.py",
    "@@",
    " import os",
    "+import sys",
    " ",
    " def greet(name):",
    '-    return "hi " + name',
    '+    return "hello " + name',
    "@@ def main():",
    '-    print(greet("x"))',
    '+    print(greet(sys.argv[1]))',
    "     return 0",
)
APP_AFTER = (
    "import os\n"                      # 1
    "import sys\n"                     # 2  inserted before old line 2
    "\n"                               # 3
    "def greet(name):\n"               # 4
    '    return "hello " + name\n'     # 5  was old line 4
    "\n"                               # 6
    "def main():\n"                    # 7
    "    print(greet(sys.argv[1]))\n"  # 8  was old line 7
    "    return 0\n"                   # 9
)


# ---------------------------------------------------------------- carriers


def test_custom_tool_call_multi_hunk_update(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root).custom("call_1", MULTI_HUNK, custom_ok("src/app.py"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    (edit,) = kinds(cap, "code.edit")
    assert edit["file"] == "src/app.py" and edit["op"] == "update" and edit["tool"] == "apply_patch"
    assert edit["call_id"] == "call_1" and edit["ts"] == r.records[-1]["timestamp"]
    # Three changed runs: an insertion before old line 2, old 4 → new 5, old 7 → new 8.
    assert edit["hunks"] == [[2, 1, 2, 2], [4, 4, 5, 5], [7, 7, 8, 8]]
    assert edit["before_range"] == [2, 7] and edit["after_range"] == [2, 8]
    assert edit["before_text"] == "".join(APP.splitlines(keepends=True)[1:7])
    assert edit["after_text"] == "".join(APP_AFTER.splitlines(keepends=True)[1:8])
    assert edit["file_before_sha"] == blob(APP) and edit["file_after_sha"] == blob(APP_AFTER)
    assert edit["before_sha"] == hashlib.sha256(edit["before_text"].encode()).hexdigest()
    assert edit["after_sha"] == hashlib.sha256(edit["after_text"].encode()).hexdigest()
    (result,) = kinds(cap, "tool.result")
    assert result["is_error"] is False and result["exit_code"] == 0 and result["name"] == "apply_patch"


def test_function_call_arguments_input_add_file(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    p = patch("*** Add File: src/new_mod.py", "+A = 1", "+B = 2")
    r = Rollout().meta(root, head).turn(root).function(
        "call_2", "apply_patch", {"input": p}, shell_out(0, "Success. Updated the following files:\nA src/new_mod.py\n"))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (edit["file"], edit["op"]) == ("src/new_mod.py", "create")
    assert edit["before_range"] == [1, 0] and edit["after_range"] == [1, 2]
    assert edit["before_text"] == "" and edit["after_text"] == "A = 1\nB = 2\n"
    assert edit["file_before_sha"] is None and edit["file_after_sha"] == blob("A = 1\nB = 2\n")


def test_shell_command_vector_delete(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    args = {"command": ["apply_patch", patch("*** Delete File: README.md")], "workdir": str(root)}
    r = Rollout().meta(root, head).turn(root).function("call_3", "shell", args, shell_json(0, "Success.\nD README.md\n"))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (edit["file"], edit["op"]) == ("README.md", "delete")
    assert edit["before_range"] == [1, 2] and edit["after_range"] == [1, 0]
    assert edit["before_text"] == README and edit["after_text"] == ""
    assert edit["file_before_sha"] == blob(README) and edit["file_after_sha"] is None


def test_bash_lc_heredoc_relative_to_workdir(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Update File: app.py", "@@", '     print(greet("x"))', "-    return 0", "+    return 1")
    args = {"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{body}EOF\n"], "workdir": str(root / "src")}
    r = Rollout().meta(root, head).turn(root).function("call_4", "shell", args, shell_json(0, "Success."))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert edit["file"] == "src/app.py"
    assert edit["before_range"] == [8, 8] and edit["after_range"] == [8, 8]
    assert (edit["before_text"], edit["after_text"]) == ("    return 0\n", "    return 1\n")
    assert "hunks" not in edit


def test_shell_command_string_heredoc_with_cd_moves_a_file(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Update File: app.py", "*** Move to: cli.py", "@@", "-import os", "+import os.path")
    args = {"command": f"cd src && apply_patch <<'EOF'\n{body}EOF", "workdir": str(root), "timeout_ms": 120000}
    r = Rollout().meta(root, head).turn(root).function("call_5", "shell_command", args,
                                                        shell_out(0, "Success. Updated the following files:\nM src/cli.py\n"))
    edit, gone = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    # Filed under the destination, where explain asks for it; the source is removed.
    assert (edit["op"], edit["file"], edit["from_file"]) == ("move", "src/cli.py", "src/app.py")
    assert edit["before_range"] == [1, 1] and edit["after_range"] == [1, 1]
    assert (edit["before_text"], edit["after_text"]) == ("import os\n", "import os.path\n")
    assert edit["file_after_sha"] == blob(APP.replace("import os\n", "import os.path\n", 1))
    assert (gone["op"], gone["file"], gone["moved_to"], gone["after_text"]) == ("delete", "src/app.py", "src/cli.py", "")
    assert gone["file_before_sha"] == blob(APP) and gone["call_id"] == "call_5"


def test_exec_command_heredoc_with_header_anchor(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    # "step" is line 3 and line 5; the `@@ ## Usage` anchor (line 4) selects line 5.
    body = patch("*** Update File: docs/notes.md", "@@ ## Usage", "-step", "+run it")
    args = {"cmd": f'apply_patch <<"EOF"\n{body}EOF\n', "workdir": str(root), "yield_time_ms": 1000}
    r = Rollout().meta(root, head).turn(root).function("call_6", "exec_command", args, exec_out(0, "Success."))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert edit["file"] == "docs/notes.md"
    assert edit["before_range"] == [5, 5] and edit["after_range"] == [5, 5]
    assert edit["file_after_sha"] == blob("# Notes\n## Setup\nstep\n## Usage\nrun it\n")


def test_local_shell_call_vector(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Update File: README.md", "@@", " hello", "-world", "+there")
    r = Rollout().meta(root, head).turn(root)
    r.add("response_item", {"type": "local_shell_call", "call_id": "call_7", "status": "completed",
                            "action": {"type": "exec", "command": ["apply_patch", body],
                                       "working_directory": str(root)}})
    r.add("response_item", {"type": "function_call_output", "call_id": "call_7", "output": shell_json(0, "Success.")})
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    (call,) = kinds(cap, "tool.call")
    assert call["name"] == "local_shell" and call["input"]["command"][0] == "apply_patch"
    (edit,) = kinds(cap, "code.edit")
    assert (edit["file"], edit["before_range"], edit["after_range"]) == ("README.md", [2, 2], [2, 2])


def test_end_of_file_marker(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    # "step" occurs at lines 3 and 5: *** End of File pins the hunk to the last line.
    body = patch("*** Update File: docs/notes.md", "@@", "-step", "+last step", "*** End of File")
    r = Rollout().meta(root, head).turn(root).custom("c", body, custom_ok("docs/notes.md"))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert edit["before_range"] == [5, 5] and edit["after_range"] == [5, 5]


# ---------------------------------------------------------------- success, failure, sequence


def test_failed_patch_is_not_credited_and_not_applied(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    bad = patch("*** Update File: src/app.py", "@@", "-import os", "+import re")
    good = patch("*** Update File: src/app.py", "@@", " import os", "+import json")
    r = Rollout().meta(root, head).turn(root)
    r.custom("bad", bad, custom_fail("apply_patch verification failed: Failed to find expected lines"))
    r.custom("good", good, custom_ok("src/app.py"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    (edit,) = kinds(cap, "code.edit")
    assert edit["call_id"] == "good"
    # Located against the unchanged file: `import os` is still line 1.
    assert edit["before_range"] == [2, 1] and edit["after_range"] == [2, 2]
    results = {e["call_id"]: e for e in kinds(cap, "tool.result")}
    assert results["bad"]["is_error"] is True and results["bad"]["exit_code"] == 1
    assert results["good"]["is_error"] is False


def test_later_patches_locate_against_earlier_ones(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    second = patch("*** Update File: src/app.py", "@@", "     print(greet(sys.argv[1]))", "-    return 0", "+    return 2")
    r = Rollout().meta(root, head).turn(root)
    r.custom("one", MULTI_HUNK, custom_ok("src/app.py")).custom("two", second, custom_ok("src/app.py"))
    first, edit = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert first["file_after_sha"] == blob(APP_AFTER) == edit["file_before_sha"]
    assert edit["before_range"] == [9, 9] and edit["after_range"] == [9, 9]  # line 8 before the first patch


def test_patch_apply_end_credits_an_output_that_does_not_say(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    yes = patch("*** Update File: README.md", "@@", "-hello", "+hi")
    no = patch("*** Update File: docs/notes.md", "@@", "-# Notes", "+# Notes!")
    r = Rollout().meta(root, head).turn(root)
    r.custom("yes", yes, "[1 file changed]").custom("no", no, "[no result]")
    r.event("patch_apply_end", call_id="no", success=False, stdout="", stderr="boom", changes={})
    r.event("patch_apply_end", call_id="yes", success=True, stdout="", stderr="",
            changes={str(root / "README.md"): {"type": "update", "unified_diff": "", "move_path": None}})
    path = r.write(tmp_path / "s.jsonl")
    cap = capture(path, root)
    (edit,) = kinds(cap, "code.edit")
    assert edit["file"] == "README.md" and edit["before_range"] == [1, 1]
    # The edit sits on the patch_apply_end line that confirmed it.
    assert cap.positions[cap.events.index(edit)] == (0, r.offset_of(len(r.records) - 1))
    assert edit["ts"] == r.records[-1]["timestamp"]


def test_patch_apply_end_then_output_credits_once(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Update File: README.md", "@@", "-hello", "+hi")
    r = Rollout().meta(root, head).turn(root).custom("c", body, None)
    r.event("patch_apply_end", call_id="c", success=True, changes={})
    r.add("response_item", {"type": "custom_tool_call_output", "call_id": "c", "output": custom_ok("README.md")})
    assert len(kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")) == 1


def test_compaction_keeps_earlier_edits(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    second = patch("*** Update File: src/app.py", "@@", "-import sys", "+import sys, re")
    r = Rollout().meta(root, head).turn(root).message("user", "make greet friendlier")
    r.custom("before", MULTI_HUNK, custom_ok("src/app.py"))
    r.add("compacted", {"message": "", "replacement_history": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "make greet friendlier"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]})
    r.event("context_compacted").turn(root)
    r.custom("after", second, custom_ok("src/app.py"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    before, after = kinds(cap, "code.edit")
    assert before["call_id"] == "before" and after["call_id"] == "after"
    assert after["before_range"] == [2, 2]  # `import sys` exists only because the first edit was kept
    (compact,) = kinds(cap, "compact")
    assert compact == {"kind": "compact", "ts": r.records[5]["timestamp"], "trigger": "codex-compacted", "message": ""}
    assert len(kinds(cap, "msg.in")) == 1  # the replacement history is not replayed as new messages
    assert cap.ignored["event_msg/context_compacted"] == 1


def test_unlocatable_hunk_records_null_ranges(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A hunk no known state of its file holds gets no ranges; the session's later patches of the
    file are placed by their context in the last state it had, and say so."""
    root, head = repo
    stale = patch("*** Update File: src/app.py", "@@", "     x = compute()", "-    return 42", "+    return 43")
    fine = patch("*** Update File: src/app.py", "@@", "-import os", "+import os.path")
    r = Rollout().meta(root, head).turn(root)
    r.custom("stale", stale, custom_ok("src/app.py")).custom("fine", fine, custom_ok("src/app.py"))
    first, second = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert first["before_range"] is None and first["after_range"] is None
    assert (first["before_text"], first["after_text"]) == ("    return 42\n", "    return 43\n")
    assert first["file_before_sha"] == blob(APP) and first["file_after_sha"] is None
    # After an edit we could not replay, the file itself is unknown: later patches are placed by
    # their context in its last known state, marked as such, without file hashes.
    assert second["before_range"] == [1, 1] and second["after_range"] == [1, 1]
    assert second["placed"] == "earlier in the session" and "placed" not in first
    assert second["file_before_sha"] is None and second["file_after_sha"] is None


def test_base_is_the_session_commit_not_the_working_tree(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    (root / "src" / "app.py").write_text("# two lines added\n# after the session\n" + APP)
    body = patch("*** Update File: src/app.py", "@@", "-    return 0", "+    return 5")
    r = Rollout().meta(root, head).turn(root).custom("c", body, custom_ok("src/app.py"))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert edit["before_range"] == [8, 8] and edit["file_before_sha"] == blob(APP)


def test_ghost_snapshot_parent_is_the_commit_without_git_meta(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    (root / "src" / "app.py").write_text("# changed since\n" + APP)
    body = patch("*** Update File: src/app.py", "@@", "-    return 0", "+    return 5")
    r = Rollout().meta(root).turn(root)
    r.add("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "d8b27b2e", "parent": head,
                                                                         "preexisting_untracked_files": []}})
    r.custom("c", body, custom_ok("src/app.py"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert cap.meta["git_head"] == head
    assert kinds(cap, "code.edit")[0]["before_range"] == [8, 8]


def test_without_git_the_file_on_disk_is_the_base(tmp_path: Path) -> None:
    root = (tmp_path / "plain").resolve()
    root.mkdir()
    (root / "f.txt").write_text("a\nb\nc\n")
    body = patch("*** Update File: f.txt", "@@", " b", "-c", "+C")
    r = Rollout().meta(root).turn(root).custom("c", body, custom_ok("f.txt"))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert edit["before_range"] == [3, 3] and edit["file_after_sha"] == blob("a\nb\nC\n")


def test_unknown_file_gets_null_ranges(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Update File: src/missing.py", "@@", "-x", "+y")
    r = Rollout().meta(root, head).turn(root).custom("c", body, custom_ok("src/missing.py"))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert edit["before_range"] is None and edit["file_before_sha"] is None
    assert (edit["before_text"], edit["after_text"]) == ("x\n", "y\n")


def test_shell_rewrites_make_our_copy_unknown(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Update File: src/app.py", "@@", "-    return 0", "+    return 5")
    notes = patch("*** Update File: docs/notes.md", "@@ ## Usage", "-step", "+run")
    r = Rollout().meta(root, head).turn(root)
    r.function("sed", "shell_command", {"command": "sed -i '1i # header' src/app.py"}, shell_out(0, ""))
    r.custom("p1", body, custom_ok("src/app.py")).custom("p2", notes, custom_ok("docs/notes.md"))
    r.function("fmt", "shell_command", {"command": "git checkout -- ."}, shell_out(0, ""))
    r.custom("p3", notes.replace("+run", "+go").replace("-step", "-run"), custom_ok("docs/notes.md"))
    app, notes_ok, notes_after_checkout = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    # sed -i inserted a line we cannot see (before the session read the file): the patch is placed
    # by its context in the working tree, marked as such, and our copy stays unknown.
    assert (app["before_range"], app["placed"], app["file_before_sha"]) == ([8, 8], "working tree", None)
    assert notes_ok["before_range"] == [5, 5] and "placed" not in notes_ok  # a file the command did not name is known
    assert (notes_after_checkout["before_range"], notes_after_checkout["placed"]) == ([5, 5], "earlier in the session")


def test_patch_apply_end_diff_places_an_edit_our_copy_cannot(repo: tuple[Path, str], tmp_path: Path) -> None:
    """Codex's own unified diff, computed on the real file, gives the ranges once a command made
    our copy unknown (seen in most updates of real rollouts: git checkouts, formatters, worktrees)."""
    root, head = repo
    body = patch("*** Update File: src/app.py", "@@", "-    return 0", "+    return 5")
    r = Rollout().meta(root, head).turn(root)
    r.function("sed", "shell_command", {"command": "sed -i '1i # header' src/app.py"}, shell_out(0, ""))
    r.custom("p1", body, None)
    r.event("patch_apply_end", call_id="p1", success=True, stdout="", stderr="", changes={
        str(root / "src" / "app.py"): {"type": "update", "move_path": None,
                                       "unified_diff": '@@ -8,2 +8,2 @@\n     print(greet("x"))\n-    return 0\n'
                                                       "+    return 5\n"}})
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (edit["before_range"], edit["after_range"]) == ([9, 9], [9, 9])  # line 8 of APP, after sed's line
    assert (edit["before_text"], edit["after_text"]) == ("    return 0\n", "    return 5\n")
    assert edit["file_before_sha"] is None  # the file itself is still unknown


# ---------------------------------------------------------------- paths


def test_relative_paths_follow_turn_context_cwd_and_workdir(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    in_src = patch("*** Update File: app.py", "@@", "-import os", "+import io")
    in_docs = patch("*** Update File: notes.md", "@@", "-# Notes", "+# Notes v2")
    r = Rollout().meta(root, head).turn(root / "src").custom("a", in_src, custom_ok("app.py"))
    r.turn(root).function("b", "shell", {"command": ["apply_patch", in_docs], "workdir": "docs"}, shell_json(0, "Success."))
    first, second = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (first["file"], first["before_range"]) == ("src/app.py", [1, 1])
    assert (second["file"], second["before_range"]) == ("docs/notes.md", [1, 1])


def test_paths_outside_the_repository_stay_tool_events(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    outside = tmp_path / "elsewhere" / "x.txt"
    body = patch(f"*** Add File: {outside}", "+secret", "*** Add File: ../sibling.txt", "+x",
                 "*** Add File: inside.txt", "+ok")
    r = Rollout().meta(root, head).turn(root).custom("c", body, custom_ok("x.txt", "sibling.txt", "inside.txt"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert [e["file"] for e in kinds(cap, "code.edit")] == ["inside.txt"]
    assert cap.dropped == {"outside the repository": 2}  # counted for the ingest summary
    assert len(kinds(cap, "tool.call")) == 1 and len(kinds(cap, "tool.result")) == 1


# ---------------------------------------------------------------- reads


def test_shell_reads_become_code_reads(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    lines = APP.splitlines(keepends=True)
    r = Rollout().meta(root, head).turn(root)
    r.function("cat", "shell_command", {"command": "cat src/app.py", "workdir": str(root)}, shell_out(0, APP))
    r.function("sed", "exec_command", {"cmd": "sed -n '3,4p' src/app.py"}, exec_out(0, "".join(lines[2:4])))
    numbered = '     6\tdef main():\n     7\t    print(greet("x"))\n'
    r.function("nl", "shell", {"command": ["bash", "-lc", "nl -ba app.py | sed -n '6,7p'"], "workdir": "src"},
               shell_json(0, numbered))
    r.function("head", "shell_command", {"command": "head -n 2 README.md"}, shell_out(0, README))
    r.function("tail", "exec_command", {"cmd": "tail -n 2 src/app.py"}, exec_out(0, "".join(lines[6:])))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    reads = {e["call_id"]: e for e in kinds(cap, "code.read")}
    assert reads["cat"]["file"] == "src/app.py" and reads["cat"]["range"] == [1, 8] and reads["cat"]["text"] == APP
    assert reads["sed"]["range"] == [3, 4] and reads["sed"]["text"] == "".join(lines[2:4])
    assert reads["nl"]["file"] == "src/app.py" and reads["nl"]["range"] == [6, 7]
    assert reads["nl"]["text"] == "".join(lines[5:7])  # the numbering is stripped
    assert reads["head"]["file"] == "README.md" and reads["head"]["range"] == [1, 2]
    assert reads["tail"]["range"] == [7, 8]
    results = {e["call_id"]: e for e in kinds(cap, "tool.result")}
    assert results["cat"]["stdout"] is None  # the read holds the text, once


def test_reads_that_do_not_qualify(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root)
    r.function("fail", "shell_command", {"command": "cat src/app.py"}, shell_out(1, "cat: src/app.py: denied\n"))
    r.function("trunc", "exec_command", {"cmd": "cat src/app.py"},
               exec_out(0, "Total output lines: 4000\n\nimport os\n…3990 tokens truncated…\n"))
    r.function("grep", "shell_command", {"command": "grep -n greet src/app.py"}, shell_out(0, "3:def greet(name):\n"))
    r.function("two", "shell_command", {"command": "cat src/app.py README.md"}, shell_out(0, APP + README))
    r.function("tail", "shell_command", {"command": "tail -n 2 src/unknown.py"}, shell_out(0, "a\nb\n"))
    # Only 3 lines printed for `tail -n 5` of a file we hold as 8 lines: our copy is not the file.
    r.function("short", "shell_command", {"command": "tail -n 5 src/app.py"}, shell_out(0, "".join(APP.splitlines(True)[5:])))
    r.function("out", "shell_command", {"command": "cat /etc/hostname"}, shell_out(0, "box\n"))
    r.function("running", "exec_command", {"cmd": "cat src/app.py"},
               "Chunk ID: 1\nWall time: 1.0 seconds\nProcess running with session ID 7\nOutput:\nimport os\n")
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert kinds(cap, "code.read") == []
    assert all(e["stdout"] is not None for e in kinds(cap, "tool.result"))


@pytest.mark.parametrize(("cmd", "expect"), [
    ("cat a.py", ("a.py", 1, False, None)),
    ("sed -n '10,20p' a.py", ("a.py", 10, False, None)),
    ("sed -n 7p a.py", ("a.py", 7, False, None)),
    ("nl -ba a.py", ("a.py", 1, True, None)),
    ("cat -n a.py | head -n 40", ("a.py", 1, True, None)),
    ("head -20 a.py", ("a.py", 1, False, None)),
    ("tail -n +5 a.py", ("a.py", 5, False, None)),
    ("tail -n 5 a.py", ("a.py", 1, False, 5)),
    ("cd pkg && cat a.py 2>/dev/null", ("a.py", 1, False, None)),
    ("sed -n '5,100p' a.py | head -n 3", ("a.py", 5, False, None)),
])
def test_read_spec_recognises_reading_commands(cmd: str, expect: tuple[Any, ...]) -> None:
    spec = read_spec(cmd)
    assert spec is not None and (spec.path, spec.start, spec.numbered, spec.tail) == expect


@pytest.mark.parametrize("cmd", ["cat a b", "nl a.py", "sed 's/a/b/' a.py", "cat a > b", "cat a && rm a",
                                 "sed -n '5,9p' a | tail -n 2", "rg foo a.py", "head -n x a.py"])
def test_read_spec_rejects_everything_else(cmd: str) -> None:
    assert read_spec(cmd) is None


@pytest.mark.parametrize(("script", "effect"), [
    ("ls -la", "none"),
    ("pytest -q tests/test_app.py", "none"),
    ("cat a.py 2>/dev/null", "none"),
    ("sed -i 's/a/b/' a.py", "files"),
    ("echo x > a.py", "files"),
    ("python - <<'EOF'\nopen('a.py','w')\nEOF", "files"),
    ("git checkout -- .", "all"),
    ("ruff format src", "all"),
    ("bash -lc 'black .'", "all"),
])
def test_shell_effect(script: str, effect: str) -> None:
    assert shell_effect(script) == effect


# ---------------------------------------------------------------- messages, outputs, meta


def test_messages_injected_context_and_echoes(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    env = "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"
    r = Rollout().meta(root, head).message("user", env)
    r.event("user_message", message="fix greet", images=[]).turn(root).message("user", "fix greet")
    r.add("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Looking**"}],
                            "content": None, "encrypted_content": "gAAA"})
    r.event("agent_reasoning", text="**Looking**")
    r.message("assistant", "Done.").event("agent_message", message="Done.")
    r.event("user_message", message="only in the UI log", images=[])
    r.message("developer", "<permissions instructions>…")
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    msgs = [(e["kind"], e.get("text"), e.get("block"), e.get("injected")) for e in cap.events
            if e["kind"] in ("msg.in", "msg.out")]
    assert msgs == [
        ("msg.in", env, None, True),
        ("msg.in", "fix greet", None, None),
        ("msg.out", "**Looking**", "thinking", None),
        ("msg.out", "Done.", "text", None),
        ("msg.in", "only in the UI log", None, None),
    ]
    assert sum(n for k, n in cap.ignored.items() if k.startswith("event_msg echo")) == 3
    assert all(set(e) <= {"kind", "ts", "text", "block", "injected"} for e in cap.events)


def test_a_prompt_of_several_parts_and_its_echo_are_one_message(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A guardian reviewer's prompt comes in parts; its user_message echo joins them without
    the newlines the response_item's text is kept with (Codex 0.142, chikachow/cyspbot)."""
    root, head = repo
    parts = ["The following is the Codex agent history whose request action you are assessing.",
             ">>> TRANSCRIPT START\n", "[1] user: fix greet\n", "\n[2] tool apply_patch call: *** Begin Patch\n"]
    r = Rollout().meta(root, head).turn(root)
    r.add("response_item", {"type": "message", "role": "user",
                            "content": [{"type": "input_text", "text": t} for t in parts]})
    r.event("user_message", message="".join(parts), images=[])
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert [e["text"] for e in cap.events if e["kind"] == "msg.in"] == ["\n".join(parts)]
    assert cap.ignored["event_msg echo of a response_item (user)"] == 1


@pytest.mark.parametrize(("fields", "want"), [
    ({"source": "vscode"}, (None, None)),
    ({"source": {"subagent": "review"}, "parent_thread_id": "p1"}, ("review", "p1")),
    ({"source": {"subagent": {"other": "guardian"}}, "parent_thread_id": "p2"}, ("guardian", "p2")),
    ({"source": {"subagent": {"thread_spawn": {"parent_thread_id": "p3", "depth": 1}}}}, ("thread_spawn", "p3")),
])
def test_a_subagents_kind_and_parent_are_kept(repo: tuple[Path, str], tmp_path: Path, fields: dict[str, Any],
                                              want: tuple[str | None, str | None]) -> None:
    """The shapes of `session_meta.source` seen in Codex 0.142 rollouts (chikachow/cyspbot)."""
    root, head = repo
    cap = capture(Rollout().meta(root, head, **fields).turn(root).write(tmp_path / "s.jsonl"), root)
    assert (cap.meta.get("subagent"), cap.meta.get("parent_session")) == want


@pytest.mark.parametrize(("output", "text", "code", "success"), [
    ("Exit code: 2\nWall time: 0 seconds\nOutput:\noops\n", "oops\n", 2, None),
    (exec_out(0, "ok\n"), "ok\n", 0, None),
    (json.dumps({"output": "hi\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}), "hi\n", 0, None),
    ({"content": "done", "success": True}, "done", None, True),
    ([{"type": "input_text", "text": "a.txt\n"}], "a.txt\n", None, None),
    ({"type": "input_text", "text": "b\n"}, "b\n", None, None),
    ("plain text", "plain text", None, None),
])
def test_parse_output_shapes(output: Any, text: str, code: int | None, success: bool | None) -> None:
    out = parse_output(output)
    assert (out.text, out.exit_code, out.success) == (text, code, success)


def test_meta_and_tool_events(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root, model="gpt-5.1-codex-max").turn(root, model="other")
    r.function("ls", "shell_command", {"command": "ls", "workdir": ".", "timeout_ms": 120000}, shell_out(0, "README.md\n"))
    r.add("response_item", {"type": "function_call", "name": "exec_command", "arguments": "[REDACTED]", "call_id": "x"})
    r.add("mystery_type", {"a": 1}).add("response_item", {"type": "brand_new_item"})
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert cap.harness == "codex" and cap.session_id == SID
    assert cap.meta == {"harness_version": "0.60.1", "model": "gpt-5.1-codex-max", "cwd": str(root),
                        "git_head": head, "git_branch": "main", "started": "2025-11-22T20:45:35.590Z",
                        "originator": "codex_cli_rs"}
    ls, redacted = kinds(cap, "tool.call")
    assert ls["input"] == {"command": "ls", "workdir": ".", "timeout_ms": 120000}
    assert redacted["input"] == {"arguments": "[REDACTED]"}  # arguments that are not JSON stay raw
    (res,) = kinds(cap, "tool.result")
    assert res == {"kind": "tool.result", "ts": r.records[4]["timestamp"], "call_id": "ls", "name": "shell_command",
                   "is_error": False, "exit_code": 0, "stdout": "README.md\n", "stderr": ""}
    assert cap.skipped["unknown record type 'mystery_type'"] == 1
    assert cap.skipped["unknown response_item type 'brand_new_item'"] == 1


def test_pre_envelope_rollout(repo: tuple[Path, str], tmp_path: Path) -> None:
    """≤0.1.x rollouts: a bare {id, timestamp, instructions} line, then bare response items."""
    root, _ = repo
    body = patch("*** Add File: early.txt", "+first")
    lines = [{"id": SID, "timestamp": "2025-05-01T10:00:00Z", "instructions": None},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add a file"}]},
             {"type": "function_call", "name": "shell", "call_id": "c",
              "arguments": json.dumps({"command": ["apply_patch", body], "workdir": str(root)})},
             {"type": "function_call_output", "call_id": "c", "output": shell_json(0, "Done!")}]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    cap = capture(path, root)
    assert cap.session_id == SID and cap.meta["started"] == "2025-05-01T10:00:00Z"
    assert [e["kind"] for e in cap.events] == ["msg.in", "tool.call", "tool.result", "code.edit"]
    assert kinds(cap, "code.edit")[0]["file"] == "early.txt"


def test_session_id_falls_back_to_the_file_name(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    r = Rollout().turn(root).message("user", "hi")
    path = r.write(tmp_path / "rollout-2025-11-22T20-45-35-019a0000-0000-7000-8000-0000000000bb.jsonl")
    assert capture(path, root).session_id == "019a0000-0000-7000-8000-0000000000bb"


def exported(elsewhere: str, *, workdir: bool = True) -> Rollout:
    """A rollout exported without its session_meta and turn_context lines (as some tools share
    them), made on another machine in `elsewhere`: its paths are absolute, there."""
    r = Rollout().message("user", "make greet friendlier")
    if workdir:
        r.function("call_0", "shell_command", {"command": "sed -n '1,40p' src/app.py", "workdir": elsewhere},
                   shell_out(0, APP))
    abs_patch = MULTI_HUNK.replace("*** Update File: src/app.py", f"*** Update File: {elsewhere}/src/app.py")
    return r.custom("call_1", abs_patch, custom_ok(f"{elsewhere}/src/app.py"))


def test_an_exported_rollout_gets_a_stable_id_from_its_content_and_a_cwd_from_its_paths(
        repo: tuple[Path, str], tmp_path: Path) -> None:
    """Without session_meta, nothing in the file names the session, and its absolute paths are
    another machine's: the id comes from its content (a copy of it is the same session, so
    ingesting it again adds nothing), the working directory from the directory its shell calls
    ran in, which puts its edit on the repository's file; the summary says it was inferred."""
    root, _ = repo
    run_engram(root, "init")
    first = exported("/home/dev/proj").write(tmp_path / "a" / "session.jsonl")
    out = run_engram(root, "ingest", str(first)).stdout
    assert "1 edit," in out
    assert "note: 1 Codex rollout records no working directory: inferred from the paths edited, /home/dev/proj (1)" \
        in out
    (tape,) = json.loads(run_engram(root, "tapes", "--json").stdout)
    assert tape["session_id"].startswith("codex-") and "session" not in tape["session_id"]
    meta = shown_events(root, tape["session_id"])[0]
    assert (meta["cwd"], meta["cwd_inferred"]) == ("/home/dev/proj", "/home/dev/proj")
    doc = json.loads(run_engram(root, "explain", "src/app.py:2-8", "--brief").stdout)
    assert [x["session_id"] for x in doc["sessions"]] == [tape["session_id"]]

    copy = tmp_path / "b" / "session.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(first.read_bytes())
    again = run_engram(root, "ingest", str(copy)).stdout
    assert "0 new tapes" in again and "(1 session unchanged)" in again
    other = exported("/home/dev/proj").message("user", "thanks")
    other.records[0]["payload"]["content"][0]["text"] = "make greet friendlier, please"
    assert capture(other.write(tmp_path / "c" / "session.jsonl"), root).session_id != tape["session_id"]


def test_a_cwd_is_inferred_only_from_paths_that_name_one(repo: tuple[Path, str], tmp_path: Path) -> None:
    """Patched files alone point at their own directory, not at the session's: the ancestor from
    which they are this repository's files is taken. Paths with nothing in common but `/` name
    no working directory, and the summary says so."""
    root, _ = repo
    cap = capture(exported("/home/dev/proj", workdir=False).write(tmp_path / "only-patch.jsonl"), root)
    assert cap.meta["cwd_inferred"] == "/home/dev/proj"  # not /home/dev/proj/src
    assert [e["file"] for e in kinds(cap, "code.edit")] == ["src/app.py"]

    scattered = Rollout().function("c", "shell_command", {"command": "ls", "workdir": "/etc"}, shell_out(0, "hosts"))
    scattered.function("d", "shell_command", {"command": "ls", "workdir": "/var/log"}, shell_out(0, "syslog"))
    run_engram(root, "init")
    out = run_engram(root, "ingest", str(scattered.write(tmp_path / "scattered.jsonl"))).stdout
    assert "note: 1 Codex rollout records no working directory and no path that names one" in out


def test_truncated_last_line_is_left_for_the_next_ingest(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root).custom("c", MULTI_HUNK, custom_ok("src/app.py"))
    partial = b'{"timestamp":"2025-11-22T21:00:00.000Z","type":"response_item","payload":{"type":"mess'
    path = r.write(tmp_path / "s.jsonl", tail=partial)
    cap = capture(path, root)
    assert cap.sources[0].end == path.stat().st_size - len(partial) == r.offset_of(len(r.records))
    assert cap.skipped["truncated last line (left for the next ingest)"] == 1
    assert len(kinds(cap, "code.edit")) == 1


def test_events_are_tagged_with_their_source_line(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root).custom("c", MULTI_HUNK, custom_ok("src/app.py"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    by_kind = {e["kind"]: pos for e, pos in zip(cap.events, cap.positions)}
    assert by_kind["tool.call"] == (0, r.offset_of(2))
    assert by_kind["tool.result"] == by_kind["code.edit"] == (0, r.offset_of(3))


# ---------------------------------------------------------------- real schema fixture


def test_schema_fixture(tmp_path: Path) -> None:
    assert detect_format(FIXTURE) == "codex"
    cap = capture(FIXTURE, tmp_path.resolve())
    assert cap.session_id == "019fc8be-3658-7ca3-9e29-000000000000"
    assert cap.meta["harness_version"] == "0.146.0" and cap.meta["model"] == "gpt-5.6-luna"
    assert cap.meta["cwd"] == "/tmp/repo"
    assert not cap.skipped  # every record type in it is known
    assert len(kinds(cap, "compact")) == 6
    assert [e["text"] for e in kinds(cap, "msg.in")][0] == "List the files"
    assert cap.ignored["event_msg echo of a response_item (user)"] == 1
    assert kinds(cap, "code.edit") == []  # its patch_apply_end has no matching call
    results = {e["call_id"]: e for e in kinds(cap, "tool.result")}
    assert results["call-2"]["stdout"] == "a.txt\n" and results["call-1"]["stdout"] == "a.txt\nb.txt\n"


# ---------------------------------------------------------------- end to end


def test_cli_ingest_and_show(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    run_engram(root, "init")
    r = Rollout().meta(root, head).turn(root).message("user", "make greet friendlier")
    r.custom("call_1", MULTI_HUNK, custom_ok("src/app.py"))
    r.function("call_2", "apply_patch", {"input": patch("*** Add File: src/extra.py", "+X = 1")},
               shell_out(0, "Success."))
    r.function("call_3", "exec_command", {"cmd": "git status --short", "workdir": str(root)}, exec_out(0, ""))
    rollout = r.write(tmp_path / "sessions" / f"rollout-2025-11-22T20-45-35-{SID}.jsonl")
    out = run_engram(root, "ingest", str(rollout))
    assert "2 edits" in out.stdout
    # The compact view says what each call acted on: a patch's files, a command line.
    view = run_engram(root, "show", SID).stdout
    assert "tool.call   apply_patch Update File: src/app.py" in view
    assert "tool.call   apply_patch Add File: src/extra.py" in view
    assert "tool.call   exec_command git status --short" in view
    shown = json.loads(run_engram(root, "show", SID, "--json").stdout)
    events = shown["events"]
    assert events[0]["kind"] == "meta" and events[0]["harness"] == "codex" and events[0]["git_head"] == head
    update, create = [e for e in events if e["kind"] == "code.edit"]
    assert (update["file"], update["before_range"], update["after_range"]) == ("src/app.py", [2, 7], [2, 8])
    assert update["hunks"] == [[2, 1, 2, 2], [4, 4, 5, 5], [7, 7, 8, 8]]
    assert update["file_after_sha"] == blob(APP_AFTER)
    assert (create["file"], create["op"], create["after_range"], create["after_text"]) == \
        ("src/extra.py", "create", [1, 1], "X = 1\n")


FAREWELL = [
    "def farewell(name, punctuation):",
    "    message = f\"goodbye {name}{punctuation}\"",
    "    if len(message) > 40:",
    "        message = message[:37] + \"...\"",
    "    return message.capitalize()",
]


def ingest_an_hour_apart(root: Path, tmp_path: Path, first: tuple[str, Rollout],
                         second: tuple[str, Rollout]) -> None:
    """Ingest two rollouts (session id, rollout), the second an hour after the first, into a new store."""
    for rec in second[1].records:
        rec["timestamp"] = rec["timestamp"].replace("T20:", "T21:")
    sessions = tmp_path / "sessions"
    for (sid, r), hour in ((first, 20), (second, 21)):
        r.write(sessions / f"rollout-2025-11-22T{hour}-00-00-{sid}.jsonl")
    run_engram(root, "init")
    run_engram(root, "ingest", str(sessions))


def test_the_apply_patch_call_is_evidence_of_the_code_it_wrote(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A Codex writer is not outranked by a later session that read its code once.

    The call's patch is fingerprinted as the code it carries, as a Claude Code Edit call is: with
    its `+` markers left in, no k-gram across a line matched, the writer had one touch (its
    edit) and a later reader's single read won on recency (seen on a real project's sessions)."""
    root, head = repo
    added = FAREWELL
    body = patch("*** Update File: src/app.py", "@@", "     return 0", *("+" + ln for ln in ["", *added]))
    writer_id, reader_id = SID, "019a0000-0000-7000-8000-0000000000bb"
    writer = Rollout().meta(root, head).turn(root).message("user", "add a farewell helper")
    writer.custom("call_w", body, custom_ok("src/app.py"))
    final = APP + "\n" + "\n".join(added) + "\n"
    reader = Rollout().meta(root, head, id=reader_id).turn(root).message("user", "what does app.py do?")
    reader.function("call_r", "shell_command", {"command": "cat src/app.py", "workdir": str(root)},
                    shell_out(0, final))
    (root / "src" / "app.py").write_text(final)
    ingest_an_hour_apart(root, tmp_path, (writer_id, writer), (reader_id, reader))
    start = len(APP.splitlines()) + 2
    doc = json.loads(run_engram(root, "explain", f"src/app.py:{start}-{start + len(added) - 1}").stdout)
    ranked = [(s["session_id"], s["touches"]) for s in doc["sessions"]]
    assert ranked == [(writer_id, 2), (reader_id, 1)]
    kinds_seen = {f["kind"] for f in doc["sessions"][0]["fragments"]}
    assert kinds_seen == {"tool.call", "code.edit"}


def guardian_of(root: Path, head: str, parent: str, patches: list[str], final: str) -> Rollout:
    """A Codex `guardian` reviewer's rollout, as Codex 0.142 writes one: its prompt is its parent
    thread's history in parts (the request, the patches, a read of the file)."""
    parts = ["The following is the Codex agent history whose request action you are assessing.\n",
             ">>> TRANSCRIPT START\n", "[1] user: add a farewell helper\n",
             *(f"\n[{i}] tool apply_patch call: {body}" for i, body in enumerate(patches, 2)),
             f"\n[{len(patches) + 2}] tool shell_command result: {final}", ">>> TRANSCRIPT END\n"]
    r = Rollout().meta(root, head, id=GUARDIAN, parent_thread_id=parent,
                       source={"subagent": {"other": "guardian"}}).turn(root)
    r.add("response_item", {"type": "message", "role": "user",
                            "content": [{"type": "input_text", "text": t} for t in parts]})
    r.event("user_message", message="".join(parts), images=[])
    return r.message("assistant", '{"risk_level":"low","outcome":"allow","rationale":"a local edit"}')


GUARDIAN = "019a0000-0000-7000-8000-0000000000cc"


@pytest.mark.parametrize("with_parent", [True, False])
def test_a_guardian_reviewer_is_left_out_while_its_parent_is_in_the_store(
        repo: tuple[Path, str], tmp_path: Path, with_parent: bool) -> None:
    """A guardian's prompt quotes its parent's history: a copy of the parent's work, not work of
    its own. The parent wrote the helper in two patches; the prompt holds both, so it matched
    the helper better than either edit and was named beside the writer. With the parent in the
    store only the parent is named; without it, the reviewer's copy is the one trace left."""
    root, head = repo
    first = patch("*** Update File: src/app.py", "@@", "     return 0", *("+" + ln for ln in ["", *FAREWELL[:3]]))
    second = patch("*** Update File: src/app.py", "@@", " " + FAREWELL[2], *("+" + ln for ln in FAREWELL[3:]))
    final = APP + "\n" + "\n".join(FAREWELL) + "\n"
    writer = Rollout().meta(root, head).turn(root).message("user", "add a farewell helper")
    writer.custom("call_1", first, custom_ok("src/app.py")).custom("call_2", second, custom_ok("src/app.py"))
    guardian = guardian_of(root, head, SID, [first, second], final)
    (root / "src" / "app.py").write_text(final)
    if with_parent:
        ingest_an_hour_apart(root, tmp_path, (SID, writer), (GUARDIAN, guardian))
    else:
        guardian.write(tmp_path / "sessions" / f"rollout-2025-11-22T21-00-00-{GUARDIAN}.jsonl")
        run_engram(root, "init")
        run_engram(root, "ingest", str(tmp_path / "sessions"))
    meta = shown_events(root, GUARDIAN)[0]
    assert (meta["subagent"], meta["parent_session"]) == ("guardian", SID)
    start = len(APP.splitlines()) + 2
    span = f"src/app.py:{start}-{start + len(FAREWELL) - 1}"
    doc = json.loads(run_engram(root, "explain", span).stdout)
    assert [s["session_id"] for s in doc["sessions"]] == ([SID] if with_parent else [GUARDIAN])
    kinds_seen = {f["kind"] for f in doc["sessions"][0]["fragments"]}
    assert kinds_seen == ({"tool.call", "code.edit"} if with_parent else {"msg.in"})
    run_engram(root, "reindex")  # the rebuilt catalog knows the reviewer from its tape
    assert json.loads(run_engram(root, "explain", span).stdout)["sessions"] == doc["sessions"]


def test_the_catalog_says_which_tapes_are_subagents(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A store of Codex sessions can hold more automatic reviewers than sessions a person started
    (chikachow/cyspbot: 51 of 80 rollouts). `engram tapes` and `engram show` showed them as
    sessions of their own."""
    root, head = repo
    writer = Rollout().meta(root, head).turn(root).message("user", "add a farewell helper")
    ingest_an_hour_apart(root, tmp_path, (SID, writer), (GUARDIAN, guardian_of(root, head, SID, [], APP)))
    rows = {t["session_id"]: t for t in json.loads(run_engram(root, "tapes", "--json").stdout)}
    assert (rows[GUARDIAN]["subagent"], rows[GUARDIAN]["parent_session"]) == ("guardian", SID)
    assert (rows[SID]["subagent"], rows[SID]["parent_session"]) == (None, None)
    table = run_engram(root, "tapes").stdout.splitlines()
    harness = {line.split()[2]: line.split()[1] for line in table[1:]}
    assert harness == {GUARDIAN: "codex/guardian", SID: "codex"}
    codex = json.loads(run_engram(root, "tapes", "--json", "--harness", "codex").stdout)
    assert {(t["session_id"], t["subagent"]) for t in codex} == {(GUARDIAN, "guardian"), (SID, None)}
    assert f"· guardian subagent of {SID}" in run_engram(root, "show", GUARDIAN, "--limit", "1").stdout
    assert "subagent of" not in run_engram(root, "show", SID, "--limit", "1").stdout


def test_a_subagents_report_is_evidence_in_the_session_it_reached(repo: tuple[Path, str], tmp_path: Path) -> None:
    """Codex agents of one team talk through `agent_message` response items: a subagent's task in
    its own rollout (payload encrypted, header readable) and its final answer in its parent's.
    The answer's code is what the parent discussed, so the parent is found for it; the task's
    header says who sent what, and neither is mistaken for a person's request."""
    root, head = repo
    code = ["def overdue(invoices, today):",
            "    late = [i for i in invoices if i.due < today and not i.paid]",
            "    return sorted(late, key=lambda i: (i.due, i.customer_id))"]
    (root / "src" / "billing.py").write_text("\n".join(code) + "\n")
    answer = ("Message Type: FINAL_ANSWER\nTask name: /root\nSender: /root/review\nPayload:\n"
              "One finding in src/billing.py:\n" + "\n".join(code) + "\nThe sort key is fine; paid is checked.")
    parent = Rollout().meta(root, head).turn(root).message("user", "have a reviewer look at billing")
    parent.add("response_item", {"type": "agent_message", "author": "/root/review", "recipient": "/root",
                                 "content": [{"type": "input_text", "text": answer}]})
    child_id = "019a0000-0000-7000-8000-0000000000dd"
    child = Rollout().meta(root, head, id=child_id).turn(root)
    child.add("response_item", {"type": "agent_message", "author": "/root", "recipient": "/root/review", "content": [
        {"type": "input_text", "text": "Message Type: NEW_TASK\nTask name: /root/review\nSender: /root\nPayload:\n"},
        {"type": "encrypted_content", "encrypted_content": "gAAAA"}]})
    task = [e for e in kinds(capture(child.write(tmp_path / "child.jsonl"), root), "msg.in")]
    assert [(e["sender"], e["recipient"], e.get("encrypted")) for e in task] == [("/root", "/root/review", True)]
    assert task[0]["text"].startswith("Message Type: NEW_TASK")
    ingest_an_hour_apart(root, tmp_path, (SID, parent), (child_id, child))
    doc = json.loads(run_engram(root, "explain", "src/billing.py:1-3").stdout)
    assert [s["session_id"] for s in doc["sessions"]] == [SID]
    assert [f["kind"] for f in doc["sessions"][0]["fragments"]] == ["msg.in"]
    view = run_engram(root, "view", doc["sessions"][0]["tape"], "--at", "1", "--after", "5", "--pretty").stdout
    assert "have a reviewer look at billing" in view and "One finding in src/billing.py" in view


def test_a_patch_with_distant_hunks_is_not_the_writer_of_the_lines_between(repo: tuple[Path, str],
                                                                           tmp_path: Path) -> None:
    """A later session that read a file and changed its first and last function did not write
    the functions between: its edit must not match them (the edit's texts run from its first
    change to its last, and matched the whole stretch in full: seen on a real project, where
    such a session was answered first for code another session wrote)."""
    root, head = repo
    funcs = [(f"def scale_{i}(value):", f"    return value * {i} + {i * i}") for i in range(20)]
    original = "".join(f"{a}\n{b}\n" for a, b in funcs)
    final = original.replace("    return value * 0 + 0\n", "    return value\n").replace(
        "    return value * 19 + 361\n", "    return -value\n")
    writer_id, later_id = SID, "019a0000-0000-7000-8000-0000000000cc"
    writer = Rollout().meta(root, head).turn(root).message("user", "add the scale helpers")
    writer.custom("call_w", patch("*** Add File: src/scale.py", *("+" + ln for ln in original.splitlines())),
                  custom_ok("src/scale.py"))
    (root / "src" / "scale.py").write_text(original)  # the writer's work, committed before the later session
    git(root, "add", "src/scale.py")
    git(root, "commit", "-qm", "scale helpers")
    later = Rollout().meta(root, git(root, "rev-parse", "HEAD").strip(), id=later_id).turn(root)
    later.message("user", "simplify the first and last")
    later.function("call_r", "shell_command", {"command": "cat src/scale.py", "workdir": str(root)},
                   shell_out(0, original))
    later.custom("call_p", patch("*** Update File: src/scale.py",
                                 "@@", " def scale_0(value):", "-    return value * 0 + 0", "+    return value",
                                 "@@", " def scale_19(value):", "-    return value * 19 + 361", "+    return -value"),
                 custom_ok("src/scale.py"))
    (root / "src" / "scale.py").write_text(final)
    ingest_an_hour_apart(root, tmp_path, (writer_id, writer), (later_id, later))
    shown = shown_events(root, later_id)
    (edit,) = [e for e in shown if e["kind"] == "code.edit"]
    assert edit["after_range"] == [2, 40] and len(edit["hunks"]) == 2  # the event keeps its raw facts
    doc = json.loads(run_engram(root, "explain", "src/scale.py:15-20").stdout)
    by_id = {s["session_id"]: s for s in doc["sessions"]}
    assert doc["sessions"][0]["session_id"] == writer_id
    assert {f["kind"] for f in by_id[later_id]["fragments"]} == {"code.read"}


# A view's template (TypeScript), as a Codex session created it, and as a later session re-indented
# its header inside a new wrapper: the shape of a real patch (savekirk/session-bridge) whose line
# diff keeps one `</div>` between the changed lines, cutting the span below over two hunks.
PANEL = [
    "export function renderHeader(detail: Detail, metaCards: string[]): string {",
    "\treturn `<div class=\"layout\">",
    "\t<header class=\"summary\">",
    "\t\t<div class=\"summary__top\">",
    "\t\t\t<div>",
    "\t\t\t\t<p class=\"summary__eyebrow\">Session Details</p>",
    "\t\t\t\t<h1 class=\"summary__title\">${escapeHtml(detail.promptPreview || detail.sessionId)}</h1>",
    "\t\t\t</div>",
    "\t\t\t<span class=\"status\">${escapeHtml(detail.status)}</span>",
    "\t\t</div>",
    "\t\t<div class=\"summary__meta\">",
    "\t\t\t${metaCards.join(\"\")}",
    "\t\t</div>",
    "\t</header>`;",
    "}",
]
REINDENT = patch(
    "*** Update File: src/panel.ts",
    "@@",
    " \treturn `<div class=\"layout\">",
    " \t<header class=\"summary\">",
    "-\t\t<div class=\"summary__top\">",
    "-\t\t\t<div>",
    "-\t\t\t\t<p class=\"summary__eyebrow\">Session Details</p>",
    "-\t\t\t\t<h1 class=\"summary__title\">${escapeHtml(detail.promptPreview || detail.sessionId)}</h1>",
    "+\t\t<div class=\"summary__inner\">",
    "+\t\t\t<div class=\"summary__top\">",
    "+\t\t\t\t<div>",
    "+\t\t\t\t\t<p class=\"summary__eyebrow\">Session Details</p>",
    "+\t\t\t\t\t<h1 class=\"summary__title\">${escapeHtml(detail.promptPreview || detail.sessionId)}</h1>",
    "+\t\t\t\t</div>",
    "+\t\t\t\t<span class=\"status\">${escapeHtml(detail.status)}</span>",
    " \t\t\t</div>",
    "-\t\t\t<span class=\"status\">${escapeHtml(detail.status)}</span>",
    "-\t\t</div>",
    "-\t\t<div class=\"summary__meta\">",
    "-\t\t\t${metaCards.join(\"\")}",
    "+\t\t\t<div class=\"summary__meta\">",
    "+\t\t\t\t${metaCards.join(\"\")}",
    "+\t\t\t</div>",
    " \t\t</div>",
    " \t</header>`;",
)


def test_the_hunks_of_a_reindenting_patch_together_are_the_write_of_the_lines_they_changed(
        repo: tuple[Path, str], tmp_path: Path) -> None:
    """A later session's patch wraps a header in a new element and re-indents it; the line diff
    keeps one `</div>` at its old indentation, so the changed lines are two hunks, and a span
    across them is held in part by each. The session that changed four of its five lines wrote
    it and comes first; the session that created the file wrote an earlier version and comes
    after. (Each hunk alone held under the writer test's share of the creating Add's, which holds
    the whole text: the creator was answered as the writer, as on the real project.)"""
    root, head = repo
    creator_id, later_id = SID, "019a0000-0000-7000-8000-0000000000ee"
    original = "\n".join(PANEL) + "\n"
    creator = Rollout().meta(root, head).turn(root).message("user", "add the session details header")
    creator.custom("call_a", patch("*** Add File: src/panel.ts", *("+" + ln for ln in PANEL)), custom_ok("src/panel.ts"))
    (root / "src" / "panel.ts").write_text(original)
    git(root, "add", "src/panel.ts")
    git(root, "commit", "-qm", "header")
    later = Rollout().meta(root, git(root, "rev-parse", "HEAD").strip(), id=later_id).turn(root)
    later.message("user", "centre the header in a fixed-width column")
    later.custom("call_p", REINDENT, custom_ok("src/panel.ts"))
    final = apply_reindent(PANEL)
    (root / "src" / "panel.ts").write_text("\n".join(final) + "\n")
    ingest_an_hour_apart(root, tmp_path, (creator_id, creator), (later_id, later))
    (edit,) = [e for e in shown_events(root, later_id) if e["kind"] == "code.edit"]
    assert len(edit["hunks"]) == 2  # the diff's own cut: the kept `</div>` between them
    first = final.index("\t\t\t\t\t<h1 class=\"summary__title\">${escapeHtml(detail.promptPreview || detail.sessionId)}</h1>") + 1
    assert final[first + 2] == "\t\t\t</div>" and final[first + 1].endswith("</span>")  # the kept line, inside
    doc = json.loads(run_engram(root, "explain", f"src/panel.ts:{first}-{first + 4}", "--brief").stdout)
    assert [(s["session_id"], s["wrote"]) for s in doc["sessions"]] == [(later_id, True), (creator_id, True)]
    shown = run_engram(root, "explain", f"src/panel.ts:{first}-{first + 4}", "--pretty", "--no-color").stdout
    assert shown.index("centre the header") < shown.index("add the session details header")


DATES = [
    "export function formatDetailTimestamp(timestamp: string | undefined, includeDayInTimestamp: boolean): string | undefined {",
    "\tif (!timestamp) {",
    "\t\treturn undefined;",
    "\t}",
    "",
    "\tconst date = new Date(timestamp);",
    "\tif (Number.isNaN(date.getTime())) {",
    "\t\treturn timestamp;",
    "\t}",
    "\treturn includeDayInTimestamp ? date.toLocaleString() : date.toLocaleTimeString();",
    "}",
]
HEADER_DATE = [
    "",
    "function formatHeaderDate(timestamp: string | undefined): string | undefined {",
    "\tif (!timestamp) {",
    "\t\treturn undefined;",
    "\t}",
    "",
    "\tconst date = new Date(timestamp);",
    "\treturn new Intl.DateTimeFormat(undefined, { day: \"numeric\", month: \"long\", year: \"numeric\" }).format(date);",
    "}",
]


def test_a_later_session_that_wrote_the_same_lines_elsewhere_in_the_file_comes_after_their_writer(
        repo: tuple[Path, str], tmp_path: Path) -> None:
    """A later session adds a function to the file whose guard clause reads exactly as an earlier
    function's: its edit holds that clause in full, so both passed the writer test and the later
    one came first, though it never touched the earlier function (seen on savekirk/session-bridge,
    where a session asked for full dates in a header). The lines around the clause tell them
    apart: the writer's edit holds them, the later one's holds its own function's."""
    root, head = repo
    writer_id, later_id = SID, "019a0000-0000-7000-8000-0000000000ef"
    writer = Rollout().meta(root, head).turn(root).message("user", "format the detail timestamps")
    writer.custom("call_a", patch("*** Add File: src/dates.ts", *("+" + ln for ln in DATES)), custom_ok("src/dates.ts"))
    (root / "src" / "dates.ts").write_text("\n".join(DATES) + "\n")
    git(root, "add", "src/dates.ts")
    git(root, "commit", "-qm", "dates")
    later = Rollout().meta(root, git(root, "rev-parse", "HEAD").strip(), id=later_id).turn(root)
    later.message("user", "use full dates in the header")
    later.custom("call_p", patch("*** Update File: src/dates.ts", "@@", *(" " + ln for ln in DATES[-2:]),
                                 *("+" + ln for ln in HEADER_DATE)), custom_ok("src/dates.ts"))
    (root / "src" / "dates.ts").write_text("\n".join(DATES + HEADER_DATE) + "\n")
    ingest_an_hour_apart(root, tmp_path, (writer_id, writer), (later_id, later))
    doc = json.loads(run_engram(root, "explain", "src/dates.ts:2-6", "--brief").stdout)
    assert [(s["session_id"], s["wrote"]) for s in doc["sessions"]] == [(writer_id, True), (later_id, True)]
    debug = json.loads(run_engram(root, "explain", "src/dates.ts:2-6", "--brief", "--debug").stdout)
    assert "writer_context" in {r["rule"] for r in debug["ranking"]}
    doc = json.loads(run_engram(root, "explain", "src/dates.ts:14-18", "--brief").stdout)  # its own copy
    assert doc["sessions"][0]["session_id"] == later_id


def apply_reindent(lines: list[str]) -> list[str]:
    """PANEL after REINDENT, worked out from the patch by hand."""
    head, body = lines[:3], lines[3:]
    return [*head,
            "\t\t<div class=\"summary__inner\">",
            "\t\t\t<div class=\"summary__top\">",
            "\t\t\t\t<div>",
            "\t\t\t\t\t<p class=\"summary__eyebrow\">Session Details</p>",
            "\t\t\t\t\t<h1 class=\"summary__title\">${escapeHtml(detail.promptPreview || detail.sessionId)}</h1>",
            "\t\t\t\t</div>",
            "\t\t\t\t<span class=\"status\">${escapeHtml(detail.status)}</span>",
            "\t\t\t</div>",
            "\t\t\t<div class=\"summary__meta\">",
            "\t\t\t\t${metaCards.join(\"\")}",
            "\t\t\t</div>",
            *body[9:]]


def test_a_patch_applied_from_a_code_mode_script_is_an_edit(repo: tuple[Path, str], tmp_path: Path) -> None:
    """Codex's code mode runs the model's script in one `exec` call; the script applies patches,
    each reported by a `patch_apply_end` of its own id that no call of the rollout has. Its
    changes (an added file's content, an update's unified diff) are the session's edits."""
    root, head = repo
    script = 'const patch = "*** Begin Patch\\n*** Add File: src/extra.py\\n+X = 1\\n*** End Patch\\n";\n' \
             "await tools.apply_patch(patch);"
    diff = '@@ -4 +4 @@ def greet(name):\n-    return "hi " + name\n+    return "hello " + name\n'
    r = Rollout().meta(root, head).turn(root).message("user", "tidy up")
    r.custom("call_1", script, json.dumps([{"type": "input_text", "text": "Script completed"}]), name="exec")
    r.event("patch_apply_end", call_id="exec-1f0e", turn_id="t1", stdout="Success.", stderr="", success=True,
            changes={str(root / "src" / "extra.py"): {"type": "add", "content": "X = 1\n"},
                     str(root / "src" / "app.py"): {"type": "update", "unified_diff": diff, "move_path": None},
                     str(root / "README.md"): "garbled", "/elsewhere/x.py": {"type": "add", "content": "y\n"}})
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    from engram.query.render import event_line  # noqa: PLC0415

    (call,) = kinds(cap, "tool.call")  # the compact view shows the script, which names no file
    assert "exec const patch = \"*** Begin Patch" in event_line(3, call)
    assert cap.skipped["applied change that is not an object"] == 1
    assert cap.dropped == {"outside the repository": 1, "applied change that is not an object": 1}
    edits = {e["file"]: e for e in kinds(cap, "code.edit")}
    assert set(edits) == {"src/extra.py", "src/app.py"}
    assert edits["src/extra.py"]["op"] == "create" and edits["src/extra.py"]["after_text"] == "X = 1\n"
    update = edits["src/app.py"]
    assert (update["op"], update["before_range"], update["after_range"]) == ("update", [4, 4], [4, 4])
    assert update["after_text"] == '    return "hello " + name\n' and update["call_id"] == "exec-1f0e"
    assert update["file_after_sha"] == blob(APP.replace('"hi "', '"hello "'))  # replayed on the session's copy


def test_a_forked_thread_does_not_take_its_parents_edits(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A Codex subagent's rollout (`forked_from_id`) starts with its parent's history, restamped
    with the fork's start: a patch the parent applied is not the subagent's edit. Its own work
    starts with its first turn (a task_started whose UUIDv7 turn id is not older than the fork)."""
    from datetime import datetime

    root, head = repo
    parent = "019a0000-0000-7000-8000-0000000000dd"
    r = Rollout().meta(root, head, forked_from_id=parent)
    start = r.records[0]["payload"]["timestamp"]
    r.meta(root, head, id=parent)  # the parent's own header, copied
    diff = '@@ -4 +4 @@ def greet(name):\n-    return "hi " + name\n+    return "hello " + name\n'
    r.event("patch_apply_end", call_id="exec-parent", turn_id="019a0000-0000-7000-8000-00000000000e", stdout="",
            stderr="", success=True, changes={str(root / "src" / "app.py"): {"type": "update", "unified_diff": diff}})
    ms = int(datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp() * 1000)
    own_turn = f"{ms:012x}"[:8] + "-" + f"{ms:012x}"[8:] + "-7000-8000-000000000001"
    r.event("task_started", turn_id=own_turn)
    r.turn(root).custom("call_own", patch("*** Add File: src/review.md", "+looks fine"), custom_ok("src/review.md"))
    cap = capture(r.write(tmp_path / "fork.jsonl"), root)
    assert [e["file"] for e in kinds(cap, "code.edit")] == ["src/review.md"]
    assert cap.ignored["copied from the parent thread (fork)"] == 1
    assert cap.session_id == SID


# ---------------------------------------------------------------- moves


def test_a_shell_mv_moves_our_copy_and_is_an_edit_of_the_destination(repo: tuple[Path, str], tmp_path: Path) -> None:
    """`git mv` / `mv` in a shell call moves the file: the move is filed under the new path (the
    source removed), and later patches of the new path are replayed on the moved copy instead of
    being left without ranges (the new path was in no commit and, after a later rename, not on disk)."""
    root, head = repo
    later = patch("*** Update File: src/cli.py", "@@", " import os", "+import sys")
    r = Rollout().meta(root, head).turn(root)
    r.function("mv", "shell_command", {"command": "git mv src/app.py src/cli.py", "workdir": str(root)},
               shell_out(0, ""))
    r.custom("p", later, custom_ok("src/cli.py"))
    r.function("mv2", "exec_command", {"cmd": "mv -v README.md docs", "workdir": str(root)}, exec_out(0, "renamed"))
    r.function("mv3", "exec_command", {"cmd": "mv src/gone.py src/new.py"}, exec_out(1, "No such file"))
    moved, gone, edit, readme, readme_gone = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (moved["op"], moved["file"], moved["from_file"], moved["tool"]) == ("move", "src/cli.py", "src/app.py",
                                                                                "shell_command")
    assert moved["after_range"] == [1, 8] and moved["after_text"] == APP and moved["call_id"] == "mv"
    assert (gone["op"], gone["file"], gone["moved_to"]) == ("delete", "src/app.py", "src/cli.py")
    assert (edit["file"], edit["before_range"], edit["after_range"]) == ("src/cli.py", [2, 1], [2, 2])
    assert "placed" not in edit and edit["file_before_sha"] == blob(APP)  # our copy moved with the file
    # `mv FILE DIR` moves it into the directory; the failed mv moved nothing.
    assert (readme["file"], readme["from_file"], gone["op"]) == ("docs/README.md", "README.md", "delete")
    assert readme_gone["moved_to"] == "docs/README.md"


def test_a_move_out_of_the_repository_removes_the_file(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root)
    r.function("mv", "shell_command", {"command": f"mv README.md {tmp_path / 'attic'}/", "workdir": str(root)},
               shell_out(0, ""))
    (edit,) = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (edit["op"], edit["file"], edit["before_range"], edit["before_text"]) == ("delete", "README.md", [1, 2],
                                                                                     README)


# ---------------------------------------------------------------- placing without the commit


def commit_at(root: Path, when: str, message: str) -> str:
    """Commit everything with author and committer dates `when` (as the rollout's clock says)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", message], cwd=root, check=True, env=env)
    return git(root, "rev-parse", "HEAD").strip()


def test_without_its_commit_a_patch_is_replayed_on_the_history_at_its_time(tmp_path: Path) -> None:
    """An exported rollout has no session_meta, or names a commit this clone lacks. The file as
    the repository's history had it when the session ran is its base, not the working tree, where
    later work moved the lines (the patch's context still matches there, two lines lower)."""
    root = (tmp_path / "repo").resolve()
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(APP)
    git(root, "init", "-q")
    commit_at(root, "2025-11-22T19:00:00Z", "before the session")
    (root / "src" / "app.py").write_text("# added by a later session\n# and another line\n" + APP)
    commit_at(root, "2025-11-23T09:00:00Z", "after the session")
    body = patch("*** Update File: src/app.py", "@@", "-    return 0", "+    return 5")
    for label, r in (("no session_meta", Rollout().turn(root)),
                     ("unknown commit", Rollout().meta(root, "0123456789abcdef0123456789abcdef01234567").turn(root))):
        r.custom("c", body, custom_ok("src/app.py"))
        (edit,) = kinds(capture(r.write(tmp_path / f"{label}.jsonl"), root), "code.edit")
        assert (edit["before_range"], edit["after_range"]) == ([8, 8], [8, 8]), label
        assert edit["file_before_sha"] == blob(APP) and "placed" not in edit, label


def test_a_patch_our_copy_cannot_take_is_placed_by_its_context_in_the_working_tree(tmp_path: Path) -> None:
    """The session's commit is missing and the file is in no commit before the session (another
    session created it, uncommitted): the patch is placed where Codex found it, by its context, in
    the working tree — and marked as placed so, its file hashes unknown."""
    root = (tmp_path / "repo").resolve()
    root.mkdir()
    (root / "README.md").write_text(README)
    git(root, "init", "-q")
    commit_at(root, "2025-11-22T19:00:00Z", "base")
    (root / "tool.py").write_text("import json\n\ndef load(path):\n    return json.load(open(path))\n")
    first = patch("*** Update File: tool.py", "@@", " import json", "+import sys", "@@ def load(path):",
                  "-    return json.load(open(path))", "+    return json.load(open(path, encoding='utf-8'))")
    stale = patch("*** Update File: tool.py", "@@", "-    return json.load(open(path, encoding='utf-8'))",
                  "+    with open(path, encoding='utf-8') as f:", "+        return json.load(f)")
    r = Rollout().meta(root, "0123456789abcdef0123456789abcdef01234567").turn(root)
    r.function("fmt", "shell_command", {"command": "black tool.py"}, shell_out(0, "reformatted tool.py"))
    r.custom("one", first, custom_ok("tool.py")).custom("two", stale, custom_ok("tool.py"))
    one, two = kinds(capture(r.write(tmp_path / "s.jsonl"), root), "code.edit")
    assert (one["before_range"], one["after_range"], one["placed"]) == ([2, 4], [2, 5], "working tree")
    assert one["file_before_sha"] is None and one["file_after_sha"] is None
    # The next patch of the file takes the state the first one was placed to.
    assert (two["before_range"], two["after_range"], two["placed"]) == ([5, 5], [5, 6], "earlier in the session")


# ---------------------------------------------------------------- dropped edits, counted


def test_edits_that_cannot_be_recorded_are_counted_by_reason(repo: tuple[Path, str], tmp_path: Path) -> None:
    """A patch whose text the transcript lost (redacted on export, cut short) that Codex applied,
    and a patch call whose outcome the rollout never says, are edits without a code.edit: each is
    counted by reason for the ingest summary. A patch Codex rejected too loses nothing."""
    root, head = repo
    r = Rollout().meta(root, head).turn(root)
    r.custom("redacted", "[REDACTED]", custom_ok("src/app.py", "README.md"))
    r.custom("rejected", "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n", custom_fail("invalid patch"))
    r.function("cut", "shell_command", {"command": "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: READ",
                                        "workdir": str(root)},
               shell_out(0, "Success. Updated the following files:\nM README.md\n"))
    r.custom("interrupted", MULTI_HUNK, None)
    r.message("assistant", "Done; the last patch was interrupted.")
    r.custom("running", patch("*** Add File: src/late.py", "+x = 1"), None)  # the rollout ends here: still running
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert kinds(cap, "code.edit") == []
    assert cap.dropped == {"apply_patch input redacted or unparseable": 3,
                           "apply_patch call without a result (interrupted?)": 1}


def test_a_redacted_patch_codex_reports_applying_is_recovered_from_its_changes(repo: tuple[Path, str],
                                                                                tmp_path: Path) -> None:
    root, head = repo
    r = Rollout().meta(root, head).turn(root).custom("red", "*** Begin Patch\n[REDACTED]", None)
    r.event("patch_apply_end", call_id="red", success=True, stdout="", stderr="", changes={
        str(root / "README.md"): {"type": "update", "unified_diff": "@@ -2 +2 @@\n-world\n+there\n",
                                  "move_path": None}})
    r.add("response_item", {"type": "custom_tool_call_output", "call_id": "red", "output": custom_ok("README.md")})
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    (edit,) = kinds(cap, "code.edit")
    assert (edit["file"], edit["before_range"], edit["after_text"]) == ("README.md", [2, 2], "there\n")
    assert not cap.dropped


def test_paths_under_dot_git_are_not_code(repo: tuple[Path, str], tmp_path: Path) -> None:
    root, head = repo
    body = patch("*** Add File: .git/hooks/pre-commit", "+#!/bin/sh", "+make lint", "*** Add File: src/ok.py", "+x = 1")
    r = Rollout().meta(root, head).turn(root).custom("c", body, custom_ok(".git/hooks/pre-commit", "src/ok.py"))
    cap = capture(r.write(tmp_path / "s.jsonl"), root)
    assert [e["file"] for e in kinds(cap, "code.edit")] == ["src/ok.py"]
    assert cap.dropped == {"a file under .git/ (git's own, not code)": 1}


def test_every_hunk_of_every_file_of_a_patch_is_its_own_edit_and_lineage(repo: tuple[Path, str],
                                                                          tmp_path: Path) -> None:
    """One session added src/lib.py's alpha helpers, a second appended the beta ones; a third
    patched one line of an alpha helper and a beta helper's two lines, added a file and deleted
    another, in one patch with context lines. Each file is an edit; the update keeps where its
    chunks landed (`context`). Its context lines are not its writing, and each hunk is linked to
    the code it changed: the alpha line to the first session, though the patch's removed lines
    are mostly the second's (taken together, they linked it to the second only)."""
    root, _ = repo
    alpha = [ln for i in range(3) for ln in (f"def alpha_{i}(value):",
                                             f"    return scale_alpha(value, {i}) + offset_alpha_{i} * {i + 3}")]
    beta = [ln for i in range(3) for ln in (f"def beta_{i}(value):",
                                            f"    return scale_beta(value, {i + 10}) + offset_beta_{i} * {i + 5}")]
    sids = [SID, "019a0000-0000-7000-8000-0000000000b2", "019a0000-0000-7000-8000-0000000000c3"]
    rollouts: list[Rollout] = []
    files = [alpha, alpha + beta]
    patches = [patch("*** Add File: src/lib.py", *("+" + ln for ln in alpha)),
               patch("*** Update File: src/lib.py", "@@", " " + alpha[-1], *("+" + ln for ln in beta))]
    for i, (sid, body) in enumerate(zip(sids, patches)):
        r = Rollout().meta(root, git(root, "rev-parse", "HEAD").strip(), id=sid).turn(root).message("user", "helpers")
        rollouts.append(r.custom(f"call_{i}", body, custom_ok("src/lib.py")))
        (root / "src" / "lib.py").write_text("".join(ln + "\n" for ln in files[i]))
        git(root, "add", "src/lib.py")
        git(root, "commit", "-qm", f"helpers {i}")
    later = Rollout().meta(root, git(root, "rev-parse", "HEAD").strip(), id=sids[2]).turn(root)
    later.message("user", "bias alpha_0, scale beta_1, add extra.py, drop the README")
    later.custom("call_2", patch(
        "*** Update File: src/lib.py",
        "@@", " " + alpha[0], "-" + alpha[1], "+" + alpha[1] + " + bias_correction(value, window=4)", " " + alpha[2],
        "@@", " " + beta[0], " " + beta[1], "-" + beta[2], "-" + beta[3],
        "+def beta_1(value, factor):", "+    return scale_beta(value * factor, 11) + offset_beta_1 * 6", " " + beta[4],
        "*** Add File: src/extra.py", "+def extra(value):", "+    return value",
        "*** Delete File: README.md"), custom_ok("src/lib.py", "src/extra.py", "README.md"))
    rollouts.append(later)
    final = [alpha[0], alpha[1] + " + bias_correction(value, window=4)", *alpha[2:], *beta[:2], "def beta_1(value, factor):",
             "    return scale_beta(value * factor, 11) + offset_beta_1 * 6", *beta[4:]]
    (root / "src" / "lib.py").write_text("".join(ln + "\n" for ln in final))
    sessions = tmp_path / "sessions"
    for hour, (sid, r) in enumerate(zip(sids, rollouts), 20):
        for rec in r.records:
            rec["timestamp"] = rec["timestamp"].replace("T20:", f"T{hour}:")
        r.write(sessions / f"rollout-2025-11-22T{hour}-00-00-{sid}.jsonl")
    run_engram(root, "init")
    run_engram(root, "ingest", str(sessions))

    edits = {e["file"]: e for e in shown_events(root, sids[2]) if e["kind"] == "code.edit"}
    assert {f: e["op"] for f, e in edits.items()} == {"src/lib.py": "update", "src/extra.py": "create",
                                                      "README.md": "delete"}
    lib = edits["src/lib.py"]
    assert lib["hunks"] == [[2, 2, 2, 2], [9, 10, 9, 10]]
    assert lib["context"] == [[1, 3], [7, 11]]
    assert lib["context_text"] == "".join(ln + "\n" for ln in final[0:3] + final[6:11])

    def answer(span: str, *args: str) -> dict[str, dict[str, str]]:
        doc = json.loads(run_engram(root, "explain", "--brief", span, *args).stdout)
        return {s["session_id"]: {f["kind"]: f["via"] for f in s["fragments"]} for s in doc["sessions"]}

    context = answer("src/lib.py:7-8")  # beta_0: context of the second hunk
    assert context[sids[1]]["code.edit"] == "direct"
    assert "code.edit" not in context[sids[2]] and context[sids[2]]["code.carried"] == "direct"
    biased = answer("src/lib.py:2-2")
    assert biased[sids[2]]["code.edit"] == "direct"
    assert biased[sids[0]] == {"code.edit": "lineage"}, "the hunk that changed alpha's line leads to its writer"
    assert sids[1] not in biased
