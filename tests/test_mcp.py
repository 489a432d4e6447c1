"""The MCP endpoint with real clients: the SDK's client over stdio and HTTP, the MCP Inspector CLI,
the HTTP endpoint's security, `engram hook`, `engram setup`, and a minute of concurrent use."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import pytest_lsp
from lsprotocol import types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from conftest import SPOTTER_MAIN, build_spot_repo, created_by, run_engram

INSPECTOR_DIR = Path(os.environ.get("ENGRAM_INSPECTOR_DIR", Path.home() / ".cache" / "engram-tests" / "inspector"))
MCP_CMD = [sys.executable, "-m", "engram_server.entry", "mcp"]


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp") / "repo"
    build_spot_repo(spotter, root)
    return root


@pytest.fixture(scope="module")
def agent_span(spotter: Path, spot: Path) -> tuple[str, int, int]:
    for rel, content in sorted(created_by(spotter, SPOTTER_MAIN).items()):
        if (spot / rel).read_text() == content and len(content.splitlines()) > 40:
            return rel, 20, 34
    raise AssertionError("no agent-created file")


def stdio(cwd: Path) -> StdioServerParameters:
    """The MCP server of the code under test: the SDK starts servers with a few variables only, and
    without PYTHONPATH a checkout run that way would import whichever engram is installed."""
    return StdioServerParameters(command=MCP_CMD[0], args=MCP_CMD[1:], cwd=str(cwd), env=dict(os.environ))


async def check_explain(c: Client, rel: str, a: int, b: int) -> None:
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert {"explain", "view", "tapes", "show_tape", "search", "ingest"} <= set(tools)
    assert tools["explain"].annotations.read_only_hint is True
    assert tools["ingest"].annotations.read_only_hint is False
    assert tools["explain"].output_schema and "sessions" in tools["explain"].output_schema["properties"]
    assert "start_line" in tools["explain"].input_schema["required"]
    r = await c.call_tool("explain", {"file": rel, "start_line": a, "end_line": b})
    assert r.is_error is False, r.content
    doc = r.structured_content
    assert doc["sessions"][0]["session_id"] == SPOTTER_MAIN and doc["sessions"][0]["wrote"]
    assert doc["budget"]["tokens"] == 4000 and doc["budget"]["used"] <= 4000  # the CLI's default budget
    assert doc["sessions"][0]["story"]["edit"]["diff"]
    frag = next(f for f in doc["sessions"][0]["fragments"] if f.get("window"))
    assert any(e["offset"] == frag["offset"] for e in frag["window"])
    small = (await c.call_tool("explain", {"file": rel, "start_line": a, "end_line": b, "budget": 300})).structured_content
    assert small["truncated"]["left_out"] and small["budget"]["used"] <= 300 or small["budget"]["over"]
    assert small["truncated"]["next"] == f"explain(file={rel!r}, start_line={a}, end_line={b}, budget=300, page=2)"
    two = await c.call_tool("explain", {"file": rel, "start_line": a, "end_line": b, "budget": 300, "page": 2})
    assert two.is_error is False and two.structured_content["page"] == 2
    assert "blame" in tools and tools["blame"].annotations.read_only_hint is True
    blamed = (await c.call_tool("blame", {"file": rel, "start_line": a, "end_line": b})).structured_content
    assert blamed["file"] == rel and blamed["regions"][0]["lines"][0] == a and blamed["regions"][-1]["lines"][1] == b
    assert all(set(r) == {"lines", "session_id", "tape", "harness", "when", "request"} for r in blamed["regions"])
    assert SPOTTER_MAIN in {r["session_id"] for r in blamed["regions"]}
    v = await c.call_tool("view", {"tape": frag["tape"], "at": frag["offset"], "before": 1, "after": 1})
    assert [e["offset"] for e in v.structured_content["events"]] == [frag["offset"] - 1, frag["offset"],
                                                                      frag["offset"] + 1]


async def test_stdio_sdk_client(spot: Path, agent_span: tuple[str, int, int]) -> None:
    from engram.anchor import tokenize

    async with Client(stdio(spot)) as c:
        await check_explain(c, *agent_span)
        rel, a, _ = agent_span
        lines = (spot / rel).read_text().splitlines()
        short = next(i for i in range(a, len(lines) - 3) if 0 < len(tokenize(lines[i - 1])) < 3)
        wide = await c.call_tool("explain", {"file": rel, "start_line": short, "end_line": short, "brief": True})
        assert wide.is_error is False, wide.content  # the SDK client checked it against the output schema
        assert wide.structured_content["widened"] == {"asked": {"file": rel, "start": short, "end": short},
                                                      "why": "few-tokens"}
        assert wide.structured_content["span"]["start"] < short < wide.structured_content["span"]["end"]
        listed = await c.call_tool("tapes", {"limit": 2})
        assert len(listed.structured_content["tapes"]) == 2 and listed.structured_content["truncated"] is True
        found = await c.call_tool("search", {"query": "Implement spotter-gqc"})
        assert found.structured_content["hits"][0]["session_id"] == SPOTTER_MAIN
        res = await c.read_resource(f"engram://tape/{SPOTTER_MAIN}")
        assert "Implement spotter-gqc" in res.contents[0].text


async def test_the_text_an_agent_reads_is_compact_json_within_the_budget(spot: Path,
                                                                         agent_span: tuple[str, int, int]) -> None:
    """The text block is what most clients give the model: indented, an explain answer cut to 4,000
    tokens of compact JSON reached the model half as large again."""
    rel, a, b = agent_span
    async with Client(stdio(spot)) as c:
        for tool, args in [("explain", {"file": rel, "start_line": a, "end_line": b}),
                           ("explain", {"file": rel, "start_line": a, "end_line": b, "budget": 300}),
                           ("recall", {"query": "retries"}), ("tapes", {}), ("blame", {"file": rel})]:
            r = await c.call_tool(tool, args)
            assert r.is_error is False, r.content
            text = r.content[0].text
            assert text == json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False), (tool, text[:200])
            if tool == "explain" and not r.structured_content["budget"].get("over"):
                assert len(text.encode()) <= 4 * r.structured_content["budget"]["tokens"], args


@pytest.mark.parametrize("args,message", [
    ({"file": "nope.ex", "start_line": 1, "end_line": 2}, "no such file"),
    ({"file": "../../etc/passwd", "start_line": 1, "end_line": 2}, "outside the repository"),
    ({"file": "assets/js/app.js", "start_line": 1, "end_line": 99999}, "past the end"),
    # a NUL (JSON can carry one) was 'Error executing tool explain', its ValueError on the server's stderr
    ({"file": "assets/js/app.js\x00.txt", "start_line": 1, "end_line": 2}, "a path cannot hold a NUL character"),
])
async def test_bad_arguments_are_tool_errors(spot: Path, args: dict, message: str) -> None:
    async with Client(stdio(spot)) as c:
        r = await c.call_tool("explain", args)
        assert r.is_error is True and message in r.content[0].text
        r = await c.call_tool("view", {"tape": "zzzz", "at": 0})
        assert r.is_error is True and "no tape or session matches" in r.content[0].text
        r = await c.call_tool("search", {"query": "  "})  # (it answered no hits, as if nothing matched)
        assert r.is_error is True and "the query is empty" in r.content[0].text, r.content
        with pytest.raises(Exception, match="no tape or session matches 'zzzz'"):  # (it said only 'Error
            await c.read_resource("engram://tape/zzzz")  # creating resource from template', the why in a traceback)


async def test_blame_of_lines_reversed_or_past_the_end_is_a_tool_error(spot: Path, agent_span: tuple[str, int, int]
                                                                        ) -> None:
    rel, a, b = agent_span
    async with Client(stdio(spot)) as c:
        r = await c.call_tool("blame", {"file": rel, "start_line": b, "end_line": a})
        assert r.is_error is True and "START must not exceed END" in r.content[0].text, r.content
        r = await c.call_tool("blame", {"file": rel, "start_line": 100000})
        assert r.is_error is True and "past the end of the file" in r.content[0].text, r.content


async def test_explain_of_a_page_past_the_end_is_a_tool_error(spot: Path, agent_span: tuple[str, int, int]) -> None:
    """An empty page read as "no session wrote these lines"."""
    rel, a, b = agent_span
    async with Client(stdio(spot)) as c:
        r = await c.call_tool("explain", {"file": rel, "start_line": a, "end_line": b, "budget": 300, "page": 50})
        assert r.is_error is True and "page 50: past the end of this answer" in r.content[0].text, r.content


WRONG_ARGUMENTS = [
    ("explain", {"file": "a.py", "start_line": "abc", "end_line": 2},
     "explain: the argument `start_line` must be an integer of at least 1, not the string 'abc'."),
    ("explain", {"file": "a.py", "end_line": 2},
     "explain: the argument `start_line` is missing: it must be an integer of at least 1."),
    ("explain", {"file": 5, "start_line": 1, "end_line": 2, "brief": "maybe"},
     "explain: the argument `file` must be a string, not the number 5; the argument `brief` must be true or false, "
     "not the string 'maybe'."),
    ("explain", {"file": "a.py", "start_line": 1, "end_line": 2, "rank": "best"},
     'explain: the argument `rank` must be one of "writer", "touches", "evidence", or null, not the string \'best\'.'),
    ("view", {"tape": "x", "at": 1.5}, "view: the argument `at` must be an integer of at least 0, not the number 1.5."),
    ("tapes", {"limit": 500}, "tapes: the argument `limit` must be an integer from 1 to 200, not the number 500."),
    ("search", {}, "search: the argument `query` is missing: it must be a string."),
    ("remember", {"content": "x", "tags": ["ok", 2]}, "remember: the argument `tags.1` must be a string, not the number 2."),
    # an argument the tool does not take (the SDK dropped it and the call succeeded without it)
    ("search", {"query": "x", "limt": 3}, "search: no argument `limt` (did you mean `limit`?); it takes `query`, `limit`."),
]


async def test_a_wrong_or_missing_argument_is_one_sentence_naming_it_and_its_type(spot: Path) -> None:
    async with Client(stdio(spot)) as c:
        for tool, args, message in WRONG_ARGUMENTS:
            r = await c.call_tool(tool, args)
            assert r.is_error is True and r.content[0].text == message, (tool, args, r.content[0].text)


async def test_store_not_initialised_is_a_tool_error(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    async with Client(stdio(tmp_path)) as c:
        r = await c.call_tool("explain", {"file": "a.py", "start_line": 1, "end_line": 1})
        assert r.is_error is True and "engram init" in r.content[0].text


def inspector(*args: str, cwd: Path) -> dict:
    env = {**os.environ, "HOME": str(cwd / ".inspector-home")}
    out = subprocess.run(["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", *args], cwd=INSPECTOR_DIR,
                         capture_output=True, text=True, timeout=120, env=env)
    # The inspector exits non-zero when a tool reports an error and 0 for HTTP errors: judge by its JSON.
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not (INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector").exists() or not shutil.which("npx"),
                    reason=f"MCP Inspector not installed in {INSPECTOR_DIR} (.ci/run installs it)")
def test_mcp_inspector_cli(spot: Path, agent_span: tuple[str, int, int], tmp_path: Path) -> None:
    rel, a, b = agent_span
    target = [*MCP_CMD, "--repo", str(spot)]
    listed = inspector(*target, "--method", "tools/list", cwd=tmp_path)
    assert {t["name"] for t in listed["tools"]} >= {"explain", "view", "ingest"}
    called = inspector(*target, "--method", "tools/call", "--tool-name", "explain", "--tool-arg", f"file={rel}",
                       f"start_line={a}", f"end_line={b}", "brief=true", cwd=tmp_path)
    assert called["isError"] is False
    assert called["structuredContent"]["sessions"][0]["session_id"] == SPOTTER_MAIN
    bad = inspector(*target, "--method", "tools/call", "--tool-name", "view", "--tool-arg", "tape=zzzz", "at=0",
                    cwd=tmp_path)
    assert bad["isError"] is True


# ---------------------------------------------------------------- the endpoint inside the language server

LSP = [sys.executable, "-m", "engram_server.entry", "lsp"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=LSP))
async def lsp(lsp_client: LanguageClient):
    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(ls, params):  # noqa: ANN001, ANN202
        return None

    @lsp_client.feature("engram/indexChanged")
    def on_changed(ls, params):  # noqa: ANN001, ANN202
        return None

    yield
    try:
        await lsp_client.shutdown_session()
    except RuntimeError:  # a test already shut the server down
        pass


async def endpoint(lsp: LanguageClient, root: Path) -> dict:
    await lsp.initialize_session(types.InitializeParams(capabilities=client_capabilities("visual-studio-code"),
                                                        root_uri=root.as_uri()))
    run_file = root / ".engram" / "run" / "mcp.json"
    for _ in range(200):
        if run_file.exists():
            break
        await asyncio.sleep(0.05)
    assert stat.S_IMODE(run_file.stat().st_mode) == 0o600
    info = json.loads(run_file.read_text())
    assert info["url"].startswith("http://127.0.0.1:") and len(info["token"]) >= 40
    return info


async def test_http_endpoint_reads_the_live_buffer(lsp: LanguageClient, spot: Path,
                                                   agent_span: tuple[str, int, int]) -> None:
    info = await endpoint(lsp, spot)
    rel, a, b = agent_span
    path = spot / rel
    uri = path.as_uri()
    lsp.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="plaintext", version=1, text=path.read_text())))
    lsp.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            text="\n" * 50)]))
    headers = {"Authorization": f"Bearer {info['token']}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(info["url"], http_client=http)) as c:
            await check_explain(c, rel, a + 50, b + 50)  # only the unsaved buffer has the code there
    await lsp.shutdown_session()
    assert not (spot / ".engram" / "run" / "mcp.json").exists(), "the run file goes with the endpoint"


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
HDRS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_http_endpoint_security(lsp: LanguageClient, spot: Path) -> None:
    info = await endpoint(lsp, spot)
    url, token, port = info["url"], info["token"], info["port"]
    async with httpx2.AsyncClient() as h:
        assert (await h.post(url, json=INIT, headers=HDRS)).status_code == 401
        assert (await h.post(url, json=INIT, headers={**HDRS, "Authorization": "Bearer " + "x" * 43})).status_code == 401
        auth = {**HDRS, "Authorization": f"Bearer {token}"}
        assert (await h.post(url, json=INIT, headers=auth)).status_code == 200
        assert (await h.post(url, json=INIT, headers={**auth, "Origin": "http://evil.example"})).status_code == 403
        assert (await h.post(url, json=INIT, headers={**auth, "Host": "evil.example:80"})).status_code == 421
        assert (await h.post(url, json=INIT, headers={**auth, "Host": f"127.0.0.1:{port + 1}"})).status_code == 421
    import socket  # noqa: PLC0415

    other = [a for a in socket.gethostbyname_ex(socket.gethostname())[2] if not a.startswith("127.")]
    for addr in other:  # bound to loopback only: nothing answers on the machine's other addresses
        with pytest.raises(httpx2.ConnectError):
            async with httpx2.AsyncClient() as h:
                await h.post(f"http://{addr}:{port}/mcp", json=INIT, headers=HDRS)


async def test_the_command_line_is_answered_by_the_running_language_server(
        lsp: LanguageClient, spot: Path, agent_span: tuple[str, int, int]) -> None:
    info = await endpoint(lsp, spot)
    rel, a, b = agent_span

    def cli(*args: str, local: bool = False) -> subprocess.CompletedProcess[str]:
        env = {"ENGRAM_LOCAL": "1"} if local else {"ENGRAM_LOCAL": ""}
        return run_engram(spot, "-v", "explain", *args, check=False, env=env)

    served = await asyncio.to_thread(cli, f"{rel}:{a}-{b}", "--before", "1", "--after", "1")
    assert served.returncode == 0 and "answered by the language server" in served.stderr
    local = await asyncio.to_thread(cli, f"{rel}:{a}-{b}", "--before", "1", "--after", "1", local=True)
    assert "answered by the language server" not in local.stderr
    doc = json.loads(served.stdout)
    assert doc == json.loads(local.stdout) and doc["sessions"][0]["session_id"] == SPOTTER_MAIN
    # Errors about the request are the server's answer, with the local wording and exit status.
    n = len((spot / rel).read_text().splitlines())
    bad = await asyncio.to_thread(cli, f"{rel}:{n}-{n + 5}")
    assert bad.returncode == 1 and "past the end of the file" in bad.stderr
    assert "answered by" not in bad.stderr and "Traceback" not in bad.stderr
    # The route has the endpoint's guards.
    url = f"http://127.0.0.1:{info['port']}/engram/explain"
    body = {"span": f"{rel}:{a}-{b}", "cwd": str(spot), "before": 0, "after": 0, "brief": True,
            "include_deleted": False, "forensics": False, "min_confidence": 0.5}
    auth = {"Authorization": f"Bearer {info['token']}"}
    async with httpx2.AsyncClient() as h:
        assert (await h.post(url, json=body)).status_code == 401
        assert (await h.post(url, json=body, headers={**auth, "Origin": "http://evil.example"})).status_code == 403
        assert (await h.post(url, json=body, headers={**auth, "Host": "evil.example"})).status_code == 421
        assert (await h.post(url, json={**body, "span": "../../etc/passwd:1-2"}, headers=auth)).status_code == 400
        ok = await h.post(url, json=body, headers=auth)
        assert ok.status_code == 200 and ok.json()["sessions"][0]["session_id"] == SPOTTER_MAIN
    await lsp.shutdown_session()
    # The server is gone: the command answers locally.
    after = await asyncio.to_thread(cli, f"{rel}:{a}-{b}", "--brief")
    assert after.returncode == 0 and "answered by" not in after.stderr
    assert json.loads(after.stdout)["sessions"][0]["session_id"] == SPOTTER_MAIN


# ---------------------------------------------------------------- hook and setup

def hook(cwd: Path, payload: str | None, *extra: str) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "engram_server.entry", "hook", *extra], cwd=cwd, input=payload,
                          capture_output=True, text=True, timeout=30)
    assert time.monotonic() - t0 < 5, "a hook returns quickly"
    return proc


def test_hook_captures_the_session_and_never_fails(spotter: Path, repo: Path, tmp_path: Path) -> None:
    transcript = tmp_path / f"{SPOTTER_MAIN}.jsonl"
    shutil.copy(spotter / f"{SPOTTER_MAIN}.jsonl", transcript)
    for junk in ["", "{not json", "[1,2]", json.dumps({"cwd": "/nonexistent"}), "\x00\xff" * 10,
                 json.dumps({"session_id": "x", "transcript_path": "/etc/passwd", "cwd": str(repo)})]:
        assert hook(repo, junk).returncode == 0
    for event in ("PostToolUse", "PreCompact", "SessionEnd"):
        payload = {"session_id": SPOTTER_MAIN, "transcript_path": str(transcript), "cwd": str(repo),
                   "permission_mode": "default", "hook_event_name": event}
        if event == "PostToolUse":
            payload.update(tool_name="Edit", tool_input={"file_path": "x"}, tool_response={}, tool_use_id="t")
        if event == "PreCompact":
            payload.update(trigger="auto", custom_instructions="")
        if event == "SessionEnd":
            payload.update(reason="prompt_input_exit")
        assert hook(repo, json.dumps(payload)).returncode == 0
    deadline = time.monotonic() + 60
    tapes: list = []
    while time.monotonic() < deadline:
        tapes = json.loads(run_engram(repo, "tapes", "--json").stdout)
        if tapes:
            break
        time.sleep(0.3)
    assert [t["session_id"] for t in tapes] == [SPOTTER_MAIN]
    assert hook(repo, None, "not-json-argument").returncode == 0


def _ingests_of(transcript: Path) -> list[int]:
    """Live processes running `engram ingest` of `transcript` (the hook starts them detached)."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ingest" in cmd and str(transcript).encode() in cmd:
            pids.append(int(d.name))
    return pids


def test_hooks_faster_than_ingest_queue_one_ingest_not_one_each(spotter: Path, repo: Path, tmp_path: Path) -> None:
    """An agent edits faster than a loaded machine ingests: each PostToolUse hook starts an ingest,
    and they once queued by the dozen on the ingest lock for an hour. While an ingest runs, one
    more waits (it reads the transcript when its turn comes); the others end at once."""
    import fcntl

    transcript = tmp_path / f"{SPOTTER_MAIN}.jsonl"
    shutil.copy(spotter / f"{SPOTTER_MAIN}.jsonl", transcript)
    payload = json.dumps({"session_id": SPOTTER_MAIN, "transcript_path": str(transcript), "cwd": str(repo),
                          "hook_event_name": "PostToolUse", "tool_name": "Edit", "tool_input": {"file_path": "x"}})
    run_dir = repo / ".engram" / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / "ingest.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a running ingest
    try:
        for _ in range(5):
            assert hook(repo, payload).returncode == 0
        deadline = time.monotonic() + 120
        while len(_ingests_of(transcript)) != 1 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert len(_ingests_of(transcript)) == 1, "one ingest waits, the others ended"
        waiting = _ingests_of(transcript)[0]
        niceness = int(Path(f"/proc/{waiting}/stat").read_text().rsplit(")", 1)[1].split()[16])
        assert niceness >= os.nice(0) + 10, "below the agent's priority: its next hook is not kept waiting for a core"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    deadline = time.monotonic() + 120
    while _ingests_of(transcript) and time.monotonic() < deadline:
        time.sleep(0.3)
    tapes = json.loads(run_engram(repo, "tapes", "--json").stdout)
    assert [t["session_id"] for t in tapes] == [SPOTTER_MAIN], "the waiting one captured the session"


def test_setup_merges_and_keeps_a_backup(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash"]}, "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]}}))
    dry = run_engram(repo, "setup", "claude", "--dry-run").stdout
    assert "would change" in dry and json.loads((repo / ".mcp.json").read_text()) == {"mcpServers": {"other": {"command": "x"}}}
    run_engram(repo, "setup", "claude")
    run_engram(repo, "setup", "claude")  # idempotent
    mcp = json.loads((repo / ".mcp.json").read_text())
    assert mcp["mcpServers"]["other"] == {"command": "x"}
    settings = json.loads((repo / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == {"allow": ["Bash"]}
    post = settings["hooks"]["PostToolUse"]
    assert post[0]["hooks"][0]["command"] == "mine" and len(post) == 2
    engram = [os.path.abspath(sys.executable), "-m", "engram_server.entry"]  # (run_engram runs it as a module)
    assert post[1]["matcher"] == "Edit|MultiEdit|Write|NotebookEdit"
    assert post[1]["hooks"][0]["command"] == shlex.join([*engram, "hook"])
    assert mcp["mcpServers"]["engram"] == {"type": "stdio", "command": engram[0], "args": [*engram[1:], "mcp"]}
    assert {"PreCompact", "SessionEnd"} <= set(settings["hooks"])
    assert (repo / ".mcp.json.engram-backup").exists()
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "config.toml").write_text('model = "gpt-5"\n\n[mcp_servers.other]\ncommand = "x"\n')
    env = {"CODEX_HOME": str(codex)}
    run_engram(repo, "setup", "codex", env=env)
    run_engram(repo, "setup", "codex", env=env)
    import tomllib  # noqa: PLC0415

    conf = tomllib.loads((codex / "config.toml").read_text())
    assert conf["model"] == "gpt-5" and conf["mcp_servers"]["other"] == {"command": "x"}
    assert conf["mcp_servers"]["engram"] == {"command": engram[0], "args": [*engram[1:], "mcp"]}
    assert conf["notify"] == [*engram, "hook"]


# ---------------------------------------------------------------- concurrency

async def test_lsp_mcp_and_cli_ingest_together_for_a_minute(lsp: LanguageClient, spotter: Path, tmp_path: Path,
                                                            agent_span: tuple[str, int, int]) -> None:
    root = tmp_path / "repo"
    build_spot_repo(spotter, root)
    info = await endpoint(lsp, root)
    rel, a, b = agent_span
    path = root / rel
    uri = path.as_uri()
    lsp.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="plaintext", version=1, text=path.read_text())))
    duration = float(os.environ.get("ENGRAM_CONCURRENCY_SECONDS", "60"))
    sessions_dir = tmp_path / "incoming"
    sessions_dir.mkdir()
    data = (spotter / f"{SPOTTER_MAIN}.jsonl").read_bytes()
    stop = time.monotonic() + duration
    errors: list[str] = []
    answers = {"mcp": 0, "lsp": 0, "ingest": 0}

    async def cli_ingest() -> None:
        n = 0
        while time.monotonic() < stop:
            n += 1
            f = sessions_dir / f"copy-{n}.jsonl"  # a new session each time: same records, new id
            f.write_bytes(data.replace(SPOTTER_MAIN.encode(), f"copy-{n:04d}-{SPOTTER_MAIN[10:]}".encode()))
            proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "engram.cli", "ingest", str(f), cwd=root,
                                                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            if proc.returncode != 0 or b"locked" in err:
                errors.append(err.decode()[-500:])
            answers["ingest"] += 1

    async def mcp_explain() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {info['token']}"}) as http:
            async with Client(streamable_http_client(info["url"], http_client=http)) as c:
                while time.monotonic() < stop:
                    r = await c.call_tool("explain", {"file": rel, "start_line": a, "end_line": b, "brief": True})
                    if r.is_error:
                        errors.append(str(r.content))
                    else:
                        ids = [s["session_id"] for s in r.structured_content["sessions"]]
                        if SPOTTER_MAIN not in ids:
                            errors.append(f"wrong answer: {ids}")
                    answers["mcp"] += 1

    async def lsp_edits() -> None:
        # The person types below the span: the MCP endpoint reads this live buffer, so the span's
        # lines must stay where the agent's code is.
        version = 1
        end = len(path.read_text().splitlines())
        while time.monotonic() < stop:
            version += 1
            lsp.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line=end, character=0),
                                      end=types.Position(line=end, character=0)), text="# typing\n")]))
            end += 1
            found = await lsp.text_document_code_lens_async(types.CodeLensParams(
                text_document=types.TextDocumentIdentifier(uri=uri)))
            if not found:
                errors.append("lenses disappeared")
            answers["lsp"] += 1
            await asyncio.sleep(0.05)

    await asyncio.gather(cli_ingest(), mcp_explain(), lsp_edits())
    assert not errors, errors[:3]
    assert all(n > 0 for n in answers.values()), answers
