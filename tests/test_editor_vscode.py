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
from pathlib import Path

import pytest

from conftest import SPOTTER_MAIN, SPOTTER_OTHER, build_spot_repo

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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
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


def test_code_server_lenses_hover_explain(code_server: Path, vsix: Path, spot: Path, agent_file: str,
                                          tmp_path: Path) -> None:
    env = {**os.environ}
    for k in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{k}_HOME"] = str(tmp_path / "xdg" / k.lower())
    bin_cs = code_server / "node_modules" / ".bin" / "code-server"
    user, exts = tmp_path / "cs" / "user", tmp_path / "cs" / "ext"
    (user / "User").mkdir(parents=True)
    exts.mkdir(parents=True)
    run([str(bin_cs), "--user-data-dir", str(user), "--extensions-dir", str(exts), "--install-extension", str(vsix)],
        timeout=120, env=env)
    settings = user / "User" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({
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
    }, indent=1))
    port = free_port()
    log = (tmp_path / "code-server.log").open("w")
    server = subprocess.Popen(
        [str(bin_cs), "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override",
         "--user-data-dir", str(user), "--extensions-dir", str(exts), str(spot)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "code-server.log").read_text()[-3000:]
                assert time.monotonic() - t0 < 60, "code-server did not come up in 60 s"
                time.sleep(0.2)
        ARTIFACTS.mkdir(exist_ok=True)
        lines = (spot / agent_file).read_text().splitlines()
        hover_line = next(i for i, text in enumerate(lines, 1) if i > 5 and len(text.strip()) > 8)
        node_env = {**env, "NODE_PATH": str(code_server / "node_modules"), "CHROMIUM": CHROMIUM or ""}
        proc = subprocess.run(
            ["node", str(HERE / "vscode_e2e.js"), f"http://127.0.0.1:{port}/?folder={spot}", agent_file,
             str(hover_line), str(ARTIFACTS), SPOTTER_MAIN],
            capture_output=True, text=True, timeout=300, env=node_env)
        took = time.monotonic() - t0
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        result = json.loads(lines[-1]) if lines else {}
        (ARTIFACTS / "vscode-result.json").write_text(json.dumps(result, indent=1))
        failed = [c for c in result.get("checks", []) if not c["ok"]]
        assert proc.returncode == 0 and result.get("ok") and not failed, (
            f"failed checks: {json.dumps(failed, indent=1)[:4000]}\nstdout: {proc.stdout[-2000:]}\n"
            f"stderr: {proc.stderr[-2000:]}\ncode-server log: {(tmp_path / 'code-server.log').read_text()[-2000:]}")
        # The page checked the whole hover for SPOTTER_MAIN; the result keeps its start.
        assert "Asked" in result["hover"] and (SPOTTER_MAIN in result["hover"] or SPOTTER_OTHER in result["hover"])
        print(f"code-server run: {len(result['checks'])} checks passed in {took:.1f}s")
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
        log.close()
