"""The `resume` and `handoff` tools of the MCP server: `engram resume --json` for an agent that
starts after a compaction, a rate limit or a switch of harness, and `engram handoff` for one that
stops; and the `task_*` tools, `engram task ...` (engram.continuity; docs/resume.md).

Thin: each parses its arguments, calls the core on the runner's thread, returns the document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from engram.store.repo import Store

T = TypeVar("T")


class ResumeBudget(BaseModel):
    tokens: int = Field(description="the budget asked for")
    used: int = Field(description="tokens the package takes, counted as `counted` says")
    counted: str


class ResumeResult(BaseModel):
    version: int
    session: dict[str, Any] = Field(description="the session resumed: id, harness, span of time, events, and the "
                                                "sessions it continues (`chain`) when a compaction or resume split it")
    requests: list[dict[str, Any]] = Field(description="the person's requests, latest first, verbatim (trimmed)")
    last_message: dict[str, Any] | None = Field(description="the agent's last message")
    handoff: dict[str, Any] | None = Field(
        default=None, description="the latest hand-off note left for this work (`handoff`), and its `disagreements` "
                                  "with the transcript: each a claim of the note, what the transcript shows, and `at`")
    plan: dict[str, Any] | None = Field(description="the harness's own task list as last set: its open items and "
                                                    "how many are done (TodoWrite, TaskCreate/TaskUpdate, update_plan)")
    failing: list[dict[str, Any]] = Field(description="tests and builds whose last run failed (no later run passed)")
    must_not_redo: list[dict[str, Any]] = Field(description="side effects already run: commits, pushes, tags, "
                                                            "migrations, deploys, publishes, deletions, installs")
    working_set: list[dict[str, Any]] = Field(description="files edited or read, latest first, each with its "
                                                          "`state` now: as-left, changed since (by whom), deleted; "
                                                          "under a budget, past the first 3, in groups: "
                                                          "{tape, state, files: {path or folder/: offset}}, "
                                                          "each file's pointer `tape@offset`")
    likely_next: list[dict[str, Any]] = Field(
        default_factory=list, description="files no event touched yet, most likely next first: those the transcript names "
                                          "(requests, plan, the agent's words, tool output), with `named_in` (request, plan, "
                                          "summary, message, thinking, call, output) and `at` (the latest mention), then those "
                                          "the repository's git relates to the files edited, with `why` (a test of one, changed "
                                          "with one in N commits); each with `state` (present or absent in the working tree); "
                                          "under a budget, past the first 3, in groups as in working_set (a file "
                                          "related alone: {state, files: [path]}, no pointer)")
    errors: list[dict[str, Any]] = Field(description="tool errors no later call of the tool on the target fixed")
    commands: list[dict[str, Any]] = Field(description="other commands, latest first, with their last outcome")
    left_out: dict[str, int] | bool = Field(description="false, or how many items of each section did not fit")
    more: str | None = Field(default=None, description="how to get what was left out")
    budget: ResumeBudget | None = None


def register_resume_tool(mcp: MCPServer, store_provider: Callable[[], Store],
                         run: Callable[[Callable[[], T]], Awaitable[T]],
                         opened: Callable[[Callable[[], Store]], Any]) -> None:
    """Add the `resume` tool to `mcp`; `opened` gives the store and its index (mcp_tools._opened)."""
    # Not read-only: `resume(task=)` keeps the package as the task's next checkpoint. Idempotent: an
    # identical package is not kept twice.
    checkpoints = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False)

    @mcp.tool(title="Pick up where a session stopped", annotations=checkpoints)
    async def resume(
        session: str | None = Field(default=None, description="session id (or its start) or tape-id prefix; "
                                                              "default: the latest session in this repository"),
        task: str | None = Field(default=None, description="instead of a session: a task (`task_list`), all its "
                                                           "sessions read as one; the package is kept as the "
                                                           "task's next checkpoint"),
        harness: str | None = Field(default=None, description="with no session: the latest of this harness "
                                                              "(claude-code, codex, ...)"),
        budget: int = Field(default=2000, ge=0, description="at most this many tokens (4 bytes of JSON each); "
                                                            "0: no bound"),
    ) -> ResumeResult:
        """What the transcript of a session (and of the sessions it continues, across compactions
        and resumes) says a new session needs to carry on: the person's requests, the agent's last
        message, the open plan items, failing tests and builds, side effects not to repeat, and the
        files worked on with their state now. Every item has `at` (TAPE@OFFSET): `view` reads around
        it. Call it at the start of a session that continues earlier work."""
        from engram.continuity.package import Options  # noqa: PLC0415
        from engram.continuity.package import resume as core_resume

        more = "resume(task={task!r}, budget={budget})" if task else "resume(session={session!r}, budget={budget})"

        def work() -> dict[str, Any]:
            if task and (session or harness):
                from engram.errors import BadInput  # noqa: PLC0415

                raise BadInput("give a task, or a session (or harness), not both")
            with opened(store_provider) as (store, db):
                return core_resume(store, db, Options(session=session, harness=harness, budget=budget, more=more,
                                                      task=task))

        return ResumeResult.model_validate(await run(work))


class HandoffResult(BaseModel):
    id: str = Field(description="the note's memory id (kind handoff); `memory_update` or `forget` change it")
    session_id: str = Field(description="the session it hands off")
    note: dict[str, Any]
    anchored: list[str] = Field(description="the FILE:A-B spans the note names, anchored so it follows the code")
    checkpoints: list[dict[str, Any]] = Field(default_factory=list,
                                              description="the tasks the note was kept for, each with its version")


def register_handoff_tool(mcp: MCPServer, store_provider: Callable[[], Store],
                          run: Callable[[Callable[[], T]], Awaitable[T]],
                          opened: Callable[[Callable[[], Store]], Any]) -> None:
    """Add the `handoff` tool to `mcp`."""
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False)

    @mcp.tool(title="Leave a hand-off note for the next session", annotations=writes)
    async def handoff(
        goal: str | None = Field(default=None, description="the goal of the work, in a sentence"),
        done: list[str] = Field(default_factory=list, description="what is done"),
        in_progress: list[str] = Field(default_factory=list, description="what is under way"),
        blocked: list[str] = Field(default_factory=list, description="what is blocked, and on what"),
        next_steps: list[str] = Field(default_factory=list, description="what to do next"),
        must_not_redo: list[str] = Field(default_factory=list, description="done already; must not be done again"),
        must_preserve: list[str] = Field(default_factory=list,
                                         description="what to keep as it is; FILE:A-B anchors the note there"),
        session: str | None = Field(default=None, description="the session handed off (default: yours when your "
                                                              "harness says which, else the latest)"),
        task: str | None = Field(default=None, description="a task (`task_list`) the session joins; the note is "
                                                           "kept as its checkpoint"),
        ctx: Context | None = None,
    ) -> HandoffResult:
        """Before stopping mid-task (context nearly full, a limit, the end of a turn of work), leave
        the next session a note: it is stored with this session, and `resume` shows it beside what
        the transcript says, flagging where they disagree (say tests pass only if they do)."""
        from engram.continuity.handoff import handoff_request  # noqa: PLC0415

        from .mcp_memory import _agent  # noqa: PLC0415

        note = {"goal": goal, "done": done, "in_progress": in_progress, "blocked": blocked, "next": next_steps,
                "must_not_redo": must_not_redo, "must_preserve": must_preserve}
        source = _agent(ctx)

        def work() -> dict[str, Any]:
            with opened(store_provider) as (store, db):
                return handoff_request(store, db, session, note, source, task=task)

        return HandoffResult.model_validate(await run(work))


class TaskResult(BaseModel):
    id: str
    title: str
    goal: str | None = None
    status: str = Field(description="open or closed")
    created: str
    by: dict[str, Any]
    closed: str | None = None
    why: str | None = None
    joined: list[dict[str, Any]] = Field(description="the sessions joined explicitly: session, via, ts")
    checkpoints: int = Field(description="how many checkpoints are kept (`task_checkpoints` lists them)")
    last_checkpoint: dict[str, Any] | None = None
    sessions: list[dict[str, Any]] | None = Field(
        default=None, description="every session of the task, oldest first, with `via`: joined, handoff, or the "
                                  "continuation (compaction, resume) that brought it in")


class TaskList(BaseModel):
    tasks: list[TaskResult]


class Checkpoints(BaseModel):
    task: str
    checkpoints: list[dict[str, Any]] = Field(description="version, kind (resume or handoff), session, ts, by; "
                                                          "with `version` given, that one with its `doc`")


def register_task_tools(mcp: MCPServer, store_provider: Callable[[], Store],
                        run: Callable[[Callable[[], T]], Awaitable[T]],
                        opened: Callable[[Callable[[], Store]], Any]) -> None:
    """Add `task_new`, `task_list`, `task_show`, `task_join`, `task_close` and `task_checkpoints`."""
    from engram.continuity import tasks as core  # noqa: PLC0415

    from .mcp_memory import _agent  # noqa: PLC0415

    reads = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False)
    task_ref = Field(description="task id (or its start) or title")

    def shown(store: Store, db: Any, task: Any) -> TaskResult:
        return TaskResult.model_validate({**task.summary(), "sessions": core.sessions(db, task)})

    @mcp.tool(title="Start a task that spans sessions", annotations=writes)
    async def task_new(
        title: str | None = Field(default=None, description="a line naming the goal (default: the first request "
                                                            "of the session, verbatim)"),
        goal: str | None = Field(default=None, description="the goal in more words"),
        session: str | None = Field(default=None, description="a session that joins at once (default: yours when "
                                                              "your harness says which, else none)"),
        ctx: Context | None = None,
    ) -> TaskResult:
        """Start a task: the goal a piece of work has across sessions and harnesses. Sessions join it
        (`task_join`, or `handoff` with `task`); `resume` with `task` reads all of them as one."""
        source = _agent(ctx)

        def work() -> TaskResult:
            with opened(store_provider) as (store, db):
                joins = session or (source.session if source.session and core.captured(db, source.session) else None)
                return shown(store, db, core.new_task(store, db, title, goal=goal, session=joins, source=source))

        return await run(work)

    @mcp.tool(title="List tasks", annotations=reads)
    async def task_list(all: bool = Field(default=False, description="closed tasks too")) -> TaskList:  # noqa: A002
        """The open tasks of this repository (with `all`, the closed ones too), oldest first."""

        def work() -> TaskList:
            with opened(store_provider) as (store, _):
                return TaskList(tasks=[TaskResult.model_validate(t.summary()) for t in core.load(store).values()
                                       if all or t.status == "open"])

        return await run(work)

    @mcp.tool(title="Show a task and its sessions", annotations=reads)
    async def task_show(task: str = task_ref) -> TaskResult:
        """A task, its sessions (joined, or brought in by a continuation) and its last checkpoint."""

        def work() -> TaskResult:
            with opened(store_provider) as (store, db):
                return shown(store, db, core.find(core.load(store), task))

        return await run(work)

    @mcp.tool(title="Join a session to a task", annotations=writes)
    async def task_join(
        task: str = task_ref,
        session: str | None = Field(default=None, description="default: yours when your harness says which, "
                                                              "else the latest session"),
        ctx: Context | None = None,
    ) -> TaskResult:
        """Say that a session works on a task (the sessions continuing it follow on their own)."""
        source = _agent(ctx)

        def work() -> TaskResult:
            with opened(store_provider) as (store, db):
                joined, _ = core.join(store, db, task, session, source=source)
                return shown(store, db, joined)

        return await run(work)

    @mcp.tool(title="Close a task", annotations=writes)
    async def task_close(
        task: str = task_ref,
        why: str | None = Field(default=None, description="why: done, abandoned, ..."),
        reopen: bool = Field(default=False, description="open a closed task again instead"),
        ctx: Context | None = None,
    ) -> TaskResult:
        """Close a task when its goal is met or dropped; its sessions and checkpoints are kept."""
        source = _agent(ctx)

        def work() -> TaskResult:
            with opened(store_provider) as (store, db):
                return shown(store, db, core.close(store, task, why=why, reopen=reopen, source=source))

        return await run(work)

    @mcp.tool(title="A task's checkpoints", annotations=reads)
    async def task_checkpoints(
        task: str = task_ref,
        version: int | None = Field(default=None, ge=1, description="this checkpoint, with what it kept"),
    ) -> Checkpoints:
        """The versions kept of a task's state: each `resume` of the task and each hand-off of one
        of its sessions, numbered; with `version`, that one's package or note."""

        def work() -> Checkpoints:
            with opened(store_provider) as (store, _):
                found = core.find(core.load(store), task)
                rows = [c if version is not None else {k: v for k, v in c.items() if k != "doc"}
                        for c in found.checkpoints if version is None or c["version"] == version]
                if version is not None and not rows:
                    from engram.errors import BadInput  # noqa: PLC0415
                    from engram.words import plural  # noqa: PLC0415

                    raise BadInput(f"task {found.id} has {plural(len(found.checkpoints), 'checkpoint')}; no version {version}")
                return Checkpoints(task=found.id, checkpoints=rows)

        return await run(work)
