"""The memory tools of the MCP server (`build_mcp` registers them on `engram mcp` and on the
language server's endpoint): remember, recall, forget, memory_update, memory_link, memories.

Thin: each parses its arguments, calls `engram.memory` on the runner's thread and converts the
answer (the fields of `engram recall --json`, docs/memories.md). A memory an agent writes here
records the agent: the MCP client's name as its harness, and its session when the environment
the harness started this server with names it. On the language server's endpoint, anchors are
captured and resolved against the editor's unsaved text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Awaitable, Callable, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from engram.memory.budget import RECALL_BUDGET, fit_recall
from engram.memory.vocabulary import KINDS, RELATIONS, STATUSES
from engram.store.repo import Store

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_CONTENT = 4000  # characters of one memory's content in an answer
MAX_LIST = 100

# The CLI's words (engram.memory.vocabulary), so a kind the CLI accepts (handoff) is one here too.
Kind = Literal[KINDS]  # type: ignore[valid-type]
Status = Literal[STATUSES]  # type: ignore[valid-type]
Relation = Literal[RELATIONS]  # type: ignore[valid-type]


class AnchorOut(BaseModel):
    file: str = Field(description="where the anchored code is now (repository-relative)")
    lines: list[int] = Field(description="[first, last] line, 1-based, inclusive")
    state: str = Field(description="intact, moved, edited (see retained) or vanished")
    retained: float = Field(description="share of the anchored code still there, 0 to 1")
    anchored: dict[str, Any] | None = Field(default=None, description="where it was anchored, when that differs")
    best_partial: Any = Field(default=None, description="for a vanished anchor: the best partial match, if any")
    session: str | None = Field(default=None, description="the captured session whose edit explains the change")
    edit: dict[str, Any] | None = Field(default=None, description="that edit: {tape, offset} (read it with `view`)")


class EvidenceOut(BaseModel):
    tape: str = Field(description="tape id; `view(tape, at=offset)` reads the transcript there")
    offset: int


class MemoryOut(BaseModel):
    id: str
    content: str
    kind: str
    tags: list[str]
    importance: float
    status: str
    source: dict[str, Any]
    score: float | None = Field(default=None, description="recall's score (fused channels times factors)")
    anchors: list[AnchorOut]
    evidence: list[EvidenceOut]
    drift: str | None = Field(default=None, description="set when the anchored code changed or vanished")
    context: str | None = Field(default=None, description="what the memory was said in reply to, when recorded")
    debug: dict[str, Any] | None = None
    truncated: bool = Field(default=False, description="content cut (to the answer's budget, or to "
                                                         f"{MAX_CONTENT} characters in a list): `clipped` says how long it is")
    clipped: dict[str, Any] | None = Field(default=None, description="{chars, more}: the content's whole length and "
                                                                     "the command that shows it")


class RecallResult(BaseModel):
    query: str
    dense: str = Field(description="\"used\", or \"unavailable: <reason>\" (then BM25 and anchors only)")
    memories: list[MemoryOut]
    at: str | None = None
    budget: dict[str, int] | None = Field(default=None, description="{tokens, used}: the budget and what the answer took")
    left_out: dict[str, Any] | None = Field(default=None, description="{count, ids, next}: the notes that did not fit "
                                                                      "and how to get them")
    weak: dict[str, Any] | None = Field(default=None, description="when no memory matches: {below, note, memories: "
                                                                  "[{id, kind, summary, cosine}]}, the nearest by "
                                                                  "meaning, too far to be an answer")


class RememberResult(BaseModel):
    id: str = Field(description="the memory written, or the one reinforced instead")
    merged_into: str | None = Field(default=None, description="set when a near-identical memory was reinforced")
    links: list[dict[str, Any]] = Field(default_factory=list, description="near-duplicates or contradictions "
                                                                        "linked as candidates")
    embedding: str | None = Field(default=None, description="a new memory's vector: pending (made right after this "
                                                             "answer, with the dedup by meaning) or done")


class ForgetResult(BaseModel):
    id: str
    forgotten: bool
    purged: bool
    files_rewritten: int
    events_removed: int


class LinkResult(BaseModel):
    from_: str = Field(alias="from")
    to: str
    relation: str


class MemoryList(BaseModel):
    memories: list[MemoryOut]
    truncated: bool = Field(description="more memories match than `limit`")
    budget: dict[str, int] | None = Field(default=None, description="{tokens, used}: the budget and what the answer took")
    left_out: dict[str, Any] | None = Field(default=None, description="{count, ids, next}: the memories within the "
                                                                      "limit that did not fit the budget")


Runner = Callable[[Callable[[], T]], Awaitable[T]]
TextProvider = Callable[[Store, str], str | None]


class _Buffers(Mapping[str, str]):
    """The editor's unsaved text of repository files, looked up as anchors ask for them."""

    def __init__(self, store: Store, provider: TextProvider) -> None:
        self.store, self.provider = store, provider

    def __getitem__(self, rel: str) -> str:
        text = self.provider(self.store, rel)
        if text is None:
            raise KeyError(rel)
        return text

    def __contains__(self, rel: object) -> bool:
        return isinstance(rel, str) and self.provider(self.store, rel) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:  # (unknown length, but there may be buffers: `buffers or {}` must keep it)
        return True


def _out(doc: dict[str, Any]) -> MemoryOut:
    content = doc["content"]
    fields = {k: v for k, v in doc.items() if k in MemoryOut.model_fields}
    if doc.get("clipped"):  # (recall's budget clipped it already)
        return MemoryOut(**{**fields, "truncated": True})
    cut = len(content) > MAX_CONTENT
    clipped = {"chars": len(content), "more": f"engram memory show {doc['id']}"} if cut else None
    return MemoryOut(**{**fields, "content": content[:MAX_CONTENT] if cut else content, "truncated": cut,
                        "clipped": clipped})


def _at(file: str | None, start_line: int | None, end_line: int | None) -> str | None:
    from engram.errors import BadInput  # noqa: PLC0415

    if file is None:
        if start_line is not None or end_line is not None:
            raise BadInput("start_line/end_line need `file`")
        return None
    if start_line is None:
        return file
    return f"{file}:{start_line}-{end_line if end_line is not None else start_line}"


def _agent(ctx: Context | None) -> Any:
    """The source of a change made through this tool: the calling agent."""
    from engram.memory.model import Source, calling_agent  # noqa: PLC0415

    env = calling_agent()
    harness = env.harness
    try:
        info = ctx.session.client_params.client_info if ctx is not None else None  # type: ignore[union-attr]
        harness = harness or (info.name if info is not None else None)
    except (AttributeError, ValueError):
        pass
    return Source("agent", harness=harness or "mcp", session=env.session)


_later: set[asyncio.Task[None]] = set()


def embed_later(doc: dict[str, Any], run: Runner, store_provider: Callable[[], Store]) -> None:
    """After a recall that found memories waiting for a vector, or a remember that wrote one,
    embed a batch of them on the runner once the answer went out (when the model is loaded)."""
    remembered = doc.get("embedding") == "pending"
    if "no vector yet" not in doc.get("dense", "") and not remembered:
        return
    from engram.memory import open_memories  # noqa: PLC0415

    def embed() -> int:
        mem = open_memories(store_provider())
        return mem.embed_remembered() if remembered else mem.embed_pending(load=False, limit=32)

    async def work() -> None:
        try:
            await run(embed)
        except Exception:  # noqa: BLE001 - the next batch tries again
            log.exception("embedding waiting memories")

    task = asyncio.ensure_future(work())
    _later.add(task)  # (a reference until it is done: the loop keeps only weak ones)
    task.add_done_callback(_later.discard)


def register_memory_tools(mcp: MCPServer, store_provider: Callable[[], Store], run: Runner,
                          text_provider: TextProvider | None = None) -> None:
    """Add the memory tools to `mcp`; `run` carries a body out on the store's thread (and turns
    an EngramError into a tool error)."""
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)  # (a recall reinforces what it returns)

    def opened() -> tuple[Any, Mapping[str, str] | None]:
        from engram.errors import EngramError  # noqa: PLC0415
        from engram.memory import open_memories  # noqa: PLC0415

        store = store_provider()
        if not store.exists():
            raise EngramError(f"no Engram store in {store.root}: run `engram init` there")
        buffers = _Buffers(store, text_provider) if text_provider is not None else None
        return open_memories(store), buffers

    @mcp.tool(title="Remember something about the code", annotations=writes)
    async def remember(
        content: str = Field(description="the memory; its first line is its summary"),
        kind: Kind = Field(default="fact", description="negative: \"there is no X / X was removed\""),
        tags: list[str] = Field(default_factory=list),
        importance: float = Field(default=0.5, ge=0.0, le=1.0, description="important memories decay slower"),
        file: str | None = Field(default=None, description="anchor it to code: the file, repository-relative"),
        start_line: int | None = Field(default=None, ge=1, description="first line of the anchored span"),
        end_line: int | None = Field(default=None, ge=1, description="last line of the anchored span, inclusive"),
        evidence: list[str] = Field(default_factory=list,
                                    description="transcript events it came from, TAPE@OFFSET (explain gives both)"),
        pinned: bool = Field(default=False, description="never decays or gets archived"),
        context: str = Field(default="", description="what it answers or was said in reply to (e.g. the user's "
                                                      "request): recall searches it too, at half weight"),
        scope: Literal["team", "personal"] | None = Field(
            default=None, description="team: leaves with `engram push`; personal: never leaves this clone "
                                      "(default: the setting share.memory_scope, team)"),
        ctx: Context | None = None,
    ) -> RememberResult:
        """Record a fact, decision, preference, pattern, debugging insight, todo or a negative
        ("there is no X") for later sessions, optionally anchored to lines of code: the anchor
        follows the code when it moves or changes. A note nearly identical to one already held
        reinforces it instead (`merged_into`)."""
        source = _agent(ctx)

        def work() -> RememberResult:
            from engram.errors import BadInput  # noqa: PLC0415

            if file is not None and start_line is None:
                raise BadInput("anchor a memory to lines: give start_line (and end_line) with file")
            mem, buffers = opened()
            at = _at(file, start_line, end_line)
            done = mem.remember(content, kind=kind, tags=tags, importance=importance, pinned=pinned,
                                at=[at] if at else [], evidence=evidence, source=source, buffers=buffers,
                                context=context, scope=scope)
            return RememberResult(**done.to_json())

        result = await run(work)
        embed_later(result.model_dump(), run, store_provider)  # (off the answer's path: after it)
        return result

    @mcp.tool(title="Recall what is known", annotations=reads)
    async def recall(
        query: str = Field(description="what to find, in words (may be empty when `file` is given)"),
        limit: int = Field(default=10, ge=1, le=50),
        kind: Kind | None = Field(default=None),
        tags: list[str] = Field(default_factory=list, description="only memories carrying all these tags"),
        file: str | None = Field(default=None, description="favour memories anchored on this file..."),
        start_line: int | None = Field(default=None, ge=1, description="...on or near these lines"),
        end_line: int | None = Field(default=None, ge=1),
        include_hidden: bool = Field(default=False, description="also superseded, invalidated and archived ones"),
        debug: bool = Field(default=False, description="each channel's rank and each factor"),
        budget: int = Field(default=RECALL_BUDGET, ge=0, description="at most this many tokens of answer (4 bytes "
                                                                     "of JSON each; 0: no bound): a long note is "
                                                                     "clipped, what does not fit is named in left_out"),
    ) -> RecallResult:
        """Memories that answer `query` (words and meaning), and, with `file`, those anchored on or
        near that code. Each says where its anchor is now and whether the code drifted; a note
        whose code vanished ranks lower and says so. Call it before changing code you do not know."""
        from engram.memory.recall import recall as core_recall  # noqa: PLC0415

        def work() -> dict[str, Any]:
            mem, buffers = opened()
            return core_recall(mem, query, at=_at(file, start_line, end_line), kind=kind, tags=tags, limit=limit,
                               hidden=include_hidden, debug=debug, buffers=buffers)

        doc = await run(work)
        embed_later(doc, run, store_provider)
        doc = fit_recall(doc, budget)
        return RecallResult(query=doc["query"], dense=doc["dense"], at=doc.get("at"),
                            memories=[_out(m) for m in doc["memories"]], budget=doc.get("budget"),
                            left_out=doc.get("left_out"), weak=doc.get("weak"))

    @mcp.tool(title="Forget a memory", annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False))
    async def forget(
        id: str = Field(description="the memory's id (or a unique prefix)"),  # noqa: A002 - the tool's parameter
        purge: bool = Field(default=False, description="also erase its content from the event log (a secret)"),
        why: str | None = Field(default=None),
        ctx: Context | None = None,
    ) -> ForgetResult:
        """Forget a memory that is wrong or no longer wanted (it stays in the log as a tombstone;
        `purge` erases its content from the log too). To mark it outdated instead, use
        memory_update with status superseded or invalidated."""
        source = _agent(ctx)
        return ForgetResult(**await run(lambda: opened()[0].forget(id, purge=purge, why=why, source=source)))

    @mcp.tool(title="Update a memory", annotations=writes)
    async def memory_update(
        id: str = Field(description="the memory's id (or a unique prefix)"),  # noqa: A002
        content: str | None = None,
        kind: Kind | None = None,
        tags: list[str] | None = Field(default=None, description="the new tags (replace the old ones)"),
        importance: float | None = Field(default=None, ge=0.0, le=1.0),
        status: Status | None = Field(default=None, description="superseded / invalidated hide it from recall"),
        pinned: bool | None = None,
        why: str | None = Field(default=None, description="kept with a status change"),
        ctx: Context | None = None,
    ) -> MemoryOut:
        """Change a memory's content, kind, tags, importance, pin or status."""
        from engram.memory.recall import memory_json  # noqa: PLC0415

        source = _agent(ctx)

        def work() -> MemoryOut:
            mem, buffers = opened()
            edited = mem.edit(id, content=content, kind=kind, tags=tags, importance=importance, pinned=pinned,
                              status=status, why=why, source=source)
            m, places, _ = mem.shown(edited.id, buffers)
            return _out(memory_json(m, places))

        return await run(work)

    @mcp.tool(title="Link two memories", annotations=writes)
    async def memory_link(
        id: str = Field(description="the memory the link starts from"),  # noqa: A002
        target: str = Field(description="the memory it points to"),
        relation: Relation = Field(description="supersedes marks the target superseded"),
        why: str | None = None,
        ctx: Context | None = None,
    ) -> LinkResult:
        """Link one memory to another: relates_to, supersedes (the target is outdated),
        derived_from, contradicts."""
        source = _agent(ctx)
        doc = await run(lambda: opened()[0].link(id, target, relation, why=why, source=source))
        return LinkResult.model_validate(doc)

    @mcp.tool(title="List memories", annotations=ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False))
    async def memories(
        file: str | None = Field(default=None, description="only memories anchored on this file..."),
        start_line: int | None = Field(default=None, ge=1, description="...on or near these lines"),
        end_line: int | None = Field(default=None, ge=1),
        kind: Kind | None = None,
        tags: list[str] = Field(default_factory=list),
        drifted: bool = Field(default=False, description="only those whose code moved, changed or vanished"),
        include_hidden: bool = Field(default=False),
        limit: int = Field(default=20, ge=1, le=MAX_LIST),
        budget: int = Field(default=RECALL_BUDGET, ge=0, description="at most this many tokens of answer, as recall's"),
    ) -> MemoryList:
        """Memories, most recently changed first, with where their anchors are now."""
        from engram.memory.recall import memory_json  # noqa: PLC0415

        def work() -> MemoryList:
            mem, buffers = opened()
            pairs = mem.list(at=_at(file, start_line, end_line), drifted=drifted, kind=kind, tags=tags,
                             hidden=include_hidden, limit=limit + 1, buffers=buffers)
            doc = fit_recall({"memories": [memory_json(m, p) for m, p in pairs[:limit]]}, budget)
            return MemoryList(memories=[_out(m) for m in doc["memories"]], truncated=len(pairs) > limit,
                              budget=doc.get("budget"), left_out=doc.get("left_out"))

        return await run(work)
