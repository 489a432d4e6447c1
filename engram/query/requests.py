"""Requests the command line makes of the index, answered the same way in its own process or by
a running language server it sends them to (`engram.cli.running_server`): one function each, so
the two paths cannot drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import apsw

    from engram.store.repo import Store


def index_captured(store: Store, db: apsw.Connection) -> None:
    """Index tapes captured but not indexed yet (an ingest interrupted before indexing, or before
    writing its postings), so a query answers from everything captured."""
    if db.execute("SELECT 1 FROM tapes WHERE indexed IN (0, 2) LIMIT 1").fetchall():
        from engram.index.build import index_pending
        from engram.store.lock import ingest_lock_if_free

        with ingest_lock_if_free(store) as free:
            if free:  # else a running ingest indexes them: answer from what is indexed now
                index_pending(store, db)


#: What a request of `engram explain` must hold besides `span` or `text` (the command line sends them all).
EXPLAIN_KEYS = ("before", "after", "brief", "include_deleted", "forensics", "min_confidence")


def explain_request(store: Store, db: apsw.Connection, params: dict[str, Any]) -> dict[str, Any]:
    """The explain document for a request of `engram explain` (from the command line, or sent by
    one to a running language server, which answers it the same way)."""
    from engram.errors import BadInput
    from engram.query.explain import Options, explain
    from engram.query.spans import read_span, resolve_span_arg, text_span
    from engram.store.config import choice

    budget = params.get("budget")
    missing = [k for k in EXPLAIN_KEYS if k not in params] + ([] if "span" in params or "text" in params else
                                                               ["span (or text)"])
    if missing:
        raise BadInput(f"explain: the request lacks {', '.join(missing)}")
    _check_types("explain", params, {}, {"cwd": str})
    try:
        opts = Options(before=int(params["before"]), after=int(params["after"]), brief=bool(params["brief"]),
                       include_deleted=bool(params["include_deleted"]), forensics=bool(params["forensics"]),
                       min_confidence=float(params["min_confidence"]),
                       rank=choice("explain.rank", params.get("rank", "writer")),
                       debug=bool(params.get("debug", False)), story=params.get("story"),
                       budget=int(budget) if budget else None, page=int(params.get("page") or 1),
                       more=params.get("more"))
    except (TypeError, ValueError) as exc:
        raise BadInput(f"explain: an option of the request has the wrong type ({exc})") from None
    if params.get("full"):
        opts.context = None
    file_lines = None
    if params.get("text") is not None:
        span = text_span(str(params["text"]))
    else:
        cwd = Path(params["cwd"]) if params.get("cwd") else None
        arg = resolve_span_arg(store.root, str(params["span"]), cwd)
        if arg.start is None or arg.end is None:
            return explain_file_request(store, db, {**params, "file": arg.path})
        span = read_span(store.root, arg.path, arg.start, arg.end, cwd)
        file_lines = (store.root / span.file).read_text(encoding="utf-8", errors="replace").splitlines()
        opts.read_as = arg.read_as
    return explain(store, db, span, opts, expand_until=params.get("expand_until"), file_lines=file_lines)


def _check_types(what: str, params: dict[str, Any], needed: dict[str, type], optional: dict[str, type]) -> None:
    """BadInput (a 400 from a running server, not a 500 and a traceback in its log) unless each
    key of `needed` is there and every key given has its type (None for an optional one)."""
    from engram.errors import BadInput

    missing = [k for k in needed if k not in params]
    if missing:
        raise BadInput(f"{what}: the request lacks {', '.join(missing)}")
    for key, kind in {**needed, **optional}.items():
        value = params.get(key)
        if (value is not None or key in needed) and (not isinstance(value, kind) or isinstance(value, bool)):
            raise BadInput(f"{what}: `{key}` must be {'a string' if kind is str else 'a whole number'}")


def _file_text(store: Store, path: str, cwd: str | None) -> tuple[str, str]:
    """The repository-relative path of `path` and its working-tree text; a binary file is refused
    (its bytes, escapes and all, were printed as lines)."""
    from engram.errors import BadInput
    from engram.query.spans import not_a_file, repo_relative, text_of

    rel = repo_relative(store.root, path, Path(cwd) if cwd else None)
    full = store.root / rel
    if not full.is_file():
        head, sep, _ = path.rpartition(":")
        if sep and (store.root / repo_relative(store.root, head, Path(cwd) if cwd else None)).is_file():
            raise BadInput(f"{path!r}: lines must be numbers, e.g. {head}:10-24 (or {head} for the whole file)")
        raise not_a_file(path, full)
    return rel, text_of(path, full)


def blame_request(store: Store, db: apsw.Connection, params: dict[str, Any]) -> dict[str, Any]:
    """`engram blame FILE [-L A,B]`: the porcelain document, {"file", "regions": [{"lines",
    "session_id", "tape", "harness", "when", "request"}]} (engram.query.blame)."""
    from engram.errors import BadInput
    from engram.query.blame import add_requests, blame

    _check_types("blame", params, {"file": str}, {"cwd": str, "text": str, "start": int, "end": int})
    rel, text = _file_text(store, params["file"], params.get("cwd"))
    if isinstance(params.get("text"), str):  # the editor's text of the file, unsaved changes and all
        text = params["text"]
    start, end = params.get("start"), params.get("end")
    n_lines = len(text.splitlines())
    if start is not None and end is not None and int(start) > int(end):  # an empty answer would read as "no session"
        raise BadInput(f"{params['file']}:{start}-{end}: lines are 1-based and START must not exceed END")
    if max(int(end or 0), int(start or 0)) > n_lines:  # (as git blame)
        from engram.query.spans import past_the_end

        raise past_the_end(f"{params['file']}:{start or 1}-{end or n_lines}", n_lines)
    regions = blame(db, store.root, rel, text, params.get("start"), end)
    add_requests(db, store.tapes_dir, store.objects_dir, regions)
    return {"file": rel, "regions": [r.porcelain() for r in regions]}


def explain_file_request(store: Store, db: apsw.Connection, params: dict[str, Any]) -> dict[str, Any]:
    """`engram explain FILE` (no range): the file's blame regions, each with its explain answer
    (sessions and their stories, no windows), as many as the budget holds on the page asked;
    `truncated` names the next page."""
    from engram.query.blame import add_requests, blame
    from engram.query.budget import TOKEN_BYTES, Unit, json_size, left_out, page, tokens
    from engram.query.explain import Options, explain
    from engram.query.spans import Span
    from engram.store.config import choice

    rel, text = _file_text(store, str(params["file"]), params.get("cwd"))
    lines = text.splitlines()
    regions = blame(db, store.root, rel, text)
    add_requests(db, store.tapes_dir, store.objects_dir, regions)
    opts = Options(brief=True, story=True, min_confidence=float(params["min_confidence"]),
                   rank=choice("explain.rank", params.get("rank", "writer")))
    heads = [r.porcelain() for r in regions]
    answers: dict[int, dict[str, Any]] = {}

    def answer(i: int) -> dict[str, Any]:
        if i not in answers:
            r = regions[i]
            span = Span(rel, r.start, r.end, "\n".join(lines[r.start - 1:r.end]) + "\n")
            doc = explain(store, db, span, opts, file_lines=lines)
            answers[i] = {k: doc[k] for k in ("span", "sessions", "widened")}
        return answers[i]

    units: list[Unit] = []
    for i in range(len(regions)):
        units.append(Unit(("r", i), "regions", None, lambda i=i: json_size(heads[i]) + 1))
        units.append(Unit(("x", i), "explains", ("r", i), lambda i=i: json_size({"explain": answer(i)}) - 1, 80))
    doc: dict[str, Any] = {"version": 1, "file": rel, "regions": [], "truncated": False}
    budget, number = params.get("budget"), int(params.get("page") or 1)
    if budget:
        pg = page(units, int(budget) * TOKEN_BYTES - json_size(doc) - 320, number)
        shown, left = set(pg.shown), pg.left
        if number > 1 and not pg.new:  # an empty page would read as "no session wrote this file"
            from engram.errors import BadInput

            raise BadInput(f"page {number}: past the end of this answer at this budget (page 1's "
                           "`truncated.next` names the next page while there is one)")
    else:
        shown, left = {u.key for u in units}, []
    for i in range(len(regions)):
        if ("r", i) in shown:
            doc["regions"].append({**heads[i], **({"explain": answer(i)} if ("x", i) in shown else {})})
    if left:
        more = str(params.get("more") or f"engram explain {rel} --page {{page}}")
        doc["truncated"] = {"left_out": left_out(left), "next": more.format(page=number + 1)}
    if budget:
        doc["budget"] = {"tokens": int(budget), "used": 0}
        if number > 1:
            doc["page"] = number
        doc["budget"]["used"] = tokens(json_size(doc))
    return doc
