"""workspace/executeCommand: the `engram.*` commands editors bind (explain a range, view a tape,
list tapes, ingest, reindex; remember, forget, re-anchor and recall notes). Each parses its arguments, runs the core on the worker thread and
returns plain JSON."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from engram.errors import EngramError
from engram.tape.reader import TapeReader
from engram.tape.writer import tape_path
from engram.words import plural

from .. import convert
from . import notes, regions
from .server import EngramLanguageServer

log = logging.getLogger(__name__)
T = TypeVar("T")


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
        raise JsonRpcInvalidParams(f"range ends at line {end + 1}, past the end of the document "
                                   f"({plural(n_lines, 'line')})")
    return start, end


def _no_store(uri: str) -> JsonRpcInvalidParams:
    """A document with no store: outside any repository, in one without `.engram/`, or a link
    leading out of its repository (ls.store_for)."""
    return JsonRpcInvalidParams(f"{uri} is not a file of a repository with an Engram store (run `engram init` at "
                                "the repository's root; a link leading out of the repository has none)")


def _args(args: tuple[Any, ...], n: int) -> list[Any]:
    """Command arguments padded to `n` (clients may leave optional ones out)."""
    return (list(args) + [None] * n)[:n]


N = TypeVar("N", int, float)


def _number(value: Any, default: N, kind: Callable[[Any], N]) -> N:
    """An optional numeric argument as `kind` (default when absent); anything else is the client's error."""
    if value is None:
        return default
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise JsonRpcInvalidParams(f"expected a number, got {value!r}") from exc


def _int(value: Any, default: int) -> int:
    return _number(value, default, int)


async def cmd_explain(ls: EngramLanguageServer, *args: Any) -> dict:
    """[uri, range, options?] → the explain document, its markdown (engram.query.render, the rules
    of the hover and `engram explain --pretty`; with options.links, links to the transcripts an
    editor can follow), the lines of the markdown that point at an event (`targets`: [line,
    tape, offset], 0-based lines) and the span's text."""
    uri, rng, options = _args(args, 3)
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams("engram.explain needs [uri, range]")
    state = ls.doc_state(uri)
    if state.store is None:
        raise _no_store(uri)
    text = ls.text_of(uri)
    lines = text.splitlines()
    if rng is None:
        raise JsonRpcInvalidParams("engram.explain needs a range")
    start, end = _range_lines(rng, len(lines))
    opts = options if isinstance(options, dict) else {}
    from engram.query.explain import Options, explain  # noqa: PLC0415
    from engram.query.render import explain_markdown_lines  # noqa: PLC0415
    from engram.query.spans import Span  # noqa: PLC0415

    rel = state.path.resolve().relative_to(state.store.root.resolve()).as_posix()
    span = Span(rel, start + 1, end + 1, "\n".join(lines[start:end + 1]) + "\n")
    o = Options(before=_int(opts.get("before"), ls.settings.window_before),
                after=_int(opts.get("after"), ls.settings.window_after),
                min_confidence=_number(opts.get("minConfidence"), ls.settings.min_confidence, float),
                brief=bool(opts.get("brief", False)), story=True, rank=str(state.store.config["explain"]["rank"]))
    store = state.store
    def work() -> dict:
        from engram.memory.briefs import explain_notes  # noqa: PLC0415

        notes, _ = explain_notes(store, rel, start + 1, end + 1, None, live=text)
        return {**explain(store, ls.conn(store), span, o, file_lines=lines), **notes}

    doc = await ls.off_loop(work)
    refs = convert.ReferenceLinks() if opts.get("links") == "reference" else None
    link = refs or (convert.view_link if opts.get("links") else None)
    md, targets = explain_markdown_lines(doc, link=link)
    if refs is not None:
        md += refs.definitions()
    return {"result": doc, "markdown": "\n".join(md) + "\n", "text": span.text,
            "targets": [[line, tape, offset] for line, (tape, offset) in sorted(targets.items())]}


async def cmd_view(ls: EngramLanguageServer, *args: Any) -> dict:
    """[tape, offset, before?, after?, uri?] → events around the offset."""
    tape, offset, before, after, uri = _args(args, 5)
    offset, before, after = _int(offset, 0), _int(before, 5), _int(after, 5)
    store = ls.any_store(uri)
    from engram.index.catalog import resolve_tape  # noqa: PLC0415
    from engram.query.render import events_view  # noqa: PLC0415

    def work() -> dict:
        row = resolve_tape(ls.conn(store), str(tape))  # (no such tape: an EngramError, the client's, `_said`)
        with TapeReader(tape_path(store.tapes_dir, row.id), store.objects_dir) as r:
            at = max(0, min(int(offset), len(r) - 1))
            window = r.window(at, int(before), min(int(after), 100000))
        return {"tape": row.id, "session_id": row.session_id, "at": at,
                "events": [{"offset": o, **ev} for o, ev in window], "markdown": events_view(window)}

    return await ls.off_loop(work)


async def cmd_tapes(ls: EngramLanguageServer, *args: Any) -> list[dict]:
    (uri,) = _args(args, 1)
    store = ls.any_store(uri)
    from engram.index.catalog import list_tapes  # noqa: PLC0415

    return await ls.off_loop(lambda: [r.as_dict() for r in list_tapes(ls.conn(store))])


class _Cancelled(Exception):
    pass


async def cmd_ingest(ls: EngramLanguageServer, *args: Any) -> dict:
    (uri,) = _args(args, 1)
    store = ls.any_store(uri)
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
        from engram.capture.discovery import discover  # noqa: PLC0415
        from engram.capture.pipeline import ingest  # noqa: PLC0415
        from engram.capture.stats import IngestStats  # noqa: PLC0415
        from engram.index.build import Indexer  # noqa: PLC0415

        stats = IngestStats()
        jobs = discover(store.root, None, None, stats)
        try:
            ingest(store, jobs, stats=stats, progress=progress, after_tape=Indexer(store))
        except _Cancelled:
            return {"cancelled": True, "summary": stats.summary()}
        from engram.memory.provenance import link_waiting  # noqa: PLC0415

        link_waiting(store)
        return {"cancelled": False, "summary": stats.summary(), "tapes": stats.tapes}

    result = await ls.off_loop(work)
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(
        message="cancelled" if result["cancelled"] else result["summary"]))
    await regions.index_changed(ls)
    return result


async def cmd_reindex(ls: EngramLanguageServer, *args: Any) -> dict:
    (uri,) = _args(args, 1)
    store = ls.any_store(uri)
    from engram.index.reindex import reindex  # noqa: PLC0415
    from engram.memory.memories import rebuild_projection  # noqa: PLC0415

    def work() -> dict:
        ls.close_conn(store)
        return reindex(store, also=[rebuild_projection])

    result = await ls.off_loop(work)
    await regions.index_changed(ls)
    return result


def _place(ls: EngramLanguageServer, uri: Any, rng: Any) -> str:
    """`/abs/path:A-B` (1-based) of an LSP range in an open document."""
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams("give the document's uri and a range")
    state = ls.doc_state(uri)
    if state.store is None:
        raise _no_store(uri)
    start, end = _range_lines(rng, len(ls.text_of(uri).splitlines()))
    return f"{state.path}:{start + 1}-{end + 1}"


async def _on_memories(ls: EngramLanguageServer, uri: Any, work: Callable[[Any, dict[str, str]], T]) -> T:
    """Run `work(memories, buffers)` on the worker thread; bad input (an EngramError) is the
    client's error, as every command's (`_said`)."""
    store = ls.any_store(uri)
    buffers = notes.buffers_of(ls, store)  # read on the loop, where the documents change

    def run() -> T:
        from engram.memory import open_memories  # noqa: PLC0415

        return work(open_memories(store), buffers)

    return await ls.off_loop(run)


async def cmd_remember(ls: EngramLanguageServer, *args: Any) -> dict:
    """[uri, range, text, kind?] → {"id"} (and "merged_into" when it reinforced a near-duplicate):
    a note anchored to the range of the buffer's text as it is now, saved or not."""
    uri, rng, text, kind = _args(args, 4)
    at = _place(ls, uri, rng)
    if not isinstance(text, str) or not text.strip():
        raise JsonRpcInvalidParams("engram.remember needs the note's text: [uri, range, text, kind?]")
    result = await _on_memories(ls, uri, lambda mem, buffers: mem.remember(
        text, kind=str(kind or "fact"), at=[at], buffers=buffers).to_json())
    if result.get("embedding") == "pending":
        ls.in_background(_embed_pending(ls, uri))
    await notes.changed(ls)
    return result


async def _embed_pending(ls: EngramLanguageServer, uri: Any) -> None:
    """The vector a remember left pending, with the dedup by meaning, made on the worker after the
    answer when the model is loaded (remember itself never waits for the model)."""
    try:
        await _on_memories(ls, uri, lambda mem, _: mem.embed_remembered())
    except Exception:  # noqa: BLE001 - the next batch (a recall, `engram memory embed`) makes it
        log.exception("embedding a new memory")


async def cmd_forget(ls: EngramLanguageServer, *args: Any) -> dict:
    """[id] → {"id", "forgotten"}: the note is tombstoned (`engram forget ID`)."""
    (ref,) = _args(args, 1)
    result = await _on_memories(ls, None, lambda mem, _: mem.forget(str(ref or "")))
    await notes.changed(ls)
    return result


async def cmd_edit(ls: EngramLanguageServer, *args: Any) -> dict:
    """[id, {content?, kind?, status?}] → the note as it is now (`engram memory edit`); a status
    of `invalidated` retires it (hidden, kept)."""
    ref, fields = _args(args, 2)
    if not isinstance(fields, dict) or not fields.keys() & {"content", "kind", "status"}:
        raise JsonRpcInvalidParams("engram.edit needs [id, {content?, kind?, status?}]")
    wanted = {k: str(fields[k]) for k in ("content", "kind", "status") if fields.get(k) is not None}

    def work(mem: Any, buffers: dict[str, str]) -> dict:
        from engram.memory.recall import memory_json  # noqa: PLC0415

        m = mem.edit(str(ref or ""), **wanted)
        no, _ = mem.resolve(m.id)
        return memory_json(m, mem.places([no], buffers).get(no, []))

    result = await _on_memories(ls, None, work)
    await notes.changed(ls)
    return result


async def cmd_reanchor(ls: EngramLanguageServer, *args: Any) -> dict:
    """[id, uri, range] → the note with its anchors where they are now: "its code is here"."""
    ref, uri, rng = _args(args, 3)
    at = _place(ls, uri, rng)

    def work(mem: Any, buffers: dict[str, str]) -> dict:
        from engram.memory.recall import memory_json  # noqa: PLC0415

        m = mem.reanchor(str(ref or ""), at, buffers=buffers)
        no, _ = mem.resolve(m.id)
        return memory_json(m, mem.places([no], buffers).get(no, []))

    result = await _on_memories(ls, uri, work)
    await notes.changed(ls)
    return result


async def cmd_recall(ls: EngramLanguageServer, *args: Any) -> list[dict]:
    """[query, uri?, range?, limit?] → [{id, content, kind, state, location: {uri, range} | null}],
    best first; a uri (and range) of a file of the store favours the notes anchored there."""
    query, uri, rng, limit = _args(args, 4)
    at = None
    state = ls.docs.get(uri) if isinstance(uri, str) else None
    if state is not None and state.store is not None:
        at = _place(ls, uri, rng) if rng is not None else str(state.path)
    # (a document of no store's, untitled or outside the repository, favours nothing: the
    # recall is the store's, as from no document; it was an error, so the editor's recall failed)
    n = _int(limit, 20)

    def work(mem: Any, buffers: dict[str, str]) -> list[dict]:
        from engram.memory.recall import recall  # noqa: PLC0415

        doc = recall(mem, str(query or ""), at=at, limit=n, buffers=buffers)
        return [_recalled(mem.store.root, m) for m in doc["memories"]]

    return await _on_memories(ls, uri, work)


def _recalled(root: Any, m: dict[str, Any]) -> dict[str, Any]:
    """A recalled memory for an editor: where to open it (its first live anchor, else where it was)."""
    from pygls.uris import from_fs_path  # noqa: PLC0415

    anchors = sorted(m.get("anchors") or [], key=lambda a: a.get("state") == "vanished")
    location = None
    if anchors:
        a, b = anchors[0]["lines"]
        location = {"uri": from_fs_path(str(root / anchors[0]["file"])),
                    "range": {"start": {"line": a - 1, "character": 0}, "end": {"line": b, "character": 0}}}
    return {"id": m["id"], "content": m["content"], "kind": m["kind"],
            "state": anchors[0]["state"] if anchors else None, "location": location}


# The command names the server advertises (executeCommandProvider), in this order.
COMMANDS: dict[str, Callable[..., Any]] = {
    "engram.explain": cmd_explain,
    "engram.view": cmd_view,
    "engram.tapes": cmd_tapes,
    "engram.ingest": cmd_ingest,
    "engram.reindex": cmd_reindex,
    "engram.remember": cmd_remember,
    "engram.forget": cmd_forget,
    "engram.reanchor": cmd_reanchor,
    "engram.edit": cmd_edit,
    "engram.recall": cmd_recall,
}


def _said(handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler`, its expected failures (EngramError: a read-only store, a damaged index) given to
    the editor as their message; any other exception stays an internal error, with its traceback."""
    import functools  # noqa: PLC0415

    @functools.wraps(handler)
    async def run(ls: EngramLanguageServer, *args: Any) -> Any:
        try:
            return await handler(ls, *args)
        except EngramError as exc:
            raise JsonRpcInvalidParams(str(exc)) from exc

    return run


def register(server: EngramLanguageServer) -> None:
    for name, handler in COMMANDS.items():
        server.command(name)(_said(handler))
