"""`engram doctor`: is everything Engram needs in place and consistent? Each check is one line,
ok, warn or fail, with the command that puts it right.

The checks read and never write: the store and its index (tapes on disk against the catalogue,
the schema, tapes not indexed, segments waiting to be merged, history indexed out of time
order), this repository's sessions where the harnesses keep them (captured or not, and where
discovery looked when it finds none), the agents' configurations (`engram setup` of Claude
Code, Codex, Gemini CLI, Qwen Code, OpenCode, Cursor, VS Code, Cline and Roo Code: complete, and
each engram they run exists and answers `--version`), the language server's endpoint (its run
file alive or stale) and the embedding model (when this engram has `engram.memory`). The command
line prints them (engram/cli/doctor.py)."""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engram.errors import EngramError, StoreNotFound
from engram.store.location import started_after
from engram.store.repo import Store, find_repo_root
from engram.words import agree, plural

log = logging.getLogger(__name__)

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked, how it stands, and the command that fixes it."""

    area: str
    status: str  # ok, warn, fail
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_checks(start: Path) -> Iterator[Check]:
    """Every check, for the repository holding `start`, as it completes."""
    try:
        store = Store.discover(start)
    except StoreNotFound:
        root = find_repo_root(start) or start
        yield Check("store", FAIL, f"no .engram/ store in {root} or above", "engram init")
        yield from agent_checks(root)
        yield embedding_check()
        return
    if damage := store.damage():
        for line in damage:
            yield Check("store", FAIL, line)
    elif reason := store.unwritable():
        yield Check("store", FAIL, f"{store.dir} cannot be written ({reason}): every command writes there, "
                    "queries too", "make it writable (`chmod -R u+w .engram`, a read-write mount)")
    else:
        yield Check("store", OK, str(store.dir))
    try:
        store.config  # noqa: B018 - reading it is the check
    except EngramError as exc:
        yield Check("config", FAIL, str(exc), f"fix or remove {store.config_path}")
    else:
        yield from config_checks(store)
    yield from index_checks(store)
    yield from session_checks(store)
    yield from agent_checks(store.root)
    yield server_check(store)
    yield embedding_check()


def config_checks(store: Store) -> Iterator[Check]:
    """Settings in config.toml that engram does not know (a misspelt name changes nothing)."""
    if not store.config_path.is_file():
        return
    import tomllib  # noqa: PLC0415

    from engram.store.config import unknown_settings  # noqa: PLC0415

    with store.config_path.open("rb") as f:
        unknown = unknown_settings(tomllib.load(f))
    if unknown:
        yield Check("config", WARN, f"{store.config_path}: not engram settings, ignored: " + ", ".join(unknown),
                    "rename or remove them (README.md, Configuration)")


# ---------------------------------------------------------------- the store and its index


def index_checks(store: Store) -> Iterator[Check]:
    from engram.errors import DamagedIndex, ReadOnlyStore  # noqa: PLC0415
    from engram.index.db import open_db, quick_check  # noqa: PLC0415
    from engram.index.schema import SCHEMA_VERSION  # noqa: PLC0415

    if not store.index_path.exists():
        yield Check("index", WARN, f"no {store.index_path.name} yet", "engram index")
        return
    try:
        db = open_db(store, readonly=True)
        version = int(db.execute("PRAGMA user_version").fetchall()[0][0])
    except ReadOnlyStore:  # (the store's check says so, with its fix: a reindex cannot run)
        return
    except (DamagedIndex, EngramError) as exc:
        yield Check("index", FAIL, str(exc), "engram reindex")
        return
    except Exception as exc:  # noqa: BLE001 - apsw's errors: a damaged file says so here
        yield Check("index", FAIL, f"{store.index_path} cannot be read ({exc})", "engram reindex")
        return
    with closing(db):
        if version > SCHEMA_VERSION:
            yield Check("index", FAIL, f"schema {version}, newer than this engram's ({SCHEMA_VERSION}): a newer "
                        "engram wrote it", "upgrade engram (install it again from a newer checkout)")
            return
        if version < SCHEMA_VERSION:
            yield Check("index", WARN, f"schema {version}: this engram migrates it to {SCHEMA_VERSION} on its next "
                        "write", "engram index")
            return
        # SQLite's own check of every page (16 ms of CPU on a 5 MB index, warm): queries meet a
        # damaged page only where they read, so the index looked "ok" while explains failed. It also
        # runs FTS5's integrity check of `fts` and `memory_fts` (SQLite >= 3.44 calls each virtual
        # table's xIntegrity; apsw >= 3.54 is required): on a 203 MB index ~0.3 s of its ~0.5 s of CPU,
        # so an `INSERT INTO fts(fts) VALUES('integrity-check')` beside it would only pay that twice.
        if (found := quick_check(db)) != "ok":
            yield Check("index", FAIL, f"{store.index_path} is damaged ({found})", "engram reindex")
            return
        yield Check("index", OK, f"schema {version}")
        yield from _catalogue_checks(store, db)


def _catalogue_checks(store: Store, db: Any) -> Iterator[Check]:
    from engram.fsutil import names_in  # noqa: PLC0415
    from engram.index.build import older_text_note  # noqa: PLC0415
    from engram.index.postings import MAX_SEGMENTS  # noqa: PLC0415
    from engram.tape.writer import TAPE_SUFFIX  # noqa: PLC0415

    on_disk = {n[: -len(TAPE_SUFFIX)] for n in names_in(store.tapes_dir) if n.endswith(TAPE_SUFFIX)}
    rows = db.execute("SELECT id, indexed FROM tapes").fetchall()
    known = {tid for tid, _ in rows}
    if not rows and not on_disk:
        yield Check("tapes", WARN, "no tapes yet: nothing captured", "engram ingest")
        return
    if lost := known - on_disk:
        yield Check("tapes", FAIL, f"{plural(len(lost), 'catalogued tape')} {agree(len(lost), 'has', 'have')} no file "
                    f"in {store.tapes_dir}", "engram reindex")
    if stray := on_disk - known:
        yield Check("tapes", WARN, f"{plural(len(stray), 'tape file')} in {store.tapes_dir} "
                    f"{agree(len(stray), 'is', 'are')} "
                    "not in the catalogue (an ingest was interrupted)", "engram index")
    if not lost and not stray:
        yield Check("tapes", OK, f"{plural(len(known), 'tape')}, each on disk and in the catalogue")
    waiting = sum(1 for _, indexed in rows if indexed != 1)
    if waiting:
        yield Check("indexing", WARN, f"{plural(waiting, 'tape')} not indexed yet", "engram index")
    elif rows:
        yield Check("indexing", OK, f"every tape indexed ({plural(len(rows), 'tape')})")
    segments = int(db.execute("SELECT count(*) FROM segments").fetchall()[0][0])
    if segments > MAX_SEGMENTS:
        yield Check("segments", WARN, f"{plural(segments, 'index segment')}, more than {MAX_SEGMENTS}: merges are "
                    "pending (a running language server merges them when idle)", "engram index")
    if late := _out_of_order(db):
        yield Check("lineage", WARN, f"{plural(late, 'tape')} indexed after newer ones: {agree(late, 'its', 'their')} "
                    "lineage runs backwards in time", "engram reindex")
    if note := older_text_note(db):
        yield Check("index", WARN, note.removeprefix("note: "), "engram reindex")


def _out_of_order(db: Any) -> int:
    """Indexed tapes that ended before a tape indexed ahead of them began (what `engram ingest`
    reports as it happens, `Indexer.out_of_order`): lineage follows index order."""
    return int(db.execute(
        "SELECT count(*) FROM (SELECT coalesce(ended, begins, '') AS e, max(begins) OVER (ORDER BY no ROWS BETWEEN "
        "UNBOUNDED PRECEDING AND 1 PRECEDING) AS m FROM tapes WHERE indexed != 0 AND no IS NOT NULL) "
        "WHERE e != '' AND m IS NOT NULL AND e < m").fetchall()[0][0])


# ---------------------------------------------------------------- sessions


def session_checks(store: Store) -> Iterator[Check]:
    """This repository's sessions where Claude Code and Codex keep them: captured, or not yet."""
    from engram.capture.discovery import DiscoveryReport, discover  # noqa: PLC0415
    from engram.capture.pipeline import captured_ends  # noqa: PLC0415
    from engram.capture.stats import IngestStats  # noqa: PLC0415
    from engram.index.db import open_db  # noqa: PLC0415

    report = DiscoveryReport()
    try:
        jobs = discover(store.root, None, None, IngestStats(), report)
    except (OSError, EngramError) as exc:
        yield Check("sessions", WARN, f"discovery failed ({exc})", "engram -v ingest")
        return
    if not jobs:
        looked = "; ".join(line.strip() for line in report.lines()[1:])
        held = _tapes_held(store)
        if held:  # (the sessions were given by path: "run engram ingest PATH" read as if nothing were captured)
            yield Check("sessions", OK, f"{plural(held, 'tape')} captured from transcripts given to `engram ingest`; "
                        f"none where Claude Code and Codex keep this repository's sessions: {looked}", None)
            return
        yield Check("sessions", WARN, f"no Claude Code or Codex session of this repository found: {looked}",
                    "engram ingest PATH... (the transcripts' files), or start an agent here")
        return
    digests: set[tuple[str, str]] = set()
    try:
        with closing(open_db(store, readonly=True)) as db:
            ends = captured_ends(db)
            digests = {(name, sha) for name, sha in db.execute("SELECT source, prefix_sha256 FROM captures")}
    except Exception as exc:  # noqa: BLE001 - the index checks said what is wrong with it
        log.info("sessions not compared with the index: %s", exc)
        ends = {}
    behind = sum(1 for job in jobs if (
        (job.sources[0].name, job.sources[0].digest) not in digests if job.sources[0].digest is not None
        else _size(job.main) > ends.get(str(job.main), 0)))  # a session of a store: captured as it is now?
    if behind:
        yield Check("sessions", WARN, f"{plural(len(jobs), 'session')} of this repository found, {behind} with "
                    "records not captured yet", "engram ingest")
    else:
        yield Check("sessions", OK, f"{plural(len(jobs), 'session')} of this repository found, all captured")


def _tapes_held(store: Store) -> int:
    """How many tapes the catalogue holds (0 when it cannot be read: the index checks say why)."""
    from engram.index.db import open_db  # noqa: PLC0415

    try:
        with closing(open_db(store, readonly=True)) as db:
            return int(db.execute("SELECT count(*) FROM tapes").fetchall()[0][0])
    except Exception as exc:  # noqa: BLE001 - the index checks said what is wrong with it
        log.info("tapes not counted: %s", exc)
        return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# ---------------------------------------------------------------- agents


# agent -> (its name, whether setup gives it capture hooks as well as the MCP server). Claude Code
# and Codex are always reported (not set up: a warning); the others only when Engram is in their
# configuration, since most people use one or two of them.
AGENTS: dict[str, tuple[str, bool]] = {
    "claude": ("Claude Code", True), "codex": ("Codex", True), "gemini": ("Gemini CLI", True),
    "qwen": ("Qwen Code", True), "opencode": ("OpenCode", True), "cursor": ("Cursor", False),
    "vscode": ("VS Code (Copilot)", False), "cline": ("Cline", False), "roo": ("Roo Code", False),
}
ALWAYS = ("claude", "codex")


def agent_checks(root: Path) -> Iterator[Check]:
    """Each agent's configuration written by `engram setup`: complete (server and hooks), and
    running an engram that runs. One `--version` per distinct command, however many files name it."""
    from engram.integrations import editors  # noqa: PLC0415
    from engram.integrations.setup import configured  # noqa: PLC0415

    answers: dict[tuple[str, ...], tuple[bool, str]] = {}
    for agent, (name, hooked) in AGENTS.items():
        entries = (editors.configured if agent in editors.EDITORS else configured)(agent, root)
        if not entries:
            if agent in ALWAYS:
                yield Check(agent, WARN, f"{name} is not set up to use Engram here", f"engram setup {agent}")
            continue
        yield from _agent_lines(agent, name, hooked, entries, answers)


def _agent_lines(agent: str, name: str, hooked: bool, entries: list[Any],
                 answers: dict[tuple[str, ...], tuple[bool, str]]) -> Iterator[Check]:
    from engram.integrations.setup import verify  # noqa: PLC0415

    server = any(e.what == "MCP server" for e in entries)
    if not server or (hooked and all(e.what == "MCP server" for e in entries)):
        capture = "capture plugin" if agent == "opencode" else "capture hooks"
        has, lacks = ("MCP server", capture) if server else (capture, "MCP server")
        yield Check(agent, WARN, f"{name} has Engram's {has} but not its {lacks}", f"engram setup {agent}")
    for command in dict.fromkeys(e.command for e in entries):
        if command not in answers:
            answers[command] = verify(command)
        ok, answer = answers[command]
        where = _uses([e for e in entries if e.command == command])
        shown = " ".join(command)
        if ok:
            yield Check(agent, OK, f"{where} run {shown}: {answer}")
        else:
            yield Check(agent, FAIL, f"{where} run {shown}, which does not run: {answer}", f"engram setup {agent}")


def _uses(entries: list[Any]) -> str:
    """"a.json (MCP server), b.json (PostToolUse, SessionEnd hooks)": the entries by file."""
    by_file: dict[Path, list[str]] = {}
    for e in entries:
        by_file.setdefault(e.path, []).append(e.what)
    parts = []
    for path, whats in by_file.items():
        hooks = [w.removesuffix(" hook") for w in whats if w.endswith(" hook")]
        named = [w for w in whats if not w.endswith(" hook")]
        if hooks:
            named.append(f"{', '.join(hooks)} {'hook' if len(hooks) == 1 else 'hooks'}")
        parts.append(f"{path} ({'; '.join(named)})")
    return ", ".join(parts)


# ---------------------------------------------------------------- the language server and the model


def server_check(store: Store) -> Check:
    """The language server's endpoint: the run file of a live server, a stale one, or none."""
    path = store.endpoint_file
    if not path.exists():
        return Check("language server", OK, "not running on this repository (editors start it)")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        pid, port = int(info["pid"]), int(info["port"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Check("language server", WARN, f"{path} is unreadable ({exc})", f"rm {path}")
    if not _alive(pid) or started_after(pid, os.stat(path).st_mtime):
        return Check("language server", WARN, f"{path} was left by a server that is gone (pid {pid}); commands "
                     "ignore it", f"rm {path}")
    return Check("language server", OK, f"running (pid {pid}), endpoint on 127.0.0.1:{port}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def embedding_check(status: Callable[[], tuple[bool, str]] | None = None) -> Check:
    """The embedding model of semantic memory (`engram.memory.embed`), when this engram has it."""
    if status is None:
        try:
            status = importlib.import_module("engram.memory.embed").model_status
        except ImportError:
            return Check("embeddings", OK, "not installed (this engram has no semantic memory)")
    try:
        usable, detail = status()
    except Exception as exc:  # noqa: BLE001 - a broken model install is a finding, not a crash
        return Check("embeddings", FAIL, f"the embedding model failed to load ({exc})")
    return Check("embeddings", OK if usable else WARN, detail)
