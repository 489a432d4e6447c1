"""The notes in the agent's loop: `engram hook` given Claude Code's real PreToolUse and SessionStart
payloads on stdin answers with the notes as additional context, says nothing when there is
nothing (or when it cannot answer in time), and never fails on garbage; `engram setup` adds and
removes these hooks; the MCP `explain` tool carries the notes anchored to the span."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import pytest_lsp
from conftest import RETRY_PY, SPOTTER_MAIN, build_spot_repo, created_by, run_engram
from lsprotocol import types
from mcp import Client, StdioServerParameters
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

HOOK = [sys.executable, "-m", "engram_server.entry", "hook"]


@pytest.fixture
def repo(repo: Path) -> Path:
    (repo / "net.py").write_text(RETRY_PY + "\n\ndef unrelated():\n    return 42\n")
    return repo


def remember(repo: Path, text: str, at: str, *extra: str) -> str:
    return run_engram(repo, "remember", text, "--at", at, *extra).stdout.strip()


def payload(repo: Path, tool: str, tool_input: dict, event: str = "PreToolUse") -> str:
    """A PreToolUse payload as Claude Code 2.1 sends it on stdin."""
    return json.dumps({"session_id": "3d8a6f1e-5b7c-4e2a-9f10-2c4b6d8e0a12",
                       "transcript_path": str(repo / "no-such-transcript.jsonl"), "cwd": str(repo),
                       "permission_mode": "default", "hook_event_name": event, "tool_name": tool,
                       "tool_input": tool_input, "tool_use_id": "toolu_01ABCDEF"})


def hook(repo: Path, stdin: str | bytes, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run(HOOK, cwd=repo, input=stdin.encode() if isinstance(stdin, str) else stdin,
                          capture_output=True, timeout=60,
                          # a deadline a loaded test machine cannot miss (the deadline has its own test)
                          env={**os.environ, "ENGRAM_LOCAL": "1", "ENGRAM_HOOK_DEADLINE_MS": "20000", **(env or {})})
    return proc, time.monotonic() - t0


def context(proc: subprocess.CompletedProcess, event: str = "PreToolUse") -> str:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["hookSpecificOutput"]["hookEventName"] == event
    return doc["hookSpecificOutput"]["additionalContext"]


def test_an_edit_gets_the_notes_on_its_lines_and_nothing_else(repo: Path) -> None:
    retry = remember(repo, "Retries back off exponentially: the upstream API rate-limits bursts", "net.py:4-10",
                     "--kind", "decision")
    other = remember(repo, "unrelated() is called by the plugin loader by name", "net.py:13-14")
    edit = {"file_path": str(repo / "net.py"), "old_string": "            time.sleep(2 ** i)\n",
            "new_string": "            time.sleep(1)\n", "replace_all": False}
    text = context(hook(repo, payload(repo, "Edit", edit))[0])
    assert retry in text and "rate-limits bursts" in text and "decision" in text
    assert other not in text and "net.py:9" in text

    multi = {"file_path": str(repo / "net.py"), "edits": [
        {"old_string": "    return 42", "new_string": "    return 43", "replace_all": False},
        {"old_string": "text added by the first edit", "new_string": "x", "replace_all": False}]}
    text = context(hook(repo, payload(repo, "MultiEdit", multi))[0])
    assert other in text and retry not in text

    write = {"file_path": str(repo / "net.py"), "content": "everything new\n"}
    text = context(hook(repo, payload(repo, "Write", write))[0])
    assert retry in text and other in text

    quiet = {"file_path": str(repo / "net.py"), "old_string": "import time", "new_string": "import time as t"}
    proc, _ = hook(repo, payload(repo, "Edit", quiet))
    assert proc.returncode == 0 and proc.stdout == b"", "no note on line 1, none drifted: nothing said"
    proc, _ = hook(repo, payload(repo, "Read", {"file_path": str(repo / "net.py")}))
    assert proc.stdout == b""


def test_drifted_notes_of_the_file_come_too_and_the_budget_says_what_it_left_out(repo: Path) -> None:
    gone = remember(repo, "unrelated() must stay: the plugin loader calls it by name", "net.py:13-14")
    text = RETRY_PY.replace("def retry(fn, attempts=5):", "def retry(fn, attempts=5):  # tuned")
    (repo / "net.py").write_text(text + "\n\n# the plugin loader was rewritten\n")
    edit = {"file_path": str(repo / "net.py"), "old_string": "import time", "new_string": "import time as t"}
    said = context(hook(repo, payload(repo, "Edit", edit))[0])
    assert gone in said and "vanished" in said and "changed or vanished" in said

    ids = [remember(repo, f"note {i}: " + "the retry loop is shared by every client " * 6, "net.py:4-10")
           for i in range(12)]
    (repo / ".engram" / "config.toml").write_text("[hooks]\nedit_budget = 200\n")
    edit = {"file_path": str(repo / "net.py"), "old_string": "            time.sleep(2 ** i)\n", "new_string": ""}
    said = context(hook(repo, payload(repo, "Edit", edit))[0])
    assert len(said.encode()) <= 200 * 4, "within the budget: 4 bytes of text a token"
    shown = [i for i in ids if i in said]
    assert 0 < len(shown) < len(ids)
    assert f"{len(ids) - len(shown) + 1} more notes left out to stay within 200 tokens" in said  # (+ the vanished one)
    assert "engram memory list --at net.py" in said


def test_without_a_server_the_hook_answers_from_sqlite_without_numpy_or_the_model(repo: Path) -> None:
    """No language server: the notes still come, at the lines their code moved to, and the hook
    process imports neither numpy nor onnxruntime (`-X importtime` lists every module it loads);
    a note whose code changed is named with where it was last found and said to have changed."""
    retry = remember(repo, "Retries back off exponentially: the upstream API rate-limits bursts", "net.py:4-10")
    other = remember(repo, "unrelated() is called by the plugin loader by name", "net.py:13-14")
    text = (repo / "net.py").read_text()
    (repo / "net.py").write_text("# a header\n# of three\n# lines\n" + text.replace("return 42", "return 43"))
    edit = {"file_path": str(repo / "net.py"), "old_string": "            time.sleep(2 ** i)\n", "new_string": ""}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-X", "importtime", *HOOK[1:]], cwd=repo, input=payload(repo, "Edit", edit),
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "ENGRAM_LOCAL": "1", "ENGRAM_HOOK_DEADLINE_MS": "20000"})
    assert time.monotonic() - t0 < 20
    said = context(proc)
    assert retry in said and "net.py:7-13" in said, "found 3 lines down, where its code is now"
    assert other in said and "net.py:13-14 (where it was last found; its code changed or vanished since)" in said
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "engram.memory.briefs" in loaded, "(the notes were read in this process)"
    assert not {m for m in loaded if m.split(".")[0] in ("numpy", "onnxruntime", "tokenizers")}


def test_session_start_gives_the_most_important_notes_first(repo: Path) -> None:
    start = json.dumps({"session_id": "s", "transcript_path": str(repo / "t.jsonl"), "cwd": str(repo),
                        "hook_event_name": "SessionStart", "source": "startup"})
    proc, _ = hook(repo, start)
    assert proc.returncode == 0 and proc.stdout == b"", "no notes: nothing said"
    low = remember(repo, "the tests need a running redis", "net.py:1-1", "--importance", "0.1")
    one = context(hook(repo, start)[0], "SessionStart")  # (it said "the most important of … 1 active notes")
    assert one.startswith("Engram notes: this repository's one active note; the notes on code you edit")
    pinned = remember(repo, "never log request bodies: they hold customer data", "net.py:4-10", "--pin")
    high = remember(repo, "retry() is the only place that sleeps", "net.py:4-10", "--importance", "0.9")
    said = context(hook(repo, start)[0], "SessionStart")
    assert said.index(pinned) < said.index(high) < said.index(low)
    assert "3 active notes" in said and "net.py:4-10" in said
    (repo / ".engram" / "config.toml").write_text("[hooks]\nsession_budget = 100\n")
    said = context(hook(repo, start)[0], "SessionStart")
    assert pinned in said and low not in said and "left out to stay within 100 tokens" in said and "engram recall" in said
    (repo / ".engram" / "config.toml").write_text("[hooks]\nsession_budget = 0\n")
    assert hook(repo, start)[0].stdout == b"", "a budget of 0 turns the brief off"


@pytest.mark.parametrize("stdin", [
    b"", b"not json", b"[1, 2]", b'"a string"', b"\xff\xfe\x00garbage", b"{" * 10000,
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-past-the-recursion-limit"),
    b'{"hook_event_name": "PreToolUse"}',
    b'{"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": "x"}',
    b'{"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": {"file_path": 3}}',
    b'{"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": {"file_path": "/etc/passwd", '
    b'"old_string": "root"}}',
    b'{"hook_event_name": "PreToolUse", "tool_name": "Edit", "cwd": "relative", '
    b'"tool_input": {"file_path": "net.py", "old_string": "import"}}',
    b'{"hook_event_name": "PreToolUse", "tool_name": "MultiEdit", "tool_input": {"file_path": "/x", "edits": 5}}',
    b'{"hook_event_name": "SessionStart", "cwd": 12}',
    b'{"hook_event_name": "SessionStart", "cwd": "/nonexistent/dir"}',
])
def test_garbage_exits_0_silently_and_quickly(repo: Path, stdin: bytes) -> None:
    remember(repo, "a note that must not leak to a malformed payload", "net.py:4-10")
    proc, took = hook(repo, stdin)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc.stderr
    assert took < 5, "(a process start and a JSON parse; generous for a loaded test machine)"


def test_a_lone_surrogate_in_a_payload_is_no_error_message(repo: Path) -> None:
    """A payload is JSON, where `"\\ud800"` (a lone surrogate, half a character) is valid; no file
    can have such a name. The hook wrote 'engram hook: 'utf-8' codec can't encode character ...
    surrogates not allowed' on stderr, which the agent shows; there is nothing to say."""
    remember(repo, "a note on the retries", "net.py:4-10")
    for tool_input in ({"file_path": str(repo / "net\ud800.py"), "old_string": "import", "new_string": "x"},
                       {"file_path": str(repo / "net.py"), "old_string": "range(attempts):\ud800", "new_string": "x"},
                       {"file_path": str(repo / "net.py"), "old_string": "range(attempts):", "new_string": "x\udfff"}):
        proc, _ = hook(repo, payload(repo, "Edit", tool_input))
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    assert "a note on the retries" in context(proc), "the edit of net.py still gets its notes"


def test_a_hook_that_cannot_answer_in_time_says_nothing(repo: Path) -> None:
    """A language server that accepts the request and never answers: the hook gives up at its
    deadline with nothing printed, and the edit goes ahead."""
    remember(repo, "Retries back off exponentially", "net.py:4-10")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        run = repo / ".engram" / "run" / "mcp.json"
        run.parent.mkdir(parents=True, exist_ok=True)
        run.write_text(json.dumps({"url": "x", "port": silent.getsockname()[1], "token": "t", "pid": os.getpid()}))
        edit = {"file_path": str(repo / "net.py"), "old_string": "            time.sleep(2 ** i)\n", "new_string": ""}
        proc, took = hook(repo, payload(repo, "Edit", edit), env={"ENGRAM_LOCAL": "", "ENGRAM_HOOK_DEADLINE_MS": "700"})
        assert proc.returncode == 0 and proc.stdout == b""
        assert took < 5
        run.unlink()
    assert context(hook(repo, payload(repo, "Edit", edit))[0]), "answered locally once no server is advertised"


def test_setup_adds_the_context_hooks_and_remove_takes_them_back(repo: Path, tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path / "codex")}
    run_engram(repo, "setup", "claude")
    hooks = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]
    assert hooks["PreToolUse"][0]["matcher"] == "Edit|MultiEdit|Write|NotebookEdit"
    assert hooks["PreToolUse"][0]["hooks"][0]["command"].endswith(" hook")
    assert hooks["PreToolUse"][0]["hooks"][0]["timeout"] >= 2 and "SessionStart" in hooks
    assert {"PostToolUse", "PreCompact", "SessionEnd"} <= set(hooks), "the capture hooks stay"
    run_engram(repo, "setup", "codex", env=env)
    codex_hooks = json.loads((tmp_path / "codex" / "hooks.json").read_text())["hooks"]
    assert set(codex_hooks) == {"SessionStart"}, "Codex refuses additionalContext before a tool (openai/codex#19385)"
    doctor = run_engram(repo, "doctor", "--json", check=False, env=env).stdout
    assert "SessionStart" in doctor
    run_engram(repo, "setup", "--remove", env=env)
    assert not (repo / ".claude").exists() and not (tmp_path / "codex" / "hooks.json").exists()


# ---------------------------------------------------------------- MCP explain


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("hooks") / "repo"
    build_spot_repo(spotter, root)
    for rel, content in sorted(created_by(spotter, SPOTTER_MAIN).items()):
        if (root / rel).read_text() == content and len(content.splitlines()) > 40:
            return root, rel
    raise AssertionError("no agent-created file")


async def test_mcp_explain_carries_the_notes_beside_the_sessions(spot: tuple[Path, str]) -> None:
    root, rel = spot
    mid = remember(root, "This block is generated; edit the template instead", f"{rel}:22-30", "--kind", "decision")
    far = remember(root, "the file's header comment is kept for the licence check", f"{rel}:1-2")
    params = StdioServerParameters(command=sys.executable, args=["-m", "engram_server.entry", "mcp"], cwd=str(root),
                                   env=dict(os.environ))
    async with Client(params) as c:
        r = await c.call_tool("explain", {"file": rel, "start_line": 20, "end_line": 34, "brief": True})
        assert r.is_error is False, r.content
        doc = r.structured_content
        assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
        assert [n["id"] for n in doc["notes"]] == [mid] and far not in json.dumps(doc)
        note = doc["notes"][0]
        assert note["kind"] == "decision" and note["state"] == "intact" and note["lines"] == [22, 30]
        assert note["summary"].startswith("This block is generated")
        small = (await c.call_tool("explain", {"file": rel, "start_line": 20, "end_line": 34, "budget": 300})
                 ).structured_content
        assert len(json.dumps(small, separators=(",", ":")).encode()) <= 300 * 4 * 1.2
        assert small["notes"][0]["id"] == mid, "the note fits a small budget beside the sessions"
        none = (await c.call_tool("explain", {"file": rel, "start_line": 35, "end_line": 40, "brief": True})
                ).structured_content
        assert none["notes"] == []


def test_cli_explain_carries_the_notes_within_its_budget(spot: tuple[Path, str]) -> None:
    """`engram explain` answers "what do we know about it" beside "why does it exist", as the MCP
    tool does: JSON within the budget it asked for, and a section for people."""
    root, rel = spot
    mid = remember(root, "Keep these lines in step with the schema migration", f"{rel}:10-12", "--kind", "pattern")
    doc = json.loads(run_engram(root, "explain", f"{rel}:9-13").stdout)
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    assert [n["id"] for n in doc["notes"]] == [mid] and doc["notes"][0]["lines"] == [10, 12]
    out = run_engram(root, "explain", f"{rel}:9-13", "--budget", "300").stdout
    small = json.loads(out)
    assert len(out.encode()) <= 300 * 4 + 1 and small["budget"]["tokens"] == 300
    assert small["notes"][0]["id"] == mid, "the note fits a small budget beside the sessions"
    text = run_engram(root, "explain", f"{rel}:9-13", "--pretty").stdout
    assert "Notes on these lines" in text and "Keep these lines in step with the schema migration" in text
    assert json.loads(run_engram(root, "explain", f"{rel}:14-16").stdout)["notes"] == []


# ---------------------------------------------------------------- with the language server running

LSP = [sys.executable, "-m", "engram_server.entry", "lsp"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=LSP))
async def lsp(lsp_client: LanguageClient):
    yield
    try:
        await lsp_client.shutdown_session()
    except RuntimeError:
        pass


async def _endpoint(lsp: LanguageClient, repo: Path) -> dict:
    """The language server started on `repo`: its local endpoint's run file (port, token, pid)."""
    await lsp.initialize_session(types.InitializeParams(capabilities=client_capabilities("visual-studio-code"),
                                                        root_uri=repo.as_uri()))
    run_file = repo / ".engram" / "run" / "mcp.json"
    for _ in range(1200):  # the MCP stack's import takes seconds on a loaded machine
        if run_file.exists():
            break
        await asyncio.sleep(0.05)
    return json.loads(run_file.read_text())


async def test_the_running_language_server_answers_the_hook(lsp: LanguageClient, repo: Path) -> None:
    mid = remember(repo, "Retries back off exponentially", "net.py:4-10")
    info = await _endpoint(lsp, repo)
    request = {"event": "edit", "file": "net.py", "ranges": [[9, 9]]}
    async with httpx2.AsyncClient() as h:
        url = f"http://127.0.0.1:{info['port']}/engram/notes"
        assert (await h.post(url, json=request)).status_code == 401
        ok = await h.post(url, json=request, headers={"Authorization": f"Bearer {info['token']}"})
        assert ok.status_code == 200 and mid in ok.json()["text"] and ok.json()["shown"] == [mid]
        bad = await h.post(url, json={"event": "?"}, headers={"Authorization": f"Bearer {info['token']}"})
        assert bad.status_code == 400
    edit = {"file_path": str(repo / "net.py"), "old_string": "            time.sleep(2 ** i)\n", "new_string": ""}
    proc, _ = await asyncio.to_thread(hook, repo, payload(repo, "Edit", edit), {"ENGRAM_LOCAL": ""})
    assert mid in context(proc)


def _cpu(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _functions(n: int, tag: str) -> str:
    return "".join(f"def handler_{i}(request, cache):\n    key = request.path + '/{i}'\n"
                   f"    if key in cache:  {tag}\n        return cache[key]\n    value = compute_{i}(request)\n"
                   f"    cache[key] = value\n    return value\n\n\n" for i in range(n))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the server's CPU time from /proc")
async def test_the_servers_next_hook_resolves_only_the_notes_the_edit_since_touched(lsp: LanguageClient,
                                                                                      repo: Path) -> None:
    """An agent edits a file with many notes whose code has changed since they were written: the
    server's first hook resolves them all; the next, after one edit, moves the notes the edit did
    not reach and resolves only those it did, answering what a fresh resolution answers."""
    from engram.memory.briefs import edit_notes
    from engram.memory.memories import Memories
    from engram.store.repo import Store

    n = 120
    (repo / "app.py").write_text(_functions(n, "# cached"))
    mem = Memories(Store(repo))
    for i in range(n):
        mem.remember(f"handler_{i} caches per path: the upstream is slow", at=[f"app.py:{i * 9 + 1}-{i * 9 + 7}"],
                     dedup=False)
    (repo / "app.py").write_text(_functions(n, "# hit"))  # every note's code changed a little: all `edited`
    info = await _endpoint(lsp, repo)
    url, auth = f"http://127.0.0.1:{info['port']}/engram/notes", {"Authorization": f"Bearer {info['token']}"}
    request = {"event": "edit", "file": "app.py", "ranges": [[9 * 100 + 3, 9 * 100 + 3]]}
    async with httpx2.AsyncClient(timeout=120) as h:
        before = _cpu(info["pid"])
        first = (await h.post(url, json=request, headers=auth)).json()
        cold = _cpu(info["pid"]) - before
        text = (repo / "app.py").read_text().replace("def handler_50(", "# moved on\n\ndef handler_50(")
        (repo / "app.py").write_text(text)  # the agent's edit: two lines inserted (after that hook)
        request["ranges"] = [[9 * 100 + 5, 9 * 100 + 5]]  # handler_100's line, two lines further down
        before = _cpu(info["pid"])
        second = (await h.post(url, json=request, headers=auth)).json()
        warm = _cpu(info["pid"]) - before
    fresh = edit_notes(Memories(Store(repo)), "app.py", [(9 * 100 + 5, 9 * 100 + 5)]).to_json()
    assert first["shown"] and second == fresh, "the places and verdicts a fresh resolution gives"
    assert "app.py:903-909" in second["text"] and "edited" in second["text"]
    assert warm < cold / 3, f"the second hook resolved {warm:.3f} s of CPU, the first {cold:.3f} s"
