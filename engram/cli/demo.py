"""`engram demo`: the main job on an embedded real session, no agent history needed.

It rebuilds, from the shipped transcript alone, the files the session wrote (Write content,
Edit `originalFile` + `structuredPatch`), commits them to a throw-away git repository, ingests
the transcript and shows what Engram then knows.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from contextlib import chdir
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import zstandard

from engram.adapters.unified import apply_hunks, split_lines

log = logging.getLogger(__name__)

DEMO_SESSION = "258c7280-ae70-4798-800f-63464d01a85d"


def final_files(transcript: Path) -> dict[str, str]:
    """Absolute path → the last content the session gave that file (successful edits only)."""
    files: dict[str, str] = {}
    for tur in _file_results(transcript):
        path = tur["filePath"]
        if tur.get("type") in ("create", "update") and isinstance(tur.get("content"), str):
            files[path] = tur["content"]
        elif isinstance(tur.get("originalFile"), str) and isinstance(tur.get("structuredPatch"), list):
            new = apply_hunks(split_lines(tur["originalFile"]), tur["structuredPatch"])
            if new is not None:
                files[path] = "\n".join(new) + "\n"
    return files


def created_files(transcript: Path) -> set[str]:
    """Absolute paths of the files the session created (Write of a new file): every line of their
    first version is agent-written, unlike an update's, which may be code the session only read."""
    return {tur["filePath"] for tur in _file_results(transcript) if tur.get("type") == "create"}


def _file_results(transcript: Path) -> Iterator[dict[str, Any]]:
    """The session's tool results that name a file (`toolUseResult.filePath`), in order."""
    for raw in transcript.read_bytes().splitlines():
        try:
            rec = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        tur = rec.get("toolUseResult") if isinstance(rec, dict) else None
        if isinstance(tur, dict) and isinstance(tur.get("filePath"), str):
            yield tur


def _git(root: Path, *args: str) -> str:
    """git's output; a failure (no git, a folder git refuses) as the one line a user can act on."""
    from engram.errors import BadInput  # noqa: PLC0415

    env = {**os.environ, "GIT_AUTHOR_NAME": "engram demo", "GIT_AUTHOR_EMAIL": "demo@engram.invalid",
           "GIT_COMMITTER_NAME": "engram demo", "GIT_COMMITTER_EMAIL": "demo@engram.invalid"}
    try:
        return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env=env, text=True).stdout
    except FileNotFoundError:
        raise BadInput("the demo needs git: install it (Debian, Ubuntu: sudo apt install git)") from None
    except subprocess.CalledProcessError as exc:
        said = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise BadInput(f"the demo's `git {args[0]}` in {root} failed" + (f": {said[-1]}" if said else "")) from None


def build_demo(base: Path) -> tuple[Path, Path]:
    """Write the transcript and the repository it describes under `base`."""
    transcripts = base / "transcripts"
    repo = base / "repo"
    transcripts.mkdir(parents=True, exist_ok=True)
    repo.mkdir(parents=True, exist_ok=True)
    data = resources.files("engram.data").joinpath("demo-session.jsonl.zst").read_bytes()
    transcript = transcripts / f"{DEMO_SESSION}.jsonl"
    transcript.write_bytes(zstandard.ZstdDecompressor().decompress(data))
    files = final_files(transcript)
    cwd = _session_cwd(transcript)
    for path, text in sorted(files.items()):
        if not path.startswith(cwd.rstrip("/") + "/"):
            continue
        out = repo / path[len(cwd.rstrip("/")) + 1:]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    if _git(repo, "status", "--porcelain"):  # (else a demo already built here: nothing to commit)
        _git(repo, "commit", "-q", "-m", "files written by the demo session")
    return repo, transcript


def _session_cwd(transcript: Path) -> str:
    for raw in transcript.read_bytes().splitlines()[:50]:
        rec = orjson.loads(raw)
        if isinstance(rec, dict) and isinstance(rec.get("cwd"), str):
            return rec["cwd"]
    return "/"


def demo_span(repo: Path, transcript: Path) -> str | None:
    """A span of agent-written code to explain: the middle of the largest file the session created."""
    cwd = _session_cwd(transcript).rstrip("/") + "/"
    created = [repo / path[len(cwd):] for path in created_files(transcript) if path.startswith(cwd)]
    for p in sorted((p for p in created if p.is_file()), key=lambda p: (-p.stat().st_size, str(p))):
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n >= 30:
            start = n // 2 - 5
            return f"{p.relative_to(repo)}:{start}-{start + 9}"
    return None


def run_demo(target: Path | None, keep: bool = False, *, run: Callable[[list[str]], int]) -> int:
    """Build the demo repository and show `engram` on it: each step is `run(argv)` (the command
    line's own `main`, passed in so this module does not import it)."""
    base = target or Path(tempfile.mkdtemp(prefix="engram-demo-"))
    try:
        repo, transcript = build_demo(base)
        print(f"demo repository: {repo}\ntranscript: {transcript} (a real Claude Code session, MIT, see NOTICE)\n")
        with chdir(repo):
            steps: list[list[str]] = [["init"], ["ingest", str(transcript.parent)], ["tapes"],
                                      ["show", DEMO_SESSION, "--limit", "30"]]
            span = demo_span(repo, transcript)
            if span and _has_explain():
                steps.append(["explain", span, "--pretty"])
            for step in steps:
                print(f"$ engram {' '.join(step)}", flush=True)
                code = run(step)
                print(flush=True)
                if code != 0:
                    return code
    finally:
        if target is None and not keep:
            shutil.rmtree(base, ignore_errors=True)
        elif target is None:
            print(f"kept {base}")
    return 0


def _has_explain() -> bool:
    try:
        import engram.query.explain  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True
