"""The `resume` and `handoff` tools of the MCP server: `engram resume --json` for an agent that
starts after a compaction, a rate limit or a switch of harness, and `engram handoff` for one that
stops (engram.continuity; docs/resume.md).

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
    working_set: list[dict[str, Any]] = Field(description="files edited, then read, latest first, each with its "
                                                          "`state` now: as-left, changed since (by whom), deleted")
    errors: list[dict[str, Any]] = Field(description="tool errors no later call of the tool on the target fixed")
    commands: list[dict[str, Any]] = Field(description="other commands, latest first, with their last outcome")
    left_out: dict[str, int] | bool = Field(description="false, or how many items of each section did not fit")
    more: str | None = Field(default=None, description="how to get what was left out")
    budget: ResumeBudget | None = None


def register_resume_tool(mcp: MCPServer, store_provider: Callable[[], Store],
                         run: Callable[[Callable[[], T]], Awaitable[T]],
                         opened: Callable[[Callable[[], Store]], Any]) -> None:
    """Add the `resume` tool to `mcp`; `opened` gives the store and its index (mcp_tools._opened)."""
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    @mcp.tool(title="Pick up where a session stopped", annotations=read_only)
    async def resume(
        session: str | None = Field(default=None, description="session id (or its start) or tape-id prefix; "
                                                              "default: the latest session in this repository"),
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

        more = "resume(session={session!r}, budget={budget})"

        def work() -> dict[str, Any]:
            with opened(store_provider) as (store, db):
                return core_resume(store, db, Options(session=session, harness=harness, budget=budget, more=more))

        return ResumeResult.model_validate(await run(work))


class HandoffResult(BaseModel):
    id: str = Field(description="the note's memory id (kind handoff); `memory_update` or `forget` change it")
    session_id: str = Field(description="the session it hands off")
    note: dict[str, Any]
    anchored: list[str] = Field(description="the FILE:A-B spans the note names, anchored so it follows the code")


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
                return handoff_request(store, db, session, note, source)

        return HandoffResult.model_validate(await run(work))
