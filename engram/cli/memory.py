"""Memory commands: `engram remember`, `engram recall`, `engram forget` and `engram memory ...`
(list, show, edit, link, graph, reanchor, import, export, consolidate, embed).

Text for people by default, `--json` for programs (the shapes docs/memories.md lists). A memory
written from a command an agent runs records that agent (its harness, its session when the
harness exports it: `engram.memory.model.calling_agent`). `engram recall` is handed to a running
language server when there is one: the index, the embedding model and the matrix are warm there.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from engram.cli.argtypes import count, positive, share, within
from engram.cli.context import store_of
from engram.cli.output import print_json as _out
from engram.cli.output import print_within
from engram.memory.vocabulary import KINDS, MAX_GRAPH_DEPTH, RELATIONS, STATUSES
from engram.words import anchor_state, plural

if TYPE_CHECKING:
    from pathlib import Path

    from engram.memory.memories import Memories
    from engram.memory.model import Memory
    from engram.memory.places import Place



def _text(value: str, what: str) -> str:
    """TEXT, or standard input when TEXT is `-` (decoded with replacement: never a traceback)."""
    from engram.errors import BadInput

    if value != "-":
        return value
    data = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    if not data.strip():
        raise BadInput(f"{what}: standard input is empty")
    return data


@contextmanager
def _memories(args: argparse.Namespace) -> Iterator[Memories]:
    """The store's memories for one command; the recall reinforcement it caused is written before
    the command ends."""
    from engram.memory.memories import Memories

    mem = Memories(store_of(args))
    try:
        yield mem
    finally:
        mem.close()
        mem.db.close()


# ---------------------------------------------------------------- rendering for people


def _when(stored: str | None) -> str:
    return stored[:16].replace("T", " ") if stored else "never"


def _places_line(places: list[Place]) -> str:
    parts = []
    for p in places:
        where = f"{p.file}:{p.start}-{p.end}"
        state = anchor_state(p.state, p.retained)
        if p.state == "vanished" and p.best_partial:
            state += f"; best partial match {_partial(p.best_partial)}"
        if p.session:
            state += f"; changed by session {p.session[:12]}"
        parts.append(f"{where} ({state})")
    return ", ".join(parts)


def _partial(best: Any) -> str:
    if isinstance(best, dict) and "file" in best:
        lines = best.get("lines") or [best.get("start"), best.get("end")]
        return f"{best['file']}:{lines[0]}-{lines[1]}" if lines and lines[0] is not None else str(best["file"])
    return str(best)


def _source(src: dict[str, Any]) -> str:
    text = str(src.get("type", "?"))
    if src.get("harness"):
        text += f" ({src['harness']}"
        text += f", session {str(src['session'])[:12]})" if src.get("session") else ")"
    elif src.get("origin"):
        text += f" ({src['origin']})"
    return text


def _memory_lines(m: Memory, places: list[Place], score: float | None = None, whole: bool = False) -> list[str]:
    """A memory for people: its first line, up to 3 more (`whole`: all of them, as `memory show`
    gives it; it cut a long note and named itself as the command that shows the rest)."""
    head = f"{m.id}  {m.kind:<10}"
    if score is not None:
        head += f" {score:6.3f}"
    if m.status != "active":
        head += f"  [{m.status}]"
    first, *rest = m.content.strip().splitlines() or [""]
    lines = [f"{head}  {first if whole else _listed(first, m.id)}"]
    lines += [f"    {line if whole else _listed(line, m.id)}" for line in (rest if whole else rest[:3])]
    if len(rest) > 3 and not whole:
        lines.append(f"    … {plural(len(rest) - 3, 'more line')} (`engram memory show {m.id}`)")
    meta = [f"source: {_source(m.source)}", f"importance {m.importance:g}"]
    if m.tags:
        meta.insert(0, "tags: " + ", ".join(m.tags))
    if m.pinned:
        meta.append("pinned")
    lines.append("    " + " · ".join(meta))
    if places:
        lines.append("    at " + _places_line(places))
    return lines


#: Characters of a line of a note that a list (`memory list`, `recall`) shows: people's text keeps
#: to the budget in whole lines, and one note on one long line (a pasted log) filled it alone.
LISTED_LINE_CHARS = 240


def _listed(line: str, memory_id: str) -> str:
    """A line of a note as a list shows it: cut past LISTED_LINE_CHARS, naming the whole note's command."""
    if len(line) <= LISTED_LINE_CHARS:
        return line
    return f"{line[:LISTED_LINE_CHARS].rstrip()}… ({len(line):,} characters: `engram memory show {memory_id}`)"


# ---------------------------------------------------------------- commands


def cmd_remember(args: argparse.Namespace) -> int:
    from engram.memory.model import calling_agent

    content = _text(args.text, "TEXT")
    with _memories(args) as mem:
        done = mem.remember(content, kind=args.kind, tags=args.tag or (), importance=args.importance,
                            pinned=args.pin, at=args.at or (), evidence=args.evidence or (), source=calling_agent(),
                            context=args.context or "", scope=args.scope)
    if args.json:
        _out(done.to_json())
        return 0
    if done.merged_into:
        print(f"{done.id}  (already known: reinforced it instead of writing a copy)")
    else:
        print(done.id)
    for link in done.links:
        print(f"  linked {link['relation']} {link['id']} (candidate: {link['why']})", file=sys.stderr)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    if not args.query.strip() and not args.at:
        from engram.errors import BadInput

        raise BadInput("what to recall? give words (engram recall \"why retries\") or a place (--at FILE[:A-B])")
    budget = _budget(args)
    params = {"query": args.query, "at": _at_for_server(args), "kind": args.kind, "tags": args.tag or [],
              "limit": args.limit, "all": args.all, "debug": args.debug,
              "budget": budget if args.json else None}  # (people's text keeps to it as it is printed)
    doc = None
    if not os.environ.get("ENGRAM_LOCAL"):
        from engram.cli.running_server import ask_language_server

        doc = ask_language_server(store_of(args).endpoint_file, "recall", params)
    if doc is not None:
        _show_recall(doc, args)
        return 0
    from engram.memory.recall import recall_request

    with _memories(args) as mem:
        doc = recall_request(mem, params)
        _show_recall(doc, args)
        if "no vector yet" in doc["dense"]:  # the model is loaded now: the answer first, then the vectors
            sys.stdout.flush()
            mem.embed_pending(load=False, limit=256)
    return 0


def _show_recall(doc: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        _out(doc, compact=True)
        return
    if not doc["memories"]:
        print(f"no memory matches {doc['query']!r}" if doc.get("query") else "no memory matches", file=sys.stderr)
        if weak := doc.get("weak"):
            print(f"nearest by meaning, weak (cosine below {weak['below']}):", file=sys.stderr)
            for m in weak["memories"]:
                print(f"  {m['id']}  {m['kind']}  {m['cosine']:.2f}  {m['summary']}", file=sys.stderr)
    else:
        print_within("\n".join(_recall_lines(doc, args.debug)), _budget(args), _again(args, "recall") + " --budget 0 (all)")
    if doc["dense"] != "used":
        print(f"(dense search {doc['dense']})", file=sys.stderr)


def _budget(args: argparse.Namespace) -> int:
    """`--budget`, else recall's default (engram.memory.budget.RECALL_BUDGET): the JSON and the
    text of `recall` and `memory list` keep to the same one."""
    from engram.memory.budget import RECALL_BUDGET

    return args.budget if args.budget is not None else RECALL_BUDGET


def _again(args: argparse.Namespace, command: str) -> str:
    """`engram recall` / `engram memory list` as asked (without --budget): what a cut answer names."""
    import shlex

    parts = ["engram", *command.split()]
    if command == "recall" and args.query:
        parts.append(args.query)
    for flag, value in (("--at", args.at), ("--kind", args.kind), ("--limit", getattr(args, "limit", None))):
        if value is not None and not (flag == "--limit" and value == 10):
            parts += [flag, str(value)]
    parts += [x for t in args.tag or [] for x in ("--tag", t)]
    parts += [flag for flag, on in (("--all", args.all), ("--drifted", getattr(args, "drifted", False)),
                                    ("--debug", getattr(args, "debug", False))) if on]
    return " ".join(shlex.quote(p) for p in parts)


def _at_for_server(args: argparse.Namespace) -> str | None:
    """`--at` with its file made absolute here: whoever answers (a server started elsewhere, or
    this process) reads it the same. Repository-relative, it was resolved again from a working
    directory inside the repository: `recall --at app.py` in src/ looked for src/src/app.py."""
    if args.at is None:
        return None
    from engram.fsutil import repo_relative
    from engram.memory.memories import parse_at

    store = store_of(args)
    path, start, end = parse_at(args.at)
    rel = repo_relative(store.root, path)
    _say_if_missing(store.root, rel, bool((getattr(args, "query", "") or "").strip()))
    whole = os.path.join(store.root, rel)
    return whole if start is None else f"{whole}:{start}-{end}"


def _say_if_missing(root: Path, rel: str, query: bool = False) -> None:
    """A note on stderr when `--at` names no file of the working tree: a typo would otherwise be
    answered like a file without notes (a deleted file's notes are still listed). With words to
    recall, the place only ranks: the notes the words find are listed wherever they are."""
    if not (root / rel).exists():
        print(f"({rel} is not in the working tree: " + ("notes the words find are listed wherever they are)" if query else
                                                         "only notes anchored there are listed)"), file=sys.stderr)


def _recall_lines(doc: dict[str, Any], debug: bool) -> list[str]:
    out: list[str] = []
    for m in doc["memories"]:
        head = f"{m['id']}  {m['kind']:<10} {m['score']:6.3f}"
        if m["status"] != "active":
            head += f"  [{m['status']}]"
        lines = [_listed(line, m["id"]) for line in (m["content"].strip().splitlines() or [""])[:4]]
        out.append(f"{head}  {lines[0]}")
        out += [f"    {line}" for line in lines[1:]]
        meta = [f"source: {_source(m['source'])}"]
        if m["tags"]:
            meta.insert(0, "tags: " + ", ".join(m["tags"]))
        out.append("    " + " · ".join(meta))
        out += [f"    at {a['file']}:{a['lines'][0]}-{a['lines'][1]} ({anchor_state(a['state'], a['retained'])})"
                for a in m["anchors"]]
        if m.get("drift"):
            out.append(f"    drift: {m['drift']}")
        out += [f"    evidence: engram view {e['tape'][:12]} --at {e['offset']}" for e in m["evidence"]]
        if debug and "debug" in m:
            d = m["debug"]
            ranks = ", ".join(f"{k} #{v}" if v else f"{k} -" for k, v in d["ranks"].items())
            factors = ", ".join(f"{k} {v:g}" for k, v in d["factors"].items())
            out.append(f"    debug: {ranks}; fused {d['fused']:g}; {factors}")
    return out


def cmd_forget(args: argparse.Namespace) -> int:
    from engram.memory.model import calling_agent

    with _memories(args) as mem:
        done = mem.forget(args.id, purge=args.purge, why=args.why, source=calling_agent())
    if args.json:
        _out(done)
    elif args.purge:
        print(f"forgot {done['id']} and erased it from the log ({plural(done['events_removed'], 'event')} removed from "
              f"{plural(done['files_rewritten'], 'file')}); other clones erase it when the tombstone reaches them")
    else:
        print(f"forgot {done['id']} (its events stay in the log; --purge erases them)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from engram.memory.recall import memory_json

    if args.at:
        _at_for_server(args)  # (the same check of the place as recall's)
    with _memories(args) as mem:
        pairs = mem.list(at=args.at, drifted=args.drifted, kind=args.kind, tags=args.tag or (), hidden=args.all)
    if args.json:
        from engram.memory.budget import fit_recall

        _out(fit_recall({"memories": [{**memory_json(m, places), "created": m.created, "updated": m.updated}
                                      for m, places in pairs]}, _budget(args)), compact=True)
    elif pairs:
        print_within("\n".join(line for m, places in pairs for line in _memory_lines(m, places)), _budget(args),
                     _again(args, "memory list") + " --budget 0 (all)")
    else:
        print("no memories" + (" match" if args.at or args.kind or args.tag or args.drifted else
                               " yet: `engram remember TEXT` writes one"), file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with _memories(args) as mem:
        m, places, links = mem.shown(args.id)
    doc = show_json(m, places, links)
    if args.json:
        _out(doc)
        return 0
    print("\n".join(_memory_lines(m, [], whole=True)))
    print(f"    created {_when(m.created)} · updated {_when(m.updated)} · recalled {plural(m.recall_count, 'time')}, "
          f"last {_when(m.last_recalled)}")
    for a in doc["anchors"]:
        state = anchor_state(a["state"], a["retained"])
        print(f"    anchor: {a['file']}:{a['lines'][0]}-{a['lines'][1]} ({state})"
              + (f", anchored at {a['anchored']['file']}:{a['anchored']['lines'][0]}-{a['anchored']['lines'][1]}"
                 if "anchored" in a else ""))
    for e in m.evidence:
        wrote = " (the call that wrote it)" if e == m.source.get("written_at") else ""
        print(f"    evidence: engram view {e['tape'][:12]} --at {e['offset']}{wrote}")
    for link in links:
        arrow = "→" if link["direction"] == "out" else "←"
        print(f"    {arrow} {link['relation']} {link['id']}" + (" (candidate)" if link["candidate"] else ""))
    for t in m.transitions:
        print(f"    {_when(t.ts)}  {t.status_from or '—'} → {t.status} by {_source(t.by)}"
              + (f": {t.why}" if t.why else ""))
    return 0


def show_json(m: Memory, places: list[Place], links: list[dict[str, Any]]) -> dict[str, Any]:
    from engram.memory.recall import memory_json

    return {**memory_json(m, places), "pinned": m.pinned, "created": m.created, "updated": m.updated,
            "last_recalled": m.last_recalled, "recall_count": m.recall_count, "links": links,
            "transitions": [t.to_json() for t in m.transitions]}


def cmd_edit(args: argparse.Namespace) -> int:
    from engram.memory.model import calling_agent

    content = _text(args.content, "--content") if args.content is not None else None
    with _memories(args) as mem:
        edited = mem.edit(args.id, content=content, kind=args.kind, tags=args.tag, importance=args.importance,
                          pinned=args.pin, status=args.status, why=args.why, source=calling_agent())
        m, places, links = mem.shown(edited.id)
    if args.json:
        _out(show_json(m, places, links))
    else:
        print("\n".join(_memory_lines(m, places)))
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    from engram.memory.model import calling_agent

    with _memories(args) as mem:
        done = mem.link(args.id, args.target, args.relation, why=args.why, source=calling_agent())
    if args.json:
        _out(done)
    else:
        print(f"{done['from']} {done['relation']} {done['to']}"
              + ("  (the older one is now superseded)" if done["relation"] == "supersedes" else ""))
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    with _memories(args) as mem:
        doc = mem.graph(args.id, args.depth)
    if args.json:
        _out(doc)
        return 0
    for node in doc["nodes"]:
        status = f" [{node['status']}]" if node["status"] != "active" else ""
        print(f"{'  ' * node['depth']}{node['id']}  {node['kind']}{status}  {node['summary']}")
    if doc["edges"]:
        print()
    for e in doc["edges"]:
        print(f"{e['from']} {e['relation']} {e['to']}" + ("  (candidate)" if e["candidate"] else ""))
    return 0


def cmd_reanchor(args: argparse.Namespace) -> int:
    from engram.memory.model import calling_agent

    with _memories(args) as mem:
        m, places, _ = mem.shown(mem.reanchor(args.id, args.span, source=calling_agent()).id)
    if args.json:
        from engram.memory.recall import memory_json

        _out(memory_json(m, places))
    else:
        print(f"{m.id} anchored at {_places_line(places)}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from engram.memory.interchange import import_file

    with _memories(args) as mem:
        report = import_file(mem, args.file, fmt=args.format, dedup=not args.no_dedup)
    for warning in report.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        _out(report)
    else:
        print(f"imported {plural(report['imported'], 'memory', 'memories')} from {args.file} ({report['format']})"
              + (f"; {report['skipped']} already present" if report["skipped"] else "")
              + (f"; {report['merged']} merged into near-duplicates" if report.get("merged") else "")
              + (f"; {plural(report['links'], 'link')} restored" if report.get("links") else ""))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from engram.memory.interchange import export_lines

    if args.output and args.output != "-":
        from pathlib import Path

        from engram.cli.output import writable_output

        writable_output(Path(args.output), store_of(args).dir)
    with _memories(args) as mem:
        docs = export_lines(mem, hidden=args.all)
    import orjson

    if args.json:
        data = orjson.dumps({"memories": docs}, option=orjson.OPT_INDENT_2) + b"\n"
    else:
        data = b"".join(orjson.dumps(d) + b"\n" for d in docs)
    if args.output and args.output != "-":
        from pathlib import Path

        from engram.fsutil import atomic_write

        atomic_write(Path(args.output), data)
        print(f"exported {plural(len(docs), 'memory', 'memories')} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(data)
    return 0


def cmd_consolidate(args: argparse.Namespace) -> int:
    from engram.memory.consolidate import consolidate
    from engram.memory.model import Source

    with _memories(args) as mem:
        plan = consolidate(mem, dry_run=args.dry_run, source=Source("person"))
    if args.json:
        _out(plan)
        return 0
    verb = "would" if args.dry_run else "did"
    if not plan["changes"]:
        print("consolidate: nothing to change")
    for c in plan["changes"]:
        if c["change"] == "merge":
            print(f"{verb} merge {', '.join(c['merged'])} into {c['into']} (derived_from links; "
                  f"the others superseded): {c['summary']}")
        else:
            print(f"{verb} archive {c['id']} (strength {c['strength']:.3f}; {c['why']}): {c['summary']}")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from engram.memory import vectors

    with _memories(args) as mem:
        ok, reason = vectors.status()
        done = mem.embed_pending() if ok else 0
        left = vectors.count_pending(mem.db)
    doc = {"embedded": done, "waiting": left, "model": reason if ok else None,
           "dense": "used" if ok else f"unavailable: {reason}"}
    if args.json:
        _out(doc)
    elif ok:
        print(f"embedded {plural(done, 'memory', 'memories')} ({reason}); {left} without a vector")
    else:
        print(f"embedding is unavailable here: {reason}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- the parsers


def _common(s: argparse.ArgumentParser) -> None:
    s.add_argument("--json", action="store_true", help="one JSON document for programs (docs/memories.md)")


def _budget_option(s: argparse.ArgumentParser) -> None:
    s.add_argument("--budget", type=count, metavar="TOKENS",
                   help="at most this many tokens of the answer, JSON or text (4 bytes each; default 2000; 0: no "
                        "bound): JSON clips a long note and names what does not fit in \"left_out\", text says how "
                        "much it left out")


def _filters(s: argparse.ArgumentParser) -> None:
    s.add_argument("--at", metavar="FILE[:A-B]", help="memories anchored on this file, or on or near these lines")
    s.add_argument("--kind", choices=KINDS, help="only memories of this kind")
    s.add_argument("--tag", action="append", metavar="T", help="only memories carrying this tag (repeat for several)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add `remember`, `recall`, `forget` and `memory ...` to the command line."""
    s = sub.add_parser("remember", help="write a memory about the code (a fact, a decision, ...)",
                       description="Write a memory. Prints its id; a memory the store nearly holds already is "
                                   "reinforced instead (--json: merged_into).")
    s.add_argument("text", metavar="TEXT", help="the memory; its first line is its summary (- reads standard input)")
    s.add_argument("--at", action="append", metavar="FILE:A-B",
                   help="anchor it to these lines (1-based, inclusive; repeat for several places)")
    s.add_argument("--kind", choices=KINDS, default="fact", help="what sort of memory (default: fact; negative: "
                                                                 "\"there is no X / X was removed\")")
    s.add_argument("--tag", action="append", metavar="T", help="a tag (repeat for several)")
    s.add_argument("--importance", type=share, default=0.5, metavar="X",
                   help="0 to 1 (default 0.5): important memories decay slower")
    s.add_argument("--evidence", action="append", metavar="TAPE@OFFSET",
                   help="the transcript event it came from (tape id or session id, and the event's offset)")
    s.add_argument("--pin", action="store_true", help="never decays or gets archived")
    s.add_argument("--context", metavar="TEXT", help="what it answers or was said in reply to (e.g. the request): "
                                                     "recall searches it too, at half weight")
    _common(s)
    s.add_argument("--scope", choices=("team", "personal"),
                   help="team: leaves with `engram push`; personal: never leaves this clone (default: the setting "
                        "share.memory_scope, team; docs/sharing.md)")
    s.set_defaults(func=cmd_remember)

    s = sub.add_parser("recall", help="find the memories that answer a query (BM25, embeddings, anchors)",
                       description="Find memories by words and meaning, and by place with --at.")
    s.add_argument("query", metavar="QUERY", nargs="?", default="",
                   help="what to find (may be left out with --at: the memories on that place)")
    _filters(s)
    s.add_argument("--limit", type=positive, default=10, metavar="N", help="at most N memories (default 10)")
    s.add_argument("--all", action="store_true", help="also superseded, invalidated and archived memories")
    s.add_argument("--debug", action="store_true", help="show each channel's rank and each factor")
    _budget_option(s)
    _common(s)
    s.set_defaults(func=cmd_recall)

    s = sub.add_parser("forget", help="forget a memory (a tombstone; --purge erases it from the log)")
    s.add_argument("id", metavar="ID", help="the memory's id or a unique prefix of it")
    s.add_argument("--purge", action="store_true",
                   help="also erase its content from the event log files (a secret pasted by mistake)")
    s.add_argument("--why", help="why it is forgotten (kept in the log)")
    _common(s)
    s.set_defaults(func=cmd_forget)

    s = sub.add_parser("memory", help="list, show, edit, link and manage memories")
    msub = s.add_subparsers(dest="memory_command", required=True, metavar="SUBCOMMAND")
    _register_memory(msub)


def _register_memory(msub: argparse._SubParsersAction) -> None:
    s = msub.add_parser("list", help="memories, most recently changed first")
    _filters(s)
    s.add_argument("--drifted", action="store_true", help="only memories whose anchors moved, changed or vanished")
    s.add_argument("--all", action="store_true", help="also superseded, invalidated and archived memories")
    _budget_option(s)
    _common(s)
    s.set_defaults(func=cmd_list)

    s = msub.add_parser("show", help="one memory: its anchors, evidence, links and status history")
    s.add_argument("id", metavar="ID", help="the memory's id or a unique prefix of it")
    _common(s)
    s.set_defaults(func=cmd_show)

    s = msub.add_parser("edit", help="change a memory's content, kind, tags, importance or status")
    s.add_argument("id", metavar="ID", help="the memory's id or a unique prefix of it")
    s.add_argument("--content", metavar="TEXT", help="the new content (- reads standard input)")
    s.add_argument("--kind", choices=KINDS, help="the new kind")
    s.add_argument("--tag", action="append", metavar="T", help="the new tags (repeat; replaces the old ones)")
    s.add_argument("--importance", type=share, metavar="X", help="the new importance, 0 to 1")
    s.add_argument("--status", choices=STATUSES, help="the new status (the change is kept in its history)")
    pin = s.add_mutually_exclusive_group()
    pin.add_argument("--pin", dest="pin", action="store_const", const=True, help="never decays or gets archived")
    pin.add_argument("--unpin", dest="pin", action="store_const", const=False, help="decays again")
    s.add_argument("--why", help="why (kept with a status change)")
    _common(s)
    s.set_defaults(func=cmd_edit)

    s = msub.add_parser("link", help="link two memories (supersedes marks the second superseded)")
    s.add_argument("id", metavar="ID", help="the memory the link starts from")
    s.add_argument("target", metavar="ID", help="the memory it points to")
    s.add_argument("--relation", required=True, choices=RELATIONS, help="the kind of link")
    s.add_argument("--why", help="why (kept in the log)")
    _common(s)
    s.set_defaults(func=cmd_link)

    s = msub.add_parser("graph", help="the memories linked to one, both ways")
    s.add_argument("id", metavar="ID", help="the memory to start from")
    s.add_argument("--depth", type=within(1, MAX_GRAPH_DEPTH), default=2, metavar="N",
                   help=f"links to follow, 1 to {MAX_GRAPH_DEPTH} (default 2)")
    _common(s)
    s.set_defaults(func=cmd_graph)

    s = msub.add_parser("reanchor", help="confirm where a memory's code is now")
    s.add_argument("id", metavar="ID", help="the memory's id or a unique prefix of it")
    s.add_argument("span", metavar="FILE:A-B", help="the lines it is about now")
    _common(s)
    s.set_defaults(func=cmd_reanchor)

    s = msub.add_parser("import", help="import memories: JSON Lines, CLAUDE.md / Claude Code memory notes, mem0")
    s.add_argument("file", metavar="FILE", help="the file (- reads standard input; a directory: its .md notes)")
    s.add_argument("--format", choices=("auto", "jsonl", "claude-md", "mem0"), default="auto",
                   help="what FILE holds (default: told from its name and content)")
    s.add_argument("--no-dedup", action="store_true",
                   help="keep near-duplicates as separate memories (exact repeats are still skipped)")
    _common(s)
    s.set_defaults(func=cmd_import)

    s = msub.add_parser("export", help="write every memory as JSON Lines (what import reads)")
    s.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    s.add_argument("--all", action="store_true", help="also superseded, invalidated and archived memories")
    s.add_argument("--json", action="store_true", help="one JSON document {\"memories\": [...]} instead of lines")
    s.set_defaults(func=cmd_export)

    s = msub.add_parser("consolidate", help="merge near-duplicates and archive memories that faded (no LLM)")
    s.add_argument("--dry-run", action="store_true", help="list every change without making it")
    _common(s)
    s.set_defaults(func=cmd_consolidate)

    s = msub.add_parser("embed", help="compute the embeddings memories are still waiting for")
    _common(s)
    s.set_defaults(func=cmd_embed)
