"""Shared fixtures: real transcripts unpacked from tests/fixtures, and throw-away repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

FIXTURES = Path(__file__).parent / "fixtures"
SPOTTER_MAIN = "258c7280-ae70-4798-800f-63464d01a85d"
SPOTTER_OTHER = "4d5611e5-241a-462a-8d15-5122611a9569"


def unpack(src: Path, dst: Path) -> Path:
    """Copy a fixture tree, decompressing `*.zst` files."""
    dctx = zstandard.ZstdDecompressor()
    for p in sorted(src.rglob("*")):
        if p.is_dir():
            continue
        rel = p.relative_to(src)
        if p.suffix == ".zst":
            out = dst / str(rel)[: -len(".zst")]
            out.parent.mkdir(parents=True, exist_ok=True)
            with p.open("rb") as f, out.open("wb") as g:
                dctx.copy_stream(f, g)
        else:
            out = dst / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(p.read_bytes())
    return dst


@pytest.fixture(scope="session")
def spotter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Claude Code sessions of marot/spotter (MIT), decompressed, read-only by convention."""
    return unpack(FIXTURES / "claude" / "spotter", tmp_path_factory.mktemp("spotter"))


@pytest.fixture(scope="session")
def claude_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack(FIXTURES / "claude" / "schema", tmp_path_factory.mktemp("claude-schema"))


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty git repository with an initialised store."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    return root


@pytest.fixture
def engram_bin(tmp_path: Path) -> Path:
    """A directory holding an `engram` script as pip installs it (a Python shebang calling the
    console entry point), on no PATH: an engram in a virtual environment that is not activated."""
    folder = tmp_path / "venv-bin"
    folder.mkdir()
    script = folder / "engram"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom engram_server.entry import console\n"
                      "sys.exit(console())\n")
    script.chmod(0o755)
    return folder


def run_engram(cwd: Path, *args: str, check: bool = True, input: bytes | None = None,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    proc = subprocess.run([sys.executable, "-m", "engram.cli", *args], cwd=cwd, capture_output=True,
                          input=input.decode() if input is not None else None, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"engram {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def shown_events(cwd: Path, session: str) -> list[dict[str, Any]]:
    """A session's events as `engram show SESSION --json` gives them (large objects resolved)."""
    events: list[dict[str, Any]] = json.loads(run_engram(cwd, "show", session, "--json").stdout)["events"]
    return events


def session_cwd(transcript: Path) -> str:
    for line in transcript.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("cwd"):
            return rec["cwd"].rstrip("/") + "/"
    raise AssertionError("no cwd")


def build_spot_repo(spotter: Path, root: Path, ingest: bool = True) -> dict[str, str]:
    """A repository holding the final files both real sessions wrote, with every session ingested
    (unless `ingest` is false: the store is then empty).

    Returns, for each file, the session that wrote its final version."""
    from engram.cli.demo import final_files  # noqa: PLC0415

    root.mkdir(parents=True)
    git(root, "init", "-q")
    writer: dict[str, str] = {}
    for session in (SPOTTER_OTHER, SPOTTER_MAIN):
        t = spotter / f"{session}.jsonl"
        cwd = session_cwd(t)
        for path, text in final_files(t).items():
            if path.startswith(cwd):
                rel = path[len(cwd):]
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
                writer[rel] = session
    run_engram(root, "init")
    if ingest:
        run_engram(root, "ingest", str(spotter))
    return writer


def created_by(spotter: Path, session: str) -> dict[str, str]:
    """Files a session created with Write: every line of them is agent-written."""
    t = spotter / f"{session}.jsonl"
    cwd = session_cwd(t)
    out = {}
    for line in t.read_text().splitlines():
        rec = json.loads(line)
        tur = rec.get("toolUseResult")
        if isinstance(tur, dict) and tur.get("type") == "create" and tur["filePath"].startswith(cwd):
            out[tur["filePath"][len(cwd):]] = tur["content"]
    return out


@pytest.fixture(scope="module")
def agent_file(spotter: Path, spot: Path) -> str:
    """A file the main session created and nobody changed since, in the module's `spot` repository
    (each module that asks for it builds its own)."""
    for rel, content in sorted(created_by(spotter, SPOTTER_MAIN).items()):
        if (spot / rel).read_text() == content and len(content.splitlines()) > 40:
            return rel
    raise AssertionError("no agent-created file")


RETRY_PY = """import time


def retry(fn, attempts=5):
    for i in range(attempts):
        try:
            return fn()
        except OSError:
            time.sleep(2 ** i)
    raise RuntimeError("gave up")
"""  # a small file memories are anchored to (tests/test_memory_*.py)
