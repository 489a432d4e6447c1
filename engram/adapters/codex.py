"""Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`.

Every line is `{"timestamp", "type", "payload"}`. The model-visible history (`response_item`)
is the record we trust; `event_msg` lines are UI echoes of it (user_message, agent_message,
agent_reasoning), kept only when no response_item carries the same text.

Edits come from `apply_patch`, whichever way it reached the tool (see apply_patch.py), and
only when the call's output (or a `patch_apply_end` event) says it succeeded. Patches carry no
line numbers, so we keep our own copy of every file the session touched — starting from the
file at the session's git commit (without one this repository has, at its newest commit before
the file was first touched) — and replay each successful patch on it, the way Codex does.
Where a hunk cannot be placed on our copy, the `unified_diff` of the call's `patch_apply_end`
(newer Codex versions), which Codex computed on the real file, gives the ranges; without one
the patch is placed by its context in the nearest other state of the file we know (`placed`:
the session's last copy, the history at the edit's time, the working tree), and only when none
holds its context is the edit recorded with unknown (null) ranges. Shell commands that may
rewrite files behind our back (sed -i, redirections, formatters, git checkout…) make our copy
of those files unknown; `mv` / `git mv` move it (and are recorded as moves). Edits the rollout
shows and no code.edit holds (a redacted patch, one outside the repository) are counted by
reason (`Capture.drop`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Final, Iterable, Iterator

from engram.adapters.apply_patch import (
    FileOp,
    PatchCall,
    apply_update,
    patch_changes,
    patch_from_argv,
    patch_attempt,
    patch_from_custom,
    patch_from_function,
    shell_script,
)
from engram.adapters.base import OUTSIDE, Capture, Line, PathMapper, SourceSpan, posix_path, read_source
from engram.adapters.unified import (
    Change,
    apply_hunks,
    changes_from_hunks,
    context_fields,
    edit_ranges,
    hunk_extents,
    hunks_from_diff,
    join_lines,
    split_lines,
)
from engram.gitread import git_output
from engram.tape import events as E
from engram.words import whole_text

log = logging.getLogger(__name__)

HARNESS: Final = "codex"
TOOL: Final = "apply_patch"

_UUID_RE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
ENVELOPE_TYPES: Final = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg",
                                   "world_state", "inter_agent_communication", "inter_agent_communication_metadata"})
# Response items we know and deliberately do not turn into events.
QUIET_ITEMS: Final = frozenset({"ghost_snapshot", "compaction", "tool_search_call", "tool_search_output",
                                "image_generation_call", "compaction_summary"})
ITEM_TYPES: Final = frozenset({"message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                               "custom_tool_call_output", "local_shell_call", "web_search_call",
                               "agent_message"}) | QUIET_ITEMS
# Harness-written "user" messages: context the model is given, not words the user typed.
INJECTED_PREFIXES: Final = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                            "<INSTRUCTIONS>", "<turn_aborted>", "<permissions instructions>")

_EXIT_RE: Final = re.compile(r"^(?:Exit code:?|Process exited with code)\s*(-?\d+)\s*$")
_HEADER_RE: Final = re.compile(
    r"^(?:Exit code|Process exited with code|Wall time|Chunk ID|Process running with session ID|"
    r"Original token count|Total output lines|Command)\b")
_TRUNCATED_RE: Final = re.compile(
    r"Warning: truncated output|^Total output lines: \d+|tokens truncated…|chars truncated…|\[\.\.\. omitted \d+ of \d+ lines",
    re.M)
_NUMBERED_RE: Final = re.compile(r"^ *(\d+)\t(.*)$")
_SED_RANGE_RE: Final = re.compile(r"^(\d+)(?:,(\d+|\$))?p;?$")
# Shell commands that rewrite files behind apply_patch's back. Over-matching only costs ranges.
_FILE_WRITERS: Final = frozenset({"mv", "cp", "rm", "tee", "truncate", "touch", "dd", "patch", "ed", "ex", "install",
                                  "ln", "rsync", "unzip", "tar", "apply_patch", "applypatch"})
_SCRIPT_RUNNERS: Final = frozenset({"python", "python3", "node", "ruby", "perl", "php", "bash", "sh", "zsh"})
_FORMATTERS: Final = frozenset({"black", "isort", "autopep8", "yapf", "rustfmt", "gofmt", "goimports", "clang-format",
                                "pre-commit", "autoflake", "pyupgrade"})
_GIT_REWRITES: Final = frozenset({"checkout", "restore", "reset", "stash", "pull", "merge", "rebase", "apply", "am",
                                  "cherry-pick", "revert", "switch"})
_GIT_FILE_WRITES: Final = frozenset({"mv", "rm"})  # git commands that change only the files they name
_PREFIXES: Final = frozenset({"sudo", "time", "env", "nice", "xargs", "npx", "exec", "command"})
_REDIRECT_RE: Final = re.compile(r"(?<![0-9&<>])>{1,2}\s*(?!&|/dev/null\b)[^\s>]")
_PIECE_SPLIT_RE: Final = re.compile(r"&&|\|\||[;&|\n()`]")


# ---------------------------------------------------------------- tool output


@dataclass(slots=True)
class Output:
    """A tool output with the harness's header taken off."""

    text: str
    exit_code: int | None = None
    success: bool | None = None
    clipped: bool = False  # the header said the output was cut

    @property
    def failed(self) -> bool:
        return (self.exit_code is not None and self.exit_code != 0) or self.success is False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 or (self.exit_code is None and self.success is True)

    @property
    def truncated(self) -> bool:
        return self.clipped or bool(_TRUNCATED_RE.search(self.text))


def _items_text(items: list[Any]) -> str:
    parts = [i["text"] for i in items if isinstance(i, dict) and i.get("type") in ("input_text", "output_text", "text")
             and isinstance(i.get("text"), str) and i["text"]]
    return "\n".join(parts)


def parse_output(output: Any) -> Output:
    """Text, exit code and success flag of every output shape Codex has written.

    Shapes: plain text with an `Exit code: N` / `Process exited with code N` … `Output:` header,
    a JSON string `{"output", "metadata": {"exit_code"}}`, an object `{content, success}`, and
    content-item arrays (or a single item).
    """
    if isinstance(output, str) and output.lstrip().startswith("{"):
        try:
            decoded = whole_text(json.loads(output))  # (a lone surrogate escaped in it: no tape holds one)
        except (ValueError, RecursionError):  # (RecursionError: nested deeper than the stack)
            decoded = None
        if isinstance(decoded, dict) and ("output" in decoded or "content" in decoded):
            output = decoded
    if isinstance(output, dict):
        return _dict_output(output)
    if isinstance(output, list):
        return _header_output(_items_text(output))
    if output is None:
        return Output("")
    return _header_output(str(output))


def _dict_output(d: dict[str, Any]) -> Output:
    success = d.get("success") if isinstance(d.get("success"), bool) else None
    if "output" in d:
        meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
        inner = _header_output(_text_of(d["output"]))
        code = meta.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            inner.exit_code = code
        inner.success = success
        return inner
    if "content" in d:
        inner = _header_output(_text_of(d["content"]))
        inner.success = success
        return inner
    if isinstance(d.get("text"), str):
        return _header_output(d["text"])
    return Output(json.dumps(d, sort_keys=True), success=success)


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _items_text(value)
    if isinstance(value, dict):
        return _items_text([value])
    return "" if value is None else str(value)


def _header_output(text: str) -> Output:
    lines = text.split("\n")
    code = None
    clipped = False
    i = 0
    while i < len(lines) and lines[i] != "Output:" and _HEADER_RE.match(lines[i]):
        m = _EXIT_RE.match(lines[i])
        if m:
            code = int(m.group(1))
        clipped = clipped or lines[i].startswith("Total output lines")
        i += 1
    if 0 < i < len(lines) and lines[i] == "Output:":
        return Output("\n".join(lines[i + 1:]), code, clipped=clipped)
    return Output(text, code)


def patch_status(out: Output) -> bool | None:
    """Did apply_patch succeed? None when the output does not say (a later event may)."""
    if out.exit_code is not None:
        return out.exit_code == 0
    if out.success is not None:
        return out.success
    head = out.text.lstrip()
    if head.startswith("Success."):
        return True
    if re.match(r"(?i)(apply_patch verification failed|failed to|invalid patch|error|patch rejected|aborted)", head):
        return False
    return None


# ---------------------------------------------------------------- file contents


# Where a patch our copy could not place was placed by its context instead (a code.edit's `placed`).
EARLIER: Final = "earlier in the session"  # the file as this session last knew it
HISTORY: Final = "git history"  # the file in this repository's newest commit before the edit
TREE: Final = "working tree"  # the file as it is now


class Files:
    """Our copy of the files a session touched, as text; None where we do not know it.

    A file's first version is its blob at the session's commit (when this repository has
    that commit; else at the newest commit before the moment it is first touched), else the file
    on disk now, else unknown. After that only our replay of the session's patches changes it.
    `last` keeps the nearest state we had of each file once our copy is forgotten, for placing
    a patch by its context (`nearby`).
    """

    def __init__(self, repo_root: Path) -> None:
        self.root = repo_root
        self.text: dict[str, str | None] = {}
        self.last: dict[str, str] = {}  # the last text each file had in our copy (exact or placed by context)
        self.commit: str | None = None
        self.now: Any = None  # the time of the record being read
        self.frozen = False  # something rewrote unknown files: stop trusting first versions
        self.tainted: list[str] = []  # scripts that may have rewritten the files they name
        self._commit_ok: bool | None = None
        self._before: dict[str, str | None] = {}  # time -> the newest commit before it

    def get(self, rel: str) -> str | None:
        if rel not in self.text:
            stale = self.frozen or any(_named_in(rel, script) for script in self.tainted)
            self.set(rel, None if stale else self._first_version(rel))
        return self.text[rel]

    def set(self, rel: str, text: str | None) -> None:
        self.text[rel] = text
        if text is not None:
            self.last[rel] = text

    def nearby(self, rel: str, tried: str | None) -> Iterator[tuple[str, str]]:
        """States of `rel` near the one a patch was applied to, nearest first, with where each
        came from (EARLIER, HISTORY, TREE); none equal to `tried` or to one given before.

        For a patch our copy cannot place: the file at the session's commit when this
        repository lacks that commit (exported rollouts, a colleague's branch), or once a command
        rewrote it. Codex found the patch's lines by their context in the real file; one of
        these usually still holds them."""
        seen = {tried}
        candidates: list[tuple[str, Callable[[], str | None]]] = [
            (EARLIER, lambda: self.last.get(rel)),
            (HISTORY, lambda: self._at_time(rel, self.now)),
            (TREE, lambda: self._on_disk(rel)),
        ]
        for where, load in candidates:
            text = load()
            if text is not None and text not in seen:
                seen.add(text)
                yield where, text

    def _at_time(self, rel: str, when: Any) -> str | None:
        """`rel` in the newest commit of this repository's HEAD made before `when`."""
        if not isinstance(when, str) or not when or not (self.root / ".git").exists():
            return None
        key = when[:16]  # to the minute: one git call per minute of edits
        if key not in self._before:
            out = self._git("log", "-1", "--format=%H", f"--before={when}", "HEAD")
            self._before[key] = out.decode().strip() or None if out is not None else None
        commit = self._before[key]
        blob = self._git("cat-file", "blob", f"{commit}:{rel}") if commit else None
        return _decode(blob) if blob is not None else None

    def _on_disk(self, rel: str) -> str | None:
        path = self.root / rel
        try:
            return _decode(path.read_bytes()) if path.is_file() else None
        except OSError:
            return None

    def forget_named_in(self, script: str) -> None:
        """Forget every file `script` names (by path or file name), now and when first loaded later."""
        self.tainted.append(script)
        for rel in list(self.text):
            if _named_in(rel, script):
                self.text[rel] = None

    def forget_all(self) -> None:
        for rel in self.text:
            self.text[rel] = None
        self.frozen = True

    def _first_version(self, rel: str) -> str | None:
        """The file when the session first touched it: at the session's commit; without one
        this repository has, in its newest commit before that moment (exported rollouts have
        no `session_meta`; a colleague's commit may be on a branch never fetched here); else
        the file on disk now.

        Why the history before the disk: the working tree is the file after every later
        session, on which a patch's context often still matches, in another place: replayed
        on it, a third of one set's exported edits were placed at the wrong lines."""
        if self.commit and self._has_commit():
            blob = self._git("cat-file", "blob", f"{self.commit}:{rel}")
            if blob is not None:
                return _decode(blob)
        else:
            text = self._at_time(rel, self.now)
            if text is not None:
                return text
        return self._on_disk(rel)

    def _has_commit(self) -> bool:
        if self._commit_ok is None:
            self._commit_ok = (self.root / ".git").exists() and \
                self._git("cat-file", "-e", f"{self.commit}^{{commit}}") is not None
        return self._commit_ok

    def _git(self, *args: str) -> bytes | None:
        return git_output(self.root, *args)


def _named_in(rel: str, script: str) -> bool:
    return rel in script or posixpath.basename(rel) in script


def _decode(data: bytes) -> str | None:
    """Text of a UTF-8 file; None for anything else (its git blob id could not be matched)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------- shell writes


def _words(piece: str) -> list[str]:
    try:
        return shlex.split(piece)
    except ValueError:
        return piece.split()


def _git_subcommand(args: list[str]) -> str | None:
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in ("-C", "-c", "--git-dir", "--work-tree"):
            skip = True
        elif not a.startswith("-"):
            return a
    return None


def shell_effect(script: str) -> str:
    """What a shell script may have rewritten: "none", "files" (the ones it names) or "all"."""
    effect = "files" if _REDIRECT_RE.search(script) else "none"
    for piece in _PIECE_SPLIT_RE.split(script):
        words = _words(piece)
        while words and (words[0] in _PREFIXES or ("=" in words[0] and not words[0].startswith("-"))):
            words = words[1:]
        if not words:
            continue
        head, args = posixpath.basename(words[0]), words[1:]
        if _rewrites_tree(head, args):
            return "all"
        if head in ("bash", "sh", "zsh") and len(args) >= 2 and args[0].startswith("-") and "c" in args[0]:
            inner = shell_effect(args[1])
            if inner == "all":
                return "all"
            effect = "files" if inner == "files" else effect
        elif head in _FILE_WRITERS or "-exec" in args or "-execdir" in args:
            effect = "files"
        elif head == "git" and _git_subcommand(args) in _GIT_FILE_WRITES:
            effect = "files"
        elif head in ("sed", "perl") and any(a.startswith("-") and not a.startswith("--") and "i" in a for a in args):
            effect = "files"
        elif head in _SCRIPT_RUNNERS and ("-c" in args or "-e" in args or "-" in args or "<<" in piece):
            effect = "files"
    return effect


def _rewrites_tree(head: str, args: list[str]) -> bool:
    """Commands that may rewrite files they do not name: formatters, fixers, git checkouts."""
    if head == "git":
        return _git_subcommand(args) in _GIT_REWRITES
    if head in _FORMATTERS:
        return True
    opts = set(args)
    if head == "ruff":
        return "format" in opts or "--fix" in opts
    if head in ("prettier", "eslint", "biome"):
        return bool(opts & {"--write", "-w", "--fix"})
    if head in ("cargo", "make", "go"):
        return bool(args) and args[0] in ("fmt", "fix", "format")
    return False


# ---------------------------------------------------------------- shell reads


@dataclass(slots=True)
class ReadSpec:
    """A shell command that printed (part of) one file: which file and how to number its output."""

    path: str
    cd: str | None
    start: int = 1  # the file line of the first output line (unnumbered output)
    numbered: bool = False  # `nl -ba` / `cat -n`: the output carries its line numbers
    tail: int | None = None  # `tail -n N`: the last N lines (needs the file's length)
    limit: int | None = None  # at most this many lines can have been printed


def _tokens(script: str) -> list[str] | None:
    try:
        lex = shlex.shlex(script, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        return list(lex)
    except ValueError:
        return None


def _words_after_cd(cmd: Any) -> tuple[list[str], str | None] | None:
    """A shell command's words (a `bash -lc SCRIPT` call's script split as the shell would) and the
    directory of a leading `cd DIR &&`, taken off; None for no command. What `read_spec` and
    `mv_command` both recognise commands from."""
    if isinstance(cmd, list):
        script = shell_script(cmd)
        words = [str(c) for c in cmd] if script is None else _tokens(script)
    elif isinstance(cmd, str):
        words = _tokens(cmd)
    else:
        return None
    if not words:
        return None
    cd = None
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&":
        cd, words = words[1], words[3:]
    return words, cd


def read_spec(cmd: Any) -> ReadSpec | None:
    """Recognise `cat F`, `sed -n 'A,Bp' F`, `head -n N F`, `tail -n N F`, `nl -ba F`, `cat -n F`
    (optionally after `cd DIR &&` and piped through sed/head/tail), else None."""
    got = _words_after_cd(cmd)
    if got is None:
        return None
    words, cd = got
    words = _drop_stderr_redirect(words)
    stages: list[list[str]] = [[]]
    for w in words:
        if w == "|":
            stages.append([])
        elif w in ("&&", "||", ";", "&", ">", ">>", "<", "|&", "(", ")") or not w:
            return None
        else:
            stages[-1].append(w)
    return _stages_spec(stages, cd)


def _drop_stderr_redirect(words: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i] == "2" and i + 2 < len(words) and words[i + 1] in (">", ">>") and words[i + 2] == "/dev/null":
            i += 3
            continue
        if words[i] == "2>/dev/null":
            i += 1
            continue
        out.append(words[i])
        i += 1
    return out


def _stages_spec(stages: list[list[str]], cd: str | None) -> ReadSpec | None:
    first = stages[0]
    if not first:
        return None
    spec = _first_stage(first, cd)
    if spec is None:
        return None
    for stage in stages[1:]:
        if not _filter_stage(stage, spec):
            return None
    return spec


def _first_stage(words: list[str], cd: str | None) -> ReadSpec | None:
    prog, args = words[0], words[1:]
    if prog == "cat":
        numbered = False
        if args[:1] == ["-n"]:
            numbered, args = True, args[1:]
        return ReadSpec(args[0], cd, numbered=numbered) if len(args) == 1 and not args[0].startswith("-") else None
    if prog == "nl":
        files = [a for a in args if not a.startswith("-")]
        flags = [a for a in args if a.startswith("-")]
        if len(files) != 1 or flags != ["-ba"]:
            return None
        return ReadSpec(files[0], cd, numbered=True)
    if prog in ("sed", "head", "tail"):
        files = _stage_files(prog, args)
        if files is None or len(files[1]) != 1:
            return None
        spec = ReadSpec(files[1][0], cd)
        return spec if _apply_slice(prog, files[0], spec) else None
    return None


def _stage_files(prog: str, args: list[str]) -> tuple[list[str], list[str]] | None:
    """Split a sed/head/tail argument list into (options, files)."""
    opts: list[str] = []
    files: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if prog == "sed" and a == "-n":
            opts.append(a)
        elif prog == "sed" and not opts[1:] and opts and not a.startswith("-"):
            opts.append(a)  # the script after -n
        elif prog in ("head", "tail") and a == "-n" and i + 1 < len(args):
            opts += [a, args[i + 1]]
            i += 1
        elif prog in ("head", "tail") and re.fullmatch(r"-n?\+?\d+", a):
            opts.append(a)
        elif a.startswith("-"):
            return None
        else:
            files.append(a)
        i += 1
    return opts, files


def _apply_slice(prog: str, opts: list[str], spec: ReadSpec) -> bool:
    """Narrow the window of file lines the output shows; False for anything but a plain slice."""
    if prog == "sed":
        if len(opts) != 2 or opts[0] != "-n":
            return False
        m = _SED_RANGE_RE.match(opts[1])
        if not m:
            return False
        first = int(m.group(1))
        last = first if m.group(2) is None else None if m.group(2) == "$" else int(m.group(2))
        if first < 1 or (last is not None and last < first):
            return False
        spec.start += first - 1
        _limit(spec, None if last is None else last - first + 1)
        return True
    count = opts[-1] if opts else "10"
    count = count[2:] if count.startswith("-n") else count.lstrip("-")
    if prog == "head":
        if not count.isdigit():
            return False
        _limit(spec, int(count))
        return True
    if count.startswith("+") and count[1:].isdigit() and int(count[1:]) >= 1:
        spec.start += int(count[1:]) - 1
        return True
    if count.isdigit() and spec.start == 1 and spec.limit is None and not spec.numbered:
        spec.tail = int(count)
        return True
    return False


def _limit(spec: ReadSpec, n: int | None) -> None:
    if n is not None:
        spec.limit = n if spec.limit is None else min(spec.limit, n)


def _filter_stage(words: list[str], spec: ReadSpec) -> bool:
    prog = words[0]
    if prog not in ("sed", "head", "tail") or spec.tail is not None:
        return False
    split = _stage_files(prog, words[1:])
    if split is None or split[1]:
        return False
    if spec.numbered:
        return prog == "head" or prog == "sed" or prog == "tail"  # the output carries the numbers
    return _apply_slice(prog, split[0], spec)


# ---------------------------------------------------------------- the adapter


@dataclass(slots=True)
class _Call:
    name: str
    input: Any
    cwd: str | None
    patch: PatchCall | None = None
    command: Any = None
    workdir: str | None = None
    unparsed: bool = False  # meant to apply a patch, which we cannot read (`patch_attempt`)
    answered: bool = False  # its output came
    item: int = 0  # how many response items came before it
    at: tuple[int, int] = (0, 0)  # its source line (`Capture.cursor`)
    moves: list[tuple[str | None, str | None, str | None]] = field(default_factory=list)  # `mv`: (src, dst, text)


# Why an edit the transcript shows has no code.edit (`Capture.drop`).
UNPARSED: Final = "apply_patch input redacted or unparseable"
NO_RESULT: Final = "apply_patch call without a result (interrupted?)"
UNCLEAR: Final = "apply_patch result that does not say whether it applied"
MOVED_UNKNOWN: Final = "file moved by a command, its content unknown"
_LISTED_RE: Final = re.compile(r"^[AMD] \S", re.M)
_MV_FLAGS: Final = frozenset("finvk")


def mv_command(cmd: Any) -> tuple[list[str], str, str | None] | None:
    """`(sources, target, cd)` of `mv [-finv] SRC... DST` or `git mv [-fkv] SRC... DST`, run alone
    or after `cd DIR &&`; None for any other command (globs, pipes, several commands)."""
    got = _words_after_cd(cmd)
    if got is None:
        return None
    words, cd = got
    if words[:2] == ["git", "mv"]:
        args = words[2:]
    elif words[:1] == ["mv"]:
        args = words[1:]
    else:
        return None
    paths = [a for a in args if not a.startswith("-")]
    flags = "".join(a[1:] for a in args if a.startswith("-") and a != "--")
    if not set(flags) <= _MV_FLAGS or len(paths) < 2 or any(c in a for a in paths for c in "*?[{$`;&|<>()"):
        return None
    return paths[:-1], paths[-1], cd


def started(records: Iterable[dict[str, Any]]) -> str | None:
    """When the session began, as its capture's `started` will say, from its first records: the
    first session header's time (a resumed rollout repeats older headers after its own)."""
    for rec in records:
        header = _header(rec) if isinstance(rec, dict) else None
        if header is not None:
            at = _started_at(header, rec.get("timestamp"))
            return at if isinstance(at, str) else None
    return None


def _header(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The session header a record carries: a `session_meta` payload, or the bare
    `{id, timestamp, instructions}` line a pre-envelope (<= 0.1.x) rollout starts with."""
    typ = rec.get("type") if isinstance(rec.get("type"), str) else None
    if typ == "session_meta":
        return rec["payload"] if isinstance(rec.get("payload"), dict) else None
    if typ is None and "payload" not in rec and "id" in rec and "timestamp" in rec:
        return rec
    return None


def _subagent(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """The kind of subagent a rollout is (`guardian`, `review`, `thread_spawn`…) and the session
    of the thread that started it; (None, None) for a rollout a person started.

    Codex writes `source` as a string for a person's session ("cli", "vscode") and as
    `{"subagent": KIND}` for a subagent's, KIND a string or `{"other": NAME}` or `{NAME: {…}}`;
    the parent is `parent_thread_id` (Codex 0.142), or inside `thread_spawn`."""
    source = meta.get("source")
    sub = source.get("subagent") if isinstance(source, dict) else None
    if isinstance(sub, str) and sub:
        kind: str | None = sub
    elif isinstance(sub, dict) and isinstance(sub.get("other"), str) and sub["other"]:
        kind = sub["other"]
    elif isinstance(sub, dict) and len(sub) == 1:
        kind = str(next(iter(sub)))
    else:
        return None, None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    parent = meta.get("parent_thread_id") or (spawn.get("parent_thread_id") if isinstance(spawn, dict) else None)
    return kind, parent if isinstance(parent, str) and parent else None


def _copied_history(lines: list[Line]) -> int:
    """How many of a forked thread's first lines are its parent's history (0 for a rollout that
    is not a fork).

    A Codex subagent's rollout (`forked_from_id`, Codex 0.144) starts with its parent's messages
    and events, restamped with the fork's start: read as its own, they gave it the parent's
    edits (chikachow/cyspbot). Its own work starts with the first turn it runs: a `task_started`
    whose turn id, a UUIDv7, was made at or after the fork's start (the copied ones were made
    before it). Without such a turn nothing is taken for a copy."""
    first = next((ln.record for ln in lines if isinstance(ln.record, dict)), None)
    meta = first.get("payload") if isinstance(first, dict) and first.get("type") == "session_meta" else None
    if not isinstance(meta, dict) or not meta.get("forked_from_id"):
        return 0
    start = _epoch_ms(meta.get("timestamp") or first.get("timestamp"))
    if start is None:
        return 0
    for i, ln in enumerate(lines):
        rec = ln.record
        p = rec.get("payload") if isinstance(rec, dict) else None
        if isinstance(p, dict) and rec.get("type") == "event_msg" and p.get("type") == "task_started":
            made = _uuid7_ms(p.get("turn_id"))
            if made is not None and made >= start - 1000:
                return i
    return 0


def _epoch_ms(ts: Any) -> int | None:
    try:
        return int(datetime.fromisoformat(str(ts)).timestamp() * 1000)
    except ValueError:
        return None


def _uuid7_ms(value: Any) -> int | None:
    """The creation time (Unix ms) a UUIDv7 carries in its first 48 bits."""
    digits = str(value or "").replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        return int(digits[:12], 16)
    except ValueError:
        return None


def _edit_event(fields: dict[str, Any], ts: Any, call_id: str) -> dict[str, Any]:
    """The code.edit of one file's change (`fields`: file, op, ranges, texts, file shas)."""
    return {"kind": E.CODE_EDIT, "ts": ts, **fields, "call_id": call_id, "tool": TOOL,
            "before_sha": E.sha256_text(fields["before_text"]), "after_sha": E.sha256_text(fields["after_text"])}


def _edit_events(fields: dict[str, Any], ts: Any, call_id: str) -> list[dict[str, Any]]:
    """The code.edits of one file operation: one, or for a move two: the edit under its
    destination (`from_file` names the source), then the source's removal (`moved_to`).

    Why: the index files an edit under its `file`; a moved file's edit filed under the path it
    left was found by `explain` on the new path only through the patch's text."""
    if fields.get("op") != "move" or not fields.get("to_file"):
        return [_edit_event(fields, ts, call_id)]
    src, dst = fields["file"], fields["to_file"]
    moved = {k: v for k, v in fields.items() if k != "to_file"} | {"file": dst, "from_file": src}
    gone = {"file": src, "op": "delete", "moved_to": dst, "before_range": None, "after_range": [1, 0],
            "before_text": "", "after_text": "", "file_before_sha": fields.get("file_before_sha"),
            "file_after_sha": None}
    return [_edit_event(moved, ts, call_id), _edit_event(gone, ts, call_id)]


def _started_at(header: dict[str, Any], ts: Any) -> Any:
    return header.get("timestamp") or ts


@dataclass
class _State:
    cwd: str | None = None
    calls: dict[str, _Call] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)  # patch calls credited or known to have failed
    echoes: Counter[tuple[str, str]] = field(default_factory=Counter)  # response_item texts event_msgs repeat
    seen_meta: bool = False


def parse_rollout(
    sources: list[SourceSpan],
    mapper_for: Callable[[str | None], PathMapper],
    *,
    max_line_bytes: int,
    repo_root: Path,
) -> Capture:
    """Read one rollout file into a capture; every event is tagged with its source line."""
    src = sources[0]
    skipped: Counter[str] = Counter()
    lines = read_source(src, max_line_bytes=max_line_bytes, skipped=skipped)
    m = _UUID_RE.findall(src.path.name)
    cap = Capture(HARNESS, m[-1] if m else content_id(lines), sources, skipped=skipped)
    cap.meta = {"harness_version": None, "model": None, "cwd": None, "git_head": None, "git_branch": None,
                "started": None, "originator": None}
    reader = _Rollout(cap, mapper_for, repo_root)
    if not _records_cwd(lines):
        cwd = inferred_cwd(lines, mapper_for, repo_root)
        cap.meta["cwd_inferred"] = cwd  # None: the rollout names no working directory, nor do its paths
        cap.meta["cwd"] = reader.st.cwd = cwd
    reader.run(lines)
    return cap


CONTENT_ID_PREFIX: Final = "codex-"


def content_id(lines: list[Line]) -> str:
    """A session id for a rollout whose name and records carry none (an exported rollout without
    its `session_meta`), from its content, not its path: the same rollout copied elsewhere or
    ingested again is the same session. Its first records, up to the first with a time (a
    session's first line names a moment, to the millisecond), decide it; what is appended
    later does not change it."""
    h = hashlib.sha256()
    for line in lines:
        if line.record is None:
            continue
        h.update(json.dumps(line.record, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if line.record.get("timestamp"):
            break
    return CONTENT_ID_PREFIX + h.hexdigest()[:16]


def _records_cwd(lines: list[Line]) -> bool:
    """Whether a record names the session's working directory (`session_meta`, `turn_context`)."""
    for line in lines:
        rec = line.record
        payload = rec.get("payload") if isinstance(rec, dict) else None
        header = payload if isinstance(payload, dict) and rec.get("type") in ("session_meta", "turn_context") else \
            (_header(rec) if isinstance(rec, dict) else None)
        if isinstance(header, dict) and isinstance(header.get("cwd"), str) and header["cwd"]:
            return True
    return False


def inferred_cwd(lines: list[Line], mapper_for: Callable[[str | None], PathMapper], repo_root: Path) -> str | None:
    """The working directory of a rollout that records none, from the absolute paths its calls
    name: the `workdir` most of its shell calls ran in, else the longest common directory of
    those and of the files it patched, or the ancestor of that under which the patched files
    are this repository's files (a session that only patched files in `src/` ran above it).
    None when they name none, or only a directory no project is (`/`, `/home`): patches'
    relative paths are then taken from the repository root."""
    workdirs: Counter[PurePosixPath] = Counter()
    files: list[PurePosixPath] = []
    for item, applied in _call_items(lines):
        patch, workdir = _call_paths(item) if item is not None else (None, None)
        base = PurePosixPath(posix_path(workdir)) if workdir else None
        if base is not None and base.is_absolute():
            workdirs[base] += 1
        named = [p for op in patch.ops for p in (op.path, op.move_to) if p] if patch is not None else applied
        for path in named:
            p = PurePosixPath(posix_path(path))
            if not p.is_absolute() and base is not None and base.is_absolute():
                p = base / p
            if p.is_absolute():
                files.append(p)
    if workdirs:
        # Codex runs a shell call in the session's directory unless told otherwise.
        top, n = workdirs.most_common(1)[0]
        if 2 * n > sum(workdirs.values()) and len(top.parts) >= 3:
            return str(top)
    dirs = [*workdirs, *(f.parent for f in files)]
    if not dirs:
        return None
    common = PurePosixPath(posixpath.commonpath([str(d) for d in dirs]))
    if len(common.parts) < 3:  # "/", "/home", "/Users", a Windows drive: no project's directory
        return None
    return str(_holding_root(common, [str(f) for f in files], mapper_for, repo_root))


def _holding_root(common: PurePosixPath, files: list[str], mapper_for: Callable[[str | None], PathMapper],
                  repo_root: Path) -> PurePosixPath:
    """`common` or the ancestor of it (at least two levels deep) from which most of `files` map
    onto files of this repository, the deepest of those; `common` when none maps onto any."""
    best, hits = common, 0
    for cand in (common, *common.parents):
        if len(cand.parts) < 3:
            break
        mapper = mapper_for(str(cand))
        n = sum(1 for f in files if (rel := mapper.to_repo(f)) is not None and (repo_root / rel).is_file())
        if n > hits:
            best, hits = cand, n
    return best


def _call_items(lines: list[Line]) -> Iterable[tuple[dict[str, Any] | None, list[str]]]:
    """The tool calls of a rollout, enveloped or bare (pre-envelope), as (call, []), and the
    files of patches Codex applied (`patch_apply_end`), as (None, paths)."""
    for line in lines:
        rec = line.record
        if not isinstance(rec, dict):
            continue
        item = rec.get("payload") if rec.get("type") in ("response_item", "event_msg") else rec if "payload" not in rec \
            else None
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
            yield item, []
        elif item.get("type") == "patch_apply_end" and isinstance(item.get("changes"), dict):
            yield None, [str(path) for path in item["changes"]]


def _call_paths(item: dict[str, Any]) -> tuple[PatchCall | None, str | None]:
    """The patch a call makes, if any, and its `workdir`, read as `_Rollout.call` reads them."""
    name = str(item.get("name") or "")
    if item.get("type") == "custom_tool_call":
        raw = item.get("input") if isinstance(item.get("input"), str) else ""
        patch = patch_from_custom(name, raw)
        return patch, patch.workdir if patch is not None else None
    if item.get("type") == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        workdir = _str(action.get("working_directory"))
        cmd = action.get("command")
        return (patch_from_argv(cmd, workdir) if isinstance(cmd, list) else None), workdir
    raw_args = item.get("arguments")
    args = _json_dict(raw_args) if isinstance(raw_args, str) else raw_args if isinstance(raw_args, dict) else None
    patch = patch_from_function(name, args)
    workdir = patch.workdir if patch is not None else _str(args.get("workdir")) if args is not None else None
    return patch, workdir


class _Rollout:
    """The walk over one rollout's lines, with the state it needs (pending calls, file copies)."""

    def __init__(self, cap: Capture, mapper_for: Callable[[str | None], PathMapper], repo_root: Path) -> None:
        self.cap = cap
        self.mapper_for = mapper_for
        self.st = _State()
        self.files = Files(repo_root)
        self.outside = OUTSIDE  # why the file operation being read has no repository path
        self.items = 0  # response items read so far

    def run(self, lines: list[Line]) -> None:
        self.st.echoes = _echoes(lines)
        copied = _copied_history(lines)
        for i, line in enumerate(lines):
            rec = line.record
            if rec is None:
                continue
            self.cap.cursor = (0, line.offset)
            self.files.now = rec.get("timestamp") or self.files.now
            if i < copied:
                self.copied(rec)
            else:
                self.record(rec)
        self.unsettled()

    def copied(self, rec: dict[str, Any]) -> None:
        """A record of the parent's history a forked thread starts with: not this session's work.
        Its context still counts, and the changes it applied bring our file copies up to date."""
        payload = rec.get("payload") if isinstance(rec.get("payload"), dict) else {}
        if rec.get("type") in ("session_meta", "turn_context"):
            self.record(rec)
            return
        if rec.get("type") == "event_msg" and payload.get("type") == "patch_apply_end" and payload.get("success"):
            self.applied_edits(str(payload.get("call_id") or ""), payload.get("changes"), rec.get("timestamp"))
        self.cap.ignored["copied from the parent thread (fork)"] += 1

    # ------------------------------------------------------------ dispatch

    def record(self, rec: dict[str, Any]) -> None:
        typ = rec.get("type") if isinstance(rec.get("type"), str) else None
        payload = rec.get("payload")
        ts = rec.get("timestamp")
        if typ not in ENVELOPE_TYPES:
            if "payload" not in rec and typ in ITEM_TYPES:
                self.response_item(rec, ts)  # pre-envelope rollouts: bare response items
            elif (header := _header(rec)) is not None:
                self.session_meta(header, ts)  # pre-envelope rollouts: a bare {id, timestamp, instructions}
            else:
                self.cap.skipped[f"unknown record type {typ!r}"] += 1
            return
        if not isinstance(payload, dict):
            self.cap.skipped[f"{typ} record without a payload object"] += 1
            return
        if typ == "session_meta":
            self.session_meta(payload, ts)
        elif typ == "turn_context":
            self.turn_context(payload)
        elif typ == "response_item":
            self.response_item(payload, ts)
        elif typ == "event_msg":
            self.event_msg(payload, ts)
        elif typ == "compacted":
            self.add(ts, E.COMPACT, trigger="codex-compacted", message=payload.get("message"))
        else:
            self.cap.ignored[str(typ)] += 1

    def add(self, ts: Any, kind: str, **fields: Any) -> None:
        self.cap.add({"kind": kind, "ts": ts, **fields})

    # ------------------------------------------------------------ context records

    def session_meta(self, p: dict[str, Any], ts: Any) -> None:
        if self.st.seen_meta:
            self.cap.ignored["session_meta (another: resume, fork or subagent)"] += 1
            return
        self.st.seen_meta = True
        meta = self.cap.meta
        if isinstance(p.get("id"), str) and p["id"]:
            self.cap.session_id = p["id"]
        git = p.get("git") if isinstance(p.get("git"), dict) else {}
        cwd = p.get("cwd") if isinstance(p.get("cwd"), str) else None
        meta.update(harness_version=p.get("cli_version"), cwd=cwd, git_branch=git.get("branch"),
                    started=_started_at(p, ts), originator=p.get("originator"))
        kind, parent = _subagent(p)
        if kind is not None:
            meta.update(subagent=kind, parent_session=parent)
        if isinstance(git.get("commit_hash"), str) and git["commit_hash"]:
            meta["git_head"] = git["commit_hash"]
            self.files.commit = git["commit_hash"]
        self.st.cwd = cwd

    def turn_context(self, p: dict[str, Any]) -> None:
        if isinstance(p.get("cwd"), str) and p["cwd"]:
            self.st.cwd = p["cwd"]
            if self.cap.meta.get("cwd") is None:
                self.cap.meta["cwd"] = p["cwd"]
        if self.cap.meta.get("model") is None and isinstance(p.get("model"), str):
            self.cap.meta["model"] = p["model"]
        self.cap.ignored["turn_context"] += 1

    def ghost_snapshot(self, p: dict[str, Any]) -> None:
        ghost = p.get("ghost_commit") if isinstance(p.get("ghost_commit"), dict) else {}
        parent = ghost.get("parent")
        if isinstance(parent, str) and parent and self.cap.meta.get("git_head") is None:
            self.cap.meta["git_head"] = parent
            if self.files.commit is None:
                self.files.commit = parent

    # ------------------------------------------------------------ response items

    def response_item(self, p: dict[str, Any], ts: Any) -> None:
        self.items += 1
        t = p.get("type") if isinstance(p.get("type"), str) else None
        if t == "message":
            self.message(p, ts)
        elif t == "reasoning":
            self.reasoning(p, ts)
        elif t in ("function_call", "custom_tool_call", "local_shell_call"):
            self.call(p, ts)
        elif t in ("function_call_output", "custom_tool_call_output"):
            self.result(p, ts)
        elif t == "agent_message":
            self.agent_message(p, ts)
        elif t == "web_search_call":
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            self.add(ts, E.TOOL_CALL, call_id=str(p.get("id") or ""), name="web_search", input=action)
        elif t in QUIET_ITEMS:
            if t == "ghost_snapshot":
                self.ghost_snapshot(p)
            self.cap.ignored[f"response_item/{t}"] += 1
        else:
            self.cap.skipped[f"unknown response_item type {t!r}"] += 1

    def message(self, p: dict[str, Any], ts: Any) -> None:
        role = p.get("role") if isinstance(p.get("role"), str) else None
        content = p.get("content")
        if isinstance(content, str):
            content = [{"type": "input_text" if role == "user" else "output_text", "text": content}]
        if not isinstance(content, list):
            self.cap.skipped["message without content"] += 1
            return
        if role == "user":
            text = _items_text(content)
            if not text:
                self.cap.ignored["user message without text"] += 1
                return
            if text.lstrip().startswith(INJECTED_PREFIXES):
                self.add(ts, E.MSG_IN, text=text, injected=True)
            else:
                self.add(ts, E.MSG_IN, text=text)
        elif role == "assistant":
            for item in content:
                if isinstance(item, dict) and item.get("type") == "output_text" and str(item.get("text") or "").strip():
                    self.add(ts, E.MSG_OUT, text=item["text"], block="text")
        else:
            self.cap.ignored[f"message/{role}"] += 1

    def agent_message(self, p: dict[str, Any], ts: Any) -> None:
        """A message between agents of one team: a subagent's task, report or final answer.

        Its readable part (a header naming the sender, then the payload) is kept as a msg.in of the
        session it arrived in, so a subagent's findings are evidence in its parent too. Codex sends
        some payloads encrypted; those keep the header and say so.
        """
        content = _list(p.get("content"))
        text = _items_text(content)
        if not text.strip():
            self.cap.ignored["agent_message without readable text"] += 1
            return
        extra: dict[str, Any] = {"sender": _str(p.get("author")), "recipient": _str(p.get("recipient"))}
        if any(isinstance(i, dict) and i.get("type") == "encrypted_content" for i in content):
            extra["encrypted"] = True
        self.add(ts, E.MSG_IN, text=text, **{k: v for k, v in extra.items() if v is not None})

    def reasoning(self, p: dict[str, Any], ts: Any) -> None:
        texts = [s.get("text") for s in _list(p.get("summary")) if isinstance(s, dict)]
        if not any(isinstance(t, str) and t.strip() for t in texts):
            texts = [c.get("text") for c in _list(p.get("content")) if isinstance(c, dict)]
        emitted = False
        for text in texts:
            if isinstance(text, str) and text.strip():
                self.add(ts, E.MSG_OUT, text=text, block="thinking")
                emitted = True
        if not emitted:
            self.cap.ignored["reasoning without readable text"] += 1

    # ------------------------------------------------------------ tool calls

    def call(self, p: dict[str, Any], ts: Any) -> None:
        t = p.get("type")
        call_id = str(p.get("call_id") or p.get("id") or "")
        name = str(p.get("name") or ("local_shell" if t == "local_shell_call" else ""))
        call = _Call(name, None, self.st.cwd)
        if t == "custom_tool_call":
            raw = p.get("input") if isinstance(p.get("input"), str) else ""
            call.input = {"input": raw}
            call.patch = patch_from_custom(name, raw)
            args = _json_dict(raw)
        elif t == "local_shell_call":
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            call.input = action
            args = {"command": action.get("command"), "workdir": action.get("working_directory")}
            if isinstance(args["command"], list):
                call.patch = patch_from_argv(args["command"], _str(args["workdir"]))
        else:
            raw_args = p.get("arguments")
            args = _json_dict(raw_args) if isinstance(raw_args, str) else raw_args if isinstance(raw_args, dict) else None
            call.input = args if args is not None else {"arguments": raw_args}
            call.patch = patch_from_function(name, args)
        if call.patch is None:
            call.unparsed = patch_attempt(name, p.get("input") if t == "custom_tool_call" else args)
        if args is not None and call.patch is None:
            call.command = args.get("command") if args.get("command") is not None else args.get("cmd")
            call.workdir = _str(args.get("workdir"))
            call.moves = self.shell_moves(call)
            self.invalidate(call)
        call.item, call.at = self.items, self.cap.cursor
        self.st.calls[call_id] = call
        self.add(ts, E.TOOL_CALL, call_id=call_id, name=name, input=call.input)

    def invalidate(self, call: _Call) -> None:
        """Forget our copy of files a shell command may have rewritten (never guess their lines)."""
        cmd = call.command
        if isinstance(cmd, list):
            script = shell_script(cmd) or " ".join(shlex.quote(str(c)) for c in cmd)
        elif isinstance(cmd, str):
            script = cmd
        else:
            return
        if read_spec(cmd) is not None:
            return
        effect = shell_effect(script)
        if effect == "all":
            self.files.forget_all()
        elif effect == "files":
            self.files.forget_named_in(script)

    def result(self, p: dict[str, Any], ts: Any) -> None:
        call_id = str(p.get("call_id") or "")
        call = self.st.calls.get(call_id)
        out = parse_output(p.get("output"))
        ev: dict[str, Any] = {"kind": E.TOOL_RESULT, "ts": ts, "call_id": call_id, "name": call.name if call else "",
                              "is_error": out.failed, "exit_code": out.exit_code, "stdout": out.text, "stderr": ""}
        derived: list[dict[str, Any]] = []
        if call is not None:
            call.answered = True
        if call is not None and call.patch is not None:
            status = patch_status(out)
            ev["is_error"] = status is False
            if call_id not in self.st.settled and status is not None:
                self.st.settled.add(call_id)
                if status:
                    derived = self.edits(call, call_id, ts)
        elif call is not None and call.unparsed:
            self.unparsed_result(call_id, out)
        elif call is not None and call.moves and out.ok:
            derived = self.moved(call, call_id, ts)
        elif call is not None and call.command is not None and out.ok and not out.truncated:
            read = self.read(call, call_id, out, ts)
            if read is not None:
                ev["stdout"] = None  # the code.read right after holds the text, once
                derived = [read]
        self.cap.add(ev)
        for d in derived:
            self.cap.add(d)

    def unparsed_result(self, call_id: str, out: Output) -> None:
        """A patch we cannot read whose output came: counted as dropped edits when Codex applied
        it (one per file its output lists); a `patch_apply_end` may still bring its changes."""
        status = patch_status(out)
        if call_id in self.st.settled or status is None:
            return
        self.st.settled.add(call_id)
        if status:
            self.cap.drop(UNPARSED, len(_LISTED_RE.findall(out.text)) or 1)

    def shell_moves(self, call: _Call) -> list[tuple[str | None, str | None, str | None]]:
        """The files a `mv` / `git mv` command would move, as repository paths (None: outside),
        with the source's text as our copy has it now (before `invalidate` forgets it)."""
        found = mv_command(call.command)
        if found is None:
            return []
        sources, target, cd = found
        mapper = self.mapper_for(call.cwd)
        base = _join(call.workdir, cd)
        target_rel = mapper.to_repo(target, base=base)
        into = target.endswith("/") or len(sources) > 1 or (
            target_rel is not None and (self.files.root / target_rel).is_dir())
        moves: list[tuple[str | None, str | None, str | None]] = []
        for src in sources:
            into_path = posixpath.join(target, posixpath.basename(src.rstrip("/"))) if into else target
            s, d = mapper.to_repo(src, base=base), mapper.to_repo(into_path, base=base)
            if s is None and d is None:
                continue
            if s is not None and ((self.files.root / s).is_dir() or any(k.startswith(s + "/") for k in self.files.text)):
                return []  # a directory: its files are forgotten, not moved one by one
            moves.append((s, d, self.files.get(s) if s is not None else None))
        return moves

    def moved(self, call: _Call, call_id: str, ts: Any) -> list[dict[str, Any]]:
        """The code.edits of a successful `mv`: each file moved, as an apply_patch move of it
        without changes; a file moved out of the repository is deleted from it."""
        out: list[dict[str, Any]] = []
        for src, dst, text in call.moves:
            fields: dict[str, Any]
            if src is not None and dst is None:
                fields = self.delete_known(src, text)
            elif src is None or text is None:
                self.cap.drop(MOVED_UNKNOWN if src is not None else OUTSIDE)
                continue
            else:
                self.files.set(src, None)
                self.files.set(dst, text)
                lines = split_lines(text)
                fields = {"file": src, "op": "move", "to_file": dst, **_ranges([], lines, lines),
                          "file_before_sha": E.git_blob_sha(text), "file_after_sha": E.git_blob_sha(text)}
            for ev in _edit_events(fields, ts, call_id):
                out.append(ev | {"tool": call.name})
        return out

    def unsettled(self) -> None:
        """Count the patch calls the rollout never says the outcome of, once it is over: their
        edits are not recorded (a call the rollout ends with may still be running: not yet)."""
        for call_id, call in self.st.calls.items():
            if (call.patch is None and not call.unparsed) or call_id in self.st.settled or call.item >= self.items:
                continue
            n = len(call.patch.ops) if call.patch is not None else 1
            self.cap.drop(UNCLEAR if call.answered else NO_RESULT, n, at=call.at)

    # ------------------------------------------------------------ event messages

    def event_msg(self, p: dict[str, Any], ts: Any) -> None:
        t = str(p.get("type"))
        if t == "user_message":
            self.echo("user", p.get("message"), ts, E.MSG_IN, {})
        elif t == "agent_message":
            self.echo("assistant", p.get("message"), ts, E.MSG_OUT, {"block": "text"})
        elif t == "agent_reasoning":
            self.echo("reasoning", p.get("text"), ts, E.MSG_OUT, {"block": "thinking"})
        elif t == "patch_apply_end":
            self.patch_apply_end(p, ts)
        else:
            self.cap.ignored[f"event_msg/{t}"] += 1

    def echo(self, role: str, text: Any, ts: Any, kind: str, extra: dict[str, Any]) -> None:
        """An event_msg that repeats a response_item is counted, not emitted twice."""
        if not isinstance(text, str) or not text.strip():
            self.cap.ignored[f"event_msg/{role} without text"] += 1
            return
        key = _echo_key(role, text)
        if self.st.echoes[key] > 0:
            self.st.echoes[key] -= 1
            self.cap.ignored[f"event_msg echo of a response_item ({role})"] += 1
            return
        self.add(ts, kind, text=text, **extra)

    def patch_apply_end(self, p: dict[str, Any], ts: Any) -> None:
        call_id = str(p.get("call_id") or "")
        call = self.st.calls.get(call_id)
        self.cap.ignored["event_msg/patch_apply_end"] += 1
        if call is None and call_id not in self.st.settled and p.get("success") is True:
            self.st.settled.add(call_id)
            for ev in self.applied_edits(call_id, p.get("changes"), ts):
                self.cap.add(ev)
            return
        if call is not None and call.unparsed and call_id not in self.st.settled and isinstance(p.get("success"), bool):
            self.st.settled.add(call_id)
            if p["success"]:  # what Codex applied, though the input it was given is unreadable here
                applied = self.applied_edits(call_id, p.get("changes"), ts)
                if not applied and not p.get("changes"):
                    self.cap.drop(UNPARSED)
                for ev in applied:
                    self.cap.add(ev)
            return
        if call is None or call.patch is None or call_id in self.st.settled or not isinstance(p.get("success"), bool):
            return
        self.st.settled.add(call_id)
        if p["success"]:
            for ev in self.edits(call, call_id, ts, p.get("changes")):
                self.cap.add(ev)

    def applied_edits(self, call_id: str, changes: Any, ts: Any) -> list[dict[str, Any]]:
        """The code.edits of a patch no call of this rollout made, from what Codex applied.

        Codex's code mode runs the model's script in one `exec` call, and the script applies
        patches itself: each lands as a `patch_apply_end` of its own id (`exec-…`), with the
        changes Codex made (an added or deleted file's content, an update's unified diff computed
        on the real file). chikachow/cyspbot's sessions (Codex 0.144) wrote all their code so."""
        mapper = self.mapper_for(self.st.cwd)
        out: list[dict[str, Any]] = []
        for path, ch in changes.items() if isinstance(changes, dict) else ():
            if not isinstance(ch, dict):
                self.cap.skipped["applied change that is not an object"] += 1
                self.cap.drop("applied change that is not an object")
                continue
            rel = mapper.to_repo(str(path))
            if rel is None:
                self.cap.drop(mapper.drop_reason(str(path)))
                continue
            fields: dict[str, Any] | None = None
            if ch.get("type") == "add" and isinstance(ch.get("content"), str):
                fields = self.create(rel, ch["content"])
            elif ch.get("type") == "delete":
                fields = self.delete_known(rel, ch["content"] if isinstance(ch.get("content"), str) else self.files.get(rel))
            elif ch.get("type") == "update" and isinstance(ch.get("unified_diff"), str):
                moved = mapper.to_repo(str(ch["move_path"])) if isinstance(ch.get("move_path"), str) else None
                fields = self.diff_update(rel, moved, ch["unified_diff"])
            if fields is None:
                self.cap.drop("applied change without its text")
                continue
            out += _edit_events(fields, ts, call_id)
        return out

    def diff_update(self, src: str, moved: str | None, diff: str) -> dict[str, Any] | None:
        """An update known by the unified diff Codex applied: on our copy when it still agrees,
        else placed by the diff alone (and our copy forgotten)."""
        hunks = hunks_from_diff(diff)
        changes = changes_from_hunks(hunks)
        if not changes:
            return None
        dst = moved or src
        old = self.files.get(src)
        new_lines = apply_hunks(split_lines(old), hunks) if old is not None else None
        fields: dict[str, Any] = {"file": src, "op": "move" if dst != src else "update"}
        if dst != src:
            fields["to_file"] = dst
            self.files.set(src, None)
        if old is None or new_lines is None:
            self.files.set(dst, None)
            fields.update(edit_ranges(changes), file_before_sha=None, file_after_sha=None)
            fields.update(context_fields(hunk_extents(hunks)))
            return fields
        new = join_lines(new_lines)
        self.files.set(dst, new)
        fields.update(edit_ranges(changes, split_lines(old), new_lines),
                      file_before_sha=E.git_blob_sha(old), file_after_sha=E.git_blob_sha(new))
        fields.update(context_fields(hunk_extents(hunks)))
        return fields

    # ------------------------------------------------------------ reads

    def read(self, call: _Call, call_id: str, out: Output, ts: Any) -> dict[str, Any] | None:
        spec = read_spec(call.command)
        if spec is None:
            return None
        base = _join(call.workdir, spec.cd)
        rel = self.mapper_for(call.cwd).to_repo(spec.path, base=base)
        if rel is None:
            self.cap.ignored["read outside the repository"] += 1
            return None
        lines = split_lines(out.text)
        if not lines or (spec.limit is not None and len(lines) > spec.limit):
            return None
        if spec.numbered:
            found = _strip_numbers(lines)
            if found is None:
                return None
            rng, lines = found
        elif spec.tail is not None:
            rng = self.tail_range(spec.tail, rel, lines)
            if rng is None:
                return None
        else:
            rng = [spec.start, spec.start + len(lines) - 1]
        return {"kind": E.CODE_READ, "ts": ts, "file": rel, "range": rng, "text": join_lines(lines),
                "call_id": call_id}

    def tail_range(self, n: int, rel: str, lines: list[str]) -> list[int] | None:
        """`tail -n N` printed the file's last lines: where they are needs the file's length."""
        text = self.files.get(rel)
        if text is None:
            return None
        file_lines = split_lines(text)
        if len(lines) != min(n, len(file_lines)) or file_lines[len(file_lines) - len(lines):] != lines:
            return None  # our copy disagrees with what the command printed
        return [len(file_lines) - len(lines) + 1, len(file_lines)]

    # ------------------------------------------------------------ edits

    def edits(self, call: _Call, call_id: str, ts: Any, applied: Any = None) -> list[dict[str, Any]]:
        """One code.edit per file operation of a successful patch, replayed on our file copies.

        `applied`: `patch_apply_end`'s `changes` (path → {"unified_diff", …}), whose diffs Codex
        computed on the real file: they place an update our copy cannot (a file changed by a
        command, a commit this repository does not have, a worktree on another branch)."""
        assert call.patch is not None
        mapper = self.mapper_for(call.cwd)
        diffs: dict[str, str] = {}
        for path, change in applied.items() if isinstance(applied, dict) else ():
            rel = mapper.to_repo(str(path), base=call.patch.workdir)
            if rel is not None and isinstance(change, dict) and isinstance(change.get("unified_diff"), str):
                diffs[rel] = change["unified_diff"]
        out: list[dict[str, Any]] = []
        for op in call.patch.ops:
            src = mapper.to_repo(op.path, base=call.patch.workdir)
            dst = mapper.to_repo(op.move_to, base=call.patch.workdir) if op.move_to else src
            self.outside = mapper.drop_reason(op.move_to or op.path, base=call.patch.workdir) or OUTSIDE
            fields = self.edit(op, src, dst, diffs.get(src) if src is not None else None)
            if fields is None:
                continue
            out += _edit_events(fields, ts, call_id)
        return out

    def edit(self, op: FileOp, src: str | None, dst: str | None, diff: str | None = None) -> dict[str, Any] | None:
        """The fields of one file operation's code.edit; None (counted) when there is none."""
        fields: dict[str, Any] | None
        if op.kind == "add":
            fields = self.create(dst, op.content) if dst is not None else None
        elif op.kind == "delete":
            fields = self.delete(src) if src is not None else None
        elif src is None:
            fields = self.blind_create(dst, op) if dst is not None else None  # moved in from outside
        else:
            return self.update(op, src, dst, diff)
        if fields is None:
            self.cap.drop(self.outside)
            log.debug("%s: %s", op.move_to or op.path, self.outside)
        return fields

    def update(self, op: FileOp, src: str, dst: str | None, diff: str | None = None) -> dict[str, Any] | None:
        old = self.files.get(src)
        result = apply_update(old, op.chunks) if old is not None else None
        new = result.new_text if result is not None else None
        moved = bool(op.move_to) and dst != src
        if moved:
            self.files.set(src, None)
        if dst is None:
            return self.delete_known(src, old)  # moved out of the repository
        self.files.set(dst, new)
        fields: dict[str, Any] = {"file": src, "op": "move" if moved else "update",
                                  "file_before_sha": E.git_blob_sha(old) if old is not None else None,
                                  "file_after_sha": E.git_blob_sha(new) if new is not None else None}
        if moved:
            fields["to_file"] = dst
        if result is None or new is None:
            hunks = hunks_from_diff(diff) if diff else []
            placed = changes_from_hunks(hunks)
            if placed:
                fields.update(edit_ranges(placed))  # where Codex itself applied it
                fields.update(context_fields(hunk_extents(hunks)))
                return fields
            by_context = self.place_by_context(op, src, dst, old)
            if by_context is not None:
                fields.update(by_context)
                return fields
            if result is not None:
                log.info("%s: cannot place the patch (%s); recording the edit without ranges", src, result.error)
            removed, added = patch_changes(op.chunks)
            fields.update(before_range=None, after_range=None, before_text=join_lines(removed),
                          after_text=join_lines(added))
            return fields
        if not result.changes and not moved:
            self.cap.ignored["edit that changed nothing"] += 1
            return None
        assert old is not None
        fields.update(_ranges(result.changes, split_lines(old), split_lines(new)))
        if result.changes:  # the patch's own lines where they landed: its context is carried
            fields.update(context_fields([(p.new_start, p.new_lines) for p in result.placements]))
        return fields

    def place_by_context(self, op: FileOp, src: str, dst: str, tried: str | None) -> dict[str, Any] | None:
        """The ranges and texts of an update our copy of `src` cannot place (`tried`: that copy),
        found the way Codex found them, by the patch's context, in a nearby state of the file
        (`Files.nearby`); `placed` says which. None when no state holds the context.

        The state is near the real one, not the real one: the ranges can be off by the lines
        that changed in between, so the file hashes stay unknown and our copy too; the result
        is kept (`Files.last`) only to place this session's later patches of the file."""
        for where, text in self.files.nearby(src, tried):
            result = apply_update(text, op.chunks)
            if result.new_text is None or not (result.changes or dst != src):
                continue
            self.files.last[dst] = result.new_text
            return {**_ranges(result.changes, split_lines(text), split_lines(result.new_text)), "placed": where}
        return None

    def create(self, rel: str, content: str) -> dict[str, Any]:
        self.files.set(rel, content)
        lines = split_lines(content)
        return {"file": rel, "op": "create", "before_range": [1, 0], "after_range": [1, len(lines)],
                "before_text": "", "after_text": join_lines(lines), "file_before_sha": None,
                "file_after_sha": E.git_blob_sha(content)}

    def blind_create(self, rel: str, op: FileOp) -> dict[str, Any]:
        self.files.set(rel, None)
        _, added = patch_changes(op.chunks)
        return {"file": rel, "op": "create", "before_range": [1, 0], "after_range": None, "before_text": "",
                "after_text": join_lines(added), "file_before_sha": None, "file_after_sha": None}

    def delete(self, rel: str) -> dict[str, Any]:
        return self.delete_known(rel, self.files.get(rel))

    def delete_known(self, rel: str, old: str | None) -> dict[str, Any]:
        self.files.set(rel, None)
        lines = split_lines(old) if old is not None else []
        return {"file": rel, "op": "delete", "before_range": [1, len(lines)] if old is not None else None,
                "after_range": [1, 0], "before_text": join_lines(lines), "after_text": "",
                "file_before_sha": E.git_blob_sha(old) if old is not None else None, "file_after_sha": None}


def _ranges(changes: list[Change], old_lines: list[str], new_lines: list[str]) -> dict[str, Any]:
    """before/after ranges and texts of placed changes (the whole file for a bare move)."""
    if not changes:
        return {"before_range": [1, len(old_lines)], "after_range": [1, len(new_lines)],
                "before_text": join_lines(old_lines), "after_text": join_lines(new_lines)}
    return edit_ranges(changes, old_lines, new_lines)


def _strip_numbers(lines: list[str]) -> tuple[list[int], list[str]] | None:
    """The range and text of `nl -ba` / `cat -n` output, when its numbers run consecutively."""
    nums: list[int] = []
    body: list[str] = []
    for ln in lines:
        m = _NUMBERED_RE.match(ln)
        if m is None:
            return None
        nums.append(int(m.group(1)))
        body.append(m.group(2))
    if nums != list(range(nums[0], nums[0] + len(nums))):
        return None
    return [nums[0], nums[-1]], body


def _echoes(lines: list[Line]) -> Counter[tuple[str, str]]:
    """Texts of response_item messages and reasoning, which event_msg lines may repeat."""
    seen: Counter[tuple[str, str]] = Counter()
    for line in lines:
        rec = line.record
        if not rec or rec.get("type") != "response_item" or not isinstance(rec.get("payload"), dict):
            continue
        p = rec["payload"]
        if p.get("type") == "message" and p.get("role") in ("user", "assistant"):
            content = p.get("content")
            text = content if isinstance(content, str) else _items_text(content) if isinstance(content, list) else ""
            if text.strip():
                seen[_echo_key(str(p["role"]), text)] += 1
        elif p.get("type") == "reasoning":
            for s in _list(p.get("summary")):
                if isinstance(s, dict) and isinstance(s.get("text"), str) and s["text"].strip():
                    seen[_echo_key("reasoning", s["text"])] += 1
    return seen


def _echo_key(role: str, text: str) -> tuple[str, str]:
    """What an event_msg and the response_item it repeats have in common: the text without its
    whitespace.

    A message of several content parts is kept as its parts joined by newlines, while its
    `user_message` echo joins them as they are: compared as they were, every prompt of a Codex
    `guardian` reviewer (a dozen parts or more) was kept twice, and counted as two touches
    (chikachow/cyspbot: 551 of 630 user_message lines)."""
    return role, "".join(text.split())


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _json_dict(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, str) or not raw.lstrip().startswith("{"):
        return None
    try:
        value = whole_text(json.loads(raw))  # (half an emoji in a call's arguments stopped the whole ingest)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _join(base: str | None, sub: str | None) -> str | None:
    if not sub:
        return base
    if not base or sub.startswith("/"):
        return sub
    return posixpath.join(base, sub)
