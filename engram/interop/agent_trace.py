"""Agent Trace records (cursor/agent-trace, specification v0.1.0, an RFC of January 2026): a
record names files, each the conversations that wrote some of its lines, each with line ranges
and an optional `content_hash`.

Export (`engram export --agent-trace [REV|FILE]`) writes one record from the evidence index:
the lines a session wrote are those `engram blame` gives that session (the latest edit that
changed them, `engram.query.blame`), for a commit the lines it added, for a file all its lines.
Each range gets `content_hash` = `sha256:` + the hex SHA-256 of its lines (joined by `\\n`, no
newline after the last), and, in the record's `metadata["dev.engram"]` (the specification's
place for vendor data, section 7.2), the range's winnowed k-gram fingerprints under that hash:
the same fingerprints the index holds, so a range whose text was reformatted (indented anew,
lines wrapped: the same tokens) or lightly edited is still found by their overlap, where the
SHA-256 no longer matches.

Import (`engram import --agent-trace FILE`) validates every record first (JSON, the schema's
required fields and types, a version of 0.x or 1.x) and writes nothing when one fails. Then
each (record, conversation) becomes a tape (`engram.interop.tapes`) attributed to the session
the conversation names (its `engram:session/ID` url, a `file://` transcript's name, else the url
itself, else the record's `metadata.conversation_id`); each range's text is looked for, in this
order: the lines at the record's git revision (checked against a SHA-256 content hash when
there is one); the same lines in the working tree when the hash matches them; the lines holding
that exact text elsewhere in the file; the lines holding at least LOCATE_SHARE of the range's
fingerprints. A range found nowhere is kept as text-less and says why."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, unquote, urlparse

import orjson

from engram.errors import BadInput
from engram.fsutil import looks_binary
from engram.interop import git, tapes
from engram.store.repo import Store
from engram.words import plural

log = logging.getLogger(__name__)

SPEC_VERSION: Final = "0.1.0"
SUPPORTED_MAJORS: Final = (0, 1)  # 0.1.0 is the RFC; the reference implementation writes "1.0"
EXTENSION: Final = "dev.engram"
EXTENSION_VERSION: Final = 1
HARNESS: Final = "agent-trace"
SESSION_URL: Final = "engram:session/"
CONTRIBUTOR_TYPES: Final = frozenset({"human", "ai", "mixed", "unknown"})
VCS_TYPES: Final = frozenset({"git", "jj", "hg", "svn"})
#: A range is found in today's file by its fingerprints when the lines holding most of them hold
#: at least this share of them (a reformatted range holds them all; see docs/interop.md).
LOCATE_SHARE: Final = 0.5
_EXACT_WORK: Final = 2_000_000  # lines hashed at most looking for a moved range by its content hash
_MODEL_PREFIXES: Final = {"claude-": "anthropic", "gpt-": "openai", "o1": "openai", "o3": "openai",
                          "o4": "openai", "gemini-": "google"}


def content_hash(text: str) -> str:
    """`sha256:<hex>` of a range's lines, without line ends, joined by a newline."""
    lines = text.splitlines()
    return "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def encode_fingerprints(values: Any) -> list[str]:
    """Fingerprints (signed 64-bit) as 16 hex digits each (JSON numbers lose bits past 2^53)."""
    return [format(int(v) & 0xFFFF_FFFF_FFFF_FFFF, "016x") for v in values]


def decode_fingerprints(items: Any) -> list[int] | None:
    if not isinstance(items, list):
        return None
    out = []
    for h in items:
        if not isinstance(h, str) or len(h) != 16:
            return None
        try:
            v = int(h, 16)
        except ValueError:
            return None
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def model_id(model: str | None) -> str | None:
    """A model name in the models.dev form the specification asks for (`provider/model`)."""
    if not model or "/" in model:
        return model or None
    for prefix, provider in _MODEL_PREFIXES.items():
        if model.startswith(prefix):
            return f"{provider}/{model}"
    return model


# --------------------------------------------------------------------------- export


@dataclass
class _Conversation:
    harness: str
    session_id: str
    model: str | None
    tape: str
    ranges: list[dict[str, Any]] = field(default_factory=list)


def export_record(store: Store, db: Any, target: str | None, cwd: Path | None = None) -> dict[str, Any]:
    """The Agent Trace record of `target`: a revision (default HEAD: the lines it added) or a file
    of the working tree (all its lines)."""
    from engram import __version__  # noqa: PLC0415
    from engram.index.snapshot import index_params  # noqa: PLC0415

    root = store.root
    files, vcs, ts = _export_target(root, target, cwd)
    k, w = index_params(db)
    fps: dict[str, list[str]] = {}
    sessions: dict[str, dict[str, Any]] = {}
    entries = []
    for path, text, wanted in files:
        convs = _attributed(db, root, path, text, wanted, k, w, fps)
        if not convs:
            continue
        conversations = []
        for c in convs:
            url = SESSION_URL + quote(c.session_id, safe="")
            sessions[url] = {"harness": c.harness, "session_id": c.session_id, "tape": c.tape}
            conv: dict[str, Any] = {"url": url, "contributor": {"type": "ai"}, "ranges": c.ranges}
            if (mid := model_id(c.model)) is not None:
                conv["contributor"]["model_id"] = mid[:250]
            conversations.append(conv)
        entries.append({"path": path, "conversations": conversations})
    ext = {"version": EXTENSION_VERSION, "sessions": sessions,
           "fingerprints": {"k": k, "w": w, "tokenizer": _tokenizer_version(), "ranges": fps}}
    body = {"vcs": vcs, "files": entries}
    rid = uuid.uuid5(uuid.NAMESPACE_URL, "engram:" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
                     .hexdigest())
    record: dict[str, Any] = {"version": SPEC_VERSION, "id": str(rid), "timestamp": ts}
    if vcs is not None:
        record["vcs"] = vcs
    record.update({"tool": {"name": "engram", "version": __version__}, "files": entries,
                   "metadata": {EXTENSION: ext}})
    return record


def _tokenizer_version() -> int:
    from engram.index.snapshot import ANCHOR_VERSION  # noqa: PLC0415

    return int(ANCHOR_VERSION)


def _now() -> str:
    from datetime import datetime  # noqa: PLC0415

    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _export_target(root: Path, target: str | None, cwd: Path | None
                   ) -> tuple[list[tuple[str, str, list[tuple[int, int]] | None]], dict[str, str] | None, str]:
    """(path, text, lines wanted or None for all) of each file to export, the record's vcs, its time."""
    from engram.fsutil import repo_relative  # noqa: PLC0415

    here = cwd or Path.cwd()
    if target is not None and (here / target).is_file():
        rel = repo_relative(root, target, here)
        text = _worktree_text(root, rel)
        if text is None:
            raise BadInput(f"{target}: not a regular file of the working tree")
        head = git.resolve_commit(root, "HEAD") if git.is_repository(root) else None
        same = head is not None and git.read_blobs(root, [f"{head}:{rel}"]).get(f"{head}:{rel}") == \
            text.encode("utf-8", "surrogateescape")
        # Line numbers are the working tree's: they are HEAD's only when the file is as committed.
        return [(rel, text, None)], ({"type": "git", "revision": head} if same else None), _now()
    rev = target or "HEAD"
    if not git.is_repository(root):
        raise BadInput(f"{rev}: no such file, and {root} is not a git repository to find a revision in")
    commit = git.resolve_commit(root, rev)
    if commit is None:
        raise BadInput(f"{rev}: neither a file of the working tree nor a revision of this repository")
    paths = git.changed_files(root, commit)
    blobs = git.read_blobs(root, [f"{commit}:{p}" for p in paths])
    files = []
    for p in paths:
        data = blobs.get(f"{commit}:{p}")
        if data is None or looks_binary(data):
            continue
        files.append((p, data.decode("utf-8", "replace"), git.added_lines(root, commit, p)))
    return files, {"type": "git", "revision": commit}, git.commit_time(root, commit) or _now()


def _attributed(db: Any, root: Path, path: str, text: str, wanted: list[tuple[int, int]] | None, k: int, w: int,
                fps: dict[str, list[str]]) -> list[_Conversation]:
    """The conversations that wrote lines of `path` (of `wanted` only, when given), with their ranges."""
    from engram.anchor import fingerprint_set  # noqa: PLC0415
    from engram.query.blame import blame  # noqa: PLC0415

    lines = text.splitlines(keepends=True)
    convs: dict[tuple[str, str], _Conversation] = {}
    for region in blame(db, root, path, text):
        wr = region.writer
        if wr is None:
            continue
        for a, b in _clip(region.start, region.end, wanted):
            body = "".join(lines[a - 1:b])
            h = content_hash(body)
            fps.setdefault(h, encode_fingerprints(fingerprint_set(body, k, w)))
            conv = convs.setdefault((wr.harness, wr.session_id),
                                    _Conversation(wr.harness, wr.session_id, wr.model, wr.tape))
            conv.ranges.append({"start_line": a, "end_line": b, "content_hash": h})
    return list(convs.values())


def _clip(start: int, end: int, wanted: list[tuple[int, int]] | None) -> list[tuple[int, int]]:
    if wanted is None:
        return [(start, end)]
    return [(max(start, a), min(end, b)) for a, b in wanted if max(start, a) <= min(end, b)]


# --------------------------------------------------------------------------- reading records


def parse_records(data: bytes, name: str) -> list[dict[str, Any]]:
    """The records of an Agent Trace file: one JSON record, a JSON array of them, or JSON Lines
    (`.agent-trace/traces.jsonl`, as the reference implementation appends them). Every record is
    validated; the first problem is a BadInput naming the record and the field."""
    text = data.decode("utf-8", "replace").strip()
    if not text:
        raise BadInput(f"{name}: empty: no Agent Trace records")
    try:
        whole = orjson.loads(text)
        items = whole if isinstance(whole, list) else [whole]
        where = [f"record {i + 1}" for i in range(len(items))]
    except orjson.JSONDecodeError:
        items, where = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise BadInput(f"{name}: line {n} is not JSON ({exc}); an Agent Trace file holds one JSON record, "
                               "a JSON array of records, or one record per line") from None
            where.append(f"line {n}")
    if not items:
        raise BadInput(f"{name}: no Agent Trace records")
    for rec, at in zip(items, where):
        _validate(rec, f"{name}, {at}")
    return items


def _validate(rec: Any, at: str) -> None:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise BadInput(f"{at}: {what} (Agent Trace {SPEC_VERSION}: https://github.com/cursor/agent-trace)")

    need(isinstance(rec, dict), "not a JSON object")
    for key in ("version", "id", "timestamp", "files"):
        need(key in rec, f"lacks the required field `{key}`")
    version = rec["version"]
    need(isinstance(version, str), "`version` is not a string")
    parts = version.split(".")
    need(2 <= len(parts) <= 3 and all(p.isdigit() for p in parts), f"`version` {version!r} is not MAJOR.MINOR.PATCH")
    need(int(parts[0]) in SUPPORTED_MAJORS,
         f"version {version} is not supported: this engram reads Agent Trace 0.x and 1.x records")
    need(isinstance(rec["id"], str) and rec["id"].strip() != "", "`id` is not a string")
    need(isinstance(rec["timestamp"], str), "`timestamp` is not a string")
    vcs = rec.get("vcs")
    need(vcs is None or (isinstance(vcs, dict) and vcs.get("type") in VCS_TYPES and isinstance(vcs.get("revision"), str)),
         "`vcs` must be {type: git|jj|hg|svn, revision: string}")
    need(isinstance(rec.get("tool", {}), dict), "`tool` is not an object")
    need(isinstance(rec.get("metadata", {}), dict), "`metadata` is not an object")
    need(isinstance(rec["files"], list), "`files` is not an array")
    for i, f in enumerate(rec["files"]):
        need(isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("conversations"), list),
             f"files[{i}] needs a string `path` and a `conversations` array")
        path = f["path"]
        need(_relative_path(path), f"files[{i}].path {path!r} is not a path relative to the repository root")
        for j, c in enumerate(f["conversations"]):
            here = f"files[{i}].conversations[{j}]"
            need(isinstance(c, dict) and isinstance(c.get("ranges"), list), f"{here} needs a `ranges` array")
            need(c.get("url") is None or isinstance(c["url"], str), f"{here}.url is not a string")
            _validate_contributor(c.get("contributor"), f"{here}.contributor", need)
            for r_no, r in enumerate(c["ranges"]):
                rr = f"{here}.ranges[{r_no}]"
                ok = isinstance(r, dict) and all(isinstance(r.get(x), int) and not isinstance(r.get(x), bool)
                                                 and r[x] >= 1 for x in ("start_line", "end_line"))
                need(ok, f"{rr} needs integer `start_line` and `end_line`, 1 or more")
                need(r["end_line"] >= r["start_line"], f"{rr} ends before it starts")
                need(r.get("content_hash") is None or isinstance(r["content_hash"], str),
                     f"{rr}.content_hash is not a string")
                _validate_contributor(r.get("contributor"), f"{rr}.contributor", need)


def _validate_contributor(c: Any, at: str, need: Any) -> None:
    if c is None:
        return
    need(isinstance(c, dict) and c.get("type") in CONTRIBUTOR_TYPES, f"{at}.type must be human, ai, mixed or unknown")
    need(c.get("model_id") is None or isinstance(c["model_id"], str), f"{at}.model_id is not a string")


def _relative_path(path: str) -> bool:
    p = path.replace("\\", "/")
    return bool(p) and not p.startswith("/") and ".." not in p.split("/") and ":" not in p.split("/")[0]


# --------------------------------------------------------------------------- import


@dataclass
class ImportReport:
    records: int = 0
    conversations: int = 0
    tapes_new: int = 0
    tapes_known: int = 0
    removed: int = 0  # conversations whose session `engram tapes rm` took back
    ranges: Counter[str] = field(default_factory=Counter)  # where each range's text came from
    missing: Counter[str] = field(default_factory=Counter)  # why a range has no text

    def as_dict(self) -> dict[str, Any]:
        return {"records": self.records, "conversations": self.conversations, "tapes_new": self.tapes_new,
                "tapes_known": self.tapes_known, "removed": self.removed, "ranges": dict(self.ranges),
                "without_text": dict(self.missing)}

    def summary(self) -> str:
        found = sum(self.ranges.values())
        out = (f"imported {plural(self.records, 'Agent Trace record')}: {plural(self.conversations, 'conversation')}, "
               f"{plural(self.tapes_new, 'new tape')}"
               + (f" ({self.tapes_known} already held)" if self.tapes_known else "")
               + (f" ({self.removed} left out: removed by `engram tapes rm`)" if self.removed else "")
               + f"; {plural(found + sum(self.missing.values()), 'range')}")
        for how, n in sorted(self.ranges.items()):
            out += f"\n  {n} with text from {how}"
        for why, n in sorted(self.missing.items()):
            out += f"\n  {n} without text, kept but not matched: {why}"
        return out


def import_records(store: Store, records: list[dict[str, Any]]) -> ImportReport:
    """Add validated `records` (`parse_records`) to the store as evidence (see the module doc)."""
    report = ImportReport(records=len(records))
    texts = _Texts(store.root)
    out: list[list[dict[str, Any]]] = []
    for rec in records:
        for (conv_key, session), group in _conversations(rec).items():
            events = _conversation_tape(rec, session, group, texts, report)
            out.append(events)
    report.conversations = len(out)
    report.tapes_new, report.tapes_known, report.removed = tapes.store(store, out)
    return report


def _conversations(rec: dict[str, Any]) -> dict[tuple[str, str], list[tuple[str, dict[str, Any]]]]:
    """(conversation key, session id) → [(file path, conversation)] of a record."""
    groups: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for f in rec["files"]:
        for c in f["conversations"]:
            session = session_of(c.get("url"), rec)
            groups[(c.get("url") or "", session)].append((f["path"].replace("\\", "/"), c))
    return groups


def session_of(url: str | None, rec: dict[str, Any]) -> str:
    """The session a conversation names (see the module doc)."""
    if url:
        if url.startswith(SESSION_URL):
            return unquote(url[len(SESSION_URL):])
        parsed = urlparse(url)
        if parsed.scheme == "file" and parsed.path:
            return Path(unquote(parsed.path)).stem
        return url
    meta = rec.get("metadata") or {}
    cid = meta.get("conversation_id")
    return str(cid) if isinstance(cid, (str, int)) and cid != "" else f"agent-trace:{rec['id']}"


def _conversation_tape(rec: dict[str, Any], session: str, group: list[tuple[str, dict[str, Any]]],
                       texts: _Texts, report: ImportReport) -> list[dict[str, Any]]:
    ext = (rec.get("metadata") or {}).get(EXTENSION)
    known = ext.get("sessions", {}).get(group[0][1].get("url") or "") if isinstance(ext, dict) else None
    contributor = group[0][1].get("contributor") or {}
    model = contributor.get("model_id")
    tool = rec.get("tool") or {}
    agent = (known or {}).get("harness") if isinstance(known, dict) else None
    ts = rec["timestamp"]
    vcs = rec.get("vcs") or {}
    revision = vcs.get("revision") if vcs.get("type") == "git" else None
    events = [tapes.meta(HARNESS, session, model=model if isinstance(model, str) else None, started=ts,
                         agent=agent or tool.get("name"), git_head=revision,
                         origin={"agent_trace": {"record": rec["id"], "conversation": group[0][1].get("url")}})]
    fingerprints = _fingerprints(ext)
    for path, conv in group:
        for r in conv["ranges"]:
            a, b = r["start_line"], r["end_line"]
            attested = {"by": HARNESS, "record": rec["id"], "lines": [a, b], "revision": revision,
                        "content_hash": r.get("content_hash")}
            found = texts.find(path, a, b, revision, r.get("content_hash"), fingerprints)
            if isinstance(found, _Found):
                report.ranges[found.how] += 1
                events.append(tapes.written_lines(path, found.first, found.last, found.text, ts,
                                                  {**attested, "text_from": found.how}))
            else:
                report.missing[found] += 1
                events.append(tapes.unread_lines(path, a, b, ts, f"Agent Trace record {rec['id']}: lines {a}-{b} "
                                                 f"of {path} written by {session}; their text is not here: {found}",
                                                 attested))
    return events


@dataclass
class _Fingerprints:
    k: int
    by_hash: dict[str, list[int]]


def _fingerprints(ext: Any) -> _Fingerprints | None:
    """The record's Engram fingerprints, when it has them in a form this engram computes."""
    if not isinstance(ext, dict) or ext.get("version") != EXTENSION_VERSION:
        return None
    fp = ext.get("fingerprints")
    if not isinstance(fp, dict) or fp.get("tokenizer") != _tokenizer_version() or not isinstance(fp.get("k"), int):
        return None
    ranges = fp.get("ranges")
    if not isinstance(ranges, dict):
        return None
    by_hash = {h: v for h, items in ranges.items() if (v := decode_fingerprints(items))}
    return _Fingerprints(int(fp["k"]), by_hash)


@dataclass
class _Found:
    first: int
    last: int
    text: str
    how: str


class _Texts:
    """A record's files as git holds them at a revision and as the working tree holds them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.is_git = git.is_repository(root)
        self.at_rev: dict[tuple[str, str], str | None] = {}
        self.worktree: dict[str, str | None] = {}
        self.commits: dict[str, str | None] = {}

    def revision_text(self, path: str, revision: str) -> str | None:
        key = (revision, path)
        if key not in self.at_rev:
            commit = self._commit(revision)
            data = git.read_blobs(self.root, [f"{commit}:{path}"]).get(f"{commit}:{path}") if commit else None
            self.at_rev[key] = data.decode("utf-8", "replace") if data is not None else None
        return self.at_rev[key]

    def _commit(self, revision: str) -> str | None:
        if revision not in self.commits:
            ok = self.is_git and all(c in "0123456789abcdefABCDEF" for c in revision) and len(revision) >= 7
            self.commits[revision] = git.resolve_commit(self.root, revision) if ok else None
        return self.commits[revision]

    def worktree_text(self, path: str) -> str | None:
        if path not in self.worktree:
            self.worktree[path] = _worktree_text(self.root, path)
        return self.worktree[path]

    def find(self, path: str, a: int, b: int, revision: str | None, chash: str | None,
             fps: _Fingerprints | None) -> _Found | str:
        """The range's text and where it came from, or why it has none."""
        checkable = chash is not None and chash.startswith("sha256:")
        lacking = []
        if revision is not None:
            text = self.revision_text(path, revision)
            body = tapes.line_slice(text, a, b) if text is not None else None
            if body is not None and (not checkable or content_hash(body) == chash):
                return _Found(a, b, body, "the record's revision")
            lacking.append("the revision's lines differ from the content hash" if body is not None else
                           "the record's revision is not in this repository" if text is None and
                           self._commit(revision) is None else "the file at the record's revision is shorter")
        else:
            lacking.append("the record names no git revision")
        text = self.worktree_text(path)
        if text is None:
            return "; ".join([*lacking, "no such file in the working tree"])
        if checkable:
            body = tapes.line_slice(text, a, b)
            if body is not None and content_hash(body) == chash:
                return _Found(a, b, body, "the working tree (same lines)")
            moved = _exact(text, chash, b - a + 1)
            if moved is not None:
                return _Found(*moved, "the working tree (moved)")
        want = fps.by_hash.get(chash or "") if fps is not None else None
        if want:
            got = locate(text, want, fps.k)  # type: ignore[union-attr]
            if got is not None:
                first, last, _share = got
                body = tapes.line_slice(text, first, last) or ""
                return _Found(first, last, body, "the working tree (by Engram fingerprints)")
            lacking.append(f"fewer than {LOCATE_SHARE:.0%} of its fingerprints are together in the working tree")
        elif checkable:
            lacking.append("its content hash matches no lines of the working tree")
        else:
            lacking.append("no SHA-256 content hash or Engram fingerprints to find it in the working tree by")
        return "; ".join(lacking)


def _worktree_text(root: Path, rel: str) -> str | None:
    """The text of a regular file of the working tree; None for anything else. A symlink is not
    followed: a record's path must not read outside the repository."""
    if not _relative_path(rel):
        return None
    full = os.path.join(os.fspath(root), rel)
    try:
        st = os.lstat(full)
        if not stat.S_ISREG(st.st_mode):
            return None
        parent = os.path.realpath(os.path.dirname(full))
        if not (parent + os.sep).startswith(os.path.realpath(root) + os.sep) and parent != os.path.realpath(root):
            return None
        with open(full, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def _exact(text: str, chash: str, n: int) -> tuple[int, int, str] | None:
    """The first `n` lines of `text` whose content hash is `chash` (the range moved)."""
    lines = text.splitlines(keepends=True)
    if len(lines) * n > _EXACT_WORK:
        return None  # a long file and range: the fingerprints find it, if the record has them
    for i in range(max(0, len(lines) - n + 1)):
        body = "".join(lines[i:i + n])
        if content_hash(body) == chash:
            return i + 1, i + n, body
    return None


def locate(text: str, hashes: list[int], k: int) -> tuple[int, int, float] | None:
    """(first line, last line, share) of the lines of `text` that hold most of `hashes` (a range's
    winnowed fingerprints) close together; None when they hold less than LOCATE_SHARE of them.

    Every k-gram of the text is compared, not only the winnowed ones: the range's fingerprints
    were chosen among its own windows, which the text around it changes at the edges."""
    import numpy as np  # noqa: PLC0415

    from engram.anchor import kgram_hashes, tokenize  # noqa: PLC0415

    want = np.unique(np.asarray(hashes, dtype=np.int64))
    tok = tokenize(text)
    n = len(tok)
    if n < k or not len(want):
        return None
    kg = kgram_hashes(tok.hashes, k)
    hit = np.nonzero(np.isin(kg, want))[0]
    if not len(hit):
        return None
    gap = 8 * k  # two copies' k-grams are further apart than a window's worth of tokens
    cuts = np.nonzero(np.diff(hit) > gap)[0] + 1
    best: tuple[float, int, int] | None = None
    for run in np.split(hit, cuts):
        share = len(np.unique(kg[run])) / len(want)
        if best is None or share > best[0]:
            best = (share, int(run[0]), int(run[-1]))
    if best is None or best[0] < LOCATE_SHARE:
        return None
    share, i0, i1 = best
    return int(tok.lines[i0]) + 1, int(tok.lines[i1 + k - 1]) + 1, share
