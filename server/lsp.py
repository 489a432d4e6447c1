"""`engram lsp`: the language server. Thin handlers: parse, call the core off the event loop, convert.

Threading: one worker thread owns every SQLite connection and all index work (reads and the
editor tape's writes), so nothing blocking runs on the event loop and writes are serialised.
Each computation works on a snapshot `(uri, version, text)`; a result for a version the
document has moved past is dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import threading
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

import apsw
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from engram import __version__
from engram.capture.editor_tape import EditorSession, record_save
from engram.errors import EngramError
from engram.index.db import open_db
from engram.query.regions import evidence_regions
from engram.query.story import touch_story
from engram.store.repo import STORE_DIR, Store, find_repo_root
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_path

from . import convert
from .documents import DocState, LiveRegion
from .settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

INDEX_CHANGED = "engram/indexChanged"
COMMANDS = ("engram.explain", "engram.view", "engram.ingest", "engram.reindex", "engram.tapes")
HOVER_SESSIONS = 3
# Quiet time after an append handed over by the command line before the server merges the
# segments appends left (engram.capture.pipeline.merge_idle): an agent's hook appends after every turn,
# seconds apart, and none of them should wait for a merge.
MERGE_IDLE_S = 2.0
CONTEXT_LINES = 2


class EngramLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("engram", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.docs: dict[str, DocState] = {}
        self.stores: dict[Path, Store | None] = {}
        self.offered_init: set[Path] = set()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-index")
        self._conns: dict[Path, apsw.Connection] = {}
        self.computing: dict[str, asyncio.Future[None]] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.editor_session = EditorSession()
        self.mcp_endpoint: Any = None
        self.mcp_starting: asyncio.Future[None] | None = None
        self.background: set[asyncio.Task[None]] = set()
        self.merge_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ plumbing

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking work on the index worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.worker, fn, *args)

    async def off_loop_call(self, fn: Callable[[], T]) -> T:
        return await self.off_loop(fn)

    def index_changed_soon(self) -> None:
        """`index_changed` without waiting for it: an ingest handed over by the command line
        answers it first (the loop keeps a reference, so the task is not collected half-way)."""
        self.in_background(self.index_changed())

    def merge_when_idle(self, store: Store) -> None:
        """Merge the segments of appends handed over by the command line once none has come for
        MERGE_IDLE_S (each new one restarts the wait), on the index worker."""
        if self.merge_timer is not None:
            self.merge_timer.cancel()

        async def merge() -> None:
            from engram.capture.pipeline import merge_idle  # noqa: PLC0415

            try:
                await self.off_loop(merge_idle, store)
            except Exception:  # noqa: BLE001 - the next append merges as it needs
                log.exception("merging posting segments")

        def start() -> None:
            self.merge_timer = None
            self.in_background(merge())

        self.merge_timer = asyncio.get_running_loop().call_later(MERGE_IDLE_S, start)

    def in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` on the loop without waiting for it (the loop keeps a reference, so the task
        is not collected half-way)."""
        task = asyncio.ensure_future(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def conn(self, store: Store) -> apsw.Connection:
        """The worker thread's connection to a store (only ever called on that thread)."""
        assert threading.current_thread().name.startswith("engram-index"), "index access off the worker thread"
        db = self._conns.get(store.root)
        if db is None:
            db = self._conns[store.root] = open_db(store)
        return db

    def store_for(self, path: Path) -> Store | None:
        """The store of the repository holding `path`; offers `engram init` once for a repo without one."""
        root = find_repo_root(path.parent)
        if root is None:
            return None
        if root not in self.stores:
            store = Store(root)
            self.stores[root] = store if (root / STORE_DIR).is_dir() else None
            if self.stores[root] is None and root not in self.offered_init:
                self.offered_init.add(root)
                self.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Info,
                    message=f"Engram: {root} has no store yet. Run `engram init` there, then `engram ingest`, "
                            "to see why its code exists."))
        return self.stores[root]

    def doc_state(self, uri: str) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            raise JsonRpcInvalidParams(f"unknown document {uri}: open it first")
        return state

    def text_of(self, uri: str) -> str:
        return self.workspace.get_text_document(uri).source

    # ------------------------------------------------------------ regions

    def schedule(self, uri: str, delay: float = 0.0, dirty_only: bool = False) -> None:
        """(Re)compute a document's regions after `delay`, replacing any pending timer."""
        timer = self.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()

        def start() -> None:
            self.timers.pop(uri, None)
            self.computing[uri] = asyncio.ensure_future(self.compute(uri, dirty_only))

        if delay <= 0:
            start()
        else:
            self.timers[uri] = loop.call_later(delay, start)

    async def compute(self, uri: str, dirty_only: bool) -> None:
        state = self.docs.get(uri)
        if state is None or state.store is None:
            return
        version, text = state.version, self.text_of(uri)
        lines = text.splitlines()
        try:
            if not dirty_only or state.computed_version < 0:
                regions = await self.off_loop(self._regions_blocking, state.store, text)
                if self.docs.get(uri) is not state:
                    return
                if state.version != version:
                    if state.computed_version >= 0:
                        return  # the document moved on: a newer computation is scheduled
                    # Never computed yet and the person keeps typing (each computation outrun by
                    # the next keystroke would leave the document without lenses for as long as
                    # they type): take these regions, marked dirty, and re-check them.
                    state.set_regions(regions, version)
                    for r in state.regions:
                        r.dirty = True
                    self.schedule(uri, self.settings.debounce, dirty_only=True)
                    return
                state.set_regions(regions, version)
                return
            for r in [r for r in state.regions if r.dirty]:
                a, b = max(0, r.start - CONTEXT_LINES), min(len(lines) - 1, r.end + CONTEXT_LINES)
                snippet = "\n".join(lines[a:b + 1]) + "\n"
                found = await self.off_loop(self._regions_blocking, state.store, snippet)
                if self.docs.get(uri) is not state or state.version != version:
                    return
                idx = state.regions.index(r) if r in state.regions else -1
                if idx < 0:
                    continue
                state.regions[idx:idx + 1] = [LiveRegion(f.start + a, f.end + a, f.sessions) for f in found]
            state.computed_version = version
        except EngramError as exc:
            log.warning("%s: %s", uri, exc)

    def _regions_blocking(self, store: Store, text: str) -> list:
        return evidence_regions(self.conn(store), text)

    async def ready_regions(self, uri: str) -> DocState:
        state = self.doc_state(uri)
        pending = self.computing.get(uri)
        if pending is not None and not pending.done():
            try:
                await asyncio.wait_for(asyncio.shield(pending), timeout=15)
            except asyncio.TimeoutError:
                log.warning("regions of %s still computing", uri)
        return state

    async def index_changed(self) -> None:
        """Recompute every open document, then tell the client to ask for lenses again."""
        for uri in list(self.docs):
            self.schedule(uri)
        for fut in list(self.computing.values()):
            try:
                await fut
            except Exception:  # noqa: BLE001 - one document's failure must not stop the others
                log.exception("recomputing regions")
        self.protocol.notify(INDEX_CHANGED, {"uris": list(self.docs)})
        ws = self.client_capabilities.workspace if self.client_capabilities else None
        if ws and ws.code_lens and ws.code_lens.refresh_support:
            try:
                await self.workspace_code_lens_refresh_async(None)
            except Exception:  # noqa: BLE001 - a client may refuse; lenses come on its next request
                log.debug("codeLens/refresh refused", exc_info=True)


server = EngramLanguageServer()


class ClientLogHandler(logging.Handler):
    """Forwards records to the client's log (window/logMessage) when the setting asks for it."""

    LEVELS = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning,
              logging.INFO: types.MessageType.Info}

    def __init__(self, ls: EngramLanguageServer, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.INFO)
        self.ls, self.loop = ls, loop

    def emit(self, record: logging.LogRecord) -> None:
        kind = self.LEVELS.get(record.levelno, types.MessageType.Log)
        params = types.LogMessageParams(type=kind, message=self.format(record))
        try:
            self.loop.call_soon_threadsafe(self.ls.window_log_message, params)
        except RuntimeError:  # the loop is closed: the client is gone
            pass


# ---------------------------------------------------------------- lifecycle and settings

@server.feature(types.INITIALIZE)
def on_initialize(ls: EngramLanguageServer, params: types.InitializeParams) -> None:
    ls.settings = ls.settings.merged(params.initialization_options)


@server.feature(types.INITIALIZED)
async def on_initialized(ls: EngramLanguageServer, params: types.InitializedParams) -> None:
    ws = ls.client_capabilities.workspace if ls.client_capabilities else None
    if ws and ws.configuration:
        try:
            got = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="engram")]))
            if got:
                ls.settings = ls.settings.merged(got[0])
        except Exception:  # noqa: BLE001 - configuration is optional
            log.debug("workspace/configuration failed", exc_info=True)
    if ls.settings.log_to_client:
        logging.getLogger("engram").addHandler(ClientLogHandler(ls, asyncio.get_running_loop()))
        logging.getLogger("engram_server").addHandler(ClientLogHandler(ls, asyncio.get_running_loop()))
    if ls.settings.mcp:
        # In the background: importing the MCP stack takes seconds and the editor must not wait.
        ls.mcp_starting = asyncio.ensure_future(start_mcp(ls))


async def start_mcp(ls: EngramLanguageServer) -> None:
    """Serve the MCP tools over HTTP from this process, on the live store (editor tape, unsaved text)."""
    try:
        store = _any_store(ls, None)
    except JsonRpcInvalidParams:
        log.info("no store in the workspace: MCP endpoint not started")
        return
    import importlib  # noqa: PLC0415

    http_mod = await asyncio.to_thread(importlib.import_module, "engram_server.mcp_http")
    tools_mod = await asyncio.to_thread(importlib.import_module, "engram_server.mcp_tools")
    start_endpoint, build_mcp = http_mod.start_endpoint, tools_mod.build_mcp

    def unsaved(st: Store, rel: str) -> str | None:
        for state in list(ls.docs.values()):
            if state.store is not None and state.store.root == st.root:
                try:
                    if state.path.resolve().relative_to(st.root.resolve()).as_posix() == rel:
                        return ls.text_of(state.uri)
                except ValueError:
                    continue
        return None

    mcp = build_mcp(lambda: store, ls.off_loop_call, unsaved)
    queries = tools_mod.command_queries(lambda: store, ls.off_loop_call, ls.index_changed_soon, ls.merge_when_idle)
    try:
        ls.mcp_endpoint = await start_endpoint(mcp, store.endpoint_file, queries)
    except Exception:  # noqa: BLE001 - the editor features must work even if the endpoint cannot start
        log.exception("MCP endpoint did not start")


@server.feature(types.SHUTDOWN)
async def on_shutdown(ls: EngramLanguageServer, params: None) -> None:
    if ls.mcp_starting is not None and not ls.mcp_starting.done():
        try:
            await asyncio.wait_for(ls.mcp_starting, 10)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - shutting down regardless
            log.debug("MCP endpoint start did not finish", exc_info=True)
    if ls.mcp_endpoint is not None:
        await ls.mcp_endpoint.stop()
        ls.mcp_endpoint = None


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def on_configuration(ls: EngramLanguageServer, params: types.DidChangeConfigurationParams) -> None:
    raw = params.settings.get("engram") if isinstance(params.settings, dict) else None
    ls.settings = ls.settings.merged(raw if raw is not None else params.settings)


# ---------------------------------------------------------------- documents

@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: EngramLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    fs = to_fs_path(uri)
    if fs is None:
        return
    path = Path(fs)
    store = ls.store_for(path)
    # The text an editor opens is the file as saved: the before-text of the next save.
    ls.docs[uri] = DocState(uri, path, store, params.text_document.version, params.text_document.text)
    if store is not None:
        ls.schedule(uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: EngramLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    state = ls.docs.get(params.text_document.uri)
    if state is None:
        return
    state.version = params.text_document.version
    whole = False
    for change in params.content_changes:
        if isinstance(change, types.TextDocumentContentChangePartial):
            state.apply_change(change.range.start.line, change.range.end.line, change.text,
                               change.range.start.character, change.range.end.character)
        else:
            whole = True
    if state.store is not None:
        ls.schedule(state.uri, ls.settings.debounce, dirty_only=not whole)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: EngramLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None:
        return
    after = params.text if params.text is not None else ls.text_of(state.uri)
    before, state.saved_text = state.saved_text, after
    if not ls.settings.editor_tape or before == after:
        return
    rel = state.path.resolve().relative_to(state.store.root.resolve()).as_posix()
    try:
        await ls.off_loop(record_save, state.store, ls.editor_session, rel, before, after, "engram-lsp")
    except EngramError as exc:
        ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=str(exc)))
        return
    await ls.index_changed()


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: EngramLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.docs.pop(uri, None)
    timer = ls.timers.pop(uri, None)
    if timer is not None:
        timer.cancel()
    ls.computing.pop(uri, None)


# ---------------------------------------------------------------- lenses and hover

@server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))
async def code_lens(ls: EngramLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens] | None:
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None or not ls.settings.lenses:
        return None
    state = await ls.ready_regions(state.uri)
    return [convert.lens(state.uri, state.version, r) for r in state.regions if r.sessions]


async def explain_region(ls: EngramLanguageServer, state: DocState, region: LiveRegion) -> dict[str, Any]:
    """The brief explain of a region's current buffer text: what its lens and hover report, so
    they agree with what `engram.explain` then shows."""
    from engram.query.explain import Options, explain  # noqa: PLC0415
    from engram.query.spans import Span  # noqa: PLC0415

    lines = ls.text_of(state.uri).splitlines()
    end = min(region.end, len(lines) - 1)
    rel = state.path.resolve().relative_to(state.store.root.resolve()).as_posix()  # type: ignore[union-attr]
    span = Span(rel, region.start + 1, end + 1, "\n".join(lines[region.start:end + 1]) + "\n")
    store = state.store
    opts = Options(brief=True, min_confidence=ls.settings.min_confidence,
                   rank=str(store.config["explain"]["rank"]))  # type: ignore[union-attr]
    return await ls.off_loop(lambda: explain(store, ls.conn(store), span, opts))  # type: ignore[arg-type]


@server.feature(types.CODE_LENS_RESOLVE)
async def code_lens_resolve(ls: EngramLanguageServer, lens: types.CodeLens) -> types.CodeLens:
    data = lens.data if isinstance(lens.data, dict) else {}
    state = ls.docs.get(str(data.get("uri")))
    region = state.region_at(int(data.get("start", -1))) if state is not None else None
    if state is None or state.store is None or region is None or not region.sessions:
        lens.command = types.Command(title="why? (moved: ask again)", command="")
        return lens
    try:
        doc = await explain_region(ls, state, region)
        sessions = doc["sessions"]
    except (EngramError, ValueError):
        sessions = []
    lens.command = convert.resolved_command(state.uri, region, sessions)
    return lens


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: EngramLanguageServer, params: types.HoverParams) -> types.Hover | None:
    if not ls.settings.hover:
        return None
    state = ls.docs.get(params.text_document.uri)
    if state is None or state.store is None:
        return None
    state = await ls.ready_regions(state.uri)
    region = state.region_at(params.position.line)
    if region is None or not region.sessions:
        return None
    doc = await explain_region(ls, state, region)
    top = [_telling(s) for s in doc["sessions"][:HOVER_SESSIONS]]
    if not top:
        top = [(s, s.tape, s.offset) for s in region.sessions[:HOVER_SESSIONS]]
    store = state.store
    stories = await ls.off_loop(_stories_blocking, store, top)
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                    value=convert.hover_markdown(stories)),
                       range=convert.line_range(region.start, region.end))


def _telling(session: dict[str, Any]) -> tuple[Any, str, int]:
    """An explain session and its most telling touch: the latest edit, else the latest touch."""
    frags = session["fragments"]
    edits = [f for f in frags if f["kind"] == "code.edit"]
    best = (edits or frags)[-1]
    from engram.query.regions import RegionSession  # noqa: PLC0415

    rs = RegionSession(session["session_id"], session["harness"], session.get("model"), best["tape"],
                       session["touches"], session.get("last_touch"), offset=best["offset"])
    return rs, best["tape"], best["offset"]


def _stories_blocking(store: Store, items: list[tuple[Any, str, int]]) -> list:
    out = []
    for s, tape, offset in items:
        with TapeReader(tape_path(store.tapes_dir, tape), store.objects_dir) as r:
            out.append((s, touch_story(r, offset), offset))
    return out


# ---------------------------------------------------------------- commands

def _range_lines(rng: Any, n_lines: int) -> tuple[int, int]:
    """0-based inclusive lines of an LSP range given as a dict (end at character 0 excludes its line)."""
    try:
        s, e = rng["start"], rng["end"]
        start, end = int(s["line"]), int(e["line"])
        if int(e.get("character", 0)) == 0 and end > start:
            end -= 1
    except (TypeError, KeyError, ValueError) as exc:
        raise JsonRpcInvalidParams("range must be {start: {line, character}, end: {line, character}}") from exc
    if start < 0 or end < start:
        raise JsonRpcInvalidParams(f"range {start}-{end} is not a forward range")
    if end >= n_lines:
        raise JsonRpcInvalidParams(f"range ends at line {end + 1}, past the end of the document ({n_lines} lines)")
    return start, end


def _args(args: tuple[Any, ...], n: int) -> list[Any]:
    """Command arguments padded to `n` (clients may leave optional ones out)."""
    return (list(args) + [None] * n)[:n]


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise JsonRpcInvalidParams(f"expected a number, got {value!r}") from exc


@server.command("engram.explain")
async def cmd_explain(ls: EngramLanguageServer, *args: Any) -> dict:
    """[uri, range, options?] → the explain document, its markdown and the span's text."""
    uri, rng, options = _args(args, 3)
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams("engram.explain needs [uri, range]")
    state = ls.doc_state(uri)
    if state.store is None:
        raise JsonRpcInvalidParams(f"{uri} is not in a repository with an Engram store; run `engram init`")
    text = ls.text_of(uri)
    lines = text.splitlines()
    if rng is None:
        raise JsonRpcInvalidParams("engram.explain needs a range")
    start, end = _range_lines(rng, len(lines))
    opts = options if isinstance(options, dict) else {}
    from engram.query.explain import Options, explain  # noqa: PLC0415
    from engram.query.render import explain_markdown  # noqa: PLC0415
    from engram.query.spans import Span  # noqa: PLC0415

    rel = state.path.resolve().relative_to(state.store.root.resolve()).as_posix()
    span = Span(rel, start + 1, end + 1, "\n".join(lines[start:end + 1]) + "\n")
    o = Options(before=int(opts.get("before", ls.settings.window_before)),
                after=int(opts.get("after", ls.settings.window_after)),
                min_confidence=float(opts.get("minConfidence", ls.settings.min_confidence)),
                brief=bool(opts.get("brief", False)), rank=str(state.store.config["explain"]["rank"]))
    store = state.store
    doc = await ls.off_loop(lambda: explain(store, ls.conn(store), span, o, file_lines=lines))
    return {"result": doc, "markdown": explain_markdown(doc), "text": span.text}


@server.command("engram.view")
async def cmd_view(ls: EngramLanguageServer, *args: Any) -> dict:
    """[tape, offset, before?, after?, uri?] → events around the offset."""
    tape, offset, before, after, uri = _args(args, 5)
    offset, before, after = _int(offset, 0), _int(before, 5), _int(after, 5)
    store = _any_store(ls, uri)
    from engram.index.catalog import resolve_tape  # noqa: PLC0415
    from engram.query.render import events_view  # noqa: PLC0415

    def work() -> dict:
        try:
            row = resolve_tape(ls.conn(store), str(tape))
        except EngramError as exc:
            raise JsonRpcInvalidParams(str(exc)) from exc
        with TapeReader(tape_path(store.tapes_dir, row.id), store.objects_dir) as r:
            at = max(0, min(int(offset), len(r) - 1))
            window = r.window(at, int(before), min(int(after), 100000))
        return {"tape": row.id, "session_id": row.session_id, "at": at,
                "events": [{"offset": o, **ev} for o, ev in window], "markdown": events_view(window)}

    return await ls.off_loop(work)


def _any_store(ls: EngramLanguageServer, uri: Any) -> Store:
    if isinstance(uri, str) and uri in ls.docs and ls.docs[uri].store is not None:
        return ls.docs[uri].store  # type: ignore[return-value]
    for store in ls.stores.values():
        if store is not None:
            return store
    for folder in (ls.workspace.folders or {}).values():
        fs = to_fs_path(folder.uri)
        if fs and (Path(fs) / STORE_DIR).is_dir():
            return Store(Path(fs))
    root = ls.workspace.root_path
    if root and (Path(root) / STORE_DIR).is_dir():
        return Store(Path(root))
    raise JsonRpcInvalidParams("no Engram store in this workspace: run `engram init` in the repository")


@server.command("engram.tapes")
async def cmd_tapes(ls: EngramLanguageServer, *args: Any) -> list[dict]:
    (uri,) = _args(args, 1)
    store = _any_store(ls, uri)
    from engram.index.catalog import list_tapes  # noqa: PLC0415

    return await ls.off_loop(lambda: [r.as_dict() for r in list_tapes(ls.conn(store))])


class _Cancelled(Exception):
    pass


@server.command("engram.ingest")
async def cmd_ingest(ls: EngramLanguageServer, *args: Any) -> dict:
    (uri,) = _args(args, 1)
    store = _any_store(ls, uri)
    token = str(uuid.uuid4())
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:  # noqa: BLE001 - clients without progress support still get the result
        log.debug("progress not supported", exc_info=True)
    ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="Engram: ingesting sessions",
                                                                   cancellable=True, percentage=0))
    loop = asyncio.get_running_loop()

    def progress(done: int, total: int) -> None:
        fut = ls.work_done_progress.tokens.get(token)
        if fut is not None and fut.cancelled():
            raise _Cancelled()
        pct = int(100 * done / max(total, 1))
        loop.call_soon_threadsafe(ls.work_done_progress.report, token,
                                  types.WorkDoneProgressReport(message=f"{done}/{total} sessions", percentage=pct))

    def work() -> dict:
        from engram.index.build import Indexer  # noqa: PLC0415
        from engram.capture.discovery import discover  # noqa: PLC0415
        from engram.capture.pipeline import ingest  # noqa: PLC0415
        from engram.capture.stats import IngestStats  # noqa: PLC0415

        stats = IngestStats()
        jobs = discover(store.root, None, None, stats)
        try:
            ingest(store, jobs, stats=stats, progress=progress, after_tape=Indexer(store))
        except _Cancelled:
            return {"cancelled": True, "summary": stats.summary()}
        return {"cancelled": False, "summary": stats.summary(), "tapes": stats.tapes}

    result = await ls.off_loop(work)
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(
        message="cancelled" if result["cancelled"] else result["summary"]))
    await ls.index_changed()
    return result


@server.command("engram.reindex")
async def cmd_reindex(ls: EngramLanguageServer, *args: Any) -> dict:
    (uri,) = _args(args, 1)
    store = _any_store(ls, uri)
    from engram.index.reindex import reindex  # noqa: PLC0415

    def work() -> dict:
        db = ls._conns.pop(store.root, None)
        if db is not None:
            db.close()
        return reindex(store)

    result = await ls.off_loop(work)
    await ls.index_changed()
    return result


# ---------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="engram lsp", description="Engram language server")
    ap.add_argument("--stdio", action="store_true", help="use stdio (the default; VS Code's client passes it)")
    ap.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT instead (for debugging)")
    ap.add_argument("--log-file", help="also log to this file")
    ap.add_argument("-v", "--verbose", action="count", default=0)
    args = ap.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    logging.basicConfig(level=level, handlers=handlers, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        force=True)
    try:
        if args.tcp:
            server.start_tcp("127.0.0.1", args.tcp)
        else:
            server.start_io()
    finally:
        if server.mcp_endpoint is not None:  # the client went away without `shutdown`
            server.mcp_endpoint.remove_run_file()
    return 0
