"""Document sync: open, change, save, close. Keeps each open document's state and its live
regions attached to the text (`engram_server.documents`), and records saves on the editor tape."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from engram.capture.editor_tape import record_save
from engram.errors import EngramError

from ..documents import DocState
from . import notes, regions
from .server import EngramLanguageServer


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
        regions.schedule(ls, uri)
        notes.schedule(ls, uri)


def did_change(ls: EngramLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    state = ls.docs.get(params.text_document.uri)
    if state is None:
        return
    before, state.version = state.version, params.text_document.version
    notes.follow(ls, state.uri, before, state.version, params.content_changes)
    whole = False
    for change in params.content_changes:
        if isinstance(change, types.TextDocumentContentChangePartial):
            state.apply_change(change.range.start.line, change.range.end.line, change.text,
                               change.range.start.character, change.range.end.character)
        else:
            whole = True
    if state.store is not None:
        regions.schedule(ls, state.uri, ls.settings.debounce, dirty_only=not whole)
        notes.schedule(ls, state.uri, ls.settings.debounce)


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
    await regions.index_changed(ls)


def did_close(ls: EngramLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.docs.pop(uri, None)
    timer = ls.timers.pop(uri, None)
    if timer is not None:
        timer.cancel()
    ls.computing.pop(uri, None)
    notes.closed(ls, uri)


def register(server: EngramLanguageServer) -> None:
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
