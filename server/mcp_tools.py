"""The MCP tools: the same store agents read as people, bounded so a call never floods a context.

Tool bodies run on a caller-supplied runner (the language server's index thread, or a private
one-thread executor for `engram mcp`), so SQLite work happens on one thread per process.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Literal, TypeVar

import anyio
import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from engram import __version__
from engram.errors import EngramError
from engram.store.repo import Store
from engram.words import plural

from .mcp_errors import ArgumentCheckingServer

log = logging.getLogger(__name__)
T = TypeVar("T")

Runner = Callable[[Callable[[], T]], Awaitable[T]]
StoreProvider = Callable[[], Store]
TextProvider = Callable[[Store, str], str | None]  # unsaved editor text of a repository file, if open

MAX_TEXT = 1500
MAX_EVENTS = 60

INSTRUCTIONS = (
    "Engram knows why code exists: it records coding-agent sessions and, for a span of code, returns the "
    "sessions that wrote, read or discussed it, with windows of their transcripts. Before changing code you "
    "did not write, call `explain` on it; follow up with `view` to read more of a transcript. It also keeps "
    "memories: `recall` what is known (give `file` to favour notes anchored on that code), `remember` a fact, "
    "decision or finding worth keeping (anchored to the lines it is about), `memory_update` or `forget` notes "
    "that turned out wrong. At the start of a session that continues earlier work (after a compaction, a "
    "resume or a switch of harness), call `resume` for what that work's transcript says is left to do; before stopping mid-task, leave a `handoff` note. "
    "Work that spans sessions is a task (`task_list`, `task_new`, `task_join`): `resume(task=...)` reads all its sessions."
)


class Span(BaseModel):
    file: str
    start: int
    end: int


class Fragment(BaseModel):
    tape: str = Field(description="tape id; pass it to `view` with `offset` to read around this touch")
    offset: int
    kind: str
    file: str | None = None
    lines: list[int | None] | None = None
    confidence: float
    via: str = Field(description="direct, lineage, continuation, agent_link, tombstone or location_only")
    timestamp: str | None = None
    window: list[dict[str, Any]] | None = None


class Session(BaseModel):
    tape: str
    session_id: str
    harness: str
    model: str | None = None
    touches: int
    last_touch: str | None = None
    wrote: bool = Field(default=False, description="true for a session whose edit changed these lines")
    story: dict[str, Any] | None = Field(
        default=None, description="the touch it tells about (its latest edit, else its latest touch): the person's "
                                  "`request`, the agent's words `said_before` and `said_after` it, the `next_run`, "
                                  "and for an edit `edit.diff`, the lines before -> after; each part with its offset")
    fragments: list[Fragment]


class Widened(BaseModel):
    asked: Span = Field(description="the span asked for")
    why: str = Field(description="few-tokens, no-evidence (nothing matched the lines themselves), "
                     "weak-evidence (their file's best match held under 0.3 of them), no-writer (no edit of their "
                     "file held them as well as its reads did) or expand-until")


class Truncated(BaseModel):
    left_out: dict[str, int] | None = Field(
        default=None, description="how many sessions, stories, fragments and windows did not fit the budget")
    next: str | None = Field(default=None, description="the call that returns the next page")
    lineage: str | None = None
    why: str | None = None


class Budget(BaseModel):
    tokens: int = Field(description="the budget asked for, in tokens of 4 bytes of compact JSON")
    used: int
    over: bool = False


class NoteBrief(BaseModel):
    id: str = Field(description="the memory's id: `recall`, `memory_update` and `forget` take it")
    kind: str
    summary: str = Field(description="the note's first line")
    state: str = Field(description="where its anchor is now: intact, moved, edited or vanished")
    retained: float = Field(description="the share of the anchored code still there")
    lines: list[int] = Field(description="[first, last] line of the note's code now (vanished: where it was)")


class NotesLeftOut(BaseModel):
    count: int
    next: str = Field(description="how to read them")


class ExplainResult(BaseModel):
    version: int
    span: Span = Field(description="the span answered; wider than the one asked for when `widened` says so")
    notes: list[NoteBrief] = Field(default_factory=list, description="the memories (notes) anchored to the span "
                                   "asked for: what is known about this code, beside why it was written")
    notes_left_out: NotesLeftOut | None = None
    sessions: list[Session]
    widened: Widened | None = None
    rank: str | None = Field(default=None, description="writer, touches or evidence: how `sessions` are ordered")
    truncated: Truncated | bool = Field(description="false, or what did not fit and the call for the next page")
    budget: Budget | None = None
    page: int | None = None


class ViewResult(BaseModel):
    tape: str
    session_id: str
    at: int
    events: list[dict[str, Any]]
    truncated: bool
    hint: str | None = None


class TapeInfo(BaseModel):
    id: str
    harness: str
    session_id: str
    model: str | None = None
    started: str | None = None
    events: int
    edits: int
    reads: int
    size: int
    subagent: str | None = Field(default=None, description="set for a session another agent started: its kind")
    parent_session: str | None = Field(default=None, description="the session that started this subagent")


class TapeList(BaseModel):
    tapes: list[TapeInfo]
    truncated: bool


class SearchHit(BaseModel):
    tape: str
    session_id: str
    offset: int
    kind: str
    timestamp: str | None = None
    excerpt: str


class SearchResult(BaseModel):
    query: str
    hits: list[SearchHit]


class BlameRegion(BaseModel):
    lines: list[int] = Field(description="[first, last] line of the region, 1-based, inclusive")
    session_id: str | None = Field(description="the session whose edit last changed these lines; null: none recorded")
    tape: str | None = Field(description="its tape; `explain` on the lines, or `view`, reads more")
    harness: str | None = None
    when: str | None = Field(default=None, description="when that edit was made")
    request: str | None = Field(default=None, description="the first line of the person's request that led to it")


class BlameResult(BaseModel):
    file: str
    regions: list[BlameRegion]


class IngestResult(BaseModel):
    summary: str
    new_tapes: int
    sessions: int


def _clip(value: Any, limit: int = MAX_TEXT) -> tuple[Any, bool]:
    """Strings cut to `limit` characters (recursively); returns the value and whether anything was cut."""
    if isinstance(value, str):
        return (value, False) if len(value) <= limit else (value[:limit] + f"…[+{len(value) - limit} chars]", True)
    if isinstance(value, dict):
        cut = False
        out = {}
        for k, v in value.items():
            out[k], c = _clip(v, limit)
            cut |= c
        return out, cut
    if isinstance(value, list):
        cut = False
        items = []
        for v in value:
            x, c = _clip(v, limit)
            items.append(x)
            cut |= c
        return items, cut
    return value, False


def bound_explain(doc: dict[str, Any], next_call: str) -> ExplainResult:
    """The core's explain document as the tool's result, its next page named as a tool call
    (`next_call`, with "{page}" where the number goes)."""
    truncated = doc.get("truncated") or False
    if isinstance(truncated, dict) and truncated.get("next"):
        truncated = {**truncated, "next": next_call.format(page=int(doc.get("page") or 1) + 1)}
    widened = doc.get("widened")
    left = doc.get("notes_left_out")
    return ExplainResult(version=doc["version"], span=Span(**doc["span"]),
                         notes=[NoteBrief.model_validate(n) for n in doc.get("notes", [])],
                         notes_left_out=NotesLeftOut.model_validate(left) if left else None,
                         sessions=[Session.model_validate(s) for s in doc["sessions"]],
                         truncated=Truncated.model_validate(truncated) if truncated else False,
                         widened=Widened.model_validate(widened) if widened else None, rank=doc.get("rank"),
                         budget=Budget.model_validate(doc["budget"]) if doc.get("budget") else None,
                         page=doc.get("page"))


def _error(exc: EngramError) -> ToolError:
    return ToolError(str(exc))


class CompactServer(ArgumentCheckingServer):
    """Tools' JSON text written compact. The SDK indents the text block it makes of a tool's
    structured answer, and that text is what most clients hand the model: an explain answer cut
    to its 4,000-token budget (counted on compact JSON) reached the model as ~5,000."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        result = await super().call_tool(name, arguments, context)
        for block in getattr(result, "content", None) or []:
            text = getattr(block, "text", None)
            if isinstance(text, str) and text[:1] in "{[" and "\n" in text:
                try:
                    block.text = orjson.dumps(orjson.loads(text)).decode()
                except orjson.JSONDecodeError:
                    pass  # (text that only looks like JSON: as it was)
        return result


def build_mcp(store_provider: StoreProvider, runner: Runner, text_provider: TextProvider | None = None) -> MCPServer:
    """An MCPServer whose tools read (and, for ingest, write) the store `store_provider` gives."""
    mcp = CompactServer("engram", version=__version__, instructions=INSTRUCTIONS)
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    async def run(fn: Callable[[], T]) -> T:
        try:
            return await runner(fn)
        except EngramError as exc:
            raise _error(exc) from exc

    @mcp.tool(title="Why does this code exist?", annotations=read_only)
    async def explain(
        file: str = Field(description="path of the file, relative to the repository root (or absolute inside it)"),
        start_line: int = Field(ge=1, description="first line of the span, 1-based"),
        end_line: int = Field(ge=1, description="last line of the span, 1-based, inclusive"),
        before: int = Field(default=2, ge=0, le=20, description="transcript events to show before each touch"),
        after: int = Field(default=2, ge=0, le=20, description="transcript events to show after each touch"),
        brief: bool = Field(default=False, description="sessions and touches only, no transcript windows"),
        expand_until: int | None = Field(default=None, ge=1,
                                         description="grow the span until at most this many sessions match"),
        min_confidence: float = Field(default=0.5, ge=0.0, le=1.0,
                                      description="lineage edges below this confidence are not followed"),
        include_deleted: bool = Field(default=False, description="also match code that was deleted (tombstones)"),
        rank: Literal["writer", "touches", "evidence"] | None = Field(
            default=None, description="writer: the sessions that changed these lines first, latest first; touches: most "
                                      "touches, then recency; evidence: strongest match (default: the "
                                      "repository's explain.rank setting, else writer)"),
        budget: int | None = Field(
            default=None, ge=0, description="at most this many tokens (4 bytes of JSON each) in the answer; what does "
                                            "not fit is listed in `truncated` with the call for the next page "
                                            "(default: the repository's explain.budget, else 4000; 0: no bound)"),
        page: int = Field(default=1, ge=1, description="the page of an answer cut to the budget"),
    ) -> ExplainResult:
        """Return the sessions (Claude Code, Codex, editor...) that wrote, read or discussed lines
        start_line..end_line of `file` in the working tree, ranked (the sessions that wrote the lines first), each with
        windows of its transcript around every touch: the request, the reasoning, the edit, the
        test run that followed, and the notes (memories) anchored to those lines. Works after the
        code was shifted, edited, moved or reformatted. Call it before changing code whose purpose
        you do not know."""
        from engram.memory.briefs import explain_notes, with_notes  # noqa: PLC0415
        from engram.query.explain import Options, explain as core_explain  # noqa: PLC0415
        from engram.query.spans import Span as CoreSpan, read_span, repo_relative  # noqa: PLC0415

        def work() -> dict[str, Any]:
            with _opened(store_provider) as (store, db):
                rel = repo_relative(store.root, file, store.root)
                live = text_provider(store, rel) if text_provider else None
                file_lines: list[str] | None = None
                if live is not None:
                    file_lines = live.splitlines()
                    if end_line < start_line or end_line > len(file_lines):
                        raise EngramError(f"{file}:{start_line}-{end_line}: past the end of the file "
                                          f"({plural(len(file_lines), 'line')} in the editor)")
                    span = CoreSpan(rel, start_line, end_line,
                                    "\n".join(file_lines[start_line - 1:end_line]) + "\n")
                else:
                    span = read_span(store.root, file, start_line, end_line, store.root)
                    file_lines = (store.root / span.file).read_text(encoding="utf-8", errors="replace").splitlines()
                cfg = store.config["explain"]
                tokens = budget if budget is not None else int(cfg["budget"])
                notes, used = explain_notes(store, span.file, start_line, end_line, tokens, live)
                opts = Options(before=before, after=after, brief=brief, min_confidence=min_confidence,
                               include_deleted=include_deleted, rank=rank or str(cfg["rank"]),
                               budget=max(1, tokens - used) if tokens else None, page=page)
                doc = core_explain(store, db, span, opts, expand_until=expand_until, file_lines=file_lines)
                return with_notes(doc, notes, used, tokens)

        asked = {"file": file, "start_line": start_line, "end_line": end_line, "before": before, "after": after,
                 "brief": brief, "expand_until": expand_until, "min_confidence": min_confidence,
                 "include_deleted": include_deleted, "rank": rank, "budget": budget}
        defaults = {"before": 2, "after": 2, "brief": False, "expand_until": None, "min_confidence": 0.5,
                    "include_deleted": False, "rank": None, "budget": None}
        args = ", ".join(f"{k}={v!r}" for k, v in asked.items() if k not in defaults or defaults[k] != v)
        args = args.replace("{", "{{").replace("}", "}}")
        return bound_explain(await run(work), f"explain({args}, page={{page}})")

    @mcp.tool(title="Which session wrote each line", annotations=read_only)
    async def blame(
        file: str = Field(description="path of the file, relative to the repository root (or absolute inside it)"),
        start_line: int | None = Field(default=None, ge=1, description="first line, 1-based (default: the first)"),
        end_line: int | None = Field(default=None, ge=1, description="last line, inclusive (default: the last)"),
    ) -> BlameResult:
        """Line-by-line attribution, like `git blame`: the file (as the editor has it, else the working
        tree) as regions of consecutive lines last changed by one session, each with that session, its
        tape, when, and the first line of the request that led to the edit. Call `explain` on a region
        for the whole story."""
        from engram.query.requests import blame_request  # noqa: PLC0415
        from engram.query.spans import repo_relative  # noqa: PLC0415

        def work() -> dict[str, Any]:
            with _opened(store_provider) as (store, db):
                rel = repo_relative(store.root, file, store.root)
                live = text_provider(store, rel) if text_provider else None
                return blame_request(store, db, {"file": rel, "start": start_line, "end": end_line,
                                                 "cwd": str(store.root), "text": live})

        return BlameResult.model_validate(await run(work))

    @mcp.tool(title="Read a transcript window", annotations=read_only)
    async def view(
        tape: str = Field(description="tape id (or unique prefix) or a harness session id"),
        at: int = Field(ge=0, description="event offset, e.g. a fragment's `offset` from explain"),
        before: int = Field(default=5, ge=0, le=MAX_EVENTS),
        after: int = Field(default=5, ge=0, le=MAX_EVENTS),
    ) -> ViewResult:
        """Events of a session's transcript around an offset: messages, tool calls and results,
        reads and edits. Page by calling again with a different `at`."""
        from engram.index.catalog import resolve_tape, tape_file  # noqa: PLC0415
        from engram.tape.reader import TapeReader  # noqa: PLC0415

        def work() -> ViewResult:
            with _opened(store_provider) as (store, db):
                row = resolve_tape(db, tape)
            with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
                if at >= len(r):
                    raise EngramError(f"tape {row.id[:12]} has events 0-{len(r) - 1}; `at` {at} is past the end")
                window = r.window(at, before, after)
                n = len(r)
            events, cut = _clip([{"offset": o, **ev} for o, ev in window])
            last = window[-1][0] if window else at
            hint = None
            if cut or last < n - 1:
                hint = (f"the tape has {plural(n, 'event')}; call view(at={min(n - 1, last + after + 1)}) "
                        "for the next ones")
            return ViewResult(tape=row.id, session_id=row.session_id, at=at, events=events, truncated=cut,
                              hint=hint)

        return await run(work)

    @mcp.tool(title="List recorded sessions", annotations=read_only)
    async def tapes(limit: int = Field(default=20, ge=1, le=200),
                    harness: str | None = Field(default=None, description="claude-code, codex, editor, ...")
                    ) -> TapeList:
        """The recorded sessions (tapes), newest first."""
        from engram.index.catalog import list_tapes  # noqa: PLC0415

        def work() -> TapeList:
            with _opened(store_provider) as (store, db):
                rows = list_tapes(db, limit=limit + 1, harness=harness)
            return TapeList(tapes=[TapeInfo(**{k: v for k, v in r.as_dict().items() if k in TapeInfo.model_fields})
                                   for r in rows[:limit]], truncated=len(rows) > limit)

        return await run(work)

    @mcp.tool(title="Show a session's transcript", annotations=read_only)
    async def show_tape(tape: str = Field(description="tape id, unique prefix, or harness session id"),
                        limit: int = Field(default=40, ge=1, le=MAX_EVENTS)) -> ViewResult:
        """The first `limit` events of a tape; continue with `view(tape, at=limit)`."""
        return await view(tape=tape, at=0, before=0, after=limit - 1)

    @mcp.tool(title="Search transcripts", annotations=read_only)
    async def search(query: str = Field(description="words to find in messages and tool calls"),
                     limit: int = Field(default=10, ge=1, le=50)) -> SearchResult:
        """Plain full-text search over what users and agents said and ran."""
        from engram.query.search import search as core_search  # noqa: PLC0415

        def work() -> SearchResult:
            with _opened(store_provider) as (store, db):
                hits = core_search(store, db, query, limit=limit)
            return SearchResult(query=query, hits=[SearchHit(**h) for h in hits])

        return await run(work)

    @mcp.tool(title="Capture new sessions",
              annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                          open_world_hint=False))
    async def ingest() -> IngestResult:
        """Capture this repository's new Claude Code and Codex sessions (and new parts of live
        ones) into the store and index them. Safe to call repeatedly."""
        from engram.index.build import Indexer  # noqa: PLC0415
        from engram.capture.discovery import discover  # noqa: PLC0415
        from engram.capture.pipeline import ingest as core_ingest  # noqa: PLC0415
        from engram.capture.stats import IngestStats  # noqa: PLC0415

        def work() -> IngestResult:
            store = store_provider()
            stats = IngestStats()
            jobs = discover(store.root, None, None, stats)
            core_ingest(store, jobs, stats=stats, after_tape=Indexer(store))
            from engram.memory.provenance import link_waiting  # noqa: PLC0415

            link_waiting(store)
            return IngestResult(summary=stats.summary(), new_tapes=stats.tapes, sessions=stats.sessions)

        return await run(work)

    from .mcp_memory import register_memory_tools  # noqa: PLC0415

    register_memory_tools(mcp, store_provider, run, text_provider)
    from .mcp_resume import register_handoff_tool, register_resume_tool, register_task_tools  # noqa: PLC0415

    register_resume_tool(mcp, store_provider, run, _opened)
    register_handoff_tool(mcp, store_provider, run, _opened)
    register_task_tools(mcp, store_provider, run, _opened)

    @mcp.resource("engram://tape/{tape_id}", mime_type="text/plain", title="A session's transcript")
    async def tape_resource(tape_id: str) -> str:
        """A compact, readable view of a tape (first 200 events)."""
        from engram.index.catalog import resolve_tape, tape_file  # noqa: PLC0415
        from engram.query.render import events_view  # noqa: PLC0415
        from engram.tape.reader import TapeReader  # noqa: PLC0415

        def work() -> str:
            with _opened(store_provider) as (store, db):
                row = resolve_tape(db, tape_id)
            with TapeReader(tape_file(store, row.id), store.objects_dir) as r:
                return events_view(enumerate(r.events(0, 200)))

        try:
            return await runner(work)
        except EngramError as exc:  # (any other error the SDK reports as 'Error creating resource', unsaid why)
            raise ResourceError(str(exc)) from exc

    return mcp


_connections: dict[str, tuple[int, Any]] = {}


@contextmanager
def _opened(store_provider: StoreProvider) -> Iterator[tuple[Store, Any]]:
    """The store and a connection to its index, kept open between calls.

    A connection per call would re-run the schema check and start with an empty SQLite page
    cache every time; one per index file (re-opened if the file was replaced, e.g. after
    `rm -rf .engram && engram init`) keeps a warm call at the cost of the query itself."""
    store = store_provider()
    yield store, _db(store)


def _db(store: Store):  # noqa: ANN202
    from engram.index.catalog import require_tapes  # noqa: PLC0415
    from engram.index.db import index_inode, open_db  # noqa: PLC0415

    if not store.exists():
        raise EngramError(f"no Engram store in {store.root}: run `engram init` there, then `engram ingest`")
    path = str(store.index_path)
    inode = index_inode(store)
    cached = _connections.get(path)
    if cached is not None and cached[0] == inode:
        db = cached[1]
    else:
        if cached is not None:
            cached[1].close()
        db = open_db(store)
        _connections[path] = (index_inode(store), db)
    require_tapes(db, store, "call the `ingest` tool (or run `engram ingest`)")
    return db


QueryHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def command_queries(store_provider: StoreProvider, runner: Runner,
                    on_index_changed: Callable[[], None] | None = None,
                    merge_when_idle: Callable[[Store], None] | None = None) -> dict[str, QueryHandler]:
    """What a command-line `engram` may hand the endpoint (see engram.cli.running_server): the same
    request it would carry out itself, here on a warm index with the imports done.
    `on_index_changed` runs (on the loop) after an ingest that wrote a tape; with
    `merge_when_idle`, such an ingest leaves merging segments to it (engram.capture.pipeline.merge_idle)."""

    def query(name: str) -> QueryHandler:
        """The handler of a query engram.query.requests answers (`<name>_request`), on a warm index
        with what was captured but not indexed indexed first."""

        async def handle(params: dict[str, Any]) -> dict[str, Any]:
            from engram.query import requests  # noqa: PLC0415

            def work() -> dict[str, Any]:
                with _opened(store_provider) as (store, db):
                    requests.index_captured(store, db)
                    if name == "explain":  # (with the notes anchored to its span, as the command's own answer)
                        from engram.memory.briefs import explain_with_notes  # noqa: PLC0415

                        return explain_with_notes(store, db, params)
                    return getattr(requests, f"{name}_request")(store, db, params)  # type: ignore[no-any-return]

            return await runner(work)

        return handle

    async def ingest(params: dict[str, Any]) -> dict[str, Any]:
        from engram.capture.pipeline import ingest_request  # noqa: PLC0415

        store = store_provider()
        doc = await runner(lambda: ingest_request(store, params, merge_later=merge_when_idle is not None))
        if doc["tapes"]:
            from engram.memory.provenance import link_waiting  # noqa: PLC0415

            await runner(lambda: link_waiting(store))
            if on_index_changed is not None:
                on_index_changed()
            if merge_when_idle is not None:
                merge_when_idle(store)
        return doc

    async def recall(params: dict[str, Any]) -> dict[str, Any]:
        from engram.memory import open_memories  # noqa: PLC0415
        from engram.memory.recall import recall_request  # noqa: PLC0415

        from .mcp_memory import embed_later  # noqa: PLC0415

        doc = await runner(lambda: recall_request(open_memories(store_provider()), params))
        embed_later(doc, runner, store_provider)
        return doc

    async def notes(params: dict[str, Any]) -> dict[str, Any]:
        """An agent's hook asks for the notes before an edit or at session start."""
        from engram.memory import open_memories  # noqa: PLC0415
        from engram.memory.briefs import notes_request  # noqa: PLC0415

        return await runner(lambda: notes_request(open_memories(store_provider()), params))

    return {"explain": query("explain"), "blame": query("blame"), "ingest": ingest, "recall": recall, "notes": notes}


def thread_runner() -> Runner:
    """A runner with one private worker thread: all store work of this process on one thread."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-mcp")

    async def run(fn: Callable[[], T]) -> T:
        import asyncio  # noqa: PLC0415

        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    return run


def discover_store(start: Path | None = None) -> StoreProvider:
    """Find the store lazily, so the server starts (and can say what is wrong) without one."""

    def provide() -> Store:
        return Store.discover(start)

    return provide


__all__ = ["build_mcp", "thread_runner", "discover_store", "anyio"]
