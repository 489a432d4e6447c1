"""Memories in and out: Engram's JSON Lines (import and export), and what users of other tools
already have — Claude Code's CLAUDE.md and auto-memory notes, and mem0's JSON export.

An import is all or nothing: every record is checked (content, kind, tags, importance, created,
the anchor's file and lines) before anything is written, and a bad line is named with its number;
then every memory goes to the log in one append (one fsync). Records already in the store are
skipped: the same id, or the same content as an active memory (so importing a file twice adds
nothing). With dedup (the default) a record nearly repeating an active memory reinforces it,
as `remember` would; near-duplicates *within* one file are all kept (`engram memory consolidate`
merges them).

JSON Lines record (one a line; `content` required, the rest optional):
`{"content", "kind", "tags", "importance", "pinned", "created", "at", "source", "status", "id",
"evidence", "context", "links"}` — `at` is "FILE:A-B" (or a list of them), `created` ISO 8601 (the memory's
age for decay), `source` {"type": "person"|"agent"|"import", "harness", "session"} (default:
import), `context` what the memory was said in reply to (searched at half weight, not shown as it),
`links` the memory's links to others, `[{"relation", "to", "why", "candidate"}]`, `to` naming a
memory by its `id` in the file. `export_lines` writes the same fields.

Links and ids across stores: a link names its target by the id the memory had where it was
exported. Import maps each record's id to the memory that stands for it in this store: the memory
it added (with that id, unless a memory already has it), the one already here with that id or that
content (a record skipped), or the one it reinforced (a near-duplicate). A link whose target is
neither in the file nor in the store is left out with a warning (`"warnings"` in the report), and a
link the store already holds is not written again.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engram.errors import BadInput, EngramError
from engram.memory import dedup as near_dups
from engram.memory.events import Pending
from engram.memory.model import (
    DEFAULT_IMPORTANCE,
    ID_CHARS,
    Evidence,
    Source,
    check_content,
    check_context,
    check_importance,
    check_kind,
    check_relation,
    check_status,
    check_tags,
    new_id,
    parse_time,
)
from engram.memory.projection import content_hash

if TYPE_CHECKING:
    from engram.memory.memories import Memories

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "claude-md", "mem0")
INLINE_EMBED = 64  # an import of more memories is neither embedded nor compared by vector in the importing
# call, even with the model loaded (its vectors come with `engram memory embed` or the next ingest)
MAX_ERRORS_SHOWN = 5
_HEX_ID = re.compile(rf"^[0-9a-f]{{{ID_CHARS}}}$")


# ---------------------------------------------------------------- reading files


def import_file(mem: Memories, path: str, *, fmt: str = "auto", dedup: bool = True) -> dict[str, Any]:
    """Import the memories of `path` (`-`: standard input; a directory: its `.md` notes)."""
    if fmt not in ("auto", *FORMATS):
        raise BadInput(f"unknown import format {fmt!r}: one of {', '.join(FORMATS)}")
    texts = _read(path)
    if fmt == "auto":
        fmt = _guess(path, texts)
    records: list[tuple[str, int, dict[str, Any]]] = []  # (where, line, raw record)
    for name, text in texts:
        if fmt == "jsonl":
            records += _jsonl(name, text)
        elif fmt == "mem0":
            records += _mem0(name, text)
        else:
            records += _markdown(name, text, siblings={n for n, _ in texts})
    report = import_records(mem, records, dedup=dedup, default_source=Source("import", origin=fmt))
    report["format"] = fmt
    return report


def _read(path: str) -> list[tuple[str, str]]:
    """(name, text) of each file to import."""
    if path == "-":
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        if not text.strip():  # (empty input is a mistake, not "0 imported")
            raise BadInput("nothing to import: stdin is empty; pipe into it what `engram memory export` "
                           "writes, CLAUDE.md notes or a mem0 export")
        return [("stdin", text)]
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".md" and f.is_file())
            if not files:
                raise BadInput(f"{path}: a directory with no .md notes in it")
            return [(f.name, f.read_bytes().decode("utf-8", errors="replace")) for f in files]
        return [(p.name, p.read_bytes().decode("utf-8", errors="replace"))]
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _guess(path: str, texts: list[tuple[str, str]]) -> str:
    if all(name.lower().endswith((".md", ".markdown")) for name, _ in texts):
        return "claude-md"
    head = texts[0][1].lstrip()[:1] if texts else ""
    if head == "[" or (head == "{" and '"results"' in texts[0][1][:4096] and '"memory"' in texts[0][1]):
        return "mem0"
    return "jsonl"


def _jsonl(name: str, text: str) -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            doc = {_UNREADABLE: f"not JSON ({exc})"}
        if not isinstance(doc, dict):
            doc = {_UNREADABLE: "a memory is a JSON object with \"content\""}
        out.append((name, n, doc))
    return out


def _mem0(name: str, text: str) -> list[tuple[str, int, dict[str, Any]]]:
    """mem0's export (`Memory.get_all()`: {"results": [...]}, or a list): `memory` is the text;
    `created_at`, `categories` (tags) and `metadata` (kind, tags, importance) are kept."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{name}: not JSON ({exc}); nothing was imported") from None
    items = doc.get("results", doc.get("memories")) if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise BadInput(f"{name}: expected mem0's export, {{\"results\": [{{\"memory\": ...}}, ...]}}")
    out = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict) or not isinstance(item.get("memory"), str):
            raise BadInput(f"{name} item {n}: a mem0 memory has a \"memory\" text; nothing was imported")
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        rec: dict[str, Any] = {"content": item["memory"], "source": {"type": "import", "origin": "mem0"}}
        tags = list(item.get("categories") or []) + list(meta.get("tags") or [])
        if tags:
            rec["tags"] = [str(t) for t in tags]
        if item.get("created_at"):
            rec["created"] = item["created_at"]
        for key in ("kind", "importance"):
            if key in meta:
                rec[key] = meta[key]
        out.append((name, n, rec))
    return out


# Claude Code's auto-memory notes carry a `type` in their front matter.
_NOTE_KINDS = {"feedback": "preference", "user": "preference", "project": "fact", "reference": "fact"}
_HEADING_KINDS = (("decision", "decision"), ("preference", "preference"), ("style", "preference"),
                  ("convention", "preference"), ("pattern", "pattern"), ("todo", "todo"), ("debug", "debug"),
                  ("gotcha", "debug"))
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK_ONLY = re.compile(r"^\[[^\]]*\]\(([^)\s]+)\)\s*(?:[-—:].*)?$")


def _markdown(name: str, text: str, siblings: set[str]) -> list[tuple[str, int, dict[str, Any]]]:
    """CLAUDE.md and Claude Code's memory notes: each top-level bullet (with what is indented
    under it) and each paragraph is a memory; its headings are its tags. A note's front matter
    `type` gives the kind. Lines of an index (MEMORY.md) that only link to a sibling note are
    left out: the note itself is imported."""
    lines = text.splitlines()
    meta, first = _front_matter(lines)
    kind = _NOTE_KINDS.get(str(meta.get("type", "")).lower())
    heads: list[str] = []
    out: list[tuple[str, int, dict[str, Any]]] = []
    block: list[str] = []
    shape = ""  # "bullet" or "para": what the open block is
    at = 0  # its first line
    fence = blank = False

    def flush() -> None:
        nonlocal block, shape
        body = "\n".join(block).strip()
        block, shape = [], ""
        if not body or body.startswith("<!--"):
            return
        target = _LINK_ONLY.match(body)
        if target and Path(target.group(1)).name in siblings:
            return
        rec: dict[str, Any] = {"content": body, "source": {"type": "import", "origin": f"claude-md:{name}"},
                               "kind": kind or _kind_of(heads)}
        tags = [t for t in (_slug(h) for h in heads) if t]
        if tags:
            rec["tags"] = tags
        out.append((name, at, rec))

    def start(text: str, what: str, n: int) -> None:
        nonlocal block, shape, at
        flush()
        block, shape, at = [text], what, n

    for n, line in enumerate(lines[first:], first + 1):
        stripped = line.strip()
        if fence or stripped.startswith(("```", "~~~")):
            if stripped.startswith(("```", "~~~")):
                fence = not fence
            if not block:
                start(line, "para", n)
            else:
                block.append(line)
        elif heading := _HEADING.match(line):
            flush()
            heads = [*heads[:len(heading.group(1)) - 1], heading.group(2)]
        elif not stripped:
            if shape == "para":
                flush()
        elif (bullet := _BULLET.match(line)) and not bullet.group(1):
            start(bullet.group(2), "bullet", n)
        elif shape == "bullet" and (line[:1].isspace() or not blank):
            block.append(stripped)  # indented under the bullet, or its lazy continuation
        elif shape == "para":
            block.append(stripped)
        else:
            start(stripped, "para", n)
        blank = not stripped
    flush()
    return out


def _front_matter(lines: list[str]) -> tuple[dict[str, str], int]:
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            meta = {}
            for line in lines[1:i]:
                key, sep, value = line.partition(":")
                if sep:
                    meta[key.strip().lower()] = value.strip().strip("\"'")
            return meta, i + 1
    return {}, 0


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")[:40]


def _kind_of(heads: list[str]) -> str:
    text = " ".join(heads).lower()
    return next((kind for word, kind in _HEADING_KINDS if word in text), "fact")


# ---------------------------------------------------------------- checking and writing


_UNREADABLE = "\0unreadable"  # a line that is not a record: why (reported with the others)


def _record(rec: dict[str, Any], default_source: Source) -> dict[str, Any]:
    """A record checked and in the form the log stores (anchors captured later)."""
    if _UNREADABLE in rec:
        raise BadInput(rec[_UNREADABLE])
    unknown = set(rec) - {"content", "kind", "tags", "importance", "pinned", "created", "updated", "at", "source",
                          "status", "id", "evidence", "anchors", "context", "links"}
    if unknown:
        raise BadInput(f"unknown {'field' if len(unknown) == 1 else 'fields'} {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {
        "content": check_content(rec.get("content")),
        "kind": check_kind(str(rec.get("kind") or "fact")),
        "tags": check_tags(rec.get("tags")),
        "importance": check_importance(rec.get("importance", DEFAULT_IMPORTANCE)),
        "pinned": bool(rec.get("pinned", False)),
        "source": Source.from_json(rec["source"]).to_json() if rec.get("source") is not None
        else default_source.to_json(),
        "status": check_status(str(rec.get("status") or "active")),
        "evidence": [Evidence.from_json(e).to_json() for e in rec.get("evidence") or []],
        "context": check_context(rec.get("context")),
    }
    if rec.get("created") is not None:
        out["created"] = parse_time(rec["created"])
    at = rec.get("at")
    out["at"] = [at] if isinstance(at, str) else list(at or [])
    if not all(isinstance(a, str) for a in out["at"]):
        raise BadInput(f"\"at\" is \"FILE:A-B\" or a list of them, not {at!r}")
    mid = rec.get("id")
    if mid is not None and not (isinstance(mid, str) and _HEX_ID.match(mid)):
        raise BadInput(f"id {mid!r}: an Engram memory id is {ID_CHARS} hex characters (leave it out to get one)")
    out["id"] = mid
    out["links"] = _links(rec.get("links"))
    return out


def _links(value: Any) -> list[dict[str, Any]]:
    """A record's `links`, checked: [{"relation", "to", "why"?, "candidate"?}]."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadInput(f"\"links\" is a list of {{\"relation\", \"to\"}}, not {value!r}")
    out = []
    for link in value:
        if not isinstance(link, dict) or set(link) - {"relation", "to", "why", "candidate"}:
            raise BadInput(f"a link is {{\"relation\", \"to\", \"why\", \"candidate\"}}, not {link!r}")
        to = link.get("to")
        if not (isinstance(to, str) and _HEX_ID.match(to)):
            raise BadInput(f"link to {to!r}: name the memory by its {ID_CHARS}-character id")
        why = link.get("why")
        if why is not None and not isinstance(why, str):
            raise BadInput(f"link to {to}: \"why\" is text, not {why!r}")
        out.append({"relation": check_relation(str(link.get("relation"))), "to": to, "why": why,
                    "candidate": bool(link.get("candidate", False))})
    return out


def import_records(mem: Memories, records: list[tuple[str, int, dict[str, Any]]], *, dedup: bool = True,
                   default_source: Source | None = None) -> dict[str, Any]:
    """Check every record, then write them all in one append; see the module docstring."""
    default_source = default_source or Source("import")
    checked: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    errors: list[str] = []
    for name, n, raw in records:
        try:
            rec = _record(raw, default_source)
            anchors = [mem._capture(a, None) for a in rec["at"]]
        except EngramError as exc:
            errors.append(f"{name} line {n}: {exc}")
            continue
        checked.append((rec, anchors))
    if errors:
        more = f" (and {len(errors) - MAX_ERRORS_SHOWN} more)" if len(errors) > MAX_ERRORS_SHOWN else ""
        raise BadInput("nothing was imported: " + "; ".join(errors[:MAX_ERRORS_SHOWN]) + more)
    imported = skipped = merged = 0
    ids: list[str] = []
    here: list[str | None] = []  # each checked record's memory in this store (None: forgotten here)
    with mem._writing():
        known = dict(mem.db.execute("SELECT hash, id FROM memories WHERE status = 'active'").fetchall())
        held = {i for (i,) in mem.db.execute("SELECT id FROM memories")}
        taken = held | {i for (i,) in mem.db.execute("SELECT id FROM memory_forgotten")}
        events: list[Pending] = []
        for rec, anchors in checked:
            digest = content_hash(rec["content"])
            if digest in known or rec["id"] in taken:
                here.append(rec["id"] if rec["id"] in held else None if rec["id"] in taken else known[digest])
                skipped += 1
                continue
            by = rec["source"]
            verdict = near_dups.check(mem.db, mem.matrix, rec["content"], rec["kind"], anchors,
                                      embed=len(checked) <= INLINE_EMBED) if dedup else None
            if verdict is not None and verdict.merge_into is not None:
                events.append(Pending("reinforce", verdict.merge_into, by, {
                    "why": "imported again", "tags": rec["tags"], "evidence": rec["evidence"],
                    "similarity": verdict.similarity}))
                here.append(verdict.merge_into)
                merged += 1
                continue
            mid = rec["id"] or new_id()
            known[digest] = mid
            taken.add(mid)
            held.add(mid)
            here.append(mid)
            data = {k: rec[k] for k in ("content", "kind", "tags", "importance", "pinned", "source", "evidence")}
            data["anchors"] = anchors
            if rec["context"]:
                data["context"] = rec["context"]
            if "created" in rec:
                data["created"] = rec["created"]
            events.append(Pending("add", mid, by, data))
            if rec["status"] != "active":
                events.append(Pending("status", mid, by, {"status": rec["status"], "why": "imported"}))
            for target, relation, why in verdict.links if verdict is not None else []:
                events.append(Pending("link", mid, by, {"target": target, "relation": relation, "why": why,
                                                        "candidate": True}))
            ids.append(mid)
            imported += 1
        links, warnings = _link_events(mem, checked, here, held)
        mem._commit(events + links)
    added = [e.data["content"] for e in events if e.op == "add"]
    if len(added) <= INLINE_EMBED:  # a bigger import waits for `engram memory embed` (or the next ingest)
        mem._embed_if_cheap(added)
    for line in warnings:
        log.info("%s", line)  # (the report carries them: the command line prints them as warnings)
    report: dict[str, Any] = {"imported": imported, "skipped": skipped, "merged": merged, "ids": ids,
                              "links": len(links)}
    if warnings:
        report["warnings"] = warnings
    return report


def _link_events(mem: Memories, checked: list[tuple[dict[str, Any], list[dict[str, Any]]]],
                 here: list[str | None], held: set[str]) -> tuple[list[Pending], list[str]]:
    """The records' links as events on the memories that stand for them in this store (see the module
    docstring), after every add; and a warning for each link left out. A link the store already
    holds is not written again, so importing a file twice adds nothing."""
    local = {rec["id"]: mid for (rec, _), mid in zip(checked, here, strict=True) if rec["id"]}
    existing = {tuple(r) for r in mem.db.execute(
        "SELECT s.id, d.id, r.relation FROM memory_relations r JOIN memories s ON s.no = r.src"
        " JOIN memories d ON d.no = r.dst")}
    events: list[Pending] = []
    warnings: list[str] = []
    for (rec, _), src in zip(checked, here, strict=True):
        for link in rec["links"]:
            dst = local[link["to"]] if link["to"] in local else link["to"] if link["to"] in held else None
            name = f"{rec['id'] or src} {link['relation']} {link['to']}"
            if src is None or dst is None:
                gone = rec["id"] if src is None else link["to"]
                why = "was forgotten in this store" if gone in local else "is not in the file nor in this store"
                warnings.append(f"link {name} left out: {gone} {why}")
                continue
            if src == dst or (src, dst, link["relation"]) in existing:
                continue
            existing.add((src, dst, link["relation"]))
            data = {"target": dst, "relation": link["relation"], "why": link["why"]}
            if link["candidate"]:
                data["candidate"] = True
            events.append(Pending("link", src, rec["source"], data))
    return events, warnings


def export_lines(mem: Memories, *, hidden: bool = False) -> list[dict[str, Any]]:
    """Every memory (active ones, or all with `hidden`) as an import record, oldest first."""
    from engram.memory import projection  # noqa: PLC0415

    mem.sync()
    where = "" if hidden else "WHERE status = 'active'"
    rows = mem.db.execute(projection.select_sql(where) + " ORDER BY created, id").fetchall()
    links = _links_of(mem, {r[0] for r in rows})
    out = []
    for batch_start in range(0, len(rows), 256):
        batch = rows[batch_start:batch_start + 256]
        places = mem.places([r[0] for r in batch])
        for r in batch:
            m = projection.row_to_memory(mem.db, r)
            at = [f"{p.file}:{p.start}-{p.end}" if p.state != "vanished"
                  else f"{p.anchor['file']}:{p.anchor['start']}-{p.anchor['end']}" for p in places.get(r[0], [])]
            doc: dict[str, Any] = {"id": m.id, "content": m.content, "kind": m.kind, "tags": m.tags,
                                   "importance": m.importance, "pinned": m.pinned, "created": m.created,
                                   "source": m.source, "status": m.status}
            if at:
                doc["at"] = at[0] if len(at) == 1 else at
            if m.evidence:
                doc["evidence"] = m.evidence
            if m.context:
                doc["context"] = m.context
            if r[0] in links:
                doc["links"] = links[r[0]]
            out.append(doc)
    return out


def _links_of(mem: Memories, exported: set[int]) -> dict[int, list[dict[str, Any]]]:
    """Memory no -> its links to other exported memories, as a record's `links` (a link to a memory
    not exported, such as a superseded one without `--all`, would name a memory the file lacks)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for src, dst_no, dst, relation, why, candidate in mem.db.execute(
            "SELECT r.src, r.dst, m.id, r.relation, r.why, r.candidate FROM memory_relations r JOIN memories m"
            " ON m.no = r.dst ORDER BY r.src, r.relation, m.id"):
        if src not in exported or dst_no not in exported:
            continue
        link: dict[str, Any] = {"relation": relation, "to": dst}
        if why:
            link["why"] = why
        if candidate:
            link["candidate"] = True
        out.setdefault(src, []).append(link)
    return out
