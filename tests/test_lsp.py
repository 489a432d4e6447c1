"""The language server through a real LSP client (pytest-lsp): lenses, hover, live regions, commands."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import httpx2
import pytest
import pytest_lsp
from conftest import (
    SPOTTER_MAIN,
    SPOTTER_OTHER,
    build_spot_repo,
    created_by,
    git,
    run_engram,
)
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_lineage import block, edit, tape, text

from engram.index import postings
from engram.index.db import BUSY_TIMEOUT_MS

SERVER = [sys.executable, "-m", "engram_server.entry", "lsp", "--stdio"]


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lsp") / "repo"
    build_spot_repo(spotter, root)
    return root


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    lsp_client.indexed = []  # type: ignore[attr-defined]
    lsp_client.refreshes = []  # type: ignore[attr-defined]

    @lsp_client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(ls, params):  # noqa: ANN001, ANN202 - VS Code answers refresh by asking for lenses again
        lsp_client.refreshes.append(params)  # type: ignore[attr-defined]

    @lsp_client.feature("engram/indexChanged")
    def on_index_changed(ls, params):  # noqa: ANN001, ANN202
        lsp_client.indexed.append(params)  # type: ignore[attr-defined]

    yield
    await lsp_client.shutdown_session()


async def start(client: LanguageClient, root: Path, options: dict | None = None, caps: str = "visual-studio-code"):
    return await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(caps), root_uri=root.as_uri(), initialization_options=options or {},
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)]))


def open_doc(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="plaintext", version=version, text=path.read_text() if text is None else text)))
    return uri


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri))) or []


async def test_lenses_over_agent_code_resolve_to_explain(client: LanguageClient, spot: Path, agent_file: str) -> None:
    await start(client, spot)
    uri = open_doc(client, spot / agent_file)
    found = await lenses(client, uri)
    assert found, "the agent-written file has evidence"
    n_lines = len((spot / agent_file).read_text().splitlines())
    assert len(found) <= max(1, n_lines // 3), "at most one lens per few lines"
    assert all(lens.command is None for lens in found), "lenses resolve lazily"
    resolved = await client.code_lens_resolve_async(found[0])
    assert re.fullmatch(r"why\? \d+ sessions? · Claude Code · .+ ago", resolved.command.title), resolved.command.title
    assert resolved.command.command == "engram.explain"
    uri_arg, rng = resolved.command.arguments
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="engram.explain", arguments=[uri_arg, rng]))
    assert result["result"]["sessions"][0]["session_id"] == SPOTTER_MAIN
    assert SPOTTER_MAIN in result["markdown"]


async def test_hover_tells_why_and_nothing_without_evidence(client: LanguageClient, spot: Path,
                                                            agent_file: str) -> None:
    await start(client, spot)
    uri = open_doc(client, spot / agent_file)
    found = await lenses(client, uri)
    line = found[0].range.start.line
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line + 1, character=2)))
    assert h is not None and h.contents.kind == types.MarkupKind.Markdown
    md = h.contents.value
    assert "** · Claude Code · " in md and SPOTTER_MAIN in md and "**Asked:**" in md
    assert "touch(es)" not in md and "confidence" not in md and " via " not in md  # no internal terms
    assert "command:engram.view?" in md
    other = spot / "notes.txt"
    other.write_text("shopping list\napples\npears\n")
    uri2 = open_doc(client, other)
    assert await lenses(client, uri2) == []
    h2 = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri2), position=types.Position(line=1, character=1)))
    assert h2 is None


async def test_regions_follow_edits_above_them(client: LanguageClient, spot: Path, agent_file: str) -> None:
    await start(client, spot)
    uri = open_doc(client, spot / agent_file)
    before = [lens.range.start.line for lens in await lenses(client, uri)]
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            text="# one\n# two\n# three\n")]))
    after = [lens.range.start.line for lens in await lenses(client, uri)]
    assert after == [line + 3 for line in before]


async def test_utf16_positions_on_non_ascii_lines(client: LanguageClient, spot: Path, agent_file: str) -> None:
    await start(client, spot)
    original = (spot / agent_file).read_text()
    text = "# 😀😀 naïve 😀\n" + original
    uri = open_doc(client, spot / agent_file, text=text)
    # "# 😀😀 " is 7 UTF-16 code units (each emoji is 2) but 5 code points.
    insert = types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=0, character=7), end=types.Position(line=0, character=7)),
        text="X")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2), content_changes=[insert]))
    res = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="engram.explain", arguments=[uri, {"start": {"line": 0, "character": 0},
                                                   "end": {"line": 0, "character": 20}}, {"brief": True}]))
    assert res["text"] == "# 😀😀 Xnaïve 😀\n"


async def test_editor_tape_keeps_lineage_through_a_human_rewrite(client: LanguageClient, spotter: Path,
                                                                 tmp_path: Path) -> None:
    root = tmp_path / "repo"
    build_spot_repo(spotter, root)
    created = created_by(spotter, SPOTTER_MAIN)
    rel = next(r for r, c in sorted(created.items()) if (root / r).read_text() == c and len(c.splitlines()) > 40)
    await start(client, root)
    path = root / rel
    lines = path.read_text().splitlines()
    a, b = 10, 30
    rng = random.Random(3)
    rewritten = list(lines)
    for i in range(a, b):
        words = list(re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", rewritten[i]))
        for m in sorted(rng.sample(words, len(words) // 2), key=lambda m: -m.start()):
            rewritten[i] = rewritten[i][: m.start()] + "hm" + m.group(0)[::-1] + rewritten[i][m.end():]
    new_text = "\n".join(rewritten) + "\n"
    uri = open_doc(client, path)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=new_text)]))
    path.write_text(new_text)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    for _ in range(100):
        if client.indexed:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.1)
    assert client.indexed  # type: ignore[attr-defined]
    res = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="engram.explain", arguments=[uri, {"start": {"line": a, "character": 0},
                                                   "end": {"line": b, "character": 0}}, {"brief": True}]))
    sessions = {s["session_id"]: s for s in res["result"]["sessions"]}
    editor = [s for s in sessions if s.startswith("editor-")]
    assert editor and sessions[editor[0]]["harness"] == "editor"
    assert SPOTTER_MAIN in sessions
    vias = {f["via"] for f in sessions[SPOTTER_MAIN]["fragments"]}
    assert "lineage" in vias, vias
    # The fingerprints alone no longer reach the agent: without lineage it is gone.
    res2 = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="engram.explain", arguments=[uri, {"start": {"line": a, "character": 0},
                                                   "end": {"line": b, "character": 0}},
                                             {"brief": True, "minConfidence": 1.01}]))
    assert SPOTTER_MAIN not in {s["session_id"] for s in res2["result"]["sessions"]}


async def test_commands_and_bad_requests(client: LanguageClient, spot: Path, agent_file: str) -> None:
    await start(client, spot)
    uri = open_doc(client, spot / agent_file)
    tapes = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="engram.tapes",
                                                                                   arguments=[]))
    main = next(t for t in tapes if t["session_id"] == SPOTTER_MAIN)
    view = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="engram.view", arguments=[main["id"][:10], 5, 2, 2]))
    assert [e["offset"] for e in view["events"]] == [3, 4, 5, 6, 7] and "#5" in view["markdown"]
    n = len((spot / agent_file).read_text().splitlines())
    bad = [
        ["file:///nowhere/x.py", {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}],
        [uri, {"start": {"line": n + 5, "character": 0}, "end": {"line": n + 9, "character": 0}}],
        [uri, "not a range"],
        [],
    ]
    for args in bad:
        with pytest.raises(Exception) as err:
            await client.workspace_execute_command_async(types.ExecuteCommandParams(command="engram.explain",
                                                                                   arguments=args))
        assert "JsonRpc" in type(err.value).__name__ or "rror" in str(err.value)
    with pytest.raises(Exception):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command="engram.view",
                                                                               arguments=["zzzz", 0]))
    for options in ({"before": "three"}, {"after": None, "before": [1]}, {"minConfidence": "high"}):
        with pytest.raises(Exception) as err:  # (an internal error, a ValueError's traceback in the log)
            await client.workspace_execute_command_async(types.ExecuteCommandParams(
                command="engram.explain", arguments=[uri, {"start": {"line": 0, "character": 0},
                                                           "end": {"line": 1, "character": 0}}, options]))
        assert type(err.value).__name__ == "JsonRpcInvalidParams" and "expected a number" in str(err.value)
    # The server is still alive and answering.
    assert await lenses(client, uri)


async def test_ingest_reports_progress_and_refreshes(client: LanguageClient, spot: Path, agent_file: str) -> None:
    await start(client, spot)
    open_doc(client, spot / agent_file)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="engram.ingest",
                                                                                    arguments=[]))
    assert result["cancelled"] is False and result["summary"].startswith("ingest:")
    kinds = [type(r).__name__ for reports in client.progress_reports.values() for r in reports]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert client.indexed and client.refreshes  # type: ignore[attr-defined]


def imported(importtime: str) -> set[str]:
    """The modules `python -X importtime` reported loading."""
    return {line.split("|")[-1].strip() for line in importtime.splitlines() if line.startswith("import time:")}


async def test_an_ingest_in_a_terminal_is_handed_to_the_server_and_lights_up_lenses(
        client: LanguageClient, spotter: Path, tmp_path: Path) -> None:
    """`engram ingest FILE` while the editor is open: the server captures it (its imports and
    index warm), tells the editor, and redacts with the configuration as it is now."""
    root = tmp_path / "repo"
    build_spot_repo(spotter, root, ingest=False)
    # The server ingests only from transcript locations: the repository, ~/.claude, ~/.codex, these.
    dirs = f"[ingest]\ntranscript_dirs = [{json.dumps(str(tmp_path))}, {json.dumps(str(spotter))}]\n"
    (root / ".engram" / "config.toml").write_text(dirs)
    rel = next(r for r, c in sorted(created_by(spotter, SPOTTER_MAIN).items())
               if (root / r).read_text() == c and len(c.splitlines()) > 40)
    await start(client, root)
    uri = open_doc(client, root / rel)
    assert await lenses(client, uri) == []
    run_file = root / ".engram" / "run" / "mcp.json"
    for _ in range(200):
        if run_file.exists():
            break
        await asyncio.sleep(0.05)

    def ingest(path: Path, script: bool = False) -> str:
        if script:  # as the installed `engram` runs it: handed over before the command line is built
            proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "engram_server.entry", "-v", "ingest",
                                   "--map", "/nowhere/else=/tmp", str(path)], cwd=root, capture_output=True,
                                  text=True, env={**os.environ, "ENGRAM_LOCAL": ""}, timeout=600, check=False)
            bare = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True,
                                  check=True)
            loaded = imported(proc.stderr) - imported(bare.stderr)  # (site's own imports are not ours)
            assert "engram.cli.running_server" in loaded and not loaded & {"argparse", "numpy", "pathlib", "engram.cli.main"}, loaded
        else:
            proc = run_engram(root, "-v", "ingest", str(path), env={"ENGRAM_LOCAL": ""})
        assert "answered by the language server" in proc.stderr, proc.stderr
        assert proc.stdout.startswith("ingest: 1 session, 1 new tape,"), proc.stdout
        return proc.stdout

    inbox = tmp_path / "inbox"  # a directory, with a link to a transcript deleted since
    inbox.mkdir()
    (inbox / f"{SPOTTER_OTHER}.jsonl").symlink_to(spotter / f"{SPOTTER_OTHER}.jsonl")
    (inbox / "gone.jsonl").symlink_to(tmp_path / "deleted.jsonl")
    await asyncio.to_thread(ingest, inbox)  # the server has read the configuration now
    (root / ".engram" / "config.toml").write_text(
        dirs + '[redact]\npatterns = [{name = "ticket", pattern = "spotter-gqc"}]\n')
    client.indexed.clear()  # type: ignore[attr-defined]
    await asyncio.to_thread(ingest, spotter / f"{SPOTTER_MAIN}.jsonl", True)
    for _ in range(200):
        if client.indexed:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.05)
    assert client.indexed, "the editor hears of the new tape"  # type: ignore[attr-defined]
    found = await lenses(client, uri)
    assert found, "the file its session wrote has lenses now"
    resolved = await client.code_lens_resolve_async(found[0])
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="engram.explain", arguments=resolved.command.arguments))
    assert result["result"]["sessions"][0]["session_id"] == SPOTTER_MAIN
    shown = run_engram(root, "show", SPOTTER_MAIN, "--json").stdout
    assert (shown.count("spotter-gqc"), "[REDACTED:ticket]" in shown) == (0, True)
    # The route has the endpoint's guards, and takes absolute paths only.
    info = json.loads(run_file.read_text())
    url, auth = f"http://127.0.0.1:{info['port']}/engram/ingest", {"Authorization": f"Bearer {info['token']}"}
    body = {"paths": [str(spotter / "subagent.jsonl")], "maps": []}
    async with httpx2.AsyncClient() as h:
        assert (await h.post(url, json=body)).status_code == 401
        assert (await h.post(url, json={"paths": ["subagent.jsonl"]}, headers=auth)).status_code == 400
    assert len(json.loads(run_engram(root, "tapes", "--json").stdout)) == 2


async def run_file_of(root: Path) -> Path:
    """The endpoint's run file, once the server has written it."""
    run_file = root / ".engram" / "run" / "mcp.json"
    for _ in range(200):
        if run_file.exists():
            break
        await asyncio.sleep(0.05)
    return run_file


async def test_appends_handed_over_never_wait_for_a_merge_and_the_server_merges_when_idle(
        client: LanguageClient, tmp_path: Path) -> None:
    """An agent's hook hands the server an append after every turn: none of them merges
    segments (40-70 ms at 1 GB), and once they stop the server merges them, losing nothing."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    run_engram(root, "init")
    src = tmp_path / "src"
    src.mkdir()
    (root / ".engram" / "config.toml").write_text(f"[ingest]\ntranscript_dirs = [{json.dumps(str(src))}]\n")
    n = postings.MAX_SEGMENTS + 3
    sessions = [tape(src, f"t{i:02d}", f"2026-02-{i + 1:02d}T10:00:00Z",
                     [edit(f"src/f{i}.py", [], block(f"w{i}", 10), f"2026-02-{i + 1:02d}T10:00:00Z", op="create")])
                for i in range(n)]
    await start(client, root)
    await run_file_of(root)

    def segments() -> int:
        db = apsw.Connection(str(root / ".engram" / "index.sqlite"))
        db.set_busy_timeout(BUSY_TIMEOUT_MS)  # the server merges these segments meanwhile
        try:
            return int(db.execute("SELECT count(*) FROM segments").fetchall()[0][0])
        finally:
            db.close()

    def append(path: Path) -> int:
        proc = run_engram(root, "-v", "ingest", str(path), env={"ENGRAM_LOCAL": ""})
        assert "answered by the language server" in proc.stderr, proc.stderr
        return segments()

    seen = [await asyncio.to_thread(append, p) for p in sessions]
    # Each append its own segment, none merged while they came (an idle gap could merge some, but
    # not before more than MAX_SEGMENTS were there).
    assert max(seen) > postings.MAX_SEGMENTS and max(seen) <= postings.MAX_SEGMENTS_UNMERGED, seen
    for _ in range(200):  # the server merges once no append has come for MERGE_IDLE_S
        if segments() <= postings.MAX_SEGMENTS:
            break
        await asyncio.sleep(0.05)
    assert segments() <= postings.MAX_SEGMENTS
    for i in (0, n // 2, n - 1):  # every session still found by the code it wrote
        doc = json.loads(run_engram(root, "explain", "--brief", "--text", "-", input=text(block(f"w{i}", 10)).encode(),
                                    env={"ENGRAM_LOCAL": "1"}).stdout)
        assert [s["session_id"] for s in doc["sessions"]] == [f"t{i:02d}"]


async def test_settings_turn_lenses_and_hover_off(client: LanguageClient, spot: Path, agent_file: str) -> None:
    await start(client, spot, {"lenses": False, "hover": False})
    uri = open_doc(client, spot / agent_file)
    assert await lenses(client, uri) == []
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=12, character=1)))
    assert h is None


async def test_a_commands_expected_failure_is_its_message_not_an_internal_error(client: LanguageClient,
                                                                                 repo: Path) -> None:
    """An EngramError in a command (here a damaged index) reaches the editor as its one-line message
    (explain and tapes raised it as an internal error: the class name, a traceback in the log)."""
    (repo / "a.py").write_text("x = 1\n")
    (repo / ".engram" / "index.sqlite").write_bytes(b"not a database, " * 512)
    await start(client, repo)
    uri = open_doc(client, repo / "a.py")
    for name, args in (("engram.tapes", []), ("engram.explain", [uri, {"start": {"line": 0, "character": 0},
                                                                      "end": {"line": 1, "character": 0}}])):
        with pytest.raises(Exception) as err:
            await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=args))
        assert type(err.value).__name__ == "JsonRpcInvalidParams" and "is damaged" in str(err.value), (name, err.value)


async def test_outside_a_repository_and_without_a_store(client: LanguageClient, tmp_path: Path) -> None:
    plain = tmp_path / "loose"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")
    bare = tmp_path / "nostore"
    bare.mkdir()
    git(bare, "init", "-q")
    (bare / "b.py").write_text("y = 2\n")
    await start(client, tmp_path)
    shown = asyncio.ensure_future(client.wait_for_notification(types.WINDOW_SHOW_MESSAGE))
    assert await lenses(client, open_doc(client, plain / "a.py")) == []
    assert await lenses(client, open_doc(client, bare / "b.py")) == []
    await asyncio.wait_for(shown, 10)
    assert any("engram init" in m.message for m in client.messages)
    assert not client.log_messages or all(m.type != types.MessageType.Error for m in client.log_messages)


async def test_a_store_that_cannot_be_written_is_said_once_in_the_editor(tmp_path: Path) -> None:
    """The language server needs `.engram/` writable to read its index (SQLite's WAL): on a
    read-only store every lens and hover was silently empty. The editor is told why, once."""
    repo = tmp_path / "ro"
    repo.mkdir()
    git(repo, "init", "-q")
    run_engram(repo, "init")
    (repo / "a.py").write_text("x = 1\n")
    store = repo / ".engram"
    if os.geteuid() != 0:
        for p in [store, *store.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        command = SERVER
    else:  # root: permissions do not stop it; a read-only bind mount does
        if not shutil.which("unshare"):
            pytest.skip("root without unshare: no way to make the store read-only")
        probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind .engram .engram && "
                                "mount -o remount,bind,ro .engram"], cwd=repo, capture_output=True, check=False)
        if probe.returncode:
            pytest.skip(f"no read-only bind mount here: {probe.stderr.decode().strip()}")
        command = ["unshare", "-m", "sh", "-c", 'mount --bind .engram .engram && mount -o remount,bind,ro .engram '
                   '&& exec "$@"', "sh", *SERVER]
    client = pytest_lsp.make_test_lsp_client()
    await client.start_io(command[0], *command[1:], cwd=str(repo))
    try:
        await start(client, repo)
        shown = asyncio.ensure_future(client.wait_for_notification(types.WINDOW_SHOW_MESSAGE))
        assert await lenses(client, open_doc(client, repo / "a.py")) == []
        await asyncio.wait_for(shown, 10)
        said = [m.message for m in client.messages if "cannot be written" in m.message]
        assert len(said) == 1 and ".engram cannot be written" in said[0] and "no lenses" in said[0], client.messages
        await lenses(client, open_doc(client, repo / "a.py", version=2))
        assert len([m for m in client.messages if "cannot be written" in m.message]) == 1, "once"
    finally:
        await client.shutdown_session()
        if os.geteuid() != 0:
            for p in [store, *store.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)


async def test_clients_without_refresh_support_get_the_notification(client: LanguageClient, spot: Path,
                                                                   agent_file: str) -> None:
    await start(client, spot, caps="neovim@v0.11.0")
    open_doc(client, spot / agent_file)
    await client.workspace_execute_command_async(types.ExecuteCommandParams(command="engram.reindex", arguments=[]))
    assert client.indexed and not client.refreshes  # type: ignore[attr-defined]
    assert await lenses(client, (spot / agent_file).as_uri())


async def test_multi_root_workspace(client: LanguageClient, spot: Path, agent_file: str, tmp_path: Path) -> None:
    second = tmp_path / "second"
    second.mkdir()
    git(second, "init", "-q")
    run_engram(second, "init")
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=spot.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=spot.as_uri(), name="spot"),
                           types.WorkspaceFolder(uri=second.as_uri(), name="second")]))
    (second / "new.py").write_text("print('hello')\n")
    assert await lenses(client, open_doc(client, spot / agent_file))
    assert await lenses(client, open_doc(client, second / "new.py")) == []
    assert not [m for m in client.messages if "engram init" in m.message], "both roots have a store"


async def test_a_link_leading_out_of_the_repository_gets_no_lens_hover_or_error(client: LanguageClient,
                                                                               tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    run_engram(repo, "init")
    (repo / "a.py").write_text("def f():\n    return 1\n")
    run_engram(repo, "remember", "f returns one on purpose", "--at", "a.py:1-2")
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")  # the same text, outside the repository
    (repo / "link.py").symlink_to(tmp_path / "a.py")
    await start(client, repo)
    uri = open_doc(client, repo / "link.py")
    assert await lenses(client, uri) == []
    assert await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=1))) is None
    with pytest.raises(Exception, match="link leading out of the repository"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="engram.explain", arguments=[uri, {"start": {"line": 0, "character": 0},
                                                       "end": {"line": 1, "character": 0}}]))
    inside = open_doc(client, repo / "a.py")
    assert await lenses(client, inside), "the repository's own file still has its note's lens"
    assert not [m for m in client.log_messages if m.type == types.MessageType.Error]
