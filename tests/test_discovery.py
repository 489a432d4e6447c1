"""`engram ingest` with no paths: finding this repository's sessions where the harnesses keep them."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import git, run_engram, shown_events


def claude_session(cwd: Path, session: str, file_rel: str, content: str) -> list[dict[str, Any]]:
    """A minimal but real-shaped Claude Code session: a prompt, a Write, its result."""
    base = {"cwd": str(cwd), "sessionId": session, "version": "2.1.39", "gitBranch": "main", "userType": "external",
            "isSidechain": False}
    path = str(cwd / file_rel)
    return [
        {**base, "type": "user", "uuid": f"{session}-1", "parentUuid": None, "timestamp": "2026-03-01T10:00:00Z",
         "message": {"role": "user", "content": f"create {file_rel}"}},
        {**base, "type": "assistant", "uuid": f"{session}-2", "parentUuid": f"{session}-1",
         "timestamp": "2026-03-01T10:00:05Z",
         "message": {"model": "claude-opus-4-6", "role": "assistant", "content": [
             {"type": "tool_use", "id": f"toolu_{session}", "name": "Write",
              "input": {"file_path": path, "content": content}}]}},
        {**base, "type": "user", "uuid": f"{session}-3", "parentUuid": f"{session}-2",
         "timestamp": "2026-03-01T10:00:06Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{session}",
                                                   "content": f"File created successfully at: {path}"}]},
         "toolUseResult": {"type": "create", "filePath": path, "content": content, "structuredPatch": [],
                           "originalFile": None}},
    ]


def write_project(home: Path, cwd: Path, session: str, recs: list[dict[str, Any]]) -> Path:
    folder = home / "projects" / ("-" + str(cwd).strip("/").replace("/", "-").replace(".", "-"))
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{session}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return p


def codex_rollout(home: Path, cwd: Path, session: str) -> Path:
    d = home / "sessions" / "2026" / "03" / "01"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"rollout-2026-03-01T10-00-00-{session}.jsonl"
    recs = [
        {"timestamp": "2026-03-01T10:00:00Z", "type": "session_meta",
         "payload": {"id": session, "timestamp": "2026-03-01T10:00:00Z", "cwd": str(cwd), "originator": "codex_cli_rs",
                     "cli_version": "0.60.1", "instructions": None, "source": "cli", "model_provider": "openai"}},
        {"timestamp": "2026-03-01T10:00:01Z", "type": "event_msg",
         "payload": {"type": "user_message", "message": "hello from codex", "images": []}},
        {"timestamp": "2026-03-01T10:00:01Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello from codex"}]}},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return p


def committed_repo(repo: Path) -> Path:
    """A git repository with one commit: `git worktree add` needs a commit to check out."""
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "init")
    return repo


def test_discovers_sessions_of_this_repo_and_its_worktrees_only(tmp_path: Path) -> None:
    repo = committed_repo(tmp_path / "proj")
    worktree = tmp_path / "proj-feature"
    git(repo, "worktree", "add", "-q", str(worktree))
    other = tmp_path / "elsewhere"
    other.mkdir()
    claude_home, codex_home = tmp_path / "claude", tmp_path / "codex"
    write_project(claude_home, repo, "s-main", claude_session(repo, "s-main", "src/a.py", "a = 1\n"))
    write_project(claude_home, worktree, "s-wt", claude_session(worktree, "s-wt", "src/b.py", "b = 2\n"))
    write_project(claude_home, repo / "sub", "s-sub", claude_session(repo / "sub", "s-sub", "c.py", "c = 3\n"))
    write_project(claude_home, other, "s-other", claude_session(other, "s-other", "d.py", "d = 4\n"))
    codex_rollout(codex_home, repo, "019a0000-0000-7000-8000-000000000001")
    codex_rollout(codex_home, other, "019a0000-0000-7000-8000-000000000002")
    run_engram(repo, "init")
    env = {"CLAUDE_CONFIG_DIR": str(claude_home), "CODEX_HOME": str(codex_home)}
    out = run_engram(repo, "ingest", env=env).stdout
    assert "4 sessions" in out
    tapes = {t["session_id"]: t for t in json.loads(run_engram(repo, "tapes", "--json").stdout)}
    assert set(tapes) == {"s-main", "s-wt", "s-sub", "019a0000-0000-7000-8000-000000000001"}
    files = {}
    for sid in ("s-main", "s-wt", "s-sub"):
        evs = shown_events(repo, sid)
        files[sid] = [e["file"] for e in evs if e["kind"] == "code.edit"]
    # Worktree paths land on the same files here; a session started in a subfolder keeps its folder.
    assert files == {"s-main": ["src/a.py"], "s-wt": ["src/b.py"], "s-sub": ["sub/c.py"]}
    again = run_engram(repo, "ingest", env=env).stdout
    assert "0 new tapes" in again


def test_map_makes_a_session_of_another_checkout_found_by_discovery(tmp_path: Path) -> None:
    """`engram ingest --claude DIR --codex DIR --map FROM=TO`: a session recorded in another
    checkout is this repository's when FROM maps its cwd here, as capture maps its paths (discovery
    once compared the recorded cwd, so the sessions "ran elsewhere" and nothing was captured)."""
    repo = committed_repo(tmp_path / "proj")
    recorded = Path("/home/someone/work/proj")
    claude_home, codex_home = tmp_path / "claude", tmp_path / "codex"
    write_project(claude_home, recorded, "s-there", claude_session(recorded, "s-there", "src/a.py", "a = 1\n"))
    codex_rollout(codex_home, recorded, "019a0000-0000-7000-8000-000000000003")
    run_engram(repo, "init")
    dirs = ["--claude", str(claude_home / "projects"), "--codex", str(codex_home)]
    unmapped = run_engram(repo, "ingest", *dirs).stdout
    assert unmapped.startswith("ingest: 0 sessions") and "ran elsewhere: /home/someone/work/proj" in unmapped
    out = run_engram(repo, "ingest", *dirs, "--map", f"{recorded}={repo}").stdout
    assert out.startswith("ingest: 2 sessions, 2 new tapes"), out
    evs = shown_events(repo, "s-there")
    assert [e["file"] for e in evs if e["kind"] == "code.edit"] == ["src/a.py"]


def test_edits_in_any_worktree_land_on_repository_paths(tmp_path: Path) -> None:
    """Agents work in linked worktrees: beside the checkout, or nested in it (`.claude/worktrees/`),
    and a session started in one tree may edit files in another. Each edit is a code edit of the
    same repository path, not a tool event (outside every tree) or a path under the nested tree."""
    repo = committed_repo(tmp_path / "proj")
    beside = tmp_path / "proj.worktrees" / "feature"
    git(repo, "worktree", "add", "-q", str(beside))
    nested = repo / ".claude" / "worktrees" / "fix"
    git(repo, "worktree", "add", "-q", str(nested))
    claude_home = tmp_path / "claude"
    cross = claude_session(repo, "s-cross", "x", "e = 5\n")  # started in the checkout, writes in the sibling tree
    for rec in cross:
        text = json.dumps(rec).replace(str(repo / "x"), str(beside / "src" / "e.py"))
        rec.clear()
        rec.update(json.loads(text))
    write_project(claude_home, repo, "s-cross", cross)
    write_project(claude_home, nested, "s-nested", claude_session(nested, "s-nested", "src/f.py", "f = 6\n"))
    run_engram(repo, "init")
    run_engram(repo, "ingest", env={"CLAUDE_CONFIG_DIR": str(claude_home), "CODEX_HOME": str(tmp_path / "none")})
    files = {}
    for sid in ("s-cross", "s-nested"):
        evs = shown_events(repo, sid)
        files[sid] = [e["file"] for e in evs if e["kind"] == "code.edit"]
    assert files == {"s-cross": ["src/e.py"], "s-nested": ["src/f.py"]}


def test_a_worktree_the_session_entered_and_removed_still_lands_on_repository_paths(tmp_path: Path) -> None:
    """Claude Code can move a running session into a new worktree (`worktree-state` records,
    Claude Code 2.1) and removes it when the work is done, before engram ingests the session:
    git no longer lists it, yet its files are the repository's."""
    repo = committed_repo(tmp_path / "proj")
    gone = repo / ".claude" / "worktrees" / "fix"  # never created here: removed before the ingest
    recs = claude_session(repo, "s-entered", "x", "g = 7\n")
    for rec in recs:
        text = json.dumps(rec).replace(str(repo / "x"), str(gone / "src" / "g.py"))
        rec.clear()
        rec.update(json.loads(text))
    recs.insert(1, {"type": "worktree-state", "sessionId": "s-entered", "worktreeSession": {
        "originalCwd": str(repo), "preEnterOriginalCwd": str(repo), "worktreePath": str(gone),
        "worktreeName": "fix", "worktreeBranch": "worktree-fix", "originalBranch": "main",
        "sessionId": "s-entered", "enteredExisting": False}})
    claude_home = tmp_path / "claude"
    write_project(claude_home, repo, "s-entered", recs)
    run_engram(repo, "init")
    run_engram(repo, "ingest", env={"CLAUDE_CONFIG_DIR": str(claude_home), "CODEX_HOME": str(tmp_path / "none")})
    evs = shown_events(repo, "s-entered")
    assert [e["file"] for e in evs if e["kind"] == "code.edit"] == ["src/g.py"]


@contextlib.contextmanager
def watching(repo: Path, f: Path) -> Iterator[subprocess.Popen[str]]:
    """`engram ingest --watch F` running in `repo`, stopped with Ctrl-C after: it must exit 0."""
    # Ctrl-C's SIGINT as a terminal delivers it: a suite started in the background (`pytest &`)
    # passes on the shell's SIG_IGN, and Python then never turns SIGINT into KeyboardInterrupt.
    proc = subprocess.Popen([sys.executable, "-m", "engram.cli", "ingest", "--watch", str(f)], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:  # communicate, not wait: the pipes are drained, so a chatty child cannot block on them
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"engram ingest --watch did not stop on Ctrl-C within 30 s\n{err}") from None
    assert proc.returncode == 0, err


def wait_for_edits(repo: Path, deadline: float) -> int:
    """The edits of the repository's tapes, once there are any (0 at the deadline)."""
    edits = 0
    while time.monotonic() < deadline and not edits:
        time.sleep(0.5)
        edits = sum(t["edits"] for t in json.loads(run_engram(repo, "tapes", "--json").stdout or "[]"))
    return edits


def watched_session(tmp_path: Path) -> tuple[Path, list[dict], Path]:
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q")
    run_engram(repo, "init")
    recs = claude_session(repo, "live", "src/a.py", "a = 1\n")
    f = tmp_path / "live.jsonl"
    f.write_text(json.dumps(recs[0]) + "\n")
    return repo, recs, f


def test_watch_captures_what_a_live_session_appends(tmp_path: Path) -> None:
    repo, recs, f = watched_session(tmp_path)
    with watching(repo, f):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not json.loads(run_engram(repo, "tapes", "--json").stdout or "[]"):
            time.sleep(0.3)
        with f.open("a") as g:
            g.write("".join(json.dumps(r) + "\n" for r in recs[1:]))
        assert wait_for_edits(repo, deadline) == 1


def test_watch_outlives_its_file_going_away_and_coming_back(tmp_path: Path) -> None:
    """A watched file that goes away (an editor's save that replaces it, a transcript moved back) is
    waited for: the watch ended with 'no such file or directory' and captured nothing more."""
    repo, recs, f = watched_session(tmp_path)
    with watching(repo, f) as proc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not json.loads(run_engram(repo, "tapes", "--json").stdout or "[]"):
            time.sleep(0.3)
        f.unlink()
        time.sleep(3)  # (a pass of the watch, every 2 s, sees it gone)
        f.write_text("".join(json.dumps(r) + "\n" for r in recs))
        assert wait_for_edits(repo, deadline) == 1
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""


@pytest.mark.parametrize("args,message,status", [
    (["--claude", "/nonexistent/projects"], "--claude /nonexistent/projects: no such directory", 1),
    (["--codex", "/nonexistent/.codex"], "--codex /nonexistent/.codex: no such directory", 1),
    (["--map", "=/work"], "argument --map: '=/work': FROM is empty", 2),
    (["--map", "nonsense"], "argument --map: 'nonsense': expected FROM=TO", 2),
])
def test_a_mistyped_ingest_option_is_an_error_not_zero_sessions(repo: Path, args: list[str], message: str,
                                                                 status: int) -> None:
    """A typo in --claude or --codex used to report "0 sessions", as if there were none; a --map
    that is no FROM=TO is a usage error (status 2), as every other malformed option value is."""
    proc = run_engram(repo, "ingest", *args, check=False)
    assert proc.returncode == status and message in proc.stderr and "Traceback" not in proc.stderr


def test_a_pipe_given_as_a_transcript_is_named_for_what_it_is(repo: Path, tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    proc = run_engram(repo, "ingest", str(fifo), check=False)
    assert proc.returncode == 1 and "not a regular file or a directory" in proc.stderr
    assert "no such file" not in proc.stderr


def claude_writes(cwd: str, session: str, writes: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A Claude Code session (recorded elsewhere: `cwd` need not exist here) that creates files
    by absolute path with Write, each call followed by its result."""
    base = {"cwd": cwd, "sessionId": session, "version": "2.1.39", "gitBranch": "main", "userType": "external",
            "isSidechain": False}
    recs: list[dict[str, Any]] = [{**base, "type": "user", "uuid": f"{session}-0", "parentUuid": None,
                                   "timestamp": "2026-03-01T10:00:00Z",
                                   "message": {"role": "user", "content": "set these up"}}]
    for i, (path, content) in enumerate(writes, 1):
        recs.append({**base, "type": "assistant", "uuid": f"{session}-{i}a", "parentUuid": recs[-1]["uuid"],
                     "timestamp": f"2026-03-01T10:00:{i:02d}Z", "message": {
                         "model": "claude-opus-4-6", "role": "assistant", "content": [
                             {"type": "tool_use", "id": f"toolu_{session}_{i}", "name": "Write",
                              "input": {"file_path": path, "content": content}}]}})
        recs.append({**base, "type": "user", "uuid": f"{session}-{i}r", "parentUuid": recs[-1]["uuid"],
                     "timestamp": f"2026-03-01T10:00:{i:02d}Z",
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": f"toolu_{session}_{i}",
                          "content": f"File created successfully at: {path}"}]},
                     "toolUseResult": {"type": "create", "filePath": path, "content": content, "structuredPatch": [],
                                       "originalFile": None}})
    return recs


def write_session(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def edited_files(repo: Path, session: str) -> list[str]:
    return [e["file"] for e in shown_events(repo, session) if e["kind"] == "code.edit"]


HOME_WRITES = [("/Users/alice/bin/backup.sh", "#!/bin/sh\nrsync -a ~/src /Volumes/backup\n"),
               ("/Users/alice/.ssh/config", "Host build\n  HostName build.example.com\n"),
               ("/Users/alice/Applications/Notes.app/Contents/notes.txt", "remember the milk\n"),
               ("/Users/alice/src/proj/app.py", "print('hello')\n")]


def test_a_session_started_in_the_home_directory_edits_no_repository_file_unmapped(tmp_path: Path) -> None:
    """A session whose cwd was the home directory edited dotfiles and tools beside the project.
    A home directory is no repository's root: `~/bin/backup.sh` is not the repository's
    `bin/backup.sh`. Such edits stay tool calls, counted in the summary; the project's own file
    lands where `--map` puts it."""
    repo = committed_repo(tmp_path / "proj")
    run_engram(repo, "init")
    plain = write_session(tmp_path / "s" / "home.jsonl", claude_writes("/Users/alice", "s-home", HOME_WRITES))
    out = run_engram(repo, "ingest", str(plain)).stdout
    assert edited_files(repo, "s-home") == []
    assert "edits not recorded: 4 × outside the repository" in out, out
    assert "--map FROM=TO" in out
    mapped = write_session(tmp_path / "m" / "home.jsonl", claude_writes("/Users/alice", "s-mapped", HOME_WRITES))
    out = run_engram(repo, "ingest", "--map", f"/Users/alice/src/proj={repo}", str(mapped)).stdout
    assert edited_files(repo, "s-mapped") == ["app.py"]
    assert "edits not recorded: 3 × outside the repository" in out, out


def test_files_under_dot_git_are_never_code(tmp_path: Path) -> None:
    repo = committed_repo(tmp_path / "proj")
    run_engram(repo, "init")
    hook = "#!/bin/sh\nexec make lint\n"
    writes = [(str(repo / ".git" / "hooks" / "pre-commit"), hook), (str(repo / "Makefile"), "lint:\n\truff .\n")]
    session = write_session(tmp_path / "s.jsonl", claude_writes(str(repo), "s-git", writes))
    out = run_engram(repo, "ingest", str(session)).stdout
    assert edited_files(repo, "s-git") == ["Makefile"]
    assert "1 × a file under .git/ (git's own, not code)" in out, out


def test_a_macos_path_in_another_case_is_the_same_file(tmp_path: Path) -> None:
    """macOS (and Windows) file names ignore case: an agent that typed `~/documents/proj/SRC/App.py`
    wrote the real `~/Documents/proj/src/app.py`. Recorded so, with the checkout mapped in the
    case of the other spelling, it is still the repository's `src/app.py`."""
    repo = committed_repo(tmp_path / "proj")
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('old')\n")
    run_engram(repo, "init")
    writes = [("/Users/alice/documents/proj/SRC/App.py", "print('new')\n"),
              ("/Users/alice/Documents/proj/docs/new.md", "# New\n")]
    recs = claude_writes("/Users/alice/Documents/proj", "s-case", writes)
    out = run_engram(repo, "ingest", "--map", f"/users/alice/DOCUMENTS/proj={repo}",
                     str(write_session(tmp_path / "s.jsonl", recs))).stdout
    assert edited_files(repo, "s-case") == ["src/app.py", "docs/new.md"]  # an existing file takes its real case
    assert "not recorded" not in out, out
    # Without --map, paths are taken relative to the recorded cwd, case-insensitively too.
    recs = claude_writes("/Users/alice/Documents/proj", "s-case-2", writes)
    run_engram(repo, "ingest", str(write_session(tmp_path / "s2.jsonl", recs)))
    assert edited_files(repo, "s-case-2") == ["src/app.py", "docs/new.md"]
