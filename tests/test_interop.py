"""Interop (issue 51, point 5): an Entire checkpoint branch and git-ai notes in the repository are
read by `engram ingest`, and Agent Trace records go out and come back in, with real git and the
real command line. Each source is built here from its published format: Entire's checkpoint tree
(entireio/cli), the Git AI Standard v3.0.0 note, the Agent Trace 0.1.0 record schema."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.claude_shapes import Session, code_lines, joined
from tests.conftest import FIXTURES, git, run_engram, unpack

SESSION = "5f0c1e2a-7b3d-4c8e-9a41-0d2e6b7c8f90"
OTHER_CWD = Path("/Users/alice/src/app")  # recorded on another machine: no such directory here


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No harness folders of the user's own: only what the repository holds is found."""
    (tmp_path / "claude").mkdir()
    (tmp_path / "codex").mkdir()
    return {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "CODEX_HOME": str(tmp_path / "codex"),
            "ENGRAM_LOCAL": "1"}


def _session(lines: list[str], rel: str = "app/net.py", sid: str = SESSION) -> Session:
    s = Session(OTHER_CWD, sid)
    s.prompt("Write the retry helper for the network client, with exponential back-off")
    s.write(rel, joined(lines))
    return s


def _repo(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "add the code")
    return root


def _commit_tree(root: Path, files: dict[str, bytes], ref: str, message: str) -> str:
    """Commit `files` (path → bytes) as the whole tree of `ref`, with git's plumbing (no checkout)."""
    index = root / ".git" / "engram-test-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def run(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", *args], cwd=root, input=data, capture_output=True, check=True,
                              env=env).stdout.decode().strip()

    for path, data in files.items():
        blob = run("hash-object", "-w", "--stdin", data=data)
        run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    tree = run("write-tree")
    commit = run("commit-tree", tree, "-m", message)
    run("update-ref", ref, commit)
    index.unlink()
    return commit


def _checkpoint(cid: str, sessions: list[tuple[str, bytes, list[str]]]) -> dict[str, bytes]:
    """The files of one Entire checkpoint (layout of entireio/cli's entire/checkpoints/v1)."""
    base = f"{cid[:2]}/{cid[2:]}"
    files: dict[str, bytes] = {}
    entries = []
    touched: list[str] = []
    for n, (sid, transcript, files_touched) in enumerate(sessions):
        d = f"{base}/{n}"
        files[f"{d}/full.jsonl"] = transcript
        files[f"{d}/prompt.txt"] = b"Write the retry helper\n"
        files[f"{d}/content_hash.txt"] = b"sha256:0\n"
        files[f"{d}/metadata.json"] = json.dumps({
            "checkpoint_id": cid, "session_id": sid, "strategy": "manual-commit",
            "created_at": "2026-03-01T10:05:00Z", "checkpoints_count": 1, "files_touched": files_touched,
            "agent": "Claude Code"}).encode()
        entries.append({"metadata": f"/{d}/metadata.json", "transcript": f"/{d}/full.jsonl",
                        "content_hash": f"/{d}/content_hash.txt", "prompt": f"/{d}/prompt.txt"})
        touched += files_touched
    files[f"{base}/metadata.json"] = json.dumps({"checkpoint_id": cid, "strategy": "manual-commit",
                                                 "checkpoints_count": 1, "files_touched": sorted(set(touched)),
                                                 "sessions": entries}).encode()
    return files


def _transcript(s: Session) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in s.records).encode()


def _explain(root: Path, span: str, env: dict[str, str]) -> list[dict[str, Any]]:
    sessions: list[dict[str, Any]] = json.loads(run_engram(root, "explain", span, "--budget", "0", env=env).stdout)[
        "sessions"]
    return sessions


def _tapes(root: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    tapes: list[dict[str, Any]] = json.loads(run_engram(root, "tapes", "--json", env=env).stdout)
    return tapes


def _store_files(root: Path) -> dict[str, bytes]:
    tapes = root / ".engram" / "tapes"
    return {p.name: p.read_bytes() for p in sorted(tapes.iterdir())} if tapes.is_dir() else {}


# --------------------------------------------------------------------------- Entire


def test_an_entire_checkpoint_branch_is_ingested_and_explain_finds_its_session(tmp_path: Path, env: dict[str, str]
                                                                               ) -> None:
    lines = code_lines("retry", 24)
    s = _session(lines)
    root = _repo(tmp_path, "repo", {"app/net.py": joined(lines)})
    _commit_tree(root, _checkpoint("a1b2c3d4e5f6", [(SESSION, _transcript(s), ["app/net.py"])]),
                 "refs/heads/entire/checkpoints/v1", "Checkpoint: a1b2c3d4e5f6")
    run_engram(root, "init", env=env)
    out = run_engram(root, "ingest", env=env).stdout
    assert "Entire checkpoints (entire/checkpoints/v1): 1 session" in out
    # the repository's sessions are what this ingest reads: no "looked for sessions ... give their files"
    assert "looked for sessions" not in out and "engram ingest PATH" not in out, out
    sessions = _explain(root, "app/net.py:5-12", env)
    assert sessions and sessions[0]["session_id"] == SESSION and sessions[0]["harness"] == "claude-code"
    before = _store_files(root)
    out = run_engram(root, "ingest", env=env).stdout  # the cache says nothing changed
    assert "looked for sessions" not in out, out
    (root / ".engram" / "run" / "interop.json").unlink()
    again = run_engram(root, "ingest", "--json", env=env).stdout
    assert _store_files(root) == before  # read again from scratch: the session is held, nothing new
    assert json.loads(again)["repository"]["entire"]["sessions"] == 1


def test_a_grown_entire_session_adds_only_its_new_part(tmp_path: Path, env: dict[str, str]) -> None:
    first, more = code_lines("grow", 20), code_lines("later", 20)
    s = _session(first)
    root = _repo(tmp_path, "repo", {"app/net.py": joined(first), "app/later.py": joined(more)})
    _commit_tree(root, _checkpoint("0011223344aa", [(SESSION, _transcript(s), ["app/net.py"])]),
                 "refs/heads/entire/checkpoints/v1", "Checkpoint: 0011223344aa")
    run_engram(root, "init", env=env)
    run_engram(root, "ingest", env=env)
    s.prompt("Now the second module")
    s.write("app/later.py", joined(more))
    grown = _checkpoint("0011223344aa", [(SESSION, _transcript(s), ["app/net.py"])])
    grown.update(_checkpoint("5566778899bb", [(SESSION, _transcript(s), ["app/later.py"])]))
    # the later checkpoint is the latest entry of the session
    grown["55/66778899bb/0/metadata.json"] = grown["55/66778899bb/0/metadata.json"].replace(
        b"2026-03-01T10:05:00Z", b"2026-03-01T11:00:00Z")
    _commit_tree(root, grown, "refs/heads/entire/checkpoints/v1", "Checkpoint: 5566778899bb")
    run_engram(root, "ingest", env=env)
    tapes = [t for t in _tapes(root, env) if t["session_id"] == SESSION]
    assert len(tapes) == 2 and {t["prev"] for t in tapes} == {None, tapes[0]["id"] if tapes[1]["prev"] else
                                                                 tapes[1]["id"]}  # a second segment, not a copy
    assert _explain(root, "app/later.py:3-9", env)[0]["session_id"] == SESSION


def test_a_sessions_pieces_merge_into_one_transcript() -> None:
    """Entire's full.jsonl is the whole session so far or only its part since the previous
    checkpoint (entireio/cli's branch has both): either way every record comes out once, in order."""
    from engram.interop.entire import merge_pieces

    def rec(n: int) -> bytes:
        return json.dumps({"uuid": f"u{n}", "type": "user", "sessionId": "s"}).encode()

    whole_so_far = [b"\n".join(rec(i) for i in range(k)) + b"\n" for k in (2, 4)]
    assert merge_pieces(whole_so_far) == whole_so_far[-1]
    since_last = [b"\n".join(rec(i) for i in (0, 1)), b"\n".join(rec(i) for i in (1, 2, 3)), rec(4)]
    assert merge_pieces(since_last) == b"\n".join(rec(i) for i in range(5)) + b"\n"


ENTIRE_FIXTURE = FIXTURES / "entire"


def test_a_real_entire_checkpoint_from_entireio_cli_is_ingested(tmp_path: Path, env: dict[str, str]) -> None:
    """A real checkpoint of entireio/cli's own branch (MIT; tests/fixtures/entire/NOTICE.md), its
    tree rebuilt as the branch has it; the file its session wrote is put back in the repository."""
    from engram.cli.demo import final_files

    tree = unpack(ENTIRE_FIXTURE / "checkpoints", tmp_path / "checkpoints")
    files = {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}
    meta = next(json.loads(v) for k, v in files.items() if k.count("/") == 3 and k.endswith("metadata.json"))
    transcript = tmp_path / "full.jsonl"
    transcript.write_bytes(next(v for k, v in files.items() if k.endswith("full.jsonl")))
    cwd = next(json.loads(line)["cwd"] for line in transcript.read_text().splitlines() if '"cwd"' in line)
    written = {path[len(cwd) + 1:]: text for path, text in final_files(transcript).items() if path.startswith(cwd)}
    assert written, "the excerpt's session writes a file"
    root = _repo(tmp_path, "cli", written)
    _commit_tree(root, files, "refs/heads/entire/checkpoints/v1", "Checkpoint")
    run_engram(root, "init", env=env)
    run_engram(root, "ingest", env=env)
    own = meta["session_id"].removeprefix("2026-01-06-")  # the transcript's own id (see NOTICE.md)
    assert own in {t["session_id"] for t in _tapes(root, env)}
    rel, text = max(written.items(), key=lambda kv: len(kv[1]))
    n = len(text.splitlines())
    sessions = _explain(root, f"{rel}:1-{min(n, 20)}", env)
    assert sessions[0]["session_id"] == own


def test_an_entire_ref_pointing_at_garbage_is_reported_and_nothing_is_written(tmp_path: Path, env: dict[str, str]
                                                                              ) -> None:
    root = _repo(tmp_path, "repo", {"a.py": "x = 1\n"})
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=b"not a commit\n",
                          capture_output=True, check=True).stdout.decode().strip()
    ref = root / ".git" / "refs" / "heads" / "entire" / "checkpoints" / "v1"
    ref.parent.mkdir(parents=True)
    ref.write_text(blob + "\n")
    run_engram(root, "init", env=env)
    proc = run_engram(root, "ingest", env=env)
    assert "refs/heads/entire/checkpoints/v1 points at a blob" in proc.stdout
    assert _store_files(root) == {}


# --------------------------------------------------------------------------- git-ai


def _note(commit: str, sid: str, attest: str) -> str:
    """An authorship/3.0.0 log (Git AI Standard v3.0.0, sections 1.2.3-1.2.5)."""
    meta = {"schema_version": "authorship/3.0.0", "git_ai_version": "1.4.5", "base_commit_sha": commit,
            "prompts": {}, "humans": {"h_31dce776f88375": {"author": "Dev <dev@example.com>"}},
            "sessions": {"s_c9883b05a2487d": {"agent_id": {"tool": "claude", "id": sid,
                                                          "model": "claude-sonnet-4-5-20250514"},
                                              "human_author": "dev@example.com"}}}
    return attest + "---\n" + json.dumps(meta, indent=2) + "\n"


def test_a_git_ai_note_becomes_evidence_of_the_session_that_wrote_the_lines(tmp_path: Path, env: dict[str, str]
                                                                            ) -> None:
    ai, human = code_lines("ai", 12), code_lines("human", 6)
    root = _repo(tmp_path, "repo", {"src/lib.py": joined(ai + human)})
    head = git(root, "rev-parse", "HEAD").strip()
    note = _note(head, "conv_abc123", "src/lib.py\n  s_c9883b05a2487d::t_9f8e7d6c5b4a32 1-12\n  h_31dce776f88375 13-18\n")
    git(root, "notes", "--ref=ai", "add", "-m", note, head)
    run_engram(root, "init", env=env)
    out = run_engram(root, "ingest", env=env).stdout
    assert "git-ai notes (refs/notes/ai): 1 note, 1 session' lines" in out
    assert "looked for sessions" not in out, out
    assert "looked for sessions" not in run_engram(root, "ingest", env=env).stdout  # unchanged notes
    sessions = _explain(root, "src/lib.py:3-10", env)
    assert sessions[0]["session_id"] == "conv_abc123" and sessions[0]["harness"] == "git-ai"
    assert sessions[0]["model"] == "claude-sonnet-4-5-20250514"
    regions = json.loads(run_engram(root, "blame", "src/lib.py", "--json", env=env).stdout)["regions"]
    assert [(r["lines"], r["session_id"]) for r in regions] == [([1, 12], "conv_abc123"), ([13, 18], None)]
    before = _store_files(root)
    (root / ".engram" / "run" / "interop.json").unlink()
    run_engram(root, "ingest", env=env)
    assert _store_files(root) == before


def test_a_git_ai_note_of_another_schema_is_reported_and_nothing_is_written(tmp_path: Path, env: dict[str, str]
                                                                           ) -> None:
    root = _repo(tmp_path, "repo", {"src/lib.py": joined(code_lines("v", 8))})
    head = git(root, "rev-parse", "HEAD").strip()
    bad = _note(head, "conv_x", "src/lib.py\n  s_c9883b05a2487d::t_0 1-8\n").replace("authorship/3.0.0",
                                                                                       "authorship/9.0.0")
    git(root, "notes", "--ref=ai", "add", "-m", bad, head)
    run_engram(root, "init", env=env)
    out = run_engram(root, "ingest", env=env).stdout
    assert "schema_version 'authorship/9.0.0' is not authorship/3.0.0" in out
    assert _store_files(root) == {}


# --------------------------------------------------------------------------- Agent Trace


@pytest.fixture
def written(tmp_path: Path, env: dict[str, str]) -> Path:
    """A repository whose app/net.py a captured session wrote, committed."""
    lines = code_lines("trace", 30)
    s = _session(lines)
    root = _repo(tmp_path, "origin", {"app/net.py": joined(lines), "README.md": "hello\n"})
    run_engram(root, "init", env=env)
    run_engram(root, "ingest", str(s.save(tmp_path / "sessions")), env=env)
    return root


def _export(root: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    out = run_engram(root, "export", "--agent-trace", *args, env=env).stdout
    assert out.count("\n") == 1  # one record, JSON Lines
    record: dict[str, Any] = json.loads(out)
    return record


def test_export_writes_an_agent_trace_record_of_the_sessions_that_wrote_the_lines(written: Path,
                                                                                   env: dict[str, str]) -> None:
    rec = _export(written, env)
    assert rec["version"] == "0.1.0" and rec["vcs"] == {"type": "git",
                                                        "revision": git(written, "rev-parse", "HEAD").strip()}
    assert rec["tool"]["name"] == "engram" and len(rec["id"]) == 36
    (entry,) = rec["files"]
    assert entry["path"] == "app/net.py"
    (conv,) = entry["conversations"]
    assert conv["url"] == f"engram:session/{SESSION}"
    assert conv["contributor"] == {"type": "ai", "model_id": "anthropic/claude-opus-4-6"}
    (rng,) = conv["ranges"]
    assert (rng["start_line"], rng["end_line"]) == (1, 30) and rng["content_hash"].startswith("sha256:")
    fps = rec["metadata"]["dev.engram"]["fingerprints"]
    assert fps["ranges"][rng["content_hash"]] and all(len(h) == 16 for h in fps["ranges"][rng["content_hash"]])
    assert _export(written, env, "app/net.py")["files"][0]["path"] == "app/net.py"  # FILE: its lines now


def test_export_to_a_folder_that_is_not_there_is_refused_and_makes_nothing(written: Path, tmp_path: Path,
                                                                           env: dict[str, str]) -> None:
    """`export -o` into a folder that does not exist made the folders and said it wrote there; a
    typo'd path is an error, and nothing is made."""
    target = tmp_path / "no" / "such" / "trace.jsonl"
    bad = run_engram(written, "export", "--agent-trace", "-o", str(target), env=env, check=False)
    assert bad.returncode == 1 and bad.stderr == f"engram: -o {target}: no such directory {target.parent}\n"
    assert not (tmp_path / "no").exists()
    bad = run_engram(written, "export", "--agent-trace", "-o", str(tmp_path), env=env, check=False)
    assert bad.returncode == 1 and bad.stderr == f"engram: -o {tmp_path}: a directory; name the file to write\n"
    run_engram(written, "export", "--agent-trace", "-o", str(tmp_path / "trace.jsonl"), env=env)
    assert json.loads((tmp_path / "trace.jsonl").read_text())["version"] == "0.1.0"
    bad = run_engram(written, "import", "--agent-trace", str(tmp_path), env=env, check=False)  # (was "no such file")
    assert bad.returncode == 1 and bad.stderr == f"engram: {tmp_path}: a directory; name the Agent Trace file (JSON Lines) in it\n"
    bad = run_engram(written, "import", "--agent-trace", os.devnull, env=env, check=False)  # (was "no such file")
    assert bad.returncode == 1 and "not a regular file" in bad.stderr and "no such file" not in bad.stderr


def test_an_exported_record_imported_in_a_clone_explains_the_lines(written: Path, tmp_path: Path,
                                                                   env: dict[str, str]) -> None:
    record = tmp_path / "trace.jsonl"
    run_engram(written, "export", "--agent-trace", "-o", str(record), env=env)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(written), str(clone))
    run_engram(clone, "init", env=env)
    out = run_engram(clone, "import", "--agent-trace", str(record), env=env).stdout
    assert "1 with text from the record's revision" in out
    sessions = _explain(clone, "app/net.py:10-20", env)
    assert sessions[0]["session_id"] == SESSION and sessions[0]["harness"] == "agent-trace"
    before = _store_files(clone)
    moved = tmp_path / "elsewhere.jsonl"  # the same record from another file: the same tape
    moved.write_bytes(record.read_bytes())
    again = run_engram(clone, "import", "--agent-trace", str(moved), env=env).stdout
    assert "0 new tapes (1 already held)" in again and _store_files(clone) == before
    run_engram(clone, "tapes", "rm", SESSION, env=env)  # taken back: an import respects it, as ingest does
    out = run_engram(clone, "import", "--agent-trace", str(record), env=env).stdout
    assert "(1 left out: removed by `engram tapes rm`)" in out and not _tapes(clone, env)


def test_a_reformatted_range_is_found_by_its_fingerprints(written: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """Elsewhere, without the record's commit, the code was reformatted (indented anew, a call
    wrapped over two lines): the SHA-256 no longer matches, the fingerprints do."""
    record = tmp_path / "trace.json"
    record.write_text(json.dumps(_export(written, env)))
    lines = (written / "app/net.py").read_text().splitlines()
    reformatted = ["# formatted", ""] + ["\t" + ln.strip().replace(" + ", " +\n\t\t") for ln in lines]
    other = _repo(tmp_path, "other", {"app/net.py": "\n".join(reformatted) + "\n"})
    run_engram(other, "init", env=env)
    out = run_engram(other, "import", "--agent-trace", str(record), env=env).stdout
    assert "1 with text from the working tree (by Engram fingerprints)" in out
    n = len((other / "app/net.py").read_text().splitlines())
    sessions = _explain(other, f"app/net.py:10-{n - 5}", env)
    assert sessions[0]["session_id"] == SESSION


def test_a_foreign_record_without_text_says_what_it_lacks(tmp_path: Path, env: dict[str, str]) -> None:
    """The specification's own example (section 6.2): its revision is not here, its murmur3 hash
    cannot be checked: the ranges are kept, not matched, and the summary says why."""
    root = _repo(tmp_path, "repo", {"src/utils/parser.ts": "export const x = 1;\n"})
    run_engram(root, "init", env=env)
    example = {"version": "0.1.0", "id": "550e8400-e29b-41d4-a716-446655440000", "timestamp": "2026-01-23T14:30:00Z",
               "vcs": {"type": "git", "revision": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0"},
               "tool": {"name": "cursor", "version": "2.4.0"},
               "files": [{"path": "src/utils/parser.ts", "conversations": [{
                   "url": "https://api.cursor.com/v1/conversations/12345",
                   "contributor": {"type": "ai", "model_id": "anthropic/claude-opus-4-5-20251101"},
                   "ranges": [{"start_line": 42, "end_line": 67, "content_hash": "murmur3:9f2e8a1b"}]}]}]}
    path = tmp_path / "cursor.json"
    path.write_text(json.dumps(example))
    out = run_engram(root, "import", "--agent-trace", str(path), env=env).stdout
    assert "1 without text, kept but not matched: the record's revision is not in this repository" in out
    (tape,) = _tapes(root, env)
    assert tape["session_id"] == "https://api.cursor.com/v1/conversations/12345" and tape["harness"] == "agent-trace"


@pytest.mark.parametrize("content, message", [
    (b'{"version": "0.1.0", "id": ', "line 2 is not JSON"),
    (b'{"version": "2.0.0", "id": "x", "timestamp": "2026-01-01T00:00:00Z", "files": []}',
     "version 2.0.0 is not supported"),
    (b'{"version": "0.1.0", "id": "x", "timestamp": "2026-01-01T00:00:00Z"}', "lacks the required field `files`"),
    (b'{"version": "0.1.0", "id": "x", "timestamp": "t", "files": [{"path": "../../etc/passwd", "conversations": []}]}',
     "is not a path relative to the repository root"),
    ((b'{"version": "0.1.0", "id": "x", "timestamp": "t", "files": [{"path": "a.py", "conversations": '
      b'[{"ranges": [{"start_line": 9, "end_line": 3}]}]}]}'), "ends before it starts"),
])
def test_a_bad_agent_trace_file_is_refused_and_the_store_is_untouched(written: Path, tmp_path: Path,
                                                                      env: dict[str, str], content: bytes,
                                                                      message: str) -> None:
    good = _export(written, env)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(good).encode() + b"\n" + content + b"\n")  # a good record first: all or nothing
    before = _store_files(written)
    proc = run_engram(written, "import", "--agent-trace", str(path), check=False, env=env)
    assert proc.returncode == 1 and message in proc.stderr
    assert _store_files(written) == before
