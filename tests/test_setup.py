"""Set-up that cannot fail silently: `engram setup` names the engram that ran it by its absolute
path and checks that it runs, even off PATH; `setup --remove` gives the user's files back byte for
byte; and discovery says where it looked when it finds nothing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from conftest import git, run_engram
from engram.capture.discovery import claude_project_name
from test_discovery import claude_session, codex_rollout, write_project

NO_ENGRAM_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if os.path.isdir(p))


def off_path(engram_bin: Path, cwd: Path, *args: str, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess[str]:
    """`engram ARGS` started by its path from a virtual environment that is not activated:
    no `engram` on PATH."""
    proc = subprocess.run([str(engram_bin / "engram"), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": NO_ENGRAM_PATH, **(env or {})})
    return proc


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    return root


async def test_setup_off_path_writes_the_absolute_path_and_the_agent_s_commands_run(
        project: Path, engram_bin: Path, tmp_path: Path) -> None:
    run_engram(project, "init")
    env = {"CODEX_HOME": str(tmp_path / "codex")}
    out = off_path(engram_bin, project, "setup", "claude", env=env)
    assert out.returncode == 0, out.stderr
    engram = str(engram_bin / "engram")
    assert f"verified: `{engram} --version` answers engram " in out.stdout
    assert "`engram` is not on PATH" in out.stderr and str(engram_bin) in out.stderr
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["engram"]
    assert server == {"type": "stdio", "command": engram, "args": ["mcp"]}
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    commands = {h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]}
    assert commands == {f"{engram} hook"}

    # The hook as Claude Code runs it (a shell, the same PATH without engram) captures the session.
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text("".join(json.dumps(r) + "\n" for r in claude_session(project, "s1", "a.py", "x = 1\n")))
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project),
               "hook_event_name": "SessionEnd", "reason": "exit"}
    hook = subprocess.run(f"{engram} hook", shell=True, cwd=project, input=json.dumps(payload), text=True,
                          capture_output=True, timeout=30, env={**os.environ, "PATH": NO_ENGRAM_PATH})
    assert hook.returncode == 0, hook.stderr
    deadline, tapes = time.monotonic() + 60, []
    while time.monotonic() < deadline and not tapes:
        tapes = json.loads(run_engram(project, "tapes", "--json").stdout)
        time.sleep(0.3)
    assert [t["session_id"] for t in tapes] == ["s1"]

    # The MCP server as Claude Code starts it, from .mcp.json.
    params = StdioServerParameters(command=server["command"], args=server["args"], cwd=str(project),
                                   env={**os.environ, "PATH": NO_ENGRAM_PATH})
    async with Client(params) as c:
        assert "explain" in {t.name for t in (await c.list_tools()).tools}


def test_setup_fails_loudly_when_the_engram_it_would_configure_does_not_run(project: Path, engram_bin: Path) -> None:
    broken = engram_bin / "engram"
    broken.write_text(f"#!{sys.executable}\nimport sys\nif '--version' in sys.argv:\n    sys.exit('broken install')\n"
                      "from engram_server.entry import console\nsys.exit(console())\n")
    out = off_path(engram_bin, project, "setup", "claude")
    assert out.returncode == 1
    assert "the configured command does not run" in out.stderr and "broken install" in out.stderr


def test_setup_says_which_files_it_creates_and_which_it_changes(project: Path, engram_bin: Path) -> None:
    """A file setup makes is "created" ("would create" in a dry run), one it merges into "updated"
    (every file was said "updated", as if the user had one already)."""
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    dry = off_path(engram_bin, project, "setup", "claude", "--dry-run").stdout
    assert f"--- {project / '.mcp.json'} (would change)" in dry
    assert f"--- {project / '.claude' / 'settings.json'} (would create)" in dry
    lines = off_path(engram_bin, project, "setup", "claude").stdout.splitlines()
    assert lines[:2] == [f"updated: {project / '.mcp.json'}", f"created: {project / '.claude' / 'settings.json'}"]


def test_setup_again_from_another_engram_updates_its_entries_in_place(project: Path, engram_bin: Path) -> None:
    """An older setup wrote a bare `engram`; a setup from a venv replaces it, adds nothing twice."""
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"engram": {"type": "stdio", "command": "engram",
                                                                             "args": ["mcp"]}}}))
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"SessionEnd": [
        {"hooks": [{"type": "command", "command": "engram hook", "timeout": 30}]}]}}))
    told = off_path(engram_bin, project, "setup", "claude")
    assert told.returncode == 0 and told.stdout.startswith(f"updated: {project / '.mcp.json'}\n")
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    assert [len(hooks[e]) for e in ("PostToolUse", "PreCompact", "SessionEnd")] == [1, 1, 1]
    assert hooks["SessionEnd"][0]["hooks"][0]["command"] == f"{engram_bin / 'engram'} hook"
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["engram"]["command"] == \
        str(engram_bin / "engram")


MCP_JSON = """{
    "mcpServers": {
        "github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"]}
    }
}
"""
SETTINGS_JSON = """{
  "permissions": {"allow": ["Bash(npm test)"], "deny": []},
  "hooks": {
    "PostToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/lint.sh"}]}
    ]
  },
  "env": {}
}
"""
CODEX_TOML = """# my codex settings
model = "gpt-5-codex"   # the fast one

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[profiles.work]
model = "o3"
"""


def test_remove_gives_back_the_user_s_files_byte_for_byte(project: Path, engram_bin: Path, tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.mkdir()
    (project / ".mcp.json").write_text(MCP_JSON)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(SETTINGS_JSON)
    (codex / "config.toml").write_text(CODEX_TOML)
    env = {"CODEX_HOME": str(codex)}
    for agent in ("claude", "codex", "claude", "codex"):  # twice: the second changes nothing
        assert off_path(engram_bin, project, "setup", agent, env=env).returncode == 0
    conf = tomllib.loads((codex / "config.toml").read_text())
    assert conf["notify"] == [str(engram_bin / "engram"), "hook"] and conf["mcp_servers"]["docs"]["command"] == "npx"
    assert conf["profiles"] == {"work": {"model": "o3"}}
    assert "github" in json.loads((project / ".mcp.json").read_text())["mcpServers"]

    out = off_path(engram_bin, project, "setup", "--remove", env=env)
    assert out.returncode == 0, out.stderr
    assert (project / ".mcp.json").read_text() == MCP_JSON
    assert (project / ".claude" / "settings.json").read_text() == SETTINGS_JSON
    assert (codex / "config.toml").read_text() == CODEX_TOML
    leftovers = [p.name for p in (project, project / ".claude", codex) for p in p.iterdir() if "engram" in p.name]
    assert leftovers == []
    again = off_path(engram_bin, project, "setup", "--remove", env=env)
    assert again.returncode == 0 and again.stdout.count("nothing of Engram's") == 3


def test_remove_after_the_user_changed_the_file_takes_only_engram_s_entries(
        project: Path, engram_bin: Path, tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path / "codex")}
    off_path(engram_bin, project, "setup", "claude", env=env)  # no files before: setup creates them
    mcp = json.loads((project / ".mcp.json").read_text())
    mcp["mcpServers"]["mine"] = {"command": "my-server"}
    (project / ".mcp.json").write_text(json.dumps(mcp, indent=2))
    off_path(engram_bin, project, "setup", "--remove", "claude", env=env)
    assert json.loads((project / ".mcp.json").read_text()) == {"mcpServers": {"mine": {"command": "my-server"}}}
    assert not (project / ".claude").exists()  # settings.json held only Engram's hooks: setup's, gone
    off_path(engram_bin, project, "setup", "codex", env=env)
    off_path(engram_bin, project, "setup", "--remove", "codex", env=env)
    assert not (tmp_path / "codex" / "config.toml").exists()


def test_setup_codex_leaves_another_notify_and_says_so(project: Path, engram_bin: Path, tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.mkdir()
    (codex / "config.toml").write_text('notify = ["my-notifier"]\n')
    out = off_path(engram_bin, project, "setup", "codex", env={"CODEX_HOME": str(codex)})
    assert out.returncode == 0 and "already has notify" in out.stderr
    assert tomllib.loads((codex / "config.toml").read_text())["notify"] == ["my-notifier"]
    off_path(engram_bin, project, "setup", "--remove", "codex", env={"CODEX_HOME": str(codex)})
    assert (codex / "config.toml").read_text() == 'notify = ["my-notifier"]\n'


def test_the_dry_run_and_json_report_the_command_and_write_nothing(project: Path, engram_bin: Path) -> None:
    out = off_path(engram_bin, project, "setup", "claude", "--dry-run", "--json")
    doc = json.loads(out.stdout)
    assert doc["command"] == [str(engram_bin / "engram")] and doc["verified"] is True
    assert doc["version"].startswith("engram ") and not (project / ".mcp.json").exists()
    assert any("not on PATH" in w for w in doc["warnings"])


def test_run_as_a_module_setup_configures_that_python(project: Path) -> None:
    run_engram(project, "setup", "claude")
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["engram"]
    assert [server["command"], *server["args"]] == [os.path.abspath(sys.executable), "-m", "engram_server.entry", "mcp"]
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    assert hooks["SessionEnd"][0]["hooks"][0]["command"] == \
        shlex.join([os.path.abspath(sys.executable), "-m", "engram_server.entry", "hook"])


# ---------------------------------------------------------------- discovery


def test_ingest_finding_nothing_says_where_it_looked_and_why(project: Path, tmp_path: Path) -> None:
    run_engram(project, "init")
    home, codex = tmp_path / "claude", tmp_path / "codex"
    elsewhere = tmp_path / "old" / "repo"
    write_project(home, elsewhere, "s1", claude_session(elsewhere, "s1", "a.py", "x = 1\n"))
    codex_rollout(codex, tmp_path / "other", "c1")
    env = {"CLAUDE_CONFIG_DIR": str(home), "CODEX_HOME": str(codex)}
    out = run_engram(project, "ingest", env=env).stdout
    assert out.startswith("ingest: 0 sessions,")
    assert f"looked for sessions whose working directory is in {project}" in out
    expected = home / "projects" / claude_project_name(str(project))  # Claude Code's: every non-alphanumeric "-"
    assert f"{expected}: no such directory, so no Claude Code session ran in {project}" in out
    assert f"1 session ran elsewhere: {elsewhere} (1)" in out
    assert f"{codex / 'sessions'}: 1 session ran elsewhere: {tmp_path / 'other'} (1)" in out
    assert f"{codex / 'archived_sessions'}: no such directory" in out
    assert "`engram ingest PATH...`" in out

    doc = json.loads(run_engram(project, "ingest", "--json", env=env).stdout)
    places = {p["path"]: p for p in doc["discovery"]["places"]}
    assert places[str(expected)]["problem"].startswith("no such directory")
    assert places[str(codex / "sessions")]["cwds"] == {str(tmp_path / "other"): 1}

    # Found: the summary alone, unless --verbose.
    found_dir = write_project(home, project, "s2", claude_session(project, "s2", "b.py", "y = 2\n")).parent
    found = run_engram(project, "ingest", env=env).stdout
    assert found.startswith("ingest: 1 session,") and "looked for" not in found
    verbose = run_engram(project, "ingest", "--verbose", env=env).stdout
    assert f"{found_dir}: 1 session of this repository" in verbose and "ran elsewhere" in verbose


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory: permissions cannot be tested")
def test_an_unreadable_project_directory_is_named(project: Path, tmp_path: Path) -> None:
    run_engram(project, "init")
    home = tmp_path / "claude"
    folder = write_project(home, project, "s1", claude_session(project, "s1", "a.py", "x = 1\n")).parent
    folder.chmod(0)
    try:
        out = run_engram(project, "ingest", env={"CLAUDE_CONFIG_DIR": str(home)}).stdout
    finally:
        folder.chmod(0o755)
    assert f"{folder}: unreadable (permission denied)" in out
