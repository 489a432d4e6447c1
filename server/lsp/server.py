"""The language server's state: settings, open documents and their live evidence regions, the
stores, background tasks, and the one worker thread that does every blocking thing.

Threading: one worker thread owns every SQLite connection and all index work (reads and the
editor tape's writes), so nothing blocking runs on the event loop and writes are serialised.

No handler is registered here: the feature modules register theirs (see the package docstring).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

import apsw
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from engram import __version__
from engram.capture.editor_tape import EditorSession
from engram.index.db import open_db
from engram.store.repo import STORE_DIR, Store, find_repo_root

from ..convert import protocol_converter
from ..documents import DocState
from ..settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

# A feature's part in `initialized` or `shutdown`: pygls takes one handler per LSP method, so the
# lifecycle module owns those handlers and runs these, in the order the features registered them.
LifecycleHook = Callable[["EngramLanguageServer"], Awaitable[None]]


class EngramLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("engram", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         converter_factory=protocol_converter)
        self.settings = Settings()
        self.docs: dict[str, DocState] = {}
        self.stores: dict[Path, Store | None] = {}
        self.offered_init: set[Path] = set()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-index")
        self._conns: dict[Path, apsw.Connection] = {}
        self.computing: dict[str, asyncio.Future[None]] = {}  # (regions.py's)
        self.timers: dict[str, asyncio.TimerHandle] = {}  # (regions.py's)
        self.notes: dict[str, tuple[int, float, list[Any], bool]] = {}  # (notes.py's: version, when, notes, resolved)
        self.note_timers: dict[str, asyncio.TimerHandle] = {}  # (notes.py's)
        self.note_dirty: dict[str, tuple[Any, set[str]]] = {}  # (notes.py's: store stamp, ids edited since)
        self.editor_session = EditorSession()
        self.mcp_endpoint: Any = None  # (endpoint.py's)
        self.mcp_starting: asyncio.Future[None] | None = None  # (endpoint.py's)
        self.background: set[asyncio.Task[None]] = set()
        self.merge_timer: asyncio.TimerHandle | None = None  # (endpoint.py's)
        self.on_initialized: list[LifecycleHook] = []
        self.on_shutdown: list[LifecycleHook] = []

    # ------------------------------------------------------------ plumbing

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking work on the index worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.worker, fn, *args)

    async def off_loop_call(self, fn: Callable[[], T]) -> T:
        return await self.off_loop(fn)

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

    def close_conn(self, store: Store) -> None:
        """Close the worker thread's connection to a store (on that thread): a reindex replaces the
        database under it."""
        db = self._conns.pop(store.root, None)
        if db is not None:
            db.close()

    def store_for(self, path: Path) -> Store | None:
        """The store of the repository holding `path`; offers `engram init` once for a repo without one.
        None too for a link that leads out of its repository: what it shows is another tree's file,
        which no repository-relative path names (lenses, hovers and notes would fail on it)."""
        root = find_repo_root(path.parent)
        if root is None:
            return None
        if not path.resolve().is_relative_to(root):
            log.info("%s leads out of the repository %s: no lenses or notes", path, root)
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
            elif self.stores[root] is not None and (why := store.unwritable()):  # (else lenses stay empty, unexplained)
                self.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Warning,
                    message=f"Engram: {store.read_only_error(why)}. Until then it shows no lenses, hovers or notes."))
        return self.stores[root]

    def any_store(self, uri: Any) -> Store:
        """The store of `uri`'s document, else of any open document, else of the workspace: for
        what is not about one document (tapes, ingest, the MCP endpoint)."""
        if isinstance(uri, str) and uri in self.docs and self.docs[uri].store is not None:
            return self.docs[uri].store  # type: ignore[return-value]
        for store in self.stores.values():
            if store is not None:
                return store
        for folder in (self.workspace.folders or {}).values():
            fs = to_fs_path(folder.uri)
            if fs and (Path(fs) / STORE_DIR).is_dir():
                return Store(Path(fs))
        root = self.workspace.root_path
        if root and (Path(root) / STORE_DIR).is_dir():
            return Store(Path(root))
        raise JsonRpcInvalidParams("no Engram store in this workspace: run `engram init` in the repository")

    def doc_state(self, uri: str) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            if to_fs_path(uri) is None:  # (did_open keeps no state of a document that is no file)
                raise JsonRpcInvalidParams(f"{uri} is not a file on disk: save it in a repository with an "
                                           "Engram store to explain it or put a note on it")
            raise JsonRpcInvalidParams(f"unknown document {uri}: open it first")
        return state

    def text_of(self, uri: str) -> str:
        return self.workspace.get_text_document(uri).source
