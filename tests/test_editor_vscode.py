"""The VS Code extension (editors/vscode) in a real VS Code: code-server 4.100.3 (VS Code 1.100.3) driven
by playwright-core in Debian's headless Chromium, against the real `engram lsp`.

Heavy installs live outside the repository, in ~/.cache/engram-tests (or $ENGRAM_TEST_CACHE):
code-server + playwright-core (tests/editors/install-code-server.sh) and the extension's node_modules
(tests/editors/build-vscode-extension.sh). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import SPOTTER_MAIN, SPOTTER_OTHER, build_spot_repo, run_engram

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "editors"
CACHE = Path(os.environ.get("ENGRAM_TEST_CACHE", Path.home() / ".cache" / "engram-tests"))
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def need_tools() -> None:
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (apt-get install nodejs npm)")
    if not CHROMIUM:
        pytest.skip("chromium is not installed (apt-get install chromium)")


def run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def code_server() -> Path:
    need_tools()
    dest = CACHE / "code-server"
    run(["bash", str(HERE / "install-code-server.sh"), str(dest)], timeout=1800)
    return dest


@pytest.fixture(scope="module")
def vsix() -> Path:
    need_tools()
    proc = run(["bash", str(HERE / "build-vscode-extension.sh"), str(CACHE / "vscode-extension")], timeout=900)
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.exists()
    return path


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vscode") / "repo"
    build_spot_repo(spotter, root)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_extension_unit_tests_and_package(vsix: Path) -> None:
    """`npm ci && npm run build`, `node --test test/` and `vsce package` (the build script runs all three)."""
    assert vsix.stat().st_size > 100_000


SETTINGS = {
    # The server from the Python running these tests: `<python> -m engram_server.entry lsp`.
    "engram.pythonPath": sys.executable,
    "workbench.startupEditor": "none",
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "update.mode": "none",
    "workbench.tips.enabled": False,
    "chat.disableAIFeatures": True,
    "editor.hover.delay": 200,
    "editor.minimap.enabled": False,
    "window.zoomLevel": 0,
}


@contextmanager
def code_server_on(code_server: Path, vsix: Path, folder: Path, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """code-server with the extension installed, serving `folder`, its state under `tmp_path`: yields
    the workbench's URL and the environment for the node script; kills it afterwards."""
    env = {**os.environ}
    for k in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{k}_HOME"] = str(tmp_path / "xdg" / k.lower())
    bin_cs = code_server / "node_modules" / ".bin" / "code-server"
    user, exts = tmp_path / "cs" / "user", tmp_path / "cs" / "ext"
    (user / "User").mkdir(parents=True)
    exts.mkdir(parents=True)
    run([str(bin_cs), "--user-data-dir", str(user), "--extensions-dir", str(exts), "--install-extension", str(vsix)],
        timeout=120, env=env)
    (user / "User" / "settings.json").write_text(json.dumps(SETTINGS, indent=1))
    port = free_port()
    log_path = tmp_path / "code-server.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [str(bin_cs), "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override",
         "--user-data-dir", str(user), "--extensions-dir", str(exts), str(folder)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                assert server.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() - t0 < 60, "code-server did not come up in 60 s"
                time.sleep(0.2)
        ARTIFACTS.mkdir(exist_ok=True)
        yield (f"http://127.0.0.1:{port}/?folder={folder}",
               {**env, "NODE_PATH": str(code_server / "node_modules"), "CHROMIUM": CHROMIUM or "",
                "CODE_SERVER_LOG": str(log_path)})
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
        log.close()


def run_script(script: str, args: list[str], env: dict[str, str], artifact: str) -> dict[str, Any]:
    """Runs a node script of tests/editors, which prints its checks as one JSON line (kept in
    test-artifacts/); fails with the failed checks, the script's output and code-server's log."""
    proc = subprocess.run(["node", str(HERE / script), *args], check=False, capture_output=True, text=True, timeout=300, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    result = json.loads(lines[-1]) if lines else {}
    (ARTIFACTS / artifact).write_text(json.dumps(result, indent=1))
    failed = [c for c in result.get("checks", []) if not c["ok"]]
    assert proc.returncode == 0 and result.get("ok") and not failed, (
        f"failed checks: {json.dumps(failed, indent=1)[:4000]}\nstdout: {proc.stdout[-2000:]}\n"
        f"stderr: {proc.stderr[-2000:]}\ncode-server log: {Path(env['CODE_SERVER_LOG']).read_text()[-2000:]}")
    return result


def test_code_server_lenses_hover_explain(code_server: Path, vsix: Path, spot: Path, agent_file: str,
                                          tmp_path: Path) -> None:
    t0 = time.monotonic()
    with code_server_on(code_server, vsix, spot, tmp_path) as (url, env):
        lines = (spot / agent_file).read_text().splitlines()
        hover_line = next(i for i, text in enumerate(lines, 1) if i > 5 and len(text.strip()) > 8)
        result = run_script("vscode_e2e.js", [url, agent_file, str(hover_line), str(ARTIFACTS), SPOTTER_MAIN], env,
                            "vscode-result.json")
    # The page checked the whole hover for SPOTTER_MAIN; the result keeps its start.
    assert "Asked" in result["hover"] and (SPOTTER_MAIN in result["hover"] or SPOTTER_OTHER in result["hover"])
    print(f"code-server run: {len(result['checks'])} checks passed in {time.monotonic() - t0:.1f}s")


@pytest.fixture(scope="module")
def spot_notes(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of its own: the notes test writes notes and deletes lines."""
    root = tmp_path_factory.mktemp("vscode-notes") / "repo"
    build_spot_repo(spotter, root)
    return root


def memories(root: Path, *flags: str) -> dict[str, dict[str, Any]]:
    """What `engram memory list --json` sees, by id."""
    out = json.loads(run_engram(root, "memory", "list", "--json", *flags).stdout)
    return {m["id"]: m for m in out["memories"]}


def test_code_server_notes(code_server: Path, vsix: Path, spot_notes: Path, agent_file: str, tmp_path: Path) -> None:
    """A note seeded from the command line shows first in the hover and in the lens; the Remember
    command writes one the command line lists; deleting a note's lines brings a hint diagnostic."""
    summary = "build/1 indexes the sessions by id once: format_context looks each one up there."
    a, b = 14, 17  # the `with` and the sessions of build/1: nothing else in the file looks like them
    seeded = json.loads(run_engram(spot_notes, "remember", summary, "--at", f"{agent_file}:{a}-{b}",
                                   "--kind", "decision", "--json").stdout)["id"]
    text = "Check the 300-character cut against the UI before changing it"
    spec = {"note": {"a": a, "b": b, "summary": summary},
            "remember": {"a": 9, "b": 12, "kind": "todo", "text": text}}
    with code_server_on(code_server, vsix, spot_notes, tmp_path) as (url, env):
        result = run_script("vscode_notes.js", [url, agent_file, str(ARTIFACTS), json.dumps(spec)], env,
                            "vscode-notes-result.json")
    listed = memories(spot_notes)
    made = listed.get(result["remembered"]) or next((m for m in listed.values() if m["content"] == text), None)
    assert made is not None, f"the note written in VS Code is not in `engram memory list`: {list(listed.values())}"
    assert made["kind"] == "todo" and made["content"] == text and made["source"]["type"] == "person", made
    assert [(x["file"], x["lines"]) for x in made["anchors"]] == [(agent_file, [9, 12])], made["anchors"]
    drifted = memories(spot_notes, "--drifted")
    assert seeded in drifted and drifted[seeded]["anchors"][0]["state"] in ("vanished", "edited"), drifted
