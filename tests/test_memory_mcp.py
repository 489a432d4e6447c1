"""The memory tools with the MCP SDK's client: over stdio (`engram mcp`), and in memory on a
server built as the language server builds its endpoint (with the editor's unsaved text); and
`engram recall` handed to a running language server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from conftest import RETRY_PY, run_engram
from mcp import Client, StdioServerParameters
from pytest_lsp import ClientServerConfig, LanguageClient

TOOLS = {"remember", "recall", "forget", "memory_update", "memory_link", "memories"}


@pytest.fixture
def repo(repo: Path) -> Path:
    (repo / "net.py").write_text(RETRY_PY)
    return repo


def unset(value: object) -> object:
    """`value` without the null fields a tool's output schema lists but the command line leaves out."""
    if isinstance(value, dict):
        return {k: unset(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [unset(v) for v in value]
    return value


def stdio(cwd: Path) -> StdioServerParameters:
    # the environment is passed on: the server imports the same engram as the tests
    return StdioServerParameters(command=sys.executable, args=["-m", "engram_server.entry", "mcp"], cwd=str(cwd),
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


async def test_the_memory_tools_over_stdio(repo: Path) -> None:
    async with Client(stdio(repo)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert TOOLS <= set(tools)
        assert "ctx" not in tools["remember"].input_schema["properties"]
        assert tools["memories"].annotations.read_only_hint is True
        assert tools["forget"].annotations.destructive_hint is True
        assert set(tools["recall"].input_schema["properties"]) >= {"query", "limit", "kind", "tags", "file",
                                                                   "start_line", "end_line"}
        assert "memories" in tools["recall"].output_schema["properties"]

        r = await c.call_tool("remember", {"content": "retry gives up after five attempts", "kind": "decision",
                                           "file": "net.py", "start_line": 4, "end_line": 10, "tags": ["net"]})
        assert r.is_error is False, r.content
        mid = r.structured_content["id"]
        again = await c.call_tool("remember", {"content": "Retry gives up after five attempts"})
        assert again.structured_content["merged_into"] == mid

        found = await c.call_tool("recall", {"query": "when does retry give up", "debug": True})
        assert found.is_error is False, found.content  # checked against the output schema by the client
        top = found.structured_content["memories"][0]
        cli = run_engram(repo, "recall", "when does retry give up", "--json").stdout
        import json

        same = json.loads(cli)["memories"][0]  # the same fields (the tool's optional ones are null when unset)
        assert {k: unset(top[k]) for k in same if k != "score"} == {k: same[k] for k in same if k != "score"}
        assert top["anchors"][0]["state"] == "intact"
        assert top["source"]["type"] == "agent" and top["source"]["harness"]
        said = await c.call_tool("remember", {"content": "Three tries, then a toast",
                                              "context": "What does the uploader do when S3 is down?"})
        assert said.structured_content["embedding"] == "pending"  # made right after the answer (model loaded)
        asked = await c.call_tool("recall", {"query": "uploader S3 down"})
        assert asked.structured_content["memories"][0]["id"] == said.structured_content["id"]
        assert asked.structured_content["dense"] == "used"
        assert asked.structured_content["memories"][0]["context"] == "What does the uploader do when S3 is down?"

        near = await c.call_tool("recall", {"query": "", "file": "net.py", "start_line": 6})
        assert [m["id"] for m in near.structured_content["memories"]] == [mid]

        other = (await c.call_tool("remember", {"content": "Retries used to be linear"})).structured_content["id"]
        linked = await c.call_tool("memory_link", {"id": mid, "target": other, "relation": "supersedes"})
        assert linked.structured_content == {"from": mid, "to": other, "relation": "supersedes"}
        updated = await c.call_tool("memory_update", {"id": mid, "importance": 0.9, "tags": ["net", "policy"]})
        assert updated.structured_content["tags"] == ["net", "policy"]
        listed = await c.call_tool("memories", {"file": "net.py"})
        assert [m["id"] for m in listed.structured_content["memories"]] == [mid]
        hidden = await c.call_tool("memories", {"include_hidden": True})
        assert {m["status"] for m in hidden.structured_content["memories"]} == {"active", "superseded"}
        gone = await c.call_tool("forget", {"id": other, "purge": True})
        assert gone.structured_content["purged"] is True

        for name, args, message in [
            ("remember", {"content": " "}, "the text is empty"),
            ("remember", {"content": "x", "file": "net.py", "start_line": 4, "end_line": 99}, "past the end"),
            ("remember", {"content": "x", "file": "../x.py", "start_line": 1, "end_line": 1}, "outside the repository"),
            ("memory_update", {"id": "ffffffff", "importance": 0.3}, "no memory matches"),
            ("memory_update", {"id": mid}, "nothing to change"),
            ("forget", {"id": other}, "was forgotten and purged"),
        ]:
            bad = await c.call_tool(name, args)
            assert bad.is_error is True and message in bad.content[0].text, (name, bad.content)


def test_a_request_holding_half_a_character_is_answered_over_stdio(repo: Path) -> None:
    """JSON may escape half a character (`"\\ud800"`, a lone surrogate: an agent copying a
    transcript's cut emoji); the SDK's parser refuses it and the request was dropped without an
    answer, the agent waiting until its own timeout. It is answered, the half character as U+FFFD."""
    import json
    import select
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "engram_server.entry", "mcp"], cwd=repo,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stdin is not None and proc.stdout is not None

    def ask(message: dict) -> dict | None:
        proc.stdin.write(json.dumps(message).encode() + b"\n")  # (json escapes the surrogate: "\\ud800")
        proc.stdin.flush()
        if "id" not in message:
            return None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, f"no answer to {message['method']}"
        answer: dict = json.loads(proc.stdout.readline())
        return answer

    try:
        ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        said = ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "remember", "arguments": {"content": "the upload log cut an emoji \ud83d here"}}})
        assert said is not None and said["id"] == 2 and not said["result"].get("isError"), said
        found = ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "recall", "arguments": {"query": "upload log emoji"}}})
        assert found is not None
        assert found["result"]["structuredContent"]["memories"][0]["content"] == "the upload log cut an emoji \ufffd here"
    finally:
        proc.kill()
        proc.wait()


async def test_recall_fits_its_budget_clips_a_long_note_and_names_what_it_left_out(repo: Path) -> None:
    """An agent pays for every token it reads: a recall of long notes stays within its budget
    (2,000 tokens by default, 4 bytes of compact JSON each), the best note clipped rather than
    dropped, and the answer names the rest and how to get them."""
    import json

    log = "\n".join(f"attempt {i}: the upload to S3 timed out after 30 s, retry scheduled" for i in range(400))
    first = run_engram(repo, "remember", "Uploader retries: the S3 timeout log\n" + log, "--json")
    top = json.loads(first.stdout)["id"]
    facts = ["files above 64 MB go multipart", "the retry budget resets at midnight UTC",
             "thumbnails are made before the upload starts", "a 403 from S3 means the bucket policy changed",
             "uploads pause while the laptop is on battery", "checksums are MD5 because S3 wants them",
             "the queue lives in SQLite next to the cache", "the progress bar counts bytes, not files",
             "a cancelled upload leaves no parts behind", "timeouts grow from 30 to 240 seconds",
             "the region comes from the profile, never the URL", "retries stop when the token expires"]
    for i, fact in enumerate(facts):  # (distinct notes: near-duplicates would merge into one)
        run_engram(repo, "remember", f"Uploader and S3 timeout, note {i}: {fact}. " + fact.capitalize() * 4)
    out = run_engram(repo, "recall", "uploader S3 timeout log", "--json").stdout
    doc = json.loads(out)
    assert len(out.encode()) - 1 <= 2000 * 4 and doc["budget"]["tokens"] == 2000
    assert doc["memories"][0]["id"] == top and doc["memories"][0]["content"].startswith("Uploader retries")
    assert doc["memories"][0]["clipped"] == {"chars": len("Uploader retries: the S3 timeout log\n" + log),
                                             "more": f"engram memory show {top}"}
    small = json.loads(run_engram(repo, "recall", "uploader S3 timeout log", "--json", "--budget", "1000").stdout)
    assert small["memories"][0]["id"] == top and small["memories"][0]["clipped"]
    assert small["left_out"]["count"] == 10 - len(small["memories"]) > 0 and "budget=2000" in small["left_out"]["next"]
    assert len({m["id"] for m in small["memories"]} | set(small["left_out"]["ids"])) == 10
    whole = json.loads(run_engram(repo, "recall", "uploader S3 timeout log", "--json", "--budget", "0").stdout)
    assert len(whole["memories"]) == 10 and "left_out" not in whole and "clipped" not in whole["memories"][0]
    async with Client(stdio(repo)) as c:
        r = (await c.call_tool("recall", {"query": "uploader S3 timeout log", "budget": 600})).structured_content
        assert len(json.dumps(r, separators=(",", ":")).encode()) <= 600 * 4 * 1.1  # (nulls of the schema aside)
        assert r["memories"][0]["id"] == top and r["memories"][0]["truncated"] is True
        assert r["left_out"]["ids"] and r["budget"] == {"tokens": 600, "used": r["budget"]["used"]}
        listed = (await c.call_tool("memories", {"budget": 600})).structured_content
        assert listed["left_out"]["count"] + len(listed["memories"]) == 13 and listed["budget"]["tokens"] == 600


async def test_an_agent_s_personal_memory_never_leaves_with_push(repo: Path, tmp_path: Path) -> None:
    import subprocess

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", str(remote)], check=True)
    async with Client(stdio(repo)) as c:
        mine = await c.call_tool("remember", {"content": "my scratch: ask Ana about the poller", "scope": "personal"})
        assert mine.is_error is False, mine.content
        assert "0 team memories" in run_engram(repo, "push", "--dry-run").stdout
        team = await c.call_tool("remember", {"content": "the poller backs off to 30 s after errors"})
        assert team.is_error is False, team.content
        assert "1 team memory new or changed (of 1)," in run_engram(repo, "push", "--dry-run").stdout
        bad = await c.call_tool("remember", {"content": "x", "scope": "everyone"})
        assert bad.is_error is True and "scope" in bad.content[0].text


async def test_tools_on_a_server_built_like_the_language_server_s_read_unsaved_text(repo: Path) -> None:
    """The language server's endpoint builds the same tools with the editor's unsaved text: an
    anchor follows code moved in a buffer that is not saved yet."""
    from engram.store.repo import Store
    from engram_server.mcp_tools import build_mcp, thread_runner

    unsaved: dict[str, str] = {}
    mcp = build_mcp(lambda: Store(repo), thread_runner(), lambda store, rel: unsaved.get(rel))
    async with Client(mcp) as c:
        assert TOOLS <= {t.name for t in (await c.list_tools()).tools}
        mid = (await c.call_tool("remember", {"content": "the retry loop", "file": "net.py", "start_line": 4,
                                              "end_line": 10})).structured_content["id"]
        unsaved["net.py"] = "# new header\n# more\n# and more\n" + RETRY_PY
        doc = (await c.call_tool("memories", {})).structured_content
        assert doc["memories"][0]["id"] == mid, doc
        assert doc["memories"][0]["anchors"][0]["lines"] == [7, 13], doc["memories"][0]["anchors"]
        assert (repo / "net.py").read_text() == RETRY_PY  # nothing saved


async def test_recall_without_a_store_is_a_tool_error(tmp_path: Path) -> None:
    async with Client(stdio(tmp_path)) as c:
        r = await c.call_tool("recall", {"query": "anything"})
        assert r.is_error is True and "engram init" in r.content[0].text


LSP = [sys.executable, "-m", "engram_server.entry", "lsp", "--stdio"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=LSP))
async def lsp(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_recall_from_a_terminal_is_answered_by_the_running_language_server(
        lsp: LanguageClient, repo: Path) -> None:
    """With the editor open, `engram recall` is handed to the language server (warm model and
    index) and answers as the command would itself; a refused request is the user's error."""
    import asyncio
    import json

    from lsprotocol import types
    from pytest_lsp import client_capabilities

    mid = json.loads(run_engram(repo, "remember", "retry gives up after five attempts", "--at", "net.py:4-10",
                                "--json").stdout)["id"]
    await lsp.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=repo.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=repo.as_uri(), name=repo.name)]))
    run_file = repo / ".engram" / "run" / "mcp.json"
    for _ in range(400):
        if run_file.exists():
            break
        await asyncio.sleep(0.05)
    assert run_file.exists()
    handed = await asyncio.to_thread(run_engram, repo, "-v", "recall", "when does retry give up", "--at", "net.py",
                                     "--json", env={"ENGRAM_LOCAL": ""})
    assert "answered by the language server" in handed.stderr, handed.stderr
    local = await asyncio.to_thread(run_engram, repo, "recall", "when does retry give up", "--at", "net.py", "--json",
                                    env={"ENGRAM_LOCAL": "1"})
    got, want = json.loads(handed.stdout), json.loads(local.stdout)
    assert got["memories"][0]["id"] == want["memories"][0]["id"] == mid
    assert got["memories"][0]["anchors"] == want["memories"][0]["anchors"]
    # from a folder of the repository, --at is that folder's path, handed or not (it became src/src/deep.py)
    (repo / "src").mkdir()
    (repo / "src" / "deep.py").write_text("def deep():\n    return 42\n")
    deep = json.loads(run_engram(repo, "remember", "deep returns the answer", "--at", "src/deep.py:1-2",
                                 "--json").stdout)["id"]
    for local in ("", "1"):
        doc = json.loads((await asyncio.to_thread(run_engram, repo / "src", "recall", "--at", "deep.py", "--json",
                                                  env={"ENGRAM_LOCAL": local})).stdout)
        assert doc["at"] == "src/deep.py" and [m["id"] for m in doc["memories"]][:1] == [deep], (local, doc)
    bad = await asyncio.to_thread(run_engram, repo, "recall", "x", "--kind", "fact", "--tag", " ", check=False,
                                  env={"ENGRAM_LOCAL": ""})
    assert bad.returncode == 1 and "a tag is a non-empty word" in bad.stderr


async def test_recall_of_something_never_noted_says_nothing_matches_and_names_the_nearest_as_weak(repo: Path) -> None:
    """Asked about something no memory mentions (no word in common, only a weak cosine), recall
    listed notes anyway at half the best score, as if they matched. Now the command line, the MCP
    tool and the local endpoint answer no memory, and name the nearest apart as weak, each below
    the floor (engram.memory.recall.DENSE_FLOOR). A note close in meaning with no word in common is
    still an answer."""
    import json

    from engram_server.mcp_http import start_endpoint
    from engram_server.mcp_tools import build_mcp, command_queries, thread_runner
    from test_mcp_http_limits import post

    from engram.memory.recall import DENSE_FLOOR
    from engram.store.repo import Store

    notes = ["Retries back off exponentially, two to the power of the attempt",
             "The retry cap is five attempts, then the error is raised",
             "The cache is flushed every hour by a cron job",
             "The automobile is kept in the garage behind the office"]
    ids = [json.loads(run_engram(repo, "remember", n, "--json").stdout)["id"] for n in notes]
    run_engram(repo, "memory", "embed")  # (the real model: the vectors recall compares)
    never = "kubernetes pod eviction policy"

    def nothing_but_weak(doc: dict) -> None:
        assert doc["memories"] == [], doc
        weak = doc["weak"]
        assert weak["below"] == DENSE_FLOOR and 1 <= len(weak["memories"]) <= 3, weak
        assert all(w["id"] in ids and w["cosine"] < DENSE_FLOOR and w["summary"] in notes for w in weak["memories"])

    nothing_but_weak(json.loads(run_engram(repo, "recall", never, "--json").stdout))
    text = run_engram(repo, "recall", never)
    assert text.stdout == "" and f"no memory matches '{never}'" in text.stderr and "weak" in text.stderr, text.stderr
    near = json.loads(run_engram(repo, "recall", "where is the car", "--json").stdout)
    assert [m["id"] for m in near["memories"]] == [ids[3]] and "weak" not in near, near
    async with Client(stdio(repo)) as c:
        nothing_but_weak((await c.call_tool("recall", {"query": never})).structured_content)
    store = Store(repo)
    runner = thread_runner()
    endpoint = await start_endpoint(build_mcp(lambda: store, runner), store.endpoint_file,
                                    command_queries(lambda: store, runner))
    try:
        status, doc = await post(endpoint.port, endpoint.token, "recall", {"query": never})
        assert status == 200
        nothing_but_weak(doc)
    finally:
        await endpoint.stop()
