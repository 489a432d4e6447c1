"""One pass over a chain's events, keeping what a resume needs: requests, the agent's last words,
the harness's plan, files touched, commands and their outcomes, failures, side effects.

Events are parsed without their large texts (objects stay references until an item is kept and
shown), so a 10 MB chain is read in one linear pass. Events of a subagent (`agent` set) count for
files, commands and side effects but not for requests or the last message: those are the
session's own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from engram.continuity.commands import check_kind, command_line, covers, effects, family
from engram.continuity.mentions import Mention, Mentions
from engram.query.story import is_request
from engram.tape import events as E

if TYPE_CHECKING:
    from engram.index.catalog import TapeRow
    from engram.store.repo import Store

Pointer = str  # "TAPE@OFFSET", what `engram view` takes

_TASK_ID: Final = re.compile(r"#(\d+)")
_OPEN: Final = ("pending", "in_progress")
_PLAN_TOOLS: Final = frozenset({"TodoWrite", "update_plan", "ExitPlanMode", "TaskCreate", "TaskUpdate"})


@dataclass
class PlanItem:
    text: str
    status: str
    at: Pointer
    key: str = ""


@dataclass
class Plan:
    """The harness's own task list as last seen: Claude Code TodoWrite (whole list each call) or
    TaskCreate/TaskUpdate (one task a call), Codex update_plan (whole list each call)."""

    items: list[PlanItem] = field(default_factory=list)
    tool: str | None = None
    explanation: str | None = None
    at: Pointer | None = None
    accepted: Any = None  # the text of the last plan the person accepted (Claude Code ExitPlanMode)
    accepted_at: Pointer | None = None


@dataclass
class FileTouch:
    path: str
    last: int  # sequence number of the latest touch (higher: more recent)
    at: Pointer
    edited: int = 0
    read: int = 0
    ranges: list[list[int]] = field(default_factory=list)  # latest first, at most a few
    last_edit: dict[str, Any] | None = None  # the fields of its latest code.edit a state check needs
    last_edit_ts: str | None = None


@dataclass
class Run:
    command: str
    kind: str | None  # "test", "build" or None
    runs: int
    failed: bool | None  # None: no result recorded (interrupted, or the session ended first)
    exit_code: int | None
    at: Pointer
    seq: int
    output: Any = None  # the last run's output (an object reference until shown)
    first_failed_at: Pointer | None = None


@dataclass
class Effect:
    category: str
    command: str
    at: Pointer
    failed: bool | None
    seq: int
    ts: str | None = None


@dataclass
class ToolError:
    tool: str
    target: str
    at: Pointer
    seq: int
    output: Any = None


@dataclass
class Facts:
    requests: list[tuple[Pointer, Any, str | None]] = field(default_factory=list)  # (at, text, ts), in order
    last_message: tuple[Pointer, Any, str | None] | None = None
    plan: Plan = field(default_factory=Plan)
    files: dict[str, FileTouch] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)  # by family
    effects: list[Effect] = field(default_factory=list)
    errors: dict[tuple[str, str], ToolError] = field(default_factory=dict)
    compactions: list[Pointer] = field(default_factory=list)
    summaries: list[tuple[Pointer, Any]] = field(default_factory=list)  # the harness's compaction summaries
    events: int = 0
    started: str | None = None
    ended: str | None = None
    cwd: str | None = None
    branch: str | None = None
    likely_next: list[Mention] = field(default_factory=list)  # files named, not touched: most likely first


def _target(name: str, inp: dict[str, Any]) -> str:
    for key in ("file_path", "path", "notebook_path", "url", "pattern", "query", "taskId"):
        v = inp.get(key)
        if isinstance(v, (str, int)) and str(v):
            return str(v)
    return ""


def _strings(value: Any, depth: int = 0) -> list[str]:
    """The texts inside a tool call's input (its command, its file, a plan's items)."""
    if isinstance(value, str):
        return [value]
    if depth > 4:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [t for v in items for t in _strings(v, depth + 1)]


class _Reader:
    """Folds events into Facts, one at a time."""

    def __init__(self) -> None:
        self.f = Facts()
        self.calls: dict[str, tuple[str, dict[str, Any], Pointer, int]] = {}
        self.seq = 0
        self.task_no = 0
        self.ts: str | None = None
        self.mentions = Mentions()

    def _mention(self, text: Any, source: str, at: Pointer) -> None:
        self.mentions.add(text, source, at, self.seq, self.f.cwd)

    def add(self, ev: dict[str, Any], at: Pointer) -> None:
        self.seq += 1
        self.f.events += 1
        kind = ev.get("kind")
        ts = ev.get("ts")
        self.ts = ts if isinstance(ts, str) else None
        if isinstance(ts, str) and ts[:1].isdigit():  # (events of a subagent may come after later ones)
            self.f.ended = max(self.f.ended or ts, ts)
            self.f.started = min(self.f.started or ts, ts)
        if kind == E.MSG_IN:
            self._message_in(ev, at)
        elif kind == E.MSG_OUT:
            self._mention(ev.get("text"), "thinking" if ev.get("block") == "thinking" else "message", at)
            if not ev.get("agent") and ev.get("block") != "thinking" and ev.get("text"):
                self.f.last_message = (at, ev["text"], ev.get("ts"))
        elif kind == E.TOOL_CALL:
            self._call(ev, at)
        elif kind == E.TOOL_RESULT:
            self._result(ev, at)
        elif kind in (E.CODE_EDIT, E.CODE_READ):
            self._code(ev, at)
        elif kind == E.COMPACT:
            self.f.compactions.append(at)
            if ev.get("message"):
                self.f.summaries.append((at, ev["message"]))
                self._mention(ev["message"], "summary", at)

    def _message_in(self, ev: dict[str, Any], at: Pointer) -> None:
        if ev.get("compact_summary") and ev.get("text"):
            self.f.summaries.append((at, ev["text"]))
            self._mention(ev["text"], "summary", at)
        if ev.get("agent") or not is_request(ev):
            return
        self._mention(ev["text"], "request", at)
        self.f.requests.append((at, ev["text"], ev.get("ts")))

    def _call(self, ev: dict[str, Any], at: Pointer) -> None:
        name = str(ev.get("name") or "")
        inp = ev.get("input") if isinstance(ev.get("input"), dict) else {}
        self.calls[str(ev.get("call_id") or "")] = (name, inp, at, self.seq)
        if inp:
            self._mention("\n".join(_strings(inp)), "plan" if name in _PLAN_TOOLS else "call", at)
        if not ev.get("agent"):
            self._plan(name, inp, at)

    def _plan(self, name: str, inp: dict[str, Any], at: Pointer) -> None:
        plan = self.f.plan
        if name == "TodoWrite" and isinstance(inp.get("todos"), list):
            plan.items = [PlanItem(str(t.get("content") or t.get("activeForm") or ""), str(t.get("status") or ""), at)
                          for t in inp["todos"] if isinstance(t, dict)]
            plan.tool, plan.at, plan.explanation = name, at, None
        elif name == "update_plan" and isinstance(inp.get("plan"), list):
            plan.items = [PlanItem(str(t.get("step") or ""), str(t.get("status") or ""), at)
                          for t in inp["plan"] if isinstance(t, dict)]
            expl = inp.get("explanation")
            plan.tool, plan.at, plan.explanation = name, at, expl if isinstance(expl, str) and expl else None
        elif name == "TaskCreate" and inp.get("subject"):
            if plan.tool != "TaskCreate":
                plan.items, self.task_no = [], 0
            self.task_no += 1
            plan.items.append(PlanItem(str(inp["subject"]), "pending", at, str(self.task_no)))
            plan.tool, plan.at = "TaskCreate", at
        elif name == "TaskUpdate" and plan.tool == "TaskCreate":
            key = str(inp.get("taskId") or "")
            for item in plan.items:
                if item.key == key:
                    item.status = str(inp.get("status") or item.status)
                    item.text = str(inp.get("subject") or item.text)
                    item.at = at
            plan.items = [i for i in plan.items if i.status != "deleted"]
            plan.at = at
        elif name == "ExitPlanMode" and inp.get("plan"):
            plan.accepted, plan.accepted_at = inp["plan"], at

    def _result(self, ev: dict[str, Any], at: Pointer) -> None:
        call_id = str(ev.get("call_id") or "")
        name, inp, call_at, call_seq = self.calls.pop(call_id, (str(ev.get("name") or ""), {}, at, self.seq))
        failed = bool(ev.get("is_error")) or (isinstance(ev.get("exit_code"), int) and ev["exit_code"] != 0)
        if name == "TaskCreate" and not failed and isinstance(ev.get("stdout"), str):
            m = _TASK_ID.search(ev["stdout"])  # "Task #3 created successfully: ..." names the id TaskUpdate uses
            if m and self.f.plan.items and self.f.plan.items[-1].at == call_at:
                self.f.plan.items[-1].key = m.group(1)
        for text in (ev.get("stdout"), ev.get("stderr")):
            self._mention(text, "output", at)
        line = command_line(name, inp)
        output = ev.get("stderr") or ev.get("stdout") if failed else None
        if line is not None:
            self._run(line, failed, ev.get("exit_code"), call_at, call_seq, output)
            return
        key = (name, _target(name, inp))
        if failed:
            self.f.errors[key] = ToolError(name, key[1], call_at, call_seq, ev.get("stdout") or ev.get("stderr"))
        else:
            self.f.errors.pop(key, None)

    def _run(self, line: str, failed: bool | None, exit_code: Any, at: Pointer, seq: int, output: Any) -> None:
        fam = family(line)
        old = self.f.runs.get(fam)
        run = Run(line, check_kind(line), (old.runs if old else 0) + 1, failed,
                  exit_code if isinstance(exit_code, int) else None, at, seq, output,
                  (old.first_failed_at or old.at) if old and old.failed and failed else (at if failed else None))
        self.f.runs[fam] = run
        if failed is False and run.kind:  # a passing check settles the earlier failures it covers
            for other in self.f.runs.values():
                if other is not run and other.failed and other.kind == run.kind and covers(line, other.command):
                    other.failed, other.output = False, None
                    other.exit_code = None
        for category, part in effects(line):
            self.f.effects.append(Effect(category, part, at, failed, seq, self.ts))

    def _code(self, ev: dict[str, Any], at: Pointer) -> None:
        path = ev.get("file")
        if not isinstance(path, str) or not path:
            return
        t = self.f.files.get(path)
        if t is None:
            t = self.f.files[path] = FileTouch(path, self.seq, at)
        t.last, t.at = self.seq, at
        rng = ev.get("after_range") if ev.get("kind") == E.CODE_EDIT else ev.get("range")
        if (isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng) and rng[1] >= rng[0]
                and rng not in t.ranges):
            t.ranges.insert(0, rng)
            del t.ranges[4:]
        if ev.get("kind") == E.CODE_READ:
            t.read += 1
            return
        t.edited += 1
        t.last_edit = {k: ev.get(k) for k in ("op", "file_after_sha", "after_text", "moved_to")}
        t.last_edit_ts = ev.get("ts") if isinstance(ev.get("ts"), str) else None
        if ev.get("op") == "delete" and not ev.get("moved_to"):
            self.f.effects.append(Effect("file deletion", f"(edit) deleted {path}", at, False, self.seq, self.ts))

    def finish(self) -> Facts:
        for name, inp, at, seq in sorted(self.calls.values(), key=lambda c: c[3]):
            line = command_line(name, inp)  # a command with no result: the session stopped there
            later = self.f.runs.get(family(line)) if line is not None else None
            if line is not None and (later is None or later.seq < seq):
                self._run(line, None, None, at, seq, None)
        self.f.likely_next = self.mentions.ranked(set(self.f.files))
        return self.f


def read_facts(store: Store, tapes: list[TapeRow], stop: tuple[str, int] | None = None) -> Facts:
    """The facts of these tapes, in order; with `stop` (tape id, offset), only the events before
    it (a benchmark cuts a session there)."""
    from engram.index.catalog import tape_file  # noqa: PLC0415
    from engram.tape.reader import TapeReader  # noqa: PLC0415

    reader = _Reader()
    for row in tapes:
        short = row.id[:12]
        end = stop[1] if stop is not None and stop[0] == row.id else None
        with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
            for off, line in enumerate(r.raw_lines(0, end)):
                ev = E.loads(line)
                if off == 0 and ev.get("kind") == E.META:
                    reader.f.cwd = ev.get("cwd") or reader.f.cwd
                    reader.f.branch = ev.get("git_branch") or reader.f.branch
                    continue
                reader.add(ev, f"{short}@{off}")
        if end is not None:
            break
    return reader.finish()
